package test

// Message counters (allow_msg_counter, Nats-Incr), compared with nats-server. nats.go v1.55.0
// has no counter helper and its PubAck has no "val", so increments go through raw requests.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// counterPub publishes to subj with the given headers (Nats-Incr included when incr is not
// "-") and returns the decoded reply.
func counterPub(t *testing.T, nc *nats.Conn, subj, incr, data string, hdr ...string) map[string]any {
	t.Helper()
	m := nats.NewMsg(subj)
	m.Data = []byte(data)
	if incr != "-" {
		m.Header.Set("Nats-Incr", incr)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := nc.RequestMsg(m, jsAPITimeout)
	if err != nil {
		t.Fatalf("publish %s: %v", subj, err)
	}
	var out map[string]any
	if err := json.Unmarshal(r.Data, &out); err != nil {
		t.Fatalf("publish %s: reply %q: %v", subj, r.Data, err)
	}
	return out
}

// wantVal checks a PubAck's total and sequence.
func wantVal(t *testing.T, ack map[string]any, seq int, val string) {
	t.Helper()
	if ack["error"] != nil || ack["val"] != val || ack["seq"] != float64(seq) {
		t.Fatalf("pub ack %v, want seq %d val %q", ack, seq, val)
	}
}

// counterTotal is the total in subj's last message, read through the msg get API.
func counterTotal(t *testing.T, nc *nats.Conn, stream, subj string) string {
	t.Helper()
	r := rawAPI(t, nc, "$JS.API.STREAM.MSG.GET."+stream, `{"last_by_subj":"`+subj+`"}`)
	m, _ := r["message"].(map[string]any)
	if m == nil {
		t.Fatalf("last %s: %v", subj, r)
	}
	d, _ := base64.StdEncoding.DecodeString(m["data"].(string))
	var v struct {
		Val string `json:"val"`
	}
	if err := json.Unmarshal(d, &v); err != nil {
		t.Fatalf("last %s: body %q: %v", subj, d, err)
	}
	return v.Val
}

// storedObs is a msg get reply's message with its body and headers decoded (nats.go writes
// headers in no fixed order, so they are compared as a map).
func storedObs(t *testing.T, r map[string]any) any {
	t.Helper()
	m, _ := r["message"].(map[string]any)
	if m == nil {
		return r
	}
	d, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m["data"]))
	h, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m["hdrs"]))
	hdr := map[string]string{}
	lines := strings.Split(string(h), "\r\n")
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			hdr[k] = strings.TrimSpace(v)
		}
	}
	return map[string]any{"subject": m["subject"], "seq": m["seq"], "data": string(d), "header": hdr, "status": strings.TrimSpace(lines[0])}
}

