package js

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// consumerConfigRow is one row of testdata/consumer_config_rows.json: a stream, consumers
// created first, and one create request, with what nats-server v2.15.2 answered
// (test/jetstream_consumer_config_test.go sends the same rows to the servers).
type consumerConfigRow struct {
	Name   string          `json:"name"`
	Stream json.RawMessage `json:"stream"`
	Setup  [][2]any        `json:"setup"`
	Subj   string          `json:"subj"`
	Body   json.RawMessage `json:"body"`
	Err    int             `json:"err"`
	Code   int             `json:"code"`
	Desc   string          `json:"desc"`
	Want   map[string]any  `json:"want"`
	Layer  string          `json:"layer"` // "store": the consumer store's error, not the config's
}

// consumerRig plays a create request through the config functions as the API serves it.
type consumerRig struct {
	stream    StreamConfig
	lim       consumerLimits
	consumers map[string]*ConsumerConfig
	order     []string
	gen       int
}

func newConsumerRig(t *testing.T, stream json.RawMessage) *consumerRig {
	t.Helper()
	if len(stream) == 0 {
		stream = json.RawMessage(`{"name":"S","subjects":["foo.>","bar"]}`)
	}
	r := &consumerRig{consumers: map[string]*ConsumerConfig{}}
	if err := json.Unmarshal(stream, &r.stream); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(r.stream.Subjects) == 0 {
		r.stream.Subjects = []string{r.stream.Name}
	}
	if r.stream.Replicas == 0 {
		r.stream.Replicas = 1
	}
	if r.stream.Retention == "" {
		r.stream.Retention = LimitsPolicy
	}
	r.lim = consumerLimits{stream: &r.stream, account: Unlimited}
	return r
}

func (r *consumerRig) create(subj string, body []byte) (*ConsumerConfig, *APIError) {
	var req CreateConsumerRequest
	if e := decode(body, &req, true); e != nil {
		return nil, e
	}
	stream, name, e := createTarget(strings.Split(subj, "."), &req)
	if e != nil {
		return nil, e
	}
	if req.Config.Replicas > 1 {
		return nil, JSStreamReplicasNotSupportedErr
	}
	if stream != r.stream.Name {
		return nil, JSStreamNotFoundErr
	}
	lim := r.lim
	lim.action = req.Action
	var others []*ConsumerConfig
	for _, n := range r.order {
		if n == name {
			lim.existing = r.consumers[n]
			continue
		}
		others = append(others, r.consumers[n])
	}
	cfg, e := prepareConsumerConfig(&req, lim, others)
	if e != nil {
		return nil, e
	}
	if old := lim.existing; old != nil {
		if cfg.InactiveThreshold != old.InactiveThreshold {
			stampInactiveThreshold(cfg, old.Durable == "")
		}
		r.consumers[name] = cfg
		return cfg, nil
	}
	if name == "" {
		r.gen++
		name = fmt.Sprintf("gen%d", r.gen)
		cfg.Name = name
	}
	stampInactiveThreshold(cfg, cfg.Durable == "")
	r.consumers[name] = cfg
	r.order = append(r.order, name)
	return cfg, nil
}

func rowBody(b json.RawMessage) []byte {
	var s string
	if json.Unmarshal(b, &s) == nil {
		return []byte(s)
	}
	return b
}

func TestConsumerConfigRows(t *testing.T) {
	b, err := os.ReadFile("testdata/consumer_config_rows.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []consumerConfigRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		t.Run(row.Name, func(t *testing.T) {
			if row.Layer == "store" {
				t.Skip("the consumer store refuses this name (file name too long), not the config checks")
			}
			rig := newConsumerRig(t, row.Stream)
			for _, st := range row.Setup {
				body, _ := json.Marshal(st[1])
				if _, e := rig.create(st[0].(string), body); e != nil {
					t.Fatalf("setup %s: %v", st[0], e)
				}
			}
			cfg, e := rig.create(row.Subj, rowBody(row.Body))
			if row.Err != 0 {
				if e == nil {
					t.Fatalf("no error, want %d %q", row.Err, row.Desc)
				}
				if int(e.ErrCode) != row.Err || e.Code != row.Code || e.Description != row.Desc {
					t.Fatalf("error %d/%d %q, want %d/%d %q", e.Code, e.ErrCode, e.Description, row.Code, row.Err, row.Desc)
				}
				return
			}
			if e != nil {
				t.Fatalf("error %d %q, want none", e.ErrCode, e.Description)
			}
			jb, _ := json.Marshal(cfg)
			var got map[string]any
			_ = json.Unmarshal(jb, &got)
			for k, want := range row.Want {
				if md, ok := want.(map[string]any); ok && k == "metadata" {
					// The info reply adds the server's levels; the stored config has none.
					delete(md, "_nats.level")
					delete(md, "_nats.ver")
				}
				if !reflect.DeepEqual(jsonRoundTrip(want), jsonRoundTrip(got[k])) {
					t.Errorf("config %s = %v, want %v", k, got[k], want)
				}
			}
		})
	}
}

