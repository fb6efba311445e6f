// Package powerfs is a test double of the OS page cache, for power-loss tests
// of the file store and of whatever is written through it (JetStream): file
// contents become durable only at File.Sync (or Datasync) and names
// (creations, renames, removals) only at SyncDir of their directory. Cut
// returns the file system a power failure would leave behind, as an
// independent copy: whatever still writes into the original after a cut
// cannot reach it.
//
// A sync is not instantaneous: it snapshots what has been written when it
// starts, takes a while (up to 100µs, at random), and only then makes that
// snapshot durable. Writes that complete while it runs are not covered by it,
// which is what a real fsync guarantees and no more. The hook set with
// SetOnSync runs in the middle of every sync (after the snapshot, before it
// is durable); tests cut power from there to hit the moment a batch is in
// flight.
//
// Directories are modelled only as far as listing and removing need: a
// directory exists once MkdirAll made it or while some name lies under it,
// ReadDir lists a directory's direct children (files and subdirectories),
// and Remove removes a file, or a directory with nothing under it. Making
// directories is durable at once (the double does not model the parent
// directory's sync that a real file system needs for it). Removing one is
// durable at the next SyncDir of its parent, which also takes away the
// entries under it that were durable and removed without a sync of their
// own: once a journaling file system has made a directory's removal
// durable, nothing can bring back what it held. Renaming directories is
// not supported.
package powerfs

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/natsd/natsd/filestore/vfs"
)

// FS is the power-loss double of a file system. Its zero value is not usable:
// make one with New.
type FS struct {
	mu      sync.Mutex
	names   map[string]*inode
	durable map[string]*inode
	dirs    map[string]bool    // made by MkdirAll (and their parents), not removed
	rmdirs  map[string][]rmdir // removed directories, by parent, until the parent's SyncDir

	ngen     uint64            // bumped by every name change
	dirGen   map[string]uint64 // ngen of the newest SyncDir applied, per dir
	syncing  int               // syncs in progress
	overlaps int               // writes that completed while a sync was in progress
	onSync   func()
	delayRng *rand.Rand
	noDirect atomic.Bool
}

var _ vfs.FS = (*FS)(nil)

// rmdir is a removed directory's durable entries, which its parent's next SyncDir drops.
type rmdir struct {
	gen  uint64
	gone map[string]*inode
}

type inode struct {
	data      []byte
	synced    []byte
	gen       uint64 // bumped by every write and truncate
	syncedGen uint64
}

type file struct {
	fs *FS
	in *inode
}

// NoDirect makes WriteAtSync fail with vfs.ErrNoDirect, as on a file system without
// direct writes, so that a test can take its caller's other path.
func (p *FS) NoDirect() { p.noDirect.Store(true) }

// New returns an empty file system.
func New() *FS {
	return &FS{names: map[string]*inode{}, durable: map[string]*inode{}, dirs: map[string]bool{},
		rmdirs: map[string][]rmdir{}, dirGen: map[string]uint64{}, delayRng: rand.New(rand.NewSource(time.Now().UnixNano()))}
}

// syncDelay models how long a sync takes; called with p.mu held.
func (p *FS) syncDelay() time.Duration {
	return time.Duration(p.delayRng.Intn(100)) * time.Microsecond
}

// beginSync registers a sync in progress and returns its hook; p.mu held.
func (p *FS) beginSync() (time.Duration, func()) {
	p.syncing++
	return p.syncDelay(), p.onSync
}

func (p *FS) midSync(d time.Duration, hook func()) {
	if d > 0 {
		time.Sleep(d)
	}
	if hook != nil {
		hook()
	}
}

// SetOnSync sets (nil: clears) the hook run in the middle of every sync,
// file or directory, on the goroutine that syncs, with no lock of the file
// system held: it may call Cut.
func (p *FS) SetOnSync(f func()) {
	p.mu.Lock()
	p.onSync = f
	p.mu.Unlock()
}

// Overlaps is how many writes completed while a sync was in progress: how
// often something was in flight that a cut could catch.
func (p *FS) Overlaps() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.overlaps
}

// CutAtSync arranges for power to be cut in the middle of the k-th sync
// from now. The function it returns stops that and hands over the file
// system the cut left, cutting power there and then if no k-th sync came
// (during reports which).
func (p *FS) CutAtSync(rng *rand.Rand, k int) func() (fs *FS, during bool) {
	var mu sync.Mutex
	var cut *FS
	var n atomic.Int32
	p.SetOnSync(func() {
		if n.Add(1) == int32(k) {
			mu.Lock()
			cut = p.Cut(rng)
			mu.Unlock()
		}
	})
	return func() (*FS, bool) {
		p.SetOnSync(nil)
		mu.Lock()
		defer mu.Unlock()
		if cut != nil {
			return cut, true
		}
		return p.Cut(rng), false
	}
}

