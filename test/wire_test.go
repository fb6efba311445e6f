package test

import (
	"encoding/json"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hdr builds a header block the way clients do.
func hdr(lines ...string) string {
	s := "NATS/1.0\r\n"
	for _, l := range lines {
		s += l + "\r\n"
	}
	return s + "\r\n"
}

func hpub(subj, reply, h, payload string) string {
	args := subj
	if reply != "" {
		args += " " + reply
	}
	return "HPUB " + args + " " + strconv.Itoa(len(h)) + " " + strconv.Itoa(len(h)+len(payload)) + "\r\n" + h + payload + "\r\n"
}

func hmsg(subj, sid, reply, h, payload string) string {
	args := subj + " " + sid
	if reply != "" {
		args += " " + reply
	}
	return "HMSG " + args + " " + strconv.Itoa(len(h)) + " " + strconv.Itoa(len(h)+len(payload)) + "\r\n" + h + payload + "\r\n"
}

func pub(subj, reply, payload string) string {
	args := subj
	if reply != "" {
		args += " " + reply
	}
	return "PUB " + args + " " + strconv.Itoa(len(payload)) + "\r\n" + payload + "\r\n"
}

func msg(subj, sid, reply, payload string) string {
	args := subj + " " + sid
	if reply != "" {
		args += " " + reply
	}
	return "MSG " + args + " " + strconv.Itoa(len(payload)) + "\r\n" + payload + "\r\n"
}

func TestWireInfo(t *testing.T) {
	required := []string{"server_id", "server_name", "version", "proto", "go", "host", "port",
		"headers", "max_payload", "client_id", "client_ip"}
	// Every key nats-server may put in a client INFO (protocol.md §3).
	known := map[string]bool{"git_commit": true, "auth_required": true, "tls_required": true,
		"tls_verify": true, "tls_available": true, "jetstream": true, "ip": true, "nonce": true,
		"cluster": true, "cluster_dynamic": true, "domain": true, "connect_urls": true,
		"ws_connect_urls": true, "ldm": true, "api_lvl": true, "xkey": true}
	for _, k := range required {
		known[k] = true
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{MaxPayload: 512 * 1024})
		r := dialRaw(t, u)
		for _, k := range required {
			if _, ok := r.info[k]; !ok {
				t.Errorf("INFO lacks %q: %s", k, r.infoLine)
			}
		}
		for k := range r.info {
			if !known[k] {
				t.Errorf("INFO has unexpected key %q: %s", k, r.infoLine)
			}
		}
		// Keys appear in nats-server's struct order.
		last := -1
		for _, k := range required {
			i := strings.Index(r.infoLine, `"`+k+`":`)
			if i < last {
				t.Errorf("INFO key %q out of order: %s", k, r.infoLine)
			}
			last = i
		}
		checks := map[string]any{
			"version": "2.15.2", "proto": float64(1), "host": "127.0.0.1",
			"port": float64(portOf(t, u)), "headers": true, "max_payload": float64(512 * 1024),
			"client_ip": "127.0.0.1",
		}
		for k, want := range checks {
			if got := r.info[k]; got != want {
				t.Errorf("INFO %s = %#v, want %#v", k, got, want)
			}
		}
		if id, _ := r.info["server_id"].(string); len(id) != 56 || id[0] != 'N' {
			t.Errorf("server_id %q is not a server nkey", id)
		}
		if r.info["server_name"] != r.info["server_id"] {
			t.Errorf("server_name %v != server_id %v", r.info["server_name"], r.info["server_id"])
		}
		// nats-server's internal clients take 1-4, so once it has started a
		// fresh server's first connection is client 5; natsd starts there.
		// (One of nats-server's is made in the background: a connection in
		// the first milliseconds after the port opens can get 4.)
		cid, _ := r.info["client_id"].(float64)
		if cid != 5 && (tg.name != "nats-server" || cid != 4) {
			t.Errorf("client_id %v on a fresh server, want 5", r.info["client_id"])
		}
		// client ids increase per connection
		r2 := dialRaw(t, u)
		if a, b := r.info["client_id"].(float64), r2.info["client_id"].(float64); b <= a {
			t.Errorf("client_id not increasing: %v then %v", a, b)
		}
		t.Logf("%s INFO: %s", tg.name, strings.TrimSpace(r.infoLine))
	})
}

