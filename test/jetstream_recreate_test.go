package test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Deleting a file stream and creating it again at once, over and over, with messages and a
// consumer in it each time: every create and delete succeeds and a delete leaves nothing on
// disk (natsd removes the files after its answer, which a create of the same name waits
// for: the directory is polled for). natsd only: nats-server v2.15.2 fails this about once in a few hundred rounds (see
// keepAccountDir), and it was that failure, in TestJetStreamConsumerConfigRows's reference
// run, that looked like natsd's.
func TestJetStreamRecreateOnlyStream(t *testing.T) {
	dir := t.TempDir()
	nc, _ := jsStart(t, target{name: "natsd", start: startNatsd}, Config{StoreDir: dir})
	deadline := time.Now().Add(3 * time.Second)
	rounds := 0
	for ; rounds < 300 && time.Now().Before(deadline); rounds++ {
		if r := rawAPI(t, nc, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`); apiErrCode(r) != 0 {
			t.Fatalf("round %d: create: %v", rounds, r)
		}
		for k := 0; k < 3; k++ {
			if r := rawAPI(t, nc, "s.x", strconv.Itoa(k)); r["error"] != nil || r["seq"] == nil {
				t.Fatalf("round %d: publish: %v", rounds, r)
			}
		}
		if r := rawAPI(t, nc, "$JS.API.CONSUMER.CREATE.S.C",
			`{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit"}}`); apiErrCode(r) != 0 {
			t.Fatalf("round %d: consumer create: %v", rounds, r)
		}
		if m, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT.S.C", []byte(`{"batch":1}`), jsAPITimeout); err != nil {
			t.Fatalf("round %d: next: %v", rounds, err)
		} else if err := m.Respond([]byte("+ACK")); err != nil {
			t.Fatal(err)
		}
		if r := rawAPI(t, nc, "$JS.API.STREAM.DELETE.S", ""); apiErrCode(r) != 0 {
			t.Fatalf("round %d: delete: %v", rounds, r)
		}
		if m := waitGone(filepath.Join(dir, "jetstream", "*", "streams", "S")); len(m) != 0 {
			ents, _ := os.ReadDir(m[0])
			t.Fatalf("round %d: stream directory left after delete: %v", rounds, ents)
		}
	}
	t.Logf("%d rounds", rounds)
}

// waitGone waits (a few seconds at most) until nothing matches pattern, and returns what
// still does.
func waitGone(pattern string) []string {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		m, _ := filepath.Glob(pattern)
		if len(m) == 0 || time.Now().After(deadline) {
			return m
		}
	}
}

// A durable consumer deleted after inactivity (on its timer, not the API worker) while the
// API creates it again under the same name: the old consumer's stop removed the new one's
// files ("error creating store for consumer", or a consumer running on unlinked files), and a
// stream delete racing it failed on files already gone. Every create succeeds, a consumer
// that exists has its files, and a stream delete leaves nothing behind.
func TestJetStreamConsumerRecreateWhileInactiveDeletes(t *testing.T) {
	dir := t.TempDir()
	nc, _ := jsStart(t, target{name: "natsd", start: startNatsd}, Config{StoreDir: dir})
	const ccfg = `{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit","inactive_threshold":5000000}}`
	meta := filepath.Join(dir, "jetstream", "$G", "streams", "S", "obs", "C", "meta.inf")
	deadline := time.Now().Add(3 * time.Second)
	rounds, seen := 0, 0
	for ; time.Now().Before(deadline); rounds++ {
		if r := rawAPI(t, nc, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`); apiErrCode(r) != 0 {
			t.Fatalf("round %d: stream create: %v", rounds, r)
		}
		for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
			if r := rawAPI(t, nc, "$JS.API.CONSUMER.CREATE.S.C", ccfg); apiErrCode(r) != 0 {
				t.Fatalf("round %d: consumer create: %v", rounds, r)
			}
			if r := rawAPI(t, nc, "$JS.API.CONSUMER.INFO.S.C", ""); apiErrCode(r) == 0 {
				if _, err := os.Stat(meta); err == nil {
					seen++
				} else if r := rawAPI(t, nc, "$JS.API.CONSUMER.INFO.S.C", ""); apiErrCode(r) == 0 {
					// Still there after the stat: not an inactivity deletion in between.
					t.Fatalf("round %d: consumer C exists without its files: %v", rounds, err)
				}
			}
		}
		if r := rawAPI(t, nc, "$JS.API.STREAM.DELETE.S", ""); apiErrCode(r) != 0 {
			t.Fatalf("round %d: stream delete: %v", rounds, r)
		}
		if m := waitGone(filepath.Dir(filepath.Dir(filepath.Dir(meta)))); len(m) != 0 {
			t.Fatalf("round %d: stream directory left after delete", rounds)
		}
	}
	if seen == 0 {
		t.Fatalf("never saw %s: the test looks in the wrong place", meta)
	}
	t.Logf("%d rounds, consumer files seen %d times", rounds, seen)
}
