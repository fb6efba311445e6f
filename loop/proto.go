package loop

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/outbound"
	"github.com/natsd/natsd/parser"
	"github.com/natsd/natsd/sublist"
)

// process runs one parsed op. op's slices alias the inbound buffer: anything kept past this
// call is copied.
func (c *client) process(op *parser.Op) {
	if c.route != nil {
		c.processRoute(op)
		return
	}
	switch op.Kind {
	case parser.KindPub, parser.KindHPub:
		c.processPub(op)
	case parser.KindSub:
		c.processSub(op)
	case parser.KindUnsub:
		c.processUnsub(op)
	case parser.KindPing:
		c.send(pongLine)
		if c.connected && !c.firstPong {
			c.firstPong = true
			if c.protocol >= 1 {
				c.send(c.infoConnect())
			}
		}
	case parser.KindPong:
		c.pingsOut = 0
		if c.rttStart != 0 {
			c.rtt = time.Now().UnixNano() - c.rttStart
			c.rttStart = 0
		}
	case parser.KindConnect:
		c.processConnect(op.Arg)
	case parser.KindOK:
		// nats-server accepts it from clients and ignores it.
	case parser.KindInfo:
		// nats-server unmarshals a client's INFO, closing on JSON it cannot take, and
		// ignores the rest.
		if json.Unmarshal(op.Arg, &peerInfo{}) != nil {
			c.closeWithErr("", closeProtocol)
		}
	case parser.KindErr:
		c.closeWithErr("", closeParse)
	default:
		c.closeWithErr("Unknown Protocol Operation", closeParse)
	}
}

func (c *client) ok() {
	if c.verbose {
		c.send(okLine)
	}
}

// send queues a frame of the connection's own on its outbound queue, behind any deliveries,
// so the wire order is what the client did.
func (c *client) send(b []byte) {
	c.sendFrame(b, nil, nil)
}

func (c *client) sendFrame(a, b, d []byte) {
	if c.closed {
		return
	}
	if c.r.e.cfg.Trace {
		c.traceOut(a)
	}
	// The connection's own replies (PONG, +OK, -ERR, INFO) count toward max_pending like
	// deliveries: a client that never reads is cut off as a slow consumer either way.
	pending, sched, err := c.out.Append(a, b, d, c.r.e.cfg.MaxPending)
	if sched || err != nil {
		c.r.enqueue(c)
	}
	// Replies to what it is sending now that pile up past three quarters of max_pending
	// hold the connection back as a fast producer is held back for a slow subscriber
	// (stall): a client pipelining PINGs or bad protocol without reading the answers takes
	// input at the rate its budget allows, not a whole core, until max_pending cuts it off.
	if c.parsing && err == nil && c.r.pastStallMark(pending) {
		c.r.stall = c
	}
}

func (c *client) sendErr(text string) {
	c.r.scratch = append(c.r.scratch[:0], "-ERR '"...)
	c.r.scratch = append(c.r.scratch, text...)
	c.r.scratch = append(c.r.scratch, "'\r\n"...)
	c.send(c.r.scratch)
}

// closeWithErr sends -ERR and closes once the bytes before it are on their way.
func (c *client) closeWithErr(text, reason string) {
	if text != "" {
		c.sendErr(text)
	}
	c.markClosing(reason)
}

func (c *client) markClosing(reason string) {
	if c.closing {
		return
	}
	c.closing = true
	c.reason = reason
	c.flush()
}

func (c *client) parseError(err error) {
	var pe *parser.Error
	if !errors.As(err, &pe) {
		c.closeWithErr("", closeProtocol)
		return
	}
	if c.r.e.cfg.Log != nil {
		c.r.e.cfg.Log.Debugf("%s - cid:%d - Client parser error: %v", c.ip, c.cid, err)
	}
	if pe == parser.ErrPayloadEnd && c.pedantic && !sublist.ValidLiteralSubject(c.op.Subject) {
		// nats-server judges the subject when the control line arrives, before the body whose
		// end is wrong: both errors go out.
		c.sendErr(errTextInvalidPub)
	}
	c.closeWithErr(pe.Text, pe.Reason)
}

