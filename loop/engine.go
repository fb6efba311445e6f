// Package loop is natsd's network core: a gnet multi-reactor engine, one state per reactor
// (L1 match cache, flush lists, timer wheel) and the client connection state machine.
// Nothing here blocks: disk and other slow work belongs to worker pools.
package loop

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/logging"
	"golang.org/x/sys/unix"

	"github.com/natsd/natsd/sublist"
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

	// Info is the INFO JSON object common to all connections, ending in '}'; the loop adds
	// client_id and client_ip per connection, followed by InfoTail (fields nats-server sends
	// after those, each starting with a comma).
	Info     []byte
	InfoTail []byte

	Log   Logger
	Trace bool
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
	gnet.BuiltinEventEngine
	cfg    Config
	subs   *sublist.Sublist[*sub]
	eng    gnet.Engine
	addr   *net.TCPAddr
	boot   chan error
	infoFn func(port int) (head, tail []byte)
	done   chan struct{}
	runErr error

	mu       sync.Mutex
	reactors map[gnet.EventLoop]*reactor
	list     []*reactor
	peers    atomic.Pointer[[]*reactor] // copy-on-write view of list for reactors

	cid      atomic.Uint64
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
}

// New prepares an engine; Start runs it.
func New(cfg Config) *Engine {
	if cfg.Reactors <= 0 {
		cfg.Reactors = DefaultReactors
	}
	return &Engine{
		cfg:      cfg,
		subs:     sublist.New[*sub](),
		boot:     make(chan error, 1),
		done:     make(chan struct{}),
		reactors: make(map[gnet.EventLoop]*reactor),
		stopTick: make(chan struct{}),
	}
}