func TestWireVerbose(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		r := dialRaw(t, u)
		r.send(`CONNECT {"verbose":true,"pedantic":false}` + "\r\n")
		r.expect("+OK\r\n")
		r.send("SUB foo 1\r\n")
		r.expect("+OK\r\n")
		r.send(pub("foo", "", "hi"))
		r.expect("+OK\r\n" + msg("foo", "1", "", "hi"))
		r.send("UNSUB 1\r\n")
		r.expect("+OK\r\n")
		r.send("UNSUB 99\r\n") // unknown sid: still +OK
		r.expect("+OK\r\n")
		r.send("PING\r\n")
		r.expect("PONG\r\n")
		// defaults: CONNECT {} means verbose
		r2 := dialRaw(t, u)
		r2.send("CONNECT {}\r\n")
		r2.expect("+OK\r\n")
		r2.send("PING\r\n")
		r2.expect("PONG\r\n")
	})
}

func TestWireVerboseHPub(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		r := dialRaw(t, u)
		r.send(`CONNECT {"verbose":true,"pedantic":false,"headers":true}` + "\r\n")
		r.expect("+OK\r\n")
		r.send(hpub("foo", "", hdr("A: b"), "x"))
		r.expect("+OK\r\n")
		r.expectOpen()
	})
}

func TestWirePingPong(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		r := dialRaw(t, u)
		// PING before CONNECT is answered when no auth is required.
		r.send("PING\r\n")
		r.expect("PONG\r\n")
		r.send(`CONNECT {"verbose":false,"pedantic":false}` + "\r\nPING\r\nPING\r\n")
		r.expect("PONG\r\nPONG\r\n")
		// client PONG and +OK and INFO are accepted silently
		r.send("PONG\r\n+OK\r\nINFO {}\r\n")
		r.expectOpen()
	})
}

func TestWireMsgFraming(t *testing.T) {
	cases := []struct {
		name, subs, in, want string
	}{
		{"plain", "SUB foo 1\r\n", pub("foo", "", "hello"), msg("foo", "1", "", "hello")},
		{"reply", "SUB foo 1\r\n", pub("foo", "bar.baz", "hello"), msg("foo", "1", "bar.baz", "hello")},
		{"empty", "SUB foo 1\r\n", pub("foo", "", ""), msg("foo", "1", "", "")},
		{"crlf in payload", "SUB foo 1\r\n", pub("foo", "", "a\r\nPUB x 1\r\n"), msg("foo", "1", "", "a\r\nPUB x 1\r\n")},
		{"star", "SUB foo.* 7\r\n", pub("foo.bar", "", "x"), msg("foo.bar", "7", "", "x")},
		{"gt", "SUB foo.> 7\r\n", pub("foo.bar.baz", "", "x"), msg("foo.bar.baz", "7", "", "x")},
		{"gt needs one token", "SUB foo.> 7\r\nSUB foo 8\r\n", pub("foo", "", "x"), msg("foo", "8", "", "x")},
		{"literal star in token", "SUB foo* 7\r\nSUB foo.* 8\r\n", pub("foo*", "", "x") + pub("foo.*", "", "y"), msg("foo*", "7", "", "x") + msg("foo.*", "8", "", "y")},
		{"star matches star-named token", "SUB * 8\r\n", pub("foo*", "", "x"), msg("foo*", "8", "", "x")},
		{"queue", "SUB foo q 3\r\n", pub("foo", "", "x"), msg("foo", "3", "", "x")},
		{"alnum sid", "SUB foo abc\r\n", pub("foo", "", "x"), msg("foo", "abc", "", "x")},
		{"duplicate sid ignored", "SUB foo 1\r\nSUB bar 1\r\n", pub("bar", "", "x") + pub("foo", "", "y"), msg("foo", "1", "", "y")},
		{"case sensitive", "SUB Foo 1\r\nSUB foo 2\r\n", pub("foo", "", "y"), msg("foo", "2", "", "y")},
		{"no interest", "", pub("foo", "r", "y"), ""},
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := dialConnected(t, u, "")
				r.send(tc.subs)
				r.expectOpen()
				r.send(tc.in + "PING\r\n")
				r.expect(tc.want + "PONG\r\n")
			})
		}
	})
}

