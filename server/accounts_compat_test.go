package server

import (
	"strings"
	"testing"
	"time"
)

// Accounts, run against nats-server and natsd from the same file and expected to give the same
// bytes: isolation, stream and service imports across accounts (request/reply included),
// mappings, and each account limit with nats-server's error.
const accountsConf = `
listen: "127.0.0.1:-1"
accounts {
  ORDERS {
    users: [{user: o, password: o}]
    exports: [{stream: "orders.>"}, {service: "price.*"}]
  }
  SHOP {
    users: [{user: s, password: s}]
    imports: [
      {stream: {account: ORDERS, subject: "orders.>"}, prefix: ext}
      {service: {account: ORDERS, subject: "price.*"}, to: "ask.price.*"}
    ]
    mappings: { "old.*": "new.$1" }
  }
  TINY {
    users: [{user: t, password: t}, {user: t2, password: t2}]
    limits: { max_connections: 1, max_subscriptions: 1, max_payload: 10 }
  }
}
`

func connectAs(t *testing.T, cs *compatServer, user string) *raw {
	t.Helper()
	r := cs.dial()
	r.send(`CONNECT {"verbose":false,"user":"` + user + `","pass":"` + user + `"}` + "\r\nPING\r\n")
	r.expect("PONG\r\n")
	return r
}

func TestAccountsCompat(t *testing.T) {
	for _, name := range []string{"nats-server", "natsd"} {
		t.Run(name, func(t *testing.T) {
			cs := startCompat(t, name, accountsConf)

			// Isolation: the same subject in two accounts.
			o, s := connectAs(t, cs, "o"), connectAs(t, cs, "s")
			o.send("SUB x 1\r\nPING\r\n")
			o.expect("PONG\r\n")
			s.send("SUB x 1\r\nPUB x 2\r\nhi\r\nPING\r\n")
			s.expect("MSG x 1 2\r\n")
			s.expect("hi\r\n")
			s.expect("PONG\r\n")
			o.send("PING\r\n")
			o.expect("PONG\r\n") // nothing from SHOP

			// Stream import with a prefix.
			s.send("SUB ext.orders.> 2\r\nPING\r\n")
			s.expect("PONG\r\n")
			o.send("PUB orders.7 3\r\nnew\r\nPING\r\n")
			o.expect("PONG\r\n")
			s.expect("MSG ext.orders.7 2 3\r\n")
			s.expect("new\r\n")

			// Service import, request and reply across accounts.
			o.send("SUB price.* 3\r\nPING\r\n")
			o.expect("PONG\r\n")
			s.send("SUB _INBOX.q 4\r\nPUB ask.price.tea _INBOX.q 1\r\n?\r\nPING\r\n")
			s.expect("PONG\r\n")
			req := o.line()
			if !strings.HasPrefix(req, "MSG price.tea 3 _R_.") {
				t.Fatalf("service got %q", req)
			}
			o.expect("?\r\n")
			reply := strings.Fields(req)[3]
			o.send("PUB " + reply + " 2\r\n$3\r\nPING\r\n")
			o.expect("PONG\r\n")
			s.expect("MSG _INBOX.q 4 2\r\n")
			s.expect("$3\r\n")

			// Account mapping.
			s.send("SUB new.* 5\r\nPUB old.a 1\r\nm\r\nPING\r\n")
			s.expect("MSG new.a 5 1\r\n")
			s.expect("m\r\n")
			s.expect("PONG\r\n")

			// Limits: one connection, one subscription, ten bytes of payload.
			t1 := connectAs(t, cs, "t")
			t2 := cs.dial()
			t2.send(`CONNECT {"verbose":false,"user":"t2","pass":"t2"}` + "\r\nPING\r\n")
			t2.expect("-ERR 'maximum account active connections exceeded'\r\n")
			t2.expectClosed()
			t1.send("SUB a 1\r\nSUB b 2\r\nPING\r\n")
			t1.expect("-ERR 'maximum subscriptions exceeded'\r\n")
			t1.expect("PONG\r\n")
			t1.send("PUB a 11\r\n01234567890\r\n")
			t1.expect("-ERR 'Maximum Payload Violation'\r\n")
			t1.expectClosed()
		})
	}
}

