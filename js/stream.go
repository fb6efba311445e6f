package js

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/filestore"
	"github.com/natsd/natsd/loop"
	"github.com/natsd/natsd/transform"
)

// stream is one stream: its store, the subscriptions that feed it, and the ingest state its
// worker keeps.
type stream struct {
	a       *account
	name    string
	dir     string
	store   filestore.Store
	jn      *filestore.Journal   // the journal the store commits through, nil if none
	ic      *loop.InternalClient // ingest (its worker) and acknowledgements
	created time.Time

	cfg    atomic.Pointer[StreamConfig]
	tr     atomic.Pointer[transform.Transform] // subject_transform
	rp     atomic.Pointer[transform.Transform] // republish
	pubAck []byte                              // `{"stream":"S","seq":` (with the domain when set)

	smu  sync.Mutex // subscriptions
	subs []*loop.Subscription
	dsub []*loop.Subscription

	// Ingest state, shared by the worker and the store's acknowledgements (imu). Messages
	// are handed to the store without waiting; inflight counts those not yet acknowledged,
	// and a check that needs the exact last sequence waits for it to reach zero (settle).
	imu       sync.Mutex
	settled   *sync.Cond
	inflight  int
	lseq      uint64
	lmsgID    string
	dd        map[string]ddEntry
	ddq       []ddEntry
	ddPending map[string]int

	ttl  *ttlWheel
	sch  atomic.Pointer[scheduler] // allow_msg_schedules
	age  *ager                     // max_age when markers are on
	mk   markers                   // markers queued on the worker
	cons streamConsumers
	ret  retireQueue // acknowledged messages an interest or work-queue stream may drop
	ctr  counters
	bt   *batching
	src  atomic.Pointer[sourcing] // mirror or sources (source.go)

	closed atomic.Bool
}

type ddEntry struct {
	id  string
	seq uint64
	ts  int64
}

// openStream opens (or, with create, makes) a stream's store; start subscribes it.
func openStream(a *account, cfg StreamConfig, created time.Time, create bool) (*stream, error) {
	return openStreamWith(a, cfg, created, create, a.js.cfg.SyncInterval)
}

