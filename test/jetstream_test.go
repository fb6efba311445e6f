package test

// JetStream streams (not consumers) through nats.go's jetstream package. Every scenario runs
// on each selected target; most also return what they observed, which jsCompare checks
// against nats-server's observations of the same scenario (nats-server runs as the reference
// even when NATSD_TARGETS leaves it out).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var natsServerTarget = target{name: "nats-server", start: startNatsServer}

// jsAPITimeout bounds every JetStream API call, so a server that does not answer fails fast.
const jsAPITimeout = 2 * time.Second

// jsStart starts tg with JetStream on and returns a connection and a JetStream context.
func jsStart(t *testing.T, tg target, cfg Config) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	cfg.JetStream = true
	u := tg.run(t, cfg)
	return jsConnect(t, u)
}

func jsConnect(t *testing.T, u string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := connect(t, u)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(jsAPITimeout))
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return nc, js
}

// jsCompare runs scenario on every selected target (nats-server first, as the reference)
// and fails a target whose observations differ from nats-server's.
func jsCompare(t *testing.T, scenario func(t *testing.T, tg target) any) {
	t.Helper()
	targets := selectedTargets()
	sort.SliceStable(targets, func(i, j int) bool { return targets[i].name == "nats-server" && targets[j].name != "nats-server" })
	var ref any
	refOK := false
	if len(targets) == 0 || targets[0].name != "nats-server" {
		t.Run("nats-server(reference)", func(t *testing.T) {
			ref = jsNormalize(t, scenario(t, natsServerTarget))
			refOK = !t.Failed()
		})
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			got := jsNormalize(t, scenario(t, tg))
			if os.Getenv("NATSD_JS_DUMP") != "" {
				b, _ := json.MarshalIndent(got, "", "  ")
				t.Logf("observations:\n%s", b)
			}
			if tg.name == "nats-server" {
				ref, refOK = got, !t.Failed()
				return
			}
			if !refOK {
				t.Errorf("no reference observations: the nats-server run failed")
				return
			}
			d := jsonDiff(ref, got, tg.name)
			if t.Failed() {
				// The failures say it already; what a failed step did not record is noise.
				var keep []string
				for _, l := range strings.Split(d, "\n") {
					if l != "" && !strings.Contains(l, ": missing in "+tg.name) {
						keep = append(keep, l)
					}
				}
				d = strings.Join(keep, "\n")
			}
			if d != "" {
				t.Errorf("observations differ from nats-server's:\n%s", d)
			}
		})
	}
}

// jsErrObs is an error as observed: an API error's code, err_code and description, or the
// error's text.
func jsErrObs(err error) any {
	if err == nil {
		return nil
	}
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return map[string]any{"code": ae.Code, "err_code": int(ae.ErrorCode), "description": ae.Description}
	}
	return err.Error()
}

// wantAPIErr checks that err is a JetStream API error with code and errCode (and desc
// when not empty).
func wantAPIErr(t *testing.T, err error, code int, errCode jetstream.ErrorCode, desc string) {
	t.Helper()
	var ae *jetstream.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want API error %d/%d %q, got %v", code, errCode, desc, err)
	}
	if ae.Code != code || ae.ErrorCode != errCode || (desc != "" && ae.Description != desc) {
		t.Fatalf("want API error %d/%d %q, got %d/%d %q", code, errCode, desc, ae.Code, ae.ErrorCode, ae.Description)
	}
}

// wantDeleteErr checks a failed DeleteMsg / SecureDeleteMsg: the client keeps only the
// API error's text (desc "" leaves the description unchecked).
func wantDeleteErr(t *testing.T, err error, code int, errCode jetstream.ErrorCode, desc string) {
	t.Helper()
	want := fmt.Sprintf("code=%d err_code=%d description=%s", code, errCode, desc)
	if !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) || !strings.Contains(err.Error(), want) {
		t.Fatalf("delete: %v, want %s", err, want)
	}
}

func mustStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(context.Background(), cfg)
	if err != nil {
		t.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	return s
}

func streamInfo(t *testing.T, s jetstream.Stream, opts ...jetstream.StreamInfoOpt) *jetstream.StreamInfo {
	t.Helper()
	si, err := s.Info(context.Background(), opts...)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return si
}

func mustPublish(t *testing.T, js jetstream.JetStream, subj, data string, opts ...jetstream.PublishOpt) *jetstream.PubAck {
	t.Helper()
	ack, err := js.Publish(context.Background(), subj, []byte(data), opts...)
	if err != nil {
		t.Fatalf("publish %s: %v", subj, err)
	}
	return ack
}

// stateObs is the deterministic part of a stream's state.
func stateObs(st jetstream.StreamState) map[string]any {
	return map[string]any{
		"messages": st.Msgs, "bytes": st.Bytes, "first_seq": st.FirstSeq, "last_seq": st.LastSeq,
		"num_deleted": st.NumDeleted, "num_subjects": st.NumSubjects, "deleted": st.Deleted,
		"subjects": st.Subjects,
	}
}

func wantState(t *testing.T, st jetstream.StreamState, msgs, first, last uint64) {
	t.Helper()
	if st.Msgs != msgs || st.FirstSeq != first || st.LastSeq != last {
		t.Fatalf("state: messages=%d first_seq=%d last_seq=%d, want %d %d %d", st.Msgs, st.FirstSeq, st.LastSeq, msgs, first, last)
	}
}

// msgObs is a stored message as observed (its time only for presence).
func msgObs(m *jetstream.RawStreamMsg, err error) any {
	if err != nil {
		return map[string]any{"error": jsErrObs(err)}
	}
	return map[string]any{"subject": m.Subject, "seq": m.Sequence, "data": string(m.Data),
		"header": headerObs(m.Header), "has_time": !m.Time.IsZero()}
}

// headerObs is a header with Nats-Time-Stamp's value replaced by its presence.
func headerObs(h nats.Header) map[string]any {
	out := map[string]any{}
	for k, v := range h {
		if k == "Nats-Time-Stamp" {
			out[k] = len(v) == 1 && v[0] != ""
			continue
		}
		out[k] = strings.Join(v, ",")
	}
	return out
}

func TestJetStreamDisabled(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		_, js := jsConnect(t, u)
		if _, err := js.AccountInfo(context.Background()); !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			t.Fatalf("AccountInfo without JetStream: %v, want %v", err, jetstream.ErrJetStreamNotEnabled)
		}
	})
}

