package test

// Route TLS across the topologies: every node has cluster { tls { cert_file, key_file, ca_file,
// verify: true } } with a certificate of the cluster's CA for 127.0.0.1 and localhost.

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// ctPKI is a tls cluster's certificates, as PEM files in the cluster's directory: the
// cluster's CA, one certificate every node uses (a route is TLS server and client both, so it
// is good for either, for 127.0.0.1 and localhost), and the intruder's: same names, issued by
// a CA of the same name that nobody trusts.
type ctPKI struct {
	ca, cert, key   string
	badCert, badKey string
	pool            *x509.CertPool
	client          tls.Certificate // the cluster's certificate, for the test's own handshakes
	caName, certCN  string          // the same for the intruder's CA and certificate
}

func newCtPKI(t *testing.T, dir string) *ctPKI {
	t.Helper()
	p := &ctPKI{caName: "ctest route CA", certCN: "ctest route"}
	newCA := func() (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: p.caName},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c, key
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	issue := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, prefix string) (certFile, keyFile string, tc tls.Certificate) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: p.certCN},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(prefix+"-cert.pem", "CERTIFICATE", der), write(prefix+"-key.pem", "EC PRIVATE KEY", kder),
			tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	ca, caKey := newCA()
	p.ca = write("route-ca.pem", "CERTIFICATE", ca.Raw)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	p.cert, p.key, p.client = issue(ca, caKey, 2, "route")
	bad, badKey := newCA()
	p.badCert, p.badKey, _ = issue(bad, badKey, 2, "intruder")
	return p
}

// block is the node's cluster tls {} block (the intruder's when untrusted: its own
// certificate, the cluster's CA as roots).
func (p *ctPKI) block(untrusted bool) string {
	cert, key := p.cert, p.key
	if untrusted {
		cert, key = p.badCert, p.badKey
	}
	return fmt.Sprintf("  tls {\n    cert_file: %q\n    key_file: %q\n    ca_file: %q\n    verify: true\n    timeout: 5\n  }\n", cert, key, p.ca)
}

// routeTLSInfo opens a TLS session to n's cluster port as a route does (TLS first: nothing in
// the clear), with the cluster's certificate, and returns the route INFO read inside it.
func (n *clusterNode) routeTLSInfo(t *testing.T) (map[string]any, tls.ConnectionState) {
	t.Helper()
	p := n.c.pki
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.ports.cluster)), 5*time.Second)
	if err != nil {
		t.Fatalf("%s: dial cluster port: %v", n, err)
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{p.client}, MinVersion: tls.VersionTLS12})
	_ = tc.SetDeadline(time.Now().Add(ctDeliverWait))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("%s: TLS handshake on the cluster port (TLS first): %v", n, err)
	}
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil {
		t.Fatalf("%s: route INFO inside TLS: %v", n, err)
	}
	js, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok {
		t.Fatalf("%s: the route session starts with %q, want INFO", n, line)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(js), &info); err != nil {
		t.Fatalf("%s: route INFO: %v: %s", n, err, js)
	}
	return info, tc.ConnectionState()
}

