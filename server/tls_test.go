package server

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/natsd/natsd/auth"
)

type testPKI struct {
	pool       *x509.CertPool
	server     tls.Certificate
	client     tls.Certificate // CN=alice, email alice@example.com
	clientDN   tls.Certificate // CN=bob,O=Acme, no SANs
	caCert     *x509.Certificate
	caKey      *ecdsa.PrivateKey
	serialNext int64
}

func (p *testPKI) issue(t *testing.T, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p.serialNext++
	tmpl.SerialNumber = big.NewInt(p.serialNext)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(der)
	p := &testPKI{pool: x509.NewCertPool(), caCert: caCert, caKey: caKey, serialNext: 1}
	p.pool.AddCert(caCert)
	p.server = p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	p.client = p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "alice"},
		EmailAddresses: []string{"alice@example.com"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	p.clientDN = p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "bob", Organization: []string{"Acme"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return p
}

func (p *testPKI) serverConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, MinVersion: tls.VersionTLS12}
}

// verifyingConfig is serverConfig requiring and verifying client certificates, as a tls{}
// block with verify: true gives nats-server.
func (p *testPKI) verifyingConfig() *tls.Config {
	c := p.serverConfig()
	c.ClientAuth = tls.RequireAndVerifyClientCert
	return c
}

