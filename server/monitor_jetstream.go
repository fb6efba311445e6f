package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/natsd/natsd/js"
)

// JetStream in monitoring: /varz "jetstream", /jsz, the JetStream checks of /healthz, and
// what $SYS reports of it (STATSZ, ServerInfo, JSZ), in nats-server v2.15.2's shapes for a
// server that is not clustered: no meta group, no Raft groups, the server leads every
// stream it has.

// jsDefaultMaxConsumers is nats-server's limits.default_max_consumers when none is set: the
// cap on a stream's consumers for streams that set none (JSDefaultMaxConsumersPerStream).
const jsDefaultMaxConsumers = 1000

// jsDomain is the JetStream domain this server is in ("" without JetStream or domain).
func (s *Server) jsDomain() string {
	if o := s.getOpts(); o.JetStream {
		return o.JetStreamDomain
	}
	return ""
}

// jsConfigView is JetStream's configuration as /varz, /jsz and STATSZ show it.
func (s *Server) jsConfigView(j *js.JetStream) *JetStreamConfig {
	c := j.Config()
	o := s.getOpts()
	v := &JetStreamConfig{
		MaxMemory: c.MaxMemory,
		MaxStore:  c.MaxStore,
		StoreDir:  c.Dir, // <store_dir>/jetstream, as nats-server shows it
		Domain:    c.Domain,
		UniqueTag: o.JetStreamUniqueTag,
		Strict:    c.Strict,
		// nats-server shows compress_ok only when both max_memory_store and max_file_store
		// are set: without them it builds its configuration afresh from the machine's
		// figures, and that one leaves compress_ok out.
		CompressOK: o.JetStreamMaxMemory > 0 && o.JetStreamMaxStore > 0,
	}
	if c.SyncInterval > 0 {
		// The user opted out (sync_interval: a duration): acknowledged after write(2), synced
		// this often, as nats-server does.
		v.SyncInterval = c.SyncInterval
	} else {
		// natsd's default differs from nats-server's (which acknowledges after write(2) and
		// fsyncs every 2 minutes, showing sync_interval 2m): natsd acknowledges a publish only
		// once it is fsync'd, which is what nats-server's sync_always means, so that is what
		// it reports. A sync_interval written next to sync_always shows too, as in
		// nats-server.
		v.SyncAlways = true
		if o.SyncAlways {
			v.SyncInterval = o.SyncInterval
		}
	}
	return v
}

// jsLimitsView is jetstream { limits {} } as /varz and /jsz show it, with nats-server's
// default for default_max_consumers.
func (s *Server) jsLimitsView() *JSLimitOpts {
	l := s.getOpts().JetStreamLimits
	v := &JSLimitOpts{
		MaxRequestBatch:           l.MaxRequestBatch,
		MaxAckPending:             l.MaxAckPending,
		MaxHAAssets:               l.MaxHAAssets,
		Duplicates:                l.DuplicateWindow,
		MaxBatchInflightPerStream: l.MaxBatchInflightPerStream,
		MaxBatchInflightTotal:     l.MaxBatchInflightTotal,
		MaxBatchSize:              l.MaxBatchSize,
		MaxBatchTimeout:           l.MaxBatchTimeout,
		DefaultMaxConsumers:       l.DefaultMaxConsumers,
	}
	if v.DefaultMaxConsumers == 0 {
		v.DefaultMaxConsumers = jsDefaultMaxConsumers
	}
	return v
}

// jsStatsView is JetStream's server-wide usage. ha_assets counts Raft groups: none here.
func jsStatsView(st js.Stats) *JetStreamStats {
	return &JetStreamStats{
		Memory: st.Memory, Store: st.Store,
		ReservedMemory: st.ReservedMemory, ReservedStore: st.ReservedStore,
		Accounts: st.Accounts,
		API:      JetStreamAPIStats{Level: js.APILevel, Total: st.APITotal, Errors: st.APIErrors},
	}
}

// jsVarz is /varz "jetstream" (the zero value while JetStream is off).
func (s *Server) jsVarz() JetStreamVarz {
	j := s.JetStream()
	if j == nil {
		return JetStreamVarz{}
	}
	return JetStreamVarz{Config: s.jsConfigView(j), Stats: jsStatsView(j.Stats()), Limits: s.jsLimitsView()}
}

// jsStatsz is STATSZ's "jetstream": the configuration without the store directory, the
// usage and the limits (nil while JetStream is off).
func (s *Server) jsStatsz() *JetStreamVarz {
	j := s.JetStream()
	if j == nil {
		return nil
	}
	cfg := s.jsConfigView(j)
	cfg.StoreDir = ""
	return &JetStreamVarz{Config: cfg, Stats: jsStatsView(j.Stats()), Limits: s.jsLimitsView()}
}

