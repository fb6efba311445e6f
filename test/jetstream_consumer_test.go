package test

// JetStream consumers through nats.go's jetstream package, on each target, compared with
// nats-server's observations of the same scenario.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func jsCtx(t *testing.T) context.Context { return jsCtxFor(t, 20*time.Second) }

// jsCtxFor is a context for a test's whole run of JetStream calls, cancelled after d.
func jsCtxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func publishN(t *testing.T, js jetstream.JetStream, subj string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := js.Publish(jsCtx(t), subj, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

// consumerView is what scenarios record of a consumer's info (without times).
func consumerView(ci *jetstream.ConsumerInfo) map[string]any {
	return map[string]any{
		"delivered":    [2]uint64{ci.Delivered.Consumer, ci.Delivered.Stream},
		"ack_floor":    [2]uint64{ci.AckFloor.Consumer, ci.AckFloor.Stream},
		"ack_pending":  ci.NumAckPending,
		"redelivered":  ci.NumRedelivered,
		"num_pending":  ci.NumPending,
		"ack_policy":   ci.Config.AckPolicy.String(),
		"deliver":      ci.Config.DeliverPolicy.String(),
		"max_deliver":  ci.Config.MaxDeliver,
		"ack_wait":     ci.Config.AckWait.String(),
		"max_waiting":  ci.Config.MaxWaiting,
		"max_ack_pend": ci.Config.MaxAckPending,
		"replay":       ci.Config.ReplayPolicy.String(),
	}
}

func TestJSConsumerFetchAck(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 10)
		ctx := jsCtx(t)
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatalf("create consumer: %v", err)
		}
		obs := map[string]any{"created": consumerView(c.CachedInfo())}
		batch, err := c.Fetch(4, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		var got []string
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			got = append(got, fmt.Sprintf("%s %s seq=%d/%d dc=%d pend=%d", m.Subject(), m.Data(), md.Sequence.Stream, md.Sequence.Consumer, md.NumDelivered, md.NumPending))
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatalf("double ack: %v", err)
			}
		}
		if batch.Error() != nil {
			t.Fatalf("batch: %v", batch.Error())
		}
		obs["fetched"] = got
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatalf("info: %v", err)
		}
		obs["after"] = consumerView(ci)
		// NoWait on what is left, then on nothing.
		b2, err := c.FetchNoWait(10)
		if err != nil {
			t.Fatalf("fetch no wait: %v", err)
		}
		n := 0
		for m := range b2.Messages() {
			n++
			_ = m.Ack()
		}
		obs["nowait"] = n
		obs["nowait_err"] = fmt.Sprint(b2.Error())
		b3, _ := c.FetchNoWait(10)
		n = 0
		for range b3.Messages() {
			n++
		}
		obs["nowait_empty"] = n
		obs["nowait_empty_err"] = fmt.Sprint(b3.Error())
		names := c.CachedInfo().Name
		obs["name"] = names
		lister := s.ListConsumers(ctx)
		var listed []string
		for ci := range lister.Info() {
			listed = append(listed, ci.Name)
		}
		obs["listed"] = listed
		if err := s.DeleteConsumer(ctx, "D"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		_, err = s.Consumer(ctx, "D")
		obs["after_delete"] = errors.Is(err, jetstream.ErrConsumerNotFound)
		return obs
	})
}

func TestJSConsumerConsumeRedelivery(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 3)
		ctx := jsCtx(t)
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "D",
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: 300 * time.Millisecond, MaxDeliver: 2})
		if err != nil {
			t.Fatalf("create consumer: %v", err)
		}
		type rec struct {
			Seq uint64
			DC  uint64
		}
		got := make(chan rec, 100)
		cc, err := c.Consume(func(m jetstream.Msg) {
			md, _ := m.Metadata()
			got <- rec{md.Sequence.Stream, md.NumDelivered}
			if md.Sequence.Stream != 2 {
				_ = m.Ack()
			}
		})
		if err != nil {
			t.Fatalf("consume: %v", err)
		}
		defer cc.Stop()
		var seen []rec
		timeout := time.After(3 * time.Second)
	loop:
		for {
			select {
			case r := <-got:
				seen = append(seen, r)
			case <-timeout:
				break loop
			}
		}
		cc.Stop()
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatalf("info: %v", err)
		}
		return map[string]any{"seen": seen, "info": consumerView(ci)}
	})
}

