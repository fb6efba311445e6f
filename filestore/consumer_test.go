package filestore

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/natsd/natsd/filestore/powerfs"
)

// cmodel is the consumer state rules written plainly (sorted scans, no shortcuts), to check
// ConsumerState against. It follows nats-server's consumer store for the traffic the
// JetStream layer sends: redeliveries are of pending messages only.
type cmodel struct {
	p       ConsumerAckPolicy
	d, f    SequencePair
	pending map[uint64]PendingAck
	redel   map[uint64]uint64
}

func newCModel(p ConsumerAckPolicy) *cmodel {
	return &cmodel{p: p, pending: map[uint64]PendingAck{}, redel: map[uint64]uint64{}}
}

func (m *cmodel) deliver(dseq, sseq, dc uint64, ts int64) {
	if m.p == ConsumerAckNone {
		if dc == 1 && dseq > m.f.Consumer {
			m.d.Consumer, m.d.Stream = max(m.d.Consumer, dseq), max(m.d.Stream, sseq)
			m.f = m.d
		}
		return
	}
	if dseq <= m.f.Consumer {
		return
	}
	if sseq > m.d.Stream {
		m.pending[sseq] = PendingAck{dseq, ts}
		m.d.Stream = sseq
	} else if pa, ok := m.pending[sseq]; ok {
		pa.Timestamp = ts // the first delivery's consumer sequence stays
		m.pending[sseq] = pa
	}
	m.d.Consumer = max(m.d.Consumer, dseq)
	if dc > 1 {
		m.redel[sseq] = max(m.redel[sseq], dc-1)
	}
}

func (m *cmodel) ack(dseq, sseq uint64) {
	if m.p == ConsumerAckNone {
		return
	}
	delete(m.redel, sseq)
	pa, ok := m.pending[sseq]
	if dseq <= m.f.Consumer || !ok {
		return
	}
	if m.p == ConsumerAckAll {
		// nats-server's two walks differ on redelivery counts of sequences that are not
		// pending (a redelivery of one acked since): the walk over the sequences forgets
		// them, the walk over the pending map keeps them. Which walk runs is part of the
		// rule.
		gap := sseq - m.f.Stream
		m.f = SequencePair{dseq, sseq}
		if gap > uint64(len(m.pending)) {
			for s := range m.pending {
				if s <= sseq {
					delete(m.pending, s)
					delete(m.redel, s)
				}
			}
			return
		}
		for s := sseq; s > sseq-gap && len(m.pending) > 0; s-- {
			delete(m.pending, s)
			delete(m.redel, s)
		}
		return
	}
	delete(m.pending, sseq)
	if pa.Sequence > 0 && pa.Sequence < dseq {
		dseq = pa.Sequence
	}
	switch {
	case len(m.pending) == 0:
		m.f = m.d
	case dseq == m.f.Consumer+1:
		m.f = SequencePair{dseq, sseq}
		if m.d.Consumer > dseq {
			keys := slices.Sorted(func(yield func(uint64) bool) {
				for k := range m.pending {
					if !yield(k) {
						return
					}
				}
			})
			for _, k := range keys {
				if k > sseq {
					m.f = SequencePair{m.pending[k].Sequence - 1, k - 1}
					break
				}
			}
		}
	}
}

func (m *cmodel) state() *ConsumerState {
	st := &ConsumerState{Delivered: m.d, AckFloor: m.f}
	for k, v := range m.pending {
		if st.Pending == nil {
			st.Pending = map[uint64]*PendingAck{}
		}
		v := v
		st.Pending[k] = &v
	}
	for k, v := range m.redel {
		if st.Redelivered == nil {
			st.Redelivered = map[uint64]uint64{}
		}
		st.Redelivered[k] = v
	}
	return st
}

