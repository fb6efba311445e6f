package filestore

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/natsd/natsd/filestore/powerfs"
)

// smallJournal makes segments fill (and be checkpointed and reused) within a test.
func smallJournal(t *testing.T) {
	seg, first, chunk := journalSegSize, journalFirstSeg, journalMaxChunk
	journalSegSize, journalFirstSeg, journalMaxChunk = 32<<10, 16<<10, 4<<10
	t.Cleanup(func() { journalSegSize, journalFirstSeg, journalMaxChunk = seg, first, chunk })
}

// TestJournalPowerLoss runs several stores sharing one journal, each with writers appending
// (some records larger than a journal chunk), cuts the power at a random moment or in the
// middle of a random sync, replays the journal on what the cut left and reopens the stores:
// every record acknowledged before the cut must be there, intact, and nothing reported lost.
// Segments are small, so cuts land during rotations, checkpoints and reuse too.
// It runs with the journal writing directly (powerfs checks their alignment) and through
// the page cache, as on a file system without direct writes.
func TestJournalPowerLoss(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(map[bool]string{true: "direct", false: "page-cache"}[direct], func(t *testing.T) {
			testJournalPowerLoss(t, direct)
		})
	}
}

func testJournalPowerLoss(t *testing.T, direct bool) {
	smallJournal(t)
	growBlocks(t, 2<<10)
	const stores = 6
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	fsys := powerfs.New()
	if !direct {
		fsys.NoDirect()
	}
	acked := make([]map[uint64]plAck, stores)
	for i := range acked {
		acked[i] = map[uint64]plAck{}
	}
	total := 0
	for round := 0; round < 10; round++ {
		j, err := OpenJournal(fsys, "/js", "/journal", t.Logf)
		if err != nil {
			t.Fatalf("round %d: journal: %v", round, err)
		}
		defer func() {
			if j.direct != direct {
				t.Errorf("round %d: journal direct %v, want %v", round, j.direct, direct)
			}
		}()
		ss := make([]*FileStore, stores)
		for i := range ss {
			ss[i], err = Open(Config{Dir: fmt.Sprintf("/js/acc/streams/S%d", i), FS: fsys, BlockSize: 8 << 10,
				Journal: j, Logf: quietLog})
			if err != nil {
				t.Fatalf("round %d: open %d: %v", round, i, err)
			}
			checkSurvived(t, round, ss[i], acked[i])
		}
		// Power is cut in the middle of a random sync (the journal's, a checkpoint's, a new
		// block's or segment's), with the acknowledgements seen up to then.
		var mu sync.Mutex
		var next *powerfs.FS
		var snap []map[uint64]plAck
		cutRng := rand.New(rand.NewSource(rng.Int63()))
		cutAt := int32(1 + rng.Intn(80))
		var nsync atomic.Int32
		cutDone := make(chan struct{})
		doCut := func() {
			mu.Lock()
			defer mu.Unlock()
			if next != nil {
				return
			}
			next = fsys.Cut(cutRng)
			snap = make([]map[uint64]plAck, stores)
			for i := range acked {
				snap[i] = make(map[uint64]plAck, len(acked[i]))
				for k, v := range acked[i] {
					snap[i][k] = v
				}
			}
			close(cutDone)
		}
		fsys.SetOnSync(func() {
			if nsync.Add(1) == cutAt {
				doCut()
			}
		})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range ss {
			plWriters(&wg, stop, s, 3, "jl", round, 13, 700, &mu, acked[i])
		}
		select {
		case <-cutDone:
		case <-time.After(5 * time.Second):
			doCut()
		}
		close(stop)
		wg.Wait()
		fsys.SetOnSync(nil)
		for _, s := range ss {
			s.Stop()
		}
		j.Close()
		acked = snap
		for i := range acked {
			total += len(acked[i])
		}
		fsys = next
	}
	if total < 200 {
		t.Fatalf("only %d acked records over all rounds", total)
	}
}

