package loop

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
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
// As nats-server 2.10+, routes are pooled: with pool_size N, each pair of servers keeps N
// connections and an account's interest and messages travel on connection
// fnv32a(account) % N; pinned accounts (cluster accounts, and the system account) get a
// connection of their own, on which the account is left out of every RS+/RS-/RMSG. Only the
// server that dials opens the pool's further connections, one after the other. A server
// without pooling (pool_size: -1, or an older one) gets a single connection for everything.

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

	// TLS, when set, runs every route in TLS from its first byte (route_tls.go). TLSMap
	// (verify_and_map) and TLSCheckKnownURLs (verify_cert_and_check_known_urls) authorize
	// accepted routes by their certificate instead of CONNECT's credentials. Routes are the
	// configured route URLs (known URLs, and the TLS name for routes dialled by address).
	TLS                       *TLSConfig
	TLSMap, TLSCheckKnownURLs bool
	Routes                    []*url.URL

	PingInterval time.Duration
	MaxPingsOut  int

	// PoolSize is the number of connections to each server (<= 0: no pooling); Pinned are
	// the accounts with a connection of their own (only with pooling).
	PoolSize int
	Pinned   []string

	// Compression is the mode routes negotiate (CompressionAccept, an s2 mode, off or not
	// supported; "": none announced, as off); RTTThresholds are s2_auto's steps.
	Compression   string
	RTTThresholds []time.Duration

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
	// PoolNext: a pooled route we dialled is up and its pool is not full: dial the next.
	PoolNext(ri RemoteRoute)
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
	Account     string // the pinned account of a dedicated route
	Pooled      bool   // one of a pool of connections to that server
	NoRetry     bool   // closed for good: a full pool, or a pinned route the remote cannot take
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
	gossipMode          byte        // the mode the INFO that made us dial asked for
	connected           bool        // the remote's CONNECT was accepted (accepted routes)
	registered          bool        // in the engine's route table
	retry               atomic.Bool // a duplicate of this route was closed: redial if it goes
	noRetry             bool        // closed for a reason a redial would meet again
	self                bool
	// Pooling: the slot this connection holds in its remote's pool, or the account it is
	// dedicated to (pinned, with its Account); noPool when it is the only connection to a
	// server without pooling (or we have none). startNext: dial the pool's next connection
	// once the remote answers our PING (it accepted this one).
	poolIdx   int
	pinned    string
	pinnedAcc *Account
	noPool    bool
	startNext bool
	remote    routeInfo
	infoSeen  bool
	perms     *auth.Perms // cluster permissions: Publish = import, Subscribe = export
	headers   bool
	// Compression (routecomp.go): the negotiated mode ("" until an INFO settles it), whether
	// the remote's INFO is awaited to negotiate it, and the adapter when the route compresses.
	compression string
	compWait    bool
	comp        *routeComp
	since       time.Time

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
	byID map[string]*remoteConns
	list atomic.Pointer[[]*client]
	cfg  atomic.Pointer[RouteConfig]
	addr *net.TCPAddr
	tls  routeTLSName // the TLS name for routes dialled by address (route_tls.go)
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

// remoteConns are the connections to one remote server: its pool's slots (one slot without
// pooling) and its dedicated (pinned account) routes.
type remoteConns struct {
	slots  []*client
	pinned map[string]*client
}

func (rc *remoteConns) count() int {
	n := len(rc.pinned)
	for _, c := range rc.slots {
		if c != nil {
			n++
		}
	}
	return n
}

