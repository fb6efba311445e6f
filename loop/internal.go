package loop

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/natsd/natsd/parser"
)

// InternalClient lets server code (the system account's events and requests, JetStream,
// imports) publish and subscribe in an account from any goroutine, through the same routing,
// interest graphs and limits as every connection. It has no socket: its publishes are routed
// on the engine's internal reactor, in batches (one Execute per batch however many messages),
// and its subscriptions' handlers run either on the publisher's reactor (Inline: they must
// copy what they keep and never block) or on the client's own worker goroutine (Worker: the
// reactor copies each message and wakes the worker once per batch).
type InternalClient struct {
	e *Engine
	c *client

	mu    sync.Mutex
	pubs  []pendingPub // waiting for the internal reactor
	spare []pendingPub
	buf   []byte // pubs' bytes, one after another (from pubBufs, back there once routed)
	sched bool

	work     workQueue
	sids     atomic.Uint64
	submu    sync.Mutex
	subs     map[*sub]struct{} // live subscriptions, for monitoring
	stopped  atomic.Bool
	origins  atomic.Bool // KeepOrigins
	routeAll func()
}

// KeepOrigins has the client's Worker handlers told who published each message
// (WorkMsg.From). Most handlers never look, and an acknowledgement or a stored message is
// copied for a worker by the hundred thousand a second: only a client that asks pays for it.
func (ic *InternalClient) KeepOrigins() { ic.origins.Store(true) }

// pendingPub is one queued publish: lengths of its parts, laid out in this order (subject,
// as, reply, header and payload) in the client's buf, or in own for a large message (which
// would otherwise make buf grow, by copying, to hold it).
type pendingPub struct {
	subject, as, reply, hdr, data int
	own                           []byte
}

// ownPubSize is the size from which a publish gets a buffer of its own.
const ownPubSize = 32 << 10

// ErrClosed is returned by an internal client once its engine has stopped.
var ErrClosed = errors.New("loop: internal client closed")

// NewInternalClient makes an internal client of the given kind in acc (the global account if
// nil); name is how logs and monitoring show it.
func (e *Engine) NewInternalClient(kind Kind, acc *Account, name string) *InternalClient {
	if acc == nil {
		acc = e.global
	}
	r := e.internalReactor()
	c := &client{r: r, cid: e.icid.Add(1), kind: kind, echo: true, tSlot: -1, name: name, connected: true}
	c.headers.Store(true)
	c.acc = acc
	ic := &InternalClient{e: e, c: c, subs: make(map[*sub]struct{})}
	ic.work.ic = ic
	ic.routeAll = ic.drain
	e.mu.Lock()
	e.internals = append(e.internals, ic)
	e.mu.Unlock()
	return ic
}

// Account is the account the client publishes and subscribes in.
func (ic *InternalClient) Account() *Account { return ic.c.acc }

// Publish routes a message in the client's account; hdr is a full header block
// ("NATS/1.0\r\n...\r\n\r\n") or nil. The bytes are copied: the caller may reuse them.
func (ic *InternalClient) Publish(subject, reply string, hdr, payload []byte) error {
	return ic.PublishAs(subject, "", reply, hdr, payload)
}

// PublishAs is Publish routed on subject but delivered showing as (when not ""): how a
// JetStream consumer delivers a stored message to its deliver subject or a pull request's
// inbox under the message's own subject.
func (ic *InternalClient) PublishAs(subject, as, reply string, hdr, payload []byte) error {
	if ic.stopped.Load() || ic.e.stopping.Load() {
		return ErrClosed
	}
	p := pendingPub{subject: len(subject), as: len(as), reply: len(reply), hdr: len(hdr), data: len(hdr) + len(payload)}
	n := p.subject + p.as + p.reply + p.data
	if n >= ownPubSize {
		p.own = appendPub(make([]byte, 0, n), subject, as, reply, hdr, payload)
	}
	ic.mu.Lock()
	if p.own == nil {
		if ic.buf == nil {
			ic.buf = pubBufs.Get().([]byte)
		}
		ic.buf = appendPub(ic.buf, subject, as, reply, hdr, payload)
	}
	ic.pubs = append(ic.pubs, p)
	first := !ic.sched
	ic.sched = true
	ic.mu.Unlock()
	if first {
		if err := ic.c.r.ex.Execute(ic.routeAll); err != nil {
			return ErrClosed
		}
	}
	return nil
}

func appendPub(b []byte, subject, as, reply string, hdr, payload []byte) []byte {
	b = append(b, subject...)
	b = append(b, as...)
	b = append(b, reply...)
	b = append(b, hdr...)
	return append(b, payload...)
}

