package server

// The $SYS layer: nats-server's system-account events and request/reply API, above a small
// transport interface (sysConn) that the routing core implements. Everything here is
// transport-independent: requests arrive through sysConn.Subscribe callbacks (on a worker,
// never a reactor), answers and events leave through one sender goroutine that numbers them
// (ServerInfo.seq), marshals them and calls sysConn.Publish. The same goroutine runs the
// timers (STATSZ heartbeat, account connection heartbeats) off one timer.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nuid"
)

// sysConn is what the $SYS layer needs from the routing core.
type sysConn interface {
	// Subscribe registers fn for subject (wildcards allowed) in the system account; queue
	// may be "". fn runs on a worker goroutine (never a reactor) with its own copies of the
	// bytes; it may block (gathering monitoring figures).
	Subscribe(subject, queue string, fn func(subject, reply string, hdr, msg []byte)) (unsubscribe func(), err error)
	// Publish sends from the system account's internal client; safe from any goroutine.
	Publish(subject, reply string, hdr, msg []byte) error
	// PublishAccount sends from account's internal client, into that account's subjects
	// ($SYS.ACCOUNT.CLIENT.AUTH.ERR goes to the account a client failed to join).
	PublishAccount(account, subject, reply string, hdr, msg []byte) error
}

// Optional capabilities a sysConn may have (type-asserted; each has a fallback).
type (
	// sysLocalSubscriber subscribes without propagating interest to other servers (routes,
	// gateways): $SYS.REQ.USER.<acc>.INFO is answered only by the requester's own server.
	// Without it Subscribe is used.
	sysLocalSubscriber interface {
		SubscribeLocal(subject, queue string, fn func(subject, reply string, hdr, msg []byte)) (unsubscribe func(), err error)
	}
	// sysInterest reports whether anyone (local or remote) subscribes to subject in the
	// system account. A standalone nats-server sends its periodic STATSZ only when someone
	// listens; without it natsd always sends.
	sysInterest interface {
		HasInterest(subject string) bool
	}
	// sysFlusher writes out what Publish queued, waiting at most timeout; stopSys calls it
	// after the SHUTDOWN event so that it reaches subscribers before the process exits.
	sysFlusher interface {
		Flush(timeout time.Duration) error
	}
)

// Subjects (nats-server 2.15.2's; %s is a server id, an account or an endpoint name).
const (
	connectEventSubj          = "$SYS.ACCOUNT.%s.CONNECT"
	disconnectEventSubj       = "$SYS.ACCOUNT.%s.DISCONNECT"
	accDirectReqSubj          = "$SYS.REQ.ACCOUNT.%s.%s"
	accPingReqSubj            = "$SYS.REQ.ACCOUNT.PING.%s"
	accConnsEventSubjNew      = "$SYS.ACCOUNT.%s.SERVER.CONNS"
	accConnsEventSubjOld      = "$SYS.SERVER.ACCOUNT.%s.CONNS"
	lameDuckEventSubj         = "$SYS.SERVER.%s.LAMEDUCK"
	shutdownEventSubj         = "$SYS.SERVER.%s.SHUTDOWN"
	clientKickReqSubj         = "$SYS.REQ.SERVER.%s.KICK"
	clientLDMReqSubj          = "$SYS.REQ.SERVER.%s.LDM"
	authErrorEventSubj        = "$SYS.SERVER.%s.CLIENT.AUTH.ERR"
	authErrorAccountEventSubj = "$SYS.ACCOUNT.CLIENT.AUTH.ERR"
	serverStatsSubj           = "$SYS.SERVER.%s.STATSZ"
	serverDirectReqSubj       = "$SYS.REQ.SERVER.%s.%s"
	serverPingReqSubj         = "$SYS.REQ.SERVER.PING.%s"
	serverStatsPingReqSubj    = "$SYS.REQ.SERVER.PING"
	serverReloadReqSubj       = "$SYS.REQ.SERVER.%s.RELOAD"
	userDirectInfoSubj        = "$SYS.REQ.USER.INFO"
	userDirectReqSubj         = "$SYS.REQ.USER.%s.INFO"
)

// Intervals, as nats-server's.
const (
	statszFirst     = 250 * time.Millisecond // first periodic STATSZ after start; doubles ...
	statszMax       = 10 * time.Second       // ... up to this
	statszRateLimit = time.Second            // at most one broadcast STATSZ per this (or per the current interval if shorter)
)

