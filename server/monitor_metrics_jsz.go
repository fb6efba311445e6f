package server

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/natsd/natsd/js"
)

// /jsz in /metrics, as prometheus-nats-exporter's -jsz=all makes it of
// /jsz?consumers=true&config=true&raft=true: the server, each account, each stream (its
// mirror and sources) and each consumer, all gauges. Every series carries the server labels;
// a server that is not clustered has no meta group, so cluster and meta_leader are empty and
// the server counts as its own meta leader, as the exporter says of such a server.

var (
	jszServerLabels  = []string{"server_id", "server_name", "cluster", "domain", "meta_leader", "is_meta_leader"}
	jszAccountLabels = append(append([]string{}, jszServerLabels...), "account", "account_name", "account_id")
	jszStreamLabels  = append(append([]string{}, jszAccountLabels...),
		"stream_name", "stream_leader", "is_stream_leader", "stream_raft_group")
	jszConsumerLabels = append(append([]string{}, jszStreamLabels...),
		"consumer_name", "consumer_leader", "is_consumer_leader", "consumer_desc")
	jszSourceLabels = append(append([]string{}, jszStreamLabels...), "source_name", "source_api", "source_deliver")
	jszMirrorLabels = append(append([]string{}, jszStreamLabels...), "mirror_name", "mirror_api", "mirror_deliver")
)

type jszDescs struct {
	disabled, maxMemory, maxStorage, streams, consumers, messages, bytes *prometheus.Desc

	accMaxMemory, accMaxStorage, accMemory, accStorage *prometheus.Desc

	stMessages, stBytes, stFirstSeq, stLastSeq, stConsumers, stSubjects *prometheus.Desc
	stLimitBytes, stLimitMessages                                       *prometheus.Desc
	srcLag, srcActive, mirLag, mirActive                                *prometheus.Desc

	coDeliveredConsumer, coDeliveredStream, coAckFloorConsumer, coAckFloorStream *prometheus.Desc
	coLastDelivery, coLastAck, coAckPending, coRedelivered, coWaiting, coPending *prometheus.Desc
}

func newJszDescs() jszDescs {
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("jetstream_"+name, help, labels, nil)
	}
	sv, ac, st, co := jszServerLabels, jszAccountLabels, jszStreamLabels, jszConsumerLabels
	return jszDescs{
		disabled:   d("server_jetstream_disabled", "1 when JetStream is off", sv),
		maxMemory:  d("server_max_memory", "JetStream's memory limit in bytes", sv),
		maxStorage: d("server_max_storage", "JetStream's storage limit in bytes", sv),
		streams:    d("server_total_streams", "Streams on the server", sv),
		consumers:  d("server_total_consumers", "Consumers on the server", sv),
		messages:   d("server_total_messages", "Messages stored on the server", sv),
		bytes:      d("server_total_message_bytes", "Bytes stored on the server", sv),

		accMaxMemory:  d("account_max_memory", "The account's memory reservation in bytes", ac),
		accMaxStorage: d("account_max_storage", "The account's storage reservation in bytes", ac),
		accMemory:     d("account_memory_used", "Memory the account's streams use, in bytes", ac),
		accStorage:    d("account_storage_used", "Storage the account's streams use, in bytes", ac),

		stMessages:      d("stream_total_messages", "Messages in the stream", st),
		stBytes:         d("stream_total_bytes", "Bytes in the stream", st),
		stFirstSeq:      d("stream_first_seq", "The stream's first sequence", st),
		stLastSeq:       d("stream_last_seq", "The stream's last sequence", st),
		stConsumers:     d("stream_consumer_count", "The stream's consumers", st),
		stSubjects:      d("stream_subject_count", "Subjects in the stream", st),
		stLimitBytes:    d("stream_limit_bytes", "The stream's max_bytes (-1: no limit)", st),
		stLimitMessages: d("stream_limit_messages", "The stream's max_msgs (-1: no limit)", st),
		srcLag:          d("stream_source_lag", "Messages a source of the stream is behind", jszSourceLabels),
		srcActive:       d("stream_source_active_duration_ns", "Nanoseconds since a source of the stream was last active (-1: inactive)", jszSourceLabels),
		mirLag:          d("stream_mirror_lag", "Messages the stream's mirror is behind", jszMirrorLabels),
		mirActive:       d("stream_mirror_active_duration_ns", "Nanoseconds since the stream's mirror was last active (-1: inactive)", jszMirrorLabels),

		coDeliveredConsumer: d("consumer_delivered_consumer_seq", "The consumer sequence last delivered", co),
		coDeliveredStream:   d("consumer_delivered_stream_seq", "The stream sequence last delivered", co),
		coAckFloorConsumer:  d("consumer_ack_floor_consumer_seq", "The consumer sequence of the ack floor", co),
		coAckFloorStream:    d("consumer_ack_floor_stream_seq", "The stream sequence of the ack floor", co),
		coLastDelivery:      d("consumer_last_delivery_seconds", "Seconds since the consumer's last delivery", co),
		coLastAck:           d("consumer_last_ack_seconds", "Seconds since the consumer's ack floor last moved", co),
		coAckPending:        d("consumer_num_ack_pending", "Messages delivered and not acknowledged", co),
		coRedelivered:       d("consumer_num_redelivered", "Outstanding messages delivered more than once", co),
		coWaiting:           d("consumer_num_waiting", "Pull requests waiting", co),
		coPending:           d("consumer_num_pending", "Messages not yet delivered", co),
	}
}

