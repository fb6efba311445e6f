package server

import "golang.org/x/sys/unix"

// totalMemory is the machine's memory in bytes, 0 when it cannot be read.
func totalMemory() uint64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return n
}
