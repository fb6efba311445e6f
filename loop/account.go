package loop

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/sublist"
	"github.com/natsd/natsd/transform"
)

// GlobalAccount is the account of clients that authenticate into none in particular.
const GlobalAccount = "$G"

// Account is one subject space: its own interest graph, its subject mappings and imports, and
// its clients. Every connection and internal client belongs to exactly one. Reactors keep an L1
// cache per account (by idx), resolved onto the client once it is bound, so matching stays one
// pointer away on the per-message path.
type Account struct {
	Name string
	e    *Engine
	idx  int
	subs *sublist.Sublist[*sub]

	// rt is what routing in this account rewrites (mappings); imports are subscriptions
	// (see imports.go). Swapped whole when the configuration changes.
	rt atomic.Pointer[accountRouting]

	limits atomic.Pointer[AccountLimits]
	system atomic.Bool  // the system account
	conns  atomic.Int64 // open client connections bound to it
	nsubs  atomic.Int64 // subscriptions of its clients (max_subscriptions per account)

	// Figures for /accstatz and $SYS (each written on the reactor that counts it).
	inMsgs, inBytes, outMsgs, outBytes atomic.Int64
	slowConsumers                      atomic.Int64
	totalConns                         atomic.Int64
	created                            time.Time

	// interest is the account's local interest told to routes (interest.go); remoteSubs
	// counts the subscriptions routes hold in subs (routing takes the clustered path then).
	interest   interest
	remoteSubs atomic.Int64

	mu       sync.Mutex
	internal *InternalClient // the account's own internal client (imports, service replies)
	imports  []*importSub    // subscriptions this account's imports placed (to undo on change)
	svcResp  *respTable      // reply mappings of service imports into this account
}

// AccountLimits are an account's limits; -1 is unlimited.
type AccountLimits struct {
	MaxConnections   int
	MaxSubscriptions int
	MaxPayload       int
}

var noLimits = AccountLimits{MaxConnections: -1, MaxSubscriptions: -1, MaxPayload: -1}

// accountRouting is the immutable set of rewrites routing applies in an account.
type accountRouting struct {
	mappings []*transform.Mapping // first match wins, as nats-server's ordered list
}

// Accounts is every account, by name; copy-on-write under Engine.mu.
type accountSet struct {
	byName map[string]*Account
	list   []*Account // by idx
}

