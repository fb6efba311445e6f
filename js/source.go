package js

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/filestore"
	"github.com/natsd/natsd/loop"
	"github.com/natsd/natsd/transform"
)

// Mirrors and sources (same account). A stream with a mirror or sources keeps, per origin,
// an ephemeral push consumer on the origin stream, made through the same consumer code as
// the API's (hidden as nats-server's direct consumers are: ack none, flow control, idle
// heartbeats), delivering to an internal inbox ($JS.M.<id> / $JS.S.<id>) that the sourcing
// stream's internal client takes on its worker, one message at a time, in order. A mirror
// stores each message at its origin sequence (StoreAtAsync: gaps kept, no wait per commit);
// a source stores it as a message of its own with the Nats-Stream-Source header nats-server
// writes. A timer per sourcing stream (not per message) recreates an origin consumer whose
// heartbeats stopped and retries a failed setup with nats-server's back-off. Origins in other
// accounts or domains (external) and durable sourcing consumers are reached through the
// JetStream API instead (source_remote.go); their deliveries take the same onMsg path.

const (
	sourceHealthHB        = time.Second      // the origin consumer's idle heartbeat
	sourceHealthCheck     = 10 * time.Second // silent for this long: recreate
	sourceRetryThreshold  = 2 * time.Second  // no two setups of one origin closer than this
	sourceRetryBackOff    = 5 * time.Second
	sourceRetryMaximum    = 2 * time.Minute
	mirrorDirectThreshold = 10 // a mirror this close to its origin answers its direct gets
)

// sourcing is a stream's mirror or sources.
type sourcing struct {
	s  *stream
	ic *loop.InternalClient // the deliveries' worker

	mu     sync.Mutex
	list   []*srcInfo
	timer  *time.Timer
	closed bool
	dsubs  []*loop.Subscription // mirror_direct
}

// srcInfo is one origin.
type srcInfo struct {
	g      *sourcing
	mirror bool
	remote bool // through the API (viaAPI)
	cfg    StreamSource
	iname  string // nats-server's index name: "<stream> <filter> <dest>"
	sfs    []string
	trs    []*transform.Transform

	// g.mu
	cname   string // the current origin consumer ("" none)
	origin  *stream
	cons    *consumer
	sub     *loop.Subscription
	sseq    uint64 // last origin sequence taken
	dseq    uint64 // last delivery sequence taken
	lag     uint64
	err     *APIError
	fails   int
	lreq    time.Time // last setup attempt
	next    time.Time // next setup attempt (zero: none due)
	setting bool
	ident   string
	known   bool // sseq recovered (sources)
	last    atomic.Int64

	// Origins reached through the API (source_remote.go), g.mu.
	creq    *CreateConsumerRequest // the consumer asked for
	durable string                 // the durable consumer's deliver subject ("" none)
	level   int                    // the API level the request requires (0: none)
	rsub    *loop.Subscription     // the pending request's reply inbox
	rreply  string
	rdead   time.Time // when the pending request is given up
	rc      bool      // the origin was made again: ask without an identity
	fcid    string    // the flow control a heartbeat says is stalled
	fcsc    int       // heartbeats that said so
}

// composeIName is nats-server's index name of a source: stream (with a hash of its external
// API prefix and of its durable consumer's name), filters, destinations.
func composeIName(ss *StreamSource) string {
	name := ss.Name
	if ss.External != nil {
		name += ":" + getHash(ss.External.APIPrefix)
	}
	if ss.Consumer != nil {
		name += ":C=" + getHash(ss.Consumer.Name)
	}
	src, dst := ss.FilterSubject, ">"
	if len(ss.SubjectTransforms) == 0 {
		if src == "" {
			src = ">"
		}
	} else {
		var srcs, dsts []string
		for _, tr := range ss.SubjectTransforms {
			s, d := tr.Source, tr.Destination
			if s == "" {
				s = ">"
			}
			if d == "" {
				d = ">"
			}
			srcs, dsts = append(srcs, s), append(dsts, d)
		}
		src, dst = strings.Join(srcs, "\f"), strings.Join(dsts, "\f")
	}
	return name + " " + src + " " + dst
}

// composeCName is nats-server's name of a source's durable consumer: stream (with a hash of
// its external API prefix) and consumer.
func composeCName(ss *StreamSource) string {
	name := ss.Name
	if ss.External != nil {
		name += ":" + getHash(ss.External.APIPrefix)
	}
	c := ""
	if ss.Consumer != nil {
		c = ss.Consumer.Name
	}
	return name + " " + c
}

