package loop

import (
	"hash/fnv"
	"slices"
	"sync"
)

// Interest propagation: each account counts its local subscriptions by subject and queue
// (route subscriptions, and a service import's own listener, do not count), and tells every
// route when a count leaves or reaches zero, or when a queue group's count (its weight on the
// remote side) changes. Remote servers then hold that interest in the same sublist as their
// own clients' and route to us only what someone here wants.
//
// Updates are written to the routes' outbound queues while the account's interest lock is
// held, so that every route sees them in the order the counts changed: an RS- can never
// overtake the RS+ it undoes.

// interest is an account's local interest by "subject" or "subject queue".
type interest struct {
	mu sync.Mutex
	rm map[string]int32
}

// interestKey is how nats-server keys an account's routed interest.
func interestKey(subject, queue string) string {
	if queue == "" {
		return subject
	}
	return subject + " " + queue
}

// propagates reports whether s is interest remote servers should hear of.
func (s *sub) propagates() bool {
	return !s.remote && !s.local
}

// subAdded is called once s is in its account's sublist.
func (e *Engine) subAdded(s *sub, r *reactor) {
	if !e.clustered.Load() || !s.propagates() {
		return
	}
	e.interestChanged(s.acc, s.subject, s.queue, 1, r)
}

// subRemoved is called once s has left its account's sublist.
func (e *Engine) subRemoved(s *sub, r *reactor) {
	if !e.clustered.Load() || !s.propagates() {
		return
	}
	e.interestChanged(s.acc, s.subject, s.queue, -1, r)
}

func (e *Engine) interestChanged(a *Account, subject, queue string, delta int32, r *reactor) {
	in := &a.interest
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.rm == nil {
		in.rm = make(map[string]int32)
	}
	key := interestKey(subject, queue)
	n := in.rm[key] + delta
	old := n - delta
	if n <= 0 {
		delete(in.rm, key)
		n = 0
	} else {
		in.rm[key] = n
	}
	if queue == "" && (old > 0) == (n > 0) {
		return // a plain subject's interest only changes at its first and last subscriber
	}
	if old == n {
		return
	}
	routes := e.routeList()
	if len(routes) == 0 {
		return
	}
	idx, pinned := e.poolPlace(a)
	var frame, bare []byte
	for _, rc := range routes {
		if !rc.route.carries(a, idx, pinned) || !rc.route.imports(subject) {
			continue
		}
		if rc.route.pinned != "" {
			if bare == nil {
				bare = appendInterest(nil, "", subject, queue, n)
			}
			rc.sendRouteProto(bare, r)
			continue
		}
		if frame == nil {
			frame = appendInterest(nil, a.Name, subject, queue, n)
		}
		rc.sendRouteProto(frame, r)
	}
}

// appendInterest is RS+ (n > 0: n members) or RS-; acc "" leaves the account out (a pinned
// account's own route).
func appendInterest(b []byte, acc, subject, queue string, n int32) []byte {
	if n > 0 {
		return appendRSub(b, acc, subject, queue, n)
	}
	return appendRUnsub(b, acc, subject, queue)
}

// poolPlace is where account a's interest and messages go: its pool index (nats-server's
// fnv32a of the name modulo the pool size), or pinned to a route of its own.
func (e *Engine) poolPlace(a *Account) (idx int, pinned bool) {
	cfg := e.rt.cfg.Load()
	if cfg == nil || cfg.PoolSize <= 0 {
		return 0, false
	}
	if slices.Contains(cfg.Pinned, a.Name) {
		return -1, true
	}
	if cfg.PoolSize == 1 {
		return 0, false
	}
	h := fnv.New32a()
	h.Write([]byte(a.Name))
	return int(h.Sum32() % uint32(cfg.PoolSize)), false
}

// carries reports whether account a's traffic uses this route: its pinned route, its pool
// slot, or the single route to a server without pooling.
func (rs *routeState) carries(a *Account, idx int, pinned bool) bool {
	switch {
	case rs.pinned != "":
		return rs.pinned == a.Name
	case rs.noPool:
		return true
	case pinned:
		return false
	}
	return rs.poolIdx == idx
}

// sendInterest writes all of the server's local interest to a route that has just come up.
// The account locks are held while the route joins the list updates go to, so that it sees
// every change exactly once: in this dump, or as an update after it.
func (e *Engine) sendInterest(rc *client) {
	var buf []byte
	accts := e.Accounts() // once: an account made meanwhile has no interest to tell yet
	for _, a := range accts {
		a.interest.mu.Lock()
	}
	defer func() {
		for _, a := range accts {
			a.interest.mu.Unlock()
		}
	}()
	for _, a := range accts {
		idx, pinned := e.poolPlace(a)
		if !rc.route.carries(a, idx, pinned) {
			continue
		}
		name := a.Name
		if rc.route.pinned != "" {
			name = ""
		}
		for key, n := range a.interest.rm {
			subject, queue := splitInterestKey(key)
			if !rc.route.imports(subject) {
				continue
			}
			buf = appendRSub(buf, name, subject, queue, n)
		}
	}
	e.addRoute(rc)
	if len(buf) > 0 {
		rc.sendRouteProto(buf, rc.r)
	}
}

func splitInterestKey(key string) (subject, queue string) {
	for i := 0; i < len(key); i++ {
		if key[i] == ' ' {
			return key[:i], key[i+1:]
		}
	}
	return key, ""
}

func appendRSub(b []byte, acc, subject, queue string, weight int32) []byte {
	b = append(b, "RS+ "...)
	if acc != "" {
		b = append(b, acc...)
		b = append(b, ' ')
	}
	b = append(b, subject...)
	if queue != "" {
		b = append(b, ' ')
		b = append(b, queue...)
		b = append(b, ' ')
		b = appendInt(b, int64(weight))
	}
	return append(b, '\r', '\n')
}

func appendRUnsub(b []byte, acc, subject, queue string) []byte {
	b = append(b, "RS- "...)
	if acc != "" {
		b = append(b, acc...)
		b = append(b, ' ')
	}
	b = append(b, subject...)
	if queue != "" {
		b = append(b, ' ')
		b = append(b, queue...)
	}
	return append(b, '\r', '\n')
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}
