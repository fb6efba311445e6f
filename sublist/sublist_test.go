package sublist

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

type sub struct {
	id      int
	subject string
	queue   string
}

// ---- brute force reference ----

func bruteMatches(pattern, subject string) bool {
	if subject == "" {
		return false
	}
	st := strings.Split(subject, ".")
	for _, t := range st {
		if t == "" {
			return false
		}
	}
	pt := strings.Split(pattern, ".")
	for i, p := range pt {
		if p == ">" {
			return i < len(st) // one or more tokens left
		}
		if i >= len(st) {
			return false
		}
		if p != "*" && p != st[i] {
			return false
		}
	}
	return len(pt) == len(st)
}

type canon struct {
	plain  []int
	queues []string // each group rendered as "name:sorted ids"
}

func canonResult(r *Result[*sub]) canon {
	var c canon
	for _, s := range r.Plain {
		c.plain = append(c.plain, s.id)
	}
	slices.Sort(c.plain)
	for _, g := range r.Queues {
		if len(g) == 0 {
			c.queues = append(c.queues, "<empty group>")
			continue
		}
		var ids []int
		name := g[0].queue
		for _, s := range g {
			if s.queue != name {
				name = "<mixed group>"
			}
			ids = append(ids, s.id)
		}
		slices.Sort(ids)
		c.queues = append(c.queues, fmt.Sprint(name, ":", ids))
	}
	slices.Sort(c.queues)
	return c
}

func bruteResult(subs map[*sub]struct{}, subject string) canon {
	var c canon
	groups := map[string][]int{}
	for s := range subs {
		if !bruteMatches(s.subject, subject) {
			continue
		}
		if s.queue == "" {
			c.plain = append(c.plain, s.id)
		} else {
			groups[s.queue] = append(groups[s.queue], s.id)
		}
	}
	slices.Sort(c.plain)
	for name, ids := range groups {
		slices.Sort(ids)
		c.queues = append(c.queues, fmt.Sprint(name, ":", ids))
	}
	slices.Sort(c.queues)
	return c
}

func sameCanon(a, b canon) bool {
	return slices.Equal(a.plain, b.plain) && slices.Equal(a.queues, b.queues)
}

// ---- table-driven semantics ----

func TestWildcardSemantics(t *testing.T) {
	cases := []struct {
		sub, pub string
		want     bool
	}{
		{"foo", "foo", true},
		{"foo", "bar", false},
		{"foo", "foo.bar", false},
		{"foo.bar", "foo", false},
		{"foo.*", "foo.bar", true},
		{"foo.*", "foo", false},
		{"foo.*", "foo.bar.baz", false},
		{"*", "foo", true},
		{"*", "foo.bar", false},
		{"*.bar", "foo.bar", true},
		{"*.bar", "foo.baz", false},
		{"*.*", "a.b", true},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c.d", true},
		{"a.>", "a", false}, // '>' needs at least one token
		{">", "a", true},
		{">", "a.b.c", true},
		{"*.>", "a.b", true},
		{"*.>", "a", false},
		{"a.*.>", "a.b.c", true},
		{"a.*.>", "a.b", false},
		{"foo*", "foo*", true}, // not a wildcard: literal token
		{"foo*", "foobar", false},
		{"foo>", "foo>", true},
		{"foo>", "foo.bar", false},
		{"a.b*.c", "a.bx.c", false},
		{"Foo", "foo", false}, // case-sensitive
		// Malformed publish subjects never match anything.
		{">", "a..b", false},
		{">", ".a", false},
		{">", "a.", false},
		{"*", "", false},
		// A non-pedantic publish of a wildcard-looking subject is literal
		// bytes, matched the way nats-server does.
		{"foo.*", "foo.*", true},
		{"foo.bar", "foo.*", false},
	}
	for _, tc := range cases {
		t.Run(tc.sub+"~"+tc.pub, func(t *testing.T) {
			s := New[*sub]()
			x := &sub{id: 1, subject: tc.sub}
			if err := s.Insert(tc.sub, "", x); err != nil {
				t.Fatal(err)
			}
			r := s.Match([]byte(tc.pub))
			got := len(r.Plain) == 1 && r.Plain[0] == x
			if got != tc.want {
				t.Fatalf("Match(%q) with sub %q = %v, want %v (%+v)", tc.pub, tc.sub, got, tc.want, r)
			}
			c := NewCache(s, 8)
			for range 2 {
				cr := c.Match([]byte(tc.pub))
				if (len(cr.Plain) == 1) != tc.want {
					t.Fatalf("Cache.Match(%q) disagrees", tc.pub)
				}
			}
			if tc.want != bruteMatches(tc.sub, tc.pub) {
				t.Fatalf("brute force disagrees with table for %q ~ %q", tc.sub, tc.pub)
			}
		})
	}
}

