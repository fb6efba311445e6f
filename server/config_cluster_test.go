package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/cluster"
)

// natsdStartLoad is natsd's verdict on a file as start-up gives it: the parser, then New
// (defaults and start-up checks). The options are the server's.
func natsdStartLoad(path string) (*Options, []error, error) {
	o := &Options{Logtime: true, NoLog: true, NoSigs: true}
	rep, err := o.ProcessConfigFile(path)
	var warns []error
	if rep != nil {
		warns = rep.Warnings
	}
	if err != nil {
		return nil, warns, err
	}
	s, err := New(o)
	if err != nil {
		return nil, warns, err
	}
	return &s.opts, warns, nil
}

// nsStartLoad is nats-server's: its parser (warnings kept), then NewServer.
func nsStartLoad(path string) (*natsserver.Options, []error, error) {
	o := &natsserver.Options{}
	var warns []error
	if err := o.ProcessConfigFile(path); err != nil {
		pe, ok := err.(interface {
			Errors() []error
			Warnings() []error
		})
		if !ok {
			return nil, nil, err
		}
		warns = pe.Warnings()
		if len(pe.Errors()) > 0 {
			return nil, warns, errors.Join(pe.Errors()...)
		}
	}
	o.NoLog, o.NoSigs, o.Port = true, true, -1
	s, err := natsserver.NewServer(o)
	if err != nil {
		return nil, warns, err
	}
	s.Shutdown()
	return o, warns, nil
}

// clusterView is the cluster options in one shape for both servers.
type clusterView struct {
	Name, Host                      string
	Port                            int
	Advertise                       string
	NoAdvertise                     bool
	Routes                          []string
	Username, Password              string
	AuthTimeout                     time.Duration
	Import, Export                  *auth.SubjectPermission
	TLS, TLSMap, TLSCheckKnownURLs  bool
	TLSTimeout                      time.Duration
	TLSPinned                       []string
	TLSInsecure, TLSVerify, TLSRoot bool
	ConnectRetries                  int
	ConnectBackoff                  bool
	PoolSize                        int
	PinnedAccounts                  []string
	Compression                     string
	RTTThresholds                   []time.Duration
	PingInterval                    time.Duration
	MaxPingsOut                     int
	WriteDeadline                   time.Duration
	WriteTimeout                    string
}

func urlStrings[T fmt.Stringer](us []T) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.String())
	}
	return out
}