// processConnect handles CONNECT, the first or a later one, as nats-server's processConnect:
// the JSON is unmarshalled over the options the connection already has (fields it leaves out
// keep their values), the client authenticates again, and a later CONNECT first drops the
// connection's subscriptions without telling it.
func (c *client) processConnect(arg []byte) {
	now := time.Now().UnixNano()
	if c.authDeadline != 0 {
		// nats-server stops the auth timer first; one that has already fired wins.
		if now >= c.authDeadline {
			c.closeWithErr(errTextAuthTimeout, closeAuthTimeout)
			return
		}
		c.authDeadline = 0
	}
	// Every CONNECT restarts the keepalive with the short first PING.
	c.nextPing = now + int64(min(firstPingDelay, c.r.e.cfg.PingInterval))
	c.rearm(now)
	j := connectJSON{connectOpts: c.currentOpts()}
	if err := json.Unmarshal(arg, &j); err != nil {
		c.closeWithErr("", closeProtocol)
		return
	}
	o := j.connectOpts
	if c.connected {
		c.dropSubs()
	} else {
		c.labelDue = true
	}
	c.connected = true
	if c.r.e.authConfig().Required() {
		if c.au == nil {
			c.au = &clientAuth{}
		}
		if !c.authConnect(&o) {
			return // refused, or verified off the reactor: applyConnect follows the verdict
		}
	} else if o.User != "" || o.Pass != "" || o.Token != "" || o.Nkey != "" || o.Sig != "" {
		// Kept for a reload that turns authentication on: it checks what the client sent.
		if c.au == nil {
			c.au = &clientAuth{}
		}
		c.au.creds = &auth.Creds{User: o.User, Pass: o.Pass, Token: o.Token, Nkey: o.Nkey, Sig: o.Sig, Nonce: c.au.nonce}
	}
	c.applyConnect(&o)
}

// connectJSON is CONNECT's JSON with the fields nats-server's client options have beyond
// connectOpts, which natsd does not use but nats-server unmarshals: a value of the wrong type
// in any of them (`"tls_required":"x"`) fails the CONNECT, as in nats-server.
type connectJSON struct {
	connectOpts
	TLSRequired   bool          `json:"tls_required"`
	JWT           string        `json:"jwt"`
	Import        *subjectPerms `json:"import"`
	Export        *subjectPerms `json:"export"`
	RemoteAccount string        `json:"remote_account"`
	ProxySig      string        `json:"proxy_sig"`
}

type subjectPerms struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

// peerInfo has the JSON fields and types of nats-server's INFO, for a client's INFO to be
// refused exactly when nats-server's unmarshalling refuses it (a wrong type, a number out of
// range, gateway_cmd_payload that is not base64).
type peerInfo struct {
	ServerID          string        `json:"server_id"`
	ServerName        string        `json:"server_name"`
	Version           string        `json:"version"`
	Proto             int           `json:"proto"`
	GitCommit         string        `json:"git_commit"`
	Go                string        `json:"go"`
	Host              string        `json:"host"`
	Port              int           `json:"port"`
	Headers           bool          `json:"headers"`
	AuthRequired      bool          `json:"auth_required"`
	TLSRequired       bool          `json:"tls_required"`
	TLSVerify         bool          `json:"tls_verify"`
	TLSAvailable      bool          `json:"tls_available"`
	MaxPayload        int32         `json:"max_payload"`
	JetStream         bool          `json:"jetstream"`
	IP                string        `json:"ip"`
	ClientID          uint64        `json:"client_id"`
	ClientIP          string        `json:"client_ip"`
	Nonce             string        `json:"nonce"`
	Cluster           string        `json:"cluster"`
	ClusterDynamic    bool          `json:"cluster_dynamic"`
	Domain            string        `json:"domain"`
	ConnectURLs       []string      `json:"connect_urls"`
	WSConnectURLs     []string      `json:"ws_connect_urls"`
	LameDuck          bool          `json:"ldm"`
	Compression       string        `json:"compression"`
	ConnectInfo       bool          `json:"connect_info"`
	RemoteAccount     string        `json:"remote_account"`
	IsSystemAccount   bool          `json:"acc_is_sys"`
	APILevel          int           `json:"api_lvl"`
	Import            *subjectPerms `json:"import"`
	Export            *subjectPerms `json:"export"`
	LNOC              bool          `json:"lnoc"`
	LNOCU             bool          `json:"lnocu"`
	LN                bool          `json:"ln"`
	InfoOnConnect     bool          `json:"info_on_connect"`
	RoutePoolSize     int           `json:"route_pool_size"`
	RoutePoolIdx      int           `json:"route_pool_idx"`
	RouteAccount      string        `json:"route_account"`
	RouteAccReqID     string        `json:"route_acc_add_reqid"`
	GossipMode        byte          `json:"gossip_mode"`
	Gateway           string        `json:"gateway"`
	GatewayURLs       []string      `json:"gateway_urls"`
	GatewayURL        string        `json:"gateway_url"`
	GatewayCmd        byte          `json:"gateway_cmd"`
	GatewayCmdPayload []byte        `json:"gateway_cmd_payload"`
	GatewayNRP        bool          `json:"gateway_nrp"`
	GatewayIOM        bool          `json:"gateway_iom"`
	LeafNodeURLs      []string      `json:"leafnode_urls"`
	XKey              string        `json:"xkey"`
}

