// Command jsmany measures JetStream with many file streams taking publishes at once (a stream
// or KV bucket per tenant): for each server and stream count it creates the streams, then
// publishes round-robin over all of them with a bounded window of async publishes, and reports
// create time, publish rate, server CPU per stored message, RSS and goroutines. Every server is
// started here on a free 127.0.0.1 port with a fresh store directory and stopped by its PID.
//
//	jsmany --natsd bin/natsd --nats-server .cache/tools/nats-server --streams 1,100,1000,10000
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/natsd/natsd/perf/bench"
)

type side struct {
	name string
	bin  string
	conf string // extra config file lines (nats-server-always)
}

type row struct {
	Side        string  `json:"side"`
	Streams     int     `json:"streams"`
	CreateS     float64 `json:"create_s"`
	Msgs        int     `json:"msgs"`
	MsgsPerSec  float64 `json:"msgs_per_s"`
	CPUNsPerMsg float64 `json:"cpu_ns_per_msg"`
	RSSMiB      float64 `json:"rss_mib"`
	Goroutines  int     `json:"goroutines"`
	StackMiB    float64 `json:"stack_mib"`       // goroutine stacks in use (runtime.MemStats.StackInuse)
	IdleGor     int     `json:"idle_goroutines"` // goroutines 2 s after the last acknowledgement
	Stored      uint64  `json:"stored"`
	Err         string  `json:"error,omitempty"`
}

func main() {
	natsd := flag.String("natsd", "bin/natsd", "natsd binary")
	ref := flag.String("nats-server", ".cache/tools/nats-server", "nats-server binary")
	targets := flag.String("targets", "natsd,nats-server,nats-server-always", "sides to run")
	counts := flag.String("streams", "1,100,1000", "stream counts")
	msgs := flag.Int("msgs", 100000, "messages per run (all streams together)")
	window := flag.Int("window", 4096, "async publishes in flight")
	size := flag.Int("size", 128, "payload bytes")
	asJSON := flag.Bool("json", false, "print rows as JSON lines too")
	flag.Parse()

	sides := map[string]side{
		"natsd":              {name: "natsd", bin: *natsd},
		"nats-server":        {name: "nats-server", bin: *ref},
		"nats-server-always": {name: "nats-server-always", bin: *ref, conf: "sync_interval: always"},
	}
	fmt.Printf("%-20s %8s %9s %8s %11s %12s %8s %10s %9s %9s\n", "side", "streams", "create s", "msgs", "msgs/s", "CPU ns/msg", "RSS MiB", "goroutines", "stack MiB", "idle gor.")
	for _, cs := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(cs))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad stream count %q\n", cs)
			os.Exit(2)
		}
		for _, t := range strings.Split(*targets, ",") {
			sd, ok := sides[strings.TrimSpace(t)]
			if !ok {
				fmt.Fprintf(os.Stderr, "unknown target %q\n", t)
				os.Exit(2)
			}
			r := run(sd, n, *msgs, *window, *size)
			fmt.Printf("%-20s %8d %9.2f %8d %11.0f %12.0f %8.1f %10d %9.1f %9d %s\n", r.Side, r.Streams, r.CreateS, r.Msgs,
				r.MsgsPerSec, r.CPUNsPerMsg, r.RSSMiB, r.Goroutines, r.StackMiB, r.IdleGor, r.Err)
			if *asJSON {
				b, _ := json.Marshal(r)
				fmt.Println(string(b))
			}
		}
	}
}

func run(sd side, n, msgs, window, size int) (r row) {
	r = row{Side: sd.name, Streams: n, Msgs: msgs}
	tmp, err := os.MkdirTemp(os.Getenv("JS_TMPDIR"), "jsmany-")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer os.RemoveAll(tmp)
	port, prof := bench.MustFreePort(), bench.MustFreePort()
	store := filepath.Join(tmp, "store")
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "--profile", strconv.Itoa(prof)}
	if sd.conf != "" {
		conf := filepath.Join(tmp, "server.conf")
		body := fmt.Sprintf("jetstream {\n  store_dir: %q\n  %s\n}\n", store, sd.conf)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			r.Err = err.Error()
			return r
		}
		args = append(args, "-c", conf)
	} else {
		args = append(args, "-js", "-sd", store)
	}
	cmd := exec.Command(sd.bin, args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		r.Err = err.Error()
		return r
	}
	defer bench.StopProcess(cmd, 10*time.Second)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	var nc *nats.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if nc, err = nats.Connect(url, nats.MaxReconnects(-1)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			r.Err = "server did not start: " + err.Error()
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	for i := 0; i < n; i++ {
		// max_bytes keeps nats-server from reserving its 1 TB default per stream (4 GB in all).
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fmt.Sprintf("S%d", i),
			Subjects: []string{fmt.Sprintf("many.%d", i)}, Storage: jetstream.FileStorage,
			MaxBytes: min(64<<20, int64(4<<30)/int64(n))})
		if err != nil {
			r.Err = fmt.Sprintf("create %d: %v", i, err)
			return r
		}
	}
	r.CreateS = time.Since(start).Seconds()
	payload := make([]byte, size)
	cpu0, _ := bench.ProcCPU(cmd.Process.Pid)
	start = time.Now()
	for i := 0; i < msgs; i++ {
		if _, err := js.PublishAsync("many."+strconv.Itoa(i%n), payload, jetstream.WithStallWait(time.Minute)); err != nil {
			r.Err = fmt.Sprintf("publish %d: %v", i, err)
			return r
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		r.Err = "publishes not acknowledged in 5 minutes"
		return r
	}
	el := time.Since(start)
	cpu1, _ := bench.ProcCPU(cmd.Process.Pid)
	r.MsgsPerSec = float64(msgs) / el.Seconds()
	r.CPUNsPerMsg = float64((cpu1 - cpu0).Nanoseconds()) / float64(msgs)
	if rss, err := bench.ProcRSS(cmd.Process.Pid); err == nil {
		r.RSSMiB = float64(rss) / (1 << 20)
	}
	r.Goroutines = goroutines(prof)
	r.StackMiB = float64(stackInuse(prof)) / (1 << 20)
	time.Sleep(2 * time.Second) // what a server keeps for streams that stopped taking messages
	r.IdleGor = goroutines(prof)
	// Every message must be stored: the account's stream listing adds them up.
	lister := js.ListStreams(ctx)
	for info := range lister.Info() {
		r.Stored += info.State.Msgs
	}
	if err := lister.Err(); err != nil {
		r.Err = "list: " + err.Error()
	} else if r.Stored != uint64(msgs) {
		r.Err = fmt.Sprintf("stored %d of %d", r.Stored, msgs)
	}
	return r
}

// stackInuse reads the server's goroutine stack bytes from the MemStats footer of its heap
// profile (both servers serve net/http/pprof), or -1.
func stackInuse(port int) int64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", port))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// "# Stack = <StackInuse> / <StackSys>"
		if v, ok := strings.CutPrefix(sc.Text(), "# Stack = "); ok {
			v, _, _ = strings.Cut(v, " ")
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// goroutines reads the server's goroutine count from its pprof endpoint.
func goroutines(port int) int {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", port))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if sc.Scan() {
		// "goroutine profile: total N"
		if i := strings.LastIndexByte(sc.Text(), ' '); i >= 0 {
			if v, err := strconv.Atoi(sc.Text()[i+1:]); err == nil {
				return v
			}
		}
	}
	return -1
}
