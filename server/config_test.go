package server

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/natsd/natsd/auth"
)

// writeConf writes a config file (and any extra files, by name) into a temp dir.
func writeConf(t testing.TB, body string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i+1 < len(extra); i += 2 {
		if err := os.WriteFile(filepath.Join(dir, extra[i]), []byte(extra[i+1]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func loadConf(t testing.TB, body string, extra ...string) (*Options, *ConfigReport, error) {
	t.Helper()
	o := &Options{Logtime: true}
	rep, err := o.ProcessConfigFile(writeConf(t, body, extra...))
	return o, rep, err
}

func TestConfigProductionFile(t *testing.T) {
	t.Setenv("NATSD_TEST_TRACE", "true")
	t.Setenv("NATSD_TEST_ADMIN_PASS", "admin-pw")
	o := &Options{Logtime: true}
	rep, err := o.ProcessConfigFile("testdata/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Digest, "sha256:") {
		t.Fatalf("digest %q", rep.Digest)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"ServerName", o.ServerName, "prod_nats_1"},
		{"Host", o.Host, "127.0.0.1"},
		{"Port", o.Port, -1},
		{"HTTPHost", o.HTTPHost, "127.0.0.1"},
		{"HTTPPort", o.HTTPPort, -1},
		{"HTTPBasePath", o.HTTPBasePath, "/monitor"},
		{"MaxPayload", o.MaxPayload, int32(2 << 20)},
		{"MaxPending", o.MaxPending, int64(64 << 20)},
		{"MaxControlLine", o.MaxControlLine, int32(8 << 10)},
		{"MaxConn", o.MaxConn, 10000},
		{"MaxSubs", o.MaxSubs, 1000},
		{"PingInterval", o.PingInterval, 30 * time.Second},
		{"MaxPingsOut", o.MaxPingsOut, 3},
		{"WriteDeadline", o.WriteDeadline, 5 * time.Second},
		{"LameDuckDuration", o.LameDuckDuration, 45 * time.Second},
		{"LameDuckGracePeriod", o.LameDuckGracePeriod, 5 * time.Second},
		{"Trace (env var)", o.Trace, true},
		{"Debug", o.Debug, false},
		{"Logtime", o.Logtime, true},
		{"AuthTimeout", o.AuthTimeout, 3 * time.Second},
		{"NoAuthUser", o.NoAuthUser, "anon"},
		{"TLSTimeout", o.TLSTimeout, 2500 * time.Millisecond},
		{"TLSVerify", o.TLSVerify, false},
		{"AllowNonTLS", o.AllowNonTLS, true},
		{"users", len(o.Users), 4},
		{"nkeys", len(o.Nkeys), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	users := map[string]*auth.User{}
	for _, u := range o.Users {
		users[u.Username] = u
	}
	if users["admin"].Password != "admin-pw" {
		t.Errorf("admin password from env = %q", users["admin"].Password)
	}
	if p := users["admin"].Permissions; p == nil || p.Publish.Allow[0] != "public.>" {
		t.Errorf("admin should get default permissions, got %+v", p)
	}
	app := users["app"]
	if !strings.HasPrefix(app.Password, "$2a$04$") {
		t.Errorf("bcrypt password = %q", app.Password)
	}
	ap := app.Permissions
	if ap == nil || ap.Publish.Allow[0] != "app.>" || ap.Subscribe.Deny[0] != "app.secret" ||
		len(ap.Subscribe.Allow) != 2 || ap.Response == nil || ap.Response.MaxMsgs != 1 || ap.Response.Expires != 2*time.Minute {
		t.Errorf("app permissions (variable) = %+v %+v %+v", ap.Publish, ap.Subscribe, ap.Response)
	}
	sp := users["svc"].Permissions
	if sp.Subscribe.Allow[0] != "svc.* workers" || sp.Response.MaxMsgs != 5 || sp.Response.Expires != time.Minute {
		t.Errorf("svc permissions = %+v %+v", sp.Subscribe, sp.Response)
	}
	if sp.Publish == nil || sp.Publish.Allow == nil || len(sp.Publish.Allow) != 0 {
		t.Errorf("allow_responses must turn off the blanket publish allow: %+v", sp.Publish)
	}
	if d := users["anon"].Permissions.Publish.Deny; len(d) != 1 || d[0] != ">" {
		t.Errorf("anon deny = %v", d)
	}
	if o.Nkeys[0].Nkey != "UDI6WVOC74MKILLGMMLEQ2QLTBJDUUERIV725CF5POCUKONT5PCRVDRV" || o.Nkeys[0].Permissions == nil {
		t.Errorf("nkey user = %+v", o.Nkeys[0])
	}
	tc := o.TLSConfig
	if tc == nil || len(tc.Certificates) != 1 || tc.ClientCAs == nil || tc.MinVersion != tls.VersionTLS12 ||
		len(tc.CipherSuites) != 2 || len(tc.CurvePreferences) != 2 || tc.ClientAuth != tls.NoClientCert {
		t.Fatalf("tls config = %+v", tc)
	}
	if len(rep.Unsupported) != 0 {
		t.Errorf("unsupported = %q", rep.Unsupported)
	}
	if !o.JetStream || o.StoreDir != "/var/lib/nats" || o.JetStreamMaxMemory != 1e9 || o.JetStreamMaxStore != 1e10 {
		t.Errorf("jetstream = %v %q %d %d", o.JetStream, o.StoreDir, o.JetStreamMaxMemory, o.JetStreamMaxStore)
	}
}

// Files natsd accepts, nats-server accepts too (and the reverse for the shared keys).
func TestConfigNatsServerAgrees(t *testing.T) {
	t.Setenv("NATSD_TEST_TRACE", "false")
	t.Setenv("NATSD_TEST_ADMIN_PASS", "x")
	files := []string{"testdata/nats-server.conf"}
	bodies := []string{
		"port = 4222\nhost: 0.0.0.0; max_payload: 512KB\n",
		"{\n \"listen\": \"127.0.0.1:4333\",\n \"debug\": true\n}\n",
		"authorization { token: \"s3cr3t\", timeout: \"5s\" }\n",
		"authorization { user: a, password: b }\nping_interval: 2m\nwrite_deadline: 10s\n",
		"authorization { users: [ {user: a, password: b, permissions: { publish: { allow: [\"a.*\"], deny: \"a.b\" }, subscribe: \">\" } } ] }\n",
		"max_connections: 0\nmax_subs: 10\nlogtime: no\nlog_file: /tmp/x.log\npid_file: /tmp/x.pid\nprof_port: 6060\n",
		"cluster { name: c, listen: 127.0.0.1:6222 }\nleafnodes { port: 7422 }\nsystem_account: SYS\naccounts { SYS: {} }\n",
		"http_port: 8222\nhttps_port: 8443\nhttp_base_path: /x\nlame_duck_duration: \"1m\"\n",
		// Values that refuse every client on both (TestConfigValuesMeaning).
		"authorization { user: a, password: b, timeout: -1 }\nmax_subs: -5\nwrite_deadline: \"-1s\"\nmax_connections: -3\n",
	}
	for _, b := range bodies {
		files = append(files, writeConf(t, b))
	}
	for _, f := range files {
		o := &Options{}
		_, err := o.ProcessConfigFile(f)
		_, nerr := natsserver.ProcessConfigFile(f)
		if (err == nil) != (nerr == nil) {
			body, _ := os.ReadFile(f)
			t.Errorf("%s:\nnatsd: %v\nnats-server: %v", body, err, nerr)
		}
	}
}

var located = regexp.MustCompile(`^[^\s:]+:\d+:\d+: `)

func TestConfigErrors(t *testing.T) {
	tests := []struct{ body, want string }{
		{"port: 4222\nfoo: bar\n", `nats.conf:2:1: unknown field "foo"`},
		{"port: \"x\"\n", `nats.conf:1:0: expected an integer for "port", got string`},
		{"max_payload: 3GB\n", "nats.conf:1:0: max_payload value is too big"},
		{"lame_duck_duration: 5s\n", "invalid lame_duck_duration of 5s, minimum is 30 seconds"},
		{"server_name: \"a b\"\n", "server name cannot contain spaces"},
		{"authorization {\n  user: a\n  token: t\n}\n", "nats.conf:1:0: Cannot have a user/pass and token"},
		{"authorization {\n  users: [{user: a}, {user: a}]\n}\n", `Duplicate user "a" detected`},
		{"authorization {\n  users: [{nkey: NOTAKEY}]\n}\n", "Not a valid public nkey for a user"},
		{"authorization {\n  bogus: 1\n}\n", `nats.conf:2:3: unknown field "bogus"`},
		{"authorization {\n  users: [{user: a, permissions: {publish: \"a..b\"}}]\n}\n", `subject "a..b" is not a valid subject`},
		{"authorization {\n  users: [{user: a, permissions: {pub: {allow: [\"a\"], nope: [\"b\"]}}}]\n}\n", `Unknown field name "nope" parsing subject permissions`},
		{"no_auth_user: ghost\n", `no_auth_user: "ghost" present, but users/nkeys are not defined`},
		{"no_auth_user: ghost\nauthorization { users: [{user: a}] }\n", `no_auth_user: "ghost" not present as user or nkey`},
		{"tls {\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent.key\n}\n", "error parsing X509 certificate/key pair"},
		{"tls {\n  min_version: \"1.1\"\n}\n", "unsupported TLS version"},
		{"tls {\n  cipher_suites: [\"NOPE\"]\n}\n", "nats.conf:2:20: unrecognized cipher NOPE"},
		{"tls {\n  pinned_certs: [\"abc\"]\n}\n", `'pinned_certs' key abc does not look like hex-encoded sha256 of DER encoded SubjectPublicKeyInfo`},
		{"tls {\n  pinned_certs: \"abc\"\n}\n", `expected 'pinned_certs' to be a list`},
		{"tls {\n  cert_file: x\n}\n", "missing 'key_file' in TLS configuration"},
		{"ping_interval: \"forever\"\n", "error parsing ping_interval"},
		{"port: $NOPE_NOT_SET_ANYWHERE\n", "variable reference for 'NOPE_NOT_SET_ANYWHERE' on line 1 can not be found"},
		{"port: 4222\nmax_payload: 99999999999999999999999\n", "nats.conf:2:1: integer"},
		{"port: 4222\ninclude ./missing.conf\n", "nats.conf:2:1: error parsing include file"},
		{"include ./nats.conf\n", "include cycle"},
		{"a {\n", "nats.conf:2:1: Parse error on line 2"},
		{"operator: /etc/op.jwt\n", "not supported yet"},
		{"engine: bogus\n", `unknown engine "bogus"`},
	}
	for _, tc := range tests {
		_, _, err := loadConf(t, tc.body)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.body, err, tc.want)
			continue
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !located.MatchString(line) {
				t.Errorf("%q: error line not located: %q", tc.body, line)
			}
		}
	}
}

func TestConfigUnitsAliasesAndSyntax(t *testing.T) {
	o, rep, err := loadConf(t, `
# comment
// comment too
net = 127.0.0.2
port 4333
max_payload: 1MB; max_pending: 100mib
max_control_line: 2k
max_conn: 5
max_subs: 7
monitor_port: 8333
pidfile: "/tmp/x.pid"
logfile: '/tmp/x.log'
ping_interval: 90   # integer seconds: a warning
debug: on
trace_verbose: yes
logtime: off
engine: netpoll
reactors: 2
include "extra.conf"
`, "extra.conf", "write_deadline: 1m30s\nserver_name: inc\n")
	if err != nil {
		t.Fatal(err)
	}
	if o.Host != "127.0.0.2" || o.Port != 4333 || o.MaxPayload != 1<<20 || o.MaxPending != 100<<20 ||
		o.MaxControlLine != 2000 || o.MaxConn != 5 || !o.MaxConnSet || o.MaxSubs != 7 || o.HTTPPort != 8333 ||
		o.PidFile != "/tmp/x.pid" || o.LogFile != "/tmp/x.log" || o.PingInterval != 90*time.Second ||
		!o.Debug || !o.Trace || o.Logtime || o.Engine != "netpoll" || o.Reactors != 2 ||
		o.WriteDeadline != 90*time.Second || o.ServerName != "inc" {
		t.Fatalf("options = %+v", o)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0].Error(), "ping_interval should be converted to a duration") ||
		!located.MatchString(rep.Warnings[0].Error()) {
		t.Fatalf("warnings = %v", rep.Warnings)
	}
	// An explicit 0 is nats-server's -1 (refuse every client).
	o, _, err = loadConf(t, "max_connections: 0\n")
	if err != nil || o.MaxConn != -1 {
		t.Fatalf("max_connections 0 -> %d, %v", o.MaxConn, err)
	}
	// Later keys win over earlier aliases.
	o, _, _ = loadConf(t, "host: a\nnet: b\n")
	if o.Host != "b" {
		t.Fatalf("host = %q", o.Host)
	}
}

func TestConfigUnsupportedReportedOnce(t *testing.T) {
	_, rep, err := loadConf(t, `
port: 4222
jetstream: enabled
cluster { name: c, port: 6222 }
gateway { name: g }
leafnodes { port: 7422 }
websocket { port: 8080, no_tls: true }
mqtt { port: 1883 }
accounts { A: {} }
system_account: A
mappings { "a": "b" }
server_tags: ["a"]
`)
	if err != nil {
		t.Fatal(err)
	}
	// cluster is parsed now (routes not running is said at start-up, not here).
	want := []string{"gateway", "leafnodes", "websocket", "mqtt", "server_tags"}
	if len(rep.Unsupported) != len(want) {
		t.Fatalf("unsupported = %q", rep.Unsupported)
	}
	for i, w := range want {
		if rep.Unsupported[i].Key != w || !strings.Contains(rep.Unsupported[i].String(), `config key "`+w+`" (`) {
			t.Errorf("unsupported[%d] = %q, want %q", i, rep.Unsupported[i], w)
		}
	}
}

// FuzzConfig: no input crashes the loader, and every error names a line.
func FuzzConfig(f *testing.F) {
	for _, s := range []string{
		"port: 4222\n",
		"listen: 127.0.0.1:4222\nmax_payload: 1MB\n",
		"authorization { users: [ {user: a, password: b, permissions: {publish: [\"a\"], subscribe: {deny: \"b\"}}} ] }",
		"tls { cert_file: a, key_file: b, timeout: 2.5 }",
		"a = 1\nport: $a\n",
		"include x.conf\n",
		"x {\n y: [1, 2, {z: 3}]\n}\n",
		"(\nraw\n)\n",
		"port: 99999999999999999999\n",
		"ping_interval: 5\nmax_connections: 0\n",
		"{ \"port\": 1 }",
		"no_auth_user: x\n",
		"max_payload: -1\nlame_duck_duration: -5s\n",
		"authorization { timeout: 1e300 }\n",
		"accounts { A: { users: [{user: a}], exports: [{service: x, latency: {sampling: 5, subject: l}}] }, B: { imports: [{service: {account: A, subject: x}, to: y}] } }\n",
		"accounts { A: { exports: [{stream: \"s.*\", account_token_position: 2}], imports: [{stream: {account: A, subject: s.A}, prefix: p}] } }\nsystem_account: A\n",
		"mappings { \"a.*\": [{destination: \"b.$1\", weight: 40%, cluster: c}, {dest: c, weight: 60}] }\n",
		"accounts: [A, B]\nno_sys_acc: true\n",
		"cluster { name: c, listen: 127.0.0.1:-1, routes: [\"nats://u:p@h:1\"], authorization { user: u, password: p, permissions { import: a } }, permissions { export: { deny: b } }, accounts: [A], compression: { mode: s2_auto, rtts: [\"1ms\"] }, tls { insecure: true }, write_timeout: close }\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "x.conf"), []byte("debug: true\n"), 0o600)
	f.Fuzz(func(t *testing.T, body string) {
		p := filepath.Join(dir, "fuzz.conf")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		o := &Options{}
		_, err := o.ProcessConfigFile(p)
		if err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !located.MatchString(line) {
				t.Fatalf("error does not name a line: %q (input %q)", line, body)
			}
		}
	})
}