func TestJetStreamAccountInfo(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		before, err := js.AccountInfo(ctx)
		if err != nil {
			t.Fatalf("AccountInfo: %v", err)
		}
		if before.Streams != 0 || before.Consumers != 0 || before.API.Level != 5 {
			t.Fatalf("fresh account: streams=%d consumers=%d level=%d", before.Streams, before.Consumers, before.API.Level)
		}
		if before.Limits.MaxStreams != -1 || before.Limits.MaxConsumers != -1 || before.Limits.MaxMemory != -1 || before.Limits.MaxStore != -1 {
			t.Fatalf("limits %+v, want unlimited (-1)", before.Limits)
		}
		mustStream(t, js, jetstream.StreamConfig{Name: "FILE", Subjects: []string{"file.>"}})
		mustStream(t, js, jetstream.StreamConfig{Name: "MEM", Subjects: []string{"mem.>"}, Storage: jetstream.MemoryStorage})
		for i := 0; i < 3; i++ {
			mustPublish(t, js, "file.x", "payload")
			mustPublish(t, js, "mem.x", "payload")
		}
		after, err := js.AccountInfo(ctx)
		if err != nil {
			t.Fatalf("AccountInfo: %v", err)
		}
		if after.Streams != 2 || after.Store == 0 || after.Memory == 0 {
			t.Fatalf("after two streams: streams=%d storage=%d memory=%d", after.Streams, after.Store, after.Memory)
		}
		if after.API.Total <= before.API.Total {
			t.Fatalf("api.total did not grow: %d then %d", before.API.Total, after.API.Total)
		}
		if err := js.DeleteStream(ctx, "MEM"); err != nil {
			t.Fatal(err)
		}
		last, err := js.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if last.Streams != 1 || last.Memory != 0 {
			t.Fatalf("after delete: streams=%d memory=%d", last.Streams, last.Memory)
		}
		return map[string]any{"before": before, "after": after, "last": last}
	})
}

func TestJetStreamStreamCRUD(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		obs := map[string]any{}
		cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*", "shipped.>"}}
		s := mustStream(t, js, cfg)
		created := s.CachedInfo()
		c := created.Config
		if c.Retention != jetstream.LimitsPolicy || c.Storage != jetstream.FileStorage || c.Discard != jetstream.DiscardOld ||
			c.MaxMsgs != -1 || c.MaxBytes != -1 || c.MaxMsgsPerSubject != -1 || c.MaxMsgSize != -1 || c.MaxConsumers != -1 ||
			c.Replicas != 1 || c.Duplicates != 2*time.Minute || c.MaxAge != 0 {
			t.Fatalf("defaults not filled in: %+v", c)
		}
		if created.Created.IsZero() || created.State.Msgs != 0 {
			t.Fatalf("create info: created=%v state=%+v", created.Created, created.State)
		}
		obs["create"] = created

		// The same config again is fine (idempotent).
		again, err := js.CreateStream(ctx, cfg)
		obs["create_again"] = jsErrObs(err)
		if err != nil {
			t.Fatalf("create with the same config: %v", err)
		}
		if !again.CachedInfo().Created.Equal(created.Created) {
			t.Fatalf("create again changed created: %v vs %v", again.CachedInfo().Created, created.Created)
		}

		got, err := js.Stream(ctx, "ORDERS")
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		obs["info"] = got.CachedInfo()

		cfg.Subjects = append(cfg.Subjects, "returns.*")
		cfg.MaxMsgs = 100
		cfg.Description = "all orders"
		up, err := js.UpdateStream(ctx, cfg)
		if err != nil {
			t.Fatalf("UpdateStream: %v", err)
		}
		if uc := up.CachedInfo().Config; len(uc.Subjects) != 3 || uc.MaxMsgs != 100 || uc.Description != "all orders" {
			t.Fatalf("update not applied: %+v", uc)
		}
		obs["update"] = up.CachedInfo()

		// CreateOrUpdate: creates a missing stream, updates an existing one.
		cu, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}})
		if err != nil {
			t.Fatalf("CreateOrUpdateStream (create): %v", err)
		}
		obs["create_or_update_new"] = cu.CachedInfo()
		cu, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}, MaxMsgs: 5})
		if err != nil {
			t.Fatalf("CreateOrUpdateStream (update): %v", err)
		}
		if cu.CachedInfo().Config.MaxMsgs != 5 {
			t.Fatalf("CreateOrUpdateStream did not update: %+v", cu.CachedInfo().Config)
		}
		obs["create_or_update_existing"] = cu.CachedInfo()
		mustStream(t, js, jetstream.StreamConfig{Name: "ARCHIVE", Subjects: []string{"archive.>"}, Storage: jetstream.MemoryStorage})

		names := func(opts ...jetstream.StreamListOpt) []string {
			l := js.StreamNames(ctx, opts...)
			var out []string
			for n := range l.Name() {
				out = append(out, n)
			}
			if err := l.Err(); err != nil {
				t.Fatalf("StreamNames: %v", err)
			}
			sort.Strings(out)
			return out
		}
		list := func(opts ...jetstream.StreamListOpt) []string {
			l := js.ListStreams(ctx, opts...)
			var out []string
			for si := range l.Info() {
				out = append(out, si.Config.Name)
			}
			if err := l.Err(); err != nil {
				t.Fatalf("ListStreams: %v", err)
			}
			sort.Strings(out)
			return out
		}
		want := func(what string, got []string, want ...string) {
			t.Helper()
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("%s: %v, want %v", what, got, want)
			}
			obs[what] = got
		}
		want("names", names(), "ARCHIVE", "AUDIT", "ORDERS")
		want("list", list(), "ARCHIVE", "AUDIT", "ORDERS")
		want("names_subject_returns.x", names(jetstream.WithStreamListSubject("returns.x")), "ORDERS")
		want("list_subject_audit.a.b", list(jetstream.WithStreamListSubject("audit.a.b")), "AUDIT")
		want("names_subject_>", names(jetstream.WithStreamListSubject(">")), "ARCHIVE", "AUDIT", "ORDERS")
		want("names_subject_none", names(jetstream.WithStreamListSubject("nothing.here")))
		name, err := js.StreamNameBySubject(ctx, "shipped.a.b")
		if err != nil || name != "ORDERS" {
			t.Fatalf("StreamNameBySubject: %q %v", name, err)
		}

		if err := js.DeleteStream(ctx, "AUDIT"); err != nil {
			t.Fatalf("DeleteStream: %v", err)
		}
		if _, err := js.Stream(ctx, "AUDIT"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("Stream after delete: %v", err)
		}
		err = js.DeleteStream(ctx, "AUDIT")
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("DeleteStream twice: %v", err)
		}
		want("names_after_delete", names(), "ARCHIVE", "ORDERS")
		return obs
	})
}

