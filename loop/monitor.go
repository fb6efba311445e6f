package loop

import (
	"crypto/x509"
	"errors"
	"sync"
	"time"

	"github.com/natsd/natsd/sublist"
)

// MaxClosedConns is how many closed connections /connz?state=closed remembers, as nats-server.
const MaxClosedConns = 10000

// ConnSnapshot is one connection's figures for monitoring, taken on its reactor.
type ConnSnapshot struct {
	CID                                uint64
	IP                                 string
	Port                               int
	Start, Last, Stop                  time.Time // Stop is zero while open
	Reason                             string
	RTT                                time.Duration
	Pending                            int64
	InMsgs, InBytes, OutMsgs, OutBytes int64
	Stalls                             int64
	NumSubs                            int
	Name, Lang, Version                string
	Account, User                      string
	// TLS, once the session is up: version and suite (crypto/tls constants), whether the
	// handshake came before INFO, and the client's verified chain.
	TLSVersion, TLSCipher uint16
	TLSFirst              bool
	TLSPeerCerts          []*x509.Certificate
	Subs                  []SubSnapshot // only when asked for (always kept for closed)
}

// SubSnapshot is one subscription's figures.
type SubSnapshot struct {
	Subject, Queue, Sid string
	Msgs, Max           int64
	CID                 uint64
}

// ConnsQuery selects what Conns gathers.
type ConnsQuery struct {
	CID  uint64 // only this connection when non-zero
	Subs bool   // fill Subs
	// ProbeRTT sends a PING to connections with no round-trip time yet (clients that named
	// their language), as nats-server does when /connz is asked.
	ProbeRTT bool
}

// SubStats are the interest graph's figures for /subsz.
type SubStats struct {
	Subscriptions int
	Cache         int    // subjects held in the reactors' L1 caches
	Inserts       uint64 // subscriptions ever added
	Matches       uint64 // subject lookups through the L1 caches
	CacheHits     uint64 // lookups answered by a current cache entry
	MaxFanout     int    // most subscriptions + queue groups one cached subject reaches
	TotFanout     int    // summed over every cached subject (avg = TotFanout / Cache)
}

// reactorWait is how long runOnReactors waits for one reactor (a variable for tests).
var reactorWait = 5 * time.Second

// runOnReactors runs fn on each reactor's own goroutine, one after another, and returns once
// every reactor that accepted the task has run it (or the engine stopped).
func (e *Engine) runOnReactors(fn func(r *reactor)) {
	for _, r := range e.reactorsSnapshot() {
		done := make(chan struct{})
		err := r.ex.Execute(func() {
			fn(r)
			close(done)
		})
		if err != nil {
			continue
		}
		select {
		case <-done:
		case <-e.done:
			return
		case <-time.After(reactorWait):
			// A reactor that cannot run a task for this long is shutting down.
		}
	}
}

// gather runs fn on every reactor (as runOnReactors does) and concatenates what it returns.
// What a reactor answers after runOnReactors stopped waiting for it is dropped, so the
// caller's slice is never appended to once it has been returned.
func gather[T any](e *Engine, fn func(r *reactor) []T) []T {
	var mu sync.Mutex
	var out []T
	late := false
	e.runOnReactors(func(r *reactor) {
		local := fn(r)
		mu.Lock()
		if !late {
			out = append(out, local...)
		}
		mu.Unlock()
	})
	mu.Lock()
	late = true
	res := out
	mu.Unlock()
	return res
}

func (c *client) subsSnapshot(all bool) (n int, list []SubSnapshot) {
	for _, s := range c.subs {
		if s.gone.Load() {
			continue
		}
		n++
		if all {
			list = append(list, s.snapshot())
		}
	}
	return n, list
}

func (s *sub) snapshot() SubSnapshot {
	return SubSnapshot{
		Subject: s.subject,
		Queue:   s.queue,
		Sid:     string(s.sid),
		Msgs:    s.delivered.Load(),
		Max:     s.max.Load(),
		CID:     s.c.cid,
	}
}

// snapshot reads c's figures; it runs on c's reactor.
func (c *client) snapshot(subs bool) *ConnSnapshot {
	cs := &ConnSnapshot{
		CID:     c.cid,
		IP:      c.ip,
		Port:    c.port,
		Start:   time.Unix(0, c.start),
		Last:    time.Unix(0, c.last),
		RTT:     time.Duration(c.rtt),
		Pending: c.out.Pending(),
		InMsgs:  c.inMsgs,
		InBytes: c.inBytes,
		Stalls:  c.stalls.Load(),
		Name:    c.name,
		Lang:    c.lang,
		Version: c.version,
	}
	cs.OutMsgs, cs.OutBytes = c.out.Counts()
	cs.NumSubs, cs.Subs = c.subsSnapshot(subs)
	if c.acc != nil {
		cs.Account = c.acc.Name
	}
	if c.au != nil {
		cs.User = c.au.name
	}
	if t, ok := c.conn.(*tlsLayer); ok && t.state == tlsOpen {
		cs.TLSVersion, cs.TLSCipher, cs.TLSFirst, cs.TLSPeerCerts = t.vers, t.suite, t.first, t.peer
	}
	return cs
}

// Conns snapshots the open connections, each on its own reactor.
func (e *Engine) Conns(q ConnsQuery) []*ConnSnapshot {
	return gather(e, func(r *reactor) []*ConnSnapshot {
		var local []*ConnSnapshot
		probed := false
		for c := range r.clients {
			if c.closed || (q.CID != 0 && c.cid != q.CID) {
				continue
			}
			local = append(local, c.snapshot(q.Subs))
			if q.ProbeRTT && c.rtt == 0 && c.rttStart == 0 && c.lang != "" && c.connected && !c.closing {
				c.rttStart = time.Now().UnixNano()
				c.pingsOut++
				c.send(pingLine)
				probed = true
			}
		}
		if probed {
			r.endBatch()
		}
		return local
	})
}

