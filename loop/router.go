package loop

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/parser"
	"github.com/natsd/natsd/sublist"
)

// Route connections: other servers of the cluster, on the same reactors, parser and outbound
// batching as clients. A route is a client of kind ROUTER whose ops are RS+/RS- (remote
// interest, held in the accounts' sublists as subscriptions of the route) and RMSG (messages
// for local subscribers only: never passed on to another route).
//
// natsd speaks the route protocol without connection pools: one connection per remote server
// carries every account, the way nats-server talks to a server that has pooling off
// (pool_size: -1) or predates it; nats-server then sends account names in every RS+/RS-/RMSG
// on that connection, as natsd does.

// RouteConfig is what the loop needs to run the cluster's connections.
type RouteConfig struct {
	Host string
	Port int // -1 or 0: any free port

	ClusterName string
	Dynamic     bool // the cluster name was generated (a configured name wins over it)
	ServerID    string
	ServerName  string
	Version     string
	Proto       int
	GoVersion   string
	JetStream   bool

	// Advertise is host[:port] to give other servers instead of the bound address.
	Advertise string
	// NoAdvertise keeps the client URLs out of the route INFO (and so out of the clients'
	// connect_urls on other servers).
	NoAdvertise bool
	// ConnectURLs are this server's client URLs (host:port), told to the other servers.
	ConnectURLs []string

	// Username and Password, when set, are required in the CONNECT of accepted routes, and
	// given in ours when a route URL carries no user of its own.
	Username, Password string
	AuthTimeout        time.Duration

	PingInterval time.Duration
	MaxPingsOut  int

	// Import limits the interest we tell other servers of (what we accept from them);
	// Export the interest they may tell us of (what we send them). nil: everything.
	Import, Export *auth.SubjectPermission

	// Events hears of routes coming and going (the cluster package: reconnects, gossip,
	// clients' connect_urls). Called on reactors: it must not block.
	Events RouteEvents
}

// RouteEvents are the cluster layer's hooks.
type RouteEvents interface {
	// RouteUp: a route to another server is registered.
	RouteUp(ri RemoteRoute)
	// RouteDown: a registered route, or an attempt that never registered, closed. Solicited
	// routes learn here whether to dial again (retry: a duplicate was closed in its favour).
	RouteDown(ri RemoteRoute, retry bool)
	// Gossip: a route told us of another server of the cluster (an implicit route).
	Gossip(ri RemoteRoute)
}

// RemoteRoute describes the server at the other end of a route.
type RemoteRoute struct {
	ID, Name    string
	URL         *url.URL // the URL we dialled (solicited) or the one the remote's INFO gives
	Solicited   bool
	Explicit    bool // dialled from the configured routes list
	Self        bool // the URL led back to this server
	AuthReq     bool
	GossipMode  byte
	ConnectURLs []string
	Account     string // route_account: a pinned-account route (refused: natsd does not pool)
}

// Gossip modes in INFO (nats-server's values).
const (
	gossipDefault  = 0
	gossipDisabled = 1
	gossipOverride = 2
)

// routeInfo is the INFO JSON of a route, in nats-server's field order.
type routeInfo struct {
	ID            string          `json:"server_id"`
	Name          string          `json:"server_name"`
	Version       string          `json:"version"`
	Proto         int             `json:"proto"`
	GitCommit     string          `json:"git_commit,omitempty"`
	GoVersion     string          `json:"go"`
	Host          string          `json:"host"`
	Port          int             `json:"port"`
	Headers       bool            `json:"headers"`
	AuthRequired  bool            `json:"auth_required,omitempty"`
	TLSRequired   bool            `json:"tls_required,omitempty"`
	TLSVerify     bool            `json:"tls_verify,omitempty"`
	MaxPayload    int32           `json:"max_payload"`
	JetStream     bool            `json:"jetstream,omitempty"`
	IP            string          `json:"ip,omitempty"`
	Nonce         string          `json:"nonce,omitempty"`
	Cluster       string          `json:"cluster,omitempty"`
	Dynamic       bool            `json:"cluster_dynamic,omitempty"`
	Domain        string          `json:"domain,omitempty"`
	ConnectURLs   []string        `json:"connect_urls,omitempty"`
	WSConnectURLs []string        `json:"ws_connect_urls,omitempty"`
	LameDuckMode  bool            `json:"ldm,omitempty"`
	Compression   string          `json:"compression,omitempty"`
	Import        json.RawMessage `json:"import,omitempty"`
	Export        json.RawMessage `json:"export,omitempty"`
	RoutePoolSize int             `json:"route_pool_size,omitempty"`
	RoutePoolIdx  int             `json:"route_pool_idx,omitempty"`
	RouteAccount  string          `json:"route_account,omitempty"`
	RouteAccReqID string          `json:"route_acc_add_reqid,omitempty"`
	GossipMode    byte            `json:"gossip_mode,omitempty"`
	Gateway       string          `json:"gateway,omitempty"`
	GatewayURL    string          `json:"gateway_url,omitempty"`
	LeafNodeURLs  []string        `json:"leafnode_urls,omitempty"`
}