func TestJetStreamStreamErrors(t *testing.T) {
	type tc struct {
		name    string
		do      func(ctx context.Context, js jetstream.JetStream) error
		code    int
		errCode jetstream.ErrorCode
		desc    string // "" when the client replaces the server's error with a sentinel
	}
	create := func(cfg jetstream.StreamConfig) func(ctx context.Context, js jetstream.JetStream) error {
		return func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateStream(ctx, cfg)
			return err
		}
	}
	update := func(cfg jetstream.StreamConfig) func(ctx context.Context, js jetstream.JetStream) error {
		return func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.UpdateStream(ctx, cfg)
			return err
		}
	}
	cases := []tc{
		{"exists with different config", create(jetstream.StreamConfig{Name: "BASE", Subjects: []string{"other"}}), 400, 10058, ""},
		{"overlapping subjects", create(jetstream.StreamConfig{Name: "OVER", Subjects: []string{"base.*.x"}}), 400, 10065, "subjects overlap with an existing stream"},
		{"overlapping one of two subjects", create(jetstream.StreamConfig{Name: "OVER", Subjects: []string{"other", "base.a"}}), 400, 10065, "subjects overlap with an existing stream"},
		{"capturing all subjects", create(jetstream.StreamConfig{Name: "ALL", Subjects: []string{">"}}), 500, 10052, "capturing all subjects requires no-ack to be true"},
		{"info not found", func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.Stream(ctx, "MISSING")
			return err
		}, 404, 10059, ""},
		{"update not found", update(jetstream.StreamConfig{Name: "MISSING", Subjects: []string{"missing"}}), 404, 10059, ""},
		{"delete not found", func(ctx context.Context, js jetstream.JetStream) error { return js.DeleteStream(ctx, "MISSING") }, 404, 10059, ""},
		{"update storage", update(jetstream.StreamConfig{Name: "BASE", Subjects: []string{"base.>"}, Storage: jetstream.MemoryStorage}), 500, 10052, "stream configuration update can not change storage type"},
		{"max_age below 100ms", create(jetstream.StreamConfig{Name: "AGE", Subjects: []string{"age"}, MaxAge: 50 * time.Millisecond}), 500, 10052, "max age needs to be >= 100ms"},
		{"deny_purge with allow_rollup", create(jetstream.StreamConfig{Name: "ROLL", Subjects: []string{"roll"}, DenyPurge: true, AllowRollup: true}), 500, 10052, "roll-ups require the purge permission"},
		{"create sealed", create(jetstream.StreamConfig{Name: "SEAL", Subjects: []string{"seal"}, Sealed: true}), 500, 10052, "stream configuration for create can not be sealed"},
		{"update to overlapping subjects", update(jetstream.StreamConfig{Name: "SECOND", Subjects: []string{"base.x"}}), 400, 10065, "subjects overlap with an existing stream"},
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		mustStream(t, js, jetstream.StreamConfig{Name: "BASE", Subjects: []string{"base.>"}})
		mustStream(t, js, jetstream.StreamConfig{Name: "SECOND", Subjects: []string{"second"}})
		obs := map[string]any{}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				err := c.do(context.Background(), js)
				obs[c.name] = jsErrObs(err)
				wantAPIErr(t, err, c.code, c.errCode, c.desc)
			})
		}
		// Nothing of the failed requests was created.
		l := js.StreamNames(context.Background())
		var names []string
		for n := range l.Name() {
			names = append(names, n)
		}
		sort.Strings(names)
		if strings.Join(names, ",") != "BASE,SECOND" {
			t.Fatalf("streams after the failed requests: %v", names)
		}
		return obs
	})
}

func TestJetStreamPublishAcks(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		mustStream(t, js, jetstream.StreamConfig{Name: "PUB", Subjects: []string{"pub.>"}})
		var acks []any
		ack := mustPublish(t, js, "pub.a", "one")
		if ack.Stream != "PUB" || ack.Sequence != 1 || ack.Duplicate {
			t.Fatalf("first ack: %+v", ack)
		}
		acks = append(acks, ack)
		ack = mustPublish(t, js, "pub.b", "two", jetstream.WithMsgID("id-1"))
		if ack.Sequence != 2 || ack.Duplicate {
			t.Fatalf("ack with msg id: %+v", ack)
		}
		acks = append(acks, ack)
		ack = mustPublish(t, js, "pub.b", "two again", jetstream.WithMsgID("id-1"))
		if ack.Sequence != 2 || !ack.Duplicate || ack.Stream != "PUB" {
			t.Fatalf("duplicate ack: %+v, want seq 2 duplicate", ack)
		}
		acks = append(acks, ack)
		// A different id is stored.
		ack = mustPublish(t, js, "pub.b", "three", jetstream.WithMsgID("id-2"))
		if ack.Sequence != 3 || ack.Duplicate {
			t.Fatalf("ack with a new msg id: %+v", ack)
		}
		acks = append(acks, ack)

		// PublishAsync: acks in order, duplicates flagged.
		var futs []jetstream.PubAckFuture
		for i := 0; i < 5; i++ {
			f, err := js.PublishAsync(fmt.Sprintf("pub.async.%d", i), []byte("async"))
			if err != nil {
				t.Fatalf("PublishAsync: %v", err)
			}
			futs = append(futs, f)
		}
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: "pub.async.dup", Data: []byte("x"), Header: nats.Header{"Nats-Msg-Id": {"id-2"}}})
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(5 * time.Second):
			t.Fatalf("PublishAsync acks did not all arrive")
		}
		for i, f := range futs {
			select {
			case a := <-f.Ok():
				acks = append(acks, a)
				if i < 5 && (a.Sequence != uint64(4+i) || a.Duplicate) {
					t.Fatalf("async ack %d: %+v", i, a)
				}
				if i == 5 && (a.Sequence != 3 || !a.Duplicate) {
					t.Fatalf("async duplicate ack: %+v, want seq 3 duplicate", a)
				}
			case err := <-f.Err():
				t.Fatalf("async publish %d: %v", i, err)
			}
		}
		si, err := js.Stream(ctx, "PUB")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, si.CachedInfo().State, 8, 1, 8)
		return map[string]any{"acks": acks, "state": stateObs(si.CachedInfo().State)}
	})
}

func TestJetStreamPublishExpectations(t *testing.T) {
	// Every case gets a fresh stream holding <p>.a (seq 1, id m1) then <p>.b (seq 2, id m2).
	type tc struct {
		name    string
		subj    string // token after the prefix
		opts    func(stream, prefix string) []jetstream.PublishOpt
		seq     uint64 // on success
		errCode jetstream.ErrorCode
		desc    string
	}
	cases := []tc{
		{"expected stream ok", "a", func(s, p string) []jetstream.PublishOpt { return []jetstream.PublishOpt{jetstream.WithExpectStream(s)} }, 3, 0, ""},
		{"expected stream wrong", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectStream("OTHER")}
		}, 0, 10060, "expected stream does not match"},
		{"last seq ok", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequence(2)}
		}, 3, 0, ""},
		{"last seq wrong", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequence(1)}
		}, 0, 10071, "wrong last sequence: 2"},
		{"last seq 0 on a non-empty stream", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequence(0)}
		}, 0, 10071, "wrong last sequence: 2"},
		{"last subject seq ok", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(1)}
		}, 3, 0, ""},
		{"last subject seq wrong", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(2)}
		}, 0, 10071, "wrong last sequence: 1"},
		{"last subject seq 0 on a new subject", "c", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(0)}
		}, 3, 0, ""},
		{"last subject seq 0 on a used subject", "b", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(0)}
		}, 0, 10071, "wrong last sequence: 2"},
		{"last seq for another subject ok", "c", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequenceForSubject(1, p+".a")}
		}, 3, 0, ""},
		{"last seq for another subject wrong", "c", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastSequenceForSubject(2, p+".a")}
		}, 0, 10071, "wrong last sequence: 1"},
		{"last msg id ok", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastMsgID("m2")}
		}, 3, 0, ""},
		{"last msg id wrong", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectLastMsgID("m1")}
		}, 0, 10070, "wrong last msg ID: m2"},
		{"all expectations ok", "a", func(s, p string) []jetstream.PublishOpt {
			return []jetstream.PublishOpt{jetstream.WithExpectStream(s), jetstream.WithExpectLastSequence(2),
				jetstream.WithExpectLastSequencePerSubject(1), jetstream.WithExpectLastMsgID("m2"), jetstream.WithMsgID("m3")}
		}, 3, 0, ""},
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		obs := map[string]any{}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				stream, prefix := fmt.Sprintf("EXP%d", i), fmt.Sprintf("exp%d", i)
				mustStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".*"}})
				mustPublish(t, js, prefix+".a", "1", jetstream.WithMsgID("m1"))
				mustPublish(t, js, prefix+".b", "2", jetstream.WithMsgID("m2"))
				ack, err := js.Publish(context.Background(), prefix+"."+c.subj, []byte("x"), c.opts(stream, prefix)...)
				obs[c.name] = map[string]any{"ack": ack, "err": jsErrObs(err)}
				if c.errCode != 0 {
					wantAPIErr(t, err, 400, c.errCode, c.desc)
					return
				}
				if err != nil {
					t.Fatalf("publish: %v", err)
				}
				if ack.Sequence != c.seq || ack.Stream != stream {
					t.Fatalf("ack %+v, want %s seq %d", ack, stream, c.seq)
				}
			})
		}
		return obs
	})
}

