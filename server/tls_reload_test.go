package server

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// writeServerPEM writes p's server certificate and key where a config file can name them.
func writeServerPEM(t *testing.T, p *testPKI, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.server.Certificate[0]})
	der, err := x509.MarshalECPrivateKey(p.server.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestReloadTLSCertificates(t *testing.T) {
	dir := t.TempDir()
	a, b := newPKI(t), newPKI(t)
	certFile, keyFile := writeServerPEM(t, a, dir)
	conf := "host: 127.0.0.1\nport: -1\ntls {\n  cert_file: \"" + certFile + "\"\n  key_file: \"" + keyFile + "\"\n}\n"
	s, path := startFromConf(t, conf, nil)

	old, err := nats.Connect(s.ClientURL(), a.root())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	// Renew the certificate on disk under a new CA and reload.
	writeServerPEM(t, b, dir)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := nats.Connect(s.ClientURL(), a.root(), nats.Timeout(time.Second)); err == nil {
		t.Fatal("a client trusting only the old CA still connected after the reload")
	}
	nc, err := nats.Connect(s.ClientURL(), b.root())
	if err != nil {
		t.Fatalf("new certificate not served: %v", err)
	}
	defer nc.Close()
	pubSubRoundTrip(t, nc)
	// The session established before the reload goes on.
	pubSubRoundTrip(t, old)

	// TLS switched off by reload: new clients connect in plaintext, and the sessions
	// established before it go on encrypted.
	rewrite(t, path, "host: 127.0.0.1\nport: -1\n")
	if err := s.Reload(); err != nil {
		t.Fatalf("reload without tls: %v", err)
	}
	plain, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	line, err := bufio.NewReader(plain).ReadString('\n')
	if err != nil || strings.Contains(line, "tls_required") {
		t.Fatalf("INFO after TLS was switched off: %q %v", line, err)
	}
	pc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("plaintext client after TLS was switched off: %v", err)
	}
	defer pc.Close()
	pubSubRoundTrip(t, pc)
	pubSubRoundTrip(t, old)

	// And on again: a plaintext session fails the handshake, a TLS client connects.
	writeServerPEM(t, b, dir)
	rewrite(t, path, conf)
	if err := s.Reload(); err != nil {
		t.Fatalf("reload with tls: %v", err)
	}
	raw, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	br := bufio.NewReader(raw)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"tls_required":true`) {
		t.Fatalf("INFO after TLS was switched on: %q %v", line, err)
	}
	_, _ = raw.Write([]byte("CONNECT {}\r\nPING\r\n"))
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, err := br.ReadString('\n'); err == nil {
		t.Fatalf("plaintext CONNECT to a TLS port answered: %q", rest)
	}
	nc2, err := nats.Connect(s.ClientURL(), b.root())
	if err != nil {
		t.Fatalf("TLS client after TLS was switched on: %v", err)
	}
	defer nc2.Close()
	pubSubRoundTrip(t, nc2)
	pubSubRoundTrip(t, pc)
}
