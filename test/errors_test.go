package test

import (
	"strings"
	"testing"
	"time"
)

func errLine(text string) string { return "-ERR '" + text + "'\r\n" }

// TestWireErrors pins each -ERR (and silent close) a single server without auth sends:
// the exact bytes received after the trigger and whether the connection is closed afterwards.
func TestWireErrors(t *testing.T) {
	long := strings.Repeat("a", 5000)
	cases := []struct {
		name    string
		cfg     Config
		connect string // CONNECT line; "" = quiet default
		in      string
		want    string // exact bytes before close / before the PONG that proves it is open
		closed  bool
	}{
		// protocol.md §6 -ERRs
		{name: "unknown op", in: "FOO bar\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "unknown op misspelled PUB", in: "PUX foo 1\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "route op from client", in: "RS+ $G foo\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "payload without CRLF", in: "PUB foo 2\r\nhiX\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "payload longer than size", in: "PUB foo 2\r\nhello\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "payload bare LF end", in: "PUB foo 2\r\nhi\n", want: errLine("Unknown Protocol Operation"), closed: true},
		// pedantic: the subject is judged on the control line, so a bad one and a bad body end
		// both get their -ERR; over max_payload only the limit's.
		{name: "pedantic bad subject then bad end", connect: `{"verbose":false,"pedantic":true}`, in: "PUB foo..bar 2\r\nhiX\r\n",
			want: errLine("Invalid Publish Subject") + errLine("Unknown Protocol Operation"), closed: true},
		{name: "pedantic wildcard subject then LF end", connect: `{"verbose":false,"pedantic":true}`, in: "PUB foo.* r 2\r\nhi\n",
			want: errLine("Invalid Publish Subject") + errLine("Unknown Protocol Operation"), closed: true},
		{name: "pedantic bad subject hpub then bad end", connect: `{"verbose":false,"pedantic":true,"headers":true}`, in: "HPUB a.> 12 14\r\nNATS/1.0\r\n\r\nhiXX",
			want: errLine("Invalid Publish Subject") + errLine("Unknown Protocol Operation"), closed: true},
		{name: "pedantic good subject then bad end", connect: `{"verbose":false,"pedantic":true}`, in: "PUB foo 2\r\nhiX\r\n",
			want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "not pedantic bad subject then bad end", in: "PUB foo..bar 2\r\nhiX\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "pedantic bad subject over max payload", cfg: Config{MaxPayload: 1024}, connect: `{"verbose":false,"pedantic":true}`, in: "PUB foo..bar 1025\r\n",
			want: errLine("Maximum Payload Violation"), closed: true},
		{name: "pedantic ok after bad subject then bad end of next", connect: `{"verbose":false,"pedantic":true}`, in: "PUB foo.* 1\r\nx\r\nPUB ok 1\r\nxY",
			want: errLine("Invalid Publish Subject") + errLine("Unknown Protocol Operation"), closed: true},
		{name: "control line exceeded with CRLF", in: "PUB " + long + " 1\r\n", want: errLine("maximum control line exceeded"), closed: true},
		{name: "control line exceeded no CRLF", in: "SUB " + long, want: errLine("maximum control line exceeded"), closed: true},
		{name: "control line exceeded small limit", cfg: Config{MaxControlLine: 64}, in: "SUB " + strings.Repeat("b", 70) + " 1\r\n", want: errLine("maximum control line exceeded"), closed: true},
		{name: "control line at small limit ok", cfg: Config{MaxControlLine: 64}, in: "SUB " + strings.Repeat("b", 56) + " 1\r\n", want: "", closed: false},
		{name: "max payload", cfg: Config{MaxPayload: 1024}, in: "PUB foo 1025\r\n", want: errLine("Maximum Payload Violation"), closed: true},
		{name: "max payload exact ok", cfg: Config{MaxPayload: 1024}, in: pub("foo", "", strings.Repeat("x", 1024)), want: "", closed: false},
		{name: "max payload hpub", cfg: Config{MaxPayload: 1024}, connect: `{"verbose":false,"pedantic":false,"headers":true}`, in: "HPUB foo 12 1025\r\n", want: errLine("Maximum Payload Violation"), closed: true},
		{name: "invalid client protocol", connect: `{"verbose":false,"pedantic":false,"protocol":2}`, want: errLine("invalid client protocol"), closed: true},
		{name: "protocol 1 ok", connect: `{"verbose":false,"pedantic":false,"protocol":1}`, want: "", closed: false},
		{name: "no responders without headers", connect: `{"verbose":false,"pedantic":false,"no_responders":true}`, want: errLine("no responders requires headers support"), closed: true},
		{name: "invalid subject empty token", in: "SUB foo..bar 1\r\n", want: errLine("Invalid Subject"), closed: false},
		{name: "invalid subject leading dot", in: "SUB .foo 1\r\n", want: errLine("Invalid Subject"), closed: false},
		{name: "invalid subject trailing dot", in: "SUB foo. 1\r\n", want: errLine("Invalid Subject"), closed: false},
		{name: "invalid subject gt not last", in: "SUB foo.>.bar 1\r\n", want: errLine("Invalid Subject"), closed: false},
		{name: "invalid subject verbose", connect: `{"verbose":true,"pedantic":false}`, in: "SUB foo..bar 1\r\n", want: "+OK\r\n" + errLine("Invalid Subject"), closed: false},
		{name: "max subs", cfg: Config{MaxSubs: 2}, in: "SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n", want: errLine("maximum subscriptions exceeded"), closed: false},
		// At the limit, a sid already in use and an invalid subject both get the limit's error.
		{name: "max subs sid in use", cfg: Config{MaxSubs: 2}, in: "SUB a 1\r\nSUB b 2\r\nSUB a 1\r\n", want: errLine("maximum subscriptions exceeded"), closed: false},
		{name: "max subs invalid subject", cfg: Config{MaxSubs: 2}, in: "SUB a 1\r\nSUB b 2\r\nSUB foo..bar 3\r\n", want: errLine("maximum subscriptions exceeded"), closed: false},
		{name: "sid in use below limit", cfg: Config{MaxSubs: 2}, connect: `{"verbose":true,"pedantic":false}`, in: "SUB a 1\r\nSUB a 1\r\n", want: "+OK\r\n+OK\r\n+OK\r\n", closed: false},
		{name: "sid in use invalid subject", in: "SUB a 1\r\nSUB foo..bar 1\r\n", want: "", closed: false},
		// silent closes
		{name: "PUB missing size", in: "PUB foo\r\n", closed: true},
		{name: "PUB non-numeric size", in: "PUB foo bar\r\n", closed: true},
		{name: "PUB too many args", in: "PUB foo bar baz 2\r\n", closed: true},
		{name: "PUB negative size", in: "PUB foo -1\r\n", closed: true},
		{name: "PUB no args", in: "PUB\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "PUB space no args", in: "PUB \r\n", closed: true},
		{name: "SUB one arg", in: "SUB foo\r\n", closed: true},
		{name: "SUB four args", in: "SUB foo q 1 2\r\n", closed: true},
		{name: "UNSUB no args", in: "UNSUB\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "UNSUB space no args", in: "UNSUB \r\n", closed: true},
		{name: "SUB no args", in: "SUB\r\n", want: errLine("Unknown Protocol Operation"), closed: true},
		{name: "UNSUB three args", in: "UNSUB 1 2 3\r\n", closed: true},
		{name: "invalid CONNECT JSON", connect: `{bad json`, closed: true},
		// CONNECT is unmarshalled into all of nats-server's client options: a value of the wrong
		// type fails it even in a field natsd does not use.
		{name: "CONNECT tls_required not a bool", connect: `{"verbose":false,"pedantic":false,"tls_required":"x"}`, closed: true},
		{name: "CONNECT jwt not a string", connect: `{"verbose":false,"pedantic":false,"jwt":1}`, closed: true},
		{name: "CONNECT import not an object", connect: `{"verbose":false,"pedantic":false,"import":"x"}`, closed: true},
		{name: "CONNECT export allow not a list", connect: `{"verbose":false,"pedantic":false,"export":{"allow":5}}`, closed: true},
		{name: "CONNECT remote_account not a string", connect: `{"verbose":false,"pedantic":false,"remote_account":7}`, closed: true},
		{name: "CONNECT proxy_sig not a string", connect: `{"verbose":false,"pedantic":false,"proxy_sig":false}`, closed: true},
		{name: "CONNECT those fields well typed", connect: `{"verbose":false,"pedantic":false,"tls_required":false,"jwt":"x","import":{"allow":["a"]},"export":{"deny":["b"]},"remote_account":"A","proxy_sig":"s"}`},
		// A client's INFO is unmarshalled as nats-server's INFO and otherwise ignored.
		{name: "client INFO bad JSON", in: "INFO {bad\r\n", closed: true},
		{name: "client INFO port not a number", in: `INFO {"port":"x"}` + "\r\n", closed: true},
		{name: "client INFO max_payload beyond int32", in: `INFO {"max_payload":4294967296}` + "\r\n", closed: true},
		{name: "client INFO client_id negative", in: `INFO {"client_id":-1}` + "\r\n", closed: true},
		{name: "client INFO gateway_cmd_payload not base64", in: `INFO {"gateway_cmd_payload":"!"}` + "\r\n", closed: true},
		{name: "client INFO unknown and well-typed fields", in: `INFO {"foo":[1,{}],"server_id":"x","port":1,"connect_urls":["a"]}` + "\r\n"},
		{name: "HPUB without headers", in: "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", closed: true},
		{name: "HPUB header size > total", connect: `{"verbose":false,"pedantic":false,"headers":true}`, in: "HPUB foo 14 12\r\n", closed: true},
		{name: "client -ERR", in: "-ERR 'bye'\r\n", closed: true},
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		urls := map[Config]string{}
		for _, tc := range cases {
			if _, ok := urls[tc.cfg]; !ok {
				urls[tc.cfg] = tg.run(t, tc.cfg)
			}
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := dialRaw(t, urls[tc.cfg])
				connect := tc.connect
				if connect == "" {
					connect = `{"verbose":false,"pedantic":false}`
				}
				r.send("CONNECT " + connect + "\r\n" + tc.in)
				if tc.closed {
					if tc.want != "" {
						r.expect(tc.want)
					}
					r.expectClosed()
				} else {
					r.send("PING\r\n")
					r.expect(tc.want + "PONG\r\n")
				}
			})
		}
	})
}

