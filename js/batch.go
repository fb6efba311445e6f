package js

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/natsd/natsd/loop"
)

// Batch publishing (atomic: Nats-Batch-* headers; fast: replies ending in ".$FI"), with
// nats-server's limits, checks, replies and error codes.

const (
	hdrBatchSeq       = "Nats-Batch-Sequence"
	hdrBatchCommit    = "Nats-Batch-Commit"
	hdrScheduleNext   = "Nats-Schedule-Next"
	fastBatchSuffix   = ".$FI"
	batchMaxIDLen     = 64
	batchTimeout      = 10 * time.Second
	atomicMaxSize     = 1000
	atomicMaxPerStrm  = 50
	atomicMaxTotal    = 1000
	fastMaxPerStream  = 1000
	fastMaxTotal      = 50_000
	fastDefaultFlow   = 10
	fastMaxAckMsgs    = 500
	commitChunkBytes  = 16 << 20 // settle between chunks so a large batch never meets ErrBusy
	advBatchAbandoned = "STREAM.BATCH_ABANDONED."
)

// batching is a stream's batches in progress; mu orders the worker, the store's
// acknowledgements (fast batches) and the abandonment timers.
type batching struct {
	mu     sync.Mutex
	atomic map[string]*atomicBatch
	fast   map[string]*fastBatch
}

type stagedMsg struct {
	subj     string
	hdr, msg []byte
}

// atomicBatch is staged in memory: nothing of it reaches the store before its commit, so a
// crash before the commit leaves nothing behind.
type atomicBatch struct {
	timer *time.Timer
	lseq  uint64
	msgs  []stagedMsg
	gone  bool
}

type fastBatch struct {
	timer          *time.Timer
	lseq           uint64 // highest batch sequence taken
	sseq           uint64 // stream sequence of the last one stored
	pseq           uint64 // highest batch sequence stored
	fseq           uint64 // batch sequence of the last flow acknowledgement
	pending        uint32
	ackMessages    uint16
	maxAckMessages uint16
	reply          string
	gapOk, commit  bool
	gone           bool
}

// fastRef is a fast batch message's reply subject as parsed:
// <prefix>.<id>.<flow>.<gap mode>.<batch seq>.<op>.$FI
type fastRef struct {
	id                       string
	seq                      uint64
	flow                     uint16
	ping, gapOk, commit, eob bool
}

func (s *stream) batches() *batching { return s.bt }

// dropBatches forgets every batch in progress (the stream stops).
func (s *stream) dropBatches() {
	bt := s.bt
	bt.mu.Lock()
	for id, b := range bt.atomic {
		s.dropAtomic(id, b)
	}
	for id, b := range bt.fast {
		s.dropFast(id, b)
	}
	bt.mu.Unlock()
}

func (s *stream) abandoned(id, reason string) {
	fields := map[string]any{"stream": s.name, "batch": id, "reason": reason}
	s.a.advise(advBatchAbandoned+s.name, "stream_batch_abandoned", fields)
}

// dropAtomic removes b (bt.mu held).
func (s *stream) dropAtomic(id string, b *atomicBatch) {
	if b.gone {
		return
	}
	b.gone = true
	b.timer.Stop()
	b.msgs = nil
	s.a.js.atomicBatches.Add(-1)
	if s.bt.atomic[id] == b {
		delete(s.bt.atomic, id)
	}
}

func (s *stream) dropFast(id string, b *fastBatch) {
	if b.gone {
		return
	}
	b.gone = true
	b.timer.Stop()
	s.a.js.fastBatches.Add(-1)
	if s.bt.fast[id] == b {
		delete(s.bt.fast, id)
	}
}

// batchReplyErr answers a batch message with an error PubAck.
func (s *stream) batchReplyErr(reply string, e *APIError) {
	if reply != "" {
		_ = s.ic.Publish(reply, "", nil, pubAckErr(s.name, e))
	}
}

// batchPubAck is a committed batch's PubAck.
func (s *stream) batchPubAck(reply string, seq uint64, id string, count uint64) {
	if reply == "" {
		return
	}
	b := append(append([]byte(nil), s.pubAck...), strconv.FormatUint(seq, 10)...)
	b = append(b, `,"batch":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"count":`...)
	b = strconv.AppendUint(b, count, 10)
	_ = s.ic.Publish(reply, "", nil, append(b, '}'))
}