// routeConnect is a route's CONNECT JSON.
type routeConnect struct {
	Echo     bool   `json:"echo"`
	Verbose  bool   `json:"verbose"`
	Pedantic bool   `json:"pedantic"`
	User     string `json:"user,omitempty"`
	Pass     string `json:"pass,omitempty"`
	TLS      bool   `json:"tls_required"`
	Headers  bool   `json:"headers"`
	Name     string `json:"name"`
	Cluster  string `json:"cluster"`
	Dynamic  bool   `json:"cluster_dynamic,omitempty"`
	LNOC     bool   `json:"lnoc,omitempty"`
	LNOCU    bool   `json:"lnocu,omitempty"`
	LN       bool   `json:"ln,omitempty"`
	Gateway  string `json:"gateway,omitempty"`
	Lang     string `json:"lang,omitempty"` // a client that dialled the route port says one
}

// routeState is what a route connection holds beyond a client's.
type routeState struct {
	solicited, explicit bool
	url                 *url.URL
	gossipMode          byte // the mode the INFO that made us dial asked for
	connected           bool // the remote's CONNECT was accepted (accepted routes)
	registered          bool // in the engine's route table
	retry               bool // a duplicate of this route was closed: redial if it goes
	self                bool
	remote              routeInfo
	infoSeen            bool
	perms               *auth.Perms // cluster permissions: Publish = import, Subscribe = export
	headers             bool
	since               time.Time

	// subs is the remote's interest by "account subject[ queue]" (owned by the reactor).
	subs map[string]*sub
	// Counters for /routez (the reactor writes; monitoring reads).
	inMsgs, inBytes, outMsgs, outBytes atomic.Int64
}

// imports reports whether the remote may be told of our interest in subject: whether we
// accept messages on it from that server (cluster permissions' import, as nats-server's
// canImport).
func (rs *routeState) imports(subject string) bool {
	return rs.perms == nil || rs.perms.PubAllowed([]byte(subject))
}

// exports reports whether we take the remote's interest in subject: whether we send it
// messages on it (cluster permissions' export, nats-server's canExport).
func (rs *routeState) exports(subject, queue string) bool {
	return rs.perms == nil || rs.perms.SubAllowed(subject, queue)
}

// routeTable is the engine's registered routes, by remote server id.
type routeTable struct {
	mu   sync.Mutex
	byID map[string]*client
	list atomic.Pointer[[]*client]
	cfg  atomic.Pointer[RouteConfig]
	addr *net.TCPAddr
	ln   net.Listener
}

func (e *Engine) routeList() []*client {
	if p := e.rt.list.Load(); p != nil {
		return *p
	}
	return nil
}

// addRoute makes rc a destination for interest updates and messages. Callers hold every
// account's interest lock (sendInterest).
func (e *Engine) addRoute(rc *client) {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	l := append([]*client(nil), e.routeList()...)
	l = append(l, rc)
	t.list.Store(&l)
}

