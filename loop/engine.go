// Package loop is natsd's network core: a multi-reactor engine (gnet by default), one state per reactor
// (L1 match cache, flush lists, timer wheel) and the client connection state machine.
// Nothing here blocks: disk and other slow work belongs to worker pools.
package loop

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/auth"
)

// Logger is what the loop needs from the server's logger.
type Logger interface {
	Noticef(format string, v ...any)
	Warnf(format string, v ...any)
	Errorf(format string, v ...any)
	Debugf(format string, v ...any)
	Tracef(format string, v ...any)
}

// Config is everything the loop needs to run client connections.
type Config struct {
	Host      string
	Port      int // -1 or 0: any free port
	Reactors  int
	ReusePort bool
	// ReplySpin is how long a reactor keeps polling for its next event, instead of sleeping,
	// after it answered a request itself (linger.go); 0 picks DefaultReplySpin, negative is
	// never.
	ReplySpin time.Duration
	// Engine picks the driver: "gnet" (default) or "netpoll".
	Engine string

	// Limits mean what nats-server makes of them: MaxConn 0 is no limit and a negative one
	// refuses every client; MaxSubs 0 and -1 are no limit and below -1 every client is over
	// it; a negative AuthTimeout has always expired; a negative WriteDeadline fails every
	// connection's first write.
	MaxPayload     int
	MaxControlLine int
	MaxPending     int64
	MaxConn        int
	MaxSubs        int
	PingInterval   time.Duration
	MaxPingsOut    int
	AuthTimeout    time.Duration
	WriteDeadline  time.Duration

	NoFastProducerStall bool

	// Auth is client authentication (nil: none); SetAuth replaces it on reload. TLS (nil:
	// none) is client TLS, on the same reactors; SetTLS replaces it on reload.
	Auth *auth.Config
	TLS  *TLSConfig

	// Info is the INFO JSON object common to all connections, ending in '}'; the loop adds
	// client_id and client_ip per connection, followed by InfoTail (fields nats-server sends
	// after those, each starting with a comma).
	Info     []byte
	InfoTail []byte

	Log   Logger
	Trace bool
	// MaxTracedMsgLen (max_traced_msg_len): traced payloads longer than this are cut there,
	// with "..." (0: whole).
	MaxTracedMsgLen int

	// RequestInfo builds the Nats-Request-Info header value of a request crossing a
	// service import that asks for it (share: the requester in full); nil adds none.
	RequestInfo func(o Origin, share bool) []byte

	// Events, when set, hears of clients connecting, disconnecting and failing to
	// authenticate (the server turns them into $SYS events). It is called on reactors: it
	// must not block.
	Events Events

	// Cluster, when set, listens for routes from the other servers of a cluster (and lets
	// DialRoute connect to them); see router.go.
	Cluster *RouteConfig
}

// Events receives connection events; see Config.Events.
type Events interface {
	ClientConnected(cs *ConnSnapshot)
	ClientDisconnected(cs *ConnSnapshot)
	AuthFailed(cs *ConnSnapshot)
}

// DefaultReactors is the measured default: on the 2-core machines this was tuned on, one
// reactor leaves the other core to the kernel's loopback work and the load generator and
// beat two (see README "Performance").
const DefaultReactors = 1

// tickEvery is the timer-wheel resolution: deadlines are seconds to minutes long.
const tickEvery = 100 * time.Millisecond

// Stats are server-wide counters summed from per-reactor ones on read.
type Stats struct {
	InMsgs, InBytes, OutMsgs, OutBytes uint64
	SlowConsumers                      uint64
	StaleConnections                   uint64
	Connections                        int64
	TotalConnections                   uint64
	Subscriptions                      int
	StalledClients                     uint64
}

// Engine runs the reactors.
type Engine struct {
	cfg    Config
	accts  atomic.Pointer[accountSet] // every account (account.go); copy-on-write under mu
	global *Account
	drv    driver
	addr   *net.TCPAddr
	infoFn func(port int) (head, tail []byte)
	info   atomic.Pointer[infoTemplate] // the INFO template in force (RefreshInfo swaps it)
	done   chan struct{}

	mu       sync.Mutex // serialises reactor registration (reactorFor) and UpdateLimits
	reactors map[any]*reactor
	peers    atomic.Pointer[[]*reactor] // every reactor by index; copy-on-write under mu

	cid      atomic.Uint64
	icid     atomic.Uint64 // internal clients' ids, apart from connections' (see New)
	conns    atomic.Int64
	total    atomic.Uint64
	lameDuck atomic.Bool
	stopping atomic.Bool
	stopTick chan struct{}

	// Monitoring: a coarse clock (unix nanos, advanced by the ticker) for last_activity, the
	// fast-producer stall count, subscriptions ever inserted, and the closed-connections ring.
	clock      atomic.Int64
	stalls     atomic.Uint64
	subInserts atomic.Uint64
	closed     closedRing

	// rt holds the cluster's routes (router.go); clustered is set once routes may exist,
	// and from then on local interest is counted for them (interest.go).
	rt        routeTable
	clustered atomic.Bool

	authz   authState                 // reloadable authentication (auth.go)
	tlsConf atomic.Pointer[TLSConfig] // client TLS for new connections (SetTLS)

	reclaim reclaimer // hands memory back to the OS after a big connection closes (reclaim.go)
	// TLS handshakes in progress, and run since none was (tlslayer.go: storm reclaim).
	hsInflight, hsSince atomic.Int64

	// The internal reactor routes internal clients' publishes (internal.go).
	internals     []*InternalClient // every internal client, under mu (monitoring)
	intOnce       sync.Once
	intSerial     *serial
	intReactor    *reactor
	maxSubsLogged atomic.Int64 // when max_subscriptions was last logged (unix nanos)
}

