package filestore

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/natsd/natsd/sublist"
)

type storeKind struct {
	name string
	open func(t testing.TB, dir string, lim Limits) Store
}

func quietLog(string, ...any) {}

// sizeIn is what a message counts for in a store of kind k (nats-server's sizes: the
// memory store's differ from the file store's).
func sizeIn(k storeKind, subj string, hdr, msg []byte) uint64 {
	if k.name == "mem" {
		return memSize(subj, hdr, msg)
	}
	return storedSize(subj, hdr, msg)
}

func fileCfg(dir string, lim Limits) Config {
	return Config{Dir: dir, BlockSize: 4096, Limits: lim, Logf: quietLog}
}

var storeKinds = []storeKind{
	{"mem", func(t testing.TB, dir string, lim Limits) Store { return NewMemStore(lim) }},
	{"file", func(t testing.TB, dir string, lim Limits) Store {
		s, err := Open(fileCfg(dir, lim))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"file-s2-aes", func(t testing.TB, dir string, lim Limits) Store {
		cfg := fileCfg(dir, lim)
		cfg.Compress, cfg.EncryptionKey, cfg.Cipher = true, []byte("secret"), "aes"
		s, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"file-chacha-periodic", func(t testing.TB, dir string, lim Limits) Store {
		cfg := fileCfg(dir, lim)
		cfg.EncryptionKey, cfg.SyncInterval = []byte("secret"), 10*time.Millisecond
		s, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

func forEach(t *testing.T, fn func(t *testing.T, k storeKind)) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) { fn(t, k) })
	}
}

func mustStore(t testing.TB, s Store, subj, msg string) uint64 {
	t.Helper()
	seq, _, err := s.StoreMsg(subj, nil, []byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func checkLoad(t testing.TB, s Store, seq uint64, subj, msg string) {
	t.Helper()
	m, err := s.LoadMsg(seq)
	if err != nil {
		t.Fatalf("load %d: %v", seq, err)
	}
	if m.Subject != subj || string(m.Data) != msg || m.Seq != seq {
		t.Fatalf("load %d: got %q %q seq %d", seq, m.Subject, m.Data, m.Seq)
	}
}

func TestStoreBasics(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		s := k.open(t, t.TempDir(), Limits{})
		defer s.Stop()
		for i := 1; i <= 200; i++ {
			seq, _, err := s.StoreMsg(fmt.Sprintf("foo.%d", i%5), []byte("h:v"), []byte(fmt.Sprintf("msg-%d-%s", i, strings.Repeat("x", i%50))))
			if err != nil || seq != uint64(i) {
				t.Fatalf("store %d: seq %d err %v", i, seq, err)
			}
		}
		st := s.State()
		if st.Msgs != 200 || st.FirstSeq != 1 || st.LastSeq != 200 || st.Subjects["foo.3"] != 40 {
			t.Fatalf("state %+v", st)
		}
		m, err := s.LoadMsg(77)
		if err != nil || string(m.Header) != "h:v" || !strings.HasPrefix(string(m.Data), "msg-77-") {
			t.Fatalf("load 77: %+v %v", m, err)
		}
		m, err = s.LoadLastMsg("foo.1")
		if err != nil || m.Seq != 196 {
			t.Fatalf("last foo.1: %+v %v", m, err)
		}
		if _, err := s.LoadMsg(201); err != ErrEOF {
			t.Fatalf("load 201: %v", err)
		}
		if ok, _ := s.RemoveMsg(196); !ok {
			t.Fatal("remove 196")
		}
		if ok, _ := s.RemoveMsg(196); ok {
			t.Fatal("second remove 196 succeeded")
		}
		if _, err := s.LoadMsg(196); err != ErrNotFound {
			t.Fatalf("load removed: %v", err)
		}
		if m, _ := s.LoadLastMsg("foo.1"); m == nil || m.Seq != 191 {
			t.Fatalf("last foo.1 after remove: %+v", m)
		}
		if m, _ := s.LoadNextMsg("foo.2", 100); m == nil || m.Seq != 102 {
			t.Fatalf("next foo.2: %+v", m)
		}
		if n, _ := s.PurgeSubject("foo.0"); n != 40 {
			t.Fatalf("purge subject: %d", n)
		}
		if n, _ := s.Compact(100); n == 0 {
			t.Fatal("compact removed nothing")
		}
		st = s.State()
		if st.FirstSeq != 101 || st.Subjects["foo.0"] != 0 || st.Msgs != 200-40-1-(99-19) {
			t.Fatalf("after compact %+v", st)
		}
		if n, _ := s.Purge(); n != st.Msgs {
			t.Fatalf("purge removed %d, want %d", n, st.Msgs)
		}
		st = s.State()
		if st.Msgs != 0 || st.FirstSeq != 201 || st.LastSeq != 200 || st.Bytes != 0 {
			t.Fatalf("after purge %+v", st)
		}
		if seq := mustStore(t, s, "bar", "again"); seq != 201 {
			t.Fatalf("seq after purge %d", seq)
		}
		first, _ := s.SkipMsgs(3)
		if first != 202 {
			t.Fatalf("skip first %d", first)
		}
		if seq := mustStore(t, s, "bar", "after skip"); seq != 205 {
			t.Fatalf("seq after skip %d", seq)
		}
		if _, _, err := s.StoreMsg("", nil, nil); err != ErrBadSubject {
			t.Fatalf("empty subject: %v", err)
		}
	})
}

// TestWildcardFilters pins what the filtered calls return, with the
// nats-server rules: "*" is one token, a final ">" one or more, and "" or
// ">" selects everything.
func TestWildcardFilters(t *testing.T) {
	subjects := []string{"orders.eu.new", "orders.us.new", "orders.eu.shipped", "audit", "orders.eu.new.x", "orders.us.shipped"}
	forEach(t, func(t *testing.T, k storeKind) {
		dir := t.TempDir()
		s := k.open(t, dir, Limits{})
		for i := 0; i < 24; i++ { // seq i+1 has subjects[i%6]
			mustStore(t, s, subjects[i%len(subjects)], fmt.Sprint(i+1))
		}
		check := func(s Store) {
			t.Helper()
			for _, c := range []struct {
				filter     string
				start      uint64
				next, last uint64 // 0: none
			}{
				{"orders.*.new", 1, 1, 20},
				{"orders.*.new", 3, 7, 20},
				{"orders.eu.*", 4, 7, 21},
				{"orders.>", 4, 5, 24},
				{"*.*.shipped", 4, 6, 24},
				{"*", 1, 4, 22},
				{"*", 23, 0, 22},
				{">", 10, 10, 24},
				{"", 10, 10, 24},
				{"orders.*", 1, 0, 0},
				{"orders.eu.new.>", 1, 5, 23},
				{"billing.>", 1, 0, 0},
				{"audit", 5, 10, 22},
			} {
				m, err := s.LoadNextMsg(c.filter, c.start)
				if c.next == 0 {
					if err != ErrEOF {
						t.Errorf("next %q from %d: %+v %v, want EOF", c.filter, c.start, m, err)
					}
				} else if err != nil || m.Seq != c.next || m.Subject != subjects[(c.next-1)%6] {
					t.Errorf("next %q from %d: %+v %v, want %d", c.filter, c.start, m, err, c.next)
				}
				m, err = s.LoadLastMsg(c.filter)
				if c.last == 0 {
					if err != ErrNotFound {
						t.Errorf("last %q: %+v %v, want not found", c.filter, m, err)
					}
				} else if err != nil || m.Seq != c.last {
					t.Errorf("last %q: %+v %v, want %d", c.filter, m, err, c.last)
				}
			}
		}
		check(s)
		if n, err := s.PurgeSubject("orders.*.new"); n != 8 || err != nil {
			t.Fatalf("purge orders.*.new: %d %v", n, err)
		}
		if n, _ := s.PurgeSubject("orders.*"); n != 0 {
			t.Fatalf("purge orders.*: %d", n)
		}
		st := s.State()
		if st.Msgs != 16 || st.Subjects["orders.eu.new"] != 0 || st.Subjects["orders.us.new"] != 0 || st.Subjects["orders.eu.new.x"] != 4 {
			t.Fatalf("after purge: %+v", st)
		}
		if k.name != "mem" {
			s.Stop()
			s = k.open(t, dir, Limits{})
		}
		if m, err := s.LoadNextMsg("orders.*.new", 1); err != ErrEOF {
			t.Fatalf("purged messages found after reopen: %+v %v", m, err)
		}
		if m, err := s.LoadLastMsg("orders.>"); err != nil || m.Seq != 24 {
			t.Fatalf("last orders.> after purge: %+v %v", m, err)
		}
		if n, _ := s.PurgeSubject(">"); n != 16 {
			t.Fatalf("purge >: %d", n)
		}
		if st := s.State(); st.Msgs != 0 || st.FirstSeq != 25 {
			t.Fatalf("after purge >: %+v", st)
		}
		s.Stop()
	})
}

func TestStoreAsyncCallback(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		s := k.open(t, t.TempDir(), Limits{})
		defer s.Stop()
		var wg sync.WaitGroup
		var mu sync.Mutex
		seen := map[uint64]bool{}
		for i := 0; i < 500; i++ {
			wg.Add(1)
			buf := []byte(fmt.Sprint(i))
			s.StoreAsync("a", nil, buf, func(seq uint64, ts int64, err error) {
				mu.Lock()
				if err != nil || seen[seq] || ts == 0 {
					t.Errorf("cb seq %d err %v", seq, err)
				}
				seen[seq] = true
				mu.Unlock()
				wg.Done()
			})
			buf[0] = 'X' // the store copied it
		}
		wg.Wait()
		for seq := uint64(1); seq <= 500; seq++ {
			if m, err := s.LoadMsg(seq); err != nil || m.Data[0] == 'X' {
				t.Fatalf("seq %d: %v", seq, err)
			}
		}
	})
}