// currentOpts is what the connection's options are now, for a CONNECT to change: before the
// first one, nats-server's defaults (verbose, pedantic and echo on).
func (c *client) currentOpts() connectOpts {
	o := connectOpts{
		Verbose: c.verbose, Pedantic: c.pedantic, Echo: c.echo,
		Headers: c.headers.Load(), NoResponders: c.noResponders, Protocol: c.protocol,
		Name: c.name, Lang: c.lang, Version: c.version,
	}
	if c.au != nil && c.au.creds != nil {
		cr := c.au.creds
		o.User, o.Pass, o.Token, o.Nkey, o.Sig = cr.User, cr.Pass, cr.Token, cr.Nkey, cr.Sig
	}
	return o
}

// dropSubs removes every subscription without a word to the client (a later CONNECT).
func (c *client) dropSubs() {
	for _, s := range c.subs {
		c.removeSub(s)
	}
}

// applyConnect takes CONNECT's options once the client is authenticated, with nats-server's
// checks after authentication: an account designation, the protocol, no_responders without
// headers.
func (c *client) applyConnect(o *connectOpts) {
	if o.Account != "" || o.NewAccount {
		c.authViolation(&auth.Creds{User: o.User, Token: o.Token, Nkey: o.Nkey})
		return
	}
	if c.labelDue {
		c.labelDue = false
		c.setLabel(o)
	}
	c.verbose, c.pedantic, c.echo = o.Verbose, o.Pedantic, o.Echo
	c.headers.Store(o.Headers)
	c.p.NoHeaders = !o.Headers
	c.noResponders = o.NoResponders
	c.protocol = o.Protocol
	c.name, c.lang, c.version = o.Name, o.Lang, o.Version
	if o.Protocol < 0 || o.Protocol > 1 {
		c.closeWithErr(errTextBadProto, closeBadProto)
		return
	}
	if o.NoResponders && !o.Headers {
		c.closeWithErr(errTextNoRespHeaders, closeNoRespHeaders)
		return
	}
	c.ok()
	if ev := c.r.e.cfg.Events; ev != nil && !c.announced && c.kind == kindClient {
		c.announced = true
		ev.ClientConnected(c.snapshot(false))
	}
}

func (c *client) processSub(op *parser.Op) {
	if c.subs == nil {
		c.subs = make(map[string]*sub, 1)
	}
	old := c.subs[string(op.Sid)]
	if old != nil && old.gone.Load() {
		// An auto-unsubscribe that finished elsewhere frees the sid.
		delete(c.subs, string(op.Sid))
		c.goneSubs.Add(-1)
		old = nil
	}
	// nats-server's order: permissions, the subscription limit, then a sid already in use
	// (+OK, nothing changes), and only then the subject's validity (its sublist refuses it).
	if (c.perms.Load() != nil || (len(op.Queue) > 0 && op.Queue[0] == '_')) && c.subDenied(op) {
		return
	}
	g := int(c.goneSubs.Load())
	if g > 16 && g > len(c.subs)/2 {
		c.sweepSubs()
		g = int(c.goneSubs.Load())
	}
	// Subscriptions an auto-unsubscribe finished (on whichever reactor delivered the last
	// message) no longer count, even while their entries wait for the sweep: deliver counts
	// one before it queues that message, so a client that has seen it finds its slot free.
	if m := c.maxSubs; m >= 0 && len(c.subs)-g >= m {
		c.maxSubsExceeded()
		return
	}
	if old != nil {
		c.ok()
		return
	}
	if !sublist.ValidSubject(op.Subject) || (len(op.Queue) > 0 && !sublist.ValidQueue(op.Queue)) {
		c.sendErr(errTextInvalidSubj)
		return
	}
	s := &sub{
		c:       c,
		acc:     c.acc,
		subject: string(op.Subject),
		queue:   string(op.Queue),
		sid:     append([]byte(nil), op.Sid...),
	}
	if cp := c.perms.Load(); cp != nil && cp.p.NeedsDeliveryFilter(s.subject, s.queue != "") {
		s.filter.Store(true)
	}
	if err := s.acc.subs.Insert(s.subject, s.queue, s); err != nil {
		c.sendErr(errTextInvalidSubj)
		return
	}
	c.r.e.subAdded(s, c.r)
	c.subs[string(s.sid)] = s
	c.r.e.subInserts.Add(1)
	c.ok()
}

