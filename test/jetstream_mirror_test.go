package test

// Stream mirrors and sources in one account, through nats.go's jetstream package and raw
// API requests, on each target, compared with nats-server's observations.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// waitStream polls a stream's info until cond holds (mirrors and sources catch up in the
// background on both servers).
func waitMirror(t *testing.T, js jetstream.JetStream, name string, d time.Duration, cond func(si *jetstream.StreamInfo) bool) *jetstream.StreamInfo {
	t.Helper()
	deadline := time.Now().Add(d)
	var si *jetstream.StreamInfo
	for {
		s, err := js.Stream(context.Background(), name)
		if err == nil {
			si = s.CachedInfo()
			if cond(si) {
				return si
			}
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(si)
			t.Fatalf("stream %s did not get there in %v: %s", name, d, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sourceView is what a scenario records of a StreamSourceInfo (active only for presence).
func sourceView(si *jetstream.StreamSourceInfo) any {
	if si == nil {
		return nil
	}
	v := map[string]any{"name": si.Name, "lag": si.Lag, "active": si.Active >= 0 && si.Active < time.Minute,
		"filter": si.FilterSubject, "error": si.Error}
	var trs []string
	for _, tr := range si.SubjectTransforms {
		trs = append(trs, tr.Source+"→"+tr.Destination)
	}
	v["transforms"] = trs
	return v
}

// storedMsgs reads every message of a stream by sequence (gaps as errors).
func mirrorMsgs(t *testing.T, s jetstream.Stream, first, last uint64) []any {
	t.Helper()
	var out []any
	for q := first; q <= last; q++ {
		m, err := s.GetMsg(context.Background(), q)
		if err != nil {
			out = append(out, map[string]any{"seq": q, "error": jsErrObs(err)})
			continue
		}
		out = append(out, map[string]any{"seq": m.Sequence, "subject": m.Subject, "data": string(m.Data),
			"header": sourceHeaderObs(m.Header)})
	}
	return out
}

// sourceHeaderObs is a header with Nats-Stream-Source's origin identity (a hash of the
// origin's creation time) replaced by its length.
func sourceHeaderObs(h nats.Header) map[string]any {
	out := headerObs(h)
	if v := h.Get("Nats-Stream-Source"); v != "" {
		f := strings.Split(v, " ")
		if len(f) == 6 {
			f[5] = fmt.Sprintf("<ident %d>", len(f[5]))
		}
		out["Nats-Stream-Source"] = strings.Join(f, " ")
	}
	return out
}

func TestJSMirrorCatchUp(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		o := mustStream(t, js, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.>"}, AllowDirect: true})
		for i := 1; i <= 5; i++ {
			mustPublish(t, js, fmt.Sprintf("o.%d", i%2), fmt.Sprintf("m%d", i), jetstream.WithMsgID(fmt.Sprint(i)))
		}
		if err := o.DeleteMsg(ctx, 3); err != nil {
			t.Fatal(err)
		}
		m, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "M", Mirror: &jetstream.StreamSource{Name: "O"}})
		if err != nil {
			t.Fatal(err)
		}
		created := m.CachedInfo()
		waitMirror(t, js, "M", 10*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 5 })
		for i := 6; i <= 8; i++ {
			mustPublish(t, js, "o.x", fmt.Sprintf("m%d", i))
		}
		si := waitMirror(t, js, "M", 10*time.Second, func(si *jetstream.StreamInfo) bool {
			return si.State.LastSeq == 8 && si.Mirror != nil && si.Mirror.Lag == 0
		})
		// A publish to the mirror's name is not taken: it has no subjects.
		_, perr := js.Publish(ctx, "M", []byte("x"))
		// Direct get by the origin's name: either stream may answer (mirror_direct).
		dm, derr := o.GetLastMsgForSubject(ctx, "o.x")
		if derr == nil {
			if n := dm.Header.Get("Nats-Stream"); n == "O" || n == "M" {
				dm.Header.Set("Nats-Stream", "O or M")
			}
		}
		return map[string]any{
			"created_subjects": created.Config.Subjects, "created_mirror_direct": created.Config.MirrorDirect,
			"created_dup_window": created.Config.Duplicates.String(),
			"state":              stateObs(si.State), "mirror": sourceView(si.Mirror), "sources": len(si.Sources),
			"msgs": mirrorMsgs(t, m, 1, 8), "publish_to_mirror": jsErrObs(perr) != nil,
			"direct": msgObs(dm, derr),
		}
	})
}

