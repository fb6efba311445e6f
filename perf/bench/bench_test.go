package bench

import "testing"

func TestHistQuantiles(t *testing.T) {
	var h Hist
	for v := uint64(1); v <= 100000; v++ {
		h.Record(v * 1000)
	}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 50e6}, {0.99, 99e6}, {0.999, 99.9e6}} {
		got := float64(h.Quantile(c.q))
		if d := (got - c.want) / c.want; d > 0.02 || d < -0.02 {
			t.Errorf("q%.3f = %.0f, want ≈ %.0f", c.q, got, c.want)
		}
	}
	if h.Quantile(1) != 100000*1000 {
		t.Errorf("max = %d", h.Quantile(1))
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		p, s string
		ok   bool
	}{
		{"wc.1.2.3", "wc.1.2.3", true}, {"wc.*.2.3", "wc.1.2.3", true}, {"wc.1.>", "wc.1.2.3", true},
		{"wc.1.2.3.>", "wc.1.2.3", false}, {"wc.*.*", "wc.1.2.3", false}, {"wc.2.>", "wc.1.2.3", false},
	} {
		if got := subjectMatches(c.p, c.s); got != c.ok {
			t.Errorf("%s ~ %s = %v", c.p, c.s, got)
		}
	}
}

func TestChunksAndSizes(t *testing.T) {
	ch := buildChunks([]string{"a", "bb"}, 10, constDeliv(3))
	total := 0
	for _, c := range ch {
		total += c.msgs
		if c.deliveries != int64(3*c.msgs) {
			t.Fatalf("deliveries %d for %d msgs", c.deliveries, c.msgs)
		}
	}
	tr := truncateChunk(ch[0], 3)
	if tr.msgs != 3 || tr.deliveries != 9 || string(tr.buf) != "PUB a 10\r\nxxxxxxxxxx\r\nPUB bb 10\r\nxxxxxxxxxx\r\nPUB a 10\r\nxxxxxxxxxx\r\n" {
		t.Fatalf("truncate: %+v %q", tr, tr.buf)
	}
	for in, want := range map[string]int{"16": 16, "1KiB": 1024, "256k": 256 << 10, "128B": 128} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", in, got, err)
		}
	}
}
