// Command perfrun is natsd's side-by-side benchmark runner (`make perf`, `make perf-quick`).
// For every scenario it starts nats-server and natsd on fresh 127.0.0.1 ports, round by round
// in alternating order (A B, B A, …), runs the load generator of perf/bench against each,
// reads the server's CPU from /proc, and reports the median of each side and the ratio
// natsd/nats-server. It writes a dated results folder with summary.md, CSV/JSON, a chart of
// every scenario's ratios (bars from zero on a linear axis), and natsd's CPU and allocation
// profiles with flame graphs (not in --quick), and prints the files it wrote.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/natsd/natsd/perf/bench"
)

type scenario struct {
	slug    string // file-name safe id
	label   string // table label
	cfg     bench.Config
	servers int // servers per side and round: 0 or 1 = one server; 3 = a cluster (bench.Cluster)
}

var sizes = []int{16, 128, 1 << 10, 16 << 10, 256 << 10}

func matrix(quick bool) []scenario {
	mk := func(slug, label string, c bench.Config) scenario { return scenario{slug: slug, label: label, cfg: c} }
	if quick {
		return []scenario{
			mk("pub-16B", "pub-only 16B", bench.Config{Scenario: bench.Pub, Size: 16}),
			mk("pubsub-16B", "1→1 16B", bench.Config{Scenario: bench.PubSub, Size: 16}),
			mk("fanout4-16B", "1→4 fan-out 16B", bench.Config{Scenario: bench.Fanout, Clients: 4, Size: 16}),
		}
	}
	var m []scenario
	for _, s := range sizes {
		m = append(m, mk("pub-"+bench.SizeLabel(s), "pub-only "+bench.SizeLabel(s), bench.Config{Scenario: bench.Pub, Size: s}))
	}
	for _, s := range sizes {
		m = append(m, mk("pubsub-"+bench.SizeLabel(s), "1→1 "+bench.SizeLabel(s), bench.Config{Scenario: bench.PubSub, Size: s}))
	}
	m = append(m,
		mk("fanout4-16B", "1→4 fan-out 16B", bench.Config{Scenario: bench.Fanout, Clients: 4, Size: 16}),
		mk("fanout4-128B", "1→4 fan-out 128B", bench.Config{Scenario: bench.Fanout, Clients: 4, Size: 128}),
		mk("fanout16-16B", "1→16 fan-out 16B", bench.Config{Scenario: bench.Fanout, Clients: 16, Size: 16}),
		mk("queue4-16B", "queue group of 4, 16B", bench.Config{Scenario: bench.Queue, Clients: 4, Size: 16}),
		mk("manypub8-16B", "8 publishers → 1, 16B", bench.Config{Scenario: bench.ManyPub, Clients: 8, Size: 16}),
		mk("wildcard10k-16B", "wildcard 10k subs, 16B", bench.Config{Scenario: bench.Wildcard, WildSubs: 10000, Subjects: 1000, Size: 16}),
		mk("reqrep-128B", "request/reply 128B", bench.Config{Scenario: bench.ReqRep, Clients: 1, Size: 128}),
		mk("idle-2000", "idle connections ×2000", bench.Config{Scenario: bench.Idle, Clients: 2000}),
		// JetStream scenarios go here once js/ exists (see bench.Scenarios).
	)
	// A 3-server cluster (full mesh of routes, default pool), publisher on A, subscriber on B,
	// C idle in the cluster.
	for _, s := range []int{16, 128, 1 << 10} {
		c := mk("cluster-"+bench.SizeLabel(s), "cluster 3 servers, A→B "+bench.SizeLabel(s), bench.Config{Scenario: bench.Cluster, Size: s})
		c.servers = clusterSize
		m = append(m, c)
	}
	return m
}

type side struct {
	name string
	bin  string
	args []string
	prof bool // honours NATSD_CPUPROFILE / NATSD_MEMPROFILE
}

