package loop

import (
	"bytes"
	"strconv"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/parser"
)

// A connection's log lines start with its label, as nats-server's client.Errorf and friends
// prefix them: "127.0.0.1:52144 - cid:5" ("rid" for a route), and once a client's first
// CONNECT is accepted, what it says about itself and who it is, each quoted:
// `127.0.0.1:52144 - cid:5 - "v1.55.0:go:app" - "$G/user:alice"`.
//
// Traces (-V) cost one branch on a bool when off; everything here runs only when a line is
// written.

// label is the connection's log prefix. Deliveries read the subscriber's from other reactors,
// so it is kept in an atomic pointer: built on first use, replaced once by setLabel.
func (c *client) label() string {
	if p := c.ncs.Load(); p != nil {
		return *p
	}
	s := c.baseLabel()
	if c.ncs.CompareAndSwap(nil, &s) {
		return s
	}
	return *c.ncs.Load()
}

func (c *client) baseLabel() string {
	kind := " - cid:"
	if c.route != nil {
		kind = " - rid:"
	}
	return c.ip + ":" + strconv.Itoa(c.port) + kind + strconv.FormatUint(c.cid, 10)
}

// setLabel adds to the label what the client's first CONNECT says, as nats-server does once
// the client is authenticated: "v<version>:<lang>:<name>" (the parts given), then
// "<account>/<user>" when the client names a user (user:<name>, nkey:<key> or token; the one
// a certificate or no_auth_user maps it to, if any).
func (c *client) setLabel(o *connectOpts) {
	var ncs string
	if o.Version != "" {
		ncs = "v" + o.Version
	}
	if o.Lang != "" {
		if ncs != "" {
			ncs += ":"
		}
		ncs += o.Lang
	}
	if o.Name != "" {
		if ncs != "" {
			ncs += ":"
		}
		ncs += o.Name
	}
	user := c.userLabel(o)
	var acs string
	if user != "" && c.acc != nil {
		acs = c.acc.Name + "/" + user
	}
	s := c.baseLabel()
	if ncs != "" {
		s += " - " + strconv.Quote(ncs)
	}
	if acs != "" {
		s += " - " + strconv.Quote(acs)
	}
	c.ncs.Store(&s)
}

// userLabel is nats-server's getAuthUserLabel: the nkey, the user or "token" the client
// authenticated with (an identity a certificate or no_auth_user gave it wins over what
// CONNECT said), "" for none.
func (c *client) userLabel(o *connectOpts) string {
	nkey, user, token := o.Nkey, o.User, o.Token
	if a := c.au; a != nil && a.name != "" {
		if a.nkey {
			nkey = a.name
		} else {
			user = a.name
		}
	}
	switch {
	case nkey != "":
		return "nkey:" + nkey
	case user != "":
		return "user:" + user
	case token != "":
		return "token"
	}
	return ""
}

// credsUser names who failed to authenticate, as nats-server's getAuthUser does from the
// CONNECT it refused; "" when it named nobody.
func credsUser(cr *auth.Creds) string {
	switch {
	case cr == nil:
		return ""
	case cr.Nkey != "":
		return "Nkey " + strconv.Quote(cr.Nkey)
	case cr.User != "":
		return "User " + strconv.Quote(cr.User)
	case cr.Token != "":
		return `Token "[REDACTED]"`
	}
	return ""
}

func (c *client) errorf(format string, v ...any) {
	if l := c.r.e.cfg.Log; l != nil {
		l.Errorf(c.label()+" - "+format, v...)
	}
}

// debugf writes a debug line; callers on busy paths check debugOn first, so that nothing is
// built (or boxed) for a line that is not written.
func (c *client) debugf(format string, v ...any) {
	if c.debugOn() {
		c.r.e.cfg.Log.Debugf(c.label()+" - "+format, v...)
	}
}

// debugOn reports whether debug lines are written (always, with a Logger that cannot say).
func (c *client) debugOn() bool {
	l := c.r.e.cfg.Log
	if l == nil {
		return false
	}
	if d, ok := l.(interface{ DebugEnabled() bool }); ok {
		return d.DebugEnabled()
	}
	return true
}

