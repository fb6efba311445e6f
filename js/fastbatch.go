package js

import (
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/loop"
)

// Fast batch operations, the next-to-last token of the reply subject.
const (
	fastOpStart = iota
	fastOpAppend
	fastOpCommit
	fastOpCommitEOB
	fastOpPing
)

// parseFastReply reads a fast batch reply subject; ok is false for a malformed one.
func parseFastReply(reply string) (r fastRef, ok bool) {
	rest := reply[:len(reply)-len(fastBatchSuffix)]
	tok := func() (string, bool) {
		i := strings.LastIndexByte(rest, '.')
		if i < 0 {
			return "", false
		}
		t := rest[i+1:]
		rest = rest[:i]
		return t, true
	}
	t, ok := tok()
	if !ok {
		return r, false
	}
	op, err := strconv.ParseUint(t, 10, 8)
	if err != nil || op > fastOpPing {
		return r, false
	}
	r.ping, r.eob = op == fastOpPing, op == fastOpCommitEOB
	r.commit = r.eob || op == fastOpCommit
	if t, ok = tok(); !ok {
		return r, false
	}
	seq, err := strconv.ParseUint(t, 10, 64)
	if err != nil || seq == 0 || seq == 1<<64-1 {
		return r, false
	}
	r.seq = seq
	if (seq == 1 && r.eob) || (op == fastOpStart && seq != 1) || (op == fastOpAppend && seq <= 1) {
		return r, false
	}
	if t, ok = tok(); !ok || (t != "fail" && t != "ok") {
		return r, false
	}
	r.gapOk = t == "ok"
	if t, ok = tok(); !ok {
		return r, false
	}
	flow, err := strconv.ParseInt(t, 10, 64)
	switch {
	case err != nil || flow <= 0:
		r.flow = fastDefaultFlow
	case flow > 1<<16-1:
		r.flow = 1<<16 - 1
	default:
		r.flow = uint16(flow)
	}
	if t, ok = tok(); !ok {
		return r, false
	}
	r.id = t
	return r, true
}

func (s *stream) sendFlow(reply string, seq uint64, msgs uint16) {
	if reply == "" {
		return
	}
	b := append([]byte(`{"type":"ack","seq":`), strconv.FormatUint(seq, 10)...)
	b = append(append(b, `,"msgs":`...), strconv.FormatUint(uint64(msgs), 10)...)
	_ = s.ic.Publish(reply, "", nil, append(b, '}'))
}

func (s *stream) sendGap(reply string, last, seq uint64) {
	if reply == "" {
		return
	}
	b := append([]byte(`{"type":"gap","last_seq":`), strconv.FormatUint(last, 10)...)
	b = append(append(b, `,"seq":`...), strconv.FormatUint(seq, 10)...)
	_ = s.ic.Publish(reply, "", nil, append(b, '}'))
}

func (s *stream) sendFlowErr(reply string, seq uint64, e *APIError) {
	if reply == "" {
		return
	}
	doc := struct {
		Type  string    `json:"type"`
		Seq   uint64    `json:"seq"`
		Error *APIError `json:"error"`
	}{"err", seq, e}
	b, _ := jsonMarshal(doc)
	_ = s.ic.Publish(reply, "", nil, b)
}

// fastInitFlow sets how often b is acknowledged: what the client asks (up to 500) when it
// is the only fast batch, one message at first when others share the stream (bt.mu held).
func (bt *batching) fastInitFlow(b *fastBatch) {
	b.ackMessages = min(fastMaxAckMsgs, b.maxAckMessages)
	if len(bt.fast) > 1 {
		b.ackMessages = 1
	}
}

// checkFlow sends a flow acknowledgement once ackMessages more have been stored, ramping
// the window towards the stream's share (bt.mu held).
func (s *stream) checkFlow(b *fastBatch, reply string) bool {
	am := uint64(b.ackMessages)
	if b.pseq < b.fseq+am {
		return false
	}
	b.fseq += (b.pseq - b.fseq) / am * am
	share := uint16(fastMaxAckMsgs / len(s.bt.fast))
	share = max(share, 1)
	share = min(share, b.maxAckMessages)
	if b.ackMessages < share {
		b.ackMessages = min(b.ackMessages*2, share)
	} else if b.ackMessages > share {
		b.ackMessages = max(b.ackMessages/2, share)
	}
	s.sendFlow(reply, b.fseq, b.ackMessages)
	return true
}

// fastCommit ends b: it answers now when everything taken is stored, otherwise the last
// store acknowledgement does. It reports whether b is finished (bt.mu held).
func (s *stream) fastCommit(b *fastBatch, id, reply string) bool {
	if b.gone || (!b.commit && !b.timer.Stop()) {
		return true
	}
	b.commit = true
	if b.lseq == b.pseq {
		s.dropFast(id, b)
		s.batchPubAck(reply, b.sseq, id, b.lseq)
		return true
	}
	return false
}

