package loop

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// clusterEngine starts an engine of the given kind with a cluster listener.
func clusterEngine(t *testing.T, engine, id string) *Engine {
	t.Helper()
	e := New(Config{
		Host: "127.0.0.1", Port: -1, Reactors: 2, Engine: engine,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20,
		PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"` + id + `","version":"2.15.2","proto":1,"max_payload":1048576}`),
		Cluster: &RouteConfig{
			Host: "127.0.0.1", Port: -1, ClusterName: "C", ServerID: id, ServerName: id,
			Version: "2.15.2", Proto: 1, PingInterval: 2 * time.Minute, MaxPingsOut: 2,
			AuthTimeout: 2 * time.Second,
		},
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	if e.RouteAddr() == nil {
		t.Fatal("no route listener")
	}
	return e
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRouteEngines runs a route between two engines of each kind, one dialling and one
// accepting: messages cross it, and Stop closes the route listener and the connections.
func TestRouteEngines(t *testing.T) {
	for _, engine := range []string{"gnet", "netpoll"} {
		t.Run(engine, func(t *testing.T) {
			a := clusterEngine(t, engine, "SA"+strings.ToUpper(engine))
			b := clusterEngine(t, engine, "SB"+strings.ToUpper(engine))
			u := &url.URL{Scheme: "nats-route", Host: b.RouteAddr().String()}
			if err := a.DialRoute(u, true, gossipDefault, ""); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the route", func() bool { return a.NumRemotes() == 1 && b.NumRemotes() == 1 })

			// Both ways: a's route was dialled, b's accepted.
			for i, pair := range [][2]*Engine{{a, b}, {b, a}} {
				sub, pub := dialInto(t, pair[0], pair[0].Global()), dialInto(t, pair[1], pair[1].Global())
				subj := fmt.Sprintf("foo.%d", i)
				sub.send("SUB " + subj + " 1\r\n")
				sub.flush()
				waitFor(t, "remote interest", func() bool {
					pub.send("PUB " + subj + " 2\r\nhi\r\n")
					pub.flush()
					for _, l := range sub.flush() {
						if strings.HasPrefix(l, "MSG "+subj+" 1 2") {
							return true
						}
					}
					return false
				})
			}

			addr := a.RouteAddr().String()
			a.Stop()
			waitFor(t, "b to see the route go", func() bool { return b.NumRemotes() == 0 })
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Fatal("route listener still accepts after Stop")
			}
		})
	}
}

// TestNetpollStopAtOnce stops netpoll engines right after Start: netpoll ignores a Shutdown
// that comes before its Serve has registered the listener, which must not hang Stop or leave
// the listeners open.
func TestNetpollStopAtOnce(t *testing.T) {
	for i := 0; i < 20; i++ {
		e := New(Config{
			Host: "127.0.0.1", Port: -1, Reactors: 1, Engine: "netpoll",
			MaxPayload: 1 << 20, MaxControlLine: 4096, Info: []byte(`{"server_id":"X"}`),
			Cluster: &RouteConfig{Host: "127.0.0.1", Port: -1, ClusterName: "C", ServerID: "X"},
		})
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
		addrs := []string{e.Addr().String(), e.RouteAddr().String()}
		stopped := make(chan struct{})
		go func() {
			e.Stop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: Stop hangs", i)
		}
		for _, addr := range addrs {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Fatalf("run %d: %s still accepts after Stop", i, addr)
			}
		}
	}
}