func openStreamWith(a *account, cfg StreamConfig, created time.Time, create bool, syncEvery time.Duration) (*stream, error) {
	j := a.js
	s := &stream{a: a, name: cfg.Name, dir: filepath.Join(a.dir, "streams", cfg.Name), created: created,
		dd: make(map[string]ddEntry), ddPending: make(map[string]int), bt: &batching{}}
	s.settled = sync.NewCond(&s.imu)
	s.age = &ager{s: s}
	if create && cfg.Storage == FileStorage {
		j.waitRemoved(s.dir) // a stream of that name just deleted
		if err := a.keptDir(cfg.Name, s.dir); err != nil {
			return nil, err
		}
		// A memory stream lives as long as the server: nats-server does not bring it back.
		// The directory, msgs/ in it and the metadata are made first, then the metadata,
		// the stream's directory and its parent are synced together (createMeta): its
		// entry, msgs/'s and the metadata are durable before the reply, after one round
		// of syncs, not five.
		fsys := j.cfg.FS
		if err := fsys.MkdirAll(filepath.Join(s.dir, filestore.MsgsDir)); err != nil {
			return nil, err
		}
		if err := createMeta(fsys, s.dir, &cfg, created,
			func() error { return syncParents(fsys, s.dir, filepath.Dir(j.cfg.Dir), &j.durableDirs) }); err != nil {
			return nil, err
		}
	}
	lim := limitsOf(&cfg)
	if cfg.Storage == MemoryStorage {
		s.store = filestore.NewMemStore(lim)
	} else {
		fc := filestore.Config{Dir: s.dir, FS: j.cfg.FS, Limits: lim, Compress: cfg.Compression == S2Compression,
			SyncInterval: syncEvery, MaxPending: 64 << 20, DirDurable: create,
			Logf: func(f string, args ...any) {
				j.warnf("JetStream stream '%s > %s': "+f, append([]any{a.name, cfg.Name}, args...)...)
			}}
		if cfg.PersistMode == AsyncPersist && fc.SyncInterval <= 0 {
			fc.SyncInterval = 2 * time.Minute // nats-server's default interval for what opted out
		}
		if fc.SyncInterval == 0 {
			fc.Journal = j.journal
			s.jn = j.journal
		}
		fs, err := filestore.Open(fc)
		if err != nil {
			if create {
				_ = removeAll(j.cfg.FS, s.dir)
			}
			return nil, err
		}
		s.store = fs
	}
	st := s.store.FastState()
	if create && cfg.FirstSeq > 1 && st.LastSeq == 0 {
		if _, err := s.store.SkipMsgs(cfg.FirstSeq - 1); err != nil {
			s.store.Stop()
			return nil, err
		}
		st = s.store.FastState()
	}
	if cfg.AllowAtomicPublish && cfg.Storage == FileStorage {
		s.rollBackPartialBatch()
		st = s.store.FastState()
	}
	s.lseq = st.LastSeq
	s.store.RegisterStorageUpdates(func(msgs, bytes int64, seq uint64, subj string) {
		a.usage(cfg.Storage, bytes)
		if msgs > 0 && seq > 0 {
			s.stored(seq, subj)
			s.age.stored()
		}
	})
	if d := j.cfg.Domain; d != "" {
		s.pubAck = []byte(`{"stream":` + strconv.Quote(cfg.Name) + `,"domain":` + strconv.Quote(d) + `,"seq":`)
	} else {
		s.pubAck = []byte(`{"stream":` + strconv.Quote(cfg.Name) + `,"seq":`)
	}
	s.ic = j.eng.NewInternalClient(loop.KindJetStream, a.acc, "JetStream stream "+cfg.Name)
	s.ic.SetWorkLimit(j.cfg.MaxBufferedMsgs, j.cfg.MaxBufferedSize, s.queueFull)
	// ingest stores with StoreAsyncHeld; the batch's records go to the store together. A
	// small batch with nothing more waiting (a sync publish, a KV put) the worker commits
	// itself (see FileStore.Flush): one goroutine hand-off fewer in its round trip. Larger
	// ones go to the store's writer, so that the worker checks the next batch during the
	// fsync instead of after it.
	s.ic.SetBatchEnd(func(n int, more bool) { s.store.Flush(!more && n <= inlineCommitMax) })
	s.setConfig(&cfg)
	s.rebuildDedupe()
	if cfg.AllowMsgTTL {
		s.ttl = newTTLWheel(s)
	}
	if cfg.AllowMsgSchedules {
		s.sch.Store(newScheduler(s))
	}
	s.recoverTimed()
	s.age.kick()
	return s, nil
}

// start subscribes a stream that openStream opened; until then it takes no messages.
func (s *stream) start() error {
	if err := s.subscribe(s.config()); err != nil {
		s.stop(false)
		return err
	}
	return nil
}

// limitsOf is what the store enforces of cfg. A stream with subject delete markers is aged
// by js (marker.go), not by the store.
func limitsOf(cfg *StreamConfig) filestore.Limits {
	l := filestore.Limits{MaxMsgs: cfg.MaxMsgs, MaxBytes: cfg.MaxBytes, MaxAge: cfg.MaxAge,
		MaxMsgsPerSubject: cfg.MaxMsgsPer, MaxMsgSize: cfg.MaxMsgSize, DiscardNewPerSubject: cfg.DiscardNewPer}
	if agedByJS(cfg) {
		l.MaxAge = 0
	}
	if cfg.Discard == DiscardNew {
		l.Discard = filestore.DiscardNew
	}
	return l
}

func (s *stream) config() *StreamConfig { return s.cfg.Load() }

func (s *stream) setConfig(cfg *StreamConfig) {
	c := *cfg
	s.cfg.Store(&c)
	s.tr.Store(nil)
	if t := c.SubjectTransform; t != nil && t.Destination != "" {
		if tr, err := transform.New(t.Source, t.Destination); err == nil {
			s.tr.Store(tr)
		}
	}
	s.rp.Store(nil)
	if r := c.RePublish; r != nil {
		if tr, err := transform.New(r.Source, r.Destination); err == nil {
			s.rp.Store(tr)
		}
	}
}

