package filestore

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/s2"
)

// writer is the store's only mutator. While it writes and fsyncs one batch,
// the next batch queues up behind it; that is what turns 256 concurrent
// writers into roughly one fsync per 256 records.
func (s *FileStore) writer() {
	defer close(s.done)
	var tick <-chan time.Time
	if s.cfg.SyncInterval > 0 {
		t := time.NewTicker(s.cfg.SyncInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.wake:
		case <-tick:
			s.periodicSync()
			continue
		}
		for {
			s.qmu.Lock()
			ops := s.queue
			if len(ops) > 0 {
				s.queue = s.spare[:0]
			}
			closing := s.closed
			s.qmu.Unlock()
			if len(ops) == 0 {
				if closing {
					s.shutdown()
					return
				}
				break
			}
			s.process(ops)
			clear(ops)
			s.spare = ops[:0]
		}
	}
}

func (s *FileStore) shutdown() {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.failed == nil {
		if s.act != nil && s.act.f != nil && s.cfg.SyncInterval >= 0 {
			if err := s.act.f.Sync(); err != nil {
				s.failed = err
			}
		}
		if s.failed == nil {
			s.writeIndex()
		}
	}
	s.closeFiles()
}

func (s *FileStore) closeFiles() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.blocks {
		if b.f != nil {
			b.f.Close()
			b.f = nil
		}
	}
}

func (s *FileStore) periodicSync() {
	if !s.dirty || s.failed != nil || s.act == nil || s.act.f == nil {
		return
	}
	if err := s.act.f.Sync(); err != nil {
		s.failed = err
		return
	}
	s.dirty = false
	if s.indexStale {
		s.writeIndex()
	}
}

func (s *FileStore) process(ops []*op) {
	s.wbuf = s.wbuf[:0]
	s.segs = s.segs[:0]
	s.mu.Lock()
	for _, o := range ops {
		if s.failed != nil {
			o.err = ErrFailed
			continue
		}
		s.apply(o)
	}
	if s.floor > 0 {
		s.emitMarker(kindFloor, s.floor, 0)
		s.floor = 0
	}
	s.collectEmpty()
	last := s.last
	s.mu.Unlock()

	err := s.writeSegs()
	if err != nil {
		s.failed = err
		s.logf("filestore: %s: write failed, store is now read-only: %v", s.cfg.Dir, err)
	}
	s.mu.Lock()
	if err == nil {
		s.durable = last
	}
	s.mu.Unlock()
	for _, o := range ops {
		if err != nil && o.err == nil {
			o.err = err
		}
		if o.cb != nil {
			o.cb(o.rseq, o.rts, o.err)
		}
	}
	if err != nil {
		return
	}
	// Work that no acknowledgement waits for.
	for _, b := range s.rolled {
		if s.cfg.SyncInterval > 0 && b.f != nil {
			// Periodic syncing only covers the active block; a block leaving
			// that role is synced now so no unsynced data is left behind.
			if err := b.f.Sync(); err != nil {
				s.failed = err
				return
			}
		}
		if s.cfg.Compress && !b.sealed && s.findLive(b) {
			if err := s.seal(b); err != nil {
				s.logf("filestore: %s: sealing block %d: %v", s.cfg.Dir, b.id, err)
			}
		}
	}
	if len(s.rolled) > 0 {
		s.rolled = s.rolled[:0]
		s.indexStale = true
	}
	if len(s.dead) > 0 {
		for _, b := range s.dead {
			s.cmu.Lock()
			delete(s.cache, b)
			s.cmu.Unlock()
			if b.f != nil {
				b.f.Close()
				b.f = nil
			}
			_ = s.fs.Remove(s.blockPath(b.id, b.sealed))
		}
		s.dead = s.dead[:0]
		s.indexStale = true
	}
	if s.indexStale && s.cfg.SyncInterval == 0 {
		s.writeIndex()
	}
	s.armExpiry()
}

func (s *FileStore) findLive(b *block) bool {
	for _, x := range s.blocks {
		if x == b {
			return true
		}
	}
	return false
}

func (s *FileStore) writeSegs() error {
	var created bool
	synced := map[*block]bool{}
	for _, sg := range s.segs {
		b := sg.b
		if b.f == nil {
			f, err := s.fs.OpenFile(s.blockPath(b.id, false), true)
			if err != nil {
				return err
			}
			s.mu.Lock()
			b.f = f
			s.mu.Unlock()
			created = true
		}
		b.fresh = false
		if _, err := b.f.WriteAt(s.wbuf[sg.start:sg.end], sg.off); err != nil {
			return err
		}
		if s.cfg.SyncInterval == 0 && !synced[b] {
			synced[b] = true
		}
	}
	if len(s.segs) > 0 {
		s.dirty = true
	}
	if s.cfg.SyncInterval != 0 {
		if created && s.cfg.SyncInterval > 0 {
			return s.fs.SyncDir(s.dir)
		}
		return nil
	}
	for b := range synced {
		if err := b.f.Sync(); err != nil {
			return err
		}
	}
	s.dirty = false
	if created {
		return s.fs.SyncDir(s.dir)
	}
	return nil
}

