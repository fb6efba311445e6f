package transform

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// The differential tests hold this package to nats-server's own transform:
// the same templates accepted, the same error texts, the same subjects out
// (random(n) aside), so the same partitions.

// gen makes source/destination/subject triples biased towards the corners:
// functions nats-server finds anywhere in a token, odd argument spellings,
// wildcard numbers out of range, subjects that do not match.
type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

var fnNames = []string{"wildcard", "partition", "splitFromLeft", "splitFromRight", "sliceFromLeft",
	"sliceFromRight", "split", "left", "right", "random", "unknown", "splitLeft"}

// name spells a function name with random case, only sometimes legally.
func (g gen) name() string {
	n := []byte(g.pick(fnNames...))
	for i := range n {
		if g.r.IntN(8) == 0 {
			n[i] ^= 0x20
		}
	}
	return string(n)
}

func (g gen) pick2(xs ...int) int { return xs[g.r.IntN(len(xs))] }

func (g gen) space() string {
	if g.r.IntN(3) > 0 {
		return ""
	}
	return g.pick(" ", "  ", "\t", "\n", " \t")
}

func (g gen) arg() string {
	return g.pick("0", "1", "2", "3", "4", "5", "-1", "+2", "01", "10", "2147483647", "2147483648",
		"-2147483649", "99999999999999999999", "", " ", "x", "-", "--", "_", "1 ", " 2", "\t1", "é", "1x")
}

func (g gen) call() string {
	n := g.r.IntN(4)
	args := make([]string, n)
	for i := range args {
		args[i] = g.arg()
	}
	sep := g.pick(",", ", ", ",\t", " ,")
	body := g.pick("{{", "{{ ", "{{{") + g.space() + g.name() + g.space() + "(" + strings.Join(args, sep) + ")" + g.space() + g.pick("}}", "}}", " }}", "}")
	switch g.r.IntN(12) {
	case 0:
		return body + g.call()
	case 1:
		return "x" + body
	case 2:
		return "{{" + g.name() + "(" + g.call() + ")}}"
	}
	return body
}

func (g gen) destToken() string {
	switch g.r.IntN(20) {
	case 0, 1, 2, 3, 4:
		return g.pick("a", "b", "foo", "$foo", "$", "$0", "$-1", "$+1", "$1x", "$JS", "{{}}", "{{x}}", "a b", "a\tb")
	case 5, 6, 7, 8:
		return "$" + g.pick("1", "2", "3", "4")
	case 9:
		return g.pick("*", ">", "")
	}
	return g.call()
}

func (g gen) srcToken() string {
	switch g.r.IntN(10) {
	case 0, 1, 2, 3:
		return "*"
	case 4:
		return ">"
	case 5:
		return g.pick("", "*x", "$1", "{{wildcard(1)}}", "a b")
	}
	return g.pick("a", "b", "foo", "bar")
}

func (g gen) subject(n int, tok func() string) string {
	ts := make([]string, n)
	for i := range ts {
		ts[i] = tok()
	}
	return strings.Join(ts, ".")
}

func (g gen) pattern() (src, dest string) {
	src = g.subject(1+g.r.IntN(4), g.srcToken)
	if g.r.IntN(20) == 0 {
		src = ""
	}
	dest = g.subject(1+g.r.IntN(4), g.destToken)
	// Mostly keep the '>' on both sides or neither, or nearly everything
	// is rejected as a bad subject before the interesting checks.
	srcFwc := src == "" || strings.HasSuffix(src, ">")
	dest = strings.TrimSuffix(strings.TrimSuffix(dest, ">"), ".")
	if dest == "" {
		dest = "d"
	}
	if srcFwc != (g.r.IntN(10) == 0) {
		dest += ".>"
	}
	if g.r.IntN(30) == 0 {
		dest = ""
	}
	return src, dest
}

func (g gen) value() string {
	return g.pick("x", "ab", "abc", "12345", "1234567890", "a-b", "-a-b-", "--a", "a--b", "a-", "-", "é", "ü-ü",
		"\xff", "a\xffb", "abcdefghijklmnop", "foo", "bar", "*x", "q", "a\tb")
}

