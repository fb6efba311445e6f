package loop

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/outbound"
)

// tlsLayer is TLS as a connection adapter: it sits between an engine's connection (gnet,
// netpoll) and the client state machine, on the same reactor, so a TLS connection is served
// like a plain one: no goroutine, and no buffer of its own while it is idle.
//
// Only the handshake leaves the reactor: crypto/tls runs it on a goroutine (hsConn), fed the
// bytes the reactor reads and writing through the reactor; at most hsGate handshakes compute
// at once, so an accept storm leaves the reactors their cores. Once established, a TLS 1.3
// session's records are opened and sealed on the reactor by record13, with the application
// traffic secrets crypto/tls reports through its key log hook; a TLS 1.2 session (or an
// unusual suite) keeps crypto/tls's record layer, driven without blocking through the same
// hsConn. Both leave certificate checks, the key schedule and every handshake rule to the
// standard library, so its security fixes apply here unchanged (README "TLS").
//
// The layer serves clients (the server side of their sessions) and routes: an accepted route
// is the server side, a dialled one the client side (route_tls.go); both start TLS before a
// byte of the route protocol, as nats-server's routes do.
type tlsLayer struct {
	Conn // the engine's connection: raw bytes
	e    *Engine
	ex   Executor
	tc   *TLSConfig
	c    *client
	kick func() // runs traffic again on the reactor (bytes arrived off the engine's buffer)

	state    uint8
	greeting []byte   // handshake first: INFO waits for the session
	held     [][]byte // plaintext written before the session is up, in pooled chunks
	heldN    int

	hs  atomic.Pointer[hsConn] // the handshake in progress, or the TLS 1.2 adapter
	rec *record13              // an established TLS 1.3 session on the reactor
	std *tls.Conn              // an established session crypto/tls keeps (TLS 1.2)
	raw []byte                 // TLS 1.3 records read during the handshake, not yet opened

	plainBuf           // opened application data
	wout     []byte    // std's ciphertext while it runs on the reactor
	iov      [1][]byte // send's one-buffer writev (a literal would be allocated per write)

	hsHold bool // reading stopped: the handshake holds hsFeedMax unread (feedHandshake)
	first  bool // the handshake came before INFO (handshake_first, and no fallback)

	// route: a route connection, whose session always comes first; client: this end dials,
	// so it is the session's client, verifying the peer as serverName (unless the config
	// names one). failed hears why a handshake failed (route_tls.go: the saved TLS name).
	route, client bool
	// started: "Starting TLS client connection handshake" is logged (a client's, once);
	// noted: closing has handled the peer leaving.
	started, noted bool
	serverName     string
	failed         func(error)
	// lateLog: the connection closed while crypto/tls was running this handshake; its
	// outcome, when it comes, is what is logged (it says why better than an EOF).
	lateLog *hsConn

	vers, suite uint16
	peer        []*x509.Certificate
	ended       bool // the session is over (close_notify, or a bad record): read nothing more
	timer       *time.Timer
}

const (
	tlsSniff   = iota // handshake first with a fallback delay: has the client spoken?
	tlsHello          // INFO sent: waiting for the ClientHello (or, with allow_non_tls, plaintext)
	tlsShaking        // crypto/tls is running the handshake
	tlsOpen           // established
	tlsPlain          // allow_non_tls: the client stayed in plaintext
	tlsDead
)

const closeTLSHandshake = "TLS Handshake Failure"

// tlsOpenWindow is how much plaintext one turn opens ahead of the parser (unless the frame
// it waits for is larger): opening costs about 0.5 ns a byte before parsing starts, and a
// connection's turn is meant to last about turnTime, so that others on the reactor wait
// little behind a flood.
const tlsOpenWindow = 64 << 10

// tlsWriteBatch is how much ciphertext the layer seals before it hands it to the engine.
const tlsWriteBatch = 128 << 10

var cipherPool = sync.Pool{New: func() any { b := make([]byte, 0, tlsWriteBatch+sealedLen(maxPlaintext)); return &b }}

// Opened plaintext lives in pooled buffers of three sizes: most turns need a few KiB, a busy
// connection a window (tlsOpenWindow) and a record, a large message up to max_payload. A
// buffer goes back when drained.
const (
	plainSmall  = 32 << 10
	plainMedium = tlsOpenWindow + 2*(recordHeaderLen+maxCiphertext)
	plainLarge  = 1<<20 + 2*(recordHeaderLen+maxCiphertext)
)

var tlsPlainClasses = newPlainClasses(plainSmall, plainMedium, plainLarge)

// newTLSLayer wraps conn for the TLS settings tc; start then sends or holds the greeting.
func newTLSLayer(e *Engine, conn Conn, ex Executor, tc *TLSConfig, kick func()) *tlsLayer {
	return &tlsLayer{Conn: conn, e: e, ex: ex, tc: tc, kick: kick}
}

