package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

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