// subjectFor is usually a subject src matches, sometimes not, sometimes not
// a valid subject at all.
func (g gen) subjectFor(src string) string {
	if g.r.IntN(8) == 0 {
		return g.pick("", "a..b", "a.*", "a.>", "foo", "a.b.c", ".", "a.")
	}
	if src == "" {
		src = ">"
	}
	var out []string
	for t := range strings.SplitSeq(src, ".") {
		switch {
		case t == ">":
			for range 1 + g.r.IntN(3) {
				out = append(out, g.value())
			}
		case strings.HasPrefix(t, "*"):
			out = append(out, g.value())
		default:
			out = append(out, t)
		}
	}
	if g.r.IntN(10) == 0 {
		out = append(out, "extra")
	}
	return strings.Join(out, ".")
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// refMatch runs nats-server's Match, turning a panic into a result.
func refMatch(tr interface{ Match(string) (string, error) }, s string) (out string, err error, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	out, err = tr.Match(s)
	return
}

// check compares one triple; it returns what differed, "" if nothing.
func check(src, dest, subject string, strict bool) string {
	var (
		ref  interface{ Match(string) (string, error) }
		rerr error
	)
	if strict {
		r, err := server.NewSubjectTransformStrict(src, dest)
		rerr = err
		if r != nil {
			ref = r
		}
	} else {
		r, err := server.NewSubjectTransform(src, dest)
		rerr = err
		if r != nil {
			ref = r
		}
	}
	compileFn := New
	if strict {
		compileFn = NewStrict
	}
	tr, err := compileFn(src, dest)
	if errText(err) != errText(rerr) {
		return fmt.Sprintf("compile: natsd %q, nats-server %q", errText(err), errText(rerr))
	}
	if (tr == nil) != (ref == nil) {
		return fmt.Sprintf("compile: natsd nil=%v, nats-server nil=%v", tr == nil, ref == nil)
	}
	if !strict {
		if a, b := errText(Validate(src, dest)), errText(server.ValidateMapping(src, dest)); a != b {
			return fmt.Sprintf("validate: natsd %q, nats-server %q", a, b)
		}
	}
	if tr == nil {
		return ""
	}
	want, werr, panicked := refMatch(ref, subject)
	if panicked {
		return "" // nats-server's own bug; natsd must simply not panic
	}
	got, gerr := tr.Match(subject)
	if errText(gerr) != errText(werr) {
		return fmt.Sprintf("match %q: natsd err %q, nats-server %q", subject, errText(gerr), errText(werr))
	}
	if tr.hasRandom() {
		return ""
	}
	if got != want {
		return fmt.Sprintf("match %q: natsd %q, nats-server %q", subject, got, want)
	}
	if werr == nil {
		if app := tr.Apply(subject); app != want {
			return fmt.Sprintf("apply %q: natsd %q, nats-server %q", subject, app, want)
		}
	}
	return ""
}

func (t *Transform) hasRandom() bool {
	for _, o := range t.ops {
		if o.fn == fnRandom {
			return true
		}
	}
	return false
}

func TestDifferential(t *testing.T) {
	n := 200000
	if testing.Short() {
		n = 20000
	} else if raceEnabled {
		n = 50000
	}
	g := gen{rand.New(rand.NewPCG(7, 11))}
	var accepted, matched, fails int
	for i := range n {
		src, dest := g.pattern()
		strict := i%3 == 0
		subject := g.subjectFor(src)
		if d := check(src, dest, subject, strict); d != "" {
			t.Errorf("src %q dest %q strict %v: %s", src, dest, strict, d)
			if fails++; fails > 20 {
				t.FailNow()
			}
		}
		if tr, err := New(src, dest); err == nil && tr != nil {
			accepted++
			if _, err := tr.Match(subject); err == nil {
				matched++
			}
		}
	}
	t.Logf("%d triples: %d transforms accepted, %d subjects transformed", n, accepted, matched)
	if accepted < n/20 || matched < n/40 {
		t.Fatalf("generator too rarely makes valid transforms: %d accepted, %d matched", accepted, matched)
	}
}

// TestDifferentialValid spends its triples on templates nats-server accepts,
// so that outputs (and partitions) get compared many times over.
func TestDifferentialValid(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(3, 5))}
	fns := []string{"{{wildcard(%d)}}", "$%d", "{{partition(%d,%d)}}", "{{Partition(%d)}}", "{{splitFromLeft(%d,%d)}}",
		"{{SplitFromRight(%d,%d)}}", "{{sliceFromLeft(%d,%d)}}", "{{SliceFromRight( %d, %d )}}", "{{left(%d,%d)}}",
		"{{right(%d,%d)}}", "{{split(%d,-)}}", "{{split(%d,--)}}", "{{split(%d,)}}", "{{partition(%d,%d,%d)}}"}
	n, compared := 50000, 0
	if testing.Short() || raceEnabled {
		n = 10000
	}
	for range n {
		nw := 1 + g.r.IntN(3)
		toks := []string{"s"}
		for range nw {
			toks = append(toks, "*")
		}
		if g.r.IntN(3) == 0 {
			toks = append(toks, ">")
		}
		src := strings.Join(toks, ".")
		var d []string
		for range 1 + g.r.IntN(3) {
			f := g.pick(fns...)
			args := make([]any, strings.Count(f, "%d"))
			for i := range args {
				args[i] = 1 + g.r.IntN(nw)
				if i > 0 && f[2] != 'p' && f[2] != 'P' {
					args[i] = g.r.IntN(6)
				}
				if i == 0 && (f[2] == 'p' || f[2] == 'P') {
					args[i] = g.r.IntN(20)
				}
			}
			d = append(d, fmt.Sprintf(f, args...))
		}
		if toks[len(toks)-1] == ">" {
			d = append(d, ">")
		}
		dest := strings.Join(d, ".")
		subject := g.subjectFor(src)
		if diff := check(src, dest, subject, false); diff != "" {
			t.Fatalf("src %q dest %q: %s", src, dest, diff)
		}
		if tr, _ := New(src, dest); tr != nil {
			if _, err := tr.Match(subject); err == nil {
				compared++
			}
		}
	}
	t.Logf("%d valid templates, %d outputs compared", n, compared)
	if compared < n/2 {
		t.Fatalf("only %d outputs compared", compared)
	}
}

