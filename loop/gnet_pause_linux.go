//go:build linux

package loop

import (
	"os"
	"reflect"
	"strconv"
	"unsafe"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// gnet offers no way to stop reading a connection: its loop reads whatever epoll reports
// readable into an elastic buffer that grows without bound, so a publisher the server is
// holding back (a stalled fast producer, a CONNECT being verified) could make it hold any
// amount. natsd therefore changes the connection's epoll interest itself. gnet registers a
// connection with its fd as the event's data and EPOLLIN|EPOLLPRI, plus EPOLLOUT while its
// outbound buffer holds bytes (level-triggered), so an EPOLL_CTL_MOD that drops EPOLLIN keeps
// everything else gnet relies on; errors and hang-ups are reported whatever the mask.
//
// gnet restores EPOLLIN on its own in two places: when a write leaves bytes in its outbound
// buffer (ModReadWrite, inside our Writev) and when its flush empties that buffer (ModRead).
// gnetConn re-applies the pause after each Writev and at each OnTraffic, so at most one read
// (the reactor's read buffer) slips in per restore.

// gnetEpollFD finds the epoll instance of gc's event loop and the eventfd gnet wakes it
// with. gnet keeps both unexported (conn.loop.poller.fd and .efd); they are read once per
// loop, and checked to be what they should be, so that a gnet upgrade that moves them
// disables pausing (logged) instead of misdirecting epoll_ctl. TestReadPause fails if that
// happens.
func gnetEpollFD(gc gnet.Conn) (epfd, efd int) {
	v := reflect.ValueOf(gc)
	for _, name := range []string{"loop", "poller"} {
		if v = field(v, name); !v.IsValid() {
			return -1, -1
		}
	}
	fd, ev := field(v, "fd"), field(v, "efd")
	if !fd.IsValid() || !ev.IsValid() || fd.Kind() != reflect.Int || ev.Kind() != reflect.Int {
		return -1, -1
	}
	epfd, efd = int(fd.Int()), int(ev.Int())
	if fdKind(epfd) != "anon_inode:[eventpoll]" || fdKind(efd) != "anon_inode:[eventfd]" {
		return -1, -1
	}
	return epfd, efd
}

// gnetWakePending finds the flag gnet's poller keeps while a wake of its loop is pending
// (conn.loop.poller.wakeupCall: set when a task is queued, cleared once the loop has run its
// tasks). gnet runs a batch's tasks only after its sockets, and writes its eventfd only when
// the flag goes from clear to set, so a reactor lingering in a socket's callback cannot see a
// wake that came in the same batch, or one queued since, on the epoll instance: it reads the
// flag instead (linger_linux.go). nil if gnet no longer has it: the reactor then never lingers.
func gnetWakePending(gc gnet.Conn) *int32 {
	v := reflect.ValueOf(gc)
	for _, name := range []string{"loop", "poller"} {
		if v = field(v, name); !v.IsValid() {
			return nil
		}
	}
	f := field(v, "wakeupCall")
	if !f.IsValid() || f.Kind() != reflect.Int32 || !f.CanAddr() {
		return nil
	}
	return (*int32)(unsafe.Pointer(f.UnsafeAddr()))
}

// field dereferences v and returns its field name (invalid if there is none).
func field(v reflect.Value, name string) reflect.Value {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}

func fdKind(fd int) string {
	link, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return link
}

// applyInterest sets the connection's epoll mask to what gnet expects, less EPOLLIN while
// reading is paused.
func (g *gnetConn) applyInterest() {
	if g.epfd < 0 {
		return
	}
	var ev uint32
	if !g.paused {
		ev = unix.EPOLLIN | unix.EPOLLPRI
	}
	if g.Conn.OutboundBuffered() > 0 {
		ev |= unix.EPOLLOUT
	}
	fd := g.Conn.Fd()
	_ = unix.EpollCtl(g.epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: ev, Fd: int32(fd)})
}

// epollWaiting peeks at the loop's ready list for a socket or task other than c's and the
// kicker's. Connections are level-triggered, so gnet's next poll sees them again; gnet's
// eventfd is edge-triggered, so an edge the peek took is given back by another write (or
// the loop would never run its queued tasks again).
func (r *reactor) epollWaiting(c *client) bool {
	n, err := unix.EpollWait(r.epfd, r.evs.ev[:], 0)
	if err != nil {
		return true
	}
	self := -1
	if g, ok := c.conn.(*gnetConn); ok {
		self = g.Conn.Fd()
	}
	others := false
	for i := 0; i < n; i++ {
		ev := &r.evs.ev[i]
		switch fd := int(ev.Fd); fd {
		case self, r.kickFd:
		case r.efd:
			others = true
			var one = [8]byte{1}
			_, _ = unix.Write(r.efd, one[:])
		default:
			// A socket that is only writable is gnet wanting to flush what it buffered for
			// a subscriber: that waits well enough, and counting it would end the turns of
			// every publisher that fans out.
			if ev.Events&^unix.EPOLLOUT != 0 {
				others = true
			}
		}
	}
	return others
}

// epollScratch is the reactor's buffer for epollWaiting.
type epollScratch struct{ ev [8]unix.EpollEvent }