func TestJetStreamNoAckAndNoStream(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		nc, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		s := mustStream(t, js, jetstream.StreamConfig{Name: "NOACK", Subjects: []string{"noack.>"}, NoAck: true})
		if !s.CachedInfo().Config.NoAck {
			t.Fatalf("no_ack not kept: %+v", s.CachedInfo().Config)
		}
		// A no_ack stream stores the message and answers nothing.
		if _, err := nc.Request("noack.1", []byte("x"), 300*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("request to a no_ack stream: %v, want %v", err, nats.ErrTimeout)
		}
		waitFor(t, 5*time.Second, "the no_ack message stored", func() bool {
			si, err := s.Info(ctx)
			return err == nil && si.State.Msgs == 1
		})

		// Nobody stores nostream.x: the client gives up on no responders.
		if _, err := js.Publish(ctx, "nostream.x", []byte("x"), jetstream.WithRetryAttempts(0)); !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("publish with no stream: %v, want %v", err, jetstream.ErrNoStreamResponse)
		}
		if _, err := nc.Request("nostream.x", []byte("x"), time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("request with no stream: %v, want %v", err, nats.ErrNoResponders)
		}
	})
}

func TestJetStreamLimits(t *testing.T) {
	type pub struct {
		subj    string
		size    int
		hdr     nats.Header
		errCode jetstream.ErrorCode // 0: stored
		desc    string
	}
	p := func(subj string, size int) pub { return pub{subj: subj, size: size} }
	full := func(subj string, size int, desc string) pub {
		return pub{subj: subj, size: size, errCode: 10077, desc: desc}
	}
	type tc struct {
		name              string
		cfg               jetstream.StreamConfig
		pubs              []pub
		msgs, first, last uint64
	}
	cases := []tc{
		{"max_msgs discard old", jetstream.StreamConfig{MaxMsgs: 3},
			[]pub{p("a", 1), p("a", 1), p("b", 1), p("a", 1), p("b", 1)}, 3, 3, 5},
		{"max_msgs discard new", jetstream.StreamConfig{MaxMsgs: 3, Discard: jetstream.DiscardNew},
			[]pub{p("a", 1), p("a", 1), p("b", 1), full("a", 1, "maximum messages exceeded"), full("b", 1, "maximum messages exceeded")}, 3, 1, 3},
		{"max_bytes discard old", jetstream.StreamConfig{MaxBytes: 300},
			[]pub{p("a", 100), p("a", 100), p("a", 100), p("a", 100)}, 2, 3, 4},
		// A file-stored message counts its subject, payload and 30 bytes: 136 here, 46 for the last.
		{"max_bytes discard new", jetstream.StreamConfig{MaxBytes: 320, Discard: jetstream.DiscardNew},
			[]pub{p("a", 100), p("a", 100), full("a", 100, "maximum bytes exceeded"), p("a", 10)}, 3, 1, 3},
		{"max_msgs_per_subject discard old", jetstream.StreamConfig{MaxMsgsPerSubject: 2},
			[]pub{p("a", 1), p("a", 1), p("b", 1), p("a", 1), p("a", 1)}, 3, 3, 5},
		{"max_msgs_per_subject discard new keeps discarding old", jetstream.StreamConfig{MaxMsgsPerSubject: 2, Discard: jetstream.DiscardNew},
			[]pub{p("a", 1), p("a", 1), p("a", 1), p("b", 1)}, 3, 2, 4},
		{"discard_new_per_subject", jetstream.StreamConfig{MaxMsgsPerSubject: 2, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true},
			[]pub{p("a", 1), p("a", 1), full("a", 1, "maximum messages per subject exceeded"), p("b", 1)}, 3, 1, 3},
		{"max_msgs and max_msgs_per_subject discard new", jetstream.StreamConfig{MaxMsgs: 3, MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true},
			[]pub{p("a", 1), full("a", 1, "maximum messages per subject exceeded"), p("b", 1), p("c", 1), full("d", 1, "maximum messages exceeded")}, 3, 1, 3},
		{"max_msg_size", jetstream.StreamConfig{MaxMsgSize: 10},
			[]pub{p("a", 10), {subj: "a", size: 11, errCode: 10054, desc: "message size exceeds maximum allowed"},
				{subj: "a", size: 5, hdr: nats.Header{"X-Big": {"0123456789"}}, errCode: 10054, desc: "message size exceeds maximum allowed"}, p("a", 0)}, 2, 1, 2},
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		obs := map[string]any{}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				cfg := c.cfg
				cfg.Name = fmt.Sprintf("LIM%d", i)
				prefix := fmt.Sprintf("lim%d", i)
				cfg.Subjects = []string{prefix + ".*"}
				s := mustStream(t, js, cfg)
				var results []any
				for j, pb := range c.pubs {
					m := &nats.Msg{Subject: prefix + "." + pb.subj, Data: []byte(strings.Repeat("x", pb.size)), Header: pb.hdr}
					ack, err := js.PublishMsg(context.Background(), m)
					results = append(results, map[string]any{"ack": ack, "err": jsErrObs(err)})
					if pb.errCode == 0 {
						if err != nil {
							t.Fatalf("publish %d: %v", j, err)
						}
						continue
					}
					code := 503
					if pb.errCode == 10054 {
						code = 400
					}
					wantAPIErr(t, err, code, pb.errCode, pb.desc)
				}
				si := streamInfo(t, s, jetstream.WithSubjectFilter(">"))
				obs[c.name] = map[string]any{"publishes": results, "state": stateObs(si.State)}
				wantState(t, si.State, c.msgs, c.first, c.last)
				if c.cfg.MaxBytes > 0 && si.State.Bytes > uint64(c.cfg.MaxBytes) {
					t.Fatalf("bytes %d over max_bytes %d", si.State.Bytes, c.cfg.MaxBytes)
				}
			})
		}
		return obs
	})
}

