package loop

import (
	"errors"
	"runtime"
	"sync"
	"time"
)

var errStopped = errors.New("loop: reactor stopped")

// serial is a reactor for drivers whose connections are fed by goroutines (netpoll's
// callbacks, internal clients): one goroutine runs tasks one at a time, in order, from an
// unbounded queue, so Execute never blocks its caller (often another reactor).
type serial struct {
	mu       sync.Mutex
	q, spare []func()
	stopped  bool
	sig      chan struct{}
	quit     <-chan struct{} // closing it stops the queue at once, dropping what is queued
	done     chan struct{}
}

// newSerial starts a serial reactor. quit may be nil; closing it stops every serial
// reactor sharing it without running their queues (the driver is going away).
func newSerial(quit <-chan struct{}) *serial {
	x := &serial{sig: make(chan struct{}, 1), quit: quit, done: make(chan struct{})}
	go x.run()
	return x
}

func (x *serial) Execute(task func()) error {
	x.mu.Lock()
	if x.stopped {
		x.mu.Unlock()
		return errStopped
	}
	x.q = append(x.q, task)
	first := len(x.q) == 1
	x.mu.Unlock()
	if first {
		// run takes the whole queue under mu and comes back for more before it waits, so
		// only the task that finds the queue empty has to wake it.
		select {
		case x.sig <- struct{}{}:
		default:
		}
	}
	return nil
}

// waiting reports whether tasks are queued behind the one running (other connections'
// traffic, wakes).
func (x *serial) waiting(*client) bool {
	x.mu.Lock()
	n := len(x.q)
	x.mu.Unlock()
	return n > 0
}

func (x *serial) run() {
	defer close(x.done)
	last := time.Now()
	for {
		x.mu.Lock()
		tasks := x.q
		x.q = x.spare[:0]
		stopped := x.stopped
		x.mu.Unlock()
		for i, t := range tasks {
			t()
			tasks[i] = nil
		}
		x.spare = tasks[:0]
		if len(tasks) > 0 {
			// A queue that never empties never parks this goroutine, and the goroutines its
			// tasks woke (a netpoll flusher with another client's PONG, a waiting pump) wait
			// in this P's run queue until the scheduler preempts it, up to 10 ms later. Step
			// aside every turn, as a reactor goes back to its poller.
			if time.Since(last) > turnTime {
				runtime.Gosched()
				last = time.Now()
			}
			continue
		}
		if stopped {
			return
		}
		select {
		case <-x.sig:
			last = time.Now()
		case <-x.quit:
			x.mu.Lock()
			x.stopped = true
			x.mu.Unlock()
			return
		}
	}
}

// stop runs what is queued, then stops; later Executes fail.
func (x *serial) stop() {
	x.mu.Lock()
	x.stopped = true
	x.mu.Unlock()
	select {
	case x.sig <- struct{}{}:
	default:
	}
	<-x.done
}
