package loop

import (
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/outbound"
	"github.com/natsd/natsd/parser"
	"github.com/natsd/natsd/sublist"
)

// Kind is what is at the other end of a connection, as nats-server names them.
type Kind uint8

const (
	kindClient Kind = iota
	kindRouter
	kindGateway
	kindSystem
	kindLeaf
	kindJetStream
	kindAccount
)

// Connection kinds, exported for internal clients' owners.
const (
	KindClient    = kindClient
	KindRouter    = kindRouter
	KindGateway   = kindGateway
	KindSystem    = kindSystem
	KindLeaf      = kindLeaf
	KindJetStream = kindJetStream
	KindAccount   = kindAccount
)

func (k Kind) String() string {
	switch k {
	case kindClient:
		return "CLIENT"
	case kindRouter:
		return "ROUTER"
	case kindGateway:
		return "GATEWAY"
	case kindSystem:
		return "SYSTEM"
	case kindLeaf:
		return "LEAFNODE"
	case kindJetStream:
		return "JETSTREAM"
	case kindAccount:
		return "ACCOUNT"
	}
	return "UNKNOWN"
}

// Close reasons, as nats-server names them in /connz.
const (
	closeClient          = "Client Closed"
	closeKicked          = "Kicked"
	closeAuthTimeout     = "Authentication Timeout"
	closeSlowPending     = "Slow Consumer (Pending Bytes)"
	closeWriteDeadline   = "Slow Consumer (Write Deadline)"
	closeStale           = "Stale Connection"
	closeProtocol        = "Protocol Violation"
	closeParse           = "Parse Error"
	closeBadProto        = "Bad Client Protocol Version"
	closeMaxConns        = "Maximum Connections Exceeded"
	closeMaxAccountConns = "Maximum Account Connections Exceeded"
	closeNoRespHeaders   = "No Responders Requires Headers"
	closeServerShutdown  = "Server Shutdown"
	closeAuthFailure     = "Authentication Failure"
	firstPingDelay       = 2 * time.Second
	errTextStale         = "Stale Connection"
	errTextMaxConns      = "maximum connections exceeded"
	errTextMaxSubs       = "maximum subscriptions exceeded"
	errTextInvalidSubj   = "Invalid Subject"
	errTextInvalidPub    = "Invalid Publish Subject"
	errTextBadProto      = "invalid client protocol"
	errTextNoRespHeaders = "no responders requires headers support"
	errTextAuthViolation = "Authorization Violation"
	errTextAuthTimeout   = "Authentication Timeout"
)

var (
	crlf     = []byte("\r\n")
	pongLine = []byte("PONG\r\n")
	pingLine = []byte("PING\r\n")
	okLine   = []byte("+OK\r\n")
)

// sub is one subscription. Deliveries come from any reactor, so the auto-unsubscribe
// counter is atomic; everything else is fixed at SUB time.
type sub struct {
	c   *client  // the subscriber: a client connection or an internal client
	acc *Account // whose interest graph holds it
	// fn, for an internal subscription, handles each message on the publisher's reactor
	// instead of a MSG frame (see internal.go); it must not block.
	fn        func(r *reactor, from *client, m *parser.Op, depth int) bool
	subject   string
	queue     string
	sid       []byte
	max       atomic.Int64 // 0 = unlimited
	delivered atomic.Int64
	gone      atomic.Bool
	filter    atomic.Bool // the subscriber's deny list may cover deliveries (see perm.go)
	// remote: the interest of another server (c is the route); qw is then its queue
	// group's member count there. local: interest other servers must not hear of (a
	// service import's listener: each server serves its own importers).
	remote, local bool
	qw            atomic.Int32
	// keepAs: fn routes the message on (a stream import), so it takes it as published, on
	// the subject it is routed on, still showing as m.As (a JetStream delivery to a deliver
	// subject another account imports), rather than as its subscribers see it.
	keepAs bool
	imp    *streamImportDest // a stream import's: where it routes messages (HasInterest)
}

// connectOpts is CONNECT's JSON, unmarshalled over the connection's current options
// (currentOpts), as nats-server does: a field CONNECT leaves out keeps its value.
type connectOpts struct {
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	Echo         bool   `json:"echo"`
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
	Protocol     int    `json:"protocol"`
	Name         string `json:"name"`
	Lang         string `json:"lang"`
	Version      string `json:"version"`
	Account      string `json:"account"`
	NewAccount   bool   `json:"new_account"`
	User         string `json:"user"`
	Pass         string `json:"pass"`
	Token        string `json:"auth_token"`
	Nkey         string `json:"nkey"`
	Sig          string `json:"sig"`
}

