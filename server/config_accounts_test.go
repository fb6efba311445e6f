package server

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// nsLoad is nats-server's verdict on a config file: ProcessConfigFile, then NewServer (the
// checks it makes when the server is created: the system account, no_auth_user). The
// options are returned for inspection.
func nsLoad(path string) (*natsserver.Options, error) {
	o, err := natsserver.ProcessConfigFile(path)
	if err != nil {
		return nil, err
	}
	o.NoLog, o.NoSigs, o.Port = true, true, -1
	s, err := natsserver.NewServer(o)
	if err != nil {
		return nil, err
	}
	s.Shutdown()
	return o, nil
}

// reasons strips the "file:line:col: " of each line of a config error.
var locPrefix = regexp.MustCompile(`(?m)^[^\s:]+:\d+:\d+: `)

func reasons(err error) string { return locPrefix.ReplaceAllString(err.Error(), "") }

func testNkeys(t *testing.T) (acc, acc2, user, user2 string) {
	t.Helper()
	mk := func(f func() (nkeys.KeyPair, error)) string {
		kp, err := f()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		return pub
	}
	return mk(nkeys.CreateAccount), mk(nkeys.CreateAccount), mk(nkeys.CreateUser), mk(nkeys.CreateUser)
}

// accountCase is one config for both parsers. err is natsd's reason when it refuses ("": the
// file is valid); nats-server must then refuse too, with err or one of ns (its text varies
// with the order it walks maps in). nsMayAccept: nats-server accepts in some walk orders (a
// file it refuses in others), natsd refuses always. deviation: nats-server accepts a file
// natsd refuses on purpose (why).
type accountCase struct {
	name        string
	body        string
	err         string
	ns          []string
	nsMayAccept bool
	deviation   string
}

func runAccountCases(t *testing.T, cases []accountCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConf(t, tc.body)
			o := &Options{}
			_, err := o.ProcessConfigFile(path)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("natsd refuses a valid file: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("natsd accepts, want %q", tc.err)
			case err != nil:
				if !strings.Contains(reasons(err), tc.err) {
					t.Fatalf("natsd: %v\nwant %q", err, tc.err)
				}
				for _, line := range strings.Split(err.Error(), "\n") {
					if !located.MatchString(line) {
						t.Fatalf("natsd error not located: %q", line)
					}
				}
			}
			// nats-server walks maps in random order: several runs where its text may vary.
			runs := 1
			if len(tc.ns) > 0 || tc.nsMayAccept {
				runs = 8
			}
			for range runs {
				_, nerr := nsLoad(path)
				switch {
				case tc.deviation != "":
					if nerr != nil {
						t.Fatalf("nats-server refuses (%v); the case says it accepts (%s)", nerr, tc.deviation)
					}
					return
				case nerr == nil && tc.err != "" && !tc.nsMayAccept:
					t.Fatalf("nats-server accepts; natsd: %v", err)
				case nerr != nil && tc.err == "":
					t.Fatalf("nats-server refuses a file natsd accepts: %v", nerr)
				case nerr != nil:
					got := reasons(nerr)
					ok := strings.Contains(got, tc.err)
					for _, alt := range tc.ns {
						ok = ok || strings.Contains(got, alt)
					}
					if !ok {
						t.Fatalf("nats-server: %q\nnatsd:       %q", got, reasons(err))
					}
				}
			}
		})
	}
}

