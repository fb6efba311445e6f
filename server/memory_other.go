//go:build !linux && !darwin

package server

// totalMemory is the machine's memory in bytes; 0 here (not read on this platform).
func totalMemory() uint64 { return 0 }