// New prepares an engine; Start runs it.
func New(cfg Config) *Engine {
	if cfg.ReplySpin == 0 {
		cfg.ReplySpin = DefaultReplySpin
	}
	if cfg.Reactors <= 0 {
		cfg.Reactors = DefaultReactors
	}
	e := &Engine{
		cfg:      cfg,
		done:     make(chan struct{}),
		reactors: make(map[any]*reactor),
		stopTick: make(chan struct{}),
	}
	// nats-server's own internal clients take IDs 1-4, and one more per configured account
	// other than the system account, before its first connection: clients and tools see
	// the same numbers here (ConfigureAccounts counts the accounts).
	e.cid.Store(firstCID - 1)
	if cfg.Cluster != nil {
		// Count local interest from the first subscription on (imports subscribe before
		// Start), so that a route coming up later is told all of it.
		e.clustered.Store(true)
	}
	e.global = e.account(GlobalAccount, true)
	return e
}

const firstCID = 5

// Start listens and returns once the engine accepts connections.
func (e *Engine) Start() error {
	e.tlsConf.Store(e.cfg.TLS)
	switch e.cfg.Engine {
	case "", "gnet":
		e.drv = &gnetDriver{e: e}
	case "netpoll":
		e.drv = &netpollDriver{e: e}
	default:
		return fmt.Errorf("unknown engine %q", e.cfg.Engine)
	}
	addr, err := e.drv.start()
	if err != nil {
		return err
	}
	if e.cfg.Cluster != nil {
		if err := e.listenRoutes(*e.cfg.Cluster); err != nil {
			e.drv.stop()
			return err
		}
	}
	e.addr = addr
	e.clock.Store(time.Now().UnixNano())
	go e.ticker()
	return nil
}

// listening records the bound address and builds the INFO template for it; drivers call it
// once their listener is up, before the first accept.
func (e *Engine) listening(addr *net.TCPAddr) {
	e.addr = addr
	if e.infoFn != nil {
		e.cfg.Info, e.cfg.InfoTail = e.infoFn(addr.Port)
	}
	e.info.Store(&infoTemplate{head: e.cfg.Info, tail: e.cfg.InfoTail})
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// SetInfo installs the INFO template builder; it is given the bound port once listening.
func (e *Engine) SetInfo(fn func(port int) (head, tail []byte)) { e.infoFn = fn }

// Addr is the bound client address.
func (e *Engine) Addr() *net.TCPAddr { return e.addr }

// MaxPayload is the server's max_payload, for JetStream's check of a message it builds
// itself (a counter's total); it may change on a reload.
func (e *Engine) MaxPayload() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg.MaxPayload
}

// NumConns is the number of open client connections.
func (e *Engine) NumConns() int64 { return e.conns.Load() }

// reactorFor returns the reactor state for a driver's event loop, creating it on first use
// (gnet does not list its loops up front).
func (e *Engine) reactorFor(key any, ex Executor) *reactor {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.reactors[key]
	if r == nil {
		old := e.reactorsSnapshot()
		r = newReactor(e, ex, len(old))
		e.reactors[key] = r
		peers := append(old[:len(old):len(old)], r)
		e.peers.Store(&peers)
	}
	return r
}

// reactorsSnapshot is every reactor registered so far. The slice is never modified once
// published (reactorFor copies on write), so callers read it without a lock but must not
// write to it.
func (e *Engine) reactorsSnapshot() []*reactor {
	if p := e.peers.Load(); p != nil {
		return *p
	}
	return nil
}

// ticker drives every reactor's timer wheel from one goroutine: a single Execute per reactor
// per tick instead of a timer per connection.
func (e *Engine) ticker() {
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	ticks := 0
	for {
		select {
		case <-e.stopTick:
			return
		case <-e.done:
			return
		case now := <-t.C:
			e.clock.Store(now.UnixNano())
			if ticks++; ticks%int(idleEvery/tickEvery) == 0 {
				e.reclaim.idleCheck()
			}
			if ticks%int(time.Second/tickEvery) == 0 {
				e.expireResponses(now)
			}
			for _, r := range e.reactorsSnapshot() {
				_ = r.ex.Execute(r.tickTask)
			}
		}
	}
}

