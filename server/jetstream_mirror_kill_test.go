package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SIGKILL of the natsd binary in the middle of replication (issue 18): an origin stream O, a
// mirror M of it and a stream S sourcing it, a backlog published to O faster than it is
// replicated, the server killed while M still lags, restarted on the same store, more
// published to O; once M and S have caught up, M must hold exactly O's messages at O's
// sequences (no gap, no duplicate) and S each of O's messages exactly once (by the origin
// sequence of its Nats-Stream-Source header). Nothing asserted depends on timing: a round in
// which replication had already caught up when the kill came is still checked, and logged.

const (
	mkOrigin = "O"
	mkMirror = "M"
	mkSource = "S"
)

// mkMsg is a stored message as the check compares it.
type mkMsg struct {
	subj string
	data uint64 // FNV-64a of the payload
	src  string // Nats-Stream-Source
}

func mkHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// mkRead reads a whole stream with an ordered consumer: sequence -> message.
func mkRead(t *testing.T, js jetstream.JetStream, name string) map[uint64]mkMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	st := s.CachedInfo().State
	out := make(map[uint64]mkMsg, st.Msgs)
	if st.Msgs == 0 {
		return out
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer on %s: %v", name, err)
	}
	for uint64(len(out)) < st.Msgs {
		b, err := c.Fetch(int(min(1000, st.Msgs-uint64(len(out)))), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("fetch %s: %v", name, err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				t.Fatalf("metadata: %v", err)
			}
			if _, dup := out[md.Sequence.Stream]; dup {
				t.Fatalf("%s: sequence %d delivered twice by an ordered consumer", name, md.Sequence.Stream)
			}
			out[md.Sequence.Stream] = mkMsg{subj: m.Subject(), data: mkHash(m.Data()), src: m.Headers().Get("Nats-Stream-Source")}
		}
		if b.Error() != nil {
			t.Fatalf("fetch %s: %v", name, b.Error())
		}
		if n == 0 {
			t.Fatalf("%s: %d of %d messages read, then nothing", name, len(out), st.Msgs)
		}
	}
	return out
}

// mkPublish publishes n messages of 1 KiB to O asynchronously and waits for the acks.
func mkPublish(t *testing.T, nc *nats.Conn, rng *rand.Rand, first, n int) {
	t.Helper()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	if err != nil {
		t.Fatal(err)
	}
	mkPublishAsync(t, js, rng, first, n)
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(40 * time.Second):
		t.Fatalf("%d acks of %d outstanding after 40s", js.PublishAsyncPending(), n)
	}
}

// mkPublishAsync publishes n messages of 1 KiB to O (messages first to first+n-1) without
// waiting for their acks.
func mkPublishAsync(t *testing.T, js jetstream.JetStream, rng *rand.Rand, first, n int) {
	t.Helper()
	data := make([]byte, 1024)
	for i := first; i < first+n; i++ {
		rng.Read(data)
		copy(data, strconv.Itoa(i))
		if _, err := js.PublishAsync("o."+strconv.Itoa(i%7), data, jetstream.WithStallWait(20*time.Second)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
}

func mkInfo(t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s info: %v", name, err)
	}
	return s.CachedInfo()
}

// mkSourceSeq is the origin sequence a Nats-Stream-Source header names.
func mkSourceSeq(v string) (uint64, bool) {
	f := strings.Split(v, " ")
	if len(f) < 2 || f[0] != mkOrigin {
		return 0, false
	}
	n, err := strconv.ParseUint(f[1], 10, 64)
	return n, err == nil
}

func TestJetStreamMirrorSourceSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	mkRounds(t, natsdBinary(t), true)
}

// TestNatsServerMirrorSourceSIGKILL runs the same rounds against nats-server, as the
// reference, and only logs what differs (it may acknowledge a publish before writing it).
func TestNatsServerMirrorSourceSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server")
	}
	mkRounds(t, natsServerBinary(t), false)
}

