package js

import (
	"sync/atomic"
	"time"
)

// coarseNow is the time to a millisecond, read without a clock call. On virtual machines
// without a fast clock source, time.Now costs a system call, and a consumer took it several
// times per delivery and per ack (12% of a consume benchmark's server CPU). A ticker
// refreshes it every millisecond while it is being read, and stops after a second unread.
func coarseNow() time.Time {
	clk.used.Store(true)
	if !clk.running.Load() && clk.running.CompareAndSwap(false, true) {
		clk.ns.Store(time.Now().UnixNano())
		go clockTick()
	}
	return time.Unix(0, clk.ns.Load())
}

var clk struct {
	ns      atomic.Int64
	used    atomic.Bool
	running atomic.Bool
}

func clockTick() {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	idle := 0
	for range t.C {
		clk.ns.Store(time.Now().UnixNano())
		if clk.used.Swap(false) {
			idle = 0
		} else if idle++; idle > 1000 {
			clk.running.Store(false)
			return
		}
	}
}
