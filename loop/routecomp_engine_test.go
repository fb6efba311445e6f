package loop

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
)

// compEngine is clusterEngine with route compression mode (and server id / name).
func compEngine(t *testing.T, id, mode string, pool int) *Engine {
	t.Helper()
	e := New(Config{
		Host: "127.0.0.1", Port: -1, Reactors: 2,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20,
		PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"` + id + `","version":"2.15.2","proto":1,"max_payload":1048576}`),
		Cluster: &RouteConfig{Host: "127.0.0.1", Port: -1, ClusterName: "C", ServerID: id,
			ServerName: strings.ToLower(id), Version: "2.15.2", Proto: 3, PingInterval: time.Minute, MaxPingsOut: 2,
			AuthTimeout: 2 * time.Second, PoolSize: pool, Compression: mode},
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// s2Peer is the test acting as a nats-server route that dialled e, with s2's own reader
// and writer (a flush per write, each a fresh stream, as nats-server's).
type s2Peer struct {
	t    *testing.T
	c    net.Conn
	br   *bufio.Reader // plaintext until the switch, then s2
	info map[string]any
	sw   *s2.Writer
}

func dialS2Peer(t *testing.T, e *Engine, mode string) *s2Peer {
	t.Helper()
	c, err := net.DialTimeout("tcp", e.RouteAddr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	p := &s2Peer{t: t, c: c}
	// One byte at a time until the switch: nothing compressed may be read as plaintext.
	p.info = p.readInfo(func() (string, error) { return readLineRaw(c) })
	p.write(`CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"NPEER","cluster":"C"}` + "\r\n")
	p.write("INFO " + s2PeerInfo(mode, 0) + " \r\n")
	return p
}

func s2PeerInfo(mode string, idx int) string {
	info := map[string]any{"server_id": "NPEER", "server_name": "npeer", "version": "2.15.2",
		"proto": 3, "host": "127.0.0.1", "port": 1, "headers": true, "max_payload": 1048576, "cluster": "C"}
	if mode != "" {
		info["compression"] = mode
	}
	if idx >= 0 {
		info["route_pool_size"] = 3
		info["route_pool_idx"] = idx
	}
	b, _ := json.Marshal(info)
	return string(b)
}

func readLineRaw(c net.Conn) (string, error) {
	var b []byte
	var one [1]byte
	for {
		if _, err := io.ReadFull(c, one[:]); err != nil {
			return string(b), err
		}
		b = append(b, one[0])
		if one[0] == '\n' {
			return string(b), nil
		}
	}
}

func (p *s2Peer) readInfo(next func() (string, error)) map[string]any {
	p.t.Helper()
	l, err := next()
	if err != nil || !strings.HasPrefix(l, "INFO ") {
		p.t.Fatalf("want INFO, got %q (%v)", l, err)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(l[5:])), &info); err != nil {
		p.t.Fatal(err)
	}
	return info
}

func (p *s2Peer) write(s string) {
	p.t.Helper()
	if p.sw != nil {
		p.sw.Reset(p.c)
		if _, err := io.WriteString(p.sw, s); err != nil {
			p.t.Fatal(err)
		}
		if err := p.sw.Close(); err != nil {
			p.t.Fatal(err)
		}
		return
	}
	if _, err := io.WriteString(p.c, s); err != nil {
		p.t.Fatal(err)
	}
}

// line reads the next line other than a PING.
func (p *s2Peer) line() string {
	p.t.Helper()
	for {
		l, err := p.br.ReadString('\n')
		if err != nil {
			p.t.Fatalf("read: %v (got %q)", err, l)
		}
		if l != "PING\r\n" {
			return l
		}
	}
}

// flush sends PING and returns the lines before the PONG.
func (p *s2Peer) flush() []string {
	p.t.Helper()
	p.write("PING\r\n")
	var out []string
	for {
		l := p.line()
		if l == "PONG\r\n" {
			return out
		}
		out = append(out, l)
	}
}

func routeCompression(t *testing.T, e *Engine) []string {
	t.Helper()
	var out []string
	for _, r := range e.Routes(false) {
		out = append(out, r.Compression)
	}
	return out
}

// A nats-server that dials with s2_fast: natsd (accept) answers with its INFO compressed,
// reads compressed from the peer's next INFO on, and carries interest and messages both
// ways in s2; /routez says s2_fast.
func TestRouteCompressionAccepted(t *testing.T) {
	for _, tc := range []struct {
		local, remote string
		answer        string   // the compression the compressed INFO names
		want          []string // /routez
	}{
		{CompressionAccept, CompressionS2Fast, CompressionS2Fast, []string{CompressionS2Fast}},
		{CompressionAccept, CompressionS2Auto, CompressionS2Fast, []string{CompressionS2Fast}},
		{CompressionS2Better, CompressionAccept, CompressionS2Better, []string{CompressionS2Better}},
		// s2_auto picks its level from the time the handshake took (loopback: under 10ms, unless
		// the machine is busy), and announces s2_auto.
		{CompressionS2Auto, CompressionS2Best, CompressionS2Auto, []string{CompressionS2Uncompressed, CompressionS2Fast}},
	} {
		t.Run(tc.local+"_"+tc.remote, func(t *testing.T) {
			e := compEngine(t, "NSELF", tc.local, 3)
			p := dialS2Peer(t, e, tc.remote)
			if p.info["compression"] != tc.local {
				t.Fatalf("greeting announces compression %v, want %q", p.info["compression"], tc.local)
			}
			// From here on natsd writes s2.
			p.br = bufio.NewReader(s2.NewReader(p.c))
			info := p.readInfo(func() (string, error) { return p.br.ReadString('\n') })
			if info["compression"] != tc.answer || info["nonce"] == nil {
				t.Fatalf("compressed INFO %v, want compression %q", info, tc.answer)
			}
			p.sw = s2.NewWriter(nil, s2.WriterConcurrency(1))
			p.write("INFO " + s2PeerInfo(tc.remote, 2) + " \r\n")
			awaitRoutes(t, e, 1)
			if got := routeCompression(t, e); len(got) != 1 || !slices.Contains(tc.want, got[0]) {
				t.Fatalf("/routez compression %v, want one of %v", got, tc.want)
			}
			c := dialInto(t, e, e.Global())
			c.send("SUB foo 1\r\n")
			c.flush()
			if got := p.flush(); strings.Join(got, "") != "RS+ $G foo\r\n" {
				t.Fatalf("route got %q", got)
			}
			big := strings.Repeat("0123456789", 20000)
			p.write("RMSG $G foo 5\r\nhello\r\nRMSG $G foo 200000\r\n" + big + "\r\n")
			p.flush() // the route has handed them to the client
			got := c.flush()
			if strings.Join(got, "") != "MSG foo 1 5\r\nhello\r\nMSG foo 1 200000\r\n"+big+"\r\n" {
				t.Fatalf("client got %d lines", len(got))
			}
			p.write("RS+ $G bar\r\n")
			p.flush()
			c.send("PUB bar 2\r\nhi\r\nPUB bar 200000\r\n" + big + "\r\n")
			c.flush()
			if got := p.flush(); strings.Join(got, "") != "RMSG $G bar 2\r\nhi\r\nRMSG $G bar 200000\r\n"+big+"\r\n" {
				t.Fatalf("route got %d lines", len(got))
			}
		})
	}
}

// Without compression on either side, or with a peer that has none, nothing switches; a
// mode natsd does not know is refused as nats-server does.
func TestRouteCompressionNone(t *testing.T) {
	for _, tc := range []struct {
		local, remote, want string
	}{
		{CompressionAccept, CompressionAccept, CompressionOff},
		{CompressionAccept, "", CompressionNotSupported},
		{CompressionS2Fast, CompressionOff, CompressionOff},
		{CompressionS2Fast, CompressionNotSupported, CompressionNotSupported},
		{CompressionOff, CompressionS2Fast, CompressionOff},
		{CompressionOff, "", CompressionNotSupported},
		{CompressionNotSupported, CompressionS2Fast, CompressionNotSupported},
	} {
		t.Run(tc.local+"_"+tc.remote, func(t *testing.T) {
			e := compEngine(t, "NSELF", tc.local, 0)
			p := dialS2Peer(t, e, tc.remote)
			if p.info["compression"] != tc.local {
				t.Fatalf("greeting announces compression %v, want %q", p.info["compression"], tc.local)
			}
			p.br = bufio.NewReader(p.c)
			awaitRoutes(t, e, 1)
			if got := routeCompression(t, e); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("/routez compression %v, want %s", got, tc.want)
			}
			c := dialInto(t, e, e.Global())
			c.send("SUB foo 1\r\n")
			c.flush()
			if got := p.flush(); strings.Join(got, "") != "RS+ $G foo\r\n" {
				t.Fatalf("route got %q", got)
			}
		})
	}
	t.Run("unknown mode", func(t *testing.T) {
		e := compEngine(t, "NSELF", CompressionAccept, 0)
		p := dialS2Peer(t, e, "bogus")
		p.br = bufio.NewReader(p.c)
		if l := p.line(); l != "-ERR 'unsupported route compression mode \"bogus\"'\r\n" {
			t.Fatalf("got %q", l)
		}
		if l, err := p.br.ReadString('\n'); err == nil {
			t.Fatalf("connection stayed open (%q)", l)
		}
	})
}

// A corrupt stream from the peer closes the route.
func TestRouteCompressionCorrupt(t *testing.T) {
	e := compEngine(t, "NSELF", CompressionAccept, 0)
	p := dialS2Peer(t, e, CompressionS2Fast)
	p.br = bufio.NewReader(s2.NewReader(p.c))
	p.readInfo(func() (string, error) { return p.br.ReadString('\n') })
	p.sw = s2.NewWriter(nil, s2.WriterConcurrency(1))
	p.write("INFO " + s2PeerInfo(CompressionS2Fast, -1) + " \r\n")
	awaitRoutes(t, e, 1)
	p.flush()
	if _, err := p.c.Write([]byte("\x00\x10\x00\x00garbage-garbage!")); err != nil {
		t.Fatal(err)
	}
	awaitRoutes(t, e, 0)
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, p.br); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("connection not closed: %v", err)
	}
}

// Two natsd servers: the one that dials and the one that accepts agree, in both roles,
// and messages cross in both directions.
func TestRouteCompressionNatsd(t *testing.T) {
	for _, tc := range []struct {
		dialer, acceptor         string
		wantDialer, wantAcceptor []string // acceptable /routez values
	}{
		{CompressionS2Fast, CompressionAccept, []string{CompressionS2Fast}, []string{CompressionS2Fast}},
		{CompressionAccept, CompressionS2Fast, []string{CompressionS2Fast}, []string{CompressionS2Fast}},
		// Asymmetric levels: each side writes at its own.
		{CompressionS2Best, CompressionS2Better, []string{CompressionS2Best}, []string{CompressionS2Better}},
		{CompressionS2Auto, CompressionAccept, []string{CompressionS2Uncompressed, CompressionS2Fast}, []string{CompressionS2Fast}},
		{CompressionAccept, CompressionS2Auto, []string{CompressionS2Fast}, []string{CompressionS2Uncompressed, CompressionS2Fast}},
		{CompressionAccept, CompressionAccept, []string{CompressionOff}, []string{CompressionOff}},
		{CompressionOff, CompressionS2Fast, []string{CompressionOff}, []string{CompressionOff}},
	} {
		t.Run(tc.dialer+"_to_"+tc.acceptor, func(t *testing.T) {
			a := compEngine(t, "NA", tc.dialer, 0)
			b := compEngine(t, "NB", tc.acceptor, 0)
			u, _ := url.Parse("nats-route://" + b.RouteAddr().String())
			if err := a.DialRoute(u, true, 0, ""); err != nil {
				t.Fatal(err)
			}
			awaitRoutes(t, a, 1)
			awaitRoutes(t, b, 1)
			for _, side := range []struct {
				e    *Engine
				want []string
			}{{a, tc.wantDialer}, {b, tc.wantAcceptor}} {
				got := routeCompression(t, side.e)
				if len(got) != 1 || !slices.Contains(side.want, got[0]) {
					t.Fatalf("/routez compression %v, want one of %v", got, side.want)
				}
			}
			ca, cb := dialInto(t, a, a.Global()), dialInto(t, b, b.Global())
			ca.send("SUB toa 1\r\n")
			ca.flush()
			cb.send("SUB tob 1\r\n")
			cb.flush()
			big := strings.Repeat("abc", 100000)
			deadline := time.Now().Add(5 * time.Second)
			for a.Global().remoteSubs.Load() == 0 || b.Global().remoteSubs.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("interest did not cross")
				}
				time.Sleep(5 * time.Millisecond)
			}
			ca.send("PUB tob 2\r\nhi\r\nPUB tob 300000\r\n" + big + "\r\n")
			if got := strings.Join([]string{cb.line(), cb.line(), cb.line(), cb.line()}, ""); got != "MSG tob 1 2\r\nhi\r\nMSG tob 1 300000\r\n"+big+"\r\n" {
				t.Fatalf("b's client got %d bytes", len(got))
			}
			cb.send("PUB toa 2\r\nyo\r\n")
			if got := ca.line() + ca.line(); got != "MSG toa 1 2\r\nyo\r\n" {
				t.Fatalf("a's client got %q", got)
			}
		})
	}
}

// A reload's new mode: a compressing route switches level in place (s2_auto: the level its
// round trip picks); one that must negotiate again (to accept, or off) is closed.
func TestRouteCompressionReload(t *testing.T) {
	a := compEngine(t, "NA", CompressionS2Fast, 0)
	b := compEngine(t, "NB", CompressionAccept, 0)
	u, _ := url.Parse("nats-route://" + b.RouteAddr().String())
	if err := a.DialRoute(u, true, 0, ""); err != nil {
		t.Fatal(err)
	}
	awaitRoutes(t, a, 1)
	awaitRoutes(t, b, 1)
	ca, cb := dialInto(t, a, a.Global()), dialInto(t, b, b.Global())
	cb.send("SUB x 1\r\n")
	cb.flush()
	deadline := time.Now().Add(5 * time.Second)
	for a.Global().remoteSubs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("interest did not cross")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i, mode := range []string{CompressionS2Better, CompressionS2Auto, CompressionS2Uncompressed} {
		a.SetRouteCompression(mode, nil)
		want := []string{mode}
		if mode == CompressionS2Auto {
			want = []string{CompressionS2Uncompressed, CompressionS2Fast}
		}
		deadline := time.Now().Add(5 * time.Second)
		for got := routeCompression(t, a); len(got) != 1 || !slices.Contains(want, got[0]); got = routeCompression(t, a) {
			if time.Now().After(deadline) {
				t.Fatalf("after reload to %s: /routez compression %v", mode, got)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if got := routeCompression(t, b); len(got) != 1 || got[0] != CompressionS2Fast {
			t.Fatalf("the other side's compression changed: %v", got)
		}
		body := strings.Repeat("payload-", 1000) + strconv.Itoa(i)
		ca.send("PUB x " + strconv.Itoa(len(body)) + "\r\n" + body + "\r\n")
		if got := cb.line() + cb.line(); got != "MSG x 1 "+strconv.Itoa(len(body))+"\r\n"+body+"\r\n" {
			t.Fatalf("after reload to %s: got %d bytes", mode, len(got))
		}
	}
	a.SetRouteCompression(CompressionAccept, nil)
	awaitRoutes(t, a, 0)
	awaitRoutes(t, b, 0)
}

// s2Block is s as one s2 stream (identifier and chunks), as one flush of nats-server's.
func s2Block(t *testing.T, s string) []byte {
	t.Helper()
	var b strings.Builder
	w := s2.NewWriter(&b, s2.WriterConcurrency(1))
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// The switch point, accepting: what follows the INFO that settles compression is s2, even in
// the same segment.
func TestRouteCompressionSwitchAccepting(t *testing.T) {
	e := compEngine(t, "NSELF", CompressionAccept, 0)
	c, err := net.DialTimeout("tcp", e.RouteAddr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if l, err := readLineRaw(c); err != nil || !strings.HasPrefix(l, "INFO ") {
		t.Fatalf("greeting %q %v", l, err)
	}
	wire := []byte(`CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"NPEER","cluster":"C"}` + "\r\n" +
		"INFO " + s2PeerInfo(CompressionS2Fast, -1) + " \r\n")
	wire = append(wire, s2Block(t, "PING\r\n")...)
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(s2.NewReader(c))
	if l, _ := br.ReadString('\n'); !strings.HasPrefix(l, "INFO ") || !strings.Contains(l, `"compression":"s2_fast"`) {
		t.Fatalf("compressed INFO %q", l)
	}
	if l, err := br.ReadString('\n'); l != "PONG\r\n" {
		t.Fatalf("after the INFO: %q %v", l, err)
	}
}

// The switch point, dialling: natsd sends its INFO in plaintext, then writes s2, and reads s2
// from the byte after the INFO it answered.
func TestRouteCompressionSwitchDialling(t *testing.T) {
	e := compEngine(t, "NSELF", CompressionS2Better, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	u, _ := url.Parse("nats-route://" + ln.Addr().String())
	if err := e.DialRoute(u, true, 0, ""); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if l, err := readLineRaw(c); err != nil || !strings.HasPrefix(l, "CONNECT ") {
		t.Fatalf("first line %q %v", l, err)
	}
	// Our INFO, and in the same segment what a peer writes once compressing.
	wire := append([]byte("INFO "+s2PeerInfo(CompressionAccept, -1)+" \r\n"),
		s2Block(t, "INFO "+s2PeerInfo(CompressionS2Fast, -1)+" \r\nPING\r\n")...)
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	l, err := readLineRaw(c)
	if err != nil || !strings.HasPrefix(l, "INFO ") || !strings.Contains(l, `"compression":"s2_better"`) {
		t.Fatalf("plaintext INFO %q %v", l, err)
	}
	br := bufio.NewReader(s2.NewReader(c))
	var got []string
	for len(got) < 2 {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		if strings.HasPrefix(l, "INFO ") {
			l = "INFO\r\n"
		}
		got = append(got, l)
	}
	// Registered on the compressed INFO: its own INFO, then (no pool) PONG for our PING.
	if strings.Join(got, "") != "INFO\r\nPONG\r\n" {
		t.Fatalf("compressed: %q", got)
	}
	awaitRoutes(t, e, 1)
	if got := routeCompression(t, e); len(got) != 1 || got[0] != CompressionS2Better {
		t.Fatalf("/routez compression %v", got)
	}
}
