//go:build !linux

package vfs

// WriteAtSync is not available here: the journal writes and syncs through the page cache.
func (f osFile) WriteAtSync(p []byte, off int64) error { return ErrNoDirect }

func (d *direct) close() {}
