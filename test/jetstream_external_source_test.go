package test

// Mirrors and sources of streams in other accounts and domains (external: {api, deliver}),
// and durable sourcing consumers (consumer: {name, deliver_subject}), on natsd and nats-server
// run from the same configuration file, compared.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/natsd/natsd/server"
)

// startConf starts target name from a configuration file body; stop shuts it down (it is
// also shut down when the test ends).
func startConf(t *testing.T, name, body string) (url string, stop func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var once bool
	var shut func()
	stop = func() {
		if !once {
			once = true
			shut()
		}
	}
	retryStart(t, Config{Port: 1}, func() error {
		switch name {
		case "nats-server":
			o, err := natsserver.ProcessConfigFile(path)
			if err != nil {
				t.Fatal(err)
			}
			o.NoSigs, o.NoLog = true, true
			s, err := natsserver.NewServer(o)
			if err != nil {
				return err
			}
			go s.Start()
			if !s.ReadyForConnections(5 * time.Second) {
				s.Shutdown()
				return fmt.Errorf("nats-server not ready")
			}
			url, shut = s.ClientURL(), func() { s.Shutdown(); s.WaitForShutdown() }
		default:
			o := &server.Options{}
			if _, err := o.ProcessConfigFile(path); err != nil {
				t.Fatal(err)
			}
			o.NoSigs, o.NoLog = true, true
			o.Engine = os.Getenv("NATSD_ENGINE")
			s, err := server.New(o)
			if err != nil {
				return err
			}
			if err := s.Start(); err != nil {
				return err
			}
			url, shut = s.ClientURL(), s.Shutdown
		}
		return nil
	})
	t.Cleanup(stop)
	return url, stop
}

// extConf is two accounts: A holds the origins and exports what a mirror or a source in B
// needs (the consumer create and reset API, the deliveries under deliver.B, flow control
// replies); B imports them, the API under JS.A.API.
func extConf(dir string, port int) string {
	listen := "127.0.0.1:-1"
	if port > 0 {
		listen = fmt.Sprintf("127.0.0.1:%d", port)
	}
	return fmt.Sprintf(`
listen: %q
jetstream { store_dir: %q }
accounts {
  A {
    jetstream: enabled
    users: [{user: a, password: a}]
    exports: [
      {service: "$JS.API.CONSUMER.CREATE.>"}
      {service: "$JS.API.CONSUMER.RESET.>"}
      {stream: "deliver.B.>"}
      {service: "$JS.FC.>"}
    ]
  }
  B {
    jetstream: enabled
    users: [{user: b, password: b}]
    imports: [
      {service: {account: A, subject: "$JS.API.CONSUMER.CREATE.>"}, to: "JS.A.API.CONSUMER.CREATE.>"}
      {service: {account: A, subject: "$JS.API.CONSUMER.RESET.>"}, to: "JS.A.API.CONSUMER.RESET.>"}
      {stream: {account: A, subject: "deliver.B.>"}}
      {service: {account: A, subject: "$JS.FC.>"}}
    ]
  }
}
`, listen, dir)
}

var extA = &jetstream.ExternalStream{APIPrefix: "JS.A.API", DeliverPrefix: "deliver.B"}

func extConnect(t *testing.T, u, user string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := connect(t, u, nats.UserInfo(user, user))
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(jsAPITimeout))
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// extSourceView is sourceView with the external prefixes.
func extSourceView(si *jetstream.StreamSourceInfo) any {
	if si == nil {
		return nil
	}
	v := sourceView(si).(map[string]any)
	if si.External != nil {
		v["external"] = map[string]string{"api": si.External.APIPrefix, "deliver": si.External.DeliverPrefix}
	}
	return v
}

// sortedByData orders messages of several sources (which interleave in no fixed order) by
// their data, without their sequences.
func sortedByData(msgs []any) []any {
	for _, m := range msgs {
		delete(m.(map[string]any), "seq")
	}
	sort.Slice(msgs, func(i, j int) bool {
		return fmt.Sprint(msgs[i].(map[string]any)["data"]) < fmt.Sprint(msgs[j].(map[string]any)["data"])
	})
	return msgs
}

