package js

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
)

// Read-only views for monitoring (/jsz, /healthz, $SYS JSZ): nothing here changes state.

// Account details one enabled account (its streams when withStreams); false when JetStream
// does not serve the account. A stream's configuration is the one stored, as nats-server's
// /jsz shows it: without the _nats.ver and _nats.level metadata API replies add.
func (j *JetStream) Account(name string, withStreams bool) (AccountDetail, bool) {
	j.mu.Lock()
	a := j.accounts[name]
	j.mu.Unlock()
	if a == nil || !a.enabled {
		return AccountDetail{}, false
	}
	d := AccountDetail{Name: a.name, Stats: a.info()}
	if withStreams {
		for _, s := range a.streamList() {
			si := s.info(false, "")
			si.Config = *s.config()
			if n := j.cfg.ServerName; n != "" {
				si.Cluster = &ClusterInfo{Leader: n}
			}
			d.Streams = append(d.Streams, si)
		}
	}
	return d, true
}

// HasStream reports whether the enabled account serves the named stream (created, or
// recovered from disk at start).
func (j *JetStream) HasStream(account, stream string) bool {
	j.mu.Lock()
	a := j.accounts[account]
	j.mu.Unlock()
	return a != nil && a.enabled && a.lookup(stream) != nil
}

// StoredAccounts lists the account directories of the store (Dir/<account>), sorted.
func (j *JetStream) StoredAccounts() []string {
	names, _ := j.cfg.FS.ReadDir(j.cfg.Dir)
	sort.Strings(names)
	return names
}

// StoredStreams lists the stream directories of an account in the store
// (Dir/<account>/streams/<name>), sorted, skipping what recovery skips (hidden entries and
// half-written ".tmp" ones): the streams a restart would try to recover.
func (j *JetStream) StoredStreams(account string) []string {
	names, _ := j.cfg.FS.ReadDir(filepath.Join(j.accountDir(account), "streams"))
	out := names[:0]
	for _, n := range names {
		if !strings.HasPrefix(n, ".") && !strings.HasSuffix(n, ".tmp") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// HasConsumer reports whether the account's stream has the named consumer running.
func (j *JetStream) HasConsumer(account, stream, consumer string) bool {
	j.mu.Lock()
	a := j.accounts[account]
	j.mu.Unlock()
	if a == nil || !a.enabled {
		return false
	}
	s := a.lookup(stream)
	return s != nil && s.consumer(consumer) != nil
}

// ConsumerDetails are a stream's consumers as /jsz reports them (their config only with
// config), in name order.
func (j *JetStream) ConsumerDetails(account, stream string, config bool) []json.RawMessage {
	j.mu.Lock()
	a := j.accounts[account]
	j.mu.Unlock()
	if a == nil {
		return nil
	}
	s := a.lookup(stream)
	if s == nil {
		return nil
	}
	var out []json.RawMessage
	for _, c := range s.publicConsumers() {
		ci := c.infoWith(false)
		if !config {
			ci.Config = nil
		}
		if b, err := json.Marshal(ci); err == nil {
			out = append(out, b)
		}
	}
	return out
}
