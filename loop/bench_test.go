package loop

import (
	"bytes"
	"net"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/outbound"
	"github.com/natsd/natsd/parser"
)

// newBenchEngine wires an engine, one reactor and n subscribers on "foo" without sockets, so
// the publish path (parse → L1 match → append to outbound) can be measured on its own.
func newBenchEngine(b *testing.B, subs int, subject string) (*reactor, *client, []*client) {
	e := New(Config{MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20, MaxConn: 1 << 20})
	r := newReactor(e, nil, 0)
	peers := []*reactor{r}
	e.peers.Store(&peers)
	pub := &client{r: r, tSlot: -1}
	if err := pub.bind(e.global); err != nil {
		b.Fatal(err)
	}
	var targets []*client
	for i := 0; i < subs; i++ {
		t, _ := benchSub(b, r, subject, "")
		targets = append(targets, t)
	}
	return r, pub, targets
}

// benchSub adds a client on reactor r in the global account, subscribed to subject (in
// queue group queue, if any) with sid 1.
func benchSub(b *testing.B, r *reactor, subject, queue string) (*client, *sub) {
	t := &client{r: r, tSlot: -1}
	if err := t.bind(r.e.global); err != nil {
		b.Fatal(err)
	}
	s := &sub{c: t, acc: r.e.global, subject: subject, queue: queue, sid: []byte("1")}
	if err := r.e.global.subs.Insert(subject, queue, s); err != nil {
		b.Fatal(err)
	}
	return t, s
}

// drain stands in for the socket write: it empties the queues the batch scheduled.
func drain(r *reactor) {
	for i, c := range r.local {
		bufs, _ := c.out.Take(c.iov[:0])
		outbound.Release(bufs)
		c.iov = bufs[:0]
		r.local[i] = nil
	}
	r.local = r.local[:0]
}

func benchPublish(b *testing.B, subs int) {
	r, pub, _ := newBenchEngine(b, subs, "foo")
	benchFrames(b, []byte("PUB foo 16\r\n0123456789abcdef\r\n"), r, pub, nil)
}

func BenchmarkPublishDeliver1(b *testing.B) { benchPublish(b, 1) }
func BenchmarkPublishDeliver4(b *testing.B) { benchPublish(b, 4) }

func BenchmarkPublishNoInterest(b *testing.B) { benchPublish(b, 0) }

// memConn is a Conn over an in-memory inbound buffer, for benchmarking traffic() as a driver
// calls it: the whole batch is buffered, traffic parses it in turns, writes go nowhere.
type memConn struct {
	in  []byte
	off int
}

func (m *memConn) Peek(n int) ([]byte, error) {
	b := m.in[m.off:]
	if n > 0 && n < len(b) {
		b = b[:n]
	}
	return b, nil
}
func (m *memConn) Discard(n int) (int, error) {
	if n <= 0 || n > len(m.in)-m.off {
		n = len(m.in) - m.off
	}
	m.off += n
	return n, nil
}
func (m *memConn) InboundBuffered() int            { return len(m.in) - m.off }
func (m *memConn) Writev(bs [][]byte) (int, error) { return 0, nil }
func (m *memConn) OutboundBuffered() int           { return 0 }
func (m *memConn) Close() error                    { return nil }
func (m *memConn) Wake() error                     { return nil }
func (m *memConn) SetReading(bool)                 {}
func (m *memConn) RemoteAddr() net.Addr            { return &net.TCPAddr{} }

// benchTraffic runs traffic() over batches of 64 KiB of 16-byte PUBs (what a busy publisher's
// read brings), reporting per message: the parse → match → deliver path plus the per-batch
// and per-turn bookkeeping (turn clock, read pausing, flush).
func benchTraffic(b *testing.B, subs int) {
	r, pub, targets := newBenchEngine(b, subs, "foo")
	for _, t := range targets {
		t.conn = &memConn{}
	}
	frame := []byte("PUB foo 16\r\n0123456789abcdef\r\n")
	per := 64 << 10 / len(frame)
	batch := bytes.Repeat(frame, per)
	mc := &memConn{in: batch}
	pub.conn = mc
	pub.connected = true
	b.ReportAllocs()
	b.SetBytes(16)
	b.ResetTimer()
	for i := 0; i < b.N; i += per {
		mc.off = 0
		for mc.off < len(mc.in) {
			r.e.traffic(pub)
		}
	}
}

func BenchmarkTrafficNoInterest(b *testing.B) { benchTraffic(b, 0) }
func BenchmarkTrafficDeliver1(b *testing.B)   { benchTraffic(b, 1) }

