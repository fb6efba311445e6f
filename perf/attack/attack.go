// Package attack runs hostile clients against a server process and measures what they cost
// it: peak RSS (/proc/PID/status), an unrelated client's PING round trip before and during
// the attack, and RSS once the attacker has left. The same attacks run against natsd and
// nats-server so that every figure is read as a ratio of the two (see perf/cmd/attackrig and
// the tests beside this file).
package attack

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/perf/bench"
)

// Target is one server binary to start for each run.
type Target struct {
	Name string
	Bin  string
	Args []string // extra flags (natsd's --engine ...)
}

// Options shape one run.
type Options struct {
	Attack   string        // one of Attacks
	Duration time.Duration // how long the attacker keeps going (reconnecting when cut off)
	Baseline time.Duration // unloaded probing before the attack
	After    time.Duration // how long to wait after the attacker left before the last RSS reading
	TLS      bool          // serve clients over TLS (both servers get the same tls{} block)
	Dir      string        // scratch directory for config and certificates
	// Config is more config-file text both servers get (e.g. "max_pending: 8MB").
	Config string
}

// Result is what one run measured.
type Result struct {
	Target, Attack string
	TLS            bool
	RSSStart       int64 // before the attack
	RSSPeak        int64 // largest sample while attacking
	RSSAfter       int64 // Options.After once the attacker left
	// Unrelated client's PING round trips, unloaded and during the attack.
	BaseP50, BaseP99, LoadP50, LoadP99 time.Duration
	Probes                             int // round trips measured under attack
	ProbeErr                           string
	// SlowConsumers is /varz's slow_consumers at the end; FirstCut is when the first one was
	// seen, counted from the start of the attack (0: none).
	SlowConsumers int64
	FirstCut      time.Duration
	Sent          int64 // bytes the attacker wrote
	Cuts          int   // times the server closed an attacker connection
	Problems      []string
}

// Attacks lists the hostile clients this package knows.
var Attacks = []string{"slowsub", "ping", "badsub", "classic"}

// Run starts t, runs one attack against it and stops it.
func Run(t Target, o Options) (r Result) {
	r.Target, r.Attack, r.TLS = t.Name, o.Attack, o.TLS
	var tlsCfg *tls.Config
	var conf string
	if o.TLS || o.Config != "" {
		var err error
		if conf, err = writeConfig(o.Dir, t.Name, o.TLS, o.Config); err != nil {
			r.Problems = append(r.Problems, err.Error())
			return r
		}
		if o.TLS {
			tlsCfg = &tls.Config{InsecureSkipVerify: true}
		}
	}
	cmd, logBuf, port, mport, err := start(t, conf)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	pid := cmd.Process.Pid
	defer func() {
		if bench.StopProcess(cmd, 15*time.Second) {
			r.Problems = append(r.Problems, "needed SIGKILL")
		}
		if bytes.Contains(logBuf.Bytes(), []byte("panic")) {
			r.Problems = append(r.Problems, "server log has panic")
		}
	}()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	d := &dialer{addr: addr, tls: tlsCfg}
	probe, err := startProbe(d)
	if err != nil {
		r.Problems = append(r.Problems, "probe: "+err.Error())
		return r
	}
	defer probe.close()
	time.Sleep(300 * time.Millisecond)
	r.RSSStart, _ = bench.ProcRSS(pid)

	base := probe.rtts(o.Baseline)
	r.BaseP50, r.BaseP99 = bench.Quantile(base, 0.50), bench.Quantile(base, 0.99)

	stop := make(chan struct{})
	var peak atomic.Int64
	peak.Store(r.RSSStart)
	var samplerDone sync.WaitGroup
	samplerDone.Add(1)
	go func() {
		defer samplerDone.Done()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if v, err := bench.ProcRSS(pid); err == nil && v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	var cutAt atomic.Int64
	start := time.Now()
	go watchSlowConsumers(mport, start, &cutAt, stop)

	st := attackStats{cuts: func() int64 { return slowConsumers(mport) }}
	var attackers sync.WaitGroup
	attackers.Add(1)
	go func() {
		defer attackers.Done()
		runAttack(d, o.Attack, stop, &st)
	}()
	var load []time.Duration
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		load = probe.rtts(o.Duration)
	}()
	time.Sleep(o.Duration)
	close(stop)
	attackers.Wait()
	<-probeDone
	samplerDone.Wait()
	r.RSSPeak = peak.Load()
	r.Probes = len(load)
	r.LoadP50, r.LoadP99 = bench.Quantile(load, 0.50), bench.Quantile(load, 0.99)
	if probe.err != nil {
		r.ProbeErr = probe.err.Error()
	}
	r.Sent, r.Cuts = st.sent.Load(), int(st.rounds.Load())
	if ns := cutAt.Load(); ns > 0 {
		r.FirstCut = time.Duration(ns)
	}
	time.Sleep(o.After)
	r.RSSAfter, _ = bench.ProcRSS(pid)
	r.SlowConsumers = slowConsumers(mport)
	return r
}

