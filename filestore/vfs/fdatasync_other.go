//go:build !linux

package vfs

import "golang.org/x/sys/unix"

// fdatasync falls back to fsync where the platform has no fdatasync. The store is measured and
// crash-tested on Linux only; on macOS fsync does not flush the drive's cache (F_FULLFSYNC
// would), so durability there is the OS's ordinary fsync promise.
func fdatasync(fd int) error { return unix.Fsync(fd) }
