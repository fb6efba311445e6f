package test

// Message schedules (allow_msg_schedules, Nats-Schedule): the publish checks and their
// error codes, one-off and repeating schedules, sources, time zones, cancelling, and
// schedules across a restart, on both servers. Schedules fire on their own time: every
// wait polls with a generous deadline and nothing asserts how long it took.

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// schedPub publishes body to subj with the given header pairs and returns the reply as
// JSON (the PubAck or the error).
func schedPub(t *testing.T, nc *nats.Conn, subj, body string, kv ...string) any {
	t.Helper()
	m := nats.NewMsg(subj)
	for i := 0; i+1 < len(kv); i += 2 {
		m.Header.Add(kv[i], kv[i+1])
	}
	m.Data = []byte(body)
	r, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		t.Fatalf("publish %s: %v", subj, err)
	}
	var v any
	if err := json.Unmarshal(r.Data, &v); err != nil {
		t.Fatalf("publish %s: %v: %s", subj, err, r.Data)
	}
	return v
}

// lastBySubj is the stream's last message on subj (headers as sorted lines, a repeating
// schedule's next time replaced by its zone), or nil when it has none.
func lastBySubj(t *testing.T, nc *nats.Conn, stream, subj string) map[string]any {
	t.Helper()
	m, err := nc.Request("$JS.API.STREAM.MSG.GET."+stream, []byte(`{"last_by_subj":"`+subj+`"}`), 5*time.Second)
	if err != nil {
		t.Fatalf("msg get %s: %v", subj, err)
	}
	if strings.Contains(string(m.Data), `"error"`) {
		return nil
	}
	var r struct {
		Message struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Hdrs    []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatalf("msg get %s: %v: %s", subj, err, m.Data)
	}
	return map[string]any{"subject": r.Message.Subject, "seq": r.Message.Seq,
		"hdrs": schedHdrs(t, string(r.Message.Hdrs)), "data": string(r.Message.Data)}
}

// schedHdrs is a header block's lines, sorted, with Nats-Schedule-Next's time replaced by
// "<time>" and its zone offset (checked to be a time).
func schedHdrs(t *testing.T, h string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(h), "\r\n")[1:] {
		if v, ok := strings.CutPrefix(l, "Nats-Schedule-Next: "); ok && v != "purge" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				t.Errorf("Nats-Schedule-Next %q: %v", v, err)
			}
			l = "Nats-Schedule-Next: <time>" + at.Format("Z07:00")
		}
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// waitLast polls until the stream has a message on subj with a sequence above after.
func waitLast(t *testing.T, nc *nats.Conn, stream, subj string, after uint64) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := lastBySubj(t, nc, stream, subj); m != nil && m["seq"].(uint64) > after {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message on %s after sequence %d", subj, after)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func subjectCount(t *testing.T, s jetstream.Stream, subj string) uint64 {
	t.Helper()
	si := streamInfo(t, s, jetstream.WithSubjectFilter(subj))
	return si.State.Subjects[subj]
}

func at(d time.Duration) string { return "@at " + time.Now().Add(d).UTC().Format(time.RFC3339) }

