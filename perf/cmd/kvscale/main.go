// Command kvscale measures the KV scale figures of issue 18 on natsd and nats-server, one
// after the other, each with its default durability: one bucket filled with N keys (async
// puts, then the server's RSS per key), random gets of them (kv.Get, direct get), and B
// buckets of a few keys each (RSS, goroutines from the profiling port, threads). Loopback
// only; it stops only the servers it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/natsd/natsd/perf/bench"
)

type result struct {
	putRate, getRate    float64
	rssBase, rssKeys    int64
	bucketsRSS          int64
	bucketsCreate       time.Duration
	createP50           time.Duration // one CreateKeyValue, without its puts
	goroutines, threads int
	err                 string
}

func main() {
	natsd := flag.String("natsd", "bin/natsd", "natsd binary")
	ns := flag.String("nats-server", ".cache/tools/nats-server", "nats-server binary")
	keys := flag.Int("keys", 1_000_000, "keys in the one bucket")
	gets := flag.Int("gets", 50_000, "random gets")
	buckets := flag.Int("buckets", 1000, "buckets for the many-buckets figure")
	flag.Parse()
	res := map[string]result{}
	for _, side := range []struct{ name, bin string }{{"natsd", *natsd}, {"nats-server", *ns}} {
		r := run(side.bin, *keys, *gets, *buckets)
		res[side.name] = r
		if r.err != "" {
			fmt.Printf("%s: error: %s\n", side.name, r.err)
			continue
		}
		fmt.Printf("%s: put %.0f/s, get %.0f/s, RSS %d → %d MiB (%.0f B/key); %d buckets: create %.2f s, RSS %d MiB, %d goroutines, %d threads\n",
			side.name, r.putRate, r.getRate, r.rssBase>>20, r.rssKeys>>20, float64(r.rssKeys-r.rssBase)/float64(*keys),
			*buckets, r.bucketsCreate.Seconds(), r.bucketsRSS>>20, r.goroutines, r.threads)
	}
	a, b := res["natsd"], res["nats-server"]
	if a.err != "" || b.err != "" {
		return
	}
	fmt.Printf("\n| %d keys, %d buckets | natsd | nats-server | natsd / nats-server |\n|---|---:|---:|---:|\n", *keys, *buckets)
	row := func(name string, x, y float64, f string) {
		fmt.Printf("| %s | "+f+" | "+f+" | %.2f× |\n", name, x, y, x/y)
	}
	row("kv put (async) /s", a.putRate, b.putRate, "%.0f")
	row("kv get /s", a.getRate, b.getRate, "%.0f")
	kn := float64(*keys)
	row("RSS per key (B)", float64(a.rssKeys-a.rssBase)/kn, float64(b.rssKeys-b.rssBase)/kn, "%.0f")
	row("buckets: create and 3 puts each (s)", a.bucketsCreate.Seconds(), b.bucketsCreate.Seconds(), "%.2f")
	row("bucket create p50 (ms)", float64(a.createP50.Microseconds())/1000, float64(b.createP50.Microseconds())/1000, "%.2f")
	row("buckets: RSS (MiB)", float64(a.bucketsRSS>>20), float64(b.bucketsRSS>>20), "%.0f")
	row("buckets: goroutines", float64(a.goroutines), float64(b.goroutines), "%.0f")
	row("buckets: threads", float64(a.threads), float64(b.threads), "%.0f")
}

func run(bin string, keys, gets, buckets int) (r result) {
	prof := bench.MustFreePort()
	srv, err := bench.StartJS(bin, "kvscale-", "--profile", strconv.Itoa(prof))
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer srv.Stop()
	pid := srv.Cmd.Process.Pid
	nc, err := bench.ConnectStarting(srv.URL, 10*time.Second)
	if err != nil {
		r.err = "server did not start: " + err.Error()
		return r
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		r.err = err.Error()
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "big"})
	if err != nil {
		r.err = "create bucket: " + err.Error()
		return r
	}
	time.Sleep(200 * time.Millisecond)
	r.rssBase, _ = bench.ProcRSS(pid)
	val := []byte(strings.Repeat("v", 64))
	t0 := time.Now()
	for i := 0; i < keys; i++ {
		if _, err := js.PublishAsync("$KV.big.k"+strconv.Itoa(i), val); err != nil {
			r.err = "put: " + err.Error()
			return r
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		r.err = "puts not acknowledged in time"
		return r
	}
	r.putRate = float64(keys) / time.Since(t0).Seconds()
	time.Sleep(500 * time.Millisecond)
	r.rssKeys, _ = bench.ProcRSS(pid)
	rng := rand.New(rand.NewPCG(1, 2))
	t0 = time.Now()
	for i := 0; i < gets; i++ {
		k := "k" + strconv.Itoa(rng.IntN(keys))
		if _, err := kv.Get(ctx, k); err != nil {
			r.err = "get " + k + ": " + err.Error()
			return r
		}
	}
	r.getRate = float64(gets) / time.Since(t0).Seconds()
	if err := js.DeleteKeyValue(ctx, "big"); err != nil {
		r.err = "delete bucket: " + err.Error()
		return r
	}
	t0 = time.Now()
	creates := make([]time.Duration, 0, buckets)
	for b := 0; b < buckets; b++ {
		tc := time.Now()
		kvb, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b" + strconv.Itoa(b)})
		creates = append(creates, time.Since(tc))
		if err != nil {
			r.err = "create bucket: " + err.Error()
			return r
		}
		for k := 0; k < 3; k++ {
			if _, err := kvb.Put(ctx, "k"+strconv.Itoa(k), val); err != nil {
				r.err = "put: " + err.Error()
				return r
			}
		}
	}
	r.bucketsCreate = time.Since(t0)
	slices.Sort(creates)
	if len(creates) > 0 {
		r.createP50 = creates[len(creates)/2]
	}
	time.Sleep(time.Second)
	r.bucketsRSS, _ = bench.ProcRSS(pid)
	r.goroutines = goroutines(prof)
	r.threads = threads(pid)
	return r
}

// goroutines reads the count from the profiling port's goroutine profile.
func goroutines(port int) int {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", port))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	line, _, _ := strings.Cut(string(b), "\n")
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total")))
	return n
}

func threads(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}