type roundResult struct {
	Scenario string       `json:"scenario"`
	Side     string       `json:"side"`
	Round    int          `json:"round"`
	Result   bench.Result `json:"result"`
}

type runner struct {
	out      string
	rounds   int
	duration time.Duration
	msgs     int
	all      []roundResult
	problems []string
}

func main() {
	var (
		natsdBin  = flag.String("natsd", "bin/natsd", "natsd binary")
		nsBin     = flag.String("nats-server", ".cache/tools/nats-server", "nats-server binary (reference)")
		natsdArgs = flag.String("natsd-args", "", "extra natsd arguments, e.g. \"--reactors 2\"")
		nsArgs    = flag.String("nats-server-args", "", "extra nats-server arguments")
		self      = flag.Bool("self", false, "run nats-server against itself (fairness check: every ratio should be near 1.0)")
		quick     = flag.Bool("quick", false, "small subset: pub-only, 1→1 and 1→4 at 16 B, 3 rounds of 1 s")
		rounds    = flag.Int("rounds", 0, "rounds per side (default 5, quick 3)")
		duration  = flag.Duration("duration", 0, "publishing time per round (default 1.5s, quick 1s)")
		msgs      = flag.Int("msgs", 0, "fixed messages per round instead of --duration")
		outDir    = flag.String("out", "perf/results", "parent folder of the dated results folder")
		filter    = flag.String("scenarios", "", "regexp on scenario ids to run (e.g. 'pubsub|fanout')")
		profile   = flag.Bool("profile", true, "one extra profiled natsd round per scenario: pprof CPU/allocs + flame graphs (off with --quick unless set)")
		list      = flag.Bool("list", false, "list scenario ids and exit")
		useTLS    = flag.Bool("tls", false, "every connection over TLS 1.3 (both servers get the same self-signed certificate)")
	)
	flag.Parse()
	profSet := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "profile" {
			profSet = true
		}
	})
	if *quick && !profSet {
		*profile = false
	}
	if *rounds <= 0 {
		*rounds = 5
		if *quick {
			*rounds = 3
		}
	}
	if *duration <= 0 {
		*duration = 1500 * time.Millisecond
		if *quick {
			*duration = time.Second
		}
	}
	scens := matrix(*quick)
	if *filter != "" {
		re, err := regexp.Compile(*filter)
		if err != nil {
			fatal(err)
		}
		var keep []scenario
		for _, s := range matrix(false) {
			if re.MatchString(s.slug) {
				keep = append(keep, s)
			}
		}
		scens = keep
	}
	if *list {
		for _, s := range matrix(false) {
			fmt.Printf("%-18s %s\n", s.slug, s.label)
		}
		return
	}
	a := side{name: "nats-server", bin: *nsBin, args: strings.Fields(*nsArgs)}
	b := side{name: "natsd", bin: *natsdBin, args: strings.Fields(*natsdArgs), prof: true}
	if *self {
		b = side{name: "nats-server (B)", bin: *nsBin, args: strings.Fields(*nsArgs)}
		*profile = false
	}
	for _, s := range []side{a, b} {
		if _, err := os.Stat(s.bin); err != nil {
			fatal(fmt.Errorf("%s binary: %w (run `make build tools`)", s.name, err))
		}
	}
	stamp := time.Now().Format("20060102-150405")
	if *self {
		stamp += "-self"
	} else if *quick {
		stamp += "-quick"
	}
	if *useTLS {
		stamp += "-tls"
	}
	r := &runner{out: filepath.Join(*outDir, stamp), rounds: *rounds, duration: *duration, msgs: *msgs}
	// profiles/ and flame/ are made by the first profiled round, conf/ by the first cluster:
	// the folder holds only what the run wrote.
	if err := os.MkdirAll(filepath.Join(r.out, "logs"), 0o755); err != nil {
		fatal(err)
	}
	if *useTLS {
		cert, key, err := bench.SelfSignedCert(r.out, "server")
		if err != nil {
			fatal(err)
		}
		targs := []string{"--tls", "--tlscert", cert, "--tlskey", key}
		a.args = append(targs, a.args...)
		b.args = append(targs[:len(targs):len(targs)], b.args...)
		bench.ClientTLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	}
	fmt.Printf("perf: %d scenarios × %d rounds × 2 servers (%s vs %s), %v per round\n", len(scens), r.rounds, a.name, b.name, r.duration)
	var rows []row
	for _, sc := range scens {
		ra, rb := r.runScenario(sc, a, b)
		rows = append(rows, tableRows(sc, ra, rb)...)
		if *profile && b.prof {
			r.profileRound(sc, b)
		}
	}
	if err := r.write(rows, a.name, b.name, *self, scens); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "perfrun:", err)
	os.Exit(1)
}