// MkdirAll records dir and its parents as directories.
func (p *FS) MkdirAll(dir string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if p.names[d] != nil {
			return &os.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
		}
		p.dirs[d] = true
		if pd := filepath.Dir(d); pd == d {
			return nil
		}
	}
}

func (p *FS) OpenFile(name string, create bool) (vfs.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.names[name]
	if in == nil {
		if !create {
			return nil, os.ErrNotExist
		}
		in = &inode{}
		p.names[name] = in
		p.ngen++
	}
	return &file{p, in}, nil
}

// isDirLocked reports whether dir exists as a directory: made by MkdirAll, or
// with some name under it.
func (p *FS) isDirLocked(dir string) bool {
	if p.dirs[dir] {
		return true
	}
	under := func(n string) bool {
		switch dir {
		case ".":
			return !filepath.IsAbs(n) && n != "."
		case string(filepath.Separator):
			return n != dir && filepath.IsAbs(n)
		}
		return strings.HasPrefix(n, dir+string(filepath.Separator))
	}
	for n := range p.names {
		if under(n) {
			return true
		}
	}
	for d := range p.dirs {
		if under(d) {
			return true
		}
	}
	return false
}

// ReadDir lists dir's direct children, files and directories, sorted. It
// fails for a file, and for a directory that does not exist.
func (p *FS) ReadDir(dir string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dir = filepath.Clean(dir)
	if p.names[dir] != nil {
		return nil, &os.PathError{Op: "readdirent", Path: dir, Err: syscall.ENOTDIR}
	}
	if !p.isDirLocked(dir) {
		return nil, &os.PathError{Op: "open", Path: dir, Err: os.ErrNotExist}
	}
	seen := map[string]bool{}
	add := func(n string) {
		// The component of n right under dir, if n lies under dir.
		for n != dir {
			d := filepath.Dir(n)
			if d == dir {
				seen[filepath.Base(n)] = true
				return
			}
			if d == n || len(d) < len(dir) {
				return
			}
			n = d
		}
	}
	for n := range p.names {
		add(n)
	}
	for d := range p.dirs {
		add(d)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// Remove removes a file (durably only at the next SyncDir of its directory),
// or a directory with nothing under it.
func (p *FS) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.names[name] == nil {
		d := filepath.Clean(name)
		if !p.isDirLocked(d) {
			return os.ErrNotExist
		}
		delete(p.dirs, d)
		if p.isDirLocked(d) {
			p.dirs[d] = true
			return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
		}
		gone := map[string]*inode{}
		for n, in := range p.durable {
			if strings.HasPrefix(n, d+string(filepath.Separator)) {
				gone[n] = in
			}
		}
		if len(gone) > 0 {
			parent := filepath.Dir(d)
			p.rmdirs[parent] = append(p.rmdirs[parent], rmdir{gen: p.ngen, gone: gone})
		}
		p.ngen++
		return nil
	}
	delete(p.names, name)
	p.ngen++
	return nil
}

func (p *FS) Rename(o, n string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.names[o]
	if in == nil {
		return os.ErrNotExist
	}
	delete(p.names, o)
	p.names[n] = in
	p.ngen++
	return nil
}

func (p *FS) SyncDir(dir string) error {
	p.mu.Lock()
	gen := p.ngen
	snap := map[string]*inode{}
	for n, in := range p.names {
		if filepath.Dir(n) == dir {
			snap[n] = in
		}
	}
	d, hook := p.beginSync()
	p.mu.Unlock()
	p.midSync(d, hook)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncing--
	if gen < p.dirGen[dir] {
		return nil // a sync that started later has already finished
	}
	p.dirGen[dir] = gen
	for n := range p.durable {
		if filepath.Dir(n) == dir && snap[n] == nil {
			delete(p.durable, n)
		}
	}
	for n, in := range snap {
		p.durable[n] = in
	}
	// Subdirectories removed before this sync began: their old entries go with them (an
	// entry made there since is another file, and stays).
	var later []rmdir
	for _, r := range p.rmdirs[dir] {
		if r.gen >= gen {
			later = append(later, r)
			continue
		}
		for n, in := range r.gone {
			if p.durable[n] == in {
				delete(p.durable, n)
			}
		}
	}
	if len(later) > 0 {
		p.rmdirs[dir] = later
	} else {
		delete(p.rmdirs, dir)
	}
	return nil
}

// Cut simulates a power failure: it returns a new, independent file system
// holding the durable names with their synced contents, plus, at random
// (drawn from rng), a torn prefix of what was written but not synced. With a
// nil rng nothing unsynced survives: the cut is deterministic. p goes on
// working, but nothing written into it after the cut reaches the copy.
func (p *FS) Cut(rng *rand.Rand) *FS {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := New()
	q.noDirect.Store(p.noDirect.Load())
	for d := range p.dirs {
		q.dirs[d] = true
	}
	for n, in := range p.durable {
		d := append([]byte(nil), in.synced...)
		if rng != nil && len(in.data) >= len(d) && rng.Intn(2) == 0 {
			// Part of what was written since the last sync reached the disk:
			// a random prefix of the changed region, starting at the first
			// byte that differs (an append, or an overwrite in place of a
			// preallocated file).
			i := 0
			for i < len(d) && d[i] == in.data[i] {
				i++
			}
			extra := in.data[i:]
			k := 0
			if len(extra) > 0 {
				k = rng.Intn(len(extra) + 1)
			}
			if i+k > len(d) {
				d = append(d, make([]byte, i+k-len(d))...)
			}
			copy(d[i:], extra[:k])
			if k > 0 && rng.Intn(2) == 0 {
				// Sectors that reached the disk out of order: the end of the
				// prefix still holds the old contents (zeros past the old end).
				z := rng.Intn(k) + 1
				for j := i + k - z; j < i+k; j++ {
					if j < len(in.synced) {
						d[j] = in.synced[j]
					} else {
						d[j] = 0
					}
				}
			}
		}
		nin := &inode{data: d, synced: append([]byte(nil), d...)}
		q.names[n] = nin
		q.durable[n] = nin
	}
	return q
}

// Crash simulates a process crash (SIGKILL) rather than a power failure: the
// kernel keeps its page cache, so every name and every byte written survives,
// synced or not. It returns that state as a new, independent file system,
// all of it durable.
func (p *FS) Crash() *FS {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := New()
	q.noDirect.Store(p.noDirect.Load())
	for d := range p.dirs {
		q.dirs[d] = true
	}
	for n, in := range p.names {
		d := append([]byte(nil), in.data...)
		nin := &inode{data: d, synced: append([]byte(nil), d...)}
		q.names[n] = nin
		q.durable[n] = nin
	}
	return q
}

func (f *file) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.in.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.in.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if end := off + int64(len(b)); end > int64(len(f.in.data)) {
		f.in.data = append(f.in.data, make([]byte, end-int64(len(f.in.data)))...)
	}
	copy(f.in.data[off:], b)
	f.in.gen++
	if f.fs.syncing > 0 {
		f.fs.overlaps++
	}
	return len(b), nil
}

