package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/natsd/natsd/perf/bench"
	"github.com/natsd/natsd/perf/internal/flame"
)

// profileRound runs one extra (unmeasured) natsd round with NATSD_CPUPROFILE/NATSD_MEMPROFILE
// set, then renders flame graphs and a flat top list from the profiles. In a cluster scenario
// servers A (the publisher's) and B (the subscriber's) are profiled, each into its own files
// (SCENARIO.A.cpu.pprof …); C, idle, is not.
func (r *runner) profileRound(sc scenario, s side) {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	type target struct{ id, what string }
	targets := []target{{sc.slug, sc.label}}
	if sc.servers > 1 {
		targets = []target{{sc.slug + ".A", sc.label + ", server A (publisher's)"}, {sc.slug + ".B", sc.label + ", server B (subscriber's)"}}
	}
	var envs [][]string
	for _, t := range targets {
		envs = append(envs, []string{
			"NATSD_CPUPROFILE=" + abs(filepath.Join(r.out, "profiles", t.id+".cpu.pprof")),
			"NATSD_MEMPROFILE=" + abs(filepath.Join(r.out, "profiles", t.id+".allocs.pprof")),
		})
	}
	if _, ok := r.once(sc, s, -1, envs, "profile"); !ok {
		return
	}
	for _, t := range targets {
		r.renderProfiles(t.id, t.what)
	}
}

// renderProfiles writes the flame graphs and top lists of profiles/ID.{cpu,allocs}.pprof.
func (r *runner) renderProfiles(id, what string) {
	for _, f := range []struct {
		kind, unit string
		want       []string
	}{
		{"cpu", "ns", []string{"cpu"}},
		{"allocs", "bytes", []string{"alloc_space"}},
	} {
		path := filepath.Join(r.out, "profiles", id+"."+f.kind+".pprof")
		p, err := flame.Load(path)
		if err != nil {
			r.problem("%s: profile %s: %v (does natsd honour NATSD_CPUPROFILE/NATSD_MEMPROFILE and exit cleanly on SIGTERM?)", id, path, err)
			continue
		}
		vi := p.ValueIndex(f.want...)
		svg := filepath.Join(r.out, "flame", id+"."+f.kind+".svg")
		out, err := os.Create(svg)
		if err != nil {
			r.problem("%v", err)
			continue
		}
		w := bufio.NewWriter(out)
		err = flame.WriteSVG(w, p, vi, flame.Options{Title: fmt.Sprintf("natsd %s — %s (%s)", f.kind, what, p.SampleTypes[vi]), Unit: f.unit})
		if err == nil {
			err = w.Flush()
		}
		out.Close()
		if err != nil {
			r.problem("%s: %v", svg, err)
		}
		top := filepath.Join(r.out, "profiles", id+"."+f.kind+".top.txt")
		_ = os.WriteFile(top, []byte(flame.Top(p, vi, 30, f.unit)), 0o644)
	}
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "–"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func table(rows []row, aName, bName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | metric | %s | %s | ratio %s/%s | unit | better | noise |\n", aName, bName, bName, aName)
	b.WriteString("|---|---|---:|---:|---:|---|---|---:|\n")
	for _, r := range rows {
		better := "higher"
		if !r.Higher {
			better = "lower"
		}
		ratio := "–"
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f×", r.Ratio)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %.0f%% |\n",
			r.Scenario, r.Metric, fmtNum(r.A), fmtNum(r.B), ratio, r.Unit, better, 100*r.Noise)
	}
	return b.String()
}

