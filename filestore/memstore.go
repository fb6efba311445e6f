package filestore

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/natsd/natsd/sublist"
)

// MemStore is the in-memory Store (storage: memory). Nothing is persisted,
// so a store is "durable" the moment it is in the map and callbacks run
// inline.
type MemStore struct {
	mu       sync.RWMutex
	sizeOf   func(subj string, hdr, msg []byte) uint64 // memSize; tests comparing with a file store swap it
	lim      Limits
	msgs     memIndex
	subjects subjIndex
	first    uint64
	last     uint64
	bytes    uint64
	lastTS   int64
	closed   bool
	timer    *time.Timer
	timerGen uint64 // a timer armed before UpdateLimits changed MaxAge finds it changed
	rep      reporter
}

type memMsg struct {
	m    StoredMsg
	size uint64
}

// maxMemGap is the largest jump StoreAt may make in a memory store that holds messages.
const maxMemGap = 1 << 22

// memIndex holds the messages by sequence in fixed-size chunks over [base, end): stores fill
// the last chunk, lookups index, removals clear a slot, and a chunk goes once it is empty and
// first. Unlike a map it neither hashes nor allocates per message, and unlike one growing
// slice it never copies what it holds.
type memIndex struct {
	base   uint64 // seq of chunks[0].slots[0]
	end    uint64 // one past the last slot in use
	chunks []*memChunk
	n      int // live messages
}

const memChunkLen = 256

type memChunk struct {
	live  int
	slots [memChunkLen]memMsg // Seq 0 marks an empty slot
}

func (x *memIndex) slot(seq uint64) *memMsg {
	off := seq - x.base
	return &x.chunks[off/memChunkLen].slots[off%memChunkLen]
}

func (x *memIndex) get(seq uint64) *memMsg {
	if seq < x.base || seq >= x.end {
		return nil
	}
	if m := x.slot(seq); m.m.Seq != 0 {
		return m
	}
	return nil
}

// put stores m at seq, which is past every sequence held.
func (x *memIndex) put(seq uint64, m memMsg) {
	if x.n == 0 {
		x.base, x.end, x.chunks = seq, seq, x.chunks[:0]
	}
	for need := (seq-x.base)/memChunkLen + 1; uint64(len(x.chunks)) < need; {
		x.chunks = append(x.chunks, &memChunk{})
	}
	*x.slot(seq) = m
	x.chunks[(seq-x.base)/memChunkLen].live++
	x.end = seq + 1
	x.n++
}

func (x *memIndex) del(seq uint64) {
	m := x.get(seq)
	if m == nil {
		return
	}
	*m = memMsg{}
	x.n--
	x.chunks[(seq-x.base)/memChunkLen].live--
	if x.n == 0 {
		x.chunks, x.base, x.end = nil, 0, 0
		return
	}
	// Drop emptied chunks at the front, so that a stream consumed from the front stays small,
	for len(x.chunks) > 0 && x.chunks[0].live == 0 {
		x.chunks[0] = nil
		x.chunks = x.chunks[1:]
		x.base += memChunkLen
	}
	// and pull end back over an emptied tail, so that the next store after a truncation
	// lands at its sequence.
	for x.end > x.base && x.slot(x.end-1).m.Seq == 0 {
		x.end--
	}
	for keep := (x.end - x.base + memChunkLen - 1) / memChunkLen; uint64(len(x.chunks)) > keep; {
		x.chunks[len(x.chunks)-1] = nil
		x.chunks = x.chunks[:len(x.chunks)-1]
	}
}

var _ Store = (*MemStore)(nil)

func NewMemStore(lim Limits) *MemStore {
	return &MemStore{sizeOf: memSize, lim: lim, first: 1}
}

func (ms *MemStore) StoreAsync(subj string, hdr, msg []byte, cb func(uint64, int64, error)) {
	seq, ts, err := ms.StoreMsg(subj, hdr, msg)
	if cb != nil {
		cb(seq, ts, err)
	}
}

// StoreAsyncHeld is StoreAsync: the memory store has no writer to hold records for.
func (ms *MemStore) StoreAsyncHeld(subj string, hdr, msg []byte, cb func(uint64, int64, error)) {
	ms.StoreAsync(subj, hdr, msg, cb)
}

// Flush has nothing to do: every store call completes before it returns.
func (ms *MemStore) Flush(bool) {}

func (ms *MemStore) StoreMsg(subj string, hdr, msg []byte) (uint64, int64, error) {
	return ms.store(0, 0, subj, hdr, msg)
}

