package test

import (
	"bytes"
	"context"
	"math/rand"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// hostileInputs are byte streams a misbehaving client sends before vanishing.
func hostileInputs(maxControl int) []string {
	rng := rand.New(rand.NewSource(7))
	garbage := make([]byte, 8192)
	rng.Read(garbage)
	return []string{
		string(garbage),
		strings.Repeat("X", maxControl*4),                        // huge line, no CRLF
		"CONNECT {\"verbose\":false}\r\nPUB good 100\r\nabc",     // half message onto the good subject
		"PUB good 5\r\nhel",                                      // half message, no CONNECT
		"HPUB good 12 100\r\nNATS/1.0\r\n",                       // half HPUB
		"SUB > 1\r\nSUB good q 2\r\nPUB bad 3\r\nabc\r\nGARBAGE", // subscribe, publish, then garbage
		"CONNECT {bad\r\n",
		"PUB good 99999999999999999999\r\n",
		"PUB good -5\r\n",
		"\x00\x01\x02\r\n\r\n\r\n",
		"SUB good 1\r\nUNSUB 1 0\r\nUNSUB x\r\nPUB good 1\r\nxx",
		strings.Repeat("PING\r\n", 1000),
		strings.Repeat("SUB a.b.c 1\r\n", 200) + "PUB " + strings.Repeat("a.", 3000) + "b 1\r\n",
	}
}

func TestHostileClientsDoNotDisturbOthers(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		sub := connect(t, u)
		pub := connect(t, u)
		const total = 5000
		got := make(chan int, total+10)
		if _, err := sub.Subscribe("good", func(m *nats.Msg) {
			n, err := strconv.Atoi(string(m.Data))
			if err != nil {
				n = -1
			}
			got <- n
		}); err != nil {
			t.Fatal(err)
		}
		flush(t, sub)

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		inputs := hostileInputs(4096)
		addr := hostPort(t, u)
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < w+2*len(inputs) || ctx.Err() == nil; i++ {
					c, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						continue
					}
					t0 := time.Now()
					_ = c.SetDeadline(time.Now().Add(time.Second))
					in := inputs[i%len(inputs)]
					// sometimes split, sometimes all at once
					if i%2 == 0 {
						_, _ = c.Write([]byte(in))
					} else {
						for len(in) > 0 {
							n := 1 + i%97
							if n > len(in) {
								n = len(in)
							}
							if _, err := c.Write([]byte(in[:n])); err != nil {
								break
							}
							in = in[n:]
						}
					}
					if i%3 == 0 {
						_, _ = c.Read(make([]byte, 512)) // maybe read something
					}
					c.Close()
					if d := time.Since(t0); d > 200*time.Millisecond {
						t.Logf("input %d mode %d took %v", i%len(inputs), i%2, d)
					}
				}
			}(w)
		}
		for i := 0; i < total; i++ {
			if err := pub.Publish("good", []byte(strconv.Itoa(i))); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
			if i%500 == 0 {
				time.Sleep(5 * time.Millisecond) // let the hostile clients interleave
			}
		}
		flush(t, pub)
		cancel()
		wg.Wait()
		deadline := time.After(5 * time.Second)
		for want := 0; want < total; want++ {
			select {
			case n := <-got:
				if n != want {
					t.Fatalf("good subscriber got %d, want %d", n, want)
				}
			case <-deadline:
				t.Fatalf("good subscriber received %d of %d", want, total)
			}
		}
		// nothing extra (the hostile half messages never completed)
		select {
		case n := <-got:
			t.Fatalf("extra message %d", n)
		case <-time.After(50 * time.Millisecond):
		}
		if !sub.IsConnected() || !pub.IsConnected() {
			t.Fatal("good clients lost their connection")
		}
		if _, err := pub.Request("nobody", nil, msgTimeout); err != nats.ErrNoResponders {
			t.Fatalf("server not healthy afterwards: %v", err)
		}
	})
}

// dialSmallRcvBuf dials with a tiny socket receive buffer, so a client that stops reading
// makes the server's outbound queue grow quickly.
func dialSmallRcvBuf(t *testing.T, u string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: ioTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", hostPort(t, u))
	if err != nil {
		t.Fatal(err)
	}
	return wrapRaw(t, c)
}

func TestSlowConsumer(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		cfg := Config{MaxPayload: 64 * 1024, MaxPending: 512 * 1024}
		u := tg.run(t, cfg)
		slow := dialSmallRcvBuf(t, u)
		slow.send(`CONNECT {"verbose":false,"pedantic":false}` + "\r\nSUB flood 1\r\n")
		slow.expectOpen()

		other := connect(t, u)
		otherSub, _ := other.SubscribeSync("after")
		flush(t, other)

		p := connect(t, u)
		payload := bytes.Repeat([]byte("x"), 32*1024)
		const floods = 512 // 16 MiB, far beyond 512 KiB pending plus socket buffers
		start := time.Now()
		for i := 0; i < floods; i++ {
			if err := p.Publish("flood", payload); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		flush(t, p)
		t.Logf("flood published in %v", time.Since(start))

		// the slow connection is cut: reading what made it into the socket ends in EOF/reset
		data, closed := slow.readAll(5 * time.Second)
		if !closed {
			t.Fatalf("slow consumer not disconnected (read %d bytes)", len(data))
		}
		if len(data) >= floods*len(payload) {
			t.Fatalf("slow consumer received everything (%d bytes): it was never slow", len(data))
		}
		// nats-server sends no -ERR to a slow consumer: pending data is dropped and the socket closed
		if i := strings.Index(data, "-ERR"); i >= 0 {
			t.Errorf("slow consumer got an error line: %q", trunc(data[i:]))
		}
		t.Logf("slow consumer read %d bytes before close, at %v", len(data), time.Since(start))

		// the publisher and the other subscribers keep working
		for i := 0; i < 100; i++ {
			_ = p.Publish("after", []byte(strconv.Itoa(i)))
		}
		flush(t, p)
		for i := 0; i < 100; i++ {
			if m := nextMsg(t, otherSub); string(m.Data) != strconv.Itoa(i) {
				t.Fatalf("got %q want %d", m.Data, i)
			}
		}
		if !p.IsConnected() || !other.IsConnected() {
			t.Fatal("innocent clients disconnected")
		}
		// a new subscriber on the flood subject works
		fresh := connect(t, u)
		fs, _ := fresh.SubscribeSync("flood")
		flush(t, fresh)
		_ = p.Publish("flood", []byte("ok"))
		if m := nextMsg(t, fs); string(m.Data) != "ok" {
			t.Fatalf("got %q", m.Data)
		}
	})
}
