package server

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
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

	// Turning TLS off is not reloadable: rejected, nothing applied, TLS still required.
	rewrite(t, path, "host: 127.0.0.1\nport: -1\n")
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "config reload not supported for TLS") {
		t.Fatalf("reload without tls: %v", err)
	}
	if _, err := nats.Connect(s.ClientURL(), b.root()); err != nil {
		t.Fatalf("TLS broken after a rejected reload: %v", err)
	}
}