func TestJetStreamCounterIncrements(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		s := mustStream(t, js, jetstream.StreamConfig{Name: "CNT", Subjects: []string{"cnt.*"}, AllowMsgCounter: true, AllowDirect: true})
		obs := map[string]any{"config": s.CachedInfo().Config}
		steps := []struct {
			subj, incr, val string
		}{
			{"cnt.a", "+5", "5"},
			{"cnt.a", "-3", "2"},
			{"cnt.a", "0", "2"},
			{"cnt.b", "-7", "-7"},
			{"cnt.a", "99999999999999999999", "100000000000000000001"},
			{"cnt.b", "-9223372036854775808", "-9223372036854775815"},
			{"cnt.a", "-100000000000000000001", "0"},
		}
		for i, st := range steps {
			ack := counterPub(t, nc, st.subj, st.incr, "")
			obs[fmt.Sprintf("ack %d", i+1)] = ack
			wantVal(t, ack, i+1, st.val)
		}
		// The stored message is the total, with the increment kept in its header; a
		// direct get and a msg get return it as stored.
		for seq := 1; seq <= len(steps); seq++ {
			m, err := s.GetMsg(ctx, uint64(seq))
			obs[fmt.Sprintf("direct get %d", seq)] = msgObs(m, err)
			want := fmt.Sprintf(`{"val":"%s"}`, steps[seq-1].val)
			if err != nil || string(m.Data) != want || m.Header.Get("Nats-Incr") != steps[seq-1].incr {
				t.Fatalf("stored message %d: %+v %v, want %s with Nats-Incr %s", seq, m, err, want, steps[seq-1].incr)
			}
			obs[fmt.Sprintf("msg get %d", seq)] = rawAPI(t, nc, "$JS.API.STREAM.MSG.GET.CNT", fmt.Sprintf(`{"seq":%d}`, seq))
		}
		// Nats-Msg-Id dedupes an increment: the duplicate's ack has no total.
		ack := counterPub(t, nc, "cnt.a", "1", "", "Nats-Msg-Id", "once")
		wantVal(t, ack, 8, "1")
		for i, incr := range []string{"1", "-"} {
			dup := counterPub(t, nc, "cnt.a", incr, "", "Nats-Msg-Id", "once")
			obs[fmt.Sprintf("duplicate %d", i)] = dup
			if dup["duplicate"] != true || dup["seq"] != float64(8) || dup["val"] != nil {
				t.Fatalf("duplicate increment: %v", dup)
			}
		}
		if v := counterTotal(t, nc, "CNT", "cnt.a"); v != "1" {
			t.Fatalf("total after duplicate: %s", v)
		}
		// The previous total is the subject's last message: after a delete or a purge the
		// count goes on from what is left.
		if err := s.DeleteMsg(ctx, 8); err != nil {
			t.Fatal(err)
		}
		ack = counterPub(t, nc, "cnt.a", "10", "")
		obs["after delete"] = ack
		wantVal(t, ack, 9, "10")
		if err := s.Purge(ctx, jetstream.WithPurgeSubject("cnt.a")); err != nil {
			t.Fatal(err)
		}
		ack = counterPub(t, nc, "cnt.a", "3", "")
		obs["after purge"] = ack
		wantVal(t, ack, 10, "3")
		ack = counterPub(t, nc, "cnt.b", "7", "")
		obs["other subject kept"] = ack
		wantVal(t, ack, 11, "-9223372036854775808")
		obs["state"] = stateObs(streamInfo(t, s, jetstream.WithSubjectFilter(">")).State)
		return obs
	})
}