// maxSubsExceeded refuses a SUB over max_subscriptions, logging it at most every two
// seconds as nats-server does.
func (c *client) maxSubsExceeded() {
	e := c.r.e
	if now := time.Now().UnixNano(); e.cfg.Log != nil {
		if last := e.maxSubsLogged.Load(); now-last >= int64(maxSubsLogEvery) && e.maxSubsLogged.CompareAndSwap(last, now) {
			c.errorf("%s", errTextMaxSubs)
		}
	}
	c.sendErr(errTextMaxSubs)
}

// maxSubsLogEvery rate-limits the max_subscriptions error log (nats-server: per account).
const maxSubsLogEvery = 2 * time.Second

func (c *client) processUnsub(op *parser.Op) {
	s := c.subs[string(op.Sid)]
	remove := false
	if s != nil {
		if op.Max > 0 && s.delivered.Load() < int64(op.Max) {
			s.max.Store(int64(op.Max))
			// A delivery racing with us may have passed max already.
			remove = s.delivered.Load() >= int64(op.Max)
		} else {
			remove = true
		}
	}
	// nats-server answers before it removes the subscription (the trace shows that order).
	c.ok()
	if remove && c.removeSub(s) && c.r.e.cfg.Trace {
		c.traceDelsub(s.sid)
	}
}

func (c *client) sweepSubs() {
	for sid, s := range c.subs {
		if s.gone.Load() {
			delete(c.subs, sid)
			c.goneSubs.Add(-1)
		}
	}
}

// removeSub drops s from the client's subscriptions; it reports whether s was still live (not
// already ended by an auto-unsubscribe).
func (c *client) removeSub(s *sub) bool {
	delete(c.subs, string(s.sid))
	if s.gone.CompareAndSwap(false, true) {
		_ = s.acc.subs.Remove(s.subject, s.queue, s)
		c.r.e.subRemoved(s, c.r)
		return true
	}
	c.goneSubs.Add(-1)
	return false
}

// processPub runs the client-only checks (stats, pedantic subject, publish permissions, +OK)
// and routes the message in the client's account.
func (c *client) processPub(op *parser.Op) {
	r := c.r
	c.counts.inMsgs.add(1)
	c.counts.inBytes.add(uint64(len(op.Msg)))
	c.inMsgs++
	c.inBytes += int64(len(op.Msg))
	if c.pedantic && !sublist.ValidLiteralSubject(op.Subject) {
		c.sendErr(errTextInvalidPub)
	}
	if (reservedPub(op) || c.perms.Load() != nil) && c.pubDenied(op) {
		return
	}
	c.ok()
	if !r.route(c.acc, c, op, 0) && len(op.Reply) > 0 && c.noResponders {
		c.sendNoResponders(op)
	}
}

