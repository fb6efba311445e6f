package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsPair is nats-server v2.15.2 and natsd, both from sysCompatConfig (a system account SYS,
// clients in $G) with JetStream on their own temporary store directories, and the same
// streams with the same messages.
type jsPair struct {
	ns            *natsserver.Server
	s             *Server
	nsDir, sDir   string
	nsSys, ourSys *nats.Conn
}

// jsVariant is how both servers' JetStream is configured.
type jsVariant struct {
	name               string
	domain             string
	syncInterval       time.Duration
	maxMemory, maxFile int64 // max_memory_store, max_file_store
	maxAckPending      int   // limits { max_ack_pending }
	maxRequestBatch    int   // limits { max_request_batch }
}

func startJSPair(t *testing.T, v jsVariant) *jsPair {
	t.Helper()
	p := &jsPair{nsDir: t.TempDir(), sDir: t.TempDir()}
	conf := filepath.Join(t.TempDir(), "js.conf")
	if err := os.WriteFile(conf, []byte(sysCompatConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	nopts, err := natsserver.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	nopts.ConfigFile = ""
	nopts.HTTPHost, nopts.HTTPPort = "127.0.0.1", -1
	nopts.JetStream, nopts.StoreDir = true, p.nsDir
	nopts.JetStreamDomain, nopts.SyncInterval = v.domain, v.syncInterval
	nopts.JetStreamMaxMemory, nopts.JetStreamMaxStore = v.maxMemory, v.maxFile
	nopts.JetStreamLimits.MaxAckPending, nopts.JetStreamLimits.MaxRequestBatch = v.maxAckPending, v.maxRequestBatch
	p.ns = startNatsServer(t, nopts)

	o := &Options{}
	if _, err := o.ProcessConfigFile(conf); err != nil {
		t.Fatal(err)
	}
	o.NoLog, o.NoSigs, o.HTTPHost, o.HTTPPort = true, true, "127.0.0.1", -1
	o.ConfigFile = ""
	o.JetStream, o.StoreDir = true, p.sDir
	o.JetStreamDomain, o.SyncInterval = v.domain, v.syncInterval
	o.JetStreamMaxMemory, o.JetStreamMaxStore = v.maxMemory, v.maxFile
	o.JetStreamLimits.MaxAckPending, o.JetStreamLimits.MaxRequestBatch = v.maxAckPending, v.maxRequestBatch
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	p.s = s

	for _, c := range []struct {
		url string
		dst **nats.Conn
	}{{p.ns.ClientURL(), &p.nsSys}, {s.ClientURL(), &p.ourSys}} {
		nc, err := nats.Connect(c.url, nats.UserInfo("sys", "pass"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		*c.dst = nc
		jsStreams(t, strings.Replace(c.url, "nats://", "nats://g:g@", 1))
	}
	return p
}

// jsStreams creates a file stream (with a max_bytes reservation) and a memory stream, and
// publishes a few messages to each, every one acknowledged.
func jsStreams(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "ORDERS", Subjects: []string{"orders.>"}, MaxBytes: 10 << 20},
		{Name: "MEM", Subjects: []string{"mem.*"}, Storage: jetstream.MemoryStorage, MaxBytes: 1 << 20},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("orders.%d", i), []byte("order payload")); err != nil {
			t.Fatal(err)
		}
	}
	for _, subj := range []string{"mem.a", "mem.b"} {
		if _, err := js.Publish(ctx, subj, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	// A consumer with one message acknowledged and one pending, for consumer_detail and
	// the consumer health check.
	c, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	first := true
	for m := range b.Messages() {
		if first {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
			first = false
		}
	}
}

// normDoc decodes a JSON document (numbers kept exact) with every stream_detail list sorted
// by name: nats-server lists an account's streams in map order.
func normDoc(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if l, ok := e.([]any); ok && k == "stream_detail" {
					sort.Slice(l, func(i, j int) bool {
						return fmt.Sprint(l[i].(map[string]any)["name"]) < fmt.Sprint(l[j].(map[string]any)["name"])
					})
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return v
}

// flatDoc flattens a document into path → value (array elements by index), the leaves
// only; an empty object or list is a leaf too.
func flatDoc(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		join := func(k string) string {
			if p == "" {
				return k
			}
			return p + "." + k
		}
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				out[p] = "{}"
			}
			for k, e := range x {
				walk(join(k), e)
			}
		case []any:
			if len(x) == 0 {
				out[p] = "[]"
			}
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", p, i), e)
			}
		default:
			out[p] = fmt.Sprint(x)
		}
	}
	walk("", normDoc(t, b))
	return out
}

// jsVolatile are the paths whose values differ between any two servers: identities, clocks,
// the temporary store directories (checked apart), free disk space, and the server name each
// stream's cluster leader is.
var jsVolatile = regexp.MustCompile(`(^|\.)(server_id|now|created|ts|first_ts|last_ts|time|seq|id|name|` +
	`max_storage|store_dir|leader|start|inflight|last_active)$`)

// natsdChoice rewrites nats-server's flattened answer into what natsd answers by design:
// with no sync_interval set, natsd syncs before acknowledging (sync_always) where
// nats-server syncs every 2 minutes; the only capability natsd's ServerInfo flags is
// JetStream (nats-server adds two clustering ones); and it has no feature flags. Byte
// figures are the same: both stores count nats-server's message sizes.
func natsdChoice(v jsVariant, theirs map[string]string) {
	for k, val := range theirs {
		switch {
		case strings.Contains(k, "feature_flags"):
			delete(theirs, k)
		case strings.HasSuffix(k, "config.storage"): // a stream's storage type
		case v.syncInterval == 0 && strings.HasSuffix(k, "config.sync_interval"):
			if val != "120000000000" {
				panic(fmt.Sprintf("nats-server's default sync_interval is %s", val))
			}
			delete(theirs, k)
			theirs[strings.TrimSuffix(k, "sync_interval")+"sync_always"] = "true"
		case k == "server.flags":
			if val != "7" {
				panic("nats-server's flags are " + val)
			}
			theirs[k] = "1"
		}
	}
}

// compareJSDocs compares two answers, the parts under the given prefixes (all without): the
// same leaves, the same values but for the volatile ones (a stream's or account's name
// stays compared, as do all figures).
func compareJSDocs(t *testing.T, v jsVariant, what string, tb, ob []byte, prefixes ...string) {
	t.Helper()
	theirs, ours := flatDoc(t, tb), flatDoc(t, ob)
	natsdChoice(v, theirs)
	keep := func(k string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
		return len(prefixes) == 0
	}
	var diff []string
	for k, tv := range theirs {
		if !keep(k) {
			continue
		}
		ov, ok := ours[k]
		switch {
		case !ok:
			diff = append(diff, "missing "+k)
		case tv != ov && (!jsVolatile.MatchString(k) || strings.HasSuffix(k, "stream_detail[0].name") ||
			strings.HasSuffix(k, "stream_detail[1].name") || strings.HasSuffix(k, "account_details[0].name")):
			diff = append(diff, fmt.Sprintf("%s: nats-server %s, natsd %s", k, tv, ov))
		}
	}
	for k := range ours {
		if _, ok := theirs[k]; !ok && keep(k) {
			diff = append(diff, "extra "+k)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("%s: %d differences:\n  %s\nnats-server: %s\nnatsd: %s", what, len(diff), strings.Join(diff, "\n  "), tb, ob)
	} else if os.Getenv("JSZ_DUMP") != "" {
		t.Logf("%s\nnats-server: %s\nnatsd: %s", what, tb, ob)
	}
}

// checkStoreDirs checks every store_dir an answer shows is the server's <store_dir>/jetstream.
func checkStoreDirs(t *testing.T, what string, b []byte, dir string) {
	t.Helper()
	for k, v := range flatDoc(t, b) {
		if strings.HasSuffix(k, "store_dir") && v != filepath.Join(dir, "jetstream") {
			t.Errorf("%s: %s = %q, want %q", what, k, v, filepath.Join(dir, "jetstream"))
		}
	}
}

var jsVariants = []jsVariant{
	{name: "defaults"},
	{name: "domain+sync_interval", domain: "hub", syncInterval: time.Minute},
	{name: "max_stores+limits", maxMemory: 512 << 20, maxFile: 1 << 30, maxAckPending: 500, maxRequestBatch: 50},
}

// TestJszMatchesNatsServer compares natsd's JetStream monitoring with nats-server's over HTTP:
// /varz "jetstream", /jsz with its options, /healthz's JetStream checks and /accountz's
// jetstream_enabled, after the same streams and messages. natsd's answers must decode into
// nats-server's own types with unknown fields rejected, and have nats-server's keys and
// values but for the volatile ones.
func TestJszMatchesNatsServer(t *testing.T) {
	for _, v := range jsVariants {
		t.Run(v.name, func(t *testing.T) {
			p := startJSPair(t, v)
			nsURL := func(q string) string { return fmt.Sprintf("http://%s%s", p.ns.MonitorAddr(), q) }
			cases := []struct {
				path     string
				into     func() any
				prefixes []string // the parts compared (none: all)
			}{
				{"/varz", func() any { return &natsserver.Varz{} }, []string{"jetstream."}},
				{"/jsz", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?accounts=true", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?accounts=true&streams=true", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?streams=true&config=true", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?consumers=true&config=true", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?acc=%24G&streams=true", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?acc=SYS&streams=true", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?accounts=true&offset=1", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?accounts=true&limit=-1", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?leader-only=true&raft=true&streams=true", func() any { return &natsserver.JSInfo{} }, nil},
				{"/jsz?stream-leader-only=true&streams=true", func() any { return &natsserver.JSInfo{} }, nil},
				{"/accountz?acc=%24G", func() any { return &natsserver.Accountz{} }, []string{"account_detail.jetstream_enabled"}},
				{"/accountz?acc=SYS", func() any { return &natsserver.Accountz{} }, []string{"account_detail.jetstream_enabled"}},
			}
			for _, c := range cases {
				t.Run(c.path, func(t *testing.T) {
					tb := getJSON(t, nsURL(c.path), c.into())
					ob := getJSON(t, monURL(p.s, c.path), c.into())
					checkStoreDirs(t, "nats-server", tb, p.nsDir)
					checkStoreDirs(t, "natsd", ob, p.sDir)
					compareJSDocs(t, v, c.path, tb, ob, c.prefixes...)
				})
			}
			// Health checks and bad queries: the same status and body.
			for _, q := range []string{
				"/healthz", "/healthz?js-enabled-only=true", "/healthz?js-server-only=true", "/healthz?js-meta-only=true",
				"/healthz?account=%24G", "/healthz?account=%24G&stream=ORDERS", "/healthz?account=%24G&stream=NOPE",
				"/healthz?account=NOPE", "/healthz?account=NOPE&details=true", "/healthz?account=%24G&stream=NOPE&details=1",
				"/healthz?account=%24G&stream=ORDERS&consumer=C", "/healthz?account=%24G&stream=ORDERS&consumer=C&details=true",
				"/healthz?account=%24G&stream=ORDERS&consumer=NOPE", "/healthz?account=%24G&stream=ORDERS&consumer=NOPE&details=true",
				"/healthz?stream=ORDERS", "/healthz?details=true",
				"/jsz?limit=x", "/jsz?accounts=maybe", "/jsz?offset=1.5&accounts=x",
			} {
				c1, _, b1 := httpGet(t, nsURL(q))
				c2, _, b2 := httpGet(t, monURL(p.s, q))
				if c1 != c2 || !bytes.Equal(b1, b2) {
					t.Errorf("%s: nats-server %d %s, natsd %d %s", q, c1, b1, c2, b2)
				}
			}
		})
	}
}

// TestJszSysMatchesNatsServer compares the $SYS requests that report JetStream, through each
// server's own system account: JSZ (server and account), STATSZ's "jetstream" and the
// ServerInfo every answer carries (jetstream, flags, domain), HEALTHZ, and the domain filter.
func TestJszSysMatchesNatsServer(t *testing.T) {
	for _, v := range jsVariants {
		t.Run(v.name, func(t *testing.T) {
			p := startJSPair(t, v)
			otherDomain := `{"domain":"elsewhere"}`
			ourDomain := fmt.Sprintf(`{"domain":%q}`, v.domain)
			jsz := func() any { return &natsserver.ServerAPIJszResponse{} }
			accJsz := func() any { return &apiResp[natsserver.AccountDetail]{} }
			cases := []struct {
				subject, body string
				into          func() any // nil: no answer
				prefixes      []string   // the parts compared (none: all)
			}{
				{"$SYS.REQ.SERVER.PING.JSZ", "", jsz, nil},
				{"$SYS.REQ.SERVER.%ID%.JSZ", `{"accounts":true,"streams":true,"config":true}`, jsz, nil},
				{"$SYS.REQ.SERVER.PING.JSZ", `{"leader_only":true,"account":"$G"}`, jsz, nil},
				{"$SYS.REQ.SERVER.PING.JSZ", `{"streams":true,"offset":3}`, jsz, nil},
				{"$SYS.REQ.ACCOUNT.$G.JSZ", "", accJsz, nil},
				{"$SYS.REQ.ACCOUNT.$G.JSZ", `{"streams":true,"config":true}`, accJsz, nil},
				{"$SYS.REQ.ACCOUNT.SYS.JSZ", "", accJsz, nil},
				{"$SYS.REQ.ACCOUNT.nope.JSZ", `{"streams":true}`, accJsz, nil},
				{"$SYS.REQ.SERVER.PING.STATSZ", "", func() any { return &natsserver.ServerStatsMsg{} }, []string{"server.", "statsz.jetstream."}},
				{"$SYS.REQ.SERVER.PING", "", func() any { return &natsserver.ServerStatsMsg{} }, []string{"server."}},
				{"$SYS.REQ.SERVER.PING.VARZ", "", func() any { return &natsserver.ServerAPIVarzResponse{} }, []string{"server."}},
				{"$SYS.REQ.SERVER.PING.HEALTHZ", `{"account":"$G","stream":"ORDERS"}`, func() any { return &natsserver.ServerAPIHealthzResponse{} }, nil},
				{"$SYS.REQ.SERVER.PING.HEALTHZ", `{"account":"$G","stream":"NOPE","details":true}`, func() any { return &natsserver.ServerAPIHealthzResponse{} }, nil},
				{"$SYS.REQ.ACCOUNT.$G.INFO", "", func() any { return &apiResp[natsserver.AccountInfo]{} }, []string{"data.jetstream_enabled"}},
				{"$SYS.REQ.SERVER.PING.VARZ", otherDomain, nil, nil},
				{"$SYS.REQ.SERVER.PING.JSZ", ourDomain, jsz, []string{"server."}},
			}
			for _, c := range cases {
				if c.subject == "$SYS.REQ.SERVER.PING.JSZ" && c.body == ourDomain && v.domain == "" {
					c.into = jsz // no domain filter at all
				}
				t.Run(c.subject+" "+c.body, func(t *testing.T) {
					wait := 2 * time.Second
					if c.into == nil {
						wait = 300 * time.Millisecond
					}
					ask := func(nc *nats.Conn, id string) []byte {
						m, err := nc.Request(strings.Replace(c.subject, "%ID%", id, 1), []byte(c.body), wait)
						if err != nil {
							if errors.Is(err, nats.ErrTimeout) {
								return nil
							}
							t.Fatal(err)
						}
						return m.Data
					}
					tb, ob := ask(p.nsSys, p.ns.ID()), ask(p.ourSys, p.s.ID())
					if c.into == nil {
						if tb != nil || ob != nil {
							t.Fatalf("answers: nats-server %s, natsd %s", tb, ob)
						}
						return
					}
					if tb == nil || ob == nil {
						t.Fatalf("answers: nats-server %s, natsd %s", tb, ob)
					}
					decodeStrict(t, "nats-server", tb, c.into())
					decodeStrict(t, "natsd", ob, c.into())
					checkStoreDirs(t, "nats-server", tb, p.nsDir)
					checkStoreDirs(t, "natsd", ob, p.sDir)
					compareJSDocs(t, v, c.subject+" "+c.body, tb, ob, c.prefixes...)
				})
			}
		})
	}
}

// TestJszDisabledAndStreamLost covers what the comparisons above cannot set up the same way
// on both servers: JetStream off (disabled, and an account JSZ error), and a stream left on
// disk that natsd did not recover, which /healthz must report.
func TestJszDisabledAndStreamLost(t *testing.T) {
	off := startMonitored(t, nil)
	jsi := &natsserver.JSInfo{}
	getJSON(t, monURL(off, "/jsz?accounts=true&streams=true"), jsi)
	if !jsi.Disabled || jsi.Limits != nil || len(jsi.AccountDetails) != 0 {
		t.Fatalf("jsz without JetStream: %+v", jsi)
	}
	if v := varz(t, off); v.JetStream.Config != nil || v.JetStream.Stats != nil || v.JetStream.Limits != nil {
		t.Fatalf("varz jetstream without JetStream: %+v", v.JetStream)
	}
	if _, err := off.JszAccount(&JSzOptions{Account: "$G"}); err == nil || err.Error() != "jetstream not enabled" {
		t.Fatalf("JszAccount without JetStream: %v", err)
	}

	dir := t.TempDir()
	// A stream directory whose metadata does not read (not one a cut-short create left,
	// which recovery removes): recovery skips it with a warning.
	broken := filepath.Join(dir, "jetstream", "$G", "streams", "BROKEN")
	if err := os.MkdirAll(broken, 0o750); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"meta.inf": "{", "meta.sum": "00"} {
		if err := os.WriteFile(filepath.Join(broken, name), []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	s := startMonitored(t, func(o *Options) { o.JetStream, o.StoreDir = true, dir })
	for _, c := range []struct {
		q    string
		code int
		body string
	}{
		{"", 503, `{"status":"unavailable","error":"JetStream stream '$G \u003e BROKEN' could not be recovered"}`},
		{"?details=true", 503, `{"status":"error","errors":[{"type":"STREAM","account":"$G","stream":"BROKEN","error":"JetStream stream '$G \u003e BROKEN' could not be recovered"}]}`},
		{"?js-enabled-only=true", 200, `{"status":"ok"}`},
		{"?js-server-only=true", 200, `{"status":"ok"}`},
	} {
		code, _, b := httpGet(t, monURL(s, "/healthz"+c.q))
		if code != c.code || string(b) != c.body {
			t.Errorf("healthz%s: %d %s, want %d %s", c.q, code, b, c.code, c.body)
		}
	}
	if code, _, b := httpGet(t, monURL(s, "/jsz?leader-only=true")); code != http.StatusOK {
		t.Errorf("jsz leader-only on a standalone server: %d %s", code, b)
	}
}
