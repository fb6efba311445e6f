// Package sublist is the subject-interest index: a trie of subscription
// subjects with '*' and '>' wildcards and queue groups, sharded so that
// reactors subscribing on different subjects do not serialise on one lock, and
// generation-stamped so per-reactor L1 caches (Cache) can be validated with
// two atomic loads instead of a lock.
//
// It knows nothing about connections: the subscription type T is whatever the
// owner stores (normally a pointer), compared with ==.
package sublist

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

const (
	tsep = '.'
	pwc  = '*'
	fwc  = '>'

	// DefaultShards is the number of literal shards New creates. Enough that
	// a handful of reactors rarely meet on one lock, few enough that the
	// per-shard overhead (one padded struct) stays negligible.
	DefaultShards = 16
)

var (
	ErrInvalidSubject = errors.New("sublist: invalid subject")
	ErrInvalidQueue   = errors.New("sublist: invalid queue group name")
	ErrNotFound       = errors.New("sublist: subscription not found")
)

// Result is an immutable match result; callers (and caches) share it, so
// never mutate it (nor append to its slices).
type Result[T comparable] struct {
	Plain  []T   // every non-queue subscription matching
	Queues [][]T // one slice per queue group; the caller picks one member per group
}

// snapshot is a node's published, immutable view. qnames runs parallel to
// Queues so that matches spanning several nodes can merge groups by name.
type snapshot[T comparable] struct {
	Result[T]
	qnames []string
}

// indexThreshold is where a member set switches from a linear scan to a map
// index: below it a scan is faster than hashing, above it a million
// subscribers on one subject would make every Remove O(n).
const indexThreshold = 16

// members is a mutable set kept as a slice (so a snapshot is one copy) with
// an optional index for O(1) removal.
type members[T comparable] struct {
	list []T
	idx  map[T]int
}

func (m *members[T]) find(v T) int {
	if m.idx != nil {
		if i, ok := m.idx[v]; ok {
			return i
		}
		return -1
	}
	for i, x := range m.list {
		if x == v {
			return i
		}
	}
	return -1
}

func (m *members[T]) add(v T) bool {
	if m.find(v) >= 0 {
		return false
	}
	m.list = append(m.list, v)
	switch {
	case m.idx != nil:
		m.idx[v] = len(m.list) - 1
	case len(m.list) > indexThreshold:
		m.idx = make(map[T]int, len(m.list)*2)
		for i, x := range m.list {
			m.idx[x] = i
		}
	}
	return true
}

func (m *members[T]) remove(v T) bool {
	i := m.find(v)
	if i < 0 {
		return false
	}
	// Order carries no meaning (the caller picks queue members itself), so
	// swap-remove keeps removal O(1).
	last := len(m.list) - 1
	if i != last {
		m.list[i] = m.list[last]
		if m.idx != nil {
			m.idx[m.list[i]] = i
		}
	}
	var zero T
	m.list[last] = zero // do not pin the removed subscription
	m.list = m.list[:last]
	if m.idx != nil {
		delete(m.idx, v)
		if len(m.list) < indexThreshold/2 {
			m.idx = nil
		}
	}
	// Give memory back after a mass unsubscribe.
	if cap(m.list) > 64 && len(m.list) < cap(m.list)/4 {
		m.list = slices.Clone(m.list)
	}
	return true
}

type node[T comparable] struct {
	next   *level[T]
	plain  members[T]
	queues map[string]*members[T]
	// snap is built lazily by readers (under the shard's read lock, hence
	// atomic) and dropped by writers. Building on read rather than on write
	// keeps Insert O(1) when many subscribers pile onto one subject.
	snap atomic.Pointer[snapshot[T]]
}

func (n *node[T]) hasSubs() bool { return len(n.plain.list) > 0 || len(n.queues) > 0 }

func (n *node[T]) prunable() bool {
	return !n.hasSubs() && (n.next == nil || n.next.empty())
}