func pinnedList[M ~map[string]struct{}](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func tlsView(v *clusterView, c *tls.Config) {
	if c == nil {
		return
	}
	v.TLS = true
	v.TLSInsecure = c.InsecureSkipVerify
	v.TLSVerify = c.ClientAuth == tls.RequireAndVerifyClientCert
	v.TLSRoot = c.RootCAs != nil
}

func natsdClusterView(o *Options) clusterView {
	c := &o.Cluster
	v := clusterView{
		Name: c.Name, Host: c.Host, Port: c.Port, Advertise: c.Advertise, NoAdvertise: c.NoAdvertise,
		Username: c.Username, Password: c.Password, AuthTimeout: c.AuthTimeout,
		TLSMap: c.TLSMap, TLSCheckKnownURLs: c.TLSCheckKnownURLs, TLSTimeout: c.TLSTimeout,
		TLSPinned: pinnedList(c.TLSPinnedCerts), ConnectRetries: c.ConnectRetries,
		ConnectBackoff: c.ConnectBackoff, PoolSize: c.PoolSize, PinnedAccounts: c.PinnedAccounts,
		Compression: c.Compression.Mode, RTTThresholds: c.Compression.RTTThresholds,
		PingInterval: c.PingInterval, MaxPingsOut: c.MaxPingsOut, WriteDeadline: c.WriteDeadline,
		WriteTimeout: c.WriteTimeout, Routes: urlStrings(c.Routes),
	}
	if p := c.Permissions; p != nil {
		v.Import, v.Export = p.Import, p.Export
	}
	tlsView(&v, c.TLSConfig)
	return v
}

func nsClusterView(o *natsserver.Options) clusterView {
	c := &o.Cluster
	v := clusterView{
		Name: c.Name, Host: c.Host, Port: c.Port, Advertise: c.Advertise, NoAdvertise: c.NoAdvertise,
		Username: c.Username, Password: c.Password, AuthTimeout: time.Duration(c.AuthTimeout * float64(time.Second)),
		TLSMap: c.TLSMap, TLSCheckKnownURLs: c.TLSCheckKnownURLs,
		TLSTimeout: time.Duration(c.TLSTimeout * float64(time.Second)),
		TLSPinned:  pinnedList(c.TLSPinnedCerts), ConnectRetries: c.ConnectRetries,
		ConnectBackoff: c.ConnectBackoff, PoolSize: c.PoolSize, PinnedAccounts: c.PinnedAccounts,
		Compression: c.Compression.Mode, RTTThresholds: c.Compression.RTTThresholds,
		PingInterval: c.PingInterval, MaxPingsOut: c.MaxPingsOut, WriteDeadline: c.WriteDeadline,
		WriteTimeout: c.WriteTimeout.String(), Routes: urlStrings(o.Routes),
	}
	sp := func(p *natsserver.SubjectPermission) *auth.SubjectPermission {
		if p == nil {
			return nil
		}
		return &auth.SubjectPermission{Allow: p.Allow, Deny: p.Deny}
	}
	if p := c.Permissions; p != nil {
		v.Import, v.Export = sp(p.Import), sp(p.Export)
	}
	tlsView(&v, c.TLSConfig)
	return v
}

// clusterCase is one cluster {} block for both servers. err is natsd's reason when it
// refuses ("": the file is valid); nats-server must refuse with it too, or with one of ns
// (where its text is a Go panic message for a value of the wrong type). deviation: nats-server
// accepts the file at load and fails later, or never (why natsd refuses now). warn: a
// warning both give. check looks at natsd's options of a valid file; they must equal
// nats-server's in any case.
type clusterCase struct {
	name      string
	body      string
	err       string
	ns        []string
	deviation string
	warn      string
	// unordered: nats-server applies the block's keys in Go map order, so its result for
	// this file varies from run to run; natsd's (file order) is checked by check alone.
	unordered bool
	check     func(t *testing.T, c *cluster.Options)
}

func runClusterCases(t *testing.T, cases []clusterCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConf(t, tc.body)
			o, warns, err := natsdStartLoad(path)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("natsd refuses a valid file: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("natsd accepts, want %q", tc.err)
			case err != nil && !strings.Contains(reasons(err), tc.err):
				t.Fatalf("natsd: %v\nwant %q", err, tc.err)
			}
			var ce ConfigErrors
			if errors.As(err, &ce) {
				for _, line := range strings.Split(err.Error(), "\n") {
					if !located.MatchString(line) {
						t.Fatalf("natsd error not located: %q", line)
					}
				}
			}
			if tc.warn != "" {
				if !slices.ContainsFunc(warns, func(w error) bool { return strings.Contains(w.Error(), tc.warn) }) {
					t.Fatalf("natsd warnings %v, want %q", warns, tc.warn)
				}
			} else if len(warns) > 0 {
				t.Fatalf("natsd warns: %v", warns)
			}
			no, nwarns, nerr := nsStartLoad(path)
			switch {
			case tc.deviation != "":
				if nerr != nil {
					t.Fatalf("nats-server refuses (%v); the case says it accepts (%s)", nerr, tc.deviation)
				}
				return
			case nerr == nil && tc.err != "":
				t.Fatalf("nats-server accepts; natsd: %v", err)
			case nerr != nil && tc.err == "":
				t.Fatalf("nats-server refuses a file natsd accepts: %v", nerr)
			case nerr != nil:
				got := reasons(nerr)
				ok := strings.Contains(got, tc.err)
				for _, alt := range tc.ns {
					ok = ok || strings.Contains(got, alt)
				}
				if !ok {
					t.Fatalf("nats-server: %q\nnatsd:       %q", got, reasons(err))
				}
			}
			if tc.warn != "" && !slices.ContainsFunc(nwarns, func(w error) bool { return strings.Contains(w.Error(), tc.warn) }) {
				t.Fatalf("nats-server warnings %v, want %q", nwarns, tc.warn)
			}
			if err != nil {
				return
			}
			got, want := natsdClusterView(o), nsClusterView(no)
			if !tc.unordered && !reflect.DeepEqual(got, want) {
				t.Fatalf("cluster options differ\nnatsd:       %+v\nnats-server: %+v", got, want)
			}
			if tc.check != nil {
				tc.check(t, &o.Cluster)
			}
		})
	}
}