// fastBatchMsg takes a message whose reply ends in ".$FI".
func (s *stream) fastBatchMsg(cfg *StreamConfig, m *loop.WorkMsg, subject, reply string) {
	raw := m.Reply // flow messages go out even with no_ack, as nats-server's
	hdr, msg := m.Hdr, m.Data
	fail := func(e *APIError) { s.batchReplyErr(reply, e) }
	if cfg.Sealed {
		fail(JSStreamSealedErr)
		return
	}
	if e := s.a.limitsExceeded(cfg.Storage); e != nil {
		fail(e)
		return
	}
	if max := int(cfg.MaxMsgSize); max >= 0 && (len(hdr) > max || len(msg) > max-len(hdr)) {
		fail(JSStreamMessageExceedsMaximumErr)
		return
	}
	if !cfg.AllowBatchPublish {
		fail(JSBatchPublishDisabledErr)
		return
	}
	fr, ok := parseFastReply(raw)
	if !ok {
		fail(JSBatchPublishInvalidPatternErr)
		return
	}
	if len(fr.id) > batchMaxIDLen {
		fail(JSBatchPublishInvalidBatchIDErr)
		return
	}
	bt := s.batches()
	bt.mu.Lock()
	b := bt.fast[fr.id]
	if b == nil {
		if fr.seq != 1 || fr.ping {
			bt.mu.Unlock()
			fail(JSBatchPublishUnknownBatchIDErr)
			return
		}
		if len(bt.fast)+1 > fastMaxPerStream {
			bt.mu.Unlock()
			fail(JSBatchPublishTooManyInflight)
			return
		}
		if s.a.js.fastBatches.Add(1) > fastMaxTotal {
			s.a.js.fastBatches.Add(-1)
			bt.mu.Unlock()
			fail(JSBatchPublishTooManyInflight)
			return
		}
		id := strings.Clone(fr.id)
		fr.id = id
		b = &fastBatch{gapOk: fr.gapOk, maxAckMessages: fr.flow}
		nb := b
		b.timer = time.AfterFunc(batchTimeout, func() {
			bt.mu.Lock()
			s.dropFast(id, nb)
			bt.mu.Unlock()
		})
		if bt.fast == nil {
			bt.fast = make(map[string]*fastBatch)
		}
		bt.fast[id] = b
		bt.fastInitFlow(b)
	}
	expired := false
	if !b.commit {
		expired = b.gone || !b.timer.Reset(batchTimeout)
	}
	if fr.ping {
		flow := true
		if fr.seq > b.lseq || expired {
			s.sendGap(raw, b.lseq+1, fr.seq+1)
			if b.gapOk && !expired {
				b.lseq = fr.seq
				if b.pending == 0 {
					b.pseq = b.lseq
				}
				flow = !s.checkFlow(b, raw)
			} else if s.fastCommit(b, fr.id, raw) {
				s.dropFast(fr.id, b)
				flow = false
			}
		}
		if flow {
			s.sendFlow(raw, b.fseq, b.ackMessages)
		}
		bt.mu.Unlock()
		return
	}
	if b.commit {
		// Committing already (after an error or a gap): the client waits for the PubAck.
		bt.mu.Unlock()
		return
	}
	b.lseq++
	if b.lseq != fr.seq || expired {
		if fr.seq != b.lseq {
			s.sendGap(raw, b.lseq, fr.seq)
		}
		if b.gapOk && !expired && fr.seq > b.lseq {
			b.lseq = fr.seq
		} else {
			b.lseq--
			if s.fastCommit(b, fr.id, raw) {
				s.dropFast(fr.id, b)
			}
			bt.mu.Unlock()
			return
		}
	}
	if fr.commit {
		if fr.eob {
			b.lseq--
			if b.pending == 0 {
				b.pseq = b.lseq
			}
		}
		done := s.fastCommit(b, fr.id, raw)
		if fr.eob {
			if done {
				s.dropFast(fr.id, b)
			}
			bt.mu.Unlock()
			return
		}
	}
	if fr.seq == 1 && reply != "" && !fr.commit {
		s.sendFlow(raw, 0, b.ackMessages)
	}
	// The checks may wait for earlier messages' acknowledgements, which take bt.mu: only
	// the worker changes what the checks below read of b, so it is let go meanwhile.
	bt.mu.Unlock()
	c := checked{stagedMsg: stagedMsg{subject, hdr, msg}}
	var last uint64
	if _, ok := header(hdr, hdrExpectedLastSeq); ok {
		last = s.settledLastSeq()
	}
	dup, e := s.checkBatchMsg(&batchDiff{}, cfg, &c, last)
	bt.mu.Lock()
	if b.gone {
		bt.mu.Unlock()
		return
	}
	if e != nil {
		isDup := e == JSAtomicPublishContainsDuplicateMessageErr
		if isDup {
			if b.pending == 0 {
				b.pseq = fr.seq
				s.checkFlow(b, raw)
			}
			if !fr.commit {
				bt.mu.Unlock()
				return
			}
		}
		if !b.gapOk && b.lseq == 1 {
			// A batch failing at once is answered as a plain publish would be.
			s.dropFast(fr.id, b)
			bt.mu.Unlock()
			if isDup && dup > 0 {
				if raw != "" {
					out := append(append([]byte(nil), s.pubAck...), strconv.FormatUint(dup, 10)...)
					out = append(out, `,"duplicate": true,"batch":`...)
					out = strconv.AppendQuote(out, fr.id)
					out = append(append(out, `,"count":`...), strconv.FormatUint(fr.seq, 10)...)
					_ = s.ic.Publish(raw, "", nil, append(out, '}'))
				}
			} else {
				s.batchReplyErr(raw, e)
			}
			return
		}
		if !isDup {
			s.sendFlowErr(raw, fr.seq, e)
		}
		if b.gapOk && !fr.commit {
			bt.mu.Unlock()
			return
		}
		if !isDup {
			b.lseq--
			if b.pending == 0 {
				b.pseq = b.lseq
			}
		}
		if s.fastCommit(b, fr.id, raw) {
			s.dropFast(fr.id, b)
		}
		bt.mu.Unlock()
		return
	}
	b.pending++
	bt.mu.Unlock()
	s.storeFast(cfg, b, &fr, &c, raw)
}

