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

// A store's first block is small and each new block has twice the room of
// the one before, up to BlockSize. Every block file is zero-filled ahead of
// use, so a store that holds a few messages would otherwise pin a full
// BlockSize (plus a spare as large) on disk and write it all at open: with
// thousands of small streams (KV buckets, say) that is gigabytes. A
// variable only so that tests can watch blocks grow at small sizes.
var firstBlockSize int64 = 64 << 10

func (s *FileStore) firstLimit() int64 { return min(s.cfg.BlockSize, firstBlockSize) }

// nextLimit is the room of the block that follows one with room prev.
func (s *FileStore) nextLimit(prev int64) int64 {
	return min(s.cfg.BlockSize, max(s.firstLimit(), 2*prev))
}

// preallocFor is how far a new block file with room limit is zero-filled:
// the room plus space for the batch that crosses it, so appends overwrite
// written space (an fdatasync then commits no size or extent change)
// instead of extending the file.
func preallocFor(limit int64) int64 { return limit + limit/8 }

// askSpare has a spare made for the block after the active one, unless one has been asked
// for already. The writer asks once the active block is a quarter full (and at open), so a
// store that never fills its block never gets a spare.
//
// Each spare is made by a goroutine of its own that ends once the file is ready (it waits in
// a one-slot channel for the writer's roll), so an idle store holds no goroutine for its
// spares: with thousands of streams or KV buckets, a maker per store was a thousand parked
// goroutines.
func (s *FileStore) askSpare(limit int64) {
	if s.spareAsked {
		return
	}
	s.spareAsked = true
	s.spareN++
	s.spareWG.Add(1)
	go s.makeSpare(filepath.Join(s.dir, fmt.Sprintf("spare-%d.tmp", s.spareN)), false, limit)
}

// askFirst has a new store's first block file made ahead under its own name, its entry
// synced, so that the store's first commit neither renames a file nor syncs msgs/ (a KV
// bucket's first put took 0.66 ms, the next ones 0.3). Only a store with no block may have
// its next block's file exist early: recovery reads a torn tail on a block that is not the
// last as damage (see writeSegs), and an empty last block is taken as the active one. A
// store reopened empty (its index.db says so) gets a plain spare: a server restarting with
// thousands of idle streams would otherwise start as many directory syncs at once, each
// blocking a thread.
func (s *FileStore) askFirst(limit int64) {
	s.spareAsked = true
	s.spareWG.Add(1)
	go s.makeSpare(s.blockPath(s.nextID+1, false), true, limit)
}

// makeSpare makes a zero-filled, synced block file under a temporary name, so the writer
// never zero-fills on its own path: rolling to a new block is a rename. Recovery deletes a
// leftover spare (*.tmp); Stop deletes one never taken. A placed one (askFirst) is made
// under its block's name and its directory synced; recovery takes it, empty, as the
// active block.
func (s *FileStore) makeSpare(name string, placed bool, limit int64) {
	defer s.spareWG.Done()
	sp := spare{name: name}
	f, err := s.fs.OpenFile(name, true)
	if err == nil {
		// Only a block that is fsync'd on the commit path gains from preallocation.
		// With SyncInterval < 0, or with a journal (whose write makes a commit
		// durable; blocks are synced in the background), the file starts empty and
		// grows by appends: no zero-filling and sync for the first put to wait for.
		if s.cfg.SyncInterval >= 0 && s.jn == nil {
			err = writeZeros(f, 0, preallocFor(limit))
			if err == nil {
				err = f.Sync()
			}
		}
		if err == nil && placed && s.cfg.SyncInterval >= 0 {
			err = s.fs.SyncDir(s.dir)
		}
		if err != nil {
			f.Close()
			_ = s.fs.Remove(name)
			f = nil
		}
	}
	sp.f, sp.err = f, err
	s.spares <- sp // one slot, and one spare asked for at a time: never waits
}

// dropSpare deletes a spare made and never taken (at Stop, once no maker runs).
func (s *FileStore) dropSpare() {
	select {
	case sp := <-s.spares:
		if sp.f != nil {
			sp.f.Close()
			_ = s.fs.Remove(sp.name)
		}
	default:
	}
}
