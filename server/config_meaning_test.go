package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestConfigValuesMeaning: limits set to 0 or below mean what nats-server makes of them, each
// value run on both servers from the same file and pinned to the bytes a client receives.
func TestConfigValuesMeaning(t *testing.T) {
	const users = "authorization { users: [{user: a, password: b}] }\n"
	const quiet = `CONNECT {"verbose":false,"pedantic":false}` + "\r\n"
	cases := []struct {
		name   string
		conf   string
		send   string // after INFO
		want   string // exact bytes after INFO (and before the close, or before PONG when open)
		noInfo bool   // closed before INFO: nothing at all arrives
		closed bool
		log    string // a log line both servers write
		// nats-server closes from a goroutine 20ms after accepting, which on a loaded box can
		// come before its INFO: then nothing at all arrives (no client is served either way).
		refRace bool
	}{
		{name: "max_connections 0", conf: "max_connections: 0\n", want: "-ERR 'maximum connections exceeded'\r\n", closed: true, log: "maximum connections exceeded"},
		{name: "max_connections -1", conf: "max_connections: -1\n", want: "-ERR 'maximum connections exceeded'\r\n", closed: true},
		{name: "max_connections -7", conf: "max_conn: -7\n", want: "-ERR 'maximum connections exceeded'\r\n", closed: true},
		{name: "max_subscriptions -1 is no limit", conf: "max_subscriptions: -1\n", send: quiet + "SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n"},
		{name: "max_subscriptions 0 is no limit", conf: "max_subscriptions: 0\n", send: quiet + "SUB a 1\r\nSUB b 2\r\n"},
		{name: "max_subscriptions -2", conf: "max_subscriptions: -2\n", want: "-ERR 'maximum subscriptions exceeded'\r\n", closed: true, log: "maximum subscriptions exceeded", refRace: true},
		{name: "max_subscriptions -5", conf: "max_subs: -5\n", want: "-ERR 'maximum subscriptions exceeded'\r\n", closed: true, refRace: true},
		{name: "write_deadline negative", conf: "write_deadline: \"-1s\"\n", noInfo: true, closed: true,
			log: "Slow Consumer Detected: WriteDeadline of -1s exceeded with 1 chunks of "},
		{name: "write_deadline negative with auth", conf: "write_deadline: \"-2s\"\n" + users, noInfo: true, closed: true},
		{name: "write_deadline 0 is the default", conf: "write_deadline: \"0s\"\n", send: quiet},
		{name: "auth timeout negative", conf: "authorization { users: [{user: a, password: b}], timeout: -1 }\n",
			want: "-ERR 'Authentication Timeout'\r\n", closed: true},
		{name: "auth timeout negative duration", conf: "authorization { user: a, password: b, timeout: \"-3s\" }\n",
			want: "-ERR 'Authentication Timeout'\r\n", closed: true},
		{name: "auth timeout negative without auth", conf: "authorization { timeout: -1 }\n", send: quiet},
		{name: "ping_max 0 is the default", conf: "ping_max: 0\n", send: quiet},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBoth(t, tc.conf, func(t *testing.T, s *compatServer) {
				c, err := net.Dial("tcp", s.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if tc.noInfo {
					b, err := io.ReadAll(c)
					if len(b) != 0 || err != nil && !isReset(err) {
						t.Fatalf("want a close with nothing sent, got %q %v", b, err)
					}
				} else {
					r := &raw{t: t, c: c, br: bufio.NewReader(c)}
					l, err := r.br.ReadString('\n')
					if err != nil && l == "" && tc.refRace && s.name == "nats-server" {
						t.Logf("nats-server closed before its INFO: %v", err)
						return
					}
					if !strings.HasPrefix(l, "INFO ") {
						t.Fatalf("want INFO, got %q %v", l, err)
					}
					r.send(tc.send)
					want := tc.want
					if !tc.closed {
						r.send("PING\r\n")
						want += "PONG\r\n"
					}
					got := make([]byte, len(want))
					if _, err := io.ReadFull(r.br, got); err != nil || string(got) != want {
						t.Fatalf("got %q (%v), want %q", got, err, want)
					}
					if tc.closed {
						r.expectClosed()
					}
				}
				if tc.log != "" {
					s.waitLog(tc.log)
				}
			})
		})
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && strings.Contains(err.Error(), "reset")
}

// TestReloadMaxConnectionsZero: a reload to max_connections 0 (stored as -1) closes every
// client with the limit's error and refuses new ones, as nats-server.
func TestReloadMaxConnectionsZero(t *testing.T) {
	forBoth(t, "", func(t *testing.T, s *compatServer) {
		a, b := s.dial(), s.dial()
		for _, r := range []*raw{a, b} {
			r.send(`CONNECT {"verbose":false}` + "\r\nPING\r\n")
			r.expect("PONG\r\n")
		}
		s.reloadWith("max_connections: 0\n")
		for _, r := range []*raw{a, b} {
			r.expect("-ERR 'maximum connections exceeded'\r\n")
			r.expectClosed()
		}
		s.waitLog("Closed 2 connections to fall within max_connections", "Reloaded: max_connections = -1")
		c := s.dial()
		c.expect("-ERR 'maximum connections exceeded'\r\n")
		c.expectClosed()
	})
}

