// Command attackrig runs hostile clients against natsd (each engine) and nats-server in one run
// and prints what each attack cost each server: peak RSS, an unrelated client's PING round trip
// unloaded and under attack, RSS once the attacker left, and when the first slow consumer was
// cut. With --check it fails unless natsd stays within the bounds: peak RSS at most 2×
// nats-server's, round trip p50 under attack at most 2× its own unloaded p50, and RSS back near
// where it started.
//
//	bin/attackrig --attacks slowsub,ping,badsub,classic --duration 8s
//	bin/attackrig --tls --attacks slowsub,ping,badsub --targets natsd-gnet,nats-server
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/natsd/natsd/perf/attack"
)

func main() {
	attack.ProbeMain() // the unrelated client's own process (perf/attack/probe.go)
	natsd := flag.String("natsd", "bin/natsd", "natsd binary")
	ref := flag.String("nats-server", ".cache/tools/nats-server", "nats-server binary")
	targets := flag.String("targets", "nats-server,natsd-gnet,natsd-netpoll", "comma-separated: natsd-ENGINE or nats-server")
	attacks := flag.String("attacks", strings.Join(attack.Attacks, ","), "comma-separated attacks")
	dur := flag.Duration("duration", 8*time.Second, "attack length")
	base := flag.Duration("baseline", 2*time.Second, "unloaded probing first")
	after := flag.Duration("after", 10*time.Second, "wait after the attack before the last RSS reading")
	useTLS := flag.Bool("tls", false, "clients over TLS")
	extra := flag.String("config", "", `config-file text both servers get, e.g. "max_pending: 8MB"`)
	check := flag.Bool("check", false, "exit 1 unless natsd is within the bounds")
	jsonOut := flag.String("json", "", "write every result as JSON to this file")
	flag.Parse()

	var ts []attack.Target
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "nats-server":
			ts = append(ts, attack.Target{Name: t, Bin: *ref})
		case strings.HasPrefix(t, "natsd-"):
			ts = append(ts, attack.Target{Name: t, Bin: *natsd, Args: []string{"--engine", strings.TrimPrefix(t, "natsd-")}})
		default:
			fmt.Fprintf(os.Stderr, "unknown target %q\n", t)
			os.Exit(2)
		}
	}
	dir, err := os.MkdirTemp("", "attackrig")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	var all []attack.Result
	for _, a := range strings.Split(*attacks, ",") {
		for _, t := range ts {
			r := attack.Run(t, attack.Options{Attack: a, Duration: *dur, Baseline: *base, After: *after, TLS: *useTLS, Dir: dir, Config: *extra})
			fmt.Fprintf(os.Stderr, "%s %s: peak %.0f MiB, after %.0f MiB, PING p50 %v→%v\n", a, t.Name,
				mib(r.RSSPeak), mib(r.RSSAfter), r.BaseP50.Round(time.Microsecond), r.LoadP50.Round(time.Microsecond))
			all = append(all, r)
		}
	}
	fmt.Print(attack.Table(all))
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(all, "", "  ")
		_ = os.WriteFile(*jsonOut, b, 0o644)
	}
	if *check {
		if bad := attack.Check(all); len(bad) > 0 {
			for _, b := range bad {
				fmt.Println("FAIL:", b.Text)
			}
			os.Exit(1)
		}
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
