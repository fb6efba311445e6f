package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/natsd/natsd/sublist"
)

// fakeSysConn is an in-memory sysConn: handlers run on their own goroutine per message (as
// the routing core's workers would), published messages are recorded and delivered to
// matching subscriptions, replies to requests' inboxes.
type fakeSysConn struct {
	mu     sync.Mutex
	subs   map[int]*fakeSub
	next   int
	msgs   []fakeMsg
	inbox  map[string]chan fakeMsg
	notify chan struct{}
	nreq   atomic.Int64
	noInt  bool // implement HasInterest as "nobody listens"
}

type fakeSub struct {
	subject string
	local   bool
	fn      func(subject, reply string, hdr, msg []byte)
}

type fakeMsg struct {
	account, subject, reply string
	hdr, msg                []byte
}

func newFakeSysConn() *fakeSysConn {
	return &fakeSysConn{subs: map[int]*fakeSub{}, inbox: map[string]chan fakeMsg{}, notify: make(chan struct{}, 1)}
}

func (f *fakeSysConn) subscribe(subject string, local bool, fn func(subject, reply string, hdr, msg []byte)) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := f.next
	f.subs[id] = &fakeSub{subject: subject, local: local, fn: fn}
	return func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}, nil
}

func (f *fakeSysConn) Subscribe(subject, _ string, fn func(subject, reply string, hdr, msg []byte)) (func(), error) {
	return f.subscribe(subject, false, fn)
}

func (f *fakeSysConn) SubscribeLocal(subject, _ string, fn func(subject, reply string, hdr, msg []byte)) (func(), error) {
	return f.subscribe(subject, true, fn)
}

func (f *fakeSysConn) Publish(subject, reply string, hdr, msg []byte) error {
	return f.PublishAccount("", subject, reply, hdr, msg)
}

func (f *fakeSysConn) PublishAccount(account, subject, reply string, hdr, msg []byte) error {
	m := fakeMsg{account: account, subject: subject, reply: reply, hdr: bytes.Clone(hdr), msg: bytes.Clone(msg)}
	f.mu.Lock()
	f.msgs = append(f.msgs, m)
	ch := f.inbox[subject]
	f.mu.Unlock()
	if ch != nil {
		ch <- m
	}
	select {
	case f.notify <- struct{}{}:
	default:
	}
	return nil
}

// HasInterest is only consulted when noInt is set (else it says yes).
func (f *fakeSysConn) HasInterest(string) bool { return !f.noInt }

// deliver hands a request to every matching subscription, each on its own goroutine.
func (f *fakeSysConn) deliver(subject, reply string, hdr, msg []byte) int {
	f.mu.Lock()
	var fns []func(subject, reply string, hdr, msg []byte)
	for _, s := range f.subs {
		if sublist.MatchFilter(subject, s.subject) {
			fns = append(fns, s.fn)
		}
	}
	f.mu.Unlock()
	for _, fn := range fns {
		go fn(subject, reply, bytes.Clone(hdr), bytes.Clone(msg))
	}
	return len(fns)
}

// request sends a request and returns the first answer, or false after wait.
func (f *fakeSysConn) request(t *testing.T, subject string, hdr, body []byte, wait time.Duration) (fakeMsg, bool) {
	t.Helper()
	reply := fmt.Sprintf("_INBOX.fake.%d", f.nreq.Add(1))
	ch := make(chan fakeMsg, 16)
	f.mu.Lock()
	f.inbox[reply] = ch
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.inbox, reply)
		f.mu.Unlock()
	}()
	if f.deliver(subject, reply, hdr, body) == 0 {
		t.Fatalf("no $SYS subscription matches %s", subject)
	}
	select {
	case m := <-ch:
		return m, true
	case <-time.After(wait):
		return fakeMsg{}, false
	}
}

// published returns the messages published on subject so far.
func (f *fakeSysConn) published(subject string) []fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeMsg
	for _, m := range f.msgs {
		if m.subject == subject {
			out = append(out, m)
		}
	}
	return out
}

// waitPublished waits until n messages went out on subject.
func (f *fakeSysConn) waitPublished(t *testing.T, subject string, n int) []fakeMsg {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if got := f.published(subject); len(got) >= n {
			return got
		}
		select {
		case <-f.notify:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: %d messages, want %d", subject, len(f.published(subject)), n)
		}
	}
}

func (f *fakeSysConn) subjects() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for _, s := range f.subs {
		out[s.subject] = s.local
	}
	return out
}

// decodeStrict decodes b into v with unknown fields rejected.
func decodeStrict(t *testing.T, what string, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: decode into %T: %v\n%s", what, v, err, b)
	}
}

// body returns a message's JSON, uncompressed as its Content-Encoding says.
func (m fakeMsg) body(t *testing.T) []byte {
	t.Helper()
	switch enc := headerValue(m.hdr, "Content-Encoding"); enc {
	case "":
		return m.msg
	case "gzip":
		r, err := gzip.NewReader(bytes.NewReader(m.msg))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case "snappy":
		b, err := io.ReadAll(s2.NewReader(bytes.NewReader(m.msg)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	case "identity":
		return m.msg
	default:
		t.Fatalf("Content-Encoding %q", enc)
	}
	return nil
}
