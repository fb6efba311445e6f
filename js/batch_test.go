package js

import (
	"strconv"
	"testing"

	"github.com/natsd/natsd/filestore"
)

// TestRollBackPartialBatch: after a crash, a stream whose last messages are the start of an
// atomic batch (no commit) loses them; a message a schedule fired with a batch member's
// headers is not taken for one.
func TestRollBackPartialBatch(t *testing.T) {
	type m struct {
		subj string
		hdrs []string // key, value pairs
	}
	batch := func(id string, seq int, extra ...string) []string {
		return append([]string{hdrBatchID, id, hdrBatchSeq, strconv.Itoa(seq)}, extra...)
	}
	commit := func(id string, seq int) []string { return batch(id, seq, hdrBatchCommit, "1") }
	fired := func(id string, seq int, next string) []string {
		return batch(id, seq, hdrScheduler, "sched.a", hdrScheduleNext, next)
	}
	for _, tc := range []struct {
		name     string
		msgs     []m
		keep     uint64 // last sequence left
		removeFn func(st *filestore.MemStore)
	}{
		{"plain", []m{{"a", nil}, {"a", nil}}, 2, nil},
		{"committed", []m{{"a", nil}, {"b", batch("X", 1)}, {"b", commit("X", 2)}}, 3, nil},
		{"open batch", []m{{"a", nil}, {"b", batch("X", 1)}, {"b", batch("X", 2)}}, 1, nil},
		{"open batch of one", []m{{"a", nil}, {"b", batch("X", 1)}}, 1, nil},
		{"open batch, a member gone", []m{{"a", nil}, {"b", batch("X", 1)}, {"b", batch("X", 2)}, {"b", batch("X", 3)}}, 1,
			func(st *filestore.MemStore) { _, _ = st.RemoveMsg(3) }},
		{"fired copy of a member", []m{{"b", batch("X", 1)}, {"sched.a", batch("X", 2, hdrSchedule, "@every 1s")},
			{"b", commit("X", 3)}, {"t", fired("X", 2, "2030-01-01T00:00:00Z")}}, 4, nil},
		{"fired one-off copy of a member", []m{{"b", batch("X", 1)}, {"sched.a", batch("X", 2, hdrSchedule, "@at 2030-01-01T00:00:00Z")},
			{"b", commit("X", 3)}, {"t", fired("X", 2, "purge")}}, 4, nil},
		{"fired one-off copy of a first member", []m{{"sched.a", batch("X", 1, hdrSchedule, "@at 2030-01-01T00:00:00Z")},
			{"b", commit("X", 2)}, {"t", fired("X", 1, "purge")}}, 3, nil},
		{"another batch before", []m{{"b", batch("Y", 1)}, {"b", batch("X", 2)}}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := filestore.NewMemStore(filestore.Limits{})
			for _, msg := range tc.msgs {
				var hdr []byte
				for i := 0; i+1 < len(msg.hdrs); i += 2 {
					hdr = appendHeader(hdr, msg.hdrs[i], msg.hdrs[i+1])
				}
				if _, _, err := st.StoreMsg(msg.subj, hdr, []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			if tc.removeFn != nil {
				tc.removeFn(st)
			}
			s := &stream{store: st, name: "S", a: &account{name: "A", js: &JetStream{cfg: Config{Logf: func(string, string, ...any) {}}}}}
			s.rollBackPartialBatch()
			if got := st.FastState().LastSeq; got != tc.keep {
				t.Errorf("last sequence %d, want %d", got, tc.keep)
			}
		})
	}
}
