package js

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/loop"
)

// Mirrors and sources through the JetStream API, as nats-server makes all of them: an origin in
// another account or domain (external: {api, deliver}), or a durable consumer named by the
// source (consumer: {name, deliver_subject}). The sourcing stream's internal client publishes
// the consumer create request (or, for a durable, the consumer reset request) on the API
// prefix, through the routing core: an account's service import carries it into the origin
// account's $JS.API, a domain's prefix ($JS.<domain>.API) reaches that domain's API. The
// reply comes back on a $JSC.R.<id> inbox taken on the client's worker; the deliveries then
// come on the consumer's deliver subject (<deliver prefix>.M.<id> / .S.<id>, through the
// account's stream import), and the flow control replies go back on the consumer's
// $JS.FC.… subject (the origin account's $JS.FC.> service export). No goroutine waits: the
// sourcing stream's timer gives up a request unanswered after nats-server's 30s (5s for a
// durable's reset) and retries with the same back-off as a failed setup.

const (
	sourceRequestWait        = 30 * time.Second // a consumer create request's answer
	sourceDurableRequestWait = 5 * time.Second  // a durable consumer reset request's answer
	sourceFCStalledThreshold = 3                // heartbeats naming the same unanswered flow control
)

// getHash is nats-server's 8-character hash of a name.
func getHash(name string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	h := sha256.Sum256([]byte(name))
	b := make([]byte, 8)
	for i := range b {
		b[i] = digits[int(h[i]%62)]
	}
	return string(b)
}

// viaAPI tells whether an origin is reached through the API rather than in process.
func viaAPI(ss *StreamSource) bool { return ss.External != nil || ss.Consumer != nil }

// stableConsumerID is what nats-server hashes into the name of a sourcing stream's consumers:
// the stream's name, account and domain (and, for a source of a stream sourced more than
// once, its index name).
func (s *stream) stableConsumerID() string {
	id := s.name + " " + s.a.name
	if d := s.a.js.cfg.Domain; d != "" {
		id += " " + d
	}
	return id
}

func (s *stream) sourcingConsumerHash(ss *StreamSource) string {
	id := getHash(s.stableConsumerID()) // hashed again below, as nats-server does
	n := 0
	for _, o := range s.config().Sources {
		if o.Name == ss.Name {
			n++
		}
	}
	if n > 1 {
		id += " " + composeIName(ss)
	}
	return getHash(id)
}

// apiRequestReply is the part of a consumer create (or reset) reply a sourcing stream reads.
type apiRequestReply struct {
	Error  *APIError `json:"error"`
	Name   string    `json:"name"`
	Config *struct {
		DeliverSubject string `json:"deliver_subject"`
		AckPolicy      string `json:"ack_policy"`
	} `json:"config"`
	Delivered struct {
		Stream uint64 `json:"stream_seq"`
	} `json:"delivered"`
}

// setupRemote sends si's consumer request (si.setting is set by the caller and stays set
// until the reply or the request's deadline).
func (g *sourcing) setupRemote(si *srcInfo) {
	s := g.s
	if !si.mirror && !si.known {
		g.recoverSourceSeqs()
	}
	s.settle()
	st := s.store.FastState()
	cfg := &si.cfg
	ext := cfg.External
	cc := &ConsumerConfig{AckPolicy: AckNone, AckWait: 22 * time.Hour, MaxDeliver: 1, Heartbeat: sourceHealthHB,
		FlowControl: true, Direct: true, Sourcing: true, InactiveThreshold: sourceHealthCheck,
		ReplayPolicy: ReplayInstant}
	domain := s.a.js.cfg.Domain
	var kind string
	if si.mirror {
		kind = "M"
		cc.Name = "JS_MIRROR_" + getHash(s.stableConsumerID())
		cc.Metadata = map[string]string{"_nats.mirror.stream": s.name, "_nats.mirror.acc": s.a.name}
		if domain != "" {
			cc.Metadata["_nats.mirror.domain"] = domain
		}
	} else {
		kind = "S"
		cc.Name = "JS_SRC_" + s.sourcingConsumerHash(cfg)
		cc.Metadata = map[string]string{"_nats.src.stream": s.name, "_nats.src.acc": s.a.name}
		if domain != "" {
			cc.Metadata["_nats.src.domain"] = domain
		}
	}
	var durable string
	switch {
	case cfg.Consumer != nil:
		durable = cfg.Consumer.DeliverSubject
	case ext != nil && ext.DeliverPrefix != "":
		cc.DeliverSubject = strings.ReplaceAll(ext.DeliverPrefix+"."+kind+"."+ephemeralName(), "..", ".")
	default:
		cc.DeliverSubject = "$JS." + kind + "." + ephemeralName()
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		si.setting = false
		return
	}
	now := time.Now()
	si.lreq, si.next = now, time.Time{}
	if si.mirror {
		cc.DeliverPolicy = DeliverByStartSeq
		if st.LastSeq == 0 && st.Msgs == 0 {
			switch {
			case cfg.OptStartSeq > 0:
				cc.OptStartSeq = cfg.OptStartSeq
			case cfg.OptStartTime != nil:
				cc.DeliverPolicy, cc.OptStartTime = DeliverByStartTime, cfg.OptStartTime
			default:
				cc.DeliverPolicy = DeliverAll
			}
		} else {
			cc.OptStartSeq = st.LastSeq + 1
		}
		if cfg.FilterSubject != "" {
			cc.FilterSubject = cfg.FilterSubject
		}
		if n := len(cfg.SubjectTransforms); n > 0 {
			var sfs []string
			for _, tr := range cfg.SubjectTransforms {
				sfs = append(sfs, tr.Source)
			}
			if cc.FilterSubject == "" && n == 1 {
				cc.FilterSubject = sfs[0]
			} else {
				cc.FilterSubjects = sfs
			}
		}
	} else {
		switch {
		case si.sseq > 0:
			cc.DeliverPolicy, cc.OptStartSeq = DeliverByStartSeq, si.sseq+1
		case cfg.OptStartSeq > 0:
			cc.DeliverPolicy, cc.OptStartSeq = DeliverByStartSeq, cfg.OptStartSeq
		case cfg.OptStartTime != nil:
			cc.DeliverPolicy, cc.OptStartTime = DeliverByStartTime, cfg.OptStartTime
		default:
			cc.DeliverPolicy = DeliverAll
		}
		cc.FilterSubject = cfg.FilterSubject
		cc.FilterSubjects = si.sfs
	}
	si.creq = &CreateConsumerRequest{Stream: cfg.Name, Config: cc}
	si.durable = durable
	if durable != "" {
		si.cname = cfg.Consumer.Name
	}
	si.level = 5
	if si.mirror {
		si.level = 4
	}
	si.err = nil
	g.sendRequestLocked(si)
}

