package server

// The client tls {} block, and the tls.Config it (or the --tls* flags) builds.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// DefaultTLSHandshakeFirstFallback is the delay of handshake_first: auto (nats-server's).
const DefaultTLSHandshakeFirstFallback = 50 * time.Millisecond

// TLSFiles describes a server TLS setup, as the tls {} block or the --tls* flags give it.
type TLSFiles struct {
	CertFile, KeyFile, CaFile string
	Certs                     [][2]string // certs: [{cert_file, key_file}] (SNI)
	Verify                    bool
	Ciphers                   []uint16
	Curves                    []tls.CurveID
	MinVersion                uint16
}

var (
	tlsCiphers = func() map[string]*tls.CipherSuite {
		m := make(map[string]*tls.CipherSuite)
		for _, cs := range tls.CipherSuites() {
			m[cs.Name] = cs
		}
		for _, cs := range tls.InsecureCipherSuites() {
			m[cs.Name] = cs
		}
		return m
	}()
	tlsCurves = map[string]tls.CurveID{
		"SecP384r1MLKEM1024": tls.SecP384r1MLKEM1024,
		"SecP256r1MLKEM768":  tls.SecP256r1MLKEM768,
		"X25519MLKEM768":     tls.X25519MLKEM768,
		"X25519":             tls.X25519,
		"CurveP256":          tls.CurveP256,
		"CurveP384":          tls.CurveP384,
		"CurveP521":          tls.CurveP521,
	}
)

// DefaultTLSCiphers is every cipher suite Go considers secure (nats-server's default).
func DefaultTLSCiphers() []uint16 {
	var ids []uint16
	for _, cs := range tls.CipherSuites() {
		ids = append(ids, cs.ID)
	}
	return ids
}

func defaultTLSCurves() []tls.CurveID {
	return []tls.CurveID{tls.X25519MLKEM768, tls.SecP384r1MLKEM1024, tls.SecP256r1MLKEM768,
		tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521}
}

// GenTLSConfig loads certificates and CAs into a server tls.Config.
func GenTLSConfig(tf *TLSFiles) (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:       tls.VersionTLS12,
		CipherSuites:     tf.Ciphers,
		CurvePreferences: tf.Curves,
	}
	switch {
	case tf.CertFile != "" && tf.KeyFile == "":
		return nil, errors.New("missing 'key_file' in TLS configuration")
	case tf.CertFile == "" && tf.KeyFile != "":
		return nil, errors.New("missing 'cert_file' in TLS configuration")
	case tf.CertFile != "":
		cert, err := loadKeyPair(tf.CertFile, tf.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("error parsing X509 certificate/key pair: %v", err)
		}
		c.Certificates = []tls.Certificate{cert}
	case len(tf.Certs) > 0:
		for i, pair := range tf.Certs {
			cert, err := loadKeyPair(pair[0], pair[1])
			if err != nil {
				return nil, fmt.Errorf("error parsing X509 certificate/key pair %d/%d: %v", i+1, len(tf.Certs), err)
			}
			c.Certificates = append(c.Certificates, cert)
		}
	}
	if tf.Verify {
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if tf.CaFile != "" {
		pem, err := os.ReadFile(tf.CaFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("failed to parse root ca certificate")
		}
		c.ClientCAs = pool
	}
	if tf.MinVersion > 0 {
		if tf.MinVersion < tls.VersionTLS12 {
			return nil, fmt.Errorf("unsupported minimum TLS version: %s", tls.VersionName(tf.MinVersion))
		}
		c.MinVersion = tf.MinVersion
	}
	return c, nil
}

func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return cert, err
	}
	cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0])
	return cert, err
}

// tlsBlock is what one tls {} block says. The keys are the same wherever the block sits;
// what some of them mean depends on it (see tlsContext).
type tlsBlock struct {
	config         *tls.Config
	timeout        time.Duration
	verify         bool
	mapUser        bool // verify_and_map
	checkKnownURLs bool // verify_cert_and_check_known_urls (routes)
	insecure       bool // insecure: skip verifying the servers we dial (routes)
	first          bool // handshake_first
	fallback       time.Duration
	pinned         map[string]struct{}
}

// tlsContext is where a tls {} block sits. Clients (the top-level block) refuse
// verify_cert_and_check_known_urls as nats-server does, and natsd does not dial out for them,
// so insecure is reported as not supported. Routes take both; they ignore
// connection_rate_limit and handshake_first, as nats-server's routes do.
type tlsContext struct {
	route  bool
	prefix string // the block's key path, for the unsupported-keys report: "tls.", "cluster.tls."
}

