package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/natsd/natsd/auth"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func startMonitored(t *testing.T, mod func(o *Options)) *Server {
	t.Helper()
	o := &Options{Host: "127.0.0.1", Port: -1, HTTPPort: -1, NoSigs: true, NoLog: true}
	if mod != nil {
		mod(o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func monURL(s *Server, p string) string {
	return fmt.Sprintf("http://%s%s", s.MonitorAddr().String(), p)
}

func httpGet(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func getJSON(t *testing.T, url string, v any) []byte {
	t.Helper()
	code, h, b := httpGet(t, url)
	if code != http.StatusOK {
		t.Fatalf("%s: status %d: %s", url, code, b)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", url, ct)
	}
	if h.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("%s: no CORS header", url)
	}
	if v != nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s: decode into %T: %v\n%s", url, v, err, b)
		}
	}
	return b
}

func connect(t *testing.T, url, name string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// keySet flattens a JSON document into its key paths (array elements share "[]").
func keySet(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	out := map[string]bool{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.HasPrefix(p, "http_req_stats") {
					continue // keys are request paths
				}
				kp := k
				if p != "" {
					kp = p + "." + k
				}
				out[kp] = true
				walk(kp, e)
			}
		case []any:
			for _, e := range x {
				walk(p+"[]", e)
			}
		}
	}
	walk("", v)
	return out
}

