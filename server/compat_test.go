package server

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// compatServer is natsd or nats-server v2.15.2 (in-process), started from the same config
// file: reload, authentication, TLS and config-meaning tests run each scenario on both and
// expect the same result.
type compatServer struct {
	t      *testing.T
	name   string
	path   string // the config file
	log    string // the log file the config names
	addr   string // client host:port
	reload func() error
}

// compatTargets honours NATSD_TARGETS (comma-separated: natsd, nats-server), as test/ does.
func compatTargets() []string {
	all := []string{"nats-server", "natsd"}
	env := strings.TrimSpace(os.Getenv("NATSD_TARGETS"))
	if env == "" {
		return all
	}
	var out []string
	for _, n := range strings.Split(env, ",") {
		for _, a := range all {
			if a == strings.TrimSpace(n) {
				out = append(out, a)
			}
		}
	}
	return out
}

// forBoth starts each target from body (plus host, port and log file) and runs f on it.
func forBoth(t *testing.T, body string, f func(t *testing.T, s *compatServer)) {
	t.Helper()
	for _, name := range compatTargets() {
		t.Run(name, func(t *testing.T) { f(t, startCompat(t, name, body)) })
	}
}

func startCompat(t *testing.T, name, body string) *compatServer {
	t.Helper()
	dir := t.TempDir()
	cs := &compatServer{t: t, name: name, path: filepath.Join(dir, "nats.conf"), log: filepath.Join(dir, "server.log")}
	cs.write(body)
	switch name {
	case "nats-server":
		o, err := natsserver.ProcessConfigFile(cs.path)
		if err != nil {
			t.Fatal(err)
		}
		o.NoSigs = true
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
		cs.addr, cs.reload = s.Addr().String(), s.Reload
	case "natsd":
		o := &Options{Logtime: true}
		if _, err := o.ProcessConfigFile(cs.path); err != nil {
			t.Fatal(err)
		}
		engine := os.Getenv("NATSD_ENGINE")
		flags := func(o *Options) error {
			o.NoSigs = true
			if engine != "" {
				o.Engine = engine
			}
			return nil
		}
		_ = flags(o)
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		s.SetFlagOverrides(flags)
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Shutdown)
		cs.addr, cs.reload = s.Addr().String(), s.Reload
	default:
		t.Fatalf("unknown target %q", name)
	}
	return cs
}

func (cs *compatServer) write(body string) {
	cs.t.Helper()
	head := "host: 127.0.0.1\nport: -1\nlog_file: " + strconv.Quote(cs.log) + "\n"
	if err := os.WriteFile(cs.path, []byte(head+body), 0o600); err != nil {
		cs.t.Fatal(err)
	}
}

// reloadWith rewrites the config file and reloads it.
func (cs *compatServer) reloadWith(body string) {
	cs.t.Helper()
	cs.write(body)
	if err := cs.reload(); err != nil {
		cs.t.Fatalf("reload: %v", err)
	}
}

func (cs *compatServer) dial() *raw {
	cs.t.Helper()
	return dialRawAddr(cs.t, cs.addr)
}

// waitLog waits until the log holds a line containing each of want.
func (cs *compatServer) waitLog(want ...string) {
	cs.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(cs.log)
		missing := ""
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			cs.t.Fatalf("log lacks %q:\n%s", missing, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dialRawAddr connects to addr and reads INFO.
func dialRawAddr(t *testing.T, addr string) *raw {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &raw{t: t, c: c, br: bufio.NewReader(c)}
	line := r.line()
	if !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("want INFO, got %q", line)
	}
	if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(line, "INFO "), " \r\n")), &r.info); err != nil {
		t.Fatal(err)
	}
	return r
}

// expectSet reads len(want) lines and checks they are want in any order (the servers walk a
// client's subscriptions in map order).
func (r *raw) expectSet(want ...string) {
	r.t.Helper()
	left := map[string]int{}
	for _, w := range want {
		left[w]++
	}
	for range want {
		l := r.line()
		if left[l] == 0 {
			r.t.Fatalf("got %q, want one of %q", l, want)
		}
		left[l]--
	}
}
