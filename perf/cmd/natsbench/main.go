// Command natsbench is natsd's load generator: run one scenario against any running NATS
// server (natsd, nats-server, anything speaking the client protocol) and print the result.
//
//	natsbench --server nats://127.0.0.1:4222 --scenario fanout --clients 16 --size 128 --duration 3s
//	natsbench --scenario cluster --server nats://127.0.0.1:4222 --sub-server nats://127.0.0.1:4223 --pid A --pids B,C
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/perf/bench"
)

func main() {
	var cfg bench.Config
	var size, format, pids string
	var rounds int
	flag.StringVar(&cfg.Server, "server", "nats://127.0.0.1:4222", "server URL to load")
	flag.StringVar(&cfg.SubServer, "sub-server", "", "cluster scenario: the server the subscriber connects to (another server of --server's cluster)")
	flag.StringVar(&cfg.Scenario, "scenario", bench.PubSub, "scenario: "+strings.Join(bench.Scenarios, ", "))
	flag.DurationVar(&cfg.Duration, "duration", 2*time.Second, "publishing time per round (ignored when --msgs is set)")
	flag.IntVar(&cfg.Msgs, "msgs", 0, "messages (requests for reqrep) to publish per round; 0 = use --duration")
	flag.IntVar(&cfg.Clients, "clients", 0, "scenario's N: fanout subscribers, queue members, manypub publishers, reqrep requesters, idle connections (0 = scenario default)")
	flag.StringVar(&size, "size", "16", "payload size (16, 128, 1KiB, 16KiB, 256KiB …)")
	flag.IntVar(&cfg.Subjects, "subjects", 0, "distinct subjects to publish on (wildcard: concrete subjects, default 1000)")
	flag.IntVar(&cfg.WildSubs, "wild-subs", 10000, "wildcard scenario: number of */> subscriptions")
	flag.IntVar(&cfg.PID, "pid", 0, "server PID on this host: adds server CPU per message (/proc) and RSS per idle connection")
	flag.StringVar(&pids, "pids", "", "more server PIDs (comma-separated, e.g. the rest of a cluster): their CPU is added to --pid's")
	flag.IntVar(&cfg.WindowMiB, "window-mib", 32, "flow control: bytes in flight between publishers and subscribers")
	flag.IntVar(&rounds, "rounds", 1, "repeat the run this many times")
	flag.StringVar(&format, "format", "text", "output: text, csv or json")
	flag.Parse()
	n, err := bench.ParseSize(size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsbench:", err)
		os.Exit(2)
	}
	cfg.Size = n
	for _, f := range strings.FieldsFunc(pids, func(r rune) bool { return r == ',' || r == ' ' }) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "natsbench: --pids:", err)
			os.Exit(2)
		}
		cfg.PIDs = append(cfg.PIDs, pid)
	}
	if format == "csv" {
		fmt.Println(bench.CSVHeader)
	}
	enc := json.NewEncoder(os.Stdout)
	failed := false
	for i := 0; i < rounds; i++ {
		r, err := bench.Run(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "natsbench:", err)
			os.Exit(1)
		}
		if len(r.Errors) > 0 {
			failed = true
		}
		switch format {
		case "csv":
			fmt.Println(r.CSV())
		case "json":
			_ = enc.Encode(r)
		default:
			fmt.Printf("%-9s size=%-7s clients=%-4d %12.0f msgs/s %9.2f MB/s  pub=%d del=%d in %.3fs",
				r.Scenario, bench.SizeLabel(r.Size), r.Clients, r.Rate, r.MBps, r.Published, r.Delivered, r.Seconds)
			if r.CPUPerMsg > 0 {
				fmt.Printf("  server %.1f ns/msg", r.CPUPerMsg)
				if len(r.CPUPerMsgEach) > 0 {
					fmt.Printf(" (each %s)", fmtEach(r.CPUPerMsgEach))
				}
			}
			if r.P50us > 0 {
				fmt.Printf("  p50=%.1fµs p99=%.1fµs p99.9=%.1fµs", r.P50us, r.P99us, r.P999us)
			}
			if r.RSSPerConn != 0 {
				fmt.Printf("  %.1f KiB/conn", r.RSSPerConn)
			}
			fmt.Println()
			for _, e := range r.Errors {
				fmt.Println("  error:", e)
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}

func fmtEach(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.FormatFloat(x, 'f', 1, 64))
	}
	return strings.Join(s, " + ")
}
