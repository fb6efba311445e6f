package outbound

import (
	"sync"
	"sync/atomic"
)

// Inbox collects, for one reactor, the connections that producers on other reactors have
// queued frames for. Producers add a whole batch at once and only the first batch since the
// last drain asks for a wake, so a reactor is woken at most once per batch per producer and
// usually once for many.
type Inbox[T any] struct {
	mu    sync.Mutex
	items []T
	awake atomic.Bool
}

// Add appends a producer's batch; it reports whether the caller must wake the owner.
func (in *Inbox[T]) Add(batch []T) (wake bool) {
	in.mu.Lock()
	in.items = append(in.items, batch...)
	in.mu.Unlock()
	return in.awake.CompareAndSwap(false, true)
}

// Drain moves everything queued into dst and re-arms the wake; the owner calls it when woken.
func (in *Inbox[T]) Drain(dst []T) []T {
	// Re-arm before taking the items: an Add racing with us either lands in this drain or
	// sees awake=false and wakes us again, never neither.
	in.awake.Store(false)
	in.mu.Lock()
	dst = append(dst, in.items...)
	var zero T
	for i := range in.items {
		in.items[i] = zero
	}
	in.items = in.items[:0]
	in.mu.Unlock()
	return dst
}
