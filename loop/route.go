package loop

import (
	"time"

	"github.com/natsd/natsd/outbound"
	"github.com/natsd/natsd/parser"
)

// Msg is a message as an internal subscription's handler sees it. Its slices are borrowed
// (from a client's inbound buffer, or an internal publish) and valid only during the call: a
// handler copies what it keeps.
type Msg struct {
	Subject, Reply []byte
	Hdr            int    // length of the header block at the start of Data (0: none)
	Data           []byte // header block, then payload
	from           *client
	// r and depth are where an inline handler runs, for Respond.
	r     *reactor
	depth int
}

// Payload is the message without its header block.
func (m *Msg) Payload() []byte { return m.Data[m.Hdr:] }

// Header is the message's header block (nil when it has none).
func (m *Msg) Header() []byte {
	if m.Hdr == 0 {
		return nil
	}
	return m.Data[:m.Hdr]
}

// Origin describes who published a message.
type Origin struct {
	Kind    Kind
	CID     uint64
	Account string
	User    string
	Name    string // the client's CONNECT name
	Lang    string
	Version string
	Host    string
	Start   time.Time
	RTT     time.Duration
}

// Origin reports who published m (for internal handlers: $SYS requests, service imports).
func (m *Msg) Origin() Origin { return originOf(m.from) }

func originOf(c *client) Origin {
	if c == nil {
		return Origin{}
	}
	o := Origin{Kind: c.kind, CID: c.cid, Name: c.name, Lang: c.lang, Version: c.version, Host: c.ip,
		RTT: time.Duration(c.rtt)}
	if c.start != 0 {
		o.Start = time.Unix(0, c.start)
	}
	if c.acc != nil {
		o.Account = c.acc.Name
	}
	if c.au != nil {
		o.User = c.au.name
	}
	return o
}

// maxRouteDepth bounds the imports one message may pass through (import cycles are refused
// when the configuration loads; this stops a loop the checks did not foresee).
const maxRouteDepth = 8

// route delivers m, published by from, in acc to every matching subscription (one member of
// each queue group): client connections get a MSG/HMSG frame on their outbound queue,
// internal subscriptions run their handler here, on the publisher's reactor. Every source of
// messages goes through it: a client's PUB/HPUB (after the client-only checks), an internal
// client's publish, an import. The message is the parsed op itself (its Subject, Reply,
// HdrLen and Msg), so a client's publish is routed without being copied. It reports whether
// anyone got the message.
func (r *reactor) route(acc *Account, from *client, m *parser.Op, depth int) bool {
	if depth >= maxRouteDepth {
		return false
	}
	if rt := acc.rt.Load(); rt != nil && rt.mappings != nil {
		m = r.mapped(rt, m, depth)
		if m == nil {
			return false
		}
	}
	cache := from.cache
	if from.acc != acc || from.r != r || cache == nil {
		cache = r.cacheFor(acc)
	}
	res := cache.Match(m.Subject)
	delivered := false
	if acc.remoteSubs.Load() != 0 || from.kind == kindRouter {
		// Some of this account's interest is on other servers, or the message came from one.
		return r.routeClustered(acc, res, from, m, depth)
	}
	for _, s := range res.Plain {
		if s.c == from && !from.echo {
			continue
		}
		if r.deliver(s, from, m, depth) {
			delivered = true
		}
	}
	for _, g := range res.Queues {
		if r.deliverQueue(g, from, m, depth) {
			delivered = true
		}
	}
	return delivered
}

// mapped applies the account's first matching subject mapping; nil drops the message (a
// weighted mapping's share with no destination).
func (r *reactor) mapped(rt *accountRouting, m *parser.Op, depth int) *parser.Op {
	for _, mp := range rt.mappings {
		if !mp.Matches(m.Subject) {
			continue
		}
		t := mp.Select("", r.rrand)
		if t == nil {
			return nil
		}
		buf := t.Append(r.subj[depth][:0], m.Subject)
		r.subj[depth] = buf
		out := &r.mapd[depth]
		*out = *m
		out.Subject = buf
		return out
	}
	return m
}

