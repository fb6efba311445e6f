package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Crash tests of consumer acks (issue 17): a publisher and two workers fetching from one
// durable pull consumer and double-acking (AckSync) every message, the server killed (SIGKILL
// here, a power cut in jetstream_consumer_crash_test.go) at random moments and restarted on
// what it left. A double ack the server answered is durable (docs/ARCHITECTURE.md, invariant 5), so
// after every restart:
//
//   - no message whose double ack was confirmed is delivered again;
//   - the consumer's ack floor (info's ack_floor.stream_seq) is at least the highest one an
//     info answered before the crash (natsd commits the consumer's state before answering
//     info);
//
// and, once the last server has run long enough for every pending delivery's ack wait to
// run out, every message the stream acknowledged has been delivered at least once and
// nothing is left pending.
//
// The ack wait is long (ckAckWait) so that in a healthy run redeliveries only come from
// restarts. Nothing asserted depends on timing: a confirmed message delivered again by the
// same server is excused only if its ack was confirmed so late (over half the ack wait
// after the message arrived) that the ack wait may have run out first.

const (
	ckStream   = "CK"
	ckConsumer = "C"
	ckAckWait  = 20 * time.Second
)

// ckRun is what the clients saw over every server of a run, each one a generation.
type ckRun struct {
	mu        sync.Mutex
	gen       int
	dead      bool                 // the current server is gone (power cut): ignore what it still says
	pubAcked  map[uint64]bool      // stream sequences the stream acknowledged
	delivered map[uint64]int       // stream sequence -> deliveries received
	confirmed map[uint64]int       // stream sequence -> generation its double ack was confirmed in
	slow      map[uint64]bool      // confirmed so late that an ack-wait redelivery may have raced it
	recv      map[uint64]time.Time // when its latest delivery arrived
	genConf   int                  // double acks confirmed by the current server
	genDlv    int                  // deliveries received from the current server
	maxFloor  uint64               // the highest ack floor an info answered
	floorGen  int
	backGen   map[int]bool // generations with an ack floor gone back (reported once each)

	redelivered []string // confirmed acks whose message came again
	floorBack   []string // ack floors below one reported earlier
	errs        []string // things that must not happen at all (bad metadata, ...)
}

func newCKRun() *ckRun {
	return &ckRun{pubAcked: map[uint64]bool{}, delivered: map[uint64]int{}, confirmed: map[uint64]int{},
		slow: map[uint64]bool{}, recv: map[uint64]time.Time{}, backGen: map[int]bool{}}
}

// next starts generation gen (a new server on what the last one left).
func (r *ckRun) next(gen int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen, r.dead, r.genConf, r.genDlv = gen, false, 0, 0
}

// kill marks the current server dead, first running cut (the power cut) under the lock: what
// was recorded before it is what the clients had received before the cut.
func (r *ckRun) kill(cut func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return
	}
	if cut != nil {
		cut()
	}
	r.dead = true
}

func (r *ckRun) isDead() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dead
}

func (r *ckRun) pubAck(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dead {
		r.pubAcked[seq] = true
	}
}

// backlog is about how many acknowledged messages have not been delivered yet.
func (r *ckRun) backlog() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pubAcked) - len(r.delivered)
}

// received records a delivery; false: the server is dead, leave the message alone.
func (r *ckRun) received(seq, dc uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return false
	}
	r.delivered[seq]++
	r.recv[seq] = time.Now()
	r.genDlv++
	if g, ok := r.confirmed[seq]; ok && (g < r.gen || !r.slow[seq]) {
		r.redelivered = append(r.redelivered, fmt.Sprintf("stream seq %d (double ack confirmed by server %d) delivered again by server %d, delivery count %d",
			seq, g, r.gen, dc))
	}
	return true
}

func (r *ckRun) confirm(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return
	}
	if _, ok := r.confirmed[seq]; !ok {
		r.confirmed[seq] = r.gen
	}
	if time.Since(r.recv[seq]) > ckAckWait/2 {
		r.slow[seq] = true
	}
	r.genConf++
}

// floor records an ack floor an info answered.
func (r *ckRun) floor(f uint64, where string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return
	}
	if f < r.maxFloor && !r.backGen[r.gen] {
		r.backGen[r.gen] = true
		r.floorBack = append(r.floorBack, fmt.Sprintf("%s of server %d: ack floor %d, below the %d an info of server %d answered",
			where, r.gen, f, r.maxFloor, r.floorGen))
	}
	if f > r.maxFloor {
		r.maxFloor, r.floorGen = f, r.gen
	}
}