// ---- applying ops (writer, under mu) ----

func (s *FileStore) apply(o *op) {
	l := &s.cfg.Limits
	switch o.kind {
	case opStore:
		ss := s.subjects[o.subj]
		if l.Discard == DiscardNew {
			if l.MaxMsgs > 0 && s.msgs+1 > uint64(l.MaxMsgs) {
				o.err = ErrMaxMsgs
				return
			}
			if l.MaxBytes > 0 && s.bytes+o.size > uint64(l.MaxBytes) {
				o.err = ErrMaxBytes
				return
			}
		}
		if l.DiscardNewPerSubject && l.MaxMsgsPerSubject > 0 && ss != nil && ss.msgs >= uint64(l.MaxMsgsPerSubject) {
			o.err = ErrMaxMsgsPerSubj
			return
		}
		if ss == nil {
			ss = &subjState{name: o.subj}
			s.subjects[o.subj] = ss
		}
		seq := s.last + 1
		ts := time.Now().UnixNano()
		// Expiry walks from the front; it needs timestamps that never go back.
		if ts < s.lastTS {
			ts = s.lastTS
		}
		s.lastTS = ts
		patchRecord(o.rec, seq, ts)
		b := s.blockFor(seq)
		off, n := s.emit(o.rec)
		b.ents = append(b.ents, ent{off: off, slen: n, ts: ts, ss: ss, size: uint32(o.size), live: true})
		b.live++
		s.last = seq
		if s.msgs == 0 {
			s.first = seq
		}
		s.msgs++
		s.bytes += o.size
		if ss.msgs == 0 {
			ss.first = seq
		}
		ss.msgs++
		ss.last = seq
		o.rseq, o.rts = seq, ts
		o.rec = nil
		s.enforce(ss)
	case opSkip:
		first := s.last + 1
		for i := uint64(0); i < o.n; i++ {
			seq := s.last + 1
			b := s.blockFor(seq)
			rec := appendMarker(nil, kindSkip, seq, 0)
			off, n := s.emit(rec)
			b.ents = append(b.ents, ent{off: off, slen: n})
			s.last = seq
		}
		if s.msgs == 0 {
			s.first = s.last + 1
		}
		o.rseq = first
	case opRemove:
		if s.removeSeq(o.n) {
			s.emitMarker(kindTomb, o.n, 0)
			o.rseq = 1
		} else {
			o.err = ErrNotFound
		}
	case opPurge:
		o.rseq = s.removeBelow(s.last + 1)
	case opCompact:
		if o.n == 0 {
			o.err = errors.New("filestore: compact to sequence 0")
			return
		}
		o.rseq = s.removeBelow(o.n)
	case opPurgeSubj:
		ss := s.subjects[o.subj]
		if ss == nil {
			return
		}
		for seq := ss.first; seq <= ss.last && ss.msgs > 0; seq++ {
			if e := s.entLocked(seq); e != nil && e.live && e.ss == ss {
				s.removeSeq(seq)
				s.emitMarker(kindTomb, seq, 0)
				o.rseq++
			}
		}
	case opExpire:
		s.armed = false
		if l.MaxAge <= 0 || s.msgs == 0 {
			return
		}
		cutoff := time.Now().UnixNano() - int64(l.MaxAge)
		floor := uint64(0)
		for seq := s.first; seq <= s.last; seq++ {
			e := s.entLocked(seq)
			if e == nil || !e.live {
				continue
			}
			if e.ts > cutoff {
				break
			}
			floor = seq + 1
		}
		if floor > 0 {
			s.removeBelow(floor)
		}
	}
}

// enforce applies discard-old limits after a store of subject ss.
func (s *FileStore) enforce(ss *subjState) {
	l := &s.cfg.Limits
	if l.MaxMsgsPerSubject > 0 && !l.DiscardNewPerSubject {
		for ss.msgs > uint64(l.MaxMsgsPerSubject) {
			seq := s.subjFirst(ss)
			if seq == 0 {
				break
			}
			if seq == s.first {
				// Removing from the front needs no tombstone: the floor covers it.
				s.removeSeq(seq)
				s.floor = max(s.floor, s.first)
			} else {
				s.removeSeq(seq)
				s.emitMarker(kindTomb, seq, 0)
			}
		}
	}
	if l.Discard != DiscardOld {
		return
	}
	for s.msgs > 0 && ((l.MaxMsgs > 0 && s.msgs > uint64(l.MaxMsgs)) || (l.MaxBytes > 0 && s.bytes > uint64(l.MaxBytes))) {
		s.removeSeq(s.first)
		s.floor = max(s.floor, s.first)
	}
}

