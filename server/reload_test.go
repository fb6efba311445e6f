package server

import (
	"bufio"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// startFromConf starts a server from a config file the test can rewrite, as main does:
// defaults, the file, then the "flags" (here: fn) on top.
func startFromConf(t *testing.T, body string, flags func(*Options) error) (*Server, string) {
	t.Helper()
	path := writeConf(t, body)
	o := &Options{Logtime: true}
	if _, err := o.ProcessConfigFile(path); err != nil {
		t.Fatal(err)
	}
	o.NoSigs = true
	o.NoLog = !strings.Contains(t.Name(), "Logging")
	if flags != nil {
		if err := flags(o); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if flags != nil {
		s.SetFlagOverrides(flags)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s, path
}

func rewrite(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rawClient is a bare protocol connection, to see exactly what the server sends.
type rawClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, s *Server) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawClient{c: c, r: bufio.NewReader(c)}
	info := rc.line(t)
	if !strings.HasPrefix(info, "INFO ") {
		t.Fatalf("greeting %q", info)
	}
	return rc
}

func (rc *rawClient) line(t *testing.T) string {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	l, err := rc.r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v (got %q)", err, l)
	}
	return strings.TrimRight(l, "\r\n")
}

func (rc *rawClient) send(t *testing.T, s string) {
	t.Helper()
	if _, err := rc.c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

const reloadBase = `
host: 127.0.0.1
port: -1
server_name: reload_test
max_payload: 1MB
ping_interval: "2m"
debug: false
`

// engines are the network drivers reload must work on.
var engines = []string{"gnet", "netpoll"}

func TestReloadLimitsAndLogging(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng, func(t *testing.T) { testReloadLimitsAndLogging(t, "engine: "+eng+"\n"+reloadBase) })
	}
}

func testReloadLimitsAndLogging(t *testing.T, base string) {
	s, path := startFromConf(t, base, nil)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, _ := nc.SubscribeSync("a")
	_ = nc.Flush()
	raw := dialRaw(t, s)
	raw.send(t, "CONNECT {\"verbose\":false}\r\nPING\r\n")
	if l := raw.line(t); l != "PONG" {
		t.Fatalf("got %q", l)
	}

	logFile := filepath.Join(t.TempDir(), "natsd.log")
	rewrite(t, path, strings.NewReplacer("max_payload: 1MB", "max_payload: 1000\nmax_connections: 50",
		`ping_interval: "2m"`, `ping_interval: "45s"`+"\nping_max: 4\nwrite_deadline: 3s\nno_fast_producer_stall: true",
		"debug: false", "debug: true\ntrace: true\nlogtime: false\nlog_file: "+logFile).Replace(base))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	o := s.getOpts()
	if o.MaxPayload != 1000 || o.MaxConn != 50 || o.PingInterval != 45*time.Second || o.MaxPingsOut != 4 ||
		o.WriteDeadline != 3*time.Second || !o.NoFastProducerStall || !o.Debug || !o.Trace || o.Logtime || o.LogFile != logFile {
		t.Fatalf("options after reload: %+v", o)
	}
	v := s.Varz()
	if v.MaxPayload != 1000 || v.MaxConn != 50 || v.PingInterval != 45*time.Second {
		t.Fatalf("varz after reload: payload %d conn %d ping %v", v.MaxPayload, v.MaxConn, v.PingInterval)
	}
	// Connections stayed up and still route.
	if !nc.IsConnected() || s.NumClients() != 2 {
		t.Fatalf("connected=%v clients=%d", nc.IsConnected(), s.NumClients())
	}
	if err := nc.Publish("a", []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(2 * time.Second); err != nil || string(m.Data) != "still here" {
		t.Fatalf("delivery after reload: %v %v", m, err)
	}
	// A new connection is told the new max_payload.
	nc2, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	if nc2.MaxPayload() != 1000 {
		t.Fatalf("INFO max_payload = %d", nc2.MaxPayload())
	}
	// An existing connection is held to it as well.
	raw.send(t, "PUB a 2000\r\n"+strings.Repeat("x", 2000)+"\r\n")
	if l := raw.line(t); l != "-ERR 'Maximum Payload Violation'" {
		t.Fatalf("got %q", l)
	}
	// Logging went to the new file, with debug on and no timestamps.
	waitFor(t, func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "[DBG]")
	})
	b, _ := os.ReadFile(logFile)
	if strings.Contains(string(b), "/") && strings.Contains(strings.SplitN(string(b), "\n", 2)[0], "/20") {
		t.Fatalf("logtime off but timestamps in %q", b)
	}
}