// TestMonitorMatchesNatsServer runs nats-server v2.15.2 in-process next to natsd with the same
// traffic, and checks every endpoint answers with the same JSON keys and decodes into
// nats-server's own types (unknown fields rejected).
func TestMonitorMatchesNatsServer(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, HTTPHost: "127.0.0.1", HTTPPort: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	defer ns.Shutdown()
	s := startMonitored(t, nil)

	traffic := func(url string) {
		sub := connect(t, url, "sub")
		if _, err := sub.QueueSubscribeSync("foo.>", "q"); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.SubscribeSync("bar"); err != nil {
			t.Fatal(err)
		}
		sub.Flush()
		pub := connect(t, url, "pub")
		for i := 0; i < 10; i++ {
			pub.Publish("foo.x", []byte("hello"))
		}
		pub.Flush()
		gone := connect(t, url, "gone")
		gone.Subscribe("baz", func(*nats.Msg) {})
		gone.Flush()
		gone.Close()
	}
	traffic(ns.ClientURL())
	traffic(s.ClientURL())
	waitFor(t, func() bool {
		return s.NumClients() == 2 && ns.NumClients() == 2
	})

	nsURL := func(p string) string { return fmt.Sprintf("http://%s%s", ns.MonitorAddr().String(), p) }
	// Keys nats-server has from parts natsd does not have ($SYS account, JetStream flags).
	allowedMissing := map[string]bool{
		"system_account":                     true,
		"feature_flags":                      true,
		"feature_flags.js_ack_fc_v2":         true,
		"feature_flags.js_api_reply_v2":      true,
		"feature_flags.js_raft_delete_range": true,
		"feature_flags.js_snapshot_sources":  true,
	}
	cases := []struct {
		path string
		into func() any
	}{
		{"/varz", func() any { return &natsserver.Varz{} }},
		{"/connz", func() any { return &natsserver.Connz{} }},
		{"/connz?subs=1", func() any { return &natsserver.Connz{} }},
		{"/connz?subs=detail", func() any { return &natsserver.Connz{} }},
		{"/connz?state=closed&subs=1", func() any { return &natsserver.Connz{} }},
		{"/connz?state=all&sort=msgs_from", func() any { return &natsserver.Connz{} }},
		{"/subsz", func() any { return &natsserver.Subsz{} }},
		{"/subsz?subs=1&test=foo.x", func() any { return &natsserver.Subsz{} }},
		{"/routez", func() any { return &natsserver.Routez{} }},
		{"/gatewayz", func() any { return &natsserver.Gatewayz{} }},
		{"/leafz", func() any { return &natsserver.Leafz{} }},
		{"/accountz", func() any { return &natsserver.Accountz{} }},
		{"/accstatz", func() any { return &natsserver.AccountStatz{} }},
		{"/accstatz?unused=1", func() any { return &natsserver.AccountStatz{} }},
		{"/jsz", func() any { return &natsserver.JSInfo{} }},
		{"/healthz", func() any { return &natsserver.HealthStatus{} }},
		{"/healthz?js-enabled-only=true", func() any { return &natsserver.HealthStatus{} }},
		{"/healthz?js-server-only=1", func() any { return &natsserver.HealthStatus{} }},
	}
	for _, c := range cases {
		theirs := keySet(t, getJSON(t, nsURL(c.path), nil))
		ours := keySet(t, getJSON(t, monURL(s, c.path), c.into()))
		var missing, extra []string
		for k := range theirs {
			if !ours[k] && !allowedMissing[k] {
				missing = append(missing, k)
			}
		}
		for k := range ours {
			// git_commit: release builds of nats-server report it; the in-process one does not.
			if !theirs[k] && !(c.path == "/varz" && k == "git_commit") {
				extra = append(extra, k)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		if len(missing) > 0 || len(extra) > 0 {
			t.Errorf("%s: keys missing %v, extra %v", c.path, missing, extra)
		}
	}
	// Account detail: natsd's $G has no $SYS imports; the rest must decode.
	getJSON(t, monURL(s, "/accountz?acc=$G"), &natsserver.Accountz{})

	// Same answers to bad queries.
	for _, p := range []string{"/connz?state=bogus", "/connz?sort=foo", "/connz?limit=x", "/connz?sort=stop",
		"/connz?cid=-1", "/connz?subs=maybe", "/subsz?test=foo.*", "/subsz?offset=z", "/raftz", "/healthz?stream=x",
		"/accountz?acc=nope", "/accstatz?unused=2x"} {
		c1, _, b1 := httpGet(t, nsURL(p))
		c2, _, b2 := httpGet(t, monURL(s, p))
		if c1 != c2 || (c1 != 200 && !bytes.Equal(b1, b2)) {
			t.Errorf("%s: nats-server %d %q, natsd %d %q", p, c1, b1, c2, b2)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func varz(t *testing.T, s *Server) *natsserver.Varz {
	t.Helper()
	v := &natsserver.Varz{}
	getJSON(t, monURL(s, "/varz"), v)
	return v
}

func connz(t *testing.T, s *Server, q string) *natsserver.Connz {
	t.Helper()
	c := &natsserver.Connz{}
	getJSON(t, monURL(s, "/connz"+q), c)
	return c
}

// TestMonitorFiguresMove checks the counters against known traffic.
func TestMonitorFiguresMove(t *testing.T) {
	s := startMonitored(t, nil)
	v0 := varz(t, s)
	if v0.Connections != 0 || v0.InMsgs != 0 || v0.HTTPPort != s.MonitorAddr().Port || v0.Port != s.Addr().Port {
		t.Fatalf("fresh varz: %+v", v0)
	}
	sub := connect(t, s.ClientURL(), "subscriber")
	s1, _ := sub.SubscribeSync("foo")
	s2, _ := sub.SubscribeSync("foo.*")
	sub.QueueSubscribeSync("foo", "workers")
	sub.Flush()
	pub := connect(t, s.ClientURL(), "publisher")
	const n, size = 50, 100
	payload := bytes.Repeat([]byte("x"), size)
	for i := 0; i < n; i++ {
		pub.Publish("foo", payload)
	}
	pub.Publish("foo.bar", payload)
	pub.Flush()
	for i := 0; i < n; i++ {
		if _, err := s1.NextMsg(2 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s2.NextMsg(2 * time.Second); err != nil {
		t.Fatal(err)
	}

	v := varz(t, s)
	// foo reaches the plain sub and the queue group: 2 deliveries each; foo.bar one.
	if v.InMsgs != n+1 || v.InBytes != (n+1)*size || v.OutMsgs != 2*n+1 || v.OutBytes != (2*n+1)*size {
		t.Fatalf("varz msgs: in %d/%d out %d/%d", v.InMsgs, v.InBytes, v.OutMsgs, v.OutBytes)
	}
	if v.InClientMsgs != v.InMsgs || v.OutClientBytes != v.OutBytes {
		t.Fatalf("client figures differ: %+v", v)
	}
	// The system account's own subscriptions were there before (as in nats-server).
	if v.Connections != 2 || v.TotalConnections != 2 || v.Subscriptions != v0.Subscriptions+3 {
		t.Fatalf("varz conns %d total %d subs %d", v.Connections, v.TotalConnections, v.Subscriptions)
	}
	if v.HTTPReqStats["/varz"] != 2 {
		t.Fatalf("http_req_stats %v", v.HTTPReqStats)
	}
	if v.Mem <= 0 || v.Cores <= 0 || v.Uptime == "" {
		t.Fatalf("process figures: mem %d cores %d", v.Mem, v.Cores)
	}

	cz := connz(t, s, "?subs=1")
	if cz.NumConns != 2 || cz.Total != 2 || len(cz.Conns) != 2 {
		t.Fatalf("connz: %+v", cz)
	}
	byName := map[string]*natsserver.ConnInfo{}
	for _, c := range cz.Conns {
		byName[c.Name] = c
		if c.Kind != "Client" || c.Type != "nats" || c.Lang != "go" || c.Version == "" || c.IP != "127.0.0.1" || c.Port == 0 {
			t.Fatalf("conn info: %+v", c)
		}
		if c.Start.IsZero() || c.LastActivity.Before(c.Start) || c.Uptime == "" || c.Idle == "" {
			t.Fatalf("conn times: %+v", c)
		}
	}
	ps, ss := byName["publisher"], byName["subscriber"]
	if ps == nil || ss == nil {
		t.Fatalf("names: %v", byName)
	}
	if ps.InMsgs != n+1 || ps.InBytes != (n+1)*size || ps.OutMsgs != 0 {
		t.Fatalf("publisher: in %d/%d out %d", ps.InMsgs, ps.InBytes, ps.OutMsgs)
	}
	if ss.OutMsgs != 2*n+1 || ss.OutBytes != (2*n+1)*size || ss.InMsgs != 0 || ss.NumSubs != 3 {
		t.Fatalf("subscriber: out %d/%d in %d subs %d", ss.OutMsgs, ss.OutBytes, ss.InMsgs, ss.NumSubs)
	}
	sort.Strings(ss.Subs)
	if strings.Join(ss.Subs, ",") != "foo,foo,foo.*" {
		t.Fatalf("subscriptions_list %v", ss.Subs)
	}

	// Detail, sorting, paging, cid.
	cz = connz(t, s, "?subs=detail&cid="+fmt.Sprint(ss.Cid))
	if len(cz.Conns) != 1 || cz.Conns[0].Cid != ss.Cid || len(cz.Conns[0].SubsDetail) != 3 {
		t.Fatalf("cid/detail: %+v", cz.Conns)
	}
	var msgs int64
	for _, d := range cz.Conns[0].SubsDetail {
		msgs += d.Msgs
		if d.Cid != ss.Cid || d.Sid == "" {
			t.Fatalf("sub detail %+v", d)
		}
	}
	if msgs != 2*n+1 {
		t.Fatalf("sub detail msgs %d", msgs)
	}
	if cz = connz(t, s, "?sort=msgs_from"); cz.Conns[0].Name != "publisher" {
		t.Fatalf("sort msgs_from: %s first", cz.Conns[0].Name)
	}
	if cz = connz(t, s, "?sort=bytes_to"); cz.Conns[0].Name != "subscriber" {
		t.Fatalf("sort bytes_to: %s first", cz.Conns[0].Name)
	}
	if cz = connz(t, s, "?sort=subs"); cz.Conns[0].Name != "subscriber" {
		t.Fatalf("sort subs: %s first", cz.Conns[0].Name)
	}
	if cz = connz(t, s, "?offset=1&limit=1"); len(cz.Conns) != 1 || cz.Total != 2 || cz.Offset != 1 || cz.Limit != 1 || cz.Conns[0].Cid != ps.Cid {
		t.Fatalf("paging: %+v", cz)
	}
	for _, so := range []string{"cid", "start", "pending", "msgs_to", "bytes_from", "last", "idle", "uptime", "rtt"} {
		connz(t, s, "?sort="+so)
	}

	// /connz asked a PING of clients without an RTT yet; the answer shows up shortly.
	waitFor(t, func() bool {
		for _, c := range connz(t, s, "").Conns {
			if c.RTT == "0s" {
				return false
			}
		}
		return true
	})

	// Subsz, of the global account (the system account has its own).
	sz := &natsserver.Subsz{}
	getJSON(t, monURL(s, "/subsz?subs=1&acc=$G"), sz)
	if sz.NumSubs != 3+4 || sz.Total != 3+4 || len(sz.Subs) != 3+4 || sz.NumMatches != uint64(n+1) {
		// +4: the system account's imports into every account, as nats-server has them.
		t.Fatalf("subsz: %+v %+v", sz.SublistStats, sz.Subs)
	}
	// "foo" is cached on its second miss and hit n-2 times; "foo.bar", seen once, is not
	// cached. foo reaches one plain subscription and one queue group: a fanout of 2.
	if sz.NumCache != 1 || sz.MaxFanout != 2 || sz.AvgFanout != 2 || sz.CacheHitRate != float64(n-2)/float64(n+1) {
		t.Fatalf("subsz cache figures: %+v", sz.SublistStats)
	}
	getJSON(t, monURL(s, "/subsz?subs=1&test=foo.bar"), sz)
	if sz.Total != 1 || sz.Subs[0].Subject != "foo.*" || sz.Subs[0].Account != "$G" {
		t.Fatalf("subsz test: %+v", sz.Subs)
	}
	getJSON(t, monURL(s, "/subsz?subs=1&test=foo"), sz)
	if sz.Total != 2 {
		t.Fatalf("subsz test foo: %+v", sz.Subs)
	}

	// Accounts.
	as := &natsserver.AccountStatz{}
	getJSON(t, monURL(s, "/accstatz"), as)
	if len(as.Accounts) != 1 || as.Accounts[0].Conns != 2 || as.Accounts[0].Received.Msgs != n+1 || as.Accounts[0].Sent.Msgs != 2*n+1 {
		t.Fatalf("accstatz: %+v", as.Accounts)
	}
	az := &natsserver.Accountz{}
	getJSON(t, monURL(s, "/accountz?acc=$G"), az)
	if az.Account == nil || az.Account.ClientCnt != 2 || az.Account.SubCnt != 3+4 {
		t.Fatalf("accountz: %+v", az.Account)
	}

	// Closed connections keep their figures and reason.
	pub.Close()
	waitFor(t, func() bool { return s.NumClients() == 1 })
	cz = connz(t, s, "?state=closed&subs=1")
	if cz.Total != 1 || len(cz.Conns) != 1 {
		t.Fatalf("closed: %+v", cz)
	}
	cc := cz.Conns[0]
	if cc.Cid != ps.Cid || cc.Reason != "Client Closed" || cc.Stop == nil || cc.InMsgs != n+1 || cc.InBytes != (n+1)*size {
		t.Fatalf("closed conn: %+v", cc)
	}
	if cz = connz(t, s, "?state=all"); cz.Total != 2 {
		t.Fatalf("state=all total %d", cz.Total)
	}
	if cz = connz(t, s, "?state=closed&sort=reason"); len(cz.Conns) != 1 {
		t.Fatalf("sort reason: %+v", cz)
	}
	if cz = connz(t, s, "?state=closed&cid="+fmt.Sprint(ps.Cid)); len(cz.Conns) != 1 {
		t.Fatalf("closed by cid: %+v", cz)
	}
	if cz = connz(t, s, "?acc=OTHER"); cz.Total != 0 || len(cz.Conns) != 0 {
		t.Fatalf("other account: %+v", cz)
	}
}

// TestMonitorSlowConsumer drives a subscriber that never reads past max_pending.
func TestMonitorSlowConsumer(t *testing.T) {
	s := startMonitored(t, func(o *Options) {
		o.MaxPending = 256 << 10
		o.MaxPayload = 64 << 10
		o.NoFastProducerStall = true
	})
	raw, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(raw, "CONNECT {\"verbose\":false,\"name\":\"sleepy\"}\r\nSUB slow 1\r\nPING\r\n")
	buf := make([]byte, 4096)
	raw.SetReadDeadline(time.Now().Add(2 * time.Second))
	for got := ""; !strings.Contains(got, "PONG"); {
		k, err := raw.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += string(buf[:k])
	}
	pub := connect(t, s.ClientURL(), "fast")
	payload := make([]byte, 32<<10)
	waitFor(t, func() bool {
		for i := 0; i < 64; i++ {
			pub.Publish("slow", payload)
		}
		pub.Flush()
		return varz(t, s).SlowConsumers >= 1
	})
	v := varz(t, s)
	if v.SlowConsumersStats == nil || v.SlowConsumersStats.Clients != uint64(v.SlowConsumers) {
		t.Fatalf("slow_consumer_stats %+v", v.SlowConsumersStats)
	}
	// The slow consumer is counted as it is cut, a moment before its close is recorded.
	var cz *natsserver.Connz
	waitFor(t, func() bool {
		cz = connz(t, s, "?state=closed")
		return len(cz.Conns) > 0
	})
	if len(cz.Conns) != 1 || !strings.HasPrefix(cz.Conns[0].Reason, "Slow Consumer") || cz.Conns[0].Name != "sleepy" {
		t.Fatalf("closed: %+v", cz.Conns)
	}
}

// TestMonitorMetrics scrapes /metrics with the Prometheus text parser.
func TestMonitorMetrics(t *testing.T) {
	s := startMonitored(t, nil)
	base := float64(varz(t, s).Subscriptions) // the system account's own
	nc := connect(t, s.ClientURL(), "m")
	sub, _ := nc.SubscribeSync("m")
	for i := 0; i < 7; i++ {
		nc.Publish("m", []byte("abc"))
	}
	nc.Flush()
	for i := 0; i < 7; i++ {
		if _, err := sub.NextMsg(2 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	code, h, b := httpGet(t, monURL(s, "/metrics"))
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", code, h.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	val := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 {
			t.Fatalf("no %s", name)
		}
		m := f.Metric[0]
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	want := map[string]float64{
		"gnatsd_varz_in_msgs": 7, "gnatsd_varz_out_msgs": 7, "gnatsd_varz_in_bytes": 21, "gnatsd_varz_out_bytes": 21,
		"gnatsd_varz_connections": 1, "gnatsd_varz_total_connections": 1, "gnatsd_varz_subscriptions": base + 1,
		"gnatsd_connz_num_connections": 1, "gnatsd_connz_in_msgs": 7, "gnatsd_connz_out_bytes": 21,
		"gnatsd_varz_slow_consumers": 0, "gnatsd_subsz_num_subscriptions": base + 1,
	}
	for k, w := range want {
		if got := val(k); got != w {
			t.Errorf("%s = %v, want %v", k, got, w)
		}
	}
	// The exporter's types: its generic /varz families are gauges, only connz's traffic counts
	// are counters.
	if typ := fams["gnatsd_varz_in_msgs"].GetType().String(); typ != "GAUGE" {
		t.Errorf("varz in_msgs type %v", typ)
	}
	if typ := fams["gnatsd_connz_in_msgs"].GetType().String(); typ != "COUNTER" {
		t.Errorf("connz in_msgs type %v", typ)
	}
	if fams["go_goroutines"] == nil || fams["process_resident_memory_bytes"] == nil {
		t.Error("go/process collectors missing")
	}
	for _, m := range fams["gnatsd_connz_in_msgs"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "name" && l.GetValue() != "m" {
				t.Errorf("conn label name %q", l.GetValue())
			}
		}
	}
}

// TestMonitorBasePathAndProfiling checks http_base_path, the index page and pprof.
func TestMonitorBasePathAndProfiling(t *testing.T) {
	s := startMonitored(t, func(o *Options) { o.HTTPBasePath = "mon/"; o.ProfPort = -1 })
	if code, _, _ := httpGet(t, monURL(s, "/varz")); code != 404 {
		t.Fatalf("/varz outside base path: %d", code)
	}
	v := &natsserver.Varz{}
	getJSON(t, monURL(s, "/mon/varz"), v)
	if v.HTTPBasePath != "mon/" {
		t.Fatalf("http_base_path %q", v.HTTPBasePath)
	}
	code, h, b := httpGet(t, monURL(s, "/mon"))
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !bytes.Contains(b, []byte("./connz")) {
		t.Fatalf("index: %d %s", code, b)
	}
	if code, _, _ := httpGet(t, monURL(s, "/mon/debug/pprof/")); code != 200 {
		t.Fatalf("pprof on monitor port: %d", code)
	}
	if code, _, _ := httpGet(t, fmt.Sprintf("http://%s/debug/pprof/goroutine?debug=1", s.ProfilerAddr())); code != 200 {
		t.Fatalf("pprof port: %d", code)
	}
	if code, _, b := httpGet(t, monURL(s, "/mon/stacksz")); code != 200 || !bytes.Contains(b, []byte("goroutine")) {
		t.Fatalf("stacksz: %d", code)
	}
	if code, _, b := httpGet(t, monURL(s, "/mon/debug/vars")); code != 200 || !bytes.Contains(b, []byte("memstats")) {
		t.Fatalf("expvar: %d", code)
	}

	plain := startMonitored(t, nil)
	if code, _, _ := httpGet(t, monURL(plain, "/debug/pprof/")); code != 404 {
		t.Fatalf("pprof without --profile: %d", code)
	}
	if plain.ProfilerAddr() != nil {
		t.Fatal("profiler running without ProfPort")
	}
	off, err := New(&Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(); err != nil {
		t.Fatal(err)
	}
	defer off.Shutdown()
	if off.MonitorAddr() != nil {
		t.Fatal("monitoring on without HTTPPort")
	}
}

// TestMonitorHealthz covers the healthz parameters natsd answers without JetStream.
func TestMonitorHealthz(t *testing.T) {
	s := startMonitored(t, nil)
	for _, q := range []string{"", "?js-enabled-only=true", "?js-server-only=1", "?js-meta-only=1", "?details=1"} {
		code, _, b := httpGet(t, monURL(s, "/healthz"+q))
		if code != 200 || string(b) != `{"status":"ok"}` {
			t.Fatalf("healthz%s: %d %s", q, code, b)
		}
	}
	if code, _, _ := httpGet(t, monURL(s, "/healthz?js-enabled-only=nope")); code != 400 {
		t.Fatalf("bad bool: %d", code)
	}
	if code, _, b := httpGet(t, monURL(s, "/healthz?consumer=c")); code != 400 || !bytes.Contains(b, []byte(`must not be empty when checking consumer health`)) {
		t.Fatalf("consumer without stream: %d %s", code, b)
	}
}

// TestMonitorTLSMatchesNatsServer: with TLS (client certificates verified) and users, /varz
// and /connz carry the same keys as nats-server's for the same traffic, and the same values
// where the traffic fixes them: TLS version and suite, the client's certificate chain, the
// authorized user, the server certificate's expiry.
func TestMonitorTLSMatchesNatsServer(t *testing.T) {
	p := newPKI(t)
	ns := startNatsServer(t, &natsserver.Options{Host: "127.0.0.1", Port: -1, HTTPHost: "127.0.0.1", HTTPPort: -1,
		TLS: true, TLSVerify: true, TLSTimeout: 2, TLSConfig: p.verifyingConfig(),
		Users: []*natsserver.User{{Username: "ann", Password: "pw"}, {Username: "ben", Password: "pw"}}})
	s := startMonitored(t, func(o *Options) {
		o.TLSConfig, o.TLSVerify = p.serverConfig(), true
		o.Users = []*auth.User{{Username: "ann", Password: "pw"}, {Username: "ben", Password: "pw"}}
	})
	traffic := func(url string) {
		for _, u := range []string{"ann", "ben"} {
			nc, err := nats.Connect(url, p.root(), clientCert(p.client), nats.UserInfo(u, "pw"), nats.Name(u))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			if _, err := nc.SubscribeSync("tls." + u); err != nil {
				t.Fatal(err)
			}
			_ = nc.Publish("tls."+u, []byte("x"))
			_ = nc.Flush()
		}
		gone, err := nats.Connect(url, p.root(), clientCert(p.client), nats.UserInfo("ben", "pw"), nats.Name("gone"))
		if err != nil {
			t.Fatal(err)
		}
		gone.Close()
	}
	traffic(ns.ClientURL())
	traffic(s.ClientURL())
	waitFor(t, func() bool { return s.NumClients() == 2 && ns.NumClients() == 2 })
	nsURL := func(path string) string { return fmt.Sprintf("http://%s%s", ns.MonitorAddr().String(), path) }
	for _, path := range []string{"/varz", "/connz?auth=1", "/connz?state=closed&auth=1", "/connz"} {
		tb, ob := getJSON(t, nsURL(path), nil), getJSON(t, monURL(s, path), nil)
		theirs, ours := keySet(t, tb), keySet(t, ob)
		var missing, extra []string
		for k := range theirs {
			if !ours[k] && k != "system_account" && !strings.HasPrefix(k, "feature_flags") {
				missing = append(missing, k)
			}
		}
		for k := range ours {
			if !theirs[k] && k != "git_commit" {
				extra = append(extra, k)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		if len(missing) > 0 || len(extra) > 0 {
			t.Errorf("%s: keys missing %v, extra %v", path, missing, extra)
		}
	}
	var tv, ov natsserver.Varz
	getJSON(t, nsURL("/varz"), &tv)
	getJSON(t, monURL(s, "/varz"), &ov)
	if ov.TLSRequired != tv.TLSRequired || ov.TLSVerify != tv.TLSVerify || ov.AuthRequired != tv.AuthRequired ||
		!ov.TLSCertNotAfter.Equal(tv.TLSCertNotAfter) || ov.TLSTimeout != tv.TLSTimeout {
		t.Errorf("varz TLS/auth: nats-server %v %v %v %v %v, natsd %v %v %v %v %v",
			tv.TLSRequired, tv.TLSVerify, tv.AuthRequired, tv.TLSCertNotAfter, tv.TLSTimeout,
			ov.TLSRequired, ov.TLSVerify, ov.AuthRequired, ov.TLSCertNotAfter, ov.TLSTimeout)
	}
	for _, path := range []string{"/connz?auth=1&sort=cid", "/connz?state=closed&auth=1"} {
		var tc, oc natsserver.Connz
		getJSON(t, nsURL(path), &tc)
		getJSON(t, monURL(s, path), &oc)
		if len(tc.Conns) != len(oc.Conns) {
			t.Fatalf("%s: %d connections against %d", path, len(oc.Conns), len(tc.Conns))
		}
		for i := range tc.Conns {
			a, b := tc.Conns[i], oc.Conns[i]
			pa, _ := json.Marshal(a.TLSPeerCerts)
			pb, _ := json.Marshal(b.TLSPeerCerts)
			if a.TLSVersion != b.TLSVersion || a.TLSCipher != b.TLSCipher || a.AuthorizedUser != b.AuthorizedUser ||
				a.Name != b.Name || !bytes.Equal(pa, pb) || b.RTT == "" {
				t.Errorf("%s conn %d: nats-server %s %s %s %s %s, natsd %s %s %s %s %s rtt %q", path, i,
					a.TLSVersion, a.TLSCipher, a.AuthorizedUser, a.Name, pa, b.TLSVersion, b.TLSCipher, b.AuthorizedUser, b.Name, pb, b.RTT)
			}
		}
	}
}

// TestMonitorConfigLoadTime: /varz config_load_time moves with a reload, as nats-server's.
func TestMonitorConfigLoadTime(t *testing.T) {
	s, _ := startFromConf(t, "host: 127.0.0.1\nport: -1\nhttp: \"127.0.0.1:-1\"\n", nil)
	before := varz(t, s).ConfigLoadTime
	time.Sleep(10 * time.Millisecond)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if after := varz(t, s).ConfigLoadTime; !after.After(before) {
		t.Errorf("config_load_time %v not moved by a reload (was %v)", after, before)
	}
}