// drain routes every publish queued so far; it runs on the internal reactor. Routing copies
// what it keeps (a client's own publishes are routed straight from its read buffer too), so
// the bytes go back to the pool once the batch is routed.
func (ic *InternalClient) drain() {
	ic.mu.Lock()
	list, buf := ic.pubs, ic.buf
	ic.pubs, ic.buf = ic.spare[:0], nil
	ic.sched = false
	ic.mu.Unlock()
	r := ic.c.r
	at := 0 // where the next publish starts in buf
	for i := range list {
		p := &list[i]
		b, off := buf, at
		if p.own != nil {
			b, off = p.own, 0
		}
		part := func(n int) []byte {
			if n == 0 {
				return nil
			}
			off += n
			return b[off-n : off : off]
		}
		r.pubOp = parser.Op{Kind: parser.KindPub, Subject: part(p.subject), As: part(p.as), Reply: part(p.reply), HdrLen: p.hdr}
		r.pubOp.Msg = b[off : off+p.data : off+p.data]
		if p.own == nil {
			at = off + p.data
		}
		if p.hdr > 0 {
			r.pubOp.Kind = parser.KindHPub
		}
		r.route(ic.c.acc, ic.c, &r.pubOp, 0)
		*p = pendingPub{}
	}
	r.pubOp = parser.Op{}
	ic.spare = list[:0]
	putPubBuf(buf)
	r.endBatch()
}

// pubBufs holds internal clients' publish buffers between batches, so an idle client keeps
// none and a busy one allocates nothing per message.
var pubBufs = sync.Pool{New: func() any { return make([]byte, 0, 16<<10) }}

func putPubBuf(b []byte) {
	if b != nil && cap(b) <= 1<<20 {
		pubBufs.Put(b[:0])
	}
}

// Subscription is an internal client's interest in a subject.
type Subscription struct {
	s  *sub
	ic *InternalClient
}

// Unsubscribe removes the interest; the handler may still run for messages already routed.
func (s *Subscription) Unsubscribe() {
	if s.s.gone.CompareAndSwap(false, true) {
		_ = s.s.acc.subs.Remove(s.s.subject, s.s.queue, s.s)
		s.ic.e.subRemoved(s.s, nil)
	}
	s.ic.submu.Lock()
	delete(s.ic.subs, s.s)
	s.ic.submu.Unlock()
}

// Subject is what the subscription listens on.
func (s *Subscription) Subject() string { return s.s.subject }

// Inline subscribes with a handler that runs on the publisher's reactor: m's bytes are
// borrowed for the call, and the handler must not block or do I/O.
func (ic *InternalClient) Inline(subject, queue string, fn func(m *Msg)) (*Subscription, error) {
	return ic.subscribe(ic.c.acc, subject, queue, func(r *reactor, from *client, op *parser.Op, depth int) bool {
		m := &r.hmsg[depth]
		*m = Msg{Subject: op.Subject, Reply: op.Reply, Hdr: op.HdrLen, Data: op.Msg, from: from}
		fn(m)
		*m = Msg{}
		return true
	})
}

// Worker subscribes with a handler that runs on this client's worker goroutine, one message
// at a time in the order they were delivered, with its own copy of each.
func (ic *InternalClient) Worker(subject, queue string, fn func(m *WorkMsg)) (*Subscription, error) {
	return ic.WorkerOrInline(subject, queue, nil, fn)
}

// WorkerOrInline is Worker with a first try on the publisher's reactor: try is shown each
// message there (its bytes borrowed for the call; it must not block or do I/O) and answers
// what it can, typically with Respond; what it returns false for goes to fn on the worker
// as with Worker. A request answered inline skips two hand-offs between goroutines (to the
// worker, and from the worker's publish back to a reactor): a KV get's round trip.
func (ic *InternalClient) WorkerOrInline(subject, queue string, try func(m *Msg) bool, fn func(m *WorkMsg)) (*Subscription, error) {
	return ic.subscribe(ic.c.acc, subject, queue, func(r *reactor, from *client, op *parser.Op, depth int) bool {
		if try != nil {
			m := &r.hmsg[depth]
			*m = Msg{Subject: op.Subject, Reply: op.Reply, Hdr: op.HdrLen, Data: op.Msg, from: from, r: r, depth: depth}
			done := try(m)
			*m = Msg{}
			if done {
				return true
			}
		}
		q := &ic.work
		if q.limited && !q.admit(len(op.Msg)) {
			m := &r.hmsg[depth]
			*m = Msg{Subject: op.Subject, Reply: op.Reply, Hdr: op.HdrLen, Data: op.Msg, from: from}
			q.full(m)
			*m = Msg{}
			return true
		}
		r.queueWork(q, fn, from, op)
		return true
	})
}