// subscribe places the stream's interest in its subjects (and the direct-get subject when
// allow_direct), replacing what it had.
func (s *stream) subscribe(cfg *StreamConfig) error {
	s.smu.Lock()
	defer s.smu.Unlock()
	for _, sub := range s.subs {
		sub.Unsubscribe()
	}
	s.subs = s.subs[:0]
	for _, subj := range cfg.Subjects {
		sub, err := s.ic.Worker(subj, "", s.ingest)
		if err != nil {
			return err
		}
		s.subs = append(s.subs, sub)
	}
	for _, sub := range s.dsub {
		sub.Unsubscribe()
	}
	s.dsub = s.dsub[:0]
	if cfg.AllowDirect && s.a.direct != nil {
		subjs := []string{"$JS.API.DIRECT.GET." + s.name, "$JS.API.DIRECT.GET." + s.name + ".>"}
		if d := s.a.js.cfg.Domain; d != "" {
			// nats-server maps the domain's API onto its own, direct gets included.
			subjs = append(subjs, "$JS."+d+".API.DIRECT.GET."+s.name, "$JS."+d+".API.DIRECT.GET."+s.name+".>")
		}
		for _, subj := range subjs {
			var try func(*loop.Msg) bool
			if prefix, ok := strings.CutSuffix(subj, ".>"); ok {
				try = s.directTry(prefix)
			}
			sub, err := s.a.direct.WorkerOrInline(subj, "_sys_", try, s.directGet)
			if err != nil {
				return err
			}
			s.dsub = append(s.dsub, sub)
		}
	}
	return nil
}

// stop unsubscribes and stops the store; with remove it deletes the stream's files.
func (s *stream) stop(remove bool) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.stopSourcing()
	s.stopConsumers(remove)
	s.smu.Lock()
	for _, sub := range s.subs {
		sub.Unsubscribe()
	}
	for _, sub := range s.dsub {
		sub.Unsubscribe()
	}
	s.subs, s.dsub = nil, nil
	s.smu.Unlock()
	if s.ttl != nil {
		s.ttl.stop()
	}
	if sc := s.sch.Load(); sc != nil {
		sc.stop()
	}
	s.age.stop()
	s.dropBatches()
	s.imu.Lock()
	for s.inflight > 0 {
		s.waitSettled()
	}
	s.imu.Unlock()
	// The stream's bytes leave the account's usage with it, whatever its storage: a store
	// opened again (a restart, the reopen that ends a restore) reports them afresh. They are
	// read before the store stops: a stopped store's files are closed.
	st := s.config().Storage
	held := int64(s.store.FastState().Bytes)
	var err error
	if remove {
		err = s.store.StopForRemoval()
	} else {
		err = s.store.Stop()
	}
	s.ic.Close()
	s.a.usage(st, -held)
	if remove {
		// The consumers' directory goes with the stream: a stream made again under the
		// same name must sync its entry anew (syncParents stops at the ancestors it knows).
		s.a.js.durableDirs.Delete(s.consumersDir())
		if st != FileStorage {
			_ = removeAll(s.a.js.cfg.FS, s.dir) // nothing there but what a restore left
			return err
		}
		// A directory that could not be removed keeps its name from being used again until
		// an operator moves it (keptDir), as one recovery could not read does.
		failed := func(err error) { s.a.kept.Store(s.name, fmt.Errorf("its delete failed: %w", err)) }
		if rerr := s.a.js.removeStreamDir(s.dir, s.jn, failed); rerr != nil {
			failed(rerr) // whatever is left there is not a stream to create anew over
			return rerr
		}
	}
	return err
}