func TestWireOverlappingSubs(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		r := dialConnected(t, u, "")
		r.send("SUB foo.bar 1\r\nSUB foo.* 2\r\nSUB foo.> 3\r\nSUB > 4\r\nPING\r\n")
		r.expect("PONG\r\n")
		r.send(pub("foo.bar", "", "x") + "PING\r\n")
		// Order among overlapping subscriptions is not pinned; count and set are.
		got := map[string]bool{}
		_ = r.c.SetReadDeadline(time.Now().Add(ioTimeout))
		for i := 0; i < 4; i++ {
			f, err := r.readFrame()
			if err != nil {
				t.Fatalf("frame %d: %v (%q)", i, err, f)
			}
			got[f] = true
		}
		for sid := 1; sid <= 4; sid++ {
			if m := msg("foo.bar", strconv.Itoa(sid), "", "x"); !got[m] {
				t.Errorf("missing %q in %v", m, got)
			}
		}
		r.expect("PONG\r\n")
	})
}

func TestWireHMsgFraming(t *testing.T) {
	h := hdr("Foo: bar", "X-Y: z z")
	cases := []struct {
		name, in, want string
	}{
		{"hpub", hpub("foo", "", h, "hello"), hmsg("foo", "1", "", h, "hello")},
		{"hpub reply", hpub("foo", "r.1", h, "hello"), hmsg("foo", "1", "r.1", h, "hello")},
		{"header only", hpub("foo", "", hdr(), ""), hmsg("foo", "1", "", hdr(), "")},
		{"status line", hpub("foo", "", "NATS/1.0 503\r\n\r\n", "p"), hmsg("foo", "1", "", "NATS/1.0 503\r\n\r\n", "p")},
		{"pub to header sub", pub("foo", "", "hello"), msg("foo", "1", "", "hello")},
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := dialConnected(t, u, `"headers":true`)
				r.send("SUB foo 1\r\n")
				r.expectOpen()
				r.send(tc.in + "PING\r\n")
				r.expect(tc.want + "PONG\r\n")
			})
		}
	})
}

func TestWireHeaderStripping(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		sub := dialConnected(t, u, "")                // no headers
		hsub := dialConnected(t, u, `"headers":true`) // headers
		sub.send("SUB foo 1\r\n")
		sub.expectOpen()
		hsub.send("SUB foo 2\r\n")
		hsub.expectOpen()
		p := dialConnected(t, u, `"headers":true`)
		h := hdr("K: v")
		p.send(hpub("foo", "rep", h, "payload") + hpub("foo", "", hdr(), ""))
		p.expectOpen()
		sub.expect(msg("foo", "1", "rep", "payload") + msg("foo", "1", "", ""))
		hsub.expect(hmsg("foo", "2", "rep", h, "payload") + hmsg("foo", "2", "", hdr(), ""))
	})
}

func TestWireUnsubMax(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		t.Run("max 2", func(t *testing.T) {
			r := dialConnected(t, u, "")
			r.send("SUB foo 1\r\nUNSUB 1 2\r\n" + pub("foo", "", "a") + pub("foo", "", "b") + pub("foo", "", "c") + "PING\r\n")
			r.expect(msg("foo", "1", "", "a") + msg("foo", "1", "", "b") + "PONG\r\n")
			// sid 1 is free again
			r.send("SUB bar 1\r\n" + pub("bar", "", "d") + "PING\r\n")
			r.expect(msg("bar", "1", "", "d") + "PONG\r\n")
		})
		t.Run("max below delivered", func(t *testing.T) {
			r := dialConnected(t, u, "")
			r.send("SUB foo 1\r\n" + pub("foo", "", "a") + pub("foo", "", "b") + "PING\r\n")
			r.expect(msg("foo", "1", "", "a") + msg("foo", "1", "", "b") + "PONG\r\n")
			r.send("UNSUB 1 1\r\n" + pub("foo", "", "c") + "PING\r\n")
			r.expect("PONG\r\n")
		})
		t.Run("plain unsub", func(t *testing.T) {
			r := dialConnected(t, u, "")
			r.send("SUB foo 1\r\nUNSUB 1\r\n" + pub("foo", "", "a") + "PING\r\n")
			r.expect("PONG\r\n")
		})
		t.Run("unsub queue sub", func(t *testing.T) {
			r := dialConnected(t, u, "")
			r.send("SUB foo g 1\r\nUNSUB 1 1\r\n" + pub("foo", "", "a") + pub("foo", "", "b") + "PING\r\n")
			r.expect(msg("foo", "1", "", "a") + "PONG\r\n")
		})
	})
}