// Jsz gathers /jsz and JSZ. Without JetStream it reports "disabled" (and, asked for the
// leader only, nobody here answers); with it, the server is its own meta leader.
func (s *Server) Jsz(q *JSzOptions) (*JSInfo, error) {
	var opts JSzOptions
	if q != nil {
		opts = *q
	}
	opts.Offset = max(opts.Offset, 0)
	if opts.Limit == 0 {
		opts.Limit = defaultListSize
	}
	if opts.Consumer {
		opts.Streams = true
	}
	if opts.Streams && opts.Account == "" {
		opts.Accounts = true
	}
	jsi := &JSInfo{ID: s.id, Now: time.Now().UTC()}
	j := s.JetStream()
	if j == nil {
		if opts.LeaderOnly {
			return nil, fmt.Errorf("%w: not leader", errSkip)
		}
		jsi.Disabled = true
		return jsi, nil
	}
	jsi.Limits = s.jsLimitsView()
	jsi.Config = *s.jsConfigView(j)
	st := j.Stats()
	jsi.JetStreamStats = *jsStatsView(st)
	accs := j.Accounts(false) // sorted by name
	jsi.Total = len(accs)
	jsi.Streams, jsi.Consumers = st.Streams, st.Consumers
	jsi.Messages, jsi.Bytes = st.Messages, st.Bytes
	if opts.RaftGroups {
		// Without Raft every stream and consumer is led here.
		jsi.StreamsLeader, jsi.ConsumersLeader = st.Streams, st.Consumers
	}
	var sel []js.AccountDetail
	filtered := false
	for i := range accs {
		if accs[i].Name == opts.Account {
			sel, filtered = accs[i:i+1], true
			break
		}
	}
	if !filtered && opts.Accounts {
		sel = accs
		if opts.Limit > 0 {
			sel = sel[min(opts.Offset, len(sel)):]
			sel = sel[:min(opts.Limit, len(sel))]
		}
	}
	for _, a := range sel {
		if opts.Streams {
			d, ok := j.Account(a.Name, true)
			if !ok {
				continue // disabled since
			}
			a = d
		}
		jsi.AccountDetails = append(jsi.AccountDetails, accountDetail(j, a, &opts))
	}
	return jsi, nil
}

// accountDetail is one account's /jsz detail. As nats-server's, its reserved figures are
// the account's own memory and storage limits (-1, unlimited, shows as 2^64-1), its api
// counters carry no level, and accounts and ha_assets stay 0. Streams have no Raft group
// to name (raft=true), not being replicated.
func accountDetail(j *js.JetStream, a js.AccountDetail, opts *JSzOptions) *AccountDetail {
	d := &AccountDetail{Name: a.Name, Id: a.Name, JetStreamStats: JetStreamStats{
		Memory: a.Stats.Memory, Store: a.Stats.Store,
		ReservedMemory: uint64(a.Stats.Limits.MaxMemory), ReservedStore: uint64(a.Stats.Limits.MaxStore),
		API: JetStreamAPIStats{Total: a.Stats.API.Total, Errors: a.Stats.API.Errors},
	}}
	for i := range a.Streams {
		si := &a.Streams[i]
		sd := StreamDetail{Name: si.Config.Name, Created: si.Created, Cluster: si.Cluster, State: si.State,
			Mirror: si.Mirror, Sources: si.Sources}
		if opts.Config {
			sd.Config = &si.Config
		}
		if opts.Consumer {
			sd.Consumer = j.ConsumerDetails(a.Name, si.Config.Name, opts.Config)
		}
		d.Streams = append(d.Streams, sd)
	}
	return d
}

// JszAccount is $SYS.REQ.ACCOUNT.<acc>.JSZ: one account's JetStream detail.
func (s *Server) JszAccount(opts *JSzOptions) (*AccountDetail, error) {
	j := s.JetStream()
	if j == nil {
		return nil, fmt.Errorf("jetstream not enabled")
	}
	name := opts.Account
	if s.eng == nil || s.eng.LookupAccount(name) == nil {
		return nil, fmt.Errorf("account %q not found", name)
	}
	a, ok := j.Account(name, opts.Streams)
	if !ok {
		return nil, fmt.Errorf("account %q not jetstream enabled", name)
	}
	return accountDetail(j, a, opts), nil
}

func (s *Server) handleJsz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(jszPath)
	q := JSzOptions{Account: r.URL.Query().Get("acc")}
	// Decoded in nats-server's order, so that the first bad one is the one reported.
	var directConsumers bool
	for _, p := range []struct {
		name string
		dst  *bool
		n    *int
	}{
		{"accounts", &q.Accounts, nil}, {"streams", &q.Streams, nil}, {"consumers", &q.Consumer, nil},
		{"direct-consumers", &directConsumers, nil}, {"config", &q.Config, nil},
		{"offset", nil, &q.Offset}, {"limit", nil, &q.Limit}, {"leader-only", &q.LeaderOnly, nil},
		{"raft", &q.RaftGroups, nil}, {"stream-leader-only", &q.StreamLeaderOnly, nil},
	} {
		var ok bool
		if p.dst != nil {
			*p.dst, ok = qBool(w, r, p.name)
		} else {
			*p.n, ok = qInt(w, r, p.name)
		}
		if !ok {
			return
		}
	}
	q.DirectConsumer = directConsumers
	jsi, err := s.Jsz(&q)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, jsi, true)
}