func (e *Engine) dropRoute(rc *client) {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[rc.route.remote.ID] == rc {
		delete(t.byID, rc.route.remote.ID)
	}
	old := e.routeList()
	l := make([]*client, 0, len(old))
	for _, x := range old {
		if x != rc {
			l = append(l, x)
		}
	}
	t.list.Store(&l)
}

// claimRoute registers rc as the route to its remote; false when there already is one (a
// duplicate, which the caller closes: the existing route stays and redials if it goes).
func (e *Engine) claimRoute(rc *client) bool {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	id := rc.route.remote.ID
	if old := t.byID[id]; old != nil && old != rc {
		old.route.retry = true
		return false
	}
	if t.byID == nil {
		t.byID = make(map[string]*client)
	}
	t.byID[id] = rc
	return true
}

// HasRoute reports whether a route to the server with this id is registered.
func (e *Engine) HasRoute(id string) bool {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id] != nil
}

// RouteAddr is the route listener's bound address (nil without one).
func (e *Engine) RouteAddr() *net.TCPAddr { return e.rt.addr }

// openRoute sets up a route connection, accepted (u == nil) or dialled, on reactor r, and
// returns what to send first.
func (e *Engine) openRoute(conn Conn, r *reactor, ri *RouteIntent) (c *client, greeting []byte, ok bool) {
	cfg := e.rt.cfg.Load()
	if cfg == nil || e.stopping.Load() {
		return nil, nil, false
	}
	c = &client{
		conn:      conn,
		r:         r,
		cid:       e.cid.Add(1),
		kind:      kindRouter,
		echo:      true,
		tSlot:     -1,
		connected: false,
	}
	c.route = &routeState{since: time.Now(), subs: make(map[string]*sub)}
	if cfg.Import != nil || cfg.Export != nil {
		c.route.perms = auth.Compile(&auth.Permissions{Publish: cfg.Import, Subscribe: cfg.Export})
	}
	c.p.Mode = parser.RouteMode
	c.p.MaxControlLine = e.cfg.MaxControlLine
	c.p.MaxPayload = -1 // as nats-server: a route's messages were checked where they entered
	c.maxSubs = -1
	c.headers.Store(true)
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		c.ip = a.IP.String()
		c.port = a.Port
	}
	c.start = time.Now().UnixNano()
	c.last = c.start
	c.acc = e.global
	c.cache = r.cacheFor(e.global)
	c.counts = r.countsFor(e.global)
	if ri != nil {
		c.route.solicited = true
		c.route.explicit = ri.Explicit
		c.route.url = ri.URL
		c.route.gossipMode = ri.GossipMode
		greeting = e.routeConnectLine(cfg, ri.URL)
	} else if cfg.Username != "" {
		c.authDeadline = c.start + int64(cfg.AuthTimeout)
	}
	greeting = append(greeting, e.routeInfoLine(cfg, true)...)
	if e.cfg.Log != nil {
		e.cfg.Log.Noticef("%s:%d - rid:%d - Route connection created", c.ip, c.port, c.cid)
	}
	now := time.Now().UnixNano()
	c.nextPing = now + int64(min(firstPingDelay, c.pingInterval()))
	c.rearm(now)
	return c, greeting, true
}

// RouteIntent is what a dialled route connection carries to its reactor.
type RouteIntent struct {
	URL        *url.URL
	Explicit   bool
	GossipMode byte
}

func (c *client) pingInterval() time.Duration {
	if c.route != nil {
		if cfg := c.r.e.rt.cfg.Load(); cfg != nil && cfg.PingInterval > 0 {
			return cfg.PingInterval
		}
	}
	return c.r.e.cfg.PingInterval
}

func (c *client) maxPingsOut() int {
	if c.route != nil {
		if cfg := c.r.e.rt.cfg.Load(); cfg != nil && cfg.MaxPingsOut > 0 {
			return cfg.MaxPingsOut
		}
	}
	return c.r.e.cfg.MaxPingsOut
}

