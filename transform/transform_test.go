package transform

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct{ src, dest, subject, want string }{
		// References to source wildcards, both spellings.
		{"foo.*.bar.*.baz", "req.$2.$1", "foo.A.bar.B.baz", "req.B.A"},
		{"foo.*.bar.*.baz", "req.{{wildcard(2)}}.{{wildcard(1)}}", "foo.A.bar.B.baz", "req.B.A"},
		{"foo.*", "x.{{ Wildcard ( 1 ) }}", "foo.a", "x.a"},
		{"*", "foo.bar.$1", "foo", "foo.bar.foo"},
		{"*.*", "$1.$1", "a.b", "a.a"},
		// Numbers nats-server does not range-check read the first token.
		{"a.*", "$0.$-1.$1", "a.b", "a.a.b"},
		{"a.*", "x.{{partition(10,0)}}", "a.b", "x.0"},
		// '>' on both sides; an empty source means '>'.
		{"baz.>", "my.pre.>", "baz.1.2.3", "my.pre.1.2.3"},
		{"a.*.>", "b.$1.>", "a.x.y.z", "b.x.y.z"},
		{"a.>", ">", "a.x.y", "x.y"},
		{"", "prefix.>", "foo", "prefix.foo"},
		{">", ">", "anything..goes", "anything..goes"},
		// Literals, and tokens that only look like references.
		{"foo", "bar", "foo", "bar"},
		{"foo.*", "$JS.$x.$1", "foo.a", "$JS.$x.a"},
		{"foo.*", "{{wildcard(1)}.$1", "foo.a", "{{wildcard(1)}.a"},
		// A source token starting with '*' matches any token (nats-server
		// tests the first byte only) but is no wildcard to refer to.
		{"a.*x", "b", "a.anything", "b"},
		// The cutting functions.
		{"*", "{{splitfromleft(1,3)}}", "12345", "123.45"},
		{"*", "{{SplitFromRight(1,3)}}", "12345", "12.345"},
		{"*", "{{SplitFromLeft(1,5)}}", "12345", "12345"},
		{"*", "{{SliceFromLeft(1,3)}}", "1234567890", "123.456.789.0"},
		{"*", "{{SliceFromRight(1,3)}}", "1234567890", "1.234.567.890"},
		{"*", "{{SliceFromRight(1,3)}}", "123456", "123.456"},
		{"*", "{{sliceFromLeft(1,0)}}", "123456", "123456"},
		{"*", "{{right(1,3)}}", "1234", "234"},
		{"*", "{{right(1,6)}}", "1234", "1234"},
		{"*", "{{left(1,3)}}", "1234", "123"},
		{"*", "{{left(1,-1)}}", "1234", "1234"},
		// split drops empty pieces, but not quite everywhere.
		{"*", "{{split(1,-)}}", "-abc-def--ghi-", "abc.def.ghi"},
		{"*", "{{split(1,-)}}", "--a", ".a"},
		{"*", "{{split(1,-)}}", "---", ""},
		{"*", "a.{{split(1,-)}}.b", "---", "a..b"},
		{"*", "{{split(1,ab)}}", "xabyabz", "x.y.z"},
		{"*", "{{split(1,)}}", "aé\xffb", "a.é.\xff.b"},
		{"*.*", "{{split(2,-)}}.{{splitfromleft(1,2)}}", "foo.-abc-def--ghij-", "abc.def.ghij.fo.o"},
		// Partitions: FNV-1a of the named tokens, concatenated, or of the
		// whole subject.
		{"*", "bar.{{partition(10)}}", "foo", "bar.3"},
		{"*.*", "bar.{{partition(10)}}", "foo.bar", "bar.6"},
		{"*.*", "bar.{{partition(10,1,2)}}", "foo.bar", "bar.0"},
		{"*", "bar.{{partition(0)}}", "baz", "bar.0"},
		// A negative count wraps to a huge unsigned one, as in nats-server.
		{"*", "bar.{{partition(-3)}}", "baz", "bar.1857515650"},
		{"foo.bar", "baz.{{partition(10)}}", "foo.bar", "baz.6"},
		{"foo.bar", "baz.{{partition(10,1)}}", "foo.bar", "baz.6"},
		{"test.subject", "result.{{partition(5)}}", "test.subject", "result.0"},
		{"*", "bar.{{random(0)}}", "qux", "bar.0"},
		// nats-server finds a call anywhere inside a {{…}} token.
		{"*", "{{x}}{{wildcard(1)}}", "q", "q"},
		{"*", "{{random(7)}}{{wildcard(1)}}", "q", "q"},
	} {
		tr, err := New(c.src, c.dest)
		if err != nil {
			t.Errorf("New(%q, %q): %v", c.src, c.dest, err)
			continue
		}
		got, err := tr.Match(c.subject)
		if err != nil || got != c.want {
			t.Errorf("%q → %q on %q: got %q, %v; want %q", c.src, c.dest, c.subject, got, err, c.want)
		}
		if b := tr.Append([]byte("pre:"), []byte(c.subject)); string(b) != "pre:"+c.want && c.src != ">" {
			t.Errorf("%q → %q: Append gave %q", c.src, c.dest, b)
		}
		ref, _ := server.NewSubjectTransform(c.src, c.dest)
		if want, _ := ref.Match(c.subject); want != c.want {
			t.Errorf("table is wrong: nats-server maps %q to %q with %q → %q", c.subject, want, c.src, c.dest)
		}
	}
}

