package server

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// jsFields is every JetStream-related field of o, by name.
func jsFields(o *Options) map[string]any {
	out := map[string]any{}
	v := reflect.ValueOf(o).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if strings.HasPrefix(name, "JetStream") || name == "StoreDir" || name == "SyncInterval" || name == "SyncAlways" {
			out[name] = v.Field(i).Interface()
		}
	}
	return out
}

// nsFields is nats-server's reading of the same file, in natsd's field names and units (for
// the fields both have).
func nsFields(n *natsserver.Options) map[string]any {
	return map[string]any{
		"JetStream": n.JetStream, "StoreDir": n.StoreDir, "JetStreamMaxMemory": n.JetStreamMaxMemory,
		"JetStreamMaxStore": n.JetStreamMaxStore, "JetStreamDomain": n.JetStreamDomain,
		"SyncAlways": n.SyncAlways, "JetStreamStrict": !n.NoJetStreamStrict,
		"JetStreamMaxBufferedMsgs": n.StreamMaxBufferedMsgs, "JetStreamMaxBufferedSize": n.StreamMaxBufferedSize,
		"JetStreamRequestQueueLimit": int(n.JetStreamRequestQueueLimit),
		"JetStreamInfoQueueLimit":    int(n.JetStreamInfoQueueLimit),
		"JetStreamLimits": JetStreamServerLimits{
			MaxAckPending: n.JetStreamLimits.MaxAckPending, MaxHAAssets: n.JetStreamLimits.MaxHAAssets,
			MaxRequestBatch: n.JetStreamLimits.MaxRequestBatch, DuplicateWindow: n.JetStreamLimits.Duplicates,
			DefaultMaxConsumers:       n.JetStreamLimits.DefaultMaxConsumers,
			MaxBatchInflightPerStream: n.JetStreamLimits.MaxBatchInflightPerStream,
			MaxBatchInflightTotal:     n.JetStreamLimits.MaxBatchInflightTotal,
			MaxBatchSize:              n.JetStreamLimits.MaxBatchSize, MaxBatchTimeout: n.JetStreamLimits.MaxBatchTimeout,
		},
		"JetStreamUniqueTag": n.JetStreamUniqueTag, "JetStreamConcurrentIOs": n.JetStreamConcurrentIOs,
		"JetStreamKey": n.JetStreamKey, "JetStreamOldKey": n.JetStreamOldKey, "JetStreamCipher": n.JetStreamCipher.String(),
		"JetStreamTpm": JetStreamTPM{
			KeysFile: n.JetStreamTpm.KeysFile, KeyPassword: n.JetStreamTpm.KeyPassword,
			SrkPassword: n.JetStreamTpm.SrkPassword, Pcr: n.JetStreamTpm.Pcr,
		},
		"JetStreamExtHint": n.JetStreamExtHint, "JetStreamMaxCatchup": n.JetStreamMaxCatchup,
		"JetStreamMetaCompact": n.JetStreamMetaCompact, "JetStreamMetaCompactSize": n.JetStreamMetaCompactSize,
		"JetStreamMetaCompactSync": n.JetStreamMetaCompactSync,
	}
}