func TestJSMirrorFiltered(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		mustStream(t, js, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.>"}})
		for i := 1; i <= 6; i++ {
			mustPublish(t, js, []string{"o.a", "o.b", "o.c"}[i%3], fmt.Sprintf("m%d", i))
		}
		mf, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "MF", Mirror: &jetstream.StreamSource{Name: "O", FilterSubject: "o.a"}})
		if err != nil {
			t.Fatal(err)
		}
		mt, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "MT", Mirror: &jetstream.StreamSource{Name: "O",
			SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "o.b", Destination: "t.b"}}}})
		if err != nil {
			t.Fatal(err)
		}
		ms, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "MS", Mirror: &jetstream.StreamSource{Name: "O", OptStartSeq: 4}})
		if err != nil {
			t.Fatal(err)
		}
		mustPublish(t, js, "o.a", "m7")
		a := waitMirror(t, js, "MF", 10*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 7 })
		b := waitMirror(t, js, "MT", 10*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 4 })
		c := waitMirror(t, js, "MS", 10*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 7 })
		return map[string]any{
			"filtered": stateObs(a.State), "filtered_msgs": mirrorMsgs(t, mf, a.State.FirstSeq, 7), "fmirror": sourceView(a.Mirror),
			"transformed": stateObs(b.State), "transformed_msgs": mirrorMsgs(t, mt, b.State.FirstSeq, 4), "tmirror": sourceView(b.Mirror),
			"start_seq": stateObs(c.State), "start_msgs": mirrorMsgs(t, ms, c.State.FirstSeq, 7),
		}
	})
}

func TestJSMirrorSources(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		mustStream(t, js, jetstream.StreamConfig{Name: "A", Subjects: []string{"a.>"}})
		mustStream(t, js, jetstream.StreamConfig{Name: "B", Subjects: []string{"b.>"}})
		for i := 1; i <= 3; i++ {
			mustPublish(t, js, fmt.Sprintf("a.%d", i), fmt.Sprintf("a%d", i))
		}
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"own.>"}, Sources: []*jetstream.StreamSource{
			{Name: "A", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "a.>", Destination: "x.>"}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		waitMirror(t, js, "S", 10*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 3 })
		mustPublish(t, js, "own.1", "own")
		// A second source is added by an update.
		if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"own.>"}, Sources: []*jetstream.StreamSource{
			{Name: "A", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "a.>", Destination: "x.>"}}},
			{Name: "B", FilterSubject: "b.1"},
		}}); err != nil {
			t.Fatal(err)
		}
		mustPublish(t, js, "b.1", "b1")
		mustPublish(t, js, "b.2", "b2")
		si := waitMirror(t, js, "S", 10*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 5 })
		mustPublish(t, js, "a.4", "a4")
		mustPublish(t, js, "b.1", "b1'")
		si = waitMirror(t, js, "S", 10*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 7 })
		// Publishing with the source header is refused.
		_, herr := js.PublishMsg(ctx, &nats.Msg{Subject: "own.2", Header: nats.Header{"Nats-Stream-Source": []string{"A 1 > > a.1"}}})
		msgs := mirrorMsgs(t, s, 1, si.State.LastSeq)
		// Two sources run side by side: the order they interleave in is not fixed.
		sort.Slice(msgs, func(i, j int) bool {
			return fmt.Sprint(msgs[i].(map[string]any)["data"]) < fmt.Sprint(msgs[j].(map[string]any)["data"])
		})
		for _, m := range msgs {
			delete(m.(map[string]any), "seq")
		}
		var srcs []any
		for _, x := range si.Sources {
			srcs = append(srcs, sourceView(x))
		}
		sort.Slice(srcs, func(i, j int) bool { return fmt.Sprint(srcs[i]) < fmt.Sprint(srcs[j]) })
		return map[string]any{"state": stateObs(si.State), "msgs": msgs, "sources": srcs, "mirror": sourceView(si.Mirror),
			"header_publish": jsErrObs(herr)}
	})
}