func (f *file) Sync() error {
	p := f.fs
	p.mu.Lock()
	gen := f.in.gen
	snap := append([]byte(nil), f.in.data...)
	d, hook := p.beginSync()
	p.mu.Unlock()
	p.midSync(d, hook)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncing--
	if gen >= f.in.syncedGen {
		f.in.synced, f.in.syncedGen = snap, gen
	}
	return nil
}

// Datasync is modelled exactly as Sync: the double has no metadata apart
// from names, which only SyncDir makes durable.
func (f *file) Datasync() error { return f.Sync() }

// WriteAtSync is a direct synchronous write: a write and a sync, with the sync's
// window in the middle for a cut, as a real one can be cut before the device has
// it. It checks the alignment a real direct write needs, so that a caller's
// mistake fails here and not only on a real disk.
func (f *file) WriteAtSync(b []byte, off int64) error {
	if f.fs.noDirect.Load() {
		return vfs.ErrNoDirect
	}
	if len(b)%vfs.SectorSize != 0 || off%vfs.SectorSize != 0 || !vfs.Aligned(b) {
		return fmt.Errorf("powerfs: direct write of %d bytes at %d not aligned to %d", len(b), off, vfs.SectorSize)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		return err
	}
	return f.Sync()
}

func (f *file) Truncate(n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if n < int64(len(f.in.data)) {
		f.in.data = f.in.data[:n]
	} else {
		f.in.data = append(f.in.data, make([]byte, n-int64(len(f.in.data)))...)
	}
	f.in.gen++
	return nil
}

func (f *file) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.in.data)), nil
}

func (f *file) Close() error { return nil }
