package server

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"

	"github.com/natsd/natsd/auth"
)

func startAuth(t *testing.T, mod func(o *Options)) *Server {
	t.Helper()
	o := &Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true, Engine: os.Getenv("NATSD_ENGINE")}
	mod(o)
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// raw is a hand-driven client connection.
type raw struct {
	t    *testing.T
	c    net.Conn
	br   *bufio.Reader
	info map[string]any
}

func dialRawAuth(t *testing.T, s *Server) *raw {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &raw{t: t, c: c, br: bufio.NewReader(c)}
	line := r.line()
	if !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("want INFO, got %q", line)
	}
	if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(line, "INFO "), " \r\n")), &r.info); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *raw) send(s string) {
	r.t.Helper()
	if _, err := r.c.Write([]byte(s)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) line() string {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	l, err := r.br.ReadString('\n')
	if err != nil {
		r.t.Fatalf("read: %v (got %q)", err, l)
	}
	if l == "PING\r\n" {
		r.send("PONG\r\n")
		return r.line()
	}
	return l
}

func (r *raw) expect(want string) {
	r.t.Helper()
	if got := r.line(); got != want {
		r.t.Fatalf("got %q, want %q", got, want)
	}
}

// expectClosed reads until EOF.
func (r *raw) expectClosed() {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		l, err := r.br.ReadString('\n')
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				r.t.Fatalf("connection not closed")
			}
			return
		}
		if l != "PING\r\n" {
			r.t.Fatalf("unexpected %q before close", l)
		}
	}
}

const authViolation = "-ERR 'Authorization Violation'\r\n"

func TestAuthToken(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		tok := "s3cr3t"
		cfgTok := tok
		if hashed {
			h, _ := bcrypt.GenerateFromPassword([]byte(tok), 4)
			cfgTok = string(h)
		}
		s := startAuth(t, func(o *Options) { o.Authorization = cfgTok })
		nc, err := nats.Connect(s.ClientURL(), nats.Token(tok))
		if err != nil {
			t.Fatalf("hashed=%v: %v", hashed, err)
		}
		nc.Close()
		if _, err := nats.Connect(s.ClientURL(), nats.Token("wrong")); err == nil || !strings.Contains(err.Error(), "Authorization Violation") {
			t.Fatalf("hashed=%v: wrong token: %v", hashed, err)
		}
		r := dialRawAuth(t, s)
		if r.info["auth_required"] != true {
			t.Fatalf("INFO lacks auth_required: %v", r.info)
		}
		if _, ok := r.info["nonce"]; ok {
			t.Fatal("nonce without nkeys")
		}
		r.send("CONNECT {\"verbose\":true,\"auth_token\":\"" + tok + "\"}\r\nPING\r\n")
		r.expect("+OK\r\n")
		r.expect("PONG\r\n")
	}
}

func TestAuthUserPassword(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("pw2"), 4)
	s := startAuth(t, func(o *Options) {
		o.Users = []*auth.User{{Username: "plain", Password: "pw1"}, {Username: "hashed", Password: string(h)}}
	})
	for _, c := range []struct{ u, p string }{{"plain", "pw1"}, {"hashed", "pw2"}} {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(c.u, c.p))
		if err != nil {
			t.Fatalf("%s: %v", c.u, err)
		}
		nc.Close()
		if _, err := nats.Connect(s.ClientURL(), nats.UserInfo(c.u, "bad")); err == nil {
			t.Fatalf("%s: bad password accepted", c.u)
		}
	}
	if _, err := nats.Connect(s.ClientURL()); err == nil {
		t.Fatal("no credentials accepted")
	}
	// Bytes after a bcrypt CONNECT wait for the verdict, in order.
	r := dialRawAuth(t, s)
	r.send("CONNECT {\"verbose\":false,\"user\":\"hashed\",\"pass\":\"pw2\"}\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\nPING\r\n")
	r.expect("MSG foo 1 2\r\n")
	r.expect("hi\r\n")
	r.expect("PONG\r\n")
	// Single user/password options.
	s2 := startAuth(t, func(o *Options) { o.Username, o.Password = "u", "p" })
	nc, err := nats.Connect(s2.ClientURL(), nats.UserInfo("u", "p"))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := nats.Connect(s2.ClientURL(), nats.UserInfo("u", "x")); err == nil {
		t.Fatal("bad password accepted")
	}
}

