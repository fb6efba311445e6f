//go:build !linux

package loop

import "github.com/panjf2000/gnet/v2"

// Pausing reads is built for epoll only (see gnet_pause_linux.go); elsewhere a stalled
// publisher's bytes are buffered by gnet as before.
func gnetEpollFD(gnet.Conn) (epfd, efd int) { return -1, -1 }

func gnetWakePending(gnet.Conn) *int32 { return nil }

func (g *gnetConn) applyInterest() {}

type epollScratch struct{}

func (r *reactor) epollWaiting(*client) bool { return true }
