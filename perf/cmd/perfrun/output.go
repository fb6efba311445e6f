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
	for _, d := range []string{"profiles", "flame"} {
		if err := os.MkdirAll(filepath.Join(r.out, d), 0o755); err != nil {
			r.problem("%v", err)
			return
		}
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
	md.WriteString("\n![natsd ÷ nats-server per scenario: throughput and server CPU per message, linear axis from zero](chart.svg)\n\n")
	if len(r.problems) > 0 {
		md.WriteString("## Problems seen\n\n")
		for _, p := range r.problems {
			fmt.Fprintf(&md, "- %s\n", p)
		}
		md.WriteString("\n")
	}
	md.WriteString("## Files\n\n")
	files := outputFiles(r.out)
	for _, f := range files {
		fmt.Fprintf(&md, "- %s\n", f.describe())
	}
	if ents, _ := os.ReadDir(filepath.Join(r.out, "flame")); len(ents) > 0 {
		md.WriteString("\nFlame graphs (open in a browser):\n\n")
		for _, e := range ents {
			fmt.Fprintf(&md, "- [%s](flame/%s)\n", e.Name(), e.Name())
		}
	}
	if err := os.WriteFile(filepath.Join(r.out, "summary.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(tbl)
	if len(r.problems) > 0 {
		fmt.Printf("\n%d problem(s) — see summary.md\n", len(r.problems))
	}
	abs, _ := filepath.Abs(r.out)
	names := make([]string, 0, len(files))
	for _, f := range outputFiles(r.out) {
		names = append(names, f.short())
	}
	fmt.Printf("\nresults: %s (%s)\n", abs, strings.Join(names, ", "))
	return nil
}

// outFile is one entry of a results folder: a file, or a folder and how many files it holds.
type outFile struct {
	name  string
	dir   bool
	count int
}

// what each entry of a results folder is, for summary.md's file list.
var outFileText = map[string]string{
	"summary.md":   "this summary",
	"results.csv":  "every round of every side",
	"results.json": "every round of every side, the summary rows and the problems",
	"chart.svg":    "natsd ÷ nats-server per scenario (throughput, server CPU per message), bars from zero on a linear axis",
	"logs":         "each server's log per round",
	"conf":         "cluster scenarios: each server's generated config file",
	"profiles":     "natsd's CPU and allocation profiles of one extra, unmeasured round (`go tool pprof -http=: bin/natsd FILE`) and `*.top.txt` top functions",
	"flame":        "flame graphs of those profiles (open in a browser)",
}

func (f outFile) short() string {
	if f.dir {
		return fmt.Sprintf("%s/ (%d)", f.name, f.count)
	}
	return f.name
}

func (f outFile) describe() string {
	s := "`" + f.name + "`"
	if f.dir {
		s = fmt.Sprintf("`%s/` (%d files)", f.name, f.count)
	}
	if t := outFileText[f.name]; t != "" {
		s += ": " + t
	}
	return s
}

// outputFiles lists what a run actually left in its folder: summary.md first, then the other
// files, then the folders that hold at least one file (a quick run has no profiles/ or
// flame/, a run without clusters no conf/).
func outputFiles(dir string) []outFile {
	ents, _ := os.ReadDir(dir)
	var files, dirs []outFile
	summary := false
	for _, e := range ents {
		switch {
		case e.Name() == "summary.md":
			summary = true
		case e.IsDir():
			sub, _ := os.ReadDir(filepath.Join(dir, e.Name()))
			if len(sub) > 0 {
				dirs = append(dirs, outFile{name: e.Name(), dir: true, count: len(sub)})
			}
		default:
			files = append(files, outFile{name: e.Name()})
		}
	}
	out := []outFile{}
	if summary {
		out = append(out, outFile{name: "summary.md"})
	}
	return append(append(out, files...), dirs...)
}

// chartPanel is one panel of the chart: a metric's ratio B/A for every scenario that has it.
type chartPanel struct {
	title string
	note  string // what "better" is
	rows  []row
}

// chartPanels picks the rows the chart shows, in run order: every scenario's throughput
// (higher is better) and its server CPU per message (lower is better; for a cluster the
// servers' total, not the per-server breakdown).
func chartPanels(rows []row) []chartPanel {
	tp := chartPanel{title: "throughput", note: "higher is better"}
	cpu := chartPanel{title: "server CPU per message", note: "lower is better"}
	for _, r := range rows {
		switch {
		case r.Metric == "throughput":
			tp.rows = append(tp.rows, r)
		case strings.HasPrefix(r.Metric, "server CPU per msg"):
			cpu.rows = append(cpu.rows, r)
			if r.Metric != "server CPU per msg" {
				cpu.note = "lower is better; a cluster's is its servers' total"
			}
		}
	}
	var out []chartPanel
	for _, p := range []chartPanel{tp, cpu} {
		if len(p.rows) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// chartMax is the axis' upper end: the largest ratio (at least 1.0, so the 1.0× line is
// always drawn) rounded up to the next half.
func chartMax(p chartPanel) float64 {
	hi := 1.0
	for _, r := range p.rows {
		hi = math.Max(hi, r.Ratio)
	}
	return math.Ceil(hi*1.05*2) / 2
}

// chart draws the ratio bName/aName of every scenario as horizontal bars on a linear axis that
// starts at zero, with a line at 1.0× (the two servers equal): one panel for throughput, one
// for server CPU per message. A bar's length is the ratio itself, so 2× is twice as long as
// 1×; each bar is labelled with the ratio and both sides' medians. Scenarios missing a side
// are listed as n/a.
func chart(rows []row, aName, bName string) string {
	panels := chartPanels(rows)
	const (
		labelW = 230 // scenario names, left of the axis
		plotW  = 420 // the axis, 0 to chartMax
		textW  = 250 // the figures, right of the bars
		barH   = 16
		gap    = 6
		top    = 48 // title and legend above the first panel
		headH  = 40 // a panel's heading and axis labels
		footH  = 24
	)
	w := labelW + plotW + textW
	h := top
	for _, p := range panels {
		h += headH + len(p.rows)*(barH+gap) + footH
	}
	if len(panels) == 0 {
		h += 40
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="Verdana,sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
`, w, h)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15" font-weight="bold">%s ÷ %s, per scenario (linear axis from 0; the dashed line is 1.0×, the two equal)</text>`+"\n",
		html.EscapeString(bName), html.EscapeString(aName))
	fmt.Fprintf(&b, `<text x="10" y="38" font-size="11" fill="#555">medians of alternating rounds; each bar's label: ratio (%s vs %s); orange: %s ahead, grey: behind</text>`+"\n",
		html.EscapeString(bName), html.EscapeString(aName), html.EscapeString(bName))
	if len(panels) == 0 {
		fmt.Fprintf(&b, `<text x="10" y="%d">no throughput or CPU figures in this run</text>`+"\n</svg>\n", top+20)
		return b.String()
	}
	y := top
	for _, p := range panels {
		hi := chartMax(p)
		x0 := float64(labelW)
		xOf := func(v float64) float64 { return x0 + v/hi*plotW }
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="13" font-weight="bold">%s: %s ÷ %s (%s)</text>`+"\n",
			y+16, html.EscapeString(p.title), html.EscapeString(bName), html.EscapeString(aName), p.note)
		plotTop := y + headH
		plotBot := plotTop + len(p.rows)*(barH+gap)
		// Grid and ticks every 0.5×.
		for t := 0.0; t <= hi+1e-9; t += 0.5 {
			x := xOf(t)
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle" font-size="10">%.1f×</text>`+"\n",
				x, x, plotTop-4, plotBot, x, plotTop-8, t)
		}
		fmt.Fprintf(&b, `<line class="zero" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#333"/>`+"\n", x0, x0, plotTop-4, plotBot)
		fmt.Fprintf(&b, `<line class="one" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#333" stroke-dasharray="4,3"/>`+"\n", xOf(1), xOf(1), plotTop-4, plotBot)
		for i, r := range p.rows {
			by := plotTop + i*(barH+gap)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="end">%s</text>`+"\n", x0-8, by+barH-4, html.EscapeString(r.Scenario))
			figures := fmt.Sprintf("(%s vs %s %s)", fmtNum(r.B), fmtNum(r.A), r.Unit)
			if r.Ratio <= 0 {
				fmt.Fprintf(&b, `<text class="na" x="%.1f" y="%d" fill="#a00" stroke="white" stroke-width="3" paint-order="stroke">n/a %s</text>`+"\n", x0+4, by+barH-4, html.EscapeString(figures))
				continue
			}
			col := "#e8702a" // better than aName
			if (r.Higher && r.Ratio < 1) || (!r.Higher && r.Ratio > 1) {
				col = "#7f8c9b" // worse
			}
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%d" width="%.2f" height="%d" fill="%s" data-ratio="%.4f" data-scenario="%s"><title>%s %s: %.2f× (%s %s, %s %s)</title></rect>`+"\n",
				x0, by, xOf(r.Ratio)-x0, barH, col, r.Ratio, html.EscapeString(r.Scenario),
				html.EscapeString(r.Scenario), html.EscapeString(r.Metric), r.Ratio, html.EscapeString(bName), fmtNum(r.B), html.EscapeString(aName), fmtNum(r.A))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" stroke="white" stroke-width="3" paint-order="stroke">%.2f× %s</text>`+"\n", xOf(r.Ratio)+4, by+barH-4, r.Ratio, html.EscapeString(figures))
		}
		y = plotBot + footH
	}
	b.WriteString("</svg>\n")
	return b.String()
}
