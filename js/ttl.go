package js

import (
	"container/heap"
	"slices"
	"sync"
	"time"

	"github.com/natsd/natsd/filestore"
)

// ttlWheel removes messages whose per-message TTL (Nats-TTL) has passed. Expiries wait in
// a heap with one timer armed for the earliest; removals run on the timer's goroutine,
// never on a reactor or the ingest worker.
type ttlWheel struct {
	s       *stream
	mu      sync.Mutex
	h       ttlHeap
	timer   *time.Timer
	at      int64 // when the timer fires (0: not armed)
	stopped bool
}

type ttlEntry struct {
	at  int64
	seq uint64
}

type ttlHeap []ttlEntry

func (h ttlHeap) Len() int           { return len(h) }
func (h ttlHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h ttlHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ttlHeap) Push(x any)        { *h = append(*h, x.(ttlEntry)) }
func (h *ttlHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newTTLWheel(s *stream) *ttlWheel { return &ttlWheel{s: s} }

// add schedules seq's removal at (unix nanos).
func (w *ttlWheel) add(seq uint64, at int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	heap.Push(&w.h, ttlEntry{at, seq})
	w.armLocked()
}

func (w *ttlWheel) armLocked() {
	if len(w.h) == 0 {
		return
	}
	next := w.h[0].at
	if w.at != 0 && w.at <= next {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.at = next
	w.timer = time.AfterFunc(time.Until(time.Unix(0, next)), w.fire)
}

func (w *ttlWheel) fire() {
	w.mu.Lock()
	w.at = 0
	now := time.Now().UnixNano()
	var due []uint64
	for len(w.h) > 0 && w.h[0].at <= now {
		due = append(due, heap.Pop(&w.h).(ttlEntry).seq)
	}
	stopped := w.stopped
	w.mu.Unlock()
	if stopped {
		return
	}
	if w.s.config().SubjectDeleteMarkerTTL > 0 {
		// A subject's last message leaves a marker (marker.go); in sequence order, as
		// nats-server takes them.
		slices.Sort(due)
		for _, seq := range due {
			if sm, err := w.s.store.LoadMsg(seq); err == nil {
				w.s.expire(seq, sm.Subject, sm.Header)
			}
		}
	} else {
		for _, seq := range due {
			_, _ = w.s.store.RemoveMsg(seq)
		}
	}
	w.mu.Lock()
	if !w.stopped {
		w.armLocked()
	}
	w.mu.Unlock()
}

func (w *ttlWheel) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}

// recovered schedules a stored message's removal if it carries a TTL (recoverTimed).
func (w *ttlWheel) recovered(sm *filestore.StoredMsg) {
	if v, ok := header(sm.Header, hdrTTL); ok {
		if secs, never, valid := parseTTL(v); valid && !never && secs > 0 {
			w.add(sm.Seq, sm.TS+secs*int64(time.Second))
		}
	}
}