// cstateDiff describes how a differs from b ("" if equal; empty maps equal nil ones).
func cstateDiff(a, b *ConsumerState) string {
	if a.Delivered != b.Delivered || a.AckFloor != b.AckFloor {
		return fmt.Sprintf("delivered %+v / %+v, floor %+v / %+v", a.Delivered, b.Delivered, a.AckFloor, b.AckFloor)
	}
	if len(a.Pending) != len(b.Pending) || len(a.Redelivered) != len(b.Redelivered) {
		return fmt.Sprintf("pending %d / %d, redelivered %d / %d", len(a.Pending), len(b.Pending), len(a.Redelivered), len(b.Redelivered))
	}
	for k, v := range a.Pending {
		if w := b.Pending[k]; w == nil || *w != *v {
			return fmt.Sprintf("pending[%d] %+v / %+v", k, v, w)
		}
	}
	for k, v := range a.Redelivered {
		if w, ok := b.Redelivered[k]; !ok || w != v {
			return fmt.Sprintf("redelivered[%d] %d / %d", k, v, w)
		}
	}
	return ""
}

// checkInvariants: what nothing may break, whatever the traffic. (Consumer sequences have
// no such bounds: nats-server takes an AckAll's or a stray ack's consumer sequence as the
// floor as it comes.)
func checkInvariants(st *ConsumerState) string {
	if st.AckFloor.Stream > st.Delivered.Stream {
		return fmt.Sprintf("floor %+v above delivered %+v", st.AckFloor, st.Delivered)
	}
	for k, v := range st.Pending {
		if k <= st.AckFloor.Stream || k > st.Delivered.Stream {
			return fmt.Sprintf("pending[%d] %+v outside floor %+v .. delivered %+v", k, *v, st.AckFloor, st.Delivered)
		}
	}
	return ""
}

// cop is one update: a delivery (dc > 0) or an ack.
type cop struct {
	dseq, sseq, dc uint64
	ts             int64
}

// ctraffic makes the updates a consumer sees: first deliveries with gaps in the stream
// sequences (a filtered consumer), redeliveries of pending messages, acks of them (with the
// latest delivery's consumer sequence, as the ack subject carries), and stale or unknown ones.
type ctraffic struct {
	rng        *rand.Rand
	p          ConsumerAckPolicy
	dseq, sseq uint64
	pend       map[uint64]cop // sseq -> latest delivery
	keys       []uint64
	acked      []cop
}

func newCTraffic(rng *rand.Rand, p ConsumerAckPolicy, st *ConsumerState) *ctraffic {
	t := &ctraffic{rng: rng, p: p, dseq: st.Delivered.Consumer, sseq: st.Delivered.Stream, pend: map[uint64]cop{}}
	for k, v := range st.Pending {
		t.pend[k] = cop{v.Sequence, k, st.Redelivered[k] + 1, v.Timestamp}
		t.keys = append(t.keys, k)
	}
	return t
}

func (t *ctraffic) pick() (uint64, bool) {
	for len(t.keys) > 0 {
		i := t.rng.Intn(len(t.keys))
		k := t.keys[i]
		if _, ok := t.pend[k]; ok {
			return k, true
		}
		t.keys[i] = t.keys[len(t.keys)-1]
		t.keys = t.keys[:len(t.keys)-1]
	}
	return 0, false
}

func (t *ctraffic) next() cop {
	ts := time.Now().UnixNano()
	r := t.rng.Intn(100)
	if t.p == ConsumerAckNone || r < 40 || len(t.pend) == 0 {
		t.dseq++
		t.sseq += 1 + uint64(t.rng.Intn(3))*uint64(t.rng.Intn(4))
		c := cop{t.dseq, t.sseq, 1, ts}
		if t.p != ConsumerAckNone {
			t.pend[t.sseq] = c
			t.keys = append(t.keys, t.sseq)
		}
		return c
	}
	k, ok := t.pick()
	if !ok {
		return t.next()
	}
	c := t.pend[k]
	switch {
	case r < 55: // redelivery
		t.dseq++
		c = cop{t.dseq, k, c.dc + 1, ts}
		t.pend[k] = c
		return c
	case r < 93: // ack
		if t.p == ConsumerAckAll {
			for s := range t.pend {
				if s <= k {
					delete(t.pend, s)
				}
			}
		} else {
			delete(t.pend, k)
		}
		a := cop{dseq: c.dseq, sseq: k}
		if len(t.acked) < 64 {
			t.acked = append(t.acked, a)
		} else {
			t.acked[t.rng.Intn(64)] = a
		}
		return a
	case r < 96: // an ack again, or of something never delivered
		if len(t.acked) > 0 && t.rng.Intn(2) == 0 {
			return t.acked[t.rng.Intn(len(t.acked))]
		}
		return cop{dseq: t.dseq + 1 + uint64(t.rng.Intn(3)), sseq: t.sseq + 1 + uint64(t.rng.Intn(3))}
	default: // a stale delivery (a restarted leader's replay)
		return cop{dseq: 1 + uint64(t.rng.Intn(int(t.dseq))), sseq: 1 + uint64(t.rng.Intn(int(t.sseq))), dc: 1, ts: ts}
	}
}