// TestDifferentialPartition checks partition numbers for many subjects and
// partition counts, the property stream sharding relies on.
func TestDifferentialPartition(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for _, dest := range []string{"p.{{partition(%d,1,2)}}", "p.{{partition(%d)}}", "p.{{partition(%d,2)}}.$1"} {
		for _, parts := range []int{1, 2, 3, 7, 10, 64, 1000, 2147483647} {
			d := fmt.Sprintf(dest, parts)
			tr, err := New("o.*.*", d)
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := server.NewSubjectTransform("o.*.*", d)
			for range 500 {
				s := fmt.Sprintf("o.%s%d.%d", g.value(), g.r.IntN(1e6), g.r.Uint64())
				want, _ := ref.Match(s)
				if got, _ := tr.Match(s); got != want {
					t.Fatalf("%s on %q: natsd %q, nats-server %q", d, s, got, want)
				}
			}
		}
	}
}

// TestDifferentialMapping compares weighted mappings with nats-server's
// AddWeightedMappings: the same errors, and the same destination list
// (remainder share, order, cumulative weights) as its /accountz reports.
func TestDifferentialMapping(t *testing.T) {
	s, err := server.NewServer(&server.Options{NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	acc := s.GlobalAccount()
	g := gen{rand.New(rand.NewPCG(9, 9))}
	srcs := []string{"foo", "foo", "foo.*", "foo.*", "foo.*.>", ">", "foo.$2.*", "foo.$1", "a b", "", "foo..bar", "*.*"}
	destsFor := []string{"foo", "bar", "baz", "foo.$1", "bar.$1", "baz.{{wildcard(1)}}", "q.{{partition(3)}}",
		"foo.*", "x.>", "bar.>", "{{nope(1)}}", "a b", "", "bar.$2.$1", "foo.*.>", "bar", "baz", "qux", "quux"}
	ok := 0
	for i := range 5000 {
		src := g.pick(srcs...)
		var ds []Dest
		var rds []*server.MapDest
		for range g.r.IntN(4) {
			d := Dest{Subject: g.pick(destsFor...), Weight: uint8(g.pick2(0, 10, 20, 25, 30, 50, 100)), Cluster: g.pick("", "", "c1", "c2")}
			if g.r.IntN(3) == 0 {
				d.Weight = uint8(g.r.IntN(256))
			}
			ds = append(ds, d)
			rds = append(rds, &server.MapDest{Subject: d.Subject, Weight: d.Weight, Cluster: d.Cluster})
		}
		m, err := NewMapping(src, ds...)
		rerr := acc.AddWeightedMappings(src, rds...)
		if errText(err) != errText(rerr) {
			t.Fatalf("%d: src %q dests %+v: natsd %q, nats-server %q", i, src, ds, errText(err), errText(rerr))
		}
		if err != nil {
			continue
		}
		ok++
		if hasEmpty(ds) {
			// nats-server keeps a nil transform for an empty destination;
			// its /accountz (and its first publish) crash on it.
			acc.RemoveMapping(src)
			continue
		}
		az, err := s.Accountz(&server.AccountzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, d := range az.Account.Mappings[src] {
			want = append(want, fmt.Sprintf("%s/%d/%s", d.Subject, d.Weight, d.Cluster))
		}
		var got []string
		for _, d := range m.Dests() {
			got = append(got, fmt.Sprintf("%s/%d/%s", d.Subject, d.Weight, d.Cluster))
		}
		// nats-server lists clusters in map order: compare per cluster, in order.
		if a, b := byCluster(got), byCluster(want); a != b {
			t.Fatalf("src %q dests %+v:\nnatsd       %v\nnats-server %v", src, ds, got, want)
		}
		acc.RemoveMapping(src)
	}
	t.Logf("%d mappings accepted by both", ok)
}

func hasEmpty(ds []Dest) bool {
	for _, d := range ds {
		if d.Subject == "" {
			return true
		}
	}
	return false
}

func byCluster(ds []string) string {
	groups := map[string][]string{}
	for _, d := range ds {
		c := d[strings.LastIndexByte(d, '/')+1:]
		groups[c] = append(groups[c], d)
	}
	var keys []string
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s:%v;", k, groups[k])
	}
	return b.String()
}
