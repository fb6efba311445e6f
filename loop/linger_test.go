package loop

import (
	"runtime"
	"testing"
	"time"
)

// TestLingerPolicy: a reactor lingers while its lingers find the next event; a run of
// polls that find nothing drops it to one linger in lingerProbe, and hits bring it back.
func TestLingerPolicy(t *testing.T) {
	p := lingerPolicy{budget: time.Millisecond, score: lingerMax}
	count := func(n int) (tries int) {
		for i := 0; i < n; i++ {
			if p.try() {
				tries++
			}
		}
		return tries
	}
	if got := count(10); got != 10 {
		t.Fatalf("full score: %d of 10 answers lingered", got)
	}
	for i := 0; i < 2; i++ {
		p.record(false)
		p.record(true) // one miss in two is not enough to stop
	}
	if p.score < lingerLow || count(5) != 5 {
		t.Fatalf("after mixed results score %d, no longer lingering", p.score)
	}
	for i := 0; i < 8; i++ {
		p.record(false)
	}
	if got := count(4 * lingerProbe); got != 4 {
		t.Fatalf("after misses: %d of %d answers lingered, want 4 probes", got, 4*lingerProbe)
	}
	for p.score < lingerLow {
		p.record(true)
	}
	if got := count(10); got != 10 {
		t.Fatalf("after hits again: %d of 10", got)
	}
	off := lingerPolicy{budget: -1, score: lingerMax}
	if off.try() {
		t.Fatal("a negative budget lingered")
	}
}

// TestLingerEndsOnReadiness runs an engine whose reactor lingers for up to 30 s after each
// answer: the requester's next request, another client's message, a message routed from
// another goroutine and the engine's shutdown must each end the linger, or the test's 5 s
// reads (and the 10 s stop) fail.
func TestLingerEndsOnReadiness(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the reactor lingers on Linux only")
	}
	e := lingerEngine(t)
	a := e.account("A", true)
	ic := answerGets(t, e, a, nil)
	c1, c2 := dialInto(t, e, a), dialInto(t, e, a)
	c1.send("SUB r.> 1\r\nSUB x 2\r\n")
	c1.flush()
	expect := func(c *rawClient, want ...string) {
		t.Helper()
		for _, w := range want {
			if l := c.line(); l != w {
				t.Fatalf("got %q, want %q", l, w)
			}
		}
	}
	for i := 0; i < 20; i++ {
		c1.send("PUB get.k r.1 0\r\n\r\n")
		expect(c1, "MSG r.1 1 1\r\n", "v\r\n")
	}
	// The reactor lingers after the last answer; another client's publish ends it.
	c2.send("PUB x 2\r\nhi\r\n")
	expect(c1, "MSG x 2 2\r\n", "hi\r\n")
	// And a message routed by another goroutine (a cross-reactor wake).
	c1.send("PUB get.k r.2 0\r\n\r\n")
	expect(c1, "MSG r.2 1 1\r\n", "v\r\n")
	if err := ic.Publish("r.3", "", nil, []byte("w")); err != nil {
		t.Fatal(err)
	}
	expect(c1, "MSG r.3 1 1\r\n", "w\r\n")
	var begun uint64
	r := e.reactorsSnapshot()[0]
	onReactor(t, r, func() { begun = r.linger.begun })
	if begun < 20 {
		t.Fatalf("%d lingers begun after 21 answers", begun)
	}
	c1.send("PUB get.k r.4 0\r\n\r\n")
	expect(c1, "MSG r.4 1 1\r\n", "v\r\n")
	done := make(chan struct{})
	go func() { e.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("engine did not stop while its reactor lingered")
	}
}

// lingerEngine starts an engine with one reactor that lingers for up to 30 s after each
// answer: a linger that missed what should end it shows as a test step timing out.
func lingerEngine(t *testing.T) *Engine {
	t.Helper()
	e := New(Config{
		Host: "127.0.0.1", Port: -1, Reactors: 1, ReplySpin: 30 * time.Second,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20,
		PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop) // Stop is idempotent: a test may stop it first
	return e
}

// answerGets answers get.> inline on the publisher's reactor with "v"; hold, when set, is
// shown each request first and takes the ones it returns true for.
func answerGets(t *testing.T, e *Engine, a *Account, hold func(m *Msg) bool) *InternalClient {
	t.Helper()
	ic := e.NewInternalClient(KindSystem, a, "sys")
	if _, err := ic.WorkerOrInline("get.>", "", func(m *Msg) bool {
		if hold != nil && hold(m) {
			return true
		}
		return ic.Respond(m, nil, []byte("v"))
	}, func(*WorkMsg) {}); err != nil {
		t.Fatal(err)
	}
	return ic
}

// TestLingerSeesPendingTasks: a task queued while the reactor was busy reaches gnet's loop
// as an eventfd event in the same poll as the next request; gnet runs tasks after the
// batch's sockets and does not signal again while that wake is pending, so the linger after
// answering the request must see the pending wake itself, or the task waits out the budget.
func TestLingerSeesPendingTasks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the reactor lingers on Linux only")
	}
	e := lingerEngine(t)
	a := e.account("A", true)
	busy := make(chan struct{})
	answerGets(t, e, a, func(m *Msg) bool {
		if string(m.Subject) != "get.slow" {
			return false
		}
		close(busy)
		time.Sleep(200 * time.Millisecond) // the reactor is held while the test queues
		return true
	})
	c1, c2 := dialInto(t, e, a), dialInto(t, e, a)
	c1.send("SUB r.> 1\r\n")
	c1.flush()
	r := e.reactorsSnapshot()[0]
	c2.send("PUB get.slow 0\r\n\r\n")
	<-busy
	ran := make(chan struct{})
	if err := r.ex.Execute(func() { close(ran) }); err != nil { // eventfd ready first ...
		t.Fatal(err)
	}
	c1.send("PUB get.k r.1 0\r\n\r\n") // ... then the request, both before the next poll
	if l := c1.line(); l != "MSG r.1 1 1\r\n" {
		t.Fatalf("reply: %q", l)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a task queued with the request waited for the reactor's linger")
	}
}