func (e *Engine) routeInfoStruct(cfg *RouteConfig) routeInfo {
	ri := routeInfo{
		ID:           cfg.ServerID,
		Name:         cfg.ServerName,
		Version:      cfg.Version,
		Proto:        cfg.Proto,
		GoVersion:    cfg.GoVersion,
		Headers:      true,
		AuthRequired: cfg.Username != "",
		MaxPayload:   int32(e.cfg.MaxPayload),
		JetStream:    cfg.JetStream,
		Cluster:      cfg.ClusterName,
		Dynamic:      cfg.Dynamic,
	}
	if ri.MaxPayload <= 0 {
		ri.MaxPayload = parser.DefaultMaxPayload
	}
	host, port := cfg.Host, 0
	if e.rt.addr != nil {
		port = e.rt.addr.Port
	}
	if cfg.Advertise != "" {
		h, p, err := net.SplitHostPort(cfg.Advertise)
		if err != nil {
			h = cfg.Advertise
		} else if n, err := strconv.Atoi(p); err == nil {
			port = n
		}
		host = h
		ri.IP = "nats-route://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/"
	}
	ri.Host, ri.Port = host, port
	if !cfg.NoAdvertise {
		ri.ConnectURLs = cfg.ConnectURLs
	}
	if cfg.Import != nil {
		ri.Import, _ = json.Marshal(cfg.Import)
	}
	if cfg.Export != nil {
		ri.Export, _ = json.Marshal(cfg.Export)
	}
	return ri
}

// routeInfoLine is our route INFO; the first one on a connection carries a nonce.
func (e *Engine) routeInfoLine(cfg *RouteConfig, nonce bool) []byte {
	ri := e.routeInfoStruct(cfg)
	if nonce {
		var raw [11]byte
		_, _ = rand.Read(raw[:])
		ri.Nonce = base64.RawURLEncoding.EncodeToString(raw[:])
	}
	if e.lameDuck.Load() {
		ri.LameDuckMode = true
	}
	b, _ := json.Marshal(&ri)
	return append(append([]byte("INFO "), b...), '\r', '\n')
}

func (e *Engine) routeConnectLine(cfg *RouteConfig, u *url.URL) []byte {
	rc := routeConnect{Echo: true, Headers: true, Name: cfg.ServerID, Cluster: cfg.ClusterName,
		Dynamic: cfg.Dynamic}
	if u != nil && u.User != nil {
		rc.User = u.User.Username()
		rc.Pass, _ = u.User.Password()
	} else if cfg.Username != "" {
		rc.User, rc.Pass = cfg.Username, cfg.Password
	}
	b, _ := json.Marshal(&rc)
	return append(append([]byte("CONNECT "), b...), '\r', '\n')
}

// processRoute runs one op from a route.
func (c *client) processRoute(op *parser.Op) {
	rs := c.route
	switch op.Kind {
	case parser.KindRMsg:
		if !rs.registered {
			c.closeWithErr("", closeProtocol)
			return
		}
		c.processRoutedMsg(op)
	case parser.KindRSub:
		if rs.registered {
			c.processRemoteSub(op)
		}
	case parser.KindRUnsub:
		if rs.registered {
			c.processRemoteUnsub(op)
		}
	case parser.KindPing:
		c.send(pongLine)
	case parser.KindPong:
		c.pingsOut = 0
		if c.rttStart != 0 {
			c.rtt = time.Now().UnixNano() - c.rttStart
			c.rttStart = 0
		}
	case parser.KindConnect:
		c.processRouteConnect(op.Arg)
	case parser.KindInfo:
		c.processRouteInfo(op.Arg)
	case parser.KindOK:
	case parser.KindErr:
		if c.r.e.cfg.Log != nil {
			c.r.e.cfg.Log.Errorf("%s:%d - rid:%d - Router Error '%s'", c.ip, c.port, c.cid, op.Arg)
		}
		c.markClosing(closeParse)
	default:
		c.closeWithErr("Unknown Protocol Operation", closeParse)
	}
}

func (c *client) routeLog() Logger { return c.r.e.cfg.Log }

