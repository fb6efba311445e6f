package cluster

import (
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"
)

// dialEngine fails or succeeds dials as told, one at a time, and counts them.
type dialEngine struct {
	mu      sync.Mutex
	calls   int
	results chan error // each dial takes its outcome from here
}

func (d *dialEngine) DialRoute(*url.URL, bool, byte, string) error {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	return <-d.results
}
func (d *dialEngine) HasRoute(string) bool               { return false }
func (d *dialEngine) HasPinnedRoute(string, string) bool { return false }

func (d *dialEngine) dials() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

type quietLog struct{}

func (quietLog) Noticef(string, ...any) {}
func (quietLog) Errorf(string, ...any)  {}
func (quietLog) Debugf(string, ...any)  {}

func waitDials(t *testing.T, d *dialEngine, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for d.dials() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d dials, want %d", d.dials(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConnectAskedAgainWhileDialling: an implicit route's dial gives up after one failure
// (connect_retries 0), but a request for the same place that came while it was under way (the
// gossip of a server that has just restarted) gets a dial of its own; one that came before
// the attempt began was answered by it.
func TestConnectAskedAgainWhileDialling(t *testing.T) {
	u, _ := url.Parse("nats-route://127.0.0.1:6222")
	refused := errors.New("connection refused")

	d := &dialEngine{results: make(chan error, 4)}
	m := New(d, Config{}, quietLog{})
	m.connect(u, false, 0, 0, "$SYS")
	waitDials(t, d, 1)
	m.connect(u, false, 0, 0, "$SYS") // while the first is under way
	d.results <- refused
	waitDials(t, d, 2)
	d.results <- nil
	m.Stop()
	if n := d.dials(); n != 2 {
		t.Fatalf("%d dials, want 2", n)
	}

	// Alone, a failed implicit dial is not repeated.
	d = &dialEngine{results: make(chan error, 4)}
	m = New(d, Config{}, quietLog{})
	m.connect(u, false, 0, 0, "")
	d.results <- refused
	waitDials(t, d, 1)
	m.Stop()
	if n := d.dials(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}

	// A request made during the delay before the first attempt is answered by that attempt.
	d = &dialEngine{results: make(chan error, 4)}
	m = New(d, Config{}, quietLog{})
	m.connect(u, false, 0, 50*time.Millisecond, "")
	m.connect(u, false, 0, 0, "")
	d.results <- refused
	waitDials(t, d, 1)
	time.Sleep(50 * time.Millisecond)
	m.Stop()
	if n := d.dials(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
}

// TestConnectPoolNotAbsorbed: a pool's next connection asked for while a dial to the same
// place is under way gets a dial of its own even when that dial connects (a connect request
// would be answered by it): each such request is a slot still to fill.
func TestConnectPoolNotAbsorbed(t *testing.T) {
	u, _ := url.Parse("nats-route://127.0.0.1:6222")
	d := &dialEngine{results: make(chan error, 4)}
	m := New(d, Config{}, quietLog{})
	m.connect(u, false, 0, 0, "")
	waitDials(t, d, 1)
	m.connectPool(u, false, 0) // while the first is under way
	m.connectPool(u, false, 0)
	d.results <- nil
	waitDials(t, d, 2)
	d.results <- nil
	waitDials(t, d, 3)
	d.results <- nil
	time.Sleep(50 * time.Millisecond)
	m.Stop()
	if n := d.dials(); n != 3 {
		t.Fatalf("%d dials, want 3", n)
	}
}