// start takes the client's greeting (INFO) and returns what to send now, in plaintext.
// With handshake_first the greeting waits for the session; with a fallback delay, for the
// delay or the client's first bytes, whichever comes first.
func (l *tlsLayer) start(c *client, greeting []byte) []byte {
	l.c = c
	if l.tc.Timeout > 0 {
		l.timer = time.AfterFunc(l.tc.Timeout, func() { _ = l.ex.Execute(l.timedOut) })
	}
	if l.route {
		// TLS first, both ways: the dialling side says ClientHello at once, the accepting
		// side waits for it; CONNECT and INFO travel inside the session.
		l.greeting, l.first, l.state = greeting, true, tlsHello
		if l.client {
			l.startHandshake()
		}
		return nil
	}
	if !l.tc.HandshakeFirst {
		l.state = tlsHello
		if !l.tc.AllowNonTLS {
			// nats-server starts the handshake as soon as it has sent INFO.
			l.logStart()
		}
		return greeting
	}
	l.greeting, l.first = greeting, true
	if l.tc.FallbackDelay > 0 {
		l.state = tlsSniff
		time.AfterFunc(l.tc.FallbackDelay, func() { _ = l.ex.Execute(l.fallback) })
	} else {
		l.state = tlsHello
	}
	return nil
}

// greetsInSession: the greeting waits for the session (handshake_first, or a route); a
// refusal at accept then sends no INFO.
func (l *tlsLayer) greetsInSession() bool { return l.route || l.tc.HandshakeFirst }

// fallback: the client said nothing within the delay, so it waits for INFO (handshake_first:
// auto) and starts TLS after it.
func (l *tlsLayer) fallback() {
	if l.state != tlsSniff {
		return
	}
	l.state, l.first = tlsHello, false
	g := l.greeting
	l.greeting = nil
	_ = l.send(g)
}

func (l *tlsLayer) timedOut() {
	if l.state <= tlsShaking {
		if l.route && l.c != nil && l.e.cfg.Log != nil {
			l.e.cfg.Log.Errorf("%s:%d - rid:%d - TLS handshake timeout", l.c.ip, l.c.port, l.c.cid)
		}
		l.handshakeFailed(errHandshakeTimeout{})
	}
}

// TLSState reports the session's parameters (nil until it is established).
func (l *tlsLayer) TLSState() *tls.ConnectionState {
	if l.state != tlsOpen {
		return nil
	}
	return &tls.ConnectionState{Version: l.vers, CipherSuite: l.suite, HandshakeComplete: true, PeerCertificates: l.peer}
}

func (l *tlsLayer) Peek(n int) ([]byte, error) {
	if l.state == tlsPlain {
		return l.Conn.Peek(n)
	}
	if l.rd == len(l.plain) {
		l.pump()
	}
	b := l.plain[l.rd:]
	if n > 0 && n < len(b) {
		b = b[:n]
	}
	l.seen = l.rd + len(b)
	return b, nil
}

// unseen reports whether plaintext the engine has not looked at since its last Peek is
// enough to parse on (need: the size the parser waits for).
func (l *tlsLayer) unseen(need int) bool {
	return l.state == tlsOpen && len(l.plain) > l.seen && len(l.plain)-l.rd >= max(need, 1)
}

func (l *tlsLayer) Discard(n int) (int, error) {
	if l.state == tlsPlain {
		return l.Conn.Discard(n)
	}
	avail := len(l.plain) - l.rd
	if n <= 0 {
		_, _ = l.Conn.Discard(-1)
		l.raw = nil
		n = avail
	} else if n > avail {
		n = avail
	}
	l.rd += n
	if l.rd == len(l.plain) {
		l.releasePlain()
	}
	return n, nil
}

func (l *tlsLayer) InboundBuffered() int {
	if l.state == tlsPlain {
		return l.Conn.InboundBuffered()
	}
	l.pump()
	return len(l.plain) - l.rd
}

// SetReading keeps the socket unread while the handshake has all it may hold.
func (l *tlsLayer) SetReading(on bool) {
	l.Conn.SetReading(on && !l.hsHold)
}

func (l *tlsLayer) OutboundBuffered() int { return l.Conn.OutboundBuffered() + l.heldN }

func (l *tlsLayer) Writev(bs [][]byte) (int, error) {
	switch l.state {
	case tlsPlain:
		return l.Conn.Writev(bs)
	case tlsOpen:
		if l.rec != nil {
			return l.seal(bs)
		}
		return l.writeStd(bs)
	case tlsDead:
		return 0, net.ErrClosed
	}
	n := 0
	for _, b := range bs {
		n += len(b)
		l.held = outbound.AppendChunks(l.held, b)
	}
	l.heldN += n
	return n, nil
}

