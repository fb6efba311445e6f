package loop

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/natsd/natsd/parser"
	"github.com/natsd/natsd/transform"
)

// AccountSpec is what the configuration says about one account: its subject mappings (first
// match wins), what it imports from others, and its limits (-1: none).
type AccountSpec struct {
	Name     string
	System   bool // the system account
	Mappings []*transform.Mapping
	Streams  []StreamImport
	Services []ServiceImport
	Limits   AccountLimits
}

// StreamImport brings messages published in account From on Subject (its namespace, may
// hold wildcards) into the importing account under Local: through Transform when Subject has
// wildcards that Local rearranges, else on Local as it is (Local == Subject: unchanged).
type StreamImport struct {
	From, Subject, Local string
	Transform            *transform.Transform
}

// ServiceImport lets the importing account send requests on Local to the service account
// From exports on Remote (Transform rewrites a wildcard Local into Remote; without it a
// literal Remote replaces the subject). Replies find their way back through reply subjects
// the server makes (_R_.…), valid for one response (Singleton) or any number (Streamed,
// Chunked) until Threshold has passed since the request. With RequestInfo, each request
// carries a Nats-Request-Info header describing the requester (Share: in full), built by
// Config.RequestInfo.
type ServiceImport struct {
	From, Local, Remote string
	Transform           *transform.Transform
	ResponseType        string // "Singleton" (default), "Streamed", "Chunked"
	Threshold           time.Duration
	RequestInfo, Share  bool
}

// DefaultResponseThreshold is how long a service's responses may come, as nats-server's.
const DefaultResponseThreshold = 2 * time.Minute

// importSub is one subscription an import placed, to remove on reconfiguration.
type importSub struct{ s *Subscription }

// ConfigureAccounts creates the accounts specs name (the global and any others already made
// are kept) and applies their mappings, limits and imports; imports placed by an earlier call
// are replaced. The configuration loader has checked that every import names an export it
// is allowed, and that imports form no cycle.
func (e *Engine) ConfigureAccounts(specs []AccountSpec) error {
	extra := uint64(0)
	for _, sp := range specs {
		e.account(sp.Name, true)
		if !sp.System && sp.Name != GlobalAccount {
			extra++
		}
	}
	if e.total.Load() == 0 {
		e.cid.Store(firstCID - 1 + extra)
	}
	// An account the configuration no longer has keeps no imports or mappings (its clients
	// were closed when their users went; the account itself stays, empty).
	named := make(map[string]bool, len(specs))
	for _, sp := range specs {
		named[sp.Name] = true
	}
	for _, a := range e.Accounts() {
		if !named[a.Name] && a != e.global {
			specs = append(specs, AccountSpec{Name: a.Name, Limits: noLimits})
		}
	}
	for _, sp := range specs {
		a := e.account(sp.Name, false)
		l := sp.Limits
		a.limits.Store(&l)
		a.system.Store(sp.System)
		if len(sp.Mappings) > 0 {
			a.rt.Store(&accountRouting{mappings: sp.Mappings})
		} else {
			a.rt.Store(nil)
		}
		a.mu.Lock()
		old := a.imports
		a.imports = nil
		a.mu.Unlock()
		for _, is := range old {
			is.s.Unsubscribe()
		}
		for _, si := range sp.Streams {
			if err := e.addStreamImport(a, si); err != nil {
				return fmt.Errorf("account %q: stream import from %q: %w", a.Name, si.From, err)
			}
		}
		for _, si := range sp.Services {
			if err := e.addServiceImport(a, si); err != nil {
				return fmt.Errorf("account %q: service import from %q: %w", a.Name, si.From, err)
			}
		}
	}
	// Connected clients follow their account's new limits.
	e.runOnReactors(func(r *reactor) {
		for c := range r.clients {
			c.applyLimits()
		}
	})
	return nil
}

// internalClient is the account's own internal client (kind ACCOUNT): the subscriber of the
// subscriptions its imports place.
func (a *Account) internalClient() *InternalClient {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.internal == nil {
		a.internal = a.e.NewInternalClient(kindAccount, a, "")
	}
	return a.internal
}

func (a *Account) placed(s *Subscription) {
	a.mu.Lock()
	a.imports = append(a.imports, &importSub{s: s})
	a.mu.Unlock()
}

// streamImportDest is where a stream import's subscription routes what it takes: the
// importing account, under the local subject (through tr, or the literal local unless same).
type streamImportDest struct {
	to    *Account
	tr    *transform.Transform
	same  bool
	local string
}

// addStreamImport subscribes, in the exporting account, to what `to` imports: every message
// published there is routed again in `to`, under its local subject.
func (e *Engine) addStreamImport(to *Account, si StreamImport) error {
	from := e.account(si.From, false)
	if from == nil {
		return fmt.Errorf("unknown account")
	}
	tr, local := si.Transform, si.Local
	if local == "" {
		local = si.Subject
	}
	same := tr == nil && local == si.Subject
	ic := to.internalClient()
	dest := &streamImportDest{to: to, tr: tr, same: same, local: local}
	s, err := ic.subscribeSub(&sub{c: ic.c, acc: from, subject: si.Subject, keepAs: true, imp: dest, fn: func(r *reactor, pub *client, m *parser.Op, depth int) bool {
		// Imported streams reach this server's subscribers only: every server of a cluster
		// imports for its own (nats-server's shadow subscriptions), so passing the message
		// on to routes would deliver it twice.
		r.localOnly++
		ok := r.route(to, pub, r.retarget(m, depth, tr, same, local), depth+1)
		r.localOnly--
		return ok
	}})
	if err != nil {
		return err
	}
	to.placed(s)
	return nil
}

