package powerfs

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func write(t *testing.T, p *FS, name, data string, sync bool) {
	t.Helper()
	f, err := p.OpenFile(name, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(data), 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func read(p *FS, name string) (string, error) {
	f, err := p.OpenFile(name, false)
	if err != nil {
		return "", err
	}
	n, _ := f.Size()
	b := make([]byte, n)
	f.ReadAt(b, 0)
	return string(b), nil
}

// removeAll is js/meta.go's: ReadDir tells directories from files.
func removeAll(p *FS, dir string) error {
	names, err := p.ReadDir(dir)
	if err == nil {
		for _, n := range names {
			q := filepath.Join(dir, n)
			if _, err := p.ReadDir(q); err == nil {
				if err := removeAll(p, q); err != nil {
					return err
				}
				continue
			}
			if err := p.Remove(q); err != nil {
				return err
			}
		}
	}
	return p.Remove(dir)
}

func TestDirectories(t *testing.T) {
	p := New()
	if _, err := p.ReadDir("/js"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadDir of nothing: %v", err)
	}
	if err := p.MkdirAll("/js/acc/streams/S/msgs"); err != nil {
		t.Fatal(err)
	}
	if err := p.MkdirAll("/js/acc/streams/T"); err != nil {
		t.Fatal(err)
	}
	write(t, p, "/js/acc/streams/S/meta.inf", "m", true)
	write(t, p, "/js/acc/streams/S/msgs/1.blk", "b", true)
	for dir, want := range map[string][]string{
		"/js":                {"acc"},
		"/js/acc/streams":    {"S", "T"},
		"/js/acc/streams/S":  {"meta.inf", "msgs"},
		"/js/acc/streams/T":  {},
		"/js/acc/streams/S/": {"meta.inf", "msgs"},
		"/":                  {"js"},
	} {
		got, err := p.ReadDir(dir)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("ReadDir(%s) = %q, %v; want %q", dir, got, err, want)
		}
	}
	if _, err := p.ReadDir("/js/acc/streams/S/meta.inf"); err == nil {
		t.Fatal("ReadDir of a file succeeded")
	}
	if err := p.Remove("/js/acc/streams/S"); err == nil {
		t.Fatal("removed a directory with files in it")
	}
	if err := p.Remove("/js/acc/streams/nope"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Remove of nothing: %v", err)
	}
	if err := removeAll(p, "/js/acc/streams/S"); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.ReadDir("/js/acc/streams"); !reflect.DeepEqual(got, []string{"T"}) {
		t.Fatalf("after removeAll: %q", got)
	}
	if err := p.Remove("/js/acc/streams/T"); err != nil {
		t.Fatalf("Remove of an empty directory: %v", err)
	}
}

func TestCut(t *testing.T) {
	p := New()
	rng := rand.New(rand.NewSource(1))
	write(t, p, "/d/a", "synced", true)
	write(t, p, "/d/b", "never synced", true)
	if err := p.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	write(t, p, "/d/c", "name not synced", true)
	q := p.Cut(rng)
	if s, err := read(q, "/d/a"); err != nil || s != "synced" {
		t.Fatalf("a after the cut: %q %v", s, err)
	}
	if _, err := read(q, "/d/c"); err == nil {
		t.Fatal("a name never synced survived")
	}
	// The copy is independent: the old file system writing on reaches nothing in it.
	write(t, p, "/d/a", "SYNCED", true)
	write(t, p, "/d/e", "later", true)
	p.SyncDir("/d")
	if s, _ := read(q, "/d/a"); s != "synced" {
		t.Fatalf("a write after the cut reached the copy: %q", s)
	}
	if _, err := read(q, "/d/e"); err == nil {
		t.Fatal("a file made after the cut reached the copy")
	}
}

func TestCutClean(t *testing.T) {
	p := New()
	write(t, p, "/d/a", "synced", true)
	p.SyncDir("/d")
	f, _ := p.OpenFile("/d/a", false)
	f.WriteAt([]byte(" and more, not synced"), 6)
	for i := 0; i < 20; i++ {
		if s, _ := read(p.Cut(nil), "/d/a"); s != "synced" {
			t.Fatalf("a clean cut kept unsynced data: %q", s)
		}
	}
}

func TestCrash(t *testing.T) {
	p := New()
	write(t, p, "/d/a", "written, never synced", false)
	q := p.Crash()
	write(t, p, "/d/a", "WRITTEN", false)
	if s, err := read(q, "/d/a"); err != nil || s != "written, never synced" {
		t.Fatalf("after a crash: %q %v", s, err)
	}
	if s, _ := read(q.Cut(nil), "/d/a"); s != "written, never synced" {
		t.Fatalf("a crash's state is not all durable: %q", s)
	}
}

// TestRemovedDirectory: a removed directory's old entries come back after a cut until its
// parent is synced, and never after; an entry made under the same name since stays.
func TestRemovedDirectory(t *testing.T) {
	p := New()
	if err := p.MkdirAll("/d/sub"); err != nil {
		t.Fatal(err)
	}
	write(t, p, "/d/sub/old", "old", true)
	if err := p.SyncDir("/d/sub"); err != nil {
		t.Fatal(err)
	}
	if err := removeAll(p, "/d/sub"); err != nil { // unlinks without syncing /d/sub
		t.Fatal(err)
	}
	if got, err := read(p.Cut(nil), "/d/sub/old"); err != nil || got != "old" {
		t.Fatalf("before the parent's sync a cut lost the entry: %q %v", got, err)
	}
	// Made again under the same name, with an entry of its own made durable.
	if err := p.MkdirAll("/d/sub"); err != nil {
		t.Fatal(err)
	}
	write(t, p, "/d/sub/new", "new", true)
	if err := p.SyncDir("/d/sub"); err != nil {
		t.Fatal(err)
	}
	if err := p.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	c := p.Cut(nil)
	if got, err := c.ReadDir("/d/sub"); err != nil || !reflect.DeepEqual(got, []string{"new"}) {
		t.Fatalf("after the parent's sync: %q %v", got, err)
	}
	// Removed for good.
	if err := removeAll(p, "/d/sub"); err != nil {
		t.Fatal(err)
	}
	if err := p.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Cut(nil).ReadDir("/d"); err != nil || len(got) != 0 {
		t.Fatalf("a removed directory came back: %q %v", got, err)
	}
}