// attackStats is what the attacker goroutines count, and how they learn the server cut a
// victim that never reads (and so cannot see its own connection close).
type attackStats struct {
	sent   atomic.Int64
	rounds atomic.Int64
	cuts   func() int64 // the server's slow-consumer count
}

// runAttack runs the named attack until stop closes: each attacker reconnects when the
// server cuts it off, so the pressure lasts the whole run.
func runAttack(d *dialer, name string, stop <-chan struct{}, st *attackStats) {
	switch name {
	case "slowsub":
		// A subscriber that never reads, and a publisher of 16 KiB messages to it.
		loopAttack(stop, st, func() error {
			sub, err := d.raw("SUB atk 1\r\nPING\r\n", true)
			if err != nil {
				return err
			}
			defer sub.Close()
			pub, err := d.raw("", false)
			if err != nil {
				return err
			}
			defer pub.Close()
			payload := bytes.Repeat([]byte("x"), 16*1024)
			frame := append([]byte("PUB atk 16384\r\n"), payload...)
			frame = append(frame, "\r\n"...)
			return flood(pub, bytes.Repeat(frame, 4), stop, st, true)
		})
	case "ping":
		loopAttack(stop, st, func() error {
			c, err := d.raw("", false)
			if err != nil {
				return err
			}
			defer c.Close()
			return flood(c, bytes.Repeat([]byte("PING\r\n"), 10000), stop, st, false)
		})
	case "badsub":
		loopAttack(stop, st, func() error {
			c, err := d.raw("", false)
			if err != nil {
				return err
			}
			defer c.Close()
			return flood(c, bytes.Repeat([]byte("SUB foo..bar 1\r\n"), 4000), stop, st, false)
		})
	case "classic":
		// One fast and one never-reading subscriber of a publisher of 512-byte messages: the
		// never-reading one must be cut as a slow consumer, and the fast one keep receiving.
		loopAttack(stop, st, func() error {
			slow, err := d.raw("SUB cls 1\r\nPING\r\n", true)
			if err != nil {
				return err
			}
			defer slow.Close()
			fast, err := d.raw("SUB cls 1\r\nPING\r\n", true)
			if err != nil {
				return err
			}
			defer fast.Close()
			go func() { _, _ = io.Copy(io.Discard, fast) }()
			pub, err := d.raw("", false)
			if err != nil {
				return err
			}
			defer pub.Close()
			frame := append([]byte("PUB cls 512\r\n"), bytes.Repeat([]byte("y"), 512)...)
			frame = append(frame, "\r\n"...)
			return flood(pub, bytes.Repeat(frame, 100), stop, st, true)
		})
	default:
		panic("unknown attack " + name)
	}
}

