package loop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/natsd/natsd/transform"
)

// rawClient is a connected test client bound to an account.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (rc *rawClient) send(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatal(err)
	}
}

// line reads the next line other than a server PING.
func (rc *rawClient) line() string {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		l, err := rc.br.ReadString('\n')
		if err != nil {
			rc.t.Fatalf("read: %v (got %q)", err, l)
		}
		if l != "PING\r\n" {
			return l
		}
	}
}

// expect reads lines until PONG and returns what came before it.
func (rc *rawClient) flush() []string {
	rc.t.Helper()
	rc.send("PING\r\n")
	var out []string
	for {
		l := rc.line()
		if l == "PONG\r\n" {
			return out
		}
		out = append(out, l)
	}
}

// dialInto connects a client and binds it to acc (what authentication will do).
func dialInto(t *testing.T, e *Engine, acc *Account) *rawClient {
	t.Helper()
	before := map[uint64]bool{}
	for _, r := range e.reactorsSnapshot() {
		onReactor(t, r, func() {
			for c := range r.clients {
				before[c.cid] = true
			}
		})
	}
	c, err := net.DialTimeout("tcp", e.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawClient{t: t, c: c, br: bufio.NewReader(c)}
	if l := rc.line(); !strings.HasPrefix(l, "INFO ") {
		t.Fatalf("no INFO: %q", l)
	}
	rc.send("CONNECT {\"verbose\":false,\"headers\":true}\r\n")
	rc.flush()
	for _, r := range e.reactorsSnapshot() {
		onReactor(t, r, func() {
			for cl := range r.clients {
				if !before[cl.cid] {
					if err := cl.bind(acc); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	return rc
}

func routeEngine(t *testing.T) *Engine {
	t.Helper()
	e := New(Config{
		Host: "127.0.0.1", Port: -1, Reactors: 2,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 64 << 20,
		PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
		Info: []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

func TestAccountsIsolated(t *testing.T) {
	e := routeEngine(t)
	a := e.account("A", true)
	b := e.account("B", true)
	ca, cb, cg := dialInto(t, e, a), dialInto(t, e, b), dialInto(t, e, e.Global())
	for _, c := range []*rawClient{ca, cb, cg} {
		c.send("SUB foo 1\r\n")
		c.flush()
	}
	ca.send("PUB foo 2\r\nhi\r\n")
	ca.flush()
	if got := ca.flush(); len(got) != 0 {
		t.Fatalf("publisher with echo: %q", got)
	}
	if got := cb.flush(); len(got) != 0 {
		t.Fatalf("account B got A's message: %q", got)
	}
	if got := cg.flush(); len(got) != 0 {
		t.Fatalf("$G got A's message: %q", got)
	}
}

func TestStreamImport(t *testing.T) {
	e := routeEngine(t)
	if err := e.ConfigureAccounts([]AccountSpec{
		{Name: "A", Limits: noLimits},
		{Name: "B", Limits: noLimits, Streams: []StreamImport{
			{From: "A", Subject: "orders.>", Local: "from_a.orders.>", Transform: mustTransform(t, "orders.>", "from_a.orders.>")},
			{From: "A", Subject: "ticks.*", Local: "t.*", Transform: mustTransform(t, "ticks.*", "t.$1")},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	pub, sub := dialInto(t, e, e.LookupAccount("A")), dialInto(t, e, e.LookupAccount("B"))
	sub.send("SUB from_a.orders.> 1\r\nSUB t.* 2\r\nSUB orders.> 3\r\n")
	sub.flush()
	pub.send("PUB orders.1 r1 2\r\nhi\r\nPUB ticks.x 1\r\nz\r\n")
	pub.flush()
	got := sub.flush()
	want := []string{"MSG from_a.orders.1 1 r1 2\r\n", "hi\r\n", "MSG t.x 2 1\r\n", "z\r\n"}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestServiceImport(t *testing.T) {
	e := routeEngine(t)
	if err := e.ConfigureAccounts([]AccountSpec{
		{Name: "SVC", Limits: noLimits},
		{Name: "APP", Limits: noLimits, Services: []ServiceImport{{From: "SVC", Local: "ask.>", Remote: "help.>", Transform: mustTransform(t, "ask.>", "help.>")}}},
	}); err != nil {
		t.Fatal(err)
	}
	svc, app := dialInto(t, e, e.LookupAccount("SVC")), dialInto(t, e, e.LookupAccount("APP"))
	svc.send("SUB help.> 1\r\n")
	svc.flush()
	app.send("SUB _INBOX.me 9\r\nPUB ask.time _INBOX.me 1\r\n?\r\n")
	app.flush()
	got := svc.flush()
	if len(got) != 2 || !strings.HasPrefix(got[0], "MSG help.time 1 _R_.") {
		t.Fatalf("service got %q", got)
	}
	reply := strings.Fields(got[0])[3]
	svc.send("PUB " + reply + " 3\r\nnow\r\nPUB " + reply + " 5\r\nagain\r\n")
	svc.flush()
	// Singleton: one response goes back, the second finds no mapping.
	if got := app.flush(); strings.Join(got, "") != "MSG _INBOX.me 9 3\r\nnow\r\n" {
		t.Fatalf("requester got %q", got)
	}
	if n := e.LookupAccount("SVC").svcResp.Len(); n != 0 {
		t.Fatalf("%d reply mappings left after a singleton's response", n)
	}
}

func TestAccountMapping(t *testing.T) {
	e := routeEngine(t)
	mp, err := transform.NewMapping("old.*", transform.Dest{Subject: "new.$1", Weight: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ConfigureAccounts([]AccountSpec{{Name: "A", Limits: noLimits, Mappings: []*transform.Mapping{mp}}}); err != nil {
		t.Fatal(err)
	}
	c := dialInto(t, e, e.LookupAccount("A"))
	c.send("SUB new.* 1\r\nSUB old.* 2\r\nPUB old.x 1\r\na\r\n")
	if got := strings.Join(c.flush(), ""); got != "MSG new.x 1 1\r\na\r\n" {
		t.Fatalf("got %q", got)
	}
}

func TestInternalClient(t *testing.T) {
	e := routeEngine(t)
	a := e.account("A", true)
	ic := e.NewInternalClient(KindSystem, a, "sys")
	var mu sync.Mutex
	var inline, worker []string
	if _, err := ic.Inline("in.>", "", func(m *Msg) {
		mu.Lock()
		inline = append(inline, string(m.Subject)+":"+string(m.Payload())+":"+m.Origin().Account)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 100)
	if _, err := ic.Worker("work", "", func(m *WorkMsg) {
		mu.Lock()
		worker = append(worker, m.Subject+":"+string(m.Data)+":"+m.Reply)
		mu.Unlock()
		done <- struct{}{}
	}); err != nil {
		t.Fatal(err)
	}
	c := dialInto(t, e, a)
	c.send("SUB out 1\r\nPUB in.x 1\r\nq\r\nPUB work rep 2\r\nwk\r\n")
	c.flush()
	// An internal publish from another goroutine reaches the client, and the client's
	// publishes reached the handlers.
	if err := ic.Publish("out", "", nil, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if l := c.line(); l != "MSG out 1 5\r\n" {
		t.Fatalf("got %q", l)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("worker handler did not run")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(inline, ",") != "in.x:q:A" || strings.Join(worker, ",") != "work:wk:rep" {
		t.Fatalf("inline %q worker %q", inline, worker)
	}
}

// TestInternalPublishBatch checks that a burst of internal publishes costs one reactor task.
func TestInternalPublishBatch(t *testing.T) {
	e := routeEngine(t)
	ic := e.NewInternalClient(KindSystem, nil, "sys")
	var got int
	var mu sync.Mutex
	if _, err := ic.Inline("burst", "", func(*Msg) { mu.Lock(); got++; mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	// Hold the internal reactor so the whole burst queues behind one task.
	hold, held := make(chan struct{}), make(chan struct{})
	_ = e.intReactor.ex.Execute(func() { close(held); <-hold })
	<-held
	for i := 0; i < 1000; i++ {
		if err := ic.Publish("burst", "", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	e.intSerial.mu.Lock()
	queued := len(e.intSerial.q)
	e.intSerial.mu.Unlock()
	close(hold)
	if queued != 1 {
		t.Fatalf("%d tasks queued for 1000 publishes, want 1", queued)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := got
		mu.Unlock()
		if n == 1000 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 1000 delivered", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustTransform(t *testing.T, src, dst string) *transform.Transform {
	t.Helper()
	tr, err := transform.New(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestWorkerOrInline checks a request the inline try answers is replied to before the
// requester's next op is read (in its outbound queue as the handler returns, headers
// and all), one it declines reaches the worker, and the worker's reply follows.
func TestWorkerOrInline(t *testing.T) {
	e := routeEngine(t)
	a := e.account("A", true)
	ic := e.NewInternalClient(KindSystem, a, "sys")
	var tried, worked sync.WaitGroup
	tried.Add(2)
	worked.Add(1)
	if _, err := ic.WorkerOrInline("get.>", "q", func(m *Msg) bool {
		defer tried.Done()
		if string(m.Subject) != "get.fast" {
			return false
		}
		if !ic.Respond(m, []byte("NATS/1.0\r\nK: v\r\n\r\n"), []byte("inline")) {
			t.Errorf("inline reply reached no one")
		}
		return true
	}, func(m *WorkMsg) {
		defer worked.Done()
		_ = ic.Publish(m.Reply, "", nil, []byte("worker:"+m.Subject))
	}); err != nil {
		t.Fatal(err)
	}
	c := dialInto(t, e, a)
	c.send("CONNECT {\"headers\":true}\r\nSUB r.> 1\r\nPUB get.fast r.1 0\r\n\r\nPUB get.slow r.2 0\r\n\r\n")
	got := c.flush()
	// The inline reply is routed while the PUB is, so it precedes the PONG.
	want := []string{"HMSG r.1 1 18 24\r\n", "NATS/1.0\r\n", "K: v\r\n", "\r\n", "inline\r\n"}
	if len(got) < len(want) || strings.Join(got[:len(want)], "") != strings.Join(want, "") {
		t.Fatalf("before PONG: %q", got)
	}
	tried.Wait()
	worked.Wait()
	rest := got[len(want):]
	for len(rest) < 2 {
		rest = append(rest, c.line())
	}
	if rest[0] != "MSG r.2 1 15\r\n" || rest[1] != "worker:get.slow\r\n" {
		t.Fatalf("worker reply: %q", rest)
	}
}

// TestWorkerBatchEnd: the worker calls the batch-end hook after the messages of a batch,
// telling whether another batch already waits; the last call says none does.
func TestWorkerBatchEnd(t *testing.T) {
	e := routeEngine(t)
	a := e.account("A", true)
	ic := e.NewInternalClient(KindSystem, a, "sys")
	var mu sync.Mutex
	var log []string
	ends := make(chan bool, 100)
	ic.SetBatchEnd(func(n int, more bool) {
		mu.Lock()
		log = append(log, fmt.Sprint("end ", n, " ", more))
		mu.Unlock()
		ends <- more
	})
	release := make(chan struct{})
	if _, err := ic.Worker("w.>", "", func(m *WorkMsg) {
		if m.Subject == "w.block" {
			<-release // the next batch queues up meanwhile
		}
		mu.Lock()
		log = append(log, m.Subject)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	c := dialInto(t, e, a)
	c.send("CONNECT {}\r\nPUB w.block 0\r\n\r\n")
	c.flush()
	c.send("PUB w.1 0\r\n\r\nPUB w.2 0\r\n\r\n")
	c.flush() // both queued behind the blocked handler
	close(release)
	if more := <-ends; !more {
		t.Fatalf("first batch's end: more = false with a batch waiting")
	}
	if more := <-ends; more {
		t.Fatalf("last batch's end: more = true")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"w.block", "end 1 true", "w.1", "w.2", "end 2 false"}
	if !slices.Equal(log, want) {
		t.Fatalf("order %q, want %q", log, want)
	}
}
