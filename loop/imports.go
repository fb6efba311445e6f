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
	Mappings []*transform.Mapping
	Streams  []StreamImport
	Services []ServiceImport
	Limits   AccountLimits
}

// StreamImport brings messages published in account From on Subject into the importing
// account, on the same subject with Prefix in front ("prefix.subject"), or rewritten by To (a
// transform destination for Subject).
type StreamImport struct {
	From, Subject string
	Prefix, To    string
}

// ServiceImport lets the importing account send requests on To (Subject if empty) to the
// service account From exports on Subject; replies find their way back through reply
// subjects the server makes (_R_.…), valid for one response (Singleton) or any number
// (Stream, Chunked) until Threshold has passed since the request.
type ServiceImport struct {
	From, Subject string
	To            string
	ResponseType  string // "Singleton" (default), "Stream", "Chunked"
	Threshold     time.Duration
}

// DefaultResponseThreshold is how long a service's responses may come, as nats-server's.
const DefaultResponseThreshold = 2 * time.Minute

// importSub is one subscription an import placed, to remove on reconfiguration.
type importSub struct{ s *sub }

// ConfigureAccounts creates the accounts specs name (the global and any others already made
// are kept) and applies their mappings, limits and imports; imports placed by an earlier call
// are replaced. The configuration loader has checked that every import names an export it
// is allowed, and that imports form no cycle.
func (e *Engine) ConfigureAccounts(specs []AccountSpec) error {
	for _, sp := range specs {
		e.account(sp.Name, true)
	}
	for _, sp := range specs {
		a := e.account(sp.Name, false)
		l := sp.Limits
		a.limits.Store(&l)
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
			if is.s.gone.CompareAndSwap(false, true) {
				_ = is.s.acc.subs.Remove(is.s.subject, is.s.queue, is.s)
			}
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
	a.imports = append(a.imports, &importSub{s: s.s})
	a.mu.Unlock()
}

// addStreamImport subscribes, in the exporting account, to what `to` imports: every message
// published there is routed again in `to`, under its local subject.
func (e *Engine) addStreamImport(to *Account, si StreamImport) error {
	from := e.account(si.From, false)
	if from == nil {
		return fmt.Errorf("unknown account")
	}
	var tr *transform.Transform
	if si.To != "" {
		t, err := transform.New(si.Subject, si.To)
		if err != nil {
			return err
		}
		tr = t
	}
	prefix := si.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	ic := to.internalClient()
	s, err := ic.subscribe(from, si.Subject, "", func(r *reactor, from *client, m *parser.Op, depth int) bool {
		buf := r.subj[depth][:0]
		switch {
		case tr != nil:
			buf = tr.Append(buf, m.Subject)
		case prefix != "":
			buf = append(append(buf, prefix...), m.Subject...)
		default:
			buf = append(buf, m.Subject...)
		}
		r.subj[depth] = buf
		out := r.forward(m, depth)
		out.Subject = buf
		return r.route(to, from, out, depth+1)
	})
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
	local := si.To
	if local == "" {
		local = si.Subject
	}
	var tr *transform.Transform
	if local != si.Subject {
		t, err := transform.New(local, si.Subject)
		if err != nil {
			return err
		}
		tr = t
	}
	threshold := si.Threshold
	if threshold <= 0 {
		threshold = DefaultResponseThreshold
	}
	single := si.ResponseType == "" || strings.EqualFold(si.ResponseType, "singleton")
	rt := svc.svcResp
	prefix := "_R_." + randomToken(6) + "."
	ic := to.internalClient()
	// Responses: published in the exporter on the reply subjects this import made.
	rs, err := ic.subscribe(svc, prefix+">", "", func(r *reactor, from *client, m *parser.Op, depth int) bool {
		orig, ok := rt.lookup(string(m.Subject), single)
		if !ok {
			return false
		}
		out := r.forward(m, depth)
		out.Subject = orig
		return r.route(to, from, out, depth+1)
	})
	if err != nil {
		return err
	}
	to.placed(rs)
	qs, err := ic.subscribe(to, local, "", func(r *reactor, from *client, m *parser.Op, depth int) bool {
		out := r.forward(m, depth)
		if tr != nil {
			buf := tr.Append(r.subj[depth][:0], m.Subject)
			r.subj[depth] = buf
			out.Subject = buf
		}
		if len(m.Reply) > 0 {
			out.Reply = rt.add(prefix, m.Reply, threshold)
		}
		return r.route(svc, from, out, depth+1)
	})
	if err != nil {
		rs.Unsubscribe()
		return err
	}
	to.placed(qs)
	return nil
}

// respTable maps the reply subjects service imports made in an exporting account to the
// requesters' own reply subjects. Requests add on the requester's reactor and responses look
// up on the responder's, hence the lock.
type respTable struct {
	mu   sync.Mutex
	n    uint64
	m    map[string]*svcReply
	last time.Time
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