// tls is the top-level (client) block.
func (p *cfgParser) tls(o *Options, e entry) {
	b, ok := p.tlsBlock(e, tlsContext{prefix: "tls."})
	if !ok {
		return
	}
	o.TLSConfig = b.config
	o.TLSTimeout = b.timeout
	o.TLSVerify = b.verify
	o.TLSMap = b.mapUser
	o.TLSHandshakeFirst = b.first
	o.TLSHandshakeFirstFallback = b.fallback
	o.TLSPinnedCerts = b.pinned
}

// tlsBlock parses a tls {} block with nats-server's keys and error texts; ok is false when it
// had errors (already reported).
func (p *cfgParser) tlsBlock(e entry, ctx tlsContext) (*tlsBlock, bool) {
	m, ok := p.mapping(e)
	if !ok {
		return nil, false
	}
	tf := &TLSFiles{}
	var (
		timeout        time.Duration
		mapUser        bool
		checkKnownURLs bool
		insecureSkip   bool
		first          bool
		fallback       time.Duration
		allowInsecure  bool
		insecure       []string
		pinned         map[string]struct{}
		bad            bool
	)
	fileField := func(f entry, dst *string) {
		s, ok := f.v.(string)
		if !ok {
			p.fail(f.tk, "error parsing tls config, expected '%s' to be filename", f.key)
			bad = true
			return
		}
		*dst = s
	}
	boolField := func(f entry) bool {
		b, ok := f.v.(bool)
		if !ok {
			p.fail(f.tk, "error parsing tls config, expected '%s' to be a boolean", f.key)
			bad = true
		}
		return b
	}
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "cert_file":
			fileField(f, &tf.CertFile)
		case "key_file":
			fileField(f, &tf.KeyFile)
		case "ca_file":
			fileField(f, &tf.CaFile)
		case "verify":
			tf.Verify = tf.Verify || boolField(f)
		case "verify_and_map":
			if b := boolField(f); b {
				tf.Verify, mapUser = true, true
			}
		case "verify_cert_and_check_known_urls":
			b := boolField(f)
			if b && !ctx.route {
				p.fail(f.tk, "verify_cert_and_check_known_urls not supported in this context")
				bad = true
			}
			if b {
				tf.Verify = true
			}
			checkKnownURLs = b
		case "insecure":
			insecureSkip = boolField(f) // only meaningful when dialing out
			if !ctx.route {
				p.unsupported(f.tk, ctx.prefix+f.key)
			}
		case "allow_insecure_cipher_suites":
			allowInsecure = boolField(f)
		case "cipher_suites":
			arr, ok := f.v.([]any)
			if !ok || len(arr) == 0 {
				p.fail(f.tk, "error parsing tls config, 'cipher_suites' cannot be empty")
				bad = true
				continue
			}
			tf.Ciphers = []uint16{}
			for _, raw := range arr {
				tk, v := p.unwrap(raw)
				name, _ := v.(string)
				cs, ok := tlsCiphers[name]
				if !ok {
					p.fail(tk, "unrecognized cipher %s", name)
					bad = true
					continue
				}
				tf.Ciphers = append(tf.Ciphers, cs.ID)
				if cs.Insecure {
					insecure = append(insecure, cs.Name)
				}
			}
		case "curve_preferences":
			arr, ok := f.v.([]any)
			if !ok || len(arr) == 0 {
				p.fail(f.tk, "error parsing tls config, 'curve_preferences' cannot be empty")
				bad = true
				continue
			}
			tf.Curves = []tls.CurveID{}
			for _, raw := range arr {
				tk, v := p.unwrap(raw)
				name, _ := v.(string)
				id, ok := tlsCurves[name]
				if !ok {
					p.fail(tk, "unrecognized curve preference %s", name)
					bad = true
					continue
				}
				tf.Curves = append(tf.Curves, id)
			}
		case "timeout":
			if d, ok := p.seconds(f, "tls", false); ok {
				timeout = d
			} else {
				bad = true
			}
		case "handshake_first", "first", "immediate":
			switch v := f.v.(type) {
			case bool:
				first = v
			case string:
				switch strings.ToLower(v) {
				case "true", "on":
					first = true
				case "false", "off":
					first = false
				case "auto", "auto_fallback":
					first, fallback = true, DefaultTLSHandshakeFirstFallback
				default:
					d, err := time.ParseDuration(v)
					if err != nil {
						p.fail(f.tk, "field %q's value %q is invalid", f.key, v)
						bad = true
						continue
					}
					first, fallback = true, d
				}
			default:
				p.fail(f.tk, "field %q should be a boolean or a string, got %s", f.key, typeName(f.v))
				bad = true
			}
		case "min_version":
			s, ok := f.v.(string)
			var ver uint16
			switch {
			case !ok:
				p.fail(f.tk, "error parsing tls config: 'min_version' wrong type: %v", f.v)
			case s == "1.2":
				ver = tls.VersionTLS12
			case s == "1.3":
				ver = tls.VersionTLS13
			case s == "1.0" || s == "1.1":
				p.fail(f.tk, "error parsing tls config: unsupported TLS version: TLS %s", s)
			default:
				p.fail(f.tk, "error parsing tls config: unknown version: %s", s)
			}
			if ver == 0 {
				bad = true
				continue
			}
			tf.MinVersion = ver
		case "certs", "certificates":
			arr, ok := f.v.([]any)
			if !ok {
				p.fail(f.tk, "error parsing certificates config: unsupported type %s", typeName(f.v))
				bad = true
				continue
			}
			for _, raw := range arr {
				tk, v := p.unwrap(raw)
				cm, ok := v.(map[string]any)
				if !ok {
					p.fail(tk, "error parsing certificates config: unsupported type %s", typeName(v))
					bad = true
					continue
				}
				var pair [2]string
				for _, c := range p.entries(cm) {
					switch strings.ToLower(c.key) {
					case "cert_file":
						fileField(c, &pair[0])
					case "key_file":
						fileField(c, &pair[1])
					default:
						p.fail(c.tk, "error parsing tls certs config, unknown field %q", c.key)
						bad = true
					}
				}
				if pair[0] == "" || pair[1] == "" {
					p.fail(tk, "error parsing certificates config: both 'cert_file' and 'cert_key' options are required")
					bad = true
					continue
				}
				tf.Certs = append(tf.Certs, pair)
			}
		case "connection_rate_limit":
			if _, ok := f.v.(int64); !ok {
				p.fail(f.tk, "error parsing tls config, 'connection_rate_limit' wrong type")
				bad = true
				continue
			}
			if !ctx.route {
				p.unsupported(f.tk, ctx.prefix+f.key)
			}
		case "pinned_certs":
			arr, ok := f.v.([]any)
			if !ok {
				p.fail(f.tk, "error parsing tls config, expected 'pinned_certs' to be a list of hex-encoded sha256 of DER encoded SubjectPublicKeyInfo")
				bad = true
				continue
			}
			if len(arr) == 0 {
				continue
			}
			pinned = map[string]struct{}{}
			for _, raw := range arr {
				tk, v := p.unwrap(raw)
				str, _ := v.(string)
				entry := strings.ToLower(str)
				if !pinnedCertRE.MatchString(entry) {
					p.fail(tk, "error parsing tls config, 'pinned_certs' key %s does not look like hex-encoded sha256 of DER encoded SubjectPublicKeyInfo", entry)
					bad = true
					continue
				}
				pinned[entry] = struct{}{}
			}
		case "ocsp_peer", "cert_store", "cert_match_by", "cert_match",
			"ca_certs_match", "cert_match_skip_invalid":
			// Each of these restricts who may connect (or picks the certificate); ignoring one
			// would weaken the setup the operator asked for.
			p.fail(f.tk, "tls option %q is not supported yet", f.key)
			bad = true
		default:
			p.fail(f.tk, "error parsing tls config, unknown field %q", f.key)
			bad = true
		}
	}
	if bad {
		return nil, false
	}
	if len(tf.Certs) > 0 && tf.CertFile != "" {
		p.fail(e.tk, "error parsing tls config, cannot combine 'cert_file' option with 'certs' option")
		return nil, false
	}
	if tf.Ciphers == nil {
		tf.Ciphers = DefaultTLSCiphers()
	}
	if tf.Curves == nil {
		tf.Curves = defaultTLSCurves()
	}
	if len(insecure) > 0 && !allowInsecure {
		p.fail(e.tk, "insecure cipher suites configured without 'allow_insecure_cipher_suites' option set: %s", strings.Join(insecure, ", "))
		return nil, false
	}
	tc, err := GenTLSConfig(tf)
	if err != nil {
		p.fail(e.tk, "%v", err)
		return nil, false
	}
	if ctx.route {
		tc.InsecureSkipVerify = insecureSkip
	}
	return &tlsBlock{
		config: tc, timeout: timeout, verify: tf.Verify, mapUser: mapUser,
		checkKnownURLs: checkKnownURLs, insecure: insecureSkip,
		first: first, fallback: fallback, pinned: pinned,
	}, true
}

// pinnedCertRE is what a pinned_certs entry must look like: the hex SHA-256 of a certificate's
// DER SubjectPublicKeyInfo.
var pinnedCertRE = regexp.MustCompile("^[a-f0-9]{64}$")