// TestJournalMarkers: writes journaled before a truncation, or before a stream was deleted
// and created again under the same name, are never replayed over what came after.
func TestJournalMarkers(t *testing.T) {
	smallJournal(t)
	fsys := powerfs.New()
	j, err := OpenJournal(fsys, "/js", "/journal", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	dir := "/js/acc/streams/S"
	open := func() *FileStore {
		s, err := Open(Config{Dir: dir, FS: fsys, Journal: j, Logf: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	for i := 0; i < 50; i++ {
		mustStore(t, s, "old", fmt.Sprintf("old-%d", i))
	}
	if err := s.Truncate(10); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		mustStore(t, s, "new", fmt.Sprintf("new-%d", i))
	}
	// Seqs 11..15 are "new" now; a replay of the first 50 would bring "old" back over them.
	s.Stop()
	// The stream is deleted and made again in the same directory.
	if err := removeTree(fsys, dir); err != nil {
		t.Fatal(err)
	}
	checkRemadeSurvivesCrash(t, fsys, j, dir, "again")
}

// checkRemadeSurvivesCrash makes a store in dir (its earlier one gone, the journal told so)
// and stores three records, then crashes with the journal unsynced to nothing, replays it and
// reopens: the three records, and nothing of the earlier store, must be there.
func checkRemadeSurvivesCrash(t *testing.T, fsys *powerfs.FS, j *Journal, dir, subj string) {
	t.Helper()
	open := func(fsys FS, j *Journal) *FileStore {
		s, err := Open(Config{Dir: dir, FS: fsys, Journal: j, Logf: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(fsys, j)
	for i := 0; i < 3; i++ {
		mustStore(t, s, subj, fmt.Sprintf("%s-%d", subj, i))
	}
	// What the journal holds is all there is: the page cache survives, nothing was synced.
	next := fsys.Crash()
	s.Stop()
	j.Close()
	j, err := OpenJournal(next, "/js", "/journal", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	s = open(next, j)
	defer s.Stop()
	if st := s.State(); st.Msgs != 3 || st.LastSeq != 3 {
		t.Fatalf("store made again, after replay: %+v", st)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		m, err := s.LoadMsg(seq)
		if err != nil || m.Subject != subj || !bytes.Equal(m.Data, []byte(fmt.Sprintf("%s-%d", subj, seq-1))) {
			t.Fatalf("seq %d: %+v %v", seq, m, err)
		}
	}
}

func removeTree(fsys FS, dir string) error {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if sub, err := fsys.ReadDir(p); err == nil {
			_ = sub
			if err := removeTree(fsys, p); err != nil {
				return err
			}
			continue
		}
		if err := fsys.Remove(p); err != nil {
			return err
		}
	}
	return fsys.Remove(dir)
}

// TestJournalDirectMatchesBuffered: on the real file system, a journal writing directly
// (whole sectors, rewriting the partial one) leaves segments that read back exactly as a
// journal writing through the page cache leaves them, entry for entry, after every commit:
// across sector boundaries, with entries larger than a sector, and through segment changes.
func TestJournalDirectMatchesBuffered(t *testing.T) {
	smallJournal(t)
	// Every segment the same size: which free segment a rotation takes depends on when the
	// checkpointer freed it, so with a smaller first segment the two journals' rotation
	// points (and so their active segments' entries) could differ.
	journalFirstSeg = journalSegSize
	root := t.TempDir()
	open := func(name string, direct bool) *Journal {
		j, err := OpenJournal(OSFS{}, root, filepath.Join(root, name), t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		j.direct = direct
		return j
	}
	jd, jb := open("direct", true), open("buffered", false)
	defer jd.Close()
	defer jb.Close()
	blk, err := OSFS{}.OpenFile(filepath.Join(root, "blk"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer blk.Close()
	entries := func(j *Journal) []jentry {
		_, e, ok, err := readSegment(j.act.f)
		if err != nil || !ok {
			t.Fatalf("%s: ok %v err %v", j.act.name, ok, err)
		}
		return e
	}
	rng := rand.New(rand.NewSource(1))
	var off int64
	gen0 := jd.gen
	for i := 0; i < 200; i++ {
		data := make([]byte, []int{1, 7, 100, 300, 4000, 4096, 5000, 9000}[rng.Intn(8)])
		rng.Read(data)
		for _, j := range []*Journal{jd, jb} {
			r := &jreq{key: "acc/streams/S", writes: []jwrite{{f: blk, name: "msgs/1.blk", off: off, data: data}}}
			if err := j.commit(r); err != nil {
				t.Fatalf("commit %d: %v", i, err)
			}
		}
		off += int64(len(data))
		if !jd.direct {
			t.Skip("this file system has no direct writes")
		}
		de, be := entries(jd), entries(jb)
		if len(de) != len(be) || len(de) == 0 {
			t.Fatalf("commit %d: direct segment has %d entries, buffered %d", i, len(de), len(be))
		}
		for k := range de {
			a, b := de[k], be[k]
			if a.kind != b.kind || a.key != b.key || a.name != b.name || a.off != b.off || !bytes.Equal(a.data, b.data) {
				t.Fatalf("commit %d entry %d differs: direct at %d, buffered at %d", i, k, a.off, b.off)
			}
		}
	}
	if jd.gen-gen0 < 3 {
		t.Fatalf("only %d segment changes", jd.gen-gen0)
	}
}
