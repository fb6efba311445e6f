package loop

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
	"golang.org/x/sys/unix"

	"github.com/natsd/natsd/outbound"
)

// netpollDriver runs the engine on cloudwego/netpoll. netpoll has no fixed event loops of its
// own: it runs OnConnect/OnRequest on pooled goroutines. natsd maps that onto N virtual
// reactors (serial: a goroutine draining a task queue), assigns each connection to one of
// them, and runs the connection's state machine only there. The pooled goroutine that netpoll
// hands a readable connection to (the "pump") only schedules work on the connection's reactor,
// waits for it, and blocks in netpoll when a frame is incomplete or the publisher is stalled;
// an idle connection has no goroutine.
type netpollDriver struct {
	e     *Engine
	ln    netpoll.Listener
	evl   netpoll.EventLoop
	vrs   []*serial
	next  atomic.Uint32
	quit  chan struct{}
	done  chan struct{}
	conns sync.Map // *npConn -> struct{}: for stop

	// The cluster listener's event loop (netpoll_route.go); nil without a cluster.
	routeEvl  netpoll.EventLoop
	routeDone chan struct{}
}

var netpollInit sync.Once

// netpollBufferSize is netpoll's initial per-connection inbound buffer (its default is a page).
// Reads grow it as traffic requires; an idle connection keeps one node of this size.
const netpollBufferSize = 1024

// npConn adapts a netpoll connection to Conn. Inbound bytes are read in place from netpoll's
// linked buffer (Peek/Skip/Release, zero-copy unless a frame spans two nodes). Outbound bytes
// go straight to the socket with one non-blocking writev on the reactor; only what the kernel
// does not take is copied, into pooled chunks that a flusher goroutine hands to netpoll (whose
// Write blocks until sent), so the reactor never waits for a slow reader.
type npConn struct {
	d   *netpollDriver
	nc  netpoll.Connection
	fd  int
	vr  *serial
	r   *reactor
	c   *client
	ctx context.Context

	// wstate guards raw writes on fd against netpoll closing it: 0 idle, 1 writing, 2 closed.
	wstate atomic.Int32

	// Reads paused (reactor-only; netpoll_pause_linux.go); canPause is false where natsd
	// cannot rewrite the connection's epoll mask.
	interest npInterest
	canPause bool
	paused   bool

	// Backlog: bytes the kernel did not take, in order, and whether a flusher runs.
	mu       sync.Mutex
	backlog  [][]byte
	flushing bool
	closeReq bool
	pending  atomic.Int64

	// Pump hand-off: set by the reactor task before done is signalled.
	done      chan struct{}
	wake      chan struct{}
	closeConn bool
	parked    bool // stalled fast producer, or CONNECT being verified: only Wake resumes
	more      bool // the turn ended with complete frames left (client.yielded)
	need      int
	// seen is how many of the bytes still buffered the engine has looked at (Peek, less
	// what it discarded since). Bytes beyond it arrived while traffic
	// ran, after its Peek: netpoll does not signal them again (the pump holds the processing
	// lock, and its read trigger fired before anyone waited), so the pump must not mistake
	// them for the rest of an incomplete frame.
	seen int
	// seenAtDone is seen as runTraffic left it, for the pump: seen itself is the reactor's,
	// and a task run outside the pump (kickTraffic) may change it while the pump reads.
	seenAtDone int
	dead       bool // reactor-only: closed before or while opening

	iov [][]byte // reactor-only scratch for rawWritev

	tls *tlsLayer // client TLS, when the connection has it

	// A route connection (netpoll_route.go) opens with openRoute; intent is set when it was
	// dialled.
	route  bool
	intent *RouteIntent

	trafficTask func()
	closedTask  func()
}