func TestReloadRejectsNonReloadable(t *testing.T) {
	s, path := startFromConf(t, reloadBase, nil)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	before := *s.getOpts()
	for _, tc := range []struct{ change, want string }{
		{"server_name: other", "config reload not supported for ServerName: old=reload_test, new=other"},
		{"port: 4999", "config reload not supported for Port: old=-1, new=4999"},
		{"max_pending: 1GB", "config reload not supported for MaxPending"},
		{"max_subs: 5", "config reload not supported for MaxSubs"},
		{"lame_duck_duration: \"1m\"", "config reload not supported for LameDuckDuration"},
		{"bogus_key: 1", `unknown field "bogus_key"`},
	} {
		// Reloadable changes ride along, and must not be applied either.
		body := strings.Replace(reloadBase, `ping_interval: "2m"`, `ping_interval: "5s"`, 1) + "debug: true\n" + tc.change + "\n"
		body = strings.Replace(body, "server_name: reload_test\n", "", strings.Count(tc.change, "server_name"))
		body = strings.Replace(body, "port: -1\n", "", strings.Count(tc.change, "port:"))
		rewrite(t, path, body)
		err := s.Reload()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: err = %v, want %q", tc.change, err, tc.want)
		}
		if after := *s.getOpts(); after.PingInterval != before.PingInterval || after.Debug || s.log.debug.Load() {
			t.Fatalf("%s: half-applied: ping %v debug %v", tc.change, after.PingInterval, after.Debug)
		}
	}
	if !nc.IsConnected() {
		t.Fatal("client dropped")
	}
}

// Flags given at start-up keep winning over the file after a reload.
func TestReloadKeepsFlags(t *testing.T) {
	flags := func(o *Options) error { o.Debug = true; o.MaxPingsOut = 7; return nil }
	s, path := startFromConf(t, reloadBase, flags)
	if o := s.getOpts(); !o.Debug || o.MaxPingsOut != 7 {
		t.Fatalf("start: %+v", o)
	}
	rewrite(t, path, reloadBase+"ping_max: 3\nmax_payload: 2MB\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if o := s.getOpts(); !o.Debug || o.MaxPingsOut != 7 || o.MaxPayload != 2<<20 {
		t.Fatalf("after reload: debug %v ping_max %d payload %d", o.Debug, o.MaxPingsOut, o.MaxPayload)
	}
}

func TestReloadBadFileKeepsRunning(t *testing.T) {
	s, path := startFromConf(t, reloadBase, nil)
	rewrite(t, path, "port: [\n")
	err := s.Reload()
	if err == nil || !strings.Contains(err.Error(), "nats.conf:") {
		t.Fatalf("err = %v", err)
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	noFile, _ := New(&Options{NoLog: true, NoSigs: true})
	if err := noFile.Reload(); err == nil || !strings.Contains(err.Error(), "can only reload config when a file is provided") {
		t.Fatalf("err = %v", err)
	}
}

// Many connections publishing while limits are reloaded over and over: race-free (-race) and
// nobody is dropped.
func TestReloadUnderLoad(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng, func(t *testing.T) { testReloadUnderLoad(t, "engine: "+eng+"\nreactors: 2\n"+reloadBase) })
	}
}

