package transform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

func TestMappingErrors(t *testing.T) {
	for _, c := range []struct {
		src   string
		dests []Dest
		want  string
	}{
		{"foo", []Dest{{Subject: "bar", Weight: 150}}, "individual weights need to be <= 100"},
		{"foo", []Dest{{Subject: "bar", Weight: 50}, {Subject: "bar", Weight: 50}}, `duplicate entry for "bar"`},
		{"foo", []Dest{{Subject: "bar", Weight: 50}, {Subject: "bar", Weight: 50, Cluster: "c"}}, `duplicate entry for "bar"`},
		{"foo", []Dest{{Subject: "bar", Weight: 50}, {Subject: "baz", Weight: 60}}, "total weight needs to be <= 100"},
		{"foo", []Dest{{Subject: "bar", Weight: 60}, {Subject: "baz", Weight: 60, Cluster: "c"}}, "<nil>"},
		{"foo bar", []Dest{{Subject: "bar", Weight: 100}}, "invalid subject"},
		{"foo.*", []Dest{{Subject: "bar.$2", Weight: 100}}, "invalid mapping destination: wildcard index out of range in $2: [2]"},
		{"foo", []Dest{{Subject: "bar baz", Weight: 100}}, "invalid mapping destination: invalid transform"},
		// The unchanged-subject share is compiled from the source, and a
		// source nats-server accepts can still fail there.
		{"foo.$2.*", []Dest{{Subject: "bar.$1", Weight: 50}}, "invalid mapping destination: wildcard index out of range in $2: [2]"},
		{"foo.$2.*", []Dest{{Subject: "bar.$1", Weight: 100}}, "<nil>"},
	} {
		_, err := NewMapping(c.src, c.dests...)
		if errText(err) != c.want {
			t.Errorf("%q %+v: got %q, want %q", c.src, c.dests, errText(err), c.want)
		}
		var rds []*server.MapDest
		for _, d := range c.dests {
			rds = append(rds, &server.MapDest{Subject: d.Subject, Weight: d.Weight, Cluster: d.Cluster})
		}
		if ref := errText(server.NewAccount("A").AddWeightedMappings(c.src, rds...)); ref != c.want {
			t.Errorf("table is wrong: nats-server says %q", ref)
		}
	}
}

// shares draws n selections and returns each destination's share in percent
// ("" for a dropped message).
func shares(m *Mapping, cluster string, n int, r Rand) map[string]float64 {
	counts := map[string]int{}
	for range n {
		tr := m.Select(cluster, r)
		if tr == nil {
			counts[""]++
			continue
		}
		counts[tr.Dest()]++
	}
	out := map[string]float64{}
	for k, v := range counts {
		out[k] = 100 * float64(v) / float64(n)
	}
	return out
}

func TestMappingDistribution(t *testing.T) {
	const n = 200000
	// 4 standard deviations of a share near 50% over n draws is 0.45 points.
	const tolerance = 0.6
	r := rand.New(rand.NewPCG(42, 43))
	for _, c := range []struct {
		src     string
		dests   []Dest
		cluster string
		want    map[string]float64
	}{
		{"foo", []Dest{{Subject: "bar", Weight: 50}, {Subject: "baz", Weight: 30}},
			"", map[string]float64{"bar": 50, "baz": 30, "foo": 20}},
		{"foo.*", []Dest{{Subject: "bar.$1", Weight: 40}, {Subject: "baz.$1", Weight: 20}},
			"", map[string]float64{"bar.$1": 40, "baz.$1": 20, "foo.$1": 40}},
		{"foo", []Dest{{Subject: "a", Weight: 10}, {Subject: "b", Weight: 10}, {Subject: "c", Weight: 80}},
			"", map[string]float64{"a": 10, "b": 10, "c": 80}},
		// Listing the source itself turns the rest into loss.
		{"foo", []Dest{{Subject: "foo", Weight: 80}},
			"", map[string]float64{"foo": 80, "": 20}},
		{"bar", []Dest{{Subject: "bar", Weight: 0}},
			"", map[string]float64{"": 100}},
		// Per-cluster destinations, and the fallback for other clusters.
		{"foo", []Dest{{Subject: "east", Weight: 100, Cluster: "E"}, {Subject: "west", Weight: 25, Cluster: "W"}},
			"E", map[string]float64{"east": 100}},
		{"foo", []Dest{{Subject: "east", Weight: 100, Cluster: "E"}, {Subject: "west", Weight: 25, Cluster: "W"}},
			"W", map[string]float64{"west": 25, "foo": 75}},
		{"foo", []Dest{{Subject: "east", Weight: 100, Cluster: "E"}, {Subject: "west", Weight: 25, Cluster: "W"}},
			"other", map[string]float64{"foo": 100}},
		// nats-server accepts an empty destination (and then crashes on it);
		// here its share is dropped.
		{"foo", []Dest{{Subject: "", Weight: 50}},
			"", map[string]float64{"": 50, "foo": 50}},
	} {
		m, err := NewMapping(c.src, c.dests...)
		if err != nil {
			t.Fatal(err)
		}
		got := shares(m, c.cluster, n, r)
		for k, w := range c.want {
			if math.Abs(got[k]-w) > tolerance {
				t.Errorf("%q %+v cluster %q: %q got %.2f%%, want %.0f%%", c.src, c.dests, c.cluster, k, got[k], w)
			}
		}
		for k := range got {
			if _, ok := c.want[k]; !ok {
				t.Errorf("%q %+v: unexpected destination %q (%.2f%%)", c.src, c.dests, k, got[k])
			}
		}
	}
	// The global source works too.
	m, _ := NewMapping("foo", Dest{Subject: "bar", Weight: 50})
	if got := shares(m, "", n, nil); math.Abs(got["bar"]-50) > tolerance {
		t.Errorf("global source: %v", got)
	}
}

func TestMappingSelectedSubject(t *testing.T) {
	m, err := NewMapping("orders.*", Dest{Subject: "shard.{{partition(4,1)}}.$1", Weight: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Matches([]byte("orders.o1")) || m.Matches([]byte("orders")) || m.Matches([]byte("orders.a.b")) || !m.HasWildcard() {
		t.Error("Matches")
	}
	ref, _ := server.NewSubjectTransform("orders.*", "shard.{{partition(4,1)}}.$1")
	for i := range 100 {
		s := fmt.Sprintf("orders.o%d", i)
		want, _ := ref.Match(s)
		if got := string(m.Select("", nil).Append(nil, []byte(s))); got != want {
			t.Fatalf("%s: %q, nats-server %q", s, got, want)
		}
	}
	lit, _ := NewMapping("a.*x", Dest{Subject: "b", Weight: 100})
	if lit.HasWildcard() || !lit.Matches([]byte("a.*x")) || !lit.Matches([]byte("a.q")) {
		t.Error("a source token starting with '*' should match any token, as in nats-server")
	}
	if m.Source() != "orders.*" {
		t.Error("Source")
	}
}

func TestMappingSelectAllocs(t *testing.T) {
	m, _ := NewMapping("foo.*", Dest{Subject: "a.$1", Weight: 30}, Dest{Subject: "b.$1", Weight: 30, Cluster: "c"})
	r := rand.New(rand.NewPCG(1, 1))
	subj := []byte("foo.x")
	dst := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(1000, func() {
		if tr := m.Select("c", r); tr != nil {
			dst = tr.Append(dst[:0], subj)
		}
		if tr := m.Select("", r); tr != nil {
			dst = tr.Append(dst[:0], subj)
		}
	}); n != 0 {
		t.Errorf("Select+Append: %v allocs", n)
	}
}