// TestWireAutoUnsubscribeFreesSlot: a subscription that ended by auto-unsubscribe stops
// counting against max_subscriptions as soon as its last message is delivered, so a client
// doing request-style cycles (SUB inbox, UNSUB max 1, request, reply) under a small limit
// keeps working for as long as it likes.
func TestWireAutoUnsubscribeFreesSlot(t *testing.T) {
	const cycles = 100
	cases := []struct {
		name    string
		maxSubs int
		self    bool // the requester answers its own requests (delivery from its own reactor)
	}{
		{"responder elsewhere, limit 2", 2, false},
		{"responder elsewhere, limit 1", 1, false},
		{"own responder, limit 2", 2, true},
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				u := tg.run(t, Config{MaxSubs: tc.maxSubs})
				r := dialConnected(t, u, "")
				resp := r
				if tc.self {
					r.send("SUB req 0\r\n")
				} else {
					resp = dialConnected(t, u, "")
					resp.send("SUB req 0\r\n")
					resp.expectOpen()
				}
				r.expectOpen()
				for i := 1; i <= cycles; i++ {
					sid := strconv.Itoa(i)
					inbox := "_INBOX.r" + sid
					r.send("SUB " + inbox + " " + sid + "\r\nUNSUB " + sid + " 1\r\n" + pub("req", inbox, "q"))
					resp.expect(msg("req", "0", inbox, "q"))
					resp.send(pub(inbox, "", "a"))
					r.expect(msg(inbox, sid, "", "a"))
					if tg.name == "nats-server" {
						// nats-server frees the slot on the delivering goroutine a moment
						// after the message is on its way; natsd before it queues it.
						time.Sleep(2 * time.Millisecond)
					}
				}
				// The limit still holds for live subscriptions: one more than it leaves room for.
				live := 0
				if tc.self {
					live = 1
				}
				extra := ""
				for i := 0; i < tc.maxSubs-live+1; i++ {
					extra += "SUB live." + strconv.Itoa(i) + " L" + strconv.Itoa(i) + "\r\n"
				}
				r.send(extra + "PING\r\n")
				r.expect(errLine("maximum subscriptions exceeded") + "PONG\r\n")
			})
		}
	})
}

func TestWireEchoFalse(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		other := dialConnected(t, u, "")
		other.send("SUB foo 9\r\n")
		other.expectOpen()
		r := dialConnected(t, u, `"echo":false`)
		r.send("SUB foo 1\r\n" + pub("foo", "", "x") + "PING\r\n")
		r.expect("PONG\r\n")
		other.expect(msg("foo", "9", "", "x"))
		// and others' messages do reach it
		other.send(pub("foo", "", "y"))
		r.expect(msg("foo", "1", "", "y"))
		other.expect(msg("foo", "9", "", "y"))
		// echo true (default): own message comes back
		e := dialConnected(t, u, `"echo":true`)
		e.send("SUB bar 1\r\n" + pub("bar", "", "z") + "PING\r\n")
		e.expect(msg("bar", "1", "", "z") + "PONG\r\n")
	})
}