// seal encrypts bs into records of at most maxPlaintext bytes and hands them to the engine
// in batches of tlsWriteBatch.
func (l *tlsLayer) seal(bs [][]byte) (int, error) {
	total := 0
	for _, b := range bs {
		total += len(b)
	}
	bp := cipherPool.Get().(*[]byte)
	out := (*bp)[:0]
	bi, off := 0, 0
	var err error
	for left := total; left > 0; {
		m := min(left, maxPlaintext)
		if cap(out)-len(out) < sealedLen(m) {
			if err = l.send(out); err != nil {
				break
			}
			out = out[:0]
		}
		dst := out[len(out)+recordHeaderLen : len(out)+recordHeaderLen+m]
		for k := 0; k < m; {
			c := copy(dst[k:], bs[bi][off:])
			k += c
			if off += c; off == len(bs[bi]) {
				bi, off = bi+1, 0
			}
		}
		out = l.rec.seal(out, m, recordApplicationData)
		left -= m
	}
	if err == nil && len(out) > 0 {
		err = l.send(out)
	}
	*bp = out[:0]
	cipherPool.Put(bp)
	if err != nil {
		return 0, err
	}
	return total, nil
}

// writeStd runs crypto/tls's record layer: it writes through hsConn into l.wout.
func (l *tlsLayer) writeStd(bs [][]byte) (int, error) {
	total := 0
	cp := (*tlsPlainClasses)[0].pool.Get().(*[]byte)
	chunk := (*cp)[:maxPlaintext]
	defer (*tlsPlainClasses)[0].pool.Put(cp)
	k := 0
	var err error
	for _, b := range bs {
		total += len(b)
		for len(b) > 0 && err == nil {
			c := copy(chunk[k:], b)
			b, k = b[c:], k+c
			if k == len(chunk) {
				_, err = l.std.Write(chunk[:k])
				k = 0
			}
		}
	}
	if k > 0 && err == nil {
		_, err = l.std.Write(chunk[:k])
	}
	if ferr := l.flushStd(); err == nil {
		err = ferr
	}
	if err != nil {
		return 0, err
	}
	return total, nil
}

// send writes one buffer to the engine (on the reactor).
func (l *tlsLayer) send(b []byte) error {
	l.iov[0] = b
	_, err := l.Conn.Writev(l.iov[:])
	l.iov[0] = nil
	return err
}

func (l *tlsLayer) flushStd() error {
	if len(l.wout) == 0 {
		return nil
	}
	err := l.send(l.wout)
	if cap(l.wout) > tlsWriteBatch {
		l.wout = nil
	} else {
		l.wout = l.wout[:0]
	}
	return err
}

// Close closes the engine connection after what is queued; safe from any goroutine.
func (l *tlsLayer) Close() error {
	if h := l.hs.Load(); h != nil {
		h.kill(net.ErrClosed) // a session crypto/tls keeps on the reactor does not look at it
	}
	return l.Conn.Close()
}

// closing runs on the reactor when the engine connection is gone, before the connection's
// close is handled: a peer that left before its session was up failed the handshake, which
// nats-server logs before the close, as "TLS Handshake Failure".
func (l *tlsLayer) closing() {
	if l.noted || l.state > tlsShaking || (l.c != nil && l.c.closing) || l.e.stopping.Load() {
		return
	}
	l.noted = true
	if h := l.hs.Load(); l.state == tlsShaking && h != nil {
		// crypto/tls may have failed already (its alert made the peer hang up before
		// its verdict reached the reactor): established logs what it returns, and then
		// the close.
		l.lateLog = h
		if c := l.c; c != nil && !l.route {
			c.closeLogLate = true
		}
	} else {
		// The client left before its session was up: nats-server's handshake read
		// ends in EOF.
		l.logHandshakeError(io.EOF)
	}
	if c := l.c; c != nil && !l.route && c.reason == "" {
		c.reason = closeTLSHandshake
	}
}

// closed releases the layer once the engine connection is gone (on the reactor).
func (l *tlsLayer) closed() {
	l.closing()
	l.state = tlsDead
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if h := l.hs.Swap(nil); h != nil {
		if h == l.lateLog {
			h.kill(io.EOF) // what the peer sent before it left is still read
		} else {
			h.kill(net.ErrClosed)
		}
	}
	for _, b := range l.held {
		outbound.PutChunk(b)
	}
	l.held, l.heldN, l.greeting, l.raw, l.wout = nil, 0, nil, nil, nil
	l.releasePlain()
}