// TestJSScheduleChecks: what a publish with schedule headers is told, on a stream with
// schedules and on one without, and the configuration rules.
func TestJSScheduleChecks(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		mustStream(t, js, jetstream.StreamConfig{Name: "SCH", Subjects: []string{"sched.>", "tgt.>", "src.>"},
			AllowMsgSchedules: true, AllowMsgTTL: true})
		mustStream(t, js, jetstream.StreamConfig{Name: "NOTTL", Subjects: []string{"n.>"}, AllowMsgSchedules: true})
		mustStream(t, js, jetstream.StreamConfig{Name: "OFF", Subjects: []string{"off.>"}})
		later := "@at 2099-01-01T00:00:00Z"
		obs := map[string]any{}
		for _, c := range []struct {
			name, subj string
			hdrs       []string
		}{
			{"off schedule", "off.a", []string{"Nats-Schedule", later, "Nats-Schedule-Target", "off.b"}},
			{"off bad pattern", "off.a", []string{"Nats-Schedule", "bad"}},
			{"off empty zone", "off.a", []string{"Nats-Schedule-Time-Zone", ""}},
			{"off empty pattern", "off.a", []string{"Nats-Schedule", ""}},
			{"off purge", "off.a", []string{"Nats-Schedule-Next", "purge", "Nats-Scheduler", "off.s"}},
			{"off bad purge", "off.a", []string{"Nats-Schedule-Next", "purge", "Nats-Scheduler", "off.a"}},
			{"off scheduler", "off.a", []string{"Nats-Scheduler", "off.s"}},
			{"pattern", "sched.a", []string{"Nats-Schedule", "bad", "Nats-Schedule-Target", "tgt.a"}},
			{"every too short", "sched.a", []string{"Nats-Schedule", "@every 500ms", "Nats-Schedule-Target", "tgt.a"}},
			{"five fields", "sched.a", []string{"Nats-Schedule", "* * * * *", "Nats-Schedule-Target", "tgt.a"}},
			{"never fires", "sched.a", []string{"Nats-Schedule", "0 0 0 30 2 *", "Nats-Schedule-Target", "tgt.a"}},
			{"unknown zone", "sched.a", []string{"Nats-Schedule", "@daily", "Nats-Schedule-Time-Zone", "Mars/Olympus", "Nats-Schedule-Target", "tgt.a"}},
			{"zone with @at", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-Time-Zone", "UTC", "Nats-Schedule-Target", "tgt.a"}},
			{"zone alone", "sched.a", []string{"Nats-Schedule-Time-Zone", "Europe/Amsterdam"}},
			{"ttl", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-TTL", "abc", "Nats-Schedule-Target", "tgt.a"}},
			{"schedule rollup", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-Rollup", "all", "Nats-Schedule-Target", "tgt.a"}},
			{"message rollup", "sched.a", []string{"Nats-Schedule", later, "Nats-Rollup", "all", "Nats-Schedule-Target", "tgt.a"}},
			{"ttl disabled", "n.a", []string{"Nats-Schedule", later, "Nats-Schedule-TTL", "5s", "Nats-Schedule-Target", "n.b"}},
			{"no target", "sched.a", []string{"Nats-Schedule", later}},
			{"target is subject", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-Target", "sched.a"}},
			{"target wildcard", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-Target", "tgt.*"}},
			{"target elsewhere", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-Target", "off.a"}},
			{"source is target", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-Target", "tgt.a", "Nats-Schedule-Source", "tgt.a"}},
			{"source is subject", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-Target", "tgt.a", "Nats-Schedule-Source", "sched.a"}},
			{"source elsewhere", "sched.a", []string{"Nats-Schedule", later, "Nats-Schedule-Target", "tgt.a", "Nats-Schedule-Source", "off.a"}},
			{"next not purge", "tgt.x", []string{"Nats-Schedule-Next", "2099-01-01T00:00:00Z", "Nats-Scheduler", "sched.a"}},
			{"purge no scheduler", "tgt.x", []string{"Nats-Schedule-Next", "purge"}},
			{"purge self", "tgt.x", []string{"Nats-Schedule-Next", "purge", "Nats-Scheduler", "tgt.x"}},
			{"scheduler alone", "tgt.x", []string{"Nats-Scheduler", "sched.a"}},
			{"ok", "sched.ok", []string{"Nats-Schedule", later, "Nats-Schedule-Target", "tgt.ok", "Nats-Schedule-Source", "src.ok", "Nats-Schedule-TTL", "1m", "Foo", "bar"}},
			{"ok cron zone", "sched.cron", []string{"Nats-Schedule", "0 30 9 * * mon-fri", "Nats-Schedule-Time-Zone", "Europe/Amsterdam", "Nats-Schedule-Target", "tgt.cron"}},
			{"ok rollup sub", "sched.sub", []string{"Nats-Schedule", "@every 1h", "Nats-Rollup", "sub", "Nats-Schedule-Rollup", "sub", "Nats-Schedule-Target", "tgt.sub"}},
			{"plain", "tgt.plain", nil},
			{"purge non-schedule", "tgt.x", []string{"Nats-Schedule-Next", "purge", "Nats-Scheduler", "tgt.plain"}},
			{"purge nothing", "tgt.x", []string{"Nats-Schedule-Next", "purge", "Nats-Scheduler", "sched.none"}},
		} {
			obs[c.name] = schedPub(t, nc, c.subj, "body", c.hdrs...)
		}
		s, err := js.Stream(ctx, "SCH")
		if err != nil {
			t.Fatal(err)
		}
		obs["stored ok"] = lastBySubj(t, nc, "SCH", "sched.ok")
		obs["stored sub"] = lastBySubj(t, nc, "SCH", "sched.sub")
		// Replacing a schedule rolls the old one up.
		obs["replace"] = schedPub(t, nc, "sched.ok", "again", "Nats-Schedule", later, "Nats-Schedule-Target", "tgt.ok")
		obs["ok count"] = subjectCount(t, s, "sched.ok")
		obs["config"] = func() any {
			c := streamInfo(t, s).Config
			return map[string]any{"schedules": c.AllowMsgSchedules, "rollup": c.AllowRollup, "deny_purge": c.DenyPurge,
				"level": c.Metadata["_nats.req.level"]}
		}()
		cfgErr := func(c jetstream.StreamConfig, update bool) any {
			var err error
			if update {
				_, err = js.UpdateStream(ctx, c)
			} else {
				_, err = js.CreateStream(ctx, c)
			}
			var ae *jetstream.APIError
			if err == nil {
				return "ok"
			} else if errors.As(err, &ae) {
				return map[string]any{"code": ae.Code, "err_code": ae.ErrorCode, "description": ae.Description}
			}
			return err.Error()
		}
		obs["discard new"] = cfgErr(jetstream.StreamConfig{Name: "DN", Subjects: []string{"dn"}, AllowMsgSchedules: true, Discard: jetstream.DiscardNew}, false)
		obs["counter"] = cfgErr(jetstream.StreamConfig{Name: "CT", Subjects: []string{"ct"}, AllowMsgSchedules: true, AllowMsgCounter: true}, false)
		obs["mirror"] = cfgErr(jetstream.StreamConfig{Name: "MI", AllowMsgSchedules: true, Mirror: &jetstream.StreamSource{Name: "SCH"}}, false)
		obs["source"] = cfgErr(jetstream.StreamConfig{Name: "SO", AllowMsgSchedules: true, Sources: []*jetstream.StreamSource{{Name: "SCH"}}}, false)
		obs["disable"] = cfgErr(jetstream.StreamConfig{Name: "SCH", Subjects: []string{"sched.>", "tgt.>", "src.>"}, AllowMsgTTL: true, AllowRollup: true}, true)
		obs["enable"] = cfgErr(jetstream.StreamConfig{Name: "OFF", Subjects: []string{"off.>"}, AllowMsgSchedules: true, AllowRollup: true}, true)
		obs["enabled"] = schedPub(t, nc, "off.s", "now on", "Nats-Schedule", later, "Nats-Schedule-Target", "off.t")
		return obs
	})
}

// TestJSScheduleOnce: a one-off schedule fires once, on its target, with its body and
// headers (its own schedule headers, message id and expectations taken off) and the TTL
// it asked for, and its message is purged.
func TestJSScheduleOnce(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "ONCE", Subjects: []string{"sched.>", "tgt.>"},
			AllowMsgSchedules: true, AllowMsgTTL: true})
		obs := map[string]any{}
		obs["ack"] = schedPub(t, nc, "sched.once", "hello", "Nats-Schedule", at(time.Second),
			"Nats-Schedule-Target", "tgt.once", "Nats-Schedule-TTL", "30s", "Nats-Msg-Id", "m1",
			"Nats-Expected-Last-Subject-Sequence", "0", "Foo", "bar")
		obs["fired"] = waitLast(t, nc, "ONCE", "tgt.once", 0)
		waitFor(t, 30*time.Second, "the schedule's purge", func() bool { return subjectCount(t, s, "sched.once") == 0 })
		time.Sleep(1500 * time.Millisecond) // it does not fire again
		obs["state"] = stateObs(streamInfo(t, s).State)
		// A schedule whose time has passed fires at once.
		obs["past"] = schedPub(t, nc, "sched.past", "late", "Nats-Schedule", "@at 2001-01-01T00:00:00Z", "Nats-Schedule-Target", "tgt.past")
		obs["past fired"] = waitLast(t, nc, "ONCE", "tgt.past", 0)
		return obs
	})
}

// TestJSScheduleRepeat: a repeating schedule fires with its source's last message and the
// time it fires next; a client's purge ends it, and so does a plain message on its subject.
func TestJSScheduleRepeat(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "REP", Subjects: []string{"sched.>", "tgt.>", "src.>", "ctl.>"},
			AllowMsgSchedules: true})
		obs := map[string]any{}
		schedPub(t, nc, "src.v", "v1", "Bar", "baz")
		obs["every"] = schedPub(t, nc, "sched.every", "own", "Nats-Schedule", "@every 1s",
			"Nats-Schedule-Target", "tgt.every", "Nats-Schedule-Source", "src.v")
		first := waitLast(t, nc, "REP", "tgt.every", 0)
		obs["first"] = map[string]any{"hdrs": first["hdrs"], "data": first["data"]}
		schedPub(t, nc, "src.v", "v2")
		second := waitLast(t, nc, "REP", "tgt.every", first["seq"].(uint64)+1)
		obs["later"] = map[string]any{"hdrs": second["hdrs"], "data": second["data"]}
		obs["cancel"] = schedPub(t, nc, "ctl.stop", "", "Nats-Schedule-Next", "purge", "Nats-Scheduler", "sched.every")
		obs["schedule left"] = subjectCount(t, s, "sched.every")
		n := subjectCount(t, s, "tgt.every")
		time.Sleep(2500 * time.Millisecond)
		obs["stopped"] = subjectCount(t, s, "tgt.every") <= n+1 // one may have been on its way

		// Cron with seconds, in a time zone: the next time carries the zone's offset.
		obs["cron"] = schedPub(t, nc, "sched.cron", "tick", "Nats-Schedule", "*/1 * * * * *",
			"Nats-Schedule-Time-Zone", "Asia/Kolkata", "Nats-Schedule-Target", "tgt.cron")
		tick := waitLast(t, nc, "REP", "tgt.cron", 0)
		obs["tick"] = map[string]any{"hdrs": tick["hdrs"], "data": tick["data"]}
		// A plain message on the schedule's subject ends it.
		obs["plain"] = schedPub(t, nc, "sched.cron", "not a schedule")
		n = subjectCount(t, s, "tgt.cron")
		time.Sleep(2500 * time.Millisecond)
		obs["cron stopped"] = subjectCount(t, s, "tgt.cron") <= n+1
		obs["cron subject"] = subjectCount(t, s, "sched.cron")
		return obs
	})
}