func jsonRoundTrip(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// Limits the servers in the comparison test run without: the server's and the account's.
func TestConsumerConfigServerLimits(t *testing.T) {
	stream := &StreamConfig{Name: "S", Subjects: []string{"foo.>"}, Replicas: 1, Retention: LimitsPolicy}
	cases := []struct {
		name     string
		cfg      ConsumerConfig
		lim      consumerLimits
		pedantic bool
		err      string // "" none
		check    func(t *testing.T, c *ConsumerConfig)
	}{
		{name: "server max_ack_pending lowers the default", cfg: ConsumerConfig{AckPolicy: AckExplicit},
			lim: consumerLimits{maxAckPending: 100, account: Unlimited},
			check: func(t *testing.T, c *ConsumerConfig) {
				if c.MaxAckPending != 100 {
					t.Errorf("max_ack_pending %d, want 100", c.MaxAckPending)
				}
			}},
		{name: "account max_ack_pending lower still", cfg: ConsumerConfig{AckPolicy: AckExplicit},
			lim: consumerLimits{maxAckPending: 100, account: AccountLimits{MaxAckPending: 20}},
			check: func(t *testing.T, c *ConsumerConfig) {
				if c.MaxAckPending != 20 {
					t.Errorf("max_ack_pending %d, want 20", c.MaxAckPending)
				}
			}},
		{name: "server limit above the default keeps 1000", cfg: ConsumerConfig{AckPolicy: AckExplicit},
			lim: consumerLimits{maxAckPending: 5000},
			check: func(t *testing.T, c *ConsumerConfig) {
				if c.MaxAckPending != 1000 {
					t.Errorf("max_ack_pending %d, want 1000", c.MaxAckPending)
				}
			}},
		{name: "over the server's max_ack_pending", cfg: ConsumerConfig{AckPolicy: AckExplicit, MaxAckPending: 200},
			lim: consumerLimits{maxAckPending: 100}, err: "400/10121 consumer max ack pending exceeds system limit of 100"},
		{name: "over the account's max_ack_pending", cfg: ConsumerConfig{AckPolicy: AckExplicit, MaxAckPending: 200},
			lim: consumerLimits{account: AccountLimits{MaxAckPending: 150}}, err: "400/10121 consumer max ack pending exceeds system limit of 150"},
		{name: "server max_request_batch is the pull default", cfg: ConsumerConfig{},
			lim: consumerLimits{maxRequestBatch: 50},
			check: func(t *testing.T, c *ConsumerConfig) {
				if c.MaxRequestBatch != 50 {
					t.Errorf("max_batch %d, want 50", c.MaxRequestBatch)
				}
			}},
		{name: "server max_request_batch not for push", cfg: ConsumerConfig{DeliverSubject: "dlv"},
			lim: consumerLimits{maxRequestBatch: 50},
			check: func(t *testing.T, c *ConsumerConfig) {
				if c.MaxRequestBatch != 0 {
					t.Errorf("max_batch %d, want 0", c.MaxRequestBatch)
				}
			}},
		{name: "server max_request_batch pedantic", cfg: ConsumerConfig{}, pedantic: true,
			lim: consumerLimits{maxRequestBatch: 50}, err: "400/10157 pedantic mode: max_request_batch must be set if it's JetStream limits are set"},
		{name: "over the server's max_request_batch", cfg: ConsumerConfig{MaxRequestBatch: 60},
			lim: consumerLimits{maxRequestBatch: 50}, err: "400/10125 consumer max request batch exceeds server limit of 50"},
		{name: "account max_consumers", cfg: ConsumerConfig{},
			lim: consumerLimits{account: AccountLimits{MaxConsumers: 1}, existing: nil}, err: "400/10026 maximum consumers limit reached"},
		{name: "server default_max_consumers", cfg: ConsumerConfig{},
			lim: consumerLimits{defaultMaxConsumers: 1}, err: "400/10026 maximum consumers limit reached"},
		{name: "durable and name differ", cfg: ConsumerConfig{Durable: "A", Name: "B"},
			err: "400/10132 Consumer Durable and Name have to be equal if both are provided"},
		{name: "preferred placement", cfg: ConsumerConfig{},
			lim: consumerLimits{stream: &StreamConfig{Name: "S", Replicas: 1, Placement: &Placement{Preferred: "x"}}},
			err: "500/10052 preferred server not permitted in placement"},
		{name: "replicas over the stream's", cfg: ConsumerConfig{Replicas: 3},
			err: "400/10126 consumer config replica count exceeds parent stream"},
		{name: "interest stream replicas must match", cfg: ConsumerConfig{Replicas: 1},
			lim: consumerLimits{stream: &StreamConfig{Name: "S", Replicas: 3, Retention: InterestPolicy}},
			err: "400/10134 consumer config replicas must match interest retention stream's replicas"},
	}
	others := []*ConsumerConfig{{Durable: "X", FilterSubject: "foo.x"}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			if c.lim.stream == nil {
				c.lim.stream = stream
			}
			e := setConsumerDefaults(&cfg, c.lim, c.pedantic)
			if e == nil {
				e = checkConsumerConfig(&cfg, c.lim, others)
			}
			got := ""
			if e != nil {
				got = fmt.Sprintf("%d/%d %s", e.Code, e.ErrCode, e.Description)
			}
			if got != c.err {
				t.Fatalf("error %q, want %q", got, c.err)
			}
			if c.check != nil {
				c.check(t, &cfg)
			}
		})
	}
}

