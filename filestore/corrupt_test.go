package filestore

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const corruptMsgs = 300

func corruptPayload(seq uint64) string {
	return fmt.Sprintf("%d:%s", seq, strings.Repeat("d", int(seq%90)))
}

// buildCorruptSource writes a closed store whose blocks hold only messages,
// so every record maps to exactly one sequence.
func buildCorruptSource(t *testing.T) string {
	dir := t.TempDir()
	s, err := Open(fileCfg(dir, Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= corruptMsgs; seq++ {
		mustStore(t, s, fmt.Sprintf("c.%d", seq%4), corruptPayload(seq))
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyStore(t *testing.T, src string) string {
	dst := t.TempDir()
	os.MkdirAll(filepath.Join(dst, "msgs"), 0o750)
	ents, _ := os.ReadDir(filepath.Join(src, "msgs"))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, "msgs", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, "msgs", e.Name()), b, 0o640)
	}
	return dst
}

func blockFiles(t *testing.T, dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "msgs", "*.blk"))
	if len(m) < 3 {
		t.Fatalf("want several blocks, got %v", m)
	}
	return m
}

// verifyDamage opens the damaged store and checks that it names exactly the
// damaged sequences, serves every other one and never serves a damaged one.
func verifyDamage(t *testing.T, dir string, damaged []uint64, what string) {
	t.Helper()
	s, err := Open(fileCfg(dir, Limits{}))
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	defer s.Stop()
	l := s.Lost()
	slices.Sort(damaged)
	if !slices.Equal(l.Seqs, damaged) && !(len(l.Seqs) == 0 && len(damaged) == 0) {
		t.Fatalf("%s: reported lost %v, damaged %v", what, l.Seqs, damaged)
	}
	for seq := uint64(1); seq <= corruptMsgs; seq++ {
		m, err := s.LoadMsg(seq)
		if slices.Contains(damaged, seq) {
			if err == nil {
				t.Fatalf("%s: damaged seq %d served", what, seq)
			}
			continue
		}
		if err != nil || string(m.Data) != corruptPayload(seq) {
			t.Fatalf("%s: intact seq %d: %v", what, seq, err)
		}
	}
	if st := s.FastState(); st.LastSeq != corruptMsgs || st.Msgs != corruptMsgs-uint64(len(damaged)) {
		t.Fatalf("%s: state %+v", what, st)
	}
}

func TestCorruptBitFlips(t *testing.T) {
	src := buildCorruptSource(t)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for trial := 0; trial < 25; trial++ {
		dir := copyStore(t, src)
		files := blockFiles(t, dir)
		name := files[rng.Intn(len(files))]
		data, _ := os.ReadFile(name)
		recs := scanBlock(data, nil, nil).recs
		r := recs[rng.Intn(len(recs))]
		bit := int(r.off)*8 + rng.Intn(int(r.slen)*8)
		data[bit/8] ^= 1 << (bit % 8)
		os.WriteFile(name, data, 0o640)
		verifyDamage(t, dir, []uint64{r.seq}, fmt.Sprintf("flip bit %d of %s (seq %d)", bit, filepath.Base(name), r.seq))
	}
}

// TestCorruptZeroRegion flips bits in the zero-filled (preallocated, never
// written) part of a block. Nothing may be reported lost or served wrongly;
// in the last block the non-zero bytes are a torn tail and are zeroed.
func TestCorruptZeroRegion(t *testing.T) {
	src := buildCorruptSource(t)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for trial := 0; trial < 25; trial++ {
		dir := copyStore(t, src)
		files := blockFiles(t, dir)
		name := files[rng.Intn(len(files))]
		if trial%3 == 0 {
			name = lastBlockFile(t, dir)
		}
		data, _ := os.ReadFile(name)
		end := int(scanBlock(data, nil, nil).validEnd)
		if end >= len(data) {
			continue // this block was filled past its preallocation
		}
		var pos int
		switch trial % 4 {
		case 0:
			pos = end // the zero length word that ends the written region
		case 1:
			pos = end + rng.Intn(min(8, len(data)-end))
		default:
			pos = end + rng.Intn(len(data)-end)
		}
		data[pos] ^= 1 << rng.Intn(8)
		os.WriteFile(name, data, 0o640)
		verifyDamage(t, dir, nil, fmt.Sprintf("flip byte %d (written region ends at %d) of %s", pos, end, filepath.Base(name)))
	}
}

