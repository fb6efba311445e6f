package filestore

import (
	"fmt"
	"testing"
)

// The active block's read-ahead must never serve bytes that changed under it: reads
// interleaved with appends see every message exactly as stored, and a Truncate that reuses
// sequences drops what was read ahead.
func TestReadAheadFreshness(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	body := func(round, seq uint64) string { return fmt.Sprintf("r%d-%d-%0100d", round, seq, seq) }
	check := func(round, from, to uint64) {
		t.Helper()
		for seq := from; seq <= to; seq++ {
			sm, err := s.LoadNextMsg("", seq)
			if err != nil || sm.Seq != seq || string(sm.Data) != body(round, seq) {
				t.Fatalf("seq %d: %v %+v", seq, err, sm)
			}
		}
	}
	for seq := uint64(1); seq <= 2000; seq++ {
		if _, _, err := s.StoreMsg("a", nil, []byte(body(0, seq))); err != nil {
			t.Fatal(err)
		}
		if seq%7 == 0 {
			check(0, seq-6, seq) // reads trail the writes, as a consumer's do
		}
	}
	check(0, 1, 2000)
	check(0, 995, 995) // the read-ahead now holds records past the cut to come
	if err := s.Truncate(1000); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1001); seq <= 1500; seq++ {
		if _, _, err := s.StoreMsg("a", nil, []byte(body(1, seq))); err != nil {
			t.Fatal(err)
		}
	}
	check(1, 1001, 1500)
	check(0, 1, 1000)
}
