package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// /connz in /metrics, as prometheus-nats-exporter's -connz_detailed makes it of /connz?auth=true:
// summary series over the page (server_id only) and, in the same families, one series per
// connection of the page with its details as labels, plus the per-connection times. Only the
// message and byte counts are counters; start, last_activity and uptime are untyped.

// connzDetailLabels are the labels of a connection's series.
var connzDetailLabels = []string{"server_id", "cid", "kind", "type", "ip", "port", "name", "name_tag",
	"account", "account_id", "lang", "version", "tls_version", "tls_cipher_suite"}

type connzDescs struct {
	numConns, total, offset, limit     *prometheus.Desc
	pending, subs, inMsgs, outMsgs     *prometheus.Desc // summary
	inBytes, outBytes                  *prometheus.Desc // summary
	cPending, cSubs, cInMsgs, cOutMsgs *prometheus.Desc // per connection
	cInBytes, cOutBytes, start, last   *prometheus.Desc
	rtt, uptime, idle                  *prometheus.Desc
}

func newConnzDescs() connzDescs {
	sum := []string{"server_id"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("gnatsd_connz_"+name, help, labels, nil)
	}
	// A summary and a per-connection family share a name, so they share the help text.
	return connzDescs{
		numConns:  d("num_connections", "num_connections", sum),
		total:     d("total", "total", sum),
		offset:    d("offset", "offset", sum),
		limit:     d("limit", "limit", sum),
		pending:   d("pending_bytes", "pending_bytes", sum),
		subs:      d("subscriptions", "subscriptions", sum),
		inMsgs:    d("in_msgs", "in_msgs", sum),
		outMsgs:   d("out_msgs", "out_msgs", sum),
		inBytes:   d("in_bytes", "in_bytes", sum),
		outBytes:  d("out_bytes", "out_bytes", sum),
		cPending:  d("pending_bytes", "pending_bytes", connzDetailLabels),
		cSubs:     d("subscriptions", "subscriptions", connzDetailLabels),
		cInMsgs:   d("in_msgs", "in_msgs", connzDetailLabels),
		cOutMsgs:  d("out_msgs", "out_msgs", connzDetailLabels),
		cInBytes:  d("in_bytes", "in_bytes", connzDetailLabels),
		cOutBytes: d("out_bytes", "out_bytes", connzDetailLabels),
		start:     d("start", "The connection's start, in milliseconds since the epoch", connzDetailLabels),
		last:      d("last_activity", "The connection's last activity, in milliseconds since the epoch", connzDetailLabels),
		rtt:       d("rtt", "The connection's round-trip time in microseconds", connzDetailLabels),
		uptime:    d("uptime", "Milliseconds since the connection started (whole seconds)", connzDetailLabels),
		idle:      d("idle", "Milliseconds since the connection's last activity (whole seconds)", connzDetailLabels),
	}
}

func (c *metricsCollector) collectConnz(e metricEmitter) {
	cz, err := c.s.Connz(&ConnzOptions{Username: true, Limit: metricsMaxConns, noPeerCerts: true})
	if err != nil {
		return
	}
	d := &c.conn
	var pending, subs, inMsgs, outMsgs, inBytes, outBytes float64
	for _, ci := range cz.Conns {
		pending += float64(ci.Pending)
		subs += float64(ci.NumSubs)
		inMsgs += float64(ci.InMsgs)
		outMsgs += float64(ci.OutMsgs)
		inBytes += float64(ci.InBytes)
		outBytes += float64(ci.OutBytes)
		// account_id carries the account too, as the exporter's.
		l := []string{e.sid, strconv.FormatUint(ci.Cid, 10), ci.Kind, ci.Type, ci.IP, strconv.Itoa(ci.Port),
			ci.Name, ci.NameTag, ci.Account, ci.Account, ci.Lang, ci.Version, ci.TLSVersion, ci.TLSCipher}
		e.gauge(d.cPending, float64(ci.Pending), l...)
		e.gauge(d.cSubs, float64(ci.NumSubs), l...)
		e.counter(d.cInBytes, float64(ci.InBytes), l...)
		e.counter(d.cOutBytes, float64(ci.OutBytes), l...)
		e.counter(d.cInMsgs, float64(ci.InMsgs), l...)
		e.counter(d.cOutMsgs, float64(ci.OutMsgs), l...)
		e.untyped(d.start, epochMillis(ci.Start), l...)
		e.untyped(d.last, epochMillis(ci.LastActivity), l...)
		e.gauge(d.rtt, float64(ci.rtt.Microseconds()), l...)
		e.untyped(d.uptime, float64(wholeSeconds(cz.Now.Sub(ci.Start)).Milliseconds()), l...)
		e.gauge(d.idle, float64(wholeSeconds(cz.Now.Sub(ci.LastActivity)).Milliseconds()), l...)
	}
	e.gauge(d.numConns, float64(cz.NumConns), e.sid)
	e.gauge(d.total, float64(cz.Total), e.sid)
	e.gauge(d.offset, float64(cz.Offset), e.sid)
	e.gauge(d.limit, float64(cz.Limit), e.sid)
	e.gauge(d.pending, pending, e.sid)
	e.gauge(d.subs, subs, e.sid)
	e.counter(d.inBytes, inBytes, e.sid)
	e.counter(d.outBytes, outBytes, e.sid)
	e.counter(d.inMsgs, inMsgs, e.sid)
	e.counter(d.outMsgs, outMsgs, e.sid)
}