func TestWireNoResponders(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		t.Run("503", func(t *testing.T) {
			r := dialConnected(t, u, `"headers":true,"no_responders":true`)
			r.send("SUB _INBOX.x 5\r\n" + pub("svc.a", "_INBOX.x", "req") + "PING\r\n")
			h := "NATS/1.0 503\r\nNats-Subject: svc.a\r\n\r\n"
			r.expect(hmsg("_INBOX.x", "5", "", h, "") + "PONG\r\n")
			// HPUB request gets the same
			r.send(hpub("svc.b", "_INBOX.x", hdr("A: b"), "req") + "PING\r\n")
			r.expect(hmsg("_INBOX.x", "5", "", "NATS/1.0 503\r\nNats-Subject: svc.b\r\n\r\n", "") + "PONG\r\n")
		})
		t.Run("without no_responders", func(t *testing.T) {
			r := dialConnected(t, u, `"headers":true`)
			r.send("SUB _INBOX.x 5\r\n" + pub("svc.a", "_INBOX.x", "req") + "PING\r\n")
			r.expect("PONG\r\n")
		})
		t.Run("no reply subject", func(t *testing.T) {
			r := dialConnected(t, u, `"headers":true,"no_responders":true`)
			r.send("SUB _INBOX.x 5\r\n" + pub("svc.a", "", "req") + "PING\r\n")
			r.expect("PONG\r\n")
		})
		t.Run("with responder", func(t *testing.T) {
			svc := dialConnected(t, u, "")
			svc.send("SUB svc.c 1\r\n")
			svc.expectOpen()
			r := dialConnected(t, u, `"headers":true,"no_responders":true`)
			r.send("SUB _INBOX.y 5\r\n" + pub("svc.c", "_INBOX.y", "req") + "PING\r\n")
			r.expect("PONG\r\n")
			svc.expect(msg("svc.c", "1", "_INBOX.y", "req"))
			svc.send(pub("_INBOX.y", "", "resp"))
			r.expect(msg("_INBOX.y", "5", "", "resp"))
		})
	})
}

func TestWireLenientFraming(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"lowercase", "sub foo 1\r\npub foo 2\r\nhi\r\nping\r\n", msg("foo", "1", "", "hi") + "PONG\r\n"},
		{"mixed case", "Sub foo 1\r\nPuB foo 2\r\nhi\r\nPiNg\r\n", msg("foo", "1", "", "hi") + "PONG\r\n"},
		{"bare LF", "SUB foo 1\nPUB foo 2\nhi\r\nPING\n", msg("foo", "1", "", "hi") + "PONG\r\n"},
		{"tabs", "SUB\tfoo\t1\r\nPUB\tfoo\t\t2\r\nhi\r\nPING\r\n", msg("foo", "1", "", "hi") + "PONG\r\n"},
		{"multiple spaces", "SUB  foo   q  1\r\nPUB foo   r   2\r\nhi\r\nPING\r\n", msg("foo", "1", "r", "hi") + "PONG\r\n"},
		{"trailing space", "SUB foo 1 \r\nPUB foo 2 \r\nhi\r\nPING\r\n", msg("foo", "1", "", "hi") + "PONG\r\n"},
		{"lowercase unsub", "sub foo 1\r\nunsub 1\r\npub foo 2\r\nhi\r\nping\r\n", "PONG\r\n"},
		{"lowercase hpub", "sub foo 1\r\nhpub foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\nping\r\n", hmsg("foo", "1", "", hdr(), "hi") + "PONG\r\n"},
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := dialConnected(t, u, `"headers":true`)
				r.send(tc.in)
				r.expect(tc.want)
			})
		}
		t.Run("lowercase connect", func(t *testing.T) {
			r := dialRaw(t, u)
			r.send("connect {\"verbose\":true}\r\n")
			r.expect("+OK\r\n")
		})
	})
}