func TestConfigAccountsBlock(t *testing.T) {
	accKey, _, userKey, userKey2 := testNkeys(t)
	runAccountCases(t, []accountCase{
		{name: "names array", body: "accounts: [A, B]\n"},
		{name: "names array reserved", body: "accounts: [A, \"$G\"]\n", err: `"$G" is a Reserved Account`},
		{name: "names array duplicate", body: "accounts: [A, B, A]\n", err: "Duplicate Account Entry: A"},
		{name: "reserved", body: "accounts { $G: {} }\n", err: `"$G" is a Reserved Account`},
		{name: "$SYS may be declared", body: "accounts { $SYS: { users: [{user: s, password: s}] } }\n"},
		{name: "not a map", body: "accounts { A: 5 }\n", err: "Expected map entries for accounts"},
		{name: "unknown field", body: "accounts {\n  A: {\n    bogus: 1\n  }\n}\n", err: `unknown field "bogus"`},
		{name: "ignored value", body: "accounts: 5\n"},
		{name: "nkey", body: "accounts { A: { nkey: " + accKey + " } }\n"},
		{name: "bad nkey", body: "accounts { A: { nkey: " + userKey + " } }\n", err: `Not a valid public nkey for an account: "` + userKey + `"`},
		{name: "users and nkeys", body: "accounts {\n A: { users: [{user: a, password: a}, {nkey: " + userKey + "}] }\n B: { users: [{user: b, password: b, permissions: {publish: \"b.>\"}}] }\n}\n"},
		{name: "user in two accounts", body: "accounts { A: { users: [{user: a}] }, B: { users: [{user: a}] } }\n", err: `Duplicate user "a" detected`},
		{name: "nkey in two accounts", body: "accounts { A: { users: [{nkey: " + userKey + "}] }, B: { users: [{nkey: " + userKey + "}, {nkey: " + userKey2 + "}] } }\n", err: `Duplicate nkey "` + userKey + `" detected`},
		{name: "user in authorization and an account, authorization first", body: "authorization { users: [{user: a}] }\naccounts { B: { users: [{user: a}] } }\n", err: `Duplicate user "a" detected`},
		{name: "user in authorization and an account, accounts first", body: "accounts { B: { users: [{user: a}] } }\nauthorization { users: [{user: a}] }\n", err: `Duplicate user "a" detected`},
		{name: "authorization and account users", body: "authorization { users: [{user: x}] }\naccounts { B: { users: [{user: a}] } }\nno_auth_user: a\n"},
		{name: "single user then accounts", body: "authorization { user: x, password: y }\naccounts { B: { users: [{user: a}] } }\n",
			err: "Can not have a single user/pass and accounts", ns: []string{"Can not have a single user/pass and a users array"}},
		{name: "accounts then single user", body: "accounts { B: { users: [{user: a}] } }\nauthorization { user: x, password: y }\n",
			err: "Can not have a single user/pass and a users array", ns: []string{"Can not have a single user/pass and accounts"}},
		{name: "token then accounts", body: "authorization { token: x }\naccounts { B: { users: [{user: a}] } }\n",
			err: "Can not have a token and accounts", ns: []string{"Can not have a token and a users array"}},
		{name: "accounts then token", body: "accounts { B: { users: [{user: a}] } }\nauthorization { token: x }\n",
			err: "Can not have a token and a users array", ns: []string{"Can not have a token and accounts"}},
		{name: "default permissions", body: "accounts { A: { default_permissions: { publish: \"a.>\" }, users: [{user: a, password: b}] } }\n"},
		{name: "bad default permissions", body: "accounts { A: { default_permissions: { publish: \"a..b\" } } }\n", err: `subject "a..b" is not a valid subject`, ns: []string{"invalid subject"}},
		{name: "limits", body: "accounts { A: { limits: { max_connections: 5, max_subs: 3, max_payload: 10, max_leafs: 2 } } }\n"},
		{name: "limits aliases", body: "accounts { A: { limits: { max_conn: 5, max_subscriptions: 3, max_pay: 10, max_leafnodes: 2 } } }\n"},
		{name: "limits not a map", body: "accounts { A: { limits: 5 } }\n", err: "Expected account limits to be a map/struct, got 5"},
		{name: "limits unknown", body: "accounts { A: { limits: { foo: 1 } } }\n", err: `Unknown field "foo" parsing account limits`},
		{name: "limits type", body: "accounts { A: { limits: { max_connections: \"x\" } } }\n", err: `expected an integer for "max_connections"`, ns: []string{"interface conversion"}},
		{name: "limits over int32", body: "accounts { A: { limits: { max_connections: 4294967296 } } }\n", err: "max_connections value 4294967296 is out of range",
			deviation: "nats-server keeps the low 32 bits: 0, every client refused"},
		{name: "msg_trace", body: "accounts { A: { msg_trace: \"trace.a\" } }\n"},
		{name: "trace_dest map", body: "accounts { A: { trace_dest: { dest: \"trace.a\", sampling: \"50%\" } } }\n"},
		{name: "msg_trace wildcard", body: "accounts { A: { msg_trace: { dest: \"foo.*\" } } }\n", err: `Trace destination "foo.*" is not valid`},
		{name: "msg_trace sampling", body: "accounts { A: { msg_trace: { dest: foo, sampling: 150 } } }\n", err: "Ttrace destination sampling value 150 is invalid, needs to be [1..100]"},
		{name: "msg_trace unknown", body: "accounts { A: { msg_trace: { dest: foo, x: 1 } } }\n", err: `Unknown field "x" parsing account message trace map/struct "msg_trace"`},
		{name: "msg_trace type", body: "accounts { A: { msg_trace: 5 } }\n", err: `Expected account message trace "msg_trace" to be a string or a map/struct, got int64`},
		{name: "jetstream", body: "accounts { A: { jetstream: enabled }, B: { jetstream: { max_mem: 1G, max_file: 10G, max_streams: 5, max_consumers: 10, max_bytes_required: true, cluster_traffic: owner } }, C: { jetstream: false } }\n"},
		{name: "jetstream bad string", body: "accounts { A: { jetstream: maybe } }\n", err: "Expected 'enabled' or 'disabled' for string value, got 'maybe'"},
		{name: "jetstream bad size", body: "accounts { A: { jetstream: { max_mem: \"lots\" } } }\n", err: `Expected a parseable size for "max_mem", got lots`},
		{name: "jetstream bad traffic", body: "accounts { A: { jetstream: { cluster_traffic: other } } }\n", err: `Expected 'system' or 'owner' string value for "cluster_traffic", got other`},
		{name: "jetstream unknown", body: "accounts { A: { jetstream: { bogus: 1 } } }\n", err: `unknown field "bogus"`},
		{name: "jetstream type", body: "accounts { A: { jetstream: 5 } }\n", err: "Expected map, bool or string to define JetStream, got int64"},
	})
}