// account returns the named account, creating it if asked to.
func (e *Engine) account(name string, create bool) *Account {
	if set := e.accts.Load(); set != nil {
		if a := set.byName[name]; a != nil || !create {
			return a
		}
	} else if !create {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.accts.Load()
	if old != nil {
		if a := old.byName[name]; a != nil {
			return a
		}
	}
	a := &Account{Name: name, e: e, subs: sublist.New[*sub](), created: time.Now()}
	a.limits.Store(&noLimits)
	a.svcResp = newRespTable()
	next := &accountSet{byName: make(map[string]*Account)}
	if old != nil {
		for k, v := range old.byName {
			next.byName[k] = v
		}
		next.list = append(next.list, old.list...)
	}
	a.idx = len(next.list)
	next.byName[name] = a
	next.list = append(next.list, a)
	e.accts.Store(next)
	return a
}

// LookupAccount returns the named account, or nil.
func (e *Engine) LookupAccount(name string) *Account { return e.account(name, false) }

// Accounts lists every account, in the order they were made.
func (e *Engine) Accounts() []*Account {
	if set := e.accts.Load(); set != nil {
		return set.list
	}
	return nil
}

// Global is the global account, $G.
func (e *Engine) Global() *Account { return e.global }

// NumSubscriptions is the number of subscriptions in the account's interest graph,
// internal ones included (as nats-server counts them).
func (a *Account) NumSubscriptions() int { return a.subs.Count() }

// HasInterest reports whether any subscription in the account matches subject. A stream
// import's subscription counts only when the importing account has interest in the subject
// it would be delivered on there, as nats-server's shadow subscriptions stand for the
// importer's own: a JetStream push consumer whose deliver subject another account imports
// waits for a subscriber there.
func (a *Account) HasInterest(subject string) bool { return a.hasInterest([]byte(subject), 0) }

func (a *Account) hasInterest(subject []byte, depth int) bool {
	res := a.subs.Match(subject)
	if len(res.Queues) > 0 {
		return true
	}
	for _, s := range res.Plain {
		imp := s.imp
		if imp == nil || depth >= maxRouteDepth {
			return true
		}
		local := subject
		switch {
		case imp.tr != nil:
			local = imp.tr.Append(nil, subject)
		case !imp.same:
			local = []byte(imp.local)
		}
		if imp.to.hasInterest(local, depth+1) {
			return true
		}
	}
	return false
}

// HasSubscriber reports whether a non-queue subscription on exactly subject (not a wildcard
// that covers it) exists: a client that subscribed its own inbox, as opposed to its
// response multiplexer's "_INBOX.x.*" that only takes replies it is waiting for.
func (a *Account) HasSubscriber(subject string) bool {
	res := a.subs.Match([]byte(subject))
	for _, s := range res.Plain {
		if s.subject == subject {
			return true
		}
	}
	return false
}

// NumConnections is the number of client connections bound to the account.
func (a *Account) NumConnections() int { return int(a.conns.Load()) }

// Limits returns the account's limits.
func (a *Account) Limits() AccountLimits { return *a.limits.Load() }

// Stats are an account's message figures.
type AccountStats struct {
	Conns, TotalConns                  int
	Subs                               int
	InMsgs, InBytes, OutMsgs, OutBytes int64
	SlowConsumers                      int64
}

// Stats reads the account's figures: counters only, cheap enough for heartbeats.
func (a *Account) Stats() AccountStats {
	st := AccountStats{
		Conns: int(a.conns.Load()), TotalConns: int(a.totalConns.Load()), Subs: a.subs.Count(),
		SlowConsumers: a.slowConsumers.Load(),
	}
	for _, r := range a.e.reactorsSnapshot() {
		p := r.countsPub.Load()
		if p == nil || a.idx >= len(*p) || (*p)[a.idx] == nil {
			continue
		}
		c := (*p)[a.idx]
		st.InMsgs += int64(c.inMsgs.Load())
		st.InBytes += int64(c.inBytes.Load())
		st.OutMsgs += int64(c.outMsgs.Load())
		st.OutBytes += int64(c.outBytes.Load())
	}
	return st
}

// cacheFor returns r's L1 cache for a, making it on first use; only r's goroutine calls it.
func (r *reactor) cacheFor(a *Account) *sublist.Cache[*sub] {
	if a.idx < len(r.caches) {
		if c := r.caches[a.idx]; c != nil {
			return c
		}
	}
	for len(r.caches) <= a.idx {
		r.caches = append(r.caches, nil)
	}
	c := sublist.NewCache(a.subs, l1Size)
	r.caches[a.idx] = c
	return c
}

// bind makes a the client's account: its subscriptions go to a's interest graph and its
// publishes are routed there. It runs on c's reactor, before the client has subscriptions.
func (c *client) bind(a *Account) error {
	if c.acc == a {
		return nil
	}
	if l := a.Limits(); l.MaxConnections >= 0 && c.kind == kindClient {
		if n := a.conns.Add(1); n > int64(l.MaxConnections) {
			a.conns.Add(-1)
			return errAccountMaxConns
		}
	} else if c.kind == kindClient {
		a.conns.Add(1)
	}
	if old := c.acc; old != nil && c.kind == kindClient {
		old.conns.Add(-1)
	}
	if c.kind == kindClient {
		a.totalConns.Add(1)
	}
	c.acc = a
	c.cache = c.r.cacheFor(a)
	c.counts = c.r.countsFor(a)
	c.applyLimits()
	return nil
}

// applyLimits sets the client's payload and subscription limits: the server's, lowered by
// its account's, as nats-server does when a client joins an account (0 in an account's
// limits allows nothing, -1 is no limit). It runs on c's reactor.
func (c *client) applyLimits() {
	e := c.r.e
	c.p.MaxPayload = e.cfg.MaxPayload
	c.maxSubs = -1
	if m := e.cfg.MaxSubs; m > 0 {
		c.maxSubs = m
	}
	if c.acc == nil {
		return
	}
	l := c.acc.Limits()
	if l.MaxPayload >= 0 && l.MaxPayload < c.p.MaxPayload {
		c.p.MaxPayload = l.MaxPayload
	}
	if l.MaxSubscriptions >= 0 && (c.maxSubs < 0 || l.MaxSubscriptions < c.maxSubs) {
		c.maxSubs = l.MaxSubscriptions
	}
}

// unbind drops the client from its account's connection count (it is closing).
func (c *client) unbind() {
	if c.acc != nil && c.kind == kindClient {
		c.acc.conns.Add(-1)
	}
}

var errAccountMaxConns = fmt.Errorf("maximum account active connections exceeded")