// TestCorruptStaleTail puts a torn record followed by a stale, checksum-valid
// record beyond the written region of the last block. Recovery must zero both
// (not just skip them), so that appending less than their length and
// reopening can never bring the stale record back.
func TestCorruptStaleTail(t *testing.T) {
	src := buildCorruptSource(t)
	for _, plausibleSeq := range []bool{false, true} {
		dir := copyStore(t, src)
		name := lastBlockFile(t, dir)
		data, _ := os.ReadFile(name)
		res := scanBlock(data, nil, nil)
		end := int(res.validEnd)
		r := res.recs[0]
		stale := append([]byte(nil), data[r.off:r.off+r.slen]...)
		if plausibleSeq {
			// A record numbered after everything: a resync after the garbage
			// finds it, so recovery serves it as a real (unacknowledged) one.
			patchRecord(stale, corruptMsgs+1, 1)
		}
		garbage := []byte{0x55, 0, 0, 0, 1, 2, 3}
		need := end + len(garbage) + len(stale)
		if need > len(data) {
			t.Skip("last block has no room")
		}
		copy(data[end:], garbage)
		copy(data[end+len(garbage):], stale)
		os.WriteFile(name, data, 0o640)

		s, err := Open(fileCfg(dir, Limits{}))
		if err != nil {
			t.Fatal(err)
		}
		l := s.Lost()
		wantLast := uint64(corruptMsgs)
		if plausibleSeq {
			wantLast++
			if l.CorruptSpans != 1 || l.Msgs != 0 || l.TornBytes != 0 {
				t.Fatalf("plausible: %+v", l)
			}
		} else if l.TornBytes != uint64(len(garbage)+len(stale)) || l.Msgs != 0 || l.CorruptSpans != 0 {
			t.Fatalf("stale tail: %+v", l)
		}
		if st := s.FastState(); st.LastSeq != wantLast {
			t.Fatalf("state %+v", st)
		}
		if !plausibleSeq {
			after, _ := os.ReadFile(name)
			if n := lastNonZero(after); n != end {
				t.Fatalf("torn tail not zeroed: non-zero up to %d, written region ends at %d", n, end)
			}
		}
		mustStore(t, s, "new", "x") // far shorter than what was there
		s.Stop()

		s, err = Open(fileCfg(dir, Limits{}))
		if err != nil {
			t.Fatal(err)
		}
		if l := s.Lost(); l.TornBytes != 0 || l.Msgs != 0 || (l.CorruptSpans != 0) != plausibleSeq {
			t.Fatalf("after reopen: %+v", l)
		}
		st := s.FastState()
		if st.LastSeq != wantLast+1 || st.Msgs != wantLast+1 {
			t.Fatalf("after reopen: %+v", st)
		}
		for seq := uint64(1); seq <= corruptMsgs; seq++ {
			if m, err := s.LoadMsg(seq); err != nil || string(m.Data) != corruptPayload(seq) {
				t.Fatalf("seq %d: %v", seq, err)
			}
		}
		if m, err := s.LoadMsg(wantLast + 1); err != nil || string(m.Data) != "x" {
			t.Fatalf("new record: %v %v", m, err)
		}
		s.Stop()
	}
}

func lastBlockFile(t *testing.T, dir string) string {
	var best string
	var bestID uint64
	for _, f := range blockFiles(t, dir) {
		var id uint64
		fmt.Sscanf(filepath.Base(f), "%d.blk", &id)
		if id > bestID {
			best, bestID = f, id
		}
	}
	return best
}