func TestConfigAccountsExports(t *testing.T) {
	exp := func(e string) string { return "accounts { A: { exports: [" + e + "] } }\n" }
	runAccountCases(t, []accountCase{
		{name: "stream", body: exp(`{stream: "a.>"}`)},
		{name: "service", body: exp(`{service: "a.*"}`)},
		{name: "export subject not validated", body: exp(`{stream: "foo..bar"}`)},
		{name: "empty entry ignored", body: exp(`{}`)},
		{name: "not an array", body: "accounts { A: { exports: 5 } }\n", err: "Exports should be an array, got int64"},
		{name: "not a map", body: exp(`"x"`), err: "Export Items should be a map with type entry, got string"},
		{name: "unknown", body: exp(`{stream: x, foo: 1}`), err: `unknown field "foo"`},
		{name: "stream name type", body: exp(`{stream: 5}`), err: "Expected stream name to be string, got int64"},
		{name: "service name type", body: exp(`{service: 5}`), err: "Expected service name to be string, got int64"},
		{name: "stream and service", body: exp(`{stream: "x", service: "y"}`), err: `Detected service "y" but already saw a stream`, ns: []string{`Detected stream "x" but already saw a service`}},
		{name: "service and stream", body: exp(`{service: "y", stream: "x"}`), err: `Detected stream "x" but already saw a service`, ns: []string{`Detected service "y" but already saw a stream`}},
		{name: "response types", body: exp(`{service: a, response_type: singleton}, {service: b, response: stream}, {service: c, response_type: chunked}, {service: d, response_type: Single}, {service: e, response: chunk}`)},
		{name: "response type unknown", body: exp(`{service: x, response_type: bogus}`), err: `Unknown response type: "bogus"`},
		{name: "response type type", body: exp(`{service: x, response_type: 5}`), err: "Expected response type to be string, got int64"},
		{name: "response type twice", body: exp(`{service: x, response_type: singleton, response: stream}`), err: "Duplicate response type definition"},
		{name: "response type on stream", body: exp(`{stream: x, response_type: stream}`), err: "Detected response directive on non-service"},
		{name: "response type before stream", body: exp(`{response_type: stream, stream: x}`), err: "Detected response directive on non-service"},
		{name: "thresholds", body: exp(`{service: a, response_threshold: "5s"}, {service: b, threshold: "1m"}, {service: c, response_max_time: "2s", response_type: stream}, {service: d, response_time: "0s"}`)},
		{name: "threshold bad", body: exp(`{service: x, threshold: "bad"}`), err: `Expected response threshold to be a parseable time duration, got "bad"`},
		{name: "threshold type", body: exp(`{service: x, response_time: 5}`), err: "Expected response threshold to be a parseable time duration, got int64"},
		{name: "threshold twice", body: exp(`{service: x, threshold: "1s", response_threshold: "2s"}`), err: "Duplicate response threshold detected"},
		{name: "threshold on stream", body: exp(`{stream: x, response_threshold: "5s"}`), err: "Detected response directive on non-service", nsMayAccept: true},
		{name: "threshold before stream", body: exp(`{response_threshold: "5s", stream: x}`), err: "Detected response directive on non-service", nsMayAccept: true},
		{name: "latency", body: exp(`{service: a, latency: "lat.a"}, {service: b, latency: {sampling: 50, subject: "lat.b"}}, {service: c, latency: {sampling: "25%", subject: "lat.c"}}, {service: d, latency: {sampling: headers, subject: "lat.d"}}, {service: e, latency: {subject: "lat.e", other: 1}}`)},
		{name: "latency sampling 0", body: exp(`{service: x, latency: {sampling: 0, subject: lat}}`), err: "bad sampling percentage, should be 1-100"},
		{name: "latency sampling 101", body: exp(`{service: x, latency: {sampling: "101%", subject: lat}}`), err: "bad sampling percentage, should be 1-100"},
		{name: "latency sampling text", body: exp(`{service: x, latency: {sampling: "abc", subject: lat}}`), err: `Failed to parse latency sample: strconv.Atoi: parsing "abc": invalid syntax`},
		{name: "latency sampling type", body: exp(`{service: x, latency: {sampling: 1.5, subject: lat}}`), err: "Expected latency sample to be a string or map/struct, got float64"},
		{name: "latency no subject", body: exp(`{service: x, latency: {sampling: 50}}`), err: "Latency subject required, but missing"},
		{name: "latency subject type", body: exp(`{service: x, latency: {subject: 5}}`), err: "Expected latency subject to be a string, got int64", ns: []string{"Expected latency subject to be a string, got string"}},
		{name: "latency type", body: exp(`{service: x, latency: 5}`), err: "Expected latency entry to be a map/struct or string, got int64"},
		{name: "latency on stream", body: exp(`{stream: x, latency: lat}`), err: "Detected latency directive on non-service"},
		{name: "latency wildcard results", body: exp(`{service: x, latency: "lat.*"}`), err: `Error adding service latency sampling for "x" on subject "lat.*": invalid publish subject`},
		{name: "latency results loop", body: exp(`{service: "x.*", latency: "x.y"}`), err: `Error adding service latency sampling for "x.*" on subject "x.y": invalid publish subject`},
		{name: "latency results exported before", body: exp(`{service: "y.>"}, {service: x, latency: "y.z"}`), err: `Error adding service latency sampling for "x" on subject "y.z": invalid publish subject`},
		{name: "latency results exported after", body: exp(`{service: x, latency: "y"}, {service: y}`)},
		{name: "latency streamed", body: exp(`{service: x, response_type: stream, latency: lat}`), err: `Error adding service latency sampling for "x" on subject "lat": bad service response type`},
		{name: "latency without system account", body: "no_system_account: true\n" + exp(`{service: x, latency: lat}`),
			err: `Error adding service latency sampling for "x": system account not setup`, nsMayAccept: true},
		{name: "allow_trace", body: exp(`{service: x, allow_trace: true}`)},
		{name: "allow_trace on stream", body: exp(`{stream: x, allow_trace: true}`), err: "Detected allow_trace directive on non-service"},
		{name: "allow_trace type", body: exp(`{service: x, allow_trace: "yes"}`), err: `expected a boolean for "allow_trace"`, ns: []string{"interface conversion"}},
		{name: "token position", body: exp(`{service: "a.*.b", account_token_position: 2}, {stream: "s.*", account_token_position: 2}`)},
		{name: "token position not a wildcard", body: exp(`{service: "a.*.b", account_token_position: 1}`), err: `Error adding service export "a.*.b": sublist: invalid subject`},
		{name: "token position past the end", body: exp(`{stream: "a.*.b", account_token_position: 4}`), err: `Error adding stream export "a.*.b": sublist: invalid subject`},
		{name: "token position negative", body: exp(`{stream: "a", account_token_position: -1}`), err: `Error adding stream export "a": sublist: invalid subject`, ns: []string{"index out of range"}},
		{name: "accounts", body: "accounts { A: { exports: [{stream: a, accounts: [B]}, {service: b, accounts: [B, C]}, {service: c, accounts: []}] }, B: {}, C: {} }\n"},
		{name: "accounts unknown", body: exp(`{service: x, accounts: [C]}`), err: `"C" account not defined for service export`},
		{name: "stream accounts unknown", body: exp(`{stream: x, accounts: [C]}`), err: `"C" account not defined for stream export`},
		{name: "accounts type", body: exp(`{service: x, accounts: "A"}`), err: `expected an array for "accounts"`, ns: []string{"interface conversion"}},
	})
}