// client is one connection's state machine. All fields but out (the queue other reactors
// append to) and the atomics are touched only by the owning reactor.
type client struct {
	conn  Conn
	r     *reactor
	cid   uint64
	kind  Kind
	route *routeState // a route to another server (router.go); nil for clients
	// acc is the account the connection is bound to, and cache the reactor's L1 cache for
	// it (bind): the publish path matches through it without another lookup.
	acc    *Account
	cache  *sublist.Cache[*sub]
	counts *acctCounts // the reactor's message counters for acc
	ip     string
	ncs    atomic.Pointer[string] // the log label (logs.go)
	out    outbound.Queue
	iov    [][]byte

	p    parser.Parser
	op   parser.Op
	need int

	verbose, pedantic, echo, noResponders bool
	// headers is read by publishers on other reactors (HMSG or MSG?), and a client may send
	// CONNECT after SUB, so it is atomic.
	headers             atomic.Bool
	connected           bool
	announced           bool // Events.ClientConnected was told // a CONNECT was received (or no_auth_user stood in for it)
	firstPong           bool // the PONG to the first PING after CONNECT has been sent
	labelDue            bool // the first CONNECT is being applied: it completes the log label
	closeLogLate        bool // the TLS layer logs the close after the handshake's late verdict
	protocol            int
	name, lang, version string

	subs map[string]*sub
	// maxSubs is the lower of the server's and the account's max_subscriptions (-1: none).
	maxSubs int

	// Authentication and permissions (auth.go, perm.go): au is nil when the server required
	// no authentication at accept; perms is nil for unrestricted clients (read by deliveries
	// on other reactors, hence atomic).
	au    *clientAuth
	perms atomic.Pointer[clientPerms]
	// goneSubs counts auto-unsubscribed entries still in subs: deliveries on other reactors
	// end them, and the owner sweeps the map when they pile up.
	goneSubs atomic.Int32

	pingsOut     int
	nextPing     int64 // unix nanos
	authDeadline int64
	blockedSince int64 // when the socket first held unsent bytes; 0 when drained
	// stalled: parsing and reading wait, until stallUntil (a fast producer) or a verdict (a
	// CONNECT being verified); stallSpent is what this batch of input has waited so far.
	stalled    bool
	stallUntil int64
	stallSpent time.Duration
	// stallParsed is the input parsed since the stall budget was last renewed.
	stallParsed int
	// parsing is set while this connection's input is parsed and processed: its own
	// replies (sendFrame) may then stall it.
	parsing bool
	// yielded: the last traffic run ended its turn with complete ops left unparsed; the
	// driver must run it again (after the reactor's other work) rather than wait for bytes.
	yielded bool
	queued  bool // in its reactor's runq
	inPeak  int  // most inbound bytes buffered at once (see reclaim.go)
	closing bool
	closed  bool
	reason  string

	// Monitoring (/connz), owned by the reactor like the rest: read by snapshots run on it.
	start, last     int64 // unix nanos; last is kept at the engine's coarse clock
	inMsgs, inBytes int64
	// stalls counts the publishers this connection, as a slow target, made wait (nats-server
	// counts them on the consumer); publishers on any reactor add to it.
	stalls        atomic.Int64
	rtt, rttStart int64 // last measured PING→PONG round trip; when the pending PING left
	port          int

	// timer-wheel links (see wheel.go)
	tPrev, tNext *client
	tSlot        int32
	tRounds      int32
}