func TestWireSplitWrites(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		sub := dialConnected(t, u, `"headers":true`)
		sub.send("SUB foo.> 1\r\n")
		sub.expectOpen()
		p := dialConnected(t, u, `"headers":true`)
		p.expectOpen()
		payload := strings.Repeat("0123456789", 30)
		frames := pub("foo.a", "reply.x", payload) + hpub("foo.b", "", hdr("K: v"), payload) + "PING\r\n"
		want := msg("foo.a", "1", "reply.x", payload) + hmsg("foo.b", "1", "", hdr("K: v"), payload)

		t.Run("byte by byte", func(t *testing.T) {
			p, sub := p.withT(t), sub.withT(t)
			for i := 0; i < len(frames); i++ {
				p.send(frames[i : i+1])
				if i%16 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			p.expect("PONG\r\n")
			sub.expect(want)
		})
		t.Run("random chunks", func(t *testing.T) {
			p, sub := p.withT(t), sub.withT(t)
			rng := rand.New(rand.NewSource(1))
			for round := 0; round < 5; round++ {
				for i := 0; i < len(frames); {
					n := 1 + rng.Intn(40)
					if i+n > len(frames) {
						n = len(frames) - i
					}
					p.send(frames[i : i+n])
					i += n
					if rng.Intn(4) == 0 {
						time.Sleep(time.Duration(rng.Intn(2000)) * time.Microsecond)
					}
				}
				p.expect("PONG\r\n")
				sub.expect(want)
			}
		})
		t.Run("split at every boundary", func(t *testing.T) {
			p, sub := p.withT(t), sub.withT(t)
			one := pub("foo.c", "", "xyz") + "PING\r\n"
			for i := 1; i < len(one); i++ {
				p.send(one[:i])
				time.Sleep(200 * time.Microsecond)
				p.send(one[i:])
				p.expect("PONG\r\n")
				sub.expect(msg("foo.c", "1", "", "xyz"))
			}
		})
	})
}

// infoKeys lists the top-level keys of an INFO line in wire order.
func infoKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(strings.TrimSuffix(strings.TrimPrefix(line, "INFO "), " \r\n")))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestWireInfoSameKeysAsReference compares natsd's INFO keys, in order, with nats-server's.
func TestWireInfoSameKeysAsReference(t *testing.T) {
	var ref []string
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		keys := infoKeys(t, dialRaw(t, u).infoLine)
		if tg.name == "nats-server" {
			ref = keys
			return
		}
		if ref == nil {
			t.Skip("reference not run (NATSD_TARGETS)")
		}
		if strings.Join(keys, ",") != strings.Join(ref, ",") {
			t.Errorf("INFO keys differ\n got: %v\nwant: %v", keys, ref)
		}
	})
}

// TestWireConnectInfo: a protocol 1 client gets, after the PONG to its first PING after
// CONNECT, an async INFO with connect_info and the account it is bound to; only once, and
// never for protocol 0. Keys and their order are compared with nats-server's.
func TestWireConnectInfo(t *testing.T) {
	var ref []string
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		r := dialConnected(t, u, `"protocol":1`)
		r.send("PING\r\n")
		r.expect("PONG\r\n")
		_ = r.c.SetReadDeadline(time.Now().Add(ioTimeout))
		line, err := r.br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "INFO ") {
			t.Fatalf("after the first PONG: %q %v", line, err)
		}
		var info map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(line, "INFO "), " \r\n")), &info); err != nil {
			t.Fatal(err)
		}
		if info["connect_info"] != true || info["remote_account"] != "$G" ||
			info["client_id"] != r.info["client_id"] || info["client_ip"] != r.info["client_ip"] || info["server_id"] != r.info["server_id"] {
			t.Fatalf("connect INFO %s (greeting %s)", line, r.infoLine)
		}
		if _, ok := info["nonce"]; ok {
			t.Fatalf("connect INFO carries a nonce: %s", line)
		}
		// The second PING gets only its PONG.
		r.send("PING\r\n")
		r.expect("PONG\r\n")
		r.send("PING\r\n")
		r.expect("PONG\r\n")
		// A protocol 0 client gets no INFO.
		r0 := dialConnected(t, u, "")
		r0.send("PING\r\nPING\r\n")
		r0.expect("PONG\r\nPONG\r\n")

		keys := infoKeys(t, line)
		if tg.name == "nats-server" {
			ref = keys
			return
		}
		if ref != nil && strings.Join(keys, ",") != strings.Join(ref, ",") {
			t.Errorf("connect INFO keys differ\n got: %v\nwant: %v", keys, ref)
		}
	})
}

