package loop

import (
	"bytes"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/outbound"
	"github.com/natsd/natsd/parser"
)

// Close reasons, as nats-server names them in /connz.
const (
	closeClient          = "Client Closed"
	closeAuthTimeout     = "Authentication Timeout"
	closeSlowPending     = "Slow Consumer (Pending Bytes)"
	closeWriteDeadline   = "Slow Consumer (Write Deadline)"
	closeStale           = "Stale Connection"
	closeProtocol        = "Protocol Violation"
	closeParse           = "Parse Error"
	closeBadProto        = "Bad Client Protocol Version"
	closeMaxConns        = "Maximum Connections Exceeded"
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
	c         *client
	subject   string
	queue     string
	sid       []byte
	max       atomic.Int64 // 0 = unlimited
	delivered atomic.Int64
	gone      atomic.Bool
	filter    atomic.Bool // the subscriber's deny list may cover deliveries (see perm.go)
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
	conn Conn
	r    *reactor
	cid  uint64
	ip   string
	out  outbound.Queue
	iov  [][]byte

	p    parser.Parser
	op   parser.Op
	need int

	verbose, pedantic, echo, noResponders bool
	// headers is read by publishers on other reactors (HMSG or MSG?), and a client may send
	// CONNECT after SUB, so it is atomic.
	headers             atomic.Bool
	connected           bool // a CONNECT was received (or no_auth_user stood in for it)
	firstPong           bool // the PONG to the first PING after CONNECT has been sent
	protocol            int
	name, lang, version string

	subs map[string]*sub

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
	stalled      bool
	stallUntil   int64
	closing      bool
	closed       bool
	reason       string

	// Monitoring (/connz), owned by the reactor like the rest: read by snapshots run on it.
	start, last     int64 // unix nanos; last is kept at the engine's coarse clock
	inMsgs, inBytes int64
	stalls          int64
	rtt, rttStart   int64 // last measured PING→PONG round trip; when the pending PING left
	port            int

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
		e.cfg.Log.Debugf("%s:%d - cid:%d - Client connection created", c.ip, c.port, c.cid)
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
				e.cfg.Log.Errorf("%s:%d - cid:%d - %s", c.ip, c.port, c.cid, errTextMaxSubs)
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

// traceIn logs an inbound op the way nats-server's -V does: the control line, then the payload.
func (c *client) traceIn(frame []byte) {
	line, rest, _ := bytes.Cut(frame, []byte("\n"))
	line = bytes.TrimRight(line, "\r")
	if len(line) >= 7 && bytes.EqualFold(line[:7], []byte("CONNECT")) {
		line = redactConnect(line)
	}
	c.r.e.cfg.Log.Tracef("%s:%d - cid:%d - \"<<- [%s]\"", c.ip, c.port, c.cid, line)
	if len(rest) > 0 {
		c.r.e.cfg.Log.Tracef("%s:%d - cid:%d - \"<<- MSG_PAYLOAD: [%q]\"", c.ip, c.port, c.cid, bytes.TrimSuffix(rest, []byte("\r\n")))
	}
}

// buildInfo is an INFO line in nats-server's field order: the server's fields, the client's
// id and address, the nonce when there is one, then extra (fields that come before api_lvl
// and xkey, which InfoTail carries).
func (c *client) buildInfo(nonce []byte, extra string) []byte {
	info := c.r.e.cfg.Info
	b := make([]byte, 0, len(info)+len(c.r.e.cfg.InfoTail)+len(extra)+80)
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
	b = append(b, c.r.e.cfg.InfoTail...)
	return append(b, "} \r\n"...)
}

// asyncInfo is an INFO sent after the greeting, to protocol 1 clients only; like
// nats-server's it carries no nonce.
func (c *client) asyncInfo(extra string) []byte { return c.buildInfo(nil, extra) }

// infoLDM is the async INFO announcing lame duck mode.
func (c *client) infoLDM() []byte { return c.asyncInfo(`,"ldm":true`) }

// infoConnect answers a protocol 1 client's first PING after CONNECT: it tells the client
// the account it is bound to (natsd has only the global one).
func (c *client) infoConnect() []byte {
	return c.asyncInfo(`,"connect_info":true,"remote_account":"$G"`)
}

// connClosed releases everything the connection held; the driver calls it once, on c's reactor.
func (e *Engine) connClosed(c *client) {
	if c.closed {
		return
	}
	c.closed = true
	r := c.r
	delete(r.clients, c)
	delete(r.backlog, c)
	r.wheel.remove(c)
	cc := e.closedSnapshot(c) // before the subscriptions go
	for _, s := range c.subs {
		if s.gone.CompareAndSwap(false, true) {
			_ = e.subs.Remove(s.subject, s.queue, s)
		}
	}
	c.subs = nil
	c.out.Reset()
	if c.reason == "" {
		c.reason = closeClient
		if e.stopping.Load() {
			c.reason = closeServerShutdown
		}
	}
	e.addClosed(cc, c.reason)
	// Only now: whoever sees the count drop finds the connection among the closed ones.
	e.conns.Add(-1)
	if e.cfg.Log != nil {
		e.cfg.Log.Debugf("%s:%d - cid:%d - Client connection closed: %s", c.ip, c.port, c.cid, c.reason)
	}
}

// traffic parses whatever is buffered, straight from the driver's inbound buffer. An op that
// has not fully arrived stays in that buffer (not consumed) until the rest comes in. It reports
// whether the driver must close the connection.
func (e *Engine) traffic(c *client) (closeConn bool) {
	conn := c.conn
	if c.closing || c.closed {
		_, _ = conn.Discard(-1)
		return false
	}
	if c.au != nil && c.au.pending {
		return false // CONNECT is being verified; the verdict Wake()s us
	}
	if c.stalled {
		if time.Now().UnixNano() < c.stallUntil {
			return false
		}
		c.stalled = false
	}
	if now := e.clock.Load(); now > c.last {
		c.last = now
	}
	if c.need > 0 && conn.InboundBuffered() < c.need {
		return false
	}
	r := c.r
	buf, _ := conn.Peek(-1)
	off := 0
	var perr error
	for off < len(buf) {
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
			break
		}
		c.need = 0
		if r.e.cfg.Trace {
			c.traceIn(buf[off : off+n])
		}
		off += n
		c.process(&c.op)
		if c.closing || (c.au != nil && c.au.pending) {
			break
		}
		if r.stall {
			r.stall = false
			if c.stall() {
				break
			}
		}
	}
	if perr != nil {
		c.parseError(perr)
		off = len(buf)
	}
	if off > 0 {
		// gnet's Discard(0) drops everything buffered: only ever discard what was consumed.
		_, _ = conn.Discard(off)
	}
	r.endBatch()
	return c.closing
}

// stall pauses parsing this publisher briefly: its targets are backed up, and waiting a
// moment costs less than buffering without bound. gnet keeps the unparsed bytes meanwhile.
// It reports whether the client is now paused (not with no_fast_producer_stall).
func (c *client) stall() bool {
	if c.r.e.cfg.NoFastProducerStall {
		return false
	}
	c.stalled = true
	c.stalls++
	c.r.e.stalls.Add(1)
	c.stallUntil = time.Now().Add(stallFor).UnixNano()
	conn := c.conn
	time.AfterFunc(stallFor, func() { _ = conn.Wake() })
	return true
}

// stallFor is how long a fast producer waits for its subscribers to drain.
const stallFor = 2 * time.Millisecond