// A mirror and a filtered source of a stream in another account, a KV bucket mirrored across
// accounts and read through the mirror, a mirror whose API import is missing, and the
// mirror's and the source's resumption after a restart.
func TestJSExternalMirrorSource(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		dir := t.TempDir()
		u, stop := startConf(t, tg.name, extConf(dir, 0))
		ctx := context.Background()
		_, jsa := extConnect(t, u, "a")
		_, jsb := extConnect(t, u, "b")
		mustStream(t, jsa, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		pub := func(js jetstream.JetStream, from, to int) {
			for i := from; i <= to; i++ {
				mustPublish(t, js, fmt.Sprintf("orders.%s.%d", []string{"eu", "us"}[i%2], i), fmt.Sprintf("o%d", i),
					jetstream.WithMsgID(fmt.Sprint(i)))
			}
		}
		pub(jsa, 1, 6)
		m := mustStream(t, jsb, jetstream.StreamConfig{Name: "M", Mirror: &jetstream.StreamSource{Name: "ORDERS", External: extA}})
		s := mustStream(t, jsb, jetstream.StreamConfig{Name: "S", Subjects: []string{"own.>"}, Sources: []*jetstream.StreamSource{
			{Name: "ORDERS", FilterSubject: "orders.eu.>", External: extA},
		}})
		waitMirror(t, jsb, "M", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 6 })
		waitMirror(t, jsb, "S", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 3 })
		pub(jsa, 7, 10)
		mustPublish(t, jsb, "own.1", "own")
		mi := waitMirror(t, jsb, "M", 20*time.Second, func(si *jetstream.StreamInfo) bool {
			return si.State.LastSeq == 10 && si.Mirror != nil && si.Mirror.Lag == 0
		})
		si := waitMirror(t, jsb, "S", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 6 })
		var srcs []any
		for _, x := range si.Sources {
			srcs = append(srcs, extSourceView(x))
		}
		out := map[string]any{
			"mirror_state": stateObs(mi.State), "mirror": extSourceView(mi.Mirror), "mirror_msgs": mirrorMsgs(t, m, 1, 10),
			"mirror_config": mi.Config.Mirror, "source_state": stateObs(si.State), "sources": srcs,
			"source_msgs": sortedByData(mirrorMsgs(t, s, 1, si.State.LastSeq)),
		}

		// A KV bucket mirrored from A, read through the mirror.
		kva, err := jsa.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cfg", History: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range [][2]string{{"a", "1"}, {"b", "2"}, {"a", "3"}} {
			if _, err := kva.PutString(ctx, kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
		kvb, err := jsb.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cfgm", History: 2,
			Mirror: &jetstream.StreamSource{Name: "KV_cfg", External: &jetstream.ExternalStream{APIPrefix: "JS.A.API", DeliverPrefix: "deliver.B.kv"}}})
		if err != nil {
			t.Fatal(err)
		}
		waitMirror(t, jsb, "KV_cfgm", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 3 })
		get := func(key string) any {
			e, err := kvb.Get(ctx, key)
			if err != nil {
				return jsErrObs(err)
			}
			return map[string]any{"key": e.Key(), "value": string(e.Value()), "rev": e.Revision()}
		}
		out["kv_a"], out["kv_b"], out["kv_none"] = get("a"), get("b"), get("none")
		if err := kva.Delete(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		waitMirror(t, jsb, "KV_cfgm", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 4 })
		out["kv_b_deleted"] = get("b")

		// No import of the API prefix: nobody answers the consumer create request.
		mustStream(t, jsb, jetstream.StreamConfig{Name: "MX", Mirror: &jetstream.StreamSource{Name: "ORDERS",
			External: &jetstream.ExternalStream{APIPrefix: "JS.NOPE.API", DeliverPrefix: "deliver.B.nope"}}})
		time.Sleep(1500 * time.Millisecond)
		mx := waitMirror(t, jsb, "MX", time.Second, func(*jetstream.StreamInfo) bool { return true })
		out["missing_import"] = map[string]any{"state": stateObs(mx.State), "mirror": extSourceView(mx.Mirror),
			"never_active": mx.Mirror != nil && mx.Mirror.Active < 0}

		// Restarted: the mirror and the source resume with no gap and no duplicate.
		stop()
		u2, _ := startConf(t, tg.name, extConf(dir, portOf(t, u)))
		_, jsa = extConnect(t, u2, "a")
		_, jsb = extConnect(t, u2, "b")
		pub(jsa, 11, 16)
		mi = waitMirror(t, jsb, "M", 60*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 16 })
		si = waitMirror(t, jsb, "S", 60*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs >= 9 })
		time.Sleep(300 * time.Millisecond)
		si = waitMirror(t, jsb, "S", time.Second, func(*jetstream.StreamInfo) bool { return true })
		m, _ = jsb.Stream(ctx, "M")
		s, _ = jsb.Stream(ctx, "S")
		out["restart_mirror_state"] = stateObs(mi.State)
		out["restart_mirror_msgs"] = mirrorMsgs(t, m, 11, 16)
		out["restart_source_state"] = stateObs(si.State)
		out["restart_source_msgs"] = sortedByData(mirrorMsgs(t, s, 1, si.State.LastSeq))
		return out
	})
}

