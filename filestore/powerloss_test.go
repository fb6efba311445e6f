package filestore

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/natsd/natsd/filestore/powerfs"
)

// The power-loss double of the page cache is filestore/powerfs (file contents
// durable only at File.Sync, names only at SyncDir; Cut returns what a power
// failure leaves).

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
			fsys := powerfs.New()
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
				next := fsys.Cut(rng)
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
	fsys := powerfs.New()
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

		cutNow := fsys.CutAtSync(rand.New(rand.NewSource(rng.Int63())), 1+rng.Intn(16))
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
			fsys := powerfs.New()
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
				var next *powerfs.FS
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
					next = fsys.Cut(cutRng)
					snapshot = make(map[uint64]plAck, len(acked))
					for k, v := range acked {
						snapshot[k] = v
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
				overlaps += fsys.Overlaps()
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
		fsys := powerfs.New()
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
		cutNow := fsys.CutAtSync(rand.New(rand.NewSource(rng.Int63())), cutAt)
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

// TestWaitDurable: a message the state already counts is not served until its commit is
// synced; WaitDurable is how a reader that saw it in the state waits for it, and it
// returns at once past the last message and once the store is stopped.
func TestWaitDurable(t *testing.T) {
	fsys := powerfs.New()
	s, err := Open(Config{Dir: "/store", FS: fsys, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StoreMsg("a", nil, []byte("one")); err != nil {
		t.Fatal(err)
	}
	hold, syncing := make(chan struct{}), make(chan struct{}, 1)
	fsys.SetOnSync(func() {
		select {
		case syncing <- struct{}{}:
		default:
		}
		<-hold
	})
	acked := make(chan uint64, 1)
	s.StoreAsync("a", nil, []byte("two"), func(seq uint64, _ int64, err error) {
		if err != nil {
			t.Error(err)
		}
		acked <- seq
	})
	<-syncing
	if st := s.FastState(); st.Msgs != 2 || st.LastSeq != 2 {
		t.Fatalf("state while syncing: %+v", st)
	}
	if _, err := s.LoadMsg(2); err == nil {
		t.Fatal("seq 2 was served before its commit was synced")
	}
	s.WaitDurable(1) // durable already
	s.WaitDurable(9) // never stored
	waited := make(chan struct{})
	go func() {
		s.WaitDurable(2)
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("WaitDurable(2) returned while its commit was syncing")
	case <-time.After(50 * time.Millisecond):
	}
	fsys.SetOnSync(nil)
	close(hold)
	<-waited
	if m, err := s.LoadMsg(2); err != nil || string(m.Data) != "two" {
		t.Fatalf("seq 2 after WaitDurable: %v %v", m, err)
	}
	if seq := <-acked; seq != 2 {
		t.Fatalf("acked seq %d", seq)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s.WaitDurable(3) // a stopped store: returns
}

// TestStopForRemoval: a store stopped for removal writes no index.db and leaves what it
// acknowledged to the journal: should the removal never happen, a power cut loses nothing.
// Once the directory is removed and the journal told to Forget it, a store made again in
// the same directory never gets the old writes replayed over its own.
func TestStopForRemoval(t *testing.T) {
	fsys := powerfs.New()
	j, err := OpenJournal(fsys, "/js", "/journal", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	dir := "/js/acc/streams/S"
	open := func(fsys FS, j *Journal) *FileStore {
		s, err := Open(Config{Dir: dir, FS: fsys, Journal: j, BlockSize: 4096, Logf: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(fsys, j)
	for i := 0; i < 100; i++ {
		mustStore(t, s, "old", fmt.Sprint(i))
	}
	if err := s.StopForRemoval(); err != nil {
		t.Fatal(err)
	}
	if f, err := fsys.OpenFile(filepath.Join(dir, MsgsDir, indexName), false); err == nil {
		f.Close()
		t.Fatalf("index.db written by StopForRemoval")
	}

	// The removal never happens: a cut loses nothing.
	cut := fsys.Cut(rand.New(rand.NewSource(1)))
	j2, err := OpenJournal(cut, "/js", "/journal", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	s = open(cut, j2)
	if st := s.State(); st.Msgs != 100 || st.LastSeq != 100 || s.Lost().Msgs != 0 {
		t.Fatalf("after a cut: %d msgs, last %d, lost %+v", st.Msgs, st.LastSeq, s.Lost())
	}
	for seq := uint64(1); seq <= 100; seq++ {
		checkLoad(t, s, seq, "old", fmt.Sprint(seq-1))
	}
	s.Stop()
	j2.Close()

	// The removal happens and the journal forgets: a new store in the same place keeps
	// its own records through a crash that leaves the journal unsynced to nothing.
	if err := removeTree(fsys, dir); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		t.Fatal(err)
	}
	if err := j.Forget(dir); err != nil {
		t.Fatal(err)
	}
	checkRemadeSurvivesCrash(t, fsys, j, dir, "new")
}

// countFS counts the directory syncs and renames made through it.
type countFS struct {
	*powerfs.FS
	syncDirs, renames atomic.Int32
}

func (c *countFS) SyncDir(dir string) error { c.syncDirs.Add(1); return c.FS.SyncDir(dir) }

func (c *countFS) Rename(from, to string) error { c.renames.Add(1); return c.FS.Rename(from, to) }

// TestFirstBlockMadeAhead checks that a new store's first block file is made, under its name
// and durably, before the first record comes: that record's commit neither renames a file nor
// syncs a directory, and a power cut right after its acknowledgement keeps it. A store cut
// while its made-ahead block is still empty reopens with nothing lost and nothing reported,
// and appends to that block; one stopped empty reopens without one. Both with a store's own
// fsync and with a journal.
func TestFirstBlockMadeAhead(t *testing.T) {
	for _, journal := range []bool{false, true} {
		t.Run(map[bool]string{false: "fsync", true: "journal"}[journal], func(t *testing.T) {
			rng := rand.New(rand.NewSource(time.Now().UnixNano()))
			fsys := &countFS{FS: powerfs.New()}
			var logMu sync.Mutex
			var logs []string
			logf := func(f string, args ...any) {
				logMu.Lock()
				logs = append(logs, fmt.Sprintf(f, args...))
				logMu.Unlock()
			}
			var j *Journal
			openJ := func(fs FS) {
				if !journal {
					return
				}
				var err error
				if j, err = OpenJournal(fs, "/js", "/journal", quietLog); err != nil {
					t.Fatal(err)
				}
			}
			open := func(fs FS, name string) *FileStore {
				t.Helper()
				s, err := Open(Config{Dir: "/js/acc/streams/" + name, FS: fs, Journal: j, Logf: logf})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			cut := func(ss ...*FileStore) *powerfs.FS {
				t.Helper()
				next := fsys.Cut(rng)
				for _, s := range ss {
					s.Stop()
				}
				if j != nil {
					j.Close()
					if _, err := ReplayJournal(next, "/js", "/journal", quietLog); err != nil {
						t.Fatal(err)
					}
				}
				return next
			}
			openJ(fsys)
			a, e := open(fsys, "A"), open(fsys, "E")
			a.spareWG.Wait()
			e.spareWG.Wait()
			if names, _ := fsys.ReadDir("/js/acc/streams/A/msgs"); !slices.Contains(names, "1.blk") {
				t.Fatalf("msgs/ of a new store holds %v, want 1.blk made ahead", names)
			}
			syncDirs, renames := fsys.syncDirs.Load(), fsys.renames.Load()
			if seq, _, err := a.StoreMsg("a", nil, []byte("one")); err != nil || seq != 1 {
				t.Fatalf("first store: seq %d, %v", seq, err)
			}
			if n, r := fsys.syncDirs.Load()-syncDirs, fsys.renames.Load()-renames; n != 0 || r != 0 {
				t.Fatalf("the first record's commit made %d directory syncs and %d renames, want none", n, r)
			}
			fsys = &countFS{FS: cut(a, e)}
			openJ(fsys)
			a, e = open(fsys, "A"), open(fsys, "E")
			checkSurvived(t, 0, a, map[uint64]plAck{1: {"a", []byte("one")}})
			if st := e.FastState(); st.Msgs != 0 || st.LastSeq != 0 {
				t.Fatalf("an empty store reopened with %+v", st)
			}
			if seq, _, err := e.StoreMsg("e", nil, []byte("two")); err != nil || seq != 1 {
				t.Fatalf("store after reopening empty: seq %d, %v", seq, err)
			}
			if names, _ := fsys.ReadDir("/js/acc/streams/E/msgs"); !slices.Contains(names, "1.blk") || slices.Contains(names, "2.blk") {
				t.Fatalf("msgs/ of the reopened empty store holds %v, want its first record in 1.blk", names)
			}
			fsys = &countFS{FS: cut(a, e)}
			openJ(fsys)
			a, e = open(fsys, "A"), open(fsys, "E")
			checkSurvived(t, 1, a, map[uint64]plAck{1: {"a", []byte("one")}})
			checkSurvived(t, 1, e, map[uint64]plAck{1: {"e", []byte("two")}})
			// A store stopped empty reopens from its index.db with an ordinary spare: a
			// restart makes no block files (nor directory syncs) ahead for idle stores.
			i := open(fsys, "I")
			i.spareWG.Wait()
			i.Stop()
			i = open(fsys, "I")
			i.spareWG.Wait()
			if names, _ := fsys.ReadDir("/js/acc/streams/I/msgs"); slices.Contains(names, "1.blk") {
				t.Fatalf("msgs/ of a store reopened empty holds %v, want no block made ahead", names)
			}
			if seq, _, err := i.StoreMsg("i", nil, []byte("three")); err != nil || seq != 1 {
				t.Fatalf("store after reopening idle: seq %d, %v", seq, err)
			}
			for _, s := range []*FileStore{a, e, i} {
				s.Stop()
			}
			if j != nil {
				j.Close()
			}
			logMu.Lock()
			defer logMu.Unlock()
			if len(logs) > 0 {
				t.Fatalf("the stores reported: %q", logs)
			}
		})
	}
}
