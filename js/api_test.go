package js

import (
	"testing"

	"github.com/natsd/natsd/loop"
)

// TestAPITry checks which requests on $JS.API.> the reactor drops because a stream's or a
// consumer's own subscription answers them, and which go on to the API worker (whose
// fallbacks reply 503 to a direct get or pull request nobody serves).
func TestAPITry(t *testing.T) {
	a := &account{js: &JetStream{cfg: Config{Domain: "hub"}}, streams: map[string]*stream{}}
	direct := &stream{}
	direct.cfg.Store(&StreamConfig{Name: "D", AllowDirect: true})
	direct.cons.byID = map[string]*consumer{"C": {}}
	plain := &stream{}
	plain.cfg.Store(&StreamConfig{Name: "P"})
	a.streams["D"], a.streams["P"] = direct, plain
	cases := []struct {
		subject, reply string
		drop           bool
	}{
		{"$JS.API.DIRECT.GET.D", "r", true},
		{"$JS.API.DIRECT.GET.D.$KV.b.k", "r", true},
		{"$JS.hub.API.DIRECT.GET.D.k", "r", true},
		{"$JS.API.DIRECT.GET.P", "r", false},       // allow_direct off: 503
		{"$JS.API.DIRECT.GET.P.k", "r", false},     // the same
		{"$JS.API.DIRECT.GET.MISSING", "r", false}, // no such stream: 503
		{"$JS.other.API.DIRECT.GET.D", "r", false}, // another domain: the worker ignores it
		{"$JS.API.DIRECT.GET.D", "", true},         // no reply: nothing to answer
		{"$JS.API.DIRECT.GET.MISSING", "", true},
		{"$JS.API.CONSUMER.MSG.NEXT.D.C", "r", true},
		{"$JS.hub.API.CONSUMER.MSG.NEXT.D.C", "r", true},
		{"$JS.API.CONSUMER.MSG.NEXT.D.X", "r", false}, // no such consumer: 503
		{"$JS.API.CONSUMER.MSG.NEXT.D", "r", false},
		{"$JS.API.CONSUMER.MSG.NEXT.P.C", "r", false},
		{"$JS.API.CONSUMER.MSG.NEXT.MISSING.C", "r", false},
		{"$JS.API.STREAM.INFO.D", "r", false},
		{"$JS.API.INFO", "r", false},
		{"$JS.API.DIRECT.GETX.D", "r", false},
		{"$JS.hubAPI.DIRECT.GET.D", "r", false},
		{"$JS.", "r", false},
		{"$JS.hub", "r", false},
	}
	for _, c := range cases {
		m := &loop.Msg{Subject: []byte(c.subject), Reply: []byte(c.reply)}
		if got := a.apiTry(m); got != c.drop {
			t.Errorf("%q reply %q: dropped %v, want %v", c.subject, c.reply, got, c.drop)
		}
	}
	// A lock held by a writer is not waited for: the request goes to the worker.
	a.mu.Lock()
	if a.apiTry(&loop.Msg{Subject: []byte("$JS.API.DIRECT.GET.D"), Reply: []byte("r")}) {
		t.Errorf("dropped while the account's lock was held")
	}
	a.mu.Unlock()
	direct.cons.mu.Lock()
	if a.apiTry(&loop.Msg{Subject: []byte("$JS.API.CONSUMER.MSG.NEXT.D.C"), Reply: []byte("r")}) {
		t.Errorf("dropped while the consumers' lock was held")
	}
	direct.cons.mu.Unlock()
}