// healthz checks the server's health as a standalone nats-server does; StatusCode is the
// HTTP status the answer stands for. With JetStream on, every stream the store holds must
// have been recovered (and an account, stream or consumer asked for must exist).
func (s *Server) healthz(q *HealthzOptions) *HealthStatus {
	if q == nil {
		q = &HealthzOptions{}
	}
	hs := &HealthStatus{Status: "ok"}
	details := q.Details
	defer func() {
		if details {
			hs.Status = "ok"
			if len(hs.Errors) != 0 {
				hs.Status = "error"
			}
		}
		if hs.StatusCode == 0 {
			hs.StatusCode = http.StatusOK
			if hs.Error != "" || len(hs.Errors) != 0 {
				hs.StatusCode = http.StatusServiceUnavailable
			}
		}
	}()
	// report records a problem: the error (and status) without details, else one more
	// entry; it says whether to stop there.
	report := func(status string, e HealthzError) bool {
		if !details {
			hs.Status, hs.Error = status, e.Error
			return true
		}
		hs.Errors = append(hs.Errors, e)
		return false
	}
	switch {
	case q.Account == "" && q.Stream != "":
		hs.StatusCode = http.StatusBadRequest
		report("error", HealthzError{Type: HealthzErrorBadRequest, Error: `"account" must not be empty when checking stream health`})
		return hs
	case q.Stream == "" && q.Consumer != "":
		hs.StatusCode = http.StatusBadRequest
		report("error", HealthzError{Type: HealthzErrorBadRequest, Error: `"stream" must not be empty when checking consumer health`})
		return hs
	case !s.isRunning():
		hs.StatusCode = http.StatusInternalServerError
		hs.Status = "error"
		report("error", HealthzError{Type: HealthzErrorConn, Error: "server not ready for connections"})
		return hs
	}
	if q.JSServerOnly || !s.getOpts().JetStream {
		return hs
	}
	const na = "unavailable"
	j := s.JetStream()
	if j == nil {
		hs.StatusCode = http.StatusServiceUnavailable
		hs.Status = na
		report(na, HealthzError{Type: HealthzErrorJetStream, Error: "JetStream not enabled (10076)"})
		return hs
	}
	if q.JSEnabledOnly || q.JSEnabled {
		return hs
	}
	// Not clustered: no meta layer to check (js-meta-only passes too); the streams the
	// store holds must all have been recovered.
	var accFound, streamFound, consumerFound bool
	for _, acc := range j.StoredAccounts() {
		if acc == ".snap-staging" { // nats-server's restore staging directory
			continue
		}
		if q.Account != "" {
			if acc != q.Account {
				continue
			}
			accFound = true
		}
		if s.eng.LookupAccount(acc) == nil {
			if report(na, HealthzError{Type: HealthzErrorAccount, Account: acc,
				Error: fmt.Sprintf("JetStream account '%s' could not be resolved", acc)}) {
				return hs
			}
			continue
		}
		for _, name := range j.StoredStreams(acc) {
			if q.Stream != "" {
				if name != q.Stream {
					continue
				}
				streamFound = true
			}
			if !j.HasStream(acc, name) {
				if report(na, HealthzError{Type: HealthzErrorStream, Account: acc, Stream: name,
					Error: fmt.Sprintf("JetStream stream '%s > %s' could not be recovered", acc, name)}) {
					return hs
				}
				continue
			}
			if streamFound {
				consumerFound = q.Consumer == "" || j.HasConsumer(acc, name, q.Consumer)
				break
			}
		}
		if accFound {
			break
		}
	}
	notFound := func(e HealthzError) *HealthStatus {
		hs.StatusCode = http.StatusNotFound
		if !details {
			hs.Status, hs.Error = na, e.Error
		} else {
			hs.Errors = []HealthzError{e}
		}
		return hs
	}
	switch {
	case q.Account != "" && !accFound:
		return notFound(HealthzError{Type: HealthzErrorAccount, Account: q.Account,
			Error: fmt.Sprintf("JetStream account %q not found", q.Account)})
	case q.Stream != "" && !streamFound:
		return notFound(HealthzError{Type: HealthzErrorStream, Account: q.Account, Stream: q.Stream,
			Error: fmt.Sprintf("JetStream stream %q not found on account %q", q.Stream, q.Account)})
	case q.Consumer != "" && !consumerFound:
		return notFound(HealthzError{Type: HealthzErrorConsumer, Account: q.Account, Stream: q.Stream, Consumer: q.Consumer,
			Error: fmt.Sprintf("JetStream consumer %q not found for stream %q on account %q", q.Consumer, q.Stream, q.Account)})
	}
	return hs
}