// mkRounds: create O, M and S, then kill the server mid-replication and check the restarted
// one's streams, round after round (strict: fail on a difference; else log it).
func mkRounds(t *testing.T, bin string, strict bool) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	storeDir := t.TempDir()
	const rounds, backlog, after = 3, 20000, 200
	next := 0
	for round := 0; round <= rounds; round++ {
		p := startKillable(t, bin, storeDir)
		nc, err := nats.Connect(p.url, nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc, jetstream.WithDefaultTimeout(5*time.Second))
		if round == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: mkOrigin, Subjects: []string{"o.>"},
				Storage: jetstream.FileStorage}); err != nil {
				t.Fatalf("create %s: %v", mkOrigin, err)
			}
			// Some of the origin before the mirror and the source exist: they start behind.
			mkPublish(t, nc, rng, next, backlog/4)
			next += backlog / 4
			for _, cfg := range []jetstream.StreamConfig{
				{Name: mkMirror, Mirror: &jetstream.StreamSource{Name: mkOrigin}, Storage: jetstream.FileStorage},
				{Name: mkSource, Sources: []*jetstream.StreamSource{{Name: mkOrigin}}, Storage: jetstream.FileStorage},
			} {
				if _, err := js.CreateStream(ctx, cfg); err != nil {
					t.Fatalf("create %s: %v", cfg.Name, err)
				}
			}
			cancel()
		} else {
			// The restarted server: more to the origin, then both must catch up.
			mkPublish(t, nc, rng, next, after)
			next += after
			mkCheck(t, js, round, p, strict)
		}
		if round == rounds {
			nc.Close()
			p.kill(t)
			break
		}
		// The backlog, in chunks not waited for: after each, if the mirror or the source is
		// behind the origin, the server is killed there and then (acks still in flight).
		pjs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
		if err != nil {
			t.Fatal(err)
		}
		var o, m, s *jetstream.StreamInfo
		mid := false
		for sent := 0; sent < backlog && !mid; sent += backlog / 10 {
			mkPublishAsync(t, pjs, rng, next, backlog/10)
			next += backlog / 10
			if sent+backlog/10 < backlog/2 {
				continue // a backlog first
			}
			o, m, s = mkInfo(t, js, mkOrigin), mkInfo(t, js, mkMirror), mkInfo(t, js, mkSource)
			mid = m.State.LastSeq < o.State.LastSeq || s.State.Msgs < o.State.Msgs
		}
		p.kill(t)
		nc.Close()
		lag := uint64(0)
		if m.Mirror != nil {
			lag = m.Mirror.Lag
		}
		t.Logf("round %d: killed with O at %d, M at %d (lag %d), S at %d msgs; mid-replication: %v",
			round, o.State.LastSeq, m.State.LastSeq, lag, s.State.Msgs, mid)
		if !mid {
			t.Logf("round %d: replication had caught up before the kill", round)
		}
	}
}

// mkCheck waits (bounded) for M and S to catch up with O, then compares them.
func mkCheck(t *testing.T, js jetstream.JetStream, round int, p *killProc, strict bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var o, m, s *jetstream.StreamInfo
	for {
		o, m, s = mkInfo(t, js, mkOrigin), mkInfo(t, js, mkMirror), mkInfo(t, js, mkSource)
		if m.State.LastSeq == o.State.LastSeq && m.State.Msgs == o.State.Msgs && s.State.Msgs >= o.State.Msgs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart %d: not caught up in 30s: O %+v, M %+v (mirror %+v), S %+v (sources %+v)\n%s",
				round, o.State, m.State, m.Mirror, s.State, s.Sources, p.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	om, mm, sm := mkRead(t, js, mkOrigin), mkRead(t, js, mkMirror), mkRead(t, js, mkSource)
	var bad []string
	report := func(format string, args ...any) {
		if len(bad) < 20 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	if len(om) != int(o.State.Msgs) || o.State.FirstSeq != 1 || o.State.LastSeq != o.State.Msgs {
		report("origin: %d messages read, state %+v", len(om), o.State)
	}
	for seq, w := range om {
		g, ok := mm[seq]
		switch {
		case !ok:
			report("mirror: origin sequence %d missing", seq)
		case g.subj != w.subj || g.data != w.data:
			report("mirror: sequence %d is %s/%x, origin's %s/%x", seq, g.subj, g.data, w.subj, w.data)
		}
	}
	for seq := range mm {
		if _, ok := om[seq]; !ok {
			report("mirror: sequence %d not in the origin", seq)
		}
	}
	bySrc := map[uint64]uint64{} // origin sequence -> S sequence
	for seq, g := range sm {
		oseq, ok := mkSourceSeq(g.src)
		if !ok {
			report("source: sequence %d has Nats-Stream-Source %q", seq, g.src)
			continue
		}
		if prev, dup := bySrc[oseq]; dup {
			report("source: origin sequence %d stored twice (S %d and %d)", oseq, prev, seq)
			continue
		}
		bySrc[oseq] = seq
		w, ok := om[oseq]
		switch {
		case !ok:
			report("source: S %d from origin sequence %d, not in the origin", seq, oseq)
		case g.subj != w.subj || g.data != w.data:
			report("source: S %d (origin %d) is %s/%x, origin's %s/%x", seq, oseq, g.subj, g.data, w.subj, w.data)
		}
	}
	for seq := range om {
		if _, ok := bySrc[seq]; !ok {
			report("source: origin sequence %d missing", seq)
		}
	}
	t.Logf("restart %d: O %d msgs, M %d, S %d", round, len(om), len(mm), len(sm))
	if len(bad) > 0 && !strict {
		t.Logf("restart %d after SIGKILL (not failing):\n%s", round, strings.Join(bad, "\n"))
	} else if len(bad) > 0 {
		t.Fatalf("restart %d after SIGKILL:\n%s", round, strings.Join(bad, "\n"))
	}
}