func TestMultipleMatches(t *testing.T) {
	s := New[*sub]()
	subs := []*sub{
		{1, "a.b.c", ""}, {2, "a.*.c", ""}, {3, "a.>", ""}, {4, ">", ""},
		{5, "*.b.*", ""}, {6, "a.b", ""}, {7, "a.b.c.d", ""}, {8, "x.>", ""},
	}
	set := map[*sub]struct{}{}
	for _, x := range subs {
		if err := s.Insert(x.subject, x.queue, x); err != nil {
			t.Fatal(err)
		}
		set[x] = struct{}{}
	}
	if s.Count() != len(subs) {
		t.Fatalf("Count = %d", s.Count())
	}
	got := canonResult(s.Match([]byte("a.b.c")))
	if !slices.Equal(got.plain, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("got %v", got.plain)
	}
	for _, p := range []string{"a", "a.b", "a.b.c", "a.b.c.d", "x.y", "b.b.b", "q"} {
		if g, w := canonResult(s.Match([]byte(p))), bruteResult(set, p); !sameCanon(g, w) {
			t.Fatalf("%q: got %+v want %+v", p, g, w)
		}
	}
}

func TestQueueGroups(t *testing.T) {
	s := New[*sub]()
	mk := func(id int, subj, q string) *sub {
		x := &sub{id, subj, q}
		if err := s.Insert(subj, q, x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	p := mk(1, "foo.bar", "")
	mk(2, "foo.bar", "g1")
	mk(3, "foo.bar", "g1")
	mk(4, "foo.bar", "g2")
	mk(5, "foo.*", "g1") // same group name on another matching subject: merges
	mk(6, "foo.>", "g3")
	mk(7, "baz", "g1")

	r := s.Match([]byte("foo.bar"))
	got := canonResult(r)
	if !slices.Equal(got.plain, []int{1}) {
		t.Fatalf("plain %v", got.plain)
	}
	want := []string{"g1:[2 3 5]", "g2:[4]", "g3:[6]"}
	if !slices.Equal(got.queues, want) {
		t.Fatalf("queues %v want %v", got.queues, want)
	}

	// Duplicate insert is a no-op; members appear once.
	before := s.Count()
	x4 := findSub(r, 4)
	if err := s.Insert("foo.bar", "g2", x4); err != nil || s.Count() != before {
		t.Fatalf("duplicate insert changed count: %v %d->%d", err, before, s.Count())
	}

	// The published result is immutable: later changes must not show in it.
	snapshot := canonResult(r)
	if err := s.Remove("foo.bar", "g1", findSub(r, 2)); err != nil {
		t.Fatal(err)
	}
	mk(8, "foo.bar", "g1")
	if err := s.Remove("foo.bar", "", p); err != nil {
		t.Fatal(err)
	}
	if !sameCanon(snapshot, canonResult(r)) {
		t.Fatalf("published result mutated: %+v -> %+v", snapshot, canonResult(r))
	}
	got = canonResult(s.Match([]byte("foo.bar")))
	want = []string{"g1:[3 5 8]", "g2:[4]", "g3:[6]"}
	if len(got.plain) != 0 || !slices.Equal(got.queues, want) {
		t.Fatalf("after changes: %+v", got)
	}
}

func findSub(r *Result[*sub], id int) *sub {
	for _, x := range r.Plain {
		if x.id == id {
			return x
		}
	}
	for _, g := range r.Queues {
		for _, x := range g {
			if x.id == id {
				return x
			}
		}
	}
	return nil
}

func TestRemove(t *testing.T) {
	s := New[*sub]()
	a := &sub{1, "a.b", ""}
	b := &sub{2, "a.*", "q"}
	c := &sub{3, "a.b.c.d.e", ""}
	for _, x := range []*sub{a, b, c} {
		if err := s.Insert(x.subject, x.queue, x); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		subj, q string
		v       *sub
		err     error
	}{
		{"a.b", "", b, ErrNotFound},       // wrong value
		{"a.b", "q", a, ErrNotFound},      // wrong queue
		{"a.*", "", b, ErrNotFound},       // plain vs queue
		{"a.b.c", "", c, ErrNotFound},     // interior node only
		{"x.y", "", a, ErrNotFound},       // nothing there
		{"a..b", "", a, ErrNotFound},      // invalid
		{"a.b", "", a, nil},               //
		{"a.b", "", a, ErrNotFound},       // twice
		{"a.*", "q", b, nil},              //
		{"a.b.c.d.e", "", c, nil},         //
		{"a.b.c.d.e", "", c, ErrNotFound}, //
	}
	for i, tc := range cases {
		if err := s.Remove(tc.subj, tc.q, tc.v); !errors.Is(err, tc.err) {
			t.Fatalf("case %d Remove(%q,%q,%d) = %v want %v", i, tc.subj, tc.q, tc.v.id, err, tc.err)
		}
	}
	if s.Count() != 0 {
		t.Fatalf("Count = %d", s.Count())
	}
	// Everything was pruned back to empty roots.
	for i := range s.shards {
		if !s.shards[i].root.empty() {
			t.Fatalf("shard %d not pruned", i)
		}
	}
	if r := s.Match([]byte("a.b")); len(r.Plain)+len(r.Queues) != 0 {
		t.Fatalf("match after remove: %+v", r)
	}
}

func TestPruneKeepsSiblings(t *testing.T) {
	s := New[*sub]()
	a := &sub{1, "a.b.c", ""}
	b := &sub{2, "a.b", ""}
	s.Insert(a.subject, "", a)
	s.Insert(b.subject, "", b)
	if err := s.Remove("a.b.c", "", a); err != nil {
		t.Fatal(err)
	}
	if r := s.Match([]byte("a.b")); len(r.Plain) != 1 || r.Plain[0] != b {
		t.Fatalf("sibling lost: %+v", r)
	}
	s.Insert(a.subject, "", a)
	if err := s.Remove("a.b", "", b); err != nil {
		t.Fatal(err)
	}
	if r := s.Match([]byte("a.b.c")); len(r.Plain) != 1 || r.Plain[0] != a {
		t.Fatalf("child lost: %+v", r)
	}
}

// A publish subject with an empty token reaches no one, not even '>' (as in nats-server), through
// the trie and through the cache alike.
func TestMalformedPublishMatchesNothing(t *testing.T) {
	subs := []string{">", "*", "*.*", "a.>", "a.*", "*.b", "a.*.b", "a.b"}
	s := New[*sub]()
	for i, subj := range subs {
		if err := s.Insert(subj, "", &sub{id: i}); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCache(s, 16)
	for _, pub := range []string{"", ".", "a.", ".a", "a..b", "..", "a.b.", ".a.b", "a..", "a.b..c"} {
		for round := range 3 { // the cache admits on a second miss: hit it too
			if r := c.Match([]byte(pub)); len(r.Plain)+len(r.Queues) != 0 {
				t.Errorf("Cache.Match(%q) round %d = %d plain, %d queues; want none", pub, round, len(r.Plain), len(r.Queues))
			}
		}
		if r := s.Match([]byte(pub)); len(r.Plain)+len(r.Queues) != 0 {
			t.Errorf("Match(%q) = %d plain; want none", pub, len(r.Plain))
		}
	}
	want := 0 // and a well-formed one still matches what it should
	for _, p := range subs {
		if bruteMatches(p, "a.b") {
			want++
		}
	}
	if r := c.Match([]byte("a.b")); len(r.Plain) != want {
		t.Errorf("Cache.Match(a.b) = %d plain, want %d", len(r.Plain), want)
	}
}

func TestInvalidSubjectsRejected(t *testing.T) {
	s := New[*sub]()
	x := &sub{id: 1}
	for _, subj := range []string{
		"", ".", "a.", ".a", "a..b", "a.>.b", ">.a", ">.>", "a b", "a\tb", "a.\r", "a\n", "a\fb", " ",
	} {
		if err := s.Insert(subj, "", x); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("Insert(%q) = %v, want ErrInvalidSubject", subj, err)
		}
	}
	for _, q := range []string{"a b", "\t", "q\n"} {
		if err := s.Insert("foo", q, x); !errors.Is(err, ErrInvalidQueue) {
			t.Errorf("Insert queue %q = %v, want ErrInvalidQueue", q, err)
		}
	}
	if s.Count() != 0 {
		t.Fatalf("Count = %d", s.Count())
	}
}

func TestValidation(t *testing.T) {
	cases := []struct {
		s              string
		valid, literal bool
	}{
		{"foo", true, true},
		{"foo.bar.baz", true, true},
		{"foo.*", true, false},
		{"*", true, false},
		{">", true, false},
		{"foo.>", true, false},
		{"*.>", true, false},
		{"foo*", true, true},
		{"foo>", true, true},
		{"foo.*bar", true, true},
		{"$SYS.x", true, true},
		{"_INBOX.abc", true, true},
		{"héllo.wörld", true, true},
		{"", false, false},
		{".", false, false},
		{"foo.", false, false},
		{".foo", false, false},
		{"foo..bar", false, false},
		{"foo.>.bar", false, false},
		{">.foo", false, false},
		// Whitespace makes a subject invalid for SUB but not unliteral (nats-server's
		// IsValidLiteralSubject, the pedantic publish check, ignores it).
		{"> ", false, true},
		{"foo bar", false, true},
		{"foo\tbar", false, true},
		{"foo\r", false, true},
		{"foo\n", false, true},
		{"\ffoo", false, true},
		{"a\fb.*", false, false},
	}
	for _, tc := range cases {
		if got := ValidSubject([]byte(tc.s)); got != tc.valid {
			t.Errorf("ValidSubject(%q) = %v want %v", tc.s, got, tc.valid)
		}
		if got := ValidLiteralSubject([]byte(tc.s)); got != tc.literal {
			t.Errorf("ValidLiteralSubject(%q) = %v want %v", tc.s, got, tc.literal)
		}
	}
	queues := []struct {
		q  string
		ok bool
	}{
		{"workers", true}, {"a.b", true}, {"*", true}, {"_sys_", true},
		{"", false}, {"a b", false}, {"a\t", false}, {"\n", false}, {"a\rb", false}, {"a\fb", false},
	}
	for _, tc := range queues {
		if got := ValidQueue([]byte(tc.q)); got != tc.ok {
			t.Errorf("ValidQueue(%q) = %v want %v", tc.q, got, tc.ok)
		}
	}
}

func TestValidationNoAlloc(t *testing.T) {
	b := []byte("foo.bar.*.baz.>")
	if n := testing.AllocsPerRun(100, func() { ValidSubject(b); ValidLiteralSubject(b); ValidQueue(b) }); n != 0 {
		t.Fatalf("allocs = %v", n)
	}
}

// ---- randomized against brute force ----

var alphabet = []string{"a", "b", "c", "foo*", "x"}

func randSubject(r *rand.Rand, wild bool) string {
	n := 1 + r.IntN(4)
	toks := make([]string, n)
	for i := range toks {
		toks[i] = alphabet[r.IntN(len(alphabet))]
		if wild {
			switch k := r.IntN(10); {
			case k < 2:
				toks[i] = "*"
			case k == 2 && i == n-1:
				toks[i] = ">"
			}
		}
	}
	return strings.Join(toks, ".")
}

func TestRandomAgainstBruteForce(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	// Few shards so several first tokens collide in one shard; a cache small
	// enough to evict.
	s := NewSharded[*sub](2)
	c := NewCache(s, 16)
	set := map[*sub]struct{}{}
	var live []*sub
	var pubs []string
	for range 60 {
		pubs = append(pubs, randSubject(r, false))
	}
	pubs = append(pubs, "", "a..b", "a.")
	id := 0
	steps := 1500
	if testing.Short() {
		steps = 300
	}
	for step := range steps {
		if len(live) == 0 || r.IntN(10) < 6 {
			id++
			q := ""
			if r.IntN(3) == 0 {
				q = []string{"q1", "q2"}[r.IntN(2)]
			}
			x := &sub{id, randSubject(r, true), q}
			if err := s.Insert(x.subject, x.queue, x); err != nil {
				t.Fatalf("step %d insert %+v: %v", step, x, err)
			}
			set[x] = struct{}{}
			live = append(live, x)
		} else {
			i := r.IntN(len(live))
			x := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			delete(set, x)
			if err := s.Remove(x.subject, x.queue, x); err != nil {
				t.Fatalf("step %d remove %+v: %v", step, x, err)
			}
		}
		if s.Count() != len(set) {
			t.Fatalf("step %d Count %d want %d", step, s.Count(), len(set))
		}
		for range 8 {
			p := pubs[r.IntN(len(pubs))]
			want := bruteResult(set, p)
			if got := canonResult(s.Match([]byte(p))); !sameCanon(got, want) {
				t.Fatalf("step %d Match(%q) = %+v want %+v", step, p, got, want)
			}
			if got := canonResult(c.Match([]byte(p))); !sameCanon(got, want) {
				t.Fatalf("step %d Cache.Match(%q) = %+v want %+v", step, p, got, want)
			}
		}
		if c.Len() > 16 {
			t.Fatalf("cache grew to %d", c.Len())
		}
	}
	// Drain everything; the trie must be empty again.
	for _, x := range live {
		if err := s.Remove(x.subject, x.queue, x); err != nil {
			t.Fatal(err)
		}
	}
	for i := range s.shards {
		if !s.shards[i].root.empty() {
			t.Fatalf("shard %d not pruned", i)
		}
	}
}

// ---- cache staleness ----

func TestCacheNeverStale(t *testing.T) {
	s := New[*sub]()
	c := NewCache(s, 64)
	subj := []byte("orders.eu.new")
	if r := c.Match(subj); len(r.Plain) != 0 {
		t.Fatal("unexpected interest")
	}
	steps := []struct {
		pattern string
		want    int
	}{
		{"orders.eu.new", 1}, // literal shard
		{"orders.*.new", 2},  // literal shard, wildcard node
		{"*.eu.new", 3},      // wildcard shard
		{">", 4},             // wildcard shard
		{"other.thing", 4},   // unrelated (maybe same shard): must not matter
	}
	var added []*sub
	for i, st := range steps {
		x := &sub{i, st.pattern, ""}
		s.Insert(st.pattern, "", x)
		added = append(added, x)
		if got := len(c.Match(subj).Plain); got != st.want {
			t.Fatalf("after insert %q: %d matches, want %d", st.pattern, got, st.want)
		}
	}
	for i := len(added) - 1; i >= 0; i-- {
		s.Remove(added[i].subject, "", added[i])
		want := 0
		if i > 0 {
			want = steps[i-1].want
		}
		if got := len(c.Match(subj).Plain); got != want {
			t.Fatalf("after remove %q: %d, want %d", added[i].subject, got, want)
		}
	}

	// Cross-goroutine: the writer's change happens-before the reader's Match
	// through a channel; the reader's cache must see it.
	c2 := NewCache(s, 64)
	req := make(chan int)
	resp := make(chan int)
	go func() {
		for range req {
			resp <- len(c2.Match(subj).Plain)
		}
		close(resp)
	}()
	var subs []*sub
	for i := range 50 {
		x := &sub{i, []string{"orders.eu.new", "orders.*.new", "*.eu.*", "orders.>"}[i%4], ""}
		s.Insert(x.subject, "", x)
		subs = append(subs, x)
		req <- 0
		if got := <-resp; got != len(subs) {
			t.Fatalf("other goroutine saw %d after insert, want %d", got, len(subs))
		}
	}
	for len(subs) > 0 {
		x := subs[len(subs)-1]
		subs = subs[:len(subs)-1]
		s.Remove(x.subject, "", x)
		req <- 0
		if got := <-resp; got != len(subs) {
			t.Fatalf("other goroutine saw %d after remove, want %d", got, len(subs))
		}
	}
	close(req)
	<-resp
}

func TestCacheUnrelatedChangeKeepsEntry(t *testing.T) {
	s := NewSharded[*sub](64)
	a := &sub{1, "alpha.x", ""}
	s.Insert(a.subject, "", a)
	c := NewCache(s, 64)
	r1 := c.Match([]byte("alpha.x"))
	// Find a first token that lands in another shard.
	other := ""
	for i := 0; ; i++ {
		other = fmt.Sprint("t", i)
		if s.shardForPub([]byte(other)) != s.shardForPub([]byte("alpha")) {
			break
		}
	}
	s.Insert(other+".y", "", &sub{2, other + ".y", ""})
	if r2 := c.Match([]byte("alpha.x")); r2 != r1 {
		t.Fatal("insert on an unrelated shard invalidated the entry")
	}
	s.Insert("*.x", "", &sub{3, "*.x", ""})
	if r3 := c.Match([]byte("alpha.x")); r3 == r1 || len(r3.Plain) != 2 {
		t.Fatalf("wildcard insert not seen: %+v", r3)
	}
}

func TestCacheBounded(t *testing.T) {
	s := New[*sub]()
	s.Insert(">", "", &sub{1, ">", ""})
	c := NewCache(s, 100)
	for i := range 10000 {
		r := c.Match(fmt.Appendf(nil, "inbox.%d", i))
		if len(r.Plain) != 1 {
			t.Fatal("miss result wrong")
		}
		if c.Len() > 100 {
			t.Fatalf("cache len %d > 100", c.Len())
		}
	}
}

func TestCacheHitNoAlloc(t *testing.T) {
	s := New[*sub]()
	s.Insert("foo.bar", "", &sub{1, "foo.bar", ""})
	s.Insert("foo.*", "q", &sub{2, "foo.*", "q"})
	s.Insert(">", "", &sub{3, ">", ""})
	c := NewCache(s, 16)
	b := []byte("foo.bar")
	c.Match(b)
	if n := testing.AllocsPerRun(1000, func() { c.Match(b) }); n != 0 {
		t.Fatalf("cache hit allocs = %v", n)
	}
}

// ---- concurrency (meaningful under -race) ----

func TestConcurrent(t *testing.T) {
	s := New[*sub]()
	const writers, readers = 4, 3
	iters := 400
	if testing.Short() {
		iters = 100
	}
	var mu sync.Mutex
	final := map[*sub]struct{}{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			var live []*sub
			for i := range iters {
				if len(live) == 0 || r.IntN(3) > 0 {
					// Distinct first token per writer keeps the writers on
					// different shards (mostly); the wildcard ones share.
					subj := fmt.Sprintf("w%d.%s", w, randSubject(r, true))
					if r.IntN(8) == 0 {
						subj = randSubject(r, true)
						if !strings.HasPrefix(subj, "*") && !strings.HasPrefix(subj, ">") {
							subj = "*." + subj
						}
					}
					q := ""
					if r.IntN(4) == 0 {
						q = "g"
					}
					x := &sub{w*1_000_000 + i, subj, q}
					if err := s.Insert(x.subject, q, x); err != nil {
						t.Error(err)
						return
					}
					live = append(live, x)
				} else {
					j := r.IntN(len(live))
					x := live[j]
					live = slices.Delete(live, j, j+1)
					if err := s.Remove(x.subject, x.queue, x); err != nil {
						t.Error(err)
						return
					}
				}
			}
			mu.Lock()
			for _, x := range live {
				final[x] = struct{}{}
			}
			mu.Unlock()
		})
	}
	var pubs []string
	r := rand.New(rand.NewPCG(99, 99))
	for i := range 40 {
		pubs = append(pubs, fmt.Sprintf("w%d.%s", i%writers, randSubject(r, false)))
	}
	caches := make([]*Cache[*sub], readers)
	var rwg sync.WaitGroup
	for i := range readers {
		caches[i] = NewCache(s, 16)
		c := caches[i]
		rwg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				res := c.Match([]byte(pubs[k%len(pubs)]))
				// Touch the result the way a reactor would.
				for _, x := range res.Plain {
					_ = x.id
				}
				for _, g := range res.Queues {
					_ = g[k%len(g)].id
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	if s.Count() != len(final) {
		t.Fatalf("Count %d want %d", s.Count(), len(final))
	}
	for _, p := range pubs {
		want := bruteResult(final, p)
		if got := canonResult(s.Match([]byte(p))); !sameCanon(got, want) {
			t.Fatalf("Match(%q) = %+v want %+v", p, got, want)
		}
		for _, c := range caches {
			if got := canonResult(c.Match([]byte(p))); !sameCanon(got, want) {
				t.Fatalf("Cache.Match(%q) = %+v want %+v", p, got, want)
			}
		}
	}
}

// Large member sets switch to an index and shrink back; exercise both ways.
func TestManySubscribersOneSubject(t *testing.T) {
	s := New[*sub]()
	set := map[*sub]struct{}{}
	var all []*sub
	for i := range 300 {
		q := ""
		if i%3 == 0 {
			q = "workers"
		}
		x := &sub{i, "fan.out", q}
		if err := s.Insert(x.subject, q, x); err != nil {
			t.Fatal(err)
		}
		if err := s.Insert(x.subject, q, x); err != nil { // duplicate: no-op
			t.Fatal(err)
		}
		set[x] = struct{}{}
		all = append(all, x)
	}
	check := func() {
		t.Helper()
		if s.Count() != len(set) {
			t.Fatalf("Count %d want %d", s.Count(), len(set))
		}
		if got, want := canonResult(s.Match([]byte("fan.out"))), bruteResult(set, "fan.out"); !sameCanon(got, want) {
			t.Fatalf("got %+v want %+v", got, want)
		}
	}
	check()
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for i, x := range all {
		if err := s.Remove(x.subject, x.queue, x); err != nil {
			t.Fatal(err)
		}
		delete(set, x)
		if i%37 == 0 || len(set) < 20 {
			check()
		}
	}
	check()
}

// Unique subjects (request/reply inboxes) must not churn the cache: a subject is cached on
// its second miss, so a stream of one-off subjects leaves hot entries alone.
func TestCacheAdmitsOnSecondMiss(t *testing.T) {
	s := New[*int]()
	v := new(int)
	if err := s.Insert("_INBOX.x.*", "", v); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert("hot", "", v); err != nil {
		t.Fatal(err)
	}
	c := NewCache(s, 1024)
	c.Match([]byte("hot"))
	c.Match([]byte("hot"))
	if c.Len() != 1 {
		t.Fatalf("hot subject not cached after two misses (len %d)", c.Len())
	}
	for i := 0; i < 10000; i++ {
		if r := c.Match([]byte("_INBOX.x." + strconv.Itoa(i))); len(r.Plain) != 1 {
			t.Fatalf("reply %d: %d matches", i, len(r.Plain))
		}
	}
	// A Bloom filter admits a few by mistake (about 0.4%); without it all 10000 would go in.
	if c.Len() > 150 {
		t.Fatalf("one-off subjects were cached: len %d", c.Len())
	}
	if _, ok := c.m["hot"]; !ok {
		t.Fatal("hot subject evicted by one-off subjects")
	}
}

func TestCacheStats(t *testing.T) {
	s := New[int]()
	for i, sq := range [][2]string{{"a.b", ""}, {"a.*", ""}, {"a.b", "q1"}, {"a.b", "q1"}, {"a.>", "q2"}, {"c", ""}} {
		if err := s.Insert(sq[0], sq[1], i); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCache(s, 16)
	for _, subj := range []string{"a.b", "a.b", "a.b", "a.b", "c", "c", "x"} {
		c.Match([]byte(subj))
	}
	// a.b: missed twice (cached on the second), then 2 hits; fanout 2 plain + 2 groups.
	// c: missed twice, cached, fanout 1. x: missed once, not cached.
	want := CacheStats{Len: 2, Lookups: 7, Hits: 2, MaxFanout: 4, TotFanout: 5}
	if got := c.Stats(); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	// A stale entry is revalidated, not counted as a hit.
	if err := s.Insert("a.b", "", 99); err != nil {
		t.Fatal(err)
	}
	c.Match([]byte("a.b"))
	if got := c.Stats(); got.Hits != 2 || got.Lookups != 8 || got.MaxFanout != 5 {
		t.Fatalf("after insert %+v", got)
	}
}