func TestCorruptTruncation(t *testing.T) {
	src := buildCorruptSource(t)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for trial := 0; trial < 20; trial++ {
		dir := copyStore(t, src)
		files := blockFiles(t, dir)
		name := files[rng.Intn(len(files))]
		data, _ := os.ReadFile(name)
		cut := rng.Intn(len(data))
		if end := int(scanBlock(data, nil, nil).validEnd); trial%2 == 1 && end < len(data) {
			cut = end + rng.Intn(len(data)-end) // inside the zero-filled region
		}
		var damaged []uint64
		for _, r := range scanBlock(data, nil, nil).recs {
			if int(r.off+r.slen) > cut {
				damaged = append(damaged, r.seq)
			}
		}
		os.Truncate(name, int64(cut))
		verifyDamage(t, dir, damaged, fmt.Sprintf("truncate %s at %d", filepath.Base(name), cut))
	}
}

func TestCorruptIndex(t *testing.T) {
	src := buildCorruptSource(t)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for trial := 0; trial < 10; trial++ {
		dir := copyStore(t, src)
		name := filepath.Join(dir, "msgs", indexName)
		data, _ := os.ReadFile(name)
		if trial%2 == 0 {
			bit := rng.Intn(len(data) * 8)
			data[bit/8] ^= 1 << (bit % 8)
		} else {
			data = data[:rng.Intn(len(data))]
		}
		os.WriteFile(name, data, 0o640)
		verifyDamage(t, dir, nil, "damaged index")
	}
	dir := copyStore(t, src)
	os.Remove(filepath.Join(dir, "msgs", indexName))
	verifyDamage(t, dir, nil, "missing index")
}

// TestCorruptWhileOpen damages a record under a running store: the read
// fails with ErrCorrupt, is counted, and never returns the bytes.
func TestCorruptWhileOpen(t *testing.T) {
	dir := copyStore(t, buildCorruptSource(t))
	s, err := Open(fileCfg(dir, Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	name := blockFiles(t, dir)[1]
	data, _ := os.ReadFile(name)
	r := scanBlock(data, nil, nil).recs[3]
	f, _ := os.OpenFile(name, os.O_RDWR, 0)
	f.WriteAt([]byte{data[r.off+r.slen-12] ^ 0x10}, int64(r.off+r.slen-12))
	f.Close()
	if _, err := s.LoadMsg(r.seq); err != ErrCorrupt {
		t.Fatalf("load damaged %d: %v", r.seq, err)
	}
	if l := s.Lost(); l.ReadErrors != 1 {
		t.Fatalf("%+v", l)
	}
	if _, err := s.LoadMsg(r.seq + 1); err != nil {
		t.Fatal(err)
	}
}

func TestMergeRanges(t *testing.T) {
	for _, c := range []struct {
		in, want []seqRange
	}{
		{nil, nil},
		{[]seqRange{{5, 9}}, []seqRange{{5, 9}}},
		{[]seqRange{{20, 30}, {1, 3}, {4, 6}, {25, 40}, {50, 50}}, []seqRange{{1, 6}, {20, 40}, {50, 50}}},
		{[]seqRange{{1, 100}, {10, 20}, {101, 101}}, []seqRange{{1, 101}}},
	} {
		got := mergeRanges(slices.Clone(c.in))
		if !slices.Equal(got, c.want) {
			t.Errorf("mergeRanges(%v) = %v, want %v", c.in, got, c.want)
		}
		for seq := uint64(0); seq <= 110; seq++ {
			want := false
			for _, r := range c.in {
				want = want || (seq >= r.lo && seq <= r.hi)
			}
			if contains(got, seq) != want {
				t.Errorf("contains(%v, %d) = %v", got, seq, !want)
			}
		}
	}
}
