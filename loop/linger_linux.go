package loop

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// lingerAfterAnswer polls the reactor's epoll instance (without taking its events: gnet's
// next epoll_wait sees them) until something is ready or the budget is spent. A wake gnet
// has pending (a task queued in this batch or since) counts as ready: gnet would not show it
// on the epoll instance (gnetWakePending).
func (r *reactor) lingerAfterAnswer() {
	if r.epfd < 0 || r.wakePending == nil || !r.linger.try() {
		return
	}
	fds := [1]unix.PollFd{{Fd: int32(r.epfd), Events: unix.POLLIN}}
	start := time.Now()
	for {
		if atomic.LoadInt32(r.wakePending) != 0 {
			r.linger.record(true)
			return
		}
		n, err := unix.Poll(fds[:], 0)
		if err != nil && err != unix.EINTR {
			return
		}
		if n > 0 {
			r.linger.record(true)
			return
		}
		if time.Since(start) >= r.linger.budget {
			r.linger.record(false)
			return
		}
	}
}