func TestJSConsumerOrderedAndPush(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 5)
		publishN(t, js, "s.b", 5)
		ctx := jsCtx(t)
		oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"s.b"}})
		if err != nil {
			t.Fatalf("ordered: %v", err)
		}
		var ordered []string
		for i := 0; i < 5; i++ {
			m, err := oc.Next(jetstream.FetchMaxWait(2 * time.Second))
			if err != nil {
				t.Fatalf("ordered next: %v", err)
			}
			ordered = append(ordered, m.Subject()+" "+string(m.Data()))
		}
		// Legacy push consumer through the old API, as KV watchers use it.
		ojs, _ := nc.JetStream()
		sub, err := ojs.SubscribeSync("s.a", nats.OrderedConsumer())
		if err != nil {
			t.Fatalf("push ordered: %v", err)
		}
		var pushed []string
		for i := 0; i < 5; i++ {
			m, err := sub.NextMsg(2 * time.Second)
			if err != nil {
				t.Fatalf("push next: %v", err)
			}
			pushed = append(pushed, m.Subject+" "+string(m.Data))
		}
		_ = sub.Unsubscribe()
		qs1, err := ojs.QueueSubscribeSync("s.*", "q", nats.Durable("QD"), nats.AckExplicit())
		if err != nil {
			t.Fatalf("queue push: %v", err)
		}
		qs2, err := ojs.QueueSubscribeSync("s.*", "q", nats.Durable("QD"), nats.AckExplicit())
		if err != nil {
			t.Fatalf("queue push 2: %v", err)
		}
		total := 0
		deadline := time.Now().Add(3 * time.Second)
		for total < 10 && time.Now().Before(deadline) {
			for _, q := range []*nats.Subscription{qs1, qs2} {
				if m, err := q.NextMsg(50 * time.Millisecond); err == nil {
					_ = m.Ack()
					total++
				}
			}
		}
		return map[string]any{"ordered": ordered, "pushed": pushed, "queue_total": total}
	})
}

// fetchAll fetches up to n messages (waiting at most wait) and returns them.
func fetchAll(t *testing.T, c jetstream.Consumer, n int, wait time.Duration) []jetstream.Msg {
	t.Helper()
	b, err := c.Fetch(n, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	return out
}

func seqs(ms []jetstream.Msg) []string {
	var out []string
	for _, m := range ms {
		md, _ := m.Metadata()
		out = append(out, fmt.Sprintf("%d/dc%d", md.Sequence.Stream, md.NumDelivered))
	}
	return out
}

func TestJSConsumerRetention(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		obs := map[string]any{}
		// Work queue: a message leaves once acked.
		wq := mustStream(t, js, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"}, Retention: jetstream.WorkQueuePolicy})
		publishN(t, js, "wq.a", 5)
		c, err := wq.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "W", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatalf("wq consumer: %v", err)
		}
		_, err = wq.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "W2", AckPolicy: jetstream.AckExplicitPolicy})
		obs["wq_second"] = jsErrObs(err)
		ms := fetchAll(t, c, 3, time.Second)
		for _, m := range ms {
			_ = m.DoubleAck(ctx)
		}
		obs["wq_state"] = stateObs(streamInfo(t, wq).State)
		// Interest: kept while a consumer has not acked; nothing kept with no consumer.
		is := mustStream(t, js, jetstream.StreamConfig{Name: "IS", Subjects: []string{"is.>"}, Retention: jetstream.InterestPolicy})
		publishN(t, js, "is.a", 2)
		obs["is_none"] = stateObs(streamInfo(t, is).State)
		c1, err := is.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "I1", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		c2, err := is.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "I2", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "is.b"})
		if err != nil {
			t.Fatal(err)
		}
		publishN(t, js, "is.a", 3)
		publishN(t, js, "is.b", 2)
		obs["is_kept"] = stateObs(streamInfo(t, is).State)
		for _, m := range fetchAll(t, c1, 5, time.Second) {
			_ = m.DoubleAck(ctx)
		}
		obs["is_after_c1"] = stateObs(streamInfo(t, is).State)
		for _, m := range fetchAll(t, c2, 5, time.Second) {
			_ = m.DoubleAck(ctx)
		}
		time.Sleep(100 * time.Millisecond)
		obs["is_after_c2"] = stateObs(streamInfo(t, is).State)
		return obs
	})
}

