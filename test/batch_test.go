package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// bmsg is one message of a batch scenario: its subject, Nats-Batch-* headers (seq 0: none)
// and extra headers.
type bmsg struct {
	subj, id string
	seq      int
	commit   string
	hdr      map[string]string
	noReply  bool
}

// sendBatch publishes msgs as requests and returns every reply as observed: "" for an empty
// one, the decoded JSON otherwise.
func sendBatch(t *testing.T, nc *nats.Conn, msgs []bmsg) []any {
	t.Helper()
	var out []any
	for _, b := range msgs {
		m := nats.NewMsg(b.subj)
		m.Data = []byte("data-" + strconv.Itoa(b.seq))
		if b.id != "" {
			m.Header.Set("Nats-Batch-Id", b.id)
		}
		if b.seq > 0 {
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(b.seq))
		}
		if b.commit != "" {
			m.Header.Set("Nats-Batch-Commit", b.commit)
		}
		for k, v := range b.hdr {
			m.Header.Set(k, v)
		}
		if b.noReply {
			if err := nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			continue
		}
		r, err := nc.RequestMsg(m, jsAPITimeout)
		if err != nil {
			t.Fatalf("batch %s seq %d: %v", b.id, b.seq, err)
		}
		out = append(out, replyObs(t, r.Data))
	}
	return out
}

func replyObs(t *testing.T, data []byte) any {
	t.Helper()
	if len(data) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("reply %q: %v", data, err)
	}
	return v
}

func batchOf(subj, id string, n int, commit string) []bmsg {
	var out []bmsg
	for i := 1; i <= n; i++ {
		m := bmsg{subj: subj, id: id, seq: i}
		if i == n {
			m.commit = commit
		}
		out = append(out, m)
	}
	return out
}