// accConnsHB is the SERVER.CONNS heartbeat while an account has connections (a variable for
// tests, as nats-server's).
var accConnsHB = 30 * time.Second

// sysImport is one service import the routing core sets up for the $SYS layer: requests on
// From in the importing account go to To in the system account. Share passes the
// requester's full ClientInfo (Nats-Request-Info) instead of only its account and RTT.
type sysImport struct {
	From, To string
	Share    bool
}

// sysImports are the imports every account other than the system account gets (in
// nats-server: registerSystemImports).
func sysImports(acc string) []sysImport {
	connz := fmt.Sprintf(accDirectReqSubj, acc, "CONNZ")
	return []sysImport{
		{From: fmt.Sprintf(accPingReqSubj, "CONNZ"), To: connz},
		{From: fmt.Sprintf(serverPingReqSubj, "CONNZ"), To: connz},
		{From: fmt.Sprintf(accPingReqSubj, "STATZ"), To: fmt.Sprintf(accDirectReqSubj, acc, "STATZ")},
		{From: userDirectInfoSubj, To: fmt.Sprintf(userDirectReqSubj, acc), Share: true},
	}
}

// sysExport is one service the system account exports. AccountPos is the token that must
// hold the importing account's name (0: any); Streamed answers may come from many servers.
type sysExport struct {
	Subject    string
	Streamed   bool
	AccountPos uint
}

// sysExportList is what the system account exports (addSystemAccountExports); it also imports
// its own user info: $SYS.REQ.USER.INFO -> $SYS.REQ.USER.<sys>.INFO, shared.
var sysExportList = []sysExport{
	{Subject: fmt.Sprintf(accDirectReqSubj, "*", "CONNZ"), Streamed: true, AccountPos: 4},
	{Subject: fmt.Sprintf(accDirectReqSubj, "*", "STATZ"), Streamed: true, AccountPos: 4},
	{Subject: fmt.Sprintf(userDirectReqSubj, "*")},
}

// sysImportsFor describes sysImports as /accountz shows them.
func sysImportsFor(acc, sys string) []ExtImport {
	var out []ExtImport
	for _, im := range sysImports(acc) {
		out = append(out, extServiceImport(im, sys))
	}
	return out
}

func sysOwnImports(sys string) []ExtImport {
	return []ExtImport{extServiceImport(sysImport{From: userDirectInfoSubj, To: fmt.Sprintf(userDirectReqSubj, sys), Share: true}, sys)}
}

func extServiceImport(im sysImport, sys string) ExtImport {
	return ExtImport{
		Subject: im.To, Account: sys, Type: "service",
		To: im.From, LocalSubject: im.From, Share: im.Share,
	}
}

func sysExports() []ExtExport {
	var out []ExtExport
	for _, e := range sysExportList {
		// nats-server's /accountz does not show the account token position.
		x := ExtExport{Subject: e.Subject, Type: "service", ApprovedAccounts: []string{}}
		if e.Streamed {
			x.ResponseType = "Streamed"
		} else {
			x.ResponseType = "Singleton"
		}
		out = append(out, x)
	}
	return out
}

// compression is the encoding of an answer, from the request's Accept-Encoding.
type compression int8

const (
	noCompression compression = iota
	gzipCompression
	snappyCompression
	unsupportedCompression
)

// sysMsg is one thing for the sender goroutine: a message to publish, or work to run there.
type sysMsg struct {
	subject, reply string
	account        string      // "": from the system account; else PublishAccount
	si             *ServerInfo // filled (seq, time ...) just before marshalling
	hdr            []byte
	v              any // marshalled to JSON ([]byte goes as is)
	compress       compression
	last           bool // SHUTDOWN: the sender stops after it

	run func() // instead of a message: state only the sender goroutine touches
}

// sysState is the running $SYS layer.
type sysState struct {
	s       *Server
	conn    sysConn
	account string
	id      string
	name    string
	host    string

	mu      sync.Mutex
	queue   []*sysMsg
	closed  bool // no more messages accepted (SHUTDOWN queued)
	subs    []sysSubRec
	sid     int
	wake    chan struct{}
	done    chan struct{}
	started time.Time

	eidMu sync.Mutex
	eids  *nuid.NUID

	// Owned by the sender goroutine.
	seq        uint64
	cstatsz    time.Duration // current STATSZ interval (doubles up to statszMax)
	nextStatsz time.Time
	lastStatsz time.Time
	connsHB    map[string]time.Time // account -> when its SERVER.CONNS heartbeat is due
}

