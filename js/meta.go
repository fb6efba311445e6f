package js

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/natsd/natsd/filestore"
)

// A stream's directory holds meta.inf (its configuration and creation time, as JSON) and
// meta.sum (the hex SHA-256 of meta.inf), next to the store's msgs/. Both are replaced
// atomically: written to a temporary name, synced, renamed, and the directory synced, so a
// crash leaves the old or the new configuration, never a torn one.

type metaFile struct {
	Created time.Time `json:"created"`
	StreamConfig
}

const (
	metaName = "meta.inf"
	sumName  = "meta.sum"
)

func writeMeta(fs filestore.FS, dir string, cfg *StreamConfig, created time.Time) error {
	b, err := json.Marshal(metaFile{Created: created.UTC(), StreamConfig: *cfg})
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if err := writeAtomic(fs, dir, metaName, b); err != nil {
		return err
	}
	if err := writeAtomic(fs, dir, sumName, []byte(hex.EncodeToString(sum[:]))); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

func writeAtomic(fs filestore.FS, dir, name string, b []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := fs.OpenFile(tmp, true)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fs.Rename(tmp, filepath.Join(dir, name))
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
	if err != nil {
		return StreamConfig{}, time.Time{}, err
	}
	sb, err := readAll(fs, filepath.Join(dir, sumName))
	if err != nil {
		return StreamConfig{}, time.Time{}, err
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != string(sb) {
		return StreamConfig{}, time.Time{}, fmt.Errorf("stream metadata checksum mismatch")
	}
	var m metaFile
	if err := json.Unmarshal(b, &m); err != nil {
		return StreamConfig{}, time.Time{}, err
	}
	return m.StreamConfig, m.Created, nil
}

// removeAll removes dir and everything under it through fs.
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
			if err := fs.Remove(p); err != nil {
				return err
			}
		}
	}
	return fs.Remove(dir)
}