func TestConsumerUpdateDeliverInterest(t *testing.T) {
	old := &ConsumerConfig{Durable: "C", DeliverSubject: "a", DeliverPolicy: DeliverAll, AckPolicy: AckNone, ReplayPolicy: ReplayInstant}
	cfg := *old
	cfg.DeliverSubject = "b"
	if e := checkConsumerUpdateWith(old, &cfg, func(s string) bool { return s == "a" }); e != JSConsumerNameExistErr {
		t.Fatalf("bound push consumer moved: %v, want 10013", e)
	}
	if e := checkConsumerUpdate(old, &cfg); e != nil {
		t.Fatalf("unbound push consumer moved: %v", e)
	}
	t1 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.In(time.FixedZone("x", 3600))
	a, b := *old, *old
	a.OptStartTime, b.OptStartTime = &t1, &t2
	a.DeliverPolicy, b.DeliverPolicy = DeliverByStartTime, DeliverByStartTime
	if e := checkConsumerUpdate(&a, &b); e != nil {
		t.Fatalf("same start time in another zone: %v", e)
	}
}

func TestCreateTargetTokens(t *testing.T) {
	for _, tc := range []struct {
		subj, stream, name string
	}{
		{"CONSUMER.CREATE.S", "S", ""},
		{"CREATE.S", "S", ""},
		{"CONSUMER.CREATE.S.C", "S", "C"},
		{"CONSUMER.CREATE.S.C.foo.bar.>", "S", "C"},
		{"CONSUMER.DURABLE.CREATE.S.C", "S", "C"},
		{"DURABLE.CREATE.S.C", "S", "C"},
	} {
		req := &CreateConsumerRequest{Stream: "S", Config: &ConsumerConfig{Durable: tc.name}}
		if strings.HasSuffix(tc.subj, ".>") {
			req.Config.FilterSubject = "foo.bar.>"
		}
		s, n, e := createTarget(strings.Split(tc.subj, "."), req)
		if e != nil || s != tc.stream || n != tc.name {
			t.Errorf("%s: %q %q %v, want %q %q", tc.subj, s, n, e, tc.stream, tc.name)
		}
	}
}
