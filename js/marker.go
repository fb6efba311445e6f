package js

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/loop"
)

// Subject delete markers (subject_delete_marker_ttl). When such a stream loses the last
// message of a subject to max_age or to its per-message TTL, nats-server does not just
// remove it: it stores in its place a marker on that subject, with no body and the headers
// Nats-Marker-Reason: MaxAge, Nats-TTL: <the marker TTL> and Nats-Rollup: sub, so that
// watchers (a KV bucket's LimitMarkerTTL) see the subject go. The roll-up removes the
// expired message; the marker expires in turn (by its TTL or max_age) and is then removed
// without a marker of its own, as is a KV purge marker (KV-Operation: PURGE).
//
// The store enforces max_age by itself for other streams; for a stream with markers js
// does it (the ager below), one message at a time as nats-server does, since each removal
// needs to know whether it took a subject's last message. Markers are stored on the
// stream's ingest worker, in order with the publishes, through the roll-up path.

const (
	hdrMarkerReason    = "Nats-Marker-Reason"
	hdrKVOperation     = "KV-Operation"
	markerReasonMaxAge = "MaxAge"
)

// isDeleteMarker reports whether a stored message is itself a marker: a subject delete
// marker or a KV purge marker (nats-server's isSubjectDeleteMarker).
func isDeleteMarker(hdr []byte) bool {
	if len(hdr) == 0 {
		return false
	}
	if v, _ := header(hdr, hdrMarkerReason); len(v) > 0 {
		return true
	}
	v, _ := header(hdr, hdrKVOperation)
	return bytes.Equal(v, []byte("PURGE"))
}

// markerHeader is the header block of a marker left with the given TTL, byte for byte as
// nats-server writes it (the TTL counts whole seconds, as a Go duration).
func markerHeader(ttl time.Duration) []byte {
	d := time.Duration(int64(ttl.Seconds())) * time.Second
	return []byte("NATS/1.0\r\n" + hdrMarkerReason + ": " + markerReasonMaxAge + "\r\n" +
		hdrTTL + ": " + d.String() + "\r\n" + hdrRollup + ": " + rollupSubject + "\r\n\r\n")
}

// raiseTTL applies nats-server's floor on per-message TTLs in a stream with markers: a TTL
// below the marker TTL is raised to it (the header rewritten in whole seconds), unless the
// stream keeps one message per subject, so that a marker is never outlived by nothing.
func raiseTTL(cfg *StreamConfig, hdr []byte, ttl int64) ([]byte, int64) {
	if ttl <= 0 || cfg.SubjectDeleteMarkerTTL <= 0 || cfg.MaxMsgsPer == 1 {
		return hdr, ttl
	}
	if min := int64(cfg.SubjectDeleteMarkerTTL.Seconds()); ttl < min {
		return appendHeader(removeHeader(hdr, func(k string) bool { return k == hdrTTL }), hdrTTL, strconv.FormatInt(min, 10)), min
	}
	return hdr, ttl
}

// markers tracks the expired messages whose marker is queued on the ingest worker, so
// that an expiry pass running meanwhile does not queue another.
type markers struct {
	mu      sync.Mutex
	pending map[uint64]struct{}
}

// expire removes an expired message of a stream with markers, or, when it is its
// subject's last and not a marker itself, queues the marker that replaces it.
func (s *stream) expire(seq uint64, subj string, hdr []byte) {
	if isDeleteMarker(hdr) || s.store.FilteredState(subj, 0).Msgs > 1 {
		_, _ = s.store.RemoveMsg(seq)
		return
	}
	s.mk.mu.Lock()
	if _, ok := s.mk.pending[seq]; ok {
		s.mk.mu.Unlock()
		return
	}
	if s.mk.pending == nil {
		s.mk.pending = map[uint64]struct{}{}
	}
	s.mk.pending[seq] = struct{}{}
	s.mk.mu.Unlock()
	s.ic.Enqueue(func(*loop.WorkMsg) { s.writeMarker(seq, subj) }, loop.WorkMsg{Subject: subj})
}

// writeMarker runs on the ingest worker: it stores the marker for seq's subject, whose
// roll-up removes seq. A message that has meanwhile gone is left alone; one that is no
// longer its subject's last is only removed.
func (s *stream) writeMarker(seq uint64, subj string) {
	defer func() {
		s.mk.mu.Lock()
		delete(s.mk.pending, seq)
		s.mk.mu.Unlock()
	}()
	if s.closed.Load() {
		return
	}
	cfg := s.config()
	s.settle()
	if _, err := s.store.LoadMsg(seq); err != nil {
		return
	}
	if cfg.SubjectDeleteMarkerTTL <= 0 || s.store.FilteredState(subj, 0).Msgs > 1 {
		_, _ = s.store.RemoveMsg(seq)
		return
	}
	ttl := int64(cfg.SubjectDeleteMarkerTTL.Seconds())
	if err := s.storeRollup(cfg, subj, "", "", rollupSubject, markerHeader(cfg.SubjectDeleteMarkerTTL), nil, ttl); err != nil {
		_, _ = s.store.RemoveMsg(seq) // the message still expires
	}
}

// ager enforces max_age for a stream with markers (the store's own expiry is off for it):
// one timer, armed for the oldest message's expiry, whose pass expires every message
// past max_age in sequence order.
type ager struct {
	s       *stream
	mu      sync.Mutex
	timer   *time.Timer
	at      int64 // when the timer fires (0: not armed)
	armed   atomic.Bool
	stopped bool
}

// agedByJS reports whether js, not the store, expires cfg's messages by age.
func agedByJS(cfg *StreamConfig) bool { return cfg.MaxAge > 0 && cfg.SubjectDeleteMarkerTTL > 0 }

// stored arms the timer, if it is not, for a message just stored.
func (g *ager) stored() {
	if g.armed.Load() {
		return
	}
	if cfg := g.s.config(); agedByJS(cfg) {
		g.arm(time.Now().UnixNano() + int64(cfg.MaxAge))
	}
}

// kick runs a pass soon (a stream opened or its configuration changed).
func (g *ager) kick() {
	if agedByJS(g.s.config()) {
		g.arm(time.Now().UnixNano())
	}
}

func (g *ager) arm(at int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || (g.at != 0 && g.at <= at) {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.at = at
	g.armed.Store(true)
	g.timer = time.AfterFunc(max(time.Until(time.Unix(0, at)), time.Millisecond), g.fire)
}

func (g *ager) fire() {
	g.mu.Lock()
	g.at = 0
	g.armed.Store(false)
	stopped := g.stopped
	g.mu.Unlock()
	s := g.s
	cfg := s.config()
	if stopped || s.closed.Load() || !agedByJS(cfg) {
		return
	}
	maxAge := int64(cfg.MaxAge)
	cutoff := time.Now().UnixNano() - maxAge
	var next int64
	st := s.store.FastState()
	for seq := st.FirstSeq; seq != 0 && seq <= st.LastSeq; {
		sm, err := s.store.LoadNextMsg("", seq)
		if err != nil {
			break
		}
		seq = sm.Seq + 1
		if sm.TS > cutoff {
			next = sm.TS + maxAge
			break
		}
		if v, ok := header(sm.Header, hdrTTL); ok {
			if _, never, valid := parseTTL(v); valid && never {
				continue // "never" outlives max_age
			}
		}
		s.expire(sm.Seq, sm.Subject, sm.Header)
	}
	if next != 0 {
		g.arm(next)
	}
}

func (g *ager) stop() {
	g.mu.Lock()
	g.stopped = true
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
}