// TestWireSecondConnect: a later CONNECT is unmarshalled over the options the connection
// has (what it leaves out keeps its value: verbose, pedantic, echo, headers, protocol), drops
// the connection's subscriptions without a word, and is checked like the first one.
func TestWireSecondConnect(t *testing.T) {
	type step struct{ send, want string }
	cases := []struct {
		name   string
		steps  []step
		info   bool // the async connect INFO of a protocol 1 client follows the last step
		closed bool // after the last step
	}{
		{name: "verbose kept", steps: []step{
			{`CONNECT {"verbose":true,"pedantic":false}` + "\r\n", "+OK\r\n"},
			{`CONNECT {"pedantic":false}` + "\r\n", "+OK\r\n"},
			{"SUB foo 1\r\nPING\r\n", "+OK\r\nPONG\r\n"},
		}},
		{name: "quiet kept", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false}` + "\r\nCONNECT {}\r\nSUB foo 1\r\nPING\r\n", "PONG\r\n"},
		}},
		{name: "subscriptions dropped", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false}` + "\r\nSUB foo 1\r\nSUB bar q 2\r\n" + pub("foo", "", "a") + "PING\r\n",
				msg("foo", "1", "", "a") + "PONG\r\n"},
			{`CONNECT {"name":"again"}` + "\r\n" + pub("foo", "", "b") + pub("bar", "", "c") + "PING\r\n", "PONG\r\n"},
			{"SUB foo 1\r\n" + pub("foo", "", "d") + "PING\r\n", msg("foo", "1", "", "d") + "PONG\r\n"},
		}},
		{name: "echo off kept", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false,"echo":false}` + "\r\nCONNECT {}\r\nSUB foo 1\r\n" + pub("foo", "", "a") + "PING\r\n", "PONG\r\n"},
		}},
		{name: "echo back on", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false,"echo":false}` + "\r\n" + `CONNECT {"echo":true}` + "\r\nSUB foo 1\r\n" + pub("foo", "", "a") + "PING\r\n",
				msg("foo", "1", "", "a") + "PONG\r\n"},
		}},
		{name: "pedantic kept", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":true}` + "\r\nCONNECT {}\r\n" + pub("foo.*", "", "a") + "PING\r\n", errLine("Invalid Publish Subject") + "PONG\r\n"},
		}},
		{name: "headers kept", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false,"headers":true}` + "\r\nCONNECT {}\r\nSUB foo 1\r\n" + hpub("foo", "", hdr("A: b"), "x") + "PING\r\n",
				hmsg("foo", "1", "", hdr("A: b"), "x") + "PONG\r\n"},
		}},
		{name: "protocol kept", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true}` + "\r\nCONNECT {}\r\n" +
				"SUB _INBOX.x 1\r\n" + pub("nobody", "_INBOX.x", "") + "PING\r\n",
				hmsg("_INBOX.x", "1", "", "NATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n", "") + "PONG\r\n"},
		}, info: true},
		{name: "new_account false accepted", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false,"new_account":false}` + "\r\n" + `CONNECT {"new_account":false}` + "\r\nPING\r\n", "PONG\r\n"},
		}},
		{name: "account refused", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false}` + "\r\nPING\r\n", "PONG\r\n"},
			{`CONNECT {"account":"A"}` + "\r\n", errLine("Authorization Violation")},
		}, closed: true},
		{name: "bad protocol refused", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false}` + "\r\nPING\r\n", "PONG\r\n"},
			{`CONNECT {"protocol":2}` + "\r\n", errLine("invalid client protocol")},
		}, closed: true},
		{name: "no_responders without headers refused", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false,"headers":true}` + "\r\nPING\r\n", "PONG\r\n"},
			{`CONNECT {"no_responders":true,"headers":false}` + "\r\n", errLine("no responders requires headers support")},
		}, closed: true},
		{name: "bad JSON closes", steps: []step{
			{`CONNECT {"verbose":false,"pedantic":false}` + "\r\nPING\r\n", "PONG\r\n"},
			{"CONNECT {bad\r\n", ""},
		}, closed: true},
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := dialRaw(t, u)
				for _, st := range tc.steps {
					r.send(st.send)
					if st.want != "" {
						r.expect(st.want)
					}
				}
				if tc.info {
					if f, err := r.readFrame(); err != nil || !strings.HasPrefix(f, "INFO ") || !strings.Contains(f, `"connect_info":true`) {
						t.Fatalf("want the connect INFO, got %q %v", f, err)
					}
				}
				if tc.closed {
					r.expectClosed()
				} else {
					r.expectOpen()
				}
			})
		}
	})
}

