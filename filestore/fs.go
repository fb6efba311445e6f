package filestore

import (
	"encoding/binary"
	"path/filepath"

	"github.com/natsd/natsd/filestore/vfs"
)

// FS, File and OSFS live in filestore/vfs, so that test doubles of the file
// system (filestore/powerfs) can be used by other packages' tests; these
// aliases keep filestore's API as it was.
type (
	// FS is the small file-system surface the file store uses (see vfs.FS).
	FS = vfs.FS
	// File is an open file (see vfs.File).
	File = vfs.File
	// OSFS is the real file system.
	OSFS = vfs.OSFS
)

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
