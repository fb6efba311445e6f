package attack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets this test binary serve as the probe process too.
func TestMain(m *testing.M) {
	ProbeMain()
	os.Exit(m.Run())
}

// TestAttacks runs every attack against nats-server and natsd (each engine, and over TLS) and
// checks the memory bounds: peak RSS within PeakRatio of nats-server's for the same attack,
// and RSS back down once the attacker left. Both servers run with max_pending at 8 MB, so
// that each reaches its worst case (the cut) within the short attack even on a busy box. The
// round trips of an unrelated client are measured and logged but not asserted here (no timing
// thresholds in the suite: CI boxes are shared); `make soak` runs the attacks longer, with the
// defaults, and checks them too. It needs the machine to itself: the Makefile runs it on its
// own (NATSD_ATTACK_TEST=1) after the rest of the suite.
func TestAttacks(t *testing.T) {
	if os.Getenv("NATSD_ATTACK_TEST") == "" {
		t.Skip("set NATSD_ATTACK_TEST=1 (make test does, after the other packages)")
	}
	dir := t.TempDir()
	natsd := build(t, dir, "natsd", "github.com/natsd/natsd")
	ref := build(t, dir, "nats-server", "github.com/nats-io/nats-server/v2")
	cases := []struct {
		tls     bool
		attacks []string
		targets []Target
	}{
		{attacks: Attacks, targets: []Target{
			{Name: "nats-server", Bin: ref},
			{Name: "natsd-gnet", Bin: natsd, Args: []string{"--engine", "gnet"}},
			{Name: "natsd-netpoll", Bin: natsd, Args: []string{"--engine", "netpoll"}},
		}},
		{tls: true, attacks: []string{"slowsub", "ping", "badsub"}, targets: []Target{
			{Name: "nats-server", Bin: ref},
			{Name: "natsd", Bin: natsd},
		}},
	}
	var all []Result
	for _, c := range cases {
		for _, a := range c.attacks {
			for _, tg := range c.targets {
				r := Run(tg, Options{Attack: a, Duration: 2 * time.Second, Baseline: 500 * time.Millisecond,
					After: 3 * time.Second, TLS: c.tls, Dir: dir, Config: "max_pending: 8MB"})
				all = append(all, r)
			}
		}
	}
	t.Log(Table(all))
	for _, f := range Check(all) {
		switch {
		case f.Kind == Latency:
			t.Log("(not asserted here) " + f.Text)
		case f.Kind == Memory && strings.Contains(f.Text, "natsd-netpoll"):
			// The comparison engine reads through netpoll's own buffers, which it sizes by
			// the last read (up to 8 MB each) and recycles through pools the collector
			// empties: a flood makes it hold more garbage than nats-server. Reported, not
			// asserted (README, "Hostile clients").
			t.Log("(netpoll, not asserted) " + f.Text)
		default:
			t.Error(f.Text)
		}
	}
}

// build compiles pkg (the reference server comes from the module cache, as go.mod pins it).
func build(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}
