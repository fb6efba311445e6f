package bench

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario names.
const (
	Pub      = "pub"      // publishers only, no subscribers
	PubSub   = "pubsub"   // 1 publisher → 1 subscriber
	Fanout   = "fanout"   // 1 publisher → N subscribers (Clients)
	Queue    = "queue"    // 1 publisher → queue group of N members (Clients)
	ManyPub  = "manypub"  // N publishers (Clients) → 1 subscriber
	ReqRep   = "reqrep"   // request/reply latency over nats.go (Clients concurrent requesters)
	Wildcard = "wildcard" // 1 publisher → one connection holding WildSubs mixed */> subscriptions
	Idle     = "idle"     // N idle connections (Clients): server RSS per connection
	// Cluster is 1 publisher → 1 subscriber across a cluster: the publisher on Server, the
	// subscriber on SubServer (another server of the same cluster), after a probe has shown
	// that the subscriber's interest reached the publisher's server.
	Cluster = "cluster"
	// JetStream scenarios plug in here once js/ exists: add a name, a case in Run and a row
	// in perfrun's scenario matrix (e.g. "js-pub" with PubAck latency, "js-consume").
)

// Scenarios lists every scenario name Run accepts.
var Scenarios = []string{Pub, PubSub, Fanout, Queue, ManyPub, ReqRep, Wildcard, Idle, Cluster}

// Config describes one measured run against one server.
type Config struct {
	Server    string        // nats://host:port
	SubServer string        // subscribers connect here (cluster scenario: another server of Server's cluster); "" = Server
	Scenario  string        // one of Scenarios
	Duration  time.Duration // publishing time (used when Msgs == 0)
	Msgs      int           // total messages to publish (overrides Duration)
	Clients   int           // scenario's N: subscribers (fanout), members (queue), publishers (manypub), requesters (reqrep), connections (idle)
	Size      int           // payload bytes
	Subjects  int           // distinct subjects published to (wildcard: concrete subjects)
	WildSubs  int           // wildcard scenario: number of subscriptions
	PID       int           // server's PID for /proc CPU and RSS (0: not measured)
	PIDs      []int         // further servers (the rest of a cluster): their CPU is added to PID's
	WindowMiB int           // flow control: max bytes in flight between publishers and subscribers
}

// Defaults fills zero fields.
func (c *Config) Defaults() {
	if c.Server == "" {
		c.Server = "nats://127.0.0.1:4222"
	}
	if c.Duration == 0 && c.Msgs == 0 {
		c.Duration = 2 * time.Second
	}
	if c.Size < 0 {
		c.Size = 0
	}
	if c.Subjects <= 0 {
		c.Subjects = 1
	}
	if c.WildSubs <= 0 {
		c.WildSubs = 10000
	}
	if c.WindowMiB <= 0 {
		c.WindowMiB = 32
	}
	if c.Clients <= 0 {
		switch c.Scenario {
		case Fanout, Queue:
			c.Clients = 4
		case ManyPub:
			c.Clients = 8
		case Idle:
			c.Clients = 2000
		default:
			c.Clients = 1
		}
	}
	if c.Scenario == Wildcard && c.Subjects == 1 {
		c.Subjects = 1000
	}
}

// Result is what one run measured. Rate is delivered msgs/s at the subscribers (published
// msgs/s for pub-only, requests/s for reqrep).
type Result struct {
	Scenario  string  `json:"scenario"`
	Size      int     `json:"size"`
	Clients   int     `json:"clients"`
	Published int64   `json:"published"`
	Delivered int64   `json:"delivered"`
	Seconds   float64 `json:"seconds"`
	Rate      float64 `json:"msgs_per_sec"`
	MBps      float64 `json:"mb_per_sec"`
	ServerCPU float64 `json:"server_cpu_sec,omitempty"`
	CPUPerMsg float64 `json:"server_cpu_ns_per_msg,omitempty"` // per delivered message (per published one for pub-only)
	// With several servers (Config.PIDs): each server's CPU per message, PID first, then PIDs
	// in order; CPUPerMsg is their sum.
	CPUPerMsgEach []float64 `json:"server_cpu_ns_per_msg_each,omitempty"`
	P50us         float64   `json:"p50_us,omitempty"`
	P99us         float64   `json:"p99_us,omitempty"`
	P999us        float64   `json:"p999_us,omitempty"`
	RSSPerConn    float64   `json:"rss_kib_per_conn,omitempty"`
	Errors        []string  `json:"errors,omitempty"`
}

