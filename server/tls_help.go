package server

import (
	"maps"
	"slices"
	"strings"
)

// tlsHelpHead is the start of natsd's --help_tls text: how a tls block is written. The cipher
// suites and curves follow, from the tables the config parser reads.
const tlsHelpHead = `TLS is set up in a configuration file's tls block (the command line has
--tls, --tlscert, --tlskey, --tlsverify and --tlscacert for the simple cases). For example:

    tls {
        cert_file:      "./certs/server-cert.pem"
        key_file:       "./certs/server-key.pem"
        ca_file:        "./certs/ca.pem"
        verify:         true
        verify_and_map: true

        cipher_suites: [
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        ]
        curve_preferences: [
            "CurveP256",
            "CurveP384",
            "CurveP521"
        ]
    }

The block also takes timeout (handshake, in seconds), min_version, handshake_first,
pinned_certs and certs (several certificate/key pairs, picked by SNI); a cluster's tls
block also insecure and verify_cert_and_check_known_urls. connection_rate_limit, and
insecure in the client block, are not supported by natsd yet (see --allow_unsupported).

cipher_suites accepts (the insecure ones only with allow_insecure_cipher_suites: true):
`

// tlsHelpTail covers OCSP, which nats-server's TLS help describes and natsd does not build.
const tlsHelpTail = `
OCSP peer validation (tls { ocsp_peer: true } or its long form with verify, ca_timeout,
allowed_clockskew, warn_only, unknown_is_good, allow_when_ca_unreachable and
cache_ttl_when_next_update_unset) is not supported by natsd yet: a tls block with
ocsp_peer is refused, since ignoring it would let in clients it should stop.

The top-level ocsp (the server's own OCSP staple, routes and gateways) and ocsp_cache
(short form true/false, or a block with type: none|local, local_store, preserve_revoked
and save_interval) are not supported by natsd yet either: they stop start-up unless
natsd runs with --allow_unsupported (or allow_unsupported: true), which ignores them.
`

// TLSHelp is what --help_tls prints: natsd's TLS configuration help, listing the same
// options, cipher suites and curves as nats-server 2.15.2's.
func TLSHelp() string {
	var b strings.Builder
	b.WriteString(tlsHelpHead)
	for _, name := range slices.Sorted(maps.Keys(tlsCiphers)) {
		b.WriteString("    " + name + "\n")
	}
	b.WriteString("\ncurve_preferences accepts:\n")
	for _, name := range slices.Sorted(maps.Keys(tlsCurves)) {
		b.WriteString("    " + name + "\n")
	}
	b.WriteString(tlsHelpTail)
	return b.String()
}
