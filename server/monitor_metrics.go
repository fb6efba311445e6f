package server

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/natsd/natsd/loop"
)

// Prometheus metrics carry the /varz and /connz figures under the names
// prometheus-nats-exporter gives them (gnatsd_varz_*, gnatsd_connz_*), so existing dashboards
// work unchanged. Collectors read the figures at scrape time; nothing is kept in between.

// metricsMaxConns bounds the per-connection series, as /connz's default page does.
const metricsMaxConns = defaultListSize

type metricDef struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(v *Varz) float64
}

type serverCollector struct {
	s    *Server
	varz []metricDef

	connzNum, connzTotal                         *prometheus.Desc
	connIn, connOut, connInB, connOutB, connPend *prometheus.Desc
	connSubs                                     *prometheus.Desc
	subszNum, subszCache, subszInserts           *prometheus.Desc
	subszRemoves, subszMatches                   *prometheus.Desc
	routezNum                                    *prometheus.Desc
	routeIn, routeOut, routeInB, routeOutB       *prometheus.Desc
	routePend, routeSubs                         *prometheus.Desc
}

func newServerCollector(s *Server) *serverCollector {
	sid := prometheus.Labels{"server_id": s.id}
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	def := func(name, help string, kind prometheus.ValueType, f func(v *Varz) float64) metricDef {
		return metricDef{prometheus.NewDesc("gnatsd_varz_"+name, help, nil, sid), kind, f}
	}
	sc := &serverCollector{s: s}
	sc.varz = []metricDef{
		def("connections", "Current client connections", g, func(v *Varz) float64 { return float64(v.Connections) }),
		def("total_connections", "Client connections since start", c, func(v *Varz) float64 { return float64(v.TotalConnections) }),
		def("subscriptions", "Current subscriptions", g, func(v *Varz) float64 { return float64(v.Subscriptions) }),
		def("in_msgs", "Messages received", c, func(v *Varz) float64 { return float64(v.InMsgs) }),
		def("in_bytes", "Payload bytes received", c, func(v *Varz) float64 { return float64(v.InBytes) }),
		def("out_msgs", "Messages sent", c, func(v *Varz) float64 { return float64(v.OutMsgs) }),
		def("out_bytes", "Payload bytes sent", c, func(v *Varz) float64 { return float64(v.OutBytes) }),
		def("in_client_msgs", "Messages received from clients", c, func(v *Varz) float64 { return float64(v.InClientMsgs) }),
		def("in_client_bytes", "Payload bytes received from clients", c, func(v *Varz) float64 { return float64(v.InClientBytes) }),
		def("out_client_msgs", "Messages sent to clients", c, func(v *Varz) float64 { return float64(v.OutClientMsgs) }),
		def("out_client_bytes", "Payload bytes sent to clients", c, func(v *Varz) float64 { return float64(v.OutClientBytes) }),
		def("slow_consumers", "Connections closed as slow consumers", c, func(v *Varz) float64 { return float64(v.SlowConsumers) }),
		def("stale_connections", "Connections closed as stale", c, func(v *Varz) float64 { return float64(v.StaleConnections) }),
		def("stalled_clients", "Times a fast producer was stalled", c, func(v *Varz) float64 { return float64(v.StalledClients) }),
		def("routes", "Connected routes", g, func(v *Varz) float64 { return float64(v.Routes) }),
		def("remotes", "Configured route remotes", g, func(v *Varz) float64 { return float64(v.Remotes) }),
		def("leafnodes", "Connected leaf nodes", g, func(v *Varz) float64 { return float64(v.Leafs) }),
		def("mem", "Resident memory in bytes", g, func(v *Varz) float64 { return float64(v.Mem) }),
		def("cpu", "CPU use in percent of one core", g, func(v *Varz) float64 { return v.CPU }),
		def("cores", "Cores available", g, func(v *Varz) float64 { return float64(v.Cores) }),
		def("gomaxprocs", "GOMAXPROCS", g, func(v *Varz) float64 { return float64(v.MaxProcs) }),
		def("max_connections", "max_connections", g, func(v *Varz) float64 { return float64(v.MaxConn) }),
		def("max_payload", "max_payload", g, func(v *Varz) float64 { return float64(v.MaxPayload) }),
		def("max_pending", "max_pending", g, func(v *Varz) float64 { return float64(v.MaxPending) }),
		def("max_control_line", "max_control_line", g, func(v *Varz) float64 { return float64(v.MaxControlLine) }),
		def("ping_interval", "ping_interval in nanoseconds", g, func(v *Varz) float64 { return float64(v.PingInterval) }),
		def("ping_max", "ping_max", g, func(v *Varz) float64 { return float64(v.MaxPingsOut) }),
		def("write_deadline", "write_deadline in nanoseconds", g, func(v *Varz) float64 { return float64(v.WriteDeadline) }),
		def("auth_timeout", "auth_timeout in seconds", g, func(v *Varz) float64 { return v.AuthTimeout }),
		def("tls_timeout", "TLS handshake timeout in seconds", g, func(v *Varz) float64 { return v.TLSTimeout }),
		def("port", "Client port", g, func(v *Varz) float64 { return float64(v.Port) }),
		def("start", "Start time, unix seconds", g, func(v *Varz) float64 { return float64(v.Start.UnixNano()) / 1e9 }),
	}
	sc.connzNum = prometheus.NewDesc("gnatsd_connz_num_connections", "Open client connections", nil, sid)
	sc.connzTotal = prometheus.NewDesc("gnatsd_connz_total", "Open client connections", nil, sid)
	conn := []string{"cid", "name", "lang", "version", "ip"}
	sc.connIn = prometheus.NewDesc("gnatsd_connz_in_msgs", "Messages received from the connection", conn, sid)
	sc.connOut = prometheus.NewDesc("gnatsd_connz_out_msgs", "Messages sent to the connection", conn, sid)
	sc.connInB = prometheus.NewDesc("gnatsd_connz_in_bytes", "Payload bytes received from the connection", conn, sid)
	sc.connOutB = prometheus.NewDesc("gnatsd_connz_out_bytes", "Payload bytes sent to the connection", conn, sid)
	sc.connPend = prometheus.NewDesc("gnatsd_connz_pending_bytes", "Bytes queued for the connection", conn, sid)
	sc.connSubs = prometheus.NewDesc("gnatsd_connz_subscriptions", "Subscriptions of the connection", conn, sid)
	sc.subszNum = prometheus.NewDesc("gnatsd_subsz_num_subscriptions", "Subscriptions", nil, sid)
	sc.subszCache = prometheus.NewDesc("gnatsd_subsz_num_cache", "Subjects in the match caches", nil, sid)
	sc.subszInserts = prometheus.NewDesc("gnatsd_subsz_num_inserts", "Subscriptions ever added", nil, sid)
	sc.subszRemoves = prometheus.NewDesc("gnatsd_subsz_num_removes", "Subscriptions ever removed", nil, sid)
	sc.subszMatches = prometheus.NewDesc("gnatsd_subsz_num_matches", "Subject matches", nil, sid)
	sc.routezNum = prometheus.NewDesc("gnatsd_routez_num_routes", "Route connections", nil, sid)
	route := []string{"rid", "remote_id", "remote_name", "account"}
	sc.routeIn = prometheus.NewDesc("gnatsd_routez_in_msgs", "Messages received from the route", route, sid)
	sc.routeOut = prometheus.NewDesc("gnatsd_routez_out_msgs", "Messages sent to the route", route, sid)
	sc.routeInB = prometheus.NewDesc("gnatsd_routez_in_bytes", "Payload bytes received from the route", route, sid)
	sc.routeOutB = prometheus.NewDesc("gnatsd_routez_out_bytes", "Payload bytes sent to the route", route, sid)
	sc.routePend = prometheus.NewDesc("gnatsd_routez_pending_size", "Bytes queued for the route", route, sid)
	sc.routeSubs = prometheus.NewDesc("gnatsd_routez_subscriptions", "Interest the remote server registered on the route", route, sid)
	return sc
}