func freePort() (int, error) { return bench.FreePort() }

type proc struct {
	cmd    *exec.Cmd
	name   string // "A", "B", "C" in a cluster; "" alone
	port   int
	http   int // monitoring port (clusters)
	log    string
	exited chan error
	logAt  int64 // the log's size when the rig began to stop the server
}

// start launches a server on a free port and waits until it accepts connections.
func (r *runner) start(s side, logName string, env []string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)}, s.args...)
	return r.launch(s, args, logName, env, port)
}

// launch starts s.bin with args, its output in logs/logName, and waits until every one of
// ports accepts connections (the first is the client port).
func (r *runner) launch(s side, args []string, logName string, env []string, ports ...int) (*proc, error) {
	logPath := filepath.Join(r.out, "logs", logName)
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, port: ports[0], log: logPath, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for i, port := range ports {
		for {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				<-p.exited
				return nil, fmt.Errorf("%s did not listen on %d within 10s (log %s)", s.name, port, logPath)
			}
			select {
			case err := <-p.exited:
				return nil, fmt.Errorf("%s exited at start-up: %v (log %s)", s.name, err, logPath)
			default:
			}
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
			if err == nil {
				if i == 0 {
					probeTLS(c)
				}
				c.Close()
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return p, nil
}

// probeTLS finishes the readiness probe's TLS handshake, so that neither server logs a
// failed one for it.
func probeTLS(c net.Conn) {
	if bench.ClientTLS == nil {
		return
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 1)
	for b[0] != '\n' {
		if _, err := c.Read(b); err != nil {
			return
		}
	}
	_ = tls.Client(c, bench.ClientTLS).Handshake()
}

// stop sends SIGTERM to the server's PID and waits (SIGKILL after 15 s).
func (p *proc) stop() (exitErr error, killed bool) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		return err, false
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		return <-p.exited, true
	}
}

var badLog = regexp.MustCompile(`(?i)panic|fatal error|slow consumer|\[ERR\]|\[FTL\]|data race`)

func (r *runner) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.problems = append(r.problems, msg)
	fmt.Println("  PROBLEM:", msg)
}

// once runs one round of a scenario against one server (or one cluster of sc.servers).
// envs[i] is added to the environment of the i-th server.
func (r *runner) once(sc scenario, s side, round int, envs [][]string, tag string) (bench.Result, bool) {
	name := fmt.Sprintf("%s-%s-%s", sc.slug, slugify(s.name), tag)
	envOf := func(i int) []string {
		if i < len(envs) {
			return envs[i]
		}
		return nil
	}
	var procs []*proc
	var err error
	if sc.servers > 1 {
		procs, err = r.startCluster(s, sc.servers, name, envOf)
	} else {
		var p *proc
		p, err = r.start(s, name+".log", envOf(0))
		procs = []*proc{p}
	}
	if err != nil {
		r.problem("%s %s: %v", sc.slug, s.name, err)
		return bench.Result{}, false
	}
	cfg := sc.cfg
	cfg.Server = fmt.Sprintf("nats://127.0.0.1:%d", procs[0].port)
	cfg.PID = procs[0].cmd.Process.Pid
	if len(procs) > 1 {
		cfg.SubServer = fmt.Sprintf("nats://127.0.0.1:%d", procs[1].port)
		for _, p := range procs[1:] {
			cfg.PIDs = append(cfg.PIDs, p.cmd.Process.Pid)
		}
	}
	cfg.Duration, cfg.Msgs = r.duration, r.msgs
	res, err := bench.Run(cfg)
	logs := make([]string, len(procs))
	for i, p := range procs {
		logs[i] = p.log
	}
	where := strings.Join(logs, ", ")
	ok := err == nil
	if err != nil {
		r.problem("%s %s round %s: %v (log %s)", sc.slug, s.name, tag, err, where)
	}
	for _, e := range res.Errors {
		r.problem("%s %s round %s: %s (log %s)", sc.slug, s.name, tag, e, where)
	}
	r.stopAll(sc, s, tag, procs)
	if ok && round >= 0 {
		r.all = append(r.all, roundResult{Scenario: sc.slug, Side: s.name, Round: round, Result: res})
	}
	return res, ok && len(res.Errors) == 0
}

