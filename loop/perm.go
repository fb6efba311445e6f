package loop

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/parser"
)

// pubCacheSize bounds a client's publish verdict cache.
const pubCacheSize = 256

// Reserved prefixes clients may not publish to (gateway replies; Raft outside $SYS) and
// reply subjects they may not use (service-import replies, JetStream acks, gateway replies).
var (
	gwReplyPrefix    = []byte("_GR_.")
	oldGWReplyPrefix = []byte("$GR.")
	nrgPrefix        = []byte("$NRG.")
	serviceReplyPre  = []byte("_R_.")
	jsAckPrefix      = []byte("$JS.ACK.")
)

// clientPerms is one connection's permissions: the shared compiled set, a verdict cache for
// publish subjects (owner reactor only) and, with allow_responses, the reply subjects it
// may answer (deliveries from any reactor add to it, so it has a lock).
type clientPerms struct {
	p   *auth.Perms
	pub map[string]bool

	mu        sync.Mutex
	replies   map[string]*respEntry
	sincePrun int
}

type respEntry struct {
	t time.Time
	n int
}

// setPerms installs p (nil: unrestricted); runs on c's reactor.
func (c *client) setPerms(p *auth.Perms) {
	if p == nil {
		c.perms.Store(nil)
		return
	}
	cp := &clientPerms{p: p}
	if p.HasPub() {
		cp.pub = make(map[string]bool)
	}
	if old := c.perms.Load(); old != nil && p.Resp != nil {
		old.mu.Lock()
		cp.replies = old.replies
		old.mu.Unlock()
	}
	if p.Resp != nil && cp.replies == nil {
		cp.replies = make(map[string]*respEntry)
	}
	c.perms.Store(cp)
	// Filters of existing subscriptions follow the new deny list.
	for _, s := range c.subs {
		s.filter.Store(p.NeedsDeliveryFilter(s.subject, s.queue != ""))
	}
}

// revokeSubs cancels the subscriptions the client's permissions no longer allow (after a
// reload), as nats-server's processSubsOnConfigReload: each is unsubscribed, the client is
// sent the violation with the sid, and the server logs the removal. Runs on c's reactor.
func (c *client) revokeSubs() {
	cp := c.perms.Load()
	if cp == nil {
		return
	}
	for _, s := range c.subs {
		if s.gone.Load() || cp.p.SubAllowed(s.subject, s.queue) {
			continue
		}
		if c.removeSub(s) && c.r.e.cfg.Trace {
			c.traceDelsub(s.sid)
		}
		var text, line string
		if s.queue != "" {
			text = fmt.Sprintf("Permissions Violation for Subscription to %q using queue %q (sid %q)", s.subject, s.queue, s.sid)
			line = fmt.Sprintf("Removed sub %q using queue %q (sid %q) for %s - not authorized", s.subject, s.queue, s.sid, c.authUser())
		} else {
			text = fmt.Sprintf("Permissions Violation for Subscription to %q (sid %q)", s.subject, s.sid)
			line = fmt.Sprintf("Removed sub %q (sid %q) for %s - not authorized", s.subject, s.sid, c.authUser())
		}
		c.sendErr(text)
		if c.r.e.cfg.Log != nil {
			c.r.e.cfg.Log.Noticef("%s", line)
		}
	}
}

// reservedPub reports whether op may need the reserved-subject checks; one byte compare
// each for the common case.
func reservedPub(op *parser.Op) bool {
	if s := op.Subject; len(s) > 0 && (s[0] == '_' || s[0] == '$') {
		return true
	}
	r := op.Reply
	return len(r) > 0 && (r[0] == '_' || r[0] == '$')
}