// storeFast stores a fast batch message; its acknowledgement feeds the batch's flow.
func (s *stream) storeFast(cfg *StreamConfig, b *fastBatch, fr *fastRef, c *checked, reply string) {
	if c.rollup != "" || c.purge != "" || cfg.Retention == InterestPolicy {
		s.settle()
		var seq uint64
		var ts int64
		var err error
		if cfg.Retention == InterestPolicy && c.rollup == "" {
			seq, err = s.store.SkipMsgs(1)
			ts = time.Now().UnixNano()
		} else {
			seq, ts, err = s.store.StoreMsg(c.subj, c.hdr, c.msg)
			if err == nil {
				if c.rollup == rollupSubject {
					_, err = s.store.PurgeEx(c.subj, seq, 0)
				} else if c.rollup == rollupAll {
					_, err = s.store.Compact(seq)
				}
				if err != nil {
					s.a.js.warnf("JetStream stream '%s > %s' roll-up purge failed: %v", s.a.name, s.name, err)
					err = nil
				}
				s.afterStore(seq, ts, c.subj, c.hdr)
			}
		}
		if err != nil {
			s.batchReplyErr(reply, storeError(err))
			return
		}
		s.imu.Lock()
		s.lseq, s.lmsgID = seq, c.msgID
		if c.msgID != "" {
			s.addDedupe(c.msgID, seq, ts)
		}
		s.imu.Unlock()
		s.fastStored(b, fr.id, fr.seq, reply, seq)
		return
	}
	s.imu.Lock()
	s.inflight++
	if c.msgID != "" {
		s.ddPending[c.msgID]++
	}
	s.imu.Unlock()
	p := pendingPool.Get().(*pending)
	p.s, p.reply, p.msgID, p.subject, p.ttl = s, reply, c.msgID, c.subj, c.ttl
	p.fast, p.fastID, p.fastSeq = b, fr.id, fr.seq
	if s.rp.Load() != nil || s.sch.Load() != nil {
		p.hdr, p.msg = c.hdr, c.msg
	}
	s.store.StoreAsync(c.subj, c.hdr, c.msg, p.cb)
}

// fastStored records that a fast batch message is durable: the flow acknowledgement when
// due, the PubAck when it completes a commit.
func (s *stream) fastStored(b *fastBatch, id string, bseq uint64, reply string, seq uint64) {
	bt := s.bt
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if b.gone {
		return
	}
	b.reply = reply
	if b.pending > 0 {
		b.pending--
	}
	b.sseq = seq
	if b.pending == 0 {
		b.pseq = b.lseq
	} else {
		b.pseq = bseq
	}
	if b.lseq == b.pseq && b.commit {
		s.dropFast(id, b)
		s.batchPubAck(reply, b.sseq, id, b.lseq)
		return
	}
	s.checkFlow(b, reply)
}