func (s *FileStore) subjFirst(ss *subjState) uint64 {
	for seq := max(ss.first, s.first); seq <= ss.last; seq++ {
		if e := s.entLocked(seq); e != nil && e.live && e.ss == ss {
			ss.first = seq
			return seq
		}
	}
	return 0
}

// removeSeq marks seq removed and fixes counters; it emits nothing.
func (s *FileStore) removeSeq(seq uint64) bool {
	b := s.findBlock(seq)
	if b == nil {
		return false
	}
	e := &b.ents[seq-b.first]
	if !e.live {
		return false
	}
	e.live = false
	b.live--
	s.msgs--
	s.bytes -= uint64(e.size)
	ss := e.ss
	e.ss = nil
	ss.msgs--
	if ss.msgs == 0 {
		delete(s.subjects, ss.name)
	} else if seq == ss.first {
		ss.first = seq + 1
	} else if seq == ss.last {
		for p := seq - 1; p >= ss.first; p-- {
			if pe := s.entLocked(p); pe != nil && pe.live && pe.ss == ss {
				ss.last = p
				break
			}
		}
	}
	if seq == s.first {
		s.advanceFirst()
	}
	return true
}

func (s *FileStore) advanceFirst() {
	if s.msgs == 0 {
		s.first = s.last + 1
		return
	}
	i := 0
	for i < len(s.blocks) && s.blocks[i].end() <= s.first {
		i++
	}
	for ; i < len(s.blocks); i++ {
		b := s.blocks[i]
		if b.live == 0 {
			continue
		}
		for seq := max(s.first, b.first); seq < b.end(); seq++ {
			if b.ents[seq-b.first].live {
				s.first = seq
				return
			}
		}
	}
	s.first = s.last + 1
}

// removeBelow removes every message below floor and records one floor marker.
func (s *FileStore) removeBelow(floor uint64) uint64 {
	var n uint64
	for _, b := range s.blocks {
		if b.first >= floor {
			break
		}
		if b.live == 0 {
			continue
		}
		for seq := b.first; seq < b.end() && seq < floor; seq++ {
			if b.ents[seq-b.first].live {
				s.removeSeq(seq)
				n++
			}
		}
	}
	if floor > s.last+1 {
		s.last = floor - 1
		if s.lastTS == 0 {
			s.lastTS = time.Now().UnixNano()
		}
	}
	if s.msgs == 0 {
		s.first = s.last + 1
	}
	s.floor = max(s.floor, floor)
	return n
}

// blockFor returns the block seq must be appended to, starting a new one
// when the active block is full or seq does not follow on from it (blocks
// hold contiguous sequences so lookups are an index, not a search).
func (s *FileStore) blockFor(seq uint64) *block {
	b := s.act
	if b == nil || b.size >= s.cfg.BlockSize || (len(b.ents) > 0 && b.end() != seq) || b.sealed {
		b = s.roll()
	}
	if len(b.ents) == 0 {
		b.first = seq
	}
	return b
}

func (s *FileStore) roll() *block {
	if s.act != nil && !s.act.fresh {
		s.rolled = append(s.rolled, s.act)
	}
	s.nextID++
	b := &block{id: s.nextID, first: s.last + 1, fresh: true}
	s.blocks = append(s.blocks, b)
	s.act = b
	return b
}

// emit appends a plaintext record to the active block in this batch.
func (s *FileStore) emit(rec []byte) (uint32, uint32) {
	b := s.act
	if b == nil {
		b = s.roll()
	}
	start := len(s.wbuf)
	if s.cry != nil {
		s.wbuf = s.cry.appendFrame(s.wbuf, rec)
	} else {
		s.wbuf = append(s.wbuf, rec...)
	}
	n := len(s.wbuf) - start
	off := b.size
	if k := len(s.segs); k > 0 && s.segs[k-1].b == b {
		s.segs[k-1].end = len(s.wbuf)
	} else {
		s.segs = append(s.segs, seg{b: b, off: off, start: start, end: len(s.wbuf)})
	}
	b.size += int64(n)
	return uint32(off), uint32(n)
}

func (s *FileStore) emitMarker(kind byte, seq uint64, aux int64) {
	var buf [recMin]byte
	rec := appendMarker(buf[:0], kind, seq, aux)
	if s.act == nil || s.act.sealed {
		s.roll()
	}
	s.emit(rec)
	if kind == kindFloor {
		for i := range s.act.markers {
			if s.act.markers[i].kind == kindFloor {
				s.act.markers[i].seq = max(s.act.markers[i].seq, seq)
				return
			}
		}
	}
	s.act.markers = append(s.act.markers, marker{kind, seq, aux})
}

