package server

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The log lines an operator reads, compared with nats-server v2.15.2's for the same events:
// each test runs one scenario on both servers (started from the same config file, logging to
// a file) and requires the same lines, once timestamps, client addresses and ids, ports,
// paths and digests (which differ legitimately) are normalised.

var (
	logHead     = regexp.MustCompile(`^\[\d+\] (\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} )?`)
	logClient   = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+ - cid:\d+`)
	logDigest   = regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	logListen   = regexp.MustCompile(`(connections on [0-9.]+):\d+`)
	logServerID = regexp.MustCompile(`\bN[A-Z2-7]{55}\b`)
	logReload   = regexp.MustCompile(`Reload(ed)?[: ]`)
)

// logLines is the log at path, normalised, keeping the lines keep accepts.
func logLines(path string, keep func(string) bool) []string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = logHead.ReplaceAllString(l, "")
		if l == "" || !keep(l) {
			continue
		}
		l = logClient.ReplaceAllString(l, "CLIENT")
		l = logDigest.ReplaceAllString(l, "sha256:X")
		l = logListen.ReplaceAllString(l, "$1:PORT")
		l = logServerID.ReplaceAllString(l, "SERVERID")
		l = strings.ReplaceAll(l, filepath.Dir(path), "DIR")
		out = append(out, l)
	}
	return out
}

// clientLines keeps the lines about client connections.
func clientLines(l string) bool { return strings.Contains(l, " - cid:") }

// waitLogCount waits until the log holds at least n lines containing want.
func (cs *compatServer) waitLogCount(want string, n int) {
	cs.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(cs.log)
		if strings.Count(string(b), want) >= n {
			return
		}
		if time.Now().After(deadline) {
			cs.t.Fatalf("log lacks %d × %q:\n%s", n, want, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sameLogs runs scenario on each target started from body, and requires the lines keep
// selects from their logs to match (when both targets run).
func sameLogs(t *testing.T, body string, keep func(string) bool, scenario func(t *testing.T, cs *compatServer)) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, name := range compatTargets() {
		t.Run(name, func(t *testing.T) {
			cs := startCompat(t, name, body)
			scenario(t, cs)
			got[name] = logLines(cs.log, keep)
		})
	}
	if t.Failed() || len(got) < 2 {
		return got
	}
	ns, nd := got["nats-server"], got["natsd"]
	if len(ns) == 0 {
		t.Fatal("no lines to compare")
	}
	if strings.Join(ns, "\n") != strings.Join(nd, "\n") {
		t.Fatalf("logs differ\nnats-server:\n  %s\nnatsd:\n  %s", strings.Join(ns, "\n  "), strings.Join(nd, "\n  "))
	}
	return got
}

// readUntil reads lines until want (answering the server's PINGs).
func (r *raw) readUntil(want string) {
	r.t.Helper()
	for r.line() != want {
	}
}

// TestLogTraceLikeNatsServer: with -DV a client's session is traced line for line as
// nats-server traces it: unquoted "<<- [OP arg]" lines (the op in capitals, the argument as
// sent), payloads but not empty ones, "->> [OK]", "->> [PONG]", the MSG/HMSG deliveries with
// their payloads, the auto-unsubscribe debug line and "<-> [DELSUB sid]" for every
// subscription that goes (UNSUB, auto-unsubscribe, close), and from the first CONNECT on, the
// client's version, language and name in its prefix.
func TestLogTraceLikeNatsServer(t *testing.T) {
	sameLogs(t, "debug: true\ntrace: true\n", clientLines, func(t *testing.T, cs *compatServer) {
		r := cs.dial()
		r.send(`CONNECT {"verbose":true,"pedantic":false,"headers":true,"lang":"go","version":"1.55.0","name":"tracer"}` + "\r\n" +
			"SUB foo 1\r\nSUB bar q 2\r\nUNSUB 2\r\nUNSUB 1 2\r\nUNSUB 9\r\n" +
			"HPUB foo 12 17\r\nNATS/1.0\r\n\r\nhello\r\n" +
			"pub foo  2\r\nab\r\nPUB foo 0\r\n\r\nSUB baz 3\r\nPING\r\n")
		r.readUntil("PONG\r\n")
		r.c.Close()
		cs.waitLog("<-> [DELSUB 3]")
		b, _ := os.ReadFile(cs.log)
		for _, want := range []string{
			`- "v1.55.0:go:tracer" - <<- [PUB foo  2]`, `- "v1.55.0:go:tracer" - ->> [MSG foo 1 2]`,
			`->> MSG_PAYLOAD: ["NATS/1.0\r\n\r\nhello"]`, `Auto-unsubscribe limit of 2 reached for sid '1'`,
		} {
			if !strings.Contains(string(b), want) {
				t.Fatalf("log lacks %q:\n%s", want, b)
			}
		}
	})
}

// TestLogAuthAndPermissionsLikeNatsServer: an authentication failure names the user (nkey,
// token) the client sent; permission violations are logged under the client's label, which
// names its account and user ("$G/user:alice"), with the sid (and queue) of a refused
// subscription. Secrets in CONNECT stay [REDACTED] in the trace.
func TestLogAuthAndPermissionsLikeNatsServer(t *testing.T) {
	const body = `debug: true
trace: true
authorization {
  users = [
    {user: alice, password: secret, permissions: {publish: {deny: ["secret.>"]}, subscribe: {deny: ["private.>"]}}}
    {user: bob, password: bobpw}
  ]
}
`
	got := sameLogs(t, body, clientLines, func(t *testing.T, cs *compatServer) {
		fail := []string{
			`CONNECT {"verbose":false,"user":"bob","pass":"wrong-pw","auth_token":"tok-123","lang":"go","version":"1.55.0"}`,
			`CONNECT {"verbose":false,"nkey":"UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4","sig":"c2lnbmF0dXJl"}`,
			`CONNECT {"verbose":false,"auth_token":"tok-456"}`,
			`CONNECT {"verbose":false}`,
		}
		for i, c := range fail {
			r := cs.dial()
			r.send(c + "\r\nPING\r\n")
			r.expect("-ERR 'Authorization Violation'\r\n")
			r.expectClosed()
			cs.waitLogCount("Client connection closed: Authentication Failure", i+1)
		}
		r := cs.dial()
		r.send(`CONNECT {"verbose":false,"lang":"go","version":"1.55.0","name":"app","user":"alice","pass":"secret"}` + "\r\n" +
			"PUB secret.x 2\r\nhi\r\nSUB private.a 1\r\nSUB private.b q 2\r\nPING\r\n")
		r.readUntil("PONG\r\n")
		r.c.Close()
		cs.waitLogCount("Client connection closed: Client Closed", 1)
	})
	for name, lines := range got {
		all := strings.Join(lines, "\n")
		for _, secret := range []string{"wrong-pw", "tok-123", "tok-456", "c2lnbmF0dXJl", `"secret"`} {
			if strings.Contains(all, secret) {
				t.Errorf("%s: %q in the log:\n%s", name, secret, all)
			}
		}
		for _, want := range []string{
			`[ERR] CLIENT - authentication error - User "bob"`,
			`[ERR] CLIENT - authentication error - Nkey "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"`,
			`[ERR] CLIENT - authentication error - Token "[REDACTED]"`,
			`[ERR] CLIENT - "v1.55.0:go:app" - "$G/user:alice" - Publish Violation - Subject "secret.x"`,
			`[ERR] CLIENT - "v1.55.0:go:app" - "$G/user:alice" - Subscription Violation - Subject "private.b", Queue: "q", SID 2`,
			`"auth_token":"[REDACTED]"`,
		} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: no %q in:\n%s", name, want, all)
			}
		}
	}
}

// TestLogTLSHandshakeLikeNatsServer: a TLS client's handshake is logged as nats-server logs
// it: "Starting TLS client connection handshake", then its error under the client's cid (a
// plaintext client at debug level, a bad record as an error) and the close as "TLS Handshake
// Failure", or the version and cipher suite of the session.
func TestLogTLSHandshakeLikeNatsServer(t *testing.T) {
	cert, _ := filepath.Abs("testdata/certs/server-cert.pem")
	key, _ := filepath.Abs("testdata/certs/server-key.pem")
	body := fmt.Sprintf("debug: true\ntls {\n  cert_file: %q\n  key_file: %q\n  timeout: 2\n}\n", cert, key)
	sameLogs(t, body, clientLines, func(t *testing.T, cs *compatServer) {
		r := cs.dial()
		r.send("CONNECT {}\r\nPING\r\n") // plaintext on a TLS port
		r.expectClosed()
		cs.waitLogCount("Client connection closed: TLS Handshake Failure", 1)

		r = cs.dial()
		r.send("\x16\x03\x01\x00\x05hello") // a handshake record that is not one
		r.expectClosed()
		cs.waitLogCount("Client connection closed: TLS Handshake Failure", 2)

		r = cs.dial()
		tc := tls.Client(r.c, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12,
			CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if _, err := tc.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		_ = tc.SetReadDeadline(time.Now().Add(3 * time.Second))
		if n, err := tc.Read(buf); err != nil || string(buf[:n]) != "PONG\r\n" {
			t.Fatalf("%q %v", buf[:n], err)
		}
		tc.Close()
		cs.waitLogCount("Client connection closed: Client Closed", 1)

		// Clients that hang up right after their handshake (readiness probes): closed by
		// the client, no handshake error, however the Finished and the hang-up arrive.
		for i := 0; i < 5; i++ {
			r = cs.dial()
			tc := tls.Client(r.c, &tls.Config{InsecureSkipVerify: true})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			r.c.Close()
			cs.waitLogCount("Client connection closed: Client Closed", 2+i)
		}
		cs.waitLog("TLS handshake error: tls: first record does not look like a TLS handshake", "TLS version 1.2, cipher suite")
	})
}

// TestLogStartupLikeNatsServer: the start-up banner has nats-server's lines about the
// configuration, in its places: the plaintext password warning after the server's ID, the
// configuration file (with its digest), and after the client listener whether TLS is
// required.
func TestLogStartupLikeNatsServer(t *testing.T) {
	cert, _ := filepath.Abs("testdata/certs/server-cert.pem")
	key, _ := filepath.Abs("testdata/certs/server-key.pem")
	body := fmt.Sprintf("authorization { user: u, password: plain }\ntls {\n  cert_file: %q\n  key_file: %q\n}\n", cert, key)
	banner := func(l string) bool {
		for _, p := range []string{"  ID:", "Plaintext passwords", "Using configuration file", "Listening for client connections", "TLS required", "TLS available", "Server is ready"} {
			if strings.Contains(l, p) {
				return true
			}
		}
		return false
	}
	got := sameLogs(t, body, banner, func(t *testing.T, cs *compatServer) { cs.waitLog("Server is ready") })
	for name, lines := range got {
		want := []string{"[INF]   ID:", "[WRN] Plaintext passwords detected, use nkeys or bcrypt",
			"[INF] Using configuration file: DIR/nats.conf (sha256:X)", "[INF] Listening for client connections on 127.0.0.1:PORT",
			"[INF] TLS required for client connections", "[INF] Server is ready"}
		if len(lines) != len(want) {
			t.Fatalf("%s: banner\n%s", name, strings.Join(lines, "\n"))
		}
		for i := range want {
			if !strings.HasPrefix(lines[i], want[i]) {
				t.Fatalf("%s: line %d is %q, want %q", name, i, lines[i], want[i])
			}
		}
	}
	// A bcrypt password draws no warning; nor does a file without users.
	bcrypted := "authorization { user: u, password: \"$2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG\" }\n"
	for _, b := range []string{bcrypted, "port: -1\n"} {
		got := sameLogs(t, b, banner, func(t *testing.T, cs *compatServer) { cs.waitLog("Server is ready") })
		for name, lines := range got {
			if strings.Contains(strings.Join(lines, "\n"), "Plaintext") {
				t.Fatalf("%s: %s", name, lines)
			}
		}
	}
}

// TestLogReloadLikeNatsServer: a reload logs a line per option at INFO, with nats-server's key
// names and values, in its order (every reload also says "authorization users" and "accounts",
// as nats-server's does), then "Reloaded server configuration" with the digest.
func TestLogReloadLikeNatsServer(t *testing.T) {
	cert, _ := filepath.Abs("testdata/certs/server-cert.pem")
	key, _ := filepath.Abs("testdata/certs/server-key.pem")
	tlsBlock := fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  timeout: 3\n}\n", cert, key)
	reloads := []string{
		"debug: true\ntrace: true\nmax_payload: 2000\nmax_connections: 100\nping_interval: \"30s\"\n" +
			"write_deadline: \"3s\"\nmax_control_line: 2048\nping_max: 3\nmax_traced_msg_len: 10\n" +
			"authorization { user: u, password: p, timeout: 3 }\n",
		"client_advertise: \"example.com:4222\"\nlogtime_utc: true\n" + tlsBlock,
		"client_advertise: \"example.com:4222\"\nlogtime_utc: true\n" + tlsBlock, // the same again
		"debug: true\n",
	}
	keep := func(l string) bool { return logReload.MatchString(l) }
	sameLogs(t, "", keep, func(t *testing.T, cs *compatServer) {
		for i, body := range reloads {
			cs.reloadWith(body)
			cs.waitLogCount("Reloaded server configuration", i+1)
		}
	})
}