func TestConfigAccountsImports(t *testing.T) {
	imp := func(e string) string {
		return "accounts {\n  A: { exports: [{stream: \"s.>\"}, {service: \"v.>\"}] }\n  B: { imports: [" + e + "] }\n}\n"
	}
	runAccountCases(t, []accountCase{
		{name: "stream", body: imp(`{stream: {account: A, subject: "s.>"}}`)},
		{name: "stream prefix", body: imp(`{stream: {account: A, subject: "s.>"}, prefix: "p"}, {stream: {account: A, subject: "s.x"}, prefix: "p."}`)},
		{name: "stream prefix wildcard", body: imp(`{stream: {account: A, subject: "s.>"}, prefix: "p.*"}`), err: `Error adding stream import "s.>": stream import prefix can not contain wildcard tokens`},
		{name: "stream prefix bad", body: imp(`{stream: {account: A, subject: "s.>"}, prefix: "p..q"}`), err: `Error adding stream import "s.>": failed to create mapping transform for stream import subject from "s.>" to "p..q.s.>": invalid subject`},
		{name: "stream to", body: imp(`{stream: {account: A, subject: "s.*"}, to: "t.$1"}, {stream: {account: A, subject: "s.*.*"}, to: "t.{{wildcard(2)}}.{{wildcard(1)}}"}, {stream: {account: A, subject: "s.a"}, to: "t"}, {stream: {account: A, subject: "s.b.*"}, to: "u.*"}, {stream: {account: A, subject: "s.c.*"}, to: "s.c.*"}`)},
		{name: "stream to with a function", body: imp(`{stream: {account: A, subject: "s.*"}, to: "t.{{partition(2,1)}}"}`), err: `Error adding stream import "s.*": failed to create mapping transform for stream import subject from "s.*" to "t.{{partition(2,1)}}": invalid mapping destination: the only mapping function allowed for import transforms is {{Wildcard()}} in {{partition(2,1)}}`},
		{name: "stream to drops a wildcard", body: imp(`{stream: {account: A, subject: "s.*"}, to: "t"}`), err: `Error adding stream import "s.*": failed to create mapping transform for stream import subject from "s.*" to "t": invalid mapping destination: not using all of the token wildcard(s) in t`},
		{name: "stream to out of range", body: imp(`{stream: {account: A, subject: "s.*"}, to: "t.$2"}`), err: `failed to create mapping transform for stream import subject from "s.*" to "t.$2": invalid mapping destination: wildcard index out of range in $2: [2]`},
		{name: "stream prefix then to", body: imp(`{stream: {account: A, subject: "s.a"}, prefix: "p", to: "t"}`), err: "Stream import can not have a 'prefix' and a 'to' property", nsMayAccept: true},
		{name: "stream to then prefix", body: imp(`{stream: {account: A, subject: "s.a"}, to: "t", prefix: "p"}`), err: "Stream import can not have a 'prefix' and a 'to' property", nsMayAccept: true},
		{name: "stream missing subject", body: imp(`{stream: {account: A}}`), err: "Expect an account name and a subject"},
		{name: "stream missing account", body: imp(`{stream: {subject: "s.a"}}`), err: "Expect an account name and a subject"},
		{name: "stream source unknown", body: imp(`{stream: {account: A, subject: "s.a", foo: 1}}`), err: `unknown field "foo"`},
		{name: "stream not a map", body: imp(`{stream: "A"}`), err: "Stream entry should be an account map, got string"},
		{name: "stream share ignored", body: imp(`{stream: {account: A, subject: "s.a"}, share: true}`)},
		{name: "stream allow_trace", body: imp(`{stream: {account: A, subject: "s.a"}, allow_trace: true}`)},
		{name: "stream not exported", body: imp(`{stream: {account: A, subject: "x"}}`), err: `Error adding stream import "x": stream import not authorized`},
		{name: "stream wider than export", body: "accounts { A: { exports: [{stream: \"a.b\"}] }, B: { imports: [{stream: {account: A, subject: \"a.>\"}}] } }\n", err: `Error adding stream import "a.>": stream import not authorized`},
		{name: "stream bad subject", body: imp(`{stream: {account: A, subject: "s..a"}}`), err: `Error adding stream import "s..a": stream import not authorized`},
		{name: "stream twice", body: imp(`{stream: {account: A, subject: "s.a"}}, {stream: {account: A, subject: "s.a"}, prefix: x}`), err: `Error adding stream import "s.a": stream import already exists`},
		{name: "stream unknown account", body: imp(`{stream: {account: C, subject: "s.a"}}`), err: `"C" account not defined for stream import`},
		{name: "service", body: imp(`{service: {account: A, subject: "v.a"}}, {service: {account: A, subject: "v.b"}, to: "w"}, {service: {account: A, subject: "v.*"}, to: "w.*"}, {service: {account: A, subject: "v.*.*"}, to: "x.$2.$1"}, {service: {account: A, subject: "v.c"}, to: "y.*"}, {service: {account: A, subject: "v.>"}}`)},
		{name: "service share", body: imp(`{service: {account: A, subject: "v.a"}, share: true}`)},
		{name: "service prefix ignored", body: imp(`{service: {account: A, subject: "v.a"}, prefix: "p"}`)},
		{name: "service share type", body: imp(`{service: {account: A, subject: "v.a"}, share: "yes"}`), err: `expected a boolean for "share"`, ns: []string{"interface conversion"}},
		{name: "service allow_trace", body: imp(`{service: {account: A, subject: "v.a"}, allow_trace: true}`), err: "Detected allow_trace directive on a non-stream"},
		{name: "service allow_trace first", body: imp(`{allow_trace: true, service: {account: A, subject: "v.a"}}`), err: "Detected allow_trace directive on a non-stream"},
		{name: "service drops a wildcard", body: imp(`{service: {account: A, subject: "v.*"}, to: "w"}`), err: `Error adding service import "v.*": failed to create mapping transform for service import subject from "w" to "v.*": invalid mapping destination: not using all of the token wildcard(s) in w`},
		{name: "service bad subject", body: imp(`{service: {account: A, subject: "v..a"}}`), err: `Error adding service import "v..a": sublist: invalid subject`},
		{name: "service bad local subject", body: imp(`{service: {account: A, subject: "v.a"}, to: "w..x"}`), err: `Error adding service import "v.a": sublist: invalid subject`},
		{name: "service not exported", body: "accounts { A: {}, B: { imports: [{service: {account: A, subject: \"a.b\"}}] } }\n", err: `Error adding service import "a.b": service import not authorized`},
		{name: "service wider than export", body: "accounts { A: { exports: [{service: \"a.b\"}] }, B: { imports: [{service: {account: A, subject: \"a.*\"}}] } }\n", err: `Error adding service import "a.*": service import not authorized`},
		{name: "service unknown account", body: imp(`{service: {account: C, subject: "v.a"}}`), err: `"C" account not defined for service import`},
		{name: "service twice", body: imp(`{service: {account: A, subject: "v.a"}}, {service: {account: A, subject: "v.a"}}`), err: `Duplicate service import subject "v.a", previously used in import for account "A", subject "v.a"`},
		{name: "service same local subject", body: imp(`{service: {account: A, subject: "v.a"}, to: q}, {service: {account: A, subject: "v.b"}, to: q}`), err: `Duplicate service import subject "q", previously used in import for account "A", subject "v.a"`},
		{name: "service same subject from two accounts", body: "accounts { A: { exports: [{service: a}] }, C: { exports: [{service: a}] }, B: { imports: [{service: {account: A, subject: a}}, {service: {account: C, subject: a}}] } }\n"},
		{name: "stream and service", body: imp(`{service: {account: A, subject: "v.a"}, stream: {account: A, subject: "s.a"}}`), err: "Detected stream but already saw a service", ns: []string{"Detected service but already saw a stream"}},
		{name: "unknown", body: imp(`{foo: 1}`), err: `unknown field "foo"`},
		{name: "empty entry ignored", body: imp(`{}`)},
		{name: "not an array", body: "accounts { B: { imports: 5 } }\n", err: "Imports should be an array, got int64"},
		{name: "not a map", body: imp(`"x"`), err: "Import Items should be a map with type entry, got string"},
		{name: "to type", body: imp(`{stream: {account: A, subject: "s.a"}, to: 5}`), err: `expected a string for "to"`, ns: []string{"interface conversion"}},
		{name: "restricted export", body: "accounts { A: { exports: [{service: \"a.b\", accounts: [B]}] }, B: { imports: [{service: {account: A, subject: \"a.b\"}}] } }\n"},
		{name: "restricted to another", body: "accounts { A: { exports: [{service: \"a.b\", accounts: [A]}] }, B: { imports: [{service: {account: A, subject: \"a.b\"}}] } }\n", err: `Error adding service import "a.b": service import not authorized`},
		{name: "public export with empty accounts", body: "accounts { A: { exports: [{service: \"a.b\", accounts: []}] }, B: { imports: [{service: {account: A, subject: \"a.b\"}}] } }\n"},
		{name: "restriction survives a public export", body: "accounts { A: { exports: [{stream: a}, {stream: a, accounts: [C]}] }, B: { imports: [{stream: {account: A, subject: a}}] }, C: {} }\n", err: `Error adding stream import "a": stream import not authorized`},
		{name: "restriction then public export", body: "accounts { A: { exports: [{stream: a, accounts: [C]}, {stream: a}] }, B: { imports: [{stream: {account: A, subject: a}}] }, C: {} }\n", err: `Error adding stream import "a": stream import not authorized`},
		{name: "token position", body: "accounts { A: { exports: [{service: \"a.*.b\", account_token_position: 2}] }, B: { imports: [{service: {account: A, subject: \"a.B.b\"}}] } }\n"},
		{name: "token position other account", body: "accounts { A: { exports: [{service: \"a.*.b\", account_token_position: 2}] }, B: { imports: [{service: {account: A, subject: \"a.C.b\"}}] } }\n", err: `Error adding service import "a.C.b": service import not authorized`},
		{name: "token position own subject", body: "accounts { A: { exports: [{service: \"a.*.b\", account_token_position: 2}] }, B: { imports: [{service: {account: A, subject: \"a.*.b\"}}] } }\n", err: `Error adding service import "a.*.b": service import not authorized`},
		{name: "import from the global account", body: "accounts { B: { imports: [{stream: {account: \"$G\", subject: a}}] } }\n", err: `"$G" account not defined for stream import`, ns: []string{"stream import not authorized"}},
		{name: "import from itself", body: "accounts { A: { exports: [{stream: \"a.>\"}], imports: [{stream: {account: A, subject: \"a.b\"}, prefix: x}] } }\n"},
	})
}