// syncExec is an Executor whose tasks run when drained: a stand-in for another reactor's loop.
type syncExec struct{ tasks []func() }

func (x *syncExec) Execute(f func()) error { x.tasks = append(x.tasks, f); return nil }

func (x *syncExec) run() {
	for len(x.tasks) > 0 {
		t := x.tasks[0]
		x.tasks = x.tasks[1:]
		t()
	}
}

func benchFrames(b *testing.B, frame []byte, r *reactor, pub *client, after func()) {
	b.Helper()
	var p parser.Parser
	var op parser.Op
	b.ReportAllocs()
	b.SetBytes(16)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, err := p.Next(frame, &op)
		if err != nil || n != len(frame) {
			b.Fatal(n, err)
		}
		pub.process(&op)
		if i&63 == 63 {
			drain(r)
			if after != nil {
				after()
			}
		}
	}
	drain(r)
}

// BenchmarkPublishQueue4: one message to a queue group of four (one member picked).
func BenchmarkPublishQueue4(b *testing.B) {
	r, pub, _ := newBenchEngine(b, 0, "foo")
	for i := 0; i < 4; i++ {
		benchSub(b, r, "foo", "q")
	}
	benchFrames(b, []byte("PUB foo 16\r\n0123456789abcdef\r\n"), r, pub, nil)
}

// BenchmarkPublishCrossReactor: the subscriber belongs to another reactor, which gets one
// wake per batch and flushes there.
func BenchmarkPublishCrossReactor(b *testing.B) {
	r, pub, _ := newBenchEngine(b, 0, "foo")
	x := &syncExec{}
	r2 := newReactor(r.e, x, 1)
	peers := []*reactor{r, r2}
	r.e.peers.Store(&peers)
	t, _ := benchSub(b, r2, "foo", "")
	t.conn = &memConn{}
	benchFrames(b, []byte("PUB foo 16\r\n0123456789abcdef\r\n"), r, pub, func() {
		r.endBatch()
		x.run()
	})
}

// BenchmarkPublishHeadersStripped: an HPUB delivered to a client without header support (MSG
// with the payload only).
func BenchmarkPublishHeadersStripped(b *testing.B) {
	r, pub, _ := newBenchEngine(b, 1, "foo")
	benchFrames(b, []byte("HPUB foo 12 28\r\nNATS/1.0\r\n\r\n0123456789abcdef\r\n"), r, pub, nil)
}

// BenchmarkPublishPermFilter: the subscriber's deny list covers part of its wildcard, so each
// delivery is checked against it.
func BenchmarkPublishPermFilter(b *testing.B) {
	r, pub, _ := newBenchEngine(b, 0, "foo")
	t, s := benchSub(b, r, "foo.*", "")
	t.setPerms(auth.Compile(&auth.Permissions{Subscribe: &auth.SubjectPermission{Allow: []string{">"}, Deny: []string{"foo.secret"}}}))
	s.filter.Store(true)
	benchFrames(b, []byte("PUB foo.bar 16\r\n0123456789abcdef\r\n"), r, pub, nil)
}

// BenchmarkPublishInternal: the subscriber is an internal client's inline handler.
func BenchmarkPublishInternal(b *testing.B) {
	r, pub, _ := newBenchEngine(b, 0, "foo")
	ic := r.e.NewInternalClient(KindSystem, nil, "bench")
	n := 0
	if _, err := ic.Inline("foo", "", func(m *Msg) { n += len(m.Payload()) }); err != nil {
		b.Fatal(err)
	}
	benchFrames(b, []byte("PUB foo 16\r\n0123456789abcdef\r\n"), r, pub, nil)
	if n == 0 {
		b.Fatal("handler never ran")
	}
}

// BenchmarkPublishWorker: the subscriber is an internal client's Worker handler (a stream
// taking a publish, a consumer an ack): the reactor copies each message and hands the
// batch to the worker every 64. With origins the client keeps who published each one.
func BenchmarkPublishWorker(b *testing.B) {
	for _, origins := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "origins"}[origins], func(b *testing.B) {
			r, pub, _ := newBenchEngine(b, 0, "foo")
			ic := r.e.NewInternalClient(KindSystem, nil, "bench")
			if origins {
				ic.KeepOrigins()
			}
			var n, wrong atomic.Int64
			if _, err := ic.Worker("foo", "", func(m *WorkMsg) {
				if len(m.Data) != 16 || (m.From != nil) != origins {
					wrong.Add(1)
				}
				n.Add(1)
			}); err != nil {
				b.Fatal(err)
			}
			benchFrames(b, []byte("PUB foo 16\r\n0123456789abcdef\r\n"), r, pub, r.handOffWork)
			r.handOffWork()
			for n.Load() < int64(b.N) {
				runtime.Gosched()
			}
			if wrong.Load() > 0 {
				b.Fatalf("%d messages came with the wrong payload or origin", wrong.Load())
			}
		})
	}
}

