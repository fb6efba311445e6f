package sublist

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMatchFilterTable(t *testing.T) {
	for _, c := range []struct {
		subject, filter string
		want            bool
	}{
		{"foo", "foo", true},
		{"foo", "bar", false},
		{"foo", "*", true},
		{"foo", ">", true},
		{"foo.bar", "*", false},
		{"foo.bar", ">", true},
		{"foo.bar", "foo.*", true},
		{"foo.bar", "*.bar", true},
		{"foo.bar", "foo.>", true},
		{"foo", "foo.>", false},
		{"foo", "foo.*", false},
		{"foo.bar.baz", "foo.*", false},
		{"foo.bar.baz", "foo.*.baz", true},
		{"foo.bar.baz", "foo.>", true},
		{"foo.bar.baz", "*.*.>", true},
		{"foo.bar", "*.*.>", false},
		{"foo*", "foo*", true},  // not a wildcard token
		{"foox", "foo*", false}, // likewise
		{"foo.>", "foo.>", true},
		{"foo.bar", "foo.bar.baz", false},
		{"foo.bar.baz", "foo.bar", false},
		{"foo.bar", "foo", false},
	} {
		if got := MatchFilter(c.subject, c.filter); got != c.want {
			t.Errorf("MatchFilter(%q, %q) = %v, want %v", c.subject, c.filter, got, c.want)
		}
	}
}

func TestIsWildcard(t *testing.T) {
	for f, want := range map[string]bool{
		"foo": false, "foo.bar": false, "foo*": false, "*foo": false, "foo.b>": false,
		"*": true, ">": true, "foo.*": true, "foo.>": true, "*.bar": true, "a.*.c": true,
	} {
		if got := IsWildcard(f); got != want {
			t.Errorf("IsWildcard(%q) = %v, want %v", f, got, want)
		}
	}
}

// TestMatchFilterAgainstSublist checks MatchFilter against both the brute-force
// reference and a real Sublist holding the filter, over random filters and
// subjects drawn from a small alphabet so that matches are common.
func TestMatchFilterAgainstSublist(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	toks := []string{"a", "b", "c", "ab"}
	subject := func() string {
		n := 1 + rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = toks[rng.IntN(len(toks))]
		}
		return strings.Join(parts, ".")
	}
	filter := func() string {
		n := 1 + rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			if rng.IntN(3) == 0 {
				parts[i] = "*"
			} else {
				parts[i] = toks[rng.IntN(len(toks))]
			}
		}
		if rng.IntN(3) == 0 {
			parts[n-1] = ">"
		}
		return strings.Join(parts, ".")
	}
	matches := 0
	for i := 0; i < 2000; i++ {
		f := filter()
		s := New[int]()
		if err := s.Insert(f, "", 1); err != nil {
			t.Fatalf("insert %q: %v", f, err)
		}
		if got, want := IsWildcard(f), strings.ContainsAny(f, "*>"); got != want {
			t.Fatalf("IsWildcard(%q) = %v", f, got)
		}
		for j := 0; j < 20; j++ {
			subj := subject()
			want := len(s.Match([]byte(subj)).Plain) > 0
			if bruteMatches(f, subj) != want {
				t.Fatalf("reference and sublist disagree on %q / %q", subj, f)
			}
			if got := MatchFilter(subj, f); got != want {
				t.Fatalf("MatchFilter(%q, %q) = %v, sublist says %v", subj, f, got, want)
			}
			if want {
				matches++
			}
		}
	}
	if matches < 2000 {
		t.Fatalf("only %d matches: the test is not exercising wildcards", matches)
	}
}

func BenchmarkMatchFilter(b *testing.B) {
	for i := 0; i < b.N; i++ {
		MatchFilter("orders.eu.shipped.12345", "orders.*.shipped.>")
	}
}