func testReloadUnderLoad(t *testing.T, base string) {
	s, path := startFromConf(t, base, nil)
	var conns []*nats.Conn
	for range 4 {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_, _ = nc.Subscribe("load", func(*nats.Msg) {})
		conns = append(conns, nc)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			nc := conns[i%len(conns)]
			_ = nc.Publish("load", []byte("hello"))
			if i%100 == 99 {
				_ = nc.FlushTimeout(5 * time.Second) // bounded in flight: this tests reloads, not overload
			}
		}
	}()
	for i := range 10 {
		ping := []string{"30s", "1m"}[i%2]
		rewrite(t, path, strings.Replace(base, `"2m"`, `"`+ping+`"`, 1))
		if err := s.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	for _, nc := range conns {
		if err := nc.Flush(); err != nil || !nc.IsConnected() {
			t.Fatalf("connection lost: %v", err)
		}
	}
}

// TestReloadLowerMaxConnections: a reload that lowers max_connections below the number of
// open connections closes the excess with nats-server's error, keeps the rest working, and
// refuses new ones until there is room.
func TestReloadLowerMaxConnections(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng, func(t *testing.T) {
			s, path := startFromConf(t, reloadBase+"max_connections: 10\nengine: "+eng+"\n", nil)
			const open = 6
			var rcs []*rawClient
			for i := 0; i < open; i++ {
				rc := dialRaw(t, s)
				rc.send(t, "CONNECT {\"verbose\":false}\r\nPING\r\n")
				if l := rc.line(t); l != "PONG" {
					t.Fatalf("conn %d: %q", i, l)
				}
				rcs = append(rcs, rc)
			}
			rewrite(t, path, reloadBase+"max_connections: 4\nengine: "+eng+"\n")
			if err := s.Reload(); err != nil {
				t.Fatal(err)
			}
			// Every connection either is told and closed, or still answers.
			closed, alive := 0, 0
			for i, rc := range rcs {
				rc.send(t, "PING\r\n")
				_ = rc.c.SetReadDeadline(time.Now().Add(3 * time.Second))
				l, err := rc.r.ReadString('\n')
				switch {
				case l == "PONG\r\n":
					alive++
				case l == "-ERR 'maximum connections exceeded'\r\n":
					if _, err := rc.r.ReadString('\n'); err == nil {
						t.Fatalf("conn %d still open after the error", i)
					}
					closed++
				default:
					t.Fatalf("conn %d: %q %v", i, l, err)
				}
			}
			if closed != open-4 || alive != 4 {
				t.Fatalf("closed %d alive %d, want %d and 4", closed, alive, open-4)
			}
			waitFor(t, func() bool { return s.NumClients() == 4 })
			rc := dialRaw(t, s) // the fifth is refused with the same error
			if l := rc.line(t); l != "-ERR 'maximum connections exceeded'" {
				t.Fatalf("fifth connection: %q", l)
			}
		})
	}
}

