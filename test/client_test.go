package test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

const msgTimeout = 3 * time.Second

func connect(t *testing.T, u string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.Timeout(ioTimeout)}, opts...)
	nc, err := nats.Connect(u, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", u, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func flush(t *testing.T, nc *nats.Conn) {
	t.Helper()
	if err := nc.FlushTimeout(ioTimeout); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func nextMsg(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(msgTimeout)
	if err != nil {
		t.Fatalf("NextMsg on %q: %v", sub.Subject, err)
	}
	return m
}

func expectNoMsg(t *testing.T, sub *nats.Subscription) {
	t.Helper()
	if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("unexpected message on %q: %q %q", sub.Subject, m.Subject, m.Data)
	}
}

func TestClientPubSub(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		nc := connect(t, u)
		sub, err := nc.SubscribeSync("greet")
		if err != nil {
			t.Fatal(err)
		}
		flush(t, nc)
		other := connect(t, u)
		if err := other.Publish("greet", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := other.PublishMsg(&nats.Msg{Subject: "greet", Reply: "r.1", Data: []byte("world")}); err != nil {
			t.Fatal(err)
		}
		flush(t, other)
		m := nextMsg(t, sub)
		if m.Subject != "greet" || string(m.Data) != "hello" || m.Reply != "" {
			t.Fatalf("got %q %q %q", m.Subject, m.Reply, m.Data)
		}
		m = nextMsg(t, sub)
		if string(m.Data) != "world" || m.Reply != "r.1" {
			t.Fatalf("got %q %q", m.Reply, m.Data)
		}
		expectNoMsg(t, sub)
		// async subscription
		got := make(chan string, 1)
		if _, err := nc.Subscribe("async", func(m *nats.Msg) { got <- string(m.Data) }); err != nil {
			t.Fatal(err)
		}
		flush(t, nc)
		_ = other.Publish("async", []byte("a"))
		select {
		case s := <-got:
			if s != "a" {
				t.Fatalf("got %q", s)
			}
		case <-time.After(msgTimeout):
			t.Fatal("async message not received")
		}
	})
}

func TestClientWildcards(t *testing.T) {
	cases := []struct {
		sub   string
		match []string
		miss  []string
	}{
		{"foo.*", []string{"foo.bar", "foo.baz"}, []string{"foo", "foo.bar.baz", "bar.foo"}},
		{"foo.>", []string{"foo.bar", "foo.bar.baz"}, []string{"foo", "bar.foo"}},
		{"*.bar", []string{"foo.bar", "x.bar"}, []string{"bar", "foo.bar.baz"}},
		{"foo.*.baz", []string{"foo.x.baz"}, []string{"foo.baz", "foo.x.y.baz"}},
		{"*.*.>", []string{"a.b.c", "a.b.c.d"}, []string{"a.b", "a"}},
		{">", []string{"a", "a.b.c"}, nil},
		{"foo*", []string{"foo*"}, []string{"foox"}},
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		nc := connect(t, u)
		pubc := connect(t, u)
		for _, tc := range cases {
			t.Run(tc.sub, func(t *testing.T) {
				sub, err := nc.SubscribeSync(tc.sub)
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Unsubscribe()
				flush(t, nc)
				for _, s := range append(append([]string{}, tc.miss...), tc.match...) {
					_ = pubc.Publish(s, []byte(s))
				}
				flush(t, pubc)
				for _, s := range tc.match {
					m := nextMsg(t, sub)
					if m.Subject != s || string(m.Data) != s {
						t.Fatalf("got %q want %q", m.Subject, s)
					}
				}
				expectNoMsg(t, sub)
			})
		}
	})
}

func TestClientQueueGroups(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		const members, total = 4, 2000
		var counts [members]atomic.Int64
		var all atomic.Int64
		seen := make([]atomic.Int32, total)
		for i := 0; i < members; i++ {
			nc := connect(t, u)
			i := i
			if _, err := nc.QueueSubscribe("work", "g", func(m *nats.Msg) {
				n, _ := strconv.Atoi(string(m.Data))
				seen[n].Add(1)
				counts[i].Add(1)
				all.Add(1)
			}); err != nil {
				t.Fatal(err)
			}
			flush(t, nc)
		}
		// a plain subscriber gets every message besides the group
		watcher := connect(t, u)
		var plain atomic.Int64
		if _, err := watcher.Subscribe("work", func(*nats.Msg) { plain.Add(1) }); err != nil {
			t.Fatal(err)
		}
		flush(t, watcher)
		p := connect(t, u)
		for i := 0; i < total; i++ {
			_ = p.Publish("work", []byte(strconv.Itoa(i)))
		}
		flush(t, p)
		waitFor(t, msgTimeout, "queue deliveries", func() bool { return all.Load() >= total && plain.Load() >= total })
		time.Sleep(50 * time.Millisecond)
		if all.Load() != total || plain.Load() != total {
			t.Fatalf("queue got %d, plain got %d, want %d", all.Load(), plain.Load(), total)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("message %d delivered %d times to the group", i, seen[i].Load())
			}
		}
		for i := range counts {
			// even spread: expect 500 each; accept a wide band
			if c := counts[i].Load(); c < total/members/3 {
				t.Errorf("member %d got only %d of %d", i, c, total)
			}
		}
		t.Logf("spread: %d %d %d %d", counts[0].Load(), counts[1].Load(), counts[2].Load(), counts[3].Load())
	})
}

