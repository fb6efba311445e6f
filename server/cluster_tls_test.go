package server

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// routeCert is a certificate for a route: good as a server's and as a client's, for
// 127.0.0.1 and localhost, with the e-mail address given (if any).
func (p *testPKI) routeCert(t *testing.T, cn, email string) tls.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if email != "" {
		tmpl.EmailAddresses = []string{email}
	}
	c := p.issue(t, tmpl)
	c.Leaf, _ = x509.ParseCertificate(c.Certificate[0])
	return c
}

// writeRouteTLS writes cert, its key and p's CA under dir/name-*.pem and returns a cluster
// tls {} block naming them (with extra keys).
func writeRouteTLS(t *testing.T, dir, name string, p *testPKI, cert tls.Certificate, extra string) string {
	t.Helper()
	write := func(file, typ string, der []byte) string {
		path := filepath.Join(dir, name+"-"+file)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	kder, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("  tls {\n    cert_file: %q\n    key_file: %q\n    ca_file: %q\n    verify: true\n    timeout: 3\n%s  }\n",
		write("cert.pem", "CERTIFICATE", cert.Certificate[0]), write("key.pem", "EC PRIVATE KEY", kder),
		write("ca.pem", "CERTIFICATE", p.caCert.Raw), extra)
}

// dialRouteTLS opens a TLS session to s's route port as a route would (TLS first, with
// cert), trusting roots, and returns the server's route INFO, read inside the session.
func dialRouteTLS(t *testing.T, s *Server, roots *x509.CertPool, cert tls.Certificate) (map[string]any, *tls.ConnectionState, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.eng.RouteAddr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		return nil, nil, err
	}
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil {
		return nil, nil, err
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
		t.Fatalf("route INFO %q: %v", line, err)
	}
	cs := tc.ConnectionState()
	return info, &cs, nil
}