// Every form of the jetstream block and each of its keys lands in Options as nats-server
// reads it; the keys natsd does not act on are reported.
func TestConfigJetStreamForms(t *testing.T) {
	limits := JetStreamServerLimits{
		MaxAckPending: 100, MaxHAAssets: 2, MaxRequestBatch: 50, DuplicateWindow: time.Minute,
		DefaultMaxConsumers: 7, MaxBatchInflightPerStream: 10, MaxBatchInflightTotal: 100,
		MaxBatchSize: 1000, MaxBatchTimeout: 5 * time.Second,
	}
	tests := []struct {
		name        string
		body        string
		want        func(o *Options)
		unsupported []string // keys reported as not supported, in file order
		noCompare   bool     // nats-server stores it differently (sync: always)
	}{
		{name: "true", body: "jetstream: true", want: func(o *Options) { o.JetStream = true }},
		{name: "false", body: "jetstream: false", want: func(o *Options) {}},
		{name: "enabled", body: "jetstream: enabled", want: func(o *Options) { o.JetStream = true }},
		{name: "Enable", body: "jetstream: Enable", want: func(o *Options) { o.JetStream = true }},
		{name: "disabled", body: "jetstream: disabled", want: func(o *Options) {}},
		{name: "disable", body: "jetstream: \"disable\"", want: func(o *Options) {}},
		{name: "empty map", body: "jetstream {}", want: func(o *Options) { o.JetStream = true }},
		{name: "map enabled false", body: "jetstream { enabled: false, store_dir: \"/data\" }", want: func(o *Options) { o.StoreDir = "/data" }},
		{name: "map enable true", body: "jetstream { enable: true }", want: func(o *Options) { o.JetStream = true }},
		{name: "store", body: "jetstream { store: /a }", want: func(o *Options) { o.JetStream, o.StoreDir = true, "/a" }},
		{name: "storedir", body: "jetstream { storedir: /a }", want: func(o *Options) { o.JetStream, o.StoreDir = true, "/a" }},
		{name: "top store_dir", body: "store_dir: /a\njetstream: enabled", want: func(o *Options) { o.JetStream, o.StoreDir = true, "/a" }},
		// store_dir alone does not turn JetStream on (nats-server neither).
		{name: "top storedir alone", body: "storedir: /a", want: func(o *Options) { o.StoreDir = "/a" }},
		// The conf package's units: G is 10^9, GB / GiB 2^30.
		{name: "sizes unquoted units", body: "jetstream { max_mem: 1G, max_file: 10GB }", want: func(o *Options) {
			o.JetStream, o.JetStreamMaxMemory, o.JetStreamMaxStore = true, 1e9, 10<<30
		}},
		{name: "sizes strings", body: "jetstream { max_memory_store: \"512M\", max_file_store: \"2T\" }", want: func(o *Options) {
			o.JetStream, o.JetStreamMaxMemory, o.JetStreamMaxStore = true, 512<<20, 2<<40
		}},
		{name: "sizes bytes", body: "jetstream { max_mem_store: 1073741824, max_file: \"16K\" }", want: func(o *Options) {
			o.JetStream, o.JetStreamMaxMemory, o.JetStreamMaxStore = true, 1<<30, 16<<10
		}},
		{name: "sizes empty and negative", body: "jetstream { max_mem: \"\", max_file: -1 }", want: func(o *Options) {
			o.JetStream, o.JetStreamMaxStore = true, -1
		}},
		{name: "sync always", body: "jetstream { sync: always }", noCompare: true, want: func(o *Options) { o.JetStream, o.SyncAlways = true, true }},
		{name: "sync ALWAYS", body: "jetstream { sync_interval: \"ALWAYS\" }", noCompare: true, want: func(o *Options) { o.JetStream, o.SyncAlways = true, true }},
		{name: "sync interval", body: "jetstream { sync_interval: \"30s\" }", want: func(o *Options) { o.JetStream, o.SyncInterval = true, 30*time.Second }},
		{name: "domain", body: "jetstream { domain: hub }", want: func(o *Options) { o.JetStream, o.JetStreamDomain = true, "hub" }},
		{name: "strict false", body: "jetstream { strict: false }", want: func(o *Options) { o.JetStream, o.JetStreamStrictSet = true, true }},
		{name: "strict true", body: "jetstream { strict: true }", want: func(o *Options) {
			o.JetStream, o.JetStreamStrict, o.JetStreamStrictSet = true, true, true
		}},
		{name: "buffers and queue", body: "jetstream { max_buffered_msgs: 5000, max_buffered_size: \"64M\", request_queue_limit: 500 }", want: func(o *Options) {
			o.JetStream, o.JetStreamMaxBufferedMsgs, o.JetStreamMaxBufferedSize, o.JetStreamRequestQueueLimit = true, 5000, 64<<20, 500
		}},
		{name: "limits", body: "jetstream { limits { max_ack_pending: 100, max_ha_assets: 2, max_request_batch: 50, duplicate_window: \"1m\", default_max_consumers: 7, batch { max_inflight_per_stream: 10, max_inflight_total: 100, max_msgs: 1000, timeout: \"5s\" } } }",
			want: func(o *Options) { o.JetStream, o.JetStreamLimits = true, limits }},
		{name: "upper-case keys", body: "JetStream { Max_Mem: 1G, STORE_DIR: /x, Limits { MAX_ACK_PENDING: 3 } }", want: func(o *Options) {
			o.JetStream, o.JetStreamMaxMemory, o.StoreDir, o.JetStreamLimits.MaxAckPending = true, 1e9, "/x", 3
		}},
		{name: "unique_tag", body: "jetstream { unique_tag: \" AZ \" }", unsupported: []string{"jetstream.unique_tag"},
			want: func(o *Options) { o.JetStream, o.JetStreamUniqueTag = true, "az" }},
		{name: "max_concurrent_io", body: "jetstream { max_concurrent_io: 64 }", unsupported: []string{"jetstream.max_concurrent_io"},
			want: func(o *Options) { o.JetStream, o.JetStreamConcurrentIOs = true, 64 }},
		{name: "encryption", body: "jetstream {\n key: s3cr3t\n prev_key: old\n cipher: aes\n}", unsupported: []string{"jetstream.key", "jetstream.prev_key", "jetstream.cipher"},
			want: func(o *Options) {
				o.JetStream, o.JetStreamKey, o.JetStreamOldKey, o.JetStreamCipher = true, "s3cr3t", "old", "aes"
			}},
		{name: "ek aliases", body: "jetstream {\n ek: a\n prev_ek: b\n cipher: ChaChaPoly\n}", unsupported: []string{"jetstream.ek", "jetstream.prev_ek", "jetstream.cipher"},
			want: func(o *Options) {
				o.JetStream, o.JetStreamKey, o.JetStreamOldKey, o.JetStreamCipher = true, "a", "b", "chacha"
			}},
		{name: "encryption_key", body: "jetstream {\n encryption_key: a\n prev_encryption_key: b\n}", unsupported: []string{"jetstream.encryption_key", "jetstream.prev_encryption_key"},
			want: func(o *Options) { o.JetStream, o.JetStreamKey, o.JetStreamOldKey = true, "a", "b" }},
		{name: "tpm", body: "jetstream { tpm { keys_file: /k, encryption_password: p, srk_password: s, pcr: 23, cipher: aes } }", unsupported: []string{"jetstream.tpm"},
			want: func(o *Options) {
				o.JetStream, o.JetStreamCipher = true, "aes"
				o.JetStreamTpm = JetStreamTPM{KeysFile: "/k", KeyPassword: "p", SrkPassword: "s", Pcr: 23}
			}},
		{name: "cluster keys", body: "jetstream {\n extension_hint: will_extend\n max_outstanding_catchup: \"32M\"\n info_queue_limit: 50\n}",
			unsupported: []string{"jetstream.extension_hint", "jetstream.max_outstanding_catchup", "jetstream.info_queue_limit"},
			want: func(o *Options) {
				o.JetStream, o.JetStreamExtHint, o.JetStreamMaxCatchup, o.JetStreamInfoQueueLimit = true, "will_extend", 32<<20, 50
			}},
		{name: "meta_compact", body: "jetstream {\n meta_compact: 10\n meta_compact_size: \"1M\"\n meta_compact_sync: true\n}",
			unsupported: []string{"jetstream.meta_compact", "jetstream.meta_compact_size", "jetstream.meta_compact_sync"},
			want: func(o *Options) {
				o.JetStream, o.JetStreamMetaCompact, o.JetStreamMetaCompactSize, o.JetStreamMetaCompactSync = true, 10, 1<<20, true
			}},
		{name: "account jetstream is supported", body: "accounts { A: { jetstream: enabled } }\njetstream: enabled", want: func(o *Options) { o.JetStream = true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConf(t, tc.body+"\n")
			o := &Options{}
			rep, err := o.ProcessConfigFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := &Options{}
			tc.want(want)
			if got, w := jsFields(o), jsFields(want); !reflect.DeepEqual(got, w) {
				for k := range w {
					if !reflect.DeepEqual(got[k], w[k]) {
						t.Errorf("%s = %v, want %v", k, got[k], w[k])
					}
				}
			}
			var keys []string
			for _, u := range rep.Unsupported {
				keys = append(keys, u.Key)
			}
			if !reflect.DeepEqual(keys, tc.unsupported) {
				t.Errorf("unsupported = %q, want %q", rep.Unsupported, tc.unsupported)
			}
			if tc.noCompare {
				return
			}
			n, err := natsserver.ProcessConfigFile(path)
			if err != nil {
				t.Fatalf("nats-server: %v", err)
			}
			got := jsFields(o)
			for k, v := range nsFields(n) {
				switch k {
				case "JetStreamStrict":
					got[k] = effStrict(o)
				case "JetStreamCipher":
					got[k] = cipherName(o.JetStreamCipher)
				}
				if !reflect.DeepEqual(got[k], v) {
					t.Errorf("%s: natsd %v, nats-server %v", k, got[k], v)
				}
			}
			if n.SyncInterval != o.SyncInterval {
				t.Errorf("SyncInterval: natsd %v, nats-server %v", o.SyncInterval, n.SyncInterval)
			}
		})
	}
}