func TestClientRequestReply(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		svc := connect(t, u)
		if _, err := svc.Subscribe("svc.echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("re:"), m.Data...)) }); err != nil {
			t.Fatal(err)
		}
		flush(t, svc)
		nc := connect(t, u)
		for i := 0; i < 20; i++ {
			resp, err := nc.Request("svc.echo", []byte(strconv.Itoa(i)), msgTimeout)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			if string(resp.Data) != "re:"+strconv.Itoa(i) {
				t.Fatalf("got %q", resp.Data)
			}
		}
		// old-style request (unique inbox per request)
		nc2 := connect(t, u, nats.UseOldRequestStyle())
		resp, err := nc2.Request("svc.echo", []byte("old"), msgTimeout)
		if err != nil || string(resp.Data) != "re:old" {
			t.Fatalf("old style: %v %v", err, resp)
		}
		// concurrent requests
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r, err := nc.Request("svc.echo", []byte(fmt.Sprint(i)), msgTimeout)
				if err == nil && string(r.Data) != fmt.Sprint("re:", i) {
					err = fmt.Errorf("got %q", r.Data)
				}
				if err != nil {
					errs <- err
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestClientNoResponders(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		nc := connect(t, u)
		start := time.Now()
		_, err := nc.Request("nobody.home", []byte("x"), msgTimeout)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("err = %v, want ErrNoResponders", err)
		}
		if time.Since(start) > msgTimeout/2 {
			t.Fatalf("no-responders took %v", time.Since(start))
		}
		// old request style too
		nc2 := connect(t, u, nats.UseOldRequestStyle())
		if _, err := nc2.Request("nobody.home", nil, msgTimeout); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("old style err = %v", err)
		}
		// a raw inbox subscription gets the 503 status message
		// (NextMsg on a sync sub turns it into ErrNoResponders; a callback sees the message)
		inbox := nats.NewInbox()
		got := make(chan *nats.Msg, 1)
		if _, err := nc.Subscribe(inbox, func(m *nats.Msg) { got <- m }); err != nil {
			t.Fatal(err)
		}
		_ = nc.PublishRequest("nobody.home", inbox, nil)
		select {
		case m := <-got:
			if m.Header.Get("Status") != "503" || len(m.Data) != 0 {
				t.Fatalf("got header %v data %q", m.Header, m.Data)
			}
		case <-time.After(msgTimeout):
			t.Fatal("no 503 status message")
		}
		sub, _ := nc.SubscribeSync(nats.NewInbox())
		_ = nc.PublishRequest("nobody.home", sub.Subject, nil)
		if _, err := sub.NextMsg(msgTimeout); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("NextMsg err = %v, want ErrNoResponders", err)
		}
	})
}

func TestClientHeaders(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		nc := connect(t, u)
		sub, _ := nc.SubscribeSync("h")
		flush(t, nc)
		m := nats.NewMsg("h")
		m.Header.Set("X-One", "1")
		m.Header.Add("X-Multi", "a")
		m.Header.Add("X-Multi", "b")
		m.Header.Set("Nats-Msg-Id", "abc")
		m.Data = []byte("body")
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		// header-only message
		m2 := nats.NewMsg("h")
		m2.Header.Set("Only", "hdr")
		_ = nc.PublishMsg(m2)
		got := nextMsg(t, sub)
		if string(got.Data) != "body" || got.Header.Get("X-One") != "1" || got.Header.Get("Nats-Msg-Id") != "abc" {
			t.Fatalf("got %v %q", got.Header, got.Data)
		}
		if v := got.Header.Values("X-Multi"); len(v) != 2 || v[0] != "a" || v[1] != "b" {
			t.Fatalf("multi values %v", v)
		}
		got = nextMsg(t, sub)
		if len(got.Data) != 0 || got.Header.Get("Only") != "hdr" {
			t.Fatalf("got %v %q", got.Header, got.Data)
		}
		// request/response with headers
		if _, err := nc.Subscribe("hsvc", func(m *nats.Msg) {
			r := nats.NewMsg(m.Reply)
			r.Header.Set("Echo", m.Header.Get("Q"))
			_ = m.RespondMsg(r)
		}); err != nil {
			t.Fatal(err)
		}
		req := nats.NewMsg("hsvc")
		req.Header.Set("Q", "yes")
		resp, err := nc.RequestMsg(req, msgTimeout)
		if err != nil || resp.Header.Get("Echo") != "yes" {
			t.Fatalf("header request: %v %v", err, resp)
		}
	})
}