// Run executes one scenario once.
func Run(cfg Config) (Result, error) {
	cfg.Defaults()
	addr, err := hostPort(cfg.Server)
	if err != nil {
		return Result{}, err
	}
	switch cfg.Scenario {
	case Pub:
		return runFlow(cfg, addr, 1, nil, nil)
	case PubSub:
		return runFlow(cfg, addr, 1, plainSubs(cfg, 1, ""), constDeliv(1))
	case Fanout:
		return runFlow(cfg, addr, 1, plainSubs(cfg, cfg.Clients, ""), constDeliv(int64(cfg.Clients)))
	case Queue:
		return runFlow(cfg, addr, 1, plainSubs(cfg, cfg.Clients, "q"), constDeliv(1))
	case ManyPub:
		return runFlow(cfg, addr, cfg.Clients, plainSubs(cfg, 1, ""), constDeliv(1))
	case Wildcard:
		subs, deliv, subjects := wildcardSet(cfg.WildSubs, cfg.Subjects)
		return runFlowSubjects(cfg, addr, 1, [][]string{subs}, deliv, subjects)
	case ReqRep:
		return runReqRep(cfg)
	case Idle:
		return runIdle(cfg, addr)
	case Cluster:
		if cfg.SubServer == "" {
			return Result{}, fmt.Errorf("scenario %s needs the subscriber's server (SubServer, --sub-server)", Cluster)
		}
		subAddr, err := hostPort(cfg.SubServer)
		if err != nil {
			return Result{}, err
		}
		return runFlowOn(cfg, addr, subAddr, 1, plainSubs(cfg, 1, ""), constDeliv(1), benchSubjects(cfg.Subjects))
	}
	return Result{}, fmt.Errorf("unknown scenario %q (have %s)", cfg.Scenario, strings.Join(Scenarios, ", "))
}

func constDeliv(n int64) func(string) int64 { return func(string) int64 { return n } }

func benchSubjects(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = "bench." + strconv.Itoa(i)
	}
	return s
}

// plainSubs gives each of n subscriber connections a SUB for every benchmark subject.
func plainSubs(cfg Config, n int, queue string) [][]string {
	subj := benchSubjects(cfg.Subjects)
	out := make([][]string, n)
	for i := range out {
		for _, s := range subj {
			if queue != "" {
				out[i] = append(out[i], s+" "+queue)
			} else {
				out[i] = append(out[i], s)
			}
		}
	}
	return out
}

func runFlow(cfg Config, addr string, pubs int, subs [][]string, deliv func(string) int64) (Result, error) {
	return runFlowSubjects(cfg, addr, pubs, subs, deliv, benchSubjects(cfg.Subjects))
}

// runFlowSubjects is the throughput engine: raw subscribers (each connection with its SUB
// list), raw publishers writing ~64 KiB chunks, end-to-end flow control on deliveries in flight.
func runFlowSubjects(cfg Config, addr string, pubs int, subs [][]string, deliv func(string) int64, subjects []string) (Result, error) {
	return runFlowOn(cfg, addr, addr, pubs, subs, deliv, subjects)
}

