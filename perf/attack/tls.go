package attack

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/natsd/natsd/perf/bench"
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
	cert, keyf, err := bench.SelfSignedCert(dir, name)
	if err != nil {
		return "", err
	}
	body := fmt.Sprintf("%s\ntls {\n  cert_file: %q\n  key_file: %q\n}\n", extra, cert, keyf)
	return conf, os.WriteFile(conf, []byte(body), 0o600)
}