func TestClientNoEcho(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		nc := connect(t, u, nats.NoEcho())
		sub, _ := nc.SubscribeSync("e")
		flush(t, nc)
		_ = nc.Publish("e", []byte("mine"))
		flush(t, nc)
		other := connect(t, u)
		_ = other.Publish("e", []byte("theirs"))
		flush(t, other)
		if m := nextMsg(t, sub); string(m.Data) != "theirs" {
			t.Fatalf("got %q", m.Data)
		}
		expectNoMsg(t, sub)
	})
}

func TestClientAutoUnsubscribe(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		nc := connect(t, u)
		var n atomic.Int64
		sub, err := nc.Subscribe("au", func(*nats.Msg) { n.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.AutoUnsubscribe(10); err != nil {
			t.Fatal(err)
		}
		flush(t, nc)
		p := connect(t, u)
		for i := 0; i < 25; i++ {
			_ = p.Publish("au", []byte("x"))
		}
		flush(t, p)
		waitFor(t, msgTimeout, "10 messages", func() bool { return n.Load() >= 10 })
		time.Sleep(50 * time.Millisecond)
		if n.Load() != 10 {
			t.Fatalf("got %d, want 10", n.Load())
		}
		waitFor(t, msgTimeout, "sub invalid", func() bool { return !sub.IsValid() })
	})
}

func TestClientDrain(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		const n = 2000
		t.Run("sub", func(t *testing.T) {
			nc := connect(t, u)
			var got atomic.Int64
			sub, _ := nc.Subscribe("dr.sub", func(*nats.Msg) {
				got.Add(1)
				if got.Load()%200 == 0 {
					time.Sleep(time.Millisecond) // build a backlog
				}
			})
			flush(t, nc)
			p := connect(t, u)
			for i := 0; i < n; i++ {
				_ = p.Publish("dr.sub", []byte("x"))
			}
			flush(t, p)
			flush(t, nc) // everything published is now in nc's pending queue
			if err := sub.Drain(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, msgTimeout, "sub drained", func() bool { return !sub.IsValid() })
			if got.Load() != n {
				t.Fatalf("drained sub got %d, want %d", got.Load(), n)
			}
			// after drain the subject is no longer delivered
			_ = p.Publish("dr.sub", []byte("late"))
			flush(t, p)
			time.Sleep(30 * time.Millisecond)
			if got.Load() != n {
				t.Fatalf("got %d after drain", got.Load())
			}
		})
		t.Run("conn", func(t *testing.T) {
			closed := make(chan struct{})
			nc := connect(t, u, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
			var got atomic.Int64
			for _, s := range []string{"dr.a", "dr.b"} {
				if _, err := nc.Subscribe(s, func(*nats.Msg) { got.Add(1) }); err != nil {
					t.Fatal(err)
				}
			}
			flush(t, nc)
			p := connect(t, u)
			for i := 0; i < n; i++ {
				_ = p.Publish("dr.a", []byte("x"))
				_ = p.Publish("dr.b", []byte("y"))
			}
			flush(t, p)
			flush(t, nc)
			if err := nc.Drain(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-closed:
			case <-time.After(2 * msgTimeout):
				t.Fatal("drained connection did not close")
			}
			if got.Load() != 2*n {
				t.Fatalf("drained conn got %d, want %d", got.Load(), 2*n)
			}
		})
	})
}