// runFlowOn is runFlowSubjects with the subscribers on subAddr. When that is another server
// than the publishers' (a cluster), each subscriber's interest is probed through the
// publishers' server before the measured run starts, so no message is published into a
// server that does not know of the subscriber yet.
func runFlowOn(cfg Config, addr, subAddr string, pubs int, subs [][]string, deliv func(string) int64, subjects []string) (Result, error) {
	res := Result{Scenario: cfg.Scenario, Size: cfg.Size, Clients: cfg.Clients}
	var delivered, expected atomic.Int64
	var readers []*subReader
	defer func() {
		for _, r := range readers {
			r.rc.Close()
			<-r.done
		}
	}()
	var subConns []*rawConn
	for _, list := range subs {
		rc, err := dialRaw(subAddr, 1<<20)
		if err != nil {
			return res, fmt.Errorf("subscriber: %w", err)
		}
		var b strings.Builder
		for i, s := range list {
			fmt.Fprintf(&b, "SUB %s %d\r\n", s, i+1)
		}
		if _, err := rc.c.Write([]byte(b.String())); err != nil {
			rc.Close()
			return res, err
		}
		if err := rc.flush(30 * time.Second); err != nil {
			rc.Close()
			return res, fmt.Errorf("subscribing: %w", err)
		}
		subConns = append(subConns, rc)
	}
	var pcs []*pubConn
	defer func() {
		for _, p := range pcs {
			p.Close()
		}
	}()
	for i := 0; i < pubs; i++ {
		p, err := dialPub(addr)
		if err != nil {
			return res, fmt.Errorf("publisher: %w", err)
		}
		pcs = append(pcs, p)
	}
	for i, rc := range subConns {
		if subAddr != addr {
			if err := probeInterest(pcs[0], rc, subs[i]); err != nil {
				for _, c := range subConns[i:] {
					c.Close()
				}
				return res, err
			}
		}
		r := newSubReader(rc, func(n int64) { delivered.Add(n) })
		readers = append(readers, r)
		go r.run()
	}
	if len(subs) == 0 {
		deliv = nil
	}
	chunks := buildChunks(subjects, cfg.Size, deliv)
	frame := len(chunks[0].buf) / chunks[0].msgs
	window := int64(cfg.WindowMiB<<20) / int64(frame+40)
	window = max(64, min(window, 1<<20))

	cpu0, cpuErr0 := procCPUs(cfg)
	t0 := time.Now()
	deadline := t0.Add(cfg.Duration)
	var published atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, pubs)
	perPub := 0
	if cfg.Msgs > 0 {
		perPub = (cfg.Msgs + pubs - 1) / pubs
	}
	for pi, p := range pcs {
		wg.Add(1)
		go func(pi int, p *pubConn) {
			defer wg.Done()
			sent := 0
			for k := pi; ; k++ {
				if perPub > 0 && sent >= perPub {
					break
				}
				if perPub == 0 && time.Now().After(deadline) {
					break
				}
				ch := chunks[k%len(chunks)]
				if perPub > 0 && sent+ch.msgs > perPub {
					ch = truncateChunk(ch, perPub-sent)
				}
				if deliv != nil {
					// Flow control: wait while too many deliveries are outstanding.
					var lastProgress = time.Now()
					var lastSeen = delivered.Load()
					for expected.Load()-delivered.Load() > window {
						time.Sleep(50 * time.Microsecond)
						if d := delivered.Load(); d != lastSeen {
							lastSeen, lastProgress = d, time.Now()
						} else if time.Since(lastProgress) > 10*time.Second {
							errs <- fmt.Errorf("publisher %d: subscribers made no progress for 10s (%d deliveries outstanding)", pi, expected.Load()-d)
							return
						}
					}
					expected.Add(ch.deliveries)
				}
				if err := p.write(ch.buf); err != nil {
					errs <- fmt.Errorf("publisher %d: %w", pi, err)
					return
				}
				sent += ch.msgs
				published.Add(int64(ch.msgs))
			}
			if err := p.flush(30 * time.Second); err != nil {
				errs <- fmt.Errorf("publisher %d flush: %w", pi, err)
			}
		}(pi, p)
	}
	wg.Wait()
	tPub := time.Now()
	close(errs)
	for err := range errs {
		res.Errors = append(res.Errors, err.Error())
	}
	// Wait for every delivery (bounded: 10 s without progress).
	if deliv != nil {
		want := expected.Load()
		last, lastT := delivered.Load(), time.Now()
		for delivered.Load() < want {
			time.Sleep(time.Millisecond)
			if d := delivered.Load(); d != last {
				last, lastT = d, time.Now()
			} else if time.Since(lastT) > 10*time.Second {
				res.Errors = append(res.Errors, fmt.Sprintf("%d of %d deliveries missing after 10s without progress", want-d, want))
				break
			}
		}
	}
	cpu1, cpuErr := procCPUs(cfg)
	for _, p := range pcs {
		if e := p.rc.Err(); e != "" {
			res.Errors = append(res.Errors, "publisher: "+e)
		}
	}
	for _, r := range readers {
		if e := r.rc.Err(); e != "" {
			res.Errors = append(res.Errors, "subscriber: "+e)
		}
	}
	res.Published = published.Load()
	res.Delivered = delivered.Load()
	if deliv == nil {
		res.Seconds = tPub.Sub(t0).Seconds()
		res.Rate = float64(res.Published) / res.Seconds
	} else {
		var first, last int64
		for _, r := range readers {
			if f := r.firstNano.Load(); f != 0 && (first == 0 || f < first) {
				first = f
			}
			if l := r.lastNano.Load(); l > last {
				last = l
			}
		}
		res.Seconds = float64(last-first) / 1e9
		if res.Seconds <= 0 {
			res.Seconds = time.Since(t0).Seconds()
		}
		res.Rate = float64(res.Delivered) / res.Seconds
	}
	res.MBps = res.Rate * float64(cfg.Size) / 1e6
	if cfg.PID > 0 && cpuErr == nil && cpuErr0 == nil {
		n := res.Delivered
		if n == 0 {
			n = res.Published
		}
		for i := range cpu1 {
			d := (cpu1[i] - cpu0[i]).Seconds()
			res.ServerCPU += d
			if len(cpu1) > 1 && n > 0 {
				res.CPUPerMsgEach = append(res.CPUPerMsgEach, d*1e9/float64(n))
			}
		}
		if n > 0 {
			res.CPUPerMsg = res.ServerCPU * 1e9 / float64(n)
		}
	}
	return res, nil
}

