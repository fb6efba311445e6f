package test

// JetStream consumers through nats.go's jetstream package, on each target, compared with
// nats-server's observations of the same scenario.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func jsCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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