func (c *client) processRouteConnect(arg []byte) {
	e := c.r.e
	cfg := e.rt.cfg.Load()
	var rc routeConnect
	if err := json.Unmarshal(arg, &rc); err != nil {
		c.closeWithErr("", closeParse)
		return
	}
	if rc.Lang != "" {
		c.closeWithErr("attempted to connect to route port", "Incorrect Port")
		return
	}
	if rc.Gateway != "" {
		txt := fmt.Sprintf("Rejecting connection from gateway %q on the Route port", rc.Gateway)
		if l := c.routeLog(); l != nil {
			l.Errorf("%s:%d - rid:%d - %s", c.ip, c.port, c.cid, txt)
		}
		c.closeWithErr(txt, "Wrong Gateway")
		return
	}
	if cfg.Username != "" && (rc.User != cfg.Username || rc.Pass != cfg.Password) {
		if l := c.routeLog(); l != nil {
			l.Errorf("%s:%d - rid:%d - authentication error - User %q", c.ip, c.port, c.cid, rc.User)
		}
		c.closeWithErr(errTextAuthViolation, closeAuthFailure)
		return
	}
	if rc.Cluster != cfg.ClusterName && !e.adoptClusterName(rc.Cluster, rc.Dynamic) {
		txt := fmt.Sprintf("Rejecting connection, cluster name %q does not match %q", rc.Cluster, cfg.ClusterName)
		if l := c.routeLog(); l != nil {
			l.Errorf("%s:%d - rid:%d - %s", c.ip, c.port, c.cid, txt)
		}
		c.closeWithErr(txt, "Cluster Name Conflict")
		return
	}
	c.authDeadline = 0
	c.route.connected = true
	c.route.headers = rc.Headers
	c.route.remote.ID = rc.Name
}

// adoptClusterName takes the remote's cluster name where ours was generated and theirs was
// configured (or sorts after ours), as nats-server settles dynamic names.
func (e *Engine) adoptClusterName(name string, dynamic bool) bool {
	cfg := e.rt.cfg.Load()
	if !cfg.Dynamic || name == "" {
		return false
	}
	if dynamic && cfg.ClusterName >= name {
		return false
	}
	n := *cfg
	n.ClusterName = name
	n.Dynamic = dynamic
	e.rt.cfg.Store(&n)
	return true
}

func (c *client) processRouteInfo(arg []byte) {
	e := c.r.e
	cfg := e.rt.cfg.Load()
	rs := c.route
	var info routeInfo
	if err := json.Unmarshal(arg, &info); err != nil {
		c.closeWithErr("", closeParse)
		return
	}
	if !rs.solicited && !rs.connected {
		// An accepted route speaks only after its CONNECT.
		c.closeWithErr(errTextAuthViolation, closeAuthFailure)
		return
	}
	if info.ID == cfg.ServerID {
		rs.self = true
		rs.remote.ID = info.ID
		c.markClosing("Duplicate Route")
		return
	}
	if info.Cluster != "" && info.Cluster != cfg.ClusterName && !e.adoptClusterName(info.Cluster, info.Dynamic) {
		c.markClosing("Cluster Name Conflict")
		return
	}
	if rs.infoSeen {
		c.routeAsyncInfo(&info)
		return
	}
	if !rs.solicited && cfg.ServerName != "" && info.Name == cfg.ServerName {
		if l := c.routeLog(); l != nil {
			l.Errorf("%s:%d - rid:%d - Remote server has a duplicate name: %q", c.ip, c.port, c.cid, info.Name)
		}
		c.markClosing("Duplicate Server Name")
		return
	}
	if info.RouteAccount != "" {
		txt := fmt.Sprintf("Not possible to have a dedicated route for account %q between those servers", info.RouteAccount)
		if l := c.routeLog(); l != nil {
			l.Debugf("%s:%d - rid:%d - %s", c.ip, c.port, c.cid, txt)
		}
		c.closeWithErr(txt, closeProtocol)
		return
	}
	rs.infoSeen = true
	rs.remote = info
	if rs.solicited {
		rs.headers = info.Headers
	}
	if rs.url == nil {
		if u, err := url.Parse("nats-route://" + net.JoinHostPort(info.Host, strconv.Itoa(info.Port)) + "/"); err == nil {
			rs.url = u
		}
	}
	if info.IP == "" {
		rs.remote.IP = "nats-route://" + net.JoinHostPort(c.ip, strconv.Itoa(info.Port)) + "/"
	}
	if !e.claimRoute(c) {
		if l := c.routeLog(); l != nil {
			l.Debugf("%s:%d - rid:%d - Detected duplicate remote route %q", c.ip, c.port, c.cid, info.ID)
		}
		c.markClosing("Duplicate Route")
		return
	}
	rs.registered = true
	c.name = info.Name
	if l := c.routeLog(); l != nil {
		l.Debugf("%s:%d - rid:%d - Registering remote route %q", c.ip, c.port, c.cid, info.ID)
	}
	e.forwardRouteInfo(c)
	e.sendInterest(c)
	if ev := cfg.Events; ev != nil {
		ev.RouteUp(c.remoteRoute())
	}
}

