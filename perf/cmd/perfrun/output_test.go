package main

import (
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/natsd/natsd/perf/bench"
)

// svgNode is any element of the chart, with the attributes the test reads.
type svgNode struct {
	XMLName  xml.Name
	Class    string    `xml:"class,attr"`
	X        string    `xml:"x,attr"`
	X1       string    `xml:"x1,attr"`
	X2       string    `xml:"x2,attr"`
	Width    string    `xml:"width,attr"`
	Ratio    string    `xml:"data-ratio,attr"`
	Scenario string    `xml:"data-scenario,attr"`
	Text     string    `xml:",chardata"`
	Children []svgNode `xml:",any"`
}

func (n svgNode) walk(f func(svgNode)) {
	f(n)
	for _, c := range n.Children {
		c.walk(f)
	}
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return v
}

// sampleRows is what tableRows gives for a full run's kinds of scenario.
func sampleRows() []row {
	var rows []row
	add := func(sc scenario, a, b bench.Result) {
		rows = append(rows, tableRows(sc, []bench.Result{a}, []bench.Result{b})...)
	}
	mk := func(kind string, clients, size int) bench.Config {
		return bench.Config{Scenario: kind, Clients: clients, Size: size}
	}
	add(scenario{label: "pub-only 16B", cfg: mk(bench.Pub, 0, 16)}, bench.Result{Rate: 5e6, CPUPerMsg: 100}, bench.Result{Rate: 1e7, CPUPerMsg: 50})
	add(scenario{label: "1→1 16KiB", cfg: mk(bench.PubSub, 0, 16<<10)}, bench.Result{Rate: 2e5, CPUPerMsg: 900}, bench.Result{Rate: 1.76e5, CPUPerMsg: 810})
	add(scenario{label: "1→4 fan-out 16B", cfg: mk(bench.Fanout, 4, 16)}, bench.Result{Rate: 3e6, CPUPerMsg: 200}, bench.Result{Rate: 6e6, CPUPerMsg: 74})
	add(scenario{label: "1→16 fan-out 16B", cfg: mk(bench.Fanout, 16, 16)}, bench.Result{Rate: 4e6, CPUPerMsg: 150}, bench.Result{Rate: 9e6, CPUPerMsg: 45})
	add(scenario{label: "queue group of 4, 16B", cfg: mk(bench.Queue, 4, 16)}, bench.Result{Rate: 2e6}, bench.Result{}) // natsd side failed
	add(scenario{label: "request/reply 128B", cfg: mk(bench.ReqRep, 1, 128)}, bench.Result{Rate: 3e4, P50us: 30, CPUPerMsg: 3000}, bench.Result{Rate: 3.5e4, P50us: 26, CPUPerMsg: 1800})
	add(scenario{label: "idle connections ×2000", cfg: mk(bench.Idle, 2000, 0)}, bench.Result{RSSPerConn: 34}, bench.Result{RSSPerConn: 3})
	c := scenario{label: "cluster 3 servers, A→B 16B", cfg: mk(bench.Cluster, 0, 16), servers: 3}
	add(c, bench.Result{Rate: 1e6, CPUPerMsg: 1369, CPUPerMsgEach: []float64{600, 700, 69}}, bench.Result{Rate: 2.93e6, CPUPerMsg: 467, CPUPerMsgEach: []float64{220, 220, 27}})
	return rows
}