// pubDenied runs nats-server's publish checks in its order (reserved gateway prefix,
// permissions, $NRG., reserved reply) and sends the violation. The message is then dropped
// and the connection stays open.
func (c *client) pubDenied(op *parser.Op) bool {
	subj := op.Subject
	if bytes.HasPrefix(subj, gwReplyPrefix) || bytes.HasPrefix(subj, oldGWReplyPrefix) {
		c.pubViolation(subj)
		return true
	}
	if cp := c.perms.Load(); cp != nil && cp.pub != nil && !cp.pubAllowed(subj) {
		c.pubViolation(subj)
		return true
	}
	if bytes.HasPrefix(subj, nrgPrefix) {
		c.pubViolation(subj)
		return true
	}
	if r := op.Reply; len(r) > 0 && (bytes.HasPrefix(r, serviceReplyPre) || bytes.HasPrefix(r, jsAckPrefix) ||
		bytes.HasPrefix(r, gwReplyPrefix) || bytes.HasPrefix(r, oldGWReplyPrefix)) {
		c.violation("Permissions Violation for Publish with Reply of ", r, "")
		if c.r.e.cfg.Log != nil {
			c.errorf("Publish Violation - Reply %q", r)
		}
		return true
	}
	return false
}

// pubAllowed is the cached static verdict, then the dynamic reply permission.
func (cp *clientPerms) pubAllowed(subj []byte) bool {
	ok, hit := cp.pub[string(subj)]
	if !hit {
		ok = cp.p.PubAllowed(subj)
		if len(cp.pub) >= pubCacheSize {
			clear(cp.pub)
		}
		cp.pub[string(subj)] = ok
	}
	if !ok && cp.p.Resp != nil {
		ok = cp.responseAllowed(subj)
	}
	return ok
}

func (cp *clientPerms) responseAllowed(subj []byte) bool {
	rp := cp.p.Resp
	cp.mu.Lock()
	defer cp.mu.Unlock()
	e := cp.replies[string(subj)]
	if e == nil {
		return false
	}
	e.n++
	if (rp.MaxMsgs > 0 && e.n > rp.MaxMsgs) || (rp.Expires > 0 && time.Since(e.t) > rp.Expires) {
		delete(cp.replies, string(subj))
		return false
	}
	return true
}

// trackReply records that a request with this reply subject was delivered to the client, so
// it may answer it (allow_responses). Runs on the publisher's reactor.
func (cp *clientPerms) trackReply(reply []byte) {
	if cp.p.PubAllowed(reply) {
		return
	}
	rp := cp.p.Resp
	cp.mu.Lock()
	cp.replies[string(reply)] = &respEntry{t: time.Now()}
	cp.sincePrun++
	if cp.sincePrun > 100 {
		cp.sincePrun = 0
		now := time.Now()
		for k, e := range cp.replies {
			if (rp.MaxMsgs > 0 && e.n >= rp.MaxMsgs) || (rp.Expires > 0 && now.Sub(e.t) > rp.Expires) {
				delete(cp.replies, k)
			}
		}
	}
	cp.mu.Unlock()
}

// subDenied checks SUB against the subscribe permissions (and the reserved queue name).
func (c *client) subDenied(op *parser.Op) bool {
	q := string(op.Queue)
	cp := c.perms.Load()
	if q == "_sys_" || (cp != nil && !cp.p.SubAllowed(string(op.Subject), q)) {
		c.violation("Permissions Violation for Subscription to ", op.Subject, q)
		if c.r.e.cfg.Log != nil {
			if q != "" {
				c.errorf("Subscription Violation - Subject %q, Queue: %q, SID %s", op.Subject, q, op.Sid)
			} else {
				c.errorf("Subscription Violation - Subject %q, SID %s", op.Subject, op.Sid)
			}
		}
		return true
	}
	return false
}

// pubViolation refuses a PUB and logs it as nats-server does, under the client's label.
func (c *client) pubViolation(subj []byte) {
	c.violation("Permissions Violation for Publish to ", subj, "")
	if c.r.e.cfg.Log != nil {
		c.errorf("Publish Violation - Subject %q", subj)
	}
}

// violation sends `-ERR '<text>"<subj>"[ using queue "<q>"]'`; the connection stays.
func (c *client) violation(text string, subj []byte, queue string) {
	b := make([]byte, 0, len(text)+len(subj)+len(queue)+32)
	b = append(b, text...)
	b = strconv.AppendQuote(b, string(subj))
	if queue != "" {
		b = append(b, " using queue "...)
		b = strconv.AppendQuote(b, queue)
	}
	c.sendErr(string(b))
}