// atomicBatchMsg takes a message with Nats-Batch-Id (reported false when it has none).
func (s *stream) atomicBatchMsg(cfg *StreamConfig, m *loop.WorkMsg, subject, reply string) bool {
	idb, ok := header(m.Hdr, hdrBatchID)
	if !ok || len(idb) == 0 {
		return false
	}
	hdr, msg := m.Hdr, m.Data
	fail := func(e *APIError) { s.batchReplyErr(reply, e) }
	switch {
	case cfg.Sealed:
		fail(JSStreamSealedErr)
		return true
	}
	if e := s.a.limitsExceeded(cfg.Storage); e != nil {
		fail(e)
		return true
	}
	if max := int(cfg.MaxMsgSize); max >= 0 && (len(hdr) > max || len(msg) > max-len(hdr)) {
		fail(JSStreamMessageExceedsMaximumErr)
		return true
	}
	if !cfg.AllowAtomicPublish {
		fail(JSAtomicPublishDisabledErr)
		return true
	}
	if len(idb) > batchMaxIDLen {
		fail(JSAtomicPublishInvalidBatchIDErr)
		return true
	}
	bseq, ok := headerUint(hdr, hdrBatchSeq)
	if !ok {
		fail(JSAtomicPublishMissingSeqErr)
		return true
	}
	var commit, eob, badCommit bool
	if c, ok := header(hdr, hdrBatchCommit); ok {
		commit, eob = true, string(c) == "eob"
		badCommit = !eob && string(c) != "1"
	}
	size := bseq
	if eob {
		size-- // the end-of-batch marker is not stored
	}
	tooLarge := JSAtomicPublishTooLargeBatchErrF.with("size", strconv.Itoa(atomicMaxSize))

	bt := s.batches()
	id := string(idb)
	bt.mu.Lock()
	b := bt.atomic[id]
	if b == nil {
		if bseq != 1 {
			bt.mu.Unlock()
			if size > atomicMaxSize {
				fail(tooLarge)
			} else {
				fail(JSAtomicPublishIncompleteBatchErr)
			}
			return true
		}
		if len(bt.atomic)+1 > atomicMaxPerStrm {
			bt.mu.Unlock()
			fail(JSAtomicPublishTooManyInflight)
			return true
		}
		if s.a.js.atomicBatches.Add(1) > atomicMaxTotal {
			s.a.js.atomicBatches.Add(-1)
			bt.mu.Unlock()
			fail(JSAtomicPublishTooManyInflight)
			return true
		}
		b = &atomicBatch{}
		nb := b
		b.timer = time.AfterFunc(batchTimeout, func() {
			bt.mu.Lock()
			fired := !nb.gone
			s.dropAtomic(id, nb)
			bt.mu.Unlock()
			if fired {
				s.abandoned(id, "timeout")
			}
		})
		if bt.atomic == nil {
			bt.atomic = make(map[string]*atomicBatch)
		}
		bt.atomic[id] = b
	}
	if badCommit {
		s.dropAtomic(id, b)
		bt.mu.Unlock()
		fail(JSAtomicPublishInvalidBatchCommitErr)
		return true
	}
	expired := !b.timer.Reset(batchTimeout)
	b.lseq++
	if b.lseq != bseq || expired || (bseq == 1 && eob) {
		s.dropAtomic(id, b)
		bt.mu.Unlock()
		s.abandoned(id, "incomplete")
		fail(JSAtomicPublishIncompleteBatchErr)
		return true
	}
	if size > atomicMaxSize {
		s.dropAtomic(id, b)
		bt.mu.Unlock()
		s.abandoned(id, "large")
		fail(tooLarge)
		return true
	}
	if !eob {
		b.msgs = append(b.msgs, stagedMsg{subject, append([]byte(nil), hdr...), append([]byte(nil), msg...)})
	}
	if !commit {
		bt.mu.Unlock()
		if reply != "" {
			// nats-server answers a staged message with an empty message.
			_ = s.ic.Publish(reply, "", nil, nil)
		}
		return true
	}
	if !b.timer.Stop() {
		bt.mu.Unlock()
		s.abandoned(id, "timeout")
		fail(JSAtomicPublishIncompleteBatchErr)
		return true
	}
	msgs := b.msgs
	s.dropAtomic(id, b)
	bt.mu.Unlock()
	if eob {
		last := &msgs[len(msgs)-1]
		last.hdr = appendHeader(last.hdr, hdrBatchCommit, "1")
	}
	s.commitAtomic(cfg, id, msgs, reply)
	return true
}

