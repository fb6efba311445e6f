package loop

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/auth"
)

// authState is the engine's current authentication configuration; a reload swaps it.
type authState struct {
	cur atomic.Pointer[authSnap] // nil until the first SetAuth: cfg.Auth applies
}

type authSnap struct{ cfg *auth.Config }

// clientAuth is one connection's authentication state; nil when the server required no
// authentication when it was accepted.
type clientAuth struct {
	awaiting bool   // auth required and no verdict yet: the first op must be CONNECT
	pending  bool   // a CONNECT is being verified off the reactor; parsing waits
	nonce    []byte // INFO nonce (nkey users configured)
	creds    *auth.Creds
	name     string
	nkey     bool // name is an nkey
}

// authSem bounds the goroutines running bcrypt/ed25519 checks at once.
var authSem = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

func (e *Engine) authConfig() *auth.Config {
	if s := e.authz.cur.Load(); s != nil {
		return s.cfg
	}
	return e.cfg.Auth
}

// authOpen prepares a new connection's authentication: the nonce for INFO and the auth
// deadline. It runs on c's reactor before INFO is built.
func (e *Engine) authOpen(c *client) {
	cfg := e.authConfig()
	if !cfg.Required() {
		return
	}
	c.au = &clientAuth{awaiting: true}
	if cfg.NeedsNonce() {
		c.au.nonce = auth.NewNonce()
	}
	if d := e.cfg.AuthTimeout; d != 0 {
		// A negative timeout has expired already: the first tick (or CONNECT) times out.
		c.authDeadline = time.Now().Add(d).UnixNano()
	}
}

// authFirstByte enforces "CONNECT first" while auth is awaited, as nats-server: it looks
// only at the op's first byte. Other ops are allowed when no_auth_user gives the client an
// identity. It reports whether parsing may go on.
func (c *client) authFirstByte(b byte) bool {
	if b == 'C' || b == 'c' {
		return true
	}
	cfg := c.r.e.authConfig()
	if !cfg.Required() {
		c.au.awaiting = false
		return true
	}
	// nats-server lets ops come first only for a no_auth_user from the users list, not an nkey.
	if id, ok := cfg.NoAuthIdentity(); ok && !id.Nkey {
		// nats-server takes this as the CONNECT: the auth timer stops (unless it fired) and a
		// CONNECT sent later is a second one.
		if c.authDeadline != 0 && time.Now().UnixNano() >= c.authDeadline {
			c.closeWithErr(errTextAuthTimeout, closeAuthTimeout)
			return false
		}
		c.connected = true
		cr := &auth.Creds{Nonce: c.au.nonce}
		cfg.NoAuthCreds(cr)
		c.authDone(cr, id, true)
		return true
	}
	c.authViolation(nil)
	return false
}

// authViolation refuses the client; the log line names the user (nkey, token) cr carries, as
// nats-server's does: `authentication error - User "bob"`.
func (c *client) authViolation(cr *auth.Creds) {
	if c.r.e.cfg.Log != nil {
		if u := credsUser(cr); u != "" {
			c.errorf("authentication error - %s", u)
		} else {
			c.errorf("authentication error")
		}
	}
	c.closeWithErr(errTextAuthViolation, closeAuthFailure)
	if ev := c.r.e.cfg.Events; ev != nil && c.kind == kindClient {
		cs := c.snapshot(false)
		cs.Reason = closeAuthFailure
		ev.AuthFailed(cs)
	}
}

// peerCerts is the verified client certificate chain of a TLS connection.
func peerCerts(conn Conn) []*x509.Certificate {
	if t, ok := conn.(interface{ TLSState() *tls.ConnectionState }); ok {
		if st := t.TLSState(); st != nil {
			return st.PeerCertificates
		}
	}
	return nil
}

// authConnect checks CONNECT's credentials. Cheap checks run here; bcrypt and nkey
// signatures run on a worker goroutine while the connection's further bytes wait in its
// inbound buffer, and the verdict comes back on the reactor. It reports whether CONNECT
// may be applied now.
func (c *client) authConnect(o *connectOpts) bool {
	e := c.r.e
	cfg := e.authConfig()
	cr := &auth.Creds{
		User: o.User, Pass: o.Pass, Token: o.Token, Nkey: o.Nkey, Sig: o.Sig,
		Nonce: c.au.nonce, Certs: peerCerts(c.conn),
	}
	if !cfg.Expensive(cr) {
		id, ok := cfg.Authenticate(cr)
		return c.authDone(cr, id, ok)
	}
	c.au.pending = true
	// Parked like a stalled fast producer, so that every driver keeps the bytes buffered and
	// waits for Wake.
	c.stalled, c.stallUntil = true, math.MaxInt64
	opts := *o
	ex := c.r.ex
	go func() {
		authSem <- struct{}{}
		id, ok := cfg.Authenticate(cr)
		<-authSem
		_ = ex.Execute(func() {
			c.au.pending = false
			c.stalled = false
			if c.closed {
				return
			}
			if !c.closing {
				if e.authConfig() != cfg {
					// A reload raced with the check: verify again against the new config.
					if c.authConnect(&opts) {
						c.applyConnect(&opts)
					}
				} else if c.authDone(cr, id, ok) {
					c.applyConnect(&opts)
				}
				c.r.endBatch()
			}
			if !c.au.pending {
				// Refused or not, the driver must look again: netpoll's pump waits for this
				// Wake even when the connection is closing.
				_ = c.conn.Wake()
			}
		})
	}()
	return false
}