// requestSubject is the API subject of si's request, on its external API prefix.
func (si *srcInfo) requestSubject() string {
	cc := si.creq.Config
	name := si.cfg.Name
	var subj string
	switch {
	case si.durable != "":
		subj = "$JS.API.CONSUMER.RESET." + name + "." + si.cfg.Consumer.Name
	case cc.FilterSubject != "":
		subj = "$JS.API.CONSUMER.CREATE." + name + "." + cc.Name + "." + cc.FilterSubject
	case len(cc.FilterSubjects) == 1:
		// The extended create subject takes one filter, in filter_subject.
		cc.FilterSubject, cc.FilterSubjects = cc.FilterSubjects[0], nil
		subj = "$JS.API.CONSUMER.CREATE." + name + "." + cc.Name + "." + cc.FilterSubject
	default:
		subj = "$JS.API.CONSUMER.CREATE." + name
	}
	if ext := si.cfg.External; ext != nil {
		subj = strings.Replace(subj, "$JS.API", ext.APIPrefix, 1)
		subj = strings.ReplaceAll(subj, "..", ".")
	}
	return subj
}

// sendRequestLocked publishes si's pending request on a fresh reply inbox (g.mu held).
func (g *sourcing) sendRequestLocked(si *srcInfo) {
	g.dropRequestLocked(si)
	subj := si.requestSubject()
	reply := "$JSC.R." + ephemeralName()
	sub, err := g.ic.Worker(reply, "", func(m *loop.WorkMsg) { g.onReply(si, m) })
	if err != nil {
		g.requestFailedLocked(si, g.setupErr(si).withErr(err), true)
		return
	}
	si.rsub, si.rreply = sub, reply
	var hdr, body []byte
	switch {
	case si.level >= 5:
		hdr = []byte("NATS/1.0\r\n" + hdrRequiredAPILevel + ": " + strconv.Itoa(si.level) +
			"\r\n" + hdrStreamIdentity + ": " + si.ident + "\r\n\r\n")
	case si.level == 4 && (si.durable == "" || !si.mirror):
		hdr = []byte("NATS/1.0\r\n" + hdrRequiredAPILevel + ": 4\r\n\r\n")
	}
	if si.durable == "" {
		body, _ = json.Marshal(si.creq)
	}
	wait := sourceRequestWait
	if si.durable != "" {
		wait = sourceDurableRequestWait
	}
	si.rdead = time.Now().Add(wait)
	if err := g.ic.Publish(subj, reply, hdr, body); err != nil {
		g.requestFailedLocked(si, g.setupErr(si).withErr(err), true)
	}
}

func (g *sourcing) setupErr(si *srcInfo) *APIError {
	if si.mirror {
		return JSMirrorConsumerSetupFailedErrF
	}
	return JSSourceConsumerSetupFailedErrF
}

