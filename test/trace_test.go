package test

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/natsd/natsd/server"
)

// TestTraceHidesCredentials: with -V the CONNECT line is traced with its
// secrets replaced by [REDACTED], as nats-server does, and the rest kept.
func TestTraceHidesCredentials(t *testing.T) {
	const connect = `CONNECT {"verbose":false,"pedantic":false,"user":"derek","pass":"hunter2","name":"tracer","lang":"go","protocol":1}`
	for _, name := range []string{"nats-server", "natsd"} {
		if !targetSelected(name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "trace.log")
			addr := startTracing(t, name, logFile,
				func(o *natsserver.Options) { o.Username, o.Password = "derek", "hunter2" },
				func(o *server.Options) { o.Username, o.Password = "derek", "hunter2" })
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			if _, err := r.ReadString('\n'); err != nil { // INFO
				t.Fatal(err)
			}
			if _, err := c.Write([]byte(connect + "\r\nPING\r\n")); err != nil {
				t.Fatal(err)
			}
			if l, err := r.ReadString('\n'); err != nil || l != "PONG\r\n" {
				t.Fatalf("after CONNECT: %q %v", l, err)
			}
			var traced string
			waitFor(t, 5*time.Second, "CONNECT in the trace", func() bool {
				b, _ := os.ReadFile(logFile)
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, "<<- [CONNECT") {
						traced = l
						return true
					}
				}
				return false
			})
			if strings.Contains(traced, "hunter2") {
				t.Fatalf("password in the trace: %s", traced)
			}
			want := strings.Replace(connect, "hunter2", "[REDACTED]", 1)
			if !strings.Contains(traced, "<<- ["+want+"]") {
				t.Fatalf("trace line %q does not carry %q", traced, want)
			}
		})
	}
}

// targetSelected reports whether NATSD_TARGETS (if set) names target.
func targetSelected(name string) bool {
	for _, tg := range selectedTargets() {
		if tg.name == name {
			return true
		}
	}
	return false
}

// TestTraceMaxTracedMsgLen: with max_traced_msg_len a traced payload is cut there and ends in
// "...", as in nats-server; a shorter one is traced whole.
func TestTraceMaxTracedMsgLen(t *testing.T) {
	for _, name := range []string{"nats-server", "natsd"} {
		if !targetSelected(name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "trace.log")
			c, err := net.Dial("tcp", startTracing(t, name, logFile,
				func(o *natsserver.Options) { o.MaxTracedMsgLen = 10 },
				func(o *server.Options) { o.MaxTracedMsgLen = 10 }))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			if _, err := r.ReadString('\n'); err != nil { // INFO
				t.Fatal(err)
			}
			_, _ = c.Write([]byte("CONNECT {\"verbose\":false}\r\nPUB a 26\r\nabc\"efghijklmnopqrstuvwxyz\r\nPUB b 4\r\nshrt\r\nPING\r\n"))
			if l, err := r.ReadString('\n'); err != nil || l != "PONG\r\n" {
				t.Fatalf("%q %v", l, err)
			}
			want := []string{`MSG_PAYLOAD: ["abc\"efghij..."]`, `MSG_PAYLOAD: ["shrt"]`}
			waitFor(t, 5*time.Second, "both payloads traced", func() bool {
				b, _ := os.ReadFile(logFile)
				for _, w := range want {
					if !strings.Contains(string(b), w) {
						return false
					}
				}
				return true
			})
		})
	}
}

// startTracing starts the named server (nats-server or natsd) with -V into logFile, the rest of
// its options set by ns or nd, and returns its client host:port.
func startTracing(t *testing.T, name, logFile string, ns func(*natsserver.Options), nd func(*server.Options)) string {
	t.Helper()
	if name == "nats-server" {
		o := &natsserver.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, Trace: true, LogFile: logFile}
		ns(o)
		s, err := natsserver.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		s.ConfigureLogger()
		s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(5 * time.Second) {
			t.Fatal("nats-server not ready")
		}
		return s.Addr().String()
	}
	o := &server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, Trace: true, LogFile: logFile, Engine: os.Getenv("NATSD_ENGINE")}
	nd(o)
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return hostPort(t, s.ClientURL())
}
