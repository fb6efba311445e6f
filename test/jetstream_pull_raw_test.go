package test

// Pull requests sent raw ($JS.API.CONSUMER.MSG.NEXT) to both servers: the messages and the
// status replies (404, 408 with pending counts, 409 variants, 400, 423, 100 heartbeats) must
// be the same.

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pullObs sends one pull request and records what comes back until quiet (or done).
func pullObs(t *testing.T, nc *nats.Conn, stream, consumer, body string, quiet time.Duration) []string {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+stream+"."+consumer, inbox, []byte(body)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		m, err := sub.NextMsg(quiet)
		if err != nil {
			return out
		}
		if st := m.Header.Get("Status"); st != "" {
			s := st + " " + m.Header.Get("Description")
			if v := m.Header.Get("Nats-Pending-Messages"); v != "" {
				s += fmt.Sprintf(" pending=%s/%s", v, m.Header.Get("Nats-Pending-Bytes"))
			}
			// How many heartbeats fit before the request expires is timing: a run of them
			// is recorded once.
			if st != "100" || len(out) == 0 || out[len(out)-1] != s {
				out = append(out, s)
			}
			if st != "100" {
				return out
			}
			continue
		}
		s := "msg " + m.Subject + " " + string(m.Data)
		if p := m.Header.Get("Nats-Pin-Id"); p != "" {
			s += " pinned"
		}
		out = append(out, s)
	}
}

func TestJSPullStatusRaw(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		mk := func(cfg jetstream.ConsumerConfig) {
			if _, err := s.CreateOrUpdateConsumer(ctx, cfg); err != nil {
				t.Fatalf("consumer %s: %v", cfg.Durable, err)
			}
		}
		mk(jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy, MaxRequestBatch: 5, MaxWaiting: 1})
		mk(jetstream.ConsumerConfig{Durable: "P", DeliverSubject: "push.p", AckPolicy: jetstream.AckExplicitPolicy})
		obs := map[string]any{}
		q := 300 * time.Millisecond
		obs["nowait_empty"] = pullObs(t, nc, "S", "D", `{"batch":1,"no_wait":true}`, q)
		obs["expires_empty"] = pullObs(t, nc, "S", "D", `{"batch":2,"expires":200000000}`, q)
		obs["too_big_batch"] = pullObs(t, nc, "S", "D", `{"batch":6,"expires":200000000}`, q)
		obs["push"] = pullObs(t, nc, "S", "P", ``, q)
		obs["hb_too_large"] = pullObs(t, nc, "S", "D", `{"batch":1,"expires":200000000,"idle_heartbeat":150000000}`, q)
		obs["bad_json"] = pullObs(t, nc, "S", "D", `{"batch":"x"}`, q)
		obs["heartbeats"] = pullObs(t, nc, "S", "D", `{"batch":1,"expires":450000000,"idle_heartbeat":200000000}`, q)
		publishN(t, js, "s.a", 2)
		obs["partial"] = pullObs(t, nc, "S", "D", `{"batch":3,"expires":300000000}`, 2*q)
		publishN(t, js, "s.a", 2)
		obs["max_bytes"] = pullObs(t, nc, "S", "D", `{"batch":3,"max_bytes":10,"expires":300000000}`, q)
		obs["nowait_some"] = pullObs(t, nc, "S", "D", `{"batch":5,"no_wait":true}`, q)
		obs["plain_number"] = pullObs(t, nc, "S", "D", `2`, q)
		// MaxWaiting 1: a second waiting request is refused.
		in1 := nats.NewInbox()
		s1, _ := nc.SubscribeSync(in1)
		_ = nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.S.D", in1, []byte(`{"batch":1,"expires":1000000000}`))
		_ = nc.Flush()
		obs["max_waiting"] = pullObs(t, nc, "S", "D", `{"batch":1,"expires":1000000000}`, q)
		_ = s1.Unsubscribe()
		// Priority groups.
		mk(jetstream.ConsumerConfig{Durable: "PIN", AckPolicy: jetstream.AckExplicitPolicy, PriorityGroups: []string{"g"},
			PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: time.Minute})
		mk(jetstream.ConsumerConfig{Durable: "OV", AckPolicy: jetstream.AckExplicitPolicy, PriorityGroups: []string{"g"},
			PriorityPolicy: jetstream.PriorityPolicyOverflow})
		obs["pin_no_group"] = pullObs(t, nc, "S", "PIN", `{"batch":1,"expires":200000000}`, q)
		obs["pin_bad_group"] = pullObs(t, nc, "S", "PIN", `{"batch":1,"expires":200000000,"group":"h"}`, q)
		obs["pin_first"] = pullObs(t, nc, "S", "PIN", `{"batch":1,"expires":200000000,"group":"g"}`, q)
		obs["pin_wrong"] = pullObs(t, nc, "S", "PIN", `{"batch":1,"expires":200000000,"group":"g","id":"nope"}`, q)
		obs["ov_not_overflow"] = pullObs(t, nc, "S", "PIN", `{"batch":1,"expires":200000000,"group":"g","min_pending":1}`, q)
		obs["ov_below"] = pullObs(t, nc, "S", "OV", `{"batch":1,"expires":200000000,"group":"g","min_pending":100}`, q)
		obs["ov_met"] = pullObs(t, nc, "S", "OV", `{"batch":1,"expires":200000000,"group":"g","min_pending":2}`, q)
		obs["ov_priority"] = pullObs(t, nc, "S", "OV", `{"batch":1,"expires":200000000,"group":"g","priority":10}`, q)
		return obs
	})
}

// The consumer API requests a standalone server answers without a consumer to act on:
// stepdown and peer removal (clustering required), unpin's request checks.
func TestJSConsumerAdminRaw(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		s := mustStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
		if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "PIN", AckPolicy: jetstream.AckExplicitPolicy,
			PriorityGroups: []string{"g"}, PriorityPolicy: jetstream.PriorityPolicyPinned}); err != nil {
			t.Fatal(err)
		}
		obs := map[string]any{}
		for _, r := range []struct{ subj, body string }{
			{"$JS.API.CONSUMER.LEADER.STEPDOWN.S.C", ""},
			{"$JS.API.CONSUMER.LEADER.STEPDOWN.S.NOPE", ""},
			{"$JS.API.CONSUMER.PEER.REMOVE.S.C", `{"peer":"x"}`},
			{"$JS.API.CONSUMER.UNPIN.S.C", ""},
			{"$JS.API.CONSUMER.UNPIN.S.C", `{}`},
			{"$JS.API.CONSUMER.UNPIN.S.C", `{"group":"bad name!"}`},
			{"$JS.API.CONSUMER.UNPIN.S.C", `{"group":"g"}`},
			{"$JS.API.CONSUMER.UNPIN.S.NOPE", `{"group":"g"}`},
			{"$JS.API.CONSUMER.UNPIN.NOPE.C", `{"group":"g"}`},
			{"$JS.API.CONSUMER.UNPIN.S.PIN", `{"group":"h"}`},
			{"$JS.API.CONSUMER.UNPIN.S.PIN", `{"group":"g"}`},
		} {
			m, err := nc.Request(r.subj, []byte(r.body), 2*time.Second)
			if err != nil {
				obs[r.subj+" "+r.body] = err.Error()
				continue
			}
			obs[r.subj+" "+r.body] = string(m.Data)
		}
		return obs
	})
}