// queueFull answers a publisher whose message found the ingest queue full (on its reactor).
func (s *stream) queueFull(m *loop.Msg) {
	s.a.js.warnf("Dropping messages due to excessive stream ingest rate on '%s' > '%s': ingest queue full", s.a.name, s.name)
	if len(m.Reply) == 0 || s.config().NoAck {
		return
	}
	_ = s.ic.Publish(string(m.Reply), "", []byte("NATS/1.0 429 Too Many Requests\r\n\r\n"),
		pubAckErr(s.name, JSStreamTooManyRequests))
}

func pubAckErr(stream string, e *APIError) []byte {
	b, _ := jsonMarshal(pubAckError{Error: e, Stream: stream})
	return b
}

// ingest checks one published message and hands it to the store; it runs on the stream's
// worker, in publish order.
func (s *stream) ingest(m *loop.WorkMsg) {
	if s.closed.Load() {
		return
	}
	cfg := s.config()
	subject := m.Subject
	if tr := s.tr.Load(); tr != nil {
		if t, err := tr.Match(subject); err == nil {
			subject = t
		}
	}
	reply := m.Reply
	if cfg.NoAck {
		reply = ""
	}
	hdr, msg := m.Hdr, m.Data
	fail := func(e *APIError) {
		if reply != "" {
			_ = s.ic.Publish(reply, "", nil, pubAckErr(s.name, e))
		}
	}
	if strings.HasSuffix(m.Reply, fastBatchSuffix) {
		s.fastBatchMsg(cfg, m, subject, reply)
		return
	}
	if len(hdr) > 0 && s.atomicBatchMsg(cfg, m, subject, reply) {
		return
	}
	if cfg.Sealed {
		fail(JSStreamSealedErr)
		return
	}
	if max := int(cfg.MaxMsgSize); max >= 0 && (len(hdr) > max || len(msg) > max-len(hdr)) {
		fail(JSStreamMessageExceedsMaximumErr)
		return
	}
	if len(hdr) > math.MaxUint16 {
		fail(JSStreamHeaderExceedsMaximumErr)
		return
	}
	var msgID, rollup, schedPurge string
	var ttl int64
	var incr *big.Int
	if len(hdr) > 0 {
		if _, ok := header(hdr, hdrIncr); ok {
			var e *APIError
			if incr, e = checkIncr(cfg, hdr, msg); e != nil {
				fail(e)
				return
			}
		}
		if name := headerString(hdr, hdrExpectedStream); name != "" && name != cfg.Name {
			fail(JSStreamNotMatchErr)
			return
		}
		tv, hasTTL := header(hdr, hdrTTL)
		var ttlOK, never bool
		if hasTTL {
			ttl, never, ttlOK = parseTTL(tv)
			if ttlOK && (ttl != 0 || never) && !cfg.AllowMsgTTL {
				fail(JSMessageTTLDisabledErr)
				return
			}
		}
		if v, ok := header(hdr, hdrExpectedLastSubjSeq); ok {
			want := parseSeqHeader(v)
			seqSubj := subject
			if o := headerString(hdr, hdrExpectedLastSubjSubj); o != "" {
				seqSubj = o
			}
			s.settle()
			var have uint64
			if sm, err := s.store.LoadLastMsg(seqSubj); err == nil {
				have = sm.Seq
			}
			if have != want {
				fail(JSStreamWrongLastSequenceErrF.with("seq", strconv.FormatUint(have, 10)))
				return
			}
		} else if headerString(hdr, hdrExpectedLastSubjSubj) != "" {
			fail(JSStreamExpectedLastSeqPerSubjectInvalid)
			return
		}
		if v, ok := header(hdr, hdrExpectedLastSeq); ok {
			want := parseSeqHeader(v)
			if last := s.settledLastSeq(); last != want {
				fail(JSStreamWrongLastSequenceErrF.with("seq", strconv.FormatUint(last, 10)))
				return
			}
		}
		var e *APIError
		if hdr, schedPurge, e = checkSchedule(cfg, subject, hdr, s.storedIsSchedule); e != nil {
			fail(e)
			return
		}
		if _, ok := header(hdr, hdrStreamSource); ok {
			fail(JSMessageSourceHdrNotAllowedErr)
			return
		}
		if msgID = headerString(hdr, hdrMsgID); msgID != "" {
			if seq := s.duplicate(msgID, cfg.Duplicates); seq > 0 {
				if reply != "" {
					b := append(append([]byte(nil), s.pubAck...), strconv.FormatUint(seq, 10)...)
					_ = s.ic.Publish(reply, "", nil, append(b, `,"duplicate": true}`...))
				}
				return
			}
		}
		if want := headerString(hdr, hdrExpectedLastMsgID); want != "" {
			s.settle()
			s.imu.Lock()
			last := s.lmsgID
			s.imu.Unlock()
			if want != last {
				fail(JSStreamWrongLastMsgIDErrF.with("id", last))
				return
			}
		}
		if rollup = headerString(hdr, hdrRollup); rollup != "" {
			if !cfg.AllowRollup || cfg.DenyPurge {
				fail(JSStreamRollupFailedF.withErr(errors.New("rollup not permitted")))
				return
			}
			if rollup != rollupSubject && rollup != rollupAll {
				fail(JSStreamRollupFailedF.withErr(errors.New("rollup value invalid: " + strconv.Quote(rollup))))
				return
			}
		}
		if hasTTL && !ttlOK && !cfg.AllowMsgCounter {
			fail(JSMessageTTLInvalidErr)
			return
		}
		if ttlOK && !cfg.AllowMsgCounter {
			hdr, ttl = raiseTTL(cfg, hdr, ttl)
		}
	}
	if cfg.AllowMsgCounter {
		s.ingestCounter(cfg, subject, reply, msgID, hdr, incr, ttl)
		return
	}
	if e := s.a.limitsExceeded(cfg.Storage); e != nil {
		fail(e)
		return
	}
	if rollup != "" || schedPurge != "" {
		_ = s.storeRollup(cfg, subject, reply, msgID, rollup, hdr, msg, ttl)
		return
	}
	if cfg.Retention == InterestPolicy && !s.interested(subject) {
		// No consumer is interested: as nats-server does, the message takes its sequence
		// but is not kept.
		s.skipUninterested(reply, msgID)
		return
	}
	s.imu.Lock()
	s.inflight++
	if msgID != "" {
		s.ddPending[msgID]++
	}
	s.imu.Unlock()
	p := pendingPool.Get().(*pending)
	p.s, p.reply, p.msgID, p.subject, p.ttl = s, reply, msgID, subject, ttl
	if s.rp.Load() != nil || s.sch.Load() != nil {
		p.hdr, p.msg = hdr, msg
	}
	s.store.StoreAsyncHeld(subject, hdr, msg, p.cb)
}