// TestStoreAsyncHeld: held records wait for Flush (or for other work to join them), keep
// their order with what comes after them, and are never lost by Stop. A Flush(true) on a
// store that commits in groups, with its writer idle, commits before it returns.
func TestStoreAsyncHeld(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		dir := t.TempDir()
		s := k.open(t, dir, Limits{})
		var mu sync.Mutex
		var got []uint64
		cb := func(seq uint64, ts int64, err error) {
			if err != nil {
				t.Errorf("cb: %v", err)
			}
			mu.Lock()
			got = append(got, seq)
			mu.Unlock()
		}
		done := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(got)
		}
		grouped := k.name == "file" || k.name == "file-s2-aes"

		// Held, then flushed inline: committed on this goroutine.
		for i := 0; i < 10; i++ {
			s.StoreAsyncHeld("held", nil, []byte(fmt.Sprint(i)), cb)
		}
		if grouped {
			time.Sleep(20 * time.Millisecond)
			if n := done(); n != 0 {
				t.Fatalf("%d held records acknowledged before Flush", n)
			}
		}
		s.Flush(true)
		if grouped || k.name == "mem" {
			if n := done(); n != 10 {
				t.Fatalf("after Flush(true): %d of 10 acknowledged", n)
			}
		}

		// Held, then a blocking store: it must not wait forever behind them, and it comes
		// after them.
		for i := 0; i < 5; i++ {
			s.StoreAsyncHeld("held", nil, []byte("x"), cb)
		}
		if seq := mustStore(t, s, "after", "y"); seq != 16 {
			t.Fatalf("store after 15 held: seq %d", seq)
		}

		// Held, then Flush(false): the writer takes them.
		for i := 0; i < 5; i++ {
			s.StoreAsyncHeld("held", nil, []byte("z"), cb)
		}
		s.Flush(false)
		deadline := time.Now().Add(10 * time.Second)
		for done() < 20 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}

		// Held and never flushed: Stop stores them.
		for i := 0; i < 3; i++ {
			s.StoreAsyncHeld("last", nil, []byte("w"), cb)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		want := make([]uint64, 0, 23)
		for i := uint64(1); i <= 24; i++ {
			if i != 16 {
				want = append(want, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("acknowledged %v, want %v", got, want)
		}
		mu.Unlock()
		if k.name == "mem" {
			return
		}
		s = k.open(t, dir, Limits{})
		defer s.Stop()
		if st := s.State(); st.Msgs != 24 || st.LastSeq != 24 {
			t.Fatalf("reopened: %d msgs, last %d", st.Msgs, st.LastSeq)
		}
		checkLoad(t, s, 24, "last", "w")
	})
}

func TestLimits(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		t.Run("maxmsgs", func(t *testing.T) {
			s := k.open(t, t.TempDir(), Limits{MaxMsgs: 10})
			defer s.Stop()
			for i := 0; i < 100; i++ {
				mustStore(t, s, "x", "m")
			}
			if st := s.State(); st.Msgs != 10 || st.FirstSeq != 91 {
				t.Fatalf("%+v", st)
			}
		})
		t.Run("maxbytes", func(t *testing.T) {
			sz := int64(sizeIn(k, "x", nil, []byte("m")))
			s := k.open(t, t.TempDir(), Limits{MaxBytes: 5 * sz})
			defer s.Stop()
			for i := 0; i < 50; i++ {
				mustStore(t, s, "x", "m")
			}
			if st := s.State(); st.Msgs != 5 || st.Bytes != uint64(5*sz) {
				t.Fatalf("%+v", st)
			}
		})
		t.Run("discardnew", func(t *testing.T) {
			s := k.open(t, t.TempDir(), Limits{MaxMsgs: 3, Discard: DiscardNew})
			defer s.Stop()
			for i := 0; i < 3; i++ {
				mustStore(t, s, "x", "m")
			}
			if _, _, err := s.StoreMsg("x", nil, nil); err != ErrMaxMsgs {
				t.Fatalf("got %v", err)
			}
		})
		t.Run("persubject", func(t *testing.T) {
			s := k.open(t, t.TempDir(), Limits{MaxMsgsPerSubject: 2})
			defer s.Stop()
			for i := 0; i < 30; i++ {
				mustStore(t, s, fmt.Sprintf("kv.%d", i%3), fmt.Sprint(i))
			}
			st := s.State()
			if st.Msgs != 6 || st.Subjects["kv.1"] != 2 {
				t.Fatalf("%+v", st)
			}
			if m, _ := s.LoadLastMsg("kv.2"); m == nil || string(m.Data) != "29" {
				t.Fatalf("last %+v", m)
			}
		})
		t.Run("maxsize", func(t *testing.T) {
			s := k.open(t, t.TempDir(), Limits{MaxMsgSize: 4})
			defer s.Stop()
			if _, _, err := s.StoreMsg("x", nil, []byte("12345")); err != ErrMaxMsgSize {
				t.Fatalf("got %v", err)
			}
		})
		t.Run("maxage", func(t *testing.T) {
			s := k.open(t, t.TempDir(), Limits{MaxAge: 50 * time.Millisecond})
			defer s.Stop()
			for i := 0; i < 20; i++ {
				mustStore(t, s, "x", "m")
			}
			deadline := time.Now().Add(3 * time.Second)
			for s.FastState().Msgs != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("not expired: %+v", s.FastState())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if st := s.FastState(); st.FirstSeq != 21 || st.LastSeq != 20 {
				t.Fatalf("%+v", st)
			}
		})
	})
}