func (c *client) noticef(format string, v ...any) {
	if l := c.r.e.cfg.Log; l != nil {
		l.Noticef(c.label()+" - "+format, v...)
	}
}

func (c *client) tracef(format string, v ...any) {
	if l := c.r.e.cfg.Log; l != nil {
		l.Tracef(c.label()+" - "+format, v...)
	}
}

// traceIn traces an inbound op as nats-server's parser does: "<<- [OP arg]" (the op's name in
// capitals, its argument as sent, CONNECT's secrets redacted), then a non-empty payload. A
// client's INFO, +OK and -ERR are not traced.
func (c *client) traceIn(frame []byte, kind parser.Kind) {
	line, rest, _ := bytes.Cut(frame, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if c.route == nil {
		var name string
		switch kind {
		case parser.KindPub:
			name = "PUB"
		case parser.KindHPub:
			name = "HPUB"
		case parser.KindSub:
			name = "SUB"
		case parser.KindUnsub:
			name = "UNSUB"
		case parser.KindPing:
			name = "PING"
		case parser.KindPong:
			name = "PONG"
		case parser.KindConnect:
			name = "CONNECT"
		default:
			return
		}
		arg := bytes.TrimLeft(line[min(len(line), len(name)):], " \t")
		if kind == parser.KindConnect {
			arg = redactConnect(arg)
		}
		if len(arg) == 0 && (kind == parser.KindPing || kind == parser.KindPong) {
			c.tracef("<<- [%s]", name)
		} else {
			c.tracef("<<- [%s %s]", name, arg)
		}
	} else {
		c.tracef("<<- [%s]", line)
	}
	c.tracePayload("<<-", bytes.TrimSuffix(rest, []byte("\r\n")))
}

// tracePayload traces a message body, cut at max_traced_msg_len; an empty one is not traced.
func (c *client) tracePayload(dir string, payload []byte) {
	if len(payload) == 0 {
		return
	}
	if limit := c.r.e.cfg.MaxTracedMsgLen; limit > 0 && len(payload) > limit {
		q := strconv.Quote(string(payload[:limit]))
		c.tracef("%s MSG_PAYLOAD: [\"%s...\"]", dir, q[1:len(q)-1])
		return
	}
	c.tracef("%s MSG_PAYLOAD: [%q]", dir, payload)
}

// traceOut traces a frame of the connection's own as nats-server traces what it sends a
// client: PING, PONG, OK and -ERR (without the quotes); INFO and no-responders statuses are
// not traced. A route's frames are traced as they are.
func (c *client) traceOut(frame []byte) {
	line, _, _ := bytes.Cut(frame, []byte("\r\n"))
	if c.route != nil {
		if !bytes.HasPrefix(line, []byte("INFO ")) {
			c.tracef("->> [%s]", line)
		}
		return
	}
	switch {
	case bytes.Equal(line, []byte("PING")), bytes.Equal(line, []byte("PONG")):
		c.tracef("->> [%s]", line)
	case bytes.Equal(line, []byte("+OK")):
		c.tracef("->> [OK]")
	case bytes.HasPrefix(line, []byte("-ERR ")):
		text := bytes.TrimPrefix(line, []byte("-ERR "))
		if len(text) >= 2 && text[0] == '\'' && text[len(text)-1] == '\'' {
			text = text[1 : len(text)-1]
		}
		c.tracef("->> [-ERR %s]", text)
	}
}

// traceDelivery traces a message queued for the client (on the publisher's reactor): the
// MSG/HMSG line without its CRLF, then the body (headers included).
func (c *client) traceDelivery(line, body []byte) {
	c.tracef("->> [%s]", line)
	c.tracePayload("->>", body)
}

// traceDelsub traces a subscription going away (UNSUB, auto-unsubscribe, close).
func (c *client) traceDelsub(sid []byte) {
	c.tracef("<-> [DELSUB %s]", sid)
}
