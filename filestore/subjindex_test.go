package filestore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSubjIndexAgainstMap drives the index and a Go map with the same random
// adds, drops and lookups (names from a small space, so that runs of
// colliding slots form and break up) and checks they agree after every step,
// including drops made while walking it.
func TestSubjIndexAgainstMap(t *testing.T) {
	for _, space := range []int{3, 40, 5000} {
		t.Run(fmt.Sprint(space), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(space), 7))
			var x subjIndex
			want := map[string]uint64{} // name → msgs, a mark the index must keep
			check := func(step int) {
				t.Helper()
				if x.len() != len(want) {
					t.Fatalf("step %d: len %d, want %d", step, x.len(), len(want))
				}
				seen := 0
				x.all(func(ss *subjState) {
					seen++
					if m, ok := want[ss.name]; !ok || m != ss.msgs {
						t.Fatalf("step %d: walked %q msgs %d; map has %d, %v", step, ss.name, ss.msgs, m, ok)
					}
					if x.byID(ss.id) != ss {
						t.Fatalf("step %d: byID(%d) is not %q", step, ss.id, ss.name)
					}
					if ss.id >= uint32(x.ids()) {
						t.Fatalf("step %d: id %d beyond ids() %d", step, ss.id, x.ids())
					}
				})
				if seen != len(want) {
					t.Fatalf("step %d: walked %d, want %d", step, seen, len(want))
				}
				if x.n > 0 && (x.n+0)*4 > len(x.slots)*3 {
					t.Fatalf("step %d: %d subjects in %d slots", step, x.n, len(x.slots))
				}
			}
			for step := 0; step < 40000; step++ {
				name := fmt.Sprintf("$KV.b.k%d", rng.IntN(space))
				ss := x.get(name)
				m, ok := want[name]
				if (ss != nil) != ok || (ok && ss.msgs != m) {
					t.Fatalf("step %d: get(%q) = %v, map has %d %v", step, name, ss, m, ok)
				}
				switch r := rng.IntN(10); {
				case ss == nil && r < 6:
					ss = x.add(name)
					ss.msgs = uint64(step) + 1
					want[name] = ss.msgs
				case ss != nil && r < 4:
					x.drop(ss)
					delete(want, name)
				case r == 9 && len(want) > 0:
					// Drop about a third of the subjects while walking.
					x.all(func(ss *subjState) {
						if rng.IntN(3) == 0 {
							delete(want, ss.name)
							x.drop(ss)
						}
					})
				}
				if step%97 == 0 {
					check(step)
				}
			}
			check(-1)
			// Dropping everything frees the pages and table.
			x.all(func(ss *subjState) { delete(want, ss.name); x.drop(ss) })
			check(-2)
			if x.slots != nil || x.pages != nil {
				t.Fatalf("empty index keeps %d slots, %d pages", len(x.slots), len(x.pages))
			}
		})
	}
}

// TestSubjIndexReusesIDs checks dropped numbers are handed out again (ents
// store them in 32 bits) and that a page whose subjects are all gone is freed.
func TestSubjIndexReusesIDs(t *testing.T) {
	var x subjIndex
	var all []*subjState
	for i := 0; i < 3*subjPageSize; i++ {
		all = append(all, x.add(fmt.Sprint("s.", i)))
	}
	keep := x.add("keep")
	for _, ss := range all[:subjPageSize+10] {
		x.drop(ss)
	}
	if x.pages[0] != nil {
		t.Fatalf("page 0 kept with no subject in it")
	}
	top := x.ids()
	for i := 0; i < subjPageSize+10; i++ {
		if ss := x.add(fmt.Sprint("t.", i)); int(ss.id) >= top {
			t.Fatalf("new subject got id %d with %d free below %d", ss.id, subjPageSize+10-i, top)
		}
	}
	if x.get("keep") != keep || keep.name != "keep" {
		t.Fatalf("a living subject moved")
	}
}

func BenchmarkSubjIndexGet(b *testing.B) {
	for _, n := range []int{1000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var x subjIndex
			m := map[string]*subjState{}
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprint("$KV.bucket.key", i)
				m[names[i]] = x.add(names[i])
			}
			b.Run("index", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					if x.get(names[i%n]) == nil {
						b.Fatal("missing")
					}
				}
			})
			b.Run("map", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					if m[names[i%n]] == nil {
						b.Fatal("missing")
					}
				}
			})
		})
	}
}

// TestSubjStateAgainstModel adds and removes one subject's messages at random
// and checks its counts, bounds and (while tracked) its list, stored or
// implied by first and last, against the set of sequences it really has.
func TestSubjStateAgainstModel(t *testing.T) {
	oldMax := maxTracked
	maxTracked = 6
	defer func() { maxTracked = oldMax }()
	rng := rand.New(rand.NewPCG(3, 4))
	var ss subjState
	var have []uint64 // the subject's live sequences, ascending
	seq := uint64(0)
	for step := 0; step < 200000; step++ {
		if len(have) == 0 || rng.IntN(100) < 52 {
			seq += 1 + uint64(rng.IntN(3)) // dense enough to give the list up sometimes
			if rng.IntN(50) == 0 {
				seq += 2000 // and far apart sometimes
			}
			ss.add(seq)
			have = append(have, seq)
		} else {
			i := rng.IntN(len(have))
			if rng.IntN(3) > 0 {
				i = 0 // removals mostly in order, as limits and acks make them
			}
			gone := have[i]
			have = slices.Delete(have, i, i+1)
			ss.remove(gone, func(before uint64) uint64 {
				j, _ := slices.BinarySearch(have, before)
				return have[j-1]
			})
			if ss.msgs == 0 { // the store drops the subject here
				ss = subjState{}
			}
		}
		if ss.msgs != uint64(len(have)) {
			t.Fatalf("step %d: msgs %d, have %d", step, ss.msgs, len(have))
		}
		if len(have) == 0 {
			continue
		}
		if ss.last != have[len(have)-1] || ss.first > have[0] {
			t.Fatalf("step %d: first %d last %d, have %d..%d", step, ss.first, ss.last, have[0], have[len(have)-1])
		}
		if ss.tracked {
			var buf [2]uint64
			if got := ss.list(&buf); !slices.Equal(got, have) {
				t.Fatalf("step %d: list %v, have %v", step, got, have)
			}
			if len(have) == 1 && ss.seqs != nil {
				t.Fatalf("step %d: one message keeps a list of cap %d", step, cap(ss.seqs.s))
			}
		}
	}
}