func TestAtomicBatch(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		s := mustStream(t, js, jetstream.StreamConfig{Name: "ATOM", Subjects: []string{"atom.>"}, AllowAtomicPublish: true, AllowRollup: true})
		mustStream(t, js, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}})
		obs := map[string]any{}
		obs["commit"] = sendBatch(t, nc, batchOf("atom.a", "b1", 3, "1"))
		obs["plain_after"] = mustPublish(t, js, "atom.p", "x")
		// A plain publish between a batch's messages is stored before the batch.
		mixed := sendBatch(t, nc, []bmsg{{subj: "atom.a", id: "b2", seq: 1}})
		obs["mixed_plain"] = mustPublish(t, js, "atom.p", "y")
		obs["mixed"] = append(mixed, sendBatch(t, nc, []bmsg{{subj: "atom.b", id: "b2", seq: 2, commit: "1"}})...)
		obs["eob"] = sendBatch(t, nc, []bmsg{{subj: "atom.a", id: "e", seq: 1}, {subj: "atom.a", id: "e", seq: 2}, {subj: "atom.a", id: "e", seq: 3, commit: "eob"}})
		// The same id serves again once its batch is committed.
		obs["reuse"] = sendBatch(t, nc, batchOf("atom.c", "b1", 2, "1"))
		obs["with_msg_ids"] = sendBatch(t, nc, []bmsg{{subj: "atom.d", id: "m", seq: 1, hdr: map[string]string{"Nats-Msg-Id": "m1"}}, {subj: "atom.d", id: "m", seq: 2, commit: "1", hdr: map[string]string{"Nats-Msg-Id": "m2"}}})
		obs["dup_after_batch"] = mustPublish(t, js, "atom.d", "z", jetstream.WithMsgID("m1"))
		before := streamInfo(t, s).State
		// Left uncommitted: nothing of it is seen.
		obs["uncommitted"] = sendBatch(t, nc, batchOf("atom.u", "open", 3, ""))

		long := strings.Repeat("x", 65)
		cases := []struct {
			name string
			msgs []bmsg
		}{
			{"disabled", []bmsg{{subj: "plain.a", id: "d", seq: 1, commit: "1"}}},
			{"missing_seq", []bmsg{{subj: "atom.a", id: "ms"}}},
			{"bad_seq", []bmsg{{subj: "atom.a", id: "bs", hdr: map[string]string{"Nats-Batch-Sequence": "x"}}}},
			{"id_too_long", []bmsg{{subj: "atom.a", id: long, seq: 1}}},
			{"unknown_start", []bmsg{{subj: "atom.a", id: "u", seq: 2}}},
			{"unknown_too_large", []bmsg{{subj: "atom.a", id: "u", seq: 1001, commit: "1"}}},
			{"gap", []bmsg{{subj: "atom.a", id: "g", seq: 1}, {subj: "atom.a", id: "g", seq: 3, commit: "1"}}},
			{"gap_then_more", []bmsg{{subj: "atom.a", id: "g2", seq: 1}, {subj: "atom.a", id: "g2", seq: 1}, {subj: "atom.a", id: "g2", seq: 2, commit: "1"}}},
			{"invalid_commit", []bmsg{{subj: "atom.a", id: "c", seq: 1}, {subj: "atom.a", id: "c", seq: 2, commit: "yes"}}},
			{"eob_first", []bmsg{{subj: "atom.a", id: "eob1", seq: 1, commit: "eob"}}},
			{"unsupported_header", []bmsg{{subj: "atom.a", id: "h", seq: 1, hdr: map[string]string{"Nats-Expected-Last-Msg-Id": "m2"}}, {subj: "atom.a", id: "h", seq: 2, commit: "1"}}},
			{"dup_in_batch", []bmsg{{subj: "atom.a", id: "dd", seq: 1, hdr: map[string]string{"Nats-Msg-Id": "same"}}, {subj: "atom.a", id: "dd", seq: 2, commit: "1", hdr: map[string]string{"Nats-Msg-Id": "same"}}}},
			{"dup_stored", []bmsg{{subj: "atom.a", id: "ds", seq: 1, commit: "1", hdr: map[string]string{"Nats-Msg-Id": "m1"}}}},
			{"expected_seq_later", []bmsg{{subj: "atom.a", id: "es", seq: 1}, {subj: "atom.a", id: "es", seq: 2, commit: "1", hdr: map[string]string{"Nats-Expected-Last-Sequence": "1"}}}},
			{"expected_seq_wrong", []bmsg{{subj: "atom.a", id: "ew", seq: 1, commit: "1", hdr: map[string]string{"Nats-Expected-Last-Sequence": "1"}}}},
			{"expected_subj_seq_twice", []bmsg{{subj: "atom.q", id: "eq", seq: 1}, {subj: "atom.q", id: "eq", seq: 2, commit: "1", hdr: map[string]string{"Nats-Expected-Last-Subject-Sequence": "0"}}}},
			{"rollup_all_later", []bmsg{{subj: "atom.r", id: "ra", seq: 1}, {subj: "atom.r", id: "ra", seq: 2, commit: "1", hdr: map[string]string{"Nats-Rollup": "all"}}}},
			{"ttl_disabled", []bmsg{{subj: "atom.a", id: "tt", seq: 1, commit: "1", hdr: map[string]string{"Nats-TTL": "5s"}}}},
			{"wrong_stream", []bmsg{{subj: "atom.a", id: "ws", seq: 1, commit: "1", hdr: map[string]string{"Nats-Expected-Stream": "OTHER"}}}},
		}
		errs := map[string]any{}
		for _, c := range cases {
			errs[c.name] = sendBatch(t, nc, c.msgs)
		}
		obs["errors"] = errs
		// Too large: the 1001st message abandons the batch.
		big := batchOf("atom.big", "big", 1001, "1")
		for i := range big[:1000] {
			big[i].noReply = true
		}
		obs["too_large"] = sendBatch(t, nc, big)
		obs["too_large_next"] = sendBatch(t, nc, []bmsg{{subj: "atom.big", id: "big", seq: 1002, commit: "1"}})
		after := streamInfo(t, s, jetstream.WithSubjectFilter(">")).State
		if after.Msgs != before.Msgs || after.LastSeq != before.LastSeq {
			t.Errorf("failed and open batches changed the stream: %+v then %+v", before, after)
		}
		obs["state"] = stateObs(after)
		var stored []any
		for seq := uint64(1); seq <= after.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			stored = append(stored, msgObs(m, err))
		}
		obs["stored"] = stored
		return obs
	})
}