func (c *client) remoteRoute() RemoteRoute {
	rs := c.route
	ri := RemoteRoute{ID: rs.remote.ID, Name: rs.remote.Name, URL: rs.url, Solicited: rs.solicited,
		Explicit: rs.explicit, Self: rs.self, AuthReq: rs.remote.AuthRequired,
		GossipMode: rs.remote.GossipMode, ConnectURLs: rs.remote.ConnectURLs, Account: rs.remote.RouteAccount}
	return ri
}

// routeAsyncInfo handles an INFO on an established route: news of another server (gossip),
// or the remote's own update (lame duck, client URLs).
func (c *client) routeAsyncInfo(info *routeInfo) {
	rs := c.route
	cfg := c.r.e.rt.cfg.Load()
	if info.ID != rs.remote.ID {
		if info.ID == cfg.ServerID || info.RouteAccount != "" {
			return
		}
		if ev := cfg.Events; ev != nil {
			ri := RemoteRoute{ID: info.ID, Name: info.Name, AuthReq: info.AuthRequired, GossipMode: info.GossipMode}
			addr := info.IP
			if addr == "" {
				addr = "nats-route://" + net.JoinHostPort(info.Host, strconv.Itoa(info.Port)) + "/"
			}
			if u, err := url.Parse(addr); err == nil {
				ri.URL = u
				ev.Gossip(ri)
			}
		}
		return
	}
	rs.remote.LameDuckMode = info.LameDuckMode
	if info.LameDuckMode {
		rs.remote.ConnectURLs = nil // its clients are leaving: ours must not go there
	} else {
		rs.remote.ConnectURLs = info.ConnectURLs
	}
	if ev := cfg.Events; ev != nil {
		ev.RouteUp(c.remoteRoute())
	}
}

// forwardRouteInfo tells the other routes of a new one, so that their servers connect to it
// too (gossip), following nats-server's gossip modes.
func (e *Engine) forwardRouteInfo(nc *client) {
	rs := nc.route
	fromGossip := rs.solicited && !rs.explicit
	if (fromGossip && rs.gossipMode != gossipOverride) || rs.remote.GossipMode == gossipDisabled {
		return
	}
	info := rs.remote
	info.Nonce = ""
	gen := func(gm byte) []byte {
		info.GossipMode = gm
		b, _ := json.Marshal(&info)
		return append(append([]byte("INFO "), b...), '\r', '\n')
	}
	for _, r := range e.routeList() {
		if r == nc || r.route.remote.ID == rs.remote.ID {
			continue
		}
		var gm byte = gossipDefault
		switch {
		case (!rs.solicited && r.route.explicit) || (rs.solicited && rs.explicit):
			gm = gossipOverride
		case !rs.solicited:
			gm = gossipDisabled
		}
		r.sendRouteProto(gen(gm), nil)
	}
}

// sendRouteProto queues a protocol line on a route from any goroutine (on a reactor r, the
// flush joins r's batch).
func (c *client) sendRouteProto(b []byte, r *reactor) {
	_, sched, _ := c.out.Append(b, nil, nil, -1)
	if !sched {
		return
	}
	if r != nil {
		r.enqueue(c)
		return
	}
	_ = c.r.ex.Execute(func() {
		c.flush()
		c.r.endBatch()
	})
}

