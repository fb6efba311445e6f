package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// exporterFamily is one line of testdata/exporter_families.txt.
type exporterFamily struct {
	typ       string
	labelSets map[string]bool // each a sorted, comma-joined label name list
}

func loadExporterFamilies(t *testing.T) map[string]exporterFamily {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "exporter_families.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]exporterFamily{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			t.Fatalf("exporter_families.txt:%d: want <family> <type> <labels>[ | <labels>]: %q", n, line)
		}
		name, typ := fields[0], fields[1]
		if _, dup := out[name]; dup {
			t.Fatalf("exporter_families.txt:%d: %s listed twice", n, name)
		}
		fam := exporterFamily{typ: typ, labelSets: map[string]bool{}}
		for _, set := range strings.Split(strings.Join(fields[2:], " "), "|") {
			labels := strings.Split(strings.TrimSpace(set), ",")
			sort.Strings(labels)
			fam.labelSets[strings.Join(labels, ",")] = true
		}
		out[name] = fam
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func metricLabelSet(m *dto.Metric) string {
	var names []string
	for _, l := range m.Label {
		names = append(names, l.GetName())
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func scrapeMetrics(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	code, _, b := httpGet(t, monURL(s, "/metrics"))
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestMonitorMetricsExporterFamilies scrapes /metrics of a server in a representative state —
// a client with subscriptions and traffic, a route to a second server, JetStream with a stream,
// a mirror, a sourcing stream and a pull consumer that has delivered and been acked, every
// monitoring endpoint hit once — and checks it against prometheus-nats-exporter's families
// (testdata/exporter_families.txt): each is there, with its type and exactly its label names,
// and nothing under gnatsd_ or jetstream_ is there that the list does not have.
func TestMonitorMetricsExporterFamilies(t *testing.T) {
	// natsd runs JetStream on a server without a cluster: one server has JetStream, two others
	// a route between them. The families are checked over both scrapes.
	// ping_interval short on the cluster, for the routes' round-trip times.
	a, _ := startFromConf(t, fmt.Sprintf(`server_name: a
host: 127.0.0.1
port: -1
max_subscriptions: 1000
jetstream { store_dir: %q, domain: hub, sync_interval: 2m }
`, t.TempDir()), func(o *Options) error {
		o.HTTPHost, o.HTTPPort = "127.0.0.1", -1
		return nil
	})
	b, _ := startFromConf(t, `server_name: b
host: 127.0.0.1
port: -1
ping_interval: "100ms"
cluster { name: c, host: 127.0.0.1, port: -1 }
`, func(o *Options) error {
		o.HTTPHost, o.HTTPPort = "127.0.0.1", -1
		return nil
	})
	c, _ := startFromConf(t, fmt.Sprintf(`server_name: c
host: 127.0.0.1
port: -1
ping_interval: "100ms"
cluster { name: c, host: 127.0.0.1, port: -1, routes: ["nats://127.0.0.1:%d"] }
`, b.eng.RouteAddr().Port), nil)
	waitRemotes(t, b, 1)
	waitRemotes(t, c, 1)
	waitFor(t, func() bool {
		rz, _ := b.Routez(nil)
		for _, r := range rz.Routes {
			if r.RTT == "" {
				return false
			}
		}
		return len(rz.Routes) > 0
	})

	var nc *nats.Conn
	for _, s := range []*Server{a, b} {
		nc = connect(t, s.ClientURL(), "m")
		sub, err := nc.SubscribeSync("m.>")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if err := nc.Publish("m.x", []byte("hello")); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 5; i++ {
			if _, err := sub.NextMsg(2 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	nc = connect(t, a.ClientURL(), "js")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "ORDERS", Subjects: []string{"orders.>"}},
		{Name: "ORDERS_MIRROR", Mirror: &jetstream.StreamSource{Name: "ORDERS"}},
		{Name: "ORDERS_AGG", Sources: []*jetstream.StreamSource{{Name: "ORDERS"}}},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("stream %s: %v", cfg.Name, err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := js.Publish(ctx, "orders.new", []byte("order")); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "shipping",
		Description: "ships orders", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range batch.Messages() {
		got = append(got, m)
	}
	if len(got) != 2 {
		t.Fatalf("fetched %d", len(got))
	}
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		for _, n := range []string{"ORDERS_MIRROR", "ORDERS_AGG"} {
			st, err := js.Stream(ctx, n)
			if err != nil || st.CachedInfo().State.Msgs != 3 {
				return false
			}
		}
		return true
	})

	// The exporter reads these endpoints; /varz counts them in http_req_stats.
	for _, s := range []*Server{a, b} {
		for _, p := range []string{"/varz", "/connz", "/routez", "/subsz", "/jsz", "/healthz", "/accountz",
			"/accstatz", "/gatewayz", "/leafz"} {
			if code, _, body := httpGet(t, monURL(s, p)); code != 200 {
				t.Fatalf("%s: %d %s", p, code, body)
			}
		}
	}

	famsA, famsB := scrapeMetrics(t, a), scrapeMetrics(t, b)
	want := loadExporterFamilies(t)
	for name, w := range want {
		if famsA[name] == nil && famsB[name] == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		sets := map[string]bool{}
		for _, f := range []*dto.MetricFamily{famsA[name], famsB[name]} {
			if f == nil {
				continue
			}
			if typ := strings.ToLower(f.GetType().String()); typ != w.typ {
				t.Errorf("%s: type %s, want %s", name, typ, w.typ)
			}
			for _, m := range f.Metric {
				sets[metricLabelSet(m)] = true
			}
		}
		for s := range w.labelSets {
			if !sets[s] {
				t.Errorf("%s: no series with labels {%s} (has %v)", name, s, sets)
			}
		}
		for s := range sets {
			if !w.labelSets[s] {
				t.Errorf("%s: series with labels {%s}, not the exporter's", name, s)
			}
		}
	}
	var extra []string
	for _, fams := range []map[string]*dto.MetricFamily{famsA, famsB} {
		for name, f := range fams {
			if (strings.HasPrefix(name, "gnatsd_") || strings.HasPrefix(name, "jetstream_")) && want[name].typ == "" {
				extra = append(extra, fmt.Sprintf("%s %s %s", name, strings.ToLower(f.GetType().String()), metricLabelSet(f.Metric[0])))
			}
		}
	}
	sort.Strings(extra)
	for _, e := range extra {
		t.Errorf("not in the exporter's list: %s", e)
	}
	t.Logf("%d families checked", len(want))

	// A few values, to see the figures are the right ones.
	find := func(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s", name)
		}
	next:
		for _, m := range f.Metric {
			for k, v := range labels {
				if labelValue(m, k) != v {
					continue next
				}
			}
			return m
		}
		t.Fatalf("%s: no series %v", name, labels)
		return nil
	}
	check := func(fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
		t.Helper()
		if got := metricValue(find(fams, name, labels)); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check(famsB, "gnatsd_varz_routes", nil, float64(b.Varz().Routes))
	check(famsA, "gnatsd_varz_server_name", map[string]string{"value": "a"}, 1)
	check(famsA, "gnatsd_varz_start", nil, float64(a.start.UnixMilli()))
	check(famsA, "gnatsd_varz_jetstream_config_domain", map[string]string{"value": "hub"}, 1)
	check(famsB, "gnatsd_varz_cluster_name", map[string]string{"value": "c"}, 1)
	check(famsA, "gnatsd_connz_num_connections", nil, 2)
	check(famsA, "gnatsd_connz_in_msgs", map[string]string{"name": "m", "kind": "Client", "type": "nats", "name_tag": "$G"}, 5)
	check(famsB, "gnatsd_routez_num_routes", nil, float64(b.Varz().Routes))
	check(famsB, "gnatsd_routez_route_info", map[string]string{"remote_name": "c"}, 1)
	check(famsA, "gnatsd_healthz_status", nil, 0)
	check(famsA, "gnatsd_healthz_status_value", map[string]string{"value": "ok"}, 1)
	check(famsA, "gnatsd_leafz_conn_nodes_total", nil, 0)
	check(famsA, "gnatsd_accountz_is_system", map[string]string{"account_id": "$SYS"}, 1)
	check(famsA, "gnatsd_accstatz_current_connections", map[string]string{"account": "$G"}, 2)
	check(famsA, "jetstream_server_total_streams", map[string]string{"server_name": "a", "domain": "hub", "is_meta_leader": "true"}, 3)
	check(famsA, "jetstream_stream_total_messages", map[string]string{"stream_name": "ORDERS", "is_stream_leader": "true"}, 3)
	check(famsA, "jetstream_stream_mirror_lag", map[string]string{"stream_name": "ORDERS_MIRROR", "mirror_name": "ORDERS"}, 0)
	check(famsA, "jetstream_stream_source_lag", map[string]string{"stream_name": "ORDERS_AGG", "source_name": "ORDERS"}, 0)
	check(famsA, "jetstream_stream_limit_messages", map[string]string{"stream_name": "ORDERS"}, -1)
	check(famsA, "jetstream_consumer_num_ack_pending", map[string]string{"consumer_name": "shipping", "consumer_desc": "ships orders"}, 1)
	check(famsA, "jetstream_consumer_num_pending", map[string]string{"consumer_name": "shipping"}, 1)
	check(famsA, "jetstream_consumer_ack_floor_stream_seq", map[string]string{"consumer_name": "shipping"}, 1)
	check(famsA, "jetstream_consumer_delivered_stream_seq", map[string]string{"consumer_name": "shipping"}, 2)
}

// TestMetricsGenericName: the exporter's flattened field names, http_req_stats' paths included.
func TestMetricsGenericName(t *testing.T) {
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"in_msgs"}, "in_msgs"},
		{[]string{"jetstream", "stats", "api", "total"}, "jetstream_stats_api_total"},
		{[]string{"http_req_stats", "/varz"}, "http_req_stats_varz"},
		{[]string{"http_req_stats", "/debug/vars"}, "http_req_stats_debug_vars"},
		{[]string{"http_req_stats", "/"}, "http_req_stats"},
	} {
		if got := genericName(c.path); got != c.want {
			t.Errorf("%q: %q, want %q", c.path, got, c.want)
		}
	}
	for n, ok := range map[string]bool{"in_msgs": true, "a:b": true, "1x": false, "a-b": false, "": false, "x1": true} {
		if validMetricName(n) != ok {
			t.Errorf("validMetricName(%q) != %v", n, ok)
		}
	}
}