// snapshot must be called with the shard lock held (read or write), so the
// mutable sets cannot change underneath the copy. Concurrent readers may both
// build one; they are equal, so whichever store wins is fine.
func (n *node[T]) snapshot() *snapshot[T] {
	if s := n.snap.Load(); s != nil {
		return s
	}
	s := &snapshot[T]{}
	if len(n.plain.list) > 0 {
		s.Plain = slices.Clip(slices.Clone(n.plain.list))
	}
	if len(n.queues) > 0 {
		s.Queues = make([][]T, 0, len(n.queues))
		s.qnames = make([]string, 0, len(n.queues))
		for name, m := range n.queues {
			s.Queues = append(s.Queues, slices.Clip(slices.Clone(m.list)))
			s.qnames = append(s.qnames, name)
		}
	}
	n.snap.Store(s)
	return s
}

type level[T comparable] struct {
	nodes    map[string]*node[T]
	pwc, fwc *node[T]
}

func (l *level[T]) empty() bool { return len(l.nodes) == 0 && l.pwc == nil && l.fwc == nil }

type shard[T comparable] struct {
	mu sync.RWMutex
	// gen is bumped (under mu, after the change and after count) by every
	// Insert/Remove that changed this shard; Cache entries stamped with it are
	// valid while it is unchanged.
	gen   atomic.Uint64
	count atomic.Int64
	root  level[T]
	// Keep shards on separate cache lines: each is hammered by different
	// reactors, and the wildcard shard's gen is read on every cache hit.
	_ [64]byte
}

// Sublist is safe for concurrent use.
type Sublist[T comparable] struct {
	shards []shard[T] // literal shards, then the wildcard shard last
	mask   uint32
	wild   *shard[T]  // subscriptions whose first token is '*' or '>'
	empty  *Result[T] // shared by every match with no interest
}

// New returns a Sublist with DefaultShards literal shards.
func New[T comparable]() *Sublist[T] { return NewSharded[T](DefaultShards) }

// NewSharded returns a Sublist with n literal shards (rounded up to a power
// of two, at least 1) plus the wildcard shard.
func NewSharded[T comparable](n int) *Sublist[T] {
	p := 1
	for p < n {
		p <<= 1
	}
	s := &Sublist[T]{
		shards: make([]shard[T], p+1),
		mask:   uint32(p - 1),
		empty:  &Result[T]{},
	}
	s.wild = &s.shards[p]
	return s
}

// fnv1a hashes the first token; generic so Insert (string) and Match
// ([]byte) agree without conversion.
func fnv1a[S ~string | ~[]byte](b S) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(b); i++ {
		h ^= uint32(b[i])
		h *= 16777619
	}
	return h
}

func firstToken[S ~string | ~[]byte](s S) S {
	for i := 0; i < len(s); i++ {
		if s[i] == tsep {
			return s[:i]
		}
	}
	return s
}

// shardForSub picks the shard that holds a (valid) subscription subject.
func (s *Sublist[T]) shardForSub(subject string) *shard[T] {
	t := firstToken(subject)
	if len(t) == 1 && (t[0] == pwc || t[0] == fwc) {
		return s.wild
	}
	return &s.shards[fnv1a(t)&s.mask]
}

// shardForPub picks the literal shard a publish subject consults (besides
// the wildcard shard).
func (s *Sublist[T]) shardForPub(subject []byte) *shard[T] {
	return &s.shards[fnv1a(firstToken(subject))&s.mask]
}

// Count returns the number of subscriptions.
func (s *Sublist[T]) Count() int {
	var n int64
	for i := range s.shards {
		n += s.shards[i].count.Load()
	}
	return int(n)
}

// Insert adds v under subject (and queue group, if queue is non-empty).
// Inserting the same (subject, queue, v) twice keeps one entry. Insert copies
// the strings it keeps, so callers may pass views of reusable buffers.
func (s *Sublist[T]) Insert(subject, queue string, v T) error {
	if !validSubject(subject, false) {
		return ErrInvalidSubject
	}
	if queue != "" && !validQueue(queue) {
		return ErrInvalidQueue
	}
	sh := s.shardForSub(subject)
	sh.mu.Lock()
	defer sh.mu.Unlock()

	l := &sh.root
	var n *node[T]
	for rest := subject; ; {
		t := rest
		i := strings.IndexByte(rest, tsep)
		if i >= 0 {
			t, rest = rest[:i], rest[i+1:]
		}
		switch {
		case len(t) == 1 && t[0] == pwc:
			if l.pwc == nil {
				l.pwc = &node[T]{}
			}
			n = l.pwc
		case len(t) == 1 && t[0] == fwc:
			if l.fwc == nil {
				l.fwc = &node[T]{}
			}
			n = l.fwc
		default:
			if l.nodes == nil {
				l.nodes = make(map[string]*node[T])
			}
			if n = l.nodes[t]; n == nil {
				n = &node[T]{}
				l.nodes[strings.Clone(t)] = n
			}
		}
		if i < 0 {
			break
		}
		if n.next == nil {
			n.next = &level[T]{}
		}
		l = n.next
	}

	var added bool
	if queue == "" {
		added = n.plain.add(v)
	} else {
		m := n.queues[queue]
		if m == nil {
			if n.queues == nil {
				n.queues = make(map[string]*members[T])
			}
			m = &members[T]{}
			n.queues[strings.Clone(queue)] = m
		}
		added = m.add(v)
	}
	if added {
		n.snap.Store(nil)
		sh.count.Add(1)
		sh.gen.Add(1)
	}
	return nil
}