func applyCop(s ConsumerStore, o cop) error {
	if o.dc > 0 {
		return s.UpdateDelivered(o.dseq, o.sseq, o.dc, o.ts)
	}
	err := s.UpdateAcks(o.dseq, o.sseq)
	if err == ErrNoAckPolicy {
		err = nil
	}
	return err
}

var cpolicies = []struct {
	name string
	p    ConsumerAckPolicy
}{{"none", ConsumerAckNone}, {"all", ConsumerAckAll}, {"explicit", ConsumerAckExplicit}}

// smallConsumerLogs makes consumer logs compact after a few KB.
func smallConsumerLogs(t testing.TB, n int64) {
	old := consumerCompactMin
	consumerCompactMin = n
	t.Cleanup(func() { consumerCompactMin = old })
}

// TestConsumerStateModel runs random traffic under each ack policy through ConsumerState,
// the memory store, and file stores (own fsync, journal, periodic sync) with random commits
// and reopens and small logs (so they compact): all must agree with the model after every
// update, and a reopened store must come back with the state it had.
func TestConsumerStateModel(t *testing.T) {
	smallConsumerLogs(t, 4<<10)
	for _, pc := range cpolicies {
		for _, mode := range []string{"sync", "journal", "periodic"} {
			t.Run(pc.name+"/"+mode, func(t *testing.T) {
				seed := time.Now().UnixNano()
				rng := rand.New(rand.NewSource(seed))
				fsys := powerfs.New()
				cfg := ConsumerStoreConfig{Dir: "/js/S/obs/C", FS: fsys, AckPolicy: pc.p, Logf: quietLog}
				var j *Journal
				openJ := func() {
					if mode != "journal" {
						return
					}
					var err error
					if j, err = OpenJournal(fsys, "/js", "/js/journal", quietLog); err != nil {
						t.Fatal(err)
					}
					cfg.Journal = j
				}
				if mode == "periodic" {
					cfg.SyncInterval = time.Millisecond
				}
				openJ()
				fs, err := OpenConsumerStore(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ms := NewConsumerMemStore(pc.p)
				var plain ConsumerState
				m := newCModel(pc.p)
				tr := newCTraffic(rng, pc.p, &plain)
				reopens := 0
				for i := 0; i < 3000; i++ {
					o := tr.next()
					if o.dc > 0 {
						m.deliver(o.dseq, o.sseq, o.dc, o.ts)
						plain.ApplyDelivered(o.dseq, o.sseq, o.dc, o.ts, pc.p)
					} else {
						m.ack(o.dseq, o.sseq)
						plain.ApplyAcked(o.dseq, o.sseq, pc.p)
					}
					for _, s := range []ConsumerStore{fs, ms} {
						if err := applyCop(s, o); err != nil {
							t.Fatalf("seed %d op %d %+v: %v", seed, i, o, err)
						}
					}
					want := m.state()
					for name, got := range map[string]*ConsumerState{"state": &plain, "mem": ms.State(), "file": fs.State()} {
						if d := cstateDiff(got, want); d != "" {
							t.Fatalf("seed %d op %d %+v: %s differs from the model: %s", seed, i, o, name, d)
						}
						if d := checkInvariants(got); d != "" {
							t.Fatalf("seed %d op %d: %s: %s", seed, i, name, d)
						}
					}
					if rng.Intn(10) == 0 {
						if err := fs.Commit(); err != nil {
							t.Fatal(err)
						}
					}
					if rng.Intn(300) == 0 {
						if err := fs.Stop(); err != nil {
							t.Fatal(err)
						}
						if j != nil {
							j.Close()
						}
						openJ()
						if fs, err = OpenConsumerStore(cfg); err != nil {
							t.Fatal(err)
						}
						reopens++
						if d := cstateDiff(fs.State(), want); d != "" {
							t.Fatalf("seed %d op %d: reopened store differs: %s", seed, i, d)
						}
					}
				}
				if err := fs.Stop(); err != nil {
					t.Fatal(err)
				}
				if j != nil {
					j.Close()
				}
				openJ()
				fs, err = OpenConsumerStore(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if d := cstateDiff(fs.State(), m.state()); d != "" {
					t.Fatalf("seed %d: reopened store differs: %s", seed, d)
				}
				fs.Stop()
				if j != nil {
					j.Close()
				}
				if reopens == 0 {
					t.Logf("seed %d: no reopen mid-run", seed)
				}
			})
		}
	}
}

// TestConsumerSetState: a state set is durable at once (in periodic mode too) and replaces
// everything before it.
func TestConsumerSetState(t *testing.T) {
	for _, si := range []time.Duration{0, time.Hour} {
		fsys := powerfs.New()
		cfg := ConsumerStoreConfig{Dir: "/js/S/obs/C", FS: fsys, AckPolicy: ConsumerAckExplicit, SyncInterval: si, Logf: quietLog}
		s, err := OpenConsumerStore(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); i <= 10; i++ {
			s.UpdateDelivered(i, i, 1, int64(i))
		}
		want := &ConsumerState{Delivered: SequencePair{100, 200}, AckFloor: SequencePair{90, 180},
			Pending:     map[uint64]*PendingAck{190: {95, 7}, 199: {99, 8}},
			Redelivered: map[uint64]uint64{190: 3}}
		in := want.Copy()
		if err := s.SetState(in); err != nil {
			t.Fatal(err)
		}
		in.Pending[190].Timestamp = 1 // the store holds a copy
		s2, err := OpenConsumerStore(ConsumerStoreConfig{Dir: cfg.Dir, FS: fsys.Cut(nil), AckPolicy: cfg.AckPolicy, Logf: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		if d := cstateDiff(s2.State(), want); d != "" {
			t.Fatalf("sync interval %v: after a power cut: %s", si, d)
		}
		s2.Stop()
		s.Stop()
	}
}

// cHistory is one consumer's updates in a power-loss round and how many of them a returned
// Commit covered.
type cHistory struct {
	start     *ConsumerState
	ops       []cop
	committed int
}

// checkPrefix fails unless got is the state after some prefix of h's updates at least as
// long as the committed one: nothing committed lost, nothing but a prefix of the rest.
func checkPrefix(t *testing.T, what string, p ConsumerAckPolicy, h *cHistory, got *ConsumerState) {
	t.Helper()
	st := h.start.Copy()
	var firstDiff string
	for k := 0; k <= len(h.ops); k++ {
		if k > 0 {
			o := h.ops[k-1]
			if o.dc > 0 {
				st.ApplyDelivered(o.dseq, o.sseq, o.dc, o.ts, p)
			} else {
				st.ApplyAcked(o.dseq, o.sseq, p)
			}
		}
		if k < h.committed {
			continue
		}
		d := cstateDiff(got, st)
		if d == "" {
			return
		}
		if firstDiff == "" {
			firstDiff = d
		}
	}
	t.Fatalf("%s: recovered state is not the state after %d..%d updates (%d committed); against the committed one: %s",
		what, h.committed, len(h.ops), h.committed, firstDiff)
}

// TestConsumerPowerLoss runs several consumers (each with its own goroutine delivering,
// acking and committing) and cuts the power in the middle of a random sync, or at a random
// moment: after the journal's replay and a reopen, every consumer must hold exactly the
// state after some prefix of its updates that includes every committed one (no acked
// message pending again, no floor gone back). Logs are small, so cuts land in compactions
// too, and with the journal segments are small, so in checkpoints and segment reuse.
func TestConsumerPowerLoss(t *testing.T) {
	smallConsumerLogs(t, 2<<10)
	smallJournal(t)
	for _, mode := range []string{"sync", "journal"} {
		t.Run(mode, func(t *testing.T) {
			const n = 4
			seed := time.Now().UnixNano()
			rng := rand.New(rand.NewSource(seed))
			fsys := powerfs.New()
			hist := make([]*cHistory, n)
			policies := []ConsumerAckPolicy{ConsumerAckExplicit, ConsumerAckAll, ConsumerAckExplicit, ConsumerAckNone}
			committed, compactions := 0, 0
			for round := 0; round < 12; round++ {
				var j *Journal
				var err error
				if mode == "journal" {
					if j, err = OpenJournal(fsys, "/js", "/js/journal", quietLog); err != nil {
						t.Fatalf("seed %d round %d: journal: %v", seed, round, err)
					}
				}
				ss := make([]ConsumerStore, n)
				for i := range ss {
					ss[i], err = OpenConsumerStore(ConsumerStoreConfig{Dir: fmt.Sprintf("/js/S%d/obs/C%d", i%2, i), FS: fsys,
						Journal: j, AckPolicy: policies[i], Logf: quietLog})
					if err != nil {
						t.Fatalf("seed %d round %d: open %d: %v", seed, round, i, err)
					}
					st := ss[i].State()
					if hist[i] != nil {
						checkPrefix(t, fmt.Sprintf("seed %d round %d consumer %d", seed, round, i), policies[i], hist[i], st)
					}
					hist[i] = &cHistory{start: st}
				}
				var mu sync.Mutex
				var next *powerfs.FS
				var snap []int
				cutRng := rand.New(rand.NewSource(rng.Int63()))
				cutAt := int32(1 + rng.Intn(120))
				var nsync atomic.Int32
				cutDone := make(chan struct{})
				doCut := func() {
					mu.Lock()
					defer mu.Unlock()
					if next != nil {
						return
					}
					next = fsys.Cut(cutRng)
					snap = make([]int, n)
					for i, h := range hist {
						snap[i] = h.committed
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
					wg.Add(1)
					go func(i int, s ConsumerStore, seed int64) {
						defer wg.Done()
						trng := rand.New(rand.NewSource(seed))
						h := hist[i]
						tr := newCTraffic(trng, policies[i], h.start)
						for {
							select {
							case <-stop:
								return
							default:
							}
							o := tr.next()
							if err := applyCop(s, o); err != nil {
								return
							}
							mu.Lock()
							h.ops = append(h.ops, o)
							k := len(h.ops)
							mu.Unlock()
							if trng.Intn(4) == 0 {
								if err := s.Commit(); err != nil {
									return
								}
								mu.Lock()
								h.committed = k
								mu.Unlock()
							}
						}
					}(i, s, rng.Int63())
				}
				select {
				case <-cutDone:
				case <-time.After(time.Duration(rng.Intn(40)) * time.Millisecond):
					doCut()
				}
				close(stop)
				wg.Wait()
				fsys.SetOnSync(nil)
				for _, s := range ss {
					s.Stop()
					compactions += s.(*consumerFileStore).compactions
				}
				if j != nil {
					j.Close()
				}
				for i, h := range hist {
					// Updates after the cut never reached the cut's file system.
					h.committed = snap[i]
					committed += snap[i]
				}
				fsys = next
			}
			if committed < 100 || compactions == 0 {
				t.Fatalf("seed %d: only %d committed updates and %d compactions over all rounds", seed, committed, compactions)
			}
		})
	}
}

// TestConsumerJournalMarkers: the journal's copies of writes to a log that was compacted
// since, or to a consumer deleted and created again under the same name, are never
// replayed over the new file. The page cache survives (a process crash), so every journaled
// write is still there to be replayed.
func TestConsumerJournalMarkers(t *testing.T) {
	smallConsumerLogs(t, 2<<10)
	fsys := powerfs.New()
	j, err := OpenJournal(fsys, "/js", "/js/journal", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	dir := "/js/S/obs/C"
	open := func(fsys FS, j *Journal) ConsumerStore {
		s, err := OpenConsumerStore(ConsumerStoreConfig{Dir: dir, FS: fsys, Journal: j, AckPolicy: ConsumerAckExplicit, Logf: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(fsys, j)
	// Deliveries and acks, each committed, until the log has been compacted a few times: the
	// journal then holds writes of several earlier logs at offsets the current one reuses.
	for i := uint64(1); s.(*consumerFileStore).compactions < 3; i++ {
		s.UpdateDelivered(i, i, 1, int64(i))
		if i > 5 {
			s.UpdateAcks(i-5, i-5)
		}
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	want := s.State()
	crashed := fsys.Crash()
	s.Stop()
	j.Close()
	j2, err := OpenJournal(crashed, "/js", "/js/journal", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	s = open(crashed, j2)
	if d := cstateDiff(s.State(), want); d != "" {
		t.Fatalf("after compactions and a crash: %s", d)
	}
	// Deleted and made again: the first one's journaled writes must not come back.
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	s = open(crashed, j2)
	for i := uint64(1); i <= 3; i++ {
		s.UpdateDelivered(i, 1000+i, 1, 5)
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	want = s.State()
	again := crashed.Crash()
	s.Stop()
	j2.Close()
	j3, err := OpenJournal(again, "/js", "/js/journal", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	defer j3.Close()
	s = open(again, j3)
	defer s.Stop()
	if d := cstateDiff(s.State(), want); d != "" {
		t.Fatalf("re-created consumer after a crash: %s", d)
	}
}

// cLogWithHistory writes a log of random traffic, committing each update, and returns its
// bytes, the updates, the end offset of each update's record (-1 when it changed nothing
// and wrote none), and every record boundary.
func cLogWithHistory(t *testing.T, p ConsumerAckPolicy, n int) ([]byte, []cop, []int, map[int]bool) {
	fsys := powerfs.New()
	s, err := OpenConsumerStore(ConsumerStoreConfig{Dir: "/c", FS: fsys, AckPolicy: p, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	cs := s.(*consumerFileStore)
	tr := newCTraffic(rand.New(rand.NewSource(int64(n))), p, &ConsumerState{})
	var ops []cop
	var ends []int
	boundary := map[int]bool{0: true}
	for i := 0; i < n; i++ {
		o := tr.next()
		before := cs.size
		if err := applyCop(s, o); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o)
		if cs.size == before {
			ends = append(ends, -1)
		} else {
			ends = append(ends, int(cs.size))
		}
		boundary[int(cs.size)] = true
		if i == n/2 {
			// A snapshot in the middle, as SetState or compaction leave: it changes nothing.
			if err := s.SetState(s.State()); err != nil {
				t.Fatal(err)
			}
			boundary[int(cs.size)] = true
		}
	}
	s.Stop()
	b, err := readAll(mustOpen(t, fsys, "/c/o.log"))
	if err != nil {
		t.Fatal(err)
	}
	return b, ops, ends, boundary
}

func mustOpen(t *testing.T, fsys FS, name string) File {
	f, err := fsys.OpenFile(name, false)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestConsumerDamage: a log cut anywhere, with a flipped bit anywhere, or with garbage
// or zeros after its end is recovered as the state after the last whole record before the
// damage, the damage is reported (unless the cut falls on a record boundary), the file is cut
// back to that record, and nothing panics.
func TestConsumerDamage(t *testing.T) {
	for _, pc := range cpolicies {
		t.Run(pc.name, func(t *testing.T) {
			logb, ops, ends, boundary := cLogWithHistory(t, pc.p, 150)
			// states[k]: the state after the updates whose records end at or before offset k.
			stateAt := func(off int) *ConsumerState {
				var st ConsumerState
				for i, o := range ops {
					if ends[i] > off {
						break
					}
					if o.dc > 0 {
						st.ApplyDelivered(o.dseq, o.sseq, o.dc, o.ts, pc.p)
					} else {
						st.ApplyAcked(o.dseq, o.sseq, pc.p)
					}
				}
				return &st
			}
			// The record boundary at or before off.
			floorB := func(off int) int {
				for ; off > 0 && !boundary[off]; off-- {
				}
				return off
			}
			try := func(what string, b []byte, damageAt int, wantReport bool) {
				t.Helper()
				fsys := powerfs.New()
				fsys.MkdirAll("/c")
				f, _ := fsys.OpenFile("/c/o.log", true)
				f.WriteAt(b, 0)
				f.Sync()
				fsys.SyncDir("/c")
				var reports []string
				s, err := OpenConsumerStore(ConsumerStoreConfig{Dir: "/c", FS: fsys, AckPolicy: pc.p,
					Logf: func(f string, a ...any) { reports = append(reports, fmt.Sprintf(f, a...)) }})
				if err != nil {
					t.Fatalf("%s: open: %v", what, err)
				}
				keep := floorB(damageAt)
				if d := cstateDiff(s.State(), stateAt(keep)); d != "" {
					t.Fatalf("%s: state is not the one up to offset %d: %s", what, keep, d)
				}
				if wantReport != (len(reports) > 0) {
					t.Fatalf("%s: reports %q, want a report: %v", what, reports, wantReport)
				}
				// New updates go after the last good record and survive a reopen.
				s.UpdateDelivered(1<<40, 1<<40, 1, 1)
				if err := s.Commit(); err != nil {
					t.Fatal(err)
				}
				want := s.State()
				s.Stop()
				reports = nil
				s, err = OpenConsumerStore(ConsumerStoreConfig{Dir: "/c", FS: fsys, AckPolicy: pc.p,
					Logf: func(f string, a ...any) { reports = append(reports, fmt.Sprintf(f, a...)) }})
				if err != nil {
					t.Fatal(err)
				}
				if d := cstateDiff(s.State(), want); d != "" {
					t.Fatalf("%s: after an update and a reopen: %s", what, d)
				}
				if len(reports) > 0 {
					// The damage was cut away at the first open: nothing of it may be left.
					t.Fatalf("%s: damage reported again after a reopen: %q", what, reports)
				}
				s.Stop()
			}
			rng := rand.New(rand.NewSource(time.Now().UnixNano()))
			for cut := 0; cut <= len(logb); cut += 1 + rng.Intn(13) {
				try(fmt.Sprintf("cut at %d", cut), logb[:cut], cut, !boundary[cut])
			}
			for k := 0; k < 150; k++ {
				off := rng.Intn(len(logb))
				b := slices.Clone(logb)
				b[off] ^= 1 << rng.Intn(8)
				try(fmt.Sprintf("bit flipped at %d", off), b, off, true)
			}
			garbage := make([]byte, 1+rng.Intn(64))
			rng.Read(garbage)
			garbage[0] |= 0x80 // no kind: never a valid record start
			try("garbage after the end", append(slices.Clone(logb), garbage...), len(logb), true)
			try("zeros after the end", append(slices.Clone(logb), make([]byte, 100)...), len(logb), true)
		})
	}
}

// FuzzConsumerLog: whatever the log holds, opening never panics, and a reopen after gives
// the same state.
func FuzzConsumerLog(f *testing.F) {
	f.Add(appendAckedRec(appendDeliveredRec(nil, 1, 1, 1, 5), 1, 1))
	f.Add(appendConsumerSnapshot(nil, &ConsumerState{Delivered: SequencePair{5, 9}, Pending: map[uint64]*PendingAck{9: {5, 1}}, Redelivered: map[uint64]uint64{9: 2}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fsys := powerfs.New()
		fsys.MkdirAll("/c")
		fl, _ := fsys.OpenFile("/c/o.log", true)
		fl.WriteAt(b, 0)
		fsys.SyncDir("/c")
		s, err := OpenConsumerStore(ConsumerStoreConfig{Dir: "/c", FS: fsys, AckPolicy: ConsumerAckExplicit, Logf: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		st := s.State()
		s.Stop()
		s, _ = OpenConsumerStore(ConsumerStoreConfig{Dir: "/c", FS: fsys, AckPolicy: ConsumerAckExplicit, Logf: quietLog})
		if d := cstateDiff(s.State(), st); d != "" {
			t.Fatal(d)
		}
		s.Stop()
	})
}

// TestConsumerStoreLifecycle: creation makes the directories durable, Delete removes the
// directory, updates after Stop fail, and AckNone refuses acks and redeliveries.
func TestConsumerStoreLifecycle(t *testing.T) {
	dir := t.TempDir()
	cdir := filepath.Join(dir, "S", "obs", "C")
	s, err := OpenConsumerStore(ConsumerStoreConfig{Dir: cdir, AckPolicy: ConsumerAckNone, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateAcks(1, 1); err != ErrNoAckPolicy {
		t.Fatalf("ack on AckNone: %v", err)
	}
	if err := s.UpdateDelivered(1, 1, 2, 1); err != ErrNoAckPolicy {
		t.Fatalf("redelivery on AckNone: %v", err)
	}
	if err := s.UpdateDelivered(1, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateDelivered(2, 2, 1, 1); err != ErrClosed {
		t.Fatalf("update after stop: %v", err)
	}
	s, err = OpenConsumerStore(ConsumerStoreConfig{Dir: cdir, AckPolicy: ConsumerAckNone, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.State(); st.AckFloor != (SequencePair{1, 1}) {
		t.Fatalf("reopened: %+v", st)
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cdir); !os.IsNotExist(err) {
		t.Fatalf("directory after Delete: %v", err)
	}
}

// TestConsumerUpdatesDoNotWaitForSync holds a commit's fsync and checks that updates still
// go through meanwhile.
func TestConsumerUpdatesDoNotWaitForSync(t *testing.T) {
	fsys := powerfs.New()
	s, err := OpenConsumerStore(ConsumerStoreConfig{Dir: "/c", FS: fsys, AckPolicy: ConsumerAckExplicit, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	hold, entered := make(chan struct{}), make(chan struct{}, 1)
	fsys.SetOnSync(func() {
		select {
		case entered <- struct{}{}:
			<-hold
		default:
		}
	})
	s.UpdateDelivered(1, 1, 1, 1)
	done := make(chan error)
	go func() { done <- s.Commit() }()
	<-entered
	fin := make(chan struct{})
	go func() {
		for i := uint64(2); i < 1000; i++ {
			s.UpdateDelivered(i, i, 1, 1)
			s.UpdateAcks(i, i)
		}
		close(fin)
	}()
	select {
	case <-fin:
	case <-time.After(5 * time.Second):
		t.Fatal("updates waited behind a commit's fsync")
	}
	fsys.SetOnSync(nil)
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// BenchmarkConsumerAcks measures AckSync: each acker acks one delivered message and commits,
// as the server does before it answers; acks/s is what the disk confirms. Consumers commit
// concurrently, through one journal or each with its own fdatasync.
func BenchmarkConsumerAcks(b *testing.B) {
	for _, journal := range []bool{false, true} {
		for _, c := range []struct{ consumers, ackers int }{{1, 1}, {1, 64}, {100, 1}} {
			b.Run(fmt.Sprintf("journal=%v/consumers=%d/ackers=%d", journal, c.consumers, c.ackers), func(b *testing.B) {
				benchConsumerAcks(b, journal, c.consumers, c.ackers)
			})
		}
	}
}

func benchConsumerAcks(b *testing.B, journal bool, consumers, ackers int) {
	dir := b.TempDir()
	var j *Journal
	if journal {
		var err error
		if j, err = OpenJournal(nil, dir, filepath.Join(dir, "journal"), quietLog); err != nil {
			b.Fatal(err)
		}
		defer j.Close()
	}
	per := uint64(b.N/consumers + 1)
	ss := make([]ConsumerStore, consumers)
	for i := range ss {
		s, err := OpenConsumerStore(ConsumerStoreConfig{Dir: filepath.Join(dir, "S", "obs", fmt.Sprintf("C%d", i)),
			Journal: j, AckPolicy: ConsumerAckExplicit, Logf: quietLog})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Stop()
		for k := uint64(1); k <= per; k++ {
			s.UpdateDelivered(uint64(k), uint64(k), 1, int64(k))
		}
		if err := s.Commit(); err != nil {
			b.Fatal(err)
		}
		ss[i] = s
	}
	b.ReportAllocs()
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, s := range ss {
		var seq atomic.Uint64
		for a := 0; a < ackers; a++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := seq.Add(1); k <= per; k = seq.Add(1) {
					if err := s.UpdateAcks(k, k); err != nil {
						b.Error(err)
						return
					}
					if err := s.Commit(); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	b.ReportMetric(float64(per*uint64(consumers))/time.Since(start).Seconds(), "acks/s")
}
