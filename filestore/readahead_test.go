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
	var mb MsgBuf
	check := func(round, from, to uint64) {
		t.Helper()
		for seq := from; seq <= to; seq++ {
			sm, err := s.LoadNextMsg("", seq)
			if err != nil || sm.Seq != seq || string(sm.Data) != body(round, seq) {
				t.Fatalf("seq %d: %v %+v", seq, err, sm)
			}
			// A reader's reused buffer, as a consumer's, sees the same.
			if sm, err = s.LoadNextMsgInto(&mb, "", seq); err != nil || sm.Seq != seq || string(sm.Data) != body(round, seq) {
				t.Fatalf("seq %d into: %v %+v", seq, err, sm)
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

// A message loaded into a reader's buffer is the reader's: writing over its payload or
// appending to its header changes nothing another load sees, from the active block's
// read-ahead or a sealed block's cache, and the next load into the buffer replaces it.
func TestLoadNextMsgIntoOwnsItsBytes(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), BlockSize: 4 << 10, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	hdr := []byte("NATS/1.0\r\nK: v\r\n\r\n")
	body := func(seq uint64) string { return fmt.Sprintf("m%04d-%0100d", seq, seq) }
	const n = 200 // some in sealed blocks, the last in the active one
	for seq := uint64(1); seq <= n; seq++ {
		if _, _, err := s.StoreMsg("a", hdr, []byte(body(seq))); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.RLock()
	blocks := len(s.blocks)
	s.mu.RUnlock()
	if blocks < 3 {
		t.Fatalf("%d blocks: the test wants sealed ones", blocks)
	}
	var mb MsgBuf
	for seq := uint64(1); seq <= n; seq++ {
		sm, err := s.LoadNextMsgInto(&mb, "a", seq)
		if err != nil || sm != &mb.StoredMsg || sm.Seq != seq || string(sm.Data) != body(seq) || string(sm.Header) != string(hdr) {
			t.Fatalf("seq %d: %v %+v", seq, err, sm)
		}
		for i := range sm.Data {
			sm.Data[i] = 'X'
		}
		if h := append(sm.Header, "Y: z\r\n"...); string(sm.Data[:1]) != "X" || len(h) != len(hdr)+6 {
			t.Fatalf("seq %d: appending to the header ran into the payload", seq)
		}
		again, err := s.LoadNextMsg("a", seq)
		if err != nil || string(again.Data) != body(seq) || string(again.Header) != string(hdr) {
			t.Fatalf("seq %d after writing over the loaded copy: %v %+v", seq, err, again)
		}
	}
}

// A MsgBuf keeps at most msgBufKeep between loads: a large message is loaded into an
// allocation of its own, whichever store and block it comes from, and reads back whole.
func TestMsgBufStaysSmall(t *testing.T) {
	fs, err := Open(Config{Dir: t.TempDir(), BlockSize: 64 << 10, Logf: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Stop()
	ms := NewMemStore(Limits{})
	defer ms.Stop()
	body := func(seq uint64) []byte {
		n := 100
		if seq%3 == 0 {
			n = 3 * msgBufKeep
		}
		return []byte(fmt.Sprintf("%d-%0*d", seq, n, seq))
	}
	const n = 60 // about 20 large ones: several sealed blocks and the active one
	for seq := uint64(1); seq <= n; seq++ {
		for _, s := range []Store{fs, ms} {
			if _, _, err := s.StoreMsg("a", nil, body(seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []Store{fs, ms} {
		var mb MsgBuf
		for seq := uint64(1); seq <= n; seq++ {
			sm, err := s.LoadNextMsgInto(&mb, "", seq)
			if err != nil || sm.Seq != seq || string(sm.Data) != string(body(seq)) {
				t.Fatalf("%T seq %d: %v", s, seq, err)
			}
			if cap(mb.buf) > msgBufKeep {
				t.Fatalf("%T seq %d: the buffer kept %d bytes", s, seq, cap(mb.buf))
			}
		}
	}
}
