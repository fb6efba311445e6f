package test

// Subject delete markers (subject_delete_marker_ttl) and the KV features built on them
// (LimitMarkerTTL, KeyTTL, PurgeTTL), on both servers. Expiry takes its time on a loaded
// box: every wait polls with a generous deadline and nothing asserts how long it took.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// rawMsgGet is STREAM.MSG.GET of seq, with the stored header block as it is (order and
// spelling), or the API error.
func rawMsgGet(t *testing.T, nc *nats.Conn, stream string, seq uint64) any {
	t.Helper()
	m, err := nc.Request("$JS.API.STREAM.MSG.GET."+stream, []byte(fmt.Sprintf(`{"seq":%d}`, seq)), 5*time.Second)
	if err != nil {
		t.Fatalf("msg get %d: %v", seq, err)
	}
	var r struct {
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Hdrs    string `json:"hdrs"`
			Data    string `json:"data"`
		} `json:"message"`
		Error any `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatalf("msg get %d: %v: %s", seq, err, m.Data)
	}
	if r.Message == nil {
		return map[string]any{"error": r.Error}
	}
	h, _ := base64.StdEncoding.DecodeString(r.Message.Hdrs)
	return map[string]any{"subject": r.Message.Subject, "seq": r.Message.Seq, "hdrs": string(h), "data": r.Message.Data}
}

// sortedHdrs replaces a rawMsgGet's header block by its lines sorted.
func sortedHdrs(v any) any {
	if m, ok := v.(map[string]any); ok {
		if h, ok := m["hdrs"].(string); ok {
			lines := strings.Split(strings.TrimSpace(h), "\r\n")
			sort.Strings(lines)
			m["hdrs"] = lines
		}
	}
	return v
}

// msgView is a delivered message: subject, stream sequence, headers (sorted) and body.
func msgView(m jetstream.Msg) string {
	md, _ := m.Metadata()
	var seq uint64
	if md != nil {
		seq = md.Sequence.Stream
	}
	var hs []string
	for k, v := range m.Headers() {
		hs = append(hs, k+"="+strings.Join(v, ","))
	}
	sort.Strings(hs)
	return fmt.Sprintf("%s #%d [%s] %q", m.Subject(), seq, strings.Join(hs, " "), m.Data())
}

// waitStream polls the stream's state until done says so (or a generous deadline passes)
// and returns the state it saw last.
func waitStream(t *testing.T, s jetstream.Stream, done func(jetstream.StreamState) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		si, err := s.Info(context.Background())
		if err != nil {
			t.Fatalf("stream info: %v", err)
		}
		st := si.State
		if done(st) || time.Now().After(deadline) {
			if !done(st) {
				t.Errorf("stream state never reached: %+v", st)
			}
			return map[string]any{"msgs": st.Msgs, "first": st.FirstSeq, "last": st.LastSeq, "deleted": st.NumDeleted, "subjects": st.NumSubjects}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// collectMarkers reads n messages through an ordered consumer; each marker among them is
// also read back with STREAM.MSG.GET at once (it is alive for a while: max_age or its TTL).
func collectMarkers(t *testing.T, nc *nats.Conn, js jetstream.JetStream, stream string, n int) (seen []string, got []any) {
	t.Helper()
	return collectUntil(t, nc, js, stream, func(seen, markers int) bool { return seen >= n })
}

// collectUntil is collectMarkers until done says so, given what was seen so far.
func collectUntil(t *testing.T, nc *nats.Conn, js jetstream.JetStream, stream string, done func(seen, markers int) bool) (seen []string, got []any) {
	t.Helper()
	c, err := js.OrderedConsumer(jsCtx(t), stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !done(len(seen), len(got)) && time.Now().Before(deadline) {
		m, err := c.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		seen = append(seen, msgView(m))
		if m.Headers().Get("Nats-Marker-Reason") != "" {
			md, _ := m.Metadata()
			got = append(got, rawMsgGet(t, nc, stream, md.Sequence.Stream))
		}
	}
	if !done(len(seen), len(got)) {
		t.Errorf("%s: saw only %q", stream, seen)
	}
	return seen, got
}

func markerConfigView(c jetstream.StreamConfig) map[string]any {
	return map[string]any{"allow_msg_ttl": c.AllowMsgTTL, "allow_rollup": c.AllowRollup, "deny_purge": c.DenyPurge,
		"marker_ttl": c.SubjectDeleteMarkerTTL.String(), "max_age": c.MaxAge.String()}
}

// TestJSSubjectDeleteMarkerMaxAge: a subject's last message lost to max_age leaves a marker
// (its other messages are just removed), which max_age then removes in turn; file and
// memory storage.
func TestJSSubjectDeleteMarkerMaxAge(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		obs := map[string]any{}
		for _, st := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
			name := "SDM_" + st.String()
			s := mustStream(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: st,
				MaxAge: time.Second, AllowMsgTTL: true, SubjectDeleteMarkerTTL: 2 * time.Second})
			o := map[string]any{"config": markerConfigView(streamInfo(t, s).Config)}
			for _, subj := range []string{"a", "a", "b"} {
				if _, err := js.Publish(jsCtx(t), name+"."+subj, []byte("v-"+subj)); err != nil {
					t.Fatal(err)
				}
			}
			o["seen"], o["markers"] = collectMarkers(t, nc, js, name, 5)
			o["end"] = waitStream(t, s, func(st jetstream.StreamState) bool { return st.Msgs == 0 })
			obs[name] = o
		}
		return obs
	})
}

// TestJSSubjectDeleteMarkerMsgTTL: a per-message TTL's expiry leaves a marker too; a TTL
// under the marker TTL is raised to it (the header rewritten); the marker expires by its
// own TTL.
func TestJSSubjectDeleteMarkerMsgTTL(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "TTLM", Subjects: []string{"t.>"},
			SubjectDeleteMarkerTTL: 2 * time.Second}) // turns allow_msg_ttl and roll-ups on
		obs := map[string]any{"config": markerConfigView(streamInfo(t, s).Config)}
		m := nats.NewMsg("t.a")
		m.Header.Set("Nats-TTL", "1s")
		m.Data = []byte("short")
		if _, err := js.PublishMsg(jsCtx(t), m); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(jsCtx(t), "t.b", []byte("stays")); err != nil {
			t.Fatal(err)
		}
		obs["stored"] = rawMsgGet(t, nc, "TTLM", 1)
		obs["seen"], obs["markers"] = collectMarkers(t, nc, js, "TTLM", 3)
		obs["end"] = waitStream(t, s, func(st jetstream.StreamState) bool { return st.Msgs == 1 })
		obs["after"] = rawMsgGet(t, nc, "TTLM", 3)
		return obs
	})
}

// kvEntryView is a watcher's entry without its time.
func kvEntryView(e jetstream.KeyValueEntry) string {
	if e == nil {
		return "<initial done>"
	}
	return fmt.Sprintf("%s=%q@%d %s", e.Key(), e.Value(), e.Revision(), e.Operation())
}

// watchUntil gathers a watcher's entries until it has n of them (or a generous deadline).
func watchUntil(t *testing.T, w jetstream.KeyWatcher, seen *[]string, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for len(*seen) < n {
		select {
		case e := <-w.Updates():
			*seen = append(*seen, kvEntryView(e))
		case <-deadline:
			t.Errorf("watcher saw %d of %d entries: %q", len(*seen), n, *seen)
			return
		}
	}
}

// TestJSKVLimitMarkers: a bucket with a TTL and LimitMarkerTTL; a watcher sees each key's
// expiry as a purge, and the markers go in turn.
func TestJSKVLimitMarkers(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "lm", TTL: time.Second, LimitMarkerTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		obs := map[string]any{}
		s, err := js.Stream(ctx, "KV_lm")
		if err != nil {
			t.Fatal(err)
		}
		obs["config"] = markerConfigView(streamInfo(t, s).Config)
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		obs["status"] = []any{st.TTL().String(), st.LimitMarkerTTL().String()}
		w, err := kv.WatchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var seen []string
		watchUntil(t, w, &seen, 1)
		for _, k := range []string{"k1", "k2"} {
			if _, err := kv.Put(ctx, k, []byte("v-"+k)); err != nil {
				t.Fatal(err)
			}
		}
		watchUntil(t, w, &seen, 5)
		obs["watch"] = seen
		obs["end"] = waitStream(t, s, func(st jetstream.StreamState) bool { return st.Msgs == 0 })
		_, err = kv.Get(ctx, "k1")
		obs["get_after"] = fmt.Sprint(err)
		keys, err := kv.Keys(ctx)
		obs["keys_after"], obs["keys_err"] = keys, fmt.Sprint(err)
		return obs
	})
}

// TestJSKVKeyTTLPurgeTTL: Create with KeyTTL expires the key (a purge seen by a watcher,
// then the key can be created again); Purge with PurgeTTL leaves a purge marker that
// expires without a marker of its own.
func TestJSKVKeyTTLPurgeTTL(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "kt", LimitMarkerTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, "KV_kt")
		if err != nil {
			t.Fatal(err)
		}
		obs := map[string]any{}
		w, err := kv.WatchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var seen []string
		watchUntil(t, w, &seen, 1)
		if _, err := kv.Create(ctx, "p", []byte("purged")); err != nil {
			t.Fatal(err)
		}
		// The purge removes p's value: a watcher that has not had it by then never will
		// (either server; natsd under -race on netpoll lost that race about once in 15).
		watchUntil(t, w, &seen, 2)
		if err := kv.Purge(ctx, "p", jetstream.PurgeTTL(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		// nats.go writes a message's headers in its map's order: compare them sorted.
		obs["purge_marker"] = sortedHdrs(rawMsgGet(t, nc, "KV_kt", 2))
		if _, err := kv.Create(ctx, "k", []byte("short"), jetstream.KeyTTL(time.Second)); err != nil {
			t.Fatal(err)
		}
		obs["key"] = sortedHdrs(rawMsgGet(t, nc, "KV_kt", 3))
		_, err = kv.Create(ctx, "k", []byte("again"))
		obs["create_live"] = jsErrObs(err)
		watchUntil(t, w, &seen, 5)
		obs["end"] = waitStream(t, s, func(st jetstream.StreamState) bool { return st.Msgs == 0 })
		rev, err := kv.Create(ctx, "k", []byte("again"))
		obs["create_after"] = []any{rev, jsErrObs(err)}
		watchUntil(t, w, &seen, 6)
		obs["watch"] = seen
		_, err = kv.Get(ctx, "p")
		obs["get_p"] = fmt.Sprint(err)
		if errors.Is(err, nil) {
			t.Errorf("purged key still there")
		}
		return obs
	})
}

// TestJSSubjectDeleteMarkerRestart: messages that pass max_age while the server is down
// leave their markers once it is back.
func TestJSSubjectDeleteMarkerRestart(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		nc, js := jsConnect(t, u)
		mustStream(t, js, jetstream.StreamConfig{Name: "SDMR", Subjects: []string{"r.>"},
			MaxAge: 2 * time.Second, SubjectDeleteMarkerTTL: 2 * time.Second})
		for _, subj := range []string{"r.a", "r.b"} {
			if _, err := js.Publish(jsCtx(t), subj, []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		nc.Close()
		stop()
		time.Sleep(3 * time.Second)
		u2 := tg.run(t, fixedPort(t, cfg, u))
		nc, js = jsConnect(t, u2)
		obs := map[string]any{}
		// When nats-server expires what it recovered is its own affair (a while after it
		// is up): only the markers are compared, not whether the old messages were seen.
		_, obs["markers"] = collectUntil(t, nc, js, "SDMR", func(_, markers int) bool { return markers >= 2 })
		s, err := js.Stream(jsCtx(t), "SDMR")
		if err != nil {
			t.Fatal(err)
		}
		obs["end"] = waitStream(t, s, func(st jetstream.StreamState) bool { return st.Msgs == 0 })
		return obs
	})
}
