package loop

import (
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/outbound"
)

// TLSConfig is client TLS. gnet carries no TLS, so a TLS-configured server takes every
// client connection through tlsDriver: Go's crypto/tls on a reader and a writer goroutine per
// connection, feeding the same client state machine on a small set of serial reactors. The
// reactors never block: reads land in the connection's inbound buffer, writes are queued.
type TLSConfig struct {
	Config  *tls.Config
	Timeout time.Duration // handshake timeout
	// HandshakeFirst: TLS before INFO. With FallbackDelay > 0, a client that sends nothing
	// within the delay gets INFO first (handshake_first: auto).
	HandshakeFirst bool
	FallbackDelay  time.Duration
	// AllowNonTLS lets clients that do not start a handshake after INFO stay in plaintext.
	AllowNonTLS bool
}

const closeTLSHandshake = "TLS Handshake Failure"

// tlsReadChunk is the read size of a connection's reader goroutine; tlsInboundMax bounds
// what a connection buffers before its reader waits for the reactor to consume.
const (
	tlsReadChunk  = 32 * 1024
	tlsInboundMax = 1 << 20
)

// tlsDriver accepts with a Go listener; each connection runs on goroutines and is assigned
// to one of the serial reactors.
type tlsDriver struct {
	e     *Engine
	ln    net.Listener
	execs []*serial
	next  atomic.Uint64
	wg    sync.WaitGroup

	mu      sync.Mutex
	conns   map[*tlsConn]struct{}
	stopped bool

	// cur is the TLS configuration new connections use; a reload swaps it (certificates,
	// verification, timeouts) while established sessions keep theirs.
	cur atomic.Pointer[TLSConfig]
}

// SetTLS replaces the client TLS settings for connections accepted from now on. TLS cannot
// be switched on or off at run time: the listener's driver depends on it.
func (e *Engine) SetTLS(t *TLSConfig) error {
	d, ok := e.drv.(*tlsDriver)
	if !ok || t == nil {
		return errors.New("TLS cannot be enabled or disabled without a restart")
	}
	d.cur.Store(t)
	return nil
}