func (e *Engine) dropRoute(rc *client) {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byID[rc.route.remote.ID]; r != nil {
		for i, c := range r.slots {
			if c == rc {
				r.slots[i] = nil
			}
		}
		if r.pinned[rc.route.pinned] == rc {
			delete(r.pinned, rc.route.pinned)
		}
		if r.count() == 0 {
			delete(t.byID, rc.route.remote.ID)
		}
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

// claimRoute registers rc in its remote's connections: in its pinned account's place, in pool
// slot idx (accepted) or the first free one (dialled, idx < 0) of a pool of size, or alone
// (size 0: no pooling). It reports the slot taken (-1 for none: a duplicate or a full pool,
// which the caller closes; the connection that holds the place redials if it goes), whether
// rc is the first connection to that server of its kind (the pool, or any for a pinned
// route), and how many the pool now holds.
func (e *Engine) claimRoute(rc *client, idx, size int) (slot int, first bool, held int) {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	id := rc.route.remote.ID
	r := t.byID[id]
	if r == nil {
		r = &remoteConns{}
		if t.byID == nil {
			t.byID = make(map[string]*remoteConns)
		}
		t.byID[id] = r
	}
	if acc := rc.route.pinned; acc != "" {
		first = r.count() == 0
		if old := r.pinned[acc]; old != nil {
			old.route.retry.Store(true)
			return -1, false, 0
		}
		if r.pinned == nil {
			r.pinned = make(map[string]*client)
		}
		r.pinned[acc] = rc
		return 0, first, 1
	}
	// For a pool, "first" is its first connection: the one other servers hear of.
	first = true
	for _, c := range r.slots {
		if c != nil {
			first = false
		}
	}
	n := max(size, 1)
	for len(r.slots) < n {
		r.slots = append(r.slots, nil)
	}
	if idx < 0 {
		for i, c := range r.slots {
			if c == nil {
				idx = i
				break
			}
		}
		if idx < 0 {
			return -1, false, len(r.slots)
		}
	} else if idx >= len(r.slots) {
		return -1, false, 0
	}
	if old := r.slots[idx]; old != nil {
		old.route.retry.Store(true)
		return -1, false, 0
	}
	r.slots[idx] = rc
	for _, c := range r.slots {
		if c != nil {
			held++
		}
	}
	return idx, first, held
}

// HasRoute reports whether a route to the server with this id is registered (one that
// carries accounts other than pinned ones: a pool's, or the single route).
func (e *Engine) HasRoute(id string) bool {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byID[id]; r != nil {
		for _, c := range r.slots {
			if c != nil {
				return true
			}
		}
	}
	return false
}

// HasPinnedRoute reports whether the server with this id has a route dedicated to acc.
func (e *Engine) HasPinnedRoute(id, acc string) bool {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.byID[id]
	return r != nil && r.pinned[acc] != nil
}

// NumRemotes is the number of servers routes connect us to.
func (e *Engine) NumRemotes() int {
	t := &e.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
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
		c.route.pinned = ri.Account
		// Our INFO waits for the remote's: it names the pool slot we take (nats-server's
		// dialling side does the same).
		greeting = e.routeConnectLine(cfg, ri.URL)
	} else {
		if cfg.Username != "" {
			c.authDeadline = c.start + int64(cfg.AuthTimeout)
		}
		greeting = e.routeInfoLineComp(cfg, true, 0, "", infoCompression(cfg, cfg.Compression))
	}
	if _, secure := conn.(*tlsLayer); e.cfg.Log != nil && !secure {
		// (With TLS, once the session is up: tlsLayer.established.)
		e.cfg.Log.Noticef("%s:%d - rid:%d - Route connection created", c.ip, c.port, c.cid)
	}
	now := time.Now().UnixNano()
	c.nextPing = now + int64(min(firstPingDelay, c.pingInterval()))
	c.rearm(now)
	if compressionConfigured(cfg.Compression) {
		c.deferRoutePings(now)
	}
	return c, greeting, true
}

// RouteIntent is what a dialled route connection carries to its reactor.
type RouteIntent struct {
	URL        *url.URL
	Explicit   bool
	GossipMode byte
	Account    string // a route dedicated to this pinned account
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
		TLSRequired:  cfg.TLS != nil,
		TLSVerify:    cfg.TLS != nil, // routes always verify the peer's certificate
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

// routeInfoLine is our route INFO; the first one on a connection carries a nonce, and a
// dialled connection's its pool slot or pinned account.
func (e *Engine) routeInfoLine(cfg *RouteConfig, nonce bool, poolIdx int, account string) []byte {
	return e.routeInfoLineComp(cfg, nonce, poolIdx, account, "")
}

// routeInfoLineComp is routeInfoLine announcing a compression mode.
func (e *Engine) routeInfoLineComp(cfg *RouteConfig, nonce bool, poolIdx int, account, compression string) []byte {
	ri := e.routeInfoStruct(cfg)
	ri.Compression = compression
	if cfg.PoolSize > 0 {
		ri.RoutePoolSize = cfg.PoolSize
		ri.RoutePoolIdx = poolIdx
		ri.RouteAccount = account
	}
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
		Dynamic: cfg.Dynamic, TLS: cfg.TLS != nil}
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
			c.routePong()
		}
		if rs.startNext {
			rs.startNext = false
			if cfg := c.r.e.rt.cfg.Load(); cfg.Events != nil {
				cfg.Events.PoolNext(c.remoteRoute())
			}
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
	if !c.routeAuthorized(cfg, &rc) {
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
	if c.negotiateRouteCompression(cfg, info.Compression) || c.closing {
		return // the remote's next INFO, compressed, registers the route
	}
	rs.infoSeen = true
	rs.remote = info
	if rs.solicited {
		rs.headers = info.Headers
	}
	if !rs.solicited && info.RouteAccount != "" {
		rs.pinned = info.RouteAccount
	}
	// Where this connection goes: a pinned account's own route, a slot of the pool, or the
	// only route to a server that does not pool (nats-server's addRoute checks and texts).
	pooled := cfg.PoolSize > 0 && info.RoutePoolSize > 0
	size := 0
	if pooled {
		size = max(cfg.PoolSize, info.RoutePoolSize)
	}
	idx := -1
	if acc := rs.pinned; acc != "" {
		if !pooled {
			rs.noRetry = true
			if rs.solicited {
				c.markClosing(closeProtocol)
			} else {
				c.closeWithErr(fmt.Sprintf("Not possible to have a dedicated route for account %q between those servers", acc), closeProtocol)
			}
			return
		}
		if !slices.Contains(cfg.Pinned, acc) {
			c.closeWithErr(fmt.Sprintf("No route for account %q", acc), closeProtocol)
			return
		}
		if rs.pinnedAcc = e.account(acc, false); rs.pinnedAcc == nil {
			c.closeWithErr(fmt.Sprintf("Unable to lookup account %q: %v", acc, "account not found"), "Missing Account")
			return
		}
	} else if !pooled {
		rs.noPool = true
		idx = 0
	} else if !rs.solicited {
		if info.RoutePoolIdx < 0 || info.RoutePoolIdx >= size {
			c.closeWithErr(fmt.Sprintf("Invalid route pool index: %v - pool size is %v", info.RoutePoolIdx, info.RoutePoolSize), closeProtocol)
			return
		}
		idx = info.RoutePoolIdx
	} else if info.RoutePoolIdx != 0 {
		c.closeWithErr(fmt.Sprintf("Route pool index should not be set but is set to %v", info.RoutePoolIdx), closeProtocol)
		return
	}
	if rs.url == nil {
		if u, err := url.Parse("nats-route://" + net.JoinHostPort(info.Host, strconv.Itoa(info.Port)) + "/"); err == nil {
			rs.url = u
		}
	}
	if info.IP == "" {
		rs.remote.IP = "nats-route://" + net.JoinHostPort(c.ip, strconv.Itoa(info.Port)) + "/"
	}
	slot, first, held := e.claimRoute(c, idx, size)
	if slot < 0 {
		if l := c.routeLog(); l != nil {
			if held > 0 {
				l.Debugf("%s:%d - rid:%d - Route pool size reached, closing extra connection to %q", c.ip, c.port, c.cid, info.ID)
			} else {
				l.Debugf("%s:%d - rid:%d - Detected duplicate remote route %q", c.ip, c.port, c.cid, info.ID)
			}
		}
		rs.noRetry = held > 0
		c.markClosing("Duplicate Route")
		return
	}
	rs.poolIdx = slot
	rs.registered = true
	c.name = info.Name
	if rs.pinned != "" {
		// The account is not on the wire any more, from either side.
		c.p.NoAccount = true
	}
	if l := c.routeLog(); l != nil {
		if rs.pinned != "" {
			l.Debugf("%s:%d - rid:%d - Registering remote route %q for account %q", c.ip, c.port, c.cid, info.ID, rs.pinned)
		} else {
			l.Debugf("%s:%d - rid:%d - Registering remote route %q", c.ip, c.port, c.cid, info.ID)
		}
	}
	if rs.solicited {
		c.send(e.routeInfoLineComp(cfg, true, slot, rs.pinned, infoCompression(cfg, rs.compression)))
	}
	if first || rs.pinned != "" {
		e.forwardRouteInfo(c)
	}
	e.sendInterest(c)
	if rs.solicited && pooled && rs.pinned == "" && held < size {
		// The next connection of the pool once the remote has answered on this one.
		rs.startNext = true
		c.send(pingLine)
	}
	if ev := cfg.Events; ev != nil && (first || rs.pinned != "") {
		ev.RouteUp(c.remoteRoute())
	}
}

func (c *client) remoteRoute() RemoteRoute {
	rs := c.route
	ri := RemoteRoute{ID: rs.remote.ID, Name: rs.remote.Name, URL: rs.url, Solicited: rs.solicited,
		Explicit: rs.explicit, Self: rs.self, AuthReq: rs.remote.AuthRequired,
		GossipMode: rs.remote.GossipMode, ConnectURLs: rs.remote.ConnectURLs, Account: rs.pinned,
		Pooled: !rs.noPool && rs.pinned == "", NoRetry: rs.noRetry}
	return ri
}

// routeAsyncInfo handles an INFO on an established route: news of another server (gossip),
// or the remote's own update (lame duck, client URLs).
func (c *client) routeAsyncInfo(info *routeInfo) {
	rs := c.route
	cfg := c.r.e.rt.cfg.Load()
	if info.ID != rs.remote.ID {
		if info.ID == cfg.ServerID {
			return
		}
		if ev := cfg.Events; ev != nil {
			ri := RemoteRoute{ID: info.ID, Name: info.Name, AuthReq: info.AuthRequired, GossipMode: info.GossipMode,
				Account: info.RouteAccount}
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
	info.RouteAccount = rs.pinned
	info.RoutePoolIdx = 0
	gen := func(gm byte) []byte {
		info.GossipMode = gm
		b, _ := json.Marshal(&info)
		return append(append([]byte("INFO "), b...), '\r', '\n')
	}
	told := make(map[string]bool)
	for _, r := range e.routeList() {
		if r == nc || r.route.remote.ID == rs.remote.ID || told[r.route.remote.ID] {
			continue
		}
		if rs.pinned != "" && r.route.noPool {
			continue // a server without pooling cannot take a pinned route
		}
		told[r.route.remote.ID] = true
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
	acc := c.route.pinnedAcc
	if acc == nil {
		acc = e.account(string(op.Account), false)
	}
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
	// Counted before it can be matched: a publisher that finds it in a match result then
	// sees the count and takes the clustered path, which never writes a MSG frame to a route.
	acc.remoteSubs.Add(1)
	if err := acc.subs.Insert(s.subject, s.queue, s); err != nil {
		acc.remoteSubs.Add(-1)
		return
	}
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
	if pa := rs.pinnedAcc; pa != nil {
		acc = pa
	} else if string(op.Account) != acc.Name {
		acc = c.r.e.account(string(op.Account), false)
		if acc == nil {
			if l := c.routeLog(); l != nil {
				l.Debugf("%s:%d - rid:%d - Unknown account %q for routed message on subject: %q", c.ip, c.port, c.cid, op.Account, op.Subject)
			}
			return
		}
	}
	if acc != c.acc {
		// Keep the route bound to the account it last carried, so that a run of messages in
		// one account matches through the reactor's L1 cache like a client's.
		c.acc, c.cache, c.counts = acc, c.r.cacheFor(acc), c.r.countsFor(acc)
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
	c.routeTLSCloseReason()
	if rs.comp != nil {
		rs.comp.closed()
	}
	if e.cfg.Log != nil {
		reason := c.reason
		if reason == "" {
			reason = closeClient
		}
		e.cfg.Log.Noticef("%s:%d - rid:%d - Router connection closed: %s", c.ip, c.port, c.cid, reason)
	}
	if cfg := e.rt.cfg.Load(); cfg != nil && cfg.Events != nil && !e.stopping.Load() {
		cfg.Events.RouteDown(c.remoteRoute(), rs.retry.Load())
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
