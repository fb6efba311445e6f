package flame

import (
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"sort"
	"strings"
)

type node struct {
	name     string
	value    int64
	children map[string]*node
}

func (n *node) child(name string) *node {
	if n.children == nil {
		n.children = map[string]*node{}
	}
	c := n.children[name]
	if c == nil {
		c = &node{name: name}
		n.children[name] = c
	}
	return c
}

// Options for WriteSVG.
type Options struct {
	Title string
	Unit  string // "ns" for CPU, "bytes" for allocations
	Width int
}

// WriteSVG renders a flame graph (root at the bottom) of value index vi. Each frame carries a
// <title> tooltip with its share; the SVG opens in any browser.
func WriteSVG(w io.Writer, p *Profile, vi int, o Options) error {
	if o.Width == 0 {
		o.Width = 1600
	}
	root := &node{name: "all"}
	for i, st := range p.Stacks {
		if vi >= len(p.Values[i]) {
			continue
		}
		v := p.Values[i][vi]
		if v == 0 {
			continue
		}
		root.value += v
		n := root
		for _, f := range st {
			n = n.child(f)
			n.value += v
		}
	}
	depth := maxDepth(root)
	const fh = 17
	top := 50
	h := top + (depth+1)*fh + 20
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Verdana,sans-serif" font-size="11">
<rect width="100%%" height="100%%" fill="#fdfdf6"/>
<text x="%d" y="22" font-size="16" text-anchor="middle">%s</text>
<text x="%d" y="40" font-size="11" text-anchor="middle" fill="#555">total %s — hover a frame for its share; root at the bottom</text>
`, o.Width, h, o.Width, h, o.Width/2, html.EscapeString(o.Title), o.Width/2, html.EscapeString(fmtValue(root.value, o.Unit)))
	if root.value == 0 {
		fmt.Fprintf(w, "<text x=\"10\" y=\"%d\">no samples</text>\n</svg>\n", top+20)
		return nil
	}
	scale := float64(o.Width-20) / float64(root.value)
	var draw func(n *node, x float64, d int)
	draw = func(n *node, x float64, d int) {
		wd := float64(n.value) * scale
		if wd < 0.3 {
			return
		}
		y := h - 20 - (d+1)*fh
		pct := 100 * float64(n.value) / float64(root.value)
		fmt.Fprintf(w, `<g><title>%s — %s (%.2f%%)</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" rx="2"/>`,
			html.EscapeString(n.name), html.EscapeString(fmtValue(n.value, o.Unit)), pct, x, y, wd, fh-1, color(n.name))
		if chars := int((wd - 6) / 6.6); chars >= 3 {
			label := shortName(n.name)
			if len(label) > chars {
				label = label[:chars-2] + ".."
			}
			fmt.Fprintf(w, `<text x="%.2f" y="%d">%s</text>`, x+3, y+fh-5, html.EscapeString(label))
		}
		fmt.Fprintln(w, "</g>")
		kids := make([]*node, 0, len(n.children))
		for _, c := range n.children {
			kids = append(kids, c)
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i].name < kids[j].name })
		cx := x
		for _, c := range kids {
			draw(c, cx, d+1)
			cx += float64(c.value) * scale
		}
	}
	draw(root, 10, 0)
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

func maxDepth(n *node) int {
	d := 0
	for _, c := range n.children {
		if cd := maxDepth(c) + 1; cd > d {
			d = cd
		}
	}
	return d
}

// shortName drops the package path: github.com/x/y/loop.(*client).flush → loop.(*client).flush.
func shortName(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func color(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	v := h.Sum32()
	r := 205 + v%50
	g := 80 + (v>>8)%130
	b := 40 + (v>>16)%50
	if strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "syscall.") || strings.HasPrefix(name, "internal/") {
		r, g, b = 120+v%40, 160+(v>>8)%50, 210+(v>>16)%40
	}
	return fmt.Sprintf("rgb(%d,%d,%d)", r, g, b)
}

func fmtValue(v int64, unit string) string {
	f := float64(v)
	switch unit {
	case "ns", "nanoseconds":
		switch {
		case f >= 1e9:
			return fmt.Sprintf("%.2fs", f/1e9)
		case f >= 1e6:
			return fmt.Sprintf("%.1fms", f/1e6)
		}
		return fmt.Sprintf("%.0fµs", f/1e3)
	case "bytes":
		switch {
		case f >= 1<<30:
			return fmt.Sprintf("%.2f GiB", f/(1<<30))
		case f >= 1<<20:
			return fmt.Sprintf("%.1f MiB", f/(1<<20))
		case f >= 1<<10:
			return fmt.Sprintf("%.1f KiB", f/(1<<10))
		}
		return fmt.Sprintf("%.0f B", f)
	}
	return fmt.Sprintf("%d %s", v, unit)
}
