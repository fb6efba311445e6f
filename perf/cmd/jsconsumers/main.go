// Command jsconsumers measures many durable consumers with distinct filters on one stream under
// a publishing load: for each server it creates a file stream S on s.>, N durable pull consumers
// (explicit ack) each filtered on s.<i>, starts every consumer's Consume (acking each message),
// then publishes --msgs messages round-robin over the N subjects with a bounded window of async
// publishes (as fast as it goes, or at --rate msgs/s). It reports the delivery rate (all
// deliveries / time from the first publish to the last delivery), the publish rate, server CPU
// (utime+stime from /proc/PID/stat over the same span) per delivery, RSS and consumer create
// time, and natsd / nats-server ratios. After each run every consumer's ack floor must have
// reached the messages it was sent. Every server is started here on a free 127.0.0.1 port with
// a fresh store directory (under $JS_TMPDIR) and stopped by its PID; every wait is bounded. A
// side that fails is reported "n/a (error: …)" and the run goes on.
//
//	jsconsumers --natsd bin/natsd --nats-server .cache/tools/nats-server --consumers 1000 --msgs 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/natsd/natsd/perf/bench"
)

type opts struct {
	consumers, msgs, window, size, batch, conns int
	rate                                        float64
	timeout                                     time.Duration
}

type result struct {
	createS, pubPerS, delPerS, cpuUsPerDel, rssMiB float64
	err                                            string
}

func main() {
	natsd := flag.String("natsd", "bin/natsd", "natsd binary")
	ref := flag.String("nats-server", ".cache/tools/nats-server", "nats-server binary")
	targets := flag.String("targets", "natsd,nats-server", "sides to run (natsd, nats-server)")
	rounds := flag.Int("rounds", 1, "measured runs per side, side order alternating; medians")
	var o opts
	flag.IntVar(&o.consumers, "consumers", 1000, "durable consumers, consumer i filtered on s.<i>")
	flag.IntVar(&o.msgs, "msgs", 100000, "messages published (round-robin over the consumers' subjects)")
	flag.Float64Var(&o.rate, "rate", 0, "publish rate in msgs/s (0: as fast as acks come back)")
	flag.IntVar(&o.window, "window", 4096, "async publishes in flight")
	flag.IntVar(&o.size, "size", 128, "payload bytes")
	flag.IntVar(&o.batch, "batch", 100, "PullMaxMessages of each consumer's Consume")
	flag.IntVar(&o.conns, "conns", 4, "client connections the consumers are spread over")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "bound on one run's publish and delivery")
	flag.Parse()
	bins := map[string]string{"natsd": *natsd, "nats-server": *ref}
	var sides []string
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimSpace(t)
		if bins[t] == "" {
			fmt.Fprintf(os.Stderr, "unknown target %q\n", t)
			os.Exit(2)
		}
		sides = append(sides, t)
	}
	if o.consumers <= 0 || o.msgs < o.consumers || *rounds <= 0 {
		fmt.Fprintln(os.Stderr, "need --consumers > 0, --msgs ≥ --consumers, --rounds > 0")
		os.Exit(2)
	}

	res := map[string][]result{}
	failed := map[string]string{}
	for r := 0; r < *rounds; r++ {
		for j := range sides {
			s := sides[(j+r)%len(sides)]
			if failed[s] != "" {
				continue
			}
			x := run(bins[s], o)
			if x.err != "" {
				failed[s] = x.err
				fmt.Fprintf(os.Stderr, "%s round %d: error: %s\n", s, r+1, x.err)
				continue
			}
			fmt.Fprintf(os.Stderr, "%s round %d: create %.2f s, publish %.0f msgs/s, delivery %.0f msgs/s, CPU %.1f µs/delivery, RSS %.0f MiB\n",
				s, r+1, x.createS, x.pubPerS, x.delPerS, x.cpuUsPerDel, x.rssMiB)
			res[s] = append(res[s], x)
		}
	}

	fmt.Printf("\n%d durable consumers (explicit ack, filter s.<i>) on one file stream, %d × %d B published %s, %d in flight, %d round(s), medians:\n\n",
		o.consumers, o.msgs, o.size, rateText(o.rate), o.window, *rounds)
	metrics := []struct {
		name string
		get  func(result) float64
		prec int
	}{
		{"deliveries/s", func(x result) float64 { return x.delPerS }, 0},
		{"server CPU µs/delivery", func(x result) float64 { return x.cpuUsPerDel }, 2},
		{"publish msgs/s", func(x result) float64 { return x.pubPerS }, 0},
		{"consumer create s", func(x result) float64 { return x.createS }, 2},
		{"server RSS MiB", func(x result) float64 { return x.rssMiB }, 0},
	}
	fmt.Println("| metric | " + strings.Join(sides, " | ") + " | natsd / nats-server |")
	fmt.Println("|---|" + strings.Repeat("---:|", len(sides)+1))
	for _, m := range metrics {
		row := "| " + m.name + " |"
		vals := map[string]float64{}
		for _, s := range sides {
			if len(res[s]) == 0 {
				row += " n/a (error: " + short(failed[s]) + ") |"
				continue
			}
			var v []float64
			for _, x := range res[s] {
				v = append(v, m.get(x))
			}
			vals[s] = median(v)
			row += " " + strconv.FormatFloat(vals[s], 'f', m.prec, 64) + " |"
		}
		if a, b := vals["natsd"], vals["nats-server"]; a > 0 && b > 0 {
			row += fmt.Sprintf(" %.2f× |", a/b)
		} else {
			row += " – |"
		}
		fmt.Println(row)
	}
}