func TestJetStreamMaxAge(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "AGE", Subjects: []string{"age.>"}, MaxAge: time.Second})
		if s.CachedInfo().Config.MaxAge != time.Second {
			t.Fatalf("max_age %v", s.CachedInfo().Config.MaxAge)
		}
		for i := 0; i < 3; i++ {
			mustPublish(t, js, "age.x", "old")
		}
		var st jetstream.StreamState
		waitFor(t, 10*time.Second, "messages to expire", func() bool {
			si, err := s.Info(context.Background())
			if err == nil {
				st = si.State
			}
			return err == nil && si.State.Msgs == 0
		})
		wantState(t, st, 0, 4, 3)
		ack := mustPublish(t, js, "age.x", "new")
		if ack.Sequence != 4 {
			t.Fatalf("publish after expiry: %+v", ack)
		}
		return map[string]any{"expired": stateObs(st), "ack": ack}
	})
}

func TestJetStreamPurge(t *testing.T) {
	// Each case purges a fresh stream holding a b a b a c (seqs 1 to 6).
	type tc struct {
		name              string
		filter            string // token after the prefix; "" = the whole stream
		keep, seq         uint64
		msgs, first, last uint64
	}
	cases := []tc{
		{"all", "", 0, 0, 0, 7, 6},
		{"filter", "a", 0, 0, 3, 2, 6},
		{"filter wildcard", "*", 0, 0, 0, 7, 6},
		{"keep", "", 2, 0, 2, 5, 6},
		{"keep more than stored", "", 10, 0, 6, 1, 6},
		{"seq", "", 0, 4, 3, 4, 6},
		{"filter keep", "a", 1, 0, 4, 2, 6},
		{"filter seq", "a", 0, 5, 4, 2, 6},
		{"filter matching nothing", "z", 0, 0, 6, 1, 6},
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		obs := map[string]any{}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				prefix := fmt.Sprintf("pg%d", i)
				s := mustStream(t, js, jetstream.StreamConfig{Name: fmt.Sprintf("PG%d", i), Subjects: []string{prefix + ".*"}})
				for _, sub := range []string{"a", "b", "a", "b", "a", "c"} {
					mustPublish(t, js, prefix+"."+sub, sub)
				}
				var opts []jetstream.StreamPurgeOpt
				if c.filter != "" {
					opts = append(opts, jetstream.WithPurgeSubject(prefix+"."+c.filter))
				}
				if c.keep != 0 {
					opts = append(opts, jetstream.WithPurgeKeep(c.keep))
				}
				if c.seq != 0 {
					opts = append(opts, jetstream.WithPurgeSequence(c.seq))
				}
				if err := s.Purge(context.Background(), opts...); err != nil {
					t.Fatalf("purge: %v", err)
				}
				si := streamInfo(t, s, jetstream.WithSubjectFilter(">"), jetstream.WithDeletedDetails(true))
				obs[c.name] = stateObs(si.State)
				wantState(t, si.State, c.msgs, c.first, c.last)
				// The stream goes on after a purge.
				if ack := mustPublish(t, js, prefix+".d", "after"); ack.Sequence != 7 {
					t.Fatalf("publish after purge: %+v", ack)
				}
			})
		}
		return obs
	})
}

func TestJetStreamGetAndDeleteMsg(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		s := mustStream(t, js, jetstream.StreamConfig{Name: "GD", Subjects: []string{"gd.*"}})
		mustPublish(t, js, "gd.a", "1")
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "gd.b", Data: []byte("2"), Header: nats.Header{"X-Test": {"yes"}}}); err != nil {
			t.Fatal(err)
		}
		mustPublish(t, js, "gd.a", "3")
		mustPublish(t, js, "gd.b", "4")
		mustPublish(t, js, "gd.a", "5")
		obs := map[string]any{}

		m, err := s.GetMsg(ctx, 2)
		obs["get 2"] = msgObs(m, err)
		if err != nil || m.Subject != "gd.b" || string(m.Data) != "2" || m.Header.Get("X-Test") != "yes" || m.Sequence != 2 || m.Time.IsZero() {
			t.Fatalf("GetMsg(2): %+v %v", m, err)
		}
		m, err = s.GetMsg(ctx, 2, jetstream.WithGetMsgSubject("gd.a"))
		obs["get next gd.a from 2"] = msgObs(m, err)
		if err != nil || m.Sequence != 3 {
			t.Fatalf("GetMsg(2, subject gd.a): %+v %v", m, err)
		}
		m, err = s.GetLastMsgForSubject(ctx, "gd.b")
		obs["last gd.b"] = msgObs(m, err)
		if err != nil || m.Sequence != 4 || string(m.Data) != "4" {
			t.Fatalf("GetLastMsgForSubject(gd.b): %+v %v", m, err)
		}
		m, err = s.GetLastMsgForSubject(ctx, "gd.*")
		obs["last gd.*"] = msgObs(m, err)
		if err != nil || m.Sequence != 5 {
			t.Fatalf("GetLastMsgForSubject(gd.*): %+v %v", m, err)
		}
		for _, c := range []struct {
			name string
			get  func() (*jetstream.RawStreamMsg, error)
		}{
			{"get 99", func() (*jetstream.RawStreamMsg, error) { return s.GetMsg(ctx, 99) }},
			{"last gd.z", func() (*jetstream.RawStreamMsg, error) { return s.GetLastMsgForSubject(ctx, "gd.z") }},
			{"next gd.b from 5", func() (*jetstream.RawStreamMsg, error) { return s.GetMsg(ctx, 5, jetstream.WithGetMsgSubject("gd.b")) }},
		} {
			m, err := c.get()
			obs[c.name] = msgObs(m, err)
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Fatalf("%s: %+v %v, want %v", c.name, m, err, jetstream.ErrMsgNotFound)
			}
		}

		if err := s.DeleteMsg(ctx, 2); err != nil {
			t.Fatalf("DeleteMsg(2): %v", err)
		}
		if err := s.SecureDeleteMsg(ctx, 3); err != nil {
			t.Fatalf("SecureDeleteMsg(3): %v", err)
		}
		m, err = s.GetMsg(ctx, 2)
		obs["get deleted 2"] = msgObs(m, err)
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("GetMsg of a deleted message: %+v %v", m, err)
		}
		err = s.DeleteMsg(ctx, 2)
		obs["delete 2 again"] = jsErrObs(err)
		wantDeleteErr(t, err, 400, 10043, "sequence 2 not found")
		err = s.SecureDeleteMsg(ctx, 3)
		obs["secure delete 3 again"] = jsErrObs(err)
		wantDeleteErr(t, err, 400, 10043, "sequence 3 not found")
		err = s.DeleteMsg(ctx, 99)
		obs["delete 99"] = jsErrObs(err)
		wantDeleteErr(t, err, 500, 10057, "")
		si := streamInfo(t, s, jetstream.WithDeletedDetails(true), jetstream.WithSubjectFilter(">"))
		obs["state"] = stateObs(si.State)
		wantState(t, si.State, 3, 1, 5)
		if si.State.NumDeleted != 2 || fmt.Sprint(si.State.Deleted) != "[2 3]" {
			t.Fatalf("deleted: %d %v, want 2 [2 3]", si.State.NumDeleted, si.State.Deleted)
		}
		// Deleting the first message moves first_seq past the gap.
		if err := s.DeleteMsg(ctx, 1); err != nil {
			t.Fatal(err)
		}
		si = streamInfo(t, s, jetstream.WithDeletedDetails(true))
		obs["state after deleting 1"] = stateObs(si.State)
		wantState(t, si.State, 2, 4, 5)
		// Below first_seq now.
		err = s.DeleteMsg(ctx, 1)
		obs["delete 1 again"] = jsErrObs(err)
		wantDeleteErr(t, err, 500, 10057, "")
		return obs
	})
}