// collectEmpty drops emptied blocks. A block in the middle may hold the only
// record of deletions in earlier blocks, so before it goes, its markers (and
// a gap marker for its own range) are re-emitted into the active block.
func (s *FileStore) collectEmpty() {
	var keep []*block
	var gone []*block
	for _, b := range s.blocks {
		if b.live == 0 && b != s.act && !b.fresh {
			gone = append(gone, b)
		} else {
			keep = append(keep, b)
		}
	}
	if len(gone) == 0 {
		return
	}
	s.blocks = keep
	earliest := s.act.first
	if len(keep) > 0 {
		earliest = keep[0].first
	}
	for _, b := range gone {
		if len(b.ents) > 0 && b.first >= earliest {
			s.emitMarker(kindGap, b.first, int64(b.end()-1))
		}
		for _, m := range b.markers {
			if m.seq >= earliest {
				s.emitMarker(m.kind, m.seq, m.aux)
			}
		}
	}
	s.dead = append(s.dead, gone...)
}

func (s *FileStore) armExpiry() {
	l := &s.cfg.Limits
	if l.MaxAge <= 0 || s.armed {
		return
	}
	s.mu.RLock()
	var ts int64
	if s.msgs > 0 {
		if e := s.entLocked(s.first); e != nil {
			ts = e.ts
		}
	}
	s.mu.RUnlock()
	if ts == 0 {
		return
	}
	s.armed = true
	d := time.Duration(ts + int64(l.MaxAge) - time.Now().UnixNano())
	if d < time.Millisecond {
		d = time.Millisecond
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(d, func() { s.enqueue(&op{kind: opExpire}) })
	} else {
		s.timer.Reset(d)
	}
}

// ---- sealing (compression) ----

const sealMagic = "NSB1"

// seal rewrites a full block as one S2-compressed (and, if configured,
// encrypted) unit. The new file is complete and synced before the rename, so
// a crash leaves the old block or the new one.
func (s *FileStore) seal(b *block) error {
	data, err := readAll(b.f)
	if err != nil {
		return err
	}
	res := scanBlock(data, s.cry)
	raw := make([]byte, 0, len(data))
	offs := make(map[uint64][2]uint32, len(res.recs))
	for _, r := range res.recs {
		rec := data[r.off : r.off+r.slen]
		if s.cry != nil {
			p, _, ok := s.cry.openFrame(rec)
			if !ok {
				return ErrCorrupt
			}
			rec = p
		}
		if r.kind == kindMsg {
			offs[r.seq] = [2]uint32{uint32(len(raw)), uint32(len(rec))}
		}
		raw = append(raw, rec...)
	}
	out := s.sealBytes(raw)
	name := s.blockPath(b.id, true)
	if err := writeFileAtomic(s.fs, s.dir, filepath.Base(name), out); err != nil {
		return err
	}
	nf, err := s.fs.OpenFile(name, false)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for seq := b.first; seq < b.end(); seq++ {
		e := &b.ents[seq-b.first]
		if o, ok := offs[seq]; ok {
			e.off, e.slen = o[0], o[1]
		}
	}
	old := b.f
	b.f = nf
	b.sealed = true
	s.mu.Unlock()
	old.Close()
	return s.fs.Remove(s.blockPath(b.id, false))
}

func (s *FileStore) sealBytes(raw []byte) []byte {
	body := s2.Encode(nil, raw)
	out := make([]byte, 0, len(body)+64)
	out = append(out, sealMagic...)
	var flags byte = 1
	if s.cry != nil {
		flags |= 2
	}
	out = append(out, flags)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(raw)))
	if s.cry != nil {
		out = s.cry.appendSealed(out, body)
	} else {
		out = append(out, body...)
	}
	return binary.LittleEndian.AppendUint64(out, recSum(out))
}

func (s *FileStore) unseal(data []byte) ([]byte, error) {
	if len(data) < 9+8 || string(data[:4]) != sealMagic {
		return nil, ErrCorrupt
	}
	n := len(data) - 8
	if binary.LittleEndian.Uint64(data[n:]) != recSum(data[:n]) {
		return nil, ErrCorrupt
	}
	flags := data[4]
	rawLen := int(binary.LittleEndian.Uint32(data[5:]))
	body := data[9:n]
	if flags&2 != 0 {
		if s.cry == nil {
			return nil, errors.New("filestore: encrypted block but no key configured")
		}
		p, err := s.cry.open(body)
		if err != nil {
			return nil, ErrCorrupt
		}
		body = p
	}
	raw, err := s2.Decode(nil, body)
	if err != nil || len(raw) != rawLen {
		return nil, ErrCorrupt
	}
	return raw, nil
}