// TestAtomicBatchRestart: a committed batch is there after a restart, with its headers.
func TestAtomicBatchRestart(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		nc, js := jsConnect(t, u)
		mustStream(t, js, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.>"}, AllowAtomicPublish: true})
		acks := sendBatch(t, nc, batchOf("r.a", "rb", 4, "1"))
		open := sendBatch(t, nc, batchOf("r.b", "open", 2, ""))
		nc.Close()
		stop()
		u2 := tg.run(t, fixedPort(t, cfg, u))
		nc, js = jsConnect(t, u2)
		s, err := js.Stream(context.Background(), "R")
		if err != nil {
			t.Fatal(err)
		}
		st := streamInfo(t, s).State
		wantState(t, st, 4, 1, 4)
		var stored []any
		for seq := uint64(1); seq <= 4; seq++ {
			stored = append(stored, msgObs(s.GetMsg(context.Background(), seq)))
		}
		// The open batch did not survive: its next message finds no batch.
		next := sendBatch(t, nc, []bmsg{{subj: "r.b", id: "open", seq: 3, commit: "1"}})
		return map[string]any{"acks": acks, "open": open, "state": stateObs(st), "stored": stored, "next": next}
	})
}

// TestAtomicBatchAbandoned: a batch left open past nats-server's 10s timeout is dropped,
// with the BATCH_ABANDONED advisory.
func TestAtomicBatchAbandoned(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		mustStream(t, js, jetstream.StreamConfig{Name: "AB", Subjects: []string{"ab.>"}, AllowAtomicPublish: true})
		sub, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.>")
		if err != nil {
			t.Fatal(err)
		}
		first := sendBatch(t, nc, []bmsg{{subj: "ab.a", id: "late", seq: 1}})
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("no advisory: %v", err)
		}
		var adv map[string]any
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			t.Fatal(err)
		}
		delete(adv, "id")
		delete(adv, "timestamp")
		next := sendBatch(t, nc, []bmsg{{subj: "ab.a", id: "late", seq: 2, commit: "1"}})
		return map[string]any{"first": first, "subject": m.Subject, "advisory": adv, "next": next}
	})
}

// fastSend publishes msgs of a fast batch with nats-server's reply pattern and collects what
// comes back on the inbox until want replies arrived.
type fastMsg struct {
	subj string
	seq  int
	op   int
	hdr  map[string]string
}