// startNatsServer runs nats-server v2.15.2 in-process with o until the test ends.
func startNatsServer(t *testing.T, o *natsserver.Options) *natsserver.Server {
	t.Helper()
	o.NoLog, o.NoSigs = true, true
	ns, err := natsserver.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

func (p *testPKI) root() nats.Option {
	return func(o *nats.Options) error {
		if o.TLSConfig == nil {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		o.TLSConfig.RootCAs = p.pool
		o.Secure = true
		return nil
	}
}

func clientCert(c tls.Certificate) nats.Option {
	return func(o *nats.Options) error {
		if o.TLSConfig == nil {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		o.TLSConfig.Certificates = []tls.Certificate{c}
		o.Secure = true
		return nil
	}
}

func pubSubRoundTrip(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.SubscribeSync("tls.test")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 100_000)
	for i := 0; i < 50; i++ {
		if err := nc.Publish("tls.test", []byte(big)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ {
		m, err := sub.NextMsg(2 * time.Second)
		if err != nil || len(m.Data) != len(big) {
			t.Fatalf("msg %d: %v", i, err)
		}
	}
}

func TestTLSBasic(t *testing.T) {
	p := newPKI(t)
	s := startAuth(t, func(o *Options) { o.TLSConfig = p.serverConfig() })
	r := dialRawAuth(t, s)
	if r.info["tls_required"] != true {
		t.Fatalf("INFO: %v", r.info)
	}
	nc, err := nats.Connect(s.ClientURL(), p.root())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pubSubRoundTrip(t, nc)
	// A plaintext client cannot talk: it gets no further than INFO.
	if _, err := nats.Connect(s.ClientURL(), nats.Timeout(time.Second), func(o *nats.Options) error {
		o.TLSConfig = &tls.Config{RootCAs: x509.NewCertPool()}
		o.Secure = true
		return nil
	}); err == nil {
		t.Fatal("untrusted server accepted")
	}
}

func TestTLSHandshakeFirst(t *testing.T) {
	p := newPKI(t)
	s := startAuth(t, func(o *Options) { o.TLSConfig = p.serverConfig(); o.TLSHandshakeFirst = true })
	nc, err := nats.Connect(s.ClientURL(), p.root(), nats.TLSHandshakeFirst())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pubSubRoundTrip(t, nc)
}

func TestTLSVerifyAndMap(t *testing.T) {
	p := newPKI(t)
	s := startAuth(t, func(o *Options) {
		o.TLSConfig = p.serverConfig()
		o.TLSVerify = true
	})
	root := p.root()
	if _, err := nats.Connect(s.ClientURL(), root, nats.Timeout(time.Second)); err == nil {
		t.Fatal("verify: client without certificate accepted")
	}
	nc, err := nats.Connect(s.ClientURL(), root, clientCert(p.client))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()

	s2 := startAuth(t, func(o *Options) {
		o.TLSConfig = p.serverConfig()
		o.TLSMap = true
		o.Users = []*auth.User{
			{Username: "alice@example.com", Permissions: &auth.Permissions{Publish: &auth.SubjectPermission{Allow: []string{"a.>"}}}},
			{Username: "O=Acme,CN=bob"},
		}
	})
	r := dialRawAuth(t, s2)
	if r.info["tls_verify"] != true || r.info["auth_required"] != true {
		t.Fatalf("INFO: %v", r.info)
	}
	errs := make(chan error, 1)
	nc, err = nats.Connect(s2.ClientURL(), root, clientCert(p.client),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Publish("b", nil)
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), `Permissions Violation for Publish to "b"`) {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("mapped user's permissions not applied")
	}
	nc.Close()
	nc, err = nats.Connect(s2.ClientURL(), root, clientCert(p.clientDN))
	if err != nil {
		t.Fatalf("DN mapping: %v", err)
	}
	nc.Close()
}

func TestTLSAllowNonTLS(t *testing.T) {
	p := newPKI(t)
	s := startAuth(t, func(o *Options) { o.TLSConfig = p.serverConfig(); o.AllowNonTLS = true })
	r := dialRawAuth(t, s)
	if r.info["tls_available"] != true || r.info["tls_required"] != nil {
		t.Fatalf("INFO: %v", r.info)
	}
	r.send("CONNECT {\"verbose\":false}\r\nPING\r\n")
	r.expect("PONG\r\n")
	nc, err := nats.Connect(s.ClientURL(), p.root())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pubSubRoundTrip(t, nc)
}

func TestTLSAuthTimeoutDefault(t *testing.T) {
	o := &Options{TLSConfig: &tls.Config{}}
	tlsDefaults(o)
	if o.AuthTimeout != 3*time.Second {
		t.Fatalf("auth timeout %v", o.AuthTimeout)
	}
}

// pemFiles writes the CA, the server's certificate and key as PEM files for a config file.
func (p *testPKI) pemFiles(t *testing.T) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	kder, err := x509.MarshalECPrivateKey(p.server.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return write("ca.pem", "CERTIFICATE", p.caCert.Raw), write("server.pem", "CERTIFICATE", p.server.Certificate[0]),
		write("server-key.pem", "EC PRIVATE KEY", kder)
}

// dialRawTLS reads INFO in the clear, then upgrades the connection with cert (may be nil).
func dialRawTLS(t *testing.T, addr string, p *testPKI, cert *tls.Certificate) *raw {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	pre := &raw{t: t, c: c, br: bufio.NewReader(c)}
	line := pre.line()
	if !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("want INFO, got %q", line)
	}
	cfg := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tc := tls.Client(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(3 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	_ = tc.SetDeadline(time.Time{})
	return &raw{t: t, c: tc, br: bufio.NewReader(tc)}
}

// TestTLSVerifyAndMapConnectFields: with verify_and_map the certificate names the user; a user
// in CONNECT is ignored (with nats-server's warning), and CONNECT's password must match the
// mapped user's (none for a user without one), as nats-server's processClientOrLeafAuthentication.
func TestTLSVerifyAndMapConnectFields(t *testing.T) {
	p := newPKI(t)
	ca, cert, key := p.pemFiles(t)
	conf := `tls { cert_file: "` + cert + `", key_file: "` + key + `", ca_file: "` + ca + `", verify_and_map: true }
authorization { users: [ {user: "alice@example.com"}, {user: "O=Acme,CN=bob", password: "pb"} ] }
`
	cases := []struct {
		name    string
		cert    tls.Certificate
		connect string // CONNECT's credential fields
		ok      bool
		warn    string // a log line the server writes
	}{
		{"mapped, nothing in CONNECT", p.client, ``, true, ""},
		{"mapped, unknown user and password", p.client, `,"user":"mallory","pass":"x"`, false, ""},
		{"mapped, unknown user only", p.client, `,"user":"mallory"`, true, `[WRN] User "mallory" found in connect proto, but user required from cert`},
		{"mapped, password for a user without one", p.client, `,"pass":"x"`, false, ""},
		{"mapped, another user's credentials", p.client, `,"user":"O=Acme,CN=bob","pass":"pb"`, false, ""},
		{"mapped user with a password, none given", p.clientDN, ``, false, ""},
		{"mapped user with a password, given", p.clientDN, `,"pass":"pb"`, true, ""},
		{"mapped user with a password, wrong", p.clientDN, `,"pass":"nope"`, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBoth(t, conf, func(t *testing.T, s *compatServer) {
				r := dialRawTLS(t, s.addr, p, &tc.cert)
				r.send(`CONNECT {"verbose":false,"pedantic":false` + tc.connect + "}\r\nPING\r\n")
				if !tc.ok {
					r.expect(authViolation)
					r.expectClosed()
					return
				}
				r.expect("PONG\r\n")
				if tc.warn != "" {
					s.waitLog(tc.warn)
				}
			})
		})
	}
}

// TestTLSPinnedCerts: with pinned_certs only a client whose certificate's key is pinned gets
// in; nats-server, given the same pins and certificates, admits the same clients.
func TestTLSPinnedCerts(t *testing.T) {
	p := newPKI(t)
	leaf, err := x509.ParseCertificate(p.client.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	pins := map[string]struct{}{hex.EncodeToString(sum[:]): {}}
	ns := startNatsServer(t, &natsserver.Options{Host: "127.0.0.1", Port: -1, TLS: true, TLSVerify: true, TLSTimeout: 2,
		TLSPinnedCerts: natsserver.PinnedCertSet(pins), TLSConfig: p.verifyingConfig()})
	s := startAuth(t, func(o *Options) {
		o.TLSConfig, o.TLSVerify, o.TLSPinnedCerts = p.serverConfig(), true, pins
	})
	for _, url := range []string{ns.ClientURL(), s.ClientURL()} {
		nc, err := nats.Connect(url, p.root(), clientCert(p.client))
		if err != nil {
			t.Fatalf("%s: pinned client refused: %v", url, err)
		}
		pubSubRoundTrip(t, nc)
		nc.Close()
		if nc, err := nats.Connect(url, p.root(), clientCert(p.clientDN), nats.Timeout(time.Second)); err == nil {
			nc.Close()
			t.Fatalf("%s: a client whose key is not pinned connected", url)
		}
	}
}

// TestTLSWrongSpeakerMatchesNatsServer sends each server, over raw TCP, what a confused or
// hostile client might: garbage or a plaintext CONNECT where a ClientHello belongs, and a
// ClientHello to a plaintext port. Both servers must answer with the same bytes after INFO
// (nothing, an alert, or an -ERR) and then close.
func TestTLSWrongSpeakerMatchesNatsServer(t *testing.T) {
	p := newPKI(t)
	var hello bytes.Buffer
	_ = tls.Client(&captureConn{w: &hello}, &tls.Config{InsecureSkipVerify: true}).Handshake()
	start := func(withTLS bool) (ref, ours string) {
		o := &natsserver.Options{Host: "127.0.0.1", Port: -1}
		if withTLS {
			o.TLS, o.TLSTimeout, o.TLSConfig = true, 2, p.serverConfig()
		}
		ns := startNatsServer(t, o)
		s := startAuth(t, func(o *Options) {
			if withTLS {
				o.TLSConfig = p.serverConfig()
			}
		})
		return ns.Addr().String(), s.Addr().String()
	}
	exchange := func(addr string, send []byte) (string, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
			return "", fmt.Errorf("no INFO: %q %v", line, err)
		}
		_, _ = c.Write(send)
		rest, err := io.ReadAll(br)
		if err != nil && !strings.Contains(err.Error(), "reset by peer") {
			return string(rest), err
		}
		return string(rest), nil
	}
	tlsRef, tlsOurs := start(true)
	plainRef, plainOurs := start(false)
	cases := []struct {
		name      string
		ref, ours string
		send      []byte
	}{
		{"plaintext CONNECT to a TLS port", tlsRef, tlsOurs, []byte("CONNECT {}\r\nPING\r\n")},
		{"garbage to a TLS port", tlsRef, tlsOurs, []byte("\x00\x01\x02\x03\x04\x05\x06\x07")},
		{"a broken handshake record to a TLS port", tlsRef, tlsOurs, []byte("\x16\x03\x01\x00\x05hello")},
		{"a ClientHello to a plaintext port", plainRef, plainOurs, hello.Bytes()},
	}
	for _, c := range cases {
		theirs, err1 := exchange(c.ref, c.send)
		ours, err2 := exchange(c.ours, c.send)
		t.Logf("%s: %q", c.name, theirs)
		if err1 != nil || err2 != nil || theirs != ours {
			t.Errorf("%s: nats-server %q (%v), natsd %q (%v)", c.name, theirs, err1, ours, err2)
		}
	}
}

// captureConn records what a TLS client writes and fails its reads: a ClientHello.
type captureConn struct {
	net.Conn
	w io.Writer
}

func (c *captureConn) Write(b []byte) (int, error)      { return c.w.Write(b) }
func (c *captureConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }

// TestClientAdvertiseMatchesNatsServer: client_advertise replaces INFO's host and port (a
// missing port is the bound one), as nats-server does; a bad value is refused.
func TestClientAdvertiseMatchesNatsServer(t *testing.T) {
	infoOf := func(addr string) map[string]any {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "INFO "))), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, adv := range []string{"nats.example.com:5222", "nats.example.com", "[::1]:0"} {
		ns := startNatsServer(t, &natsserver.Options{Host: "127.0.0.1", Port: -1, ClientAdvertise: adv})
		s := startAuth(t, func(o *Options) { o.ClientAdvertise = adv })
		theirs, ours := infoOf(ns.Addr().String()), infoOf(s.Addr().String())
		wantPort := func(bound int, info map[string]any) bool {
			p, _ := info["port"].(float64)
			return adv == "nats.example.com:5222" && p == 5222 || adv != "nats.example.com:5222" && int(p) == bound
		}
		if theirs["host"] != ours["host"] || !wantPort(ns.Addr().(*net.TCPAddr).Port, theirs) || !wantPort(s.Addr().Port, ours) {
			t.Errorf("%s: nats-server host %v port %v, natsd host %v port %v", adv, theirs["host"], theirs["port"], ours["host"], ours["port"])
		}
	}
	if _, err := New(&Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, ClientAdvertise: "a:b:c"}); err == nil ||
		!strings.Contains(err.Error(), "invalid ClientAdvertise value of a:b:c") {
		t.Fatalf("bad client_advertise: %v", err)
	}
}

// TestTLSFirstRefusalMatchesNatsServer: a TLS-first port that refuses a connection at accept
// (max_connections) sends nats-server's bytes: the error alone, in plaintext, with no INFO
// (the client is owed INFO only inside its session).
func TestTLSFirstRefusalMatchesNatsServer(t *testing.T) {
	p := newPKI(t)
	o := &natsserver.Options{Host: "127.0.0.1", Port: -1, MaxConn: -1}
	o.TLS, o.TLSTimeout, o.TLSConfig, o.TLSHandshakeFirst = true, 2, p.serverConfig(), true
	ns := startNatsServer(t, o)
	s := startAuth(t, func(o *Options) {
		o.TLSConfig, o.TLSHandshakeFirst, o.MaxConn = p.serverConfig(), true, -1
	})
	read := func(addr string) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil && !strings.Contains(err.Error(), "reset by peer") {
			t.Fatalf("%s: %v", addr, err)
		}
		return string(b)
	}
	theirs, ours := read(ns.Addr().String()), read(s.Addr().String())
	if want := "-ERR 'maximum connections exceeded'\r\n"; theirs != want || ours != theirs {
		t.Fatalf("nats-server %q, natsd %q (want %q from both)", theirs, ours, want)
	}
}
