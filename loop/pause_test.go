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
	"io"
	"math"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadPause holds a connection the way a stall or a CONNECT being verified does and
// checks, on each engine, that the server stops reading it: the client's writes block once
// the kernel's buffers are full, the server buffers next to nothing, and once released every
// byte is parsed.
func TestReadPause(t *testing.T) {
	for _, engine := range append(engines, "gnet+tls", "netpoll+tls") {
		t.Run(engine, func(t *testing.T) {
			cfg := Config{
				Host: "127.0.0.1", Port: -1, Engine: engine, Reactors: 1,
				MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20, MaxConn: 0,
				PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
				Info: []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
			}
			var clientTLS *tls.Config
			if name, ok := strings.CutSuffix(engine, "+tls"); ok {
				cfg.Engine = name
				cfg.TLS = &TLSConfig{Config: selfSigned(t), Timeout: 5 * time.Second}
				clientTLS = &tls.Config{InsecureSkipVerify: true}
			}
			e := New(cfg)
			if err := e.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.Stop)
			nc, err := net.DialTimeout("tcp", e.Addr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			br := bufio.NewReader(nc)
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
				t.Fatalf("no INFO: %q %v", line, err)
			}
			var c net.Conn = nc
			if clientTLS != nil {
				tc := tls.Client(nc, clientTLS)
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				c, br = tc, bufio.NewReader(tc)
			}
			if _, err := io.WriteString(c, "CONNECT {\"verbose\":false}\r\nPING\r\n"); err != nil {
				t.Fatal(err)
			}
			if line, err := br.ReadString('\n'); err != nil || line != "PONG\r\n" {
				t.Fatalf("PONG: %q %v", line, err)
			}
			cl := onlyClient(t, e)
			// Hold it as a verification in progress does: no parsing, no reading.
			onReactor(t, cl.r, func() {
				cl.stalled, cl.stallUntil = true, math.MaxInt64
				cl.conn.SetReading(false)
			})

			const total = 16 << 20
			chunk := bytes.Repeat([]byte("PUB nobody 0\r\n\r\n"), 4096)
			var sent atomic.Int64
			wrote := make(chan error, 1)
			go func() {
				for sent.Load() < total {
					n, err := c.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						wrote <- err
						return
					}
				}
				_, err := io.WriteString(c, "PING\r\n")
				wrote <- err
			}()
			time.Sleep(time.Second)
			var buffered int
			onReactor(t, cl.r, func() { buffered = cl.conn.InboundBuffered() })
			if s := sent.Load(); s >= total {
				t.Fatalf("the client wrote all %d bytes while the server was not reading", s)
			}
			if buffered > 2*inboundMax {
				t.Fatalf("the server buffered %d bytes of a connection it was not reading", buffered)
			}
			t.Logf("paused: the client got %d bytes out, the server buffered %d", sent.Load(), buffered)

			onReactor(t, cl.r, func() {
				// Paused from outside traffic, so no netpoll pump waits for a Wake: resume here.
				cl.stalled = false
				cl.conn.SetReading(true)
				_ = cl.conn.Wake()
			})
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("after release: %q %v", line, err)
				}
				if line == "PONG\r\n" {
					break
				}
				if line != "PING\r\n" { // the server's first keepalive may come first
					t.Fatalf("after release: %q", line)
				}
			}
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
			var in int64
			onReactor(t, cl.r, func() { in = cl.inMsgs })
			if want := int64(total / len("PUB nobody 0\r\n\r\n")); in < want {
				t.Fatalf("parsed %d messages, want at least %d", in, want)
			}
		})
	}
}

func onlyClient(t *testing.T, e *Engine) *client {
	t.Helper()
	var found *client
	for _, r := range e.reactorsSnapshot() {
		onReactor(t, r, func() {
			for c := range r.clients {
				found = c
			}
		})
	}
	if found == nil {
		t.Fatal("no client")
	}
	return found
}

func onReactor(t *testing.T, r *reactor, fn func()) {
	t.Helper()
	done := make(chan struct{})
	if err := r.ex.Execute(func() { fn(); close(done) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reactor did not run the task")
	}
}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