// addServiceImport subscribes, in the importing account, to the service's local subject:
// each request is routed again in the exporting account, with its reply subject replaced by
// one of the exporter's (_R_.<prefix>.<n>) that routes the responses back.
func (e *Engine) addServiceImport(to *Account, si ServiceImport) error {
	svc := e.account(si.From, false)
	if svc == nil {
		return fmt.Errorf("unknown account")
	}
	local, remote, tr := si.Local, si.Remote, si.Transform
	if remote == "" {
		remote = local
	}
	same := tr == nil && remote == local
	threshold := si.Threshold
	if threshold <= 0 {
		threshold = DefaultResponseThreshold
	}
	single := si.ResponseType == "" || strings.EqualFold(si.ResponseType, "singleton")
	rt := svc.svcResp
	prefix := "_R_." + randomToken(6) + "."
	ic := to.internalClient()
	info := e.cfg.RequestInfo
	// Responses: published in the exporter on the reply subjects this import made. The
	// subscription is placed with the first request that has a reply, as nats-server adds its
	// response interest when it is first needed.
	var respOnce sync.Once
	respond := func() {
		rs, err := ic.subscribe(svc, prefix+">", "", func(r *reactor, pub *client, m *parser.Op, depth int) bool {
			orig, ok := rt.lookup(string(m.Subject), single)
			if !ok {
				return false
			}
			out := r.forward(m, depth)
			out.Subject = orig
			return r.route(to, pub, out, depth+1)
		})
		if err == nil {
			to.placed(rs)
		}
	}
	qs, err := ic.subscribeOpt(to, local, "", true, func(r *reactor, pub *client, m *parser.Op, depth int) bool {
		out := r.retarget(m, depth, tr, same, remote)
		if len(m.Reply) > 0 {
			respOnce.Do(respond)
			out.Reply = rt.add(prefix, m.Reply, threshold)
		}
		if si.RequestInfo && info != nil {
			withRequestInfo(out, info(originOf(pub), si.Share))
		}
		return r.route(svc, pub, out, depth+1)
	})
	if err != nil {
		return err
	}
	to.placed(qs)
	return nil
}

// retarget copies m for routing one level below depth under the import's subject in the
// other account: through tr when it maps wildcards, else the literal subject (unless it is
// m's own, same).
func (r *reactor) retarget(m *parser.Op, depth int, tr *transform.Transform, same bool, subject string) *parser.Op {
	out := r.forward(m, depth)
	switch {
	case tr != nil:
		out.Subject = tr.Append(r.subj[depth][:0], m.Subject)
		r.subj[depth] = out.Subject
	case !same:
		out.Subject = append(r.subj[depth][:0], subject...)
		r.subj[depth] = out.Subject
	}
	return out
}

// withRequestInfo adds a Nats-Request-Info header to m (a fresh copy: m's bytes are the
// publisher's).
func withRequestInfo(m *parser.Op, info []byte) {
	if info == nil {
		return
	}
	const name = "Nats-Request-Info: "
	var b []byte
	if m.HdrLen > 0 {
		hdr := m.Msg[:m.HdrLen]
		// Insert before the blank line that ends the block.
		end := len(hdr) - 2
		b = make([]byte, 0, len(m.Msg)+len(name)+len(info)+2)
		b = append(b, hdr[:end]...)
		b = append(b, name...)
		b = append(b, info...)
		b = append(b, "\r\n\r\n"...)
	} else {
		b = make([]byte, 0, len(m.Msg)+len(name)+len(info)+14)
		b = append(b, "NATS/1.0\r\n"...)
		b = append(b, name...)
		b = append(b, info...)
		b = append(b, "\r\n\r\n"...)
	}
	hl := len(b)
	b = append(b, m.Msg[m.HdrLen:]...)
	m.Msg, m.HdrLen = b, hl
	m.SizeWidth, m.HdrWidth = 0, 0 // the sizes changed
	m.Kind = parser.KindHPub
}

// respTable maps the reply subjects service imports made in an exporting account to the
// requesters' own reply subjects. Requests add on the requester's reactor and responses look
// up on the responder's, hence the lock.
type respTable struct {
	mu sync.Mutex
	n  uint64
	m  map[string]*svcReply
}

type svcReply struct {
	orig    []byte
	expires time.Time
}

func newRespTable() *respTable { return &respTable{m: make(map[string]*svcReply)} }

// add records a request's reply subject and returns the one to use in the exporter.
func (t *respTable) add(prefix string, reply []byte, ttl time.Duration) []byte {
	t.mu.Lock()
	t.n++
	key := prefix + strconv.FormatUint(t.n, 36)
	t.m[key] = &svcReply{orig: append([]byte(nil), reply...), expires: time.Now().Add(ttl)}
	t.mu.Unlock()
	return []byte(key)
}

// lookup returns the requester's reply subject for a response; a singleton's goes with its
// first response.
func (t *respTable) lookup(subject string, single bool) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[subject]
	if e == nil {
		return nil, false
	}
	if time.Now().After(e.expires) {
		delete(t.m, subject)
		return nil, false
	}
	if single {
		delete(t.m, subject)
	}
	return e.orig, true
}

// expire drops the entries whose responses may no longer come.
func (t *respTable) expire(now time.Time) {
	t.mu.Lock()
	for k, e := range t.m {
		if now.After(e.expires) {
			delete(t.m, k)
		}
	}
	t.mu.Unlock()
}

// Len is the number of reply subjects waiting for responses.
func (t *respTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// expireResponses runs on the ticker goroutine.
func (e *Engine) expireResponses(now time.Time) {
	for _, a := range e.Accounts() {
		if a.svcResp.Len() > 0 {
			a.svcResp.expire(now)
		}
	}
}

const tokenChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randomToken(n int) string {
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(tokenChars))))
		b[i] = tokenChars[k.Int64()]
	}
	return string(b)
}