// TestWireInvalidPublishSubject: pedantic mode flags a wildcard publish subject but still delivers.
func TestWireInvalidPublishSubject(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		r := dialRaw(t, u)
		r.send(`CONNECT {"verbose":false,"pedantic":true}` + "\r\nSUB foo.* 1\r\nPING\r\n")
		r.expect("PONG\r\n")
		r.send(pub("foo.*", "", "hi") + "PING\r\n")
		r.expect(errLine("Invalid Publish Subject") + msg("foo.*", "1", "", "hi") + "PONG\r\n")
		r.send(pub("foo.>", "", "hi") + "PING\r\n") // foo.* matches the literal token ">"
		r.expect(errLine("Invalid Publish Subject") + msg("foo.>", "1", "", "hi") + "PONG\r\n")
		r.send(pub("bar.>", "", "hi") + "PING\r\n")
		r.expect(errLine("Invalid Publish Subject") + "PONG\r\n")
		// verbose + pedantic
		v := dialRaw(t, u)
		v.send(`CONNECT {"verbose":true,"pedantic":true}` + "\r\n")
		v.expect("+OK\r\n")
		v.send(pub("foo.*", "", "hi") + "PING\r\n")
		v.expect(errLine("Invalid Publish Subject") + "+OK\r\n" + "PONG\r\n")
		// not pedantic: no error
		n := dialConnected(t, u, "")
		n.send(pub("foo.*", "", "hi") + "PING\r\n")
		n.expect("PONG\r\n")
		r.expect(msg("foo.*", "1", "", "hi") + msg("foo.*", "1", "", "hi"))
	})
}

