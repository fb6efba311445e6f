package filestore

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// plFS is a test double of the OS page cache: file contents become durable
// only at File.Sync and names (creations, renames, removals) only at SyncDir.
// cut returns the file system a power failure would leave behind.
//
// A sync is not instantaneous: it snapshots what has been written when it
// starts, takes a while (syncDelay), and only then makes that snapshot
// durable. Writes that complete while it runs are not covered by it, which is
// what a real fsync guarantees and no more. onSync, if set, runs in the
// middle of every sync (after the snapshot, before it is durable); tests cut
// power from there to hit the moment a batch is in flight.
type plFS struct {
	mu      sync.Mutex
	names   map[string]*plInode
	durable map[string]*plInode

	ngen     uint64            // bumped by every name change
	dirGen   map[string]uint64 // ngen of the newest SyncDir applied, per dir
	syncing  int               // syncs in progress
	overlaps int               // writes that completed while a sync was in progress
	onSync   func()
	delayRng *rand.Rand
}

type plInode struct {
	data      []byte
	synced    []byte
	gen       uint64 // bumped by every write and truncate
	syncedGen uint64
}

type plFile struct {
	fs *plFS
	in *plInode
}

// syncDelay models how long a sync takes; called with p.mu held.
func (p *plFS) syncDelay() time.Duration {
	return time.Duration(p.delayRng.Intn(100)) * time.Microsecond
}

// beginSync registers a sync in progress and returns its hook; p.mu held.
func (p *plFS) beginSync() (time.Duration, func()) {
	p.syncing++
	return p.syncDelay(), p.onSync
}

func (p *plFS) midSync(d time.Duration, hook func()) {
	if d > 0 {
		time.Sleep(d)
	}
	if hook != nil {
		hook()
	}
}

func (p *plFS) setOnSync(f func()) {
	p.mu.Lock()
	p.onSync = f
	p.mu.Unlock()
}

// cutAtSync arranges for power to be cut in the middle of the k-th sync
// from now. The function it returns stops that and hands over the file
// system the cut left, cutting power there and then if no k-th sync came
// (during reports which).
func (p *plFS) cutAtSync(rng *rand.Rand, k int) func() (fs *plFS, during bool) {
	var mu sync.Mutex
	var cut *plFS
	var n atomic.Int32
	p.setOnSync(func() {
		if n.Add(1) == int32(k) {
			mu.Lock()
			cut = p.cut(rng)
			mu.Unlock()
		}
	})
	return func() (*plFS, bool) {
		p.setOnSync(nil)
		mu.Lock()
		defer mu.Unlock()
		if cut != nil {
			return cut, true
		}
		return p.cut(rng), false
	}
}

func newPLFS() *plFS {
	return &plFS{names: map[string]*plInode{}, durable: map[string]*plInode{}, dirGen: map[string]uint64{},
		delayRng: rand.New(rand.NewSource(time.Now().UnixNano()))}
}

func (p *plFS) MkdirAll(string) error { return nil }

func (p *plFS) OpenFile(name string, create bool) (File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.names[name]
	if in == nil {
		if !create {
			return nil, os.ErrNotExist
		}
		in = &plInode{}
		p.names[name] = in
		p.ngen++
	}
	return &plFile{p, in}, nil
}

func (p *plFS) ReadDir(dir string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n := range p.names {
		if filepath.Dir(n) == dir {
			out = append(out, filepath.Base(n))
		}
	}
	sort.Strings(out)
	return out, nil
}

func (p *plFS) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.names[name] == nil {
		return os.ErrNotExist
	}
	delete(p.names, name)
	p.ngen++
	return nil
}