// streamIdentity is nats-server's identity of a stream: a hash of its creation time, which
// tells a source that its origin was deleted and made again.
func streamIdentity(created time.Time) string {
	return getHash(created.UTC().Format(time.RFC3339Nano))
}

// checkSourcing applies nats-server's checks of a mirror and of sources that need no other
// stream, in its order.
func checkSourcing(cfg *StreamConfig) *APIError {
	var delivers, apis []string
	external := func(ext *ExternalStream) {
		if ext.DeliverPrefix != "" {
			delivers = append(delivers, ext.DeliverPrefix)
		}
		if ext.APIPrefix != "" {
			apis = append(apis, ext.APIPrefix)
		}
	}
	// A durable sourcing consumer: named, a literal deliver subject, no start or filter of
	// the source's own.
	durableOK := func(ss *StreamSource) bool {
		c := ss.Consumer
		return validAssetName(c.Name) && validSubject(c.DeliverSubject) && validPublishSubject(c.DeliverSubject) &&
			ss.OptStartSeq == 0 && ss.OptStartTime == nil && ss.FilterSubject == ""
	}
	if m := cfg.Mirror; m != nil {
		switch {
		case cfg.FirstSeq > 0:
			return JSMirrorWithFirstSeqErr
		case len(cfg.Subjects) > 0:
			return JSMirrorWithSubjectsErr
		case len(cfg.Sources) > 0:
			return JSMirrorWithSourcesErr
		case cfg.AllowMsgCounter:
			return JSMirrorWithCountersErr
		case cfg.AllowAtomicPublish:
			return JSMirrorWithAtomicPublishErr
		case cfg.AllowBatchPublish:
			return JSMirrorWithBatchPublishErr
		case cfg.AllowMsgSchedules:
			return JSMirrorWithMsgSchedulesErr
		case m.Consumer != nil && !durableOK(m):
			return JSMirrorDurableConsumerCfgInvalid
		case m.FilterSubject != "" && len(m.SubjectTransforms) != 0:
			return JSMirrorMultipleFiltersNotAllowed
		case cfg.SubjectDeleteMarkerTTL > 0:
			return invalidConfig("subject delete markers forbidden on mirrors")
		}
		for i, tr := range m.SubjectTransforms {
			if tr.Source != "" && !validSubject(tr.Source) {
				return JSMirrorInvalidSubjectFilter.with("err", "invalid subject "+tr.Source)
			}
			if err := transform.Validate(tr.Source, tr.Destination); err != nil {
				return JSMirrorInvalidTransformDestination.withErr(err)
			}
			for k, o := range m.SubjectTransforms {
				if k != i && subjectsCollide(tr.Source, o.Source) {
					return JSMirrorOverlappingSubjectFilters
				}
			}
		}
		// An external origin's name is not checked (it is another JetStream's).
		if m.External == nil {
			if !validAssetName(m.Name) {
				return JSMirrorInvalidStreamName
			}
		} else {
			external(m.External)
		}
	}
	if len(cfg.Sources) > 0 && cfg.AllowMsgSchedules {
		return JSSourceWithMsgSchedulesErr
	}
	seen := map[string]bool{}
	cseen := map[string]bool{}
	for _, src := range cfg.Sources {
		if src == nil || !validAssetName(src.Name) {
			return JSSourceInvalidStreamName
		}
		in := composeIName(src)
		if seen[in] {
			return JSSourceDuplicateDetected
		}
		seen[in] = true
		if src.FilterSubject != "" && len(src.SubjectTransforms) != 0 {
			return JSSourceMultipleFiltersNotAllowed
		}
		for _, tr := range src.SubjectTransforms {
			if tr.Source != "" && !validSubject(tr.Source) {
				return JSSourceInvalidSubjectFilter.with("err", "invalid subject "+tr.Source)
			}
			if err := transform.Validate(tr.Source, tr.Destination); err != nil {
				return JSSourceInvalidTransformDestination.withErr(err)
			}
		}
		for i, tr := range src.SubjectTransforms {
			for k, o := range src.SubjectTransforms {
				if i != k && subsetMatch(tr.Source, o.Source) {
					return JSSourceOverlappingSubjectFilters
				}
			}
		}
		if src.Consumer != nil {
			if !durableOK(src) {
				return JSSourceDurableConsumerCfgInvalid
			}
			// One durable consumer serves one source.
			cn := composeCName(src)
			if cseen[cn] {
				return JSSourceDurableConsumerDuplicateDetected
			}
			cseen[cn] = true
		}
		if src.External != nil {
			external(src.External)
		}
	}
	// The external prefixes: literal subjects, and an API prefix other than this JetStream's
	// own (the deliver prefixes' overlap with the origins' subjects is checked with the
	// streams, by checkSourcingLocked).
	for _, p := range delivers {
		if !validSubject(p) || !validPublishSubject(p) {
			return JSStreamInvalidExternalDeliverySubjErrF.with("prefix", p)
		}
	}
	for _, p := range apis {
		if !validSubject(p) || !validPublishSubject(p) {
			return invalidConfig("stream external api prefix %q must be a valid subject without wildcards", p)
		}
		if auth.SubjectsCollide(p, "$JS.API") {
			return JSStreamExternalApiOverlapErrF.with("prefix", p, "subject", "$JS.API")
		}
	}
	return nil
}