// dropRequestLocked forgets si's pending request (g.mu held).
func (g *sourcing) dropRequestLocked(si *srcInfo) {
	if si.rsub != nil {
		si.rsub.Unsubscribe()
	}
	si.rsub, si.rreply, si.rdead = nil, "", time.Time{}
}

// requestFailedLocked ends si's request without a consumer: e (nil: none, as after a request
// nobody answered) is what stream info reports until the next attempt, which comes after the
// back-off when count is set (g.mu held).
func (g *sourcing) requestFailedLocked(si *srcInfo, e *APIError, count bool) {
	g.dropRequestLocked(si)
	si.setting = false
	if si.durable != "" {
		si.cname = ""
	}
	if e != nil {
		si.err = e
	}
	if count {
		si.fails++
	}
	back := sourceRetryBackOff * time.Duration(si.fails*2)
	if si.fails <= 1 {
		back = 0 // a first failure (an origin recovered after its mirror) retries soon
	}
	si.next = time.Now().Add(sourceRetryThreshold + min(back, sourceRetryMaximum))
}

// checkRequestLocked gives up si's request once its deadline has passed (g.mu held).
func (g *sourcing) checkRequestLocked(si *srcInfo, now time.Time) {
	if si.rsub != nil && !si.rdead.IsZero() && now.After(si.rdead) {
		g.requestFailedLocked(si, nil, true)
	}
}

// onReply takes the answer to si's request (on the sourcing client's worker).
func (g *sourcing) onReply(si *srcInfo, m *loop.WorkMsg) {
	s := g.s
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || si.rsub == nil || m.Subject != si.rreply {
		return
	}
	var r apiRequestReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		s.a.js.warnf("JetStream bad %s consumer create response: %q", si.kindName(), m.Data)
		if si.mirror {
			si.err = JSInvalidJSONErr
		}
		return // as nats-server: the request times out
	}
	ident := ""
	if v, ok := header(m.Hdr, hdrStreamIdentity); ok {
		ident = string(v)
	}
	if r.Error != nil || r.Config == nil {
		e := r.Error
		switch {
		case e != nil && !si.mirror && e.ErrCode == JSConsumerStreamIdentityMismatchF.ErrCode:
			// The origin was made again: start over from its beginning.
			si.sseq, si.dseq, si.ident, si.rc = 0, 0, "", true
			g.requestFailedLocked(si, nil, false)
			return
		case e != nil && si.creq.Config.Sourcing &&
			(e.ErrCode == JSRequiredApiLevelErr.ErrCode || e.ErrCode == JSInvalidJSONErr.ErrCode):
			// An older server: without the stream identity, then without sourcing (and
			// with a name of its own, which the older server does not add).
			if si.level > 4 {
				si.level--
			} else {
				si.level = 0
				si.creq.Config.Sourcing = false
				si.creq.Config.Name += "_" + ephemeralName()
			}
			g.sendRequestLocked(si)
			return
		}
		if e == nil {
			e = g.setupErr(si).with("err", "invalid consumer create response")
		}
		if si.mirror {
			s.a.js.warnf("JetStream error response for create mirror consumer: %+v", e)
		} else {
			s.a.js.warnf("JetStream error response for stream %s create source consumer %s: %+v", s.name, si.cfg.Name, e)
		}
		g.requestFailedLocked(si, e, true)
		return
	}
	if si.durable != "" && r.Config.AckPolicy != string(AckFlowControl) {
		e := JSSourceConsumerRequiresAckFCErr
		if si.mirror {
			e = JSMirrorConsumerRequiresAckFCErr
		}
		g.requestFailedLocked(si, e, true)
		return
	}
	g.dropRequestLocked(si)
	dsubj := r.Config.DeliverSubject
	if si.durable != "" {
		dsubj = si.durable
	}
	sub, err := g.ic.Worker(dsubj, "", func(m *loop.WorkMsg) { g.onMsg(si, m) })
	if err != nil {
		g.requestFailedLocked(si, g.setupErr(si).withErr(err), true)
		return
	}
	if si.mirror {
		st := s.store.FastState()
		si.sseq = max(r.Delivered.Stream, st.LastSeq)
	} else {
		if si.rc || (ident != "" && si.ident != "" && si.ident != ident) {
			s.a.js.warnf("JetStream source stream %q for stream '%s > %s' was recreated, resetting source state",
				si.cfg.Name, s.a.name, s.name)
			si.sseq = 0
		}
		si.ident, si.rc = ident, false
		si.sseq = max(si.sseq, r.Delivered.Stream)
	}
	si.cname, si.sub, si.dseq = r.Name, sub, 0
	si.fcid, si.fcsc = "", 0
	si.err, si.fails, si.setting = nil, 0, false
	si.last.Store(time.Now().UnixNano())
}

func (si *srcInfo) kindName() string {
	if si.mirror {
		return "mirror"
	}
	return "source"
}
