package loop

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// A hostile or stuck client can make the server buffer up to max_pending for it, and a
// stalled publisher a read buffer or two; once such a connection is gone its chunks sit in
// sync.Pools and in dead buffers until the next garbage collection, which an idle server may
// not run for minutes. Closing a connection that held more than reclaimAbove asks for one
// collection and a return of free memory to the OS, debounced so that a stream of such
// closes (an attack that keeps reconnecting) costs little: runs are at least reclaimEvery
// apart, and at least reclaimSpacing times as long as the last one took, which keeps them
// under about 5% of a core whatever the heap's size.
const (
	reclaimAbove   = 4 << 20
	reclaimDelay   = 500 * time.Millisecond
	reclaimEvery   = time.Second
	reclaimSpacing = 20
)

type reclaimer struct {
	mu      sync.Mutex
	pending bool // a run is scheduled
	running bool
	again   bool // a big connection closed while a run was under way
	last    time.Time
	took    time.Duration // how long the last run took
	cycles  uint64        // GC cycles at the last idleCheck (ticker goroutine only)
}

// soon schedules a reclaim unless one is already due.
func (rc *reclaimer) soon() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.running {
		rc.again = true
		return
	}
	rc.scheduleLocked()
}

func (rc *reclaimer) scheduleLocked() {
	if rc.pending {
		return
	}
	rc.pending = true
	wait := reclaimDelay
	if next := rc.last.Add(max(reclaimEvery, reclaimSpacing*rc.took)); time.Until(next) > wait {
		wait = time.Until(next)
	}
	time.AfterFunc(wait, rc.run)
}

func (rc *reclaimer) run() {
	rc.mu.Lock()
	rc.pending, rc.running = false, true
	rc.last = time.Now()
	rc.mu.Unlock()
	// The first collection moves pooled buffers to the pools' victim caches, the second
	// (inside FreeOSMemory) frees them and returns the pages.
	start := time.Now()
	runtime.GC()
	debug.FreeOSMemory()
	rc.mu.Lock()
	rc.took = time.Since(start)
	rc.running = false
	if rc.again {
		rc.again = false
		rc.scheduleLocked()
	}
	rc.mu.Unlock()
}

// The per-close trigger misses garbage that no single big connection held (a reconnecting
// attacker's many read buffers, say). So every idleEvery the engine also looks at the heap:
// if no collection ran since the last look and the heap holds more than idleGarbage beyond
// what was live at the last collection, the server has gone quiet with garbage the runtime
// will not collect on its own for minutes (a busy server collects far more often).
const (
	idleEvery   = 2 * time.Second
	idleGarbage = 32 << 20
)

var idleMetrics = []metrics.Sample{
	{Name: "/gc/heap/live:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/gc/cycles/total:gc-cycles"},
}

// idleCheck runs on the engine's ticker goroutine, every idleEvery.
func (rc *reclaimer) idleCheck() {
	s := make([]metrics.Sample, len(idleMetrics))
	copy(s, idleMetrics)
	metrics.Read(s)
	for _, m := range s {
		if m.Value.Kind() != metrics.KindUint64 {
			return
		}
	}
	live, heap, cycles := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	quiet := cycles == rc.cycles
	rc.cycles = cycles
	if quiet && heap > live+idleGarbage {
		rc.soon()
	}
}