// open greets a new connection with INFO, or refuses it (ok=false: the driver writes the
// greeting, if any, and closes) when over max_connections or going away. It runs on r.
func (e *Engine) open(conn Conn, r *reactor) (c *client, greeting []byte, ok bool) {
	c = &client{
		conn:     conn,
		r:        r,
		cid:      e.cid.Add(1),
		verbose:  true,
		pedantic: true,
		echo:     true,
		tSlot:    -1,
	}
	c.p.MaxControlLine = e.cfg.MaxControlLine
	c.p.MaxPayload = e.cfg.MaxPayload
	c.maxSubs = -1
	c.p.NoHeaders = true // until CONNECT says headers:true
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		c.ip = a.IP.String()
		c.port = a.Port
	}
	c.start = time.Now().UnixNano()
	c.last = c.start
	e.authOpen(c)
	info := c.infoLine()
	if e.lameDuck.Load() || e.stopping.Load() {
		return nil, nil, false
	}
	// max_connections: 0 is no limit, a negative value refuses everyone (nats-server stores an
	// explicit 0 in a config file as -1).
	if n, m := e.conns.Add(1), e.cfg.MaxConn; m < 0 || (m > 0 && n > int64(m)) {
		e.conns.Add(-1)
		if l, ok := conn.(*tlsLayer); ok && l.greetsInSession() {
			// A TLS-first client is owed no INFO before its session; nats-server sends it the
			// error alone, in plaintext, and closes.
			info = nil
		}
		info = append(info, "-ERR '"+errTextMaxConns+"'\r\n"...)
		if e.cfg.Log != nil {
			e.cfg.Log.Errorf("%s - cid:%d - %s", c.ip, c.cid, errTextMaxConns)
		}
		return nil, info, false
	}
	if refused, g := e.refuseByConfig(c, info); refused {
		e.conns.Add(-1)
		return nil, g, false
	}
	e.total.Add(1)
	if e.cfg.Log != nil {
		c.debugf("Client connection created")
	}
	if err := c.bind(e.global); err != nil {
		e.conns.Add(-1)
		return nil, append(info, "-ERR '"+err.Error()+"'\r\n"...), false
	}
	r.clients[c] = struct{}{}
	now := time.Now().UnixNano()
	c.nextPing = now + int64(min(firstPingDelay, e.cfg.PingInterval))
	c.rearm(now)
	return c, info, true
}

// refuseByConfig turns every client away where a configured value leaves nats-server unable
// to serve one, with what nats-server sends: max_subscriptions below -1 (-1 is no limit) puts
// every connection over it at once (INFO, then the error, then the close); a negative
// write_deadline fails the first write, so the connection closes before its INFO, as a slow
// consumer unless it still owed authentication.
func (e *Engine) refuseByConfig(c *client, info []byte) (bool, []byte) {
	if m := e.cfg.MaxSubs; m < -1 {
		if e.cfg.Log != nil {
			if now, last := time.Now().UnixNano(), e.maxSubsLogged.Load(); now-last >= int64(maxSubsLogEvery) && e.maxSubsLogged.CompareAndSwap(last, now) {
				c.errorf("%s", errTextMaxSubs)
			}
		}
		return true, append(info, "-ERR '"+errTextMaxSubs+"'\r\n"...)
	}
	if wd := e.cfg.WriteDeadline; wd < 0 {
		if c.au == nil {
			c.r.stats.slow.add(1)
			if e.cfg.Log != nil {
				e.cfg.Log.Noticef("%s - cid:%d - Slow Consumer Detected: WriteDeadline of %v exceeded with 1 chunks of %d total bytes.", c.ip, c.cid, wd, len(info))
			}
		}
		return true, nil
	}
	return false, nil
}

// infoLine is the greeting INFO: with the nonce when the client must sign it.
func (c *client) infoLine() []byte {
	var nonce []byte
	if c.au != nil {
		nonce = c.au.nonce
	}
	return c.buildInfo(nonce, "")
}

// buildInfo is an INFO line in nats-server's field order: the server's fields, the client's
// id and address, the nonce when there is one, then extra (fields that come before api_lvl
// and xkey, which InfoTail carries).
func (c *client) buildInfo(nonce []byte, extra string) []byte {
	t := c.r.e.infoTemplate()
	info := t.head
	b := make([]byte, 0, len(info)+len(t.tail)+len(extra)+80)
	b = append(b, "INFO "...)
	b = append(b, info[:len(info)-1]...)
	b = append(b, `,"client_id":`...)
	b = strconv.AppendUint(b, c.cid, 10)
	b = append(b, `,"client_ip":"`...)
	b = append(b, c.ip...)
	b = append(b, '"')
	if nonce != nil {
		b = append(b, `,"nonce":"`...)
		b = append(b, nonce...)
		b = append(b, '"')
	}
	b = append(b, extra...)
	b = append(b, t.tail...)
	return append(b, "} \r\n"...)
}

// asyncInfo is an INFO sent after the greeting, to protocol 1 clients only; like
// nats-server's it carries no nonce.
func (c *client) asyncInfo(extra string) []byte { return c.buildInfo(nil, extra) }

// infoLDM is the async INFO announcing lame duck mode.
func (c *client) infoLDM() []byte { return c.asyncInfo(`,"ldm":true`) }