// testRouteTLS: a cluster whose routes all run in TLS (verify both ways) forms in every
// topology: n2 lists only n1 and reaches n0 through gossip, dialling the address n0's INFO
// gives. Every route port speaks TLS before anything else and says tls_required and
// tls_verify in its INFO; pub/sub (several accounts, large messages) and request/reply cross
// the mesh. A server whose certificate another CA issued (with the same names) joins no one:
// its routes fail the handshake, the cluster is unchanged and its clients never hear of it.
func (env *topoEnv) testRouteTLS(t *testing.T) {
	c := env.cluster(t, "tls", clusterSpec{nodes: 3, tls: true, extra: ctAccounts, node: func(i int, ns *nodeSpec) {
		switch i {
		case 2:
			ns.routes = []int{1}
		case 3:
			ns.untrusted = true // the intruder: routes to n0, n1, n2
		}
	}})
	for _, n := range c.nodes {
		info, cs := n.routeTLSInfo(t)
		if info["tls_required"] != true || info["tls_verify"] != true {
			t.Fatalf("%s route INFO: tls_required %v, tls_verify %v, want true", n, info["tls_required"], info["tls_verify"])
		}
		if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName != c.pki.certCN {
			t.Fatalf("%s: route certificate %v", n, cs.PeerCertificates)
		}
		var v struct {
			Cluster struct {
				TLSRequired bool `json:"tls_required"`
				TLSVerify   bool `json:"tls_verify"`
			} `json:"cluster"`
		}
		if err := n.monitor("/varz", &v); err != nil {
			t.Fatal(err)
		}
		if !v.Cluster.TLSRequired || !v.Cluster.TLSVerify {
			t.Fatalf("%s /varz cluster: %+v", n, v.Cluster)
		}
	}

	// Traffic across the mesh, every pair of servers one way or the other.
	checkFlow(t, c, "a", 0, 1)
	checkFlow(t, c, "a", 1, 2)
	checkFlow(t, c, "a", 2, 0)
	checkFlow(t, c, "b", 0, 2)
	u := uniq()
	big := c.connect(t, 2, "a")
	ch := make(chan *nats.Msg, 64)
	ctChanSub(t, big, "tlsbig."+u, ch)
	bigPub := c.connect(t, 0, "a")
	awaitInterest(t, big, bigPub)
	payload := make([]byte, 900*1024)
	_, _ = rand.Read(payload)
	for i := 0; i < 5; i++ {
		if err := bigPub.Publish("tlsbig."+u, payload); err != nil {
			t.Fatal(err)
		}
	}
	ctFlush(t, bigPub)
	for i := 0; i < 5; i++ {
		if m := recv(t, ch, fmt.Sprintf("900 KiB message %d across TLS routes", i)); string(m.Data) != string(payload) {
			t.Fatalf("900 KiB message %d arrived with %d bytes, altered", i, len(m.Data))
		}
	}
	resp := c.connect(t, 0, "a")
	if _, err := resp.Subscribe("tlsrr."+u, func(m *nats.Msg) { _ = m.Respond(append([]byte("re:"), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		req := c.connect(t, i, "a")
		awaitInterest(t, resp, req)
		for j := 0; j < 10; j++ {
			body := fmt.Sprintf("n%d-%d", i, j)
			r, err := req.Request("tlsrr."+u, []byte(body), ctDeliverWait)
			if err != nil || string(r.Data) != "re:"+body {
				t.Fatalf("request %s from n%d to n0: %v %v", body, i, r, err)
			}
		}
	}
	serveAndRequest(t, c.connect(t, 1, "a"), c.connect(t, 2, "b"), "svc."+u)

	// The intruder keeps trying for a few seconds (nats-server redials a configured route every
	// second). The cluster's servers refuse its certificate in every handshake.
	watcher := c.connect(t, 0, "a")
	good := c.running()
	bad := c.addNode(t)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, n := range good {
			if msg := n.routesState(nil, without(good, n), c.routesPerPeer()); msg != "" {
				t.Fatalf("the intruder changed the cluster: %s", msg)
			}
		}
	}
	eventually(t, "the intruder has no routes", func() string {
		if rz := bad.routez(t, false); len(rz.Routes) != 0 || rz.NumRoutes != 0 {
			return fmt.Sprintf("%s: num_routes %d: %+v", bad, rz.NumRoutes, rz.Routes)
		}
		return ""
	})
	for _, n := range good {
		eventually(t, n.name+" logs why it refused the intruder", func() string {
			for _, l := range strings.Split(n.runLog(), "\n") {
				if strings.Contains(l, "TLS route handshake error") && strings.Contains(l, "certificate signed by unknown authority") {
					return ""
				}
			}
			return "no \"TLS route handshake error: ... certificate signed by unknown authority\" in its log"
		})
	}
	for _, s := range watcher.DiscoveredServers() {
		if s == bad.clientURL() {
			t.Fatalf("a client of n0 learned the intruder's URL %s", s)
		}
	}
	checkFlow(t, c, "a", 0, 2)
}
