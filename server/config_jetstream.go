package server

// The server's JetStream configuration: the top-level `jetstream` key (a boolean,
// "enabled"/"disabled", or a map) and top-level `store_dir`, with nats-server 2.15's key
// names, aliases, size forms and error texts. Where nats-server takes a value of the wrong
// type by panicking (its "interface conversion" errors), natsd gives its usual typed error
// instead. Keys natsd keeps but does not act on yet are reported as not supported.

import (
	"crypto/fips140"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// nats-server's bounds for max_concurrent_io.
const (
	minJetStreamConcurrentIOs = 4
	maxJetStreamConcurrentIOs = 8192
)

// storeDir is the top-level `store_dir` / `storedir`. The directory may be given once, here
// or in the jetstream block (or with -sd, which nats-server applies before the file).
func (p *cfgParser) storeDir(o *Options, e entry) {
	s, ok := p.str(e)
	if !ok {
		return
	}
	if o.StoreDir != "" {
		p.fail(e.tk, "Duplicate 'store_dir' configuration")
		return
	}
	o.StoreDir = s
}

// jetStream parses the top-level `jetstream`.
func (p *cfgParser) jetStream(o *Options, e entry) {
	switch v := e.v.(type) {
	case bool:
		o.JetStream = v
	case string:
		switch strings.ToLower(v) {
		case "enabled", "enable":
			o.JetStream = true
		case "disabled", "disable":
			o.JetStream = false
		default:
			p.fail(e.tk, "Expected 'enabled' or 'disabled' for string value, got '%s'", v)
		}
	case map[string]any:
		enable := true
		for _, f := range p.entries(v) {
			if !p.jetStreamKey(o, f, &enable) {
				// nats-server stops reading the block at such an error.
				return
			}
		}
		o.JetStream = enable
	default:
		p.fail(e.tk, "Expected map, bool or string to define JetStream, got %T", e.v)
	}
}

// jetStreamKey maps one key of the jetstream block; false stops the block.
func (p *cfgParser) jetStreamKey(o *Options, f entry, enable *bool) bool {
	mk := strings.ToLower(f.key)
	unsupported := func() { p.unsupported(f.tk, "jetstream."+f.key) }
	// size reads a storage size; name is what nats-server's error calls the key.
	size := func(name string) (int64, bool) {
		n, err := storageSize(f.v)
		if err != nil {
			p.fail(f.tk, "%s %s", name, err)
			return 0, false
		}
		return n, true
	}
	// count reads an integer, refused as nats-server does ("a parseable size").
	count := func() (int64, bool) {
		n, ok := f.v.(int64)
		if !ok {
			p.fail(f.tk, "Expected a parseable size for %q, got %v", f.key, f.v)
		}
		return n, ok
	}
	switch mk {
	case "strict":
		b, ok := f.v.(bool)
		if !ok {
			p.fail(f.tk, "Expected 'true' or 'false' for bool value, got '%s'", f.v)
			return false
		}
		o.JetStreamStrict, o.JetStreamStrictSet = b, true
	case "store", "store_dir", "storedir":
		s, ok := p.str(f)
		if !ok {
			return true
		}
		if o.StoreDir != "" {
			p.fail(f.tk, "Duplicate 'store_dir' configuration")
			return false
		}
		o.StoreDir = s
	case "sync", "sync_interval":
		if s, ok := f.v.(string); ok && strings.ToLower(s) == "always" {
			// natsd's SyncInterval 0 with SyncAlways: fsync before every acknowledgement.
			o.SyncInterval, o.SyncAlways = 0, true
			return true
		}
		// A later duration leaves SyncAlways set, as in nats-server.
		if d, ok := p.duration(f); ok {
			o.SyncInterval = d
		}
	case "max_memory_store", "max_mem_store", "max_mem":
		n, ok := size("max_mem_store")
		if !ok {
			return false
		}
		o.JetStreamMaxMemory = n
	case "max_file_store", "max_file":
		n, ok := size("max_file_store")
		if !ok {
			return false
		}
		o.JetStreamMaxStore = n
	case "domain":
		s, ok := p.str(f)
		if !ok {
			return true
		}
		// nats-server checks the domain when the server is created (validateJetStreamOptions).
		if s != "" {
			if subj := fmt.Sprintf("$JS.%s.API.>", s); !validSubjectStr(subj) {
				p.fail(f.tk, "invalid domain name: derived %q is not a valid subject", subj)
				return true
			}
			if strings.ContainsAny(s, " \t\r\n\f.*>") {
				p.fail(f.tk, "invalid domain name: may not contain ., * or >")
				return true
			}
		}
		o.JetStreamDomain = s
	case "enable", "enabled":
		if b, ok := p.boolean(f); ok {
			*enable = b
		}
	case "key", "ek", "encryption_key":
		unsupported()
		if s, ok := p.str(f); ok {
			o.JetStreamKey = s
		}
	case "prev_key", "prev_ek", "prev_encryption_key":
		unsupported()
		if s, ok := p.str(f); ok {
			o.JetStreamOldKey = s
		}
	case "cipher":
		unsupported()
		return p.jetStreamCipher(o, f)
	case "extension_hint":
		unsupported()
		if s, ok := p.str(f); ok {
			o.JetStreamExtHint = s
		}
	case "limits":
		return p.jetStreamLimits(o, f)
	case "tpm":
		unsupported()
		return p.jetStreamTPM(o, f)
	case "unique_tag":
		unsupported()
		if s, ok := p.str(f); ok {
			o.JetStreamUniqueTag = strings.ToLower(strings.TrimSpace(s))
		}
	case "max_outstanding_catchup":
		unsupported()
		n, ok := size(mk)
		if !ok {
			return false
		}
		o.JetStreamMaxCatchup = n
	case "max_buffered_size":
		n, ok := size(mk)
		if !ok {
			return false
		}
		o.JetStreamMaxBufferedSize = n
	case "max_buffered_msgs":
		n, ok := count()
		if !ok {
			return false
		}
		o.JetStreamMaxBufferedMsgs = int(n)
	case "request_queue_limit":
		n, ok := count()
		if !ok {
			return false
		}
		o.JetStreamRequestQueueLimit = int(n)
	case "info_queue_limit":
		unsupported()
		n, ok := count()
		if !ok {
			return false
		}
		o.JetStreamInfoQueueLimit = int(n)
	case "meta_compact":
		unsupported()
		n, ok := f.v.(int64)
		if !ok || n < 0 {
			p.fail(f.tk, "Expected an absolute size for %q, got %v", f.key, f.v)
			return false
		}
		o.JetStreamMetaCompact = uint64(n)
	case "meta_compact_size":
		unsupported()
		n, ok := size(mk)
		if !ok {
			return false
		}
		if n < 0 {
			p.fail(f.tk, "Expected an absolute size for %q, got %v", f.key, f.v)
			return false
		}
		o.JetStreamMetaCompactSize = uint64(n)
	case "meta_compact_sync":
		unsupported()
		if b, ok := p.boolean(f); ok {
			o.JetStreamMetaCompactSync = b
		}
	case "max_concurrent_io":
		unsupported()
		n, ok := f.v.(int64)
		if !ok || n < minJetStreamConcurrentIOs || n > maxJetStreamConcurrentIOs {
			p.fail(f.tk, "Expected an absolute size for %q between %d and %d, got %v", f.key,
				minJetStreamConcurrentIOs, maxJetStreamConcurrentIOs, f.v)
			return false
		}
		o.JetStreamConcurrentIOs = int(n)
	default:
		p.unknown(f.tk, f.key)
	}
	return true
}

// jetStreamCipher is jetstream.cipher (and tpm.cipher): chacha / chachapoly or aes.
func (p *cfgParser) jetStreamCipher(o *Options, f entry) bool {
	s, ok := p.str(f)
	if !ok {
		return true
	}
	switch strings.ToLower(s) {
	case "chacha", "chachapoly":
		if fips140.Enabled() {
			p.fail(f.tk, "Cipher type %q cannot be used in FIPS-140 mode", s)
			return false
		}
		o.JetStreamCipher = "chacha"
	case "aes":
		o.JetStreamCipher = "aes"
	default:
		p.fail(f.tk, "Unknown cipher type: %q", s)
		return false
	}
	return true
}

// jetStreamLimits is jetstream.limits; the block replaces any earlier limits.
func (p *cfgParser) jetStreamLimits(o *Options, e entry) bool {
	o.JetStreamLimits = JetStreamServerLimits{}
	m, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "Expected a map to define JetStreamLimits, got %T", e.v)
		return false
	}
	l := &o.JetStreamLimits
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "max_ack_pending":
			p.limitInt(f, &l.MaxAckPending)
		case "max_ha_assets":
			p.limitInt(f, &l.MaxHAAssets)
		case "max_request_batch":
			p.limitInt(f, &l.MaxRequestBatch)
		case "default_max_consumers":
			p.limitInt(f, &l.DefaultMaxConsumers)
		case "duplicate_window":
			p.limitDuration(f, &l.DuplicateWindow)
		case "batch":
			if !p.jetStreamBatchLimits(l, f) {
				return false
			}
		default:
			p.unknown(f.tk, f.key)
		}
	}
	return true
}