// processRemoteSub holds the remote's interest as a subscription of the route.
func (c *client) processRemoteSub(op *parser.Op) {
	e := c.r.e
	acc := e.account(string(op.Account), false)
	if acc == nil {
		if l := c.routeLog(); l != nil {
			l.Debugf("%s:%d - rid:%d - Unknown account %q for remote subject %q", c.ip, c.port, c.cid, op.Account, op.Subject)
		}
		return
	}
	if !sublist.ValidSubject(op.Subject) {
		return
	}
	if c.route.perms != nil && !c.route.exports(string(op.Subject), string(op.Queue)) {
		return
	}
	key := routeSubKey(op.Account, op.Subject, op.Queue)
	if s := c.route.subs[key]; s != nil {
		// A queue group's weight changed.
		w := max(op.Weight, 1)
		s.qw.Store(w)
		return
	}
	s := &sub{c: c, acc: acc, subject: string(op.Subject), queue: string(op.Queue), remote: true,
		sid: []byte(key)}
	s.qw.Store(max(op.Weight, 1))
	if err := acc.subs.Insert(s.subject, s.queue, s); err != nil {
		return
	}
	acc.remoteSubs.Add(1)
	c.route.subs[key] = s
	e.subInserts.Add(1)
}

func (c *client) processRemoteUnsub(op *parser.Op) {
	key := routeSubKey(op.Account, op.Subject, op.Queue)
	s := c.route.subs[key]
	if s == nil {
		return
	}
	delete(c.route.subs, key)
	if s.gone.CompareAndSwap(false, true) {
		_ = s.acc.subs.Remove(s.subject, s.queue, s)
		s.acc.remoteSubs.Add(-1)
	}
}

func routeSubKey(acc, subject, queue []byte) string {
	b := make([]byte, 0, len(acc)+len(subject)+len(queue)+2)
	b = append(b, acc...)
	b = append(b, ' ')
	b = append(b, subject...)
	if len(queue) > 0 {
		b = append(b, ' ')
		b = append(b, queue...)
	}
	return string(b)
}

// processRoutedMsg delivers a message from another server to this server's subscribers.
func (c *client) processRoutedMsg(op *parser.Op) {
	rs := c.route
	rs.inMsgs.Add(1)
	rs.inBytes.Add(int64(len(op.Msg)))
	acc := c.acc
	if string(op.Account) != acc.Name {
		acc = c.r.e.account(string(op.Account), false)
		if acc == nil {
			if l := c.routeLog(); l != nil {
				l.Debugf("%s:%d - rid:%d - Unknown account %q for routed message on subject: %q", c.ip, c.port, c.cid, op.Account, op.Subject)
			}
			return
		}
	}
	c.r.route(acc, c, op, 0)
}

// routeClosed drops everything a route held.
func (e *Engine) routeClosed(c *client) {
	rs := c.route
	for key, s := range rs.subs {
		if s.gone.CompareAndSwap(false, true) {
			_ = s.acc.subs.Remove(s.subject, s.queue, s)
			s.acc.remoteSubs.Add(-1)
		}
		delete(rs.subs, key)
	}
	if rs.registered {
		e.dropRoute(c)
	}
	if e.cfg.Log != nil {
		reason := c.reason
		if reason == "" {
			reason = closeClient
		}
		e.cfg.Log.Noticef("%s:%d - rid:%d - Router connection closed: %s", c.ip, c.port, c.cid, reason)
	}
	if cfg := e.rt.cfg.Load(); cfg != nil && cfg.Events != nil && !e.stopping.Load() {
		cfg.Events.RouteDown(c.remoteRoute(), rs.retry)
	}
}

// CloseRoutesTo closes the routes dialled to host:port (a route removed by reload).
func (e *Engine) CloseRoutesTo(hostport string) {
	for _, rc := range e.routeList() {
		rc := rc
		if u := rc.route.url; u != nil && rc.route.solicited && strings.EqualFold(u.Host, hostport) {
			_ = rc.r.ex.Execute(func() {
				rc.route.explicit = false
				rc.markClosing("Route Removed")
				rc.r.endBatch()
			})
		}
	}
}
