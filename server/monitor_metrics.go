package server

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// /metrics carries what prometheus-nats-exporter makes of the monitoring endpoints, under its
// names, labels and types, so that dashboards and alerts written for the exporter work
// unchanged: the core families (gnatsd_<endpoint>_<field>) of /varz, /connz (its detailed,
// per-connection form), /routez, /subsz, /healthz (and its js-enabled-only and js-server-only
// forms), /accstatz, /accountz and /leafz, and the JetStream ones (jetstream_server_*,
// jetstream_account_*, jetstream_stream_*, jetstream_consumer_*) of /jsz with everything
// (consumers, config, raft). /gatewayz gives nothing, as it gives the exporter nothing on a
// server without gateways. server_id is the server's id (the exporter's
// -use_internal_server_id; by default it puts the monitoring URL there).
//
// Every figure is read at scrape time from the function that builds the endpoint's JSON;
// nothing is kept in between. server/testdata/exporter_families.txt lists the families and
// TestMonitorMetricsExporterFamilies checks a scrape against it.

// metricsMaxConns bounds the per-connection series: the first page of /connz, as the exporter
// reads it (sorted by cid, nats-server's default page size).
const metricsMaxConns = defaultListSize

// metricsCollector is /metrics' collector. It is unchecked (it describes nothing): the
// exporter's generic families follow the fields the endpoints answer with, and its connz
// families carry a summary series and per-connection series with different labels, which a
// checked collector may not mix.
type metricsCollector struct {
	s *Server

	mu    sync.Mutex
	descs map[string]*prometheus.Desc // the generic families, by name

	conn   connzDescs
	route  routezDescs
	health [3]healthzDescs
	leafN  *prometheus.Desc
	accst  accstatzDescs
	acc    accountzDescs
	js     jszDescs
}

func newMetricsCollector(s *Server) *metricsCollector {
	c := &metricsCollector{s: s, descs: map[string]*prometheus.Desc{}}
	c.conn = newConnzDescs()
	c.route = newRoutezDescs()
	for i, ep := range healthzEndpoints {
		c.health[i] = newHealthzDescs(ep.name)
	}
	c.leafN = prometheus.NewDesc("gnatsd_leafz_conn_nodes_total", "Leaf node connections", []string{"server_id"}, nil)
	c.accst = newAccstatzDescs()
	c.acc = newAccountzDescs()
	c.js = newJszDescs()
	return c
}

// Describe describes nothing: the collector is unchecked.
func (c *metricsCollector) Describe(chan<- *prometheus.Desc) {}

// Collect reads every endpoint once.
func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	e := metricEmitter{ch: ch, sid: c.s.id}
	c.collectVarz(e)
	c.collectConnz(e)
	c.collectRoutez(e)
	c.collectSubsz(e)
	c.collectHealthz(e)
	c.collectLeafz(e)
	c.collectAccstatz(e)
	c.collectAccountz(e)
	c.collectJsz(e)
}

// metricEmitter sends const metrics; sid is the server_id label every family starts with.
type metricEmitter struct {
	ch  chan<- prometheus.Metric
	sid string
}

