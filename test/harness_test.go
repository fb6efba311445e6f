// Package test drives natsd and the reference nats-server from the outside, with nats.go and
// raw TCP, and asserts that both behave the same.
package test

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/natsd/natsd/server"
)

// Config holds the limits a test needs. Zero means the server's default.
type Config struct {
	Port           int // 0 = random port; set to restart a target on the same port
	MaxPayload     int32
	MaxControlLine int32
	MaxPending     int64
	MaxConn        int
	MaxSubs        int
	PingInterval   time.Duration
	MaxPingsOut    int
	WriteDeadline  time.Duration
	JetStream      bool
	StoreDir       string // "" with JetStream = a fresh t.TempDir(); set to restart on the same store
	JSDomain       string // JetStream domain ($JS.<domain>.API.>)
}

// target is one server implementation under test.
type target struct {
	name  string
	start func(t *testing.T, cfg Config) (url string, stop func())
}

var allTargets = []target{
	{name: "nats-server", start: startNatsServer},
	{name: "natsd", start: startNatsd},
}

// selectedTargets honours NATSD_TARGETS (comma-separated target names).
func selectedTargets() []target {
	env := strings.TrimSpace(os.Getenv("NATSD_TARGETS"))
	if env == "" {
		return allTargets
	}
	var out []target
	for _, name := range strings.Split(env, ",") {
		for _, tg := range allTargets {
			if tg.name == strings.TrimSpace(name) {
				out = append(out, tg)
			}
		}
	}
	return out
}

// forEachTarget runs f once per selected target as a subtest named after the target.
func forEachTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	for _, tg := range selectedTargets() {
		t.Run(tg.name, func(t *testing.T) { f(t, tg) })
	}
}

// run starts tg with cfg and stops it when the test ends; it returns the client URL.
func (tg target) run(t *testing.T, cfg Config) string {
	t.Helper()
	u, stop := tg.start(t, cfg)
	t.Cleanup(stop)
	return u
}

func portOf(t *testing.T, u string) int {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("parse url %q: %v", u, err)
	}
	p, err := strconv.Atoi(pu.Port())
	if err != nil {
		t.Fatalf("port of %q: %v", u, err)
	}
	return p
}

func hostPort(t testing.TB, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("parse url %q: %v", u, err)
	}
	return pu.Host
}

// retryStart retries start-up a few times: a fixed port may still be held briefly after a stop.
func retryStart(t testing.TB, cfg Config, f func() error) {
	t.Helper()
	var err error
	for i := 0; i < 50; i++ {
		if err = f(); err == nil || cfg.Port <= 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
}

// withStoreDir gives a JetStream cfg a fresh store directory when it names none.
func withStoreDir(t testing.TB, cfg Config) Config {
	if cfg.JetStream && cfg.StoreDir == "" {
		cfg.StoreDir = t.TempDir()
	}
	return cfg
}

func startNatsServer(t *testing.T, cfg Config) (string, func()) {
	t.Helper()
	s := newNatsServer(t, withStoreDir(t, cfg))
	return s.ClientURL(), func() {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// newNatsServer starts nats-server with cfg; the caller shuts it down.
func newNatsServer(t testing.TB, cfg Config) *natsserver.Server {
	t.Helper()
	port := cfg.Port
	if port == 0 {
		port = -1
	}
	opts := &natsserver.Options{
		Host:            "127.0.0.1",
		Port:            port,
		NoSigs:          true,
		NoLog:           true,
		MaxPayload:      cfg.MaxPayload,
		MaxControlLine:  cfg.MaxControlLine,
		MaxPending:      cfg.MaxPending,
		MaxConn:         cfg.MaxConn,
		MaxSubs:         cfg.MaxSubs,
		PingInterval:    cfg.PingInterval,
		MaxPingsOut:     cfg.MaxPingsOut,
		WriteDeadline:   cfg.WriteDeadline,
		JetStream:       cfg.JetStream,
		StoreDir:        cfg.StoreDir,
		JetStreamDomain: cfg.JSDomain,
	}
	var s *natsserver.Server
	retryStart(t, cfg, func() error {
		var err error
		s, err = natsserver.NewServer(opts)
		if err != nil {
			return err
		}
		s.Start()
		if !s.ReadyForConnections(5 * time.Second) {
			s.Shutdown()
			return fmt.Errorf("nats-server not ready on port %d", port)
		}
		return nil
	})
	return s
}

func startNatsd(t *testing.T, cfg Config) (string, func()) {
	t.Helper()
	s := newNatsd(t, withStoreDir(t, cfg))
	return s.ClientURL(), s.Shutdown
}

// newNatsd starts natsd with cfg (on NATSD_ENGINE's engine); the caller shuts it down.
func newNatsd(t testing.TB, cfg Config) *server.Server {
	t.Helper()
	port := cfg.Port
	if port == 0 {
		port = -1
	}
	opts := &server.Options{
		Host:            "127.0.0.1",
		Port:            port,
		NoSigs:          true,
		NoLog:           true,
		MaxPayload:      cfg.MaxPayload,
		MaxControlLine:  cfg.MaxControlLine,
		MaxPending:      cfg.MaxPending,
		MaxSubs:         cfg.MaxSubs,
		PingInterval:    cfg.PingInterval,
		MaxPingsOut:     cfg.MaxPingsOut,
		WriteDeadline:   cfg.WriteDeadline,
		Engine:          os.Getenv("NATSD_ENGINE"), // "" = gnet
		JetStream:       cfg.JetStream,
		StoreDir:        cfg.StoreDir,
		JetStreamDomain: cfg.JSDomain,
	}
	if cfg.MaxConn > 0 {
		opts.MaxConn = cfg.MaxConn
		opts.MaxConnSet = true
	}
	var s *server.Server
	retryStart(t, cfg, func() error {
		var err error
		s, err = server.New(opts)
		if err != nil {
			return err
		}
		return s.Start()
	})
	return s
}

// fixedPort is for tests that restart a target: it returns cfg with the port fixed
// to the one the first start picked.
func fixedPort(t *testing.T, cfg Config, u string) Config {
	cfg.Port = portOf(t, u)
	return cfg
}

// waitFor polls cond until it is true or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
