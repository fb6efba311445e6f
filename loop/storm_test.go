package loop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var engines = []string{"gnet", "netpoll"}

func startTestEngine(t *testing.T, engine string, maxConn int) *Engine {
	t.Helper()
	e := New(Config{
		Host: "127.0.0.1", Port: -1, Engine: engine, Reactors: 2,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20, MaxConn: maxConn,
		PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
	})
	if err := e.Start(); err != nil {
		t.Fatalf("start %s: %v", engine, err)
	}
	t.Cleanup(e.Stop)
	return e
}

// handshake reads INFO, sends CONNECT + SUB + PING and returns the first line after INFO
// other than a server PING ("PONG" on success).
func handshake(addr string, i int) (net.Conn, string, error) {
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		return nil, "", err
	}
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReaderSize(c, 256)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		c.Close()
		return nil, "", fmt.Errorf("no INFO: %q %v", line, err)
	}
	if _, err := io.WriteString(c, fmt.Sprintf("CONNECT {\"verbose\":false}\r\nSUB s.%d 1\r\nPING\r\n", i)); err != nil {
		// The excess connection may already be closed by the server; read its error anyway.
		_ = err
	}
	for {
		line, err = br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, "", fmt.Errorf("after INFO: %q %v", line, err)
		}
		if line != "PING\r\n" {
			return c, strings.TrimRight(line, "\r\n"), nil
		}
	}
}

// TestAcceptStorm opens thousands of connections at once; every one must get its PONG.
func TestAcceptStorm(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := startTestEngine(t, engine, 0)
			addr := e.Addr().String()
			conns := make([]net.Conn, n)
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					c, line, err := handshake(addr, i)
					if err == nil && line != "PONG" {
						err = fmt.Errorf("conn %d: got %q, want PONG", i, line)
					}
					if err != nil {
						errs <- err
						return
					}
					conns[i] = c
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if got := e.NumConns(); got != int64(n) {
				t.Errorf("NumConns = %d, want %d", got, n)
			}
			if got := e.Stats().Subscriptions; got != n {
				t.Errorf("Subscriptions = %d, want %d", got, n)
			}
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for e.NumConns() != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := e.NumConns(); got != 0 {
				t.Errorf("after close NumConns = %d", got)
			}
		})
	}
}

// TestMaxConnectionsExcess: connections past max_connections get nats-server's error and are
// closed; the others keep being served, and a slot freed is usable again.
func TestMaxConnectionsExcess(t *testing.T) {
	const limit, extra = 200, 50
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := startTestEngine(t, engine, limit)
			addr := e.Addr().String()
			var kept []net.Conn
			for i := 0; i < limit; i++ {
				c, line, err := handshake(addr, i)
				if err != nil || line != "PONG" {
					t.Fatalf("conn %d: %q %v", i, line, err)
				}
				kept = append(kept, c)
			}
			for i := 0; i < extra; i++ {
				c, line, err := handshake(addr, limit+i)
				if err != nil {
					t.Fatalf("excess conn %d: %v", i, err)
				}
				if line != "-ERR 'maximum connections exceeded'" {
					t.Fatalf("excess conn %d: got %q", i, line)
				}
				// The server closes it.
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Read(make([]byte, 64)); err == nil {
					t.Fatalf("excess conn %d still open", i)
				}
				c.Close()
			}
			// The rest are still served.
			for i, c := range kept[:20] {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.WriteString(c, "PING\r\n"); err != nil {
					t.Fatalf("kept %d: %v", i, err)
				}
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("kept %d: %v", i, err)
					}
					if line == "PONG\r\n" {
						break
					}
				}
			}
			kept[0].Close()
			deadline := time.Now().Add(5 * time.Second)
			for e.NumConns() >= limit && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			c, line, err := handshake(addr, 9999)
			if err != nil || line != "PONG" {
				t.Fatalf("after a slot freed: %q %v", line, err)
			}
			c.Close()
			for _, c := range kept[1:] {
				c.Close()
			}
		})
	}
}

// TestOutOfFDsSurvived lowers RLIMIT_NOFILE under a running engine: accepts fail with EMFILE,
// which must be logged and survived (no crash, no busy loop); once descriptors are available
// again every waiting connection is served.
func TestOutOfFDsSurvived(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) { testOutOfFDs(t, engine) })
	}
}

func testOutOfFDs(t *testing.T, engine string) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	e := startTestEngine(t, engine, 0)
	addr := e.Addr().String()
	if d, ok := e.drv.(*gnetDriver); ok {
		// Made lazily, a kicker would need descriptors exactly when there are none.
		d.mu.Lock()
		n := len(d.kickers)
		d.mu.Unlock()
		if n != e.cfg.Reactors {
			t.Fatalf("%d kickers before the first client, want one per reactor (%d)", n, e.cfg.Reactors)
		}
	}
	fds, err := readDirCount("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	const clientsWanted, serverRoom = 40, 8
	low := old
	low.Cur = uint64(fds + clientsWanted + serverRoom)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
		}
	}
	defer restore()
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := 0; i < clientsWanted; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break // the server took the descriptor first
		}
		clients = append(clients, c)
	}
	if len(clients) <= serverRoom+2 {
		t.Skipf("only %d clients could connect", len(clients))
	}
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	time.Sleep(time.Second) // the server accepts what it can and hits EMFILE on the rest
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	restore()
	if cpu > 700*time.Millisecond {
		t.Errorf("%s: %v of CPU in 1s while out of descriptors: busy loop?", engine, cpu)
	}
	// Every waiting connection is served or, if the server could not get a descriptor for it
	// (gnet needs a second one to adopt a socket), closed; new ones are served.
	served := 0
	for i, c := range clients {
		_ = c.SetDeadline(time.Now().Add(15 * time.Second))
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			continue
		}
		if err != nil || !strings.HasPrefix(line, "INFO ") {
			t.Fatalf("%s: conn %d: no INFO after EMFILE: %q %v", engine, i, line, err)
		}
		served++
		_, _ = io.WriteString(c, "CONNECT {\"verbose\":false}\r\nPING\r\n")
		line, err = br.ReadString('\n')
		if err != nil || line != "PONG\r\n" {
			t.Fatalf("%s: conn %d: %q %v", engine, i, line, err)
		}
	}
	if served < serverRoom {
		t.Errorf("%s: only %d of %d waiting connections served", engine, served, len(clients))
	}
	for i := 0; i < 20; i++ {
		c, line, err := handshake(addr, i)
		if err != nil || line != "PONG" {
			t.Fatalf("%s: new conn %d after EMFILE: %q %v", engine, i, line, err)
		}
		c.Close()
	}
}

func readDirCount(dir string) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return len(names), err
}