// Bad values are refused with nats-server's text, at the same position; "same" marks the
// cases whose whole error is checked against nats-server's.
func TestConfigJetStreamErrors(t *testing.T) {
	tests := []struct {
		body, want string
		same       bool
	}{
		{body: "jetstream: maybe", want: "Expected 'enabled' or 'disabled' for string value, got 'maybe'", same: true},
		{body: "jetstream: 5", want: "Expected map, bool or string to define JetStream, got int64", same: true},
		{body: "jetstream: 1.5", want: "Expected map, bool or string to define JetStream, got float64", same: true},
		{body: "jetstream { max_mem: \"lots\" }", want: `max_mem_store strconv.ParseInt: parsing "lot": invalid syntax`, same: true},
		{body: "jetstream { max_memory_store: \"1GB\" }", want: `max_mem_store strconv.ParseInt: parsing "1G": invalid syntax`, same: true},
		{body: "jetstream { max_file: \"10X\" }", want: "max_file_store sizes defined as strings must end in K, M, G, T", same: true},
		{body: "jetstream { max_file_store: \"1k\" }", want: "max_file_store sizes defined as strings must end in K, M, G, T", same: true},
		{body: "jetstream { max_file: true }", want: "max_file_store must be int64 or string", same: true},
		{body: "jetstream { max_mem: 1.5 }", want: "max_mem_store must be int64 or string", same: true},
		{body: "jetstream { max_buffered_msgs: \"x\" }", want: `Expected a parseable size for "max_buffered_msgs", got x`, same: true},
		{body: "jetstream { request_queue_limit: 1.5 }", want: `Expected a parseable size for "request_queue_limit", got 1.5`, same: true},
		{body: "jetstream { info_queue_limit: \"a\" }", want: `Expected a parseable size for "info_queue_limit", got a`, same: true},
		{body: "jetstream { max_buffered_size: \"1Q\" }", want: "max_buffered_size sizes defined as strings must end in K, M, G, T", same: true},
		{body: "jetstream { Max_Outstanding_Catchup: \"x\" }", want: `max_outstanding_catchup strconv.ParseInt: parsing "": invalid syntax`, same: true},
		{body: "jetstream { max_concurrent_io: 2 }", want: `Expected an absolute size for "max_concurrent_io" between 4 and 8192, got 2`, same: true},
		{body: "jetstream { max_concurrent_io: 9000 }", want: `Expected an absolute size for "max_concurrent_io" between 4 and 8192, got 9000`, same: true},
		{body: "jetstream { meta_compact: -1 }", want: `Expected an absolute size for "meta_compact", got -1`, same: true},
		{body: "jetstream { meta_compact_size: -5 }", want: `Expected an absolute size for "meta_compact_size", got -5`, same: true},
		{body: "jetstream { strict: \"yes\" }", want: "Expected 'true' or 'false' for bool value, got 'yes'", same: true},
		{body: "jetstream { cipher: des }", want: `Unknown cipher type: "des"`, same: true},
		{body: "jetstream { tpm { cipher: des } }", want: `Unknown cipher type: "des"`, same: true},
		{body: "jetstream { tpm: 5 }", want: "Expected a map to define JetStreamLimits, got int64", same: true},
		{body: "jetstream { limits: 5 }", want: "Expected a map to define JetStreamLimits, got int64", same: true},
		{body: "jetstream { limits: { batch: 5 } }", want: "Expected a map to define batch limits, got int64", same: true},
		{body: "jetstream { limits: { bogus: 1 } }", want: `unknown field "bogus"`, same: true},
		{body: "jetstream { limits: { batch: { bogus: 1 } } }", want: `unknown field "bogus"`, same: true},
		{body: "jetstream { tpm: { bogus: 1 } }", want: `unknown field "bogus"`, same: true},
		{body: "jetstream { bogus: 1 }", want: `unknown field "bogus"`, same: true},
		{body: "jetstream { sync: \"often\" }", want: `error parsing sync: time: invalid duration "often"`, same: true},
		// nats-server blames whichever of the two its map order reaches second.
		{body: "store_dir: /a\njetstream { store_dir: /b }", want: "nats.conf:2:13: Duplicate 'store_dir' configuration"},
		{body: "jetstream { store: /b }\nstoredir: /a", want: "nats.conf:2:1: Duplicate 'store_dir' configuration"},
		// nats-server's text without a position.
		{body: "jetstream { limits: { duplicate_window: \"x\" } }", want: `time: invalid duration "x"`},
		{body: "jetstream { limits: { batch: { timeout: \"x\" } } }", want: `time: invalid duration "x"`},
		// Wrong types: nats-server fails on an interface conversion, natsd says what it wanted.
		{body: "jetstream { domain: 5 }", want: `expected a string for "domain", got integer`},
		{body: "jetstream { enabled: \"no\" }", want: `expected a boolean for "enabled", got string`},
		{body: "jetstream { store_dir: 5 }", want: `expected a string for "store_dir", got integer`},
		{body: "store_dir: true", want: `expected a string for "store_dir", got boolean`},
		{body: "jetstream { limits: { max_ack_pending: \"x\" } }", want: `expected an integer for "max_ack_pending", got string`},
		{body: "jetstream { key: 5 }", want: `expected a string for "key", got integer`},
		{body: "jetstream { sync: true }", want: `expected a duration for "sync", got boolean`},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			path := writeConf(t, tc.body+"\n")
			o := &Options{}
			_, err := o.ProcessConfigFile(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if !located.MatchString(err.Error()) {
				t.Errorf("error %q has no position", err)
			}
			_, nerr := natsserver.ProcessConfigFile(path)
			if nerr == nil {
				t.Fatalf("nats-server accepts it")
			}
			if tc.same && err.Error() != strings.TrimSpace(nerr.Error()) {
				t.Errorf("natsd:       %v\nnats-server: %v", err, nerr)
			}
			reason := tc.want
			if m := located.FindString(reason); m != "" {
				reason = reason[len(m):]
			}
			if !tc.same && !strings.Contains(tc.want, "expected") && !strings.Contains(nerr.Error(), reason) {
				t.Errorf("nats-server: %v, want %q", nerr, tc.want)
			}
		})
	}
}