func (d *netpollDriver) start() (*net.TCPAddr, error) {
	cfg := &d.e.cfg
	netpollInit.Do(func() {
		_ = netpoll.Configure(netpoll.Config{BufferSize: netpollBufferSize, LoggerOutput: netpollLog{}})
	})
	npLogger.Store(&d.e.cfg.Log)
	d.quit = make(chan struct{})
	d.done = make(chan struct{})
	port := cfg.Port
	if port < 0 {
		port = 0
	}
	ln, err := netpoll.CreateListener("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	d.ln = ln
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		ln.Close()
		return nil, errors.New("netpoll: unexpected listener address")
	}
	for i := 0; i < cfg.Reactors; i++ {
		v := newSerial(d.quit)
		d.vrs = append(d.vrs, v)
		d.e.reactorFor(v, v).waiting = v.waiting
	}
	d.e.listening(addr)
	evl, err := netpoll.NewEventLoop(d.onRequest,
		netpoll.WithOnPrepare(d.onPrepare),
		netpoll.WithOnConnect(d.onConnect),
	)
	if err != nil {
		ln.Close()
		close(d.quit)
		return nil, err
	}
	d.evl = evl
	go func() {
		_ = evl.Serve(ln)
		close(d.done)
	}()
	return addr, nil
}