func (r *reactor) deliverQueue(g []*sub, from *client, m *parser.Op, depth int) bool {
	n := len(g)
	start := r.pick(n)
	for i := 0; i < n; i++ {
		s := g[(start+i)%n]
		if s.c == from && !from.echo {
			continue
		}
		if r.deliver(s, from, m, depth) {
			return true
		}
	}
	return false
}

// deliver hands m to s: its handler for an internal subscription, else a MSG/HMSG frame on
// its connection's queue. It reports whether the message went out (an auto-unsubscribed or
// closing subscription, or one whose permissions refuse the subject, does not count).
func (r *reactor) deliver(s *sub, from *client, m *parser.Op, depth int) bool {
	t := s.c
	if s.gone.Load() {
		return false
	}
	if s.filter.Load() {
		if tp := t.perms.Load(); tp != nil && tp.p.DeliveryDenied(m.Subject) {
			return false
		}
	}
	ended := false // this delivery reached the auto-unsubscribe limit
	if mx := s.max.Load(); mx > 0 {
		n := s.delivered.Add(1)
		if n > mx {
			return false
		}
		if n == mx && s.gone.CompareAndSwap(false, true) {
			// The interest goes now; the owner drops its map entry lazily.
			_ = s.acc.subs.Remove(s.subject, s.queue, s)
			r.e.subRemoved(s, r)
			t.goneSubs.Add(1)
			ended = true
			if s.fn == nil && t.debugOn() {
				t.debugf("Auto-unsubscribe limit of %d reached for sid '%s'", mx, s.sid)
			}
		}
	} else {
		s.delivered.Add(1)
	}
	if s.fn != nil {
		if m.As != nil && !s.keepAs {
			mm := *m
			mm.Subject, mm.As = m.As, nil
			return s.fn(r, from, &mm, depth)
		}
		return s.fn(r, from, m, depth)
	}
	body := m.Msg
	hdr := m.HdrLen
	b := r.scratch[:0]
	if hdr > 0 && t.headers.Load() {
		b = append(b, "HMSG "...)
	} else {
		if hdr > 0 {
			body = body[hdr:]
		}
		hdr = 0
		b = append(b, "MSG "...)
	}
	if m.As != nil {
		b = append(b, m.As...)
	} else {
		b = append(b, m.Subject...)
	}
	b = append(b, ' ')
	b = append(b, s.sid...)
	if len(m.Reply) > 0 {
		b = append(b, ' ')
		b = append(b, m.Reply...)
	}
	b = append(b, ' ')
	// The sizes go out as the publisher wrote them ("0005"), as nats-server does, except
	// where the headers were cut off.
	if hdr > 0 {
		b = parser.AppendSize(b, hdr, m.HdrWidth)
		b = append(b, ' ')
	}
	if hdr == m.HdrLen {
		b = parser.AppendSize(b, len(body), m.SizeWidth)
	} else {
		b = parser.AppendSize(b, len(body), 0) // the headers were cut off: a new size
	}
	b = append(b, '\r', '\n')
	r.scratch = b
	pending, sched, err := t.out.AppendMsg(b, body, crlf, r.e.cfg.MaxPending)
	if sched {
		r.enqueue(t)
	}
	if err == outbound.ErrSlowConsumer {
		return false
	}
	if r.e.cfg.Trace {
		t.traceDelivery(b[:len(b)-2], body)
		if ended {
			t.traceDelsub(s.sid)
		}
	}
	if len(m.Reply) > 0 {
		if tp := t.perms.Load(); tp != nil && tp.p.Resp != nil {
			tp.trackReply(m.Reply)
		}
	}
	ac := r.countsFor(t.acc)
	ac.outMsgs.add(1)
	ac.outBytes.add(uint64(len(body)))
	if t != from && r.pastStallMark(pending) {
		r.stall = t
	}
	return true
}
