package js

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"sync"
)

// Message counters (allow_msg_counter): a publish carries Nats-Incr and no body; the stored
// message's body is the subject's new total, {"val":"<total>"}, and the PubAck says it too.
//
// A subject's previous total is its last stored message. Loading it needs every increment to
// that subject acknowledged by the store, so that a burst to one subject would wait for an
// fsync per message; instead the worker keeps, for a subject with increments still on their
// way to the store, the running total they make (counterTotal), in publish order. An entry
// lives only while it has increments in flight: when the last is acknowledged, the store is
// the truth again (it sees any purge, deletion or expiry since).
//
// A crash loses only a suffix of what was written (the store's durability model), and every
// stored total is the total before it plus its own increment, so what survives is always a
// consistent prefix, and nothing acknowledged is missing from it.

const hdrCounterSources = "Nats-Counter-Sources"

// counterTotal is a subject's running total while increments to it are in flight.
type counterTotal struct {
	total   big.Int
	sources map[string]map[string]string // carried into every new total, as nats-server does
	ops     int                          // increments handed to the store, not yet acknowledged
	// reload: total may not be what the store will hold (an increment in it failed, or the
	// last message carries a sources header the client wrote): the next increment waits for
	// the subject's increments to settle and reads the store instead.
	reload bool
}

// counters is a stream's counter state. mu is held by the worker from reading a subject's
// total until the new one is queued to the store, and by a purge or delete around its store
// operation, so that no total is computed from messages a purge removes.
type counters struct {
	mu     sync.Mutex
	totals map[string]*counterTotal // under the stream's imu
}

// lockCounters keeps a purge or message delete from interleaving with a counter update.
func (s *stream) lockCounters() func() {
	s.ctr.mu.Lock()
	return s.ctr.mu.Unlock
}

// checkIncr reads Nats-Incr with nats-server's checks, in its order: the value, then whether
// the stream counts, the body, and headers that make no sense for an increment. A nil incr
// (an empty value) is no increment.
func checkIncr(cfg *StreamConfig, hdr, msg []byte) (*big.Int, *APIError) {
	v := rawHeader(hdr, hdrIncr)
	if len(v) == 0 {
		return nil, nil
	}
	incr, ok := new(big.Int).SetString(string(v), 10)
	switch {
	case !ok:
		return nil, JSMessageIncrInvalidErr
	case !cfg.AllowMsgCounter:
		return nil, JSMessageIncrDisabledErr
	case len(msg) > 0:
		return nil, JSMessageIncrPayloadErr
	}
	for _, k := range []string{hdrRollup, hdrExpectedStream, hdrExpectedLastMsgID, hdrExpectedLastSubjSubj,
		hdrExpectedLastSeq, hdrExpectedLastSubjSeq} {
		if len(rawHeader(hdr, k)) > 0 {
			return nil, JSMessageIncrInvalidErr
		}
	}
	return incr, nil
}

// rawHeader is a header's value as nats-server reads it: leading spaces skipped, nothing
// else trimmed; nil when absent.
func rawHeader(hdr []byte, key string) []byte {
	i := bytes.Index(hdr, crlf)
	if i < 0 {
		return nil
	}
	for rest := hdr[i+2:]; len(rest) > 0; {
		line := rest
		if j := bytes.Index(rest, crlf); j >= 0 {
			line, rest = rest[:j], rest[j+2:]
		} else {
			rest = nil
		}
		if len(line) > len(key) && line[len(key)] == ':' && string(line[:len(key)]) == key {
			return bytes.TrimLeft(line[len(key)+1:], " ")
		}
	}
	return nil
}

var crlf = []byte("\r\n")

