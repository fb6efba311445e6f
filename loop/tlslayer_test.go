package loop

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

func startTLSEngine(t *testing.T, engine string, tc *TLSConfig) *Engine {
	t.Helper()
	e := New(Config{
		Host: "127.0.0.1", Port: -1, Engine: engine, Reactors: 1,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20,
		PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
		TLS:  tc,
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// dialInfo connects and reads INFO in plaintext.
func dialInfo(t testing.TB, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("no INFO: %q %v", line, err)
	}
	return nc, br
}

// dialTLS connects, reads INFO, and starts TLS with cfg.
func dialTLS(t testing.TB, addr string, cfg *tls.Config) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(&oneByte{nc}).ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("no INFO: %q %v", line, err)
	}
	tc := tls.Client(nc, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc, bufio.NewReader(tc)
}

// oneByte reads a byte at a time, so that nothing after INFO is taken from the socket
// before the TLS client reads it.
type oneByte struct{ r io.Reader }

func (o *oneByte) Read(b []byte) (int, error) { return o.r.Read(b[:1]) }

func expectLine(t testing.TB, br *bufio.Reader, want string) {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil || line != want {
		t.Fatalf("got %q (%v), want %q", line, err, want)
	}
}

// TestTLSRoundTrip runs sessions of each protocol version on both engines, with messages from
// empty to several records long, written in one piece and split across many small writes.
func TestTLSRoundTrip(t *testing.T) {
	versions := []struct {
		name string
		cfg  *tls.Config
		vers uint16
	}{
		{"tls1.3", &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, tls.VersionTLS13},
		{"tls1.2", &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}, tls.VersionTLS12},
		{"tls1.2-chacha", &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12,
			CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}}, tls.VersionTLS12},
	}
	for _, engine := range engines {
		for _, v := range versions {
			t.Run(engine+"/"+v.name, func(t *testing.T) {
				e := startTLSEngine(t, engine, &TLSConfig{Config: selfSigned(t), Timeout: 5 * time.Second})
				tc, br := dialTLS(t, e.Addr().String(), v.cfg)
				defer tc.Close()
				if got := tc.ConnectionState().Version; got != v.vers {
					t.Fatalf("version %x, want %x", got, v.vers)
				}
				if _, err := tc.Write([]byte("CONNECT {\"verbose\":false}\r\nSUB x 1\r\nPING\r\n")); err != nil {
					t.Fatal(err)
				}
				expectLine(t, br, "PONG\r\n")
				for _, n := range []int{0, 1, 100, maxPlaintext - 40, maxPlaintext, 3*maxPlaintext + 7, 200 << 10} {
					payload := make([]byte, n)
					_, _ = rand.Read(payload)
					msg := append([]byte(fmt.Sprintf("PUB x %d\r\n", n)), payload...)
					msg = append(msg, "\r\n"...)
					if n%2 == 0 {
						_, _ = tc.Write(msg)
					} else {
						for i := 0; i < len(msg); i += 1000 {
							_, _ = tc.Write(msg[i:min(i+1000, len(msg))])
						}
					}
					expectLine(t, br, fmt.Sprintf("MSG x 1 %d\r\n", n))
					got := make([]byte, n+2)
					if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got[:n], payload) {
						t.Fatalf("payload of %d bytes: %v", n, err)
					}
				}
				st := e.conns.Load()
				if st != 1 {
					t.Fatalf("%d connections", st)
				}
			})
		}
	}
}

// TestTLSStalledHandshake: a client that stops in the middle of its handshake, and one that
// holds its connection without a word, hold up nobody else on the reactor, and neither keeps
// a handshake slot.
func TestTLSStalledHandshake(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := startTLSEngine(t, engine, &TLSConfig{Config: selfSigned(t), Timeout: 30 * time.Second})
			addr := e.Addr().String()
			cfg := &tls.Config{InsecureSkipVerify: true}
			// A ClientHello cut short, from several clients: more than there are slots.
			var hello bytes.Buffer
			rec := &recorder{w: &hello}
			_ = tls.Client(rec, cfg).Handshake()
			for i := 0; i < 2*cap(hsGate)+2; i++ {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				_, _ = nc.Write(hello.Bytes()[:hello.Len()/2])
				silent, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer silent.Close()
			}
			time.Sleep(50 * time.Millisecond)
			for i := 0; i < 5; i++ {
				start := time.Now()
				tc, br := dialTLS(t, addr, cfg)
				_, _ = tc.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n"))
				expectLine(t, br, "PONG\r\n")
				tc.Close()
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("a handshake took %v behind stalled ones", d)
				}
			}
		})
	}
}

// recorder captures what a TLS client writes and fails its reads, to get a ClientHello.
type recorder struct {
	net.Conn
	w io.Writer
}

func (r *recorder) Write(b []byte) (int, error)      { return r.w.Write(b) }
func (r *recorder) Read([]byte) (int, error)         { return 0, io.EOF }
func (r *recorder) Close() error                     { return nil }
func (r *recorder) SetDeadline(time.Time) error      { return nil }
func (r *recorder) SetReadDeadline(time.Time) error  { return nil }
func (r *recorder) SetWriteDeadline(time.Time) error { return nil }