// loopAttack repeats one attack round until stop closes, counting rounds the server ended.
func loopAttack(stop <-chan struct{}, st *attackStats, round func() error) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if err := round(); err != nil {
			st.rounds.Add(1)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// errCut ends a round whose victim the server cut off as a slow consumer.
var errCut = errors.New("victim cut off")

// flood writes chunk over and over until stop closes, the server cuts the connection, or it
// reports a new slow consumer (the victim of this round). drain reads (and drops) what the
// server sends, for a publisher that is not the victim.
func flood(c net.Conn, chunk []byte, stop <-chan struct{}, st *attackStats, drain bool) error {
	if drain {
		go func() { _, _ = io.Copy(io.Discard, c) }()
	}
	done := make(chan struct{})
	defer close(done)
	var cut atomic.Bool
	go func() {
		seen := st.cuts()
		for {
			select {
			case <-stop:
				_ = c.SetWriteDeadline(time.Now())
				return
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if st.cuts() > seen {
				cut.Store(true)
				_ = c.SetWriteDeadline(time.Now())
				return
			}
		}
	}()
	for {
		n, err := c.Write(chunk)
		st.sent.Add(int64(n))
		if err != nil {
			select {
			case <-stop:
				return nil
			default:
			}
			if cut.Load() {
				return errCut
			}
			return err
		}
	}
}

// dialer opens client connections to the server under attack.
type dialer struct {
	addr string
	tls  *tls.Config
}

// raw connects, reads INFO, sends CONNECT then pre, and (wait) reads until PONG; the caller
// then owns the connection and reads from it or not.
func (d *dialer) raw(pre string, wait bool) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		nc.Close()
		return nil, fmt.Errorf("no INFO: %q %v", line, err)
	}
	var c net.Conn = nc
	if d.tls != nil {
		tc := tls.Client(nc, d.tls)
		if err := tc.Handshake(); err != nil {
			nc.Close()
			return nil, err
		}
		c = tc
		br = bufio.NewReader(c)
	}
	if _, err := io.WriteString(c, "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n"+pre); err != nil {
		c.Close()
		return nil, err
	}
	if wait {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				c.Close()
				return nil, err
			}
			if l == "PONG\r\n" {
				break
			}
		}
	}
	_ = nc.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: c, r: br}, nil
	}
	return c, nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// start starts t's server on two free ports and waits until it listens. A port found free
// can be taken before the server binds it (a connection's ephemeral port, such as an
// attacker's reconnect from the run before): a server that says "address already in use"
// is started again on other ports, twice at most.
func start(t Target, conf string) (cmd *exec.Cmd, logBuf *lockedBuffer, port, mport int, err error) {
	for attempt := 1; ; attempt++ {
		port, mport = freePort(), freePort()
		args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-m", strconv.Itoa(mport)}
		if conf != "" {
			args = append(args, "-c", conf)
		}
		args = append(args, t.Args...)
		cmd = exec.Command(t.Bin, args...)
		logBuf = &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = logBuf, logBuf
		if err = cmd.Start(); err != nil {
			return nil, nil, 0, 0, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if err = waitPort(addr); err == nil {
			return cmd, logBuf, port, mport, nil
		}
		bench.StopProcess(cmd, 15*time.Second)
		out := logBuf.Bytes()
		if attempt < 3 && bytes.Contains(out, []byte("address already in use")) {
			continue
		}
		if i := bytes.LastIndexByte(bytes.TrimRight(out, "\n"), '\n'); i >= 0 {
			out = out[i+1:]
		}
		return nil, nil, 0, 0, fmt.Errorf("%v (attempt %d; server's last log line: %q)", err, attempt, bytes.TrimSpace(out))
	}
}

// prober is the unrelated client: one connection, PING after PING.
type prober struct {
	c   net.Conn
	br  *bufio.Reader
	err error
}

func (d *dialer) client() (*prober, error) {
	c, err := d.raw("PING\r\n", true)
	if err != nil {
		return nil, err
	}
	return &prober{c: c, br: bufio.NewReader(c)}, nil
}

func (p *prober) close() { _ = p.c.Close() }

// rtts measures PING round trips every 2 ms for d or until stop closes.
func (p *prober) rtts(d time.Duration, stop <-chan struct{}) []time.Duration {
	var out []time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) && p.err == nil {
		select {
		case <-stop:
			return out
		default:
		}
		_ = p.c.SetDeadline(time.Now().Add(10 * time.Second))
		t0 := time.Now()
		if _, err := io.WriteString(p.c, "PING\r\n"); err != nil {
			p.err = err
			break
		}
		for {
			l, err := p.br.ReadString('\n')
			if err != nil {
				p.err = err
				return out
			}
			if l == "PONG\r\n" {
				break
			}
			if l == "PING\r\n" {
				_, _ = io.WriteString(p.c, "PONG\r\n")
			}
		}
		out = append(out, time.Since(t0))
		time.Sleep(2 * time.Millisecond)
	}
	return out
}

// watchSlowConsumers records when /varz first reports a slow consumer.
func watchSlowConsumers(mport int, start time.Time, at *atomic.Int64, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(25 * time.Millisecond):
		}
		if slowConsumers(mport) > 0 {
			at.Store(int64(time.Since(start)))
			return
		}
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

func slowConsumers(mport int) int64 {
	resp, err := httpClient.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/varz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var v struct {
		SlowConsumers int64 `json:"slow_consumers"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return 0
	}
	return v.SlowConsumers
}

func freePort() int { return bench.MustFreePort() }

func waitPort(addr string) error {
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return errors.New("server did not listen on " + addr)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}
