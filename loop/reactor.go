package loop

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/outbound"
	"github.com/natsd/natsd/parser"
	"github.com/natsd/natsd/sublist"
)

// l1Size bounds each reactor's match cache.
const l1Size = 4096

// reactor is the state one event loop owns. Only its goroutine touches the non-atomic
// fields, so the per-message path takes no lock except the target queue's.
type reactor struct {
	e   *Engine
	ex  Executor
	idx int
	// caches are the reactor's L1 match caches, one per account by Account.idx (cacheFor).
	caches []*sublist.Cache[*sub]
	// subj[d] holds a subject rewritten at route depth d (mappings, imports); mapd[d] is the
	// message a mapping rewrote, fwd[d] one an import passes on, hmsg[d] what an inline
	// handler is shown, and pubOp an internal publish being routed. They live here, not on
	// the stack, so that handing them to handlers allocates nothing.
	subj [maxRouteDepth][]byte
	mapd [maxRouteDepth]parser.Op
	fwd  [maxRouteDepth]parser.Op
	hmsg [maxRouteDepth]Msg
	resp [maxRouteDepth]parser.Op // an inline handler's reply (InternalClient.Respond)
	rbuf [maxRouteDepth][]byte
	rts  [maxRouteDepth][]routeTarget // remote servers a message goes to (forward.go)
	// localOnly is set while a message is routed for this server's subscribers only (an
	// imported stream): route subscriptions do not take it.
	localOnly int
	pubOp     parser.Op

	// local holds this reactor's connections with frames queued during the current batch;
	// remote[i] those owned by reactor i, handed over in one Inbox.Add at the end of the batch.
	local  []*client
	remote [][]*client
	inbox  outbound.Inbox[*client]
	woken  []*client

	wheel   *wheel
	backlog map[*client]struct{} // connections whose socket still holds unsent bytes
	clients map[*client]struct{}

	// stall is the last target a delivery of the op being processed found past three
	// quarters of its max_pending: the publisher then pauses briefly instead of growing
	// buffers without bound.
	stall *client

	scratch []byte // control-line builder for deliveries
	rng     *rand.PCG
	rrand   *rand.Rand // over rng, for weighted mappings

	// work is what internal Worker subscriptions got in this batch (internal.go).
	work []pendingWork

	wakeTask func()
	tickTask func()

	// epfd is the reactor's epoll descriptor where the driver lets natsd pause a
	// connection's reads (gnet), found with the loop's first connection.
	epfd, efd  int // efd: the eventfd gnet wakes the loop with (see epollWaiting)
	epollKnown bool

	// runq holds connections that ended a turn with input left, to run again once the
	// driver has served the others (gnet_kick.go); kick asks for that, nil where the driver
	// interleaves them itself.
	runq, runqSpare []*client
	kick            func()
	kickPending     bool
	// waiting reports whether anything but c needs the reactor now (a ready socket, a
	// queued task); nil: assume so.
	waiting func(c *client) bool
	evs     epollScratch // for gnet's waiting (epollWaiting)
	kickFd  int          // the kicker's own socket, which waiting leaves out

	// answered is set when an inline handler's reply (InternalClient.Respond) reached a
	// connection in the current turn: the driver then lingers (linger.go).
	answered    bool
	linger      lingerPolicy
	wakePending *int32 // gnet's flag for a pending wake of this loop (gnetWakePending)

	stats struct {
		slow, stale counter
	}
	// counts[i] are this reactor's message figures for the account of idx i (countsFor);
	// readers on other goroutines load the published slice.
	counts    []*acctCounts
	countsPub atomic.Pointer[[]*acctCounts]
}

// acctCounts are one account's messages in (published by its clients) and out (delivered
// to them), as counted on one reactor.
type acctCounts struct {
	inMsgs, inBytes, outMsgs, outBytes counter
}

// countsFor returns r's counters for a, making them on first use; only r's goroutine calls it.
func (r *reactor) countsFor(a *Account) *acctCounts {
	if a.idx < len(r.counts) {
		if c := r.counts[a.idx]; c != nil {
			return c
		}
	}
	next := make([]*acctCounts, max(len(r.counts), a.idx+1))
	copy(next, r.counts)
	next[a.idx] = &acctCounts{}
	r.counts = next
	r.countsPub.Store(&next)
	return next[a.idx]
}