func (d *netpollDriver) stop() {
	// Close every connection first: netpoll's Shutdown waits for connections it deems busy,
	// and a pump blocked waiting for the rest of a frame counts as busy.
	d.conns.Range(func(k, _ any) bool {
		_ = k.(*npConn).nc.Close()
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	shutdownEventLoop(ctx, d.evl, d.done)
	cancel()
	// Let the reactors run the close tasks just queued, then stop them.
	for _, v := range d.vrs {
		ch := make(chan struct{})
		if v.Execute(func() { close(ch) }) == nil {
			select {
			case <-ch:
			case <-time.After(2 * time.Second):
			}
		}
	}
	close(d.quit)
}

// shutdownEventLoop shuts evl down and waits for its Serve, which closes done, to return.
// netpoll's Shutdown does nothing before Serve has registered the listener, so a Shutdown
// right after start is repeated until one takes.
func shutdownEventLoop(ctx context.Context, evl netpoll.EventLoop, done <-chan struct{}) {
	for {
		_ = evl.Shutdown(ctx)
		select {
		case <-done:
			// Serve also returns when the listener fails, leaving its server behind.
			_ = evl.Shutdown(ctx)
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// onPrepare runs on netpoll's accept path, before the socket is registered for reads.
func (d *netpollDriver) onPrepare(conn netpoll.Connection) context.Context {
	return d.newConn(conn, false, nil).ctx
}

// newConn sets up the npConn of a netpoll connection, accepted (on netpoll's accept path,
// before the socket is registered for reads) or dialled, and assigns it a reactor. route
// makes it a route connection (ri: dialled, with what the cluster layer asked for).
func (d *netpollDriver) newConn(conn netpoll.Connection, route bool, ri *RouteIntent) *npConn {
	vr := d.vrs[int(d.next.Add(1)-1)%len(d.vrs)]
	n := &npConn{
		d:      d,
		nc:     conn,
		vr:     vr,
		r:      d.e.reactorFor(vr, vr),
		route:  route,
		intent: ri,
		done:   make(chan struct{}, 1),
		wake:   make(chan struct{}, 1),
	}
	n.interest, n.canPause = netpollInterest(conn)
	if fc, ok := conn.(netpoll.Conn); ok {
		n.fd = fc.Fd()
	} else {
		n.wstate.Store(2) // no raw writes: everything goes through the flusher
	}
	n.trafficTask = n.runTraffic
	n.closedTask = n.runClosed
	n.ctx = context.WithValue(context.Background(), npKey{}, n)
	d.conns.Store(n, struct{}{})
	// Close callbacks run newest first, so this one runs before netpoll's own closes the fd.
	_ = conn.AddCloseCallback(n.onClosed)
	return n
}

// npKey finds the npConn for a netpoll connection in its context.
type npKey struct{}

func (d *netpollDriver) onConnect(ctx context.Context, conn netpoll.Connection) context.Context {
	n, _ := ctx.Value(npKey{}).(*npConn)
	if n == nil {
		_ = conn.Close()
		return ctx
	}
	// No waiting: the reactor runs open before any traffic task the pump queues after it, and
	// a pooled goroutine per connection in an accept storm would cost its stack in RSS.
	if n.vr.Execute(n.open) != nil {
		_ = conn.Close()
	}
	return ctx
}

// open runs on n's reactor.
func (n *npConn) open() {
	if n.dead {
		return
	}
	var (
		c        *client
		greeting []byte
		ok       bool
	)
	if n.route {
		var conn Conn = n
		if tl := n.d.e.routeTLS(n, n.vr, n.kickTraffic, n.intent); tl != nil {
			conn = tl
		}
		if c, greeting, ok = n.d.e.openRoute(conn, n.r, n.intent); ok && conn != Conn(n) {
			n.tls = conn.(*tlsLayer)
		}
	} else {
		var conn Conn = n
		if tc := n.d.e.tlsConf.Load(); tc != nil {
			n.tls = newTLSLayer(n.d.e, n, n.vr, tc, n.kickTraffic)
			conn = n.tls
		}
		c, greeting, ok = n.d.e.open(conn, n.r)
	}
	if !ok {
		if len(greeting) > 0 {
			_, _ = n.Writev([][]byte{greeting})
		}
		n.dead = true
		_ = n.Close()
		return
	}
	n.c = c
	if n.tls != nil {
		greeting = n.tls.start(c, greeting)
	}
	if len(greeting) > 0 {
		_, _ = n.Writev([][]byte{greeting})
	}
}

// onRequest is netpoll's handler for accepted connections, on a pooled goroutine.
func (d *netpollDriver) onRequest(ctx context.Context, conn netpoll.Connection) error {
	n, _ := ctx.Value(npKey{}).(*npConn)
	if n == nil {
		return conn.Close()
	}
	return n.pump()
}

// pump runs the parser on n's reactor until what is buffered is consumed, waiting in
// netpoll for the rest of an incomplete frame; netpoll calls it (onRequest) on a pooled
// goroutine when bytes arrive.
func (n *npConn) pump() error {
	d, conn := n.d, n.nc
	for i := 0; ; i++ {
		if n.vr.Execute(n.trafficTask) != nil {
			return conn.Close()
		}
		select {
		case <-n.done:
		case <-d.quit:
			return nil
		}
		if n.closeConn {
			return n.Close()
		}
		if n.more {
			continue // a turn ended with complete frames left: queue behind the others
		}
		if n.parked {
			// Fast-producer stall (the client's timer wakes us) or a CONNECT being verified
			// (the verdict wakes us). A Wake that came before we wait stays in the channel.
			// The pump waits even with nothing buffered: reading is paused meanwhile, so no
			// new request would come to run traffic and resume it.
			select {
			case <-n.wake:
			case <-d.quit:
				return nil
			}
			continue
		}
		l := conn.Reader().Len()
		if !conn.IsActive() {
			// The peer hung up (or the connection is closing): what it sent before is still
			// parsed, as the other engines do. netpoll calls the handler again for as long
			// as bytes remain, so a last incomplete frame is dropped rather than left.
			if l > n.seenAtDone && l >= n.need {
				continue
			}
			if l > 0 {
				// Not n.Discard: seen is the reactor's to write.
				if r := conn.Reader(); r.Skip(r.Len()) == nil {
					_ = r.Release()
				}
			}
			return nil
		}
		if l == 0 {
			return nil
		}
		// The engine leaves bytes unconsumed only when the frame they start is incomplete.
		want := 0
		switch {
		case n.need > l:
			want = n.need // the parser knows the frame's size
		case l > n.seenAtDone:
			// Bytes came in after traffic's Peek: parse them now. Waiting for l+1 would wait
			// for bytes the client may never send (it awaits our answer to these).
			continue
		default:
			want = l + 1
		}
		// Wait until more bytes arrive (or the connection closes).
		if _, err := conn.Reader().Peek(want); err != nil {
			return nil
		}
	}
}

// kickTraffic runs traffic on n's reactor outside the pump: TLS records read during the
// handshake are not in netpoll's buffer, so netpoll would not ask for them to be parsed.
func (n *npConn) kickTraffic() {
	_ = n.vr.Execute(func() {
		if n.c == nil || n.dead || n.c.closed {
			return
		}
		if n.d.e.traffic(n.c) {
			_ = n.Close()
		} else if n.c.yielded {
			n.kickTraffic()
		}
	})
}

// npParked reports whether c waits for a Wake rather than for more bytes: a fast producer
// stalled until its timer fires, or a client whose CONNECT is being verified off the reactor
// (see authConnect), whose verdict Wakes it.
func npParked(c *client) bool {
	return c.stalled
}

// runTraffic runs on n's reactor while the pump waits.
func (n *npConn) runTraffic() {
	n.closeConn, n.parked, n.more, n.need, n.seen = false, false, false, 0, 0
	if n.c != nil && !n.dead {
		n.closeConn = n.d.e.traffic(n.c)
		n.parked = npParked(n.c)
		n.more = n.c.yielded
		n.need = n.c.wireNeed()
		if n.tls != nil && n.tls.state != tlsPlain {
			n.need = 0 // a plaintext size: the records carrying it are larger
		}
	} else {
		_, _ = n.Discard(-1)
	}
	n.seenAtDone = n.seen
	n.done <- struct{}{}
}

// onClosed is netpoll's close callback (any goroutine, before the fd is closed).
func (n *npConn) onClosed(netpoll.Connection) error {
	for !n.wstate.CompareAndSwap(0, 2) && n.wstate.Load() != 2 {
		runtime.Gosched()
	}
	n.d.conns.Delete(n)
	select {
	case n.wake <- struct{}{}:
	default:
	}
	_ = n.vr.Execute(n.closedTask) // a stopped reactor has nothing left to release
	return nil
}

func (n *npConn) runClosed() {
	n.dead = true
	if n.tls != nil {
		n.tls.closing()
	}
	if n.c != nil {
		n.d.e.connClosed(n.c)
	}
	if n.tls != nil {
		n.tls.closed()
	}
	n.mu.Lock()
	for i, b := range n.backlog {
		outbound.PutChunk(b)
		n.backlog[i] = nil
	}
	n.backlog = nil
	n.mu.Unlock()
}

// Peek returns the first k buffered bytes (all of them for k <= 0); netpoll copies only when
// they span two of its nodes.
func (n *npConn) Peek(k int) ([]byte, error) {
	r := n.nc.Reader()
	l := r.Len()
	if k > 0 && k < l {
		l = k
	}
	n.seen = l // what the engine looks at; anything after it makes the pump run traffic again
	if l == 0 {
		return nil, nil
	}
	return r.Peek(l)
}

func (n *npConn) Discard(k int) (int, error) {
	r := n.nc.Reader()
	if l := r.Len(); k <= 0 || k > l {
		k = l
	}
	if k == 0 {
		return 0, nil
	}
	if err := r.Skip(k); err != nil {
		return 0, err
	}
	n.seen = max(n.seen-k, 0)
	return k, r.Release()
}

// InboundBuffered does not count as looking at the bytes (seen): traffic asks it after
// parsing too, when bytes that arrived meanwhile must still make the pump run it again.
func (n *npConn) InboundBuffered() int { return n.nc.Reader().Len() }

// Writev writes bs with one non-blocking writev; what the kernel does not take is copied to
// the backlog and sent by a flusher goroutine.
func (n *npConn) Writev(bs [][]byte) (int, error) {
	total := 0
	for _, b := range bs {
		total += len(b)
	}
	if total == 0 {
		return 0, nil
	}
	n.mu.Lock()
	if n.flushing || n.closeReq {
		n.appendBacklog(bs, 0)
		n.mu.Unlock()
		return total, nil
	}
	n.mu.Unlock()
	sent := 0
	if n.wstate.CompareAndSwap(0, 1) {
		sent = n.rawWritev(bs, total)
		n.wstate.Store(0)
		if sent < 0 {
			return 0, net.ErrClosed
		}
	} else if n.wstate.Load() == 2 && n.fd != 0 {
		return 0, net.ErrClosed
	}
	if sent == total {
		return total, nil
	}
	n.mu.Lock()
	n.appendBacklog(bs, sent)
	if !n.flushing {
		n.flushing = true
		go n.flusher()
	}
	n.mu.Unlock()
	return total, nil
}

// rawWritev writes as much of bs as the socket takes now; -1 on a broken connection.
func (n *npConn) rawWritev(bs [][]byte, total int) int {
	sent := 0
	for sent < total {
		iov := n.iov[:0]
		skip := sent
		for _, b := range bs {
			if skip >= len(b) {
				skip -= len(b)
				continue
			}
			iov = append(iov, b[skip:])
			skip = 0
			if len(iov) == 64 {
				break
			}
		}
		n.iov = iov
		k, err := unix.Writev(n.fd, iov)
		clear(iov)
		if k > 0 {
			sent += k
		}
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return sent
		}
		if err != nil {
			return -1
		}
		if k == 0 {
			return sent
		}
	}
	return sent
}

// appendBacklog copies bs minus its first skip bytes; n.mu is held.
func (n *npConn) appendBacklog(bs [][]byte, skip int) {
	for _, b := range bs {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		b = b[skip:]
		skip = 0
		n.pending.Add(int64(len(b)))
		n.backlog = outbound.AppendChunks(n.backlog, b)
	}
}

// flusher sends the backlog through netpoll, whose Write waits (off the reactor) until the
// socket takes the bytes.
func (n *npConn) flusher() {
	for {
		n.mu.Lock()
		chunks := n.backlog
		n.backlog = nil
		if len(chunks) == 0 {
			n.flushing = false
			closeReq := n.closeReq
			n.mu.Unlock()
			if closeReq {
				_ = n.nc.Close()
			}
			return
		}
		n.mu.Unlock()
		var err error
		for i, b := range chunks {
			if err == nil {
				_, err = n.nc.Write(b)
			}
			n.pending.Add(-int64(len(b)))
			outbound.PutChunk(b)
			chunks[i] = nil
		}
		if err != nil {
			n.mu.Lock()
			for i, b := range n.backlog {
				n.pending.Add(-int64(len(b)))
				outbound.PutChunk(b)
				n.backlog[i] = nil
			}
			n.backlog = nil
			n.flushing = false
			n.mu.Unlock()
			_ = n.nc.Close()
			return
		}
	}
}

func (n *npConn) OutboundBuffered() int { return int(n.pending.Load()) }

// Close closes once the backlog is sent (bounded: a reader that takes nothing for
// npCloseGrace is cut off).
func (n *npConn) Close() error {
	n.mu.Lock()
	if n.flushing {
		first := !n.closeReq
		n.closeReq = true
		n.mu.Unlock()
		if first {
			nc := n.nc
			time.AfterFunc(npCloseGrace, func() { _ = nc.Close() })
		}
		return nil
	}
	n.mu.Unlock()
	return n.nc.Close()
}

const npCloseGrace = 2 * time.Second

// Wake re-runs traffic processing: the pump waiting out a stall goes on.
func (n *npConn) Wake() error {
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return nil
}

func (n *npConn) RemoteAddr() net.Addr { return n.nc.RemoteAddr() }

// SetReading stops or resumes netpoll's reads of the socket. netpoll's writer (the flusher's
// Write) may turn reading back on while paused; each traffic run pauses again.
func (n *npConn) SetReading(on bool) {
	if !n.canPause || (on && !n.paused) {
		return
	}
	n.paused = !on
	n.mu.Lock()
	writing := n.flushing
	n.mu.Unlock()
	n.interest.setReading(on, writing)
}

// netpollLog routes netpoll's own log lines (accept failures such as EMFILE) to the server log.
// netpoll's logger is process-wide: it goes to the engine started last.
type netpollLog struct{}

var npLogger atomic.Pointer[Logger]

func (netpollLog) Write(p []byte) (int, error) {
	if l := npLogger.Load(); l != nil && *l != nil {
		(*l).Errorf("%s", trimNL(p))
	}
	return len(p), nil
}

func trimNL(p []byte) string {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return string(p)
}