// benchRoute adds a route to another server on reactor r, with that server's interest in
// subject (in queue group queue, if any).
func benchRoute(b *testing.B, r *reactor, subject, queue string) *client {
	rc := &client{r: r, tSlot: -1, kind: kindRouter, conn: &memConn{}}
	rc.route = &routeState{subs: make(map[string]*sub), headers: true, noPool: true}
	if err := rc.bind(r.e.global); err != nil {
		b.Fatal(err)
	}
	s := &sub{c: rc, acc: r.e.global, subject: subject, queue: queue, remote: true, sid: []byte("r")}
	s.qw.Store(1)
	if err := r.e.global.subs.Insert(subject, queue, s); err != nil {
		b.Fatal(err)
	}
	r.e.global.remoteSubs.Add(1)
	return rc
}

// BenchmarkPublishToRoute: a local publish whose only interest is on another server (one RMSG).
func BenchmarkPublishToRoute(b *testing.B) {
	r, pub, _ := newBenchEngine(b, 0, "foo")
	benchRoute(b, r, "foo", "")
	benchFrames(b, []byte("PUB foo 16\r\n0123456789abcdef\r\n"), r, pub, nil)
}

// BenchmarkPublishLocalAndRoute: one local subscriber and two matching subscriptions of
// another server (still one RMSG).
func BenchmarkPublishLocalAndRoute(b *testing.B) {
	r, pub, _ := newBenchEngine(b, 1, "foo")
	rc := benchRoute(b, r, "foo", "")
	s := &sub{c: rc, acc: r.e.global, subject: "*", remote: true, sid: []byte("r2")}
	if err := r.e.global.subs.Insert("*", "", s); err != nil {
		b.Fatal(err)
	}
	benchFrames(b, []byte("PUB foo 16\r\n0123456789abcdef\r\n"), r, pub, nil)
}

// BenchmarkRoutedMsgDeliver1: an RMSG from another server delivered to one local subscriber.
func BenchmarkRoutedMsgDeliver1(b *testing.B) {
	r, _, _ := newBenchEngine(b, 1, "foo")
	rc := benchRoute(b, r, "other", "")
	rc.route.registered = true
	rc.p.Mode = parser.RouteMode
	frame := []byte("RMSG $G foo 16\r\n0123456789abcdef\r\n")
	var op parser.Op
	b.ReportAllocs()
	b.SetBytes(16)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, err := rc.p.Next(frame, &op)
		if err != nil || n != len(frame) {
			b.Fatal(n, err)
		}
		rc.process(&op)
		if i&63 == 63 {
			drain(r)
		}
	}
	drain(r)
}

// discardConn takes every write whole.
type discardConn struct{ memConn }

func (s *discardConn) Writev(bs [][]byte) (int, error) {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n, nil
}

// BenchmarkInternalPublishDeliver1: an internal client's publish (what JetStream's
// deliveries and acks are) of 128 bytes with a reply, routed in batches of 64 to one
// connection: the copy into the client's queue, the drain on the internal reactor, the
// delivery. The batches are drained by hand, so the internal reactor's goroutine never runs.
func BenchmarkInternalPublishDeliver1(b *testing.B) {
	r, _, _ := newBenchEngine(b, 0, "foo")
	ic := r.e.NewInternalClient(KindSystem, nil, "bench")
	ir := ic.c.r
	t := &client{r: ir, tSlot: -1, conn: &discardConn{}}
	if err := t.bind(r.e.global); err != nil {
		b.Fatal(err)
	}
	s := &sub{c: t, acc: r.e.global, subject: "foo", sid: []byte("1")}
	if err := r.e.global.subs.Insert("foo", "", s); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 128)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ic.mu.Lock()
		ic.sched = true // drained below, never by the internal reactor
		ic.mu.Unlock()
		if err := ic.Publish("foo", "$JS.ACK.S.C.1.2.3.1700000000000000000.0", nil, payload); err != nil {
			b.Fatal(err)
		}
		if i&63 == 63 {
			ic.drain()
		}
	}
	ic.drain()
}