// sendNoResponders answers a request nobody listens to with a 503 status, as nats-server does
// for clients that asked for it.
func (c *client) sendNoResponders(op *parser.Op) {
	// The reply subject is the publisher's own inbox; find the sid it is subscribed with:
	// of several, the one nats-server's sublist lists first.
	res := c.cache.Match(op.Reply)
	var best *sub
	for _, s := range res.Plain {
		if s.c == c && (best == nil || matchesFirst(s.subject, best.subject)) {
			best = s
		}
	}
	if best == nil {
		return
	}
	sid := best.sid
	b := c.r.scratch[:0]
	const hdr = "NATS/1.0 503\r\nNats-Subject: "
	hl := len(hdr) + len(op.Subject) + 4
	b = append(b, "HMSG "...)
	b = append(b, op.Reply...)
	b = append(b, ' ')
	b = append(b, sid...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(hl), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(hl), 10)
	b = append(b, "\r\n"+hdr...)
	b = append(b, op.Subject...)
	b = append(b, "\r\n\r\n\r\n"...)
	c.r.scratch = b
	c.send(b)
}

// matchesFirst reports whether subscription subject a comes before b (both matching one
// published subject) in the order nats-server's sublist walk yields them: at each level a
// '>' first, then what follows a '*', then the literal token, except at the last level,
// where the literal comes before the '*'. Equal subjects share a node, whose order
// nats-server leaves to a map.
func matchesFirst(a, b string) bool {
	for a != "" && b != "" {
		ta, ra, more := strings.Cut(a, ".")
		tb, rb, _ := strings.Cut(b, ".")
		ka, kb := tokenRank(ta, !more), tokenRank(tb, !more)
		if ka != kb {
			return ka < kb
		}
		if ta == ">" {
			return false
		}
		a, b = ra, rb
	}
	return false
}

// tokenRank orders a subscription token against the others that match the same published
// token; last is set at the published subject's last token.
func tokenRank(t string, last bool) int {
	switch {
	case t == ">":
		return 0
	case t == "*" && last:
		return 2
	case t == "*":
		return 1
	case last:
		return 1
	default:
		return 2
	}
}

// flush writes everything queued for c with one writev; runs on c's reactor.
func (c *client) flush() {
	bufs, slow := c.out.Take(c.iov[:0])
	if c.closed {
		outbound.Release(bufs)
		c.iov = bufs[:0]
		return
	}
	if slow && !c.closing {
		outbound.Release(bufs)
		c.iov = bufs[:0]
		c.slowConsumer(closeSlowPending)
		return
	}
	if len(bufs) > 0 {
		_, _ = c.conn.Writev(bufs)
		outbound.Release(bufs)
	}
	c.iov = bufs[:0]
	if c.closing {
		_ = c.conn.Close()
		return
	}
	n := c.conn.OutboundBuffered()
	c.out.SetSocketPending(n)
	if n > 0 {
		if c.blockedSince == 0 {
			c.blockedSince = time.Now().UnixNano()
			c.r.backlog[c] = struct{}{}
		}
	} else if c.blockedSince != 0 {
		c.blockedSince = 0
		delete(c.r.backlog, c)
	}
}

func (c *client) slowConsumer(reason string) {
	r := c.r
	r.stats.slow.add(1)
	if c.acc != nil {
		c.acc.slowConsumers.Add(1)
	}
	if r.e.cfg.Log != nil {
		if reason == closeSlowPending {
			c.noticef("Slow Consumer Detected: MaxPending of %d Exceeded", r.e.cfg.MaxPending)
		} else {
			c.noticef("Slow Consumer Detected: WriteDeadline of %v exceeded", r.e.cfg.WriteDeadline)
		}
	}
	c.closing = true
	c.reason = reason
	_ = c.conn.Close()
}

// onTimer runs when c's wheel slot comes up: auth timeout, then keepalive.
func (c *client) onTimer(now int64) {
	if c.closing || c.closed {
		return
	}
	if c.authDeadline != 0 && now >= c.authDeadline {
		c.closeWithErr(errTextAuthTimeout, closeAuthTimeout)
		return
	}
	if now >= c.nextPing {
		if c.pingsOut+1 > c.maxPingsOut() {
			c.r.stats.stale.add(1)
			c.closeWithErr(errTextStale, closeStale)
			return
		}
		c.pingsOut++
		if c.rttStart == 0 {
			c.rttStart = now
		}
		c.send(pingLine)
		c.nextPing = now + int64(c.pingInterval())
	}
	c.rearm(now)
}

// rearm puts c in the wheel at its earliest deadline.
func (c *client) rearm(now int64) {
	next := c.nextPing
	if c.authDeadline != 0 && c.authDeadline < next {
		next = c.authDeadline
	}
	c.r.wheel.schedule(c, next)
}