func waitRemotes(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.eng.NumRemotes() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d remote servers, want %d", s.eng.NumRemotes(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterTLS: a cluster tls {} block starts (it used to be refused); the route port speaks
// TLS before anything else, verifies the peer's certificate, and says tls_required and
// tls_verify in its INFO; /varz says so too. Two natsd servers form a route over it.
func TestClusterTLS(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	certA, certB := p.routeCert(t, "a", ""), p.routeCert(t, "b", "")
	a, _ := startFromConf(t, fmt.Sprintf("host: 127.0.0.1\nport: -1\ncluster {\n  name: c\n  host: 127.0.0.1\n  port: -1\n%s}\n",
		writeRouteTLS(t, dir, "a", p, certA, "")), nil)
	if v := a.Varz().Cluster; !v.TLSRequired || !v.TLSVerify || v.TLSTimeout != 3 {
		t.Fatalf("varz cluster %+v", v)
	}
	info, cs, err := dialRouteTLS(t, a, p.pool, certB)
	if err != nil {
		t.Fatal(err)
	}
	if info["tls_required"] != true || info["tls_verify"] != true || cs.PeerCertificates[0].Subject.CommonName != "a" {
		t.Fatalf("INFO %v, certificate %v", info, cs.PeerCertificates[0].Subject)
	}
	// Without a certificate the handshake fails.
	if _, _, err := dialRouteTLS(t, a, p.pool, tls.Certificate{}); err == nil {
		t.Fatal("a route without a certificate got through")
	}
	// In plaintext the port says nothing (TLS first) and closes.
	c, err := net.Dial("tcp", a.eng.RouteAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := c.Read(make([]byte, 100)); n != 0 {
		t.Fatalf("the route port greeted a plaintext connection with %d bytes", n)
	}

	b, _ := startFromConf(t, fmt.Sprintf("host: 127.0.0.1\nport: -1\ncluster {\n  name: c\n  host: 127.0.0.1\n  port: -1\n  routes: [\"nats://127.0.0.1:%d\"]\n%s}\n",
		a.eng.RouteAddr().Port, writeRouteTLS(t, dir, "b", p, certB, "")), nil)
	waitRemotes(t, a, 1)
	waitRemotes(t, b, 1)
}

// TestClusterTLSReload: a reload gives routes that connect from then on the new certificate
// (and TLS switched off, and on again); established routes keep their sessions.
func TestClusterTLSReload(t *testing.T) {
	p, q := newPKI(t), newPKI(t)
	dir := t.TempDir()
	certA, certB := p.routeCert(t, "a", ""), p.routeCert(t, "b", "")
	conf := func(tlsBlock string) string {
		return fmt.Sprintf("host: 127.0.0.1\nport: -1\ncluster {\n  name: c\n  host: 127.0.0.1\n  port: -1\n%s}\n", tlsBlock)
	}
	a, path := startFromConf(t, conf(writeRouteTLS(t, dir, "a", p, certA, "")), nil)
	b, _ := startFromConf(t, fmt.Sprintf("host: 127.0.0.1\nport: -1\ncluster {\n  name: c\n  host: 127.0.0.1\n  port: -1\n  routes: [\"nats://127.0.0.1:%d\"]\n%s}\n",
		a.eng.RouteAddr().Port, writeRouteTLS(t, dir, "b", p, certB, "")), nil)
	waitRemotes(t, a, 1)

	// A's certificate renewed under another CA (its ca_file still trusts the first).
	renewed := q.routeCert(t, "a2", "")
	block := writeRouteTLS(t, dir, "a", q, renewed, "")
	if err := os.WriteFile(filepath.Join(dir, "a-ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.caCert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	rewrite(t, path, conf(block))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dialRouteTLS(t, a, p.pool, certB); err == nil {
		t.Fatal("the old certificate is still served after the reload")
	}
	_, cs, err := dialRouteTLS(t, a, q.pool, certB)
	if err != nil || cs.PeerCertificates[0].Subject.CommonName != "a2" {
		t.Fatalf("the renewed certificate is not served: %v", err)
	}
	// The route established before the reload is still there.
	time.Sleep(200 * time.Millisecond)
	if a.eng.NumRemotes() != 1 || b.eng.NumRemotes() != 1 {
		t.Fatalf("the established route went: %d, %d", a.eng.NumRemotes(), b.eng.NumRemotes())
	}

	// TLS switched off: new route connections get INFO in plaintext, without tls_required.
	rewrite(t, path, conf(""))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", a.eng.RouteAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") || strings.Contains(line, "tls_required") {
		t.Fatalf("route INFO after TLS was switched off: %q %v", line, err)
	}
	// And on again.
	rewrite(t, path, conf(block))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dialRouteTLS(t, a, q.pool, certB); err != nil {
		t.Fatalf("TLS switched on again: %v", err)
	}
}

// TestClusterTLSVerifyAndMap: with verify_and_map the route's certificate must name the
// cluster's user (here by e-mail address), and CONNECT's credentials are not looked at: a
// peer whose certificate names someone else is refused whatever it says, one whose
// certificate names the user joins without a password.
func TestClusterTLSVerifyAndMap(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	a, _ := startFromConf(t, fmt.Sprintf("host: 127.0.0.1\nport: -1\ncluster {\n  name: c\n  host: 127.0.0.1\n  port: -1\n  authorization { user: \"route@example.com\", password: secret }\n%s}\n",
		writeRouteTLS(t, dir, "a", p, p.routeCert(t, "a", "route@example.com"), "    verify_and_map: true\n")), nil)
	connect := func(cert tls.Certificate, user, pass string) string {
		c, err := net.DialTimeout("tcp", a.eng.RouteAddr().String(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tc := tls.Client(c, &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}})
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(tc)
		if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
			t.Fatalf("route INFO: %q %v", line, err)
		}
		fmt.Fprintf(tc, "CONNECT {\"user\":%q,\"pass\":%q,\"tls_required\":true,\"name\":\"SFAKE\",\"cluster\":\"c\",\"headers\":true}\r\nPING\r\n", user, pass)
		line, _ := br.ReadString('\n')
		return strings.TrimSpace(line)
	}
	if got := connect(p.routeCert(t, "stranger", "someone@example.com"), "route@example.com", "secret"); got != "-ERR 'Authorization Violation'" {
		t.Fatalf("a certificate naming someone else, with the right password: %q", got)
	}
	if got := connect(p.routeCert(t, "member", "route@example.com"), "", ""); got != "PONG" {
		t.Fatalf("a certificate naming the user, no password: %q", got)
	}
	member, _ := startFromConf(t, fmt.Sprintf("host: 127.0.0.1\nport: -1\ncluster {\n  name: c\n  host: 127.0.0.1\n  port: -1\n  routes: [\"nats://127.0.0.1:%d\"]\n%s}\n",
		a.eng.RouteAddr().Port, writeRouteTLS(t, dir, "member", p, p.routeCert(t, "member", "route@example.com"), "")), nil)
	waitRemotes(t, a, 1)
	waitRemotes(t, member, 1)
}
