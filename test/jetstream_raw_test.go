package test

// JetStream's API by raw request/reply: the JSON each server answers, compared key by key
// with nats-server's once volatile values (times, ids) are taken out.

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// volatileKeys are taken out of observations before they are compared: times and ids
// differ from run to run and from server to server.
var volatileKeys = map[string]bool{
	"created": true, "ts": true, "first_ts": true, "last_ts": true, "time": true,
	"server_id": true, "server_name": true, "id": true, "nonce": true,
}

// presenceKeys are server-specific values (a stream's cluster leader is the server's name,
// its id by default): only whether they are set is compared.
var presenceKeys = map[string]bool{"leader": true}

// jsNormalize turns v into plain JSON values (through encoding/json) without volatile keys.
func jsNormalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal observations: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal observations: %v", err)
	}
	return stripVolatile(out)
}

func stripVolatile(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if volatileKeys[k] {
				delete(x, k)
				continue
			}
			if presenceKeys[k] {
				x[k] = e != nil && e != ""
				continue
			}
			x[k] = stripVolatile(e)
		}
	case []any:
		for i, e := range x {
			x[i] = stripVolatile(e)
		}
	}
	return v
}

// jsonDiff lists, one line per path, where got (from target name) differs from want
// (nats-server's); "" when they are the same.
func jsonDiff(want, got any, name string) string {
	var lines []string
	var walk func(path string, a, b any)
	show := func(v any) string {
		b, _ := json.Marshal(v)
		return trunc(string(b))
	}
	walk = func(path string, a, b any) {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			keys := map[string]bool{}
			for k := range am {
				keys[k] = true
			}
			for k := range bm {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				av, ain := am[k]
				bv, bin := bm[k]
				p := path + "." + k
				switch {
				case !bin:
					lines = append(lines, fmt.Sprintf("%s: missing in %s (nats-server: %s)", p, name, show(av)))
				case !ain:
					lines = append(lines, fmt.Sprintf("%s: only in %s: %s", p, name, show(bv)))
				default:
					walk(p, av, bv)
				}
			}
			return
		}
		as, aok := a.([]any)
		bs, bok := b.([]any)
		if aok && bok && len(as) == len(bs) {
			for i := range as {
				walk(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i])
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			lines = append(lines, fmt.Sprintf("%s: nats-server %s, %s %s", path, show(a), name, show(b)))
		}
	}
	walk("", want, got)
	if len(lines) > 60 {
		lines = append(lines[:60], fmt.Sprintf("... and %d more", len(lines)-60))
	}
	return strings.Join(lines, "\n")
}

// rawAPI sends body to subj and returns the reply decoded from JSON (or what went wrong).
func rawAPI(t *testing.T, nc *nats.Conn, subj, body string) map[string]any {
	t.Helper()
	m, err := nc.Request(subj, []byte(body), jsAPITimeout)
	if err != nil {
		return map[string]any{"request_error": err.Error()}
	}
	var out map[string]any
	if err := json.Unmarshal(m.Data, &out); err != nil {
		return map[string]any{"not_json": string(m.Data)}
	}
	return out
}

// apiErrCode is the err_code of a decoded API reply (0: none).
func apiErrCode(r map[string]any) int {
	e, _ := r["error"].(map[string]any)
	if e == nil {
		return 0
	}
	c, _ := e["err_code"].(float64)
	return int(c)
}

type rawStep struct {
	name    string
	subj    string
	body    string
	errCode int // expected err_code; 0: no error expected; -1: not checked
	check   func(t *testing.T, r map[string]any)
}

// runRawSteps runs steps in order on nc; it returns the replies keyed by step.
func runRawSteps(t *testing.T, nc *nats.Conn, steps []rawStep) map[string]any {
	t.Helper()
	obs := map[string]any{}
	unanswered := 0
	for i, st := range steps {
		r := rawAPI(t, nc, st.subj, st.body)
		obs[fmt.Sprintf("%02d %s", i, st.name)] = r
		if _, bad := r["request_error"]; bad {
			t.Errorf("%s (%s): %v", st.name, st.subj, r["request_error"])
			if unanswered++; unanswered == 3 {
				t.Errorf("three requests in a row unanswered: the server is stuck, giving up")
				return obs
			}
			continue
		}
		unanswered = 0
		if _, bad := r["not_json"]; bad {
			t.Errorf("%s (%s): reply is not JSON: %q", st.name, st.subj, r["not_json"])
			continue
		}
		if st.errCode >= 0 {
			if got := apiErrCode(r); got != st.errCode {
				t.Errorf("%s (%s): err_code %d, want %d: %v", st.name, st.subj, got, st.errCode, r["error"])
				continue
			}
		}
		if st.check != nil {
			st.check(t, r)
		}
	}
	return obs
}

