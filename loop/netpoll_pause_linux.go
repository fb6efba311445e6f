//go:build linux

package loop

import (
	"reflect"

	"github.com/cloudwego/netpoll"
	"golang.org/x/sys/unix"
)

// netpoll, like gnet, reads whatever epoll reports readable and has no way to stop (an
// upstream proposal, cloudwego/netpoll#422, is open), so natsd changes the connection's epoll
// interest itself. netpoll registers a connection with EPOLLIN|EPOLLRDHUP|EPOLLERR (plus
// EPOLLOUT while its own writer waits for room) and with event data that finds its operator:
// the operator's address, or under the race detector its fd (netpollEventData). A pause
// keeps EPOLLERR only: without EPOLLRDHUP too, since netpoll closes a connection whose peer
// hung up when it may not read, and the bytes the peer sent before hanging up must still be
// parsed once reading resumes. netpoll's writer restores EPOLLIN when it starts or stops
// waiting for room; the next traffic run pauses again.

// npInterest is what SetReading needs to rewrite a netpoll connection's epoll mask.
type npInterest struct {
	epfd, fd int
	data     [2]int32 // the event data netpoll registered, as EpollEvent's Fd and Pad
}

// netpollInterest reads the unexported epoll registration of nc (connection.operator and
// its poll's fd); ok is false if netpoll's layout is not what natsd knows, which disables
// pausing (TestNetpollPause fails).
func netpollInterest(nc netpoll.Connection) (in npInterest, ok bool) {
	v := reflect.ValueOf(nc)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return in, false
	}
	op := v.Elem().FieldByName("operator")
	if !op.IsValid() || op.Kind() != reflect.Pointer || op.IsNil() {
		return in, false
	}
	opAddr := op.Pointer()
	fdv := op.Elem().FieldByName("FD")
	poll := op.Elem().FieldByName("poll")
	if !fdv.IsValid() || fdv.Kind() != reflect.Int || !poll.IsValid() || poll.Kind() != reflect.Interface || poll.IsNil() {
		return in, false
	}
	p := poll.Elem()
	if p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Struct {
		return in, false
	}
	epfd := p.Elem().FieldByName("fd")
	if !epfd.IsValid() || epfd.Kind() != reflect.Int {
		return in, false
	}
	in.epfd, in.fd = int(epfd.Int()), int(fdv.Int())
	in.data = netpollEventData(opAddr, in.fd)
	return in, in.epfd > 0 && in.fd > 0
}

// setReading rewrites the mask; writing tells whether netpoll's own writer may be waiting
// for room (it then needs EPOLLOUT).
func (in *npInterest) setReading(on, writing bool) {
	ev := uint32(unix.EPOLLERR)
	if on {
		ev |= unix.EPOLLIN | unix.EPOLLRDHUP
	}
	if writing {
		ev |= unix.EPOLLOUT
	}
	_ = unix.EpollCtl(in.epfd, unix.EPOLL_CTL_MOD, in.fd, &unix.EpollEvent{Events: ev, Fd: in.data[0], Pad: in.data[1]})
}
