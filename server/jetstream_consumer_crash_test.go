package server

import (
	"fmt"
	"math/rand"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/natsd/natsd/filestore/powerfs"
)

// TestJetStreamConsumerAckPowerCut is the power-cut variant of TestJetStreamConsumerAckSIGKILL
// (the workload and the checks are described in jetstream_consumer_kill_test.go): natsd runs
// in-process over filestore/powerfs (see jetstream_crash_test.go), and each round cuts the
// power, in the middle of a random sync or at a random moment, with or without torn writes,
// once the server has confirmed a random number of double acks. What the clients received
// before the cut is recorded under the same lock the cut is taken under; what the old server
// still sends after it is ignored (that server no longer exists). A new server then starts
// on what the cut left.
func TestJetStreamConsumerAckPowerCut(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	storeDir := t.TempDir()
	fs := powerfs.New()
	r := newCKRun()
	check := func(when string) {
		if b := r.bad(); b != "" {
			t.Fatalf("%s: %s\n%s", when, r.summary(), b)
		}
	}
	const rounds = 4
	for round := 0; ; round++ {
		t0 := time.Now()
		s := startPowerServer(t, fs, storeDir, 0)
		t.Cleanup(s.Shutdown)
		r.next(round)
		if round == 0 {
			ckSetup(t, s.ClientURL())
		}
		if round == rounds {
			r.drain(t, s.ClientURL(), true, ckAckWait+40*time.Second)
			t.Logf("server %d: drained in %v", round, time.Since(t0).Round(time.Millisecond))
			check("at the end")
			s.Shutdown()
			break
		}
		g := r.start(t, s.ClientURL(), true)
		r.waitConfirmed(t, 20+rng.Intn(120), func() error { return nil })
		var cutRng *rand.Rand // nil: nothing unsynced survives
		torn := rng.Intn(2) == 0
		if torn {
			cutRng = rand.New(rand.NewSource(rng.Int63()))
		}
		var cut *powerfs.FS
		how := "at a random moment"
		if rng.Intn(2) == 0 {
			k := 1 + rng.Intn(20)
			how = "in the middle of a sync"
			var n atomic.Int32
			done := make(chan struct{})
			fs.SetOnSync(func() {
				if n.Add(1) == int32(k) {
					r.kill(func() { cut = fs.Cut(cutRng) })
					close(done)
				}
			})
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("server %d: no %d syncs in 60s", round, k)
			}
			fs.SetOnSync(nil)
		} else {
			time.Sleep(time.Duration(rng.Intn(20000)) * time.Microsecond)
			r.kill(func() { cut = fs.Cut(cutRng) })
		}
		conf, dlv := r.counts()
		// The old server goes on in the old file system; nothing it does reaches the cut.
		g.finish(t)
		s.Shutdown()
		fs = cut
		t.Logf("server %d: power cut %s (torn writes: %v) after %d double acks confirmed, %d deliveries (%v)",
			round, how, torn, conf, dlv, time.Since(t0).Round(time.Millisecond))
		check(fmt.Sprintf("after server %d", round))
	}
	t.Logf("%s", r.summary())
	if n := len(r.pubAcked); n < 50 {
		t.Fatalf("only %d messages acknowledged over the run: the workload did not run", n)
	}
	if ents, err := os.ReadDir(storeDir); err != nil || len(ents) != 0 {
		t.Fatalf("the real store directory was written to (%v, %v): JetStream bypassed its FS", ents, err)
	}
}