func wantType(typ string) func(t *testing.T, r map[string]any) {
	return func(t *testing.T, r map[string]any) {
		t.Helper()
		if r["type"] != typ {
			t.Errorf("type %v, want %s", r["type"], typ)
		}
	}
}

func TestJetStreamRawAPI(t *testing.T) {
	const ordersCfg = `{"name":"ORDERS","subjects":["orders.*"]}`
	createdCheck := func(t *testing.T, r map[string]any) {
		t.Helper()
		cfg, _ := r["config"].(map[string]any)
		md, _ := cfg["metadata"].(map[string]any)
		for _, k := range []string{"_nats.level", "_nats.req.level", "_nats.ver"} {
			if _, ok := md[k]; !ok {
				t.Errorf("create reply's metadata has no %s: %v", k, md)
			}
		}
		if r["did_create"] != true || r["type"] != "io.nats.jetstream.api.v1.stream_create_response" {
			t.Errorf("create reply: type %v did_create %v", r["type"], r["did_create"])
		}
		for _, k := range []string{"retention", "max_consumers", "max_msgs", "max_bytes", "max_age", "max_msgs_per_subject",
			"max_msg_size", "discard", "storage", "num_replicas", "duplicate_window", "compression", "allow_direct",
			"mirror_direct", "sealed", "deny_delete", "deny_purge", "allow_rollup_hdrs", "consumer_limits"} {
			if _, ok := cfg[k]; !ok {
				t.Errorf("create reply's config has no %s", k)
			}
		}
	}
	steps := []rawStep{
		{"info fresh", "$JS.API.INFO", "", 0, func(t *testing.T, r map[string]any) {
			t.Helper()
			for _, k := range []string{"type", "memory", "storage", "reserved_memory", "reserved_storage", "streams", "consumers", "limits", "api"} {
				if _, ok := r[k]; !ok {
					t.Errorf("$JS.API.INFO has no %s: %v", k, r)
				}
			}
			if api, _ := r["api"].(map[string]any); api["level"] != float64(5) {
				t.Errorf("api %v, want level 5", r["api"])
			}
		}},
		{"create", "$JS.API.STREAM.CREATE.ORDERS", ordersCfg, 0, createdCheck},
		{"create again, same config", "$JS.API.STREAM.CREATE.ORDERS", ordersCfg, 0, nil},
		{"create again, other config", "$JS.API.STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["other.*"]}`, 10058, nil},
		{"create full config", "$JS.API.STREAM.CREATE.FULL", `{"name":"FULL","subjects":["full.>"],"retention":"limits","max_consumers":10,
			"max_msgs":100,"max_bytes":100000,"max_age":3600000000000,"max_msgs_per_subject":5,"max_msg_size":1024,"discard":"new",
			"storage":"memory","num_replicas":1,"duplicate_window":60000000000,"allow_direct":true,"deny_delete":true,
			"allow_rollup_hdrs":true,"description":"everything","metadata":{"owner":"test"}}`, 0, nil},
		{"create default subjects", "$JS.API.STREAM.CREATE.NOSUBJ", `{"name":"NOSUBJ"}`, 0, nil},
		{"create empty body", "$JS.API.STREAM.CREATE.EMPTY", "", 10056, nil},
		{"publish 1", "orders.a", "one", -1, nil},
		{"publish 2", "orders.b", "two", -1, nil},
		{"publish 3", "orders.a", "three", -1, nil},
		{"info", "$JS.API.STREAM.INFO.ORDERS", "", 0, wantType("io.nats.jetstream.api.v1.stream_info_response")},
		{"info subjects_filter", "$JS.API.STREAM.INFO.ORDERS", `{"subjects_filter":"orders.*"}`, 0, nil},
		{"names", "$JS.API.STREAM.NAMES", "", 0, wantType("io.nats.jetstream.api.v1.stream_names_response")},
		{"names by subject", "$JS.API.STREAM.NAMES", `{"subject":"orders.a"}`, 0, nil},
		{"names by unused subject", "$JS.API.STREAM.NAMES", `{"subject":"nobody.here"}`, 0, nil},
		{"names offset", "$JS.API.STREAM.NAMES", `{"offset":1}`, 0, nil},
		{"list", "$JS.API.STREAM.LIST", "", 0, wantType("io.nats.jetstream.api.v1.stream_list_response")},
		{"list by subject", "$JS.API.STREAM.LIST", `{"subject":"full.x.y"}`, 0, nil},
		{"invalid JSON", "$JS.API.STREAM.CREATE.BAD", `{"name":`, 10025, nil},
		{"unknown field", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":["bad"],"bogus":true}`, 10025, nil},
		{"name mismatch", "$JS.API.STREAM.CREATE.BAD", `{"name":"OTHER","subjects":["bad"]}`, 10056, nil},
		{"invalid name *", "$JS.API.STREAM.CREATE.a*b", `{"name":"a*b"}`, 10052, nil},
		{"invalid name >", "$JS.API.STREAM.CREATE.a>b", `{"name":"a>b"}`, 10052, nil},
		{"invalid name backslash", `$JS.API.STREAM.CREATE.a\b`, `{"name":"a\\b"}`, 10128, nil},
		{"invalid name slash", "$JS.API.STREAM.CREATE.a/b", `{"name":"a/b"}`, 10128, nil},
		{"overlapping subjects", "$JS.API.STREAM.CREATE.OVER", `{"name":"OVER","subjects":["orders.>"]}`, 10065, nil},
		{"max_age below 100ms", "$JS.API.STREAM.CREATE.AGE", `{"name":"AGE","max_age":1000000}`, 10052, nil},
		{"deny_purge and allow_rollup", "$JS.API.STREAM.CREATE.ROLL", `{"name":"ROLL","deny_purge":true,"allow_rollup_hdrs":true}`, 10052, nil},
		{"update storage", "$JS.API.STREAM.UPDATE.ORDERS", `{"name":"ORDERS","subjects":["orders.*"],"storage":"memory"}`, 10052, nil},
		{"update", "$JS.API.STREAM.UPDATE.ORDERS", `{"name":"ORDERS","subjects":["orders.*","refunds.*"],"max_msgs":1000}`, 0,
			wantType("io.nats.jetstream.api.v1.stream_update_response")},
		{"msg get", "$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":2}`, 0, wantType("io.nats.jetstream.api.v1.stream_msg_get_response")},
		{"msg get last_by_subj", "$JS.API.STREAM.MSG.GET.ORDERS", `{"last_by_subj":"orders.a"}`, 0, nil},
		{"msg get next_by_subj", "$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":2,"next_by_subj":"orders.a"}`, 0, nil},
		{"msg get not found", "$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":99}`, 10037, nil},
		{"msg get last_by_subj not found", "$JS.API.STREAM.MSG.GET.ORDERS", `{"last_by_subj":"orders.zz"}`, 10037, nil},
		{"msg get empty request", "$JS.API.STREAM.MSG.GET.ORDERS", `{}`, -1, nil},
		{"msg delete", "$JS.API.STREAM.MSG.DELETE.ORDERS", `{"seq":2}`, 0, wantType("io.nats.jetstream.api.v1.stream_msg_delete_response")},
		{"msg delete again", "$JS.API.STREAM.MSG.DELETE.ORDERS", `{"seq":2}`, 10043, nil},
		{"msg delete past the end", "$JS.API.STREAM.MSG.DELETE.ORDERS", `{"seq":99}`, 10057, nil},
		{"msg delete no_erase", "$JS.API.STREAM.MSG.DELETE.ORDERS", `{"seq":1,"no_erase":true}`, 0, nil},
		{"msg delete below first", "$JS.API.STREAM.MSG.DELETE.ORDERS", `{"seq":1}`, 10057, nil},
		{"info deleted_details", "$JS.API.STREAM.INFO.ORDERS", `{"deleted_details":true}`, 0, nil},
		{"publish 4", "orders.a", "four", -1, nil},
		{"purge filter keep", "$JS.API.STREAM.PURGE.ORDERS", `{"filter":"orders.a","keep":1}`, 0, func(t *testing.T, r map[string]any) {
			t.Helper()
			if r["success"] != true || r["purged"] != float64(1) {
				t.Errorf("purge: %v, want success purged 1", r)
			}
		}},
		{"purge all", "$JS.API.STREAM.PURGE.ORDERS", "", 0, nil},
		{"info missing", "$JS.API.STREAM.INFO.MISSING", "", 10059, nil},
		{"update missing", "$JS.API.STREAM.UPDATE.MISSING", `{"name":"MISSING","subjects":["missing"]}`, 10059, nil},
		{"delete missing", "$JS.API.STREAM.DELETE.MISSING", "", 10059, wantType("io.nats.jetstream.api.v1.stream_delete_response")},
		{"purge missing", "$JS.API.STREAM.PURGE.MISSING", "", 10059, nil},
		{"msg get missing", "$JS.API.STREAM.MSG.GET.MISSING", `{"seq":1}`, 10059, nil},
		{"msg delete missing", "$JS.API.STREAM.MSG.DELETE.MISSING", `{"seq":1}`, 10059, nil},
		{"delete", "$JS.API.STREAM.DELETE.FULL", "", 0, func(t *testing.T, r map[string]any) {
			t.Helper()
			if r["success"] != true {
				t.Errorf("delete: %v", r)
			}
		}},
		{"names after delete", "$JS.API.STREAM.NAMES", "", 0, nil},
		{"info at the end", "$JS.API.INFO", "", 0, nil},
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, _ := jsStart(t, tg, Config{})
		return runRawSteps(t, nc, steps)
	})
}

// directReply is one reply to a direct get as observed.
func directReply(m *nats.Msg) map[string]any {
	return map[string]any{"header": headerObs(m.Header), "data": string(m.Data)}
}

// directGet sends a direct get and collects its replies: one for a plain get, up to and
// including the status-bearing terminator for a batch.
func directGet(t *testing.T, nc *nats.Conn, subj, body string, batch bool) []any {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subj, inbox, []byte(body)); err != nil {
		t.Fatal(err)
	}
	var out []any
	for {
		m, err := sub.NextMsg(jsAPITimeout)
		if err != nil {
			t.Errorf("%s %s: after %d replies: %v", subj, body, len(out), err)
			return append(out, map[string]any{"error": err.Error()})
		}
		out = append(out, directReply(m))
		if !batch || m.Header.Get("Status") != "" || len(out) > 20 {
			return out
		}
	}
}

func TestJetStreamRawDirectGet(t *testing.T) {
	type tc struct {
		name   string
		subj   string // after $JS.API.DIRECT.GET.
		body   string
		batch  bool
		seqs   []string // Nats-Sequence of each reply, "" for the terminator
		status string   // the last reply's Status ("" = a message)
	}
	cases := []tc{
		{"seq", "DG", `{"seq":1}`, false, []string{"1"}, ""},
		{"seq with header", "DG", `{"seq":2}`, false, []string{"2"}, ""},
		{"seq not found", "DG", `{"seq":99}`, false, []string{""}, "404"},
		{"last_by_subj", "DG", `{"last_by_subj":"dg.a"}`, false, []string{"3"}, ""},
		{"last_by_subj wildcard", "DG", `{"last_by_subj":"dg.*"}`, false, []string{"5"}, ""},
		{"last_by_subj not found", "DG", `{"last_by_subj":"dg.zz"}`, false, []string{""}, "404"},
		{"subject form", "DG.dg.b", "", false, []string{"4"}, ""},
		{"subject form not found", "DG.dg.zz", "", false, []string{""}, "404"},
		{"next_by_subj", "DG", `{"next_by_subj":"dg.a","seq":2}`, false, []string{"3"}, ""},
		{"next_by_subj from 0", "DG", `{"next_by_subj":"dg.b"}`, false, []string{"2"}, ""},
		{"next_by_subj none left", "DG", `{"next_by_subj":"dg.a","seq":4}`, false, []string{""}, "404"},
		{"batch from 1", "DG", `{"batch":3,"seq":1}`, true, []string{"1", "2", "3", ""}, "204"},
		{"batch past the end", "DG", `{"batch":3,"seq":4}`, true, []string{"4", "5", ""}, "204"},
		{"batch with next_by_subj", "DG", `{"batch":5,"next_by_subj":"dg.a"}`, true, []string{"1", "3", ""}, "204"},
		{"batch max_bytes", "DG", `{"batch":5,"seq":1,"max_bytes":10}`, true, nil, "204"},
		{"batch nothing", "DG", `{"batch":3,"seq":99}`, true, []string{""}, "404"},
		{"multi_last wildcard", "DG", `{"multi_last":["dg.*"]}`, true, []string{"3", "4", "5", ""}, "204"},
		{"multi_last subjects", "DG", `{"multi_last":["dg.a","dg.c"]}`, true, []string{"3", "5", ""}, "204"},
		{"multi_last up_to_seq", "DG", `{"multi_last":["dg.*"],"up_to_seq":2}`, true, []string{"1", "2", ""}, "204"},
		{"multi_last batch", "DG", `{"multi_last":["dg.*"],"batch":2}`, true, nil, "204"},
		{"multi_last no match", "DG", `{"multi_last":["nothing"]}`, true, []string{""}, "404"},
		{"bad request", "DG", `not json`, false, []string{""}, "408"},
		{"empty request", "DG", ``, false, []string{""}, "408"},
		{"seq and last_by_subj", "DG", `{"seq":1,"last_by_subj":"dg.a"}`, false, []string{""}, "408"},
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, _ := jsStart(t, tg, Config{})
		for _, r := range []rawStep{
			{"create", "$JS.API.STREAM.CREATE.DG", `{"name":"DG","subjects":["dg.*"],"allow_direct":true}`, 0, nil},
			{"create plain", "$JS.API.STREAM.CREATE.PLAIN", `{"name":"PLAIN","subjects":["plain.*"]}`, 0, nil},
		} {
			runRawSteps(t, nc, []rawStep{r})
		}
		pub := func(subj, data string, h nats.Header) {
			t.Helper()
			if _, err := nc.RequestMsg(&nats.Msg{Subject: subj, Data: []byte(data), Header: h}, jsAPITimeout); err != nil {
				t.Fatalf("publish %s: %v", subj, err)
			}
		}
		pub("dg.a", "1", nil)
		pub("dg.b", "2", nats.Header{"X-Test": {"yes"}})
		pub("dg.a", "3", nil)
		pub("dg.b", "4", nil)
		pub("dg.c", "5", nil)
		pub("plain.a", "1", nil)
		obs := map[string]any{}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				replies := directGet(t, nc, "$JS.API.DIRECT.GET."+c.subj, c.body, c.batch)
				obs[c.name] = replies
				last, _ := replies[len(replies)-1].(map[string]any)
				h, _ := last["header"].(map[string]any)
				if st, _ := h["Status"].(string); st != c.status {
					t.Errorf("last reply's status %q, want %q: %v", st, c.status, replies)
				}
				if c.seqs != nil {
					var seqs []string
					for _, r := range replies {
						rh, _ := r.(map[string]any)["header"].(map[string]any)
						s, _ := rh["Nats-Sequence"].(string)
						seqs = append(seqs, s)
					}
					if strings.Join(seqs, ",") != strings.Join(c.seqs, ",") {
						t.Errorf("sequences %v, want %v", seqs, c.seqs)
					}
				}
				for _, r := range replies {
					rh, _ := r.(map[string]any)["header"].(map[string]any)
					if rh["Status"] == nil && (rh["Nats-Stream"] != "DG" || rh["Nats-Time-Stamp"] != true || rh["Nats-Subject"] == nil) {
						t.Errorf("message reply headers %v", rh)
					}
				}
			})
		}
		// No direct get on a stream without allow_direct, nor on a missing stream.
		for _, subj := range []string{"$JS.API.DIRECT.GET.PLAIN", "$JS.API.DIRECT.GET.MISSING"} {
			_, err := nc.Request(subj, []byte(`{"seq":1}`), 300*time.Millisecond)
			obs[subj] = fmt.Sprint(err)
			if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
				t.Errorf("%s: %v, want no reply", subj, err)
			}
		}
		return obs
	})
}

func TestJetStreamRawNoReply(t *testing.T) {
	subjects := []string{
		"$JS.API.STREAM.BOGUS",
		"$JS.API.NOPE",
		"$JS.API.STREAM.CREATE.a.b",
		"$JS.API.STREAM.INFO",
	}
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, _ := jsStart(t, tg, Config{})
		obs := map[string]any{}
		for _, subj := range subjects {
			m, err := nc.Request(subj, []byte(`{"name":"a.b"}`), 300*time.Millisecond)
			if err == nil {
				t.Errorf("%s: replied %q", subj, m.Data)
				obs[subj] = string(m.Data)
				continue
			}
			obs[subj] = err.Error()
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("%s: %v, want a timeout or no responders", subj, err)
			}
		}
		return obs
	})
}