func subjectsCollide(a, b string) bool {
	if a == "" {
		a = ">"
	}
	if b == "" {
		b = ">"
	}
	return auth.SubjectsCollide(a, b)
}

// checkSourcingLocked applies the checks that look at the origin streams (a.mu held): message
// sizes, the mirror's direct gets (inherited from its origin) and cycles.
func (a *account) checkSourcingLocked(cfg *StreamConfig, pedantic bool) *APIError {
	get := func(name string) *StreamConfig {
		if s := a.streams[name]; s != nil {
			return s.config()
		}
		return nil
	}
	// The origins in this account (not external): their subjects, which an external origin's
	// deliver prefix must not overlap.
	var subs []string
	if m := cfg.Mirror; m != nil && m.External == nil {
		if o := get(m.Name); o != nil {
			subs = append(subs, o.Subjects...)
			if cfg.MaxMsgSize > 0 && o.MaxMsgSize > 0 && cfg.MaxMsgSize < o.MaxMsgSize {
				return JSMirrorMaxMessageSizeTooBigErr
			}
			if pedantic && cfg.MirrorDirect != o.AllowDirect {
				return JSPedanticErrF.with("err", "origin stream has direct get set, mirror has it disabled")
			}
			cfg.MirrorDirect = o.AllowDirect
		}
	}
	for _, src := range cfg.Sources {
		if src.External != nil {
			continue
		}
		o := get(src.Name)
		if o == nil {
			continue
		}
		subs = append(subs, o.Subjects...)
		if cfg.MaxMsgSize > 0 && o.MaxMsgSize > 0 && cfg.MaxMsgSize < o.MaxMsgSize {
			return JSSourceMaxMessageSizeTooBigErr
		}
	}
	check := func(ext *ExternalStream) *APIError {
		if ext == nil || ext.DeliverPrefix == "" {
			return nil
		}
		for _, sub := range subs {
			if subjectsCollide(sub, ext.DeliverPrefix+"."+sub) {
				return JSStreamExternalDelPrefixOverlapsErrF.with("prefix", ext.DeliverPrefix, "subject", sub)
			}
		}
		return nil
	}
	if m := cfg.Mirror; m != nil {
		if e := check(m.External); e != nil {
			return e
		}
	}
	for _, src := range cfg.Sources {
		if e := check(src.External); e != nil {
			return e
		}
	}
	// nats-server's cycle check: a walk over the streams this one sources or mirrors.
	toVisit := []*StreamConfig{cfg}
	visited := map[string]bool{}
	overlaps := func(subjects []string, filter string) bool {
		if filter == "" {
			return true
		}
		for _, s := range subjects {
			if subjectsCollide(s, filter) {
				return true
			}
		}
		return false
	}
	for len(toVisit) > 0 {
		c := toVisit[0]
		toVisit = toVisit[1:]
		visited[c.Name] = true
		for _, src := range c.Sources {
			if src.External != nil {
				continue
			}
			if visited[src.Name] {
				if overlaps(c.Subjects, src.FilterSubject) {
					return invalidConfig("detected cycle")
				}
			} else if o := get(src.Name); o != nil {
				toVisit = append(toVisit, o)
			}
		}
		if m := c.Mirror; m != nil && m.External == nil {
			if visited[m.Name] {
				return invalidConfig("detected cycle")
			}
			if o := get(m.Name); o != nil {
				toVisit = append(toVisit, o)
			}
		}
	}
	return nil
}