type sysSubRec struct {
	subject, queue, sid string
	unsub               func()
}

// sysAccountName is the system account's name while the $SYS layer runs, else "".
func (s *Server) sysAccountName() string {
	if st := s.sys.Load(); st != nil {
		return st.account
	}
	return ""
}

// accounts is the account source in use.
func (s *Server) accounts() accountSource {
	if s.accs != nil {
		return s.accs
	}
	return globalSource{s}
}

func (s *Server) clients() clientControl {
	if s.ctl != nil {
		return s.ctl
	}
	return globalSource{s}
}

// SetAccountSource installs the routing core's view of accounts and clients, before Start.
func (s *Server) setAccountSource(a accountSource, c clientControl) {
	s.accs, s.ctl = a, c
}

// startSys starts the $SYS layer over conn, with account as the system account ("" for
// $SYS): it subscribes every request subject and starts the STATSZ heartbeat. The routing
// core calls it once the system account exists; stopSys (Shutdown) ends it.
func (s *Server) startSys(conn sysConn, account string) error {
	if account == "" {
		account = DefaultSystemAccount
	}
	o := s.getOpts()
	st := &sysState{
		s: s, conn: conn, account: account,
		id: s.id, name: o.ServerName, host: o.Host,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		eids: nuid.New(), connsHB: map[string]time.Time{},
		started: time.Now(),
	}
	if !s.sys.CompareAndSwap(nil, st) {
		return errors.New("system account events already running")
	}
	st.cstatsz = statszFirst
	st.nextStatsz = st.started.Add(statszFirst)
	go st.loop()
	if err := st.subscribeAll(); err != nil {
		s.stopSys()
		return err
	}
	return nil
}

// stopSys sends SHUTDOWN and stops the $SYS layer (a no-op when it is not running).
func (s *Server) stopSys() {
	st := s.sys.Load()
	if st == nil {
		return
	}
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		<-st.done
		return
	}
	subs := st.subs
	st.subs = nil
	st.mu.Unlock()
	for _, r := range subs {
		r.unsub()
	}
	si := &ServerInfo{}
	st.push(&sysMsg{subject: fmt.Sprintf(shutdownEventSubj, st.id), si: si, v: si, last: true})
	select {
	case <-st.done:
	case <-time.After(2 * time.Second):
	}
	if f, ok := st.conn.(sysFlusher); ok {
		_ = f.Flush(time.Second)
	}
	s.sys.CompareAndSwap(st, nil)
}

// sysLameDuck announces lame duck mode on $SYS.SERVER.<id>.LAMEDUCK. nats-server 2.15.2 also
// stops its whole $SYS sender there (no answers, no SHUTDOWN afterwards); natsd keeps serving
// $SYS until shutdown.
func (s *Server) sysLameDuck() {
	st := s.sys.Load()
	if st == nil {
		return
	}
	si := &ServerInfo{}
	st.push(&sysMsg{subject: fmt.Sprintf(lameDuckEventSubj, st.id), si: si, v: si})
}

// push queues m for the sender; false once SHUTDOWN is queued.
func (st *sysState) push(m *sysMsg) bool {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return false
	}
	if m.last {
		st.closed = true
	}
	st.queue = append(st.queue, m)
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
	return true
}

// runOnSender runs fn on the sender goroutine.
func (st *sysState) runOnSender(fn func()) { st.push(&sysMsg{run: fn}) }

// nextEventID is a unique advisory id (nats-server uses a NUID too).
func (st *sysState) nextEventID() string {
	st.eidMu.Lock()
	defer st.eidMu.Unlock()
	return st.eids.Next()
}