// Every key of the cluster block, its aliases and forms, parsed (and defaulted, and
// normalized) as nats-server does.
func TestConfigClusterKeys(t *testing.T) {
	cert, _ := filepath.Abs("testdata/certs/server-cert.pem")
	key, _ := filepath.Abs("testdata/certs/server-key.pem")
	ca, _ := filepath.Abs("testdata/certs/ca.pem")
	pin := strings.Repeat("ab", 32)
	runClusterCases(t, []clusterCase{
		{name: "every key", body: `accounts { A: {}, B: {} }
cluster {
  name: "c1"
  listen: "127.0.0.1:6333"
  advertise: "203.0.113.1:16333"
  no_advertise: true
  routes: ["nats://ruser:rpass@127.0.0.1:6334", " nats://127.0.0.2:6335 "]
  authorization { user: ru, password: rp, timeout: 2.5 }
  permissions { import: "in.>", export: { allow: ["out.>", "x"], deny: "out.secret" } }
  pool_size: 5
  accounts: [A, B]
  compression: { mode: s2_auto, rtt_thresholds: ["5ms", "20ms", "40ms"] }
  connect_retries: 7
  connect_backoff: true
  ping_interval: "20s"
  ping_max: 4
  write_deadline: "3s"
  write_timeout: retry
}
`, check: func(t *testing.T, c *cluster.Options) {
			if !c.Enabled() || c.Port != 6333 || len(c.Routes) != 2 || c.Routes[0].User.Username() != "ruser" ||
				!slices.Equal(c.PinnedAccounts, []string{"A", "B", "$SYS"}) || c.Compression.Mode != cluster.CompressionS2Auto ||
				c.AuthTimeout != 2500*time.Millisecond || c.WriteTimeout != cluster.WriteTimeoutRetry {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "host net port aliases", body: "cluster { net: 127.0.0.9, port: -1, cluster_advertise: \"h:1\" }\n", check: func(t *testing.T, c *cluster.Options) {
			if c.Host != "127.0.0.9" || c.Port != -1 || c.Advertise != "h:1" {
				t.Fatalf("%+v", c)
			}
		}},
		// A listen without a host clears the host (then defaulted), as in nats-server when it
		// happens to apply listen after host.
		{name: "host then listen", body: "cluster { host: a, listen: 6222 }\n", unordered: true, check: func(t *testing.T, c *cluster.Options) {
			if c.Host != "0.0.0.0" || c.Port != 6222 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "defaults", body: "cluster { port: -1 }\n", check: func(t *testing.T, c *cluster.Options) {
			if c.Host != "0.0.0.0" || c.PoolSize != 3 || c.Compression.Mode != "accept" || c.AuthTimeout != 2*time.Second ||
				c.TLSTimeout != 2*time.Second || !slices.Equal(c.PinnedAccounts, []string{"$SYS"}) {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "no port: nothing defaulted", body: "cluster { name: c, routes: [\"nats://127.0.0.1:1\"] }\n", check: func(t *testing.T, c *cluster.Options) {
			if c.Enabled() || c.Host != "" || c.PoolSize != 0 || c.Compression.Mode != "" || c.PinnedAccounts != nil {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "pool disabled", body: "cluster { port: -1, pool_size: -1 }\n"},
		{name: "system_account pinned", body: "system_account: SYS\naccounts { SYS: {} }\ncluster { port: -1, accounts: [SYS] }\n"},
		{name: "no_system_account", body: "no_system_account: true\naccounts { A: {} }\ncluster { port: -1, accounts: A }\n"},
		{name: "pinned account not configured", body: "cluster { port: -1, accounts: [NOPE] }\n"},
		{name: "compression true", body: "cluster { port: -1, compression: true }\n"},
		{name: "compression false", body: "cluster { port: -1, compression: false }\n"},
		{name: "compression on", body: "cluster { port: -1, compression: on }\n"},
		{name: "compression string on", body: "cluster { port: -1, compression: \"enabled\" }\n"},
		{name: "compression auto defaults", body: "cluster { port: -1, compression: auto }\n", check: func(t *testing.T, c *cluster.Options) {
			if !slices.Equal(c.Compression.RTTThresholds, cluster.DefaultRTTThresholds) {
				t.Fatalf("%v", c.Compression)
			}
		}},
		{name: "compression rtt aliases and zeros", body: "cluster { port: -1, compression: { mode: s2_auto, rtts: [\"0ms\", \"-5ms\", \"10ms\", \"0\"] } }\n"},
		{name: "compression best", body: "cluster { port: -1, compression: { mode: best } }\n"},
		{name: "compression not supported", body: "cluster { port: -1, compression: not_supported }\n"},
		{name: "thresholds without mode", body: "cluster { port: -1, compression: { thresholds: [\"1ms\"] } }\n"},
		{name: "write_timeout default", body: "cluster { port: -1, write_timeout: default }\n"},
		{name: "write_timeout close", body: "cluster { port: -1, write_timeout: close }\n"},
		{name: "negative values kept", body: "cluster { port: -1, ping_max: -1, connect_retries: -3, ping_interval: \"-1s\", write_deadline: \"-1s\" }\n"},
		{name: "auth user only", body: "cluster { port: -1, authorization { user: u, password: p } }\n"},
		{name: "auth timeout as duration", body: "cluster { port: -1, authorization { user: u, password: p, timeout: \"3s\" } }\n"},
		{name: "permissions publish/subscribe aliases", body: "cluster { port: -1, permissions { publish: \"a.>\", subscribe: [\"b.*\"] } }\n"},
		{name: "permissions allow_responses false", body: "cluster { port: -1, permissions { import: a, allow_responses: false } }\n"},
		{name: "deprecated authorization permissions",
			body: "cluster { port: -1, authorization { user: u, password: p, permissions { import: \"a.>\" } } }\n",
			warn: `setting "permissions" within cluster authorization block is deprecated`,
			check: func(t *testing.T, c *cluster.Options) {
				if c.Permissions == nil || c.Permissions.Import.Allow[0] != "a.>" {
					t.Fatalf("%+v", c.Permissions)
				}
			}},
		{name: "block permissions win over authorization's",
			body: "cluster {\n permissions { import: \"b.>\" }\n authorization { user: u, password: p, permissions { import: \"a.>\" } }\n}\n",
			warn: "deprecated",
			check: func(t *testing.T, c *cluster.Options) {
				if c.Permissions.Import.Allow[0] != "b.>" {
					t.Fatalf("%+v", c.Permissions.Import)
				}
			}},
		{name: "tls", body: fmt.Sprintf(`cluster {
  port: -1
  tls { cert_file: %q, key_file: %q, ca_file: %q, timeout: 3, verify_cert_and_check_known_urls: true, insecure: true, pinned_certs: [%q] }
}
`, cert, key, ca, strings.ToUpper(pin)), check: func(t *testing.T, c *cluster.Options) {
			if c.TLSConfig == nil || !c.TLSConfig.InsecureSkipVerify || c.TLSConfig.RootCAs == nil || c.AuthTimeout != 4*time.Second {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "tls verify_and_map", body: fmt.Sprintf("cluster { port: -1, tls { cert_file: %q, key_file: %q, verify_and_map: true } }\n", cert, key)},
		{name: "tls keys routes ignore", body: fmt.Sprintf("cluster { port: -1, tls { cert_file: %q, key_file: %q, handshake_first: true, connection_rate_limit: 5 } }\n", cert, key)},
		{name: "duplicate route", body: "cluster { port: -1, routes: [\"nats://a:1\", \"nats://a:1\"] }\n", warn: "Duplicate route entry detected"},
		{name: "ping_interval capped", body: "cluster { port: -1, ping_interval: \"1m\" }\n", warn: "Cluster 'ping_interval' will reset to 30s which is the max for routes"},
		{name: "ping_interval in seconds", body: "cluster { port: -1, ping_interval: 10 }\n", warn: "ping_interval should be converted to a duration"},
		{name: "auth timeout high", body: "cluster { port: -1, authorization { timeout: 120 } }\n",
			warn: "timeout of 120 (120.000000 seconds) is high, consider keeping it under 60 seconds"},
		{name: "unused variable", body: "cluster { port: -1, x: 5, name: $x }\n", err: "expected a string", ns: []string{"interface conversion"}},
		{name: "variable as value", body: "n: c9\ncluster { port: -1, name: $n }\n"},
	})
}

// Each refusal of the cluster block, with nats-server's text.
func TestConfigClusterErrors(t *testing.T) {
	panics := []string{"interface conversion"}
	runClusterCases(t, []clusterCase{
		{name: "not a map", body: "cluster: 5\n", err: "Expected map to define cluster, got int64"},
		{name: "unknown key", body: "cluster {\n  port: -1\n  bogus: 1\n}\n", err: `unknown field "bogus"`},
		{name: "name with spaces", body: "cluster { name: \"a b\" }\n", err: "cluster name cannot contain spaces"},
		{name: "reserved name", body: "cluster { name: \"_\" }\n", err: "cluster name is reserved"},
		{name: "listen no port", body: "cluster { listen: abc }\n", err: `could not parse address string "abc"`},
		{name: "listen bad port", body: "cluster { listen: \"a:b\" }\n", err: `could not parse port "b"`},
		{name: "listen type", body: "cluster { listen: true }\n", err: "expected port or host:port, got", ns: []string{"expected port or host:port, got bool"}},
		{name: "users", body: "cluster { authorization { users: [{user: a, password: b}] } }\n", err: "Cluster authorization does not allow multiple users"},
		{name: "token", body: "cluster { authorization { token: x } }\n", err: "Cluster authorization does not support tokens"},
		{name: "user and token", body: "cluster { authorization { user: a, token: x } }\n", err: "Cluster authorization does not support tokens"},
		{name: "callout", body: "cluster { authorization { auth_callout { issuer: x } } }\n", err: "Cluster authorization does not support callouts",
			ns: []string{"Expected callout user to be a valid public account nkey"}},
		{name: "authorization unknown key", body: "cluster { authorization { bogus: 1 } }\n", err: `unknown field "bogus"`},
		{name: "authorization permission subject", body: "cluster { authorization { user: a, permissions { import: \"a b c\" } } }\n", err: `subject "a b c" is not a valid subject`,
			warn: "deprecated"},
		{name: "authorization export queue", body: "cluster { authorization { user: a, permissions { export: \"q.> grp\" } } }\n",
			err: `cluster export allow: subject "q.> grp" is not a valid subject`},
		{name: "dynamic responses", body: "cluster { permissions { import: \"a.>\", allow_responses: true } }\n", err: "Cluster permissions do not support dynamic responses"},
		{name: "import subject", body: "cluster { permissions { import: \"a..b\" } }\n", err: `subject "a..b" is not a valid subject`},
		{name: "export queue", body: "cluster { permissions { publish: a, subscribe: \"q.> grp\" } }\n", err: `cluster export allow: subject "q.> grp" is not a valid subject`},
		{name: "export deny queue", body: "cluster { permissions { export: { deny: \"q.> grp\" } } }\n", err: `cluster export deny: subject "q.> grp" is not a valid subject`},
		{name: "permissions unknown key", body: "cluster { permissions { bogus: 1 } }\n", err: `Unknown field "bogus" parsing permissions`},
		{name: "route url", body: "cluster { routes: [\"nats://a b:1\"] }\n", err: `error parsing route url ["nats://a b:1"]`},
		{name: "route url no scheme", body: "cluster { routes: [\"127.0.0.1:6222\"] }\n", err: `error parsing route url ["127.0.0.1:6222"]`},
		{name: "accounts type", body: "cluster { accounts: 5 }\n", err: "error parsing accounts: unsupported type int64"},
		{name: "accounts element type", body: "cluster { accounts: [A, true] }\n", err: "error parsing accounts: unsupported type in array bool"},
		{name: "compression type", body: "cluster { compression: 5 }\n", err: `field "compression" should be a boolean or a structure, got int64`},
		{name: "compression rtt", body: "cluster { compression: { mode: s2_auto, rtt_thresholds: [\"1ms\", \"x\"] } }\n", err: `time: invalid duration "x"`},
		{name: "compression unknown key", body: "cluster { compression: { bogus: 1 } }\n", err: `unknown field "bogus"`},
		{name: "write_timeout", body: "cluster { write_timeout: bogus }\n", err: "write_timeout must be 'default', 'close' or 'retry'"},
		{name: "write_deadline", body: "cluster { write_deadline: \"x\" }\n", err: `error parsing write_deadline: time: invalid duration "x"`},
		{name: "ping_interval", body: "cluster { ping_interval: \"x\" }\n", err: `error parsing ping_interval: time: invalid duration "x"`},
		{name: "tls check known urls type", body: "cluster { tls { verify_cert_and_check_known_urls: 1 } }\n", err: "error parsing tls config, expected 'verify_cert_and_check_known_urls' to be a boolean"},
		{name: "tls unknown key", body: "cluster { tls { bogus: 1 } }\n", err: `error parsing tls config, unknown field "bogus"`},
		{name: "tls pinned cert", body: "cluster { tls { pinned_certs: [\"xyz\"] } }\n", err: "error parsing tls config, 'pinned_certs' key xyz does not look like hex-encoded sha256"},
		{name: "tls missing key", body: "cluster { tls { cert_file: \"a.pem\" } }\n", err: "missing 'key_file' in TLS configuration"},
		// Checks made when the server is created (nats-server's validateOptions).
		{name: "unsupported compression", body: "cluster { port: -1, compression: bogus }\n", err: `unsupported compression mode "bogus"`},
		{name: "unsupported compression without port", body: "cluster { compression: bogus }\n", err: `unsupported compression mode "bogus"`},
		{name: "s2_uncompressed is no mode", body: "cluster { port: -1, compression: s2_uncompressed }\n", err: `unsupported compression mode "s2_uncompressed"`},
		{name: "rtt order", body: "cluster { port: -1, compression: { mode: s2_auto, rtt_thresholds: [\"50ms\", \"10ms\"] } }\n", err: "RTT threshold values [50ms 10ms] should be in ascending order"},
		{name: "rtt all zero", body: "cluster { port: -1, compression: { mode: s2_auto, rtt_thresholds: [\"0ms\"] } }\n", err: `compression mode "s2_auto" requires at least one RTT threshold`},
		{name: "rtt too many", body: "cluster { port: -1, compression: { mode: auto, rtt_thresholds: [\"1ms\", \"2ms\", \"3ms\", \"4ms\", \"5ms\"] } }\n",
			err: `compression mode "auto" should have no more than 4 RTT thresholds: [1ms 2ms 3ms 4ms 5ms]`},
		{name: "duplicate pinned account", body: "accounts { A: {} }\ncluster { port: -1, accounts: [A, A] }\n", err: `found duplicate account name "A" in pinned accounts list ["A" "A" "$SYS"]`},
		{name: "duplicate pinned account without port", body: "accounts { A: {} }\ncluster { accounts: [A, A] }\n", err: `found duplicate account name "A" in pinned accounts list ["A" "A"]`},
		{name: "negative pool with pinned", body: "accounts { A: {} }\ncluster { port: -1, pool_size: -1, accounts: [A] }\n", err: "pool_size cannot be negative if pinned accounts are specified"},
		{name: "jetstream needs server_name", body: "jetstream { store_dir: \"" + t.TempDir() + "\" }\ncluster { port: -1, name: c }\n", err: "jetstream cluster requires `server_name` to be set"},
		{name: "jetstream needs cluster name", body: "server_name: s\njetstream { store_dir: \"" + t.TempDir() + "\" }\ncluster { port: -1 }\n", err: "jetstream cluster requires `cluster.name` to be set"},
		// Values of the wrong type: nats-server answers with a Go runtime panic message.
		{name: "name type", body: "cluster { name: 5 }\n", err: `expected a string for "name", got integer`, ns: panics},
		{name: "port type", body: "cluster { port: \"x\" }\n", err: `expected an integer for "port", got string`, ns: panics},
		{name: "routes type", body: "cluster { routes: \"nats://a:1\" }\n", err: `expected an array for "routes", got string`, ns: panics},
		{name: "pool_size type", body: "cluster { pool_size: \"x\" }\n", err: `expected an integer for "pool_size", got string`, ns: panics},
		{name: "no_advertise type", body: "cluster { no_advertise: 1 }\n", err: `expected a boolean for "no_advertise", got integer`, ns: panics},
		{name: "authorization type", body: "cluster { authorization: 5 }\n", err: `expected a map for "authorization", got integer`, ns: panics},
		{name: "write_timeout type", body: "cluster { write_timeout: 5 }\n", err: `expected a string for "write_timeout", got integer`, ns: panics},
		// Refused now, where nats-server fails later (its route listener cannot start: a
		// fatal error once the server runs).
		{name: "port out of range", body: "cluster { port: 70000 }\n", err: "port value 70000 is out of range", deviation: "nats-server fails to listen"},
		{name: "advertise", body: "cluster { port: -1, advertise: \"a:b:c\" }\n",
			err: "Error setting route INFO with Cluster.Advertise value of a:b:c, err=address a:b:c: too many colons", deviation: "nats-server exits when routing starts"},
	})
}

// The cluster options' Diff sorts a reload's changes as nats-server's reload applies them.
func TestClusterDiff(t *testing.T) {
	path := writeConf(t, "accounts { A: {}, B: {} }\ncluster { port: -1, name: a, routes: [\"nats://h:1\", \"nats://h:2\"], accounts: [A] }\n")
	o1, _, err := natsdStartLoad(path)
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, path, "accounts { A: {}, B: {} }\ncluster { port: -1, name: b, routes: [\"nats://h:2\", \"nats://u:p@h:3\"], accounts: [B], pool_size: 4, compression: s2_fast, permissions { import: x } }\n")
	o2, _, err := natsdStartLoad(path)
	if err != nil {
		t.Fatal(err)
	}
	ch := cluster.Diff(&o1.Cluster, &o2.Cluster)
	if got := urlStrings(ch.RoutesAdded); !slices.Equal(got, []string{"nats://u:p@h:3"}) {
		t.Errorf("added %v", got)
	}
	if got := urlStrings(ch.RoutesRemoved); !slices.Equal(got, []string{"nats://h:1"}) {
		t.Errorf("removed %v", got)
	}
	if !slices.Equal(ch.AccountsAdded, []string{"B"}) || !slices.Equal(ch.AccountsRemoved, []string{"A"}) {
		t.Errorf("accounts +%v -%v", ch.AccountsAdded, ch.AccountsRemoved)
	}
	if !ch.PoolSizeChanged || !ch.CompressionChanged || !ch.PermissionsChanged || !ch.NameChanged {
		t.Errorf("%+v", ch)
	}
	if ch := cluster.Diff(&o1.Cluster, &o1.Cluster); !reflect.DeepEqual(ch, cluster.Change{}) {
		t.Errorf("no change: %+v", ch)
	}
	// s2_auto without thresholds is the default thresholds.
	a := cluster.Compression{Mode: cluster.CompressionS2Auto}
	b := cluster.Compression{Mode: cluster.CompressionS2Auto, RTTThresholds: cluster.DefaultRTTThresholds}
	if !a.Equal(&b) {
		t.Error("s2_auto defaults")
	}
}