// procCPUs reads the CPU time of cfg.PID and then of each of cfg.PIDs.
func procCPUs(cfg Config) ([]time.Duration, error) {
	var out []time.Duration
	for _, pid := range append([]int{cfg.PID}, cfg.PIDs...) {
		d, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func procCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no pid")
	}
	return ProcCPU(pid)
}

// wildcardSet builds n distinct subscriptions of mixed literal/`*`/`>` patterns over the
// subject space wc.A.B.C (A<10, B<100, C<10), and `subjects` concrete subjects to publish,
// with each subject's delivery count (one delivery per matching subscription).
func wildcardSet(n, subjects int) (subs []string, deliv func(string) int64, pubSubjects []string) {
	rng := rand.New(rand.NewSource(42))
	seen := map[string]bool{}
	tok := func(i, lim int) string { return strconv.Itoa(rng.Intn(lim)) }
	for guard := 0; len(subs) < n && guard < n*50; guard++ {
		a, b, c := tok(0, 10), tok(0, 100), tok(0, 10)
		var p string
		switch rng.Intn(8) {
		case 0:
			p = "wc." + a + "." + b + "." + c
		case 1:
			p = "wc." + a + "." + b + ".*"
		case 2:
			p = "wc." + a + ".*." + c
		case 3:
			p = "wc.*." + b + "." + c
		case 4:
			p = "wc." + a + "." + b + ".>"
		case 5:
			p = "wc.*.*." + c + "." + tok(0, 1000) // four tokens: never matches, grows the trie
		case 6:
			p = "wc.*." + b + ".>"
		case 7:
			p = "wc." + a + ".*.*." + tok(0, 1000) + ".>"
		}
		if !seen[p] {
			seen[p] = true
			subs = append(subs, p)
		}
	}
	counts := map[string]int64{}
	for i := 0; i < subjects; i++ {
		s := "wc." + tok(0, 10) + "." + tok(0, 100) + "." + tok(0, 10)
		pubSubjects = append(pubSubjects, s)
		if _, ok := counts[s]; ok {
			continue
		}
		var k int64
		for _, p := range subs {
			if subjectMatches(p, s) {
				k++
			}
		}
		counts[s] = k
	}
	return subs, func(s string) int64 { return counts[s] }, pubSubjects
}

// subjectMatches reports whether literal subject s matches pattern p.
func subjectMatches(p, s string) bool {
	pt, st := strings.Split(p, "."), strings.Split(s, ".")
	for i, t := range pt {
		if t == ">" {
			return len(st) > i
		}
		if i >= len(st) {
			return false
		}
		if t != "*" && t != st[i] {
			return false
		}
	}
	return len(pt) == len(st)
}