func (ms *MemStore) StoreAtAsync(seq uint64, ts int64, subj string, hdr, msg []byte, cb func(uint64, int64, error)) {
	if err := ms.StoreAt(seq, ts, subj, hdr, msg); err != nil {
		cb(0, 0, err)
		return
	}
	cb(seq, ts, nil)
}

func (ms *MemStore) StoreAt(seq uint64, ts int64, subj string, hdr, msg []byte) error {
	if seq == 0 {
		return ErrSeqOrder
	}
	_, _, err := ms.store(seq, ts, subj, hdr, msg)
	return err
}

func (ms *MemStore) store(at uint64, ats int64, subj string, hdr, msg []byte) (uint64, int64, error) {
	size := ms.sizeOf(subj, hdr, msg)
	ms.mu.Lock()
	defer ms.unlock()
	if err := checkMsg(ms.lim.MaxMsgSize, subj, hdr, msg); err != nil {
		return 0, 0, err
	}
	if ms.closed {
		return 0, 0, ErrClosed
	}
	l := &ms.lim
	n := uint64(ms.msgs.n)
	ss := ms.subjects.get(subj)
	if l.Discard == DiscardNew {
		if l.MaxMsgs > 0 && n+1 > uint64(l.MaxMsgs) {
			return 0, 0, ErrMaxMsgs
		}
		if l.MaxBytes > 0 && ms.bytes+size > uint64(l.MaxBytes) {
			return 0, 0, ErrMaxBytes
		}
	}
	if l.DiscardNewPerSubject && l.MaxMsgsPerSubject > 0 && ss != nil && ss.msgs >= uint64(l.MaxMsgsPerSubject) {
		return 0, 0, ErrMaxMsgsPerSubj
	}
	if at != 0 && at <= ms.last {
		return 0, 0, ErrSeqOrder
	}
	if at != 0 && ms.msgs.n > 0 && at-ms.last > maxMemGap {
		// The index is dense over the span it holds: a jump this large would cost a slot
		// per skipped sequence.
		return 0, 0, ErrMemGap
	}
	if ss == nil {
		// The caller's string may share memory it reuses; every message of
		// the subject keeps this copy.
		ss = ms.subjects.add(strings.Clone(subj))
	}
	now := stampNow()
	if at != 0 {
		now = ats
		ms.last = at - 1
	}
	seq := ms.last + 1
	ts := max(now, ms.lastTS)
	ms.lastTS = ts
	ms.msgs.put(seq, memMsg{m: StoredMsg{Subject: ss.name, Header: clone(hdr), Data: clone(msg), Seq: seq, TS: ts}, size: size})
	if n == 0 {
		ms.first = seq
	}
	ms.last = seq
	ms.bytes += size
	ms.rep.add(1, int64(size), seq, subj)
	ss.add(seq)
	if ss.sparse() {
		ss.relist(func(after uint64) uint64 { return ms.nextOf(ss, after) })
	}
	ms.enforce(ss)
	ms.armExpiry()
	return seq, ts, nil
}

func (ms *MemStore) enforce(ss *subjState) {
	l := &ms.lim
	if l.MaxMsgsPerSubject > 0 && !l.DiscardNewPerSubject {
		ms.trimSubject(ss, uint64(l.MaxMsgsPerSubject))
	}
	ms.trimOldest()
}

func (ms *MemStore) trimSubject(ss *subjState, keep uint64) {
	for ss.msgs > keep && ms.remove(ms.nextOf(ss, ss.first-1)) {
	}
}

func (ms *MemStore) trimOldest() {
	l := &ms.lim
	if l.Discard != DiscardOld {
		return
	}
	for ms.msgs.n > 0 && ((l.MaxMsgs > 0 && uint64(ms.msgs.n) > uint64(l.MaxMsgs)) || (l.MaxBytes > 0 && ms.bytes > uint64(l.MaxBytes))) {
		ms.remove(ms.first)
	}
}

func (ms *MemStore) UpdateLimits(l Limits) error {
	ms.mu.Lock()
	defer ms.unlock()
	if ms.closed {
		return ErrClosed
	}
	old := ms.lim
	ms.lim = l
	for _, ss := range subjectsOver(&ms.subjects, old, l) {
		ms.trimSubject(ss, uint64(l.MaxMsgsPerSubject))
	}
	ms.trimOldest()
	if l.MaxAge != old.MaxAge && ms.timer != nil {
		ms.timer.Stop()
		ms.timer = nil
		ms.timerGen++
	}
	ms.armExpiry()
	return nil
}

