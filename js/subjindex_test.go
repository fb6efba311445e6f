package js

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/natsd/natsd/auth"
)

// TestSubjectIndexMatchesPairwise checks the index against comparing every pair
// (auth.SubjectsCollide) over random sets of streams with wildcard subjects, through adds,
// removes and updates, and that removing everything leaves the trie empty.
func TestSubjectIndexMatchesPairwise(t *testing.T) {
	toks := []string{"a", "b", "c", "*", ">"}
	randSubj := func(r *rand.Rand) string {
		n := 1 + r.IntN(4)
		var parts []string
		for i := 0; i < n; i++ {
			tk := toks[r.IntN(len(toks))]
			if tk == ">" && i != n-1 {
				tk = "*"
			}
			parts = append(parts, tk)
		}
		return strings.Join(parts, ".")
	}
	randSubjects := func(r *rand.Rand) []string {
		out := make([]string, 1+r.IntN(3))
		for i := range out {
			out[i] = randSubj(r)
		}
		return out
	}
	var seen [2]int // probes that collided, and not
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		var x subjectIndex
		model := map[*stream][]string{}
		pairwise := func(subjects []string) bool {
			for _, other := range model {
				for _, a := range subjects {
					for _, b := range other {
						if auth.SubjectsCollide(a, b) {
							return true
						}
					}
				}
			}
			return false
		}
		for step := 0; step < 60; step++ {
			probe := randSubjects(r)
			got, want := x.collides(probe), pairwise(probe)
			if got != want {
				t.Fatalf("seed %d step %d: collides(%q) = %v, pairwise %v; index holds %v", seed, step, probe, got, want, model)
			}
			if want {
				seen[0]++
			} else {
				seen[1]++
			}
			switch op := r.IntN(4); {
			case op < 2 || len(model) == 0:
				s := &stream{}
				model[s] = probe
				x.add(s, probe)
			case op == 2:
				for s, subj := range model {
					x.remove(s, subj)
					delete(model, s)
					break
				}
			default:
				for s, subj := range model {
					x.remove(s, subj)
					model[s] = probe
					x.add(s, probe)
					break
				}
			}
		}
		for s, subj := range model {
			x.remove(s, subj)
		}
		if x.root.below != 0 || len(x.root.next) != 0 || len(x.root.ends) != 0 {
			t.Fatalf("seed %d: index not empty after removing everything: %+v", seed, x.root)
		}
	}
	if seen[0] < 1000 || seen[1] < 1000 {
		t.Fatalf("probes: %d collided, %d did not: the cases are not both exercised", seen[0], seen[1])
	}
}

// BenchmarkOverlapCheck: the check a create makes against 10,000 streams, by the index and
// pairwise.
func BenchmarkOverlapCheck(b *testing.B) {
	var x subjectIndex
	var all [][]string
	for i := 0; i < 10000; i++ {
		subj := []string{"$KV.bucket" + strconv.Itoa(i) + ".>"}
		x.add(&stream{}, subj)
		all = append(all, subj)
	}
	probe := []string{"$KV.bucket-new.>"}
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if x.collides(probe) {
				b.Fatal("collides")
			}
		}
	})
	b.Run("pairwise", func(b *testing.B) {
		for b.Loop() {
			for _, o := range all {
				if subjectsOverlap(probe, o) {
					b.Fatal("collides")
				}
			}
		}
	})
}