func TestJSConsumerAckKinds(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 6)
		obs := map[string]any{}
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 400 * time.Millisecond, MaxAckPending: 3})
		if err != nil {
			t.Fatal(err)
		}
		// MaxAckPending: only 3 of 6 come while none is acked.
		first := fetchAll(t, c, 6, 500*time.Millisecond)
		obs["first"] = seqs(first)
		// NAK now, NAK with a delay, TERM: the nak'd comes again at once, the delayed later.
		_ = first[0].Nak()
		_ = first[1].NakWithDelay(300 * time.Millisecond)
		_ = first[2].Term()
		second := fetchAll(t, c, 6, 200*time.Millisecond)
		obs["second"] = seqs(second)
		for _, m := range second {
			_ = m.DoubleAck(ctx)
		}
		third := fetchAll(t, c, 6, 800*time.Millisecond)
		obs["third"] = seqs(third)
		for _, m := range third {
			_ = m.InProgress()
		}
		time.Sleep(250 * time.Millisecond)
		for _, m := range third {
			_ = m.InProgress()
		}
		time.Sleep(250 * time.Millisecond)
		// Still not redelivered: in progress reset their ack wait.
		fourth := fetchAll(t, c, 6, 100*time.Millisecond)
		obs["fourth_in_progress"] = seqs(fourth)
		for _, m := range third {
			_ = m.DoubleAck(ctx)
		}
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		obs["info"] = consumerView(ci)
		return obs
	})
}

func TestJSConsumerBackoffAndMaxDeliver(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 1)
		adv, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>")
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy,
			BackOff: []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}, MaxDeliver: 3})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && len(got) < 3 {
			got = append(got, seqs(fetchAll(t, c, 1, 500*time.Millisecond))...)
		}
		m, err := adv.NextMsg(2 * time.Second)
		obs := map[string]any{"deliveries": got, "advisory": err == nil}
		if err == nil {
			var a map[string]any
			_ = json.Unmarshal(m.Data, &a)
			obs["advisory_fields"] = []any{a["type"], a["stream"], a["consumer"], a["stream_seq"], a["deliveries"]}
		}
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		obs["info"] = consumerView(ci)
		obs["ack_wait"] = ci.Config.AckWait.String()
		return obs
	})
}

func TestJSConsumerRestart(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				stop()
			}
		})
		nc, js := jsConnect(t, u)
		ctx := jsCtx(t)
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 10)
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ms := fetchAll(t, c, 6, time.Second)
		for _, m := range ms[:4] {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		before, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
		stop()
		stopped = true
		u2 := tg.run(t, fixedPort(t, cfg, u))
		_, js = jsConnect(t, u2)
		s, err = js.Stream(ctx, "S")
		if err != nil {
			t.Fatal(err)
		}
		c, err = s.Consumer(ctx, "D")
		if err != nil {
			t.Fatalf("consumer after restart: %v", err)
		}
		after := consumerView(c.CachedInfo())
		// The two unacked come back after their ack wait, then the rest.
		var got []string
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) && len(got) < 6 {
			for _, m := range fetchAll(t, c, 10, 500*time.Millisecond) {
				got = append(got, seqs([]jetstream.Msg{m})...)
				_ = m.DoubleAck(ctx)
			}
		}
		ci, _ := c.Info(ctx)
		// Whether the two unacked come before or after the rest depends on how long the
		// restart took against their ack wait (nats-server keeps delivery times to the
		// second): what is delivered is compared, not the order.
		sort.Strings(got)
		return map[string]any{"before": consumerView(before), "after": after, "then": got, "end": consumerView(ci)}
	})
}