// TestChartBarsFromZero: every bar starts on the zero line, its length is its ratio on one
// linear scale (the 1.0× line is where a ratio of 1 ends), and every scenario with a
// throughput figure is there, fan-out included; a scenario missing a side says n/a.
func TestChartBarsFromZero(t *testing.T) {
	rows := sampleRows()
	svg := chart(rows, "nats-server", "natsd")
	var root svgNode
	if err := xml.Unmarshal([]byte(svg), &root); err != nil {
		t.Fatalf("chart is not XML: %v\n%s", err, svg)
	}
	var zeros, ones []svgNode
	var bars []svgNode
	var texts []string
	root.walk(func(n svgNode) {
		switch {
		case n.XMLName.Local == "line" && n.Class == "zero":
			zeros = append(zeros, n)
		case n.XMLName.Local == "line" && n.Class == "one":
			ones = append(ones, n)
		case n.XMLName.Local == "rect" && n.Class == "bar":
			bars = append(bars, n)
		case n.XMLName.Local == "text":
			texts = append(texts, n.Text)
		}
	})
	if len(zeros) != 2 || len(ones) != 2 {
		t.Fatalf("want a zero line and a 1.0× line in each of 2 panels, got %d and %d", len(zeros), len(ones))
	}
	x0 := num(t, zeros[0].X1)
	unit := num(t, ones[0].X1) - x0 // the length of a 1.0× bar
	if unit <= 0 {
		t.Fatalf("1.0× line at %v is not right of the zero line at %v", ones[0].X1, x0)
	}
	for i := range zeros {
		if num(t, zeros[i].X1) != x0 || num(t, zeros[i].X2) != x0 {
			t.Errorf("panel %d: zero line moved: %+v", i, zeros[i])
		}
	}
	// Panel by panel: the second panel's scale may differ, so bars are checked against the
	// 1.0× line of the panel they are in (bars come in panel order).
	throughput, cpu := 0, 0
	for _, r := range rows {
		if r.Ratio <= 0 {
			continue
		}
		if r.Metric == "throughput" {
			throughput++
		} else if strings.HasPrefix(r.Metric, "server CPU per msg") {
			cpu++
		}
	}
	if len(bars) != throughput+cpu {
		t.Fatalf("%d bars, want %d throughput + %d CPU", len(bars), throughput, cpu)
	}
	seen := map[string]bool{}
	for i, b := range bars {
		panel := 0
		if i >= throughput {
			panel = 1
		}
		unit := num(t, ones[panel].X1) - x0
		if x := num(t, b.X); x != x0 {
			t.Errorf("bar %s starts at x=%v, not on the zero line %v", b.Scenario, x, x0)
		}
		ratio := num(t, b.Ratio)
		if got := num(t, b.Width) / unit; math.Abs(got-ratio) > 0.01 {
			t.Errorf("bar %s: length %.3f× the 1.0× length, ratio %.3f", b.Scenario, got, ratio)
		}
		if panel == 0 {
			seen[b.Scenario] = true
		}
	}
	for _, want := range []string{"pub-only 16B", "1→1 16KiB", "1→4 fan-out 16B", "1→16 fan-out 16B", "request/reply 128B", "cluster 3 servers, A→B 16B"} {
		if !seen[want] {
			t.Errorf("no throughput bar for %q", want)
		}
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"queue group of 4, 16B", "n/a", "0.88×", "2.93×", "1.0×"} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
	if strings.Contains(svg, "Log") || strings.Contains(svg, "log scale") {
		t.Error("chart still mentions a log scale")
	}
}

// TestChartEmpty: a run with nothing to chart still writes a valid SVG that says so.
func TestChartEmpty(t *testing.T) {
	svg := chart(nil, "nats-server", "natsd")
	var root svgNode
	if err := xml.Unmarshal([]byte(svg), &root); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg, "no throughput or CPU figures") {
		t.Fatalf("empty chart: %s", svg)
	}
}

// TestWriteListsOnlyWhatItWrote: a quick run (no profiles, no cluster) lists and prints
// neither profiles/ nor flame/ nor conf/; the summary names the files that are there.
func TestWriteListsOnlyWhatItWrote(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "logs", "pub-16B-natsd-r1.log"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &runner{out: dir, rounds: 3}
	if err := r.write(sampleRows(), "nats-server", "natsd", false, nil); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range outputFiles(dir) {
		names = append(names, f.short())
	}
	if got, want := strings.Join(names, ", "), "summary.md, chart.svg, results.csv, results.json, logs/ (1)"; got != want {
		t.Errorf("listed %q, want %q", got, want)
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := string(md[strings.Index(string(md), "## Files"):])
	for _, absent := range []string{"profiles", "flame", "conf/"} {
		if strings.Contains(files, absent) {
			t.Errorf("summary lists %q, which the run did not write:\n%s", absent, files)
		}
	}
	for _, present := range []string{"`chart.svg`", "`results.csv`", "`results.json`", "`logs/` (1 files)"} {
		if !strings.Contains(files, present) {
			t.Errorf("summary does not list %s:\n%s", present, files)
		}
	}
	// With profiles, they are listed.
	if err := os.MkdirAll(filepath.Join(dir, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "profiles", "pub-16B.cpu.pprof"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "flame"), 0o755); err != nil { // empty: not listed
		t.Fatal(err)
	}
	names = names[:0]
	for _, f := range outputFiles(dir) {
		names = append(names, f.short())
	}
	if got := strings.Join(names, ", "); !strings.Contains(got, "profiles/ (1)") || strings.Contains(got, "flame") {
		t.Errorf("listed %q", got)
	}
}
