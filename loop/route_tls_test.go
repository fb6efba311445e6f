package loop

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testCA issues certificates for route tests: each is good as a server's and as a client's
// (a route is both), for 127.0.0.1 and localhost unless names are given.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	next int64
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, next: 1}
}

// issue makes a certificate for cn with the given DNS names and addresses (both nil: localhost
// and 127.0.0.1).
func (ca *testCA) issue(t testing.TB, cn string, dns []string, ips []net.IP) tls.Certificate {
	t.Helper()
	if dns == nil && ips == nil {
		dns, ips = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.next++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.next), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: dns, IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// routeTLSConf is a cluster tls {} block as the config parser builds it: the peer's
// certificate required and verified both ways, the CA as roots for both.
func routeTLSConf(ca *testCA, cert tls.Certificate, maxVersion uint16) *TLSConfig {
	return &TLSConfig{
		Config: &tls.Config{
			Certificates: []tls.Certificate{cert}, ClientCAs: ca.pool, RootCAs: ca.pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion,
		},
		Timeout: 5 * time.Second,
	}
}

// logCapture keeps what an engine logs.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) add(level, format string, v ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, level+" "+fmt.Sprintf(format, v...))
	l.mu.Unlock()
}
func (l *logCapture) Noticef(f string, v ...any) { l.add("[INF]", f, v...) }
func (l *logCapture) Warnf(f string, v ...any)   { l.add("[WRN]", f, v...) }
func (l *logCapture) Errorf(f string, v ...any)  { l.add("[ERR]", f, v...) }
func (l *logCapture) Debugf(f string, v ...any)  { l.add("[DBG]", f, v...) }
func (l *logCapture) Tracef(f string, v ...any)  { l.add("[TRC]", f, v...) }