// leaderLabel is an is_*_leader label: whether the named leader is this server (a group with
// no cluster information is led here).
func leaderLabel(ci *js.ClusterInfo, server string) (leader, is string) {
	if ci == nil {
		return "", "true"
	}
	if ci.Leader == server {
		return ci.Leader, "true"
	}
	return ci.Leader, "false"
}

func (c *metricsCollector) collectJsz(e metricEmitter) {
	jsi, err := c.s.Jsz(&JSzOptions{Consumer: true, Config: true, RaftGroups: true})
	if err != nil {
		return
	}
	d := &c.js
	server := c.s.getOpts().ServerName
	// No meta group: no cluster name, no meta leader, and this server leads.
	sv := []string{e.sid, server, "", jsi.Config.Domain, "", "true"}
	e.gauge(d.disabled, b2f(jsi.Disabled), sv...)
	e.gauge(d.maxMemory, float64(jsi.Config.MaxMemory), sv...)
	e.gauge(d.maxStorage, float64(jsi.Config.MaxStore), sv...)
	e.gauge(d.streams, float64(jsi.Streams), sv...)
	e.gauge(d.consumers, float64(jsi.Consumers), sv...)
	e.gauge(d.messages, float64(jsi.Messages), sv...)
	e.gauge(d.bytes, float64(jsi.Bytes), sv...)
	for _, a := range jsi.AccountDetails {
		// account and account_name are both the account's name, account_id its id.
		al := append(append([]string{}, sv...), a.Name, a.Name, a.Id)
		e.gauge(d.accMaxStorage, float64(a.ReservedStore), al...)
		e.gauge(d.accMaxMemory, float64(a.ReservedMemory), al...)
		e.gauge(d.accStorage, float64(a.Store), al...)
		e.gauge(d.accMemory, float64(a.Memory), al...)
		for i := range a.Streams {
			c.collectJszStream(e, al, server, &a.Streams[i])
		}
	}
}

func (c *metricsCollector) collectJszStream(e metricEmitter, al []string, server string, sd *StreamDetail) {
	d := &c.js
	leader, isLeader := leaderLabel(sd.Cluster, server)
	sl := append(append([]string{}, al...), sd.Name, leader, isLeader, sd.RaftGroup)
	e.gauge(d.stMessages, float64(sd.State.Msgs), sl...)
	e.gauge(d.stBytes, float64(sd.State.Bytes), sl...)
	e.gauge(d.stFirstSeq, float64(sd.State.FirstSeq), sl...)
	e.gauge(d.stLastSeq, float64(sd.State.LastSeq), sl...)
	e.gauge(d.stConsumers, float64(sd.State.Consumers), sl...)
	e.gauge(d.stSubjects, float64(sd.State.NumSubjects), sl...)
	if sd.Config != nil {
		e.gauge(d.stLimitBytes, float64(sd.Config.MaxBytes), sl...)
		e.gauge(d.stLimitMessages, float64(sd.Config.MaxMsgs), sl...)
	}
	external := func(x *js.ExternalStream) (api, deliver string) {
		if x != nil {
			return x.APIPrefix, x.DeliverPrefix
		}
		return "", ""
	}
	for _, src := range sd.Sources {
		if src == nil {
			continue
		}
		api, deliver := external(src.External)
		l := append(append([]string{}, sl...), src.Name, api, deliver)
		e.gauge(d.srcLag, float64(src.Lag), l...)
		e.gauge(d.srcActive, float64(src.Active), l...)
	}
	if m := sd.Mirror; m != nil {
		api, deliver := external(m.External)
		l := append(append([]string{}, sl...), m.Name, api, deliver)
		e.gauge(d.mirLag, float64(m.Lag), l...)
		e.gauge(d.mirActive, float64(m.Active), l...)
	}
	for _, raw := range sd.Consumer {
		var ci js.ConsumerInfo
		if json.Unmarshal(raw, &ci) != nil {
			continue
		}
		var desc string
		if ci.Config != nil {
			desc = ci.Config.Description
		}
		cLeader, cIsLeader := leaderLabel(ci.Cluster, server)
		l := append(append([]string{}, sl...), ci.Name, cLeader, cIsLeader, desc)
		if last := ci.Delivered.Last; last != nil {
			e.gauge(d.coLastDelivery, ci.TimeStamp.Sub(*last).Seconds(), l...)
		}
		if last := ci.AckFloor.Last; last != nil {
			e.gauge(d.coLastAck, ci.TimeStamp.Sub(*last).Seconds(), l...)
		}
		e.gauge(d.coDeliveredConsumer, float64(ci.Delivered.Consumer), l...)
		e.gauge(d.coDeliveredStream, float64(ci.Delivered.Stream), l...)
		e.gauge(d.coAckPending, float64(ci.NumAckPending), l...)
		e.gauge(d.coRedelivered, float64(ci.NumRedelivered), l...)
		e.gauge(d.coWaiting, float64(ci.NumWaiting), l...)
		e.gauge(d.coPending, float64(ci.NumPending), l...)
		e.gauge(d.coAckFloorStream, float64(ci.AckFloor.Stream), l...)
		e.gauge(d.coAckFloorConsumer, float64(ci.AckFloor.Consumer), l...)
	}
}
