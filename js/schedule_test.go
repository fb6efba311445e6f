package js

import (
	"slices"
	"testing"
	"time"

	"github.com/natsd/natsd/filestore"
)

func hdrOf(kv ...string) []byte {
	var h []byte
	for i := 0; i+1 < len(kv); i += 2 {
		h = appendHeader(h, kv[i], kv[i+1])
	}
	return h
}

// TestScheduleRecover: what a stream has scheduled is rebuilt from its messages, and a
// schedule whose ending message was stored before a crash let its purge happen is purged.
func TestScheduleRecover(t *testing.T) {
	st := filestore.NewMemStore(filestore.Limits{})
	past := "@at 2001-01-01T00:00:00Z"
	for _, m := range []struct {
		subj string
		hdr  []byte
	}{
		{"sched.a", hdrOf(hdrSchedule, past, hdrScheduleTarget, "t.a", hdrRollup, "sub")},        // 1: fired, then cut
		{"t.a", hdrOf(hdrScheduler, "sched.a", hdrScheduleNext, "purge")},                        // 2
		{"sched.b", hdrOf(hdrSchedule, "@every 1h", hdrScheduleTarget, "t.b", hdrRollup, "sub")}, // 3: stays
		{"sched.c", hdrOf(hdrSchedule, "@every 1h", hdrScheduleTarget, "t.c", hdrRollup, "sub")}, // 4
		{"sched.c", nil}, // 5: ends c
		{"sched.d", hdrOf(hdrSchedule, "@every 1h", hdrScheduleTarget, "t.d", hdrRollup, "sub")},                 // 6
		{"x", hdrOf(hdrScheduleNext, "purge", hdrScheduler, "sched.d")},                                          // 7: a client's cancel, then cut
		{"sched.e", hdrOf(hdrSchedule, "@every 1h", hdrScheduleTarget, "t.e", hdrScheduleTimeZone, "Nowhere/X")}, // 8: not valid
		{"t.b", hdrOf(hdrScheduler, "sched.b", hdrScheduleNext, "2030-01-01T00:00:00Z")},                         // 9: b's next time
	} {
		if _, _, err := st.StoreMsg(m.subj, m.hdr, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	s := &stream{store: st, name: "S", a: &account{name: "A", js: &JetStream{cfg: Config{Logf: func(string, string, ...any) {}}}}}
	sc := newScheduler(s)
	s.sch.Store(sc)
	s.recoverTimed()
	sc.stop()
	var subjs []string
	for subj := range sc.bySubj {
		subjs = append(subjs, subj)
	}
	if !slices.Equal(subjs, []string{"sched.b"}) {
		t.Fatalf("scheduled %q, want only sched.b", subjs)
	}
	if e := sc.bySubj["sched.b"]; e.seq != 3 || e.at != time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() {
		t.Errorf("sched.b: seq %d at %s", e.seq, time.Unix(0, e.at).UTC())
	}
	for subj, want := range map[string]uint64{"sched.a": 0, "sched.b": 1, "sched.c": 2, "sched.d": 0, "t.a": 1} {
		if got := st.FilteredState(subj, 0).Msgs; got != want {
			t.Errorf("%s holds %d messages, want %d", subj, got, want)
		}
	}
}