// authDone records the verdict: the identity and its permissions, or the violation.
func (c *client) authDone(cr *auth.Creds, id *auth.Identity, ok bool) bool {
	if !ok || id == nil {
		c.authViolation(cr)
		return false
	}
	if cr.User != "" && c.r.e.cfg.Log != nil && c.r.e.authConfig().MapsCerts() {
		c.r.e.cfg.Log.Warnf("User %q found in connect proto, but user required from cert", cr.User)
	}
	if !c.bindIdentity(cr, id) {
		return false
	}
	c.au.awaiting = false
	c.au.creds = cr
	c.au.name, c.au.nkey = id.Name, id.Nkey
	c.authDeadline = 0
	c.setPerms(id.Perms)
	return true
}

// bindIdentity binds the client to its user's account ($G for none); a missing account is
// an authorization violation, a full one closes with nats-server's error.
func (c *client) bindIdentity(cr *auth.Creds, id *auth.Identity) bool {
	name := id.Account
	if name == "" {
		name = GlobalAccount
	}
	acc := c.r.e.LookupAccount(name)
	if acc == nil {
		c.authViolation(cr)
		return false
	}
	if err := c.bind(acc); err != nil {
		c.closeWithErr(err.Error(), closeMaxAccountConns)
		return false
	}
	return true
}

// SetAuth installs a new authentication configuration (reload) and re-checks every
// connected client on its own reactor: those whose credentials no longer hold are closed
// with Authorization Violation, the others get their new permissions in place. Credential
// checks (bcrypt) run on the caller's goroutine, never on a reactor.
func (e *Engine) SetAuth(cfg *auth.Config) {
	e.authz.cur.Store(&authSnap{cfg: cfg})
	type check struct {
		c  *client
		cr *auth.Creds
	}
	type verdict struct {
		c  *client
		cr *auth.Creds // what was checked, with no_auth_user's filled in (Authenticate)
		id *auth.Identity
		ok bool
	}
	for _, r := range e.reactorsSnapshot() {
		ch := make(chan []check, 1)
		if r.ex.Execute(func() {
			var list []check
			for c := range r.clients {
				if c.closing || c.closed || (c.au != nil && (c.au.awaiting || c.au.pending)) {
					continue
				}
				// A copy: Authenticate may fill it in, off this reactor.
				cr := &auth.Creds{}
				if c.au != nil && c.au.creds != nil {
					*cr = *c.au.creds
				}
				list = append(list, check{c, cr})
			}
			ch <- list
		}) != nil {
			continue
		}
		var list []check
		select {
		case list = <-ch:
		case <-e.done:
			return
		}
		memo := make(map[string]verdict)
		out := make([]verdict, 0, len(list))
		for _, k := range list {
			// Same user, password and token: same verdict (bcrypt once), unless an nkey or a
			// certificate is involved.
			plain := k.cr.Nkey == "" && len(k.cr.Certs) == 0
			key := k.cr.User + "\x00" + k.cr.Pass + "\x00" + k.cr.Token
			v, seen := memo[key]
			if !plain || !seen {
				v.id, v.ok = cfg.Authenticate(k.cr)
				v.cr = k.cr
				if plain {
					memo[key] = v
				}
			}
			v.c = k.c
			out = append(out, v)
		}
		_ = r.ex.Execute(func() {
			for _, v := range out {
				c := v.c
				if c.closed || c.closing {
					continue
				}
				if c.movedAccount(cfg, v.cr, v.id) {
					// nats-server closes these first, and silently.
					c.markClosing(closeClient)
					continue
				}
				if !v.ok || v.id == nil {
					c.authViolation(v.cr)
					continue
				}
				if c.au == nil {
					c.au = &clientAuth{}
				}
				c.au.creds = v.cr
				c.au.name, c.au.nkey = v.id.Name, v.id.Nkey
				c.setPerms(v.id.Perms)
				c.revokeSubs()
			}
			r.endBatch()
		})
	}
}

// authUser names the client's identity in logs, as nats-server's getAuthUser does: the nkey,
// else the user (the one a certificate or no_auth_user mapped to), else a redacted token.
func (c *client) authUser() string {
	if c.au == nil {
		return `User "N/A"`
	}
	var cr auth.Creds
	if c.au.creds != nil {
		cr = *c.au.creds
	}
	switch {
	case cr.Nkey != "":
		return fmt.Sprintf("Nkey %q", cr.Nkey)
	case c.au.nkey && c.au.name != "":
		return fmt.Sprintf("Nkey %q", c.au.name)
	case c.au.name != "":
		return fmt.Sprintf("User %q", c.au.name)
	case cr.User != "":
		return fmt.Sprintf("User %q", cr.User)
	case cr.Token != "":
		return `Token "[REDACTED]"`
	}
	return `User "N/A"`
}

// movedAccount reports whether a reload removed the client's user or moved it to another
// account than the one it is bound to.
func (c *client) movedAccount(cfg *auth.Config, cr *auth.Creds, id *auth.Identity) bool {
	if cr == nil || c.acc == nil {
		return false
	}
	name, nkey := cr.User, false
	if cr.Nkey != "" {
		name, nkey = cr.Nkey, true
	}
	if name == "" {
		return false
	}
	acct, ok := cfg.UserAccount(name, nkey)
	if !ok {
		return true
	}
	if acct == "" {
		acct = GlobalAccount
	}
	return acct != c.acc.Name
}
