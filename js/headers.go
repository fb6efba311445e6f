package js

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// Header names JetStream reads and writes; the server matches them case-sensitively, as
// nats-server does.
const (
	hdrMsgID                = "Nats-Msg-Id"
	hdrExpectedStream       = "Nats-Expected-Stream"
	hdrExpectedLastSeq      = "Nats-Expected-Last-Sequence"
	hdrExpectedLastSubjSeq  = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectedLastSubjSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrExpectedLastMsgID    = "Nats-Expected-Last-Msg-Id"
	hdrRollup               = "Nats-Rollup"
	hdrTTL                  = "Nats-TTL"
	hdrIncr                 = "Nats-Incr"
	hdrBatchID              = "Nats-Batch-Id"
	hdrSchedule             = "Nats-Schedule"
	hdrScheduler            = "Nats-Scheduler"
	hdrStreamSource         = "Nats-Stream-Source"
	hdrRequiredAPILevel     = "Nats-Required-Api-Level"
	hdrRequestInfo          = "Nats-Request-Info"
	hdrStreamIdentity       = "Nats-Stream-Identity"

	rollupSubject = "sub"
	rollupAll     = "all"
)

// header returns the value of key in a NATS header block ("NATS/1.0...\r\n\r\n"), trimmed of
// spaces, and whether it is there.
func header(hdr []byte, key string) ([]byte, bool) {
	if len(hdr) == 0 {
		return nil, false
	}
	i := bytes.Index(hdr, []byte("\r\n"))
	if i < 0 {
		return nil, false
	}
	rest := hdr[i+2:]
	for len(rest) > 0 {
		j := bytes.Index(rest, []byte("\r\n"))
		line := rest
		if j >= 0 {
			line, rest = rest[:j], rest[j+2:]
		} else {
			rest = nil
		}
		if len(line) > len(key) && line[len(key)] == ':' && string(line[:len(key)]) == key {
			return bytes.TrimSpace(line[len(key)+1:]), true
		}
	}
	return nil, false
}

func headerString(hdr []byte, key string) string {
	v, _ := header(hdr, key)
	return string(v)
}

// headerUint parses a numeric header; ok is false when it is absent or not a number.
func headerUint(hdr []byte, key string) (uint64, bool) {
	v, present := header(hdr, key)
	if !present {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// parseTTL reads Nats-TTL as nats-server does: "never" (any case) never expires; a Go
// duration of at least a second, or a whole number of seconds (0: the stream's max_age).
// TTLs count whole seconds. ok is false for a bad value.
func parseTTL(v []byte) (secs int64, never, ok bool) {
	s := string(v)
	if strings.EqualFold(s, "never") {
		return 0, true, true
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < time.Second {
			return 0, false, false
		}
		return int64(d.Seconds()), false, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false, false
	}
	return n, false, true
}

// appendHeader adds key: value to a header block (making one when hdr is empty).
func appendHeader(hdr []byte, key, value string) []byte {
	if len(hdr) == 0 {
		hdr = append(hdr, "NATS/1.0\r\n"...)
	} else {
		hdr = hdr[:len(hdr)-2] // drop the blank line; it is added back below
	}
	hdr = append(hdr, key...)
	hdr = append(hdr, ": "...)
	hdr = append(hdr, value...)
	return append(hdr, "\r\n\r\n"...)
}