// TestReloadRevokesSubscriptions: a reload that takes a subscription away from a connected
// user (a smaller allow list, a new deny entry, a queue-only entry) cancels it as nats-server
// does: unsubscribed, the client told with the sid, the removal logged; the other
// subscriptions keep delivering (wildcards overlapping a deny entry filtered).
func TestReloadRevokesSubscriptions(t *testing.T) {
	cases := []struct {
		name          string
		before, after string   // alice's permissions ("" = none)
		subs          []string // SUB arguments, in order
		errs          []string // -ERR lines after the reload, any order
		logs          []string // log lines the reload writes
		pubs          []string // subjects published after the reload
		msgs          string   // what alice receives for them
	}{
		{
			name:   "allow list shrinks",
			before: `{subscribe: {allow: ["foo", "bar"]}}`, after: `{subscribe: {allow: ["foo"]}}`,
			subs: []string{"foo 1", "bar 2"},
			errs: []string{`-ERR 'Permissions Violation for Subscription to "bar" (sid "2")'` + "\r\n"},
			logs: []string{`[INF] Removed sub "bar" (sid "2") for User "alice" - not authorized`},
			pubs: []string{"bar", "foo"}, msgs: "MSG foo 1 1\r\nx\r\n",
		},
		{
			name:   "deny added",
			before: "", after: `{subscribe: {deny: ["data.secret", "old.>"]}}`,
			subs: []string{"data.secret 1", "public 2", "data.* 3", "old.x 4", "old.* 5"},
			errs: []string{
				`-ERR 'Permissions Violation for Subscription to "data.secret" (sid "1")'` + "\r\n",
				`-ERR 'Permissions Violation for Subscription to "old.x" (sid "4")'` + "\r\n",
				`-ERR 'Permissions Violation for Subscription to "old.*" (sid "5")'` + "\r\n",
			},
			logs: []string{
				`[INF] Removed sub "data.secret" (sid "1") for User "alice" - not authorized`,
				`[INF] Removed sub "old.x" (sid "4") for User "alice" - not authorized`,
				`[INF] Removed sub "old.*" (sid "5") for User "alice" - not authorized`,
			},
			pubs: []string{"data.secret", "old.x", "data.public", "public"},
			msgs: "MSG data.public 3 1\r\nx\r\nMSG public 2 1\r\nx\r\n",
		},
		{
			name:   "queue entries",
			before: `{subscribe: {allow: ["q.>"]}}`, after: `{subscribe: {allow: ["q.> ga"]}}`,
			subs: []string{"q.1 ga 1", "q.2 gb 2", "q.3 3"},
			errs: []string{
				`-ERR 'Permissions Violation for Subscription to "q.2" using queue "gb" (sid "2")'` + "\r\n",
				`-ERR 'Permissions Violation for Subscription to "q.3" (sid "3")'` + "\r\n",
			},
			logs: []string{
				`[INF] Removed sub "q.2" using queue "gb" (sid "2") for User "alice" - not authorized`,
				`[INF] Removed sub "q.3" (sid "3") for User "alice" - not authorized`,
			},
			pubs: []string{"q.2", "q.3", "q.1"}, msgs: "MSG q.1 1 1\r\nx\r\n",
		},
		{
			name:   "unchanged",
			before: `{subscribe: {allow: ["foo"]}}`, after: `{subscribe: {allow: ["foo", "bar"]}}`,
			subs: []string{"foo 1"},
			pubs: []string{"foo"}, msgs: "MSG foo 1 1\r\nx\r\n",
		},
	}
	conf := func(perms string) string {
		alice := `{user: alice, password: pa}`
		if perms != "" {
			alice = `{user: alice, password: pa, permissions: ` + perms + `}`
		}
		return "authorization { users: [ " + alice + ", {user: admin, password: pw} ] }\n"
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBoth(t, conf(tc.before), func(t *testing.T, s *compatServer) {
				a := s.dial()
				a.send(`CONNECT {"verbose":false,"pedantic":false,"user":"alice","pass":"pa"}` + "\r\n")
				for _, sub := range tc.subs {
					a.send("SUB " + sub + "\r\n")
				}
				a.send("PING\r\n")
				a.expect("PONG\r\n")
				s.reloadWith(conf(tc.after))
				a.expectSet(tc.errs...)
				a.send("PING\r\n")
				a.expect("PONG\r\n")
				s.waitLog(tc.logs...)
				p := s.dial()
				p.send(`CONNECT {"verbose":false,"pedantic":false,"user":"admin","pass":"pw"}` + "\r\n")
				for _, subj := range tc.pubs {
					p.send("PUB " + subj + " 1\r\nx\r\n")
				}
				p.send("PING\r\n")
				p.expect("PONG\r\n")
				a.send("PING\r\n")
				var got strings.Builder
				for {
					l := a.line()
					if l == "PONG\r\n" {
						break
					}
					got.WriteString(l)
				}
				if got.String() != tc.msgs {
					t.Fatalf("after the reload alice got %q, want %q", got.String(), tc.msgs)
				}
			})
		})
	}
}