// startSourcing begins a stream's mirroring or sourcing, when it has any; the origin
// consumers are made off the caller's goroutine (which may hold the account's lock).
func (s *stream) startSourcing() {
	cfg := s.config()
	if cfg.Mirror == nil && len(cfg.Sources) == 0 {
		return
	}
	g := &sourcing{s: s}
	g.ic = s.a.js.eng.NewInternalClient(loop.KindJetStream, s.a.acc, "JetStream stream "+s.name+" sourcing")
	add := func(ss *StreamSource, mirror bool) {
		si := &srcInfo{g: g, mirror: mirror, cfg: *ss, iname: composeIName(ss), remote: viaAPI(ss)}
		for _, tr := range ss.SubjectTransforms {
			t, _ := transform.New(tr.Source, tr.Destination)
			src := tr.Source
			if src == "" {
				src = ">"
			}
			si.sfs, si.trs = append(si.sfs, src), append(si.trs, t)
		}
		if old := s.src.Load(); old != nil {
			// An update keeps what the sources it still has had reached.
			old.mu.Lock()
			for _, o := range old.list {
				if o.iname == si.iname && o.mirror == mirror {
					si.sseq, si.ident, si.known = o.sseq, o.ident, o.known
				}
			}
			old.mu.Unlock()
		}
		g.list = append(g.list, si)
	}
	if cfg.Mirror != nil {
		add(cfg.Mirror, true)
	}
	for _, ss := range cfg.Sources {
		add(ss, false)
	}
	if old := s.src.Swap(g); old != nil {
		old.stop()
	}
	g.mu.Lock()
	g.timer = time.AfterFunc(0, g.tick)
	g.mu.Unlock()
}

// stopSourcing ends it (the stream stops, or an update replaces it).
func (s *stream) stopSourcing() {
	if g := s.src.Swap(nil); g != nil {
		g.stop()
	}
}

func (g *sourcing) stop() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	if g.timer != nil {
		g.timer.Stop()
	}
	var cons []*srcInfo
	for _, si := range g.list {
		g.dropRequestLocked(si)
		if si.sub != nil {
			cons = append(cons, &srcInfo{origin: si.origin, cons: si.cons, sub: si.sub})
		}
		si.sub, si.cons, si.cname = nil, nil, ""
	}
	for _, sub := range g.dsubs {
		sub.Unsubscribe()
	}
	g.dsubs = nil
	g.mu.Unlock()
	for _, c := range cons {
		c.sub.Unsubscribe()
		if c.cons != nil && !c.origin.closed.Load() {
			_ = c.origin.deleteConsumer(c.cons, false)
		}
	}
	g.ic.Close()
}

// tick is the sourcing stream's one timer: it sets up what is due and recreates what went
// silent.
func (g *sourcing) tick() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	now := time.Now()
	var due []*srcInfo
	for _, si := range g.list {
		switch {
		case si.setting:
			g.checkRequestLocked(si, now)
		case si.sub == nil:
			if si.next.IsZero() || !now.Before(si.next) {
				due = append(due, si)
			}
		case now.Sub(time.Unix(0, si.last.Load())) > sourceHealthCheck:
			g.cancelLocked(si)
			due = append(due, si)
		}
	}
	for _, si := range due {
		si.setting = true
	}
	g.timer.Reset(time.Second)
	g.mu.Unlock()
	for _, si := range due {
		g.setup(si)
	}
}

// cancelLocked drops si's origin consumer (g.mu held): its deliveries still queued are
// ignored from now on.
func (g *sourcing) cancelLocked(si *srcInfo) {
	if si.sub != nil {
		si.sub.Unsubscribe()
	}
	if c, o := si.cons, si.origin; c != nil && o != nil {
		go func() { _ = o.deleteConsumer(c, false) }()
	}
	si.sub, si.cons, si.cname = nil, nil, ""
}

// retryLocked recreates si's origin consumer from where it got to (g.mu held).
func (g *sourcing) retryLocked(si *srcInfo) {
	g.cancelLocked(si)
	si.next = si.lreq.Add(sourceRetryThreshold)
}

func (g *sourcing) failLocked(si *srcInfo, e *APIError) {
	si.err = e
	si.fails++
	back := sourceRetryBackOff * time.Duration(si.fails*2)
	if si.fails == 1 {
		back = 0 // a first failure (an origin recovered after its mirror) retries soon
	}
	si.next = time.Now().Add(sourceRetryThreshold + min(back, sourceRetryMaximum))
}

