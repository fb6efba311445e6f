package filestore

import (
	"fmt"
	"path/filepath"
)

type spare struct {
	name string
	f    File
	err  error
}

// preallocSize is how far a new block file is zero-filled: BlockSize plus
// room for the batch that crosses it, so appends overwrite written space
// (an fdatasync then commits no size or extent change) instead of
// extending the file.
func (s *FileStore) preallocSize() int64 {
	return s.cfg.BlockSize + s.cfg.BlockSize/8
}

// spareMaker keeps one zero-filled, synced block file ready under a temporary
// name, so the writer never zero-fills on its own path: rolling to a new
// block is a rename. Recovery deletes a leftover spare (*.tmp).
func (s *FileStore) spareMaker() {
	defer close(s.spareDone)
	for k := 1; ; k++ {
		select {
		case <-s.spareStop:
			return
		default:
		}
		name := filepath.Join(s.dir, fmt.Sprintf("spare-%d.tmp", k))
		sp := spare{name: name}
		f, err := s.fs.OpenFile(name, true)
		if err == nil {
			// Only a block that is fsync'd gains from preallocation: with
			// SyncInterval < 0 the file starts empty and grows by appends.
			if s.cfg.SyncInterval >= 0 {
				err = writeZeros(f, 0, s.preallocSize())
				if err == nil {
					err = f.Sync()
				}
			}
			if err != nil {
				f.Close()
				_ = s.fs.Remove(name)
			}
		}
		sp.f, sp.err = f, err
		if err != nil {
			// Every later roll gets the error too (the store fails on it).
			for {
				select {
				case s.spares <- sp:
				case <-s.spareStop:
					return
				}
			}
		}
		select {
		case s.spares <- sp:
		case <-s.spareStop:
			f.Close()
			_ = s.fs.Remove(name)
			return
		}
	}
}