// TestReopen checks that every kind of removal survives a restart, across
// block boundaries, with compaction of emptied blocks in between.
func TestReopen(t *testing.T) {
	for _, k := range storeKinds[1:] {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			s := k.open(t, dir, Limits{})
			payload := strings.Repeat("p", 100)
			for i := 1; i <= 600; i++ {
				mustStore(t, s, fmt.Sprintf("s.%d", i%7), fmt.Sprintf("%d-%s", i, payload))
			}
			s.Compact(50)
			for seq := uint64(100); seq < 250; seq++ { // empties whole interior blocks
				s.RemoveMsg(seq)
			}
			s.RemoveMsg(400)
			s.PurgeSubject("s.3")
			want := s.State()
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			s = k.open(t, dir, Limits{})
			defer s.Stop()
			got := s.State()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("state after reopen\n got %+v\nwant %+v", got, want)
			}
			for seq := uint64(1); seq <= 600; seq++ {
				m, err := s.LoadMsg(seq)
				dead := seq < 50 || (seq >= 100 && seq < 250) || seq == 400 || seq%7 == 3
				if dead != (err == ErrNotFound) || (!dead && !strings.HasPrefix(string(m.Data), fmt.Sprintf("%d-", seq))) {
					t.Fatalf("seq %d dead=%v err=%v", seq, dead, err)
				}
			}
			if l := s.Lost(); l.Msgs != 0 || l.CorruptSpans != 0 {
				t.Fatalf("lost %+v", l)
			}
			if seq := mustStore(t, s, "new", "x"); seq != 601 {
				t.Fatalf("seq %d", seq)
			}
		})
	}
}

func TestReopenAfterPurge(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(fileCfg(dir, Limits{}))
	for i := 0; i < 300; i++ {
		mustStore(t, s, "a", strings.Repeat("z", 64))
	}
	s.Purge()
	s.Stop()
	s, _ = Open(fileCfg(dir, Limits{}))
	defer s.Stop()
	if st := s.State(); st.Msgs != 0 || st.FirstSeq != 301 || st.LastSeq != 300 {
		t.Fatalf("%+v", st)
	}
	if seq := mustStore(t, s, "a", "b"); seq != 301 {
		t.Fatalf("seq %d", seq)
	}
}

func TestCompressedBlocksSealed(t *testing.T) {
	dir := t.TempDir()
	cfg := fileCfg(dir, Limits{})
	cfg.Compress = true
	s, _ := Open(cfg)
	for i := 0; i < 400; i++ {
		mustStore(t, s, "c", strings.Repeat("compressible ", 10))
	}
	s.Stop()
	names, _ := OSFS{}.ReadDir(dir + "/msgs")
	sealed := 0
	for _, n := range names {
		if strings.HasSuffix(n, ".sblk") {
			sealed++
		}
	}
	if sealed == 0 {
		t.Fatalf("no sealed blocks in %v", names)
	}
	s, _ = Open(cfg)
	defer s.Stop()
	for seq := uint64(1); seq <= 400; seq++ {
		checkLoad(t, s, seq, "c", strings.Repeat("compressible ", 10))
	}
}

var _ = bytes.Equal
var _ = io.EOF

// TestGroupCommitFlood: producers that never let the queue empty must not starve the
// commit (maxLinger/maxCommitBytes cut it), callbacks come in sequence order, and a record
// is readable by the time its callback runs.
func TestGroupCommitFlood(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), BlockSize: 64 << 10, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var mu sync.Mutex
	var last uint64
	var bad []string
	cb := func(seq uint64, _ int64, err error) {
		if err != nil {
			mu.Lock()
			bad = append(bad, err.Error())
			mu.Unlock()
			return
		}
		m, lerr := s.LoadMsg(seq)
		mu.Lock()
		if seq <= last {
			bad = append(bad, fmt.Sprintf("callback for %d after %d", seq, last))
		}
		last = seq
		if lerr != nil || m.Seq != seq {
			bad = append(bad, fmt.Sprintf("seq %d not readable in its callback: %v", seq, lerr))
		}
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := bytes.Repeat([]byte("f"), 100)
			// Up to 256 in flight per producer: enough to keep the queue from ever
			// emptying, bounded so the flood cannot outgrow memory.
			slots := make(chan struct{}, 256)
			done := func(seq uint64, ts int64, err error) { cb(seq, ts, err); <-slots }
			for {
				select {
				case <-stop:
					for i := 0; i < cap(slots); i++ { // wait for ours
						slots <- struct{}{}
					}
					return
				case slots <- struct{}{}:
					s.StoreAsync("flood", nil, payload, done)
				}
			}
		}()
	}
	// Blocking writers in the middle of the flood still get through.
	for i := 0; i < 200; i++ {
		if _, _, err := s.StoreMsg("sync", nil, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if _, _, err := s.StoreMsg("sync", nil, []byte("last")); err != nil { // after every async one
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d problems, first: %s", len(bad), bad[0])
	}
	if st := s.State(); st.LastSeq <= last || st.Msgs != st.LastSeq {
		t.Fatalf("state %+v, last callback %d", st, last)
	}
}

// TestEmptiedBlocksRemoved empties most blocks of a store in each of the ways
// a block can empty, and checks that their files go (right away, and after a
// reopen), that only the active block and the blocks still holding records
// stay, and that the surviving records are intact.
func TestEmptiedBlocksRemoved(t *testing.T) {
	const n = 400 // ~14 blocks of 4 KiB
	body := strings.Repeat("e", 100)
	cases := []struct {
		name  string
		lim   Limits
		empty func(t *testing.T, s *FileStore)
		kept  uint64 // records left, the last ones written
	}{
		{"remove each", Limits{}, func(t *testing.T, s *FileStore) {
			for seq := uint64(1); seq <= n-10; seq++ {
				if ok, err := s.RemoveMsg(seq); !ok || err != nil {
					t.Fatalf("remove %d: %v %v", seq, ok, err)
				}
			}
		}, 10},
		{"remove each, newest first", Limits{}, func(t *testing.T, s *FileStore) {
			for seq := uint64(n - 10); seq >= 1; seq-- {
				if ok, err := s.RemoveMsg(seq); !ok || err != nil {
					t.Fatalf("remove %d: %v %v", seq, ok, err)
				}
			}
		}, 10},
		{"emptied while active", Limits{}, func(t *testing.T, s *FileStore) {
			// Fill the active block to the brim and empty everything: the
			// next append rolls past a block that emptied while it was
			// active, which must go then.
			for {
				s.mu.RLock()
				full := s.act.size >= s.cfg.BlockSize
				s.mu.RUnlock()
				if full {
					break
				}
				mustStore(t, s, "e", body)
			}
			for seq := uint64(1); seq <= s.State().LastSeq; seq++ {
				if ok, err := s.RemoveMsg(seq); !ok || err != nil {
					t.Fatalf("remove %d: %v %v", seq, ok, err)
				}
			}
		}, 0},
		{"purge", Limits{}, func(t *testing.T, s *FileStore) { s.Purge() }, 0},
		{"purge subject", Limits{}, func(t *testing.T, s *FileStore) { s.PurgeSubject("e") }, 0},
		{"compact", Limits{}, func(t *testing.T, s *FileStore) { s.Compact(n - 9) }, 10},
		{"max msgs", Limits{MaxMsgs: 10}, func(t *testing.T, s *FileStore) {}, 10},
		// The age is long enough for the last append to outlive every check (and the
		// reopen) on a loaded machine: with 50 ms it expired before it was read back.
		{"max age", Limits{MaxAge: 2 * time.Second}, func(t *testing.T, s *FileStore) {
			time.Sleep(2300 * time.Millisecond)
			// Expiry runs on a timer; an append makes sure the writer has
			// applied it, and is itself young enough to stay.
			mustStore(t, s, "e", body)
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(fileCfg(dir, tc.lim))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				mustStore(t, s, "e", body)
			}
			if tc.lim == (Limits{}) && numBlockFiles(dir) < 10 {
				t.Fatalf("only %d block files to start with", numBlockFiles(dir))
			}
			tc.empty(t, s)
			st := s.State()
			if st.Msgs != tc.kept {
				t.Fatalf("%d msgs left, want %d", st.Msgs, tc.kept)
			}
			// An append after the removals makes the writer look again, and
			// the finisher deletes files once the commit is durable.
			last := mustStore(t, s, "e", body)
			want := tc.kept + 1
			if m := uint64(tc.lim.MaxMsgs); m > 0 && want > m {
				want = m
			}
			check := func(when string) {
				t.Helper()
				// Records ~130 bytes: want of them fit in two blocks.
				if k := numBlockFiles(dir); k > 2 {
					t.Fatalf("%s: %d block files left for %d records", when, k, want)
				}
				s.mu.RLock()
				for _, b := range s.blocks {
					if b.live == 0 && b != s.act {
						t.Errorf("%s: block %d is empty and not active, but still kept", when, b.id)
					}
				}
				s.mu.RUnlock()
				for seq := last - want + 1; seq <= last; seq++ {
					checkLoad(t, s, seq, "e", body)
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for numBlockFiles(dir) > 2 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			check("running")
			s.Stop()
			if s, err = Open(fileCfg(dir, tc.lim)); err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			check("reopened")
			if st := s.State(); st.Msgs != want || st.LastSeq != last {
				t.Fatalf("reopened: %+v", st)
			}
		})
	}
}

func numBlockFiles(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "msgs", "*.blk"))
	return len(m)
}