// TestReloadRevokesSubscriptionsNames: the removal's log line names the identity the way
// nats-server's does, for each kind of user.
func TestReloadRevokesSubscriptionsNames(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	cases := []struct {
		name    string
		users   func(perms string) string // the authorization block with the user's permissions
		connect func(r *raw) string       // CONNECT's JSON fields for that user
		label   string
	}{
		{"user", func(p string) string { return `users: [{user: alice, password: pa, permissions: ` + p + `}]` },
			func(*raw) string { return `"user":"alice","pass":"pa"` }, `User "alice"`},
		{"nkey", func(p string) string { return `users: [{nkey: ` + pub + `, permissions: ` + p + `}]` },
			func(r *raw) string {
				nonce, _ := r.info["nonce"].(string)
				sig, _ := kp.Sign([]byte(nonce))
				return `"nkey":"` + pub + `","sig":"` + base64.RawURLEncoding.EncodeToString(sig) + `"`
			}, `Nkey "` + pub + `"`},
		{"no_auth_user", func(p string) string { return `users: [{user: bob, password: pb, permissions: ` + p + `}]` },
			func(*raw) string { return `"name":"anon"` }, `User "bob"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conf := func(p string) string {
				c := "authorization { " + tc.users(p) + " }\n"
				if tc.name == "no_auth_user" {
					c += "no_auth_user: bob\n"
				}
				return c
			}
			forBoth(t, conf(`{subscribe: {allow: ["a", "b"]}}`), func(t *testing.T, s *compatServer) {
				r := s.dial()
				r.send(`CONNECT {"verbose":false,"pedantic":false,` + tc.connect(r) + "}\r\nSUB b 7\r\nPING\r\n")
				r.expect("PONG\r\n")
				s.reloadWith(conf(`{subscribe: {allow: ["a"]}}`))
				r.expect(`-ERR 'Permissions Violation for Subscription to "b" (sid "7")'` + "\r\n")
				s.waitLog(`[INF] Removed sub "b" (sid "7") for ` + tc.label + ` - not authorized`)
			})
		})
	}
}

// TestReloadTurnsOnAuth: a reload that turns authentication on checks what each connected
// client sent in CONNECT, as nats-server does: one whose credentials now name a user stays
// (with that user's permissions), the others are closed.
func TestReloadTurnsOnAuth(t *testing.T) {
	forBoth(t, "", func(t *testing.T, s *compatServer) {
		good := s.dial()
		good.send(`CONNECT {"verbose":false,"pedantic":false,"user":"alice","pass":"pa"}` + "\r\nPING\r\n")
		good.expect("PONG\r\n")
		bad := s.dial()
		bad.send(`CONNECT {"verbose":false,"pedantic":false,"user":"alice","pass":"nope"}` + "\r\nPING\r\n")
		bad.expect("PONG\r\n")
		none := s.dial()
		none.send(`CONNECT {"verbose":false,"pedantic":false}` + "\r\nPING\r\n")
		none.expect("PONG\r\n")
		s.reloadWith(`authorization { users: [{user: alice, password: pa, permissions: {publish: {deny: ["x"]}}}] }` + "\n")
		bad.expect(authViolation)
		bad.expectClosed()
		none.expect(authViolation)
		none.expectClosed()
		good.send("PUB x 0\r\n\r\nPING\r\n")
		good.expect(`-ERR 'Permissions Violation for Publish to "x"'` + "\r\n")
		good.expect("PONG\r\n")
	})
}

// TestReloadNoAuthUserPassword: a client let in as no_auth_user holds that user's credentials
// (nats-server writes them into its options), so a reload that changes the user's password
// closes it, and one that keeps the password keeps it.
func TestReloadNoAuthUserPassword(t *testing.T) {
	conf := func(pass string) string {
		return "authorization { users: [{user: bob, password: " + pass + "}, {user: eve, password: pe}] }\nno_auth_user: bob\n"
	}
	for _, tc := range []struct {
		name, after string
		closed      bool
	}{{"password changed", "pb2", true}, {"password kept, other user changed", "pb", false}} {
		t.Run(tc.name, func(t *testing.T) {
			forBoth(t, conf("pb"), func(t *testing.T, s *compatServer) {
				op := s.dial() // no CONNECT at all
				op.send("PING\r\n")
				op.expect("PONG\r\n")
				empty := s.dial()
				empty.send(`CONNECT {"verbose":false}` + "\r\nPING\r\n")
				empty.expect("PONG\r\n")
				s.reloadWith(strings.Replace(conf(tc.after), "password: pe", "password: pe2", 1))
				for _, r := range []*raw{op, empty} {
					if tc.closed {
						r.expect(authViolation)
						r.expectClosed()
						continue
					}
					r.send("PING\r\n")
					r.expect("PONG\r\n")
				}
			})
		})
	}
}