// inlineCommitMax is the largest batch a stream's worker commits itself when nothing more
// waits: checking a message costs ~1-2 µs, waking the store's writer tens of µs.
const inlineCommitMax = 8

// pendingPool recycles pending records with their callback bound once, so that a publish
// costs no closure.
var pendingPool sync.Pool

func init() {
	pendingPool.New = func() any {
		p := &pending{}
		p.cb = p.done
		return p
	}
}

func (s *stream) skipUninterested(reply, msgID string) {
	s.settle()
	seq, err := s.store.SkipMsgs(1)
	if err != nil {
		if reply != "" {
			_ = s.ic.Publish(reply, "", nil, pubAckErr(s.name, storeError(err)))
		}
		return
	}
	s.imu.Lock()
	s.lseq, s.lmsgID = seq, msgID
	if msgID != "" {
		s.addDedupe(msgID, seq, time.Now().UnixNano())
	}
	s.imu.Unlock()
	if reply != "" {
		b := append(append([]byte(nil), s.pubAck...), strconv.FormatUint(seq, 10)...)
		_ = s.ic.Publish(reply, "", nil, append(b, '}'))
	}
}

// parseSeqHeader reads a sequence header as nats-server does: a bad number never matches.
func parseSeqHeader(v []byte) uint64 {
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return n
}

// pending is one message handed to the store and not yet acknowledged.
type pending struct {
	s            *stream
	reply, msgID string
	subject      string
	ttl          int64
	val          string // a counter's new total
	hdr, msg     []byte // kept only for republish and schedules
	fast         *fastBatch
	fastID       string
	fastSeq      uint64
	cb           func(seq uint64, ts int64, err error)
}