// gateFS is the OS file system with a gate in front of Datasync: while the
// gate is shut, a Datasync reports on entered and waits for it to open.
type gateFS struct {
	OSFS
	mu      sync.Mutex
	shut    chan struct{} // nil: open
	entered chan struct{}
}

type gateFile struct {
	File
	g *gateFS
}

func (g *gateFS) OpenFile(name string, create bool) (File, error) {
	f, err := g.OSFS.OpenFile(name, create)
	if err != nil {
		return nil, err
	}
	return gateFile{f, g}, nil
}

func (g *gateFS) close() {
	g.mu.Lock()
	g.shut = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateFS) open() {
	g.mu.Lock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
	g.mu.Unlock()
}

func (f gateFile) Datasync() error {
	f.g.mu.Lock()
	shut := f.g.shut
	f.g.mu.Unlock()
	if shut != nil {
		f.g.entered <- struct{}{}
		<-shut
	}
	return f.File.Datasync()
}

// TestStoreAsyncBusy holds the writer inside an fsync and checks that
// StoreAsync refuses records, at once and with ErrBusy, once MaxPending
// bytes are queued behind it; that everything it took is stored in order
// when the disk comes back; and that it takes records again after that.
func TestStoreAsyncBusy(t *testing.T) {
	g := &gateFS{entered: make(chan struct{}, 1)}
	const limit = 64 << 10
	cfg := fileCfg(t.TempDir(), Limits{})
	cfg.FS, cfg.MaxPending, cfg.BlockSize = g, limit, 8<<20
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	defer g.open() // before Stop, or a failure would leave the writer stuck
	mustStore(t, s, "busy", "first")
	g.close()
	type ack struct {
		seq uint64
		err error
	}
	acks := make(chan ack, 2000) // room for every callback, so a failing test still stops
	cb := func(seq uint64, _ int64, err error) { acks <- ack{seq, err} }
	s.StoreAsync("busy", nil, []byte("held in fsync"), cb)
	<-g.entered // the writer is now stuck in that record's fsync
	payload := make([]byte, 1000)
	accepted, refused := 0, false
	for i := 0; i < 1000 && !refused; i++ {
		var got *ack
		s.StoreAsync("busy", nil, payload, func(seq uint64, _ int64, err error) {
			if err == ErrBusy {
				got = &ack{seq, err} // called before StoreAsync returns
				return
			}
			acks <- ack{seq, err}
		})
		if got != nil {
			refused = true
		} else {
			accepted++
		}
	}
	if !refused {
		t.Fatal("StoreAsync never refused a record while the writer was stuck")
	}
	rec := int(storedSize("busy", nil, payload))
	if accepted < limit/rec-1 || accepted > limit/rec+1 {
		t.Fatalf("accepted %d records of %d bytes against a %d byte limit", accepted, rec, limit)
	}
	g.open()
	for i := 0; i < accepted+1; i++ {
		a := <-acks
		if a.err != nil || a.seq != uint64(i+2) {
			t.Fatalf("ack %d: seq %d err %v", i, a.seq, a.err)
		}
	}
	if seq := mustStore(t, s, "busy", "after"); seq != uint64(accepted+3) {
		t.Fatalf("seq after the stall: %d", seq)
	}
	s.StoreAsync("busy", nil, payload, cb)
	if a := <-acks; a.err != nil {
		t.Fatalf("StoreAsync after the stall: %v", a.err)
	}
	if st := s.State(); st.Msgs != uint64(accepted+4) {
		t.Fatalf("%d messages stored, want %d", st.Msgs, accepted+4)
	}
}

// dirBytes is the total size of the files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestBlockGrowth checks that blocks start small and double up to
// BlockSize, that each is preallocated for its own room, and that a reopened
// store carries on from the room its files were made for.
func TestBlockGrowth(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, BlockSize: 1 << 20, Logf: quietLog}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 1000)
	store := func(s *FileStore, n int) {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			s.StoreAsync("grow", nil, payload, func(_ uint64, _ int64, err error) {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
	}
	store(s, 4000) // ~4 MB
	want := []int64{64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 1 << 20}
	s.mu.RLock()
	var limits []int64
	for _, b := range s.blocks {
		limits = append(limits, b.limit)
		fi, err := os.Stat(s.blockPath(b.id, false))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() < preallocFor(b.limit) {
			t.Errorf("block %d (room %d) file is %d bytes, want at least %d", b.id, b.limit, fi.Size(), preallocFor(b.limit))
		}
		if b != s.act && (b.size < b.limit || b.size > b.limit+int64(len(payload))+100) {
			t.Errorf("block %d holds %d bytes, room %d", b.id, b.size, b.limit)
		}
	}
	s.mu.RUnlock()
	if len(limits) < len(want) || !slices.Equal(limits[:len(want)], want) {
		t.Fatalf("block rooms %v, want %v then 1 MiB", limits, want)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	s.mu.RLock()
	if s.act == nil || s.act.limit != 1<<20 || s.lastLimit != 1<<20 {
		t.Fatalf("after reopen: active %+v, last room %d", s.act, s.lastLimit)
	}
	s.mu.RUnlock()
	store(s, 1500)
	if st := s.State(); st.Msgs != 5500 {
		t.Fatalf("%d messages", st.Msgs)
	}
}

// TestSmallStoreFootprint: a store holding a few messages takes little
// disk, however large BlockSize is (each block file is zero-filled ahead of
// use, so blocks of the full size would pin megabytes per store).
func TestSmallStoreFootprint(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, Logf: quietLog}) // default 8 MB blocks
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		mustStore(t, s, "kv.key", "value")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := dirBytes(t, filepath.Join(dir, "msgs")); n > 256<<10 {
		t.Fatalf("a store with 50 small messages takes %d bytes on disk", n)
	}
}

