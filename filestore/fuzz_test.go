package filestore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeedFiles builds a small store the ordinary way (several blocks,
// removals, a subject purge and a compaction, so every record kind is on
// disk) and returns its first two block files and index.db.
func fuzzSeedFiles(f *testing.F) (b1, b2, idx []byte) {
	dir := f.TempDir()
	s, err := Open(Config{Dir: dir, BlockSize: 1024, Logf: quietLog})
	if err != nil {
		f.Fatal(err)
	}
	for i := 1; i <= 40; i++ {
		if _, _, err := s.StoreMsg(fmt.Sprintf("seed.%d", i%4), []byte("h"), bytes.Repeat([]byte{byte(i)}, i*3)); err != nil {
			f.Fatal(err)
		}
	}
	s.RemoveMsg(5)
	s.RemoveMsg(17)
	s.PurgeSubject("seed.3")
	s.Compact(3)
	s.SkipMsgs(2)
	if err := s.Stop(); err != nil {
		f.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, "msgs", name))
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	return read("1.blk"), read("2.blk"), read(indexName)
}

// FuzzRecover opens a store whose first two block files and index.db are
// the fuzzer's bytes. Whatever they hold, Open must succeed, every
// message it serves must be whole (LoadMsg never reports a checksum failure
// for data that was verified at open), State must count exactly the
// messages that load, and the store must take a new message and keep it and
// everything it served across a reopen.
func FuzzRecover(f *testing.F) {
	b1, b2, idx := fuzzSeedFiles(f)
	f.Add(b1, b2, idx)
	f.Add(b1, b2, []byte{})
	f.Add(b1, []byte{}, idx)
	f.Add(b1[:len(b1)/2], b2, idx)
	flipped := bytes.Clone(b2)
	flipped[len(flipped)/3] ^= 0x10
	f.Add(b1, flipped, idx)
	f.Add(append(bytes.Clone(b1), b2...), []byte{}, []byte{})
	// A truncation interrupted before it deleted or cut anything: block 2
	// holds only its marker, which voids part of block 1 (or all of it).
	f.Add(b1, appendMarker(nil, kindTrunc, 20, 0), idx)
	f.Add(b1, appendMarker(nil, kindTrunc, 0, 0), []byte{})
	f.Fuzz(func(t *testing.T, b1, b2, idx []byte) {
		dir := t.TempDir()
		msgs := filepath.Join(dir, "msgs")
		if err := os.MkdirAll(msgs, 0o750); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"1.blk": b1, "2.blk": b2, indexName: idx} {
			if len(b) > 0 {
				if err := os.WriteFile(filepath.Join(msgs, name), b, 0o640); err != nil {
					t.Fatal(err)
				}
			}
		}
		cfg := Config{Dir: dir, BlockSize: 1024, Logf: quietLog}
		s, err := Open(cfg)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		served := walk(t, s)
		st := s.State()
		seq, _, err := s.StoreMsg("fuzz.after", nil, []byte("after"))
		if err != nil || seq != st.LastSeq+1 {
			t.Fatalf("store after open: seq %d err %v, last was %d", seq, err, st.LastSeq)
		}
		served[seq] = "fuzz.after/after"
		if err := s.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if s, err = Open(cfg); err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s.Stop()
		again := walk(t, s)
		for seq, m := range served {
			if again[seq] != m {
				t.Fatalf("seq %d was %q before the reopen, %q after", seq, m, again[seq])
			}
		}
		if len(again) != len(served) {
			t.Fatalf("%d messages before the reopen, %d after", len(served), len(again))
		}
	})
}

// walk loads every sequence of s and checks that State agrees with what
// loads; it returns subject/data by sequence.
func walk(t *testing.T, s *FileStore) map[uint64]string {
	t.Helper()
	st := s.State()
	if st.LastSeq-st.FirstSeq > 1<<20 && st.Msgs > 0 {
		t.Fatalf("state spans %d..%d", st.FirstSeq, st.LastSeq)
	}
	out := map[uint64]string{}
	for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
		m, err := s.LoadMsg(seq)
		switch err {
		case nil:
			if m.Seq != seq {
				t.Fatalf("LoadMsg(%d) returned seq %d", seq, m.Seq)
			}
			out[seq] = m.Subject + "/" + string(m.Data)
		case ErrNotFound:
		default:
			t.Fatalf("LoadMsg(%d): %v", seq, err)
		}
	}
	if uint64(len(out)) != st.Msgs {
		t.Fatalf("State says %d messages, %d load (state %+v)", st.Msgs, len(out), st)
	}
	if l := s.Lost(); l.ReadErrors != 0 {
		t.Fatalf("read errors after open: %+v", l)
	}
	return out
}
