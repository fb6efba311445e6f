package loop

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// A hostile or stuck client can make the server buffer up to max_pending for it, and a
// stalled publisher a read buffer or two; once such a connection is gone its chunks sit in
// sync.Pools and in dead buffers until the next garbage collection, which an idle server may
// not run for minutes. Closing a connection that held more than reclaimAbove asks for one
// collection and a return of free memory to the OS, debounced so that a stream of such
// closes (an attack that keeps reconnecting) costs one every reclaimEvery at most.
const (
	reclaimAbove = 4 << 20
	reclaimDelay = 500 * time.Millisecond
	reclaimEvery = 5 * time.Second
)

type reclaimer struct {
	mu      sync.Mutex
	pending bool // a run is scheduled
	running bool
	again   bool // a big connection closed while a run was under way
	last    time.Time
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
	if next := rc.last.Add(reclaimEvery); time.Until(next) > wait {
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
	runtime.GC()
	debug.FreeOSMemory()
	rc.mu.Lock()
	rc.running = false
	if rc.again {
		rc.again = false
		rc.scheduleLocked()
	}
	rc.mu.Unlock()
}