// TestStateTimes checks that State's first and last times are the exact
// stamps of the first and last messages, as nats-server reports them, after
// removals and across a reopen.
func TestStateTimes(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		dir := t.TempDir()
		s := k.open(t, dir, Limits{})
		for i := 0; i < 30; i++ {
			mustStore(t, s, fmt.Sprintf("t.%d", i%3), "x")
		}
		check := func(what string) {
			t.Helper()
			st := s.State()
			first, err1 := s.LoadMsg(st.FirstSeq)
			last, err2 := s.LoadMsg(st.LastSeq)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: load first/last: %v %v", what, err1, err2)
			}
			if st.FirstTS != first.TS || st.LastTS != last.TS {
				t.Fatalf("%s: state times %d..%d, messages stamped %d..%d", what, st.FirstTS, st.LastTS, first.TS, last.TS)
			}
		}
		check("stored")
		s.RemoveMsg(1)
		s.RemoveMsg(2)
		check("first two removed")
		s.Compact(10)
		check("compacted")
		reopen := func() {
			if k.name != "mem" {
				s.Stop()
				s = k.open(t, dir, Limits{})
			}
		}
		reopen()
		check("reopened")
		// The newest stamp outlives its message, as nats-server's last_ts.
		newest, err := s.LoadMsg(30)
		if err != nil {
			t.Fatal(err)
		}
		s.RemoveMsg(30)
		if st := s.State(); st.LastTS != newest.TS {
			t.Fatalf("newest removed: LastTS %d, want %d", st.LastTS, newest.TS)
		}
		s.Purge()
		reopen()
		if st := s.State(); st.LastTS != newest.TS || st.FirstTS != 0 || st.LastSeq != 30 {
			t.Fatalf("purged and reopened: %+v, want LastTS %d", st, newest.TS)
		}
		// Again with the newest message's block gone: skips (which move the
		// last time too, as nats-server's do) fill blocks after it, so the
		// purge empties and drops it.
		seq := mustStore(t, s, "t.0", "x")
		if newest, err = s.LoadMsg(seq); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SkipMsgs(400); err != nil {
			t.Fatal(err)
		}
		s.Purge()
		skipped := s.State().LastTS
		if skipped < newest.TS {
			t.Fatalf("skips moved the last time back: %d < %d", skipped, newest.TS)
		}
		reopen()
		if st := s.State(); st.LastTS != skipped || st.LastSeq != seq+400 {
			t.Fatalf("purged past skips and reopened: %+v, want LastTS %d", st, skipped)
		}
		if fs, ok := s.(*FileStore); ok && len(fs.blocks) > 1 {
			t.Fatalf("%d blocks left after the purge", len(fs.blocks))
		}
		s.Stop()
	})
}

// TestTimestampSpan moves the clock messages are stamped with: a block
// rolls before a stamp would not fit its entries, stamps read back exactly,
// and an entry whose stamp did not fit (as in a block written before blocks
// rolled on it) has its time read from the record.
func TestTimestampSpan(t *testing.T) {
	base := time.Now().UnixNano()
	clock := setClock(t, base)

	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Stop() }()
	for i := 0; i < 5; i++ {
		clock.Add(1234567) // 1.23 ms: not a whole millisecond
		mustStore(t, s, "span", "a")
	}
	clock.Add(60 * 24 * int64(time.Hour)) // 60 days: past what an entry can hold
	for i := 0; i < 5; i++ {
		mustStore(t, s, "span", "b")
	}
	s.mu.RLock()
	nblocks := len(s.blocks)
	for seq := uint64(1); seq <= 10; seq++ {
		b, e := s.blockEnt(seq)
		exact, ok := s.recTS(b, e)
		approx := s.entTS(b, e)
		if !ok || approx < exact || approx-exact >= int64(time.Millisecond) || e.tms == tmsUnknown {
			t.Errorf("seq %d: stamped %d, index says %d (tms %d)", seq, exact, approx, e.tms)
		}
	}
	s.mu.RUnlock()
	if nblocks != 2 {
		t.Fatalf("%d blocks, want a new one for the stamps 60 days on", nblocks)
	}
	if st := s.State(); st.LastTS != clock.Load() {
		t.Fatalf("last time %d, want %d", st.LastTS, clock.Load())
	}

	s.mu.Lock()
	b, e := s.blockEnt(3)
	e.tms = tmsUnknown
	exact, _ := s.recTS(b, e)
	got := s.entTS(b, e)
	s.mu.Unlock()
	if m, _ := s.LoadMsg(3); got != exact || m.TS != exact {
		t.Fatalf("entry without a stamp: %d, record says %d", got, exact)
	}
}

// TestEntSize guards the index's footprint: one ent per sequence, tens of
// millions in a long stream.
func TestEntSize(t *testing.T) {
	if n := unsafe.Sizeof(ent{}); n != 16 {
		t.Fatalf("ent is %d bytes, want 16", n)
	}
}

// TestFilteredState pins pending counts across many blocks, with removals,
// for every filter kind and start.
func TestFilteredState(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		s := k.open(t, t.TempDir(), Limits{})
		defer s.Stop()
		subjects := []string{"f.a.x", "f.b.x", "f.a.y", "g"}
		for i := 0; i < 400; i++ { // seq i+1 has subjects[i%4]; many 4 KB blocks
			mustStore(t, s, subjects[i%4], strings.Repeat("p", 60))
		}
		for seq := uint64(1); seq <= 400; seq += 7 { // 58 removed
			s.RemoveMsg(seq)
		}
		// The expected answers, by brute force over what the store holds.
		want := func(filter string, start uint64) SimpleState {
			var st SimpleState
			for seq := max(start, 1); seq <= 400; seq++ {
				subj := subjects[(seq-1)%4]
				if (seq-1)%7 == 0 || !(filter == "" || sublist.MatchFilter(subj, filter)) {
					continue
				}
				st.add(1, seq, seq)
			}
			return st
		}
		for _, filter := range []string{"", ">", "f.>", "f.a.*", "*.*.x", "f.b.x", "g", "h", "f.*"} {
			for _, start := range []uint64{0, 1, 2, 9, 100, 101, 257, 399, 400, 401} {
				if got, w := s.FilteredState(filter, start), want(filter, start); got != w {
					t.Errorf("FilteredState(%q, %d) = %+v, want %+v", filter, start, got, w)
				}
			}
		}
	})
}