func TestJetStreamCounterErrors(t *testing.T) {
	type pub struct {
		name, subj, incr, data string
		hdr                    []string
		errCode                int // 0: accepted
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		mustStream(t, js, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.*"}, AllowMsgTTL: true, AllowRollup: true})
		mustStream(t, js, jetstream.StreamConfig{Name: "CNT", Subjects: []string{"cnt.*"}, AllowMsgCounter: true})
		mustStream(t, js, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small"}, AllowMsgCounter: true, MaxMsgSize: 37})
		// Subject delete markers turn message TTLs on, even for a counter stream.
		mustStream(t, js, jetstream.StreamConfig{Name: "MARK", Subjects: []string{"mark"}, AllowMsgCounter: true, SubjectDeleteMarkerTTL: time.Minute})
		pubs := []pub{
			{name: "disabled", subj: "plain.a", incr: "1", errCode: 10168},
			{name: "disabled with a body", subj: "plain.a", incr: "1", data: "x", errCode: 10168},
			{name: "invalid on a plain stream", subj: "plain.a", incr: "bogus", errCode: 10171},
			{name: "empty increment on a plain stream", subj: "plain.a", incr: "", data: "x"},
			{name: "plain publish", subj: "cnt.a", incr: "-", errCode: 10169},
			{name: "plain publish with headers", subj: "cnt.a", incr: "-", hdr: []string{"Key", "Value"}, errCode: 10169},
			{name: "empty increment", subj: "cnt.a", incr: "", errCode: 10169},
			{name: "payload", subj: "cnt.a", incr: "1", data: "data", errCode: 10170},
			{name: "invalid", subj: "cnt.a", incr: "bogus", errCode: 10171},
			{name: "invalid with payload", subj: "cnt.a", incr: "1.5", data: "x", errCode: 10171},
			{name: "hex", subj: "cnt.a", incr: "0x10", errCode: 10171},
			{name: "trailing space (the client trims it)", subj: "cnt.a", incr: "1 "},
			{name: "rollup", subj: "cnt.a", incr: "1", hdr: []string{"Nats-Rollup", "sub"}, errCode: 10171},
			{name: "expected stream", subj: "cnt.a", incr: "1", hdr: []string{"Nats-Expected-Stream", "CNT"}, errCode: 10171},
			{name: "expected last seq", subj: "cnt.a", incr: "1", hdr: []string{"Nats-Expected-Last-Sequence", "0"}, errCode: 10171},
			{name: "expected last subject seq", subj: "cnt.a", incr: "1", hdr: []string{"Nats-Expected-Last-Subject-Sequence", "0"}, errCode: 10171},
			{name: "expected last subject seq subject", subj: "cnt.a", incr: "1", hdr: []string{"Nats-Expected-Last-Subject-Sequence-Subject", "cnt.a"}, errCode: 10171},
			{name: "expected last msg id", subj: "cnt.a", incr: "1", hdr: []string{"Nats-Expected-Last-Msg-Id", "x"}, errCode: 10171},
			{name: "ttl", subj: "cnt.a", incr: "1", hdr: []string{"Nats-TTL", "10s"}, errCode: 10166},
			{name: "bad ttl", subj: "cnt.a", incr: "1", hdr: []string{"Nats-TTL", "soon"}, errCode: 10165},
			{name: "bad ttl without increment", subj: "cnt.a", incr: "-", hdr: []string{"Nats-TTL", "soon"}, errCode: 10169},
			{name: "rollup without increment", subj: "cnt.a", incr: "-", hdr: []string{"Nats-Rollup", "sub"}, errCode: 10111},
			{name: "stream source header", subj: "cnt.a", incr: "1", hdr: []string{"Nats-Stream-Source", "X"}, errCode: 10227},
			{name: "first", subj: "cnt.a", incr: "1"},
			{name: "zero ttl", subj: "cnt.a", incr: "1", hdr: []string{"Nats-TTL", "0"}, errCode: 10165},
			// A sources header the client writes is stored as it is, and carried on.
			{name: "sources", subj: "cnt.s", incr: "2", hdr: []string{"Nats-Counter-Sources", `{"O":{"x":"5"},"A":{"y":"1"}}`}},
			{name: "after sources", subj: "cnt.s", incr: "3"},
			{name: "sources replaced", subj: "cnt.s", incr: "3", hdr: []string{"Nats-Counter-Sources", `{"B":{}}`}},
			// The previous message's sources win over the client's.
			// One that does not parse breaks the counter.
			{name: "bad sources", subj: "cnt.x", incr: "1", hdr: []string{"Nats-Counter-Sources", "not json"}},
			{name: "broken", subj: "cnt.x", incr: "1", errCode: 10172},
			{name: "broken again", subj: "cnt.x", incr: "1", errCode: 10172},
			{name: "other subject fine", subj: "cnt.y", incr: "1"},
			// max_msg_size counts the total the server writes.
			{name: "fits", subj: "small", incr: "1"},
			{name: "total too large", subj: "small", incr: "10", errCode: 10054},
			{name: "longer increment header", subj: "small", incr: "-1", errCode: 10054},
			{name: "same size fits", subj: "small", incr: "0"},
			{name: "ttl on a marker stream", subj: "mark", incr: "4", hdr: []string{"Nats-TTL", "1h"}},
			{name: "bad ttl on a marker stream", subj: "mark", incr: "4", hdr: []string{"Nats-TTL", "soon"}, errCode: 10165},
		}
		obs := map[string]any{}
		for i, p := range pubs {
			ack := counterPub(t, nc, p.subj, p.incr, p.data, p.hdr...)
			obs[fmt.Sprintf("%02d %s", i, p.name)] = ack
			if got := apiErrCode(ack); got != p.errCode {
				t.Errorf("%s: %v, want err_code %d", p.name, ack, p.errCode)
			}
		}
		for _, subj := range []string{"cnt.a", "cnt.s", "cnt.x", "cnt.y", "small", "mark"} {
			stream := "CNT"
			if subj == "small" || subj == "mark" {
				stream = strings.ToUpper(subj)
			}
			obs["last "+subj] = storedObs(t, rawAPI(t, nc, "$JS.API.STREAM.MSG.GET."+stream, `{"last_by_subj":"`+subj+`"}`))
		}
		last := obs["last cnt.s"].(map[string]any)
		if h := last["header"].(map[string]string); h["Nats-Counter-Sources"] != `{"A":{"y":"1"},"O":{"x":"5"}}` || last["data"] != `{"val":"8"}` {
			t.Errorf("last cnt.s message: %v", last)
		}
		return obs
	})
}

// TestJetStreamCounterMaxPayload: the total the server writes must fit max_payload too.
func TestJetStreamCounterMaxPayload(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{MaxPayload: 1024})
		mustStream(t, js, jetstream.StreamConfig{Name: "CNT", Subjects: []string{"cnt"}, AllowMsgCounter: true})
		big := strings.Repeat("1", 500)
		obs := map[string]any{}
		for i, incr := range []string{"1", big, "-2", "-" + big, "1"} {
			obs[fmt.Sprintf("%d", i)] = counterPub(t, nc, "cnt", incr, "")
		}
		for i, code := range []int{0, 10054, 0, 10054, 0} {
			if got := apiErrCode(obs[fmt.Sprintf("%d", i)].(map[string]any)); got != code {
				t.Errorf("step %d: %v, want err_code %d", i, obs[fmt.Sprintf("%d", i)], code)
			}
		}
		if v := counterTotal(t, nc, "CNT", "cnt"); v != "0" {
			t.Errorf("total %s, want 0", v)
		}
		return obs
	})
}