type pathElem[T comparable] struct {
	l   *level[T]
	tok string
	n   *node[T]
}

// Remove deletes v from subject (and queue group). It returns ErrNotFound if
// that exact entry is absent.
func (s *Sublist[T]) Remove(subject, queue string, v T) error {
	if !validSubject(subject, false) {
		return ErrNotFound
	}
	sh := s.shardForSub(subject)
	sh.mu.Lock()
	defer sh.mu.Unlock()

	var pbuf [16]pathElem[T]
	path := pbuf[:0]
	l := &sh.root
	var n *node[T]
	for rest := subject; ; {
		if l == nil {
			return ErrNotFound
		}
		t := rest
		i := strings.IndexByte(rest, tsep)
		if i >= 0 {
			t, rest = rest[:i], rest[i+1:]
		}
		switch {
		case len(t) == 1 && t[0] == pwc:
			n = l.pwc
		case len(t) == 1 && t[0] == fwc:
			n = l.fwc
		default:
			n = l.nodes[t]
		}
		if n == nil {
			return ErrNotFound
		}
		path = append(path, pathElem[T]{l, t, n})
		if i < 0 {
			break
		}
		l = n.next
	}

	if queue == "" {
		if !n.plain.remove(v) {
			return ErrNotFound
		}
	} else {
		m := n.queues[queue]
		if m == nil || !m.remove(v) {
			return ErrNotFound
		}
		if len(m.list) == 0 {
			delete(n.queues, queue)
			if len(n.queues) == 0 {
				n.queues = nil
			}
		}
	}
	n.snap.Store(nil)
	sh.count.Add(-1)
	sh.gen.Add(1)

	// Prune empty nodes bottom-up so churn on unique subjects (inboxes) does
	// not leave the trie growing forever.
	for i := len(path) - 1; i >= 0; i-- {
		p := path[i]
		if !p.n.prunable() {
			break
		}
		switch {
		case p.l.pwc == p.n:
			p.l.pwc = nil
		case p.l.fwc == p.n:
			p.l.fwc = nil
		default:
			delete(p.l.nodes, p.tok)
		}
		if i > 0 && p.l.empty() {
			path[i-1].n.next = nil
		}
	}
	return nil
}

// Match returns the subscriptions interested in the literal publish subject.
// This is the miss path behind Cache: it takes read locks and may allocate.
func (s *Sublist[T]) Match(subject []byte) *Result[T] {
	r, _, _, _ := s.match(subject)
	return r
}

// match also returns the literal shard consulted and the generations of it
// and of the wildcard shard that the result reflects, for Cache stamping.
func (s *Sublist[T]) match(subject []byte) (res *Result[T], lit *shard[T], gl, gw uint64) {
	lit = s.shardForPub(subject)

	var tbuf [16][]byte
	toks := tbuf[:0]
	// IndexByte (vectorised) rather than a byte loop: subjects that miss the cache are
	// often long and unique (JetStream ack replies, inboxes), and a byte loop splitting
	// them was the largest part of a miss (BenchmarkCacheMatchMissUnique).
	for rest := subject; ; {
		i := bytes.IndexByte(rest, tsep)
		if i == 0 || len(rest) == 0 {
			// Malformed publish subject (empty token): no interest, as
			// in nats-server. The result is state-independent, so any
			// stamps will do.
			return s.empty, lit, lit.gen.Load(), s.wild.gen.Load()
		}
		if i < 0 {
			toks = append(toks, rest)
			break
		}
		toks = append(toks, rest[:i])
		rest = rest[i+1:]
	}

	var sbuf [8]*snapshot[T]
	snaps := sbuf[:0]
	snaps, gl = shardMatch(lit, toks, snaps)
	snaps, gw = shardMatch(s.wild, toks, snaps)
	return s.merge(snaps), lit, gl, gw
}