func TestJetStreamDenyAndSealed(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		obs := map[string]any{}
		deny := jetstream.StreamConfig{Name: "DENY", Subjects: []string{"deny.>"}, DenyDelete: true, DenyPurge: true}
		d := mustStream(t, js, deny)
		mustPublish(t, js, "deny.a", "1")
		mustPublish(t, js, "deny.a", "2")
		err := d.DeleteMsg(ctx, 1)
		obs["deny delete"] = jsErrObs(err)
		wantDeleteErr(t, err, 500, 10057, "message delete not permitted")
		err = d.SecureDeleteMsg(ctx, 1)
		obs["deny secure delete"] = jsErrObs(err)
		wantDeleteErr(t, err, 500, 10057, "message delete not permitted")
		err = d.Purge(ctx)
		obs["deny purge"] = jsErrObs(err)
		wantAPIErr(t, err, 500, 10110, "stream purge not permitted")
		// Lifting deny_delete / deny_purge by update.
		lift := deny
		lift.DenyDelete = false
		_, err = js.UpdateStream(ctx, lift)
		obs["update lifting deny_delete"] = jsErrObs(err)
		lift = deny
		lift.DenyPurge = false
		_, err = js.UpdateStream(ctx, lift)
		obs["update lifting deny_purge"] = jsErrObs(err)
		obs["deny state"] = stateObs(streamInfo(t, d).State)

		seal := jetstream.StreamConfig{Name: "SEALED", Subjects: []string{"sealed.>"}}
		s := mustStream(t, js, seal)
		mustPublish(t, js, "sealed.a", "1")
		mustPublish(t, js, "sealed.a", "2")
		seal.Sealed = true
		up, err := js.UpdateStream(ctx, seal)
		if err != nil {
			t.Fatalf("sealing: %v", err)
		}
		if c := up.CachedInfo().Config; !c.Sealed || !c.DenyDelete || !c.DenyPurge || c.AllowRollup {
			t.Fatalf("sealed config: sealed=%v deny_delete=%v deny_purge=%v allow_rollup=%v", c.Sealed, c.DenyDelete, c.DenyPurge, c.AllowRollup)
		}
		obs["sealed info"] = up.CachedInfo()
		_, err = js.Publish(ctx, "sealed.a", []byte("3"))
		obs["sealed publish"] = jsErrObs(err)
		if err == nil {
			t.Fatalf("publish to a sealed stream stored")
		}
		err = s.DeleteMsg(ctx, 1)
		obs["sealed delete"] = jsErrObs(err)
		wantDeleteErr(t, err, 400, 10109, "invalid operation on sealed stream")
		err = s.Purge(ctx)
		obs["sealed purge"] = jsErrObs(err)
		wantAPIErr(t, err, 400, 10109, "invalid operation on sealed stream")
		seal.Sealed = false
		_, err = js.UpdateStream(ctx, seal)
		obs["unseal"] = jsErrObs(err)
		wantAPIErr(t, err, 500, 10052, "stream configuration update can not unseal a sealed stream")
		si := streamInfo(t, s)
		wantState(t, si.State, 2, 1, 2)
		m, err := s.GetMsg(ctx, 2)
		if err != nil || string(m.Data) != "2" {
			t.Fatalf("GetMsg on a sealed stream: %+v %v", m, err)
		}
		return obs
	})
}

func TestJetStreamRollup(t *testing.T) {
	rollup := func(js jetstream.JetStream, subj, data, how string) (*jetstream.PubAck, error) {
		return js.PublishMsg(context.Background(), &nats.Msg{Subject: subj, Data: []byte(data), Header: nats.Header{"Nats-Rollup": {how}}})
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		obs := map[string]any{}
		r := mustStream(t, js, jetstream.StreamConfig{Name: "ROLL", Subjects: []string{"roll.*"}, AllowRollup: true})
		for _, sub := range []string{"a", "a", "b", "a", "b"} {
			mustPublish(t, js, "roll."+sub, sub)
		}
		ack, err := rollup(js, "roll.a", "sum-a", "sub")
		if err != nil || ack.Sequence != 6 {
			t.Fatalf("rollup sub: %+v %v", ack, err)
		}
		si := streamInfo(t, r, jetstream.WithSubjectFilter(">"))
		obs["after sub rollup"] = stateObs(si.State)
		if si.State.Msgs != 3 || si.State.Subjects["roll.a"] != 1 || si.State.Subjects["roll.b"] != 2 {
			t.Fatalf("after sub rollup: %+v", si.State)
		}
		m, err := r.GetLastMsgForSubject(context.Background(), "roll.a")
		if err != nil || string(m.Data) != "sum-a" || m.Header.Get("Nats-Rollup") != "sub" {
			t.Fatalf("rollup message: %+v %v", m, err)
		}
		ack, err = rollup(js, "roll.b", "sum-all", "all")
		if err != nil || ack.Sequence != 7 {
			t.Fatalf("rollup all: %+v %v", ack, err)
		}
		si = streamInfo(t, r, jetstream.WithSubjectFilter(">"))
		obs["after all rollup"] = stateObs(si.State)
		wantState(t, si.State, 1, 7, 7)
		_, err = rollup(js, "roll.a", "x", "bad")
		obs["invalid rollup value"] = jsErrObs(err)
		wantAPIErr(t, err, 500, 10111, `rollup value invalid: "bad"`)

		n := mustStream(t, js, jetstream.StreamConfig{Name: "NOROLL", Subjects: []string{"noroll.*"}})
		mustPublish(t, js, "noroll.a", "1")
		for _, how := range []string{"sub", "all"} {
			_, err = rollup(js, "noroll.a", "x", how)
			obs["not allowed "+how] = jsErrObs(err)
			wantAPIErr(t, err, 500, 10111, "rollup not permitted")
		}
		wantState(t, streamInfo(t, n).State, 1, 1, 1)
		return obs
	})
}