// TestTLSNotAHandshake: garbage, or a plaintext CONNECT, where a ClientHello belongs ends the
// connection after INFO with nothing more (the handshake fails, as crypto/tls fails it in
// nats-server), and the handshake timeout ends a client that sends nothing.
func TestTLSNotAHandshake(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := startTLSEngine(t, engine, &TLSConfig{Config: selfSigned(t), Timeout: 300 * time.Millisecond})
			for _, send := range []string{"CONNECT {}\r\nPING\r\n", "\x16\x03\x01\x00\x05hello", "\x00\x00\x00\x00\x00\x00\x00", ""} {
				nc, br := dialInfo(t, e.Addr().String())
				_, _ = nc.Write([]byte(send))
				rest, err := io.ReadAll(br)
				if err != nil || len(rest) > 0 && rest[0] != recordAlert {
					t.Fatalf("after %q: %q %v", send, rest, err)
				}
				nc.Close()
			}
			deadline := time.Now().Add(5 * time.Second)
			for e.conns.Load() != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := e.conns.Load(); n != 0 {
				t.Fatalf("%d connections left", n)
			}
		})
	}
}

// TestTLSHandshakeFirst: with handshake_first the session comes before INFO, and INFO is its
// first record; with a fallback delay a client that waits gets INFO in plaintext and then
// starts TLS.
func TestTLSHandshakeFirst(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := startTLSEngine(t, engine, &TLSConfig{Config: selfSigned(t), Timeout: 5 * time.Second, HandshakeFirst: true})
			nc, err := net.Dial("tcp", e.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true})
			br := bufio.NewReader(tc)
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
				t.Fatalf("no INFO inside TLS: %q %v", line, err)
			}
			_, _ = tc.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n"))
			expectLine(t, br, "PONG\r\n")
			if cs := e.Conns(ConnsQuery{}); len(cs) != 1 || !cs[0].TLSFirst || cs[0].TLSVersion != tls.VersionTLS13 {
				t.Fatalf("snapshot: %+v", cs)
			}

			e2 := startTLSEngine(t, engine, &TLSConfig{Config: selfSigned(t), Timeout: 5 * time.Second, HandshakeFirst: true, FallbackDelay: 50 * time.Millisecond})
			tc2, br2 := dialTLS(t, e2.Addr().String(), &tls.Config{InsecureSkipVerify: true})
			defer tc2.Close()
			_, _ = tc2.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n"))
			expectLine(t, br2, "PONG\r\n")
			if cs := e2.Conns(ConnsQuery{}); len(cs) != 1 || cs[0].TLSFirst || cs[0].TLSVersion == 0 {
				t.Fatalf("snapshot after the fallback: %+v", cs)
			}
		})
	}
}

// TestTLSAllowNonTLS: with allow_non_tls a client that answers INFO in plaintext stays in
// plaintext, and one that starts a handshake gets TLS.
func TestTLSAllowNonTLS(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := startTLSEngine(t, engine, &TLSConfig{Config: selfSigned(t), Timeout: 5 * time.Second, AllowNonTLS: true})
			nc, br := dialInfo(t, e.Addr().String())
			_, _ = nc.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n"))
			expectLine(t, br, "PONG\r\n")
			tc, tbr := dialTLS(t, e.Addr().String(), &tls.Config{InsecureSkipVerify: true})
			defer tc.Close()
			_, _ = tc.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n"))
			expectLine(t, tbr, "PONG\r\n")
		})
	}
}

// TestTLSNoGoroutinePerConnection: established TLS connections cost no goroutine.
func TestTLSNoGoroutinePerConnection(t *testing.T) {
	e := startTLSEngine(t, "gnet", &TLSConfig{Config: selfSigned(t), Timeout: 5 * time.Second})
	cfg := &tls.Config{InsecureSkipVerify: true}
	// Warm up, then count.
	tc, br := dialTLS(t, e.Addr().String(), cfg)
	_, _ = tc.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n"))
	expectLine(t, br, "PONG\r\n")
	base := runtime.NumGoroutine()
	const n = 200
	conns := make([]*tls.Conn, 0, n)
	for i := 0; i < n; i++ {
		tc, br := dialTLS(t, e.Addr().String(), cfg)
		_, _ = tc.Write([]byte("CONNECT {\"verbose\":false}\r\nSUB x 1\r\nPING\r\n"))
		expectLine(t, br, "PONG\r\n")
		conns = append(conns, tc)
	}
	// The test's own clients run no goroutines either (crypto/tls is synchronous).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base+5 {
		t.Fatalf("%d goroutines for %d TLS connections (base %d)", g, n, base)
	}
	for _, c := range conns {
		c.Close()
	}
}

// TestTLSPipelinedLarge: many large messages written back to back on one session, delivered to
// a subscription on the same session, all arrive (the opened window and the turns in between
// leave nothing behind).
func TestTLSPipelinedLarge(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := startTLSEngine(t, engine, &TLSConfig{Config: selfSigned(t), Timeout: 5 * time.Second})
			tc, br := dialTLS(t, e.Addr().String(), &tls.Config{InsecureSkipVerify: true})
			defer tc.Close()
			_, _ = tc.Write([]byte("CONNECT {\"verbose\":false}\r\nSUB x 1\r\nPING\r\n"))
			expectLine(t, br, "PONG\r\n")
			const n, size = 50, 100_000
			go func() {
				payload := bytes.Repeat([]byte("x"), size)
				for i := 0; i < n; i++ {
					_, _ = tc.Write(append(append([]byte(fmt.Sprintf("PUB x %d\r\n", size)), payload...), "\r\n"...))
				}
			}()
			for i := 0; i < n; i++ {
				expectLine(t, br, fmt.Sprintf("MSG x 1 %d\r\n", size))
				if _, err := io.CopyN(io.Discard, br, size+2); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
		})
	}
}
