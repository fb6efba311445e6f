package js

import (
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/natsd/natsd/filestore"
	"github.com/natsd/natsd/filestore/powerfs"
)

// TestCreateMetaCuts cuts the power in the middle of each of a create's syncs (and after
// it) and reads the stream directory back as recovery does: it holds the configuration
// whole, or it is a create cut short (recovery removes it), never anything else; a create
// that returned is always whole.
func TestCreateMetaCuts(t *testing.T) {
	cfg := metaTestConfig()
	cfg.Description = "cut"
	created := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	for k := 1; k <= 6; k++ { // a create has 4 syncs; past them there is nothing to cut
		for seed := int64(0); seed < 8; seed++ {
			fs := powerfs.New()
			dir := "/js/acc/streams/S"
			if err := fs.MkdirAll(filepath.Join(dir, filestore.MsgsDir)); err != nil {
				t.Fatal(err)
			}
			take := fs.CutAtSync(rand.New(rand.NewSource(seed)), k)
			err := createMeta(fs, dir, cfg, created, func() error { return fs.SyncDir(filepath.Dir(dir)) })
			if err != nil {
				t.Fatal(err)
			}
			cut, during := take()
			got, at, rerr := readMeta(cut, dir)
			switch {
			case rerr == nil:
				if got.Description != "cut" || got.Name != "S" || !at.Equal(created) {
					t.Fatalf("cut at sync %d (seed %d): read %+v %v", k, seed, got, at)
				}
			case !during:
				t.Fatalf("cut after the create returned (sync %d, seed %d): %v", k, seed, rerr)
			case !cutShortCreate(cut, dir):
				if _, err := cut.ReadDir(dir); err == nil {
					t.Fatalf("cut at sync %d (seed %d): unreadable (%v) and not a create cut short", k, seed, rerr)
				}
				// The stream's directory itself is gone: nothing to recover.
			}
		}
	}
}

// TestReadMetaFinishesCreate: a directory holding only the create's files under their
// temporary names, matching, is a create that was answered: readMeta moves them into place.
// Mismatched, they are a create cut short.
func TestReadMetaFinishesCreate(t *testing.T) {
	fs := powerfs.New()
	dir := "/js/acc/streams/S"
	if err := fs.MkdirAll(filepath.Join(dir, filestore.MsgsDir)); err != nil {
		t.Fatal(err)
	}
	b, sum, err := encodeMeta(metaTestConfig(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sum   []byte
		whole bool
	}{{[]byte("0000"), false}, {sum, true}} {
		if err := writeSynced(fs, filepath.Join(dir, metaName+".tmp"), b); err != nil {
			t.Fatal(err)
		}
		if err := writeSynced(fs, filepath.Join(dir, sumName+".tmp"), tc.sum); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := readMeta(fs, dir)
		if !tc.whole {
			if err == nil || !cutShortCreate(fs, dir) {
				t.Fatalf("mismatched temporary files: %v, cut short %v", err, cutShortCreate(fs, dir))
			}
			continue
		}
		if err != nil || cfg.Name != "S" {
			t.Fatalf("matching temporary files: %+v %v", cfg, err)
		}
		if _, err := readAll(fs, filepath.Join(dir, metaName)); err != nil {
			t.Fatalf("meta.inf not moved into place: %v", err)
		}
		if _, err := readAll(fs, filepath.Join(dir, metaName+".tmp")); err == nil {
			t.Fatalf("meta.inf.tmp left behind")
		}
	}
}

// metaTestConfig is a stream configuration as the API leaves it (every enumeration set), so
// that it reads back.
func metaTestConfig() *StreamConfig {
	return &StreamConfig{Name: "S", Subjects: []string{"s.>"}, Retention: LimitsPolicy, Discard: DiscardOld,
		Storage: FileStorage, PersistMode: DefaultPersist, MaxMsgs: -1, MaxBytes: -1, MaxMsgsPer: -1,
		MaxMsgSize: -1, MaxConsumers: -1, Replicas: 1}
}