// jetStreamBatchLimits is jetstream.limits.batch.
func (p *cfgParser) jetStreamBatchLimits(l *JetStreamServerLimits, e entry) bool {
	m, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "Expected a map to define batch limits, got %T", e.v)
		return false
	}
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "max_inflight_per_stream":
			p.limitInt(f, &l.MaxBatchInflightPerStream)
		case "max_inflight_total":
			p.limitInt(f, &l.MaxBatchInflightTotal)
		case "max_msgs":
			p.limitInt(f, &l.MaxBatchSize)
		case "timeout":
			p.limitDuration(f, &l.MaxBatchTimeout)
		default:
			p.unknown(f.tk, f.key)
		}
	}
	return true
}

func (p *cfgParser) limitInt(f entry, dst *int) {
	if n, ok := p.integer(f); ok {
		*dst = int(n)
	}
}

// limitDuration reads a duration string; nats-server's error is Go's own text.
func (p *cfgParser) limitDuration(f entry, dst *time.Duration) {
	s, ok := p.str(f)
	if !ok {
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.fail(f.tk, "%v", err)
		return
	}
	*dst = d
}

// jetStreamTPM is jetstream.tpm; its text for a non-map is nats-server's (which names
// JetStreamLimits).
func (p *cfgParser) jetStreamTPM(o *Options, e entry) bool {
	o.JetStreamTpm = JetStreamTPM{}
	m, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "Expected a map to define JetStreamLimits, got %T", e.v)
		return false
	}
	t := &o.JetStreamTpm
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "keys_file":
			if s, ok := p.str(f); ok {
				t.KeysFile = s
			}
		case "encryption_password":
			if s, ok := p.str(f); ok {
				t.KeyPassword = s
			}
		case "srk_password":
			if s, ok := p.str(f); ok {
				t.SrkPassword = s
			}
		case "pcr":
			p.limitInt(f, &t.Pcr)
		case "cipher":
			if !p.jetStreamCipher(o, f) {
				return false
			}
		default:
			p.unknown(f.tk, f.key)
		}
	}
	return true
}

// storageSize reads a size as nats-server does: an integer (the conf package has already
// applied units such as 1G, 1GB or 1KiB), or a string of digits ending in K, M, G or T
// (powers of 1024); "" is 0. The error texts are nats-server's.
func storageSize(v any) (int64, error) {
	switch s := v.(type) {
	case int64:
		return s, nil
	case string:
		if s == "" {
			return 0, nil
		}
		num, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		if err != nil {
			return 0, err
		}
		shift, ok := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}[s[len(s)-1]]
		if !ok {
			return 0, fmt.Errorf("sizes defined as strings must end in K, M, G, T")
		}
		return num << shift, nil
	}
	return 0, fmt.Errorf("must be int64 or string")
}