// infoConnect answers a protocol 1 client's first PING after CONNECT: it tells the client
// the account it is bound to, and whether that is the system account.
func (c *client) infoConnect() []byte {
	name := GlobalAccount
	sys := false
	if c.acc != nil {
		name, sys = c.acc.Name, c.acc.system.Load()
	}
	extra := `,"connect_info":true,"remote_account":` + strconv.Quote(name)
	if sys {
		extra += `,"acc_is_sys":true`
	}
	return c.asyncInfo(extra)
}

// connClosed releases everything the connection held; the driver calls it once, on c's reactor.
func (e *Engine) connClosed(c *client) {
	if c.closed {
		return
	}
	c.closed = true
	r := c.r
	if c.route != nil {
		delete(r.backlog, c)
		r.wheel.remove(c)
		c.out.Reset()
		e.routeClosed(c)
		return
	}
	delete(r.clients, c)
	delete(r.backlog, c)
	r.wheel.remove(c)
	cc := e.closedSnapshot(c) // before the subscriptions go
	var dels [][]byte         // traced after the close, as nats-server does
	for _, s := range c.subs {
		if s.gone.CompareAndSwap(false, true) {
			_ = s.acc.subs.Remove(s.subject, s.queue, s)
			e.subRemoved(s, nil)
			if e.cfg.Trace {
				dels = append(dels, s.sid)
			}
		}
	}
	c.unbind()
	c.subs = nil
	if c.out.Peak() > reclaimAbove || c.inPeak > reclaimAbove {
		e.reclaim.soon()
	}
	c.out.Reset()
	if c.reason == "" {
		c.reason = closeClient
		if e.stopping.Load() {
			c.reason = closeServerShutdown
		}
	}
	e.addClosed(cc, c.reason)
	if ev := e.cfg.Events; ev != nil && c.announced {
		ev.ClientDisconnected(cc)
	}
	// Only now: whoever sees the count drop finds the connection among the closed ones.
	e.conns.Add(-1)
	if !c.closeLogLate {
		c.debugf("Client connection closed: %s", c.reason)
	}
	for _, sid := range dels {
		c.traceDelsub(sid)
	}
}

// traffic parses whatever is buffered, straight from the driver's inbound buffer. An op that
// has not fully arrived stays in that buffer (not consumed) until the rest comes in. It reports
// whether the driver must close the connection.
func (e *Engine) traffic(c *client) (closeConn bool) {
	conn := c.conn
	c.yielded = false
	if c.closing || c.closed {
		_, _ = conn.Discard(-1)
		return false
	}
	if c.stalled {
		// A stalled publisher, or a CONNECT being verified: nothing is parsed and the socket
		// is not read until the stall's timer (or the verdict) wakes us.
		if c.au == nil || !c.au.pending {
			if time.Now().UnixNano() >= c.stallUntil {
				c.stalled = false
			}
		}
		if c.stalled {
			conn.SetReading(false)
			return false
		}
	}
	if now := e.clock.Load(); now > c.last {
		c.last = now
	}
	if c.need > 0 && conn.InboundBuffered() < c.need {
		conn.SetReading(true)
		return false
	}
	r := c.r
	// Look at no more than a window of the buffered input (or the frame the parser waits
	// for): a large backlog that wraps gnet's ring, or spans netpoll's nodes, is copied
	// whole by a Peek of everything.
	total := conn.InboundBuffered()
	if total > c.inPeak {
		c.inPeak = total
	}
	buf, _ := conn.Peek(min(total, max(peekWindow, c.need)))
	cut := len(buf) < total
	off := 0
	start := time.Now()
	var perr error
	c.parsing = true
	for ops := 1; off < len(buf); ops++ {
		if ops%turnCheck == 0 && time.Since(start) > turnTime {
			if !r.othersWaiting(c) {
				start = time.Now() // nobody else to serve: a yield would only cost syscalls
			} else {
				// This connection has had its turn: the rest waits behind the reactor's
				// other connections (the driver runs traffic again, see yielded).
				c.yielded = true
				break
			}
		}
		if c.au != nil && c.au.awaiting && !c.authFirstByte(buf[off]) {
			break
		}
		n, err := c.p.Next(buf[off:], &c.op)
		if err != nil {
			perr = err
			break
		}
		if n == 0 {
			c.need = c.p.Need()
			c.yielded = cut // the rest of the frame is buffered beyond the window
			break
		}
		c.need = 0
		if r.e.cfg.Trace {
			c.traceIn(buf[off:off+n], c.op.Kind)
		}
		off += n
		if c.stallSpent > 0 {
			// The stall budget is per stallBudgetBytes of input, as nats-server's is per
			// read: a publisher whose backlog is larger than one look gets its budget again
			// for every such share of it, not once for all of it.
			if c.stallParsed += n; c.stallParsed >= stallBudgetBytes {
				c.stallParsed, c.stallSpent = 0, 0
			}
		}
		c.process(&c.op)
		if c.closing || c.stalled {
			break
		}
		if t := r.stall; t != nil {
			r.stall = nil
			if c.stall() {
				if t != c {
					t.stalls.Add(1)
				}
				break
			}
		}
	}
	c.parsing = false
	if perr != nil {
		c.parseError(perr)
		off = len(buf)
	}
	if off > 0 {
		// gnet's Discard(0) drops everything buffered: only ever discard what was consumed.
		_, _ = conn.Discard(off)
	}
	if off == len(buf) && cut && !c.closing {
		c.yielded = true
	}
	if !c.stalled && off == len(buf) && !cut {
		// Everything that had arrived is parsed: the next bytes may stall the publisher anew.
		c.stallSpent, c.stallParsed = 0, 0
	}
	// A connection whose turn ended with input left stops being read until that input is
	// parsed: reading more would only grow its buffer (and gnet's ring, once it wraps, is
	// copied whole by every Peek). Where reading runs apart from parsing (netpoll's poller),
	// a peer can also send faster than the reactor parses: past inboundMax of buffered input
	// that the parser could consume, reading waits too. Over TLS the input counted is the
	// opened plaintext.
	left := conn.InboundBuffered()
	if t, ok := conn.(unseener); ok && !c.stalled && !c.closing && t.unseen(c.need) {
		// That look opened records the parser has not seen (they waited beyond the layer's
		// window, or netpoll read them meanwhile): parse them in another turn.
		c.yielded = true
	}
	conn.SetReading(!c.stalled && !c.yielded && (left < inboundMax || left < c.need))
	r.endBatch()
	return c.closing
}