func rateText(r float64) string {
	if r <= 0 {
		return "as fast as acks allow"
	}
	return fmt.Sprintf("at %.0f msgs/s", r)
}

// short is an error for a table cell: the server's description when there is one, no pipes.
func short(s string) string {
	if i := strings.LastIndex(s, "description="); i >= 0 {
		s = s[i+len("description="):]
	}
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 90 {
		return s[:87] + "..."
	}
	return s
}

func median(v []float64) float64 {
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// run starts bin, runs the scenario once and stops it.
func run(bin string, o opts) (r result) {
	srv, err := bench.StartJS(bin, "jsconsumers-")
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer srv.Stop()
	pid := srv.Cmd.Process.Pid
	connect := func() (*nats.Conn, error) {
		return bench.ConnectStarting(srv.URL, 10*time.Second, nats.MaxReconnects(-1))
	}
	pnc, err := connect()
	if err != nil {
		r.err = "server did not start: " + err.Error()
		return r
	}
	defer pnc.Close()
	js, err := jetstream.New(pnc, jetstream.WithPublishAsyncMaxPending(o.window))
	if err != nil {
		r.err = err.Error()
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout+2*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"},
		Storage: jetstream.FileStorage, MaxBytes: 1 << 30}); err != nil {
		r.err = "create stream: " + err.Error()
		return r
	}

	// The consumers, spread over o.conns connections; each message is acked as it arrives.
	var delivered atomic.Int64
	all := make(chan struct{})
	var errOnce sync.Once
	var consumeErr atomic.Value
	handler := func(m jetstream.Msg) {
		if err := m.Ack(); err != nil {
			errOnce.Do(func() { consumeErr.Store("ack: " + err.Error()) })
		}
		if delivered.Add(1) == int64(o.msgs) {
			close(all)
		}
	}
	cjs := make([]jetstream.JetStream, o.conns)
	for i := range cjs {
		nc, err := connect()
		if err != nil {
			r.err = err.Error()
			return r
		}
		defer nc.Close()
		cjs[i], _ = jetstream.New(nc)
	}
	start := time.Now()
	cons := make([]jetstream.Consumer, o.consumers)
	for i := range cons {
		cons[i], err = js.CreateOrUpdateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "c" + strconv.Itoa(i),
			FilterSubject: "s." + strconv.Itoa(i), AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			r.err = fmt.Sprintf("create consumer %d: %v", i, err)
			return r
		}
	}
	r.createS = time.Since(start).Seconds()
	for i := range cons {
		c, err := cjs[i%o.conns].Consumer(ctx, "S", "c"+strconv.Itoa(i))
		if err == nil {
			var cc jetstream.ConsumeContext
			cc, err = c.Consume(handler, jetstream.PullMaxMessages(o.batch),
				jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
					errOnce.Do(func() { consumeErr.Store("consume: " + err.Error()) })
				}))
			if err == nil {
				defer cc.Stop()
			}
		}
		if err != nil {
			r.err = fmt.Sprintf("consume %d: %v", i, err)
			return r
		}
	}

	payload := make([]byte, o.size)
	cpu0, _ := bench.ProcCPU(pid)
	start = time.Now()
	deadline := start.Add(o.timeout)
	for i := 0; i < o.msgs; i++ {
		if o.rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / o.rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		if _, err := js.PublishAsync("s."+strconv.Itoa(i%o.consumers), payload, jetstream.WithStallWait(time.Minute)); err != nil {
			r.err = fmt.Sprintf("publish %d: %v", i, err)
			return r
		}
		if i%1024 == 0 && time.Now().After(deadline) {
			r.err = fmt.Sprintf("published %d of %d in %v", i, o.msgs, o.timeout)
			return r
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Until(deadline)):
		r.err = fmt.Sprintf("publishes not acknowledged in %v", o.timeout)
		return r
	}
	r.pubPerS = float64(o.msgs) / time.Since(start).Seconds()
	select {
	case <-all:
	case <-time.After(time.Until(deadline)):
		r.err = fmt.Sprintf("delivered %d of %d in %v", delivered.Load(), o.msgs, o.timeout)
		if e, ok := consumeErr.Load().(string); ok {
			r.err += " (first error: " + e + ")"
		}
		return r
	}
	el := time.Since(start)
	cpu1, _ := bench.ProcCPU(pid)
	r.delPerS = float64(o.msgs) / el.Seconds()
	r.cpuUsPerDel = float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / float64(o.msgs)
	if rss, err := bench.ProcRSS(pid); err == nil {
		r.rssMiB = float64(rss) / (1 << 20)
	}
	if e, ok := consumeErr.Load().(string); ok {
		r.err = e
		return r
	}
	r.err = checkAcks(ctx, cons, o)
	return r
}

// checkAcks waits (up to 5 s) for every consumer's ack floor to reach the messages sent on its
// subject, with none redelivered or pending.
func checkAcks(ctx context.Context, cons []jetstream.Consumer, o opts) string {
	var last string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		last = ""
		for i, c := range cons {
			want := uint64(o.msgs / o.consumers)
			if i < o.msgs%o.consumers {
				want++
			}
			info, err := c.Info(ctx)
			if err != nil {
				return fmt.Sprintf("consumer %d info: %v", i, err)
			}
			if info.AckFloor.Consumer != want || info.Delivered.Consumer != want || info.NumPending != 0 {
				last = fmt.Sprintf("consumer %d: delivered %d, ack floor %d, pending %d; want %d delivered and acked",
					i, info.Delivered.Consumer, info.AckFloor.Consumer, info.NumPending, want)
				break
			}
		}
		if last == "" {
			return ""
		}
	}
	return last
}