func TestJetStreamDirectGetClient(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		s := mustStream(t, js, jetstream.StreamConfig{Name: "DG", Subjects: []string{"dg.*"}, AllowDirect: true})
		if !s.CachedInfo().Config.AllowDirect {
			t.Fatalf("allow_direct not kept")
		}
		mustPublish(t, js, "dg.a", "1")
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "dg.b", Data: []byte("2"), Header: nats.Header{"X-Test": {"yes"}}}); err != nil {
			t.Fatal(err)
		}
		mustPublish(t, js, "dg.a", "3")
		obs := map[string]any{}
		m, err := s.GetMsg(ctx, 2)
		obs["seq 2"] = msgObs(m, err)
		if err != nil || m.Subject != "dg.b" || string(m.Data) != "2" || m.Header.Get("X-Test") != "yes" ||
			m.Header.Get("Nats-Stream") != "DG" || m.Header.Get("Nats-Sequence") != "2" || m.Header.Get("Nats-Subject") != "dg.b" || m.Time.IsZero() {
			t.Fatalf("direct GetMsg(2): %+v %v", m, err)
		}
		m, err = s.GetMsg(ctx, 2, jetstream.WithGetMsgSubject("dg.a"))
		obs["next dg.a from 2"] = msgObs(m, err)
		if err != nil || m.Sequence != 3 {
			t.Fatalf("direct GetMsg(2, dg.a): %+v %v", m, err)
		}
		m, err = s.GetLastMsgForSubject(ctx, "dg.a")
		obs["last dg.a"] = msgObs(m, err)
		if err != nil || m.Sequence != 3 || string(m.Data) != "3" {
			t.Fatalf("direct GetLastMsgForSubject: %+v %v", m, err)
		}
		for name, get := range map[string]func() (*jetstream.RawStreamMsg, error){
			"seq 9":  func() (*jetstream.RawStreamMsg, error) { return s.GetMsg(ctx, 9) },
			"last z": func() (*jetstream.RawStreamMsg, error) { return s.GetLastMsgForSubject(ctx, "dg.z") },
		} {
			m, err := get()
			obs[name] = msgObs(m, err)
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Fatalf("%s: %+v %v, want %v", name, m, err, jetstream.ErrMsgNotFound)
			}
		}
		return obs
	})
}

func TestJetStreamMemoryStorage(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		s := mustStream(t, js, jetstream.StreamConfig{Name: "MEM", Subjects: []string{"mem.*"}, Storage: jetstream.MemoryStorage, MaxMsgsPerSubject: 2})
		if s.CachedInfo().Config.Storage != jetstream.MemoryStorage {
			t.Fatalf("storage %v", s.CachedInfo().Config.Storage)
		}
		for _, sub := range []string{"a", "a", "a", "b"} {
			mustPublish(t, js, "mem."+sub, sub)
		}
		ack := mustPublish(t, js, "mem.b", "dup", jetstream.WithMsgID("x"))
		dup := mustPublish(t, js, "mem.b", "dup", jetstream.WithMsgID("x"))
		if !dup.Duplicate || dup.Sequence != ack.Sequence {
			t.Fatalf("memory dedupe: %+v then %+v", ack, dup)
		}
		si := streamInfo(t, s, jetstream.WithSubjectFilter(">"))
		wantState(t, si.State, 4, 2, 5)
		m, err := s.GetMsg(ctx, 3)
		if err != nil || string(m.Data) != "a" {
			t.Fatalf("GetMsg: %+v %v", m, err)
		}
		ai, err := js.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ai.Memory == 0 || ai.Store != 0 {
			t.Fatalf("account usage memory=%d storage=%d, want memory only", ai.Memory, ai.Store)
		}
		if err := s.DeleteMsg(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if err := s.Purge(ctx, jetstream.WithPurgeSubject("mem.b")); err != nil {
			t.Fatal(err)
		}
		after := streamInfo(t, s, jetstream.WithSubjectFilter(">"), jetstream.WithDeletedDetails(true))
		wantState(t, after.State, 1, 2, 5)
		return map[string]any{"state": stateObs(si.State), "account": ai, "after": stateObs(after.State), "acks": []any{ack, dup}}
	})
}

func TestJetStreamRestart(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		stopped := false
		defer func() {
			if !stopped {
				stop()
			}
		}()
		nc, js := jsConnect(t, u)
		ctx := context.Background()
		fileCfg := jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep.*"}, MaxMsgsPerSubject: 10, Description: "survives restarts"}
		mustStream(t, js, fileCfg)
		mustStream(t, js, jetstream.StreamConfig{Name: "VOLATILE", Subjects: []string{"volatile.*"}, Storage: jetstream.MemoryStorage})
		mustPublish(t, js, "keep.a", "one", jetstream.WithMsgID("id-1"))
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "keep.b", Data: []byte("two"), Header: nats.Header{"X-Test": {"yes"}}}); err != nil {
			t.Fatal(err)
		}
		mustPublish(t, js, "keep.a", "three")
		mustPublish(t, js, "keep.c", "four")
		mustPublish(t, js, "volatile.a", "gone")
		s, err := js.Stream(ctx, "KEEP")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteMsg(ctx, 3); err != nil {
			t.Fatal(err)
		}
		before := streamInfo(t, s, jetstream.WithSubjectFilter(">"), jetstream.WithDeletedDetails(true))
		nc.Close()
		stop()
		stopped = true

		u2 := tg.run(t, fixedPort(t, cfg, u))
		if u2 != u {
			t.Fatalf("restarted on %s, not %s", u2, u)
		}
		_, js = jsConnect(t, u2)
		s, err = js.Stream(ctx, "KEEP")
		if err != nil {
			t.Fatalf("stream after restart: %v", err)
		}
		after := streamInfo(t, s, jetstream.WithSubjectFilter(">"), jetstream.WithDeletedDetails(true))
		if !after.Created.Equal(before.Created) {
			t.Fatalf("created changed over a restart: %v then %v", before.Created, after.Created)
		}
		wantState(t, after.State, before.State.Msgs, before.State.FirstSeq, before.State.LastSeq)
		if after.State.Bytes != before.State.Bytes || after.State.NumDeleted != before.State.NumDeleted {
			t.Fatalf("state over a restart: %+v then %+v", before.State, after.State)
		}
		if after.Config.Description != fileCfg.Description || after.Config.MaxMsgsPerSubject != 10 || strings.Join(after.Config.Subjects, ",") != "keep.*" {
			t.Fatalf("config after restart: %+v", after.Config)
		}
		m, err := s.GetMsg(ctx, 2)
		if err != nil || string(m.Data) != "two" || m.Header.Get("X-Test") != "yes" || m.Subject != "keep.b" {
			t.Fatalf("message after restart: %+v %v", m, err)
		}
		if _, err := s.GetMsg(ctx, 3); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("deleted message after restart: %v", err)
		}
		// The duplicate window is rebuilt from the stored messages.
		dup := mustPublish(t, js, "keep.a", "one", jetstream.WithMsgID("id-1"))
		if !dup.Duplicate || dup.Sequence != 1 {
			t.Fatalf("msg id after restart: %+v, want duplicate of seq 1", dup)
		}
		next := mustPublish(t, js, "keep.a", "five")
		if next.Sequence != 5 {
			t.Fatalf("publish after restart: %+v", next)
		}
		// nats-server does not bring back a memory stream.
		vol, err := js.Stream(ctx, "VOLATILE")
		var volObs any
		if err == nil {
			volObs = map[string]any{"config": vol.CachedInfo().Config, "state": stateObs(vol.CachedInfo().State)}
		} else {
			volObs = jsErrObs(err)
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("memory stream after restart: %v, want %v", err, jetstream.ErrStreamNotFound)
		}
		return map[string]any{"before": before, "after": after, "dup_after_restart": dup, "next": next, "memory_stream": volObs}
	})
}