func TestClientOrdered100k(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		const total = 100_000
		nc := connect(t, u)
		done := make(chan struct{})
		var next, bad int
		_, err := nc.Subscribe("ord", func(m *nats.Msg) {
			n, err := strconv.Atoi(string(m.Data))
			if err != nil || n != next {
				bad++
			}
			next++
			if next == total {
				close(done)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if sub, _ := nc.Subscribe("unused", func(*nats.Msg) {}); sub != nil {
			_ = sub.Unsubscribe()
		}
		flush(t, nc)
		p := connect(t, u)
		for i := 0; i < total; i++ {
			if err := p.Publish("ord", []byte(strconv.Itoa(i))); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		if err := p.FlushTimeout(20 * time.Second); err != nil {
			t.Fatalf("flush after %d publishes: %v (received %d)", total, err, next)
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("received %d of %d", next, total)
		}
		flush(t, nc)
		time.Sleep(20 * time.Millisecond)
		if bad != 0 || next != total {
			t.Fatalf("out of order: %d, received %d of %d", bad, next, total)
		}
	})
}

func TestClientMaxPayload(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{}) // default 1 MiB
		nc := connect(t, u)
		if mp := nc.MaxPayload(); mp != 1<<20 {
			t.Fatalf("MaxPayload %d", mp)
		}
		sub, _ := nc.SubscribeSync("big")
		flush(t, nc)
		big := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16)
		big[0], big[len(big)-1] = 'A', 'Z'
		if err := nc.Publish("big", big); err != nil {
			t.Fatal(err)
		}
		m := nextMsg(t, sub)
		if !bytes.Equal(m.Data, big) {
			t.Fatalf("1 MiB payload corrupted (len %d)", len(m.Data))
		}
		err := nc.Publish("big", append(big, 'x'))
		if !errors.Is(err, nats.ErrMaxPayload) {
			t.Fatalf("1 MiB+1: err = %v, want ErrMaxPayload", err)
		}
		// headers count towards the limit
		hm := nats.NewMsg("big")
		hm.Header.Set("K", "v")
		hm.Data = big
		if err := nc.PublishMsg(hm); !errors.Is(err, nats.ErrMaxPayload) {
			t.Fatalf("1 MiB + header: err = %v, want ErrMaxPayload", err)
		}
		flush(t, nc)
	})
}

func TestClientReconnect(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u, stop := tg.start(t, Config{})
		cfg := fixedPort(t, Config{}, u)
		stopped := false
		defer func() {
			if !stopped {
				stop()
			}
		}()
		reconnected := make(chan struct{}, 4)
		disconnected := make(chan struct{}, 4)
		nc := connect(t, u,
			nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1), nats.ReconnectJitter(0, 0),
			nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnected <- struct{}{} }),
			nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
		sub, _ := nc.SubscribeSync("rc")
		flush(t, nc)
		_ = nc.Publish("rc", []byte("before"))
		if m := nextMsg(t, sub); string(m.Data) != "before" {
			t.Fatalf("got %q", m.Data)
		}
		stop()
		stopped = true
		select {
		case <-disconnected:
		case <-time.After(msgTimeout):
			t.Fatal("no disconnect")
		}
		_, stop = tg.start(t, cfg)
		stopped = false
		select {
		case <-reconnected:
		case <-time.After(2 * msgTimeout):
			t.Fatal("no reconnect")
		}
		// The subscription was replayed on reconnect; a round trip on nc makes sure the server
		// has processed it before another connection publishes.
		flush(t, nc)
		p := connect(t, u)
		_ = p.Publish("rc", []byte("after"))
		flush(t, p)
		if m := nextMsg(t, sub); string(m.Data) != "after" {
			t.Fatalf("got %q", m.Data)
		}
		if _, err := nc.Request("nobody", nil, msgTimeout); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("request after reconnect: %v", err)
		}
	})
}

func TestClientFlushRTT(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		nc := connect(t, u)
		for i := 0; i < 50; i++ {
			if err := nc.Flush(); err != nil {
				t.Fatalf("flush %d: %v", i, err)
			}
		}
		rtt, err := nc.RTT()
		if err != nil || rtt <= 0 || rtt > time.Second {
			t.Fatalf("RTT %v %v", rtt, err)
		}
		info := []string{nc.ConnectedServerId(), nc.ConnectedServerVersion(), nc.ConnectedUrl()}
		if info[1] != "2.15.2" || info[0] == "" || info[2] == "" {
			t.Fatalf("server info %v", info)
		}
		if !nc.HeadersSupported() {
			t.Fatal("headers not supported")
		}
		if cid, err := nc.GetClientID(); err != nil || cid == 0 {
			t.Fatalf("client id %v %v", cid, err)
		}
		if ip, err := nc.GetClientIP(); err != nil || ip.String() != "127.0.0.1" {
			t.Fatalf("client ip %v %v", ip, err)
		}
	})
}