// TestReopenFullEmptyStore reopens a store whose every message was removed
// and whose last block is full, so it has no active block. The first batch
// after that only drops the emptied blocks; it used to dereference the
// missing active block.
func TestReopenFullEmptyStore(t *testing.T) {
	dir := t.TempDir()
	cfg := fileCfg(dir, Limits{})
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for full := false; !full; {
		last = mustStore(t, s, "full", strings.Repeat("x", 100))
		s.mu.RLock()
		full = s.act.size >= s.act.limit
		s.mu.RUnlock()
	}
	for seq := uint64(1); seq <= last; seq++ {
		if ok, err := s.RemoveMsg(seq); !ok || err != nil {
			t.Fatalf("remove %d: %v %v", seq, ok, err)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	act := s.act
	s.mu.RUnlock()
	if act != nil {
		t.Fatalf("the reopened store has an active block (%d of %d bytes): the test needs none", act.size, act.limit)
	}
	if ok, _ := s.RemoveMsg(1); ok { // nothing to remove: the batch only drops blocks
		t.Fatal("removed seq 1 twice")
	}
	if st := s.State(); st.Msgs != 0 || st.LastSeq != last {
		t.Fatalf("state %+v, want empty up to %d", st, last)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if st := s.State(); st.Msgs != 0 || st.LastSeq != last {
		t.Fatalf("after another reopen: state %+v, want empty up to %d", st, last)
	}
	if seq := mustStore(t, s, "full", "again"); seq != last+1 {
		t.Fatalf("next seq %d, want %d", seq, last+1)
	}
}

// TestLoadedMessageIsTheCallers checks that a loaded message's slices
// belong to the caller: growing Header does not run into Data, and changing
// either does not change what the store serves next.
func TestLoadedMessageIsTheCallers(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		s := k.open(t, t.TempDir(), Limits{})
		defer s.Stop()
		for i := 0; i < 200; i++ { // several blocks, so file kinds seal some
			if _, _, err := s.StoreMsg("own", []byte("h:1"), []byte(fmt.Sprintf("payload-%03d", i))); err != nil {
				t.Fatal(err)
			}
		}
		for _, seq := range []uint64{1, 100, 200} {
			m, err := s.LoadMsg(seq)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("payload-%03d", seq-1)
			m.Header = append(m.Header, "XXXXXXXX"...)
			if string(m.Data) != want {
				t.Fatalf("seq %d: appending to Header changed Data to %q", seq, m.Data)
			}
			copy(m.Data, "ZZZZ")
			again, err := s.LoadMsg(seq)
			if err != nil || string(again.Data) != want || string(again.Header) != "h:1" {
				t.Fatalf("seq %d after the caller wrote to its copy: %q %q %v", seq, again.Header, again.Data, err)
			}
		}
	})
}

// TestStuckWorkQueue is a work queue whose first message is never acked:
// every later block empties and is dropped while the first stays, so what
// they recorded of removals has to move forward each time. It must stay a
// handful of markers (it used to grow by one per dropped block, each
// carried along by every later drop: 5,000 messages took 3 s, 100,000 more
// than 5 minutes), and a reopen must find the queue as it was.
func TestStuckWorkQueue(t *testing.T) {
	dir := t.TempDir()
	cfg := fileCfg(dir, Limits{})
	cfg.SyncInterval = -1
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustStore(t, s, "stuck", "never acked")
	payload := strings.Repeat("w", 100)
	const n = 20000
	for i := 0; i < n; i++ {
		seq := mustStore(t, s, "wq", payload)
		if i > 0 {
			if ok, err := s.RemoveMsg(seq - 1); !ok || err != nil {
				t.Fatalf("ack %d: %v %v", seq-1, ok, err)
			}
		}
	}
	markers := func(s *FileStore) (blocks, n int) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		for _, b := range s.blocks {
			n += len(b.markers)
		}
		return len(s.blocks), n
	}
	if b, m := markers(s); m > 4*b+64 {
		t.Fatalf("%d markers in %d blocks after %d acks", m, b, n)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	st := s.State()
	if st.Msgs != 2 || st.FirstSeq != 1 || st.LastSeq != n+1 || s.Lost().Msgs != 0 {
		t.Fatalf("after reopen: state %+v, lost %+v", st, s.Lost())
	}
	if m, err := s.LoadNextMsg("wq", 2); err != nil || m.Seq != n+1 {
		t.Fatalf("next work item: %+v %v", m, err)
	}
	if b, m := markers(s); m > 4*b+64 {
		t.Fatalf("%d markers in %d blocks after a reopen", m, b)
	}
}

// subjSnapshot is a copy of a store's state for one subject.
type subjSnapshot struct {
	Msgs, First, Last uint64
	Tracked           bool
	Seqs              []uint64
}

func subjOf(s Store, name string) subjSnapshot {
	var ss *subjState
	switch s := s.(type) {
	case *FileStore:
		s.mu.RLock()
		defer s.mu.RUnlock()
		ss = s.subjects.get(name)
	case *MemStore:
		s.mu.RLock()
		defer s.mu.RUnlock()
		ss = s.subjects.get(name)
	}
	if ss == nil {
		return subjSnapshot{}
	}
	snap := subjSnapshot{Msgs: ss.msgs, Last: ss.last, Tracked: ss.tracked}
	if ss.tracked {
		var buf [2]uint64
		snap.First, snap.Seqs = ss.first, slices.Clone(ss.list(&buf))
	}
	return snap
}

// TestSubjectLists walks one subject through the states of its sequence
// list, with thresholds small enough to see them: a run of messages close
// together gives the list up, messages far apart take it back (also on
// reopen), and removals anywhere keep it exact.
func TestSubjectLists(t *testing.T) {
	oldMax, oldDense, oldSparse := maxTracked, denseGap, sparseGap
	maxTracked, denseGap, sparseGap = 4, 4, 16
	defer func() { maxTracked, denseGap, sparseGap = oldMax, oldDense, oldSparse }()
	seqRange := func(lo, hi uint64) []uint64 {
		var r []uint64
		for seq := lo; seq <= hi; seq++ {
			r = append(r, seq)
		}
		return r
	}
	forEach(t, func(t *testing.T, k storeKind) {
		dir := t.TempDir()
		s := k.open(t, dir, Limits{})
		defer func() { s.Stop() }()
		reopen := func() {
			if _, ok := s.(*MemStore); !ok {
				s.Stop()
				s = k.open(t, dir, Limits{})
			}
		}
		want := func(step string, w subjSnapshot) {
			t.Helper()
			if got := subjOf(s, "a"); !reflect.DeepEqual(got, w) {
				t.Fatalf("%s: subject a is %+v, want %+v", step, got, w)
			}
		}
		for i := 0; i < 10; i++ {
			mustStore(t, s, "a", "x") // 1..10
		}
		want("10 in a row", subjSnapshot{Msgs: 10, Last: 10})
		for i := 0; i < 200; i++ {
			mustStore(t, s, "b", "x") // 11..210
		}
		mustStore(t, s, "a", "x") // 211: 11 messages over 211 sequences
		listed := subjSnapshot{Msgs: 11, First: 1, Last: 211, Tracked: true, Seqs: append(seqRange(1, 10), 211)}
		want("far apart", listed)
		reopen()
		want("far apart, reopened", listed)
		for _, seq := range []uint64{5, 1, 211, 9} {
			if ok, err := s.RemoveMsg(seq); !ok || err != nil {
				t.Fatalf("RemoveMsg(%d) = %v, %v", seq, ok, err)
			}
		}
		want("after removals", subjSnapshot{Msgs: 7, First: 2, Last: 10, Tracked: true, Seqs: []uint64{2, 3, 4, 6, 7, 8, 10}})
		if m, err := s.LoadNextMsg("a", 5); err != nil || m.Seq != 6 {
			t.Fatalf("LoadNextMsg(a, 5) = %v, %v", m, err)
		}
		if got, w := s.FilteredState("a", 3), (SimpleState{Msgs: 6, First: 3, Last: 10}); got != w {
			t.Fatalf("FilteredState(a, 3) = %+v, want %+v", got, w)
		}
		for i := 0; i < 100; i++ {
			mustStore(t, s, "a", "x") // 212..311
		}
		dense := subjSnapshot{Msgs: 107, Last: 311}
		want("close together again", dense)
		reopen()
		want("close together, reopened", dense)
		if m, err := s.LoadNextMsg("a", 11); err != nil || m.Seq != 212 {
			t.Fatalf("LoadNextMsg(a, 11) = %v, %v", m, err)
		}
		if got, w := s.FilteredState("a", 0), (SimpleState{Msgs: 107, First: 2, Last: 311}); got != w {
			t.Fatalf("FilteredState(a, 0) = %+v, want %+v", got, w)
		}
	})
}

// TestUpdateLimits changes a live store's limits: a lowered per-subject
// limit trims every subject to its newest messages (even with
// DiscardNewPerSubject, as nats-server does), lowered MaxMsgs and MaxBytes
// trim the oldest under DiscardOld and only refuse under DiscardNew, a new
// MaxMsgSize refuses at once, and a new MaxAge expires what is already too
// old. Each removal is reported.
func TestUpdateLimits(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		s := k.open(t, t.TempDir(), Limits{})
		defer s.Stop()
		var w watcher
		s.RegisterStorageUpdates(w.update)
		for i := 0; i < 10; i++ {
			mustStore(t, s, "a", "x") // a: odd seqs 1..19
			mustStore(t, s, "b", "y") // b: even seqs 2..20
		}
		size := w.take()[0].bytes // every message is the same size
		setLimits := func(l Limits) {
			t.Helper()
			if err := s.UpdateLimits(l); err != nil {
				t.Fatalf("UpdateLimits(%+v): %v", l, err)
			}
		}
		removed := func(step string, subj func(seq uint64) string, seqs ...uint64) {
			t.Helper()
			var want []update
			for _, seq := range seqs {
				want = append(want, update{-1, -size, seq, subj(seq)})
			}
			if got := w.take(); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: reported %+v, want %+v", step, got, want)
			}
		}
		bySeq := func(seq uint64) string { return map[uint64]string{0: "b", 1: "a"}[seq%2] }

		setLimits(Limits{MaxMsgsPerSubject: 3, DiscardNewPerSubject: true})
		removed("per subject", bySeq, 1, 3, 5, 7, 9, 11, 13, 2, 4, 6, 8, 10, 12, 14) // subjects in name order
		if st := s.State(); st.Msgs != 6 || st.FirstSeq != 15 || st.Subjects["a"] != 3 {
			t.Fatalf("after MaxMsgsPerSubject 3: %+v", st)
		}
		if _, _, err := s.StoreMsg("a", nil, []byte("x")); err != ErrMaxMsgsPerSubj {
			t.Fatalf("store with subject a full: %v", err)
		}

		setLimits(Limits{MaxMsgs: 4, Discard: DiscardNew})
		removed("MaxMsgs under DiscardNew", bySeq)
		if _, _, err := s.StoreMsg("c", nil, []byte("z")); err != ErrMaxMsgs {
			t.Fatalf("store past MaxMsgs under DiscardNew: %v", err)
		}
		setLimits(Limits{MaxMsgs: 4})
		removed("MaxMsgs", bySeq, 15, 16)
		setLimits(Limits{MaxBytes: 3 * size})
		removed("MaxBytes", bySeq, 17)
		if st := s.FastState(); st.Msgs != 3 || st.Bytes != uint64(3*size) || st.FirstSeq != 18 {
			t.Fatalf("after MaxBytes: %+v", st)
		}

		setLimits(Limits{MaxMsgSize: 1})
		if _, _, err := s.StoreMsg("a", nil, []byte("xx")); err != ErrMaxMsgSize {
			t.Fatalf("store past the new MaxMsgSize: %v", err)
		}
		setLimits(Limits{})
		mustStore(t, s, "a", "xx") // 21
		w.take()

		setLimits(Limits{MaxAge: time.Millisecond})
		// The file store reports a removal once it is durable, which may be
		// after State shows it: wait for the reports themselves.
		for deadline := time.Now().Add(10 * time.Second); w.count() < 4; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not all expired: %+v", s.FastState())
			}
		}
		got := w.take()
		if len(got) != 4 || got[0] != (update{-1, -size, 18, "b"}) || got[3].seq != 21 {
			t.Fatalf("expiry reported %+v", got)
		}
	})
}