func (ms *MemStore) Truncate(seq uint64) error {
	ms.mu.Lock()
	defer ms.unlock()
	if ms.closed {
		return ErrClosed
	}
	if seq >= ms.last {
		return nil
	}
	if m := ms.msgs.get(seq); m != nil {
		ms.lastTS = m.m.TS
	}
	ms.rep.inBulk(func() {
		for x := ms.last; x > seq && ms.msgs.n > 0; x-- {
			ms.remove(x)
		}
	})
	ms.last = seq
	if ms.msgs.n == 0 {
		ms.first = seq + 1
	}
	return nil
}

func (ms *MemStore) RegisterStorageUpdates(fn StorageUpdate) {
	ms.mu.Lock()
	defer ms.unlock()
	ms.rep.fn = fn
	if ms.bytes > 0 {
		ms.rep.add(0, int64(ms.bytes), 0, "")
	}
}

// unlock releases the lock, then reports what the locked section changed,
// so that the function told may call back into the store.
func (ms *MemStore) unlock() {
	fn, ups := ms.rep.fn, ms.rep.take()
	ms.mu.Unlock()
	deliver(fn, ups)
}

// nextOf returns subject ss's first message after sequence after, or 0 if
// there is none up to its last.
func (ms *MemStore) nextOf(ss *subjState, after uint64) uint64 {
	for seq := after + 1; seq <= ss.last; seq++ {
		if m := ms.msgs.get(seq); m != nil && m.m.Subject == ss.name {
			return seq
		}
	}
	return 0
}

func (ms *MemStore) remove(seq uint64) bool {
	mp := ms.msgs.get(seq)
	if mp == nil {
		return false
	}
	m := *mp
	ms.msgs.del(seq)
	ms.bytes -= m.size
	ms.rep.add(-1, -int64(m.size), seq, m.m.Subject)
	ss := ms.subjects.get(m.m.Subject)
	ss.remove(seq, func(before uint64) uint64 {
		for p := before - 1; p > ss.first; p-- {
			if pm := ms.msgs.get(p); pm != nil && pm.m.Subject == ss.name {
				return p
			}
		}
		return ss.first
	})
	if ss.msgs == 0 {
		ms.subjects.drop(ss)
	}
	if ms.msgs.n == 0 {
		ms.first = ms.last + 1
	} else if seq == ms.first {
		for ms.first++; ms.msgs.get(ms.first) == nil; ms.first++ {
		}
	}
	return true
}

func (ms *MemStore) armExpiry() {
	if ms.lim.MaxAge <= 0 || ms.timer != nil || ms.msgs.n == 0 {
		return
	}
	d := time.Duration(ms.msgs.get(ms.first).m.TS + int64(ms.lim.MaxAge) - time.Now().UnixNano())
	gen := ms.timerGen
	ms.timer = time.AfterFunc(max(d, time.Millisecond), func() { ms.expire(gen) })
}

func (ms *MemStore) expire(gen uint64) {
	ms.mu.Lock()
	defer ms.unlock()
	if gen != ms.timerGen {
		return
	}
	ms.timer = nil
	if ms.closed {
		return
	}
	cutoff := time.Now().UnixNano() - int64(ms.lim.MaxAge)
	for ms.msgs.n > 0 && ms.msgs.get(ms.first).m.TS <= cutoff {
		ms.remove(ms.first)
	}
	ms.armExpiry()
}

func (ms *MemStore) SkipMsgs(n uint64) (uint64, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if n == 0 {
		n = 1
	}
	first := ms.last + 1
	ms.last += n
	ms.lastTS = max(stampNow(), ms.lastTS)
	if ms.msgs.n == 0 {
		ms.first = ms.last + 1
	}
	return first, nil
}

// WaitDurable returns at once: a memory store's messages are readable once stored.
func (ms *MemStore) WaitDurable(uint64) {}

func (ms *MemStore) LoadMsg(seq uint64) (*StoredMsg, error) {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	if seq > ms.last {
		return nil, ErrEOF
	}
	m := ms.msgs.get(seq)
	if m == nil {
		return nil, ErrNotFound
	}
	return copyMsg(&m.m), nil
}

// copyOf is copyMsg into mb.
func (mb *MsgBuf) copyOf(m *StoredMsg) *StoredMsg {
	mb.StoredMsg = *m
	mb.setBody(m.Header, m.Data)
	return &mb.StoredMsg
}

func copyMsg(m *StoredMsg) *StoredMsg {
	c := *m
	c.Header, c.Data = clone(m.Header), clone(m.Data)
	return &c
}

