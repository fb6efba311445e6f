package attack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// writeConfig writes the config file both servers start from: extra, and with useTLS a tls{}
// block serving a self-signed certificate for 127.0.0.1 (so both terminate TLS the same way).
// It returns the config's path.
func writeConfig(dir, name string, useTLS bool, extra string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "attack-conf")
		if err != nil {
			return "", err
		}
		dir = d
	}
	conf := filepath.Join(dir, name+".conf")
	if !useTLS {
		return conf, os.WriteFile(conf, []byte(extra+"\n"), 0o600)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	cert := filepath.Join(dir, name+"-cert.pem")
	keyf := filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(keyf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", err
	}
	body := fmt.Sprintf("%s\ntls {\n  cert_file: %q\n  key_file: %q\n}\n", extra, cert, keyf)
	return conf, os.WriteFile(conf, []byte(body), 0o600)
}