func TestConfigAccountsCycles(t *testing.T) {
	runAccountCases(t, []accountCase{
		{name: "service cycle", body: `accounts {
  A: { exports: [{service: "q"}], imports: [{service: {account: B, subject: "q"}}] }
  B: { exports: [{service: "q"}], imports: [{service: {account: A, subject: "q"}}] }
}
`, err: `Error adding service import "q": import forms a cycle`},
		{name: "service cycle with wildcards", body: `accounts {
  A: { exports: [{service: "a.>"}], imports: [{service: {account: B, subject: "b.>"}, to: "a.>"}] }
  B: { exports: [{service: "b.>"}], imports: [{service: {account: A, subject: "a.>"}, to: "b.>"}] }
}
`, err: `Error adding service import "a.>": import forms a cycle`, ns: []string{`Error adding service import "b.>": import forms a cycle`}},
		{name: "stream cycle", body: `accounts {
  A: { exports: [{stream: "q"}], imports: [{stream: {account: B, subject: "q"}}] }
  B: { exports: [{stream: "q"}], imports: [{stream: {account: A, subject: "q"}}] }
}
`, err: `Error adding stream import "q": import forms a cycle`},
		{name: "stream cycle of three", body: `accounts {
  A: { exports: [{stream: "q.>"}], imports: [{stream: {account: C, subject: "q.>"}}] }
  B: { exports: [{stream: "q.>"}], imports: [{stream: {account: A, subject: "q.>"}}] }
  C: { exports: [{stream: "q.>"}], imports: [{stream: {account: B, subject: "q.>"}}] }
}
`, err: `Error adding stream import "q.>": import forms a cycle`},
		{name: "service cycle of three", body: `accounts {
  A: { exports: [{service: "q"}], imports: [{service: {account: C, subject: "q"}}] }
  B: { exports: [{service: "q"}], imports: [{service: {account: A, subject: "q"}}] }
  C: { exports: [{service: "q"}], imports: [{service: {account: B, subject: "q"}}] }
}
`, err: `Error adding service import "q": import forms a cycle`},
		// nats-server compares subjects only: a loop through renamed subjects is not seen.
		{name: "renamed loop not a cycle", body: `accounts {
  A: { exports: [{service: "x"}], imports: [{service: {account: B, subject: "y"}, to: "x"}] }
  B: { exports: [{service: "y"}], imports: [{service: {account: C, subject: "z"}, to: "y"}] }
  C: { exports: [{service: "z"}], imports: [{service: {account: A, subject: "x"}, to: "z"}] }
}
`},
		{name: "prefixed streams both ways", body: `accounts {
  A: { exports: [{stream: "a.>"}], imports: [{stream: {account: B, subject: "b.>"}, prefix: from_b}] }
  B: { exports: [{stream: "b.>"}], imports: [{stream: {account: A, subject: "a.>"}, prefix: from_a}] }
}
`},
		{name: "services both ways, different subjects", body: `accounts {
  A: { exports: [{service: "a.req"}], imports: [{service: {account: B, subject: "b.req"}}] }
  B: { exports: [{service: "b.req"}], imports: [{service: {account: A, subject: "a.req"}}] }
}
`},
	})
}