// TestConfigRefusedWhereNatsServerFails: values nats-server takes but cannot serve with are
// refused by natsd at load time, located, with the reason; each case also shows what
// nats-server 2.15.2 does with the same file (a crash runs in a child process).
func TestConfigRefusedWhereNatsServerFails(t *testing.T) {
	cases := []struct {
		name, conf string
		natsd      string                                      // natsd's error, after "nats.conf:<line>:<col>: "
		reference  func(t *testing.T, conf string, dir string) // what nats-server does
	}{
		{"max_payload -1", "max_payload: -1\n", "max_payload value can not be negative: nats-server 2.15.2 would lift the limit",
			func(t *testing.T, conf, _ string) {
				s := startCompat(t, "nats-server", conf)
				r := s.dial()
				if r.info["max_payload"] != float64(-1) {
					t.Fatalf("INFO max_payload %v", r.info["max_payload"])
				}
				nc, err := nats.Connect("nats://" + s.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				if err := nc.Publish("a", nil); !errors.Is(err, nats.ErrMaxPayload) {
					t.Fatalf("nats.go publish: %v", err)
				}
			}},
		{"max_payload -2", "max_payload: -2\n", "max_payload value can not be negative: nats-server 2.15.2 would refuse every message",
			func(t *testing.T, conf, _ string) {
				r := startCompat(t, "nats-server", conf).dial()
				r.send(`CONNECT {"verbose":false}` + "\r\nPUB a 0\r\n\r\n")
				r.expect("-ERR 'Maximum Payload Violation'\r\n")
				r.expectClosed()
			}},
		{"max_control_line -1", "max_control_line: -1\n", "max_control_line value can not be negative: nats-server 2.15.2 would refuse every CONNECT",
			func(t *testing.T, conf, _ string) {
				r := startCompat(t, "nats-server", conf).dial()
				r.send(`CONNECT {"verbose":false}` + "\r\n")
				r.expect("-ERR 'maximum control line exceeded'\r\n")
				r.expectClosed()
			}},
		{"ping_interval negative", "ping_interval: \"-1s\"\n", "invalid ping_interval of -1s: nats-server 2.15.2 crashes at the first client CONNECT", pingCrash},
		{"ping_interval under 5ns", "ping_interval: \"4ns\"\n", "invalid ping_interval of 4ns", pingCrash},
		{"ping_interval negative seconds", "ping_interval: -1\n", "invalid ping_interval of -1s", nil},
		{"include of itself", "include ./nats.conf\n", "include cycle: ",
			func(t *testing.T, _, dir string) { expectCrash(t, "parse", dir, "stack overflow") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConf(t, "port: -1\n"+tc.conf)
			_, err := (&Options{}).ProcessConfigFile(path)
			if err == nil || !strings.Contains(err.Error(), "nats.conf:2:") || !strings.Contains(err.Error(), tc.natsd) || !located.MatchString(err.Error()) {
				t.Fatalf("natsd: err = %v, want a located %q", err, tc.natsd)
			}
			if tc.reference != nil && targetSelected("nats-server") {
				tc.reference(t, tc.conf, filepath.Dir(path))
			}
		})
	}
}

// pingCrash: nats-server sends PINGs in a loop at once (a client that does not answer goes
// stale within microseconds, so ping_max is raised to let its CONNECT through), then panics
// on the CONNECT.
func pingCrash(t *testing.T, conf, _ string) {
	path := writeConf(t, "port: -1\n"+conf+"ping_max: 1000000000\n")
	expectCrash(t, "ping", filepath.Dir(path), "panic: invalid argument to Int64N")
}

func targetSelected(name string) bool {
	for _, n := range compatTargets() {
		if n == name {
			return true
		}
	}
	return false
}

// expectCrash runs nats-server on dir/nats.conf in a child process (mode "ping": start it and
// send a CONNECT; "parse": only load the file) and expects it to die with want in its output.
func expectCrash(t *testing.T, mode, dir, want string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNatsServerCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), "NATSD_CRASH_CHILD="+mode, "NATSD_CRASH_DIR="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil || !strings.Contains(out.String(), want) {
		s := out.String()
		if len(s) > 2000 {
			s = s[:2000]
		}
		t.Fatalf("nats-server child: err=%v, want a crash with %q:\n%s", err, want, s)
	}
}

// TestNatsServerCrashChild is expectCrash's child; it does nothing in a normal run.
func TestNatsServerCrashChild(t *testing.T) {
	mode, dir := os.Getenv("NATSD_CRASH_CHILD"), os.Getenv("NATSD_CRASH_DIR")
	if mode == "" {
		t.Skip("child of expectCrash only")
	}
	path := filepath.Join(dir, "nats.conf")
	switch mode {
	case "parse":
		// The recursion never ends; a smaller stack only makes it end sooner.
		debug.SetMaxStack(32 << 20)
		_, err := natsserver.ProcessConfigFile(path)
		t.Logf("ProcessConfigFile returned: %v", err)
	case "ping":
		o, err := natsserver.ProcessConfigFile(path)
		if err != nil {
			t.Fatal(err)
		}
		o.Host, o.NoSigs, o.NoLog = "127.0.0.1", true, true
		s, err := natsserver.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		if !s.ReadyForConnections(5 * time.Second) {
			t.Fatal("not ready")
		}
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("CONNECT {}\r\n"))
		time.Sleep(2 * time.Second)
		t.Fatal("still running")
	}
}
