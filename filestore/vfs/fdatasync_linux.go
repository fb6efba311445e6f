package vfs

import "golang.org/x/sys/unix"

// fdatasync flushes a file's data (and the metadata needed to read it back) to the device.
func fdatasync(fd int) error { return unix.Fdatasync(fd) }
