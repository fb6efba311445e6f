// Command connrig measures what idle connections cost a server: it starts each server in turn
// (natsd on each engine, nats-server), opens N connections that each CONNECT, SUB once and
// PING/PONG, from several loopback source addresses, and reports server RSS per connection
// (/proc/PID/status VmRSS before and after), accept rate, and PING round trips under that load.
//
//	go run ./perf/cmd/connrig --n 15000
//	bin/connrig --n 15000 --targets natsd-gnet,natsd-netpoll,nats-server
//	bin/connrig --n 15000 --tls   # the same over TLS 1.3
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/natsd/natsd/perf/bench"
)

type target struct {
	name string
	bin  string
	args []string
}

type result struct {
	name                   string
	n, ok, failed          int
	rssBefore, rssAfter    int64
	perConn                float64
	acceptRate             float64
	setup                  time.Duration
	rttP50, rttP99, rttMax time.Duration
	// stormP50, stormP99: an established connection's PING round trips while the others are
	// being set up (the accept or handshake storm).
	stormP50, stormP99 time.Duration
	errs               []string
}

func main() {
	n := flag.Int("n", 15000, "connections per server")
	sources := flag.Int("sources", 8, "loopback source addresses 127.0.0.2 .. 127.0.0.(1+sources)")
	conc := flag.Int("concurrency", 0, "connections being set up at once (0 = all at once: an accept storm)")
	natsd := flag.String("natsd", "bin/natsd", "natsd binary")
	ref := flag.String("nats-server", ".cache/tools/nats-server", "nats-server binary")
	targets := flag.String("targets", "natsd-gnet,natsd-netpoll,nats-server", "comma-separated: natsd-ENGINE or nats-server")
	natsdArgs := flag.String("natsd-args", "", "extra natsd flags")
	pings := flag.Int("pings", 500, "PING round trips measured under load")
	settle := flag.Duration("settle", 3*time.Second, "wait after setup before reading RSS")
	useTLS := flag.Bool("tls", false, "TLS 1.3 connections (a self-signed certificate, the same for every server)")
	flag.Parse()

	raiseNoFile()
	var tlsArgs []string
	if *useTLS {
		dir, err := os.MkdirTemp("", "connrig")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		cert, key, err := bench.SelfSignedCert(dir, "server")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		tlsArgs = []string{"--tls", "--tlscert", cert, "--tlskey", key}
		clientTLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	}
	var ts []target
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "nats-server":
			ts = append(ts, target{name: t, bin: *ref, args: tlsArgs})
		case strings.HasPrefix(t, "natsd-"):
			args := []string{"--engine", strings.TrimPrefix(t, "natsd-")}
			args = append(args, tlsArgs...)
			args = append(args, strings.Fields(*natsdArgs)...)
			ts = append(ts, target{name: t, bin: *natsd, args: args})
		default:
			fmt.Fprintf(os.Stderr, "unknown target %q\n", t)
			os.Exit(2)
		}
	}
	var rs []result
	for _, t := range ts {
		r := run(t, *n, *sources, *conc, *pings, *settle)
		rs = append(rs, r)
		time.Sleep(time.Second) // let TIME_WAIT and the kernel settle between servers
	}
	fmt.Printf("\n| server | conns ok/N | RSS before | RSS after | RSS/conn | accept rate | setup | PING p50 | p99 | max | PING p50 / p99 during setup |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Printf("| %s | %d/%d | %.1f MiB | %.1f MiB | %.2f KiB | %.0f conn/s | %v | %v | %v | %v | %v / %v |\n",
			r.name, r.ok, r.n, mib(r.rssBefore), mib(r.rssAfter), r.perConn/1024, r.acceptRate,
			r.setup.Round(time.Millisecond), r.rttP50, r.rttP99, r.rttMax, r.stormP50, r.stormP99)
	}
	var refPer float64
	for _, r := range rs {
		if r.name == "nats-server" {
			refPer = r.perConn
		}
	}
	fail := false
	for _, r := range rs {
		if refPer > 0 && r.name != "nats-server" && r.perConn > 0 {
			fmt.Printf("%s: %.1fx less RSS per connection than nats-server\n", r.name, refPer/r.perConn)
		}
		for _, e := range r.errs {
			fmt.Printf("%s: problem: %s\n", r.name, e)
		}
		if r.ok != r.n {
			fail = true
		}
	}
	if fail {
		os.Exit(1)
	}
}

