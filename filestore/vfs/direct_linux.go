package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// WriteAtSync writes p at off through a descriptor opened O_DIRECT|O_DSYNC on the same
// file: the call returns once p is on the device (the kernel follows the write with a cache
// flush, or marks it FUA).
func (f osFile) WriteAtSync(p []byte, off int64) error {
	if len(p)%SectorSize != 0 || off%SectorSize != 0 || !Aligned(p) {
		return &os.PathError{Op: "pwrite", Path: f.Name(), Err: unix.EINVAL}
	}
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 && d.err == nil {
		fd, err := unix.Open(f.Name(), unix.O_RDWR|unix.O_DIRECT|unix.O_DSYNC|unix.O_CLOEXEC, 0)
		switch {
		case err == unix.EINVAL || err == unix.EOPNOTSUPP:
			d.err = ErrNoDirect
		case err != nil:
			return &os.PathError{Op: "open", Path: f.Name(), Err: err}
		default:
			d.fd = fd
		}
	}
	if d.err != nil {
		return d.err
	}
	for len(p) > 0 {
		n, err := unix.Pwrite(d.fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EINVAL {
			// The alignment was checked above: this file system accepts O_DIRECT at open
			// and refuses the write.
			d.err = ErrNoDirect
			return d.err
		}
		if err != nil {
			return &os.PathError{Op: "pwrite", Path: f.Name(), Err: err}
		}
		if n == 0 {
			return &os.PathError{Op: "pwrite", Path: f.Name(), Err: errors.New("short write")}
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

func (d *direct) close() {
	d.mu.Lock()
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
	d.err = os.ErrClosed
	d.mu.Unlock()
}
