package server

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"slices"
	"time"
)

// reloadNote is one "Reloaded: ..." line, logged at INFO as nats-server logs each option it
// applies: with the config key's name, in the order of nats-server's Options fields.
type reloadNote struct {
	field string // the natsd field it is about ("MaxConn": the trimmed count comes first)
	text  string
}

// reloadNotes are the lines a reload from cur to n logs, before "Reloaded server
// configuration". nats-server always logs its users and accounts options (it cannot tell
// whether they changed), so every reload says "authorization users" and "accounts".
func (s *Server) reloadNotes(cur, n *Options, changed []string) []reloadNote {
	has := func(f string) bool { return slices.Contains(changed, f) }
	var out []reloadNote
	add := func(field, format string, v ...any) {
		out = append(out, reloadNote{field, fmt.Sprintf(format, v...)})
	}
	if has("ClientAdvertise") {
		add("ClientAdvertise", "Reload: client_advertise = %s", n.ClientAdvertise) // sic
	}
	if has("Trace") {
		add("Trace", "Reloaded: trace = %v", n.Trace)
	}
	if has("Debug") {
		add("Debug", "Reloaded: debug = %v", n.Debug)
	}
	if has("Logtime") {
		add("Logtime", "Reloaded: logtime = %v", n.Logtime)
	}
	if has("LogtimeUTC") {
		add("LogtimeUTC", "Reloaded: logtime_utc = %v", n.LogtimeUTC)
	}
	if has("MaxConn") {
		add("MaxConn", "Reloaded: max_connections = %v", n.MaxConn)
	}
	if has("Nkeys") {
		add("Nkeys", "Reloaded: authorization nkey users")
	}
	add("Users", "Reloaded: authorization users")
	add("Accounts", "Reloaded: accounts")
	if has("Username") {
		add("Username", "Reloaded: authorization username")
	}
	if has("Password") {
		add("Password", "Reloaded: authorization password")
	}
	if has("Authorization") {
		add("Authorization", "Reloaded: authorization token")
	}
	if has("PingInterval") {
		add("PingInterval", "Reloaded: ping_interval = %s", n.PingInterval)
	}
	if has("MaxPingsOut") {
		add("MaxPingsOut", "Reloaded: ping_max = %d", n.MaxPingsOut)
	}
	if has("AuthTimeout") {
		add("AuthTimeout", "Reloaded: authorization timeout = %v", n.AuthTimeout.Seconds())
	}
	if has("MaxControlLine") {
		add("MaxControlLine", "Reloaded: max_control_line = %d", n.MaxControlLine)
	}
	if has("MaxPayload") {
		add("MaxPayload", "Reloaded: max_payload = %d", n.MaxPayload)
	}
	if has("NoFastProducerStall") {
		not := ""
		if n.NoFastProducerStall {
			not = "not "
		}
		add("NoFastProducerStall", "Reloaded: fast producers will %sbe stalled", not)
	}
	if has("Cluster") && clusterChangedBeyondRoutes(cur, n) {
		add("Cluster", "Reloaded: cluster")
	}
	// JetStream: switched on or off, or on in the file but not running.
	running := s.js.Load() != nil
	if n.JetStream != cur.JetStream || (n.JetStream && !running) {
		add("JetStream", "Reloaded: JetStream")
	}
	if running && cur.JetStream && n.JetStream {
		if cur.JetStreamMaxMemory > 0 && n.JetStreamMaxMemory > cur.JetStreamMaxMemory {
			add("JetStreamMaxMemory", "Reloaded: JetStream max_mem_store = %s", friendlyBytes(n.JetStreamMaxMemory))
		}
		if cur.JetStreamMaxStore > 0 && n.JetStreamMaxStore > cur.JetStreamMaxStore {
			add("JetStreamMaxStore", "Reloaded: JetStream max_file_store = %s", friendlyBytes(n.JetStreamMaxStore))
		}
	}
	if has("JetStreamLimits") {
		add("JetStreamLimits", "Reloaded: JetStream limits")
	}
	if has("PidFile") && n.PidFile != "" {
		add("PidFile", "Reloaded: pid_file = %v", n.PidFile)
	}
	if has("LogFile") {
		add("LogFile", "Reloaded: log_file = %v", n.LogFile)
	}
	if a, b := tlsTimeoutOf(cur), tlsTimeoutOf(n); a != b {
		add("TLSTimeout", "Reloaded: tls timeout = %v", b.Seconds())
	}
	if has("TLSConfig") && !tlsSame(cur.TLSConfig, n.TLSConfig) {
		state := "disabled"
		if n.TLSConfig != nil {
			state = "enabled"
		}
		add("TLSConfig", "Reloaded: tls = %s", state)
	}
	if has("TLSPinnedCerts") {
		add("TLSPinnedCerts", "Reloaded: %d pinned_certs", len(n.TLSPinnedCerts))
	}
	if has("TLSHandshakeFirst") {
		add("TLSHandshakeFirst", "Reloaded: Client TLS handshake first: %v", n.TLSHandshakeFirst)
	}
	if has("TLSHandshakeFirstFallback") {
		add("TLSHandshakeFirstFallback", "Reloaded: Client TLS handshake first fallback delay: %v", n.TLSHandshakeFirstFallback)
	}
	if has("WriteDeadline") {
		add("WriteDeadline", "Reloaded: write_deadline = %s", n.WriteDeadline)
	}
	if has("MaxTracedMsgLen") {
		add("MaxTracedMsgLen", "Reloaded: max_traced_msg_len = %d", n.MaxTracedMsgLen)
	}
	return out
}

// clusterChangedBeyondRoutes: nats-server keeps a cluster block's routes apart from the rest
// (its own "Reloaded: cluster routes"), so only other changes say "Reloaded: cluster".
func clusterChangedBeyondRoutes(cur, n *Options) bool {
	a, b := cur.Cluster, n.Cluster
	a.Routes, b.Routes = nil, nil
	return !clusterSame(&a, &b)
}

// tlsTimeoutOf is tls timeout as nats-server holds it: its default even without TLS.
func tlsTimeoutOf(o *Options) time.Duration {
	if o.TLSTimeout == 0 {
		return DefaultTLSTimeout
	}
	return o.TLSTimeout
}

// tlsSame: the two TLS configurations are what nats-server's comparison finds equal (same
// certificates, CAs and settings). natsd re-applies the TLS configuration on every reload
// (certificates renewed on disk); nats-server only says so when it differs.
func tlsSame(a, b *tls.Config) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Certificates) != len(b.Certificates) || a.ClientAuth != b.ClientAuth ||
		a.MinVersion != b.MinVersion || a.MaxVersion != b.MaxVersion || a.ServerName != b.ServerName ||
		!slices.Equal(a.CipherSuites, b.CipherSuites) || !slices.Equal(a.CurvePreferences, b.CurvePreferences) ||
		!a.ClientCAs.Equal(b.ClientCAs) || !a.RootCAs.Equal(b.RootCAs) {
		return false
	}
	for i := range a.Certificates {
		if !slices.EqualFunc(a.Certificates[i].Certificate, b.Certificates[i].Certificate, bytes.Equal) {
			return false
		}
	}
	return true
}