// The checks of external prefixes and durable sourcing consumers, by raw request in B.
func TestJSExternalConfigErrors(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		u, _ := startConf(t, tg.name, extConf(t.TempDir(), 0))
		_, jsa := extConnect(t, u, "a")
		mustStream(t, jsa, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		ncb, jsb := extConnect(t, u, "b")
		mustStream(t, jsb, jetstream.StreamConfig{Name: "ALL", Subjects: []string{"*.>"}, NoAck: true})
		reqs := []string{
			`{"name":"E1","mirror":{"name":"ORDERS","external":{"api":"$JS.API","deliver":"deliver.B"}}}`,
			`{"name":"E2","mirror":{"name":"ORDERS","external":{"api":"JS.A.API","deliver":"deliver.*"}}}`,
			`{"name":"E3","mirror":{"name":"ORDERS","external":{"api":"JS.*.API","deliver":"deliver.B"}}}`,
			`{"name":"E4","mirror":{"name":"OR.DERS","external":{"api":"JS.A.API","deliver":"deliver.B"}}}`,
			`{"name":"E5","sources":[{"name":"ORDERS","external":{"api":"JS.A.API","deliver":"deliver.B"}},{"name":"ORDERS","external":{"api":"JS.A.API","deliver":"deliver.B2"}}]}`,
			`{"name":"E6","sources":[{"name":"ORDERS","external":{"api":"JS.A.API","deliver":"deliver.B"}},{"name":"ORDERS","external":{"api":"JS.C.API","deliver":"deliver.B"}}]}`,
			`{"name":"E7","sources":[{"name":"ALL"},{"name":"ORDERS","external":{"api":"JS.A.API","deliver":"deliver.B"}}]}`,
			`{"name":"E8","mirror":{"name":"ORDERS","consumer":{"name":"C","deliver_subject":"d.*"}}}`,
			`{"name":"E9","mirror":{"name":"ORDERS","opt_start_seq":2,"consumer":{"name":"C","deliver_subject":"d"}}}`,
			`{"name":"E10","sources":[{"name":"ORDERS","consumer":{"name":"C.x","deliver_subject":"d"}}]}`,
			`{"name":"E11","sources":[{"name":"ORDERS","subject_transforms":[{"src":"orders.a","dest":""}],"consumer":{"name":"C","deliver_subject":"d"}},{"name":"ORDERS","subject_transforms":[{"src":"orders.b","dest":""}],"consumer":{"name":"C","deliver_subject":"d2"}}]}`,
			`{"name":"E12","sources":[{"name":"ORDERS","filter_subject":"orders.a","consumer":{"name":"C","deliver_subject":"d"}}]}`,
			`{"name":"E13","mirror":{"name":"ORDERS","external":{"api":"$JS.API.X","deliver":"deliver.B"}}}`,
		}
		var out []any
		for _, r := range reqs {
			var cfg struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal([]byte(r), &cfg)
			msg, err := ncb.Request("$JS.API.STREAM.CREATE."+cfg.Name, []byte(r), 5*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			var resp struct {
				Error any `json:"error"`
			}
			_ = json.Unmarshal(msg.Data, &resp)
			out = append(out, map[string]any{"req": r, "error": resp.Error})
		}
		return out
	})
}

