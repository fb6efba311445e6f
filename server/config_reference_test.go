package server

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// docs/CONFIG.md gives every nats-server v2.15.2 config key a status for natsd. This file
// checks that reference against the code: every key listed in
// testdata/reference_config_keys.txt (facts about nats-server) has a status in the doc, and
// for each key (and each alias) a minimal config holding it is parsed by natsd's config parser,
// which must agree with the doc:
//
//	yes, differs  the file loads and nothing is reported as not supported
//	not yet       the key is reported as not supported (start-up refuses it unless
//	              allow_unsupported is set)
//	refused       loading fails with a "not supported" error whatever else is set

const (
	statusYes     = "yes"
	statusDiffers = "differs"
	statusNotYet  = "not yet"
	statusRefused = "refused"
)

// natsdBlock holds natsd's own keys in the doc (not in the reference, checked all the same).
const natsdBlock = "natsd"

type refKey struct {
	block string
	names []string // canonical name first, then aliases
}

func readReferenceKeys(t *testing.T) []refKey {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "reference_config_keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []refKey
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 2 {
			t.Fatalf("reference_config_keys.txt: bad line %q", line)
		}
		keys = append(keys, refKey{block: fs[0], names: strings.Split(fs[1], "|")})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

type docRow struct {
	status string
	note   string
	line   int
}

var (
	docMarkerRe = regexp.MustCompile(`^<!-- keys: ([a-z.]+) -->$`)
	docNameRe   = regexp.MustCompile("`([a-z0-9_]+)`")
)

// readConfigDoc reads the key tables of docs/CONFIG.md: each starts after a
// `<!-- keys: BLOCK -->` line; a row's first cell names the keys (in backquotes), its second
// the status, its third the note.
func readConfigDoc(t *testing.T) map[string]map[string]docRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "CONFIG.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]map[string]docRow{}
	block := ""
	for i, line := range strings.Split(string(data), "\n") {
		if m := docMarkerRe.FindStringSubmatch(line); m != nil {
			block = m[1]
			if doc[block] == nil {
				doc[block] = map[string]docRow{}
			}
			continue
		}
		if block == "" {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if strings.TrimSpace(line) != "" && len(doc[block]) > 0 {
				block = "" // the table ended
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("CONFIG.md:%d: a key row needs three cells: %q", i+1, line)
		}
		status := strings.TrimSpace(cells[1])
		if status == "natsd" || strings.HasPrefix(status, "--") || strings.HasPrefix(status, ":-") {
			continue // the header and its rule
		}
		names := docNameRe.FindAllStringSubmatch(cells[0], -1)
		if len(names) == 0 {
			t.Fatalf("CONFIG.md:%d: no key in %q", i+1, cells[0])
		}
		switch status {
		case statusYes, statusDiffers, statusNotYet, statusRefused:
		default:
			t.Fatalf("CONFIG.md:%d: status %q is not one of yes, differs, not yet, refused", i+1, status)
		}
		note := strings.TrimSpace(strings.Join(cells[2:], "|"))
		for _, n := range names {
			if _, dup := doc[block][n[1]]; dup {
				t.Errorf("CONFIG.md:%d: %s.%s listed twice", i+1, block, n[1])
			}
			doc[block][n[1]] = docRow{status: status, note: note, line: i + 1}
		}
	}
	return doc
}

// Sample configs, one per key (by block and canonical name): $K is replaced by the name or
// alias under test, $CERT, $KEY and $CA by the test certificates, $TMP by a temp directory.
// Blocks whose keys are all "not yet" with their block take the block's template instead.
var configSamples = map[string]string{
	// top level
	"top listen":                   `$K: "127.0.0.1:4222"`,
	"top host":                     `$K: 127.0.0.1`,
	"top port":                     `$K: 4222`,
	"top server_name":              `$K: s1`,
	"top client_advertise":         `$K: "127.0.0.1:4222"`,
	"top server_tags":              `$K: ["az:1"]`,
	"top server_metadata":          `$K: { a: b }`,
	"top pidfile":                  `$K: "$TMP/natsd.pid"`,
	"top ports_file_dir":           `$K: "$TMP"`,
	"top feature_flags":            `$K: { js_ack_fc_v2: true }`,
	"top proxy_protocol":           `$K: true`,
	"top proxies":                  `$K: { trusted: [ { key: "UDI6WVOC74MKILLGMMLEQ2QLTBJDUUERIV725CF5POCUKONT5PCRVDRV" } ] }`,
	"top max_connections":          `$K: 100`,
	"top max_payload":              `$K: 512KB`,
	"top max_pending":              `$K: 32MB`,
	"top max_control_line":         `$K: 8192`,
	"top max_subscriptions":        `$K: 100`,
	"top max_sub_tokens":           `$K: 16`,
	"top ping_interval":            `$K: "1m"`,
	"top ping_max":                 `$K: 3`,
	"top write_deadline":           `$K: "5s"`,
	"top write_timeout":            `$K: close`,
	"top max_closed_clients":       `$K: 100`,
	"top lame_duck_duration":       `$K: "60s"`,
	"top lame_duck_grace_period":   `$K: "5s"`,
	"top no_header_support":        `$K: true`,
	"top disable_sublist_cache":    `$K: true`,
	"top no_fast_producer_stall":   `$K: true`,
	"top connect_error_reports":    `$K: 10`,
	"top reconnect_error_reports":  `$K: 2`,
	"top debug":                    `$K: true`,
	"top trace":                    `$K: true`,
	"top trace_verbose":            `$K: true`,
	"top trace_headers":            `$K: true`,
	"top logtime":                  `$K: false`,
	"top logtime_utc":              `$K: true`,
	"top logfile":                  `$K: "$TMP/natsd.log"`,
	"top logfile_size_limit":       `$K: 1MB`,
	"top logfile_max_num":          `$K: 3`,
	"top syslog":                   `$K: false`,
	"top remote_syslog":            `$K: "udp://127.0.0.1:514"`,
	"top max_traced_msg_len":       `$K: 128`,
	"top http":                     `$K: "127.0.0.1:8222"`,
	"top https":                    `$K: "127.0.0.1:8223"`,
	"top http_port":                `$K: 8222`,
	"top https_port":               `$K: 8223`,
	"top http_base_path":           `$K: "/monitor"`,
	"top prof_port":                `$K: 6060`,
	"top prof_block_rate":          `$K: 1`,
	"top authorization":            `$K { token: s3cr3t }`,
	"top accounts":                 `$K { A: { users: [ { user: a, password: a } ] } }`,
	"top no_auth_user":             "authorization { users: [ { user: u1, password: p1 } ] }\n$K: u1",
	"top system_account":           "accounts { SYS: {} }\n$K: SYS",
	"top no_system_account":        `$K: true`,
	"top default_sentinel":         `$K: "eyJhbGciOiJIUzI1NiJ9"`,
	"top tls":                      `$K { cert_file: "$CERT", key_file: "$KEY" }`,
	"top allow_non_tls":            `$K: true`,
	"top ocsp":                     `$K: false`,
	"top ocsp_cache":               `$K: false`,
	"top mappings":                 `$K { "a.*": "b.{{wildcard(1)}}" }`,
	"top operator":                 `$K: "$TMP/op.jwt"`,
	"top trusted":                  `$K: ["OAMBSZEHDQVQFR5U3JJ6AC2IQ3U6BFMVST7FTYNJOU4DBYYCENTRN5ET"]`,
	"top resolver":                 `$K: MEMORY`,
	"top resolver_tls":             `$K { ca_file: "$CA" }`,
	"top resolver_preload":         `$K { }`,
	"top resolver_pinned_accounts": `$K: ["ADNMTSF7A5GIXYGRLOMTXBEHVWE6EHCNOL52QYABBDCB4DSU665A2YUT"]`,
	"top default_js_domain":        `$K { A: hub }`,
	"top jetstream":                `$K { store_dir: "$TMP/js" }`,
	"top store_dir":                `$K: "$TMP/js"`,
	"top cluster":                  `$K { name: c1, listen: "127.0.0.1:6222" }`,
	"top gateway":                  `$K { name: g1, port: 7222 }`,
	"top leafnodes":                `$K { port: 7422 }`,
	"top websocket":                `$K { port: 8080, no_tls: true }`,
	"top mqtt":                     `$K { port: 1883 }`,

	// authorization { }
	"authorization user":               `authorization { $K: u1, password: p1 }`,
	"authorization pass":               `authorization { user: u1, $K: p1 }`,
	"authorization token":              `authorization { $K: s3cr3t }`,
	"authorization timeout":            `authorization { token: s3cr3t, $K: 3 }`,
	"authorization users":              `authorization { $K: [ { user: u1, password: p1 } ] }`,
	"authorization default_permission": `authorization { users: [ { user: u1, password: p1 } ], $K: { publish: ["a.>"] } }`,
	"authorization auth_callout":       `authorization { users: [ { user: auth, password: pw } ], $K: { issuer: "ADNMTSF7A5GIXYGRLOMTXBEHVWE6EHCNOL52QYABBDCB4DSU665A2YUT", auth_users: [auth] } }`,
	"authorization proxy_required":     `authorization { user: u1, password: p1, $K: true }`,

	// users entries
	"users user":                     `authorization { users: [ { $K: u1, password: p1 } ] }`,
	"users pass":                     `authorization { users: [ { user: u1, $K: p1 } ] }`,
	"users nkey":                     `authorization { users: [ { $K: "UDI6WVOC74MKILLGMMLEQ2QLTBJDUUERIV725CF5POCUKONT5PCRVDRV" } ] }`,
	"users permissions":              `authorization { users: [ { user: u1, password: p1, $K: { subscribe: ["a.>"] } } ] }`,
	"users allowed_connection_types": `authorization { users: [ { user: u1, password: p1, $K: ["STANDARD"] } ] }`,
	"users proxy_required":           `authorization { users: [ { user: u1, password: p1, $K: true } ] }`,

	// permissions
	"permissions publish":         `authorization { users: [ { user: u1, password: p1, permissions: { $K: { allow: ["a.>"], deny: ["a.b"] } } } ] }`,
	"permissions subscribe":       `authorization { users: [ { user: u1, password: p1, permissions: { $K: ["a.>"] } } ] }`,
	"permissions allow_responses": `authorization { users: [ { user: u1, password: p1, permissions: { $K: { max: 1, expires: "1m" } } } ] }`,

	// accounts { NAME: { } }
	"accounts users":               `accounts { A: { $K: [ { user: a, password: a } ] } }`,
	"accounts nkey":                `accounts { A: { $K: "ADNMTSF7A5GIXYGRLOMTXBEHVWE6EHCNOL52QYABBDCB4DSU665A2YUT" } }`,
	"accounts imports":             `accounts { A: { exports: [ { stream: "s.>" } ] }, B: { $K: [ { stream: { account: A, subject: "s.>" } } ] } }`,
	"accounts exports":             `accounts { A: { $K: [ { service: "svc" } ] } }`,
	"accounts jetstream":           `accounts { A: { $K: enabled } }`,
	"accounts default_permissions": `accounts { A: { $K: { publish: ["a.>"] } } }`,
	"accounts mappings":            `accounts { A: { $K: { "a": "b" } } }`,
	"accounts limits":              `accounts { A: { $K: { max_connections: 10 } } }`,
	"accounts msg_trace":           `accounts { A: { $K: "trace.dest" } }`,

	"accounts.limits max_connections":   `accounts { A: { limits: { $K: 10 } } }`,
	"accounts.limits max_subscriptions": `accounts { A: { limits: { $K: 10 } } }`,
	"accounts.limits max_payload":       `accounts { A: { limits: { $K: 1024 } } }`,
	"accounts.limits max_leafnodes":     `accounts { A: { limits: { $K: 1 } } }`,

	"accounts.jetstream max_memory":            `accounts { A: { jetstream: { $K: 1GB } } }`,
	"accounts.jetstream max_store":             `accounts { A: { jetstream: { $K: 1GB } } }`,
	"accounts.jetstream max_streams":           `accounts { A: { jetstream: { $K: 10 } } }`,
	"accounts.jetstream max_consumers":         `accounts { A: { jetstream: { $K: 10 } } }`,
	"accounts.jetstream max_bytes_required":    `accounts { A: { jetstream: { $K: true } } }`,
	"accounts.jetstream mem_max_stream_bytes":  `accounts { A: { jetstream: { $K: 1MB } } }`,
	"accounts.jetstream disk_max_stream_bytes": `accounts { A: { jetstream: { $K: 1MB } } }`,
	"accounts.jetstream max_ack_pending":       `accounts { A: { jetstream: { $K: 100 } } }`,
	"accounts.jetstream cluster_traffic":       `accounts { A: { jetstream: { $K: owner } } }`,

	"exports stream":                 `accounts { A: { exports: [ { $K: "s.>" } ] } }`,
	"exports service":                `accounts { A: { exports: [ { $K: "svc" } ] } }`,
	"exports accounts":               `accounts { A: { exports: [ { service: "svc", $K: [B] } ] }, B: {} }`,
	"exports response_type":          `accounts { A: { exports: [ { service: "svc", $K: stream } ] } }`,
	"exports response_threshold":     `accounts { A: { exports: [ { service: "svc", $K: "5s" } ] } }`,
	"exports latency":                `accounts { A: { exports: [ { service: "svc", $K: { sampling: 50, subject: "lat" } } ] } }`,
	"exports account_token_position": `accounts { A: { exports: [ { service: "svc.*", accounts: [B], $K: 2 } ] }, B: {} }`,
	"exports allow_trace":            `accounts { A: { exports: [ { service: "svc", $K: true } ] } }`,

	"imports stream":      `accounts { A: { exports: [ { stream: "s.>" } ] }, B: { imports: [ { $K: { account: A, subject: "s.>" } } ] } }`,
	"imports service":     `accounts { A: { exports: [ { service: "svc" } ] }, B: { imports: [ { $K: { account: A, subject: "svc" } } ] } }`,
	"imports prefix":      `accounts { A: { exports: [ { stream: "s.>" } ] }, B: { imports: [ { stream: { account: A, subject: "s.>" }, $K: "from" } ] } }`,
	"imports to":          `accounts { A: { exports: [ { service: "svc" } ] }, B: { imports: [ { service: { account: A, subject: "svc" }, $K: "asvc" } ] } }`,
	"imports share":       `accounts { A: { exports: [ { service: "svc" } ] }, B: { imports: [ { service: { account: A, subject: "svc" }, $K: true } ] } }`,
	"imports allow_trace": `accounts { A: { exports: [ { stream: "s.>" } ] }, B: { imports: [ { stream: { account: A, subject: "s.>" }, $K: true } ] } }`,

	// jetstream { }
	"jetstream enabled":                 `jetstream { $K: true }`,
	"jetstream store_dir":               `jetstream { $K: "$TMP/js" }`,
	"jetstream max_memory_store":        `jetstream { $K: 1GB }`,
	"jetstream max_file_store":          `jetstream { $K: 10GB }`,
	"jetstream sync_interval":           `jetstream { $K: "1m" }`,
	"jetstream domain":                  `jetstream { $K: hub }`,
	"jetstream unique_tag":              `jetstream { $K: "az:" }`,
	"jetstream strict":                  `jetstream { $K: true }`,
	"jetstream key":                     `jetstream { $K: "s3cr3t" }`,
	"jetstream prev_key":                `jetstream { $K: "old" }`,
	"jetstream cipher":                  `jetstream { $K: aes }`,
	"jetstream tpm":                     `jetstream { $K: { keys_file: "$TMP/keys" } }`,
	"jetstream extension_hint":          `jetstream { $K: "x" }`,
	"jetstream limits":                  `jetstream { $K: { max_ack_pending: 1000 } }`,
	"jetstream max_outstanding_catchup": `jetstream { $K: 64MB }`,
	"jetstream max_buffered_size":       `jetstream { $K: 128MB }`,
	"jetstream max_buffered_msgs":       `jetstream { $K: 10000 }`,
	"jetstream request_queue_limit":     `jetstream { $K: 5000 }`,
	"jetstream info_queue_limit":        `jetstream { $K: 1000 }`,
	"jetstream meta_compact":            `jetstream { $K: 100 }`,
	"jetstream meta_compact_size":       `jetstream { $K: 1MB }`,
	"jetstream meta_compact_sync":       `jetstream { $K: true }`,
	"jetstream max_concurrent_io":       `jetstream { $K: 64 }`,

	"jetstream.limits max_ack_pending":       `jetstream { limits { $K: 1000 } }`,
	"jetstream.limits max_ha_assets":         `jetstream { limits { $K: 10 } }`,
	"jetstream.limits max_request_batch":     `jetstream { limits { $K: 100 } }`,
	"jetstream.limits default_max_consumers": `jetstream { limits { $K: 100 } }`,
	"jetstream.limits duplicate_window":      `jetstream { limits { $K: "1m" } }`,
	"jetstream.limits batch":                 `jetstream { limits { $K { max_msgs: 100 } } }`,

	"jetstream.limits.batch max_inflight_per_stream": `jetstream { limits { batch { $K: 10 } } }`,
	"jetstream.limits.batch max_inflight_total":      `jetstream { limits { batch { $K: 100 } } }`,
	"jetstream.limits.batch max_msgs":                `jetstream { limits { batch { $K: 100 } } }`,
	"jetstream.limits.batch timeout":                 `jetstream { limits { batch { $K: "5s" } } }`,

	"jetstream.tpm keys_file":           `jetstream { tpm { $K: "$TMP/keys" } }`,
	"jetstream.tpm encryption_password": `jetstream { tpm { keys_file: "$TMP/keys", $K: pw } }`,
	"jetstream.tpm srk_password":        `jetstream { tpm { keys_file: "$TMP/keys", $K: pw } }`,
	"jetstream.tpm pcr":                 `jetstream { tpm { keys_file: "$TMP/keys", $K: 22 } }`,
	"jetstream.tpm cipher":              `jetstream { tpm { keys_file: "$TMP/keys", $K: aes } }`,

	// cluster { }
	"cluster name":            `cluster { $K: c1, port: 6222 }`,
	"cluster listen":          `cluster { $K: "127.0.0.1:6222" }`,
	"cluster host":            `cluster { $K: 127.0.0.1, port: 6222 }`,
	"cluster port":            `cluster { $K: 6222 }`,
	"cluster advertise":       `cluster { port: 6222, $K: "10.0.0.1:6222" }`,
	"cluster no_advertise":    `cluster { port: 6222, $K: true }`,
	"cluster routes":          `cluster { port: 6222, $K: ["nats://127.0.0.1:6223"] }`,
	"cluster authorization":   `cluster { port: 6222, $K: { user: r, password: r, timeout: 2 } }`,
	"cluster permissions":     `cluster { port: 6222, $K: { import: ["a.>"], export: ["b.>"] } }`,
	"cluster tls":             `cluster { port: 6222, $K: { cert_file: "$CERT", key_file: "$KEY", ca_file: "$CA" } }`,
	"cluster connect_retries": `cluster { port: 6222, $K: 5 }`,
	"cluster connect_backoff": `cluster { port: 6222, $K: true }`,
	"cluster pool_size":       `cluster { port: 6222, $K: 5 }`,
	"cluster accounts":        `accounts { A: {} }` + "\n" + `cluster { port: 6222, $K: [A] }`,
	"cluster compression":     `cluster { port: 6222, $K: s2_fast }`,
	"cluster ping_interval":   `cluster { port: 6222, $K: "10s" }`,
	"cluster ping_max":        `cluster { port: 6222, $K: 3 }`,
	"cluster write_deadline":  `cluster { port: 6222, $K: "5s" }`,
	"cluster write_timeout":   `cluster { port: 6222, $K: retry }`,

	// tls { } (the top-level block, clients)
	"tls cert_file":                        `tls { $K: "$CERT", key_file: "$KEY" }`,
	"tls key_file":                         `tls { cert_file: "$CERT", $K: "$KEY" }`,
	"tls ca_file":                          `tls { cert_file: "$CERT", key_file: "$KEY", $K: "$CA" }`,
	"tls certs":                            `tls { $K: [ { cert_file: "$CERT", key_file: "$KEY" } ] }`,
	"tls verify":                           `tls { cert_file: "$CERT", key_file: "$KEY", ca_file: "$CA", $K: true }`,
	"tls verify_and_map":                   `tls { cert_file: "$CERT", key_file: "$KEY", ca_file: "$CA", $K: true }`,
	"tls verify_cert_and_check_known_urls": `cluster { port: 6222, tls { cert_file: "$CERT", key_file: "$KEY", ca_file: "$CA", $K: true } }`,
	"tls insecure":                         `tls { cert_file: "$CERT", key_file: "$KEY", $K: true }`,
	"tls cipher_suites":                    `tls { cert_file: "$CERT", key_file: "$KEY", $K: ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"] }`,
	"tls curve_preferences":                `tls { cert_file: "$CERT", key_file: "$KEY", $K: ["X25519"] }`,
	"tls allow_insecure_cipher_suites":     `tls { cert_file: "$CERT", key_file: "$KEY", $K: false }`,
	"tls min_version":                      `tls { cert_file: "$CERT", key_file: "$KEY", $K: "1.3" }`,
	"tls timeout":                          `tls { cert_file: "$CERT", key_file: "$KEY", $K: 3 }`,
	"tls connection_rate_limit":            `tls { cert_file: "$CERT", key_file: "$KEY", $K: 100 }`,
	"tls pinned_certs":                     `tls { cert_file: "$CERT", key_file: "$KEY", ca_file: "$CA", verify: true, $K: ["a0b1c2d3e4f5a0b1c2d3e4f5a0b1c2d3e4f5a0b1c2d3e4f5a0b1c2d3e4f5a0b1"] }`,
	"tls handshake_first":                  `tls { cert_file: "$CERT", key_file: "$KEY", $K: true }`,
	"tls ocsp_peer":                        `tls { cert_file: "$CERT", key_file: "$KEY", ca_file: "$CA", verify: true, $K: true }`,
	"tls cert_store":                       `tls { $K: WindowsCurrentUser }`,
	"tls cert_match_by":                    `tls { $K: Subject }`,
	"tls cert_match":                       `tls { $K: "example.com" }`,
	"tls ca_certs_match":                   `tls { $K: ["CA"] }`,
	"tls cert_match_skip_invalid":          `tls { $K: true }`,
}

// blockTemplates: every key of these blocks is judged with its block, which natsd does not
// serve at all yet.
var blockTemplates = map[string]string{
	"gateway":           `gateway { name: g1, port: 7222, $K: 1 }`,
	"leafnodes":         `leafnodes { port: 7422, $K: 1 }`,
	"leafnodes.remotes": `leafnodes { remotes: [ { $K: 1 } ] }`,
	"websocket":         `websocket { port: 8080, no_tls: true, $K: 1 }`,
	"mqtt":              `mqtt { port: 1883, $K: 1 }`,
}

// natsdSamples are natsd's own keys.
var natsdSamples = map[string]string{
	"engine":     `$K: netpoll`,
	"reactors":   `$K: 2`,
	"reply_spin": `$K: 100us`,
}

// parseVerdict loads body and says which status the parser's answer fits: "yes" (also
// right for "differs"), "not yet", "refused", or "error: ..." (a sample that is wrong).
func parseVerdict(t *testing.T, body string) string {
	t.Helper()
	_, rep, err := loadConf(t, body)
	var unsupported []UnsupportedSetting
	if rep != nil {
		unsupported = rep.Unsupported
	}
	switch {
	case len(unsupported) > 0:
		// Reported (whether loading then stops unless allow_unsupported is set, or the
		// caller refuses it later, the key is a "not yet").
		return statusNotYet
	case err != nil && strings.Contains(err.Error(), "allow_unsupported"):
		return statusNotYet
	case err != nil && strings.Contains(err.Error(), "not supported"):
		return statusRefused
	case err != nil:
		return "error: " + err.Error()
	}
	return statusYes
}

func TestConfigReferenceDoc(t *testing.T) {
	ref := readReferenceKeys(t)
	doc := readConfigDoc(t)
	cert, _ := filepath.Abs(filepath.Join("testdata", "certs", "server-cert.pem"))
	key, _ := filepath.Abs(filepath.Join("testdata", "certs", "server-key.pem"))
	ca, _ := filepath.Abs(filepath.Join("testdata", "certs", "ca.pem"))
	tmp := t.TempDir()
	expand := func(tmpl, name string) string {
		return strings.NewReplacer("$KEY", key, "$K", name, "$CERT", cert, "$CA", ca, "$TMP", tmp).Replace(tmpl)
	}
	check := func(block, name, tmpl string, row docRow) {
		got := parseVerdict(t, expand(tmpl, name))
		want := row.status
		if want == statusDiffers {
			want = statusYes
		}
		if got != want {
			t.Errorf("CONFIG.md:%d: %s %q is %q in the doc, but natsd's parser says %q\nconfig:\n%s",
				row.line, block, name, row.status, got, expand(tmpl, name))
		}
		if row.status == statusDiffers && row.note == "" {
			t.Errorf("CONFIG.md:%d: %s %q differs, but the note does not say how", row.line, block, name)
		}
	}
	inRef := map[string]bool{}
	checked := 0
	for _, k := range ref {
		rows := doc[k.block]
		for _, name := range k.names {
			inRef[k.block+" "+name] = true
			row, ok := rows[name]
			if !ok {
				t.Errorf("CONFIG.md has no status for %s %q (block marker <!-- keys: %s -->)", k.block, name, k.block)
				continue
			}
			tmpl, ok := configSamples[k.block+" "+k.names[0]]
			if !ok {
				tmpl, ok = blockTemplates[k.block]
			}
			if !ok {
				t.Errorf("no sample config for %s %q in configSamples", k.block, k.names[0])
				continue
			}
			check(k.block, name, tmpl, row)
			checked++
		}
	}
	// Every key in the doc is one of nats-server's, or one of natsd's own (checked too).
	var extra []string
	for block, rows := range doc {
		for name, row := range rows {
			if block == natsdBlock {
				tmpl, ok := natsdSamples[name]
				if !ok {
					t.Errorf("no sample config for natsd's own key %q", name)
					continue
				}
				if row.status != statusYes && row.status != statusDiffers {
					t.Errorf("CONFIG.md:%d: natsd's own key %q should be honoured", row.line, name)
				}
				check(block, name, tmpl, row)
				checked++
				continue
			}
			if !inRef[block+" "+name] {
				extra = append(extra, fmt.Sprintf("CONFIG.md:%d: %s %q", row.line, block, name))
			}
		}
	}
	sort.Strings(extra)
	for _, e := range extra {
		t.Errorf("%s is not a nats-server v2.15.2 key (testdata/reference_config_keys.txt)", e)
	}
	// Samples nobody uses are stale.
	for k := range configSamples {
		block, name, _ := strings.Cut(k, " ")
		if !slices.ContainsFunc(ref, func(r refKey) bool { return r.block == block && r.names[0] == name }) {
			t.Errorf("configSamples has %q, which is not a reference key", k)
		}
	}
	t.Logf("%d key names checked against the parser", checked)
}
