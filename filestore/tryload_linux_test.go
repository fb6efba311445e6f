package filestore

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// dropActive syncs the active block and asks the kernel to drop its cached pages.
func dropActive(t *testing.T, fs *FileStore) {
	t.Helper()
	fs.mu.RLock()
	b := fs.act
	path := fs.blockPath(b.id, false)
	err := b.f.Sync()
	fs.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("fadvise: %v", err)
	}
	fs.cmu.Lock()
	fs.ra.b, fs.ra.data = nil, nil
	fs.cmu.Unlock()
}