// pump moves what the engine has read: to the handshake, or through the record layer into
// plain. It opens records until the parser has a window's worth (or the frame it waits for)
// unconsumed: netpoll goes on reading while traffic runs, so "everything buffered" has no
// end. Input left behind makes the connection take another turn, as traffic does with what
// lies beyond its own window; meanwhile its socket is not read.
func (l *tlsLayer) pump() {
	switch l.state {
	case tlsSniff, tlsHello, tlsShaking:
		l.feedHandshake()
	case tlsOpen:
		if l.ended {
			_, _ = l.Conn.Discard(-1)
			return
		}
		limit := tlsOpenWindow
		if l.c != nil {
			limit = max(limit, l.c.need+maxCiphertext)
		}
		var capped bool
		if l.rec != nil {
			capped = l.open13(limit)
		} else {
			capped = l.openStd(limit)
		}
		if capped && l.c != nil {
			l.c.yielded = true
		}
	}
}

// hsFeedMax bounds what the handshake holds unread: a client's handshake flights are a few
// KiB (a certificate chain perhaps tens), and what it sends behind them waits in the engine's
// buffer and the kernel, as any other connection's unparsed input.
const hsFeedMax = 64 << 10

func (l *tlsLayer) feedHandshake() {
	n := l.Conn.InboundBuffered()
	if n == 0 {
		return
	}
	if l.state != tlsShaking {
		first, _ := l.Conn.Peek(1)
		if l.tc.AllowNonTLS && !l.route && first[0] != recordHandshake {
			// allow_non_tls: a client that answers INFO with anything but a ClientHello
			// stays in plaintext.
			l.plainNow()
			return
		}
		l.startHandshake()
	}
	h := l.hs.Load()
	if h == nil {
		_, _ = l.Conn.Discard(n)
		return
	}
	// Look at all of it (netpoll's pump then knows the rest was seen, and waits for a kick or
	// new bytes rather than run traffic again), take what fits.
	raw, _ := l.Conn.Peek(n)
	m := h.room(hsFeedMax, n)
	if l.hsHold = m < n; l.hsHold {
		// The rest waits, and the socket is not read; the handshake asks for more (kick)
		// once it has read what it holds.
		l.Conn.SetReading(false)
	}
	if m == 0 {
		return
	}
	h.feed(raw[:m])
	_, _ = l.Conn.Discard(m)
}

func (l *tlsLayer) plainNow() {
	l.state = tlsPlain
	l.stopTimer()
	held := l.held
	l.held, l.heldN = nil, 0
	if len(held) > 0 {
		_, _ = l.Conn.Writev(held)
	}
	for _, b := range held {
		outbound.PutChunk(b)
	}
}

func (l *tlsLayer) stopTimer() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// hsGate bounds the handshakes computing at once: all cores but one, so that an accept storm
// of TLS clients cannot take the reactors' CPU from established connections.
var hsGate = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))

// logStart logs a client's handshake starting, once, as nats-server does.
func (l *tlsLayer) logStart() {
	if !l.route && !l.started && l.c != nil {
		l.started = true
		l.c.debugf("Starting TLS client connection handshake")
	}
}

func (l *tlsLayer) startHandshake() {
	l.state = tlsShaking
	h := &hsConn{l: l, remote: l.Conn.RemoteAddr()}
	h.cond.L = &h.mu
	l.hs.Store(h)
	cfg := l.tc.Config.Clone()
	kc := &keyCapture{}
	cfg.KeyLogWriter = kc
	if l.route && l.c != nil && l.e.cfg.Log != nil {
		side := "server"
		if l.client {
			side = "client"
		}
		l.e.cfg.Log.Debugf("%s:%d - rid:%d - Starting TLS route %s handshake", l.c.ip, l.c.port, l.c.cid, side)
	}
	l.logStart()
	if l.client {
		// The server's certificate must name the host dialled (or the saved TLS name), as
		// nats-server's doTLSHandshake sets it; a configured server_name wins.
		if cfg.ServerName == "" {
			cfg.ServerName = l.serverName
		}
		go l.handshake(h, cfg, kc)
		return
	}
	// A session ticket is the one record crypto/tls may seal with the application key during
	// the handshake; counting them gives the record layer its starting sequence number.
	base := l.tc.Config
	cfg.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		kc.tickets.Add(1)
		if base.WrapSession != nil {
			return base.WrapSession(cs, ss)
		}
		return base.EncryptTicket(cs, ss)
	}
	if base.UnwrapSession == nil {
		// Tickets are sealed with the shared configuration's keys (the clone's own would
		// differ from one connection to the next), so they are opened with them too.
		cfg.UnwrapSession = func(id []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
			return base.DecryptTicket(id, cs)
		}
	}
	go l.handshake(h, cfg, kc)
}

