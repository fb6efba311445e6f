package flame

import (
	"fmt"
	"sort"
	"strings"
)

// Top lists the n functions with the most flat (self) and cumulative value, like `pprof -top`.
func Top(p *Profile, vi, n int, unit string) string {
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for i, st := range p.Stacks {
		if vi >= len(p.Values[i]) || len(st) == 0 {
			continue
		}
		v := p.Values[i][vi]
		total += v
		flat[st[len(st)-1]] += v
		seen := map[string]bool{}
		for _, f := range st {
			if !seen[f] {
				seen[f] = true
				cum[f] += v
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "total %s (%s)\n", fmtValue(total, unit), p.SampleTypes[vi])
	for _, part := range []struct {
		title string
		m     map[string]int64
	}{{"flat", flat}, {"cum", cum}} {
		type kv struct {
			k string
			v int64
		}
		var xs []kv
		for k, v := range part.m {
			xs = append(xs, kv{k, v})
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i].v > xs[j].v || xs[i].v == xs[j].v && xs[i].k < xs[j].k })
		fmt.Fprintf(&b, "\n%-6s top %d\n", part.title, n)
		for i := 0; i < n && i < len(xs); i++ {
			pct := 0.0
			if total > 0 {
				pct = 100 * float64(xs[i].v) / float64(total)
			}
			fmt.Fprintf(&b, "%12s %6.2f%%  %s\n", fmtValue(xs[i].v, unit), pct, xs[i].k)
		}
	}
	return b.String()
}
