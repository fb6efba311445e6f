package filestore

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/natsd/natsd/filestore/powerfs"
)

func (s *FileStore) writerRunning() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.wRunning
}

// waitWriterGone waits until s's writer goroutine has ended for lack of work.
func waitWriterGone(t *testing.T, s *FileStore, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.writerRunning(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the writer goroutine still runs %v after the store went idle", what, 5*time.Second)
		}
		time.Sleep(writerIdle / 4)
	}
}

// TestWriterEndsWhenIdle checks that an idle store holds no writer goroutine and that every
// way work reaches a store starts one again: a store, a held store and its Flush, the
// max-age timer, the periodic sync timer, and Stop.
func TestWriterEndsWhenIdle(t *testing.T) {
	defer func(d time.Duration) { writerIdle = d }(writerIdle)
	writerIdle = 20 * time.Millisecond

	t.Run("store, held, stop", func(t *testing.T) {
		dir := t.TempDir()
		s, err := Open(Config{Dir: dir, Logf: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if seq, _, err := s.StoreMsg("a", nil, []byte{byte(i)}); err != nil || seq != uint64(i) {
				t.Fatalf("store %d: seq %d, %v", i, seq, err)
			}
			waitWriterGone(t, s, fmt.Sprintf("after store %d", i))
		}
		done := make(chan uint64, 1)
		s.StoreAsyncHeld("a", nil, []byte{4}, func(seq uint64, _ int64, err error) {
			if err != nil {
				t.Errorf("held store: %v", err)
			}
			done <- seq
		})
		time.Sleep(3 * writerIdle)
		if s.writerRunning() {
			t.Fatal("a held record started a writer before its Flush")
		}
		if st := s.State(); st.LastSeq != 3 {
			t.Fatalf("a held record was applied before its Flush: %+v", st)
		}
		s.Flush(false)
		if seq := <-done; seq != 4 {
			t.Fatalf("held record got seq %d", seq)
		}
		waitWriterGone(t, s, "after the flush")
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		r, err := Open(Config{Dir: dir, Logf: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Stop()
		if st := r.State(); st.Msgs != 4 || st.LastSeq != 4 {
			t.Fatalf("reopened: %+v", st)
		}
	})

	t.Run("max age", func(t *testing.T) {
		s, err := Open(Config{Dir: t.TempDir(), Logf: quietLog, Limits: Limits{MaxAge: 100 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		if _, _, err := s.StoreMsg("a", nil, []byte("x")); err != nil {
			t.Fatal(err)
		}
		waitWriterGone(t, s, "after the store")
		for deadline := time.Now().Add(5 * time.Second); s.State().Msgs != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not expired with the writer idle: %+v", s.State())
			}
		}
	})

	t.Run("periodic sync", func(t *testing.T) {
		fsys := powerfs.New()
		cfg := Config{Dir: "/store", FS: fsys, SyncInterval: 50 * time.Millisecond, Logf: quietLog}
		s, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		if _, _, err := s.StoreMsg("a", nil, []byte("periodic")); err != nil {
			t.Fatal(err)
		}
		// Acknowledged after write(2) only. Its writer ends (writerIdle is shorter than the
		// interval); the periodic sync, due while the store is idle, must still start one and
		// make the record durable: power cuts taken until it has survived one.
		waitWriterGone(t, s, "after the store")
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			c := cfg
			c.FS = fsys.Cut(nil)
			r, err := Open(c)
			if err != nil {
				t.Fatal(err)
			}
			m, err := r.LoadMsg(1)
			r.Stop()
			if err == nil && bytes.Equal(m.Data, []byte("periodic")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not durable 5 s after it was stored, with a sync due every %v: %v", cfg.SyncInterval, err)
			}
		}
	})

	t.Run("many idle stores hold no goroutines", func(t *testing.T) {
		const n = 200
		before := runtime.NumGoroutine()
		stores := make([]*FileStore, n)
		for i := range stores {
			s, err := Open(Config{Dir: t.TempDir(), Logf: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			stores[i] = s
			if _, _, err := s.StoreMsg("a", nil, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range stores {
			waitWriterGone(t, s, "idle")
		}
		// The spare makers and finishers end on their own too.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			g := runtime.NumGoroutine() - before
			if g < n/10 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d idle stores hold %d goroutines", n, g)
			}
		}
	})
}
