package attack

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestAttacks runs every attack against nats-server and natsd (each engine, and over TLS) and
// checks the memory bounds: peak RSS within PeakRatio of nats-server's for the same attack,
// and RSS back down once the attacker left. The round trips of an unrelated client are
// measured and logged but not asserted here (no timing thresholds in the suite: CI boxes are
// shared); `make soak` runs the same attacks longer and checks them too.
func TestAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and attacks them for a minute or two")
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
					After: 3 * time.Second, TLS: c.tls, Dir: dir})
				all = append(all, r)
			}
		}
	}
	t.Log(Table(all))
	for _, f := range Check(all) {
		if f.Kind == Latency {
			t.Log("(not asserted here) " + f.Text)
			continue
		}
		t.Error(f.Text)
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