// TestJSScheduleRestart: schedules outlive a restart: a one-off that came due while the
// server was down fires once it is back, and a repeating one keeps firing.
func TestJSScheduleRestart(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		nc, js := jsConnect(t, u)
		mustStream(t, js, jetstream.StreamConfig{Name: "RS", Subjects: []string{"sched.>", "tgt.>"}, AllowMsgSchedules: true})
		obs := map[string]any{}
		obs["once"] = schedPub(t, nc, "sched.once", "once", "Nats-Schedule", at(2*time.Second), "Nats-Schedule-Target", "tgt.once")
		obs["every"] = schedPub(t, nc, "sched.every", "every", "Nats-Schedule", "@every 2s", "Nats-Schedule-Target", "tgt.every")
		nc.Close()
		stop()
		time.Sleep(3 * time.Second)
		u2 := tg.run(t, fixedPort(t, cfg, u))
		nc, js = jsConnect(t, u2)
		once := waitLast(t, nc, "RS", "tgt.once", 0)
		obs["fired once"] = map[string]any{"hdrs": once["hdrs"], "data": once["data"]}
		ev := waitLast(t, nc, "RS", "tgt.every", 0)
		ev2 := waitLast(t, nc, "RS", "tgt.every", ev["seq"].(uint64))
		obs["every again"] = map[string]any{"hdrs": ev2["hdrs"], "data": ev2["data"]}
		s, err := js.Stream(context.Background(), "RS")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the one-off's purge", func() bool { return subjectCount(t, s, "sched.once") == 0 })
		time.Sleep(time.Second)
		obs["once count"] = subjectCount(t, s, "tgt.once")
		obs["every schedule"] = subjectCount(t, s, "sched.every")
		return obs
	})
}