// batchDiff is what a batch's earlier messages would change, for the checks of the later
// ones (nats-server's staged diff).
type batchDiff struct {
	ids      map[string]struct{}
	subjects map[string]uint64
	expected map[string]uint64
	// schedules: whether a subject's last message staged so far is a message schedule
	schedules map[string]bool
	msgs      uint64
	bytes     uint64
}

// checked is a batch message that passed its checks.
type checked struct {
	stagedMsg
	msgID, rollup string
	purge         string // the message schedule it ends (Nats-Schedule-Next: purge)
	ttl           int64
}

// checkBatchMsg runs a batch message's header checks in nats-server's order for batches;
// last is the stream's last sequence as the message would see it. dup is the sequence of an
// earlier message with the same id.
func (s *stream) checkBatchMsg(d *batchDiff, cfg *StreamConfig, c *checked, last uint64) (dup uint64, e *APIError) {
	subject, hdr, msg := c.subj, c.hdr, c.msg
	if len(hdr) > 0 {
		if len(hdr) > math.MaxUint16 {
			return 0, JSStreamHeaderExceedsMaximumErr
		}
		if v, ok := header(hdr, hdrIncr); ok {
			if _, ok := new(big.Int).SetString(string(v), 10); !ok {
				return 0, JSMessageIncrInvalidErr
			}
			return 0, JSMessageIncrDisabledErr
		}
		if name := headerString(hdr, hdrExpectedStream); name != "" && name != cfg.Name {
			return 0, JSStreamNotMatchErr
		}
		if tv, ok := header(hdr, hdrTTL); ok {
			ttl, never, ok := parseTTL(tv)
			if !ok || ttl != 0 || never {
				if !cfg.AllowMsgTTL {
					return 0, JSMessageTTLDisabledErr
				}
				if !ok {
					return 0, JSMessageTTLInvalidErr
				}
			}
			c.ttl = ttl
		}
		if id := headerString(hdr, hdrMsgID); id != "" {
			if _, ok := d.ids[id]; ok {
				return 0, JSAtomicPublishContainsDuplicateMessageErr
			}
			if seq := s.duplicate(id, cfg.Duplicates); seq > 0 {
				return seq, JSAtomicPublishContainsDuplicateMessageErr
			}
			if d.ids == nil {
				d.ids = make(map[string]struct{})
			}
			d.ids[id] = struct{}{}
			c.msgID = id
		}
		if _, ok := header(hdr, hdrStreamSource); ok {
			return 0, JSMessageSourceHdrNotAllowedErr
		}
		if v, ok := header(hdr, hdrExpectedLastSeq); ok {
			if want := parseSeqHeader(v); want != last {
				return 0, JSStreamWrongLastSequenceErrF.with("seq", strconv.FormatUint(last, 10))
			} else if len(d.subjects) > 0 {
				// Only a batch's first message may expect a last sequence.
				return 0, JSStreamWrongLastSequenceConstantErr
			}
		}
		if v, ok := header(hdr, hdrExpectedLastSubjSeq); ok {
			want := parseSeqHeader(v)
			seqSubj := subject
			if o := headerString(hdr, hdrExpectedLastSubjSubj); o != "" {
				seqSubj = o
			}
			if _, ok := d.subjects[seqSubj]; ok {
				return 0, JSStreamWrongLastSequenceConstantErr
			}
			have, ok := d.expected[seqSubj]
			if !ok {
				if sm, err := s.store.LoadLastMsg(seqSubj); err == nil {
					have = sm.Seq
				}
			}
			if have != want {
				return 0, JSStreamWrongLastSequenceErrF.with("seq", strconv.FormatUint(have, 10))
			}
			if d.expected == nil {
				d.expected = make(map[string]uint64)
			}
			d.expected[seqSubj] = have
		} else if headerString(hdr, hdrExpectedLastSubjSubj) != "" {
			return 0, JSStreamExpectedLastSeqPerSubjectInvalid
		}
		h, purge, e := checkSchedule(cfg, subject, hdr, func(subj string) (bool, bool) {
			if sched, ok := d.schedules[subj]; ok {
				return sched, true // staged earlier in this batch
			}
			return s.storedIsSchedule(subj)
		})
		if e != nil {
			return 0, e
		}
		hdr, c.hdr, c.purge = h, h, purge
		if r := headerString(hdr, hdrRollup); r != "" {
			if !cfg.AllowRollup || cfg.DenyPurge {
				return 0, JSStreamRollupFailedF.withErr(errors.New("rollup not permitted"))
			}
			switch r {
			case rollupSubject:
				if _, ok := d.subjects[subject]; ok {
					return 0, JSStreamRollupFailedF.withErr(errors.New("batch rollup sub invalid"))
				}
			case rollupAll:
				if len(d.subjects) > 0 {
					return 0, JSStreamRollupFailedF.withErr(errors.New("batch rollup all invalid"))
				}
			default:
				return 0, JSStreamRollupFailedF.withErr(errors.New("rollup value invalid: " + strconv.Quote(r)))
			}
			c.rollup = r
		}
	}
	if d.subjects == nil {
		d.subjects = make(map[string]uint64)
	}
	d.subjects[subject]++
	if cfg.AllowMsgSchedules {
		if d.schedules == nil {
			d.schedules = make(map[string]bool)
		}
		p, _ := header(hdr, hdrSchedule)
		d.schedules[subject] = len(p) > 0
	}
	d.msgs++
	d.bytes += recordSize(cfg.Storage, subject, hdr, msg)
	if cfg.Discard == DiscardNew {
		if cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 {
			st := s.store.FastState()
			if cfg.MaxMsgs > 0 && st.Msgs+d.msgs > uint64(cfg.MaxMsgs) {
				return 0, JSStreamStoreFailedF.with("err", "maximum messages exceeded")
			}
			if cfg.MaxBytes > 0 && st.Bytes+d.bytes > uint64(cfg.MaxBytes) {
				return 0, JSStreamStoreFailedF.with("err", "maximum bytes exceeded")
			}
		}
		if cfg.DiscardNewPer && cfg.MaxMsgsPer > 0 && len(headerString(hdr, hdrRollup)) == 0 {
			n := s.store.FilteredState(subject, 0).Msgs + d.subjects[subject]
			if n > uint64(cfg.MaxMsgsPer) {
				return 0, JSStreamStoreFailedF.with("err", "maximum messages per subject exceeded")
			}
		}
	}
	return 0, nil
}