// loop is the sender goroutine: it publishes queued messages in order and runs the timers.
func (st *sysState) loop() {
	defer close(st.done)
	t := time.NewTimer(time.Until(st.nextDue()))
	defer t.Stop()
	for {
		select {
		case <-st.wake:
			st.mu.Lock()
			q := st.queue
			st.queue = nil
			st.mu.Unlock()
			for _, m := range q {
				if m.run != nil {
					m.run()
					continue
				}
				st.send(m)
				if m.last {
					return
				}
			}
		case now := <-t.C:
			st.timers(now)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(time.Until(st.nextDue()))
	}
}

// nextDue is the earliest timer: the next STATSZ or account heartbeat.
func (st *sysState) nextDue() time.Time {
	due := st.nextStatsz
	for _, d := range st.connsHB {
		if d.Before(due) {
			due = d
		}
	}
	return due
}

func (st *sysState) timers(now time.Time) {
	if !now.Before(st.nextStatsz) {
		if st.cstatsz < statszMax {
			st.cstatsz = min(2*st.cstatsz, statszMax)
		}
		st.nextStatsz = now.Add(st.cstatsz)
		st.broadcastStatsz(now)
	}
	for acc, due := range st.connsHB {
		if !now.Before(due) {
			st.accConnsUpdate(acc, now, fmt.Sprintf(accConnsEventSubjOld, acc), fmt.Sprintf(accConnsEventSubjNew, acc))
		}
	}
}

// send fills m's ServerInfo, encodes it and publishes it.
func (st *sysState) send(m *sysMsg) {
	if si := m.si; si != nil {
		st.seq++
		*si = ServerInfo{
			Name: st.name, Host: st.host, ID: st.id, Cluster: st.s.ClusterName(), Domain: st.s.jsDomain(), Version: ServerVersion,
			Seq: st.seq, Time: time.Now().UTC(),
		}
		if st.s.JetStream() != nil {
			// nats-server also sets BinaryStreamSnapshot and AccountNRG with JetStream on:
			// both tell cluster peers how to replicate with it (snapshot format, where Raft
			// traffic goes), which natsd, not clustered, does not do.
			si.JetStream, si.Flags = true, JetStreamEnabled
		}
	}
	var b []byte
	switch v := m.v.(type) {
	case nil:
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			st.s.log.Errorf("Error encoding $SYS message for %q: %v", m.subject, err)
			return
		}
	}
	hdr := m.hdr
	if enc := encodingName(m.compress); enc != "" {
		if len(b) > 0 {
			b = compress(m.compress, b)
		}
		hdr = fmt.Appendf(nil, "NATS/1.0\r\nContent-Encoding: %s\r\n\r\n", enc)
	}
	var err error
	if m.account != "" {
		err = st.conn.PublishAccount(m.account, m.subject, m.reply, hdr, b)
	} else {
		err = st.conn.Publish(m.subject, m.reply, hdr, b)
	}
	if err != nil {
		st.s.log.Debugf("$SYS publish on %q: %v", m.subject, err)
	}
}

func encodingName(c compression) string {
	switch c {
	case gzipCompression:
		return "gzip"
	case snappyCompression:
		return "snappy"
	case unsupportedCompression:
		return "identity"
	}
	return ""
}

func compress(c compression, b []byte) []byte {
	var bb bytes.Buffer
	switch c {
	case gzipCompression:
		zw := gzip.NewWriter(&bb)
		_, _ = zw.Write(b)
		_ = zw.Close()
	case snappyCompression:
		sw := s2.NewWriter(&bb, s2.WriterSnappyCompat())
		_, _ = sw.Write(b)
		_ = sw.Close()
	default:
		return b
	}
	return bb.Bytes()
}

// acceptEncoding reads a request's Accept-Encoding: s2/snappy first, then gzip; anything
// else is answered uncompressed with "Content-Encoding: identity".
func acceptEncoding(hdr []byte) compression {
	ae := strings.ToLower(headerValue(hdr, "Accept-Encoding"))
	switch {
	case ae == "":
		return noCompression
	case strings.Contains(ae, "snappy") || strings.Contains(ae, "s2"):
		return snappyCompression
	case strings.Contains(ae, "gzip"):
		return gzipCompression
	}
	return unsupportedCompression
}

// headerValue is the value of key (matched exactly, as nats-server does) in a NATS header
// block, "" when absent.
func headerValue(hdr []byte, key string) string {
	lines := strings.Split(string(hdr), "\r\n")
	for _, l := range lines[min(1, len(lines)):] {
		k, v, ok := strings.Cut(l, ":")
		if ok && k == key {
			return strings.TrimLeft(v, " ")
		}
	}
	return ""
}
