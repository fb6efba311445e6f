package filestore

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/natsd/natsd/sublist"
)

// TestFileMatchesMem drives the file store and the memory store with the
// same random operations and requires the same answers from both, reopening
// the file store now and then. Loads and purges take exact subjects and
// wildcard filters. Subjects come from a small pool and are
// emptied and reused all the time, which exercises the file store's subject
// numbering (an ent names its subject by a number that is reused once the
// subject has no messages left).
func TestFileMatchesMem(t *testing.T) {
	for _, v := range []string{"plain", "s2-aes", "chacha-periodic", "wide"} {
		t.Run(v, func(t *testing.T) { fileMatchesMem(t, v) })
	}
}

// fileMatchesMem runs the comparison on one file store configuration:
// byte counts depend on how records are framed (encryption) and on sealed
// blocks (compression), so each gets its turn. "wide" has three subjects
// with no limit of their own, and the thresholds for sequence lists so low
// that subjects keep giving theirs up (more than 4 messages, averaging
// under 3 apart or more than 32 per sequence of gap) and taking them back
// (4 or more apart with at most 16 per sequence of gap, or one message
// left).
func fileMatchesMem(t *testing.T, variant string) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	lim, pool := Limits{MaxMsgsPerSubject: 6}, 4
	if variant == "wide" {
		lim, pool = Limits{MaxMsgs: 400}, 1
		// Subjects outgrow their lists, give them up and take them back all
		// the time: three subjects interleave about three apart.
		oldMax, oldDense, oldSparse, oldRatio := maxTracked, denseGap, sparseGap, listRatio
		maxTracked, denseGap, sparseGap, listRatio = 4, 3, 4, 16
		t.Cleanup(func() { maxTracked, denseGap, sparseGap, listRatio = oldMax, oldDense, oldSparse, oldRatio })
	}
	// Both stores stamp from this clock, which moves only between steps, so
	// they stamp alike and times can be looked up in both.
	clock := setClock(t, time.Now().UnixNano())
	dir := t.TempDir()
	cfg := fileCfg(dir, lim)
	switch variant {
	case "s2-aes":
		cfg.Compress, cfg.EncryptionKey, cfg.Cipher = true, []byte("secret"), "aes"
	case "chacha-periodic":
		cfg.EncryptionKey, cfg.SyncInterval = []byte("secret"), 10*time.Millisecond
	}
	fs, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { fs.Stop() }()
	ms := NewMemStore(lim)
	ms.sizeOf = storedSize // the stores count sizes as nats-server's do, differently
	defer ms.Stop()
	// Both stores report every change; the reports must be the same and
	// must add up to the state.
	var fsW, msW watcher
	fs.RegisterStorageUpdates(fsW.update)
	ms.RegisterStorageUpdates(msW.update)
	// UpdateLimits picks among these; each store must trim the same way.
	limits := []Limits{lim, {MaxMsgsPerSubject: 3}, {MaxMsgsPerSubject: 6, MaxMsgs: 20},
		{MaxMsgs: 30, MaxBytes: 4000}, {MaxMsgsPerSubject: 2, DiscardNewPerSubject: true},
		{MaxMsgs: 25, Discard: DiscardNew}, {}, {MaxMsgSize: 100, MaxMsgsPerSubject: 5}}
	subj := func() string { return fmt.Sprintf("s.%d.%d", rng.Intn(pool), rng.Intn(3)) }
	// A filter is a subject, a wildcard filter, or one that matches all.
	wild := []string{"s.*.1", "s.2.*", "s.>", "s.3.>", "*.*.2", "*.1.*", "s.*", "t.>", ">", ""}
	filter := func() string {
		if rng.Intn(3) == 0 {
			return wild[rng.Intn(len(wild))]
		}
		return subj()
	}
	same := func(step int, what string, a, b any) {
		t.Helper()
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("step %d, %s:\nfile %+v\nmem  %+v", step, what, a, b)
		}
	}
	type res struct {
		M   *StoredMsg
		Err error
	}
	var fmb, mmb MsgBuf // LoadNextMsgInto's, reused from step to step
	load := func(m *StoredMsg, err error) res {
		if m != nil {
			m.TS = 0 // each store stamps its own time
		}
		return res{m, err}
	}
	// The oracle answers from LoadMsg alone, so the stores' own filtering
	// (subject indexes, start hints) is checked, not just their agreement.
	match := func(m *StoredMsg, f string) bool { return f == "" || sublist.MatchFilter(m.Subject, f) }
	oracleNext := func(f string, start uint64) res {
		st := ms.FastState()
		for seq := max(start, st.FirstSeq); seq <= st.LastSeq; seq++ {
			if m, err := ms.LoadMsg(seq); err == nil && match(m, f) {
				return load(m, nil)
			}
		}
		return res{nil, ErrEOF}
	}
	oracleLast := func(f string) res {
		st := ms.FastState()
		for seq := st.LastSeq; seq >= st.FirstSeq && seq > 0; seq-- {
			if m, err := ms.LoadMsg(seq); err == nil && match(m, f) {
				return load(m, nil)
			}
		}
		return res{nil, ErrNotFound}
	}
	oracleFiltered := func(f string, start uint64) SimpleState {
		var st SimpleState
		last := ms.FastState().LastSeq
		for seq := max(start, 1); seq <= last; seq++ {
			if m, err := ms.LoadMsg(seq); err == nil && match(m, f) {
				st.add(1, seq, seq)
			}
		}
		return st
	}
	oracleCount := func(f string) uint64 {
		var n uint64
		st := ms.FastState()
		for seq := st.FirstSeq; seq <= st.LastSeq && seq > 0; seq++ {
			if m, err := ms.LoadMsg(seq); err == nil && match(m, f) {
				n++
			}
		}
		return n
	}
	// oraclePurgeEx lists what PurgeEx should remove, from LoadMsg alone.
	oraclePurgeEx := func(f string, below, keep uint64) []uint64 {
		st := ms.FastState()
		var matched []uint64
		for seq := st.FirstSeq; seq <= st.LastSeq && seq > 0; seq++ {
			if m, err := ms.LoadMsg(seq); err == nil && match(m, f) {
				matched = append(matched, seq)
			}
		}
		switch {
		case below == 1:
			return nil
		case matchesAll(f) && below > 1: // a compaction, whatever keep says
			keep = 0
		}
		if keep >= uint64(len(matched)) && keep > 0 {
			return nil
		}
		matched = matched[:uint64(len(matched))-keep] // the oldest may go
		for i, seq := range matched {
			if below > 0 && seq >= below {
				return matched[:i]
			}
		}
		return matched
	}
	for step := 0; step < 3000; step++ {
		switch op := rng.Intn(100); {
		case op < 53:
			s, data := subj(), []byte(fmt.Sprintf("%d-%0*d", step, rng.Intn(200), 0))
			a, _, errA := fs.StoreMsg(s, nil, data)
			b, _, errB := ms.StoreMsg(s, nil, data)
			same(step, "store", res{nil, errA}, res{nil, errB})
			same(step, "store seq", a, b)
		case op < 55:
			n := uint64(1 + rng.Intn(3))
			a, errA := fs.SkipMsgs(n)
			b, errB := ms.SkipMsgs(n)
			same(step, fmt.Sprintf("skip %d", n), []any{a, errA}, []any{b, errB})
		case op < 70:
			last := fs.FastState().LastSeq
			seq := uint64(rng.Int63n(int64(last) + 2))
			if rng.Intn(2) == 0 && last > 8 {
				seq = last - uint64(rng.Intn(8)) // often some subject's newest
			}
			a, errA := fs.RemoveMsg(seq)
			b, errB := ms.RemoveMsg(seq)
			same(step, fmt.Sprintf("remove %d", seq), []any{a, errA}, []any{b, errB})
		case op < 71:
			s := filter()
			if s == "" && rng.Intn(4) > 0 {
				s = subj() // purging everything empties the model too often
			}
			want := oracleCount(s)
			a, errA := fs.PurgeSubject(s)
			b, errB := ms.PurgeSubject(s)
			same(step, "purge "+s, []any{a, errA}, []any{b, errB})
			same(step, "purge count "+s, a, want)
			same(step, "left after purge "+s, oracleCount(s), uint64(0))
		case op < 73:
			s, below, keep := filter(), uint64(0), uint64(0)
			if rng.Intn(2) == 0 {
				st := ms.FastState()
				below = st.FirstSeq + uint64(rng.Int63n(int64(st.LastSeq-st.FirstSeq)+2))
			}
			if rng.Intn(2) == 0 {
				keep = uint64(rng.Intn(8))
			}
			if matchesAll(s) && below != 1 && (below > 1 || keep == 0) && rng.Intn(4) > 0 {
				s = subj() // a purge or compaction of everything: the other cases cover it
			}
			want := oraclePurgeEx(s, below, keep)
			desc := fmt.Sprintf("purge %q below %d keep %d", s, below, keep)
			a, errA := fs.PurgeEx(s, below, keep)
			b, errB := ms.PurgeEx(s, below, keep)
			same(step, desc, []any{a, errA}, []any{b, errB})
			same(step, desc+" (oracle)", a, uint64(len(want)))
			for _, seq := range want {
				if _, err := ms.LoadMsg(seq); err != ErrNotFound {
					t.Fatalf("step %d, %s: %d is still there (%v)", step, desc, seq, err)
				}
			}
		case op < 74:
			a, errA := fs.Purge()
			b, errB := ms.Purge()
			same(step, "purge", []any{a, errA}, []any{b, errB})
		case op < 76:
			st := fs.FastState()
			seq := st.FirstSeq + uint64(rng.Int63n(int64(st.LastSeq-st.FirstSeq)+2))
			a, errA := fs.Compact(seq)
			b, errB := ms.Compact(seq)
			same(step, fmt.Sprintf("compact %d", seq), []any{a, errA}, []any{b, errB})
		case op < 84:
			s := filter()
			same(step, "last "+s, load(fs.LoadLastMsg(s)), load(ms.LoadLastMsg(s)))
			same(step, "last (oracle) "+s, load(ms.LoadLastMsg(s)), oracleLast(s))
		case op < 92:
			s := filter()
			start := uint64(rng.Int63n(int64(fs.FastState().LastSeq) + 2))
			same(step, fmt.Sprintf("next %q %d", s, start), load(fs.LoadNextMsg(s, start)), load(ms.LoadNextMsg(s, start)))
			same(step, fmt.Sprintf("next (oracle) %q %d", s, start), load(ms.LoadNextMsg(s, start)), oracleNext(s, start))
			// The same through reused buffers (each compared before its next load).
			same(step, fmt.Sprintf("next into %q %d", s, start), load(fs.LoadNextMsgInto(&fmb, s, start)), load(fs.LoadNextMsg(s, start)))
			same(step, fmt.Sprintf("next into (mem) %q %d", s, start), load(ms.LoadNextMsgInto(&mmb, s, start)), load(ms.LoadNextMsg(s, start)))
		case op < 94:
			s := filter()
			start := uint64(rng.Int63n(int64(fs.FastState().LastSeq) + 2))
			a, b := fs.FilteredState(s, start), ms.FilteredState(s, start)
			same(step, fmt.Sprintf("filtered %q %d", s, start), a, b)
			same(step, fmt.Sprintf("filtered (oracle) %q %d", s, start), b, oracleFiltered(s, start))
		case op < 95:
			st := ms.FastState()
			seq := st.LastSeq - uint64(rng.Int63n(int64(min(st.LastSeq, 12))+1)) // usually a short tail
			if rng.Intn(20) == 0 {
				seq = uint64(rng.Int63n(int64(st.LastSeq) + 2)) // anywhere, or past the end
			}
			errA, errB := fs.Truncate(seq), ms.Truncate(seq)
			same(step, fmt.Sprintf("truncate %d", seq), errA, errB)
			if errA == nil && seq < st.LastSeq {
				if _, err := fs.LoadMsg(seq + 1); err != ErrEOF {
					t.Fatalf("step %d: after truncate %d, load %d: %v", step, seq, seq+1, err)
				}
			}
		case op < 96:
			seq := uint64(rng.Int63n(int64(fs.FastState().LastSeq) + 2))
			same(step, fmt.Sprintf("load %d", seq), load(fs.LoadMsg(seq)), load(ms.LoadMsg(seq)))
		case op < 97:
			when := time.Unix(0, clock.Load()-rng.Int63n(int64(20*time.Millisecond)))
			a, b := fs.GetSeqFromTime(when), ms.GetSeqFromTime(when)
			same(step, fmt.Sprintf("seq from time %v", when), a, b)
			st := ms.FastState()
			want := st.LastSeq + 1
			for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
				if m, err := ms.LoadMsg(seq); err == nil && m.TS >= when.UnixNano() {
					want = seq
					break
				}
			}
			same(step, fmt.Sprintf("seq from time %v (oracle)", when), a, want)
			f := filter()
			ss := fs.SubjectsState(f)
			same(step, "subjects state "+f, ss, ms.SubjectsState(f))
			var oracle map[string]SimpleState
			for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
				if m, err := ms.LoadMsg(seq); err == nil && match(m, f) {
					if oracle == nil {
						oracle = map[string]SimpleState{}
					}
					o := oracle[m.Subject]
					o.add(1, seq, seq)
					oracle[m.Subject] = o
				}
			}
			same(step, "subjects state (oracle) "+f, ss, oracle)
			fl := []string{filter()}
			if rng.Intn(2) == 0 {
				fl = append(fl, filter())
			}
			var maxSeq uint64
			if rng.Intn(2) == 0 {
				maxSeq = uint64(rng.Int63n(int64(st.LastSeq) + 2))
			}
			maxAllowed := rng.Intn(4) * 4
			desc := fmt.Sprintf("last seqs %q max %d allowed %d", fl, maxSeq, maxAllowed)
			la, errA := fs.MultiLastSeqs(fl, maxSeq, maxAllowed)
			lb, errB := ms.MultiLastSeqs(fl, maxSeq, maxAllowed)
			same(step, desc, []any{la, errA}, []any{lb, errB})
			lastOf := map[string]uint64{} // the oracle: walk down from maxSeq
			top := st.LastSeq
			if maxSeq > 0 {
				top = min(top, maxSeq)
			}
			for seq := top; seq >= st.FirstSeq && seq > 0; seq-- {
				if m, err := ms.LoadMsg(seq); err == nil && lastOf[m.Subject] == 0 && slices.ContainsFunc(fl, func(f string) bool { return match(m, f) }) {
					lastOf[m.Subject] = seq
				}
			}
			var wantLast []uint64
			for _, seq := range lastOf {
				wantLast = append(wantLast, seq)
			}
			slices.Sort(wantLast)
			var wantErr error
			if maxAllowed > 0 && len(wantLast) > maxAllowed {
				wantLast, wantErr = nil, ErrTooManyResults
			}
			same(step, desc+" (oracle)", []any{la, errA}, []any{wantLast, wantErr})
		case op < 98:
			cfg.Limits = limits[rng.Intn(len(limits))]
			errA, errB := fs.UpdateLimits(cfg.Limits), ms.UpdateLimits(cfg.Limits)
			same(step, fmt.Sprintf("limits %+v", cfg.Limits), errA, errB)
		default:
			if err := fs.Stop(); err != nil {
				t.Fatal(err)
			}
			if fs, err = Open(cfg); err != nil {
				t.Fatal(err)
			}
			fsW.reset()
			fs.RegisterStorageUpdates(fsW.update)
			st := fs.FastState()
			var first []update // what the store already holds, when it holds anything
			if st.Bytes > 0 {
				first = []update{{0, int64(st.Bytes), 0, ""}}
			}
			same(step, "first report after reopen", fsW.take(), first)
			fsW.msgs = int64(st.Msgs)
		}
		a, b := fs.State(), ms.State()
		same(step, "state", a, b)
		clock.Add(rng.Int63n(4) * int64(300*time.Microsecond))
		same(step, "storage updates", fsW.take(), msW.take())
		same(step, "storage updates add up", [2]int64{fsW.msgs, fsW.bytes}, [2]int64{int64(a.Msgs), int64(a.Bytes)})
	}
}

// watcher records a store's storage updates and keeps their running sums.
type watcher struct {
	mu          sync.Mutex
	ups         []update
	msgs, bytes int64
}

func (w *watcher) update(msgs, bytes int64, seq uint64, subj string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ups = append(w.ups, update{msgs, bytes, seq, subj})
	w.msgs += msgs
	w.bytes += bytes
}

// take returns the updates recorded since the last take.
func (w *watcher) take() []update {
	w.mu.Lock()
	defer w.mu.Unlock()
	u := w.ups
	w.ups = nil
	return u
}

func (w *watcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ups)
}

func (w *watcher) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ups, w.msgs, w.bytes = nil, 0, 0
}