// recordSize is what a message counts against max_bytes, as nats-server counts it.
func recordSize(st Storage, subj string, hdr, msg []byte) uint64 {
	if st == MemoryStorage {
		return uint64(len(subj) + len(hdr) + len(msg) + 16)
	}
	if len(hdr) == 0 {
		return uint64(30 + len(subj) + len(msg))
	}
	return uint64(34 + len(subj) + len(hdr) + len(msg))
}

func validPublishSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	for _, t := range strings.Split(s, ".") {
		if t == "" || t == "*" || t == ">" {
			return false
		}
	}
	return true
}

// commitAtomic checks a committed batch as a whole and stores it: all of it, acknowledged
// once all of it is durable, or none of it.
func (s *stream) commitAtomic(cfg *StreamConfig, id string, msgs []stagedMsg, reply string) {
	base := s.settledLastSeq()
	d := &batchDiff{}
	cs := make([]checked, len(msgs))
	for i := range msgs {
		c := &cs[i]
		c.stagedMsg = msgs[i]
		if tr := s.tr.Load(); tr != nil {
			if t, err := tr.Match(c.subj); err == nil {
				c.subj = t
			}
		}
		if _, ok := header(c.hdr, hdrExpectedLastMsgID); ok && headerString(c.hdr, hdrExpectedLastMsgID) != "" {
			s.batchReplyErr(reply, JSAtomicPublishUnsupportedHeaderBatchErr.with("header", hdrExpectedLastMsgID))
			return
		}
		if _, e := s.checkBatchMsg(d, cfg, c, base+uint64(i)); e != nil {
			s.batchReplyErr(reply, e)
			return
		}
	}
	if cfg.Retention == InterestPolicy {
		// No consumer is interested (natsd has none yet): the batch takes its sequences only.
		first, err := s.store.SkipMsgs(uint64(len(cs)))
		if err != nil {
			s.batchReplyErr(reply, storeError(err))
			return
		}
		last := first + uint64(len(cs)) - 1
		now := time.Now().UnixNano()
		s.imu.Lock()
		s.lseq, s.lmsgID = last, cs[len(cs)-1].msgID
		for i := range cs {
			if cs[i].msgID != "" {
				s.addDedupe(cs[i].msgID, first+uint64(i), now)
			}
		}
		s.imu.Unlock()
		s.batchPubAck(reply, last, id, uint64(len(cs)))
		return
	}

	type result struct {
		seq uint64
		ts  int64
	}
	res := make([]result, len(cs))
	var firstErr error
	var chunk int
	for i := range cs {
		c := &cs[i]
		s.imu.Lock()
		s.inflight++
		s.imu.Unlock()
		r := &res[i]
		s.store.StoreAsync(c.subj, c.hdr, c.msg, func(seq uint64, ts int64, err error) {
			s.imu.Lock()
			r.seq, r.ts = seq, ts
			if err != nil && firstErr == nil {
				firstErr = err
			}
			s.inflight--
			if s.inflight == 0 {
				s.settled.Broadcast()
			}
			s.imu.Unlock()
		})
		if chunk += len(c.hdr) + len(c.msg); chunk > commitChunkBytes {
			s.settle()
			chunk = 0
		}
	}
	s.settle()
	s.imu.Lock()
	err := firstErr
	s.imu.Unlock()
	if err != nil {
		// Take back what was stored, so that none of the batch is seen.
		if s.store.FastState().LastSeq > base {
			if terr := s.store.Truncate(base); terr != nil {
				s.a.js.warnf("JetStream stream '%s > %s' could not take back a failed batch: %v", s.a.name, s.name, terr)
			}
		}
		s.batchReplyErr(reply, storeError(err))
		return
	}
	s.imu.Lock()
	for i := range cs {
		if cs[i].msgID != "" {
			s.addDedupe(cs[i].msgID, res[i].seq, res[i].ts)
		}
	}
	last := res[len(res)-1].seq
	s.lseq, s.lmsgID = last, cs[len(cs)-1].msgID
	s.imu.Unlock()
	rp := s.rp.Load()
	for i := range cs {
		c := &cs[i]
		if c.ttl > 0 && s.ttl != nil {
			s.ttl.add(res[i].seq, res[i].ts+c.ttl*int64(time.Second))
		}
		if c.rollup == rollupSubject {
			_, err = s.store.PurgeEx(c.subj, res[i].seq, 0)
		} else if c.rollup == rollupAll {
			_, err = s.store.Compact(res[i].seq)
		}
		if err != nil {
			s.a.js.warnf("JetStream stream '%s > %s' roll-up purge failed: %v", s.a.name, s.name, err)
			err = nil
		}
		s.afterStore(res[i].seq, res[i].ts, c.subj, c.hdr)
		if rp != nil {
			prev := base
			if i > 0 {
				prev = res[i-1].seq
			}
			s.republish(rp, c.subj, c.hdr, c.msg, res[i].seq, prev, res[i].ts)
		}
	}
	s.batchPubAck(reply, last, id, uint64(len(cs)))
}