// setup makes si's origin consumer (si.setting is set by the caller).
func (g *sourcing) setup(si *srcInfo) {
	if si.remote {
		g.setupRemote(si)
		return
	}
	s := g.s
	defer func() {
		g.mu.Lock()
		si.setting = false
		g.mu.Unlock()
	}()
	g.mu.Lock()
	si.lreq = time.Now()
	si.next = time.Time{}
	g.mu.Unlock()
	origin := s.a.lookup(si.cfg.Name)
	if origin == nil || origin.closed.Load() {
		g.mu.Lock()
		g.failLocked(si, JSStreamNotFoundErr)
		g.mu.Unlock()
		return
	}
	cc := ConsumerConfig{AckPolicy: AckNone, AckWait: 22 * time.Hour, MaxDeliver: 1, Heartbeat: sourceHealthHB,
		FlowControl: true, Direct: true, InactiveThreshold: sourceHealthCheck, MemoryStorage: true,
		ReplayPolicy: ReplayInstant}
	var prefix string
	var id string
	if si.mirror {
		prefix, id = "$JS.M.", "JS_MIRROR_"
		cc.Metadata = map[string]string{"_nats.mirror.stream": s.name, "_nats.mirror.acc": s.a.name}
	} else {
		prefix, id = "$JS.S.", "JS_SRC_"
		cc.Metadata = map[string]string{"_nats.src.stream": s.name, "_nats.src.acc": s.a.name}
	}
	if si.cfg.FilterSubject != "" {
		cc.FilterSubject = si.cfg.FilterSubject
	} else if len(si.sfs) == 1 {
		cc.FilterSubject = si.sfs[0]
	} else if len(si.sfs) > 1 {
		cc.FilterSubjects = si.sfs
	}
	ost := origin.store.FastState()
	s.settle()
	st := s.store.FastState()
	g.mu.Lock()
	var start uint64
	if si.mirror {
		if st.LastSeq == 0 && st.Msgs == 0 {
			switch {
			case si.cfg.OptStartSeq > 0:
				start = si.cfg.OptStartSeq
			case si.cfg.OptStartTime != nil:
				cc.DeliverPolicy, cc.OptStartTime = DeliverByStartTime, si.cfg.OptStartTime
			}
		} else {
			start = st.LastSeq + 1
		}
		if cc.DeliverPolicy == "" {
			if start == 0 {
				start = max(ost.FirstSeq, 1)
			}
			cc.DeliverPolicy, cc.OptStartSeq = DeliverByStartSeq, start
		}
	} else {
		if !si.known {
			g.mu.Unlock()
			g.recoverSourceSeqs()
			g.mu.Lock()
		}
		ident := streamIdentity(origin.created)
		if si.ident != "" && si.ident != ident {
			s.a.js.warnf("JetStream source stream %q for stream '%s > %s' was recreated, resetting source state",
				si.cfg.Name, s.a.name, s.name)
			si.sseq = 0
		}
		si.ident = ident
		switch {
		case si.sseq > 0:
			start = si.sseq + 1
			cc.DeliverPolicy, cc.OptStartSeq = DeliverByStartSeq, start
		case si.cfg.OptStartSeq > 0:
			start = si.cfg.OptStartSeq
			cc.DeliverPolicy, cc.OptStartSeq = DeliverByStartSeq, start
		case si.cfg.OptStartTime != nil:
			cc.DeliverPolicy, cc.OptStartTime = DeliverByStartTime, si.cfg.OptStartTime
		default:
			cc.DeliverPolicy = DeliverAll
		}
	}
	if g.closed {
		g.mu.Unlock()
		return
	}
	name := id + ephemeralName()
	cc.Name = name
	cc.DeliverSubject = prefix + ephemeralName() + ephemeralName()
	sub, err := g.ic.Worker(cc.DeliverSubject, "", func(m *loop.WorkMsg) { g.onMsg(si, m) })
	if err != nil {
		g.failLocked(si, JSMirrorConsumerSetupFailedErrF.withErr(err))
		g.mu.Unlock()
		return
	}
	si.cname, si.sub, si.dseq = name, sub, 0
	if si.mirror && start > 0 {
		si.sseq = start - 1
	}
	si.last.Store(time.Now().UnixNano())
	// The consumer is made with g.mu held, so that its first deliveries (on the worker)
	// find it in place.
	c, e := s.a.addConsumer(origin, name, &CreateConsumerRequest{Stream: origin.name, Config: &cc})
	if e != nil {
		sub.Unsubscribe()
		si.cname, si.sub = "", nil
		g.failLocked(si, e)
		g.mu.Unlock()
		s.a.js.warnf("JetStream error response for stream %s create %s consumer %s: %v", s.name,
			map[bool]string{true: "mirror", false: "source"}[si.mirror], si.cfg.Name, e)
		return
	}
	si.cons, si.origin = c, origin
	si.err, si.fails = nil, 0
	g.mu.Unlock()
}

