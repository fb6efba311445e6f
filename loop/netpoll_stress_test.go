package loop

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/natsd/natsd/auth"
	"golang.org/x/crypto/bcrypt"
)

// TestPingPongStress runs many PING/PONG round trips on many connections, with the client's
// bytes split at random points and the server sending keepalive PINGs of its own meanwhile.
// A round trip that gets no timely answer means a lost wake-up in the driver (the client sends
// its next PING right after reading PONG, i.e. while the reactor may still be finishing the
// batch that wrote it); the server's own PING, every 2s, would rescue a stuck connection (the
// client's PONG brings more bytes), so the limit per round trip is below that.
func TestPingPongStress(t *testing.T) {
	conns, dur := 40, 4*time.Second
	if testing.Short() {
		conns, dur = 16, time.Second
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := New(Config{
				Host: "127.0.0.1", Port: -1, Engine: engine, Reactors: 2,
				MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20, MaxConn: 0,
				PingInterval: 2 * time.Second, MaxPingsOut: 1000, WriteDeadline: 10 * time.Second,
				Info: []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
			})
			if err := e.Start(); err != nil {
				t.Fatalf("start %s: %v", engine, err)
			}
			t.Cleanup(e.Stop)
			addr := e.Addr().String()
			deadline := time.Now().Add(dur)
			errs := make(chan error, conns)
			var wg sync.WaitGroup
			var mu sync.Mutex
			total := 0
			for i := 0; i < conns; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					n, err := pingPongClient(addr, i, deadline)
					mu.Lock()
					total += n
					mu.Unlock()
					if err != nil {
						errs <- fmt.Errorf("conn %d after %d round trips: %w", i, n, err)
					}
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			t.Logf("%s: %d round trips", engine, total)
		})
	}
}

// rttLimit is how long a round trip may take: far more than any scheduling delay, less than
// the server's ping interval.
const rttLimit = 1500 * time.Millisecond

func pingPongClient(addr string, i int, until time.Time) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		return 0, fmt.Errorf("no INFO: %q %v", line, err)
	}
	var wmu sync.Mutex
	// send writes b in random pieces, sometimes yielding between them so that the server sees
	// a partial frame.
	send := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		for len(b) > 0 {
			k := len(b)
			if rng.IntN(3) == 0 {
				k = 1 + rng.IntN(len(b))
			}
			if _, err := c.Write(b[:k]); err != nil {
				return err
			}
			b = b[k:]
			if len(b) > 0 && rng.IntN(4) == 0 {
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			}
		}
		return nil
	}
	if err := send([]byte("CONNECT {\"verbose\":false,\"pedantic\":false}\r\n")); err != nil {
		return 0, err
	}
	n := 0
	for time.Now().Before(until) {
		k := 1
		if rng.IntN(4) == 0 {
			k = 1 + rng.IntN(4) // pipelined PINGs
		}
		if err := send([]byte(strings.Repeat("PING\r\n", k))); err != nil {
			return n, err
		}
		for got := 0; got < k; {
			_ = c.SetReadDeadline(time.Now().Add(rttLimit))
			line, err := br.ReadString('\n')
			if err != nil {
				return n, fmt.Errorf("waiting for PONG %d/%d: %v", got+1, k, err)
			}
			switch line {
			case "PONG\r\n":
				got++
			case "PING\r\n":
				// The server's keepalive: answer it (a PONG makes no reply).
				if err := send([]byte("PONG\r\n")); err != nil {
					return n, err
				}
			default:
				return n, fmt.Errorf("unexpected %q", line)
			}
		}
		n++
	}
	return n, nil
}

// TestParkedConnect: bytes behind a CONNECT whose check runs off the reactor (bcrypt) wait for
// the verdict, including bytes that arrive while it runs, and the verdict resumes parsing
// without any further byte from the client.
func TestParkedConnect(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), 8) // slow enough to overlap the writes
	if err != nil {
		t.Fatal(err)
	}
	ac, err := auth.New(auth.Options{Username: "u", Password: string(h)})
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := New(Config{
				Host: "127.0.0.1", Port: -1, Engine: engine, Reactors: 2,
				MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20, MaxConn: 0,
				PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
				AuthTimeout: 10 * time.Second, Auth: ac,
				Info: []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
			})
			if err := e.Start(); err != nil {
				t.Fatalf("start %s: %v", engine, err)
			}
			t.Cleanup(e.Stop)
			for i := 0; i < 8; i++ {
				c, err := net.DialTimeout("tcp", e.Addr().String(), 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				br := bufio.NewReader(c)
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
					t.Fatalf("no INFO: %q %v", line, err)
				}
				// The first PING comes with CONNECT; the second follows while bcrypt runs, in
				// two pieces: the client then waits, sending nothing more.
				parts := []string{
					"CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"pw\"}\r\nPING\r\n",
					"PI", "NG\r\n",
				}
				for j, p := range parts {
					if j > 0 {
						time.Sleep(time.Duration(i) * time.Millisecond)
					}
					if _, err := c.Write([]byte(p)); err != nil {
						t.Fatal(err)
					}
				}
				for k := 0; k < 2; k++ {
					if line, err := br.ReadString('\n'); err != nil || line != "PONG\r\n" {
						t.Fatalf("conn %d: PONG %d: %q %v", i, k+1, line, err)
					}
				}
				c.Close()
			}
		})
	}
}