func (r *runner) write(rows []row, aName, bName string, self bool, scens []scenario) error {
	tbl := table(rows, aName, bName)
	var md strings.Builder
	fmt.Fprintf(&md, "# natsd perf — %s\n\n", time.Now().Format("2006-01-02 15:04:05"))
	fmt.Fprintf(&md, "%s vs %s; median of %d rounds per side (alternating A B / B A, fresh server on 127.0.0.1 each round), %v of publishing per round; %d CPUs, %s/%s, %s.\n\n",
		aName, bName, r.rounds, r.duration, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if self {
		md.WriteString("**Self run:** nats-server against itself — every ratio should be near 1.00; the gap is the rig's noise.\n\n")
	}
	md.WriteString("Ratios are natsd/nats-server for every row: for throughput higher is better, for CPU per message, latency and RSS lower is better. ")
	md.WriteString("Server CPU per msg = server utime+stime (/proc/PID/stat) over the measured interval ÷ messages delivered (÷ messages published for pub-only; request and reply count as two for request/reply). ")
	md.WriteString("Noise = largest (max−min)/median of the two sides' rounds.\n\n")
	md.WriteString(tbl)
	md.WriteString("\n![throughput by message size](chart.svg)\n\n")
	if len(r.problems) > 0 {
		md.WriteString("## Problems seen\n\n")
		for _, p := range r.problems {
			fmt.Fprintf(&md, "- %s\n", p)
		}
		md.WriteString("\n")
	}
	md.WriteString("## Files\n\n- `results.csv`, `results.json`: every round of every side\n- `chart.svg`: throughput by message size, both servers\n- `logs/`: each server's log per round\n")
	if ents, _ := os.ReadDir(filepath.Join(r.out, "flame")); len(ents) > 0 {
		md.WriteString("- `profiles/SCENARIO.{cpu,allocs}.pprof` (natsd, one extra unmeasured round; open with `go tool pprof -http=: bin/natsd FILE`), `profiles/*.top.txt` flat/cumulative top functions\n- flame graphs (open in a browser):\n")
		for _, e := range ents {
			fmt.Fprintf(&md, "  - [%s](flame/%s)\n", e.Name(), e.Name())
		}
	}
	if err := os.WriteFile(filepath.Join(r.out, "summary.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(struct {
		Rows   []row         `json:"summary"`
		Rounds []roundResult `json:"rounds"`
		Probs  []string      `json:"problems"`
	}{rows, r.all, r.problems}, "", "  ")
	if err := os.WriteFile(filepath.Join(r.out, "results.json"), js, 0o644); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("side,round," + bench.CSVHeader + "\n")
	for _, x := range r.all {
		fmt.Fprintf(&csv, "%q,%d,%s\n", x.Side, x.Round+1, x.Result.CSV())
	}
	if err := os.WriteFile(filepath.Join(r.out, "results.csv"), []byte(csv.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.out, "chart.svg"), []byte(chart(rows, aName, bName)), 0o644); err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(tbl)
	if len(r.problems) > 0 {
		fmt.Printf("\n%d problem(s) — see summary.md\n", len(r.problems))
	}
	abs, _ := filepath.Abs(r.out)
	fmt.Printf("\nresults: %s (summary.md, chart.svg, results.csv/json, profiles/, flame/, logs/)\n", abs)
	return nil
}

// chart draws throughput by message size as grouped bars (log scale), one panel per
// scenario kind that was run at several sizes (pub-only, 1→1), both servers side by side.
func chart(rows []row, aName, bName string) string {
	type panel struct {
		title string
		rows  []row
	}
	var panels []panel
	for _, k := range []struct{ kind, title string }{{bench.PubSub, "1→1 pub/sub: delivered msgs/s"}, {bench.Pub, "pub-only: published msgs/s"}, {bench.Cluster, "3-server cluster, A→B: delivered msgs/s"}} {
		var p panel
		p.title = k.title
		for _, r := range rows {
			if r.Kind == k.kind && r.Metric == "throughput" {
				p.rows = append(p.rows, r)
			}
		}
		sort.Slice(p.rows, func(i, j int) bool { return p.rows[i].Size < p.rows[j].Size })
		if len(p.rows) > 0 {
			panels = append(panels, p)
		}
	}
	const pw, ph, left, top, bottom = 620, 360, 70, 50, 60
	w := len(panels)*pw + 20
	if w < 300 {
		w = 300
	}
	h := ph + top + bottom + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="Verdana,sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
`, w, h)
	colA, colB := "#7f8c9b", "#e8702a"
	fmt.Fprintf(&b, `<rect x="20" y="%d" width="14" height="14" fill="%s"/><text x="40" y="%d">%s</text>`, h-22, colA, h-10, html.EscapeString(aName))
	fmt.Fprintf(&b, `<rect x="220" y="%d" width="14" height="14" fill="%s"/><text x="240" y="%d">%s</text>`+"\n", h-22, colB, h-10, html.EscapeString(bName))
	if len(panels) == 0 {
		b.WriteString(`<text x="20" y="40">no message-size scenarios in this run</text></svg>`)
		return b.String()
	}
	for pi, p := range panels {
		x0 := pi*pw + left
		plotW, plotH := pw-left-30, ph
		lo, hi := math.Inf(1), 0.0
		for _, r := range p.rows {
			for _, v := range []float64{r.A, r.B} {
				if v > 0 {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
		if hi == 0 {
			continue
		}
		dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if dhi == dlo {
			dhi++
		}
		yOf := func(v float64) float64 {
			return float64(top+plotH) - (math.Log10(v)-dlo)/(dhi-dlo)*float64(plotH)
		}
		fmt.Fprintf(&b, `<text x="%d" y="30" font-size="14" font-weight="bold">%s</text>`+"\n", x0, html.EscapeString(p.title))
		for d := dlo; d <= dhi; d++ {
			y := yOf(math.Pow(10, d))
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end" font-size="11">%s</text>`+"\n",
				x0, x0+plotW, y, y, x0-6, y+4, fmtNum(math.Pow(10, d)))
		}
		gw := float64(plotW) / float64(len(p.rows))
		for i, r := range p.rows {
			gx := float64(x0) + float64(i)*gw
			bw := gw * 0.35
			for j, v := range []float64{r.A, r.B} {
				if v <= 0 {
					continue
				}
				col := colA
				if j == 1 {
					col = colB
				}
				bx := gx + gw*0.12 + float64(j)*bw
				y := yOf(v)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.0f msgs/s (%.1f MB/s)</title></rect>`+"\n",
					bx, y, bw-2, float64(top+plotH)-y, col, html.EscapeString([]string{aName, bName}[j]), bench.SizeLabel(r.Size), v, v*float64(r.Size)/1e6)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="9" text-anchor="middle">%s</text>`+"\n", bx+bw/2-1, y-3, fmtNum(v))
			}
			label := bench.SizeLabel(r.Size)
			if r.Ratio > 0 {
				label += fmt.Sprintf(" (%.2f×)", r.Ratio)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", gx+gw/2, top+plotH+18, label)
		}
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>`+"\n", x0, x0+plotW, top+plotH, top+plotH)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
