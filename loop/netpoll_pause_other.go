//go:build !linux

package loop

import "github.com/cloudwego/netpoll"

// Pausing reads is built for epoll only (see netpoll_pause_linux.go).
type npInterest struct{}

func netpollInterest(netpoll.Connection) (npInterest, bool) { return npInterest{}, false }

func (*npInterest) setReading(on, writing bool) {}