func (l *logCapture) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// tlsClusterEngine starts an engine of the given kind whose routes run in TLS.
func tlsClusterEngine(t *testing.T, engine, id string, tc *TLSConfig, lg Logger, routes ...*url.URL) *Engine {
	t.Helper()
	e := New(Config{
		Host: "127.0.0.1", Port: -1, Reactors: 2, Engine: engine, Log: lg,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20,
		PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"` + id + `","version":"2.15.2","proto":1,"max_payload":1048576}`),
		Cluster: &RouteConfig{
			Host: "127.0.0.1", Port: -1, ClusterName: "C", ServerID: id, ServerName: id,
			Version: "2.15.2", Proto: 1, PingInterval: 2 * time.Minute, MaxPingsOut: 2,
			AuthTimeout: 6 * time.Second, TLS: tc, Routes: routes,
		},
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// routeSession is the TLS state of e's route to the server id (nil: none, or no TLS).
func routeSession(e *Engine, id string) *tls.ConnectionState {
	for _, rc := range e.routeList() {
		if rc.route.remote.ID != id {
			continue
		}
		if l, ok := rc.conn.(*tlsLayer); ok {
			return &tls.ConnectionState{Version: l.vers, CipherSuite: l.suite, PeerCertificates: l.peer}
		}
	}
	return nil
}

// crossRoute checks that a message from a client of pub reaches a subscriber on sub, for
// every size in sizes.
func crossRoute(t *testing.T, sub, pub *Engine, subj string, sizes ...int) {
	t.Helper()
	s, p := dialInto(t, sub, sub.Global()), dialInto(t, pub, pub.Global())
	s.send("SUB " + subj + " 1\r\n")
	s.flush()
	waitFor(t, "remote interest in "+subj, func() bool {
		p.send("PUB " + subj + " 2\r\nhi\r\n")
		p.flush()
		for _, l := range s.flush() {
			if strings.HasPrefix(l, "MSG "+subj+" 1 2") {
				return true
			}
		}
		return false
	})
	for _, n := range sizes {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = 'a' + byte(mrand.Intn(26))
		}
		p.send(fmt.Sprintf("PUB %s %d\r\n%s\r\n", subj, n, payload))
		p.flush()
		_ = s.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			line, err := s.br.ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for %d bytes on %s: %v", n, subj, err)
			}
			if line == "PONG\r\n" || strings.HasPrefix(line, "MSG "+subj+" 1 2\r") {
				if line != "PONG\r\n" {
					_, _ = s.br.ReadString('\n') // the probe's payload
				}
				continue
			}
			if want := fmt.Sprintf("MSG %s 1 %d\r\n", subj, n); line != want {
				t.Fatalf("got %q, want %q", line, want)
			}
			got := make([]byte, n+2)
			if _, err := io.ReadFull(s.br, got); err != nil || !bytes.Equal(got[:n], payload) {
				t.Fatalf("payload of %d bytes across the route: %v", n, err)
			}
			break
		}
	}
}

// TestRouteTLSEngines: a route in TLS between engines of each kind (and mixed), TLS 1.3 and
// 1.2: the dialling side is the TLS client, the accepting side the server, both verify the
// other, and messages of every size cross it both ways inside the session.
func TestRouteTLSEngines(t *testing.T) {
	ca := newTestCA(t, "route CA")
	for _, pair := range [][2]string{{"gnet", "gnet"}, {"netpoll", "netpoll"}, {"gnet", "netpoll"}, {"netpoll", "gnet"}} {
		for _, v := range []struct {
			name string
			max  uint16
		}{{"tls1.3", 0}, {"tls1.2", tls.VersionTLS12}} {
			t.Run(pair[0]+"-"+pair[1]+"/"+v.name, func(t *testing.T) {
				la, lb := &logCapture{}, &logCapture{}
				a := tlsClusterEngine(t, pair[0], "SA", routeTLSConf(ca, ca.issue(t, "a", nil, nil), v.max), la)
				b := tlsClusterEngine(t, pair[1], "SB", routeTLSConf(ca, ca.issue(t, "b", nil, nil), v.max), lb)
				u := &url.URL{Scheme: "nats-route", Host: b.RouteAddr().String()}
				if err := a.DialRoute(u, true, gossipDefault, ""); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the route", func() bool { return routeSession(a, "SB") != nil && routeSession(b, "SA") != nil })
				want := uint16(tls.VersionTLS13)
				if v.max != 0 {
					want = v.max
				}
				for _, x := range []struct {
					e    *Engine
					peer string
					cn   string
				}{{a, "SB", "b"}, {b, "SA", "a"}} {
					st := routeSession(x.e, x.peer)
					if st == nil || st.Version != want || len(st.PeerCertificates) == 0 || st.PeerCertificates[0].Subject.CommonName != x.cn {
						t.Fatalf("route to %s: session %+v, want TLS %x with %s's certificate", x.peer, st, want, x.cn)
					}
				}
				if !la.has("Starting TLS route client handshake") || !lb.has("Starting TLS route server handshake") ||
					!la.has("TLS version 1.") || !lb.has("TLS handshake complete") {
					t.Fatalf("handshake logs:\n--- a:\n%s\n--- b:\n%s", la, lb)
				}
				crossRoute(t, b, a, "ab", 0, 100, maxPlaintext-20, 3*maxPlaintext+7, 300<<10)
				crossRoute(t, a, b, "ba", 0, 100, maxPlaintext-20, 3*maxPlaintext+7, 300<<10)
			})
		}
	}
}

// TestRouteTLSRefused: a server whose certificate the cluster's CA did not sign joins no
// one, whichever side dials: its handshakes fail ("TLS Handshake Failure"), logged as route
// handshake errors, and no route registers. So does a server that speaks plaintext to a TLS
// route port, and one that is not the host its certificate names.
func TestRouteTLSRefused(t *testing.T) {
	ca, other := newTestCA(t, "route CA"), newTestCA(t, "someone else's CA")
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			lg, lx := &logCapture{}, &logCapture{}
			good := tlsClusterEngine(t, engine, "SGOOD", routeTLSConf(ca, ca.issue(t, "good", nil, nil), 0), lg)
			// The intruder trusts the cluster's CA, so only the cluster's checks keep it out.
			bad := tlsClusterEngine(t, engine, "SBAD", routeTLSConf(ca, other.issue(t, "bad", nil, nil), 0), lx)
			dial := func(from, to *Engine) {
				u := &url.URL{Scheme: "nats-route", Host: to.RouteAddr().String()}
				if err := from.DialRoute(u, true, gossipDefault, ""); err != nil {
					t.Fatal(err)
				}
			}
			dial(bad, good)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("good's log:\n%s\nthe intruder's log:\n%s", lg, lx)
				}
			})
			waitFor(t, "the refusal", func() bool {
				return lg.has("TLS route handshake error") && lg.has("Router connection closed: TLS Handshake Failure")
			})
			dial(good, bad)
			waitFor(t, "the refusal of the intruder's certificate", func() bool {
				return strings.Count(lg.String(), "TLS route handshake error") >= 2
			})
			// As the TLS server, good finds no certificate of its CA (crypto/tls's client
			// sends none the server's CA list does not name), which the intruder learns from
			// good's alert after its TLS 1.3 handshake; as the client, good finds one it
			// cannot verify.
			if !lg.has("client didn't provide a certificate") || !lg.has("certificate signed by unknown authority") ||
				!lx.has("remote error: tls: certificate required") {
				t.Fatalf("the logs do not say why:\n--- good:\n%s\n--- intruder:\n%s", lg, lx)
			}
			// Plaintext on the TLS route port: no INFO, the handshake fails.
			c, err := net.DialTimeout("tcp", good.RouteAddr().String(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write([]byte("CONNECT {\"name\":\"SPLAIN\",\"cluster\":\"C\"}\r\nINFO {\"server_id\":\"SPLAIN\"}\r\n"))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			rest, _ := io.ReadAll(c)
			c.Close()
			if bytes.Contains(rest, []byte("INFO")) {
				t.Fatalf("a plaintext peer got %q", rest)
			}
			time.Sleep(100 * time.Millisecond)
			if good.NumRemotes() != 0 || bad.NumRemotes() != 0 {
				t.Fatalf("routes registered: good %d, bad %d", good.NumRemotes(), bad.NumRemotes())
			}

			// A certificate for another host: the dialling side refuses it.
			ln := &logCapture{}
			named := tlsClusterEngine(t, engine, "SNAMED", routeTLSConf(ca, ca.issue(t, "named", []string{"elsewhere.example"}, nil), 0), ln)
			dial(good, named)
			waitFor(t, "the host name check", func() bool {
				return strings.Contains(lg.String(), "certificate is not valid for any names") ||
					strings.Contains(lg.String(), "doesn't contain any IP SANs")
			})
			if good.NumRemotes() != 0 || named.NumRemotes() != 0 {
				t.Fatalf("routes registered: good %d, named %d", good.NumRemotes(), named.NumRemotes())
			}
		})
	}
}

// TestRouteTLSServerName: a route dialled by host name verifies that name; one dialled by
// address verifies the first host name among the configured routes (nats-server's
// routeTLSName), until a certificate proves that name wrong.
func TestRouteTLSServerName(t *testing.T) {
	var tn routeTLSName
	mustURL := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	cfg := &RouteConfig{Routes: []*url.URL{mustURL("nats://10.0.0.1:6222"), mustURL("nats://a.example:6222"), mustURL("nats://b.example:6222")}}
	for _, c := range []struct{ url, name, saved string }{
		{"nats://c.example:6222", "c.example", ""},
		{"nats://10.0.0.9:6222", "a.example", "a.example"},
		{"nats://a.example:6222", "a.example", "a.example"},
		{"nats://[::1]:6222", "a.example", "a.example"},
	} {
		if name, saved := tn.serverName(cfg, mustURL(c.url)); name != c.name || saved != c.saved {
			t.Errorf("%s: name %q saved %q, want %q %q", c.url, name, saved, c.name, c.saved)
		}
	}
	tn.forget("a.example")
	if name, saved := tn.serverName(cfg, mustURL("nats://10.0.0.9:6222")); name != "10.0.0.9" || saved != "" {
		t.Errorf("after forget: %q %q", name, saved)
	}
	// A reload that adds a route with a host name sets it again.
	cfg2 := &RouteConfig{Routes: append(append([]*url.URL(nil), cfg.Routes...), mustURL("nats://d.example:6222"))}
	if name, _ := tn.serverName(cfg2, mustURL("nats://10.0.0.9:6222")); name != "d.example" {
		t.Errorf("after a reload: %q", name)
	}
	// No host names at all: the address.
	var none routeTLSName
	if name, saved := none.serverName(&RouteConfig{Routes: []*url.URL{mustURL("nats://127.0.0.1:1")}}, mustURL("nats://127.0.0.1:2")); name != "127.0.0.1" || saved != "" {
		t.Errorf("addresses only: %q %q", name, saved)
	}
}

// TestRouteCertAuthorized: verify_and_map finds the cluster user in the certificate as
// nats-server does (e-mail, DNS name, URI, DN); check_known_urls matches DNS names against
// the configured routes' hosts.
func TestRouteCertAuthorized(t *testing.T) {
	u := func(s string) *url.URL { x, _ := url.Parse(s); return x }
	uri := u("spiffe://cluster/route")
	cert := &x509.Certificate{
		Subject:        pkix.Name{CommonName: "route", Organization: []string{"Acme"}},
		EmailAddresses: []string{"route@example.com"},
		DNSNames:       []string{"node1.cluster.example", "*.mesh.example"},
		URIs:           []*url.URL{uri},
	}
	raw, err := asn1Marshal(cert.Subject)
	if err != nil {
		t.Fatal(err)
	}
	cert.RawSubject = raw
	chain := []*x509.Certificate{cert}
	routes := []*url.URL{u("nats://node2.mesh.example:6222"), u("nats://10.0.0.1:6222")}
	for _, c := range []struct {
		name  string
		cfg   RouteConfig
		certs []*x509.Certificate
		want  bool
	}{
		{"map by e-mail", RouteConfig{TLSMap: true, Username: "route@example.com"}, chain, true},
		{"map by DNS name", RouteConfig{TLSMap: true, Username: "node1.cluster.example"}, chain, true},
		{"map by URI", RouteConfig{TLSMap: true, Username: "spiffe://cluster/route"}, chain, true},
		{"map by DN", RouteConfig{TLSMap: true, Username: "CN=route,O=Acme"}, chain, true},
		{"map, other user", RouteConfig{TLSMap: true, Username: "someone"}, chain, false},
		{"map, no user configured", RouteConfig{TLSMap: true}, chain, false},
		{"map, no certificate", RouteConfig{TLSMap: true, Username: "route@example.com"}, nil, false},
		{"known URL by wildcard", RouteConfig{TLSCheckKnownURLs: true, Routes: routes}, chain, true},
		{"known URL, none matches", RouteConfig{TLSCheckKnownURLs: true, Routes: routes[1:]}, chain, false},
		{"known URL does not map users", RouteConfig{TLSCheckKnownURLs: true, Username: "route@example.com"}, chain, false},
	} {
		if got := routeCertAuthorized(c.certs, &c.cfg); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if !dnsAltNameMatches([]string{"*", "b", "c"}, []*url.URL{u("nats://a.b.c:1")}) ||
		dnsAltNameMatches([]string{"*", "c"}, []*url.URL{u("nats://a.b.c:1")}) ||
		dnsAltNameMatches([]string{"a", "*", "c"}, []*url.URL{u("nats://a.b.c:1")}) {
		t.Error("dnsAltNameMatches: wildcards")
	}
}

func asn1Marshal(n pkix.Name) ([]byte, error) {
	// x509 marshals a subject when it creates a certificate; a self-signed one is the
	// shortest way to its bytes.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: n,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: n}, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return c.RawSubject, nil
}

// ---------------------------------------------------------------------------------------------
// The adapter's client role, driven directly: each end is a tlsLayer on a reactor of its own
// (a serial executor) over one end of an in-memory socket pair, and the bytes between them
// are cut at random (down to one byte at a time), so records and handshake flights arrive in
// any split.

// pipeConn is the engine connection a tlsLayer sees in these tests: an inbound buffer the
// reader goroutine appends to on the reactor, and writes queued for the writer goroutine.
type pipeConn struct {
	ex       *serial
	in       []byte // reactor-owned
	mu       sync.Mutex
	out      [][]byte
	outSig   chan struct{}
	closed   atomic.Bool
	closedCh chan struct{} // closed by Close: the writer sends what is queued, then hangs up
	wake     func()
}

func (p *pipeConn) Peek(n int) ([]byte, error) {
	if n <= 0 || n > len(p.in) {
		n = len(p.in)
	}
	return p.in[:n], nil
}

func (p *pipeConn) Discard(n int) (int, error) {
	if n <= 0 || n > len(p.in) {
		n = len(p.in)
	}
	p.in = p.in[n:]
	if len(p.in) == 0 {
		p.in = nil
	}
	return n, nil
}

func (p *pipeConn) InboundBuffered() int { return len(p.in) }

func (p *pipeConn) Writev(bs [][]byte) (int, error) {
	if p.closed.Load() {
		return 0, net.ErrClosed
	}
	n := 0
	p.mu.Lock()
	for _, b := range bs {
		p.out = append(p.out, append([]byte(nil), b...))
		n += len(b)
	}
	p.mu.Unlock()
	select {
	case p.outSig <- struct{}{}:
	default:
	}
	return n, nil
}

func (p *pipeConn) OutboundBuffered() int { return 0 }
func (p *pipeConn) Close() error {
	if !p.closed.Swap(true) {
		close(p.closedCh)
	}
	return nil
}
func (p *pipeConn) Wake() error          { return p.ex.Execute(p.wake) }
func (p *pipeConn) SetReading(bool)      {}
func (p *pipeConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// layerEnd is one tlsLayer on its own reactor, talking over nc.
type layerEnd struct {
	t    *testing.T
	ex   *serial
	pc   *pipeConn
	l    *tlsLayer
	mu   sync.Mutex
	got  []byte // plaintext received
	done chan struct{}
}

// split is how the bytes between the ends are cut: the largest piece written or read at once.
type split struct {
	name string
	max  int
}

var splits = []split{{"bytes", 1}, {"small", 7}, {"medium", 700}, {"large", 40000}}

func (s split) size() int {
	if s.max == 1 {
		return 1
	}
	return 1 + mrand.Intn(s.max)
}

// newLayerEnd runs a tlsLayer with tc over nc: the TLS client toward serverName when client
// is set, else the server; greeting is sent first inside the session.
func newLayerEnd(t *testing.T, nc net.Conn, tc *TLSConfig, client bool, serverName string, greeting string, sp split) *layerEnd {
	quit := make(chan struct{})
	ex := newSerial(quit)
	le := &layerEnd{t: t, ex: ex, done: make(chan struct{})}
	le.pc = &pipeConn{ex: ex, outSig: make(chan struct{}, 1), closedCh: make(chan struct{}), wake: le.traffic}
	le.l = newTLSLayer(&Engine{}, le.pc, ex, tc, le.traffic)
	le.l.route, le.l.client, le.l.serverName = true, client, serverName
	t.Cleanup(func() {
		_ = le.l.Close() // ends a handshake still in progress
		nc.Close()
		<-le.done
		close(quit)
	})
	// Writer: whatever the layer hands the engine goes out in random pieces; after Close, what
	// was queued goes and the socket is closed.
	go func() {
		defer close(le.done)
		defer nc.Close()
		for {
			closing := false
			select {
			case <-le.pc.outSig:
			case <-le.pc.closedCh:
				closing = true
			}
			le.pc.mu.Lock()
			out := le.pc.out
			le.pc.out = nil
			le.pc.mu.Unlock()
			for _, b := range out {
				for len(b) > 0 {
					n := min(len(b), sp.size())
					if _, err := nc.Write(b[:n]); err != nil {
						return
					}
					b = b[n:]
				}
			}
			if closing {
				return
			}
		}
	}()
	// The layer starts before anything the peer sends reaches it, as an engine opens a
	// connection before its first traffic (the reader below queues behind this).
	_ = ex.Execute(func() {
		if g := le.l.start(nil, []byte(greeting)); len(g) > 0 {
			t.Errorf("a route layer sent %q before its session", g)
		}
	})
	// Reader: what arrives is appended on the reactor, a random piece at a time, and traffic
	// runs after each.
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := nc.Read(buf[:sp.size()])
			if n > 0 {
				b := append([]byte(nil), buf[:n]...)
				_ = ex.Execute(func() {
					le.pc.in = append(le.pc.in, b...)
					le.traffic()
				})
			}
			if err != nil {
				return
			}
		}
	}()
	return le
}

// traffic takes what the layer has opened, as the engine's traffic does (on the reactor).
func (le *layerEnd) traffic() {
	for {
		b, _ := le.l.Peek(0)
		if len(b) == 0 {
			return
		}
		le.mu.Lock()
		le.got = append(le.got, b...)
		le.mu.Unlock()
		_, _ = le.l.Discard(len(b))
	}
}

// write sends b through the layer (on its reactor), in pieces of various sizes.
func (le *layerEnd) write(b []byte) {
	_ = le.ex.Execute(func() {
		for len(b) > 0 {
			n := min(len(b), 1+mrand.Intn(3*maxPlaintext))
			var bs [][]byte
			for k := 0; k < n; k += 5000 {
				bs = append(bs, b[k:min(k+5000, n)])
			}
			if _, err := le.l.Writev(bs); err != nil {
				le.t.Errorf("Writev: %v", err)
				return
			}
			b = b[n:]
		}
	})
}

// waitGot waits until the end has received want (and fails on anything else).
func (le *layerEnd) waitGot(what string, want []byte) {
	le.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		le.mu.Lock()
		got := append([]byte(nil), le.got...)
		le.mu.Unlock()
		if len(got) >= len(want) {
			if !bytes.Equal(got[:len(want)], want) {
				i := 0
				for i < len(want) && got[i] == want[i] {
					i++
				}
				le.t.Fatalf("%s: differs at byte %d of %d", what, i, len(want))
			}
			return
		}
		if time.Now().After(deadline) || le.pc.closed.Load() {
			le.t.Fatalf("%s: %d of %d bytes arrived (connection closed: %v)", what, len(got), len(want), le.pc.closed.Load())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// state reads the layer's session parameters on its reactor.
func (le *layerEnd) state() (st *tls.ConnectionState, rec13 bool) {
	ch := make(chan struct{})
	_ = le.ex.Execute(func() {
		st, rec13 = le.l.TLSState(), le.l.rec != nil
		close(ch)
	})
	<-ch
	return st, rec13
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// TestTLSLayerClientRole runs sessions between the adapter's two roles, and between each role
// and crypto/tls's opposite one, TLS 1.3 and 1.2, with the bytes between them cut at random:
// the greetings come first inside the session, then data of several records each way; both
// ends see the other's certificate.
func TestTLSLayerClientRole(t *testing.T) {
	ca := newTestCA(t, "route CA")
	cliCert, srvCert := ca.issue(t, "dialler", nil, nil), ca.issue(t, "acceptor", nil, nil)
	versions := []struct {
		name    string
		max     uint16
		suites  []uint16
		tickets bool
	}{
		{"tls1.3", 0, nil, false},
		// A client with a session cache asks for tickets (routes' do not): the servers send
		// them after the handshake, and the client role reads past them on the reactor.
		{"tls1.3-tickets", 0, nil, true},
		{"tls1.2", tls.VersionTLS12, nil, false},
		{"tls1.2-chacha", tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, false},
	}
	for _, v := range versions {
		for _, sp := range splits {
			t.Run(v.name+"/"+sp.name, func(t *testing.T) {
				ctc, stc := routeTLSConf(ca, cliCert, v.max), routeTLSConf(ca, srvCert, v.max)
				ctc.Config.CipherSuites, stc.Config.CipherSuites = v.suites, v.suites
				if v.tickets {
					ctc.Config.ClientSessionCache = tls.NewLRUClientSessionCache(4)
				}
				up, down := randomBytes(2*maxPlaintext+333), randomBytes(3*maxPlaintext+17)
				if sp.max == 1 {
					up, down = up[:5000], down[:7000] // a byte at a time: keep it short
				}
				want := uint16(tls.VersionTLS13)
				if v.max != 0 {
					want = v.max
				}
				check := func(le *layerEnd, peerCN string) {
					t.Helper()
					st, rec13 := le.state()
					if st == nil || st.Version != want || rec13 != (want == tls.VersionTLS13) ||
						len(st.PeerCertificates) == 0 || st.PeerCertificates[0].Subject.CommonName != peerCN {
						t.Fatalf("session %+v (record layer on the reactor: %v), want TLS %x with %s's certificate", st, rec13, want, peerCN)
					}
				}

				t.Run("layer-layer", func(t *testing.T) {
					a, b := net.Pipe()
					cli := newLayerEnd(t, a, ctc, true, "127.0.0.1", "CONNECT {}\r\n", sp)
					// Written before the session is up: held, then sealed after the greeting.
					cli.write(up[:100])
					srv := newLayerEnd(t, b, stc, false, "", "INFO {}\r\n", sp)
					srv.waitGot("the dialler's CONNECT and first bytes", append([]byte("CONNECT {}\r\n"), up[:100]...))
					cli.waitGot("the acceptor's INFO", []byte("INFO {}\r\n"))
					check(cli, "acceptor")
					check(srv, "dialler")
					cli.write(up[100:])
					srv.write(down)
					srv.waitGot("the dialler's data", append([]byte("CONNECT {}\r\n"), up...))
					cli.waitGot("the acceptor's data", append([]byte("INFO {}\r\n"), down...))
				})

				t.Run("layer-crypto/tls server", func(t *testing.T) {
					a, b := net.Pipe()
					cli := newLayerEnd(t, a, ctc, true, "localhost", "CONNECT {}\r\n", sp)
					scfg := stc.Config.Clone()
					peer := tls.Server(b, scfg)
					_ = peer.SetDeadline(time.Now().Add(20 * time.Second))
					errc := make(chan error, 1)
					go func() {
						got := make([]byte, len("CONNECT {}\r\n")+len(up))
						if _, err := io.ReadFull(peer, got); err != nil {
							errc <- err
							return
						}
						if !bytes.Equal(got, append([]byte("CONNECT {}\r\n"), up...)) {
							errc <- errors.New("the dialler's bytes differ")
							return
						}
						errc <- nil
					}()
					// crypto/tls's server sends a session ticket after the handshake (TLS
					// 1.3): the client role reads and drops it.
					if _, err := peer.Write(append([]byte("INFO {}\r\n"), down...)); err != nil {
						t.Fatal(err)
					}
					cli.waitGot("crypto/tls's data", append([]byte("INFO {}\r\n"), down...))
					check(cli, "acceptor")
					cli.write(up)
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
					if cs := peer.ConnectionState(); len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName != "dialler" {
						t.Fatalf("crypto/tls's server saw %+v", cs.PeerCertificates)
					}
				})

				t.Run("crypto/tls client-layer", func(t *testing.T) {
					a, b := net.Pipe()
					srv := newLayerEnd(t, b, stc, false, "", "INFO {}\r\n", sp)
					ccfg := ctc.Config.Clone()
					ccfg.ServerName = "127.0.0.1"
					peer := tls.Client(a, ccfg)
					_ = peer.SetDeadline(time.Now().Add(20 * time.Second))
					go func() { _, _ = peer.Write(append([]byte("CONNECT {}\r\n"), up...)) }()
					got := make([]byte, len("INFO {}\r\n"))
					if _, err := io.ReadFull(peer, got); err != nil || string(got) != "INFO {}\r\n" {
						t.Fatalf("crypto/tls's client read %q %v", got, err)
					}
					srv.waitGot("crypto/tls's data", append([]byte("CONNECT {}\r\n"), up...))
					check(srv, "dialler")
					srv.write(down)
					got = make([]byte, len(down))
					if _, err := io.ReadFull(peer, got); err != nil || !bytes.Equal(got, down) {
						t.Fatalf("crypto/tls's client read %d bytes: %v", len(got), err)
					}
				})
			})
		}
	}
}

// TestTLSLayerClientRoleRefusals: the client role refuses a server whose certificate does not
// name the host dialled (and says so through failed, which forgets a saved TLS name) or that
// an unknown CA signed; the server role refuses a client certificate an unknown CA signed.
// Neither end sends what it held.
func TestTLSLayerClientRoleRefusals(t *testing.T) {
	ca, other := newTestCA(t, "route CA"), newTestCA(t, "other CA")
	for _, c := range []struct {
		name               string
		cliCert, srvCert   tls.Certificate
		serverName         string
		hostname, verifyCA bool
		// The server refuses the client: in TLS 1.3 the client's handshake is over by then,
		// and it learns of the refusal from the server's alert inside the session.
		serverRefuses bool
	}{
		{"wrong host", ca.issue(t, "d", nil, nil), ca.issue(t, "a", []string{"elsewhere.example"}, nil), "localhost", true, false, false},
		{"server by an unknown CA", ca.issue(t, "d", nil, nil), other.issue(t, "a", nil, nil), "localhost", false, true, false},
		{"client by an unknown CA", other.issue(t, "d", nil, nil), ca.issue(t, "a", nil, nil), "localhost", false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := net.Pipe()
			failed := make(chan error, 1)
			cli := newLayerEnd(t, a, routeTLSConf(ca, c.cliCert, 0), true, c.serverName, "CONNECT {}\r\n", split{"medium", 700})
			srv := newLayerEnd(t, b, routeTLSConf(ca, c.srvCert, 0), false, "", "INFO {}\r\n", split{"medium", 700})
			_ = cli.ex.Execute(func() { cli.l.failed = func(err error) { failed <- err } })
			waitFor(t, "both ends closed", func() bool { return cli.pc.closed.Load() && srv.pc.closed.Load() })
			cli.mu.Lock()
			srv.mu.Lock()
			if len(cli.got) != 0 || len(srv.got) != 0 {
				t.Fatalf("plaintext got through: dialler %q, acceptor %q", cli.got, srv.got)
			}
			srv.mu.Unlock()
			cli.mu.Unlock()
			if c.serverRefuses {
				return
			}
			var err error
			select {
			case err = <-failed:
			case <-time.After(5 * time.Second):
				t.Fatal("the dialler's failure was not reported")
			}
			var he x509.HostnameError
			var ua x509.UnknownAuthorityError
			if errors.As(err, &he) != c.hostname || errors.As(err, &ua) != c.verifyCA {
				t.Fatalf("dialler's error %v (%T)", err, err)
			}
		})
	}
}

// TestRouteTLSNoGoroutinePerRoute: established TLS routes cost no goroutine, on either engine
// (the handshake's goroutine ends with it).
func TestRouteTLSNoGoroutinePerRoute(t *testing.T) {
	ca := newTestCA(t, "route CA")
	peerCert := ca.issue(t, "peer", nil, nil)
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := tlsClusterEngine(t, engine, "SSELF", routeTLSConf(ca, ca.issue(t, "self", nil, nil), 0), nil)
			peer := func(i int) *tls.Conn {
				c, err := net.DialTimeout("tcp", e.RouteAddr().String(), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				tc := tls.Client(c, &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{peerCert}})
				t.Cleanup(func() { tc.Close() })
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(tc)
				if l, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(l, "INFO ") {
					t.Fatalf("route INFO inside TLS: %q %v", l, err)
				}
				id := fmt.Sprintf("SPEER%d", i)
				fmt.Fprintf(tc, "CONNECT {\"echo\":true,\"tls_required\":true,\"headers\":true,\"name\":%q,\"cluster\":\"C\"}\r\n"+
					"INFO {\"server_id\":%q,\"server_name\":%q,\"host\":\"127.0.0.1\",\"port\":1,\"headers\":true,\"cluster\":\"C\"}\r\nPING\r\n", id, id, id)
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("peer %d: %v", i, err)
					}
					if l == "PONG\r\n" {
						break
					}
				}
				_ = tc.SetDeadline(time.Time{})
				return tc
			}
			peer(0)
			waitFor(t, "the first route", func() bool { return e.NumRemotes() == 1 })
			base := runtime.NumGoroutine()
			const n = 50
			for i := 1; i <= n; i++ {
				peer(i)
			}
			waitFor(t, "the routes", func() bool { return e.NumRemotes() == n+1 })
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > base+5 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if g := runtime.NumGoroutine(); g > base+5 {
				t.Fatalf("%d goroutines for %d TLS routes (base %d)", g, n, base)
			}
		})
	}
}
