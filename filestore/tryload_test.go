package filestore

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestTryLoadLastMsg checks the load a reactor may make: it answers as LoadLastMsg does
// or says it would block, and it says so exactly where it would wait (a lock held, a
// sealed block not cached, bytes not in the page cache).
func TestTryLoadLastMsg(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		s := k.open(t, t.TempDir(), Limits{MaxMsgsPerSubject: 1})
		defer s.Stop()
		// 4 KiB blocks: the early keys end up in sealed blocks.
		val := bytes.Repeat([]byte("v"), 200)
		for i := 0; i < 60; i++ {
			if _, _, err := s.StoreMsg(fmt.Sprintf("kv.k%d", i%30), nil, val); err != nil {
				t.Fatal(err)
			}
		}
		waitDurable(t, s)
		// try retries while the store is busy in the background (a block being sealed holds
		// its lock for a moment): what is checked is what the try answers once it can.
		try := func(key string) (*StoredMsg, error) {
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				sm, err := s.TryLoadLastMsg(key)
				if err != ErrWouldBlock || time.Now().After(deadline) {
					return sm, err
				}
			}
		}
		same := func(key string) {
			t.Helper()
			want, werr := s.LoadLastMsg(key)
			got, err := try(key)
			if err != werr || (err == nil && (got.Seq != want.Seq || got.Subject != want.Subject || !bytes.Equal(got.Data, want.Data))) {
				t.Fatalf("%s: TryLoadLastMsg = %v, %v; LoadLastMsg = %v, %v", key, got, err, want, werr)
			}
		}
		for _, key := range []string{"kv.*", "kv.>", ">", ""} {
			if _, err := s.TryLoadLastMsg(key); err != ErrWouldBlock {
				t.Fatalf("%q: %v, want ErrWouldBlock", key, err)
			}
		}
		if _, err := try("kv.none"); err != ErrNotFound {
			t.Fatalf("unknown key: %v", err)
		}
		// The newest key is in the active block (memory, or the page cache just written).
		if k.name == "mem" || runtime.GOOS == "linux" {
			if _, err := try("kv.k29"); err != nil {
				t.Fatalf("newest key: %v", err)
			}
		}
		same("kv.k29")
		if fs, ok := s.(*FileStore); ok {
			// kv.k0's last value (seq 31) is in a block that has rolled; compressed stores
			// seal such blocks (rewritten whole, read through the block cache).
			if k.name == "file-s2-aes" {
				waitSealed(t, fs, 31)
				fs.cmu.Lock()
				clear(fs.cache)
				fs.cmu.Unlock()
				if _, err := s.TryLoadLastMsg("kv.k0"); err != ErrWouldBlock {
					t.Fatalf("key in an uncached sealed block: %v, want ErrWouldBlock", err)
				}
				same("kv.k0") // LoadLastMsg caches the block ...
				if _, err := try("kv.k0"); err != nil {
					t.Fatalf("key in a cached block: %v", err) // ... so the next try reads memory
				}
				fs.cmu.Lock()
				_, err := s.TryLoadLastMsg("kv.k0")
				fs.cmu.Unlock()
				if err != ErrWouldBlock {
					t.Fatalf("cache locked: %v", err)
				}
			}
			same("kv.k0")
			fs.mu.Lock()
			_, err := s.TryLoadLastMsg("kv.k29")
			fs.mu.Unlock()
			if err != ErrWouldBlock {
				t.Fatalf("store locked: %v", err)
			}
			if runtime.GOOS == "linux" && k.name == "file" {
				dropActive(t, fs)
				_, err := s.TryLoadLastMsg("kv.k29")
				if err == nil {
					t.Skip("the page cache kept the block after POSIX_FADV_DONTNEED; nothing more to check here")
				}
				if err != ErrWouldBlock {
					t.Fatalf("bytes not in the page cache: %v, want ErrWouldBlock", err)
				}
				same("kv.k29") // the waiting load reads the device
			}
		}
		if ms, ok := s.(*MemStore); ok {
			ms.mu.Lock()
			_, err := s.TryLoadLastMsg("kv.k29")
			ms.mu.Unlock()
			if err != ErrWouldBlock {
				t.Fatalf("store locked: %v", err)
			}
		}
	})
}

func waitDurable(t *testing.T, s Store) {
	t.Helper()
	s.WaitDurable(s.FastState().LastSeq)
}

// waitSealed waits for seq's block to be sealed (the finisher does it in the background).
func waitSealed(t *testing.T, fs *FileStore, seq uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		fs.mu.RLock()
		b := fs.findBlock(seq)
		sealed := b != nil && b.sealed
		fs.mu.RUnlock()
		if sealed {
			return
		}
	}
	t.Fatalf("seq %d's block was not sealed", seq)
}