// Durable sourcing consumers (a flow_control ack policy consumer made in the origin's account,
// named by the mirror), and a source of an interest stream, whose sourcing consumer nats-server
// makes a durable acknowledged by flow control.
func TestJSExternalDurableAndInterest(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		u, _ := startConf(t, tg.name, extConf(t.TempDir(), 0))
		ctx := context.Background()
		nca, jsa := extConnect(t, u, "a")
		_, jsb := extConnect(t, u, "b")
		o := mustStream(t, jsa, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		for i := 1; i <= 4; i++ {
			mustPublish(t, jsa, fmt.Sprintf("orders.%d", i), fmt.Sprintf("o%d", i))
		}
		if _, err := o.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "DUR", DeliverSubject: "deliver.B.dur",
			AckPolicy: jetstream.AckFlowControlPolicy, FlowControl: true, IdleHeartbeat: time.Second, MaxAckPending: 100}); err != nil {
			t.Fatal(err)
		}
		md := mustStream(t, jsb, jetstream.StreamConfig{Name: "MD", Mirror: &jetstream.StreamSource{Name: "ORDERS", External: extA,
			Consumer: &jetstream.StreamConsumerSource{Name: "DUR", DeliverSubject: "deliver.B.dur"}}})
		waitMirror(t, jsb, "MD", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 4 })
		for i := 5; i <= 6; i++ {
			mustPublish(t, jsa, fmt.Sprintf("orders.%d", i), fmt.Sprintf("o%d", i))
		}
		mdi := waitMirror(t, jsb, "MD", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.LastSeq == 6 })
		// The durable is acknowledged by the mirror's flow control replies.
		var ci *jetstream.ConsumerInfo
		waitFor(t, 20*time.Second, "DUR acknowledged", func() bool {
			msg, err := nca.Request("$JS.API.CONSUMER.INFO.ORDERS.DUR", nil, 2*time.Second)
			if err != nil {
				return false
			}
			ci = &jetstream.ConsumerInfo{}
			return json.Unmarshal(msg.Data, ci) == nil && ci.AckFloor.Stream == 6
		})
		out := map[string]any{"durable_mirror_state": stateObs(mdi.State), "durable_mirror": extSourceView(mdi.Mirror),
			"durable_mirror_msgs": mirrorMsgs(t, md, 1, 6),
			"durable_info":        map[string]any{"ack_floor": ci.AckFloor.Stream, "delivered": ci.Delivered.Stream, "pending": ci.NumAckPending}}

		// A durable consumer without the flow_control ack policy is refused, as stream info says.
		if _, err := o.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "EXP", DeliverSubject: "deliver.B.exp",
			AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		mustStream(t, jsb, jetstream.StreamConfig{Name: "MDX", Mirror: &jetstream.StreamSource{Name: "ORDERS", External: extA,
			Consumer: &jetstream.StreamConsumerSource{Name: "EXP", DeliverSubject: "deliver.B.exp"}}})
		mdx := waitMirror(t, jsb, "MDX", 10*time.Second, func(si *jetstream.StreamInfo) bool {
			return si.Mirror != nil && si.Mirror.Error != nil
		})
		out["not_fc"] = extSourceView(mdx.Mirror)

		// An interest stream sourced from B: its messages go once the source has them.
		mustStream(t, jsa, jetstream.StreamConfig{Name: "IQ", Subjects: []string{"iq.>"}, Retention: jetstream.InterestPolicy})
		si := mustStream(t, jsb, jetstream.StreamConfig{Name: "SI", Sources: []*jetstream.StreamSource{{Name: "IQ", External: extA}}})
		// The sourcing consumer is there before the messages (interest) are.
		waitFor(t, 20*time.Second, "IQ's sourcing consumer", func() bool {
			st, err := jsa.Stream(ctx, "IQ")
			return err == nil && st.CachedInfo().State.Consumers == 1
		})
		for i := 1; i <= 3; i++ {
			mustPublish(t, jsa, fmt.Sprintf("iq.%d", i), fmt.Sprintf("i%d", i))
		}
		sii := waitMirror(t, jsb, "SI", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 3 })
		iq := waitMirror(t, jsa, "IQ", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 0 })
		st, _ := jsa.Stream(ctx, "IQ")
		var names []string
		var cfgs []any
		for c := range st.ListConsumers(ctx).Info() {
			names = append(names, c.Name)
			cfgs = append(cfgs, map[string]any{"durable": c.Config.Durable, "ack": c.Config.AckPolicy.String(),
				"deliver_subject": strings.HasPrefix(c.Config.DeliverSubject, "deliver.B.S."), "flow_control": c.Config.FlowControl,
				"hb": c.Config.IdleHeartbeat.String(), "ack_wait": c.Config.AckWait.String(), "max_deliver": c.Config.MaxDeliver,
				"filter": c.Config.FilterSubject, "metadata": c.Config.Metadata["_nats.src.stream"],
				"ack_floor": c.AckFloor.Stream})
		}
		out["interest"] = map[string]any{"origin": stateObs(iq.State), "source": stateObs(sii.State),
			"msgs": mirrorMsgs(t, si, 1, 3), "consumers": names, "configs": cfgs}
		return out
	})
}