// afterStop matches what a cluster's servers log while their peers shut down around them
// (route reconnect attempts to a server that has already gone): not a problem when it comes
// after the rig began stopping the servers.
var afterStop = regexp.MustCompile(`(?i)(trying to connect to route|route.*(connection refused|connection reset|broken pipe|EOF))`)

// stopAll stops the servers of one round together (SIGTERM to each PID at once, then a wait
// for each) and reports unclean exits and bad log lines.
func (r *runner) stopAll(sc scenario, s side, tag string, procs []*proc) {
	type stopped struct {
		err    error
		killed bool
	}
	outs := make([]chan stopped, len(procs))
	for i, p := range procs {
		if fi, err := os.Stat(p.log); err == nil {
			p.logAt = fi.Size()
		}
		outs[i] = make(chan stopped, 1)
		go func(p *proc, out chan stopped) {
			err, killed := p.stop()
			out <- stopped{err, killed}
		}(p, outs[i])
	}
	for i, p := range procs {
		st := <-outs[i]
		who := s.name
		if p.name != "" {
			who += " " + p.name
		}
		if st.killed {
			r.problem("%s %s round %s: did not exit within 15s of SIGTERM, killed (log %s)", sc.slug, who, tag, p.log)
		} else if st.err != nil && !isSignalExit(st.err) {
			r.problem("%s %s round %s: exit after SIGTERM: %v (log %s)", sc.slug, who, tag, st.err, p.log)
		}
		if b, err := os.ReadFile(p.log); err == nil {
			off := 0
			for _, l := range strings.Split(string(b), "\n") {
				after := int64(off) >= p.logAt
				off += len(l) + 1
				if badLog.MatchString(l) && !(after && len(procs) > 1 && afterStop.MatchString(l)) {
					r.problem("%s %s round %s: log: %s", sc.slug, who, tag, strings.TrimSpace(l))
					break
				}
			}
		}
	}
}

func isSignalExit(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return true
		}
	}
	return false
}

func (r *runner) runScenario(sc scenario, a, b side) (ra, rb []bench.Result) {
	fmt.Printf("== %s\n", sc.label)
	for i := 0; i < r.rounds; i++ {
		order := []side{a, b}
		if i%2 == 1 {
			order = []side{b, a} // A B, B A, …: drift hits both sides alike
		}
		for _, s := range order {
			res, ok := r.once(sc, s, i, nil, "r"+strconv.Itoa(i+1))
			if !ok && res.Rate == 0 {
				continue
			}
			fmt.Printf("  round %d %-16s %s\n", i+1, s.name, brief(res))
			if s.name == a.name {
				ra = append(ra, res)
			} else {
				rb = append(rb, res)
			}
		}
	}
	return ra, rb
}