// TestJSScheduleBatchAndMemory: an atomic batch may carry a schedule (and a purge that
// ends one staged before it in the same batch); a memory stream schedules too.
func TestJSScheduleBatchAndMemory(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		obs := map[string]any{}
		for _, st := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
			name := "B" + st.String()
			s := mustStream(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: st,
				AllowMsgSchedules: true, AllowAtomicPublish: true})
			o := map[string]any{}
			sched := map[string]string{"Nats-Schedule": at(time.Second), "Nats-Schedule-Target": name + ".tgt.a"}
			o["batch"] = sendBatch(t, nc, []bmsg{
				{subj: name + ".x", id: "b1", seq: 1},
				{subj: name + ".sched.a", id: "b1", seq: 2, hdr: sched},
				{subj: name + ".sched.b", id: "b1", seq: 3, hdr: map[string]string{"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": name + ".tgt.b"}},
				{subj: name + ".y", id: "b1", seq: 4, commit: "1", hdr: map[string]string{"Nats-Schedule-Next": "purge", "Nats-Scheduler": name + ".sched.b"}},
			})
			o["bad batch"] = sendBatch(t, nc, []bmsg{
				{subj: name + ".p", id: "b2", seq: 1},
				{subj: name + ".z", id: "b2", seq: 2, commit: "1", hdr: map[string]string{"Nats-Schedule-Next": "purge", "Nats-Scheduler": name + ".p"}},
			})
			fired := waitLast(t, nc, name, name+".tgt.a", 0)
			o["fired"] = map[string]any{"hdrs": fired["hdrs"], "data": fired["data"]}
			time.Sleep(1500 * time.Millisecond)
			o["b fired"] = subjectCount(t, s, name+".tgt.b")
			o["b schedule"] = subjectCount(t, s, name+".sched.b")
			waitFor(t, 30*time.Second, "the one-off's purge", func() bool { return subjectCount(t, s, name+".sched.a") == 0 })
			obs[name] = o
		}
		return obs
	})
}

