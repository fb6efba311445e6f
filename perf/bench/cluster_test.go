package bench

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestClusterScenario runs the cluster scenario against two nats-server processes joined by
// a route (NATS_SERVER, or .cache/tools/nats-server; skipped when neither is there): the
// probe must hold the run back until the subscriber's interest has crossed the route, and
// then every published message must reach the subscriber on the other server with no probe
// counted as a delivery. The route goes through a gate that opens only once a probe has been
// missed, so the probe's retry is exercised every time (a count check, not a timing one).
func TestClusterScenario(t *testing.T) {
	bin := os.Getenv("NATS_SERVER")
	if bin == "" {
		bin = filepath.Join("..", "..", ".cache", "tools", "nats-server")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no nats-server binary (%v): set NATS_SERVER or run `make nats-server`", err)
	}
	dir := t.TempDir()
	seed := MustFreePort()
	gate, open := routeGate(t, seed)
	ports, pids := make([]int, 2), make([]int, 2)
	for i := range 2 {
		port, cport, routes := MustFreePort(), seed, ""
		if i > 0 {
			cport = MustFreePort()
			routes = fmt.Sprintf("routes: [\"nats-route://127.0.0.1:%d\"]", gate)
		}
		conf := filepath.Join(dir, fmt.Sprintf("s%d.conf", i))
		text := fmt.Sprintf("server_name: s%d\nlisten: 127.0.0.1:%d\ncluster { name: t, listen: 127.0.0.1:%d\n%s\n}\n", i, port, cport, routes)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", conf)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { StopProcess(cmd, 10*time.Second) })
		waitListen(t, port)
		ports[i], pids[i] = port, cmd.Process.Pid
	}
	missed := 0
	probeMissed = func() { missed++; open() }
	defer func() { probeMissed = nil }()
	for _, size := range []int{16, 1024} {
		res, err := Run(Config{
			Scenario:  Cluster,
			Server:    fmt.Sprintf("nats://127.0.0.1:%d", ports[0]),
			SubServer: fmt.Sprintf("nats://127.0.0.1:%d", ports[1]),
			Msgs:      20000,
			Size:      size,
			PID:       pids[0],
			PIDs:      pids[1:],
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) > 0 {
			t.Fatalf("errors: %v", res.Errors)
		}
		if res.Published != 20000 || res.Delivered != 20000 {
			t.Fatalf("size %d: published %d, delivered %d; want 20000 each", size, res.Published, res.Delivered)
		}
		if len(res.CPUPerMsgEach) != 2 {
			t.Fatalf("CPU per message of each server: %v, want 2 figures", res.CPUPerMsgEach)
		}
	}
	if missed == 0 {
		t.Fatal("no probe was missed although the route was closed when the first was sent")
	}
	if _, err := Run(Config{Scenario: Cluster, Server: fmt.Sprintf("nats://127.0.0.1:%d", ports[0]), Msgs: 10}); err == nil {
		t.Fatal("cluster scenario without SubServer: no error")
	}
}

// routeGate listens on a free port and, once open has been called, forwards every connection
// made to it to 127.0.0.1:to; until then connections wait unanswered in the backlog.
func routeGate(t *testing.T, to int) (port int, open func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var once sync.Once
	opened := make(chan struct{})
	go func() {
		<-opened
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", to))
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, func() { once.Do(func() { close(opened) }) }
}

func waitListen(t *testing.T, port int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if rc, err := dialRaw(fmt.Sprintf("127.0.0.1:%d", port), 4096); err == nil {
			rc.Close()
			return
		}
	}
	t.Fatalf("nothing listening on %d", port)
}