func TestJetStreamCounterConfig(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		keepAccountDir(t, nc) // the cases below delete and create again the account's only stream
		ctx := context.Background()
		obs := map[string]any{}
		base := jetstream.StreamConfig{Name: "C", Subjects: []string{"c.>"}, AllowMsgCounter: true}
		for _, tc := range []struct {
			name string
			edit func(c *jetstream.StreamConfig)
			desc string
		}{
			{"discard new", func(c *jetstream.StreamConfig) { c.Discard = jetstream.DiscardNew }, "counter stream cannot use discard new"},
			{"ttl", func(c *jetstream.StreamConfig) { c.AllowMsgTTL = true }, "counter stream cannot use message TTLs"},
			{"ttl and discard new", func(c *jetstream.StreamConfig) { c.AllowMsgTTL, c.Discard = true, jetstream.DiscardNew }, "counter stream cannot use discard new"},
			{"schedules", func(c *jetstream.StreamConfig) { c.AllowMsgSchedules = true }, "counter stream cannot use message schedules"},
			{"interest", func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }, "counter stream can only use limits retention"},
			{"work queue", func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy }, "counter stream can only use limits retention"},
			// Accepted: the marker turns message TTLs on after the counter checks.
			{"marker ttl", func(c *jetstream.StreamConfig) { c.SubjectDeleteMarkerTTL = time.Minute }, ""},
			{"mirror", func(c *jetstream.StreamConfig) { c.Subjects = nil; c.Mirror = &jetstream.StreamSource{Name: "ORIGIN"} }, "stream mirrors can not also calculate counters"},
		} {
			c := base
			tc.edit(&c)
			st, err := js.CreateStream(ctx, c)
			obs["create "+tc.name] = jsErrObs(err)
			if tc.desc != "" {
				var code jetstream.ErrorCode = 10052
				if tc.name == "mirror" {
					code = 10173
				}
				status := 500
				if code == 10173 {
					status = 400
				}
				wantAPIErr(t, err, status, code, tc.desc)
			} else if err != nil {
				t.Fatalf("create %s: %v", tc.name, err)
			} else {
				obs["created "+tc.name] = st.CachedInfo().Config
				if err := js.DeleteStream(ctx, c.Name); err != nil {
					t.Fatal(err)
				}
			}
		}
		s := mustStream(t, js, base)
		obs["created"] = s.CachedInfo().Config
		plain := mustStream(t, js, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
		up := base
		up.Description = "still counting"
		si, err := js.UpdateStream(ctx, up)
		if err != nil {
			t.Fatalf("update a counter stream: %v", err)
		}
		obs["updated"] = si.CachedInfo().Config
		for name, c := range map[string]jetstream.StreamConfig{
			"disable":             func() jetstream.StreamConfig { c := base; c.AllowMsgCounter = false; return c }(),
			"enable":              func() jetstream.StreamConfig { c := plain.CachedInfo().Config; c.AllowMsgCounter = true; return c }(),
			"ttl on counter":      func() jetstream.StreamConfig { c := base; c.AllowMsgTTL = true; return c }(),
			"discard new":         func() jetstream.StreamConfig { c := base; c.Discard = jetstream.DiscardNew; return c }(),
			"retention on update": func() jetstream.StreamConfig { c := base; c.Retention = jetstream.InterestPolicy; return c }(),
		} {
			_, err := js.UpdateStream(ctx, c)
			obs["update "+name] = jsErrObs(err)
			if err == nil {
				t.Fatalf("update %s: accepted", name)
			}
			if name == "disable" || name == "enable" {
				wantAPIErr(t, err, 500, 10052, "stream configuration update can not change message counter setting")
			}
		}
		return obs
	})
}