// snapshotRestore takes a snapshot of stream, deletes it and restores it from the snapshot;
// it returns the delete's reply and whether the restore succeeded.
func snapshotRestore(t *testing.T, nc *nats.Conn, stream string) (deleted map[string]any, restored bool) {
	t.Helper()
	snap, chunks, _ := snapshotChunks(t, nc, stream, `{"deliver_subject":"DELIVER"}`)
	deleted = rawAPI(t, nc, "$JS.API.STREAM.DELETE."+stream, "")
	_, done := restoreChunks(t, nc, stream, snap, chunks)
	return deleted, done != nil && apiErrCode(done) == 0
}

// TestJSScheduleSnapshotRestore: a stream restored from a snapshot (memory and file) keeps
// firing its schedules.
func TestJSScheduleSnapshotRestore(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, _ := jsStart(t, tg, Config{})
		obs := map[string]any{}
		for _, st := range []string{"memory", "file"} {
			name := "SR" + st
			obs["create "+st] = apiErrCode(rawAPI(t, nc, "$JS.API.STREAM.CREATE."+name,
				`{"name":"`+name+`","subjects":["`+name+`.>"],"storage":"`+st+`","allow_msg_schedules":true}`))
			obs["schedule "+st] = schedPub(t, nc, name+".sched", "tick", "Nats-Schedule", "@every 1s", "Nats-Schedule-Target", name+".tgt")
			obs["delete "+st], obs["restored "+st] = snapshotRestore(t, nc, name)
			after := uint64(0)
			if m := lastBySubj(t, nc, name, name+".tgt"); m != nil {
				after = m["seq"].(uint64) // fired before the snapshot
			}
			fired := waitLast(t, nc, name, name+".tgt", after)
			obs["fired "+st] = fired["hdrs"]
		}
		return obs
	})
}

// TestJSMsgTTLSnapshotRestore: per-message TTLs still expire in a stream restored from a
// snapshot (memory and file).
func TestJSMsgTTLSnapshotRestore(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		obs := map[string]any{}
		for _, st := range []string{"memory", "file"} {
			name := "TR" + st
			obs["create "+st] = apiErrCode(rawAPI(t, nc, "$JS.API.STREAM.CREATE."+name,
				`{"name":"`+name+`","subjects":["`+name+`.>"],"storage":"`+st+`","allow_msg_ttl":true}`))
			obs["short "+st] = schedPub(t, nc, name+".a", "goes", "Nats-TTL", "2s")
			obs["kept "+st] = schedPub(t, nc, name+".b", "stays")
			_, obs["restored "+st] = snapshotRestore(t, nc, name)
			s, err := js.Stream(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			obs["after "+st] = waitStream(t, s, func(st jetstream.StreamState) bool { return st.Msgs == 1 })
		}
		return obs
	})
}