// stormHandshakes: when this many handshakes have run since the last time none was in
// progress, the accept storm that is now over left its garbage (a handshake allocates tens of
// KiB), and the reclaimer hands it back rather than wait for the idle check.
const stormHandshakes = 512

func (l *tlsLayer) handshake(h *hsConn, cfg *tls.Config, kc *keyCapture) {
	e := l.e
	e.hsInflight.Add(1)
	e.hsSince.Add(1)
	defer func() {
		if e.hsInflight.Add(-1) == 0 && e.hsSince.Load() >= stormHandshakes {
			e.hsSince.Store(0)
			e.reclaim.soon()
		}
	}()
	hsGate <- struct{}{}
	h.gated = true
	var s *tls.Conn
	if l.client {
		s = tls.Client(h, cfg)
	} else {
		s = tls.Server(h, cfg)
	}
	err := s.Handshake()
	if h.gated {
		<-hsGate
		h.gated = false
	}
	var st tls.ConnectionState
	if err == nil {
		st = s.ConnectionState()
	}
	_ = l.ex.Execute(func() { l.established(h, s, &st, kc, err) })
}

// debugHandshakeDone writes nats-server's two debug lines for a client's finished handshake.
func debugHandshakeDone(c *client, st *tls.ConnectionState) {
	c.debugf("TLS handshake complete")
	c.debugf("TLS version %s, cipher suite %s", tlsVersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))
}

// established runs on the reactor when crypto/tls has finished the handshake.
func (l *tlsLayer) established(h *hsConn, s *tls.Conn, st *tls.ConnectionState, kc *keyCapture, err error) {
	if l.lateLog == h && h != nil {
		l.lateLog = nil
		if err == nil && !l.route {
			// The handshake was whole before the peer left (a client that hangs up right
			// after its Finished, as a readiness probe does): nats-server's handshake
			// succeeds there and its next read ends the connection as closed by the client.
			if c := l.c; c != nil {
				if c.reason == closeTLSHandshake {
					c.reason = closeClient
				}
				if c.closeLogLate && c.debugOn() {
					debugHandshakeDone(c, st)
					c.debugf("Client connection closed: %s", c.reason)
				}
			}
			return
		}
		if err == nil {
			// A route's TLS 1.3 client is done before the server has judged its
			// certificate: the server's alert, if it came before the hang-up, is what
			// the engine read last. The session reads it (h ends in io.EOF, so this
			// does not block).
			var b [1]byte
			if _, rerr := s.Read(b[:]); rerr != nil {
				err = rerr
			}
		}
		if err == nil || errors.Is(err, net.ErrClosed) {
			err = io.EOF // the peer left: the handshake read nothing more
		}
		l.logHandshakeError(err)
		if c := l.c; c != nil && c.closeLogLate {
			c.debugf("Client connection closed: %s", c.reason)
		}
		if l.failed != nil {
			l.failed(err)
		}
		return
	}
	if l.state != tlsShaking || l.hs.Load() != h {
		return
	}
	if err != nil {
		l.handshakeFailed(err)
		return
	}
	if !pinned(l.tc.PinnedCerts, st.PeerCertificates) {
		l.handshakeFailed(errCertNotPinned)
		return
	}
	l.stopTimer()
	l.hsHold = false
	l.vers, l.suite, l.peer = st.Version, st.CipherSuite, st.PeerCertificates
	left := h.takeRest()
	if st.Version == tls.VersionTLS13 && kc.client != nil && kc.server != nil {
		in, out := kc.client, kc.server
		if l.client {
			in, out = kc.server, kc.client
		}
		if rec, rerr := newRecord13(st.CipherSuite, in, out); rerr == nil {
			if l.client {
				// crypto/tls's client sends nothing under its application key during the
				// handshake, and reads nothing past the server's Finished: the server's
				// tickets are still in left, for the record layer.
				rec.client = true
			} else {
				rec.out.seq = uint64(kc.tickets.Load())
			}
			l.rec = rec
			l.raw = left
			l.hs.Store(nil)
		}
	}
	if l.rec == nil {
		// crypto/tls keeps the session; from now on it reads and writes on the reactor.
		h.goSync(l, left)
		l.std = s
	}
	l.state = tlsOpen
	if l.route && l.c != nil && l.e.cfg.Log != nil {
		lg, c := l.e.cfg.Log, l.c
		lg.Debugf("%s:%d - rid:%d - TLS handshake complete", c.ip, c.port, c.cid)
		lg.Debugf("%s:%d - rid:%d - TLS version %s, cipher suite %s", c.ip, c.port, c.cid, tlsVersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))
		// nats-server says a route is created once its session is up (openRoute did not).
		lg.Noticef("%s:%d - rid:%d - Route connection created", c.ip, c.port, c.cid)
	} else if c := l.c; c != nil && c.debugOn() {
		debugHandshakeDone(c, st)
	}
	if g := l.greeting; g != nil {
		l.greeting = nil
		_, _ = l.Writev([][]byte{g})
	}
	if held := l.held; len(held) > 0 {
		l.held, l.heldN = nil, 0
		_, _ = l.Writev(held)
		for _, b := range held {
			outbound.PutChunk(b)
		}
	}
	l.kick()
}