func brief(r bench.Result) string {
	var b strings.Builder
	switch r.Scenario {
	case bench.Idle:
		fmt.Fprintf(&b, "%d conns, %.1f KiB/conn", r.Published, r.RSSPerConn)
	case bench.ReqRep:
		fmt.Fprintf(&b, "%.0f req/s p50 %.1fµs p99 %.1fµs p99.9 %.1fµs", r.Rate, r.P50us, r.P99us, r.P999us)
	default:
		fmt.Fprintf(&b, "%.0f msgs/s", r.Rate)
	}
	if r.CPUPerMsg > 0 {
		fmt.Fprintf(&b, ", server %.1f ns/msg", r.CPUPerMsg)
		for i, x := range r.CPUPerMsgEach {
			sep := " ("
			if i > 0 {
				sep = " + "
			}
			fmt.Fprintf(&b, "%s%s %.1f", sep, clusterNames[i], x)
		}
		if len(r.CPUPerMsgEach) > 0 {
			b.WriteString(")")
		}
	}
	return b.String()
}

func slugify(s string) string {
	return strings.Trim(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(s, "-"), "-")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is (max-min)/median: how noisy the rounds were.
func spread(xs []float64) float64 {
	m := median(xs)
	if len(xs) < 2 || m == 0 {
		return 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return (hi - lo) / m
}

type row struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"`
	A        float64 `json:"a"`
	B        float64 `json:"b"`
	Ratio    float64 `json:"ratio"`
	Unit     string  `json:"unit"`
	Higher   bool    `json:"higher_is_better"`
	Noise    float64 `json:"noise"`
	Size     int     `json:"size"`
	Kind     string  `json:"kind"`
}

func pick(rs []bench.Result, f func(bench.Result) float64) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out
}

func tableRows(sc scenario, ra, rb []bench.Result) []row {
	mkrow := func(metric, unit string, higher bool, f func(bench.Result) float64) row {
		xa, xb := pick(ra, f), pick(rb, f)
		r := row{Scenario: sc.label, Metric: metric, A: median(xa), B: median(xb), Unit: unit, Higher: higher,
			Noise: max(spread(xa), spread(xb)), Size: sc.cfg.Size, Kind: sc.cfg.Scenario}
		if r.A != 0 {
			r.Ratio = r.B / r.A
		}
		return r
	}
	cpu := func(x bench.Result) float64 { return x.CPUPerMsg }
	switch sc.cfg.Scenario {
	case bench.Idle:
		return []row{mkrow("RSS per connection", "KiB/conn", false, func(x bench.Result) float64 { return x.RSSPerConn })}
	case bench.ReqRep:
		return []row{
			mkrow("p50 latency", "µs", false, func(x bench.Result) float64 { return x.P50us }),
			mkrow("p99 latency", "µs", false, func(x bench.Result) float64 { return x.P99us }),
			mkrow("p99.9 latency", "µs", false, func(x bench.Result) float64 { return x.P999us }),
			mkrow("throughput", "req/s", true, func(x bench.Result) float64 { return x.Rate }),
			mkrow("server CPU per msg", "ns/msg", false, cpu),
		}
	}
	unit := "msgs/s delivered"
	if sc.cfg.Scenario == bench.Pub {
		unit = "msgs/s published"
	}
	rows := []row{
		mkrow("throughput", unit, true, func(x bench.Result) float64 { return x.Rate }),
		mkrow("server CPU per msg", "ns/msg", false, cpu),
	}
	if sc.servers > 1 {
		rows[1].Metric = fmt.Sprintf("server CPU per msg (%d servers)", sc.servers)
		for i := 0; i < sc.servers; i++ {
			role := [...]string{" (publisher's)", " (subscriber's)"}
			what := ""
			if i < len(role) {
				what = role[i]
			}
			rows = append(rows, mkrow("CPU per msg, server "+clusterNames[i]+what, "ns/msg", false, func(x bench.Result) float64 {
				if i < len(x.CPUPerMsgEach) {
					return x.CPUPerMsgEach[i]
				}
				return 0
			}))
		}
	}
	return rows
}