// The checks of mirror and source configurations, by raw request.
func TestJSMirrorConfigErrors(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		mustStream(t, js, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.>"}, MaxMsgSize: 1000})
		reqs := []string{
			`{"name":"E1","subjects":["e1"],"mirror":{"name":"O"}}`,
			`{"name":"E2","mirror":{"name":"O"},"sources":[{"name":"O"}]}`,
			`{"name":"E3","mirror":{"name":"O"},"first_seq":5}`,
			`{"name":"E4","mirror":{"name":"O","filter_subject":"o.a","subject_transforms":[{"src":"o.b","dest":"x"}]}}`,
			`{"name":"E5","mirror":{"name":"NOPE"}}`,
			`{"name":"E6","sources":[{"name":"O"},{"name":"O"}]}`,
			`{"name":"E7","sources":[{"name":"O.x"}]}`,
			`{"name":"E8","mirror":{"name":"O.x"}}`,
			`{"name":"E9","mirror":{"name":"O"},"max_msg_size":10}`,
			`{"name":"E10","sources":[{"name":"O"}],"max_msg_size":10}`,
			`{"name":"E11","sources":[{"name":"O","subject_transforms":[{"src":"o.>","dest":"x.>"},{"src":"o.a","dest":"y"}]}]}`,
			`{"name":"E12","mirror":{"name":"O","subject_transforms":[{"src":"o.*","dest":"x.{{wildcard(2)}}"}]}}`,
			`{"name":"E13","mirror":{"name":"O"},"allow_msg_counter":true}`,
			`{"name":"E14","sources":[{"name":"NOPE"}]}`,
			`{"name":"E15","mirror":{"name":"O","opt_start_seq":3,"opt_start_time":"2024-01-01T00:00:00Z"}}`,
		}
		var out []any
		for _, r := range reqs {
			var cfg struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal([]byte(r), &cfg)
			msg, err := nc.Request("$JS.API.STREAM.CREATE."+cfg.Name, []byte(r), 5*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			var resp struct {
				Error  any `json:"error"`
				Config *struct {
					Subjects     []string `json:"subjects"`
					MirrorDirect bool     `json:"mirror_direct"`
				} `json:"config"`
			}
			_ = json.Unmarshal(msg.Data, &resp)
			out = append(out, map[string]any{"req": r, "error": resp.Error, "config": resp.Config})
		}
		// The mirror can not be changed by an update, but can be removed (a promotion).
		upd := func(body string) any {
			msg, err := nc.Request("$JS.API.STREAM.UPDATE.E5", []byte(body), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var resp struct {
				Error any `json:"error"`
			}
			_ = json.Unmarshal(msg.Data, &resp)
			return resp.Error
		}
		out = append(out, upd(`{"name":"E5","mirror":{"name":"O"}}`), upd(`{"name":"E5","subjects":["e5"]}`))
		return out
	})
}

// A server stopped in the middle of mirroring and sourcing resumes both after its restart
// with no gap and no duplicate.
func TestJSMirrorRestart(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				stop()
			}
		})
		nc, js := jsConnect(t, u)
		ctx := jsCtx(t)
		mustStream(t, js, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.>"}})
		mustStream(t, js, jetstream.StreamConfig{Name: "M", Mirror: &jetstream.StreamSource{Name: "O"}})
		mustStream(t, js, jetstream.StreamConfig{Name: "S", Sources: []*jetstream.StreamSource{{Name: "O"}}})
		for i := 1; i <= 200; i++ {
			if _, err := js.PublishAsync(fmt.Sprintf("o.%d", i%5), []byte(fmt.Sprintf("m%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(10 * time.Second):
			t.Fatal("publishes not acknowledged")
		}
		// Stopped mid-stream: whatever the mirror and the source got so far stays.
		nc.Close()
		stop()
		stopped = true
		u2 := tg.run(t, fixedPort(t, cfg, u))
		_, js = jsConnect(t, u2)
		for i := 201; i <= 300; i++ {
			mustPublish(t, js, fmt.Sprintf("o.%d", i%5), fmt.Sprintf("m%d", i))
		}
		m := waitMirror(t, js, "M", 30*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 300 })
		s := waitMirror(t, js, "S", 30*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs >= 300 })
		time.Sleep(500 * time.Millisecond)
		s = waitMirror(t, js, "S", time.Second, func(si *jetstream.StreamInfo) bool { return true })
		// Every origin sequence exactly once in the source, in order; the mirror equal to
		// the origin.
		ss, _ := js.Stream(ctx, "S")
		ms, _ := js.Stream(ctx, "M")
		var problems []string
		var prev uint64
		for q := uint64(1); q <= s.State.LastSeq; q++ {
			sm, err := ss.GetMsg(ctx, q)
			if err != nil {
				problems = append(problems, fmt.Sprintf("S %d: %v", q, err))
				continue
			}
			f := strings.Split(sm.Header.Get("Nats-Stream-Source"), " ")
			var oseq uint64
			fmt.Sscan(f[1], &oseq)
			if oseq != prev+1 || sm.Data == nil || string(sm.Data) != fmt.Sprintf("m%d", oseq) {
				problems = append(problems, fmt.Sprintf("S %d: origin %d after %d (%q)", q, oseq, prev, sm.Data))
			}
			prev = oseq
		}
		for q := uint64(1); q <= 300; q += 37 {
			mm, err := ms.GetMsg(ctx, q)
			if err != nil || string(mm.Data) != fmt.Sprintf("m%d", q) {
				problems = append(problems, fmt.Sprintf("M %d: %v", q, err))
			}
		}
		return map[string]any{"mirror": stateObs(m.State), "source": stateObs(s.State), "problems": problems}
	})
}