func TestConfigMappings(t *testing.T) {
	runAccountCases(t, []accountCase{
		{name: "string", body: `mappings { "a.*": "b.$1", "c.*.*": "d.{{wildcard(2)}}.{{wildcard(1)}}", "p.*": "p.{{partition(3,1)}}" }` + "\n"},
		{name: "maps alias", body: `maps { "a": "b" }` + "\n"},
		{name: "out of range", body: `mappings { "a.*": "b.$2" }` + "\n", err: `Error adding mapping for "a.*" to "b.$2" : invalid mapping destination: wildcard index out of range in $2: [2]`},
		{name: "unknown function", body: `mappings { "a.*": "b.{{nope(1)}}" }` + "\n", err: `Error adding mapping for "a.*" to "b.{{nope(1)}}" : invalid mapping destination: unknown function`},
		{name: "invalid source", body: `mappings { "a..b": "b" }` + "\n", err: `Subject "a..b" is not a valid subject`},
		{name: "empty destination", body: `mappings { "a": "" }` + "\n"},
		{name: "weighted", body: `mappings { "a": [{destination: "b", weight: "50%"}, {dest: "c", weight: 50}] }` + "\n"},
		{name: "weighted with remainder", body: `mappings { "a.*": [{destination: "b.$1", weight: 20%}, {destination: "c.$1", weight: 30}] }` + "\n"},
		{name: "weighted loss", body: `mappings { "a": [{destination: "a", weight: 20%}, {destination: "b", weight: 30}] }` + "\n"},
		{name: "clusters", body: `mappings { "a": [{destination: "b", weight: 100, cluster: "c1"}, {destination: "c", weight: 100, cluster: "c2"}, {destination: "d", weight: 50}] }` + "\n"},
		{name: "single map", body: `mappings { "a": {destination: "b", weight: 10} }` + "\n"},
		{name: "empty list", body: `mappings { "a": [] }` + "\n"},
		{name: "total over 100", body: `mappings { "a": [{destination: "b", weight: "60%"}, {dest: "c", weight: 50}] }` + "\n", err: `Error adding mapping for "a" : total weight needs to be <= 100`},
		{name: "cluster total over 100", body: `mappings { "a": [{destination: "b", weight: 10, cluster: "c1"}, {destination: "c", weight: 95, cluster: c1}] }` + "\n", err: `Error adding mapping for "a" : total weight needs to be <= 100`},
		{name: "duplicate destination", body: `mappings { "a": [{destination: "b", weight: 10, cluster: "c1"}, {destination: "b", weight: 10}] }` + "\n", err: `Error adding mapping for "a" : duplicate entry for "b"`},
		{name: "weight text", body: `mappings { "a": [{destination: "b", weight: "x%"}] }` + "\n", err: `Invalid weight "x" for mapping destination`},
		{name: "weight over 100", body: `mappings { "a": [{destination: "b", weight: 101}] }` + "\n", err: "Invalid weight 101 for mapping destination"},
		{name: "weight negative", body: `mappings { "a": [{destination: "b", weight: "-1%"}] }` + "\n", err: "Invalid weight -1 for mapping destination"},
		{name: "weight missing", body: `mappings { "a": [{destination: "b"}] }` + "\n", err: `Missing weight for mapping destination "b"`},
		{name: "weight type", body: `mappings { "a": [{destination: "b", weight: 1.5}] }` + "\n", err: "Unknown entry type for weight of 1.5"},
		{name: "destination unknown field", body: `mappings { "a": [{destination: "b", weight: 10, foo: 1}] }` + "\n", err: `Unknown field "foo" for mapping destination`},
		{name: "destination not a map", body: `mappings { "a": 5 }` + "\n", err: "Expected an entry for the mapping destination"},
		{name: "destination type", body: `mappings { "a": [{destination: 5, weight: 10}] }` + "\n", err: `expected a string for "destination"`, ns: []string{"interface conversion"}},
		{name: "not a map", body: "mappings = 5\n", err: `expected a map for "mappings"`, ns: []string{"interface conversion"}},
		{name: "per account", body: "accounts { A: { mappings { \"x.*\": \"y.$1\" }, maps { \"z\": [{dest: w, weight: 40}] } } }\nmappings { \"a\": \"b\" }\n"},
		{name: "per account bad", body: "accounts { A: { mappings { \"x.*\": \"y.$3\" } } }\n", err: `Error adding mapping for "x.*" to "y.$3" : invalid mapping destination: wildcard index out of range in $3: [3]`},
	})
}

func TestConfigSystemAccount(t *testing.T) {
	runAccountCases(t, []accountCase{
		{name: "declared", body: "system_account: SYS\naccounts { SYS: {} }\n"},
		{name: "alias", body: "system: SYS\naccounts { SYS: {} }\n"},
		{name: "system_account wins over system", body: "system: B\nsystem_account: A\naccounts { A: {}, B: {} }\n"},
		{name: "missing", body: "system_account: SYS\n", err: "error resolving system account: account missing"},
		{name: "missing alias", body: "system: SYS\naccounts { A: {} }\n", err: "error resolving system account: account missing"},
		{name: "$SYS undeclared", body: "system_account: \"$SYS\"\n", err: "error resolving system account: account missing"},
		{name: "the global account", body: "system_account: \"$G\"\n"},
		{name: "type", body: "system_account: 5\n", err: "system account name must be a string"},
		{name: "$SYS with users", body: "accounts { $SYS: { users: [{user: s, password: s}] } }\n"},
		{name: "no_system_account", body: "no_system_account: true\n"},
		{name: "no_system", body: "no_system: true\n"},
		{name: "no_sys_acc", body: "no_sys_acc: yes\n"},
		{name: "no_sys_acc type", body: "no_sys_acc: \"yes\"\n", err: `expected a boolean for "no_sys_acc"`, ns: []string{"interface conversion"}},
		{name: "no system account, but one declared", body: "no_system_account: true\nsystem_account: SYS\naccounts { SYS: {} }\n"},
	})
}

func TestConfigNoAuthUserInAccount(t *testing.T) {
	_, _, userKey, _ := testNkeys(t)
	runAccountCases(t, []accountCase{
		{name: "user of an account", body: "no_auth_user: a\naccounts { A: { users: [{user: a, password: a}] } }\n"},
		{name: "nkey of an account", body: "no_auth_user: " + userKey + "\naccounts { A: { users: [{nkey: " + userKey + "}] } }\n"},
		{name: "unknown", body: "no_auth_user: a\naccounts { A: { users: [{user: b, password: a}] } }\n",
			err: `no_auth_user: "a" not present as user or nkey in authorization block or account configuration`},
		{name: "no users", body: "no_auth_user: a\n", err: `no_auth_user: "a" present, but users/nkeys are not defined`},
		{name: "single user", body: "no_auth_user: a\nauthorization { user: a, password: b }\n", err: `no_auth_user: "a" present, but users/nkeys are not defined`},
	})
}

