package js

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/natsd/natsd/filestore"
)

// A stream's directory holds meta.inf (its configuration and creation time, as JSON) and
// meta.sum (the hex SHA-256 of meta.inf), next to the store's msgs/. An update writes and
// syncs both under temporary names, then renames meta.inf and meta.sum into place and syncs
// the directory. A crash between the two renames leaves the new meta.inf beside the old
// meta.sum and the new one still under its temporary name: readMeta recognises that state
// (meta.inf matches meta.sum.tmp) and finishes the update, so a crash leaves the old or the
// new configuration, never none.
//
// A create (createMeta) syncs its two files under their temporary names and the directories
// that name them all at once, and only then renames them into place, without another sync:
// a stream directory with no meta.inf but a meta.inf.tmp that matches meta.sum.tmp holds a
// create that was answered, and readMeta finishes it. One round of syncs issued together,
// where placing the files and then syncing the directories took two.

type metaFile struct {
	Created time.Time `json:"created"`
	StreamConfig
}

const (
	metaName = "meta.inf"
	sumName  = "meta.sum"
)

func writeMeta(fs filestore.FS, dir string, cfg *StreamConfig, created time.Time) error {
	b, sum, err := encodeMeta(cfg, created)
	if err != nil {
		return err
	}
	if err := syncAll(
		func() error { return writeSynced(fs, filepath.Join(dir, metaName+".tmp"), b) },
		func() error { return writeSynced(fs, filepath.Join(dir, sumName+".tmp"), sum) }); err != nil {
		return err
	}
	if err := placeMeta(fs, dir); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// placeMeta renames meta.inf.tmp and meta.sum.tmp into place, in that order (readMeta
// relies on it); the renames are not durable until dir is synced.
func placeMeta(fs filestore.FS, dir string) error {
	if err := fs.Rename(filepath.Join(dir, metaName+".tmp"), filepath.Join(dir, metaName)); err != nil {
		return err
	}
	return fs.Rename(filepath.Join(dir, sumName+".tmp"), filepath.Join(dir, sumName))
}

// createMeta writes a new stream's metadata in dir (made, with msgs/ in it, by the caller)
// and makes it durable together with the directory entries that lead to it: the two files'
// syncs, dir's and whatever syncParents does run at once. The files are then renamed into
// place; the renames need no sync of their own (see the top of this file).
func createMeta(fs filestore.FS, dir string, cfg *StreamConfig, created time.Time, parents func() error) error {
	b, sum, err := encodeMeta(cfg, created)
	if err != nil {
		return err
	}
	var files []filestore.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, w := range []struct {
		name string
		data []byte
	}{{metaName + ".tmp", b}, {sumName + ".tmp", sum}} {
		f, err := writeFile(fs, filepath.Join(dir, w.name), w.data)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	if err := syncAll(files[0].Sync, files[1].Sync, func() error { return fs.SyncDir(dir) }, parents); err != nil {
		return err
	}
	return placeMeta(fs, dir)
}

func encodeMeta(cfg *StreamConfig, created time.Time) (meta, sum []byte, err error) {
	b, err := json.Marshal(metaFile{Created: created.UTC(), StreamConfig: *cfg})
	if err != nil {
		return nil, nil, err
	}
	return b, []byte(metaSum(b)), nil
}

// metaSum is meta.sum's content for metadata b.
func metaSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// syncAll runs independent steps that each end in a sync at once and returns the first
// error. Syncs issued together can share the device's cache flush (and, on ext4, one journal
// commit). How much they overlap is the Go scheduler's to decide: a goroutine blocked in a
// sync keeps its P until sysmon hands it on, so on an idle server the steps often run one
// after another (running every step on a goroutine of its own measured the same).
func syncAll(steps ...func() error) error {
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, f := range steps[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = f()
		}()
	}
	errs[0] = steps[0]()
	wg.Wait()
	return errors.Join(errs...)
}

func writeSynced(fs filestore.FS, name string, b []byte) error {
	f, err := writeFile(fs, name, b)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFile makes name hold exactly b (not synced) and returns it open.
func writeFile(fs filestore.FS, name string, b []byte) (filestore.File, error) {
	f, err := fs.OpenFile(name, true)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func readAll(fs filestore.FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

func readMeta(fs filestore.FS, dir string) (StreamConfig, time.Time, error) {
	b, err := readAll(fs, filepath.Join(dir, metaName))
	if errors.Is(err, os.ErrNotExist) {
		// A create whose files were durable under their temporary names before it was
		// answered, cut before its renames were (createMeta): finish it.
		if b, err = createdMeta(fs, dir); err != nil {
			return StreamConfig{}, time.Time{}, err
		}
	}
	if err != nil {
		return StreamConfig{}, time.Time{}, err
	}
	sb, err := readAll(fs, filepath.Join(dir, sumName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return StreamConfig{}, time.Time{}, err
	}
	sum := metaSum(b)
	if err != nil || sum != string(sb) {
		// An update (or a create: no meta.sum yet) cut between its two renames: the new
		// checksum is still pending.
		pend, err := readAll(fs, filepath.Join(dir, sumName+".tmp"))
		if err != nil || string(pend) != sum {
			return StreamConfig{}, time.Time{}, fmt.Errorf("stream metadata checksum mismatch")
		}
		if err := fs.Rename(filepath.Join(dir, sumName+".tmp"), filepath.Join(dir, sumName)); err == nil {
			_ = fs.SyncDir(dir)
		}
	}
	var m metaFile
	if err := json.Unmarshal(b, &m); err != nil {
		return StreamConfig{}, time.Time{}, err
	}
	return m.StreamConfig, m.Created, nil
}

// createdMeta finishes a create cut between its syncs and its renames: meta.inf.tmp matching
// meta.sum.tmp is moved into place and its contents returned. Anything else is reported as
// meta.inf missing (os.ErrNotExist), for cutShortCreate to judge.
func createdMeta(fs filestore.FS, dir string) ([]byte, error) {
	b, err := readAll(fs, filepath.Join(dir, metaName+".tmp"))
	if err != nil {
		return nil, os.ErrNotExist
	}
	sb, err := readAll(fs, filepath.Join(dir, sumName+".tmp"))
	if err != nil || string(sb) != metaSum(b) {
		return nil, os.ErrNotExist
	}
	if err := placeMeta(fs, dir); err != nil {
		return nil, err
	}
	return b, fs.SyncDir(dir)
}

// cutShortCreate reports whether a stream directory whose metadata does not read is what a
// create leaves when it is cut short: no meta.inf or meta.sum in place (at most their
// temporary files) and no store file in msgs/ but a spare block being made. A create is
// answered only once its metadata is durable and the store opens after that, so such a
// directory never held an acknowledged message. Anything else (a torn or mismatched
// meta.inf beside its meta.sum, block files) is kept for the operator.
func cutShortCreate(fs filestore.FS, dir string) bool {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, n := range names {
		switch n {
		case metaName + ".tmp", sumName + ".tmp":
		case filestore.MsgsDir:
			files, err := fs.ReadDir(filepath.Join(dir, n))
			if err != nil {
				return false
			}
			for _, f := range files {
				if !strings.HasPrefix(f, "spare-") || !strings.HasSuffix(f, ".tmp") {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// cutShortDelete reports whether dir, which holds no readable metadata, is a stream whose
// delete was cut short. A delete removes the metadata first and syncs the directory, and
// the rest after it (removeStreamDir), so a crash or a power cut can leave blocks or
// consumers without it; a create writes meta.inf.tmp before anything but an
// empty msgs/, and its rename to meta.inf replaces it. So a stream directory holding neither
// is what a delete left, and nothing in it is wanted any more. (nats-server writes a
// meta.inf in every stream directory too, and skips one without it as no stream.)
func cutShortDelete(fs filestore.FS, dir string) bool {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return false
	}
	return !slices.Contains(names, metaName) && !slices.Contains(names, metaName+".tmp")
}

// removeStreamDir deletes a stream's directory. The delete is durable, and answered, once
// the metadata is gone and the directory synced: recovery finishes the removal of a stream
// directory without metadata (cutShortDelete). The rest (the files, the directory, the
// journal's Forget) runs after the answer; a stream made again under the same name waits
// for it (waitRemoved). Forget comes last: a store's acknowledged writes must stay
// replayable for as long as a crash could still bring the stream back.
// A removal that fails calls failed, and the directory stays as it is.
func (j *JetStream) removeStreamDir(dir string, jn *filestore.Journal, failed func(error)) error {
	fs := j.cfg.FS
	gone := 0
	for _, n := range []string{metaName, metaName + ".tmp"} { // what cutShortDelete looks for
		if err := fs.Remove(filepath.Join(dir, n)); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			gone++
		}
	}
	if gone < 2 {
		if err := fs.SyncDir(dir); err != nil {
			return err
		}
	}
	done := make(chan struct{})
	j.removing.Store(dir, done)
	go func() {
		defer close(done)
		defer j.removing.Delete(dir)
		if err := removeAll(fs, dir); err != nil {
			j.warnf("JetStream could not remove the deleted stream's directory %s: %v", dir, err)
			failed(err)
			return // Forget waits: what is left could still be replayed into
		}
		if jn != nil {
			if err := jn.Forget(dir); err != nil {
				j.warnf("JetStream could not forget the deleted stream's journaled writes (%s): %v", dir, err)
			}
		}
	}()
	return nil
}

// waitRemoved waits until a deleted stream's directory is removed (removeStreamDir).
func (j *JetStream) waitRemoved(dir string) {
	if v, ok := j.removing.Load(dir); ok {
		<-v.(chan struct{})
	}
}

// WaitRemovals waits for the removals of deleted streams' directories under way (Stop, and
// tests). A channel each rather than a WaitGroup: a test that saw a delete's answer over
// the network has no happens-before edge with the removal's start that Wait would need.
func (j *JetStream) WaitRemovals() {
	j.removing.Range(func(_, v any) bool {
		<-v.(chan struct{})
		return true
	})
}

// removeAll removes dir and everything under it through fs. What is already gone is no
// error: whatever removed it, the outcome is the one wanted.
func removeAll(fs filestore.FS, dir string) error {
	names, err := fs.ReadDir(dir)
	if err == nil {
		for _, n := range names {
			p := filepath.Join(dir, n)
			if _, err := fs.ReadDir(p); err == nil {
				if err := removeAll(fs, p); err != nil {
					return err
				}
				continue
			}
			if err := fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := fs.Remove(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	// The removal is durable only once the parent directory is.
	return fs.SyncDir(filepath.Dir(dir))
}

// syncParents makes dir's entry durable (dir was just made): it syncs dir's parent, and its
// parents' up to and including top while they are new too. known holds the ancestors whose
// own entries this run has already made durable (account and streams directories, never
// removed while running, and a stream's obs/, which its deletion forgets): the walk up stops
// at the first of them, so a new stream costs one directory sync here, not one per level.
func syncParents(fs filestore.FS, dir, top string, known *sync.Map) error {
	var synced []string // ancestors whose entries the walk makes durable
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Dir(d)
		if err := fs.SyncDir(p); err != nil {
			return err
		}
		if p == top || p == filepath.Dir(p) || len(p) < len(top) {
			break
		}
		if _, ok := known.Load(p); ok {
			break
		}
		synced = append(synced, p) // its entry is synced by the next round
	}
	for _, p := range synced {
		known.Store(p, struct{}{})
	}
	return nil
}
