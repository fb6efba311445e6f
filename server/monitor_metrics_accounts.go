package server

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"
)

// /accstatz (every account, used or not) and /accountz (each account's detail) in /metrics,
// as prometheus-nats-exporter's -accstatz and -accountz make them.

type accstatzDescs struct {
	conns, totalConns, subs, leafs           *prometheus.Desc
	sentMsgs, sentBytes, recvMsgs, recvBytes *prometheus.Desc
	slowConsumers                            *prometheus.Desc
}

func newAccstatzDescs() accstatzDescs {
	labels := []string{"server_id", "account", "account_id", "account_name"}
	d := func(name string) *prometheus.Desc {
		return prometheus.NewDesc("gnatsd_accstatz_"+name, name, labels, nil)
	}
	return accstatzDescs{
		conns: d("current_connections"), totalConns: d("total_connections"), subs: d("subscriptions"),
		leafs: d("leaf_nodes"), sentMsgs: d("sent_messages"), sentBytes: d("sent_bytes"),
		recvMsgs: d("received_messages"), recvBytes: d("received_bytes"), slowConsumers: d("slow_consumers"),
	}
}

func (c *metricsCollector) collectAccstatz(e metricEmitter) {
	as, err := c.s.AccountStatz(&AccountStatzOptions{IncludeUnused: true})
	if err != nil {
		return
	}
	d := &c.accst
	for _, a := range as.Accounts {
		// account and account_id are both the account, account_name its name.
		l := []string{e.sid, a.Account, a.Account, a.Name}
		e.gauge(d.conns, float64(a.Conns), l...)
		e.gauge(d.totalConns, float64(a.TotalConns), l...)
		e.gauge(d.subs, float64(a.NumSubs), l...)
		e.gauge(d.leafs, float64(a.LeafNodes), l...)
		e.gauge(d.sentMsgs, float64(a.Sent.Msgs), l...)
		e.gauge(d.sentBytes, float64(a.Sent.Bytes), l...)
		e.gauge(d.recvMsgs, float64(a.Received.Msgs), l...)
		e.gauge(d.recvBytes, float64(a.Received.Bytes), l...)
		e.gauge(d.slowConsumers, float64(a.SlowConsumers), l...)
	}
}

type accountzDescs struct {
	clients, leafs, subs, isSystem, expired, complete, jetstream *prometheus.Desc
	limitSubs, limitData, limitPayload, limitImports             *prometheus.Desc
	limitExports, limitWildcards, limitConn, limitLeaf           *prometheus.Desc
}

func newAccountzDescs() accountzDescs {
	labels := []string{"server_id", "account_id", "account_name"}
	d := func(name string) *prometheus.Desc {
		return prometheus.NewDesc("gnatsd_accountz_"+name, name, labels, nil)
	}
	return accountzDescs{
		clients: d("client_connections"), leafs: d("leafnode_connections"), subs: d("subscriptions"),
		isSystem: d("is_system"), expired: d("expired"), complete: d("complete"), jetstream: d("jetstream_enabled"),
		limitSubs: d("limit_subs"), limitData: d("limit_data"), limitPayload: d("limit_payload"),
		limitImports: d("limit_imports"), limitExports: d("limit_exports"),
		limitWildcards: d("limit_wildcards"), limitConn: d("limit_conn"), limitLeaf: d("limit_leaf"),
	}
}

// accountJWTLimits are the limits of an account's decoded JWT (all 0 for an account from the
// configuration file, which has none).
type accountJWTLimits struct {
	Nats struct {
		Limits struct {
			Subs      float64 `json:"subs"`
			Data      float64 `json:"data"`
			Payload   float64 `json:"payload"`
			Imports   float64 `json:"imports"`
			Exports   float64 `json:"exports"`
			Wildcards bool    `json:"wildcards"`
			Conn      float64 `json:"conn"`
			Leaf      float64 `json:"leaf"`
		} `json:"limits"`
	} `json:"nats"`
}

func (c *metricsCollector) collectAccountz(e metricEmitter) {
	az, err := c.s.Accountz(nil)
	if err != nil {
		return
	}
	d := &c.acc
	for _, name := range az.Accounts {
		ai, err := c.s.accountInfo(name)
		if err != nil {
			continue // gone since
		}
		var jwt accountJWTLimits
		if len(ai.Claim) > 0 {
			_ = json.Unmarshal(ai.Claim, &jwt)
		}
		lim := &jwt.Nats.Limits
		// account_id is the account, account_name its name tag.
		l := []string{e.sid, ai.AccountName, ai.NameTag}
		e.gauge(d.clients, float64(ai.ClientCnt), l...)
		e.gauge(d.leafs, float64(ai.LeafCnt), l...)
		e.gauge(d.subs, float64(ai.SubCnt), l...)
		e.gauge(d.isSystem, b2f(ai.IsSystem), l...)
		e.gauge(d.expired, b2f(ai.Expired), l...)
		e.gauge(d.complete, b2f(ai.Complete), l...)
		e.gauge(d.jetstream, b2f(ai.JetStream), l...)
		e.gauge(d.limitSubs, lim.Subs, l...)
		e.gauge(d.limitData, lim.Data, l...)
		e.gauge(d.limitPayload, lim.Payload, l...)
		e.gauge(d.limitImports, lim.Imports, l...)
		e.gauge(d.limitExports, lim.Exports, l...)
		e.gauge(d.limitWildcards, b2f(lim.Wildcards), l...)
		e.gauge(d.limitConn, lim.Conn, l...)
		e.gauge(d.limitLeaf, lim.Leaf, l...)
	}
}