// TestWirePedanticWhitespaceSubject: the pedantic publish check looks for empty and wildcard
// tokens only (nats-server's IsValidLiteralSubject), so a form feed, the one blank a PUB
// subject can hold besides a CR, draws no -ERR and the message is delivered.
func TestWirePedanticWhitespaceSubject(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		sub := dialConnected(t, u, "")
		sub.send("SUB > 1\r\n")
		sub.expectOpen()
		r := dialRaw(t, u)
		r.send(`CONNECT {"verbose":true,"pedantic":true}` + "\r\n")
		r.expect("+OK\r\n")
		r.send(pub("a\fb", "", "x") + pub("a\f.*", "", "y") + "PING\r\n")
		r.expect("+OK\r\n" + errLine("Invalid Publish Subject") + "+OK\r\nPONG\r\n")
		sub.expect(msg("a\fb", "1", "", "x") + msg("a\f.*", "1", "", "y"))
	})
}

// TestWireSizeAsSent: MSG and HMSG carry the size fields as the publisher wrote them, leading
// zeros included; only where the headers are cut off for a client without header support is
// the size computed.
func TestWireSizeAsSent(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		u := tg.run(t, Config{})
		plain := dialConnected(t, u, "")
		plain.send("SUB foo 1\r\n")
		plain.expectOpen()
		hs := dialConnected(t, u, `"headers":true`)
		hs.send("SUB foo 2\r\n")
		hs.expectOpen()
		p := dialConnected(t, u, `"headers":true`)
		p.send("PUB foo 0005\r\nhello\r\n" + "PUB foo r 00\r\n\r\n" +
			"HPUB foo 012 0014\r\nNATS/1.0\r\n\r\nhi\r\n" + "HPUB foo r 0 02\r\nhi\r\n" + "PING\r\n")
		p.expect("PONG\r\n")
		plain.expect("MSG foo 1 0005\r\nhello\r\n" + "MSG foo 1 r 00\r\n\r\n" +
			"MSG foo 1 2\r\nhi\r\n" + "MSG foo 1 r 02\r\nhi\r\n")
		hs.expect("MSG foo 2 0005\r\nhello\r\n" + "MSG foo 2 r 00\r\n\r\n" +
			"HMSG foo 2 012 0014\r\nNATS/1.0\r\n\r\nhi\r\n" + "MSG foo 2 r 02\r\nhi\r\n")
	})
}

// TestWireNoRespondersSid: when several of the requester's subscriptions match the reply
// subject, the 503 goes to the one nats-server's sublist walk meets first: at each level a
// '>' before what follows a '*' before the literal token, but at the last level the literal
// before the '*'. (Each reply subject is matched here for the first time: once nats-server has
// cached a match result, later subscriptions are appended to it, and two on the same subject
// come in map order.)
func TestWireNoRespondersSid(t *testing.T) {
	cases := []struct {
		subs  []string // subject sid
		reply string
		sid   string
	}{
		{[]string{"a1.* 1", "a1.x 2"}, "a1.x", "2"},
		{[]string{"a1b.x 2", "a1b.* 1"}, "a1b.x", "2"},
		{[]string{"i2.b2 4", "*.b2 3"}, "i2.b2", "3"},
		{[]string{"c3.p.x 7", "c3.p.> 5", "c3.*.x 6"}, "c3.p.x", "6"},
		{[]string{"e4.x 11", "e4.* 12", "e4.> 10"}, "e4.x", "10"},
		{[]string{"f5.*.* 14", "f5.g.* 13"}, "f5.g.h", "14"},
	}
	forEachTarget(t, func(t *testing.T, tg target) {
		for _, tc := range cases {
			t.Run(tc.reply, func(t *testing.T) {
				u := tg.run(t, Config{})
				r := dialConnected(t, u, `"headers":true,"no_responders":true`)
				for _, s := range tc.subs {
					r.send("SUB " + s + "\r\n")
				}
				r.send(pub("nobody", tc.reply, "") + "PING\r\n")
				h := "NATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n"
				r.expect(hmsg(tc.reply, tc.sid, "", h, "") + "PONG\r\n")
			})
		}
	})
}
