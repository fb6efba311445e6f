package server

import (
	"fmt"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// New refuses options with settings natsd does not implement, naming each, unless
// AllowUnsupported.
func TestConfigUnsupportedNew(t *testing.T) {
	path := writeConf(t, "port: -1\nserver_tags: [\"a\"]\nwebsocket {\n  port: 8080\n  no_tls: true\n}\n")
	o := &Options{}
	rep, err := o.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Unsupported) != 2 || o.Unsupported[1].String() != fmt.Sprintf(`config key "websocket" (%s:3:1)`, path) || len(rep.Unsupported) != 2 {
		t.Fatalf("unsupported = %q", o.Unsupported)
	}
	o.NoSigs, o.NoLog = true, true
	want := fmt.Sprintf(`config key "server_tags" (%[1]s:2:1) is not supported by natsd yet; remove it, or start with --allow_unsupported to ignore it
config key "websocket" (%[1]s:3:1) is not supported by natsd yet; remove it, or start with --allow_unsupported to ignore it`, path)
	if _, err := New(o); err == nil || err.Error() != want {
		t.Fatalf("New: %v\nwant:\n%s", err, want)
	}
	o.AllowUnsupported = true
	if _, err := New(o); err != nil {
		t.Fatal(err)
	}
	if ws := UnsupportedWarnings(o); len(ws) != 2 || ws[0] != fmt.Sprintf(`config key "server_tags" (%s:2:1) is not supported by natsd yet, ignored`, path) {
		t.Fatalf("warnings = %q", ws)
	}
}

// A reload that adds a setting natsd does not implement is refused: with nats-server's
// "config reload not supported for <Field>" where nats-server 2.15.2 refuses that reload too
// (each compared with nats-server run in-process on the same files), with natsd's sentence
// where nats-server would apply it. Nothing changes: a limit changed by the same reload stays
// as it was. With allow_unsupported: true the reload is applied.
func TestConfigReloadUnsupported(t *testing.T) {
	base := "port: -1\nmax_payload: 1MB\n"
	changed := "port: -1\nmax_payload: 2MB\n"
	cases := []struct {
		add   string
		field string // nats-server's refusal names it; "" when nats-server reloads the key
	}{
		{"gateway {\n  name: A\n  port: 7222\n}\n", "Gateway"},
		{"leafnodes {\n  port: 7422\n}\n", "LeafNode"},
		{"websocket {\n  port: 8080\n  no_tls: true\n}\n", "Websocket"},
		{"max_closed_clients: 5\n", "MaxClosedClients"},
		{"no_header_support: true\n", "NoHeaderSupport"},
		{"disable_sublist_cache: true\n", "NoSublistCache"},
		{"max_sub_tokens: 4\n", "MaxSubTokens"},
		{"proxy_protocol: true\n", "ProxyProtocol"},
		{"feature_flags {\n  x: true\n}\n", "FeatureFlags"},
		{"server_tags: [\"a\"]\n", ""},
		{"server_metadata {\n  a: b\n}\n", ""},
		{"trace_headers: true\n", ""},
	}
	s, path := startFromConf(t, base, nil)
	ns, nsPath := startNatsServerFromConf(t, base)
	for _, tc := range cases {
		key := strings.SplitN(strings.TrimSpace(tc.add), " ", 2)[0]
		key = strings.TrimSuffix(key, ":")
		rewrite(t, path, changed+tc.add)
		rewrite(t, nsPath, changed+tc.add)
		err := s.Reload()
		nerr := ns.Reload()
		sentence := fmt.Sprintf(`config key %q (%s:3:1) is not supported by natsd yet; remove it, or set allow_unsupported: true to ignore it`, key, path)
		want := sentence
		if tc.field != "" {
			want = "config reload not supported for " + tc.field + ": " + sentence
			prefix := "config reload not supported for " + tc.field + ": "
			if nerr == nil || !strings.HasPrefix(nerr.Error(), prefix) {
				t.Errorf("%s: nats-server: %v, want %q...", key, nerr, prefix)
			}
		} else if nerr != nil {
			t.Errorf("%s: nats-server refuses the reload: %v", key, nerr)
		}
		if err == nil || err.Error() != want {
			t.Errorf("%s: natsd: %v\nwant:         %s", key, err, want)
		}
		if mp := s.getOpts().MaxPayload; mp != 1<<20 {
			t.Fatalf("%s: max_payload %d after a refused reload", key, mp)
		}
		// nats-server's applied reloads are undone, to compare the next key alone.
		rewrite(t, nsPath, base)
		if err := ns.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	// HTTPS monitoring (https_port) is an option natsd has: nats-server's own text.
	rewrite(t, path, base+"https_port: 8443\n")
	if err := s.Reload(); err == nil || err.Error() != "config reload not supported for HTTPSPort: old=0, new=8443" {
		t.Errorf("https_port: %v", err)
	}
	// With the opt-in: applied, the key ignored; then the opt-in cannot go while the key stays.
	rewrite(t, path, changed+"allow_unsupported: true\nwebsocket {\n  port: 8080\n  no_tls: true\n}\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if o := s.getOpts(); o.MaxPayload != 2<<20 || !o.AllowUnsupported || len(o.Unsupported) != 1 {
		t.Fatalf("after the reload: max_payload %d allow %v unsupported %q", o.MaxPayload, o.AllowUnsupported, o.Unsupported)
	}
	rewrite(t, path, changed+"websocket {\n  port: 8080\n  no_tls: true\n}\n")
	want := fmt.Sprintf(`config key "websocket" (%s:3:1) is not supported by natsd yet; remove it, or set allow_unsupported: true to ignore it`, path)
	if err := s.Reload(); err == nil || err.Error() != want {
		t.Fatalf("opt-in removed: %v", err)
	}
	// The --allow_unsupported flag (re-applied at every reload) keeps the opt-in on.
	s.SetFlagOverrides(func(o *Options) error { o.AllowUnsupported = true; return nil })
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
}

// startNatsServerFromConf runs nats-server 2.15.2 in-process from a config file the test can
// rewrite.
func startNatsServerFromConf(t *testing.T, body string) (*natsserver.Server, string) {
	t.Helper()
	path := writeConf(t, body)
	o, err := natsserver.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	o.NoSigs, o.NoLog = true, true
	s, err := natsserver.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(5e9) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s, path
}