func TestMatchErrors(t *testing.T) {
	for _, c := range []struct {
		src, dest, subject string
		want               error
	}{
		{"foo.*", "bar.$1", "foo", ErrNoTransforms},
		{"foo.*", "bar.$1", "foo.a.b", ErrNoTransforms},
		{"foo.>", "bar.>", "foo", ErrNoTransforms},
		{"foo", "bar", "fob", ErrNoTransforms},
		{"foo.*", "bar.$1", "foo.*", ErrBadSubject},
		{"foo.*", "bar.$1", "foo..a", ErrBadSubject},
		{"foo.*", "bar.$1", "", ErrBadSubject},
		{"foo.*", "bar.$1", "zzz.>", ErrBadSubject}, // validity is checked first
	} {
		tr, err := New(c.src, c.dest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Match(c.subject); err != c.want {
			t.Errorf("%q on %q: got %v, want %v", c.src, c.subject, err, c.want)
		}
		if _, err := tr.AppendMatch(nil, []byte(c.subject)); err != c.want {
			t.Errorf("%q on %q: AppendMatch got %v, want %v", c.src, c.subject, err, c.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	const (
		oor     = "invalid mapping destination: wildcard index out of range in "
		args    = "invalid mapping destination: function argument is invalid or in the wrong format in "
		few     = "invalid mapping destination: not enough arguments passed to the function in "
		many    = "invalid mapping destination: too many arguments passed to the function in "
		unknown = "invalid mapping destination: unknown function in "
		import_ = "invalid mapping destination: the only mapping function allowed for import transforms is {{Wildcard()}} in "
		unused  = "invalid mapping destination: not using all of the token wildcard(s) in "
	)
	for _, c := range []struct {
		src, dest string
		strict    bool
		want      string
	}{
		{"foo..", "bar", false, "invalid subject"},
		{"foo.*", "bar.*", false, "invalid subject"},
		{"foo.*", "bar.$1.>", false, "invalid subject"},
		{"foo.>", "bar.baz", false, "invalid subject"},
		{"foo.>.bar", "x.>", false, "invalid subject"},
		{"foo.*", "bar.$2", false, oor + "$2: [2]"},
		{"foo.*", "foo.{{wildcard(2)}}", false, oor + "{{wildcard(2)}}: [2]"},
		{"foo.*", "foo.{{partition(3,1,2)}}", false, oor + "{{partition(3,1,2)}}: [2]"},
		{"foo", "bla.{{wildcard(1)}}", false, oor + "{{wildcard(1)}}"},
		{"foo", "bla.$1", false, oor + "$1"},
		{"foo", "bla.{{left(1,1)}}", false, oor + "{{left(1,1)}}"},
		{"foo.*", "foo.{{unimplemented(1)}}", false, unknown + "{{unimplemented(1)}}"},
		{"foo.*", "foo.{{ wildcard5) }}", false, unknown + "{{ wildcard5) }}"},
		{"foo.*", "foo.{{splitLeft(2,2}}", false, unknown + "{{splitLeft(2,2}}"},
		{"foo.*", "foo.{{WILDCARD(1)}}", false, unknown + "{{WILDCARD(1)}}"},
		{"foo.*", "foo.{{wildcard(1\n)}}", false, unknown + "{{wildcard(1\n)}}"}, // arguments never span a newline
		{"foo.*", "foo.{{partition()}}", false, args + "{{partition()}}"},
		{"foo.*", "foo.{{random()}}", false, args + "{{random()}}"},
		{"foo.*", "foo.{{random(1,2)}}", false, few + "{{random(1,2)}}"},
		{"foo.*", "foo.{{wildcard(foo)}}", false, args + "{{wildcard(foo)}}"},
		{"foo.*", "foo.{{wildcard(\t1)}}", false, args + "{{wildcard(\t1)}}"},
		{"foo.*", "foo.{{wildcard()}}", false, few + "{{wildcard()}}"},
		{"foo.*", "foo.{{wildcard(1,2)}}", false, many + "{{wildcard(1,2)}}"},
		{"foo.*", "foo.{{left(1)}}", false, few + "{{left(1)}}"},
		{"foo.*", "foo.{{left(1,2,3)}}", false, many + "{{left(1,2,3)}}"},
		{"foo.*", "foo.{{left(1,2147483648)}}", false, args + "{{left(1,2147483648)}}"},
		{"foo.*", "foo.{{split(1,a b)}}", false, args + "{{split(1,a b)}}"},
		{"foo.*", "foo.{{split(1,- )}}", false, args + "{{split(1,- )}}"},
		{"foo.*", fmt.Sprintf("foo.{{partition(%d)}}", math.MaxInt32+1), false, args + "{{partition(2147483648)}}"},
		{"foo.*", fmt.Sprintf("foo.{{random(%d)}}", math.MaxInt32+1), false, args + "{{random(2147483648)}}"},
		{"foo.*.*", "bar.$2", true, unused + "bar.$2"},
		{"foo.*", "foo.$foo", true, unused + "foo.$foo"},
		{"foo.*", "bar.{{Partition(2,1)}}", true, import_ + "{{Partition(2,1)}}"},
		{"foo.*", "bar.{{random(2)}}.$1", true, import_ + "{{random(2)}}"},
	} {
		var err error
		if c.strict {
			_, err = NewStrict(c.src, c.dest)
		} else {
			_, err = New(c.src, c.dest)
		}
		if errText(err) != c.want {
			t.Errorf("%q → %q strict=%v: got %q, want %q", c.src, c.dest, c.strict, errText(err), c.want)
		}
		var ref error
		if c.strict {
			_, ref = server.NewSubjectTransformStrict(c.src, c.dest)
		} else {
			_, ref = server.NewSubjectTransform(c.src, c.dest)
		}
		if errText(ref) != c.want {
			t.Errorf("table is wrong: nats-server says %q for %q → %q", errText(ref), c.src, c.dest)
		}
		if err != nil && err != ErrBadSubject && !errors.Is(err, ErrInvalidMappingDestination) {
			t.Errorf("%q: not an ErrInvalidMappingDestination", err)
		}
	}

	// The reason is reachable with errors.Is as well as the family.
	_, err := New("foo.*", "foo.{{wildcard(2)}}")
	if !errors.Is(err, ErrMappingDestinationIndexOutOfRange) || !errors.Is(err, ErrInvalidMappingDestination) {
		t.Errorf("errors.Is fails on %v", err)
	}
}

func TestAccepted(t *testing.T) {
	for _, c := range []struct {
		src, dest string
		strict    bool
	}{
		{"foo.*", "bar.{{Wildcard(1)}}", true},
		{"foo.*.*", "bar.$2.$1", true},
		{"foo.*.*", "bar.$1.$1", true}, // nats-server counts references, not wildcards
		{"foo", "bar.{{partition(3)}}", true},
		{"foo.*.*", "bar.$2", false},
		{"foo.*.*", "bar.{{partition(1)}}", false},
		{"foo.*.*", "bar.{{random(5)}}", false},
		{"*", "{{splitfromleft(1,1)}}", false},
		{"*.*", "{{partition(10,1,2)}}", false},
		{"foo.*", fmt.Sprintf("foo.{{partition(%d)}}", math.MaxInt32), false},
		{"foo.bar", fmt.Sprintf("foo.{{random(%d)}}", math.MaxInt32), false},
		{"foo.*", "{{partition(-5000000000)}}", false},
		{"foo.*", "{{split(1,\t)}}", false},
		{"foo.*", "x.{{wildcard(1)\n}}", false}, // but the space around them may hold one
	} {
		c := c
		compile := New
		if c.strict {
			compile = NewStrict
		}
		if _, err := compile(c.src, c.dest); err != nil {
			t.Errorf("%q → %q strict=%v: %v", c.src, c.dest, c.strict, err)
		}
	}
	if tr, err := New("foo", ""); tr != nil || err != nil {
		t.Errorf("empty destination: got %v, %v; want no transform", tr, err)
	}
	if tr, _ := New("", "x.>"); tr.Source() != ">" || tr.Dest() != "x.>" {
		t.Errorf("Source/Dest: %q %q", tr.Source(), tr.Dest())
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct{ src, dest, want string }{
		{"foo", "", "<nil>"},
		{"foo", "bar", "<nil>"},
		{"foo.*", "bar.{{wildcard(1)}}", "<nil>"},
		{"foo", "bar..baz", "invalid mapping destination: invalid transform"},
		{"foo.>", "bar.>.baz", "invalid mapping destination: invalid transform in baz"},
		{"foo", "bar baz", "invalid mapping destination: invalid transform"},
		{"foo.*", "bar.{{nope(1)}}", "invalid mapping destination: unknown function in {{nope(1)}}"},
		// A known name is enough here; New then checks the arguments.
		{"foo.*", "bar.{{ wildcard (x) }}", "invalid mapping destination: function argument is invalid or in the wrong format in {{ wildcard (x) }}"},
		{"foo.*", "bar.*", "invalid subject"},
		{"foo.*", "bar.$2", "invalid mapping destination: wildcard index out of range in $2: [2]"},
	} {
		if got := errText(Validate(c.src, c.dest)); got != c.want {
			t.Errorf("Validate(%q, %q) = %q, want %q", c.src, c.dest, got, c.want)
		}
		if ref := errText(server.ValidateMapping(c.src, c.dest)); ref != c.want {
			t.Errorf("table is wrong: nats-server says %q for %q → %q", ref, c.src, c.dest)
		}
	}
}

func TestTokenizeReverse(t *testing.T) {
	if got := Tokenize("a.*.b.*.>"); got != "a.$1.b.$2.>" {
		t.Errorf("Tokenize: %q", got)
	}
	nsrc, refs := Untokenize("a.$2.{{wildcard(1)}}.$1x.{{wildcard(1,2)}}.$0")
	if nsrc != "a.*.*.*.{{wildcard(1,2)}}.$0" || strings.Join(refs, " ") != "$2 {{wildcard(1)}} $1x" {
		t.Errorf("Untokenize: %q %q", nsrc, refs)
	}
	for _, c := range []struct{ src, dest, subject string }{
		{"foo.*.*", "bar.$2.{{Wildcard(1)}}", "foo.b.a"},
		{"foo.*.>", "bar.$1.>", "foo.a.b.c"},
		{"a.*.b.*", "x.$2.y.$1.z", "a.1.b.2"},
		{"foo", "bar", "foo"},
	} {
		tr, err := NewStrict(c.src, c.dest)
		if err != nil {
			t.Fatal(err)
		}
		r := tr.Reverse()
		if r == nil {
			t.Fatalf("%q → %q: no reverse", c.src, c.dest)
		}
		out, err := tr.Match(c.subject)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := r.Match(out); err != nil || back != c.subject {
			t.Errorf("%q → %q: %q → %q → %q, %v", c.src, c.dest, c.subject, out, back, err)
		}
	}
}

// Append must not allocate for the forms the per-message path uses.
func TestAppendAllocs(t *testing.T) {
	for _, c := range [][3]string{
		{"foo", "bar"},
		{"orders.*.*", "o.$2.{{wildcard(1)}}"},
		{"orders.*.>", "o.$1.>"},
		{"orders.*.*", "o.{{partition(16,1,2)}}.$1.$2"},
		{"orders.*.*", "o.{{partition(16)}}"},
		{"orders.*", "o.{{split(1,-)}}.{{sliceFromLeft(1,2)}}.{{right(1,3)}}"},
	} {
		tr, err := New(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		subj := []byte(strings.NewReplacer("*", "ab-cd", ">", "x.y").Replace(c[0]))
		dst := make([]byte, 0, 256)
		if n := testing.AllocsPerRun(100, func() { dst = tr.Append(dst[:0], subj) }); n != 0 {
			t.Errorf("%q → %q: Append %v allocs", c[0], c[1], n)
		}
		if n := testing.AllocsPerRun(100, func() { dst, _ = tr.AppendMatch(dst[:0], subj) }); n != 0 {
			t.Errorf("%q → %q: AppendMatch %v allocs", c[0], c[1], n)
		}
	}
}

// Append on a subject the source does not match must not panic.
func TestAppendMismatch(t *testing.T) {
	tr, err := New("a.*.*.>", "{{split(2,-)}}.{{left(2,1)}}.{{partition(3,1,2)}}.$1.>")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "a", "a.b", "a.b.c", "...", "a.b.c.d.e"} {
		tr.Append(nil, []byte(s))
	}
	// Sources longer than the inline token buffer still work.
	long := strings.Repeat("*.", 40) + "*"
	tr, err = New(long, "x.$41.$1")
	if err != nil {
		t.Fatal(err)
	}
	subj := strings.Repeat("t.", 40) + "last"
	if got, err := tr.Match(subj); err != nil || got != "x.last.t" {
		t.Errorf("long source: %q %v", got, err)
	}
}