func (sc *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range sc.varz {
		ch <- m.desc
	}
	for _, d := range []*prometheus.Desc{sc.connzNum, sc.connzTotal, sc.connIn, sc.connOut, sc.connInB,
		sc.connOutB, sc.connPend, sc.connSubs, sc.subszNum, sc.subszCache, sc.subszInserts,
		sc.subszRemoves, sc.subszMatches, sc.routezNum, sc.routeIn, sc.routeOut, sc.routeInB,
		sc.routeOutB, sc.routePend, sc.routeSubs} {
		ch <- d
	}
}

func (sc *serverCollector) Collect(ch chan<- prometheus.Metric) {
	v := sc.s.Varz()
	for _, m := range sc.varz {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(v))
	}
	conns := sc.s.eng.Conns(loop.ConnsQuery{})
	ch <- prometheus.MustNewConstMetric(sc.connzNum, prometheus.GaugeValue, float64(len(conns)))
	ch <- prometheus.MustNewConstMetric(sc.connzTotal, prometheus.GaugeValue, float64(len(conns)))
	if len(conns) <= metricsMaxConns {
		for _, cs := range conns {
			l := []string{strconv.FormatUint(cs.CID, 10), cs.Name, cs.Lang, cs.Version, cs.IP}
			ch <- prometheus.MustNewConstMetric(sc.connIn, prometheus.CounterValue, float64(cs.InMsgs), l...)
			ch <- prometheus.MustNewConstMetric(sc.connOut, prometheus.CounterValue, float64(cs.OutMsgs), l...)
			ch <- prometheus.MustNewConstMetric(sc.connInB, prometheus.CounterValue, float64(cs.InBytes), l...)
			ch <- prometheus.MustNewConstMetric(sc.connOutB, prometheus.CounterValue, float64(cs.OutBytes), l...)
			ch <- prometheus.MustNewConstMetric(sc.connPend, prometheus.GaugeValue, float64(cs.Pending), l...)
			ch <- prometheus.MustNewConstMetric(sc.connSubs, prometheus.GaugeValue, float64(cs.NumSubs), l...)
		}
	}
	st := sc.s.sublistStats()
	ch <- prometheus.MustNewConstMetric(sc.subszNum, prometheus.GaugeValue, float64(st.NumSubs))
	ch <- prometheus.MustNewConstMetric(sc.subszCache, prometheus.GaugeValue, float64(st.NumCache))
	ch <- prometheus.MustNewConstMetric(sc.subszInserts, prometheus.CounterValue, float64(st.NumInserts))
	ch <- prometheus.MustNewConstMetric(sc.subszRemoves, prometheus.CounterValue, float64(st.NumRemoves))
	ch <- prometheus.MustNewConstMetric(sc.subszMatches, prometheus.CounterValue, float64(st.NumMatches))
	routes := sc.s.eng.Routes(false)
	ch <- prometheus.MustNewConstMetric(sc.routezNum, prometheus.GaugeValue, float64(len(routes)))
	for _, r := range routes {
		l := []string{strconv.FormatUint(r.RID, 10), r.RemoteID, r.RemoteName, r.Account}
		ch <- prometheus.MustNewConstMetric(sc.routeIn, prometheus.CounterValue, float64(r.InMsgs), l...)
		ch <- prometheus.MustNewConstMetric(sc.routeOut, prometheus.CounterValue, float64(r.OutMsgs), l...)
		ch <- prometheus.MustNewConstMetric(sc.routeInB, prometheus.CounterValue, float64(r.InBytes), l...)
		ch <- prometheus.MustNewConstMetric(sc.routeOutB, prometheus.CounterValue, float64(r.OutBytes), l...)
		ch <- prometheus.MustNewConstMetric(sc.routePend, prometheus.GaugeValue, float64(r.Pending), l...)
		ch <- prometheus.MustNewConstMetric(sc.routeSubs, prometheus.GaugeValue, float64(r.NumSubs), l...)
	}
}

// metricsHandler serves /metrics from a registry of its own (not the global one, so that
// several servers in one process, as in tests, do not collide).
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newServerCollector(s))
	reg.MustRegister(collectors.NewGoCollector())
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mon.count(metricsPath)
		h.ServeHTTP(w, r)
	})
}