func TestAuthFirstOpMustBeConnect(t *testing.T) {
	s := startAuth(t, func(o *Options) { o.Authorization = "tok" })
	r := dialRawAuth(t, s)
	r.send("PING\r\n")
	r.expect(authViolation)
	r.expectClosed()
	r = dialRawAuth(t, s)
	r.send("CONNECT {\"auth_token\":\"nope\"}\r\n")
	r.expect(authViolation)
	r.expectClosed()
}

func TestAuthNkey(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	s := startAuth(t, func(o *Options) { o.Nkeys = []*auth.NkeyUser{{Nkey: pub}} })
	r := dialRawAuth(t, s)
	nonce, _ := r.info["nonce"].(string)
	if len(nonce) != 15 {
		t.Fatalf("nonce %q", nonce)
	}
	sign := func(n []byte) ([]byte, error) {
		k, err := nkeys.FromSeed(seed)
		if err != nil {
			return nil, err
		}
		return k.Sign(n)
	}
	nc, err := nats.Connect(s.ClientURL(), nats.Nkey(pub, sign))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	other, _ := nkeys.CreateUser()
	opub, _ := other.PublicKey()
	osign := func(n []byte) ([]byte, error) { return other.Sign(n) }
	if _, err := nats.Connect(s.ClientURL(), nats.Nkey(opub, osign)); err == nil {
		t.Fatal("unknown nkey accepted")
	}
	// Known key, wrong signature.
	if _, err := nats.Connect(s.ClientURL(), nats.Nkey(pub, osign)); err == nil {
		t.Fatal("bad signature accepted")
	}
}

func TestAuthNoAuthUser(t *testing.T) {
	s := startAuth(t, func(o *Options) {
		o.Users = []*auth.User{
			{Username: "a", Password: "pa", Permissions: &auth.Permissions{Publish: &auth.SubjectPermission{Allow: []string{"ok"}}}},
			{Username: "b", Password: "pb"},
		}
		o.NoAuthUser = "a"
	})
	// Ops before CONNECT are allowed and run as "a".
	r := dialRawAuth(t, s)
	r.send("PUB ok 0\r\n\r\nPUB no 0\r\n\r\nPING\r\n")
	r.expect("+OK\r\n")
	r.expect("-ERR 'Permissions Violation for Publish to \"no\"'\r\n")
	r.expect("PONG\r\n")
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	nc, err = nats.Connect(s.ClientURL(), nats.UserInfo("b", "pb"))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := nats.Connect(s.ClientURL(), nats.UserInfo("b", "x")); err == nil {
		t.Fatal("bad password accepted")
	}
}

func TestAuthTimeout(t *testing.T) {
	s := startAuth(t, func(o *Options) { o.Authorization = "tok"; o.AuthTimeout = 300 * time.Millisecond })
	r := dialRawAuth(t, s)
	start := time.Now()
	r.expect("-ERR 'Authentication Timeout'\r\n")
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("timed out after %v", d)
	}
	r.expectClosed()
	// No auth timer without auth.
	s2 := startAuth(t, func(o *Options) { o.AuthTimeout = 200 * time.Millisecond })
	r = dialRawAuth(t, s2)
	time.Sleep(500 * time.Millisecond)
	r.send("PING\r\n")
	r.expect("PONG\r\n")
}

// permClient connects as user u (verbose off) with raw framing.
func permClient(t *testing.T, s *Server, u string) *raw {
	r := dialRawAuth(t, s)
	r.send("CONNECT {\"verbose\":false,\"user\":\"" + u + "\",\"pass\":\"p\"}\r\n")
	return r
}