func (d *tlsDriver) start() (*net.TCPAddr, error) {
	cfg := &d.e.cfg
	port := cfg.Port
	if port < 0 {
		port = 0
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	d.ln = ln
	d.conns = make(map[*tlsConn]struct{})
	d.cur.Store(cfg.TLS)
	for i := 0; i < cfg.Reactors; i++ {
		x := newSerial(nil)
		d.execs = append(d.execs, x)
		d.e.reactorFor(x, x).waiting = x.waiting
	}
	addr := ln.Addr().(*net.TCPAddr)
	d.e.listening(addr)
	d.wg.Add(1)
	go d.acceptLoop()
	return addr, nil
}

func (d *tlsDriver) acceptLoop() {
	defer d.wg.Done()
	delay := 5 * time.Millisecond
	for {
		nc, err := d.ln.Accept()
		if err != nil {
			d.mu.Lock()
			stopped := d.stopped
			d.mu.Unlock()
			if stopped {
				return
			}
			time.Sleep(delay)
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		x := d.execs[int(d.next.Add(1)%uint64(len(d.execs)))]
		c := &tlsConn{d: d, raw: nc, nc: nc, ex: x, wsig: make(chan struct{}, 1), room: make(chan struct{}, 1),
			resume: make(chan struct{}, 1), quit: make(chan struct{})}
		d.mu.Lock()
		if d.stopped {
			d.mu.Unlock()
			nc.Close()
			return
		}
		d.conns[c] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go c.serve()
	}
}

func (d *tlsDriver) stop() {
	d.mu.Lock()
	d.stopped = true
	conns := make([]*tlsConn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	_ = d.ln.Close()
	for _, c := range conns {
		c.abort()
	}
	d.wg.Wait()
	for _, x := range d.execs {
		x.stop()
	}
}

// tlsConn implements Conn over a net.Conn that is (usually) a *tls.Conn.
type tlsConn struct {
	d   *tlsDriver
	tc  *TLSConfig // the settings in force when it was accepted
	raw net.Conn   // the TCP socket
	nc  net.Conn   // what is read and written: raw, or the TLS session over it
	ex  *serial
	r   *reactor
	c   *client

	state *tls.ConnectionState
	// wd is the write deadline, read from the engine's config on the reactor when the
	// connection opens (reload writes e.cfg while only the reactors are parked).
	wd time.Duration

	sched atomic.Bool // a traffic task is queued
	task  func()

	mu      sync.Mutex
	in      []byte
	rd      int
	out     [][]byte // pooled outbound chunks: a backlog up to max_pending never needs one big copy
	closing bool     // Close was called: flush, then close
	dead    bool     // the socket is gone
	writing bool     // the writer goroutine runs

	pending atomic.Int64 // queued outbound bytes not yet written
	// paused stops the reader after the chunk it has (SetReading); resume wakes it.
	paused atomic.Bool
	resume chan struct{}
	wsig   chan struct{}
	room   chan struct{}
	quit   chan struct{}
	quitO  sync.Once
}

func (t *tlsConn) TLSState() *tls.ConnectionState { return t.state }
func (t *tlsConn) RemoteAddr() net.Addr           { return t.raw.RemoteAddr() }

func (t *tlsConn) Peek(int) ([]byte, error) {
	t.mu.Lock()
	b := t.in[t.rd:]
	t.mu.Unlock()
	return b, nil
}

func (t *tlsConn) Discard(n int) (int, error) {
	t.mu.Lock()
	avail := len(t.in) - t.rd
	if n <= 0 || n > avail {
		n = avail
	}
	t.rd += n
	if t.rd == len(t.in) {
		// Drained: a buffer grown by a burst goes back to the heap rather than stay with an
		// idle connection.
		if cap(t.in) > 2*tlsReadChunk {
			t.in = nil
		}
		t.in, t.rd = t.in[:0], 0
	} else if t.rd > 64*1024 && t.rd > len(t.in)/2 {
		m := copy(t.in, t.in[t.rd:])
		t.in, t.rd = t.in[:m], 0
	}
	left := len(t.in) - t.rd
	t.mu.Unlock()
	if left < tlsInboundMax {
		select {
		case t.room <- struct{}{}:
		default:
		}
	}
	return n, nil
}

func (t *tlsConn) InboundBuffered() int {
	t.mu.Lock()
	n := len(t.in) - t.rd
	t.mu.Unlock()
	return n
}

func (t *tlsConn) Writev(bs [][]byte) (int, error) {
	n := 0
	t.mu.Lock()
	if t.dead || t.closing {
		t.mu.Unlock()
		return 0, net.ErrClosed
	}
	for _, b := range bs {
		n += len(b)
		t.out = outbound.AppendChunks(t.out, b)
	}
	t.mu.Unlock()
	t.pending.Add(int64(n))
	t.signalWriter()
	return n, nil
}

func (t *tlsConn) signalWriter() {
	select {
	case t.wsig <- struct{}{}:
	default:
	}
}

func (t *tlsConn) OutboundBuffered() int { return int(t.pending.Load()) }

// Close flushes what is queued, then closes; before the writer runs (handshake), at once.
func (t *tlsConn) Close() error {
	t.mu.Lock()
	if t.closing || t.dead {
		t.mu.Unlock()
		return nil
	}
	t.closing = true
	writing := t.writing
	t.mu.Unlock()
	if !writing {
		t.abort()
		return nil
	}
	t.signalWriter()
	return nil
}

// abort closes the socket now; the reader then reports the close to the reactor.
func (t *tlsConn) abort() {
	t.mu.Lock()
	t.dead = true
	for _, c := range t.out {
		t.pending.Add(-int64(len(c)))
		outbound.PutChunk(c)
	}
	t.out = nil
	t.mu.Unlock()
	t.quitO.Do(func() { close(t.quit) })
	_ = t.raw.Close()
}

// SetReading stops the reader goroutine before its next read: bytes then stay in the
// kernel, as on the other engines.
func (t *tlsConn) SetReading(on bool) {
	if t.paused.Swap(!on) && on {
		select {
		case t.resume <- struct{}{}:
		default:
		}
	}
}

func (t *tlsConn) Wake() error {
	if t.sched.CompareAndSwap(false, true) {
		return t.ex.Execute(t.task)
	}
	return nil
}

// serve runs the connection: greeting and handshake in the configured order, then reads.
func (t *tlsConn) serve() {
	d := t.d
	e := d.e
	defer func() {
		d.mu.Lock()
		delete(d.conns, t)
		d.mu.Unlock()
		d.wg.Done()
	}()
	t.r = e.reactorFor(t.ex, t.ex)
	tc := d.cur.Load()
	t.tc = tc
	var pre []byte
	hsFirst := tc.HandshakeFirst
	if hsFirst && tc.FallbackDelay > 0 {
		b, timedOut, err := t.readFirst(tc.FallbackDelay)
		switch {
		case timedOut:
			hsFirst = false
		case err != nil:
			t.abort()
			return
		default:
			pre = b
		}
	}
	if hsFirst {
		if !t.handshake(pre) {
			t.abort()
			return
		}
		pre = nil
		if !t.open(func(g []byte) error { _, err := t.nc.Write(g); return err }) {
			return
		}
	} else {
		if !t.open(func(g []byte) error { _, err := t.raw.Write(g); return err }) {
			return
		}
		tlsNow := true
		if tc.AllowNonTLS {
			b, _, err := t.readFirst(0)
			if err != nil {
				t.closed("")
				return
			}
			pre = b
			tlsNow = len(b) > 0 && b[0] == 0x16 // a TLS record: ClientHello
		}
		if tlsNow {
			if !t.handshake(pre) {
				t.closed(closeTLSHandshake)
				return
			}
			pre = nil
		}
	}
	t.mu.Lock()
	t.writing = true
	closing := t.closing
	t.mu.Unlock()
	go t.writer()
	if closing {
		t.signalWriter()
	}
	if len(pre) > 0 {
		t.push(pre)
	}
	buf := make([]byte, tlsReadChunk)
	for {
		n, err := t.nc.Read(buf)
		if n > 0 && !t.push(buf[:n]) {
			break
		}
		if err != nil {
			break
		}
	}
	t.closed("")
}

// readFirst reads the first bytes the client sends, waiting at most d (0: no limit).
func (t *tlsConn) readFirst(d time.Duration) (b []byte, timedOut bool, err error) {
	if d > 0 {
		_ = t.raw.SetReadDeadline(time.Now().Add(d))
	}
	buf := make([]byte, 1024)
	n, err := t.raw.Read(buf)
	if d > 0 {
		_ = t.raw.SetReadDeadline(time.Time{})
	}
	var ne net.Error
	if n == 0 && errors.As(err, &ne) && ne.Timeout() {
		return nil, true, nil
	}
	if n > 0 {
		return buf[:n], false, nil
	}
	return nil, false, err
}

// handshake runs the server side of TLS within the handshake timeout; pre holds bytes
// already read from the socket.
func (t *tlsConn) handshake(pre []byte) bool {
	tc := t.tc
	var under net.Conn = t.raw
	if len(pre) > 0 {
		under = &prefixConn{Conn: t.raw, pre: pre}
	}
	s := tls.Server(under, tc.Config)
	if tc.Timeout > 0 {
		_ = t.raw.SetDeadline(time.Now().Add(tc.Timeout))
	}
	err := s.Handshake()
	_ = t.raw.SetDeadline(time.Time{})
	if err != nil {
		if l := t.d.e.cfg.Log; l != nil {
			l.Errorf("%s - TLS handshake error: %v", t.raw.RemoteAddr(), err)
		}
		return false
	}
	st := s.ConnectionState()
	t.state = &st
	t.nc = s
	return true
}

// open creates the client on the reactor and writes its greeting with write. It reports
// whether the connection goes on.
func (t *tlsConn) open(write func([]byte) error) bool {
	e := t.d.e
	type res struct {
		c        *client
		greeting []byte
		ok       bool
		wd       time.Duration
	}
	ch := make(chan res, 1)
	if t.ex.Execute(func() {
		wd := e.cfg.WriteDeadline
		c, g, ok := e.open(t, t.r)
		if ok {
			t.c = c
			t.task = func() {
				t.sched.Store(false)
				if c.closed {
					return
				}
				if e.traffic(c) {
					_ = t.Close()
				} else if c.yielded {
					_ = t.Wake()
				}
			}
		}
		ch <- res{c, g, ok, wd}
	}) != nil {
		t.abort()
		return false
	}
	var r res
	select {
	case r = <-ch:
	case <-t.quit:
		return false
	}
	if !r.ok {
		if len(r.greeting) > 0 {
			_ = t.raw.SetWriteDeadline(time.Now().Add(time.Second))
			_ = write(r.greeting)
		}
		t.abort()
		return false
	}
	t.wd = r.wd
	if r.wd > 0 {
		_ = t.raw.SetWriteDeadline(time.Now().Add(r.wd))
	}
	if err := write(r.greeting); err != nil {
		t.closed("")
		return false
	}
	_ = t.raw.SetWriteDeadline(time.Time{})
	return true
}

// push appends decrypted bytes and schedules traffic processing; it waits while the
// reactor is far behind. It reports false once the connection is gone.
func (t *tlsConn) push(b []byte) bool {
	t.mu.Lock()
	if t.dead {
		t.mu.Unlock()
		return false
	}
	t.in = append(t.in, b...)
	over := len(t.in)-t.rd >= tlsInboundMax
	t.mu.Unlock()
	_ = t.Wake()
	for over || t.paused.Load() {
		select {
		case <-t.room:
		case <-t.resume:
		case <-t.quit:
			return false
		}
		over = t.InboundBuffered() >= tlsInboundMax
	}
	return true
}

// closed tears the connection down and tells the reactor, once.
func (t *tlsConn) closed(reason string) {
	t.abort()
	c := t.c
	if c == nil {
		return
	}
	e := t.d.e
	_ = t.ex.Execute(func() {
		if reason != "" && c.reason == "" {
			c.reason = reason
		}
		e.connClosed(c)
	})
}

// writer sends queued bytes in batches; after Close it flushes and closes the socket.
func (t *tlsConn) writer() {
	wd := t.wd
	for {
		select {
		case <-t.wsig:
		case <-t.quit:
			return
		}
		for {
			t.mu.Lock()
			chunks := t.out
			t.out = nil
			closing := t.closing
			t.mu.Unlock()
			for i, c := range chunks {
				if wd > 0 {
					_ = t.raw.SetWriteDeadline(time.Now().Add(wd))
				}
				_, err := t.nc.Write(c)
				t.pending.Add(-int64(len(c)))
				outbound.PutChunk(c)
				chunks[i] = nil
				if err != nil {
					for _, rest := range chunks[i+1:] {
						t.pending.Add(-int64(len(rest)))
						outbound.PutChunk(rest)
					}
					t.abort()
					return
				}
			}
			t.mu.Lock()
			more := len(t.out) > 0
			t.mu.Unlock()
			if more {
				continue
			}
			if closing {
				if s, ok := t.nc.(*tls.Conn); ok {
					_ = t.raw.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
					_ = s.CloseWrite()
				}
				t.abort()
				return
			}
			break
		}
	}
}

// prefixConn replays bytes already read before the rest of the socket.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
