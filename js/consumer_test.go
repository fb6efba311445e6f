package js

import "testing"

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