// A connection's turn on its reactor ends after turnTime (looked at every turnCheck ops) if
// another connection is waiting, so that one busy client cannot hold the reactor for long
// while the others' round trips wait, whatever its ops cost (a PING, or a PUB fanned out to
// thousands). peekWindow bounds what one turn looks at, and inboundMax what a connection may
// buffer before it is not read.
const (
	turnTime   = 50 * time.Microsecond
	turnCheck  = 32
	peekWindow = 256 << 10
	inboundMax = 256 << 10
)

// stall pauses this publisher briefly, as nats-server does: one of its targets is past three
// quarters of max_pending, and waiting a moment costs less than buffering without bound. The
// socket is not read meanwhile, so the publisher's further bytes wait in the kernel. Stalls
// add up to at most stallTotalAllowed per stallBudgetBytes of input (or per batch of input,
// what had arrived when parsing began, if that is less); past that the publisher goes on, so
// a subscriber that never reads reaches max_pending and is cut off as a slow consumer instead
// of holding the publisher back forever. Budgeted per batch alone, a publisher with megabytes
// waiting in the kernel was held back once and then parsed at full speed: the never-reading
// subscriber was cut after ~200 ms instead of nats-server's ~3 s, and the publisher, never
// slowed, took a core from everyone else on the reactor.
// It reports whether the client is now paused (never with no_fast_producer_stall).
func (c *client) stall() bool {
	if c.r.e.cfg.NoFastProducerStall || c.stallSpent >= stallTotalAllowed {
		return false
	}
	ttl := min(stallFor, stallTotalAllowed-c.stallSpent)
	c.stallSpent += ttl
	c.stalled = true
	c.r.e.stalls.Add(1)
	c.stallUntil = time.Now().Add(ttl).UnixNano()
	conn := c.conn
	time.AfterFunc(ttl, func() { _ = conn.Wake() })
	return true
}

// stallFor is how long a fast producer waits for its subscribers to drain, and
// stallTotalAllowed how much waiting one batch of its input may cost (nats-server's
// stallClientMinDuration and stallTotalAllowed).
// pastStallMark reports whether a connection with pending bytes queued is past three
// quarters of max_pending, where whoever is adding to its queue is held back (stall).
func (r *reactor) pastStallMark(pending int64) bool {
	mp := r.e.cfg.MaxPending
	return mp > 0 && pending > mp/4*3
}

const (
	stallFor          = 2 * time.Millisecond
	stallTotalAllowed = 10 * time.Millisecond
	// stallBudgetBytes is how much input one stallTotalAllowed covers: nats-server's
	// budget is per read, and its reads are at most 64 KiB.
	stallBudgetBytes = 64 << 10
)