// recoverSourceSeqs finds, for each source, the origin sequence of the last message it
// stored, from the stream's Nats-Stream-Source headers (newest first), as nats-server does
// on start-up.
func (g *sourcing) recoverSourceSeqs() {
	s := g.s
	g.mu.Lock()
	want := map[string]*srcInfo{}
	for _, si := range g.list {
		if !si.mirror && !si.known {
			want[si.iname] = si
		}
	}
	g.mu.Unlock()
	st := s.store.FastState()
	found := map[string][2]string{}
	for seq := st.LastSeq; seq >= st.FirstSeq && seq > 0 && len(found) < len(want); seq-- {
		sm, err := s.store.LoadMsg(seq)
		if err != nil {
			continue
		}
		v := headerString(sm.Header, hdrStreamSource)
		if v == "" {
			continue
		}
		f := strings.Split(v, " ")
		if len(f) < 4 {
			continue
		}
		in := f[0] + " " + f[2] + " " + f[3]
		if _, ok := want[in]; !ok {
			continue
		}
		if _, ok := found[in]; ok {
			continue
		}
		ident := ""
		if len(f) >= 6 {
			ident = f[5]
		}
		found[in] = [2]string{f[1], ident}
	}
	g.mu.Lock()
	for in, si := range want {
		if v, ok := found[in]; ok {
			si.sseq, _ = strconv.ParseUint(v[0], 10, 64)
			si.ident = v[1]
		}
		si.known = true
	}
	g.mu.Unlock()
}

// parseAckReply reads a delivery's ack reply: $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>
// (or the form with domain and account hash).
func parseAckReply(r string) (cname string, dc, sseq, dseq uint64, ts int64, pending uint64, ok bool) {
	t := strings.Split(r, ".")
	if len(t) < 9 || t[0] != "$JS" || t[1] != "ACK" {
		return
	}
	off := 3
	if len(t) >= 12 {
		off = 5
	}
	if len(t) != 9 && len(t) < 12 {
		return
	}
	cname = t[off]
	n := func(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }
	dc, sseq, dseq, ts, pending = n(t[off+1]), n(t[off+2]), n(t[off+3]), int64(n(t[off+4])), n(t[off+5])
	return cname, dc, sseq, dseq, ts, pending, true
}

// onMsg takes one delivery from an origin consumer (on the sourcing client's worker).
func (g *sourcing) onMsg(si *srcInfo, m *loop.WorkMsg) {
	s := g.s
	if len(m.Data) == 0 && bytes.HasPrefix(m.Hdr, []byte("NATS/1.0 100")) {
		g.onControl(si, m)
		return
	}
	cname, dc, sseq, dseq, ts, pending, ok := parseAckReply(m.Reply)
	g.mu.Lock()
	if !ok || g.closed || cname == "" || cname != si.cname || dc > 1 {
		g.mu.Unlock()
		return
	}
	si.last.Store(time.Now().UnixNano())
	switch {
	case sseq <= si.sseq:
		if dseq == si.dseq+1 {
			si.dseq++
		}
		g.mu.Unlock()
		return
	case dseq == si.dseq+1:
		// The next delivery: for a mirror, a jump in sseq is a gap the origin has
		// (deleted or expired messages), kept by StoreAt.
	case si.mirror && sseq == si.sseq+1:
	default:
		g.retryLocked(si)
		g.mu.Unlock()
		return
	}
	osseq := si.sseq
	si.dseq, si.sseq = dseq, sseq
	si.lag = 0
	if pending > 0 {
		si.lag = pending - 1
	}
	if si.mirror && s.config().MirrorDirect && len(g.dsubs) == 0 && pending < mirrorDirectThreshold {
		g.subscribeMirrorDirectLocked(si.cfg.Name)
	}
	iname, ident := si.iname, si.ident
	g.mu.Unlock()

	hdr := m.Hdr
	if len(hdr) > 0 {
		if !si.mirror {
			hdr = removeHeader(hdr, func(k string) bool { return k == hdrStreamSource })
		}
		hdr = removeHeader(hdr, func(k string) bool {
			return strings.HasPrefix(k, "Nats-Expected-") || strings.HasPrefix(k, "Nats-Batch-")
		})
	}
	subject := m.Subject
	for _, tr := range si.trs {
		if tr == nil {
			continue
		}
		if t, err := tr.Match(subject); err == nil {
			subject = t
			break
		}
	}
	if si.mirror {
		s.storeMirrored(sseq, ts, subject, hdr, m.Data)
		return
	}
	// <stream> <seq> <filter> <transform dest> <original subject> [<identity>]
	f := strings.SplitN(iname, " ", 3)
	v := f[0] + " " + strconv.FormatUint(sseq, 10) + " " + f[1] + " " + f[2] + " " + m.Subject
	if ident != "" {
		v += " " + ident
	}
	hdr = appendHeader(hdr, hdrStreamSource, v)
	s.storeSourced(subject, hdr, m.Data, func(err error) {
		g.mu.Lock()
		if si.sseq >= sseq {
			si.sseq, si.dseq = osseq, 0
		}
		g.retryLocked(si)
		g.mu.Unlock()
	})
}

