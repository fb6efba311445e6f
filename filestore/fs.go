package filestore

import (
	"encoding/binary"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FS is the small file-system surface the file store uses. It exists so tests
// can substitute a double of the OS page cache that drops everything not yet
// fsync'd, which is how power loss is simulated.
type FS interface {
	MkdirAll(dir string) error
	// OpenFile opens name read-write, creating it when create is set.
	OpenFile(name string, create bool) (File, error)
	ReadDir(dir string) ([]string, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
}

// File is an open file. Writes are positional so that readers using ReadAt
// never race with a file offset.
type File interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Sync() error
	// Datasync is fdatasync(2): the data and whatever metadata is needed to
	// read it back (the size, when it grew), not timestamps.
	Datasync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
}

// OSFS is the real file system.
type OSFS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f osFile) Datasync() error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = fdatasync(int(fd))
			if serr != unix.EINTR {
				break
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

func (OSFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o750) }

func (OSFS) OpenFile(name string, create bool) (File, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(name, flag, 0o640)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

func (OSFS) Remove(name string) error             { return os.Remove(name) }
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func readAll(f File) ([]byte, error) {
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if n == 0 {
		return buf, nil
	}
	m, err := f.ReadAt(buf, 0)
	if m == int(n) {
		return buf, nil
	}
	return buf[:m], err
}

// writeFileAtomic replaces name with data so that a crash leaves either the
// old or the new content, never a mix.
func writeFileAtomic(fsys FS, dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := fsys.OpenFile(tmp, true)
	if err != nil {
		return err
	}
	if err = f.Truncate(0); err == nil {
		if _, err = f.WriteAt(data, 0); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

var zeroChunk [1 << 20]byte

// writeZeros writes zeros over [off, off+n).
func writeZeros(f File, off, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeroChunk)))
		if _, err := f.WriteAt(zeroChunk[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

// lastNonZero returns one past the last non-zero byte of b (0 if b is all zero).
func lastNonZero(b []byte) int {
	n := len(b)
	for n >= 8 && binary.LittleEndian.Uint64(b[n-8:]) == 0 {
		n -= 8
	}
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return n
}
