//go:build linux && race

package loop

// Under the race detector netpoll keeps operators in a map and puts the fd in the event data.
func netpollEventData(_ uintptr, fd int) [2]int32 { return [2]int32{int32(fd), 0} }