func TestJetStreamKV(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := context.Background()
		obs := map[string]any{}
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cfg", History: 3})
		if err != nil {
			t.Fatalf("CreateKeyValue: %v", err)
		}
		entry := func(e jetstream.KeyValueEntry, err error) any {
			if err != nil {
				return jsErrObs(err)
			}
			return map[string]any{"key": e.Key(), "value": string(e.Value()), "revision": e.Revision(), "op": e.Operation().String(), "delta": e.Delta()}
		}
		rev, err := kv.Put(ctx, "k1", []byte("v1"))
		if err != nil || rev != 1 {
			t.Fatalf("Put: %d %v", rev, err)
		}
		e, err := kv.Get(ctx, "k1")
		obs["get k1"] = entry(e, err)
		if err != nil || string(e.Value()) != "v1" || e.Revision() != 1 || e.Operation() != jetstream.KeyValuePut {
			t.Fatalf("Get: %v %v", e, err)
		}
		rev, err = kv.Update(ctx, "k1", []byte("v2"), 1)
		if err != nil || rev != 2 {
			t.Fatalf("Update with the right revision: %d %v", rev, err)
		}
		_, err = kv.Update(ctx, "k1", []byte("v3"), 1)
		obs["update wrong revision"] = jsErrObs(err)
		if !errors.Is(err, jetstream.ErrKeyExists) {
			t.Fatalf("Update with a stale revision: %v, want %v", err, jetstream.ErrKeyExists)
		}
		wantAPIErr(t, err, 400, 10071, "wrong last sequence: 2")
		rev, err = kv.Create(ctx, "k2", []byte("new"))
		if err != nil || rev != 3 {
			t.Fatalf("Create: %d %v", rev, err)
		}
		_, err = kv.Create(ctx, "k2", []byte("again"))
		obs["create existing"] = jsErrObs(err)
		if !errors.Is(err, jetstream.ErrKeyExists) {
			t.Fatalf("Create of an existing key: %v", err)
		}
		if err := kv.Delete(ctx, "k2"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		e, err = kv.Get(ctx, "k2")
		obs["get deleted"] = entry(e, err)
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("Get of a deleted key: %v %v", e, err)
		}
		rev, err = kv.Create(ctx, "k2", []byte("reborn"))
		if err != nil || rev != 5 {
			t.Fatalf("Create after Delete: %d %v", rev, err)
		}
		e, err = kv.GetRevision(ctx, "k1", 1)
		obs["k1 revision 1"] = entry(e, err)
		if err != nil || string(e.Value()) != "v1" {
			t.Fatalf("GetRevision(k1, 1): %v %v", e, err)
		}
		e, err = kv.GetRevision(ctx, "k1", 3)
		obs["k1 revision 3 (k2's)"] = entry(e, err)
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("GetRevision of another key's revision: %v %v", e, err)
		}
		for i := 0; i < 3; i++ {
			if _, err := kv.Put(ctx, "k3", []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := kv.Purge(ctx, "k1"); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		e, err = kv.Get(ctx, "k1")
		obs["get purged"] = entry(e, err)
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("Get of a purged key: %v %v", e, err)
		}
		_, err = kv.GetRevision(ctx, "k1", 1)
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("GetRevision of a purged revision: %v", err)
		}
		// History 3: Put a fourth time and the first k3 revision is gone.
		if _, err := kv.Put(ctx, "k3", []byte("3")); err != nil {
			t.Fatal(err)
		}
		e, err = kv.Get(ctx, "k3")
		obs["get k3"] = entry(e, err)
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		obs["status"] = map[string]any{"bucket": st.Bucket(), "values": st.Values(), "history": st.History(), "ttl": st.TTL().String(), "bytes": st.Bytes()}
		// k1: the purge marker; k2: put, delete marker, put; k3: the last three of four.
		if st.Values() != 7 || st.History() != 3 {
			t.Fatalf("status: values=%d history=%d", st.Values(), st.History())
		}
		s, err := js.Stream(ctx, "KV_cfg")
		if err != nil {
			t.Fatal(err)
		}
		si := streamInfo(t, s, jetstream.WithSubjectFilter(">"))
		obs["stream"] = si
		c := si.Config
		if !c.AllowDirect || !c.AllowRollup || !c.DenyDelete || c.MaxMsgsPerSubject != 3 || c.Discard != jetstream.DiscardNew {
			t.Fatalf("KV stream config: %+v", c)
		}
		if err := js.DeleteKeyValue(ctx, "cfg"); err != nil {
			t.Fatalf("DeleteKeyValue: %v", err)
		}
		_, err = js.KeyValue(ctx, "cfg")
		obs["after delete"] = jsErrObs(err)
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Fatalf("KeyValue after delete: %v", err)
		}
		return obs
	})
}

// TestJetStreamSubjectsFreedAndKept: the overlap check follows a stream's subjects through an
// update (the old ones are free, the new ones taken), a delete (all free) and a restart (the
// recovered streams' subjects still taken), as in nats-server.
func TestJetStreamSubjectsFreedAndKept(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		nc, js := jsConnect(t, u)
		ctx := context.Background()
		obs := map[string]any{}
		try := func(name string, do func() error) {
			t.Helper()
			obs[name] = jsErrObs(do())
		}
		create := func(name string, subjects ...string) func() error {
			return func() error {
				_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects})
				return err
			}
		}
		update := func(name string, subjects ...string) func() error {
			return func() error {
				_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects})
				return err
			}
		}
		mustStream(t, js, jetstream.StreamConfig{Name: "A", Subjects: []string{"a.>", "x"}})
		mustStream(t, js, jetstream.StreamConfig{Name: "B", Subjects: []string{"b.*"}})
		try("a.1 taken by A", create("X", "a.1"))
		try("A moves to c.>", update("A", "c.>", "x"))
		try("a.1 now free", create("X", "a.1"))
		try("c.1 taken by A", create("Y", "c.1"))
		try("*.9.9 taken by A", create("Y", "*.9.9"))
		try("*.1.9 free", create("V", "*.1.9"))
		try("B cannot take x", update("B", "b.*", "x"))
		try("B keeps b.*", create("Y", "b.z"))
		if err := js.DeleteStream(ctx, "B"); err != nil {
			t.Fatal(err)
		}
		try("b.z free after delete", create("Z", "b.z"))
		try("Z cannot move to c.9", update("Z", "c.9"))
		nc.Close()
		stop()
		u2 := tg.run(t, fixedPort(t, cfg, u))
		_, js = jsConnect(t, u2)
		try("after restart c.2 taken by A", create("W", "c.2"))
		try("after restart a.1 taken by X", create("W", "a.>"))
		try("after restart b.z taken by Z", create("W", "b.z"))
		try("after restart x taken by A", create("W", "x"))
		try("after restart b.y free", create("W", "b.y"))
		return obs
	})
}