func (p *pending) done(seq uint64, ts int64, err error) {
	s := p.s
	defer func() {
		cb := p.cb
		*p = pending{cb: cb}
		pendingPool.Put(p)
	}()
	s.imu.Lock()
	s.inflight--
	if p.msgID != "" {
		if s.ddPending[p.msgID]--; s.ddPending[p.msgID] <= 0 {
			delete(s.ddPending, p.msgID)
		}
	}
	if p.val != "" {
		s.counterStored(p.subject, err)
	}
	prev := s.lseq
	if err == nil {
		s.lseq = seq
		s.lmsgID = p.msgID
		if p.msgID != "" {
			s.addDedupe(p.msgID, seq, ts)
		}
	}
	if s.inflight == 0 {
		s.settled.Broadcast()
	}
	s.imu.Unlock()
	if err != nil {
		if p.reply != "" {
			_ = s.ic.Publish(p.reply, "", nil, pubAckErr(s.name, storeError(err)))
		}
		return
	}
	if p.ttl > 0 && s.ttl != nil {
		s.ttl.add(seq, ts+p.ttl*int64(time.Second))
	}
	if sc := s.sch.Load(); sc != nil {
		sc.stored(seq, ts, p.subject, p.hdr)
	}
	if p.fast != nil {
		s.fastStored(p.fast, p.fastID, p.fastSeq, p.reply, seq)
	} else if p.reply != "" {
		var buf [128]byte
		b := append(append(buf[:0], s.pubAck...), strconv.FormatUint(seq, 10)...)
		if p.val != "" {
			b = strconv.AppendQuote(append(b, `,"val":`...), p.val)
		}
		_ = s.ic.Publish(p.reply, "", nil, append(b, '}'))
	}
	if rp := s.rp.Load(); rp != nil {
		s.republish(rp, p.subject, p.hdr, p.msg, seq, prev, ts)
	}
}

// storeError maps a store's refusal to the API error a publisher gets.
func storeError(err error) *APIError {
	switch {
	case errors.Is(err, filestore.ErrBusy):
		return JSStreamTooManyRequests
	case errors.Is(err, filestore.ErrMaxMsgSize):
		return JSStreamMessageExceedsMaximumErr
	}
	return JSStreamStoreFailedF.withErr(err)
}

// waitSettled waits (imu held) for the next acknowledgement. The records it waits for may
// be held by the stream's worker (StoreAsyncHeld), possibly this very goroutine: the store
// is told of them first.
func (s *stream) waitSettled() {
	s.store.Flush(false)
	s.settled.Wait()
}

// settle waits until every message handed to the store has been acknowledged, so that the
// store and lseq are exact.
func (s *stream) settle() {
	s.imu.Lock()
	for s.inflight > 0 {
		s.waitSettled()
	}
	s.imu.Unlock()
}

func (s *stream) settledLastSeq() uint64 {
	s.imu.Lock()
	for s.inflight > 0 {
		s.waitSettled()
	}
	l := s.lseq
	s.imu.Unlock()
	return l
}

