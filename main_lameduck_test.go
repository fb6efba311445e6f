package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestBinaryLameDuckTimingMatchesNatsServer: with 3 and with 300 clients, lame duck mode
// (SIGUSR2) keeps natsd up as long as nats-server v2.15.2 and spreads the closes the same
// way: the grace period, then closes spaced over the rest of the duration (30 s, the least
// either accepts) but never more than a second apart. Both binaries run side by side with
// the same file; the comparison allows a second or a quarter of the reference's time,
// whichever is more, for a loaded machine.
func TestBinaryLameDuckTimingMatchesNatsServer(t *testing.T) {
	ref, _ := filepath.Abs(".cache/tools/nats-server")
	if p := os.Getenv("NATS_SERVER"); p != "" {
		ref = p
	}
	if _, err := os.Stat(ref); err != nil {
		t.Skip("no nats-server binary (make tools)")
	}
	conf := tempConf(t, "lame_duck_duration: \"30s\"\nlame_duck_grace_period: \"500ms\"\n")
	type result struct {
		first, last, exit time.Duration
		err               error
	}
	run := func(bin string, clients int) (res result) {
		port := freePort(t)
		p := &proc{port: port, log: &lockedBuffer{}, done: make(chan error, 1)}
		p.cmd = exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-c", conf)
		p.cmd.Stderr = p.log
		if err := p.cmd.Start(); err != nil {
			return result{err: err}
		}
		go func() { p.done <- p.cmd.Wait() }()
		defer func() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}()
		var nc *nats.Conn
		var err error
		for i := 0; i < 500; i++ {
			if nc, err = nats.Connect(p.url(), nats.NoReconnect()); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return result{err: fmt.Errorf("%s did not start: %v\n%s", bin, err, p.log)}
		}
		nc.Close()
		var (
			mu     sync.Mutex
			closes []time.Time
			wg     sync.WaitGroup
		)
		for i := 0; i < clients; i++ {
			wg.Add(1)
			nc, err := nats.Connect(p.url(), nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) {
				mu.Lock()
				closes = append(closes, time.Now())
				mu.Unlock()
				wg.Done()
			}))
			if err != nil {
				return result{err: err}
			}
			defer nc.Close()
		}
		start := time.Now()
		_ = p.cmd.Process.Signal(syscall.SIGUSR2)
		select {
		case <-p.done:
			p.done <- nil
		case <-time.After(60 * time.Second):
			return result{err: fmt.Errorf("%s still up 60 s into lame duck mode", bin)}
		}
		res.exit = time.Since(start)
		wg.Wait()
		first, last := closes[0], closes[0]
		for _, c := range closes {
			if c.Before(first) {
				first = c
			}
			if c.After(last) {
				last = c
			}
		}
		res.first, res.last = first.Sub(start), last.Sub(start)
		return res
	}
	near := func(got, want time.Duration) bool {
		slack := max(time.Second, want/4)
		return got >= want-slack && got <= want+slack
	}
	for _, clients := range []int{3, 300} {
		t.Run(fmt.Sprintf("%d clients", clients), func(t *testing.T) {
			var theirs, ours result
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); theirs = run(ref, clients) }()
			go func() { defer wg.Done(); ours = run(natsdBin(t), clients) }()
			wg.Wait()
			if theirs.err != nil || ours.err != nil {
				t.Fatalf("nats-server: %v; natsd: %v", theirs.err, ours.err)
			}
			t.Logf("nats-server: first close %v, last %v, exit %v; natsd: %v, %v, %v",
				theirs.first, theirs.last, theirs.exit, ours.first, ours.last, ours.exit)
			if !near(ours.exit, theirs.exit) || !near(ours.last, theirs.last) || !near(ours.first, theirs.first) {
				t.Fatalf("lame duck timing differs: nats-server %+v, natsd %+v", theirs, ours)
			}
		})
	}
}