// ingestCounter stores a message to a counter stream: the headers were checked by ingest,
// incr is the message's increment (nil when it had none), ttl its Nats-TTL in seconds (a
// counter stream has TTLs only when subject delete markers turned them on).
func (s *stream) ingestCounter(cfg *StreamConfig, subject, reply, msgID string, hdr []byte, incr *big.Int, ttl int64) {
	fail := func(e *APIError) {
		if reply != "" {
			_ = s.ic.Publish(reply, "", nil, pubAckErr(s.name, e))
		}
	}
	if incr == nil {
		fail(JSMessageIncrMissingErr)
		return
	}
	defer s.lockCounters()()
	prev, e := s.counterBase(subject)
	if e != nil {
		fail(e)
		return
	}
	var total big.Int
	total.Add(&prev.total, incr)
	val := total.String()
	body := make([]byte, 0, len(val)+10)
	body = strconv.AppendQuote(append(body, `{"val":`...), val)
	body = append(body, '}')
	if len(prev.sources) > 0 {
		src, err := json.Marshal(prev.sources)
		if err != nil {
			fail(JSMessageCounterBrokenErr)
			return
		}
		hdr = setHeaderValue(hdr, hdrCounterSources, string(src))
	}
	if max := s.a.js.maxPayload(); max > 0 && (len(hdr) > max || len(body) > max-len(hdr)) {
		fail(JSStreamMessageExceedsMaximumErr)
		return
	}
	if max := int(cfg.MaxMsgSize); max >= 0 && (len(hdr) > max || len(body) > max-len(hdr)) {
		fail(JSStreamMessageExceedsMaximumErr)
		return
	}
	if len(hdr) > math.MaxUint16 {
		fail(JSStreamHeaderExceedsMaximumErr)
		return
	}
	if e := s.a.limitsExceeded(cfg.Storage); e != nil {
		fail(e)
		return
	}
	if v, ok := header(hdr, hdrTTL); ok {
		// A bad TTL is refused only after the total is made, as nats-server does.
		if _, _, ok := parseTTL(v); !ok {
			fail(JSMessageTTLInvalidErr)
			return
		}
	}

	s.imu.Lock()
	ct := s.ctr.totals[subject]
	if ct == nil {
		if s.ctr.totals == nil {
			s.ctr.totals = make(map[string]*counterTotal)
		}
		ct = &counterTotal{sources: prev.sources}
		s.ctr.totals[subject] = ct
	}
	ct.total.Set(&total)
	ct.ops++
	// A sources header the client wrote itself is stored as it is; the next increment
	// reads it back from the store, where it may be found broken.
	if len(prev.sources) == 0 && len(rawHeader(hdr, hdrCounterSources)) > 0 {
		ct.reload = true
	}
	s.inflight++
	if msgID != "" {
		s.ddPending[msgID]++
	}
	s.imu.Unlock()
	p := pendingPool.Get().(*pending)
	p.s, p.reply, p.msgID, p.subject, p.ttl, p.val = s, reply, msgID, subject, ttl, val
	if s.rp.Load() != nil {
		p.hdr, p.msg = hdr, body
	}
	s.store.StoreAsync(subject, hdr, body, p.cb)
}

// counterBase is the total (and sources) a new increment to subject adds to: the running
// total while increments to it are in flight, else its last stored message's.
func (s *stream) counterBase(subject string) (*counterTotal, *APIError) {
	s.imu.Lock()
	ct := s.ctr.totals[subject]
	for ct != nil && ct.reload {
		s.waitSettled()
		ct = s.ctr.totals[subject]
	}
	s.imu.Unlock()
	if ct != nil {
		return ct, nil
	}
	// No increment to subject is in flight, so the store has all of them.
	base := &counterTotal{}
	sm, err := s.store.LoadLastMsg(subject)
	if err != nil || sm == nil {
		return base, nil
	}
	var cv struct {
		Value string `json:"val"`
	}
	if json.Unmarshal(sm.Data, &cv) != nil {
		return nil, JSMessageCounterBrokenErr
	}
	if src := rawHeader(sm.Header, hdrCounterSources); len(src) > 0 {
		if json.Unmarshal(src, &base.sources) != nil {
			return nil, JSMessageCounterBrokenErr
		}
	}
	// A value that is not a number counts as what big.Int makes of it, as in nats-server.
	base.total.SetString(cv.Value, 10)
	return base, nil
}

// counterStored accounts for an increment the store has answered (imu held).
func (s *stream) counterStored(subject string, err error) {
	ct := s.ctr.totals[subject]
	if ct == nil {
		return
	}
	if err != nil {
		// The running total counts an increment that is not stored. A store refuses such
		// a write at once (before the next is queued) or fails every write after it, so no
		// later total built on it is ever stored.
		ct.reload = true
	}
	if ct.ops--; ct.ops <= 0 {
		delete(s.ctr.totals, subject)
	}
}

// setHeaderValue sets key to value in a header block: the first key's value is replaced (keeping
// one space after the colon when there was one), or the key is added at the end. hdr is not
// modified.
func setHeaderValue(hdr []byte, key, value string) []byte {
	start := bytes.Index(hdr, []byte("\r\n"+key+":"))
	if start < 0 {
		return appendHeader(append([]byte(nil), hdr...), key, value)
	}
	vs := start + 2 + len(key) + 1
	if vs < len(hdr) && hdr[vs] == ' ' {
		vs++
	}
	ve := bytes.IndexByte(hdr[vs:], '\r')
	if ve < 0 {
		return hdr
	}
	ve += vs
	out := make([]byte, 0, len(hdr)-(ve-vs)+len(value))
	out = append(out, hdr[:vs]...)
	out = append(out, value...)
	return append(out, hdr[ve:]...)
}

func (j *JetStream) maxPayload() int {
	if j.eng == nil {
		return 0
	}
	return j.eng.MaxPayload()
}