func TestWireMaxConnections(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{MaxConn: 1})
		a := dialConnected(t, u, "")
		a.expectOpen()
		b := dialRaw(t, u) // INFO still arrives
		b.expect(errLine("maximum connections exceeded"))
		b.expectClosed()
		a.expectOpen()
		a.c.Close()
		// the slot frees up once the first connection is gone
		waitFor(t, 3*time.Second, "a free connection slot", func() bool {
			c := dialRaw(t, u)
			defer c.c.Close()
			c.send("CONNECT {\"verbose\":false,\"pedantic\":false}\r\nPING\r\n")
			f, err := c.readFrame()
			return err == nil && f == "PONG\r\n"
		})
	})
}

func TestWireStaleConnection(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{PingInterval: 100 * time.Millisecond, MaxPingsOut: 2})
		r := dialConnected(t, u, "")
		r.autoPong = false
		r.expect("PING\r\nPING\r\n" + errLine("Stale Connection"))
		r.expectClosed()
		// a client that answers stays connected
		ok := dialConnected(t, u, "")
		for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
			ok.expectOpen() // answers the server's PINGs on the way
		}
	})
}

// TestWireAuthTimeout: 'Authentication Timeout' needs auth configured, which the harness does
// not set up (single server without auth).
func TestWireAuthTimeout(t *testing.T) {
	t.Skip("Authentication Timeout applies only with auth configured")
}