// TestStorageUpdatesWaitForSync holds the file store's writer inside an
// fsync: the store of a record is reported only once it is durable, and
// before its acknowledgement.
func TestStorageUpdatesWaitForSync(t *testing.T) {
	g := &gateFS{entered: make(chan struct{}, 1)}
	cfg := fileCfg(t.TempDir(), Limits{})
	cfg.FS = g
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	defer g.open()
	mustStore(t, s, "a", "first")
	events := make(chan string, 4)
	s.RegisterStorageUpdates(func(msgs, bytes int64, seq uint64, subj string) {
		events <- fmt.Sprintf("update %d %d %s", msgs, seq, subj)
	})
	if e := <-events; e != "update 0 0 " {
		t.Fatalf("first report %q", e)
	}
	g.close()
	s.StoreAsync("a", nil, []byte("second"), func(seq uint64, _ int64, err error) {
		events <- fmt.Sprintf("ack %d %v", seq, err)
	})
	<-g.entered
	select {
	case e := <-events:
		t.Fatalf("%q before the fsync completed", e)
	default:
	}
	g.open()
	if e1, e2 := <-events, <-events; e1 != "update 1 2 a" || e2 != "ack 2 <nil>" {
		t.Fatalf("after the fsync: %q, %q", e1, e2)
	}
}