// counter is a statistic written only by its reactor's goroutine and read from anywhere. The
// single writer adds with a load and a store, which on the per-message path costs no locked
// read-modify-write; readers still see whole values.
type counter struct{ v atomic.Uint64 }

func (c *counter) add(n uint64) { c.v.Store(c.v.Load() + n) }

func (c *counter) Load() uint64 { return c.v.Load() }

func newReactor(e *Engine, ex Executor, idx int) *reactor {
	r := &reactor{
		e:       e,
		ex:      ex,
		idx:     idx,
		wheel:   newWheel(int64(tickEvery), time.Now().UnixNano()),
		backlog: make(map[*client]struct{}),
		clients: make(map[*client]struct{}),
		scratch: make([]byte, 0, 512),
		epfd:    -1,
		efd:     -1,
		kickFd:  -1,
		rng:     rand.NewPCG(uint64(time.Now().UnixNano()), uint64(idx)),
		linger:  lingerPolicy{budget: e.cfg.ReplySpin, score: lingerMax},
	}
	r.rrand = rand.New(r.rng)
	r.wakeTask = r.onWake
	r.tickTask = func() { r.onTick(time.Now()) }
	return r
}

// grow makes room for reactors that registered after this one; only r's goroutine calls it.
func (r *reactor) grow(n int) {
	for len(r.remote) < n {
		r.remote = append(r.remote, nil)
	}
}

// enqueue notes that c has frames to flush at the end of this batch.
func (r *reactor) enqueue(c *client) {
	if c.r == r {
		r.local = append(r.local, c)
		return
	}
	if c.r.idx >= len(r.remote) {
		r.grow(c.r.idx + 1)
	}
	r.remote[c.r.idx] = append(r.remote[c.r.idx], c)
}

// endBatch flushes this reactor's own targets and wakes each other reactor at most once.
func (r *reactor) endBatch() {
	if len(r.work) > 0 {
		r.handOffWork()
	}
	for i, c := range r.local {
		c.flush()
		r.local[i] = nil
	}
	r.local = r.local[:0]
	var peers []*reactor
	for i, list := range r.remote {
		if len(list) == 0 {
			continue
		}
		if peers == nil {
			peers = *r.e.peers.Load()
		}
		t := peers[i]
		if t.inbox.Add(list) {
			if err := t.ex.Execute(t.wakeTask); err != nil {
				t.inbox.Drain(nil)
			}
		}
		clear(list)
		r.remote[i] = list[:0]
	}
}

// onWake runs on this reactor when other reactors queued frames for its connections.
func (r *reactor) onWake() {
	r.woken = r.inbox.Drain(r.woken[:0])
	for i, c := range r.woken {
		c.flush()
		r.woken[i] = nil
	}
	// Flushing may have produced frames of our own (none today), keep the invariant anyway.
	r.endBatch()
}

// onTick advances the timer wheel and re-checks connections with unsent socket bytes.
func (r *reactor) onTick(now time.Time) {
	ns := now.UnixNano()
	r.wheel.advance(ns, func(c *client) { c.onTimer(ns) })
	for c := range r.backlog {
		n := c.conn.OutboundBuffered()
		c.out.SetSocketPending(n)
		if n == 0 {
			c.blockedSince = 0
			delete(r.backlog, c)
			continue
		}
		if wd := r.e.cfg.WriteDeadline; wd > 0 && ns-c.blockedSince > int64(wd) {
			delete(r.backlog, c)
			c.slowConsumer(closeWriteDeadline)
		}
	}
	r.endBatch()
}

// othersWaiting reports whether ending c's turn would let anyone else run.
func (r *reactor) othersWaiting(c *client) bool {
	return r.waiting == nil || r.waiting(c)
}

// forward copies m into the slot for routing it one level below depth.
func (r *reactor) forward(m *parser.Op, depth int) *parser.Op {
	out := &r.fwd[depth]
	*out = *m
	return out
}

// yield queues c for another turn after the connections that are ready now.
func (r *reactor) yield(c *client) {
	if r.kick == nil {
		_ = c.conn.Wake()
		return
	}
	if !c.queued {
		c.queued = true
		r.runq = append(r.runq, c)
	}
	if !r.kickPending {
		r.kickPending = true
		r.kick()
	}
}

// pick chooses one member of a queue group, spreading evenly without shared state.
func (r *reactor) pick(n int) int {
	return int(r.rng.Uint64() % uint64(n))
}