// A durable push consumer made before anyone listens on its deliver subject delivers its
// backlog once a subscriber comes, with no new message to wake it.
func TestJSConsumerPushLateSubscriber(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 3)
		if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "P", DeliverSubject: "late.p",
			AckPolicy: jetstream.AckNonePolicy}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		sub, err := nc.SubscribeSync("late.p")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := 0; i < 3; i++ {
			m, err := sub.NextMsg(3 * time.Second)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			got = append(got, m.Subject+" "+string(m.Data))
		}
		return got
	})
}

// An ordered consumer carries on across a restart of the server: nats.go makes it again
// from where it was, and every message comes once, in order.
func TestJSConsumerOrderedAcrossRestart(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		cfg := Config{JetStream: true, StoreDir: t.TempDir()}
		u, stop := tg.start(t, cfg)
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				stop()
			}
		})
		nc := connect(t, u, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(jsAPITimeout))
		if err != nil {
			t.Fatal(err)
		}
		ctx := jsCtx(t)
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 5)
		oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		next := func() {
			t.Helper()
			m, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatalf("next after %v: %v", got, err)
			}
			md, _ := m.Metadata()
			got = append(got, fmt.Sprintf("%d %s", md.Sequence.Stream, m.Data()))
		}
		for i := 0; i < 3; i++ {
			next()
		}
		stop()
		stopped = true
		tg.run(t, fixedPort(t, cfg, u))
		waitFor(t, 10*time.Second, "reconnect", func() bool { return nc.IsConnected() })
		for i := 0; i < 3; i++ {
			deadline := time.Now().Add(15 * time.Second)
			for {
				// Each try has its own bound: a publish sent while the restarted server
				// is still recovering may get no answer at all.
				pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := js.Publish(pctx, "s.a", []byte(fmt.Sprintf("n%d", i)), jetstream.WithMsgID(fmt.Sprintf("n%d", i)))
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("publish after the restart: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		for i := 0; i < 5; i++ {
			next()
		}
		return got
	})
}

// A stream backup carries its consumers, and a restore brings them back where they were.
func TestJSConsumerBackupRestore(t *testing.T) {
	natsCLI(t)
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		keepAccountDir(t, nc) // S is deleted and restored
		ctx := jsCtx(t)
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		publishN(t, js, "s.a", 10)
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ms := fetchAll(t, c, 4, time.Second)
		for _, m := range ms[:3] {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		before, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "backup")
		u := nc.ConnectedUrl()
		if out, ok := jsCLI(t, u, "stream", "backup", "S", dir); !ok {
			t.Fatalf("backup: %s", out)
		}
		if err := js.DeleteStream(ctx, "S"); err != nil {
			t.Fatal(err)
		}
		if out, ok := jsCLI(t, u, "stream", "restore", dir); !ok {
			t.Fatalf("restore: %s", out)
		}
		s, err = js.Stream(ctx, "S")
		if err != nil {
			t.Fatal(err)
		}
		c, err = s.Consumer(ctx, "D")
		if err != nil {
			t.Fatalf("consumer after restore: %v", err)
		}
		after := c.CachedInfo()
		// What is left comes next: the rest of the stream (the pending one waits its ack wait).
		next := seqs(fetchAll(t, c, 10, time.Second))
		return map[string]any{"before": consumerView(before), "after": consumerView(after), "next": next}
	})
}