func shardMatch[T comparable](sh *shard[T], toks [][]byte, out []*snapshot[T]) ([]*snapshot[T], uint64) {
	// An empty shard (the common case for the wildcard shard) is answered
	// without touching its lock, whose reader count would otherwise be a
	// cache line every reactor's misses fight over. gen is loaded before
	// count: any write that lands after the gen load bumps gen past the
	// stamp, so an empty answer can never be validated against a newer state.
	gen := sh.gen.Load()
	if sh.count.Load() == 0 {
		return out, gen
	}
	sh.mu.RLock()
	gen = sh.gen.Load() // exact under the lock: writers bump it only while holding mu
	out = matchLevel(&sh.root, toks, out)
	sh.mu.RUnlock()
	return out, gen
}

func appendNode[T comparable](out []*snapshot[T], n *node[T]) []*snapshot[T] {
	if n.hasSubs() {
		out = append(out, n.snapshot())
	}
	return out
}

// matchLevel walks the literal path iteratively and recurses only into '*'
// branches, collecting snapshots of matching nodes.
func matchLevel[T comparable](l *level[T], toks [][]byte, out []*snapshot[T]) []*snapshot[T] {
	for len(toks) > 0 {
		if l == nil {
			return out
		}
		if l.fwc != nil { // '>' takes one or more tokens, and there is at least one left
			out = appendNode(out, l.fwc)
		}
		rest := toks[1:]
		if p := l.pwc; p != nil {
			if len(rest) == 0 {
				out = appendNode(out, p)
			} else if p.next != nil {
				out = matchLevel(p.next, rest, out)
			}
		}
		n := l.nodes[string(toks[0])]
		if n == nil {
			return out
		}
		if len(rest) == 0 {
			return appendNode(out, n)
		}
		l, toks = n.next, rest
	}
	return out
}

// merge combines node snapshots. A single matching node's snapshot is
// returned as is (it is immutable), so the common literal case allocates
// nothing once the node's snapshot exists.
func (s *Sublist[T]) merge(snaps []*snapshot[T]) *Result[T] {
	switch len(snaps) {
	case 0:
		return s.empty
	case 1:
		return &snaps[0].Result
	}
	r := &Result[T]{}
	np := 0
	for _, sn := range snaps {
		np += len(sn.Plain)
	}
	if np > 0 {
		r.Plain = make([]T, 0, np)
		for _, sn := range snaps {
			r.Plain = append(r.Plain, sn.Plain...)
		}
	}
	// Two passes so every slice is allocated once at its final size: with
	// wildcard-heavy interest the same group often sits on many matching
	// nodes, and growing it node by node dominated the miss path.
	var nbuf [8]string
	var sbuf, kbuf [8]int
	names, sizes, nodes := nbuf[:0], sbuf[:0], kbuf[:0]
	for _, sn := range snaps {
		for i, q := range sn.Queues {
			j := slices.Index(names, sn.qnames[i])
			if j < 0 {
				names = append(names, sn.qnames[i])
				sizes = append(sizes, len(q))
				nodes = append(nodes, 1)
				continue
			}
			sizes[j] += len(q)
			nodes[j]++
		}
	}
	if len(names) > 0 {
		r.Queues = make([][]T, len(names))
		for _, sn := range snaps {
			for i, q := range sn.Queues {
				j := slices.Index(names, sn.qnames[i])
				if nodes[j] == 1 {
					// A group on one node only: share the node's
					// immutable slice.
					r.Queues[j] = q
					continue
				}
				// One group across several matching subjects: one slice, so
				// the caller delivers once per group.
				if r.Queues[j] == nil {
					r.Queues[j] = make([]T, 0, sizes[j])
				}
				r.Queues[j] = append(r.Queues[j], q...)
			}
		}
	}
	return r
}