// Stats sums the per-reactor counters.
func (e *Engine) Stats() Stats {
	var s Stats
	for _, r := range e.reactorsSnapshot() {
		if p := r.countsPub.Load(); p != nil {
			for _, c := range *p {
				if c != nil {
					s.InMsgs += c.inMsgs.Load()
					s.InBytes += c.inBytes.Load()
					s.OutMsgs += c.outMsgs.Load()
					s.OutBytes += c.outBytes.Load()
				}
			}
		}
		s.SlowConsumers += r.stats.slow.Load()
		s.StaleConnections += r.stats.stale.Load()
	}
	s.Connections = e.conns.Load()
	s.TotalConnections = e.total.Load()
	for _, a := range e.Accounts() {
		s.Subscriptions += a.subs.Count()
	}
	s.StalledClients = e.stalls.Load()
	return s
}

// EnterLameDuck stops accepting clients, tells those that understand async INFO (protocol 1)
// that the server is going away, waits grace, then closes the rest, spread over d less grace so
// that they do not all reconnect elsewhere at once. As nats-server does it: with no client
// left it returns at once; the pause between two closes is a random share of the window per
// client, at least half of it and never over a second (a few clients do not keep the server up
// for the whole duration); with more clients than nanoseconds they close in batches.
func (e *Engine) EnterLameDuck(d, grace time.Duration) {
	if !e.lameDuck.CompareAndSwap(false, true) {
		return
	}
	if cfg := e.rt.cfg.Load(); cfg != nil {
		// The other servers stop offering our client URL to their clients.
		ldm := e.routeInfoLine(cfg, false, 0, "")
		for _, rc := range e.routeList() {
			rc.sendRouteProto(ldm, nil)
		}
	}
	list := gather(e, func(r *reactor) []Conn {
		var cs []Conn
		for c := range r.clients {
			if c.protocol >= 1 && c.firstPong {
				c.send(c.infoLDM())
			}
			cs = append(cs, c.conn)
		}
		r.endBatch()
		return cs
	})
	if len(list) == 0 {
		return
	}
	if grace > 0 {
		time.Sleep(grace)
	}
	if l := e.cfg.Log; l != nil {
		l.Noticef("Closing existing clients")
	}
	si, batch := lameDuckPace(d-grace, len(list))
	rand.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	for i, c := range list {
		_ = c.Close()
		if i == len(list)-1 {
			break
		}
		if batch == 1 || i%batch == 0 {
			time.Sleep(max(time.Duration(rand.Int64N(int64(si))), si/2))
		}
	}
}

// lameDuckPace is the longest pause between two lame-duck closes and how many close per
// pause, for n clients over window (at least a second).
func lameDuckPace(window time.Duration, n int) (si time.Duration, batch int) {
	if window <= 0 {
		window = time.Second
	}
	si, batch = window/time.Duration(n), 1
	switch {
	case si < 1:
		si, batch = 1, int(int64(n)/int64(window))
	case si > time.Second:
		si = time.Second
	}
	return si, batch
}

// Stop closes every connection and the listener.
func (e *Engine) Stop() {
	if !e.stopping.CompareAndSwap(false, true) {
		<-e.done
		return
	}
	close(e.stopTick)
	e.closeRoutes()
	if e.drv != nil {
		e.drv.stop()
	}
	if e.intSerial != nil {
		e.intSerial.stop()
	}
	close(e.done)
}

// Done is closed when the engine has stopped.
func (e *Engine) Done() <-chan struct{} { return e.done }

// infoTemplate is the INFO object common to every connection (see Config.Info).
type infoTemplate struct{ head, tail []byte }

func (e *Engine) infoTemplate() *infoTemplate {
	if t := e.info.Load(); t != nil {
		return t
	}
	return &infoTemplate{head: e.cfg.Info, tail: e.cfg.InfoTail}
}

// RefreshInfo rebuilds the INFO template (the cluster's client URLs changed) and sends it,
// as an async INFO, to every client that takes one (protocol 1), as nats-server does.
func (e *Engine) RefreshInfo() {
	if e.infoFn == nil || e.addr == nil {
		return
	}
	head, tail := e.infoFn(e.addr.Port)
	e.info.Store(&infoTemplate{head: head, tail: tail})
	e.runOnReactors(func(r *reactor) {
		for c := range r.clients {
			if c.connected && c.protocol >= 1 && !c.closing {
				c.send(c.asyncInfo(""))
			}
		}
		r.endBatch()
	})
}