// storeRollup stores a message and waits for it, then removes what a roll-up replaces: the
// subject's earlier messages ("sub") or the whole stream's ("all"). Messages that act on
// others once stored go this way: roll-ups, markers, schedules and what they fire.
func (s *stream) storeRollup(cfg *StreamConfig, subject, reply, msgID, rollup string, hdr, msg []byte, ttl int64) error {
	s.settle()
	prev := s.settledLastSeq()
	seq, ts, err := s.store.StoreMsg(subject, hdr, msg)
	if err != nil {
		if reply != "" {
			_ = s.ic.Publish(reply, "", nil, pubAckErr(s.name, storeError(err)))
		}
		return err
	}
	if rollup == rollupSubject {
		_, err = s.store.PurgeEx(subject, seq, 0)
	} else if rollup == rollupAll {
		_, err = s.store.Compact(seq)
	}
	if err != nil {
		s.a.js.warnf("JetStream stream '%s > %s' roll-up purge failed: %v", s.a.name, s.name, err)
	}
	s.afterStore(seq, ts, subject, hdr)
	s.imu.Lock()
	s.lseq = seq
	s.lmsgID = msgID
	if msgID != "" {
		s.addDedupe(msgID, seq, ts)
	}
	s.imu.Unlock()
	if ttl > 0 && s.ttl != nil {
		s.ttl.add(seq, ts+ttl*int64(time.Second))
	}
	if reply != "" {
		b := append(append([]byte(nil), s.pubAck...), strconv.FormatUint(seq, 10)...)
		_ = s.ic.Publish(reply, "", nil, append(b, '}'))
	}
	if rp := s.rp.Load(); rp != nil {
		s.republish(rp, subject, hdr, msg, seq, prev, ts)
	}
	_ = cfg
	return nil
}

// duplicate returns the sequence of an earlier message with id inside the window, 0 if
// there is none. A message with the same id still on its way to disk is waited for.
func (s *stream) duplicate(id string, window time.Duration) uint64 {
	s.imu.Lock()
	defer s.imu.Unlock()
	for {
		if e, ok := s.dd[id]; ok && (window <= 0 || time.Now().UnixNano()-e.ts < int64(window)) {
			return e.seq
		}
		if s.ddPending[id] == 0 {
			return 0
		}
		s.waitSettled()
	}
}

// addDedupe records id (imu held) and forgets ids older than the window.
func (s *stream) addDedupe(id string, seq uint64, ts int64) {
	w := s.config().Duplicates
	if w <= 0 {
		return
	}
	s.dd[id] = ddEntry{id, seq, ts}
	s.ddq = append(s.ddq, ddEntry{id, seq, ts})
	cut := time.Now().UnixNano() - int64(w)
	i := 0
	for i < len(s.ddq) && s.ddq[i].ts < cut {
		if e, ok := s.dd[s.ddq[i].id]; ok && e.seq == s.ddq[i].seq {
			delete(s.dd, s.ddq[i].id)
		}
		i++
	}
	if i > 0 {
		s.ddq = append(s.ddq[:0], s.ddq[i:]...)
	}
}

// rebuildDedupe reads back the ids of the messages inside the duplicate window, so that a
// restart does not let a retried publish in twice.
func (s *stream) rebuildDedupe() {
	cfg := s.config()
	if cfg.Duplicates <= 0 {
		return
	}
	start := s.store.GetSeqFromTime(time.Now().Add(-cfg.Duplicates))
	last := s.store.FastState().LastSeq
	for seq := start; seq != 0 && seq <= last; {
		sm, err := s.store.LoadNextMsg("", seq)
		if err != nil {
			break
		}
		s.lmsgID = ""
		if id := headerString(sm.Header, hdrMsgID); id != "" {
			s.lmsgID = id
			s.addDedupe(id, sm.Seq, sm.TS)
		}
		seq = sm.Seq + 1
	}
}

// republish publishes a stored message to the republish destination with the stream's
// headers (the body dropped when headers_only).
func (s *stream) republish(rp *transform.Transform, subject string, hdr, msg []byte, seq, prev uint64, ts int64) {
	dest, err := rp.Match(subject)
	if err != nil {
		return
	}
	cfg := s.config()
	h := append([]byte(nil), hdr...)
	h = appendHeader(h, "Nats-Stream", s.name)
	h = appendHeader(h, "Nats-Subject", subject)
	h = appendHeader(h, "Nats-Sequence", strconv.FormatUint(seq, 10))
	h = appendHeader(h, "Nats-Time-Stamp", time.Unix(0, ts).UTC().Format(time.RFC3339Nano))
	h = appendHeader(h, "Nats-Last-Sequence", strconv.FormatUint(prev, 10))
	if cfg.RePublish.HeadersOnly {
		h = appendHeader(h, "Nats-Msg-Size", strconv.Itoa(len(msg)))
		msg = nil
	}
	_ = s.ic.Publish(dest, "", h, msg)
}