// A weighted mapping spreads messages by its weights (within a tolerance: both servers draw at
// random), and a streamed service's responses flow until its response threshold has passed.
func TestAccountsWeightsAndThresholds(t *testing.T) {
	conf := `
listen: "127.0.0.1:-1"
mappings { "w": [{destination: "w.a", weight: 30%}, {destination: "w.b", weight: 70%}] }
accounts {
  SVC { users: [{user: v, password: v}], exports: [{service: "feed", response_type: stream, response_threshold: "300ms"}] }
  APP { users: [{user: p, password: p}], imports: [{service: {account: SVC, subject: "feed"}}] }
}
no_auth_user: g
authorization { users: [{user: g, password: g}] }
`
	for _, name := range []string{"nats-server", "natsd"} {
		t.Run(name, func(t *testing.T) {
			cs := startCompat(t, name, conf)
			g := cs.dial()
			g.send("CONNECT {\"verbose\":false}\r\nSUB w.a 1\r\nSUB w.b 2\r\n")
			const n = 2000
			var pubs strings.Builder
			for i := 0; i < n; i++ {
				pubs.WriteString("PUB w 0\r\n\r\n")
			}
			g.send(pubs.String() + "PING\r\n")
			counts := map[string]int{}
			for {
				l := g.line()
				if l == "PONG\r\n" {
					break
				}
				if strings.HasPrefix(l, "MSG ") {
					counts[strings.Fields(l)[1]]++
					g.line() // the empty payload
				}
			}
			if counts["w.a"]+counts["w.b"] != n || counts["w.a"] < n*25/100 || counts["w.a"] > n*35/100 {
				t.Fatalf("30/70 mapping gave %v", counts)
			}

			v, p := connectAs(t, cs, "v"), connectAs(t, cs, "p")
			v.send("SUB feed 1\r\nPING\r\n")
			v.expect("PONG\r\n")
			p.send("SUB _INBOX.f 7\r\nPUB feed _INBOX.f 0\r\n\r\nPING\r\n")
			p.expect("PONG\r\n")
			req := v.line()
			v.line()
			reply := strings.Fields(req)[3]
			// Two responses within the threshold both arrive (a stream), one after it does not.
			v.send("PUB " + reply + " 1\r\n1\r\nPUB " + reply + " 1\r\n2\r\nPING\r\n")
			v.expect("PONG\r\n")
			for _, want := range []string{"1", "2"} {
				p.expect("MSG _INBOX.f 7 1\r\n")
				p.expect(want + "\r\n")
			}
			time.Sleep(time.Second)
			v.send("PUB " + reply + " 1\r\n3\r\nPING\r\n")
			v.expect("PONG\r\n")
			p.send("PING\r\n")
			p.expect("PONG\r\n")
		})
	}
}

// allowed_connection_types: a user limited to other kinds of connection is refused as a plain
// client.
func TestAllowedConnectionTypes(t *testing.T) {
	conf := `
listen: "127.0.0.1:-1"
authorization { users: [
  {user: w, password: w, allowed_connection_types: ["WEBSOCKET", "MQTT"]}
  {user: s, password: s, allowed_connection_types: ["STANDARD"]}
  {user: any, password: any, allowed_connection_types: []}
] }
`
	for _, name := range []string{"nats-server", "natsd"} {
		t.Run(name, func(t *testing.T) {
			cs := startCompat(t, name, conf)
			connectAs(t, cs, "s")
			connectAs(t, cs, "any")
			r := cs.dial()
			r.send(`CONNECT {"verbose":false,"user":"w","pass":"w"}` + "\r\nPING\r\n")
			r.expect("-ERR 'Authorization Violation'\r\n")
			r.expectClosed()
		})
	}
}
