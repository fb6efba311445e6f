package loop

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

// clusterEngine starts an engine listening for routes (pool size pool, pinned accounts).
func wireEngine(t *testing.T, pool int, pinned ...string) *Engine {
	t.Helper()
	e := New(Config{
		Host: "127.0.0.1", Port: -1, Reactors: 2,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20,
		PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
		Cluster: &RouteConfig{Host: "127.0.0.1", Port: -1, ClusterName: "C", ServerID: "NSELF",
			ServerName: "self", Version: "2.15.2", Proto: 3, PingInterval: time.Minute, MaxPingsOut: 2,
			AuthTimeout: 2 * time.Second, PoolSize: pool, Pinned: pinned},
	})
	for _, name := range pinned {
		e.account(name, true)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// peerRoute is the test acting as another server's route connection to e.
type peerRoute struct {
	*rawClient
	info map[string]any // e's INFO
}

// dialPeer connects to e's route port as server id and introduces itself with an INFO that
// claims pool slot idx of a pool of size pool (0: no pooling), or account's own route.
func dialPeer(t *testing.T, e *Engine, id string, pool, idx int, account string) *peerRoute {
	t.Helper()
	c, err := net.DialTimeout("tcp", e.RouteAddr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := &peerRoute{rawClient: &rawClient{t: t, c: c, br: bufio.NewReader(c)}}
	l := p.line()
	if !strings.HasPrefix(l, "INFO ") {
		t.Fatalf("route greeting %q, want INFO", l)
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(l[5:])), &p.info); err != nil {
		t.Fatal(err)
	}
	p.send(`CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"` + id + `","cluster":"C"}` + "\r\n")
	info := map[string]any{"server_id": id, "server_name": strings.ToLower(id), "version": "2.15.2",
		"proto": 3, "host": "127.0.0.1", "port": 1, "headers": true, "max_payload": 1048576, "cluster": "C"}
	if pool > 0 {
		info["route_pool_size"] = pool
		info["route_pool_idx"] = idx
	}
	if account != "" {
		info["route_account"] = account
	}
	b, _ := json.Marshal(info)
	p.send("INFO " + string(b) + "\r\n")
	return p
}

// expectLines reads until PONG (after a PING of ours) and checks the lines that came first.
func (p *peerRoute) expectLines(want ...string) {
	p.t.Helper()
	got := p.flush()
	if strings.Join(got, "") != strings.Join(want, "") {
		p.t.Fatalf("route got %q, want %q", got, want)
	}
}

// awaitRoutes waits until e has n registered routes.
func awaitRoutes(t *testing.T, e *Engine, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.NumRoutes() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d routes, want %d", e.NumRoutes(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The route protocol as nats-server writes it: interest on first and last subscriber, queue
// weights, messages once per server with the queue groups to serve, and what a route's
// messages may reach here.
func TestRouteWire(t *testing.T) {
	e := wireEngine(t, 0)
	p := dialPeer(t, e, "NPEER", 0, 0, "")
	awaitRoutes(t, e, 1)
	if p.info["server_id"] != "NSELF" || p.info["cluster"] != "C" || p.info["route_pool_size"] != nil {
		t.Fatalf("route INFO %v", p.info)
	}
	p.expectLines() // no interest yet

	c := dialInto(t, e, e.Global())
	steps := []struct {
		name   string
		client string   // what the local client sends
		route  []string // what the route then carries
	}{
		{"first subscriber", "SUB foo 1\r\n", []string{"RS+ $G foo\r\n"}},
		{"second subscriber: no change", "SUB foo 2\r\n", nil},
		{"queue member", "SUB q g 3\r\n", []string{"RS+ $G q g 1\r\n"}},
		{"queue weight grows", "SUB q g 4\r\n", []string{"RS+ $G q g 2\r\n"}},
		{"queue weight shrinks", "UNSUB 4\r\n", []string{"RS+ $G q g 1\r\n"}},
		{"last queue member", "UNSUB 3\r\n", []string{"RS- $G q g\r\n"}},
		{"one of two left", "UNSUB 1\r\n", nil},
		{"last subscriber", "UNSUB 2\r\n", []string{"RS- $G foo\r\n"}},
	}
	for _, st := range steps {
		c.send(st.client)
		c.flush()
		p.expectLines(st.route...)
	}

	// The peer's interest: a local publish goes to it once, however many of its subscriptions match.
	p.send("RS+ $G bar.*\r\nRS+ $G bar.>\r\nRS+ $G work w 3\r\n")
	p.flush()
	c.send("PUB bar.x r 2\r\nhi\r\nHPUB bar.y 12 14\r\nNATS/1.0\r\n\r\nok\r\n")
	c.flush()
	p.expectLines("RMSG $G bar.x r 2\r\n", "hi\r\n", "HMSG $G bar.y 12 14\r\n", "NATS/1.0\r\n", "\r\n", "ok\r\n")
	// A queue group only the peer has: it is named in the RMSG.
	c.send("PUB work 1\r\nx\r\nPUB work r 1\r\ny\r\n")
	c.flush()
	p.expectLines("RMSG $G work | w 1\r\n", "x\r\n", "RMSG $G work + r w 1\r\n", "y\r\n")

	// Messages from the route reach local subscribers, and a queue group only when named.
	c.send("SUB in 11\r\nSUB in qq 12\r\n")
	c.flush()
	p.flush()
	p.send("RMSG $G in 2\r\nm1\r\nRMSG $G in | qq 2\r\nm2\r\nRMSG $G in + rep other 2\r\nm3\r\n")
	p.flush()
	got := c.flush()
	want := []string{"MSG in 11 2\r\n", "m1\r\n", "MSG in 11 2\r\n", "m2\r\n", "MSG in 12 2\r\n", "m2\r\n", "MSG in 11 rep 2\r\n", "m3\r\n"}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("client got %q, want %q", got, want)
	}
	// Never from a route to another route: the peer's own interest in "in" does not bring
	// its messages back.
	p.send("RS+ $G in\r\nRMSG $G in 2\r\nm4\r\n")
	p.expectLines()

	// The peer leaves: its interest goes with it.
	p.c.Close()
	awaitRoutes(t, e, 0)
	if e.Global().remoteSubs.Load() != 0 {
		t.Fatalf("%d remote subscriptions left", e.Global().remoteSubs.Load())
	}
}

// Pools: an account's interest travels on its connection (fnv32a(name) % pool size, as
// nats-server), a pinned account's on its own route without the account on the wire.
func TestRoutePoolAndPinned(t *testing.T) {
	e := wireEngine(t, 3, "P")
	var conns []*peerRoute
	for i := 0; i < 3; i++ {
		conns = append(conns, dialPeer(t, e, "NPEER", 3, i, ""))
	}
	pin := dialPeer(t, e, "NPEER", 3, 0, "P")
	awaitRoutes(t, e, 4)
	if pin.info["route_pool_size"] != float64(3) {
		t.Fatalf("INFO route_pool_size %v", pin.info["route_pool_size"])
	}
	// A second connection claiming a taken slot is a duplicate.
	dup := dialPeer(t, e, "NPEER", 3, 1, "")
	if _, err := dup.br.ReadString('\n'); err == nil {
		if _, err := dup.br.ReadString('\n'); err == nil {
			t.Fatal("duplicate pool connection stayed open")
		}
	}

	g, _ := e.poolPlace(e.Global())
	if g != 2 {
		t.Fatalf("$G pool index %d, want 2 (nats-server's)", g)
	}
	c := dialInto(t, e, e.Global())
	c.send("SUB foo 1\r\n")
	c.flush()
	for i, p := range conns {
		if i == g {
			p.expectLines("RS+ $G foo\r\n")
		} else {
			p.expectLines()
		}
	}
	pin.expectLines()

	pc := dialInto(t, e, e.LookupAccount("P"))
	pc.send("SUB foo 1\r\n")
	pc.flush()
	pin.expectLines("RS+ foo\r\n")
	for _, p := range conns {
		p.expectLines()
	}
	// Messages in the pinned account: no account on the wire either way.
	pin.send("RS+ out\r\n")
	pin.flush()
	pc.send("PUB out 2\r\nhi\r\n")
	pc.flush()
	pin.expectLines("RMSG out 2\r\n", "hi\r\n")
	pin.send("RMSG foo 2\r\nyo\r\n")
	pin.flush()
	if got := pc.flush(); strings.Join(got, "") != "MSG foo 1 2\r\nyo\r\n" {
		t.Fatalf("pinned account's client got %q", got)
	}
}

// A route must say CONNECT first; a client that dials the route port is told so.
func TestRouteRefusals(t *testing.T) {
	e := wireEngine(t, 0)
	for _, tc := range []struct {
		name, send, want string
	}{
		{"INFO before CONNECT", `INFO {"server_id":"X"}` + "\r\n", "-ERR 'Authorization Violation'\r\n"},
		{"a client on the route port", `CONNECT {"lang":"go","version":"1.55.0"}` + "\r\n", "-ERR 'attempted to connect to route port'\r\n"},
		{"another cluster", `CONNECT {"name":"X","cluster":"OTHER"}` + "\r\n", "-ERR 'Rejecting connection, cluster name \"OTHER\" does not match \"C\"'\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", e.RouteAddr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rc := &rawClient{t: t, c: c, br: bufio.NewReader(c)}
			if l := rc.line(); !strings.HasPrefix(l, "INFO ") {
				t.Fatalf("greeting %q", l)
			}
			rc.send(tc.send)
			if l := rc.line(); l != tc.want {
				t.Fatalf("got %q, want %q", l, tc.want)
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := rc.br.ReadString('\n'); err == nil {
				t.Fatal("connection stayed open")
			}
		})
	}
}

// A peer with this server's name is refused (JetStream needs unique names), and a server whose
// cluster name was generated takes a peer's configured one, as nats-server settles names.
func TestRouteNames(t *testing.T) {
	e := wireEngine(t, 0)
	c, err := net.DialTimeout("tcp", e.RouteAddr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc := &rawClient{t: t, c: c, br: bufio.NewReader(c)}
	rc.line()
	rc.send(`CONNECT {"name":"NDUP","cluster":"C"}` + "\r\n" +
		`INFO {"server_id":"NDUP","server_name":"self","cluster":"C","port":1}` + "\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.br.ReadString('\n'); err == nil {
		t.Fatal("a route from a server with our name stayed open")
	}

	d := New(Config{Host: "127.0.0.1", Port: -1, Reactors: 1, MaxPayload: 1 << 20, MaxControlLine: 4096,
		MaxPending: 64 << 20, PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"TEST"}`),
		Cluster: &RouteConfig{Host: "127.0.0.1", Port: -1, ClusterName: "generated", Dynamic: true,
			ServerID: "NDYN", ServerName: "dyn", PingInterval: time.Minute, MaxPingsOut: 2}})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	dialPeer(t, d, "NPEER", 0, 0, "") // configured name "C"
	awaitRoutes(t, d, 1)
	if got := d.RouteConfig().ClusterName; got != "C" {
		t.Fatalf("cluster name %q, want the peer's configured C", got)
	}
}
