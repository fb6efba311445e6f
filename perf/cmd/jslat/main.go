// Command jslat compares the latency of one JetStream client's sequential operations across
// server binaries started side by side, each with `-js` and a fresh store: a KV put, a sync
// publish, a KV get (direct get by key), a PING answered by PONG (the floor: one round trip
// through the server and the client's read loop), or a stream create and delete, each
// waiting for its answer before the next. The sides take turns in short chunks, the first
// side rotating each chunk, so that a disk or a CPU whose speed drifts over minutes (these
// machines' do) weighs on every side alike; a sequential run of one side after the other
// cannot tell a 10 % change from that drift.
// Loopback only; it stops only the servers it started.
//
//	bin/jslat --bins bin/natsd,/tmp/natsd.old,.cache/tools/nats-server --op kvput
//	bin/jslat --bins bin/natsd,.cache/tools/nats-server --op kvget
//	bin/jslat --bins bin/natsd,.cache/tools/nats-server --op create --chunks 60 --per 1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/natsd/natsd/perf/bench"
)

type side struct {
	bin        string
	nc         *nats.Conn
	js         jetstream.JetStream
	kv         jetstream.KeyValue
	chunkP50s  []time.Duration
	all, extra []time.Duration // extra: the delete after a create, the first put after a bucket create
}

func main() {
	bins := flag.String("bins", "bin/natsd,.cache/tools/nats-server", "comma-separated server binaries")
	op := flag.String("op", "kvput", "kvput (kv.Put, 128 B), pub (js.Publish, 128 B), kvget (kv.Get of one of 1,000 keys, 128 B), "+
		"ping (nc.Flush: PING, PONG), create (a stream created, then deleted) or bucket (a KV bucket created, then its first put timed)")
	chunks := flag.Int("chunks", 20, "chunks per side, after one unmeasured")
	per := flag.Int("per", 300, "operations per chunk")
	memory := flag.Bool("memory", false, "memory storage for the kvput and pub ops' bucket and stream: the path without the disk")
	flag.Parse()
	ops := map[string]string{"kvput": "kv.Put", "pub": "js.Publish", "kvget": "kv.Get", "ping": "PING/PONG",
		"create": "stream create", "bucket": "KV bucket create"}
	what, ok := ops[*op]
	if !ok {
		fmt.Fprintln(os.Stderr, "jslat: --op is kvput, pub, kvget, ping, create or bucket")
		os.Exit(2)
	}
	var sides []*side
	for _, b := range strings.Split(*bins, ",") {
		s, stop, err := start(b, *memory, *op == "kvget")
		if err != nil {
			fmt.Fprintf(os.Stderr, "jslat: %s: %v\n", b, err)
			os.Exit(1)
		}
		defer stop()
		sides = append(sides, s)
	}
	ctx := context.Background()
	val := make([]byte, 128)
	seq := 0
	for c := 0; c <= *chunks; c++ {
		for k := range sides {
			s := sides[(k+c)%len(sides)]
			var d []time.Duration
			for i := 0; i < *per; i++ {
				seq++
				t := time.Now()
				var err error
				switch *op {
				case "kvput":
					_, err = s.kv.Put(ctx, "k"+strconv.Itoa(seq%1000), val)
				case "pub":
					_, err = s.js.Publish(ctx, "lat.x", val)
				case "kvget":
					_, err = s.kv.Get(ctx, "k"+strconv.Itoa(seq%1000))
				case "ping":
					err = s.nc.Flush()
				case "bucket":
					var kv jetstream.KeyValue
					if kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "K" + strconv.Itoa(seq)}); err == nil {
						d = append(d, time.Since(t))
						t = time.Now()
						if _, err = kv.Put(ctx, "k", val); err == nil {
							if c > 0 {
								s.extra = append(s.extra, time.Since(t))
							}
							continue
						}
					}
				case "create":
					name := "C" + strconv.Itoa(seq)
					if _, err = s.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"c." + name}}); err == nil {
						d = append(d, time.Since(t))
						t = time.Now()
						if err = s.js.DeleteStream(ctx, name); err == nil {
							if c > 0 {
								s.extra = append(s.extra, time.Since(t))
							}
							continue
						}
					}
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "jslat: %s: %v\n", s.bin, err)
					os.Exit(1)
				}
				d = append(d, time.Since(t))
			}
			if c > 0 { // the first chunk warms every side up
				s.chunkP50s = append(s.chunkP50s, bench.Quantile(d, 0.5))
				s.all = append(s.all, d...)
			}
		}
	}
	extra := map[string]string{"create": "delete", "bucket": "first put"}[*op]
	fmt.Printf("%s, %d chunks of %d per side, taking turns (%s)\n", what, *chunks, *per, time.Now().Format("2006-01-02 15:04"))
	for _, s := range sides {
		fmt.Printf("  %-40s p50 %8.1f µs  p90 %8.1f µs  median of chunk p50s %8.1f µs", s.bin,
			us(bench.Quantile(s.all, 0.5)), us(bench.Quantile(s.all, 0.9)), us(bench.Quantile(s.chunkP50s, 0.5)))
		if len(s.extra) > 0 {
			fmt.Printf("  %s p50 %8.1f µs", extra, us(bench.Quantile(s.extra, 0.5)))
		}
		fmt.Println()
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// start runs bin with JetStream on a fresh store and connects to it; a KV bucket "B" and a
// stream "LAT" on lat.> are made for the put and publish ops, in memory if memory is set;
// with prefill the bucket gets keys k0…k999 (128 B each) for the get op.
func start(bin string, memory, prefill bool) (*side, func(), error) {
	srv, err := bench.StartJS(bin, "jslat")
	if err != nil {
		return nil, nil, err
	}
	stop := srv.Stop
	nc, err := bench.ConnectStarting(srv.URL, 10*time.Second)
	if err != nil {
		stop()
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		stop()
		return nil, nil, err
	}
	ctx := context.Background()
	st := jetstream.FileStorage
	if memory {
		st = jetstream.MemoryStorage
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B", Storage: st})
	if err == nil {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "LAT", Subjects: []string{"lat.>"}, Storage: st})
	}
	for i := 0; err == nil && prefill && i < 1000; i++ {
		_, err = kv.Put(ctx, "k"+strconv.Itoa(i), make([]byte, 128))
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &side{bin: bin, nc: nc, js: js, kv: kv}, func() { nc.Close(); stop() }, nil
}
