package loop

import (
	"time"

	"golang.org/x/sys/unix"
)

// lingerAfterAnswer polls the reactor's epoll instance (without taking its events: gnet's
// next epoll_wait sees them) until something is ready or the budget is spent.
func (r *reactor) lingerAfterAnswer() {
	if r.epfd < 0 || !r.linger.try() {
		return
	}
	fds := [1]unix.PollFd{{Fd: int32(r.epfd), Events: unix.POLLIN}}
	start := time.Now()
	for {
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