// Respond publishes a reply to m, which an inline try handler (WorkerOrInline) is being
// shown, and routes it at once on that handler's reactor, as a nested delivery: a requester
// on this reactor has it in its outbound queue before the handler returns. hdr is a full
// header block or nil. It reports whether anyone got the reply.
func (ic *InternalClient) Respond(m *Msg, hdr, payload []byte) bool {
	r, d := m.r, m.depth
	if r == nil || len(m.Reply) == 0 || d+1 >= maxRouteDepth || ic.stopped.Load() || ic.e.stopping.Load() {
		return false
	}
	b := append(append(r.rbuf[d][:0], hdr...), payload...)
	op := &r.resp[d]
	*op = parser.Op{Kind: parser.KindPub, Subject: m.Reply, HdrLen: len(hdr), Msg: b}
	if len(hdr) > 0 {
		op.Kind = parser.KindHPub
	}
	ok := r.route(ic.c.acc, ic.c, op, d+1)
	if ok {
		r.answered = true
	}
	*op = parser.Op{}
	if cap(b) <= 64<<10 { // a big reply's buffer is not kept for the next
		r.rbuf[d] = b[:0]
	} else {
		r.rbuf[d] = nil
	}
	return ok
}

// Enqueue hands fn to the client's worker as if a subscription had delivered m: it runs
// there after the messages already queued, one at a time with them. It is not refused by
// the work limit (it is counted in it while it waits).
func (ic *InternalClient) Enqueue(fn func(m *WorkMsg), m WorkMsg) {
	q := &ic.work
	if q.limited {
		q.qMsgs.Add(1)
		q.qBytes.Add(int64(len(m.Hdr) + len(m.Data)))
	}
	q.add(append(getWorkItems(), workItem{fn: fn, m: m}))
}

// SetWorkLimit bounds what waits for the client's worker (messages queued and not yet
// handled): past msgs messages or bytes bytes of message data, a message is not copied but
// handed to full, on the publisher's reactor with its bytes borrowed (a JetStream stream
// answers 429 to its publisher). Set it before subscribing.
func (ic *InternalClient) SetWorkLimit(msgs int, bytes int64, full func(m *Msg)) {
	q := &ic.work
	q.limited, q.maxMsgs, q.maxBytes, q.full = true, int64(msgs), bytes, full
}

// SetBatchEnd has the client's worker call fn after each batch of n messages it handled,
// with more telling whether another batch is already waiting. A handler that defers work
// to the end of its batch (a stream's store flush) does it there. Set it before
// subscribing.
func (ic *InternalClient) SetBatchEnd(fn func(n int, more bool)) {
	ic.work.batchEnd = fn
}

// subscribe places an internal subscription in acc (normally the client's own).
func (ic *InternalClient) subscribe(acc *Account, subject, queue string, fn func(*reactor, *client, *parser.Op, int) bool) (*Subscription, error) {
	return ic.subscribeOpt(acc, subject, queue, false, fn)
}

// subscribeOpt is subscribe; local interest is not told to other servers.
func (ic *InternalClient) subscribeOpt(acc *Account, subject, queue string, local bool, fn func(*reactor, *client, *parser.Op, int) bool) (*Subscription, error) {
	return ic.subscribeSub(&sub{c: ic.c, acc: acc, fn: fn, subject: subject, queue: queue, local: local})
}

// subscribeSub places s (its fields set but sid).
func (ic *InternalClient) subscribeSub(s *sub) (*Subscription, error) {
	acc, subject, queue := s.acc, s.subject, s.queue
	s.sid = strconv.AppendUint(nil, ic.sids.Add(1), 10)
	if err := acc.subs.Insert(subject, queue, s); err != nil {
		return nil, err
	}
	ic.e.subAdded(s, nil)
	ic.e.subInserts.Add(1)
	ic.submu.Lock()
	ic.subs[s] = struct{}{}
	ic.submu.Unlock()
	return &Subscription{s: s, ic: ic}, nil
}

// Close stops the client: its publishes fail from now on.
func (ic *InternalClient) Close() {
	ic.stopped.Store(true)
	ic.work.stop()
}

// WorkMsg is a message copied for a Worker handler.
type WorkMsg struct {
	Subject, Reply string
	Hdr            []byte  // the header block, nil when none
	Data           []byte  // the payload
	From           *Origin // who published it, for a client that keeps origins; else nil
}

// workQueue carries copied messages from reactors to an internal client's worker.
type workQueue struct {
	ic      *InternalClient
	mu      sync.Mutex
	items   []workItem
	running bool
	done    bool

	// An optional bound (SetWorkLimit) on messages copied and not yet handled, counted by
	// the reactors that admit them and the worker that finishes them.
	limited           bool
	maxMsgs, maxBytes int64
	qMsgs, qBytes     atomic.Int64
	full              func(*Msg)

	batchEnd func(n int, more bool) // SetBatchEnd
}