func (r *ckRun) errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dead {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

func (r *ckRun) counts() (confirmed, delivered int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.genConf, r.genDlv
}

// missing lists the acknowledged messages never delivered.
func (r *ckRun) missing() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint64
	for seq := range r.pubAcked {
		if r.delivered[seq] == 0 {
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	return out
}

// bad is what the run found wrong so far ("" if nothing).
func (r *ckRun) bad() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	list := func(what string, l []string) {
		if len(l) == 0 {
			return
		}
		fmt.Fprintf(&b, "%d %s:", len(l), what)
		for i, s := range l {
			if i == 10 {
				b.WriteString("\n\t...")
				break
			}
			b.WriteString("\n\t" + s)
		}
		b.WriteString("\n")
	}
	list("confirmed acks redelivered", r.redelivered)
	list("servers whose ack floor went back", r.floorBack)
	list("errors", r.errs)
	return b.String()
}

func (r *ckRun) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	redelivered := map[uint64]bool{}
	for _, s := range r.redelivered {
		var seq uint64
		fmt.Sscanf(s, "stream seq %d", &seq)
		redelivered[seq] = true
	}
	return fmt.Sprintf("%d messages acknowledged by the stream, %d delivered, %d double acks confirmed; "+
		"%d confirmed acks redelivered (%d deliveries), %d servers with ack floors gone back; highest floor %d",
		len(r.pubAcked), len(r.delivered), len(r.confirmed), len(redelivered), len(r.redelivered), len(r.floorBack), r.maxFloor)
}

// ckSetup creates the stream and the consumer.
func ckSetup(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: ckStream, Subjects: []string{ckStream + ".>"},
		Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.CreateConsumer(ctx, ckStream, jetstream.ConsumerConfig{Durable: ckConsumer,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ckAckWait}); err != nil {
		t.Fatalf("create consumer: %v", err)
	}
}

