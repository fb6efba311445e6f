package loop

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
)

// Route TLS, as nats-server's routes do it: with a cluster tls {} block, every route runs
// in TLS from its first byte, before CONNECT and INFO. The server that dials is the TLS
// client and checks the other's certificate against the host it dialled (or the saved TLS
// name when it dialled an address); the one that accepts is the TLS server. Both ask for the
// other's certificate and verify it. The session is the same adapter clients get
// (tlslayer.go), on the reactors, with no goroutine once it is established; the route
// protocol runs inside it unchanged.

// routeTLS wraps a route connection for the cluster's TLS (nil: the cluster has none), as
// the TLS client when the connection was dialled (ri set), else as the server. kick runs
// traffic again on the connection's reactor.
func (e *Engine) routeTLS(conn Conn, ex Executor, kick func(), ri *RouteIntent) *tlsLayer {
	cfg := e.rt.cfg.Load()
	if cfg == nil || cfg.TLS == nil {
		return nil
	}
	l := newTLSLayer(e, conn, ex, cfg.TLS, kick)
	l.route = true
	if ri != nil {
		l.client = true
		var saved string
		l.serverName, saved = e.rt.tls.serverName(cfg, ri.URL)
		if saved != "" {
			l.failed = func(err error) {
				// The saved name is not the one the server's certificate gives: it is
				// forgotten, and later dials verify against the address (nats-server issue
				// 1256).
				var he x509.HostnameError
				if errors.As(err, &he) {
					e.rt.tls.forget(saved)
				}
			}
		}
	}
	return l
}

// routeTLSCloseReason: a route whose session never came up failed its handshake, whoever
// hung up (nats-server's handshake read then fails, and it closes with this reason).
func (c *client) routeTLSCloseReason() {
	if l, ok := c.conn.(*tlsLayer); ok && c.reason == "" && l.state <= tlsShaking {
		c.reason = closeTLSHandshake
	}
}

// routeTLSName is nats-server's routeTLSName: the first host name (not an address) among the
// configured route URLs. A dialled route's server certificate is checked against the URL's
// host, or against this name when the host is an address (gossiped URLs are addresses). A
// name that fails verification is forgotten; routes added by a reload may set a new one.
type routeTLSName struct {
	mu   sync.Mutex
	name string
	seen []*url.URL // the configured routes the name was last looked for in
}

// serverName is what a route dialled to u verifies the server's certificate against, and
// the saved name when that is what it is ("" otherwise).
func (t *routeTLSName) serverName(cfg *RouteConfig, u *url.URL) (name, saved string) {
	if u == nil {
		return "", ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !sameURLs(t.seen, cfg.Routes) {
		// Configured routes new since the last look (start, or a reload) may name a host.
		for _, r := range cfg.Routes {
			if t.name == "" && r != nil && !containsURLPtr(t.seen, r) && net.ParseIP(r.Hostname()) == nil {
				t.name = r.Hostname()
			}
		}
		t.seen = cfg.Routes
	}
	host := u.Hostname()
	if t.name != "" && net.ParseIP(host) != nil {
		host = t.name
	}
	if host == t.name && host != "" {
		return host, host
	}
	return host, ""
}

// forget drops the saved name if it is still name.
func (t *routeTLSName) forget(name string) {
	t.mu.Lock()
	if t.name == name {
		t.name = ""
	}
	t.mu.Unlock()
}

func sameURLs(a, b []*url.URL) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func containsURLPtr(list []*url.URL, u *url.URL) bool {
	for _, x := range list {
		if x == u || (x != nil && u != nil && x.String() == u.String()) {
			return true
		}
	}
	return false
}

// routeAuthorized is nats-server's isRouterAuthorized for an accepted route's CONNECT: with
// verify_and_map or verify_cert_and_check_known_urls the certificate decides (and CONNECT's
// credentials are not looked at), else the cluster's user and password, if any.
func (c *client) routeAuthorized(cfg *RouteConfig, rc *routeConnect) bool {
	if cfg.TLSMap || cfg.TLSCheckKnownURLs {
		return routeCertAuthorized(peerCerts(c.conn), cfg)
	}
	return cfg.Username == "" || (rc.User == cfg.Username && rc.Pass == cfg.Password)
}

// routeCertAuthorized looks for the route's identity in the peer's leaf certificate, in
// nats-server's order: e-mail addresses, DNS names, URIs, the subject's DN with its domain
// components, then the DN. verify_and_map wants one of them to be the cluster's user
// (authorization { user }); check_known_urls accepts a DNS name that matches the host of a
// configured route (a "*." first label matching any one label).
func routeCertAuthorized(certs []*x509.Certificate, cfg *RouteConfig) bool {
	if len(certs) == 0 || certs[0] == nil {
		return false
	}
	cert := certs[0]
	match := func(user string, dnsName bool) bool {
		if user == "" {
			return false
		}
		if cfg.TLSCheckKnownURLs && dnsName && dnsAltNameMatches(strings.Split(strings.ToLower(user), "."), cfg.Routes) {
			return true
		}
		return cfg.TLSMap && cfg.Username == user
	}
	for _, m := range cert.EmailAddresses {
		if match(m, false) {
			return true
		}
	}
	for _, d := range cert.DNSNames {
		if match(d, true) {
			return true
		}
	}
	for _, u := range cert.URIs {
		if match(u.String(), false) {
			return true
		}
	}
	rdn := cert.Subject.ToRDNSequence().String()
	var rdns pkix.RDNSequence
	if _, err := asn1.Unmarshal(cert.RawSubject, &rdns); err == nil {
		if dcs := domainComponents(rdns); dcs != "" && match(rdn+","+dcs, false) {
			return true
		}
	}
	return match(rdn, false)
}

// domainComponents is the subject's DC attributes as "DC=a,DC=b".
func domainComponents(rdns pkix.RDNSequence) string {
	dcOID := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	var dcs []string
	for _, rdn := range rdns {
		for _, atv := range rdn {
			if v, ok := atv.Value.(string); ok && atv.Type.Equal(dcOID) {
				dcs = append(dcs, "DC="+v)
			}
		}
	}
	return strings.Join(dcs, ",")
}

// dnsAltNameMatches matches a certificate's DNS name, split into lower-case labels, against
// the hosts of urls (RFC 6125 section 6.4: a wildcard only as the whole first label).
func dnsAltNameMatches(labels []string, urls []*url.URL) bool {
next:
	for _, u := range urls {
		if u == nil {
			continue
		}
		host := strings.Split(strings.ToLower(u.Hostname()), ".")
		if len(host) != len(labels) {
			continue
		}
		i := 0
		if labels[0] == "*" {
			i++
		}
		for ; i < len(labels); i++ {
			if labels[i] != host[i] {
				continue next
			}
		}
		return true
	}
	return false
}