// A bad domain is refused with nats-server's text (nats-server checks it when the server is
// created, natsd when the file is read).
func TestConfigJetStreamDomain(t *testing.T) {
	for _, tc := range []struct{ domain, want string }{
		{"a.b", "invalid domain name: may not contain ., * or >"},
		{"a*", "invalid domain name: may not contain ., * or >"},
		{"a>", "invalid domain name: may not contain ., * or >"},
		{"a b", `invalid domain name: derived "$JS.a b.API.>" is not a valid subject`},
		{">", `invalid domain name: derived "$JS.>.API.>" is not a valid subject`},
		{"ok-domain_1", ""},
		{"", ""},
	} {
		path := writeConf(t, "jetstream { domain: \""+tc.domain+"\" }\n")
		o := &Options{}
		_, err := o.ProcessConfigFile(path)
		n, nerr := natsserver.ProcessConfigFile(path)
		if nerr != nil {
			t.Fatal(nerr)
		}
		n.NoSigs, n.NoLog, n.DontListen, n.JetStream = true, true, true, false
		ns, nerr := natsserver.NewServer(n)
		if ns != nil {
			ns.Shutdown()
		}
		if tc.want == "" {
			if err != nil || nerr != nil || o.JetStreamDomain != tc.domain {
				t.Errorf("%q: natsd %v (%q), nats-server %v", tc.domain, err, o.JetStreamDomain, nerr)
			}
			continue
		}
		if err == nil || !strings.HasSuffix(err.Error(), ": "+tc.want) || !located.MatchString(err.Error()) {
			t.Errorf("%q: natsd err = %v, want %q", tc.domain, err, tc.want)
		}
		if nerr == nil || nerr.Error() != tc.want {
			t.Errorf("%q: nats-server err = %v, want %q", tc.domain, nerr, tc.want)
		}
	}
}