// ckGen is the clients of one generation: a publisher, two fetching workers, an info poller.
type ckGen struct {
	nc   *nats.Conn
	cons jetstream.Consumer
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// start connects to a (re)started server, checks its consumer's ack floor against what
// infos answered before, and starts the clients (the publisher only if publish).
func (r *ckRun) start(t *testing.T, url string, publish bool) *ckGen {
	t.Helper()
	nc, err := nats.Connect(url, nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	g := &ckGen{nc: nc, stop: make(chan struct{})}
	t.Cleanup(func() { g.finish(t) }) // (a failed test's clients must not run on)
	// The consumer may take a moment to be recovered after the port opens.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var info *jetstream.ConsumerInfo
		g.cons, err = js.Consumer(ctx, ckStream, ckConsumer)
		if err == nil {
			info, err = g.cons.Info(ctx)
		}
		cancel()
		if err == nil {
			r.floor(info.AckFloor.Stream, "the first info")
			break
		}
		if time.Now().After(deadline) {
			nc.Close()
			t.Fatalf("consumer after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := func() bool {
		select {
		case <-g.stop:
			return true
		default:
			return nc.IsClosed()
		}
	}
	if publish {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for i := 0; !stopped(); i++ {
				// Keep the backlog small: it all has to be delivered by the end.
				if r.backlog() > 300 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				a, err := js.Publish(ctx, ckStream+".x", fmt.Appendf(nil, "m%d", i))
				cancel()
				if err == nil {
					r.pubAck(a.Sequence)
				}
			}
		}()
	}
	for w := 0; w < 2; w++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for !stopped() {
				b, err := g.cons.Fetch(16, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				for m := range b.Messages() {
					md, err := m.Metadata()
					if err != nil {
						r.errorf("delivery on %s: %v", m.Reply(), err)
						continue
					}
					seq := md.Sequence.Stream
					if !r.received(seq, md.NumDelivered) {
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err = m.DoubleAck(ctx)
					cancel()
					if err == nil {
						r.confirm(seq)
					}
				}
			}
		}()
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for !stopped() {
			time.Sleep(20 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			info, err := g.cons.Info(ctx)
			cancel()
			if err == nil {
				r.floor(info.AckFloor.Stream, "an info")
			}
		}
	}()
	return g
}

// finish stops the clients and waits for them.
func (g *ckGen) finish(t *testing.T) {
	t.Helper()
	g.once.Do(func() {
		close(g.stop)
		g.nc.Close()
		done := make(chan struct{})
		go func() { g.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("clients did not stop in 30s")
		}
	})
}

// waitConfirmed waits for the current server to confirm k double acks.
func (r *ckRun) waitConfirmed(t *testing.T, k int, alive func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, d := r.counts()
		if n >= k {
			return
		}
		if err := alive(); err != nil {
			t.Fatalf("server %d: %v (%d confirmed, %d delivered)", r.gen, err, n, d)
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %d: %d double acks confirmed (%d deliveries) in 60s, never reached %d", r.gen, n, d, k)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// drain runs the clients without a publisher on the last server until every acknowledged
// message has been delivered and the consumer has nothing pending (waiting out the ack wait
// of deliveries the last crash left pending). It returns false if that did not happen in
// time; strict fails the test then.
func (r *ckRun) drain(t *testing.T, url string, strict bool, limit time.Duration) bool {
	t.Helper()
	g := r.start(t, url, false)
	defer g.finish(t)
	deadline := time.Now().Add(limit)
	var info *jetstream.ConsumerInfo
	for {
		miss := r.missing()
		if len(miss) == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var err error
			info, err = g.cons.Info(ctx)
			cancel()
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				if info.AckFloor.Stream != info.Delivered.Stream {
					r.errorf("drained: ack floor %+v, delivered %+v", info.AckFloor, info.Delivered)
				}
				return true
			}
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("not drained in %v: %d acknowledged messages never delivered %v; consumer %+v",
				limit, len(miss), miss[:min(len(miss), 20)], info)
			if strict {
				t.Fatal(msg)
			}
			t.Log(msg)
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ckKillRounds runs the workload on bin (natsd or nats-server), killing the server with
// SIGKILL rounds times; strict fails the test on anything found, otherwise it is logged.
func ckKillRounds(t *testing.T, bin string, rng *rand.Rand, rounds int, strict bool) *ckRun {
	storeDir := t.TempDir()
	r := newCKRun()
	check := func(when string, last bool) {
		if b := r.bad(); b != "" && (strict || last) {
			if strict {
				t.Fatalf("%s: %s\n%s", when, r.summary(), b)
			}
			t.Logf("%s: %s\n%s", when, r.summary(), b)
		}
	}
	drainFor := ckAckWait + 40*time.Second
	if !strict {
		drainFor = ckAckWait + 10*time.Second
	}
	for round := 0; ; round++ {
		t0 := time.Now()
		p := startKillable(t, bin, storeDir)
		r.next(round)
		if round == 0 {
			ckSetup(t, p.url)
		}
		if round == rounds {
			r.drain(t, p.url, strict, drainFor)
			t.Logf("server %d: drained in %v", round, time.Since(t0).Round(time.Millisecond))
			check("at the end", true)
			p.kill(t)
			break
		}
		g := r.start(t, p.url, true)
		k := 20 + rng.Intn(200)
		r.waitConfirmed(t, k, func() error {
			select {
			case err := <-p.done:
				p.done <- err
				return fmt.Errorf("exited: %v\n%s", err, p.log)
			default:
				return nil
			}
		})
		time.Sleep(time.Duration(rng.Intn(20000)) * time.Microsecond)
		p.kill(t)
		g.finish(t)
		r.kill(nil)
		conf, dlv := r.counts()
		t.Logf("server %d: killed after %d double acks confirmed, %d deliveries (%v)", round, conf, dlv, time.Since(t0).Round(time.Millisecond))
		check(fmt.Sprintf("after server %d", round), false)
	}
	t.Logf("%s", r.summary())
	return r
}

// TestJetStreamConsumerAckSIGKILL: confirmed double acks survive SIGKILL (see the top of
// this file).
func TestJetStreamConsumerAckSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := natsdBinary(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := ckKillRounds(t, bin, rand.New(rand.NewSource(seed)), 5, true)
	if n := len(r.pubAcked); n < 50 {
		t.Fatalf("only %d messages acknowledged over the run: the workload did not run", n)
	}
}

// natsServerBinary is the nats-server the Makefile installs (make tools): NATS_SERVER, or
// .cache/tools/nats-server.
func natsServerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NATS_SERVER"); p != "" {
		return p
	}
	p, _ := filepath.Abs("../.cache/tools/nats-server")
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			t.Skip("nats-server is not installed: run `make tools`")
		}
		t.Fatal(err)
	}
	return p
}

// TestNatsServerConsumerAckSIGKILL runs the same workload against nats-server and only logs
// what it finds: nats-server answers a double ack before the consumer's state is written
// (it is flushed later, in the background), so SIGKILL makes it deliver confirmed acks again
// and move ack floors back. This documents the difference; it never fails on it.
func TestNatsServerConsumerAckSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server")
	}
	bin := natsServerBinary(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := ckKillRounds(t, bin, rand.New(rand.NewSource(seed)), 5, false)
	r.mu.Lock()
	defer r.mu.Unlock()
	redelivered := map[uint64]bool{}
	for _, s := range r.redelivered {
		var seq uint64
		fmt.Sscanf(s, "stream seq %d", &seq)
		redelivered[seq] = true
	}
	if n := len(r.confirmed); n > 0 {
		t.Logf("nats-server: %d of %d confirmed double acks (%.1f%%) were redelivered after SIGKILL; the ack floor went back on %d of 5 restarts",
			len(redelivered), n, 100*float64(len(redelivered))/float64(n), len(r.floorBack))
	}
}