func (p *plFS) Rename(o, n string) error {
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

func (p *plFS) SyncDir(dir string) error {
	p.mu.Lock()
	gen := p.ngen
	snap := map[string]*plInode{}
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
	return nil
}

// cut simulates a power failure: durable names with their synced contents,
// plus, at random, a torn prefix of what was written but not synced.
func (p *plFS) cut(rng *rand.Rand) *plFS {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := newPLFS()
	for n, in := range p.durable {
		d := append([]byte(nil), in.synced...)
		if len(in.data) >= len(d) && rng.Intn(2) == 0 {
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
		nin := &plInode{data: d, synced: append([]byte(nil), d...)}
		q.names[n] = nin
		q.durable[n] = nin
	}
	return q
}

func (f *plFile) ReadAt(b []byte, off int64) (int, error) {
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

func (f *plFile) WriteAt(b []byte, off int64) (int, error) {
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

func (f *plFile) Sync() error {
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
func (f *plFile) Datasync() error { return f.Sync() }

func (f *plFile) Truncate(n int64) error {
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

func (f *plFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.in.data)), nil
}

func (f *plFile) Close() error { return nil }

type plAck struct {
	subj string
	data []byte
}

// checkSurvived fails unless every record in want loads back identical and the store
// reports nothing lost.
func checkSurvived(t *testing.T, round int, s *FileStore, want map[uint64]plAck) {
	t.Helper()
	for seq, a := range want {
		m, err := s.LoadMsg(seq)
		if err != nil || m.Subject != a.subj || !bytes.Equal(m.Data, a.data) {
			t.Fatalf("round %d: seq %d, acknowledged or read before the power cut, is lost: %v", round, seq, err)
		}
	}
	if l := s.Lost(); l.Msgs != 0 || l.CorruptSpans != 0 {
		t.Fatalf("round %d: lost %+v", round, l)
	}
}

// plWriters starts n goroutines appending records of varied lengths (subject
// prefix.w) until stop is closed or the store fails, recording each acknowledged
// one in acked under mu.
func plWriters(wg *sync.WaitGroup, stop <-chan struct{}, s *FileStore, n int, prefix string, round, mult, mod int,
	mu *sync.Mutex, acked map[uint64]plAck) {
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				subj := fmt.Sprintf("%s.%d", prefix, w)
				data := []byte(fmt.Sprintf("%d-%d-%d-%0*d", round, w, k, (k*mult+w)%mod+1, 0))
				seq, _, err := s.StoreMsg(subj, nil, data)
				if err != nil {
					return
				}
				mu.Lock()
				acked[seq] = plAck{subj, data}
				mu.Unlock()
			}
		}(w)
	}
}

// growBlocks makes a store's blocks start at n bytes and double from there
// (see firstBlockSize) for the rest of the test.
func growBlocks(t *testing.T, n int64) {
	old := firstBlockSize
	firstBlockSize = n
	t.Cleanup(func() { firstBlockSize = old })
}

func TestPowerLoss(t *testing.T) {
	for _, variant := range []string{"plain", "s2-chacha"} {
		t.Run(variant, func(t *testing.T) {
			if variant == "plain" {
				growBlocks(t, 1<<10) // blocks of 1, 2, 4 and then 8 KB
			}
			rng := rand.New(rand.NewSource(time.Now().UnixNano()))
			fsys := newPLFS()
			cfg := Config{Dir: "/store", FS: fsys, BlockSize: 8 << 10, Logf: quietLog}
			if variant != "plain" {
				cfg.Compress, cfg.EncryptionKey = true, []byte("k")
			}
			acked := map[uint64]plAck{}
			for round := 0; round < 12; round++ {
				cfg.FS = fsys
				s, err := Open(cfg)
				if err != nil {
					t.Fatalf("round %d: open: %v", round, err)
				}
				checkSurvived(t, round, s, acked)
				var mu sync.Mutex
				stop := make(chan struct{})
				var wg sync.WaitGroup
				plWriters(&wg, stop, s, 16, "pl", round, 7, 200, &mu, acked)
				time.Sleep(time.Duration(5+rng.Intn(25)) * time.Millisecond)
				// Everything acknowledged before this point must survive.
				mu.Lock()
				next := fsys.cut(rng)
				snapshot := make(map[uint64]plAck, len(acked))
				for k, v := range acked {
					snapshot[k] = v
				}
				mu.Unlock()
				close(stop)
				wg.Wait()
				s.Stop()
				acked, fsys = snapshot, next
			}
			if len(acked) < 100 {
				t.Fatalf("only %d acked records", len(acked))
			}
		})
	}
}

// TestPowerLossPeriodic shows the documented trade-off: with sync_interval
// only what was synced survives, but what survives is always a prefix of what
// was written, intact, and the store opens without reporting damage. Power is
// cut during a sync chosen at random, which with periodic syncing is mostly
// the naming of a new block (the old blocks are synced first, then the new
// file is renamed into place) or a spare's zero-fill, while the writer goes
// on appending to the new block under its temporary name. Naming a block
// before the blocks ahead of it are synced makes this fail.
func TestPowerLossPeriodic(t *testing.T) {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	fsys := newPLFS()
	cfg := Config{Dir: "/store", BlockSize: 4 << 10, SyncInterval: time.Hour, Logf: quietLog}
	var written [][]byte // written[i] is seq i+1
	survived := 0
	for round := 0; round < 16; round++ {
		cfg.FS = fsys
		s, err := Open(cfg)
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		st := s.State()
		if l := s.Lost(); l.Msgs != 0 || l.CorruptSpans != 0 {
			t.Fatalf("round %d: lost %+v", round, l)
		}
		if st.LastSeq > uint64(len(written)) || st.Msgs != st.LastSeq {
			t.Fatalf("round %d: state %+v after writing %d", round, st, len(written))
		}
		for seq := uint64(1); seq <= st.LastSeq; seq++ {
			m, err := s.LoadMsg(seq)
			if err != nil || !bytes.Equal(m.Data, written[seq-1]) {
				t.Fatalf("round %d: seq %d of a surviving prefix of %d: %v", round, seq, st.LastSeq, err)
			}
		}
		survived += int(st.LastSeq)
		written = written[:st.LastSeq]

		cutNow := fsys.cutAtSync(rand.New(rand.NewSource(rng.Int63())), 1+rng.Intn(16))
		for i, n := 0, 300+rng.Intn(300); i < n; i++ {
			data := []byte(fmt.Sprintf("%d-%d-%0*d", round, i, rng.Intn(120), 0))
			seq, _, err := s.StoreMsg("pp", nil, data)
			if err != nil {
				t.Fatalf("round %d: store: %v", round, err)
			}
			written = append(written, data)
			if seq != uint64(len(written)) {
				t.Fatalf("round %d: seq %d, want %d", round, seq, len(written))
			}
		}
		s.Stop()
		fsys, _ = cutNow() // if no sync was cut, after a clean stop: everything survives
	}
	if survived == 0 {
		t.Fatal("nothing ever survived a cut: the test checks nothing")
	}
}

// TestPowerLossInFlight cuts power in the middle of an fsync (or a directory
// sync) chosen at random, i.e. while the batch that fsync covers is not yet
// acknowledged and the writer is writing the next ones behind it. Every
// record acknowledged, and every record a reader could load, before the cut
// must survive it. Acknowledging a batch before the fsync that covers it has
// returned (or covering it with an fsync that started before its write
// completed) makes this fail.
func TestPowerLossInFlight(t *testing.T) {
	for _, variant := range []string{"plain", "s2-chacha"} {
		t.Run(variant, func(t *testing.T) {
			if variant != "plain" {
				growBlocks(t, 1<<10) // blocks of 1, 2 and then 4 KB
			}
			rng := rand.New(rand.NewSource(time.Now().UnixNano()))
			fsys := newPLFS()
			cfg := Config{Dir: "/store", FS: fsys, BlockSize: 4 << 10, Logf: quietLog}
			if variant != "plain" {
				cfg.Compress, cfg.EncryptionKey = true, []byte("k")
			}
			must := map[uint64]plAck{} // acknowledged or seen by a reader before a cut
			overlaps, visible := 0, 0
			for round := 0; round < 12; round++ {
				cfg.FS = fsys
				s, err := Open(cfg)
				if err != nil {
					t.Fatalf("round %d: open: %v", round, err)
				}
				checkSurvived(t, round, s, must)

				var mu sync.Mutex // guards acked and the cut, so a cut sees a consistent ack set
				acked := map[uint64]plAck{}
				var next *plFS
				var snapshot map[uint64]plAck
				cutRng := rand.New(rand.NewSource(rng.Int63()))
				cutAt := int32(1 + rng.Intn(60))
				var nsync atomic.Int32
				cutDone := make(chan struct{})
				doCut := func() {
					mu.Lock()
					defer mu.Unlock()
					if next != nil {
						return
					}
					next = fsys.cut(cutRng)
					snapshot = make(map[uint64]plAck, len(acked))
					for k, v := range acked {
						snapshot[k] = v
					}
					close(cutDone)
				}
				fsys.setOnSync(func() {
					if nsync.Add(1) == cutAt {
						doCut()
					}
				})

				stop := make(chan struct{})
				var wg sync.WaitGroup
				plWriters(&wg, stop, s, 48, "if", round, 13, 150, &mu, acked)
				// A reader: whatever it can load must already be durable.
				wg.Add(1)
				go func() {
					defer wg.Done()
					seq := s.FastState().LastSeq + 1
					for {
						select {
						case <-stop:
							return
						default:
						}
						m, err := s.LoadMsg(seq)
						if err == ErrEOF {
							runtime.Gosched()
							continue
						}
						if err == nil {
							mu.Lock()
							if _, ok := acked[seq]; !ok {
								acked[seq] = plAck{m.Subject, m.Data}
								visible++
							}
							mu.Unlock()
						}
						seq++
					}
				}()
				select {
				case <-cutDone:
				case <-time.After(5 * time.Second):
					doCut() // too few syncs: cut from here instead
				}
				close(stop)
				wg.Wait()
				s.Stop()
				fsys.mu.Lock()
				overlaps += fsys.overlaps
				fsys.mu.Unlock()
				for k, v := range snapshot {
					must[k] = v
				}
				fsys = next
			}
			if len(must) < 200 {
				t.Fatalf("only %d acknowledged records", len(must))
			}
			if overlaps == 0 {
				t.Fatalf("no write ever overlapped a sync: nothing was in flight when power was cut")
			}
			t.Logf("%d records checked, %d writes overlapped a sync, %d seen by the reader first", len(must), overlaps, visible)
		})
	}
}

// TestPowerLossTruncate cuts power at a random sync while a store truncates
// (plain blocks, and S2-sealed ones, which are sealed again when cut), after
// random removals whose markers sit in the blocks that truncation deletes.
// The reopened store must hold every message up to the truncation point
// that was there before, resurrect none that was removed, hold after it
// only an unbroken run of what was there (the truncation stopped part way,
// or never happened), and report no damage; once Truncate has returned,
// nothing after the point may be left, and the next message takes the
// sequence after it.
func TestPowerLossTruncate(t *testing.T) {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	rounds := 20
	if n, err := strconv.Atoi(os.Getenv("FILESTORE_TRUNC_ROUNDS")); err == nil {
		rounds = n // a longer soak
	}
	for round := 0; round < rounds; round++ {
		fsys := newPLFS()
		cfg := Config{Dir: "/store", FS: fsys, BlockSize: 2 << 10, Compress: round%2 == 1, Logf: quietLog}
		s, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		payload := truncPayload
		const n = 300
		live := map[uint64]bool{}
		for seq := uint64(1); seq <= n; seq++ {
			if got, _, err := s.StoreMsg(fmt.Sprintf("s.%d", seq%7), nil, payload(seq)); err != nil || got != seq {
				t.Fatalf("round %d: store %d: %d, %v", round, seq, got, err)
			}
			live[seq] = true
		}
		for i := 0; i < 40; i++ {
			seq := uint64(1 + rng.Intn(n))
			if _, err := s.RemoveMsg(seq); err != nil {
				t.Fatal(err)
			}
			delete(live, seq)
		}
		if round%4 == 0 {
			s.Compact(uint64(1 + rng.Intn(n/4))) // a floor for truncation to keep
			for seq := range live {
				if m, err := s.LoadMsg(seq); err != nil || m == nil {
					delete(live, seq)
				}
			}
		}
		time.Sleep(time.Millisecond) // let the finisher seal some rolled blocks
		at := uint64(rng.Intn(n))
		if rng.Intn(3) > 0 {
			at = n - uint64(rng.Intn(40)) // usually a short tail
		}

		cutAt := 1 + rng.Intn(12)
		cutNow := fsys.cutAtSync(rand.New(rand.NewSource(rng.Int63())), cutAt)
		err = s.Truncate(at)
		cut, during := cutNow()
		acked := !during && err == nil
		if err != nil {
			t.Fatalf("round %d: truncate %d: %v", round, at, err)
		}
		s.Stop()

		cfg.FS = cut
		r, err := Open(cfg)
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		checkTruncated(t, fmt.Sprintf("round %d (truncate %d, cut at sync %d, acked %v)", round, at, cutAt, acked),
			r, n, at, live, acked)
		st := r.State()
		next, _, err := r.StoreMsg("s.next", nil, []byte("next"))
		if err != nil || next != st.LastSeq+1 || (acked && next != at+1) {
			t.Fatalf("round %d: next message took %d (%v); last was %d, truncated to %d", round, next, err, st.LastSeq, at)
		}
		r.Stop()
	}
}

// truncPayload is message seq's data in the truncation tests.
func truncPayload(seq uint64) []byte { return fmt.Appendf(nil, "m%d-%0*d", seq, int(seq%50), 0) }

// checkTruncated checks a store reopened after a Truncate(at) that may have
// been cut short, over a store of n messages of which live were there
// before: no damage, every live message up to at whole, none removed back,
// past at only an unbroken run of what was there, and, if Truncate had
// returned (done), nothing past at and a last sequence of at.
func checkTruncated(t *testing.T, what string, r *FileStore, n, at uint64, live map[uint64]bool, done bool) {
	t.Helper()
	if l := r.Lost(); l.Msgs != 0 || l.CorruptSpans != 0 {
		t.Fatalf("%s: lost %+v", what, l)
	}
	broken := false // past at: once one message is missing, none may follow
	for seq := uint64(1); seq <= n; seq++ {
		m, err := r.LoadMsg(seq)
		switch {
		case err == nil && (!live[seq] || !bytes.Equal(m.Data, truncPayload(seq))):
			t.Fatalf("%s: seq %d served, but it was removed or differs", what, seq)
		case seq <= at && live[seq] && err != nil:
			t.Fatalf("%s: seq %d is lost: %v", what, seq, err)
		case seq > at && live[seq] && err != nil:
			broken = true
		case seq > at && err == nil && (broken || done):
			t.Fatalf("%s: seq %d survived past a truncated one", what, seq)
		}
	}
	if st := r.State(); done && st.LastSeq != at {
		t.Fatalf("%s: reopened with last %d", what, st.LastSeq)
	}
}