// An integer sync interval is taken as seconds with nats-server's warning.
func TestConfigJetStreamSyncSeconds(t *testing.T) {
	path := writeConf(t, "jetstream { sync: 60 }\n")
	o := &Options{}
	rep, err := o.ProcessConfigFile(path)
	if err != nil || o.SyncInterval != time.Minute || len(rep.Warnings) != 1 {
		t.Fatalf("sync %v, warnings %v, err %v", o.SyncInterval, rep.Warnings, err)
	}
	nerr := (&natsserver.Options{}).ProcessConfigFile(path)
	if nerr == nil || strings.TrimSpace(nerr.Error()) != rep.Warnings[0].Error() {
		t.Fatalf("natsd: %v\nnats-server: %v", rep.Warnings[0], nerr)
	}
}

// Reload: the JetStream changes nats-server takes and refuses, with its texts.
func TestReloadJetStreamRules(t *testing.T) {
	tests := []struct {
		name, from, to, want string
		nsWant               string // nats-server's text, where natsd's differs
	}{
		{name: "nothing JetStream changes", from: "jetstream { store_dir: \"%d\", max_mem: 1G }", to: "jetstream { store_dir: \"%d\", max_mem: 1G }\nmax_payload: 512KB"},
		{name: "turn on", from: "", to: "jetstream { store_dir: \"%d\" }"},
		{name: "turn off", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { enabled: false, store_dir: \"%d\" }"},
		{name: "turn off dropping the block", from: "jetstream { store_dir: \"%d\", max_mem: 1G }", to: ""},
		{name: "store dir", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d/other\" }", want: "config reload not supported for jetstream storage directory"},
		{name: "store dir dropped", from: "jetstream { store_dir: \"%d\" }", to: "jetstream {}", want: "config reload not supported for jetstream storage dir"},
		{name: "store dir while off", from: "jetstream { enabled: false, store_dir: \"%d\" }", to: "jetstream { enabled: false, store_dir: \"%d/other\" }"},
		{name: "grow", from: "jetstream { store_dir: \"%d\", max_mem: 1G, max_file: 1G }", to: "jetstream { store_dir: \"%d\", max_mem: 2G, max_file: 2G }"},
		{name: "shrink", from: "jetstream { store_dir: \"%d\", max_mem: 2G }", to: "jetstream { store_dir: \"%d\", max_mem: 1G }", want: "config reload not supported for decreasing jetstream max memory and store"},
		{name: "fix dynamic", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", max_file: 1G }", want: "config reload not supported for jetstream dynamic max memory and store"},
		{name: "back to dynamic", from: "jetstream { store_dir: \"%d\", max_file: 1G }", to: "jetstream { store_dir: \"%d\" }", want: "config reload not supported for jetstream max memory and max store"},
		{name: "limits", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", limits { max_ack_pending: 10, duplicate_window: \"1m\" } }"},
		{name: "domain", from: "jetstream { store_dir: \"%d\", domain: a }", to: "jetstream { store_dir: \"%d\", domain: b }", want: "config reload not supported for JetStreamDomain: old=a, new=b"},
		{name: "strict", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", strict: false }", want: "config reload not supported for NoJetStreamStrict: old=false, new=true"},
		{name: "strict made explicit", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", strict: true }"},
		{name: "request queue default made explicit", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", request_queue_limit: 10000 }"},
		{name: "request queue", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", request_queue_limit: 5 }", want: "config reload not supported for JetStreamRequestQueueLimit: old=10000, new=5"},
		{name: "buffered msgs", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", max_buffered_msgs: 5 }", want: "config reload not supported for StreamMaxBufferedMsgs: old=0, new=5"},
		{name: "sync always", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", sync: always }", want: "config reload not supported for SyncAlways: old=false, new=true"},
		{name: "unique tag", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", unique_tag: az }", want: "config reload not supported for JetStreamUniqueTag: old=, new=az"},
		{name: "concurrent io", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", max_concurrent_io: 64 }", want: "config reload not supported for JetStreamConcurrentIOs: old=4096, new=64"},
		{name: "concurrent io with the block gone", from: "jetstream { store_dir: \"%d\", max_concurrent_io: 64 }", to: ""},
		{name: "meta compact", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", meta_compact: 5 }"},
		// nats-server prints the keys; natsd does not.
		{name: "key", from: "jetstream { store_dir: \"%d\", key: a }", to: "jetstream { store_dir: \"%d\", key: b }",
			want: "config reload not supported for JetStreamKey: old=[REDACTED], new=[REDACTED]", nsWant: "config reload not supported for JetStreamKey: old=a, new=b"},
		{name: "cipher default made explicit", from: "jetstream { store_dir: \"%d\" }", to: "jetstream { store_dir: \"%d\", cipher: chacha }"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sd := t.TempDir()
			sub := func(s string) string { return strings.ReplaceAll(s, "%d", sd) }
			from, to := sub(tc.from)+"\nhost: 127.0.0.1\nport: -1\n", sub(tc.to)+"\nhost: 127.0.0.1\nport: -1\n"
			load := func(body string) *Options {
				o := &Options{Logtime: true}
				if _, err := o.ProcessConfigFile(writeConf(t, body)); err != nil {
					t.Fatal(err)
				}
				if err := prepareOptions(o); err != nil {
					t.Fatal(err)
				}
				return o
			}
			old, new := load(from), load(to)
			new.ConfigFile = old.ConfigFile
			_, err := diffOptions(old, new)
			if tc.want == "" && err != nil {
				t.Fatalf("natsd refuses: %v", err)
			}
			if tc.want != "" && (err == nil || err.Error() != tc.want) {
				t.Fatalf("natsd err = %v, want %q", err, tc.want)
			}
			// The same reload on nats-server.
			path := writeConf(t, from)
			n, nerr := natsserver.ProcessConfigFile(path)
			if nerr != nil {
				t.Fatal(nerr)
			}
			n.NoSigs, n.NoLog = true, true
			ns, nerr := natsserver.NewServer(n)
			if nerr != nil {
				t.Fatal(nerr)
			}
			ns.Start()
			defer ns.Shutdown()
			if !ns.ReadyForConnections(5 * time.Second) {
				t.Fatal("nats-server did not start")
			}
			if err := os.WriteFile(path, []byte(to), 0o600); err != nil {
				t.Fatal(err)
			}
			nerr = ns.Reload()
			if tc.nsWant != "" {
				tc.want = tc.nsWant
			}
			switch {
			case tc.want == "" && nerr != nil:
				t.Fatalf("nats-server refuses: %v", nerr)
			case tc.want != "" && (nerr == nil || nerr.Error() != tc.want):
				t.Fatalf("nats-server err = %v, want %q", nerr, tc.want)
			}
		})
	}
}

// A running natsd with JetStream configured reloads unrelated changes, and refuses a new
// store directory without applying anything.
func TestReloadJetStreamServer(t *testing.T) {
	sd := t.TempDir()
	base := reloadBase + "jetstream { store_dir: \"" + sd + "\", max_mem: 1G }\n"
	s, path := startFromConf(t, base, nil)
	rewrite(t, path, base+"debug: true\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if o := s.getOpts(); !o.Debug || !o.JetStream || o.StoreDir != sd {
		t.Fatalf("after reload: debug %v jetstream %v store %q", o.Debug, o.JetStream, o.StoreDir)
	}
	rewrite(t, path, strings.Replace(base, sd, sd+"/x", 1)+"debug: false\n")
	if err := s.Reload(); err == nil || err.Error() != "config reload not supported for jetstream storage directory" {
		t.Fatalf("err = %v", err)
	}
	if o := s.getOpts(); !o.Debug || o.StoreDir != sd {
		t.Fatalf("half-applied: debug %v store %q", o.Debug, o.StoreDir)
	}
}