// admit counts a message of n bytes in, or reports false when the queue is full.
func (q *workQueue) admit(n int) bool {
	if q.qMsgs.Load() >= q.maxMsgs || q.qBytes.Load()+int64(n) > q.maxBytes {
		return false
	}
	q.qMsgs.Add(1)
	q.qBytes.Add(int64(n))
	return true
}

type workItem struct {
	fn func(*WorkMsg)
	m  WorkMsg
}

// queueWork copies m for q's worker; the worker is woken once, at the end of the batch.
func (r *reactor) queueWork(q *workQueue, fn func(*WorkMsg), from *client, m *parser.Op) {
	var w WorkMsg
	if q.ic.origins.Load() {
		o := originOf(from)
		w.From = &o
	}
	// Subject and reply share one copy (private to the message, so never written again).
	if n := len(m.Subject) + len(m.Reply); n > 0 {
		b := make([]byte, 0, n)
		b = append(append(b, m.Subject...), m.Reply...)
		sr := unsafe.String(&b[0], n)
		w.Subject, w.Reply = sr[:len(m.Subject)], sr[len(m.Subject):]
	}
	data := append([]byte(nil), m.Msg...)
	if m.HdrLen > 0 {
		w.Hdr = data[:m.HdrLen:m.HdrLen]
	}
	w.Data = data[m.HdrLen:]
	if len(r.work) == 0 || r.work[len(r.work)-1].q != q {
		r.work = append(r.work, pendingWork{q: q, items: getWorkItems()})
	}
	pw := &r.work[len(r.work)-1]
	pw.items = append(pw.items, workItem{fn: fn, m: w})
}

// pendingWork is what one batch on a reactor queued for one worker.
type pendingWork struct {
	q     *workQueue
	items []workItem
}

// handOffWork gives each worker what this batch queued for it, waking each once.
func (r *reactor) handOffWork() {
	for i := range r.work {
		pw := &r.work[i]
		pw.q.add(pw.items)
		pw.items = nil
		pw.q = nil
	}
	r.work = r.work[:0]
}

func (q *workQueue) add(items []workItem) {
	q.mu.Lock()
	if q.done {
		q.mu.Unlock()
		return
	}
	if q.items == nil {
		q.items = items // the batch's slice is handed over whole
	} else {
		q.items = append(q.items, items...)
		putWorkItems(items)
	}
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.run()
	}
}

// run is the worker: it exits when the queue is empty, so an idle internal client holds no
// goroutine.
func (q *workQueue) run() {
	for {
		q.mu.Lock()
		items := q.items
		q.items = nil
		if len(items) == 0 || q.done {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for i := range items {
			it := &items[i]
			it.fn(&it.m)
			if q.limited {
				q.qMsgs.Add(-1)
				q.qBytes.Add(-int64(len(it.m.Hdr) + len(it.m.Data)))
			}
			*it = workItem{}
		}
		n := len(items)
		putWorkItems(items)
		if q.batchEnd != nil {
			q.mu.Lock()
			more := len(q.items) > 0
			q.mu.Unlock()
			q.batchEnd(n, more)
		}
	}
}

// Batches' item slices are recycled from worker to reactors: a burst of thousands of
// messages to one worker would otherwise grow a fresh slice, by doubling, every batch.
var workItemsPool = sync.Pool{New: func() any { return make([]workItem, 0, 64) }}

func getWorkItems() []workItem { return workItemsPool.Get().([]workItem)[:0] }

func putWorkItems(items []workItem) {
	if cap(items) <= 64<<10 {
		workItemsPool.Put(items[:0])
	}
}

func (q *workQueue) stop() {
	q.mu.Lock()
	q.done = true
	q.items = nil
	q.mu.Unlock()
}

// internalReactor is where internal clients' publishes are routed: a reactor of its own, so
// that internal traffic needs no network connection to exist and never waits behind one.
func (e *Engine) internalReactor() *reactor {
	e.intOnce.Do(func() {
		x := newSerial(nil)
		e.intSerial = x
		r := e.reactorFor(x, x)
		r.waiting = x.waiting
		e.intReactor = r
	})
	return e.intReactor
}

// Flush waits (at most timeout) until every publish queued so far has been routed.
func (ic *InternalClient) Flush(timeout time.Duration) error {
	done := make(chan struct{})
	if err := ic.c.r.ex.Execute(func() { close(done) }); err != nil {
		return ErrClosed
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return errors.New("loop: internal flush timed out")
	}
}

// AccountClient is a's own internal client (kind ACCOUNT), for server code that publishes
// into that account (e.g. $SYS.ACCOUNT.CLIENT.AUTH.ERR into the account a client failed to
// join).
func (e *Engine) AccountClient(a *Account) *InternalClient { return a.internalClient() }