// rollBackPartialBatch takes back an atomic batch a crash cut short: its messages reach the
// store only at the commit, in order, and the last carries Nats-Batch-Commit, so a last
// message with a batch id and no commit header is the end of a batch that was never
// acknowledged.
func (s *stream) rollBackPartialBatch() {
	sm, err := s.store.LoadLastMsg("")
	if err != nil || sm == nil || len(sm.Header) == 0 {
		return
	}
	id, _ := header(sm.Header, hdrBatchID)
	if len(id) == 0 {
		return
	}
	if _, ok := header(sm.Header, hdrBatchCommit); ok {
		return
	}
	bseq, ok := headerUint(sm.Header, hdrBatchSeq)
	if !ok || bseq == 0 || bseq > sm.Seq {
		return
	}
	// A message a schedule fired keeps the headers of what it copies, a batch's included:
	// it is a batch's tail only if the messages before it are that batch's, in order (one
	// that limits removed meanwhile does not count against it). A single message with
	// Nats-Scheduler cannot be told from such a copy and is kept.
	if v, _ := header(sm.Header, hdrScheduler); len(v) > 0 && bseq == 1 {
		return
	}
	for i := uint64(1); i < bseq; i++ {
		prev, err := s.store.LoadMsg(sm.Seq - i)
		if err != nil || prev == nil {
			continue
		}
		if pid, _ := header(prev.Header, hdrBatchID); string(pid) != string(id) {
			return
		}
		if n, ok := headerUint(prev.Header, hdrBatchSeq); !ok || n != bseq-i {
			return
		}
	}
	to := sm.Seq - bseq
	s.a.js.warnf("JetStream stream '%s > %s': taking back a partially written batch (sequences %d to %d)", s.a.name, s.name, to+1, sm.Seq)
	if err := s.store.Truncate(to); err != nil {
		s.a.js.warnf("JetStream stream '%s > %s': could not take back a partial batch: %v", s.a.name, s.name, err)
	}
}
