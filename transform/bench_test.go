package transform

import (
	"math/rand/v2"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

var benchCases = []struct{ name, src, dest, subject string }{
	{"literal", "orders.new", "audit.orders.new", "orders.new"},
	{"wildcard", "orders.*.*", "o.$2.{{wildcard(1)}}", "orders.eu.12345"},
	{"fwc", "orders.*.>", "o.$1.>", "orders.eu.12345.line.7"},
	{"partition", "orders.*.*", "o.{{partition(16,1,2)}}.$1.$2", "orders.eu.12345"},
	{"partition-all", "orders.*.*", "o.{{partition(16)}}", "orders.eu.12345"},
	{"split", "orders.*", "o.{{split(1,-)}}", "orders.eu-west-1"},
	{"slice", "orders.*", "o.{{sliceFromLeft(1,3)}}", "orders.1234567890"},
}

// BenchmarkApply is Append, the per-message form: the subject is known to
// match (the caller found the mapping), the result goes into a reused buffer.
func BenchmarkApply(b *testing.B) {
	for _, c := range benchCases {
		tr, err := New(c.src, c.dest)
		if err != nil {
			b.Fatal(err)
		}
		subj := []byte(c.subject)
		dst := make([]byte, 0, 128)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				dst = tr.Append(dst[:0], subj)
			}
		})
	}
}

// BenchmarkApplyMatch is AppendMatch: validity and match checked as well.
func BenchmarkApplyMatch(b *testing.B) {
	for _, c := range benchCases {
		tr, _ := New(c.src, c.dest)
		subj := []byte(c.subject)
		dst := make([]byte, 0, 128)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = tr.AppendMatch(dst[:0], subj)
			}
		})
	}
}

// BenchmarkApplyWeighted picks one of three weighted destinations, then
// applies it.
func BenchmarkApplyWeighted(b *testing.B) {
	m, err := NewMapping("orders.*", Dest{Subject: "a.$1", Weight: 50}, Dest{Subject: "b.$1", Weight: 30})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	subj := []byte("orders.12345")
	dst := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		if tr := m.Select("", r); tr != nil {
			dst = tr.Append(dst[:0], subj)
		}
	}
}

// BenchmarkApplyNatsServer is nats-server's own TransformSubject on the same
// cases, for scale.
func BenchmarkApplyNatsServer(b *testing.B) {
	for _, c := range benchCases {
		tr, err := server.NewSubjectTransform(c.src, c.dest)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = tr.TransformSubject(c.subject)
			}
		})
	}
}