var errCertNotPinned = errors.New("certificate not pinned")

// pinned reports whether a client's chain passes pinned_certs (nil: no pinning).
func pinned(set map[string]struct{}, chain []*x509.Certificate) bool {
	if set == nil {
		return true
	}
	if len(chain) == 0 || chain[0] == nil {
		return false
	}
	sum := sha256.Sum256(chain[0].RawSubjectPublicKeyInfo)
	_, ok := set[hex.EncodeToString(sum[:])]
	return ok
}

func (l *tlsLayer) handshakeFailed(err error) {
	if l.state > tlsShaking {
		return
	}
	l.stopTimer()
	if h := l.hs.Swap(nil); h != nil {
		h.kill(err)
	}
	l.logHandshakeError(err)
	if l.failed != nil {
		l.failed(err)
	}
	l.state = tlsDead
	for _, b := range l.held {
		outbound.PutChunk(b)
	}
	l.held, l.heldN = nil, 0
	if c := l.c; c != nil && !c.closing && !c.closed {
		c.closing = true
		c.reason = closeTLSHandshake
	}
	_ = l.Conn.Close()
}

// errHandshakeTimeout is the handshake timeout, a net.Error as a read deadline's is.
type errHandshakeTimeout struct{}

func (errHandshakeTimeout) Error() string   { return "i/o timeout" }
func (errHandshakeTimeout) Timeout() bool   { return true }
func (errHandshakeTimeout) Temporary() bool { return true }

// logHandshakeError logs a failed handshake as nats-server does: at debug level what a
// load balancer's probe or a plaintext client causes (a timeout, a first record that is not
// TLS), as an error anything else, with the subjects and fingerprints of a chain that failed
// verification.
func (l *tlsLayer) logHandshakeError(err error) {
	lg := l.e.cfg.Log
	if lg == nil {
		return
	}
	var detail string
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) {
		subjs := make([]string, 0, len(ve.UnverifiedCertificates))
		for _, c := range ve.UnverifiedCertificates {
			fp := sha256.Sum256(c.Raw)
			subjs = append(subjs, fmt.Sprintf("%s SHA-256: %s", c.Subject.String(), hex.EncodeToString(fp[:])))
		}
		if len(subjs) > 0 {
			detail = " (" + strings.Join(subjs, "; ") + ")"
		}
	}
	if c := l.c; l.route && c != nil {
		// Always an error for routes: their port is not one load balancers probe.
		lg.Errorf("%s:%d - rid:%d - TLS route handshake error: %v%s", c.ip, c.port, c.cid, err, detail)
		return
	}
	logf := lg.Errorf
	var ne net.Error
	var rh tls.RecordHeaderError
	if errors.As(err, &ne) && ne.Timeout() || errors.As(err, &rh) && rh.Conn != nil {
		logf = lg.Debugf
	}
	if c := l.c; c != nil {
		logf("%s - TLS handshake error: %v%s", c.label(), err, detail)
	} else {
		logf("%s - TLS handshake error: %v%s", l.Conn.RemoteAddr(), err, detail)
	}
}

// sessionFailed ends an established session: the peer closed it, or sent what it must not.
// The state stays open (what the session was is still reported, /connz?state=closed) but
// nothing more is read from it.
func (l *tlsLayer) sessionFailed(err error) {
	l.ended = true
	if !errors.Is(err, errCloseNotify) && !errors.Is(err, io.EOF) {
		if lg := l.e.cfg.Log; lg != nil {
			lg.Debugf("%s - TLS error: %v", l.Conn.RemoteAddr(), err)
		}
	}
	if c := l.c; c != nil && !c.closing && !c.closed {
		c.closing = true
		c.reason = closeClient
	}
	_ = l.Conn.Close()
}

