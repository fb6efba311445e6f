package js

import (
	"crypto/rand"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/natsd/natsd/filestore"
)

// The consumer half of the $JS.API.

type consumerCreateResponse = consumerInfoResponse

func (a *account) apiConsumerCreate(r *apiReq, typ string) {
	var req CreateConsumerRequest
	if e := decode(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	tok := strings.Split(r.subject, ".")
	streamName, name, e := createTarget(tok, &req)
	if e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	if req.Config.Replicas > 1 {
		a.respondErr(r.reply, typ, JSStreamReplicasNotSupportedErr)
		return
	}
	s := a.lookup(streamName)
	if s == nil {
		a.respondErr(r.reply, typ, JSStreamNotFoundErr)
		return
	}
	cfg := req.Config
	// A mirror's or source's consumer (nats-server 2.14+, sourcing): its stable name becomes a
	// durable with flow_control acks on an interest or work queue stream (so that what it has
	// not taken is kept), else gets a random suffix.
	if cfg.Direct && cfg.Sourcing && name != "" {
		if s.config().Retention != LimitsPolicy {
			cfg.Direct, cfg.Durable, cfg.AckPolicy = false, name, AckFlowControl
			cfg.AckWait, cfg.MaxDeliver, cfg.InactiveThreshold = 0, 0, 0
		} else {
			name = name + "-" + ephemeralName()
			cfg.Name = name
		}
	}
	var ident string
	if cfg.Direct || cfg.Sourcing {
		ident = streamIdentity(s.created)
		if v, ok := header(r.hdr, hdrStreamIdentity); ok && len(v) > 0 && string(v) != ident {
			a.respondErr(r.reply, typ, JSConsumerStreamIdentityMismatchF.with("msg", ident))
			return
		}
	}
	var existing *consumer
	if name != "" {
		existing = s.consumer(name)
	}
	if existing != nil && cfg.Sourcing && cfg.Durable != "" {
		// A durable sourcing consumer keeps where it was made to start.
		existing.mu.Lock()
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = existing.cfg.DeliverPolicy, existing.cfg.OptStartSeq, existing.cfg.OptStartTime
		existing.mu.Unlock()
	}
	c, e := a.addConsumer(s, name, &req)
	if e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	if existing != nil && cfg.Sourcing {
		// Sourcing again from an existing consumer starts over from its ack floor.
		_, _ = c.reset(0)
	}
	resp := consumerCreateResponse{apiResponse{Type: typ}, c.info()}
	if ident != "" {
		a.respondHdr(r.reply, "NATS/1.0\r\n"+hdrStreamIdentity+": "+ident+"\r\n\r\n", resp)
		return
	}
	a.respond(r.reply, resp)
}

// addConsumer creates a consumer, returns the existing one when the configuration is the
// same, or updates it, as the request's action allows.
func (a *account) addConsumer(s *stream, name string, req *CreateConsumerRequest) (*consumer, *APIError) {
	s.cons.create.Lock() // serialises creates, updates and deletes of one stream's consumers
	defer s.cons.create.Unlock()
	if s.closed.Load() {
		// Deleted since it was looked up: a consumer made now would outlive it, its files
		// under a directory being removed.
		return nil, JSStreamNotFoundErr
	}
	s.cons.mu.RLock()
	byID := maps.Clone(s.cons.byID)
	s.cons.mu.RUnlock()
	lim := consumerLimits{stream: s.config(), account: a.limits(), maxAckPending: a.js.cfg.MaxAckPending,
		maxRequestBatch: a.js.cfg.MaxRequestBatch, defaultMaxConsumers: a.js.cfg.DefaultMaxConsumers,
		action: req.Action, deliverInterest: func(subj string) bool { return a.acc.HasInterest(subj) }}
	var others []*ConsumerConfig
	var old *consumer
	for n, o := range byID {
		o.mu.Lock()
		oc := o.cfg
		o.mu.Unlock()
		if n == name {
			old = o
			lim.existing = &oc
			continue
		}
		others = append(others, &oc)
	}
	cfg, e := prepareConsumerConfig(req, lim, others)
	if e != nil {
		return nil, e
	}
	if old != nil {
		stampInactiveThreshold(cfg, cfg.Durable == "")
		if reflect.DeepEqual(*lim.existing, *cfg) {
			return old, nil
		}
		if e := s.updateConsumerLocked(old, *cfg); e != nil {
			return nil, e
		}
		return old, nil
	}
	if m := a.limits().MaxConsumers; m > 0 && a.numConsumers() >= m {
		return nil, JSMaximumConsumersLimitErr
	}
	if name == "" {
		name = ephemeralName()
	}
	if cfg.Durable == "" {
		cfg.Name = name
	} else if cfg.Name == "" {
		cfg.Name = cfg.Durable
	}
	stampInactiveThreshold(cfg, cfg.Durable == "")
	c, err := s.openConsumer(name, *cfg, time.Now().UTC(), true)
	if err != nil {
		a.js.warnf("JetStream consumer '%s > %s > %s' could not be created: %v", a.name, s.name, name, err)
		return nil, JSConsumerCreateErrF.with("err", "error creating store for consumer")
	}
	s.indexConsumer(c)
	if err := c.start(); err != nil {
		s.unindexConsumer(c, c.filters)
		c.stop(true)
		return nil, JSConsumerCreateErrF.withErr(err)
	}
	a.advise("CONSUMER.CREATED."+s.name+"."+name, "consumer_action", map[string]any{
		"stream": s.name, "consumer": name, "action": "create"})
	return c, nil
}

// updateConsumerLocked applies an accepted update (s.cons.create held).
func (s *stream) updateConsumerLocked(c *consumer, cfg ConsumerConfig) *APIError {
	if c.dir != "" {
		if err := writeConsumerMeta(s.a.js.cfg.FS, c.dir, &cfg, c.created); err != nil {
			return JSConsumerCreateErrF.withErr(err)
		}
	}
	c.mu.Lock()
	oldFilters := c.filters
	c.cfg = cfg
	c.filters = filtersOf(&cfg)
	if c.paused && (cfg.PauseUntil == nil || !time.Now().Before(*cfg.PauseUntil)) {
		c.paused = false
		if c.pauseTmr != nil {
			c.pauseTmr.Stop()
		}
	} else if cfg.PauseUntil != nil && time.Now().Before(*cfg.PauseUntil) {
		c.pauseLocked(*cfg.PauseUntil)
	}
	c.recountLocked()
	c.mu.Unlock()
	s.unindexConsumer(c, oldFilters)
	s.indexConsumer(c)
	c.kick()
	return nil
}

func (a *account) numConsumers() int {
	n := 0
	for _, s := range a.streamList() {
		n += s.numConsumers()
	}
	return n
}

// ephemeralName is a server-made consumer name: 8 characters, as nats-server's.
func ephemeralName() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b [8]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// consumerOf returns the consumer the request's subject names at tokens i (stream), i+1.
func (a *account) consumerOf(r *apiReq, typ string, i int) (*stream, *consumer) {
	tok := strings.Split(r.subject, ".")
	if i+1 >= len(tok) {
		a.respondErr(r.reply, typ, JSConsumerNotFoundErr)
		return nil, nil
	}
	s := a.lookup(tok[i])
	if s == nil {
		a.respondErr(r.reply, typ, JSStreamNotFoundErr)
		return nil, nil
	}
	c := s.consumer(tok[i+1])
	if c == nil {
		a.respondErr(r.reply, typ, JSConsumerNotFoundErr)
		return s, nil
	}
	return s, c
}

func (a *account) apiConsumerInfo(r *apiReq, typ string) {
	if !emptyRequest(r.body) {
		a.respondErr(r.reply, typ, JSNotEmptyRequestErr)
		return
	}
	_, c := a.consumerOf(r, typ, 2)
	if c == nil {
		return
	}
	a.respond(r.reply, consumerInfoResponse{apiResponse{Type: typ}, c.info()})
}

func (a *account) apiConsumerDelete(r *apiReq, typ string) {
	if !emptyRequest(r.body) {
		a.respondErr(r.reply, typ, JSNotEmptyRequestErr)
		return
	}
	s, c := a.consumerOf(r, typ, 2)
	if c == nil {
		return
	}
	if err := s.deleteConsumer(c, true); err != nil {
		a.respondErr(r.reply, typ, JSStreamGeneralErrorF.withErr(err))
		return
	}
	a.respond(r.reply, successResponse{apiResponse{Type: typ}, true})
}

func (a *account) apiConsumerNames(r *apiReq, typ string) {
	var req ApiPagedRequest
	if e := decodeIfObject(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	s := a.streamOf(r, typ, 2)
	if s == nil {
		return
	}
	all := s.publicConsumers()
	off := min(max(req.Offset, 0), len(all))
	end := min(off+namesLimit, len(all))
	resp := consumerNamesResponse{apiResponse: apiResponse{Type: typ},
		apiPaged: apiPaged{Total: len(all), Offset: off, Limit: namesLimit}, Consumers: []string{}}
	for _, c := range all[off:end] {
		resp.Consumers = append(resp.Consumers, c.name)
	}
	a.respond(r.reply, resp)
}

func (a *account) apiConsumerList(r *apiReq, typ string) {
	var req ApiPagedRequest
	if e := decodeIfObject(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	s := a.streamOf(r, typ, 2)
	if s == nil {
		return
	}
	all := s.publicConsumers()
	off := min(max(req.Offset, 0), len(all))
	end := min(off+listLimit, len(all))
	resp := consumerListResponse{apiResponse: apiResponse{Type: typ},
		apiPaged: apiPaged{Total: len(all), Offset: off, Limit: listLimit}, Consumers: []any{}}
	for _, c := range all[off:end] {
		resp.Consumers = append(resp.Consumers, c.infoWith(false))
	}
	a.respond(r.reply, resp)
}

func (a *account) apiConsumerPause(r *apiReq, typ string) {
	var req JSApiConsumerPauseRequest
	if e := decodeIfObject(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	s, c := a.consumerOf(r, typ, 2)
	if c == nil {
		return
	}
	s.cons.create.Lock()
	if s.closed.Load() || s.consumer(c.name) != c {
		// Deleted (after inactivity, or with its stream) since it was looked up: its
		// meta.inf must not be written into the directory being removed.
		s.cons.create.Unlock()
		a.respondErr(r.reply, typ, JSConsumerNotFoundErr)
		return
	}
	c.mu.Lock()
	cfg := c.cfg
	c.mu.Unlock()
	resume := req.PauseUntil.IsZero() || !time.Now().Before(req.PauseUntil)
	// As nats-server: any non-zero time is kept in the config, a past one too; and the
	// required API level is set anew (pause_until needs level 1).
	if req.PauseUntil.IsZero() {
		cfg.PauseUntil = nil
	} else {
		t := req.PauseUntil.UTC()
		cfg.PauseUntil = &t
	}
	setStaticConsumerMetadata(&cfg)
	e := s.updateConsumerLocked(c, cfg)
	s.cons.create.Unlock()
	if e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	resp := consumerPauseResponse{apiResponse: apiResponse{Type: typ}, PauseUntil: req.PauseUntil.UTC()}
	if !resume {
		resp.Paused, resp.PauseRemaining = true, time.Until(req.PauseUntil)
	}
	fields := map[string]any{"stream": s.name, "consumer": c.name, "paused": !resume}
	if !resume {
		fields["pause_until"] = req.PauseUntil.UTC()
	}
	a.advise("CONSUMER.PAUSE."+s.name+"."+c.name, "consumer_pause", fields)
	a.respond(r.reply, resp)
}

func (a *account) apiConsumerReset(r *apiReq, typ string) {
	var req JSApiConsumerResetRequest
	if e := decodeIfObject(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	_, c := a.consumerOf(r, typ, 2)
	if c == nil {
		return
	}
	seq, e := c.reset(req.Seq)
	if e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	resp := consumerResetResponse{apiResponse{Type: typ}, c.info(), seq}
	if _, ok := header(r.hdr, hdrStreamIdentity); ok {
		// A durable source asks for its origin's identity this way (it is not checked).
		a.respondHdr(r.reply, "NATS/1.0\r\n"+hdrStreamIdentity+": "+streamIdentity(c.s.created)+"\r\n\r\n", resp)
		return
	}
	a.respond(r.reply, resp)
}

// reset moves the consumer to seq (0: back to its ack floor), dropping what is pending.
// As nats-server's resetStartingSeq: a sequence is allowed under deliver all, and under
// by_start_sequence/by_start_time when not below the configured start; the delivery
// sequence starts again at 1 and the last ack time is forgotten.
func (c *consumer) reset(seq uint64) (uint64, *APIError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.store.State()
	switch {
	case seq == 0:
		seq = st.AckFloor.Stream + 1
	case c.cfg.DeliverPolicy == DeliverAll:
	case c.cfg.DeliverPolicy == DeliverByStartSeq:
		if seq < c.cfg.OptStartSeq {
			return 0, JSConsumerInvalidResetErr.with("err", "below start seq")
		}
	case c.cfg.DeliverPolicy == DeliverByStartTime && c.cfg.OptStartTime != nil:
		if seq < c.s.store.GetSeqFromTime(*c.cfg.OptStartTime) {
			return 0, JSConsumerInvalidResetErr.with("err", "below start time")
		}
	default:
		return 0, JSConsumerInvalidResetErr.with("err", "not allowed")
	}
	for _, p := range c.pending {
		c.waitq.remove(p)
	}
	c.pending = make(map[uint64]*pendingMsg)
	c.oddq, c.rdq, c.rdset, c.lps, c.rdc = nil, nil, nil, nil, nil
	c.sseq, c.dseq = seq, 1
	c.lastAck = time.Time{} // last delivery: info omits it at delivered 0; heartbeats keep it
	pair := filestore.SequencePair{Consumer: 0, Stream: seq - 1}
	if err := c.store.SetState(&filestore.ConsumerState{Delivered: pair, AckFloor: pair}); err != nil {
		return 0, JSConsumerStoreFailedErrF.withErr(err)
	}
	c.recountLocked()
	go c.kick()
	return seq, nil
}

func (a *account) apiConsumerUnpin(r *apiReq, typ string) {
	// nats-server reads this body with plain encoding/json: an empty one is invalid JSON.
	var req JSApiConsumerUnpinRequest
	if err := json.Unmarshal(r.body, &req); err != nil {
		a.respondErr(r.reply, typ, JSInvalidJSONErr.with("err", jsonErrText(err)))
		return
	}
	if req.Group == "" {
		a.respondErr(r.reply, typ, JSInvalidJSONErr.with("err", "consumer group not specified"))
		return
	}
	if !validGroupName.MatchString(req.Group) {
		a.respondErr(r.reply, typ, JSConsumerInvalidGroupNameErr)
		return
	}
	_, c := a.consumerOf(r, typ, 2)
	if c == nil {
		return
	}
	c.mu.Lock()
	if !slices.Contains(c.cfg.PriorityGroups, req.Group) {
		c.mu.Unlock()
		a.respondErr(r.reply, typ, JSConsumerInvalidPriorityGroupErr)
		return
	}
	c.unpinLocked()
	c.mu.Unlock()
	c.kick()
	a.respond(r.reply, apiResponse{Type: typ})
}

// nextFallback answers a pull request the API subscription caught for a consumer that does
// not exist: nats-server's $JS.API.> import does not take MSG.NEXT requests, so there
// nobody answers and the client gets its no responders status at once (nats-server's 503,
// naming the subject) rather than waiting out its timeout. An existing consumer's own
// subscription answers.
func (a *account) nextFallback(r *apiReq, subject string) {
	if r.reply == "" {
		return
	}
	stream, name, _ := strings.Cut(strings.TrimPrefix(r.subject, "CONSUMER.MSG.NEXT."), ".")
	if s := a.lookup(stream); s != nil && s.consumer(name) != nil {
		return
	}
	_ = a.api.Publish(r.reply, "", []byte("NATS/1.0 503\r\nNats-Subject: "+subject+"\r\n\r\n"), nil)
}