// Start listens and returns once the engine accepts connections.
func (e *Engine) Start() error {
	port := e.cfg.Port
	if port < 0 {
		port = 0
	}
	if e.cfg.ReusePort && port == 0 {
		// Each reactor gets its own SO_REUSEPORT listener, which must share one concrete port.
		p, err := freePort(e.cfg.Host)
		if err != nil {
			return err
		}
		port = p
	}
	proto := "tcp://" + net.JoinHostPort(e.cfg.Host, strconv.Itoa(port))
	go func() {
		err := gnet.Run(e, proto,
			gnet.WithMulticore(true),
			gnet.WithNumEventLoop(e.cfg.Reactors),
			gnet.WithReusePort(e.cfg.ReusePort),
			// As Go's net.Listen does: a restart must rebind while old connections sit in TIME_WAIT.
			gnet.WithReuseAddr(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithReadBufferCap(64*1024),
			gnet.WithLoadBalancing(gnet.RoundRobin),
			gnet.WithLogger(quietLogger{}),
		)
		e.runErr = err
		select {
		case e.boot <- err:
		default:
		}
		close(e.done)
	}()
	if err := <-e.boot; err != nil {
		return err
	}
	e.clock.Store(time.Now().UnixNano())
	go e.ticker()
	return nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// OnBoot learns the bound address (the port may have been picked by the kernel).
func (e *Engine) OnBoot(eng gnet.Engine) gnet.Action {
	e.eng = eng
	fd, err := eng.Dup()
	if err != nil {
		e.boot <- err
		return gnet.Shutdown
	}
	sa, err := unix.Getsockname(fd)
	unix.Close(fd)
	if err != nil {
		e.boot <- err
		return gnet.Shutdown
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		e.addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	case *unix.SockaddrInet6:
		e.addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	default:
		e.boot <- fmt.Errorf("unexpected listener address %T", sa)
		return gnet.Shutdown
	}
	if e.infoFn != nil {
		e.cfg.Info, e.cfg.InfoTail = e.infoFn(e.addr.Port)
	}
	e.boot <- nil
	return gnet.None
}

// SetInfo installs the INFO template builder; it is given the bound port once listening.
func (e *Engine) SetInfo(fn func(port int) (head, tail []byte)) { e.infoFn = fn }

// Addr is the bound client address.
func (e *Engine) Addr() *net.TCPAddr { return e.addr }

// Sublist exposes the interest graph (monitoring, cluster).
func (e *Engine) Sublist() *sublist.Sublist[*sub] { return e.subs }

// NumConns is the number of open client connections.
func (e *Engine) NumConns() int64 { return e.conns.Load() }

func (e *Engine) reactorFor(el gnet.EventLoop) *reactor {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.reactors[el]
	if r == nil {
		r = newReactor(e, el, len(e.list))
		e.reactors[el] = r
		e.list = append(e.list, r)
		peers := append([]*reactor(nil), e.list...)
		e.peers.Store(&peers)
	}
	return r
}

func (e *Engine) reactorsSnapshot() []*reactor {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*reactor(nil), e.list...)
}

// ticker drives every reactor's timer wheel from one goroutine: a single Execute per reactor
// per tick instead of a timer per connection.
func (e *Engine) ticker() {
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	for {
		select {
		case <-e.stopTick:
			return
		case <-e.done:
			return
		case now := <-t.C:
			e.clock.Store(now.UnixNano())
			for _, r := range e.reactorsSnapshot() {
				_ = r.el.Execute(context.Background(), r.tickTask)
			}
		}
	}
}

// Stats sums the per-reactor counters.
func (e *Engine) Stats() Stats {
	var s Stats
	for _, r := range e.reactorsSnapshot() {
		s.InMsgs += r.stats.inMsgs.Load()
		s.InBytes += r.stats.inBytes.Load()
		s.OutMsgs += r.stats.outMsgs.Load()
		s.OutBytes += r.stats.outBytes.Load()
		s.SlowConsumers += r.stats.slow.Load()
		s.StaleConnections += r.stats.stale.Load()
	}
	s.Connections = e.conns.Load()
	s.TotalConnections = e.total.Load()
	s.Subscriptions = e.subs.Count()
	s.StalledClients = e.stalls.Load()
	return s
}

// EnterLameDuck stops accepting clients, tells those that understand async INFO (protocol 1)
// that the server is going away, waits grace, then closes the rest spread over d so that
// they do not all reconnect elsewhere at once.
func (e *Engine) EnterLameDuck(d, grace time.Duration) {
	if !e.lameDuck.CompareAndSwap(false, true) {
		return
	}
	all := e.onEachReactor(func(r *reactor) []gnet.Conn {
		var cs []gnet.Conn
		for c := range r.clients {
			if c.protocol >= 1 {
				c.send(c.infoLDM())
			}
			cs = append(cs, c.gc)
		}
		r.endBatch()
		return cs
	})
	if grace > 0 {
		time.Sleep(grace)
	}
	if len(all) == 0 {
		return
	}
	step := d / time.Duration(len(all))
	for _, c := range all {
		_ = c.Close()
		if step > 0 {
			time.Sleep(step)
		}
	}
}

// onEachReactor runs fn on every reactor's own goroutine and gathers what it returns.
func (e *Engine) onEachReactor(fn func(r *reactor) []gnet.Conn) []gnet.Conn {
	var all []gnet.Conn
	for _, r := range e.reactorsSnapshot() {
		ch := make(chan []gnet.Conn, 1)
		err := r.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			ch <- fn(r)
			return nil
		}))
		if err == nil {
			all = append(all, <-ch...)
		}
	}
	return all
}

// Stop closes every connection and the listener.
func (e *Engine) Stop() {
	if !e.stopping.CompareAndSwap(false, true) {
		<-e.done
		return
	}
	close(e.stopTick)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = e.eng.Stop(ctx)
	<-e.done
}

// Done is closed when the engine has stopped.
func (e *Engine) Done() <-chan struct{} { return e.done }

type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(string, ...any) {}

var _ logging.Logger = quietLogger{}