func (e metricEmitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (e metricEmitter) counter(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func (e metricEmitter) untyped(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.UntypedValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// epochMillis is a time as the exporter exports one: milliseconds since the epoch.
func epochMillis(t time.Time) float64 { return float64(t.UnixMilli()) }

// wholeSeconds is a duration cut to whole seconds, the precision of nats-server's uptime and
// idle strings (which the exporter parses).
func wholeSeconds(d time.Duration) time.Duration { return d.Truncate(time.Second) }

// ---- the exporter's generic families: /varz and /subsz

// genericStringKeys are the only string fields the exporter's generic collector exports: as
// a gauge of 1 with the string in a "value" label, or, when the string is an RFC 3339 time,
// as the time in milliseconds since the epoch.
var genericStringKeys = map[string]bool{
	"server_id": true, "server_name": true, "version": true, "domain": true,
	"leader": true, "name": true, "start": true, "config_load_time": true,
}

// genericSkipped are the flattened fields it leaves out.
var genericSkipped = map[string]bool{
	"leaf": true, "trusted_operators_claim": true, "cluster_tls_timeout": true,
	"cluster_cluster_port": true, "cluster_auth_timeout": true, "gateway_port": true,
	"gateway_auth_timeout": true, "gateway_tls_timeout": true, "gateway_connect_retries": true,
}

// genericName is a field's flattened name: the path joined by "_", "/" (http_req_stats'
// keys are paths) turned into "_", no leading, trailing or doubled "_".
func genericName(path []string) string {
	n := strings.ReplaceAll(strings.Join(path, "_"), "/", "_")
	for strings.Contains(n, "__") {
		n = strings.ReplaceAll(n, "__", "_")
	}
	return strings.Trim(n, "_")
}

// validMetricName is Prometheus' classic metric name syntax.
func validMetricName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		ok := r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// genericDesc is the descriptor of gnatsd_<endpoint>_<field>, with a "value" label for the
// string fields. Its help is the field's name, as the exporter's.
func (c *metricsCollector) genericDesc(endpoint, field string, valueLabel bool) *prometheus.Desc {
	name := "gnatsd_" + endpoint + "_" + field
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.descs[name]; d != nil {
		return d
	}
	labels := []string{"server_id"}
	if valueLabel {
		labels = append(labels, "value")
	}
	d := prometheus.NewDesc(name, field, labels, nil)
	c.descs[name] = d
	return d
}

// collectGeneric exports an endpoint's answer by the exporter's generic rule: each number,
// nested objects flattened into the name, is a gauge; of the strings only genericStringKeys;
// booleans, arrays and nulls never.
func (c *metricsCollector) collectGeneric(e metricEmitter, endpoint string, answer any) {
	b, err := json.Marshal(answer)
	if err != nil {
		return
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return
	}
	seen := map[string]bool{}
	var walk func(path []string, obj map[string]any)
	walk = func(path []string, obj map[string]any) {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(path[:len(path):len(path)], k)
			field := genericName(p)
			if genericSkipped[field] {
				continue
			}
			if nested, ok := obj[k].(map[string]any); ok {
				walk(p, nested)
				continue
			}
			if !validMetricName(field) || seen[field] {
				continue
			}
			switch v := obj[k].(type) {
			case float64:
				seen[field] = true
				e.gauge(c.genericDesc(endpoint, field, false), v, e.sid)
			case string:
				if !genericStringKeys[k] {
					continue
				}
				seen[field] = true
				if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
					e.gauge(c.genericDesc(endpoint, field, false), epochMillis(t), e.sid)
				} else {
					e.gauge(c.genericDesc(endpoint, field, true), 1, e.sid, v)
				}
			}
		}
	}
	walk(nil, doc)
}

func (c *metricsCollector) collectVarz(e metricEmitter) {
	c.collectGeneric(e, "varz", c.s.Varz())
}

func (c *metricsCollector) collectSubsz(e metricEmitter) {
	if sz, err := c.s.Subsz(nil); err == nil {
		c.collectGeneric(e, "subsz", sz)
	}
}

// ---- /routez: the server, and one set of series per route

type routezDescs struct {
	serverID, serverName, num          *prometheus.Desc
	info, rtt, subs, uptime            *prometheus.Desc
	inMsgs, outMsgs, inBytes, outBytes *prometheus.Desc
}

func newRoutezDescs() routezDescs {
	value := []string{"server_id", "value"}
	route := []string{"server_id", "rid"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("gnatsd_routez_"+name, help, labels, nil)
	}
	return routezDescs{
		serverID:   d("server_id", "server_id", value),
		serverName: d("server_name", "server_name", value),
		num:        d("num_routes", "num_routes", []string{"server_id"}),
		info:       d("route_info", "A route, its remote server and account", []string{"server_id", "rid", "remote_id", "remote_name", "account", "ip", "compression"}),
		rtt:        d("route_rtt_seconds", "The route's round-trip time in seconds", route),
		subs:       d("route_subscriptions", "Interest the remote server registered on the route", route),
		uptime:     d("route_uptime_seconds", "Seconds since the route connected", route),
		inMsgs:     d("route_in_msgs", "Messages received from the route", route),
		outMsgs:    d("route_out_msgs", "Messages sent to the route", route),
		inBytes:    d("route_in_bytes", "Payload bytes received from the route", route),
		outBytes:   d("route_out_bytes", "Payload bytes sent to the route", route),
	}
}

func (c *metricsCollector) collectRoutez(e metricEmitter) {
	rz, err := c.s.Routez(nil)
	if err != nil {
		return
	}
	d := &c.route
	e.gauge(d.serverID, 1, e.sid, rz.ID)
	e.gauge(d.serverName, 1, e.sid, rz.Name)
	e.gauge(d.num, float64(rz.NumRoutes), e.sid)
	for _, r := range rz.Routes {
		rid := strconv.FormatUint(r.RID, 10)
		e.gauge(d.info, 1, e.sid, rid, r.RemoteID, r.RemoteName, r.Account, r.IP, r.Compression)
		if r.RTT != "" {
			if rtt, err := time.ParseDuration(r.RTT); err == nil {
				e.gauge(d.rtt, rtt.Seconds(), e.sid, rid)
			}
		}
		e.gauge(d.subs, float64(r.NumSubs), e.sid, rid)
		e.gauge(d.uptime, wholeSeconds(rz.Now.Sub(r.Start)).Seconds(), e.sid, rid)
		e.gauge(d.inMsgs, float64(r.InMsgs), e.sid, rid)
		e.gauge(d.outMsgs, float64(r.OutMsgs), e.sid, rid)
		e.gauge(d.inBytes, float64(r.InBytes), e.sid, rid)
		e.gauge(d.outBytes, float64(r.OutBytes), e.sid, rid)
	}
}

// ---- /healthz, and its js-enabled-only and js-server-only forms

var healthzEndpoints = [...]struct {
	name string
	opts HealthzOptions
}{
	{"healthz", HealthzOptions{}},
	{"healthz_js_enabled_only", HealthzOptions{JSEnabledOnly: true}},
	{"healthz_js_server_only", HealthzOptions{JSServerOnly: true}},
}

type healthzDescs struct{ status, statusValue *prometheus.Desc }

func newHealthzDescs(endpoint string) healthzDescs {
	return healthzDescs{
		status:      prometheus.NewDesc("gnatsd_"+endpoint+"_status", "status", []string{"server_id"}, nil),
		statusValue: prometheus.NewDesc("gnatsd_"+endpoint+"_status_value", "status", []string{"server_id", "value"}, nil),
	}
}

// collectHealthz: <endpoint>_status is 0 when healthy and 1 when not (the exporter kept it
// that way for compatibility); <endpoint>_status_value is 1 when healthy, with the status in
// the value label.
func (c *metricsCollector) collectHealthz(e metricEmitter) {
	for i, ep := range healthzEndpoints {
		q := ep.opts
		hs := c.s.healthz(&q)
		ok := hs.Status == "ok"
		e.gauge(c.health[i].status, b2f(!ok), e.sid)
		e.gauge(c.health[i].statusValue, b2f(ok), e.sid, hs.Status)
	}
}

// ---- /leafz: the count only, with no leaf nodes to detail

func (c *metricsCollector) collectLeafz(e metricEmitter) {
	if lz, err := c.s.Leafz(nil); err == nil {
		e.gauge(c.leafN, float64(lz.NumLeafs), e.sid)
	}
}

// metricsHandler serves /metrics from a registry of its own (not the global one, so that
// several servers in one process, as in tests, do not collide), with the Go runtime and
// process collectors the exporter registers too.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetricsCollector(s))
	reg.MustRegister(collectors.NewGoCollector())
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mon.count(metricsPath)
		h.ServeHTTP(w, r)
	})
}