// TestJetStreamCounterAsync: increments published without waiting for acks, to two subjects
// at once, each get its own exact running total in its ack and in the end.
func TestJetStreamCounterAsync(t *testing.T) {
	for _, storage := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) {
			jsCompare(t, func(t *testing.T, tg target) any {
				nc, js := jsStart(t, tg, Config{})
				mustStream(t, js, jetstream.StreamConfig{Name: "CNT", Subjects: []string{"cnt.*"}, AllowMsgCounter: true, Storage: storage})
				const n = 1000
				inbox := nats.NewInbox()
				acks := make(chan *nats.Msg, 2*n)
				sub, err := nc.ChanSubscribe(inbox+".*", acks)
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Unsubscribe()
				want := map[string]string{}
				var a, b big.Int
				step := new(big.Int).Lsh(big.NewInt(1), 70) // beyond int64
				for i := 0; i < n; i++ {
					a.Add(&a, big.NewInt(1))
					m := nats.NewMsg("cnt.a")
					m.Reply = fmt.Sprintf("%s.a%d", inbox, i)
					m.Header.Set("Nats-Incr", "1")
					want[m.Reply] = a.String()
					if err := nc.PublishMsg(m); err != nil {
						t.Fatal(err)
					}
					d := new(big.Int).Mul(step, big.NewInt(int64(i%7-3)))
					b.Add(&b, d)
					m = nats.NewMsg("cnt.b")
					m.Reply = fmt.Sprintf("%s.b%d", inbox, i)
					m.Header.Set("Nats-Incr", d.String())
					want[m.Reply] = b.String()
					if err := nc.PublishMsg(m); err != nil {
						t.Fatal(err)
					}
				}
				seqs := map[float64]bool{}
				for got := 0; got < 2*n; got++ {
					var m *nats.Msg
					select {
					case m = <-acks:
					case <-time.After(10 * time.Second):
						t.Fatalf("%d of %d acks", got, 2*n)
					}
					var ack map[string]any
					if err := json.Unmarshal(m.Data, &ack); err != nil || ack["error"] != nil || ack["val"] != want[m.Subject] || seqs[ack["seq"].(float64)] {
						t.Fatalf("ack to %s: %s (%v), want val %s", m.Subject, m.Data, err, want[m.Subject])
					}
					seqs[ack["seq"].(float64)] = true
				}
				totals := map[string]string{"a": counterTotal(t, nc, "CNT", "cnt.a"), "b": counterTotal(t, nc, "CNT", "cnt.b")}
				if totals["a"] != a.String() || totals["b"] != b.String() {
					t.Fatalf("totals %v, want a=%s b=%s", totals, a.String(), b.String())
				}
				return totals
			})
		})
	}
}

func TestJetStreamCounterRestart(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		nc, js := jsConnect(t, u)
		mustStream(t, js, jetstream.StreamConfig{Name: "CNT", Subjects: []string{"cnt.*"}, AllowMsgCounter: true})
		obs := map[string]any{}
		for i := 0; i < 5; i++ {
			counterPub(t, nc, "cnt.a", "1000000000000000000000", "")
		}
		wantVal(t, counterPub(t, nc, "cnt.b", "-4", ""), 6, "-4")
		nc.Close()
		stop()

		u2 := tg.run(t, fixedPort(t, cfg, u))
		nc, _ = jsConnect(t, u2)
		ack := counterPub(t, nc, "cnt.a", "1", "")
		obs["after restart a"] = ack
		wantVal(t, ack, 7, "5000000000000000000001")
		ack = counterPub(t, nc, "cnt.b", "+4", "")
		obs["after restart b"] = ack
		wantVal(t, ack, 8, "0")
		return obs
	})
}