// onControl answers an origin consumer's flow control and checks its heartbeats.
func (g *sourcing) onControl(si *srcInfo, m *loop.WorkMsg) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || si.sub == nil {
		return
	}
	si.last.Store(time.Now().UnixNano())
	if m.Reply != "" {
		// The reply says how far the stream got, which is how a flow_control ack policy
		// (durable sourcing) consumer takes its acks.
		h := "NATS/1.0\r\nNats-Last-Consumer: " + strconv.FormatUint(si.dseq, 10) +
			"\r\nNats-Last-Stream: " + strconv.FormatUint(si.sseq, 10) + "\r\n\r\n"
		_ = g.ic.Publish(m.Reply, "", []byte(h), nil)
		return
	}
	if v, ok := headerUint(m.Hdr, "Nats-Last-Consumer"); ok && v > 0 && v != si.dseq {
		g.retryLocked(si)
		return
	}
	if fc := headerString(m.Hdr, "Nats-Consumer-Stalled"); fc != "" {
		// The consumer did not get our reply: sent again; a reply that keeps not reaching
		// it (an origin in another account without its $JS.FC.> export) is reported.
		if fc != si.fcid {
			si.fcid, si.fcsc = fc, 0
		}
		si.fcsc++
		if si.fcsc == sourceFCStalledThreshold {
			si.err = JSSourceConsumerFlowControlStalledErr
			g.s.a.js.warnf("JetStream stream '%s > %s' %s '%s' is stalled on flow control, replies are not reaching the consumer",
				g.s.a.name, g.s.name, si.kindName(), si.cfg.Name)
		}
		_ = g.ic.Publish(fc, "", nil, nil)
		return
	}
	if si.fcid != "" {
		si.fcid, si.fcsc = "", 0
		if si.err == JSSourceConsumerFlowControlStalledErr {
			si.err = nil
		}
	}
}

// subscribeMirrorDirectLocked has a caught-up mirror answer direct gets for its origin, as
// nats-server's mirror_direct (g.mu held).
func (g *sourcing) subscribeMirrorDirectLocked(origin string) {
	s := g.s
	if s.a.direct == nil {
		return
	}
	from, to := "$JS.API.DIRECT.GET."+origin, "$JS.API.DIRECT.GET."+s.name
	subjs := []string{from, from + ".>"}
	if d := s.a.js.cfg.Domain; d != "" {
		subjs = append(subjs, "$JS."+d+".API.DIRECT.GET."+origin, "$JS."+d+".API.DIRECT.GET."+origin+".>")
	}
	for _, subj := range subjs {
		sub, err := s.a.direct.Worker(subj, "_sys_", func(m *loop.WorkMsg) {
			if d := s.a.js.cfg.Domain; d != "" && strings.HasPrefix(m.Subject, "$JS."+d+".") {
				m.Subject = strings.Replace(m.Subject, "$JS."+d+".API.DIRECT.GET."+origin, "$JS."+d+".API.DIRECT.GET."+s.name, 1)
			} else {
				m.Subject = to + strings.TrimPrefix(m.Subject, from)
			}
			s.directGet(m)
		})
		if err == nil {
			g.dsubs = append(g.dsubs, sub)
		}
	}
}