func TestPermissionsPublishSubscribe(t *testing.T) {
	s := startAuth(t, func(o *Options) {
		o.Users = []*auth.User{
			{Username: "u", Password: "p", Permissions: &auth.Permissions{
				Publish:   &auth.SubjectPermission{Allow: []string{"pub.>", "req"}, Deny: []string{"pub.secret"}},
				Subscribe: &auth.SubjectPermission{Allow: []string{"sub.*", "q.* grp", "any", "pub.>"}, Deny: []string{"sub.secret"}},
			}},
			{Username: "free", Password: "p"},
		}
	})
	r := permClient(t, s, "u")
	pubs := []struct {
		subj string
		ok   bool
	}{{"pub.a", true}, {"pub.a.b", true}, {"other", false}, {"pub.secret", false}, {"req", true}, {"_GR_.x", false}, {"$GR.x", false}, {"$NRG.x", false}}
	r.send("SUB pub.> 1\r\n")
	for _, p := range pubs {
		r.send("PUB " + p.subj + " 1\r\nx\r\nPING\r\n")
		if p.subj == "req" {
			r.expect("PONG\r\n") // allowed, nobody listens
			continue
		}
		if p.ok {
			r.expect("MSG " + p.subj + " 1 1\r\n")
			r.expect("x\r\n")
		} else {
			r.expect("-ERR 'Permissions Violation for Publish to \"" + p.subj + "\"'\r\n")
		}
		r.expect("PONG\r\n")
	}
	subs := []struct {
		subj, q, err string
	}{
		{"sub.a", "", ""},
		{"sub.secret", "", "Permissions Violation for Subscription to \"sub.secret\""},
		{"nope", "", "Permissions Violation for Subscription to \"nope\""},
		{"q.a", "grp", ""},
		{"q.a", "other", "Permissions Violation for Subscription to \"q.a\" using queue \"other\""},
		{"q.a", "", "Permissions Violation for Subscription to \"q.a\""},
		{"any", "whatever", ""},
		{"any", "_sys_", "Permissions Violation for Subscription to \"any\" using queue \"_sys_\""},
	}
	for i, sb := range subs {
		sid := string(rune('a' + i))
		if sb.q != "" {
			r.send("SUB " + sb.subj + " " + sb.q + " " + sid + "\r\nPING\r\n")
		} else {
			r.send("SUB " + sb.subj + " " + sid + "\r\nPING\r\n")
		}
		if sb.err != "" {
			r.expect("-ERR '" + sb.err + "'\r\n")
		}
		r.expect("PONG\r\n")
	}
	// The wildcard sub.* subscription does not get sub.secret (delivery filter).
	r.send("SUB sub.* w\r\nPING\r\n")
	r.expect("PONG\r\n")
	f := permClient(t, s, "free")
	f.send("PUB sub.secret 1\r\ns\r\nPUB sub.b 1\r\nb\r\nPING\r\n")
	f.expect("PONG\r\n")
	for i := 0; i < 1; i++ { // only w matches sub.b; sub.secret is filtered out
		if l := r.line(); !strings.HasPrefix(l, "MSG sub.b ") {
			t.Fatalf("got %q", l)
		}
		r.expect("b\r\n")
	}
	// Still connected.
	r.send("PING\r\n")
	r.expect("PONG\r\n")
}

