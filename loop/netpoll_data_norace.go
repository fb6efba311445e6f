//go:build linux && !race

package loop

// netpoll puts the operator's address in the event data (netpoll keeps the operator alive).
func netpollEventData(op uintptr, _ int) [2]int32 {
	return [2]int32{int32(uint32(op)), int32(uint32(op >> 32))}
}