// TestConfigAccountsModel: a file with three accounts, users in two of them and the
// authorization block, exports and imports both ways, mappings and a system account, and
// what the model holds.
func TestConfigAccountsModel(t *testing.T) {
	accKey, _, userKey, _ := testNkeys(t)
	body := `
authorization {
  users: [{user: admin, password: pa}]
  default_permissions: { publish: "admin.>" }
}
system_account: SYS
no_auth_user: guest
mappings {
  "old.*": "new.$1"
  "split": [{destination: "left", weight: 40%}, {destination: "right", weight: 40%}]
}
accounts {
  ORDERS: {
    nkey: ` + accKey + `
    users: [{user: orders, password: po}, {nkey: ` + userKey + `}]
    default_permissions: { subscribe: "orders.>" }
    exports: [
      {stream: "orders.events.>", accounts: [BILLING]}
      {service: "orders.lookup.*", response_type: stream, response_threshold: "5s", allow_trace: true}
      {service: "orders.status", latency: {sampling: 25%, subject: "orders.latency"}}
      {stream: "orders.private.*", account_token_position: 3}
    ]
    imports: [
      {service: {account: BILLING, subject: "billing.charge"}, to: "charge", share: true}
    ]
    limits: { max_connections: 100, max_subs: 1000 }
    mappings: { "o.*": "orders.$1" }
  }
  BILLING: {
    users: [{user: billing, password: pb, permissions: {publish: ">"}}, {user: guest}]
    exports: [{service: "billing.charge"}]
    imports: [
      {stream: {account: ORDERS, subject: "orders.events.>"}, prefix: "from_orders"}
      {stream: {account: ORDERS, subject: "orders.private.BILLING"}}
      {service: {account: ORDERS, subject: "orders.lookup.*"}, to: "lookup.*"}
      {service: {account: ORDERS, subject: "orders.status"}}
    ]
  }
  SYS: {}
}
`
	path := writeConf(t, body)
	o := &Options{}
	if _, err := o.ProcessConfigFile(path); err != nil {
		t.Fatal(err)
	}
	nso, err := nsLoad(path)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	if len(o.Accounts) != 3 || o.Accounts[0].Name != "ORDERS" || o.Accounts[1].Name != "BILLING" || o.Accounts[2].Name != "SYS" {
		t.Fatalf("accounts = %+v", o.Accounts)
	}
	if o.SystemAccount != "SYS" || o.SystemAccountName() != "SYS" || o.NoSystemAccount || o.ImplicitGlobalNoAuth() {
		t.Fatalf("system account %q/%q", o.SystemAccount, o.SystemAccountName())
	}
	// Users: the same set as nats-server's, with the same accounts and default permissions.
	if len(o.Users) != len(nso.Users) || len(o.Nkeys) != len(nso.Nkeys) {
		t.Fatalf("users %d/%d nkeys %d/%d", len(o.Users), len(nso.Users), len(o.Nkeys), len(nso.Nkeys))
	}
	nsAcc := map[string]string{}
	for _, u := range nso.Users {
		nsAcc[u.Username] = ""
		if u.Account != nil {
			nsAcc[u.Username] = u.Account.Name
		}
	}
	for _, u := range o.Users {
		want, ok := nsAcc[u.Username]
		if !ok || u.Account != want {
			t.Errorf("user %q in account %q, nats-server %q", u.Username, u.Account, want)
		}
	}
	if o.Nkeys[0].Account != "ORDERS" || o.Nkeys[0].Permissions.Subscribe.Allow[0] != "orders.>" {
		t.Errorf("nkey user %+v", o.Nkeys[0])
	}
	byName := map[string]int{}
	for i, u := range o.Users {
		byName[u.Username] = i
	}
	if p := o.Users[byName["admin"]].Permissions; p == nil || p.Publish.Allow[0] != "admin.>" {
		t.Errorf("admin permissions %+v", p)
	}
	if p := o.Users[byName["orders"]].Permissions; p == nil || p.Subscribe.Allow[0] != "orders.>" || p.Publish != nil {
		t.Errorf("orders permissions (account defaults, not authorization's) %+v", p)
	}
	if p := o.Users[byName["guest"]].Permissions; p != nil {
		t.Errorf("guest permissions %+v", p)
	}
	orders, billing := o.Accounts[0], o.Accounts[1]
	if orders.Nkey != accKey || len(orders.Users) != 1 || len(orders.Nkeys) != 1 || orders.Limits != (AccountLimits{100, 1000, -1, -1}) {
		t.Errorf("orders %+v", orders)
	}
	ex := orders.Exports
	if len(ex) != 4 || ex[0].Service || ex[0].Accounts[0] != "BILLING" ||
		!ex[1].Service || ex[1].ResponseType != ResponseStream || ex[1].ResponseThreshold.String() != "5s" || !ex[1].AllowTrace ||
		ex[2].Latency == nil || *ex[2].Latency != (LatencyConfig{25, "orders.latency"}) || ex[2].ResponseThreshold != DefaultServiceResponseThreshold ||
		ex[3].AccountTokenPosition != 3 {
		t.Errorf("exports %+v %+v %+v %+v", ex[0], ex[1], ex[2], ex[3])
	}
	im := billing.Imports
	if len(im) != 4 {
		t.Fatalf("imports %+v", im)
	}
	if im[0].Service || im[0].LocalSubject != "from_orders.orders.events.>" || im[0].Transform == nil {
		t.Errorf("prefixed stream import %+v", im[0])
	} else if got := im[0].Transform.Apply("orders.events.x.y"); got != "from_orders.orders.events.x.y" {
		t.Errorf("prefixed stream import maps to %q", got)
	}
	if im[1].LocalSubject != "orders.private.BILLING" || im[1].Transform != nil {
		t.Errorf("token position import %+v", im[1])
	}
	if !im[2].Service || im[2].LocalSubject != "lookup.*" || im[2].RemoteSubject != "orders.lookup.*" || im[2].Transform == nil {
		t.Errorf("wildcard service import %+v", im[2])
	} else if got := im[2].Transform.Apply("lookup.42"); got != "orders.lookup.42" {
		t.Errorf("service import maps a request to %q", got)
	}
	if si := orders.Imports[0]; !si.Share || si.LocalSubject != "charge" || si.RemoteSubject != "billing.charge" || si.Transform != nil {
		t.Errorf("service import %+v", si)
	}
	if len(o.Mappings) != 2 || o.Mappings[0].Source != "old.*" || o.Mappings[1].Mapping == nil || len(orders.Mappings) != 1 {
		t.Fatalf("mappings %+v / %+v", o.Mappings, orders.Mappings)
	}
	if d := o.Mappings[1].Mapping.Dests(); len(d) != 3 {
		t.Errorf("weighted mapping destinations %+v (want the two and the 20%% remainder)", d)
	}
	for _, a := range o.Accounts {
		if a.Pos.Line == 0 || !strings.HasSuffix(a.Pos.File, "nats.conf") {
			t.Errorf("account %s position %v", a.Name, a.Pos)
		}
	}
	if _, err := New(o); err != nil {
		t.Fatalf("New: %v", err)
	}
}