func TestPermissionsAllowResponses(t *testing.T) {
	s := startAuth(t, func(o *Options) {
		o.Users = []*auth.User{
			{Username: "svc", Password: "p", Permissions: &auth.Permissions{
				Subscribe: &auth.SubjectPermission{Allow: []string{"svc"}},
				Response:  &auth.ResponsePermission{MaxMsgs: 1},
			}},
			{Username: "cli", Password: "p"},
		}
	})
	svc, err := nats.Connect(s.ClientURL(), nats.UserInfo("svc", "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	errs := make(chan error, 10)
	svc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	_, err = svc.Subscribe("svc", func(m *nats.Msg) {
		_ = m.Respond([]byte("one"))
		_ = m.Respond([]byte("two")) // beyond max 1: denied
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = svc.Flush()
	cli, err := nats.Connect(s.ClientURL(), nats.UserInfo("cli", "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	m, err := cli.Request("svc", nil, 2*time.Second)
	if err != nil || string(m.Data) != "one" {
		t.Fatalf("request: %v %v", m, err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation for Publish to") {
			t.Fatalf("unexpected async error %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("second response was not denied")
	}
	// Publishing elsewhere is denied (allow_responses turns off the blanket allow).
	if err := svc.Publish("elsewhere", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), `Permissions Violation for Publish to "elsewhere"`) {
			t.Fatalf("unexpected async error %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("publish not denied")
	}
}

func TestPermissionsDefault(t *testing.T) {
	s := startAuth(t, func(o *Options) {
		o.Users = []*auth.User{{Username: "u", Password: "p"}}
		o.DefaultPermissions = &auth.Permissions{Publish: &auth.SubjectPermission{Deny: []string{"x.>"}}}
	})
	r := permClient(t, s, "u")
	r.send("PUB x.y 0\r\n\r\nPUB y 0\r\n\r\nPING\r\n")
	r.expect("-ERR 'Permissions Violation for Publish to \"x.y\"'\r\n")
	r.expect("PONG\r\n")
}

func TestAuthReloadChangesPassword(t *testing.T) {
	s := startAuth(t, func(o *Options) {
		o.Users = []*auth.User{{Username: "a", Password: "p"}, {Username: "b", Password: "p",
			Permissions: &auth.Permissions{Publish: &auth.SubjectPermission{Allow: []string{"x"}}}}}
	})
	ra := permClient(t, s, "a")
	ra.send("PING\r\n")
	ra.expect("PONG\r\n")
	rb := permClient(t, s, "b")
	rb.send("PUB y 0\r\n\r\nPING\r\n")
	rb.expect("-ERR 'Permissions Violation for Publish to \"y\"'\r\n")
	rb.expect("PONG\r\n")
	old := s.getOpts()
	n := *old
	n.Users = []*auth.User{{Username: "a", Password: "new"}, {Username: "b", Password: "p",
		Permissions: &auth.Permissions{Publish: &auth.SubjectPermission{Allow: []string{"y"}}}}}
	if err := reloadAuth(s, old, &n); err != nil {
		t.Fatal(err)
	}
	ra.expect(authViolation)
	ra.expectClosed()
	rb.send("PUB y 0\r\n\r\nPUB x 0\r\n\r\nPING\r\n")
	rb.expect("-ERR 'Permissions Violation for Publish to \"x\"'\r\n")
	rb.expect("PONG\r\n")
}

// TestAuthSecondConnect: a later CONNECT authenticates again with its fields merged over the
// earlier ones (absent credentials are kept), gets the permissions of the user it now names,
// and drops the connection's subscriptions; a failed check closes the connection. Each
// scenario runs on natsd and nats-server from the same file.
func TestAuthSecondConnect(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	hash, _ := bcrypt.GenerateFromPassword([]byte("pc"), bcrypt.MinCost)
	conf := `authorization { users: [
		{user: alice, password: pa, permissions: {publish: {allow: ["a"]}}}
		{user: bob, password: pb}
		{user: carol, password: "` + string(hash) + `", permissions: {publish: {allow: ["c"]}}}
		{nkey: ` + pub + `, permissions: {publish: {allow: ["n"]}}}
	] }
`
	const quiet = `"verbose":false,"pedantic":false`
	denied := func(subj string) string { return `-ERR 'Permissions Violation for Publish to "` + subj + `"'` + "\r\n" }
	type step struct{ send, want string }
	cases := []struct {
		name   string
		nkey   bool // the first CONNECT signs the nonce with the nkey user
		steps  []step
		closed bool
	}{
		{name: "wrong password", steps: []step{
			{`CONNECT {` + quiet + `,"user":"alice","pass":"pa"}` + "\r\nPING\r\n", "PONG\r\n"},
			{`CONNECT {"pass":"bad"}` + "\r\n", authViolation},
		}, closed: true},
		{name: "unknown user", steps: []step{
			{`CONNECT {` + quiet + `,"user":"alice","pass":"pa"}` + "\r\nPING\r\n", "PONG\r\n"},
			{`CONNECT {"user":"mallory"}` + "\r\n", authViolation},
		}, closed: true},
		{name: "other user's permissions", steps: []step{
			{`CONNECT {` + quiet + `,"user":"alice","pass":"pa"}` + "\r\nPUB b 0\r\n\r\nPING\r\n", denied("b")},
			{"", "PONG\r\n"},
			{`CONNECT {"user":"bob","pass":"pb"}` + "\r\nPUB b 0\r\n\r\nPING\r\n", "PONG\r\n"},
		}},
		{name: "back to a restricted user", steps: []step{
			{`CONNECT {` + quiet + `,"user":"bob","pass":"pb"}` + "\r\nPUB b 0\r\n\r\nPING\r\n", "PONG\r\n"},
			{`CONNECT {"user":"alice","pass":"pa"}` + "\r\nPUB b 0\r\n\r\nPING\r\n", denied("b")},
			{"", "PONG\r\n"},
		}},
		{name: "credentials kept", steps: []step{
			{`CONNECT {` + quiet + `,"user":"alice","pass":"pa"}` + "\r\n" + `CONNECT {"name":"again"}` + "\r\nPUB b 0\r\n\r\nPING\r\n", denied("b")},
			{"", "PONG\r\n"},
		}},
		{name: "bcrypt user", steps: []step{
			{`CONNECT {` + quiet + `,"user":"carol","pass":"pc"}` + "\r\nPUB a 0\r\n\r\nPING\r\n", denied("a")},
			{"", "PONG\r\n"},
			{`CONNECT {"user":"alice","pass":"pa"}` + "\r\nPUB a 0\r\n\r\nPUB c 0\r\n\r\nPING\r\n", denied("c")},
			{"", "PONG\r\n"},
			{`CONNECT {"user":"carol","pass":"bad"}` + "\r\n", authViolation},
		}, closed: true},
		{name: "nkey signature kept", nkey: true, steps: []step{
			{"CONNECT {}\r\nPUB a 0\r\n\r\nPING\r\n", denied("a")},
			{"", "PONG\r\n"},
		}},
		{name: "subscriptions dropped", steps: []step{
			{`CONNECT {` + quiet + `,"user":"alice","pass":"pa"}` + "\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n", "MSG a 1 1\r\n"},
			{"", "x\r\n"},
			{"", "PONG\r\n"},
			{`CONNECT {}` + "\r\nPUB a 1\r\nx\r\nPING\r\n", "PONG\r\n"},
		}},
		{name: "verbose kept", steps: []step{
			{`CONNECT {"verbose":true,"pedantic":false,"user":"alice","pass":"pa"}` + "\r\n", "+OK\r\n"},
			{`CONNECT {"user":"bob","pass":"pb"}` + "\r\n", "+OK\r\n"},
		}},
		{name: "authentication before protocol", steps: []step{
			{`CONNECT {` + quiet + `,"user":"alice","pass":"bad","protocol":2}` + "\r\n", authViolation},
		}, closed: true},
		{name: "protocol after authentication", steps: []step{
			{`CONNECT {` + quiet + `,"user":"alice","pass":"pa","protocol":2}` + "\r\n", "-ERR 'invalid client protocol'\r\n"},
		}, closed: true},
		{name: "account after authentication", steps: []step{
			{`CONNECT {` + quiet + `,"user":"alice","pass":"pa"}` + "\r\nPING\r\n", "PONG\r\n"},
			{`CONNECT {"account":"X"}` + "\r\n", authViolation},
		}, closed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBoth(t, conf, func(t *testing.T, s *compatServer) {
				r := s.dial()
				if tc.nkey {
					nonce, _ := r.info["nonce"].(string)
					sig, _ := kp.Sign([]byte(nonce))
					r.send(`CONNECT {` + quiet + `,"nkey":"` + pub + `","sig":"` + base64.RawURLEncoding.EncodeToString(sig) + `"}` + "\r\nPUB a 0\r\n\r\nPING\r\n")
					r.expect(denied("a"))
					r.expect("PONG\r\n")
				}
				for _, st := range tc.steps {
					if st.send != "" {
						r.send(st.send)
					}
					r.expect(st.want)
				}
				if tc.closed {
					r.expectClosed()
					return
				}
				r.send("PING\r\n")
				r.expect("PONG\r\n")
			})
		})
	}
}

// TestAuthNoAuthUserThenConnect: with no_auth_user, a client without credentials is given
// that user's, written into its options as nats-server does: an op before any CONNECT stands
// in for CONNECT (a CONNECT sent afterwards is a second one and drops the subscriptions), a
// later CONNECT is checked with those credentials merged in, no_auth_user's nkey needs no
// signature, and a no_auth_user with a bcrypt password lets nobody in (nats-server compares
// the hash with itself); an nkey no_auth_user does not let ops come before CONNECT.
func TestAuthNoAuthUserThenConnect(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	hash, _ := bcrypt.GenerateFromPassword([]byte("pc"), bcrypt.MinCost)
	plain := "authorization { users: [{user: bob, password: pb}, {user: eve, password: pe}] }\nno_auth_user: bob\n"
	hashed := "authorization { users: [{user: carol, password: \"" + string(hash) + "\"}] }\nno_auth_user: carol\n"
	nkey := "authorization { users: [{nkey: " + pub + "}, {user: eve, password: pe}] }\nno_auth_user: " + pub + "\n"
	type step struct{ send, want string }
	cases := []struct {
		name, conf string
		steps      []step
		closed     bool
	}{
		{"op first, then CONNECT drops subscriptions", plain, []step{
			{"SUB x 1\r\nPUB x 1\r\ny\r\nPING\r\n", "+OK\r\n"}, {"", "+OK\r\n"}, {"", "MSG x 1 1\r\n"}, {"", "y\r\n"}, {"", "PONG\r\n"},
			{`CONNECT {"verbose":false}` + "\r\nPUB x 1\r\ny\r\nPING\r\n", "PONG\r\n"},
		}, false},
		{"op first, then CONNECT with the user's password", plain, []step{
			{"PING\r\n", "PONG\r\n"}, {`CONNECT {"verbose":false,"pass":"pb"}` + "\r\nPING\r\n", "PONG\r\n"},
		}, false},
		{"op first, then CONNECT with a wrong password", plain, []step{
			{"PING\r\n", "PONG\r\n"}, {`CONNECT {"verbose":false,"pass":"bad"}` + "\r\n", authViolation},
		}, true},
		{"empty CONNECT, then another user", plain, []step{
			{`CONNECT {"verbose":false}` + "\r\nPING\r\n", "PONG\r\n"},
			{`CONNECT {"user":"eve","pass":"pe"}` + "\r\nPING\r\n", "PONG\r\n"},
		}, false},
		{"bcrypt no_auth_user, op first", hashed, []step{{"PING\r\n", authViolation}}, true},
		{"bcrypt no_auth_user, empty CONNECT", hashed, []step{{`CONNECT {"verbose":false}` + "\r\nPING\r\n", authViolation}}, true},
		{"bcrypt no_auth_user, CONNECT with its password", hashed, []step{
			{`CONNECT {"verbose":false,"user":"carol","pass":"pc"}` + "\r\nPING\r\n", "PONG\r\n"},
		}, false},
		{"nkey no_auth_user named without a signature", nkey, []step{
			{`CONNECT {"verbose":false,"nkey":"` + pub + `"}` + "\r\nPING\r\n", "PONG\r\n"},
		}, false},
		{"nkey no_auth_user, empty CONNECT twice", nkey, []step{
			{`CONNECT {"verbose":false}` + "\r\nPING\r\n", "PONG\r\n"}, {"CONNECT {}\r\nPING\r\n", "PONG\r\n"},
		}, false},
		// Only a no_auth_user from the users list lets ops come before CONNECT.
		{"nkey no_auth_user, op first", nkey, []step{{"PING\r\n", authViolation}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBoth(t, tc.conf, func(t *testing.T, s *compatServer) {
				r := s.dial()
				for _, st := range tc.steps {
					if st.send != "" {
						r.send(st.send)
					}
					r.expect(st.want)
				}
				if tc.closed {
					r.expectClosed()
					return
				}
				r.send("PING\r\n")
				r.expect("PONG\r\n")
			})
		})
	}
}

// TestAuthNkeySignatureEncodings: an nkey signature is read as unpadded base64url, else as
// padded standard base64 (nats-server's rule), so a padded base64url signature passes when it
// holds no '-' or '_' and fails otherwise, and an unpadded standard one passes only without
// '+' or '/'. Each connection's verdict must follow the rule, on both servers; every
// encoding is tried until both verdicts were seen where the rule gives both.
func TestAuthNkeySignatureEncodings(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	conf := "authorization { users: [{nkey: " + pub + "}] }\n"
	encodings := []struct {
		name string
		enc  *base64.Encoding
		both bool // the rule accepts some signatures and refuses others
	}{
		{"unpadded base64url", base64.RawURLEncoding, false},
		{"padded base64url", base64.URLEncoding, true},
		{"padded standard", base64.StdEncoding, false},
		{"unpadded standard", base64.RawStdEncoding, true},
	}
	accepts := func(sig string) bool {
		if _, err := base64.RawURLEncoding.DecodeString(sig); err == nil {
			return true
		}
		_, err := base64.StdEncoding.DecodeString(sig)
		return err == nil
	}
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			forBoth(t, conf, func(t *testing.T, s *compatServer) {
				seen := map[bool]int{}
				for i := 0; i < 400 && (i < 8 || (e.both && len(seen) < 2)); i++ {
					r := s.dial()
					nonce, _ := r.info["nonce"].(string)
					raw, _ := kp.Sign([]byte(nonce))
					sig := e.enc.EncodeToString(raw)
					ok := accepts(sig)
					seen[ok]++
					r.send(`CONNECT {"verbose":false,"pedantic":false,"nkey":"` + pub + `","sig":"` + sig + "\"}\r\nPING\r\n")
					if ok {
						r.expect("PONG\r\n")
					} else {
						r.expect(authViolation)
						r.expectClosed()
					}
					r.c.Close()
				}
				if e.both && len(seen) < 2 {
					t.Fatalf("saw only %v", seen)
				}
			})
		})
	}
}

// TestAuthRefusedOffReactorCloses: a CONNECT refused by a check that ran off the reactor
// (nkey signature, bcrypt) closes the connection on every engine (netpoll's pump waited for a
// wake that never came).
func TestAuthRefusedOffReactorCloses(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	hash, _ := bcrypt.GenerateFromPassword([]byte("pc"), bcrypt.MinCost)
	for _, eng := range engines {
		t.Run(eng, func(t *testing.T) {
			s := startAuth(t, func(o *Options) {
				o.Engine = eng
				o.Nkeys = []*auth.NkeyUser{{Nkey: pub}}
				o.Users = []*auth.User{{Username: "carol", Password: string(hash)}}
			})
			for _, connect := range []string{
				`{"verbose":false,"nkey":"` + pub + `","sig":"bm90IGEgc2lnbmF0dXJl"}`,
				`{"verbose":false,"nkey":"` + pub + `","sig":"%%%"}`,
				`{"verbose":false,"user":"carol","pass":"bad"}`,
			} {
				r := dialRawAuth(t, s)
				r.send("CONNECT " + connect + "\r\nPING\r\n")
				r.expect(authViolation)
				r.expectClosed()
			}
		})
	}
}
