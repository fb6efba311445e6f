package vfs

import (
	"io"

	"golang.org/x/sys/unix"
)

// ReadAtNoWait reads from the page cache only (preadv2 with RWF_NOWAIT): it fails with
// ErrWouldBlock rather than wait for the device.
func (f osFile) ReadAtNoWait(p []byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			n, rerr = unix.Preadv2(int(fd), [][]byte{p}, off, unix.RWF_NOWAIT)
			if rerr != unix.EINTR {
				break
			}
		}
	}); err != nil {
		return 0, err
	}
	switch {
	case rerr == unix.EAGAIN || rerr == unix.EOPNOTSUPP || rerr == unix.ENOSYS:
		return n, ErrWouldBlock
	case rerr != nil:
		return n, rerr
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	case n < len(p):
		return n, ErrWouldBlock // part of it is not in memory
	}
	return n, nil
}
