package loop

import (
	"testing"
	"time"
)

// TestMonitorStuckReactor: a reactor that answers a snapshot only after runOnReactors gave up
// on it must not append to the slice already returned (run with -race), and must not be lost
// for the next snapshot.
func TestMonitorStuckReactor(t *testing.T) {
	old := reactorWait
	reactorWait = 100 * time.Millisecond
	t.Cleanup(func() { reactorWait = old })

	e := startTestEngine(t, "gnet", 100)
	addr := e.Addr().String()
	const n = 8
	for i := 0; i < n; i++ {
		c, line, err := handshake(addr, i)
		if err != nil || line != "PONG" {
			t.Fatalf("conn %d: %q %v", i, line, err)
		}
		t.Cleanup(func() { c.Close() })
	}
	rs := e.reactorsSnapshot()
	if len(rs) != 2 {
		t.Fatalf("%d reactors", len(rs))
	}
	onR1 := len(gather(e, func(r *reactor) []*client {
		if r != rs[1] {
			return nil
		}
		var cs []*client
		for c := range r.clients {
			cs = append(cs, c)
		}
		return cs
	}))
	// Reactor 0 is stuck for longer than both snapshots below wait for it; it is released by
	// time alone, not by anything the caller does, so the race detector sees a late append
	// as the race it is.
	blocked := make(chan struct{})
	if err := rs[0].ex.Execute(func() { close(blocked); time.Sleep(5 * reactorWait) }); err != nil {
		t.Fatal(err)
	}
	<-blocked
	conns := e.Conns(ConnsQuery{Subs: true})
	subs := e.Subs()
	time.Sleep(5 * reactorWait) // reactor 0 runs the snapshots it was late for
	_, _ = len(conns), len(subs)
	if len(conns) != onR1 || len(subs) != onR1 {
		t.Fatalf("with reactor 0 stuck: %d conns, %d subs; want %d (reactor 1's)", len(conns), len(subs), onR1)
	}
	if got := len(e.Conns(ConnsQuery{})); got != n {
		t.Fatalf("after release: %d conns, want %d", got, n)
	}
}