// open13 opens the whole records the engine holds into plain until limit bytes are
// unconsumed; it reports whether it stopped there with input left.
func (l *tlsLayer) open13(limit int) (capped bool) {
	for {
		room := limit - (len(l.plain) - l.rd)
		if room <= 0 {
			capped = l.Conn.InboundBuffered()+len(l.raw) >= recordHeaderLen
			break
		}
		var raw []byte
		held := len(l.raw) > 0
		if held {
			// Records read during the handshake come first. Only what completes the last of
			// them is taken from the engine; the rest is opened where it is.
			if need := partialTail(l.raw); need > 0 {
				if n := min(need, l.Conn.InboundBuffered()); n > 0 {
					more, _ := l.Conn.Peek(n)
					l.raw = append(l.raw, more...)
					_, _ = l.Conn.Discard(n)
				}
			}
			raw = l.raw
		} else {
			// Enough for room bytes of plaintext, and at least one whole record.
			n := min(l.Conn.InboundBuffered(), room+recordHeaderLen+maxCiphertext)
			if n < recordHeaderLen {
				break
			}
			raw, _ = l.Conn.Peek(n)
		}
		// Plaintext is never longer than its records: this is all the room open needs.
		l.plainFor(len(raw), tlsPlainClasses)
		used, plain, reply, err := l.rec.open(raw, l.plain, nil)
		l.plain = plain
		if held {
			if l.raw = l.raw[used:]; len(l.raw) == 0 {
				l.raw = nil
			}
		} else if used > 0 {
			_, _ = l.Conn.Discard(used)
		}
		if len(reply) > 0 {
			_ = l.send(reply)
		}
		if err != nil {
			l.sessionFailed(err)
			return false
		}
		if used == 0 || l.raw != nil {
			break // the rest of a record has not arrived
		}
	}
	if len(l.plain) == l.rd {
		l.releasePlain()
	}
	return capped
}

// partialTail is how many bytes the last record in raw lacks (its header first, if that is
// cut): 0 when raw ends on a record boundary.
func partialTail(raw []byte) int {
	for len(raw) > 0 {
		if len(raw) < recordHeaderLen {
			return recordHeaderLen - len(raw)
		}
		n := recordHeaderLen + (int(raw[3])<<8 | int(raw[4]))
		if len(raw) < n {
			return n - len(raw)
		}
		raw = raw[n:]
	}
	return 0
}

// openStd runs crypto/tls's record layer over what the engine holds, up to limit bytes
// unconsumed; it reports whether it stopped there with input left.
func (l *tlsLayer) openStd(limit int) (capped bool) {
	h := l.hs.Load()
	if n := min(l.Conn.InboundBuffered(), limit); n > 0 && len(h.in)-h.rd < limit {
		raw, _ := l.Conn.Peek(n)
		h.in = append(h.in, raw...)
		_, _ = l.Conn.Discard(n)
	}
	if len(h.in) == h.rd {
		return l.Conn.InboundBuffered() > 0
	}
	l.plainFor(min(len(h.in)-h.rd, limit)+maxPlaintext, tlsPlainClasses)
	for {
		if len(l.plain)-l.rd >= limit {
			capped = true
			break
		}
		l.plain = growTo(l.plain, maxPlaintext+1)
		n, err := l.std.Read(l.plain[len(l.plain):cap(l.plain)])
		l.plain = l.plain[:len(l.plain)+n]
		_ = l.flushStd()
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Temporary() { //nolint:staticcheck // crypto/tls's own test for a retryable read
				l.sessionFailed(err)
			}
			break
		}
		if n == 0 {
			break
		}
	}
	h.compact()
	if len(l.plain) == l.rd {
		l.releasePlain()
	}
	return capped || l.Conn.InboundBuffered() > 0
}

// keyCapture receives crypto/tls's key log lines for one handshake: the application traffic
// secrets are what record13 needs. Nothing is written anywhere.
type keyCapture struct {
	client, server []byte
	tickets        atomic.Int32
}

func (k *keyCapture) Write(line []byte) (int, error) {
	f := bytes.Fields(line)
	if len(f) == 3 {
		s, err := hex.DecodeString(string(f[2]))
		if err == nil {
			switch string(f[0]) {
			case "CLIENT_TRAFFIC_SECRET_0":
				k.client = s
			case "SERVER_TRAFFIC_SECRET_0":
				k.server = s
			}
		}
	}
	return len(line), nil
}

// hsConn is the net.Conn crypto/tls runs on. During the handshake (on its goroutine) Read
// waits for bytes the reactor feeds, and hands them out a record at a time so that nothing
// after the client's Finished is taken into crypto/tls's buffers; Write goes out through the
// reactor. Once a session stays with crypto/tls (sync), both run on the reactor: Read reports
// a retryable error when it has nothing, which crypto/tls leaves the session intact after.
type hsConn struct {
	l      *tlsLayer
	remote net.Addr
	mu     sync.Mutex
	cond   sync.Cond
	in     []byte
	rd     int
	cur    int // bytes left of the record being handed out
	err    error
	sync   bool
	gated  bool // holds a hsGate slot (handshake goroutine only)
	// starved: the reactor stopped feeding at hsFeedMax with bytes left in the engine.
	starved bool
}