// A durable source in the same account, and a source of a stream reached through the JetStream
// domain's API prefix in the same account. nats-server sends that source's consumer create
// request on $JS.hub.API but does not map its own internal publish to its API (the domain's
// mapping serves clients and leaf nodes), so the request goes unanswered there; natsd serves
// $JS.<domain>.API.> to every publisher and the source works. What both must agree on is the
// request itself, compared here; the natsd run also checks the source.
func TestJSExternalDomain(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		conf := fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q, domain: hub }\n", t.TempDir())
		u, _ := startConf(t, tg.name, conf)
		ctx := context.Background()
		nc, js := jsConnect(t, u)
		reqs, err := nc.SubscribeSync("$JS.hub.API.CONSUMER.>")
		if err != nil {
			t.Fatal(err)
		}
		flush(t, nc)
		o := mustStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		for i := 1; i <= 3; i++ {
			mustPublish(t, js, fmt.Sprintf("orders.%d", i), fmt.Sprintf("o%d", i))
		}
		if _, err := o.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "DUR", DeliverSubject: "dur.in",
			AckPolicy: jetstream.AckFlowControlPolicy, FlowControl: true, IdleHeartbeat: time.Second, MaxAckPending: 100}); err != nil {
			t.Fatal(err)
		}
		d := mustStream(t, js, jetstream.StreamConfig{Name: "D", Sources: []*jetstream.StreamSource{
			{Name: "ORDERS", Consumer: &jetstream.StreamConsumerSource{Name: "DUR", DeliverSubject: "dur.in"}}}})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Sources: []*jetstream.StreamSource{
			{Name: "ORDERS", External: &jetstream.ExternalStream{APIPrefix: "$JS.hub.API"}}}})
		req, err := reqs.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("no consumer create request on $JS.hub.API: %v", err)
		}
		var body map[string]any
		if err := json.Unmarshal(req.Data, &body); err != nil {
			t.Fatal(err)
		}
		if c, ok := body["config"].(map[string]any); ok {
			if ds, ok := c["deliver_subject"].(string); ok && strings.HasPrefix(ds, "$JS.S.") {
				c["deliver_subject"] = fmt.Sprintf("$JS.S.<%d>", len(ds)-len("$JS.S."))
			}
		}
		out := map[string]any{"request": map[string]any{"subject": req.Subject, "header": headerObs(req.Header),
			"reply": strings.HasPrefix(req.Reply, "$JSC.R.") && len(req.Reply) == len("$JSC.R.")+8, "body": body}}
		mustPublish(t, js, "orders.4", "o4")
		di := waitMirror(t, js, "D", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 4 })
		var dsrcs []any
		for _, x := range di.Sources {
			dsrcs = append(dsrcs, extSourceView(x))
		}
		out["durable_state"], out["durable_sources"], out["durable_msgs"] = stateObs(di.State), dsrcs, mirrorMsgs(t, d, 1, 4)
		if tg.name != "nats-server" {
			si := waitMirror(t, js, "S", 20*time.Second, func(si *jetstream.StreamInfo) bool { return si.State.Msgs == 4 })
			for q, m := range mirrorMsgs(t, s, 1, 4) {
				mm := m.(map[string]any)
				h, _ := mm["header"].(map[string]any) // nil: the get failed (mm says why)
				src := fmt.Sprint(h["Nats-Stream-Source"])
				if want := fmt.Sprintf("o%d", q+1); mm["data"] != want || !strings.HasPrefix(src, "ORDERS:") || !strings.Contains(src, fmt.Sprintf(" %d ", q+1)) {
					t.Errorf("S %d: %v", q+1, mm)
				}
			}
			if si.Sources[0].Error != nil || si.Sources[0].External == nil {
				t.Errorf("S source: %+v", si.Sources[0])
			}
		}
		return out
	})
}