// quantiles is the p50 and p99 of rtts (zero when empty).
func quantiles(rtts []time.Duration) (p50, p99 time.Duration) {
	return bench.Quantile(rtts, 0.50).Round(time.Microsecond), bench.Quantile(rtts, 0.99).Round(time.Microsecond)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func raiseNoFile() {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func freePort() int { return bench.MustFreePort() }

// clientTLS, when set, is what each connection starts TLS with after INFO.
var clientTLS *tls.Config

type conn struct {
	c  net.Conn
	br *bufio.Reader
}

func run(t target, n, sources, conc, pings int, settle time.Duration) (r result) {
	r.name, r.n = t.name, n
	port := freePort()
	args := append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)}, t.args...)
	cmd := exec.Command(t.bin, args...)
	var logBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &logBuf
	if err := cmd.Start(); err != nil {
		r.errs = append(r.errs, err.Error())
		return r
	}
	pid := cmd.Process.Pid
	defer func() {
		if bench.StopProcess(cmd, 10*time.Second) {
			r.errs = append(r.errs, "needed SIGKILL")
		}
	}()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	r.rssBefore, _ = bench.ProcRSS(pid)

	// One connection set up first pings throughout the storm.
	probe, perr := open(addr, n, sources)
	if perr != nil {
		r.errs = append(r.errs, "storm probe: "+perr.Error())
	}
	stormDone := make(chan struct{})
	stormRTTs := make(chan []time.Duration, 1)
	go func() {
		var rtts []time.Duration
		defer func() { stormRTTs <- rtts }()
		if probe == nil {
			return
		}
		for {
			select {
			case <-stormDone:
				return
			default:
			}
			t0 := time.Now()
			if err := pingPong(probe); err != nil {
				return
			}
			rtts = append(rtts, time.Since(t0))
			time.Sleep(time.Millisecond)
		}
	}()
	conns := make([]*conn, n)
	var failed atomic.Int64
	var errMu sync.Mutex
	errSeen := map[string]int{}
	var wg sync.WaitGroup
	if conc <= 0 {
		conc = n
	}
	sem := make(chan struct{}, conc)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := open(addr, i, sources)
			if err != nil {
				failed.Add(1)
				errMu.Lock()
				errSeen[err.Error()]++
				errMu.Unlock()
				return
			}
			conns[i] = c
		}(i)
	}
	wg.Wait()
	r.setup = time.Since(start)
	close(stormDone)
	r.stormP50, r.stormP99 = quantiles(<-stormRTTs)
	if probe != nil {
		probe.c.Close()
	}
	r.failed = int(failed.Load())
	r.ok = n - r.failed
	r.acceptRate = float64(r.ok) / r.setup.Seconds()
	for e, k := range errSeen {
		r.errs = append(r.errs, fmt.Sprintf("%d× %s", k, e))
	}
	time.Sleep(settle)
	r.rssAfter, _ = bench.ProcRSS(pid)
	if r.ok > 0 {
		r.perConn = float64(r.rssAfter-r.rssBefore) / float64(r.ok)
	}
	// PING round trips on connections spread over the whole set, with all N still open.
	var rtts []time.Duration
	step := max(1, n/max(1, pings))
	for i := 0; i < n && len(rtts) < pings; i += step {
		c := conns[i]
		if c == nil {
			continue
		}
		t0 := time.Now()
		if err := pingPong(c); err != nil {
			r.errs = append(r.errs, "ping: "+err.Error())
			break
		}
		rtts = append(rtts, time.Since(t0))
	}
	if len(rtts) > 0 {
		r.rttP50, r.rttP99 = quantiles(rtts)
		r.rttMax = bench.Quantile(rtts, 1).Round(time.Microsecond)
	}
	fmt.Fprintf(os.Stderr, "%s: %d/%d connected in %v, RSS %.1f → %.1f MiB (%.2f KiB/conn), PING p50 %v p99 %v\n",
		t.name, r.ok, n, r.setup.Round(time.Millisecond), mib(r.rssBefore), mib(r.rssAfter), r.perConn/1024, r.rttP50, r.rttP99)
	for _, c := range conns {
		if c != nil {
			c.c.Close()
		}
	}
	if bytes.Contains(logBuf.Bytes(), []byte("panic")) {
		r.errs = append(r.errs, "server log has panic")
	}
	return r
}

// open connects from 127.0.0.(2+i%sources), CONNECTs, subscribes once and waits for PONG.
func open(addr string, i, sources int) (*conn, error) {
	d := net.Dialer{Timeout: 60 * time.Second}
	if sources > 0 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%sources))}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReaderSize(c, 512)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		c.Close()
		return nil, fmt.Errorf("no INFO: %q %v", trunc(line), err)
	}
	if clientTLS != nil {
		if br.Buffered() > 0 {
			c.Close()
			return nil, fmt.Errorf("bytes after INFO before the handshake")
		}
		tc := tls.Client(c, clientTLS)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
		br = bufio.NewReaderSize(c, 512)
	}
	msg := fmt.Sprintf("CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1}\r\nSUB idle.%d 1\r\nPING\r\n", i)
	if _, err := io.WriteString(c, msg); err != nil {
		c.Close()
		return nil, err
	}
	cc := &conn{c: c, br: br}
	if err := waitPong(cc); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return cc, nil
}

func pingPong(c *conn) error {
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.c, "PING\r\n"); err != nil {
		return err
	}
	return waitPong(c)
}

// waitPong reads lines until PONG, answering the server's own PINGs.
func waitPong(c *conn) error {
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return err
		}
		switch {
		case line == "PONG\r\n":
			return nil
		case line == "PING\r\n":
			if _, err := io.WriteString(c.c, "PONG\r\n"); err != nil {
				return err
			}
		case strings.HasPrefix(line, "-ERR"):
			return fmt.Errorf("%s", strings.TrimSpace(line))
		}
	}
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}
