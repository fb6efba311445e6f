package transform

import "testing"

// FuzzTransform compares natsd's transform with nats-server's on whatever
// the fuzzer makes: `go test -fuzz FuzzTransform ./transform/`.
func FuzzTransform(f *testing.F) {
	seeds := [][3]string{
		{"foo.*.bar.*.baz", "req.$2.$1", "foo.A.bar.B.baz"},
		{"*", "{{split(1,-)}}", "--a--b-"},
		{"*", "{{split(1,)}}", "aé\xffb"},
		{"*.*", "{{partition(10,1,2)}}", "a.b"},
		{"foo.bar", "baz.{{partition(10)}}", "foo.bar"},
		{"*", "{{SliceFromRight(1,3)}}", "1234567890"},
		{"*", "{{sliceFromLeft(1,3)}}.{{SplitFromLeft(1,2)}}", "1234567"},
		{"a.>", "b.{{wildcard(1)}}.>", "a.x.y"},
		{"a.*.>", "b.{{ Wildcard ( 1 ) }}.>", "a.x.y"},
		{"*", "{{random(3)}}{{wildcard(1)}}", "x"},
		{"*", "{{left(1,2)}}.{{right(1,2)}}", "abcdef"},
		{"", "p.>", "x.y"},
		{">", ">", "a..b"},
		{"a.*x", "b", "a.q"},
		{"*", "{{partition(-3,1)}}", "q"},
		{"*.*", "$0.$-1.$2", "a.b"},
	}
	for i, s := range seeds {
		f.Add(s[0], s[1], s[2], i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, src, dest, subject string, strict bool) {
		if d := check(src, dest, subject, strict); d != "" {
			t.Fatalf("src %q dest %q subject %q strict %v: %s", src, dest, subject, strict, d)
		}
		if tr, err := New(src, dest); err == nil && tr != nil {
			// Never panics on a subject it does not match.
			tr.Apply(subject)
			if r := tr.Reverse(); r != nil {
				r.Apply(subject)
			}
		}
	})
}
