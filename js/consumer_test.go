package js

import (
	"strconv"
	"testing"
)

func TestParseAckSubject(t *testing.T) {
	for _, tc := range []struct {
		subj           string
		dc, sseq, dseq uint64
		ok             bool
	}{
		{"$JS.ACK.S.C.1.2.3.1795936166149119648.4", 1, 2, 3, true},
		{"$JS.ACK.dom.ACCHASH1.S.C.5.6.7.1795936166149119648.0", 5, 6, 7, true},
		{"$JS.ACK.dom.ACCHASH1.S.C.5.6.7.1795936166149119648.0.x.y", 5, 6, 7, true},
		{"$JS.ACK.S.C.x.2.3.4.5", 0, 0, 0, false},
		{"$JS.ACK.S.C.1.2.3.4", 0, 0, 0, false},
		{"$JS.ACK.S.C.1.2.3.4.5.6", 0, 0, 0, false},
		{"", 0, 0, 0, false},
		{"$JS.ACK.S.C.01.2.3.4.5", 1, 2, 3, true},
		{"$JS.ACK.S.C.1..3.4.5", 0, 0, 0, false},
		{"$JS.ACK.S.C.+1.2.3.4.5", 0, 0, 0, false},
		{"$JS.ACK.S.C.1.2.-3.4.5", 0, 0, 0, false},
		{"$JS.ACK.S.C.1.9999999999999999999.18446744073709551615.4.5", 1, 9999999999999999999, 18446744073709551615, true},
		{"$JS.ACK.S.C.1.2.18446744073709551616.4.5", 0, 0, 0, false},
		{"$JS.ACK.S.C.1.2.000000000000000000003.4.5", 1, 2, 3, true},
		{"$JS.ACK.a.b.c.d.1.2.3.4.5.6.7.8.9.10", 1, 2, 3, true},     // 16 tokens: the most taken
		{"$JS.ACK.a.b.c.d.1.2.3.4.5.6.7.8.9.10.11", 0, 0, 0, false}, // 17
	} {
		dc, sseq, dseq, ok := parseAckSubject(tc.subj)
		if ok != tc.ok || dc != tc.dc || sseq != tc.sseq || dseq != tc.dseq {
			t.Errorf("%q: got %d %d %d %v", tc.subj, dc, sseq, dseq, ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { parseAckSubject("$JS.ACK.S.C.1.2.3.1795936166149119648.4") }); n != 0 {
		t.Errorf("%v allocs", n)
	}
}

// Against strconv over tokens a client could send: the fast path must agree with it.
func TestAckNumMatchesStrconv(t *testing.T) {
	for _, s := range []string{"", "0", "7", "42", "0042", "+1", "-1", "1a", "a1", " 1", "1_0", "0x10",
		"9999999999999999999", "18446744073709551615", "18446744073709551616", "99999999999999999999",
		"00000000000000000001", "123456789012345678901"} {
		want, err := strconv.ParseUint(s, 10, 64)
		got, ok := ackNum(s)
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("%q: ackNum %d %v, strconv %d %v", s, got, ok, want, err)
		}
	}
}

func BenchmarkParseAckSubject(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, _, ok := parseAckSubject("$JS.ACK.benchstream.nats-bench.1.123456.123456.1795936166149119648.500"); !ok {
			b.Fatal("not parsed")
		}
	}
}