// TestPurgeEx pins JetStream's purge requests (filter, below a sequence,
// keeping the newest) on every store kind, what is left after each, and
// how each is reported.
func TestPurgeEx(t *testing.T) {
	// Nine messages: seqs 1..9 on a.1 a.2 b a.1 a.2 b a.1 a.2 b.
	subjects := []string{"a.1", "a.2", "b"}
	cases := []struct {
		filter      string
		below, keep uint64
		removed     uint64
		left        []uint64
	}{
		{"a.*", 0, 2, 4, []uint64{3, 6, 7, 8, 9}},           // the 6 a's less the newest 2
		{"a.1", 5, 0, 2, []uint64{2, 3, 5, 6, 7, 8, 9}},     // a.1 below 5
		{"a.1", 4, 0, 1, []uint64{2, 3, 4, 5, 6, 7, 8, 9}},  // one: reported alone
		{"a.>", 8, 1, 5, []uint64{3, 6, 8, 9}},              // below 8 bounds it before keep does
		{"", 0, 4, 5, []uint64{6, 7, 8, 9}},                 // the newest 4 of all
		{">", 7, 3, 6, []uint64{7, 8, 9}},                   // a compaction: keep does not count
		{"", 1, 0, 0, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}},  // below 1 is nothing
		{"b", 0, 3, 0, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}}, // keep all three
		{"c", 0, 0, 0, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}}, // no such subject
		{"*", 0, 0, 3, []uint64{1, 2, 4, 5, 7, 8}},          // one token: b only
		{"", 0, 0, 9, nil},                                  // purge
	}
	for _, c := range cases {
		name := fmt.Sprintf("%q below %d keep %d", c.filter, c.below, c.keep)
		forEach(t, func(t *testing.T, k storeKind) {
			s := k.open(t, t.TempDir(), Limits{})
			defer s.Stop()
			for i := 0; i < 9; i++ {
				mustStore(t, s, subjects[i%3], "x")
			}
			var w watcher
			s.RegisterStorageUpdates(w.update)
			w.take()
			size := func(seq uint64) int64 { return int64(sizeIn(k, subjects[(seq-1)%3], nil, []byte("x"))) }
			n, err := s.PurgeEx(c.filter, c.below, c.keep)
			if err != nil || n != c.removed {
				t.Fatalf("%s: removed %d, %v; want %d", name, n, err, c.removed)
			}
			var left []uint64
			for seq := uint64(1); seq <= 9; seq++ {
				if _, err := s.LoadMsg(seq); err == nil {
					left = append(left, seq)
				}
			}
			if !slices.Equal(left, c.left) {
				t.Fatalf("%s: left %v, want %v", name, left, c.left)
			}
			gone := slices.DeleteFunc(seqsTo(9), func(seq uint64) bool { return slices.Contains(c.left, seq) })
			var want []update
			switch {
			case n == 1:
				want = []update{{-1, -size(gone[0]), gone[0], subjects[(gone[0]-1)%3]}}
			case n > 1:
				var bytes int64
				for _, seq := range gone {
					bytes += size(seq)
				}
				want = []update{{-int64(n), -bytes, 0, ""}}
			}
			if got := w.take(); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: reported %+v, want %+v", name, got, want)
			}
		})
	}
}

func seqsTo(n uint64) []uint64 {
	var r []uint64
	for seq := uint64(1); seq <= n; seq++ {
		r = append(r, seq)
	}
	return r
}

// setClock makes stores stamp messages with the returned clock's time until
// the test ends.
func setClock(t testing.TB, start int64) *atomic.Int64 {
	var clock atomic.Int64
	clock.Store(start)
	old := stampNow
	stampNow = func() int64 { return clock.Load() }
	t.Cleanup(func() { stampNow = old })
	return &clock
}

// TestSeqFromTime finds messages by time on every store kind, after a
// removal and a reopen. Messages 100 µs apart share milliseconds, so the
// file store's entries (whole milliseconds, rounded up) cannot tell them
// apart and it has to read the records.
func TestSeqFromTime(t *testing.T) {
	base := time.Now().Truncate(time.Millisecond).UnixNano()
	clock := setClock(t, base)
	forEach(t, func(t *testing.T, k storeKind) {
		dir := t.TempDir()
		s := k.open(t, dir, Limits{})
		defer func() { s.Stop() }()
		at := func(d time.Duration) time.Time { return time.Unix(0, base+int64(d)) }
		for i := 0; i < 30; i++ {
			clock.Store(base + int64(i)*int64(100*time.Microsecond)) // seq i+1
			mustStore(t, s, "a", "x")
		}
		if ok, err := s.RemoveMsg(12); !ok || err != nil {
			t.Fatal(ok, err)
		}
		check := func(when string) {
			t.Helper()
			for _, c := range []struct {
				t    time.Time
				want uint64
			}{
				{at(-time.Hour), 1},
				{at(0), 1},
				{at(1), 2},
				{at(150 * time.Microsecond), 3},
				{at(time.Millisecond), 11},
				{at(1050 * time.Microsecond), 13}, // 12 is gone
				{at(1100 * time.Microsecond), 13},
				{at(2900 * time.Microsecond), 30},
				{at(2901 * time.Microsecond), 31},
				{at(time.Hour), 31},
			} {
				if got := s.GetSeqFromTime(c.t); got != c.want {
					t.Fatalf("%s: GetSeqFromTime(base%+v) = %d, want %d", when, time.Duration(c.t.UnixNano()-base), got, c.want)
				}
			}
		}
		check("running")
		if _, ok := s.(*FileStore); ok {
			s.Stop()
			s = k.open(t, dir, Limits{})
			check("reopened")
		}
		if _, err := s.Purge(); err != nil {
			t.Fatal(err)
		}
		if got := s.GetSeqFromTime(at(0)); got != 31 {
			t.Fatalf("empty store: GetSeqFromTime = %d, want 31", got)
		}
	})
}

// TestSubjectCopied stores a message under a subject held in a buffer the
// caller then reuses, as a zero-copy parser would: the store must keep its
// own copy.
func TestSubjectCopied(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		s := k.open(t, t.TempDir(), Limits{})
		defer s.Stop()
		buf := []byte("orders.new")
		subj := unsafe.String(&buf[0], len(buf))
		mustStore(t, s, subj, "x")
		copy(buf, "zzzzzzzzzz")
		m, err := s.LoadMsg(1)
		if err != nil || m.Subject != "orders.new" {
			t.Fatalf("loaded %+v, %v", m, err)
		}
		if st := s.State(); st.Subjects["orders.new"] != 1 {
			t.Fatalf("subjects %v", st.Subjects)
		}
		if m, err := s.LoadLastMsg("orders.new"); err != nil || m.Seq != 1 {
			t.Fatalf("LoadLastMsg: %+v, %v", m, err)
		}
	})
}

// StoreAt keeps the given sequences (skipping the gaps) and stamps, refuses going back,
// and survives a reopen as any message does.
func TestStoreAt(t *testing.T) {
	forEach(t, func(t *testing.T, k storeKind) {
		dir := t.TempDir()
		s := k.open(t, dir, Limits{})
		base := time.Now().Add(-time.Hour).UnixNano()
		steps := []struct {
			seq  uint64
			ts   int64
			subj string
			err  error
		}{
			{5, base, "a", nil},
			{6, base + 10, "b", nil},
			{6, base + 20, "b", ErrSeqOrder},
			{3, base + 20, "c", ErrSeqOrder},
			{100, base + 5, "c", nil}, // an earlier stamp is raised to the newest
			{0, base, "d", ErrSeqOrder},
		}
		for _, st := range steps {
			if err := s.StoreAt(st.seq, st.ts, st.subj, nil, []byte(st.subj)); err != st.err {
				t.Fatalf("StoreAt(%d) = %v, want %v", st.seq, err, st.err)
			}
		}
		check := func(s Store) {
			t.Helper()
			st := s.FastState()
			if st.Msgs != 3 || st.FirstSeq != 5 || st.LastSeq != 100 || st.Deleted != 93 {
				t.Fatalf("state %+v", st)
			}
			for _, w := range []struct {
				seq uint64
				ts  int64
			}{{5, base}, {6, base + 10}, {100, base + 10}} {
				m, err := s.LoadMsg(w.seq)
				if err != nil || m.TS != w.ts {
					t.Fatalf("load %d: %+v %v, want ts %d", w.seq, m, err, w.ts)
				}
			}
			if seq := mustStore(t, s, "e", "e"); seq != 101 {
				t.Fatalf("next store got seq %d", seq)
			}
		}
		check(s)
		if k.name == "mem" {
			return
		}
		s.Stop()
		s = k.open(t, dir, Limits{})
		defer s.Stop()
		if _, err := s.LoadMsg(101); err != nil {
			t.Fatalf("after reopen: %v", err)
		}
	})
}