func (ms *MemStore) LoadLastMsg(filter string) (*StoredMsg, error) {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	var seq uint64
	switch {
	case matchesAll(filter):
		for seq = ms.last; seq >= ms.first && seq > 0 && ms.msgs.get(seq) == nil; seq-- {
		}
	default:
		eachSubject(&ms.subjects, filter, func(ss *subjState) { seq = max(seq, ss.last) })
	}
	m := ms.msgs.get(seq)
	if m == nil {
		return nil, ErrNotFound
	}
	return copyMsg(&m.m), nil
}

func (ms *MemStore) TryLoadLastMsg(subject string) (*StoredMsg, error) {
	if matchesAll(subject) || sublist.IsWildcard(subject) || !ms.mu.TryRLock() {
		return nil, ErrWouldBlock
	}
	defer ms.mu.RUnlock()
	var m *memMsg
	if ss := ms.subjects.get(subject); ss != nil {
		m = ms.msgs.get(ss.last)
	}
	if m == nil {
		return nil, ErrNotFound
	}
	return copyMsg(&m.m), nil
}

func (ms *MemStore) LoadNextMsg(filter string, start uint64) (*StoredMsg, error) {
	return ms.loadNext(nil, filter, start)
}

func (ms *MemStore) LoadNextMsgInto(mb *MsgBuf, filter string, start uint64) (*StoredMsg, error) {
	return ms.loadNext(mb, filter, start)
}

func (ms *MemStore) loadNext(mb *MsgBuf, filter string, start uint64) (*StoredMsg, error) {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	start = max(start, ms.first)
	all, wild := matchesAll(filter), sublist.IsWildcard(filter)
	if !all && !wild {
		ss := ms.subjects.get(filter)
		if ss == nil {
			return nil, ErrEOF
		}
		start = max(start, ss.first)
	}
	for seq := start; seq <= ms.last; seq++ {
		m := ms.msgs.get(seq)
		if m == nil {
			continue
		}
		if all || (wild && sublist.MatchFilter(m.m.Subject, filter)) || m.m.Subject == filter {
			if mb != nil {
				return mb.copyOf(&m.m), nil
			}
			return copyMsg(&m.m), nil
		}
	}
	return nil, ErrEOF
}

func (ms *MemStore) FilteredState(filter string, start uint64) SimpleState {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	var st SimpleState
	start = max(start, ms.first)
	all, wild := matchesAll(filter), sublist.IsWildcard(filter)
	if !all && !wild {
		ss := ms.subjects.get(filter)
		if ss == nil {
			return st
		}
		if start <= ss.first { // all of them; ss.first is only a lower bound of the first
			for seq := ss.first; seq <= ss.last; seq++ {
				if m := ms.msgs.get(seq); m != nil && m.m.Subject == filter {
					st.add(ss.msgs, seq, ss.last)
					break
				}
			}
			return st
		}
	}
	for seq := start; seq <= ms.last; seq++ {
		if m := ms.msgs.get(seq); m != nil && (all || m.m.Subject == filter || (wild && sublist.MatchFilter(m.m.Subject, filter))) {
			st.add(1, seq, seq)
		}
	}
	return st
}

func (ms *MemStore) RemoveMsg(seq uint64) (bool, error) {
	ms.mu.Lock()
	defer ms.unlock()
	return ms.remove(seq), nil
}

func (ms *MemStore) Purge() (uint64, error) {
	ms.mu.Lock()
	defer ms.unlock()
	n := uint64(ms.msgs.n)
	if n == 1 {
		m := ms.msgs.get(ms.first)
		ms.rep.add(-1, -int64(m.size), ms.first, m.m.Subject)
	} else if n > 1 {
		ms.rep.add(-int64(n), -int64(ms.bytes), 0, "")
	}
	ms.msgs = memIndex{}
	ms.subjects = subjIndex{}
	ms.bytes = 0
	ms.first = ms.last + 1
	return n, nil
}

func (ms *MemStore) PurgeSubject(filter string) (uint64, error) {
	return ms.PurgeEx(filter, 0, 0)
}