func fastBatch(t *testing.T, nc *nats.Conn, id string, flow int, gap string, msgs []fastMsg, want int) []any {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for _, f := range msgs {
		m := nats.NewMsg(f.subj)
		m.Data = []byte("fast-" + strconv.Itoa(f.seq))
		for k, v := range f.hdr {
			m.Header.Set(k, v)
		}
		m.Reply = fmt.Sprintf("%s.%s.%d.%s.%d.%d.$FI", inbox, id, flow, gap, f.seq, f.op)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	var out []any
	for len(out) < want {
		r, err := sub.NextMsg(jsAPITimeout)
		if err != nil {
			t.Fatalf("fast batch %s: %d replies of %d: %v (%v)", id, len(out), want, err, out)
		}
		out = append(out, replyObs(t, r.Data))
	}
	return out
}

func fastRun(subj string, n, commitOp int) []fastMsg {
	var out []fastMsg
	for i := 1; i <= n; i++ {
		op := 1
		if i == 1 {
			op = 0
		}
		if i == n {
			op = commitOp
		}
		out = append(out, fastMsg{subj: subj, seq: i, op: op})
	}
	return out
}

func TestFastBatch(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "FAST", Subjects: []string{"fast.>"}, AllowBatchPublish: true})
		mustStream(t, js, jetstream.StreamConfig{Name: "SLOW", Subjects: []string{"slow.>"}})
		obs := map[string]any{}
		obs["commit"] = fastBatch(t, nc, "f1", 2, "fail", fastRun("fast.a", 6, 2), 4)
		obs["plain"] = mustPublish(t, js, "fast.p", "x")
		obs["eob"] = fastBatch(t, nc, "f2", 10, "fail", append(fastRun("fast.b", 3, 1), fastMsg{subj: "fast.b", seq: 4, op: 3}), 2)
		obs["single_commit"] = fastBatch(t, nc, "f3", 10, "fail", []fastMsg{{subj: "fast.c", seq: 1, op: 2}}, 1)
		obs["gap_fail"] = fastBatch(t, nc, "f4", 10, "fail", []fastMsg{{subj: "fast.d", seq: 1, op: 0}, {subj: "fast.d", seq: 3, op: 2}}, 3)
		obs["gap_ok"] = fastBatch(t, nc, "f5", 10, "ok", []fastMsg{{subj: "fast.d", seq: 1, op: 0}, {subj: "fast.d", seq: 3, op: 1}, {subj: "fast.d", seq: 4, op: 2}}, 3)
		obs["error_first"] = fastBatch(t, nc, "f6", 10, "fail", []fastMsg{{subj: "fast.e", seq: 1, op: 0, hdr: map[string]string{"Nats-Expected-Stream": "NOPE"}}}, 1)
		obs["error_later"] = fastBatch(t, nc, "f7", 10, "fail", []fastMsg{{subj: "fast.e", seq: 1, op: 0}, {subj: "fast.e", seq: 2, op: 2, hdr: map[string]string{"Nats-Expected-Stream": "NOPE"}}}, 3)
		obs["disabled"] = fastBatch(t, nc, "f8", 10, "fail", []fastMsg{{subj: "slow.a", seq: 1, op: 0}}, 1)
		obs["unknown"] = fastBatch(t, nc, "f9", 10, "fail", []fastMsg{{subj: "fast.a", seq: 2, op: 1}}, 1)
		obs["bad_pattern"] = fastBatch(t, nc, "f10", 10, "maybe", []fastMsg{{subj: "fast.a", seq: 1, op: 0}}, 1)
		obs["id_too_long"] = fastBatch(t, nc, strings.Repeat("i", 65), 10, "fail", []fastMsg{{subj: "fast.a", seq: 1, op: 0}}, 1)
		obs["ping"] = fastBatch(t, nc, "f11", 10, "fail", []fastMsg{{subj: "fast.f", seq: 1, op: 0}, {subj: "fast.f", seq: 1, op: 4}, {subj: "fast.f", seq: 2, op: 2}}, 3)
		st := streamInfo(t, s).State
		obs["state"] = stateObs(st)
		return obs
	})
}

// TestNatsBenchBatch runs `nats bench js pub batch` (atomic batches) and `... fast` against
// natsd and checks what the stream holds.
func TestNatsBenchBatch(t *testing.T) {
	if os.Getenv("NATS_CLI") == "" {
		t.Skip("NATS_CLI is not set")
	}
	for _, kind := range []string{"batch", "fast"} {
		t.Run(kind, func(t *testing.T) {
			u := startNatsdTarget(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Getenv("NATS_CLI"), "--server", u, "bench", "js", "pub", kind, "bench.x",
				"--msgs", "2500", "--batch", "100", "--stream", "BENCH", "--create", "--no-progress", "--size", "64")
			cmd.Env = append(os.Environ(), "NATS_CONTEXT=", "HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("nats bench: %v\n%s", err, out)
			}
			_, js := jsConnect(t, u)
			s, err := js.Stream(context.Background(), "BENCH")
			if err != nil {
				t.Fatal(err)
			}
			if st := streamInfo(t, s).State; st.Msgs != 2500 || st.LastSeq != 2500 {
				t.Fatalf("after bench: %+v\n%s", st, out)
			}
		})
	}
}

func startNatsdTarget(t *testing.T) string {
	for _, tg := range allTargets {
		if tg.name == "natsd" {
			return tg.run(t, Config{JetStream: true})
		}
	}
	t.Fatal("no natsd target")
	return ""
}
