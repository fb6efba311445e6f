package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/natsd/natsd/filestore/powerfs"
)

// TestJetStreamCounterPowerCut cuts the power in the middle of a burst of counter increments
// (sent without waiting for acks, so that many are in flight on a running total) and checks
// what a restart finds: every stored total is the subject's previous stored total plus its own
// Nats-Incr (nothing skipped or counted twice), every acknowledged increment is there with the
// total its ack gave, and the next increment goes on from the last stored total.
func TestJetStreamCounterPowerCut(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	storeDir := t.TempDir()
	fs := powerfs.New()
	type ackd struct{ subj, val string }
	acked := map[uint64]ackd{}
	subjects := []string{"cnt.a", "cnt.b", "cnt.c"}
	for round := 0; round < 4; round++ {
		s := startPowerServer(t, fs, storeDir, 0)
		nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if round == 0 {
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CNT", Subjects: []string{"cnt.*"}, AllowMsgCounter: true}); err != nil {
				t.Fatal(err)
			}
		} else {
			last := checkCounterChain(t, ctx, js, func(seq uint64) (string, string, bool) {
				a, ok := acked[seq]
				return a.subj, a.val, ok
			})
			// The count goes on from what survived; these acks must survive the next cut.
			for _, subj := range subjects {
				m := nats.NewMsg(subj)
				m.Header.Set("Nats-Incr", "7")
				rep, err := nc.RequestMsg(m, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				var ack struct {
					Seq uint64 `json:"seq"`
					Val string `json:"val"`
				}
				if err := json.Unmarshal(rep.Data, &ack); err != nil {
					t.Fatal(err)
				}
				want := new(big.Int)
				want.SetString(last[subj], 10)
				want.Add(want, big.NewInt(7))
				if ack.Val != want.String() {
					t.Fatalf("round %d: increment of %s after the restart: %s, want val %s", round, subj, rep.Data, want)
				}
				acked[ack.Seq] = ackd{subj, ack.Val}
			}
		}

		// The burst, cut in the middle.
		const n = 600
		sent := make([]string, n)
		var mu sync.Mutex
		roundAcked := map[uint64]ackd{}
		var cut *powerfs.FS
		var snapshot map[uint64]ackd
		cutDone := make(chan struct{})
		// The cut may come from a sync hook while the test goroutine draws from rng: the cut
		// has a generator of its own.
		cutRng := rand.New(rand.NewSource(rng.Int63()))
		doCutLocked := func() {
			if cut != nil {
				return
			}
			cut = fs.Cut(cutRng)
			snapshot = make(map[uint64]ackd, len(roundAcked))
			for k, v := range roundAcked {
				snapshot[k] = v
			}
			close(cutDone)
		}
		doCut := func() {
			mu.Lock()
			defer mu.Unlock()
			doCutLocked()
		}
		// Even rounds cut in the middle of an fsync, odd ones after a number of acks (with
		// increments written and not yet synced).
		cutAt, cutAtAck, nsync := 1+rng.Intn(4), 0, 0
		if round%2 == 1 {
			cutAt, cutAtAck = 0, 1+rng.Intn(n-1)
		}
		fs.SetOnSync(func() {
			mu.Lock()
			nsync++
			hit := nsync == cutAt
			mu.Unlock()
			if hit {
				doCut()
			}
		})
		inbox := nats.NewInbox()
		all := make(chan struct{})
		var bad []string
		if _, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
			i, _ := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
			var ack struct {
				Seq   uint64          `json:"seq"`
				Val   string          `json:"val"`
				Error json.RawMessage `json:"error"`
			}
			mu.Lock()
			defer mu.Unlock()
			if err := json.Unmarshal(m.Data, &ack); err != nil || ack.Error != nil || ack.Val == "" {
				if cut == nil {
					bad = append(bad, string(m.Data))
				}
				return
			}
			if cut == nil {
				roundAcked[ack.Seq] = ackd{sent[i], ack.Val}
				if len(roundAcked) == n {
					close(all)
				}
				if len(roundAcked) == cutAtAck {
					doCutLocked()
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			incr := big.NewInt(int64(rng.Intn(2001) - 1000))
			if rng.Intn(10) == 0 {
				incr.Lsh(incr, 80)
			}
			m := nats.NewMsg(subjects[rng.Intn(len(subjects))])
			m.Reply = fmt.Sprintf("%s.%d", inbox, i)
			m.Header.Set("Nats-Incr", incr.String())
			mu.Lock()
			sent[i] = m.Subject
			mu.Unlock()
			if err := nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-cutDone:
		case <-all:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: burst not acknowledged", round)
		}
		doCut()
		fs.SetOnSync(nil)
		mu.Lock()
		if len(bad) > 0 {
			t.Fatalf("round %d: acks before the cut: %v", round, bad)
		}
		for k, v := range snapshot {
			acked[k] = v
		}
		t.Logf("round %d: cut at sync %d / ack %d: %d of %d acked", round, cutAt, cutAtAck, len(snapshot), n)
		mu.Unlock()
		cancel()
		nc.Close()
		s.Shutdown()
		fs = cut
	}
	s := startPowerServer(t, fs, storeDir, 0)
	defer s.Shutdown()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	checkCounterChain(t, ctx, js, func(seq uint64) (string, string, bool) {
		a, ok := acked[seq]
		return a.subj, a.val, ok
	})
}

// checkCounterChain reads stream CNT back and checks that each subject's totals follow from
// its increments, and that every acknowledged sequence holds what its ack said. It returns
// each subject's last total.
func checkCounterChain(t *testing.T, ctx context.Context, js jetstream.JetStream,
	acked func(seq uint64) (subj, val string, ok bool)) map[string]string {
	t.Helper()
	str, err := js.Stream(ctx, "CNT")
	if err != nil {
		t.Fatalf("stream after the restart: %v", err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Config.AllowMsgCounter {
		t.Fatalf("allow_msg_counter lost over the restart")
	}
	totals := map[string]*big.Int{}
	last := map[string]string{}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := str.GetMsg(ctx, seq)
		subj, val, isAcked := acked(seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			if isAcked {
				t.Fatalf("acked increment at seq %d (%s, total %s) lost", seq, subj, val)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Val string `json:"val"`
		}
		incr, ok := new(big.Int).SetString(m.Header.Get("Nats-Incr"), 10)
		if json.Unmarshal(m.Data, &body) != nil || !ok {
			t.Fatalf("seq %d: not a counter message: %q %v", seq, m.Data, m.Header)
		}
		tot := totals[m.Subject]
		if tot == nil {
			tot = new(big.Int)
			totals[m.Subject] = tot
		}
		tot.Add(tot, incr)
		if body.Val != tot.String() {
			t.Fatalf("seq %d (%s): stored total %s, but the increments stored so far make %s", seq, m.Subject, body.Val, tot)
		}
		if isAcked && (subj != m.Subject || val != body.Val) {
			t.Fatalf("seq %d: stored %s total %s, acked %s total %s", seq, m.Subject, body.Val, subj, val)
		}
		last[m.Subject] = body.Val
	}
	return last
}