// removeHeader drops the header lines whose key drop selects.
func removeHeader(hdr []byte, drop func(key string) bool) []byte {
	i := bytes.Index(hdr, []byte("\r\n"))
	if i < 0 {
		return hdr
	}
	out := append([]byte(nil), hdr[:i+2]...)
	n := 0
	for rest := hdr[i+2:]; len(rest) > 0; {
		j := bytes.Index(rest, []byte("\r\n"))
		line := rest
		if j >= 0 {
			line, rest = rest[:j], rest[j+2:]
		} else {
			rest = nil
		}
		if len(line) == 0 {
			continue
		}
		if k := bytes.IndexByte(line, ':'); k > 0 && drop(string(line[:k])) {
			continue
		}
		out = append(append(out, line...), "\r\n"...)
		n++
	}
	if n == 0 && bytes.Equal(out, []byte("NATS/1.0\r\n")) {
		return nil
	}
	return append(out, "\r\n"...)
}

// storeMirrored stores a mirrored message at its origin sequence and stamp.
func (s *stream) storeMirrored(seq uint64, ts int64, subject string, hdr, msg []byte) {
	s.imu.Lock()
	s.inflight++
	s.imu.Unlock()
	s.store.StoreAtAsync(seq, ts, subject, hdr, msg, func(seq uint64, ts int64, err error) {
		s.imu.Lock()
		s.inflight--
		if err == nil && seq > s.lseq {
			s.lseq = seq
		}
		if s.inflight == 0 {
			s.settled.Broadcast()
		}
		s.imu.Unlock()
		if err != nil && err != filestore.ErrSeqOrder {
			s.a.js.warnf("Error processing inbound mirror message for '%s' > '%s': %v", s.a.name, s.name, err)
		}
	})
}

// storeSourced stores a sourced message as one of the stream's own; failed is told when the
// store refuses it (the source then resumes from that message).
func (s *stream) storeSourced(subject string, hdr, msg []byte, failed func(error)) {
	msgID := headerString(hdr, hdrMsgID)
	if msgID != "" && s.duplicate(msgID, s.config().Duplicates) > 0 {
		return
	}
	s.imu.Lock()
	s.inflight++
	if msgID != "" {
		s.ddPending[msgID]++
	}
	prev := s.lseq
	s.imu.Unlock()
	var rh, rm []byte
	if s.rp.Load() != nil {
		rh, rm = append([]byte(nil), hdr...), append([]byte(nil), msg...)
	}
	s.store.StoreAsync(subject, hdr, msg, func(seq uint64, ts int64, err error) {
		s.imu.Lock()
		s.inflight--
		if msgID != "" {
			if s.ddPending[msgID]--; s.ddPending[msgID] <= 0 {
				delete(s.ddPending, msgID)
			}
		}
		if err == nil {
			s.lseq = seq
			s.lmsgID = msgID
			if msgID != "" {
				s.addDedupe(msgID, seq, ts)
			}
		}
		if s.inflight == 0 {
			s.settled.Broadcast()
		}
		s.imu.Unlock()
		if err != nil {
			if err != filestore.ErrMaxMsgs && err != filestore.ErrMaxBytes && err != filestore.ErrMaxMsgsPerSubj {
				s.a.js.warnf("Error processing inbound source for '%s' > '%s': %v", s.a.name, s.name, err)
			}
			go failed(err)
			return
		}
		if rp := s.rp.Load(); rp != nil {
			s.republish(rp, subject, rh, rm, seq, prev, ts)
		}
	})
}

// sourceInfos reports the mirror and the sources as stream info shows them.
func (s *stream) sourceInfos() (*StreamSourceInfo, []*StreamSourceInfo) {
	g := s.src.Load()
	if g == nil {
		return nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var mirror *StreamSourceInfo
	var srcs []*StreamSourceInfo
	for _, si := range g.list {
		ssi := &StreamSourceInfo{Name: si.cfg.Name, Lag: si.lag, Error: si.err, FilterSubject: si.cfg.FilterSubject}
		if ext := si.cfg.External; ext != nil {
			ssi.External = &ExternalStream{APIPrefix: ext.APIPrefix, DeliverPrefix: ext.DeliverPrefix}
		}
		for i, src := range si.sfs {
			ssi.SubjectTransforms = append(ssi.SubjectTransforms, SubjectTransformConfig{Source: src,
				Destination: si.cfg.SubjectTransforms[i].Destination})
		}
		if last := si.last.Load(); last == 0 {
			ssi.Active = -1
		} else {
			ssi.Active = time.Since(time.Unix(0, last))
		}
		if si.mirror {
			mirror = ssi
		} else {
			ssi.Seq = si.sseq
			srcs = append(srcs, ssi)
		}
	}
	return mirror, srcs
}
