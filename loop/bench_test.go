package loop

import (
	"testing"

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
	var targets []*client
	for i := 0; i < subs; i++ {
		t := &client{r: r, tSlot: -1}
		s := &sub{c: t, subject: subject, sid: []byte("1")}
		if err := e.subs.Insert(subject, "", s); err != nil {
			b.Fatal(err)
		}
		targets = append(targets, t)
	}
	return r, pub, targets
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
	frame := []byte("PUB foo 16\r\n0123456789abcdef\r\n")
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
		}
	}
	drain(r)
}

func BenchmarkPublishDeliver1(b *testing.B) { benchPublish(b, 1) }
func BenchmarkPublishDeliver4(b *testing.B) { benchPublish(b, 4) }

func BenchmarkPublishNoInterest(b *testing.B) { benchPublish(b, 0) }
