package test

// Consumer configuration defaults and checks (issue 17): the rows of
// js/testdata/consumer_config_rows.json, each a stream configuration, consumers created
// first and one consumer create request, sent raw to each target. A row names the err_code
// (and description) nats-server answers, or the config fields it reports; js's unit test
// (js/consumer_config_test.go) holds natsd's functions to the same rows.

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
)

// consumerConfigRow is one row of js/testdata/consumer_config_rows.json.
type consumerConfigRow struct {
	Name   string          `json:"name"`
	Stream json.RawMessage `json:"stream"` // default: S on foo.> and bar
	Setup  [][2]any        `json:"setup"`  // [subject, body] created (successfully) first
	Subj   string          `json:"subj"`   // after "$JS.API."
	Body   json.RawMessage `json:"body"`   // a JSON string is sent as it is
	Err    int             `json:"err"`    // err_code nats-server answers; 0: success
	Code   int             `json:"code"`   // the error's HTTP-like code, when given
	Desc   string          `json:"desc"`   // the error's description, when given
	Want   map[string]any  `json:"want"`   // config fields of the reply (null: absent)
}

func loadConsumerConfigRows(t *testing.T, path string) []consumerConfigRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("rows: %v", err)
	}
	var rows []consumerConfigRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatalf("rows: %v", err)
	}
	return rows
}

// rawBody is what a row's body puts on the wire.
func rawBody(b json.RawMessage) string {
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	return string(b)
}

func TestJetStreamConsumerConfigRows(t *testing.T) {
	rows := loadConsumerConfigRows(t, "../js/testdata/consumer_config_rows.json")
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, _ := jsStart(t, tg, Config{})
		keepAccountDir(t, nc)
		obs := map[string]any{}
		for _, row := range rows {
			obs[row.Name] = runConsumerConfigRow(t, nc, row)
		}
		if p := os.Getenv("NATSD_CCONFIG_RECORD"); p != "" && tg.name == "nats-server" {
			b, _ := json.MarshalIndent(obs, "", " ")
			_ = os.WriteFile(p, b, 0o644)
		}
		return obs
	})
}

func runConsumerConfigRow(t *testing.T, nc *nats.Conn, row consumerConfigRow) map[string]any {
	t.Helper()
	rawAPI(t, nc, "$JS.API.STREAM.DELETE.S", "")
	stream := string(row.Stream)
	if stream == "" {
		stream = `{"name":"S","subjects":["foo.>","bar"]}`
	}
	if r := rawAPI(t, nc, "$JS.API.STREAM.CREATE.S", stream); apiErrCode(r) != 0 {
		t.Errorf("%s: stream create: %v", row.Name, r)
		return nil
	}
	for _, st := range row.Setup {
		b, _ := json.Marshal(st[1])
		if r := rawAPI(t, nc, "$JS.API."+st[0].(string), string(b)); apiErrCode(r) != 0 || r["request_error"] != nil {
			t.Errorf("%s: setup %s: %v", row.Name, st[0], r)
		}
	}
	r := rawAPI(t, nc, "$JS.API."+row.Subj, rawBody(row.Body))
	out := map[string]any{}
	if e, ok := r["error"].(map[string]any); ok {
		out["error"] = e
	}
	if v, ok := r["request_error"]; ok {
		out["request_error"] = v
	}
	code := apiErrCode(r)
	if row.Err >= 0 && code != row.Err {
		t.Errorf("%s: err_code %d, want %d: %v", row.Name, code, row.Err, r["error"])
	}
	if e, _ := r["error"].(map[string]any); row.Desc != "" && e != nil &&
		(e["description"] != row.Desc || e["code"] != float64(row.Code)) {
		t.Errorf("%s: error %v %q, want %d %q", row.Name, e["code"], e["description"], row.Code, row.Desc)
	}
	if code == 0 {
		cfg, _ := r["config"].(map[string]any)
		got := map[string]any{}
		for k, want := range row.Want {
			v, ok := cfg[k]
			if !ok {
				v = nil
			}
			got[k] = v
			if !reflect.DeepEqual(jsonValue(want), jsonValue(v)) {
				t.Errorf("%s: config %s = %v, want %v", row.Name, k, v, want)
			}
		}
		out["config"] = got
	}
	return out
}

// jsonValue makes numbers and the like compare the same whichever way they were decoded.
func jsonValue(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// keepAccountDir makes a stream that outlives the test's, for tests that delete and create
// again their account's only stream. nats-server (v2.15.2, stream.stop) removes the account's
// streams/ directory and the account directory, if empty, on a goroutine of its own after it
// deletes a stream; a stream created meanwhile can find them gone under its MkdirAll
// ("could not create storage directory - mkdir .../$G/streams: no such file or directory",
// answered as 10049 "error creating store for stream"). With a stream left in place those
// directories are never empty. TestJetStreamRecreateOnlyStream shows the race.
func keepAccountDir(t *testing.T, nc *nats.Conn) {
	t.Helper()
	if r := rawAPI(t, nc, "$JS.API.STREAM.CREATE.KEEP", `{"name":"KEEP","subjects":["keep.account.dir"]}`); apiErrCode(r) != 0 {
		t.Fatalf("create KEEP: %v", r)
	}
}