// Subs lists every live client subscription (gathered on the reactors that own them).
func (e *Engine) Subs() []SubSnapshot { return e.AccountSubs(nil, false) }

// AccountSubs lists the live subscriptions in one account's interest graph (nil: every
// account), the internal clients' too when asked.
func (e *Engine) AccountSubs(acc *Account, internal bool) []SubSnapshot {
	out := gather(e, func(r *reactor) []SubSnapshot {
		var local []SubSnapshot
		for c := range r.clients {
			if acc != nil && c.acc != acc {
				continue
			}
			_, l := c.subsSnapshot(true)
			local = append(local, l...)
		}
		return local
	})
	if internal {
		e.mu.Lock()
		ics := append([]*InternalClient(nil), e.internals...)
		e.mu.Unlock()
		for _, ic := range ics {
			ic.submu.Lock()
			for s := range ic.subs {
				if !s.gone.Load() && (acc == nil || s.acc == acc) {
					out = append(out, s.snapshot())
				}
			}
			ic.submu.Unlock()
		}
	}
	return out
}

// Kick closes client cid, as $SYS.REQ.SERVER.<id>.KICK asks.
func (e *Engine) Kick(cid uint64) error {
	found := gather(e, func(r *reactor) []bool {
		for c := range r.clients {
			if c.cid == cid && !c.closed {
				c.markClosing(closeKicked)
				r.endBatch()
				return []bool{true}
			}
		}
		return nil
	})
	if len(found) == 0 {
		return errNoSuchClient
	}
	return nil
}

// LameDuckClient tells client cid that the server is going away (an async INFO with ldm), as
// $SYS.REQ.SERVER.<id>.LDM asks.
func (e *Engine) LameDuckClient(cid uint64) error {
	res := gather(e, func(r *reactor) []error {
		for c := range r.clients {
			if c.cid != cid || c.closed {
				continue
			}
			if c.protocol < 1 || !c.firstPong {
				return []error{errNoLameDuck}
			}
			c.send(c.infoLDM())
			r.endBatch()
			return []error{nil}
		}
		return nil
	})
	if len(res) == 0 {
		return errNoSuchClientID
	}
	return res[0]
}

var (
	errNoSuchClient   = errors.New("no such client or leafnode id")
	errNoSuchClientID = errors.New("no such client id")
	errNoLameDuck     = errors.New("client does not support Lame Duck Mode or is not ready to receive the notification")
)

// MatchSubs lists the subscriptions a publish on subject would reach (every member of each
// queue group).
func (e *Engine) MatchSubs(acc *Account, subject string) []SubSnapshot {
	if acc == nil {
		acc = e.global
	}
	res := acc.subs.Match([]byte(subject))
	var out []SubSnapshot
	for _, s := range res.Plain {
		if !s.gone.Load() {
			out = append(out, s.snapshot())
		}
	}
	for _, g := range res.Queues {
		for _, s := range g {
			if !s.gone.Load() {
				out = append(out, s.snapshot())
			}
		}
	}
	return out
}

// SubStats gathers the interest graph's figures, of every account.
func (e *Engine) SubStats() SubStats { return e.AccountSubStats(nil) }

// AccountSubStats gathers one account's interest graph figures (nil: every account's).
func (e *Engine) AccountSubStats(acc *Account) SubStats {
	st := SubStats{Inserts: e.subInserts.Load()}
	for _, a := range e.Accounts() {
		if acc == nil || a == acc {
			st.Subscriptions += a.subs.Count()
		}
	}
	for _, cs := range gather(e, func(r *reactor) []sublist.CacheStats {
		var out []sublist.CacheStats
		for i, c := range r.caches {
			if c != nil && (acc == nil || i == acc.idx) {
				out = append(out, c.Stats())
			}
		}
		return out
	}) {
		st.Cache += cs.Len
		st.Matches += cs.Lookups
		st.CacheHits += cs.Hits
		st.MaxFanout = max(st.MaxFanout, cs.MaxFanout)
		st.TotFanout += cs.TotFanout
	}
	return st
}

// ClosedConns returns the remembered closed connections, oldest first.
func (e *Engine) ClosedConns() []*ConnSnapshot { return e.closed.list() }

// closedSnapshot captures c as it closes (on its reactor, before its subscriptions go).
func (e *Engine) closedSnapshot(c *client) *ConnSnapshot {
	cs := c.snapshot(true)
	cs.Pending = 0
	return cs
}

func (e *Engine) addClosed(cs *ConnSnapshot, reason string) {
	cs.Stop = time.Now()
	cs.Reason = reason
	e.closed.add(cs)
}

// closedRing keeps the last MaxClosedConns closed connections.
type closedRing struct {
	mu   sync.Mutex
	buf  []*ConnSnapshot
	next int
	full bool
}

func (r *closedRing) add(cs *ConnSnapshot) {
	r.mu.Lock()
	if r.buf == nil {
		r.buf = make([]*ConnSnapshot, MaxClosedConns)
	}
	r.buf[r.next] = cs
	r.next++
	if r.next == len(r.buf) {
		r.next = 0
		r.full = true
	}
	r.mu.Unlock()
}

func (r *closedRing) list() []*ConnSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]*ConnSnapshot(nil), r.buf[:r.next]...)
	}
	out := make([]*ConnSnapshot, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