func (ms *MemStore) PurgeEx(filter string, below, keep uint64) (uint64, error) {
	all := matchesAll(filter)
	switch {
	case below == 1:
		return 0, nil
	case all && keep == 0 && below == 0:
		return ms.Purge()
	case all && below > 1:
		return ms.Compact(below)
	}
	if filter == "" {
		filter = ">"
	}
	ms.mu.Lock()
	defer ms.unlock()
	var total, lo, hi uint64
	eachSubject(&ms.subjects, filter, func(ss *subjState) {
		if total == 0 || ss.first < lo {
			lo = ss.first
		}
		total += ss.msgs
		hi = max(hi, ss.last)
	})
	if total == 0 || (keep > 0 && keep >= total) {
		return 0, nil
	}
	quota := total - keep
	if below > 0 {
		hi = min(hi, below-1)
	}
	wild := sublist.IsWildcard(filter)
	var n uint64
	ms.rep.inBulk(func() {
		for seq := max(lo, ms.first); seq <= hi && n < quota; seq++ {
			if m := ms.msgs.get(seq); m != nil && (all || m.m.Subject == filter || (wild && sublist.MatchFilter(m.m.Subject, filter))) {
				ms.remove(seq)
				n++
			}
		}
	})
	return n, nil
}

func (ms *MemStore) Compact(seq uint64) (uint64, error) {
	ms.mu.Lock()
	defer ms.unlock()
	var n uint64
	ms.rep.inBulk(func() {
		for s := ms.first; s < seq && s <= ms.last; s++ {
			if ms.remove(s) {
				n++
			}
		}
	})
	if seq > ms.last+1 {
		ms.last = seq - 1
		if ms.lastTS == 0 {
			ms.lastTS = stampNow() // as the file store, which stamps its floor marker
		}
	}
	if ms.msgs.n == 0 {
		ms.first = ms.last + 1
	}
	return n, nil
}

func (ms *MemStore) GetSeqFromTime(t time.Time) uint64 {
	ts := t.UnixNano()
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	// Stamps never go back, so "the first message from x on is stamped at
	// ts or later (or there is none)" holds for every x past some point:
	// search for it.
	end := ms.last + 1
	next := func(x uint64) *memMsg {
		for ; x < end; x++ {
			if m := ms.msgs.get(x); m != nil {
				return m
			}
		}
		return nil
	}
	x := ms.first + uint64(sort.Search(int(end-ms.first), func(i int) bool {
		m := next(ms.first + uint64(i))
		return m == nil || m.m.TS >= ts
	}))
	if m := next(x); m != nil {
		return m.m.Seq
	}
	return end
}

func (ms *MemStore) MultiLastSeqs(filters []string, maxSeq uint64, maxAllowed int) ([]uint64, error) {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	if maxSeq == 0 {
		maxSeq = ms.last
	}
	return multiLast(&ms.subjects, filters, maxAllowed, func(ss *subjState) uint64 {
		upTo := min(maxSeq, ss.last)
		if ss.tracked {
			var buf [2]uint64
			return lastListed(ss.list(&buf), upTo)
		}
		for seq := upTo; seq >= ss.first && seq > 0; seq-- {
			if m := ms.msgs.get(seq); m != nil && m.m.Subject == ss.name {
				return seq
			}
		}
		return 0
	})
}

func (ms *MemStore) SubjectsState(filter string) map[string]SimpleState {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	if filter == "" {
		filter = ">"
	}
	var st map[string]SimpleState
	eachSubject(&ms.subjects, filter, func(ss *subjState) {
		if st == nil {
			st = map[string]SimpleState{}
		}
		st[ss.name] = SimpleState{Msgs: ss.msgs, First: ms.nextOf(ss, ss.first-1), Last: ss.last}
	})
	return st
}

func (ms *MemStore) State() State {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	st := ms.stateLocked()
	st.Subjects = make(map[string]uint64, ms.subjects.len())
	ms.subjects.all(func(ss *subjState) { st.Subjects[ss.name] = ss.msgs })
	return st
}

func (ms *MemStore) FastState() State {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	return ms.stateLocked()
}

func (ms *MemStore) stateLocked() State {
	n := uint64(ms.msgs.n)
	st := State{Msgs: n, Bytes: ms.bytes, FirstSeq: ms.first, LastSeq: ms.last, LastTS: ms.lastTS,
		NumSubjects: ms.subjects.len()}
	if n > 0 {
		st.FirstTS = ms.msgs.get(ms.first).m.TS
		st.Deleted = ms.last - ms.first + 1 - n
	}
	return st
}

func (ms *MemStore) Lost() LostInfo { return LostInfo{} }

// StopForRemoval is Stop: the memory store has no files.
func (ms *MemStore) StopForRemoval() error { return ms.Stop() }

func (ms *MemStore) Stop() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.closed = true
	if ms.timer != nil {
		ms.timer.Stop()
	}
	return nil
}