// Errors found across accounts point at the import or export they are about.
func TestConfigAccountsErrorLocation(t *testing.T) {
	_, _, err := loadConf(t, `accounts {
  A: {
    exports: [{service: "q"}]
    imports: [{service: {account: B, subject: "q"}}]
  }
  B: {
    exports: [{service: "q"}]
    imports: [
      {service: {account: A, subject: "q"}}
    ]
  }
}
`)
	if err == nil || !regexp.MustCompile(`nats\.conf:9:\d+: Error adding service import "q": import forms a cycle$`).MatchString(err.Error()) {
		t.Fatalf("err = %v", err)
	}
	_, _, err = loadConf(t, "system_account: NOPE\naccounts { A: {} }\n")
	if err == nil || !regexp.MustCompile(`nats\.conf:1:\d+: error resolving system account: account missing$`).MatchString(err.Error()) {
		t.Fatalf("err = %v", err)
	}
}

// ImplicitGlobalNoAuth is nats-server's hidden no_auth_user for a config whose only account
// is the system account.
func TestConfigImplicitGlobalNoAuth(t *testing.T) {
	for _, body := range []string{
		"accounts { $SYS: { users: [{user: s, password: s}] } }\n",
		"system_account: SYS\naccounts { SYS: { users: [{user: s, password: s}] } }\n",
		"system_account: SYS\naccounts { SYS: {} }\n",
		"accounts { A: { users: [{user: a, password: a}] } }\n",
		"system_account: SYS\naccounts { SYS: {}, A: {} }\n",
		"system_account: SYS\naccounts { SYS: { users: [{user: s, password: s}] } }\nauthorization { timeout: 2 }\n",
		"system_account: SYS\naccounts { SYS: { users: [{user: s, password: s}] } }\nno_auth_user: s\n",
		"accounts: [\"$SYS\"]\n",
		"no_system_account: true\naccounts { $SYS: {} }\n",
	} {
		path := writeConf(t, body)
		o := &Options{}
		if _, err := o.ProcessConfigFile(path); err != nil {
			t.Fatal(err)
		}
		nso, err := nsLoad(path)
		if err != nil {
			t.Fatal(err)
		}
		ns := strings.HasPrefix(nso.NoAuthUser, "nats-")
		if got := o.ImplicitGlobalNoAuth(); got != ns {
			t.Errorf("%q: ImplicitGlobalNoAuth %v, nats-server %v", body, got, ns)
		}
		if got, want := o.SystemAccountName(), nso.SystemAccount; want != "" && got != want {
			t.Errorf("%q: system account %q, nats-server %q", body, got, want)
		}
	}
}

// genAccounts writes a random accounts block: four accounts exporting streams and services
// on a few overlapping subjects (some restricted, some by token position, some with latency
// tracking), importing them from each other (sometimes a subject that is not exported,
// renamed with to or a prefix), so that many files have cycles and unauthorized imports.
func genAccounts(r *rand.Rand) string {
	subs := []string{"q", "q.a", "q.*", "q.>", "r", "r.*", ">", "q.*.b", "q.a.b", "q.A", "q.B.b", "r.C"}
	names := []string{"A", "B", "C", "D"}
	kinds := []string{"stream", "service"}
	type export struct{ kind, subject string }
	exports := map[string][]export{}
	var b strings.Builder
	b.WriteString("accounts {\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s: {\n    exports: [\n", n)
		for range 1 + r.IntN(3) {
			e := export{kinds[r.IntN(2)], subs[r.IntN(len(subs))]}
			exports[n] = append(exports[n], e)
			extra := ""
			switch r.IntN(8) {
			case 0:
				extra = fmt.Sprintf(", accounts: [%s]", names[r.IntN(len(names))])
			case 1:
				extra = ", account_token_position: 2"
			case 2:
				if e.kind == "service" {
					extra = ", latency: \"lat." + n + "\""
				}
			}
			fmt.Fprintf(&b, "      {%s: %q%s}\n", e.kind, e.subject, extra)
		}
		b.WriteString("    ]\n  }\n")
	}
	b.WriteString("}\n")
	// Imports go in a second block per account, written after every export is known.
	var out strings.Builder
	for _, line := range strings.Split(b.String(), "\n") {
		out.WriteString(line + "\n")
		if !strings.HasSuffix(line, "    ]") {
			continue
		}
		n := names[0]
		for _, cand := range names {
			if strings.Contains(out.String(), "  "+cand+": {") {
				n = cand
			}
		}
		out.WriteString("    imports: [\n")
		for range r.IntN(4) {
			src := names[r.IntN(len(names))]
			e := exports[src][r.IntN(len(exports[src]))]
			subject := e.subject
			if r.IntN(4) == 0 {
				subject = subs[r.IntN(len(subs))]
			}
			fmt.Fprintf(&out, "      {%s: {account: %s, subject: %q}", e.kind, src, subject)
			switch r.IntN(5) {
			case 0:
				fmt.Fprintf(&out, ", to: %q", subs[r.IntN(len(subs))])
			case 1:
				if e.kind == "stream" {
					fmt.Fprintf(&out, ", prefix: %q", "from_"+n)
				}
			}
			out.WriteString("}\n")
		}
		out.WriteString("    ]\n")
	}
	return strings.TrimRight(out.String(), "\n") + "\n"
}

// TestConfigAccountsGenerated: random accounts blocks loaded by both servers give the same
// verdict and the same set of error texts. nats-server walks accounts in random order, so
// which import of a cycle it blames varies: natsd's answer (file order) must be one of the
// answers nats-server gives over several runs.
func TestConfigAccountsGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(2015, 2))
	norm := func(err error) string {
		if err == nil {
			return "valid"
		}
		var lines []string
		for _, l := range strings.Split(reasons(err), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		slices.Sort(lines)
		return strings.Join(lines, "\n")
	}
	n := 150
	if testing.Short() {
		n = 30
	}
	var valid, cycles int
	for range n {
		body := genAccounts(r)
		path := writeConf(t, body)
		o := &Options{}
		_, err := o.ProcessConfigFile(path)
		got := norm(err)
		if err == nil {
			valid++
		} else if strings.Contains(got, "cycle") {
			cycles++
		}
		seen := map[string]bool{}
		for run := 0; run < 60 && !seen[got]; run++ {
			_, nerr := nsLoad(path)
			seen[norm(nerr)] = true
			if run == 9 && len(seen) == 1 {
				break // nats-server gave one answer ten times: that is the answer
			}
		}
		if !seen[got] {
			t.Fatalf("%s\nnatsd:\n%s\nnats-server:\n%v", body, got, slices.Collect(maps.Keys(seen)))
		}
	}
	t.Logf("%d files: %d valid, %d with cycles", n, valid, cycles)
}