func (h *hsConn) feed(b []byte) {
	h.mu.Lock()
	if h.err == nil {
		h.in = append(h.in, b...)
		h.cond.Signal()
	}
	h.mu.Unlock()
}

// room is how much of n bytes may be fed while at most limit wait unread. If that is not all
// of them, Read asks for the rest once it has used what it holds.
func (h *hsConn) room(limit, n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := min(n, max(limit-(len(h.in)-h.rd), 0))
	h.starved = m < n
	return m
}

func (h *hsConn) kill(err error) {
	h.mu.Lock()
	if h.err == nil {
		h.err = err
	}
	h.cond.Signal()
	h.mu.Unlock()
}

// takeRest ends the handshake: what is left unread are the client's first records.
func (h *hsConn) takeRest() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	rest := h.in[h.rd:]
	h.in, h.rd = nil, 0
	if len(rest) == 0 {
		return nil
	}
	return append([]byte(nil), rest...)
}

func (h *hsConn) goSync(l *tlsLayer, rest []byte) {
	h.mu.Lock()
	h.sync = true
	h.in, h.rd, h.cur = rest, 0, 0
	h.mu.Unlock()
}

func (h *hsConn) compact() {
	if h.rd == len(h.in) {
		h.in, h.rd = nil, 0
	} else if h.rd > 0 {
		n := copy(h.in, h.in[h.rd:])
		h.in, h.rd = h.in[:n], 0
	}
}

// errWouldBlock is the retryable read error of a session crypto/tls keeps.
type errWouldBlock struct{}

func (errWouldBlock) Error() string   { return "tls: no input buffered" }
func (errWouldBlock) Timeout() bool   { return false }
func (errWouldBlock) Temporary() bool { return true }

func (h *hsConn) Read(b []byte) (int, error) {
	if h.sync {
		if h.rd == len(h.in) {
			return 0, errWouldBlock{}
		}
		n := copy(b, h.in[h.rd:])
		h.rd += n
		return n, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		avail := len(h.in) - h.rd
		if h.err != nil {
			// A peer that left (io.EOF) may have sent its last records first (an alert):
			// crypto/tls reads them, as it would from a socket, before the end.
			whole := h.cur > 0 && avail > 0 || h.cur == 0 && avail >= recordHeaderLen
			if h.err != io.EOF || !whole {
				return 0, h.err
			}
		}
		if h.cur == 0 && avail >= recordHeaderLen {
			hdr := h.in[h.rd:]
			h.cur = recordHeaderLen + (int(hdr[3])<<8 | int(hdr[4]))
		}
		if h.cur > 0 && avail > 0 {
			n := copy(b, h.in[h.rd:h.rd+min(avail, h.cur)])
			h.rd += n
			h.cur -= n
			if h.rd == len(h.in) {
				h.in, h.rd = h.in[:0], 0
			}
			return n, nil
		}
		if h.starved {
			// What the reactor left behind is what we wait for: have it fed.
			h.starved = false
			h.mu.Unlock()
			h.l.kick()
			h.mu.Lock()
			continue
		}
		// Waiting for the client: the slot goes to a handshake that can compute.
		if h.gated {
			h.mu.Unlock()
			<-hsGate
			h.gated = false
			h.mu.Lock()
		}
		for h.err == nil && (len(h.in)-h.rd < recordHeaderLen && h.cur == 0 || len(h.in) == h.rd) {
			h.cond.Wait()
		}
		if h.err == nil {
			h.mu.Unlock()
			hsGate <- struct{}{}
			h.gated = true
			h.mu.Lock()
		}
	}
}

func (h *hsConn) Write(b []byte) (int, error) {
	l := h.l
	if h.sync {
		l.wout = append(l.wout, b...)
		return len(b), nil
	}
	cp := append([]byte(nil), b...)
	if err := l.ex.Execute(func() {
		if l.state == tlsShaking && l.hs.Load() == h {
			_ = l.send(cp)
		}
	}); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (h *hsConn) Close() error {
	if !h.sync {
		h.kill(net.ErrClosed)
	}
	return nil
}

func (h *hsConn) LocalAddr() net.Addr              { return nil }
func (h *hsConn) RemoteAddr() net.Addr             { return h.remote }
func (h *hsConn) SetDeadline(time.Time) error      { return nil }
func (h *hsConn) SetReadDeadline(time.Time) error  { return nil }
func (h *hsConn) SetWriteDeadline(time.Time) error { return nil }

// tlsVersionName is a protocol version as nats-server logs it ("1.3").
func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS10:
		return "1.0"
	case tls.VersionTLS11:
		return "1.1"
	case tls.VersionTLS12:
		return "1.2"
	case tls.VersionTLS13:
		return "1.3"
	}
	return fmt.Sprintf("Unknown [0x%x]", v)
}
