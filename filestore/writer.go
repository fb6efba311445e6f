package filestore

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
)

// One writer goroutine applies every mutation. With SyncInterval 0 it
// commits in groups:
//
//	drain the queue: apply + encode into the open commit, again and again
//	queue still empty after a yield: pwrite the commit, fdatasync, mark it
//	durable, call every callback, hand sealing/deleting/index.db to the
//	finisher
//
// Why wait for the queue to stay empty across a runtime.Gosched: calling the
// callbacks wakes the goroutines whose records were just made durable, and
// those that publish in a loop resubmit within microseconds. Syncing as soon
// as the first of them is encoded would split them over two fsyncs, and with
// fsyncs strictly one after another (a second fdatasync on the same file
// only queues behind the first) that doubles everyone's latency. Yielding
// lets the woken goroutines run first, so one fsync covers the whole wave.
// maxLinger and maxCommitBytes bound how long a queue that never empties can
// hold a commit back.
//
// The fsync runs on the writer itself: handing it to another goroutine cost
// two scheduler wake-ups per commit (tens of µs under load) for an overlap
// that buys nothing here, since a commit's writers are all waiting for it.
const (
	maxLinger      = 250 * time.Microsecond
	maxCommitBytes = 4 << 20
)

// commit is the batch the writer has applied and encoded (in s.wbuf/s.segs)
// and not yet made durable.
type commit struct {
	ops     []*op
	since   time.Time     // when the first batch was applied
	last    uint64        // s.last after the commit: durable once it is synced
	files   []File        // block files the commit wrote to
	created bool          // the commit created a block file: the directory needs a sync
	rolled  []*block      // blocks that stopped being active in this commit
	dead    []*block      // emptied blocks dropped in this commit
	idx     []byte        // index.db describing the store after this commit, when it changed
	updates []update      // storage updates, reported once the commit is durable
	barrier chan struct{} // not a commit: the finisher closes it on reaching it
}

func (s *FileStore) grouped() bool { return s.cfg.SyncInterval == 0 }

// fail records the first error that fails the store.
func (s *FileStore) fail(err error) {
	if s.failure.CompareAndSwap(nil, &err) {
		s.logf("filestore: %s: write or sync failed, store is now read-only: %v", s.cfg.Dir, err)
	}
}

// failed is the error that failed the store, or nil.
func (s *FileStore) failed() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// writerIdle is how long a writer goroutine waits for work before it ends. A store
// holds no goroutine while idle (10,000 streams or KV buckets would otherwise park
// 10,000), and a busy one keeps its writer: starting one per commit would add a
// goroutine start, and stack growth through the commit path, to every fsync round.
var writerIdle = time.Second

// writer does the writer's work until the store closes or it has waited writerIdle
// for more. Whoever queues work for the writer when none runs starts one (enqueue,
// kick, stop, tick); wRunning, under qmu, says whether one does.
func (s *FileStore) writer() {
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	for {
		s.drainMu.Lock()
		if s.tickT != nil && s.takeSyncDue() {
			s.periodicSync()
		}
		if s.drain(true) {
			s.shutdown()
			s.drainMu.Unlock()
			close(s.done)
			return
		}
		s.drainMu.Unlock()
		idle.Reset(writerIdle)
		select {
		case <-s.wake:
		case <-idle.C:
			s.qmu.Lock()
			// Records StoreAsyncHeld left untold wait for their caller's Flush, which
			// starts a writer again.
			if !s.closed && !s.syncDue && len(s.queue) == s.nheld {
				s.wRunning = false
				s.qmu.Unlock()
				return
			}
			s.qmu.Unlock()
		}
	}
}

// takeSyncDue reports whether the periodic sync is due, and clears it.
func (s *FileStore) takeSyncDue() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	due := s.syncDue
	s.syncDue = false
	return due
}

// tick is the periodic sync's timer (SyncInterval > 0).
func (s *FileStore) tick() {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return
	}
	s.syncDue = true
	t := s.tickT
	s.qmu.Unlock()
	t.Reset(s.cfg.SyncInterval)
	s.kick()
}

// drain applies queued operations until the queue stays empty, committing
// on the way. It reports whether the store is closing. linger is false for a
// Flush by the stream worker that queued the records: what would join the
// commit during a yield reaches the store through that same worker, so there
// is nothing to wait for.
func (s *FileStore) drain(linger bool) bool {
	yielded := !linger
	for {
		s.qmu.Lock()
		ops, closing := s.queue, s.closed
		if len(ops) > 0 {
			s.queue, s.queued = nil, 0
			if n := len(s.free); n > 0 {
				s.queue = s.free[n-1]
				s.free = s.free[:n-1]
			}
		}
		s.qmu.Unlock()
		if len(ops) > 0 {
			s.process(ops)
			yielded = !linger
			if c := s.cur; c != nil && (len(s.wbuf) >= maxCommitBytes || time.Since(c.since) >= maxLinger) {
				s.commit()
			}
			continue
		}
		if s.cur == nil {
			return closing
		}
		if !yielded && !closing {
			yielded = true
			runtime.Gosched()
			continue
		}
		s.commit()
		yielded = !linger
	}
}

func (s *FileStore) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// kick tells the writer there is work, starting one if none runs.
func (s *FileStore) kick() {
	s.qmu.Lock()
	start := !s.wRunning
	s.wRunning = true
	s.qmu.Unlock()
	if start {
		go s.writer()
	} else {
		s.poke()
	}
}

// recycle returns an op slice for the queue to reuse.
func (s *FileStore) recycle(ops []*op) {
	clear(ops)
	s.qmu.Lock()
	if len(s.free) < 8 {
		s.free = append(s.free, ops[:0])
	}
	s.qmu.Unlock()
}

func (s *FileStore) shutdown() {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.tickT != nil {
		s.tickT.Stop()
	}
	s.qmu.Lock()
	removing := s.removing
	s.qmu.Unlock()
	if s.grouped() {
		s.fwg.Wait() // the finisher drains what it was handed, then ends
		if s.finIdx != nil && !removing {
			_ = s.writeIndexBytes(s.finIdx)
		}
		s.finIdx = nil
	}
	if s.failed() == nil && !removing {
		if s.act != nil && s.act.f != nil && s.cfg.SyncInterval >= 0 {
			if err := s.act.f.Datasync(); err != nil {
				s.fail(err)
			}
		}
		if s.jn != nil && s.failed() == nil {
			// Everything is in the block files now; a store made later in the same
			// directory (a stream deleted and created again) must not get these writes
			// replayed over its own.
			if err := s.jn.commit(&jreq{key: s.jkey, mark: true}); err != nil && !errors.Is(err, ErrJournalClosed) {
				s.fail(err)
			}
		}
		if s.failed() == nil {
			s.writeIndex()
		}
	}
	s.spareWG.Wait()
	s.dropSpare()
	s.closeFiles()
}

// syncBlocks syncs every open block file.
func (s *FileStore) syncBlocks() error {
	s.mu.RLock()
	var fs []File
	for _, b := range s.blocks {
		if b.f != nil {
			fs = append(fs, b.f)
		}
	}
	s.mu.RUnlock()
	for _, f := range fs {
		if err := f.Datasync(); err != nil {
			return err
		}
	}
	return nil
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
	if !s.dirty || s.failed() != nil || s.act == nil || s.act.f == nil {
		return
	}
	if err := s.act.f.Datasync(); err != nil {
		s.fail(err)
		return
	}
	s.dirty = false
	if s.indexStale {
		s.writeIndex()
	}
}

// process applies a batch of operations to the open commit. With
// SyncInterval != 0 it commits at once (acknowledging after write(2));
// otherwise drain decides when. A truncation runs alone, after everything
// before it is committed.
func (s *FileStore) process(ops []*op) {
	rest := ops
	for len(rest) > 0 {
		n := 0
		for n < len(rest) && rest[n].kind != opTruncate {
			n++
		}
		if n > 0 {
			s.applyBatch(rest[:n])
		}
		if n == len(rest) {
			break
		}
		if s.cur != nil {
			s.commit()
		}
		s.truncate(rest[n])
		rest = rest[n+1:]
	}
	s.recycle(ops)
	s.armExpiry()
	if !s.grouped() && s.cur != nil {
		s.commit()
	}
}

// applyBatch applies ops to the open commit.
func (s *FileStore) applyBatch(ops []*op) {
	c := s.cur
	if c == nil {
		c = &commit{since: time.Now(), ops: s.opsBuf[:0]}
		s.cur = c
	}
	s.mu.Lock()
	for _, o := range ops {
		if s.failed() != nil {
			o.err = ErrFailed
			continue
		}
		s.apply(o)
	}
	if s.msgs == 0 && s.last > 0 && s.last >= s.floorAt {
		// An emptied store says so with one floor marker, which also keeps
		// the newest stamp (State's LastTS) once its blocks are gone.
		s.floor = max(s.floor, s.last+1)
	}
	if s.floor > 0 {
		s.emitMarker(kindFloor, s.floor, s.lastTS)
		s.floor = 0
	}
	s.collectEmpty()
	c.last = s.last
	c.rolled = append(c.rolled, s.rolled...)
	c.dead = append(c.dead, s.dead...)
	if ups := s.rep.take(); len(ups) > 0 {
		c.updates = append(c.updates, ups...)
	}
	s.rolled, s.dead = s.rolled[:0], s.dead[:0]
	s.mu.Unlock()
	c.ops = append(c.ops, ops...)
}

// commit writes the open commit and, with SyncInterval 0, makes it durable;
// then it acknowledges every operation in it. A write or sync error fails
// the store and every operation in the commit that has not failed on its own.
func (s *FileStore) commit() {
	c := s.cur
	s.cur = nil
	err := s.writeSegs(c)
	s.wbuf, s.segs = s.wbuf[:0], s.segs[:0]
	if err == nil && s.grouped() {
		if s.jn != nil {
			// A new block's name is durable before the journal names it.
			if c.created {
				err = s.fs.SyncDir(s.dir)
			}
			if err == nil && len(s.jw) > 0 {
				err = s.jn.commit(&jreq{key: s.jkey, writes: s.jw})
			}
		} else {
			for _, f := range c.files {
				if err = f.Datasync(); err != nil {
					break
				}
			}
			if err == nil && c.created {
				err = s.fs.SyncDir(s.dir)
			}
		}
	}
	clear(s.jw)
	s.jw = s.jw[:0]
	if err != nil {
		s.fail(err)
		s.mu.Lock()
		s.wakeDurableLocked()
		s.mu.Unlock()
	}
	changed := len(c.rolled) > 0 || len(c.dead) > 0
	if err == nil {
		s.mu.Lock()
		s.durable = c.last
		s.wakeDurableLocked()
		if changed && s.grouped() {
			// Everything applied is in this commit, so the index describes
			// exactly what is now durable.
			c.idx = s.indexBytesLocked(c.last)
		}
		s.mu.Unlock()
	}
	if err == nil {
		deliver(s.rep.fn, c.updates)
	}
	for _, o := range c.ops {
		if err != nil && o.err == nil {
			o.err = err
		}
		if o.cb != nil {
			o.cb(o.rseq, o.rts, o.err)
		}
	}
	clear(c.ops)
	s.opsBuf = c.ops[:0]
	c.ops = nil
	if err != nil || !changed {
		return
	}
	if s.grouped() {
		s.toFinisher(c)
	} else if s.finish(c) {
		s.indexStale = true
	}
}

// toFinisher hands c to the finisher, starting one if none runs. The finisher runs only
// while it has work (an idle store holds no goroutine for it: with thousands of streams or
// KV buckets, one parked per store added up); the channel's room bounds how far it may fall
// behind the writer.
func (s *FileStore) toFinisher(c *commit) {
	s.fin <- c
	s.fmu.Lock()
	if !s.finRunning {
		s.finRunning = true
		s.fwg.Add(1)
		go s.finisher()
	}
	s.fmu.Unlock()
}

// finisher does, in commit order, what must wait until a commit is durable
// but no acknowledgement waits for: sealing full blocks, deleting emptied
// ones, rewriting index.db. It ends when it finds nothing left to do.
func (s *FileStore) finisher() {
	defer s.fwg.Done()
	idx := s.finIdx // newest index.db contents not yet written (left by an earlier run)
	s.finIdx = nil
	for {
		var c *commit
		select {
		case c = <-s.fin:
		default:
			s.fmu.Lock()
			if len(s.fin) == 0 {
				s.finIdx = idx
				s.finRunning = false
				s.fmu.Unlock()
				return
			}
			s.fmu.Unlock()
			continue
		}
		if c.barrier != nil {
			// A truncation is about to rewrite files and index.db itself.
			idx = nil
			close(c.barrier)
			continue
		}
		s.finish(c)
		if c.idx != nil {
			idx = c.idx
		}
		if idx != nil && len(s.fin) == 0 && s.writeIndexBytes(idx) == nil {
			idx = nil
		}
	}
}

// finish seals blocks that are full and deletes emptied ones, once the
// commit that rolled or emptied them is durable (or written, when
// SyncInterval != 0). It reports whether index.db is now stale.
func (s *FileStore) finish(c *commit) bool {
	for _, b := range c.rolled {
		if s.cfg.SyncInterval > 0 && b.f != nil {
			// Periodic syncing only covers the active block; a block leaving
			// that role is synced now so no unsynced data is left behind.
			if err := b.f.Datasync(); err != nil {
				s.fail(err)
				return false
			}
		}
		if s.cfg.Compress && !b.sealed && s.findLive(b) {
			if err := s.seal(b); err != nil {
				s.logf("filestore: %s: sealing block %d: %v", s.cfg.Dir, b.id, err)
			}
		}
	}
	for _, b := range c.dead {
		s.cmu.Lock()
		delete(s.cache, b)
		s.cmu.Unlock()
		if b.f != nil {
			b.f.Close()
			b.f = nil
		}
		_ = s.fs.Remove(s.blockPath(b.id, b.sealed))
	}
	return true
}

func containsFile(fs []File, f File) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

func (s *FileStore) findLive(b *block) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, x := range s.blocks {
		if x == b {
			return true
		}
	}
	return false
}

// writeSegs writes the commit, one pwrite per touched block, and records in c
// which files it wrote and whether it created one. Apart from a rolled
// block's final sync (below) it fsyncs nothing: commit does that.
func (s *FileStore) writeSegs(c *commit) error {
	var done []File // earlier blocks, synced by this call before a new one is created
	nsynced := 0
	for _, sg := range s.segs {
		b := sg.b
		if b.f == nil {
			// A new block file's name may become durable at any moment
			// (another goroutine's directory sync, the file system's own
			// journal commit), and recovery reads a torn tail on a block
			// that is not the last as damage. So every block before it
			// (rolled in this batch, or written earlier in it) is completely
			// synced before the next block file exists. Blocks roll every
			// BlockSize bytes, so this synchronous fsync is rare.
			if s.cfg.SyncInterval >= 0 {
				for _, r := range c.rolled {
					if r.f != nil && !containsFile(done, r.f) {
						done = append(done, r.f)
					}
				}
				for _, f := range c.files {
					if !containsFile(done, f) {
						done = append(done, f)
					}
				}
				for ; nsynced < len(done); nsynced++ {
					if err := done[nsynced].Datasync(); err != nil {
						return err
					}
				}
			}
			// The file itself was zero-filled (and synced) ahead of time by
			// the spare goroutine; giving it its name is a rename, made
			// durable by the next directory sync (c.created). A store's
			// first block was made under its name, durably (askFirst).
			s.askSpare(b.limit) // in case the active block filled before a quarter was seen
			sp := <-s.spares
			s.spareAsked = false
			if sp.err != nil {
				return sp.err
			}
			if name := s.blockPath(b.id, false); sp.name != name {
				if err := s.fs.Rename(sp.name, name); err != nil {
					sp.f.Close()
					_ = s.fs.Remove(sp.name)
					return err
				}
				c.created = true
			}
			f := sp.f
			s.mu.Lock()
			b.f = f
			s.mu.Unlock()
		}
		b.fresh = false
		if _, err := b.f.WriteAt(s.wbuf[sg.start:sg.end], sg.off); err != nil {
			return err
		}
		if s.jn != nil {
			s.jw = append(s.jw, jwrite{f: b.f, name: "msgs/" + strconv.FormatUint(b.id, 10) + ".blk",
				off: sg.off, data: s.wbuf[sg.start:sg.end]})
		}
		if !containsFile(c.files, b.f) {
			c.files = append(c.files, b.f)
		}
	}
	if len(s.segs) > 0 {
		s.dirty = true
	}
	if c.created && s.cfg.SyncInterval > 0 {
		return s.fs.SyncDir(s.dir)
	}
	return nil
}

// ---- applying ops (writer, under mu) ----

func (s *FileStore) apply(o *op) {
	l := &s.cfg.Limits
	switch o.kind {
	case opStore:
		ss := s.subjects.get(o.subj)
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
		if o.at != 0 && o.at <= s.last {
			o.err = ErrSeqOrder
			return
		}
		if ss == nil {
			// The caller's string may share memory it reuses (a zero-copy
			// parser's buffer); the index keeps its own copy.
			ss = s.subjects.add(strings.Clone(o.subj))
		}
		ts := stampNow()
		if o.at != 0 {
			// Storing at a sequence (a restore, a mirror, a replica): the
			// sequences before it are skipped, and its time is the given one.
			ts = o.ats
			if gap := o.at - s.last - 1; gap > 0 {
				s.skip(gap, max(ts, s.lastTS))
			}
		}
		seq := s.last + 1
		// Expiry walks from the front; it needs timestamps that never go back.
		if ts < s.lastTS {
			ts = s.lastTS
		}
		s.lastTS = ts
		patchRecord(o.rec, seq, ts)
		b := s.blockFor(seq, ts)
		off, n := s.emit(o.rec)
		b.ents = append(b.ents, ent{off: off, slen: n, sid: ss.id, tms: packTS(b, ts)})
		s.lastEntTS = ts
		b.live++
		s.last = seq
		if s.msgs == 0 {
			s.first = seq
		}
		s.msgs++
		s.bytes += o.size
		s.rep.add(1, int64(o.size), seq, ss.name)
		ss.add(seq)
		if ss.sparse() {
			ss.relist(func(after uint64) uint64 { return s.nextOf(ss, after) })
		}
		o.rseq, o.rts = seq, ts
		o.rec = nil
		s.enforce(ss)
	case opSkip:
		first := s.last + 1
		s.skip(o.n, max(stampNow(), s.lastTS))
		o.rseq = first
	case opRemove:
		first := s.first
		switch {
		case !s.removeSeq(o.n):
			o.err = ErrNotFound
		case o.n == first:
			// Acks in order remove the first message again and again: the
			// batch's one floor marker covers them all.
			s.floor = max(s.floor, s.first)
			o.rseq = 1
		default:
			s.emitMarker(kindTomb, o.n, 0)
			o.rseq = 1
		}
	case opPurge:
		s.rep.inBulk(func() { o.rseq = s.removeBelow(s.last + 1) })
	case opCompact:
		if o.n == 0 {
			o.err = errors.New("filestore: compact to sequence 0")
			return
		}
		s.rep.inBulk(func() { o.rseq = s.removeBelow(o.n) })
	case opPurgeEx:
		below, keep := o.n, o.keep
		switch {
		case below == 1: // "below 1" is nothing
		case matchesAll(o.subj) && keep == 0 && below == 0:
			s.rep.inBulk(func() { o.rseq = s.removeBelow(s.last + 1) })
		case matchesAll(o.subj) && below > 1:
			s.rep.inBulk(func() { o.rseq = s.removeBelow(below) })
		default:
			s.rep.inBulk(func() { o.rseq = s.purgeEx(o.subj, below, keep) })
		}
	case opLimits:
		s.setLimits(*o.lim)
	case opWatch:
		s.rep.fn = o.watch
		if s.bytes > 0 {
			s.rep.add(0, int64(s.bytes), 0, "")
		}
	case opExpire:
		s.armed = false
		if l.MaxAge <= 0 || s.msgs == 0 {
			return
		}
		cutoff := time.Now().UnixNano() - int64(l.MaxAge)
		floor := uint64(0)
		for seq := s.first; seq <= s.last; seq++ {
			b, e := s.blockEnt(seq)
			if e == nil || !e.live() {
				continue
			}
			if s.entTS(b, e) > cutoff {
				break
			}
			floor = seq + 1
		}
		if floor > 0 {
			s.removeBelow(floor)
		}
	}
}

// purgeEx removes the messages matching filter below seq below (0: no
// bound), oldest first, leaving the newest keep of all that match; one
// tombstone each.
// skip consumes n sequences with skip records stamped ts. Skips move State's LastTS, as
// nats-server's do; the stamp is kept in the record for recovery.
func (s *FileStore) skip(n uint64, ts int64) {
	s.lastTS = ts
	for i := uint64(0); i < n; i++ {
		seq := s.last + 1
		b := s.blockFor(seq, 0)
		rec := appendMarker(nil, kindSkip, seq, s.lastTS)
		off, sz := s.emit(rec)
		b.ents = append(b.ents, ent{off: off, slen: sz})
		s.last = seq
		s.lastEntTS = 0
	}
	if s.msgs == 0 {
		s.first = s.last + 1
	}
}

func (s *FileStore) purgeEx(filter string, below, keep uint64) uint64 {
	if filter == "" {
		filter = ">" // keep on everything: rare enough to go subject by subject
	}
	var match []*subjState
	var total, lo, hi uint64
	eachSubject(&s.subjects, filter, func(ss *subjState) {
		match = append(match, ss)
		if total == 0 || ss.first < lo {
			lo = ss.first
		}
		total += ss.msgs
		hi = max(hi, ss.last)
	})
	if total == 0 || (keep > 0 && keep >= total) {
		return 0
	}
	quota := total - keep
	if below > 0 {
		hi = min(hi, below-1)
	}
	var n uint64
	remove := func(seq uint64) {
		s.removeSeq(seq)
		s.emitMarker(kindTomb, seq, 0)
		n++
	}
	if len(match) == 1 && match[0].tracked {
		var buf [2]uint64
		for _, seq := range slices.Clone(match[0].list(&buf)) { // removing changes the list
			if seq > hi || n == quota {
				break
			}
			remove(seq)
		}
		return n
	}
	// Several subjects (or one whose sequences are not listed): walk the
	// range they span once, in sequence order, which keep needs.
	want := make([]bool, s.subjects.ids())
	for _, ss := range match {
		want[ss.id] = true
	}
	lo = max(lo, s.first)
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].end() > lo })
	for ; i < len(s.blocks) && s.blocks[i].first <= hi && n < quota; i++ {
		b := s.blocks[i]
		for seq := max(lo, b.first); seq < b.end() && seq <= hi && n < quota; seq++ {
			if sid := b.ents[seq-b.first].sid; sid != 0 && want[sid] {
				remove(seq)
			}
		}
	}
	return n
}

// stampNow is the clock messages are stamped with; a variable so that tests
// can move it.
var stampNow = func() int64 { return time.Now().UnixNano() }

// enforce applies discard-old limits after a store of subject ss.
func (s *FileStore) enforce(ss *subjState) {
	l := &s.cfg.Limits
	if l.MaxMsgsPerSubject > 0 && !l.DiscardNewPerSubject {
		s.trimSubject(ss, uint64(l.MaxMsgsPerSubject))
	}
	s.trimOldest()
}

// trimSubject removes subject ss's oldest messages until it has keep.
func (s *FileStore) trimSubject(ss *subjState, keep uint64) {
	for ss.msgs > keep {
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

// trimOldest removes the oldest messages while MaxMsgs or MaxBytes is
// exceeded under DiscardOld.
func (s *FileStore) trimOldest() {
	l := &s.cfg.Limits
	if l.Discard != DiscardOld {
		return
	}
	for s.msgs > 0 && ((l.MaxMsgs > 0 && s.msgs > uint64(l.MaxMsgs)) || (l.MaxBytes > 0 && s.bytes > uint64(l.MaxBytes))) {
		s.removeSeq(s.first)
		s.floor = max(s.floor, s.first)
	}
}

// setLimits is UpdateLimits on the writer.
func (s *FileStore) setLimits(l Limits) {
	old := s.cfg.Limits
	s.cfg.Limits = l
	s.maxMsgSize.Store(l.MaxMsgSize)
	for _, ss := range subjectsOver(&s.subjects, old, l) {
		s.trimSubject(ss, uint64(l.MaxMsgsPerSubject))
	}
	s.trimOldest()
	if l.MaxAge != old.MaxAge {
		// armExpiry, after this batch, sets the timer for the new age.
		s.armed = false
		if s.timer != nil {
			s.timer.Stop()
		}
	}
}

func (s *FileStore) subjFirst(ss *subjState) uint64 {
	seq := s.nextOf(ss, max(ss.first, s.first)-1)
	if seq != 0 {
		ss.first = seq
	}
	return seq
}

// nextOf returns subject ss's first live message after sequence after, or
// 0 if there is none up to its last; mu held.
func (s *FileStore) nextOf(ss *subjState, after uint64) uint64 {
	start := max(after+1, s.first)
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].end() > start })
	for ; i < len(s.blocks) && s.blocks[i].first <= ss.last; i++ {
		b := s.blocks[i]
		for seq := max(start, b.first); seq < b.end() && seq <= ss.last; seq++ {
			if b.ents[seq-b.first].sid == ss.id {
				return seq
			}
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
	if !e.live() {
		return false
	}
	ss := s.subjects.byID(e.sid)
	e.sid = 0
	b.live--
	if b.live == 0 {
		s.maybeEmpty = true
	}
	size := s.entSize(b, e)
	s.msgs--
	s.bytes -= size
	s.rep.add(-1, -int64(size), seq, ss.name)
	ss.remove(seq, func(before uint64) uint64 {
		for p := before - 1; p > ss.first; p-- {
			if pe := s.entLocked(p); pe != nil && pe.sid == ss.id {
				return p
			}
		}
		return ss.first
	})
	if ss.msgs == 0 {
		s.subjects.drop(ss)
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
	// A search, not a walk from the front: limits and purges remove the
	// first message over and over, and a long stream has thousands of blocks.
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].end() > s.first })
	for ; i < len(s.blocks); i++ {
		b := s.blocks[i]
		if b.live == 0 {
			continue
		}
		for seq := max(s.first, b.first); seq < b.end(); seq++ {
			if b.ents[seq-b.first].live() {
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
			if b.ents[seq-b.first].live() {
				s.removeSeq(seq)
				n++
			}
		}
	}
	if floor > s.last+1 {
		s.last = floor - 1
		if s.lastTS == 0 {
			s.lastTS = stampNow()
		}
	}
	if s.msgs == 0 {
		s.first = s.last + 1
	}
	s.floor = max(s.floor, floor)
	return n
}

// blockFor returns the block seq (stamped ts, 0 for none) must be appended
// to, starting a new one when the active block is full, when seq does not
// follow on from it (blocks hold contiguous sequences so lookups are an
// index, not a search), or when ts is too far past its base for an ent.
func (s *FileStore) blockFor(seq uint64, ts int64) *block {
	b := s.act
	if b == nil || b.size >= b.limit || (len(b.ents) > 0 && b.end() != seq) || b.sealed ||
		(ts != 0 && b.base != 0 && ts-b.base > maxEntSpan) {
		b = s.roll()
	}
	if len(b.ents) == 0 {
		b.first = seq
	}
	return b
}

func (s *FileStore) roll() *block {
	if a := s.act; a != nil {
		if !a.fresh {
			s.rolled = append(s.rolled, a)
		}
		// The entries grew by appending; a full block keeps them for good,
		// so it drops the spare capacity (up to half) once.
		if cap(a.ents)-len(a.ents) > len(a.ents)/16 {
			a.ents = append([]ent(nil), a.ents...)
		}
	}
	s.nextID++
	s.lastLimit = s.nextLimit(s.lastLimit)
	b := &block{id: s.nextID, first: s.last + 1, fresh: true, limit: s.lastLimit}
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
	if b.size >= b.limit/4 {
		s.askSpare(s.nextLimit(b.limit))
	}
	return uint32(off), uint32(n)
}

func (s *FileStore) emitMarker(kind byte, seq uint64, aux int64) {
	var buf [recMin]byte
	rec := appendMarker(buf[:0], kind, seq, aux)
	if s.act == nil || s.act.sealed {
		s.roll()
	}
	s.emit(rec)
	if kind == kindTrunc {
		return // only needed until its truncation is done: never carried on
	}
	if kind == kindFloor {
		s.floorAt = max(s.floorAt, seq)
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
	// A long-lived stream has thousands of blocks: scanning them on every
	// batch would make each append O(blocks). Only a removal (or recovery)
	// can empty a block; an empty block that cannot go yet (the active one,
	// or one whose file does not exist yet) keeps the scan coming.
	if !s.maybeEmpty {
		return
	}
	s.maybeEmpty = false
	var gone []*block
	for _, b := range s.blocks {
		switch {
		case b.live > 0:
		case b == s.act || b.fresh:
			s.maybeEmpty = true
		default:
			gone = append(gone, b)
		}
	}
	if len(gone) == 0 {
		// The common case while the active block is empty (a work queue
		// whose messages are removed as fast as they come): no allocation.
		return
	}
	keep := make([]*block, 0, len(s.blocks)-len(gone))
	for _, b := range s.blocks {
		if b.live > 0 || b == s.act || b.fresh {
			keep = append(keep, b)
		}
	}
	s.blocks = keep
	// Markers below the first block left are implied; the rest move. With
	// no block left and none active (a reopened store whose last block was
	// full or sealed), they go to the block that starts at last+1.
	earliest := s.last + 1
	if s.act != nil {
		earliest = s.act.first
	}
	if len(keep) > 0 {
		earliest = keep[0].first
	}
	// What moves is merged: the dropped blocks' ranges and the gaps they
	// carried become as few gap markers as there are disjoint ranges, the
	// tombstones inside them go (the gap implies them), and of the floors
	// only the highest is kept. Moving each marker as it was made a work
	// queue stuck behind one old message quadratic: every dropped block
	// carried every marker moved before it, and the markers themselves
	// filled new blocks.
	var gaps []seqRange
	var floor uint64
	var tombs []uint64
	for _, b := range gone {
		if len(b.ents) > 0 {
			gaps = append(gaps, seqRange{b.first, b.end() - 1})
		}
		for _, m := range b.markers {
			switch m.kind {
			case kindGap:
				gaps = append(gaps, seqRange{m.seq, uint64(m.aux)})
			case kindFloor:
				floor = max(floor, m.seq)
			default:
				tombs = append(tombs, m.seq)
			}
		}
	}
	gaps = mergeRanges(gaps)
	for _, g := range gaps {
		if g.lo >= earliest {
			s.emitMarker(kindGap, g.lo, int64(g.hi))
		}
	}
	if floor >= earliest {
		s.emitMarker(kindFloor, floor, s.lastTS)
	}
	for _, seq := range tombs {
		if seq >= earliest && !contains(gaps, seq) {
			s.emitMarker(kindTomb, seq, 0)
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
		if b, e := s.blockEnt(s.first); e != nil {
			ts = s.entTS(b, e)
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
		s.timer = time.AfterFunc(d, func() { s.enqueue(&op{kind: opExpire}, false, false) })
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
	res := scanBlock(data, s.cry, nil)
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

// ---- truncation ----

// truncate removes every message after o.n and lets sequence numbers carry
// on from there. Every other removal leaves the records and adds markers;
// this one must take the records away, since the sequences will be reused.
// The steps are ordered so that a crash at any point leaves the store as it
// was, or truncated at some sequence at or after o.n, and never loses a
// deletion at or before it:
//
//  1. in memory: the messages go, and the markers of the blocks about to be
//     cut or deleted that concern sequences up to o.n are re-emitted into a
//     new block, with a floor marker carrying the newest stamp;
//  2. that block is committed (written, synced, named);
//  3. index.db is rewritten for the truncated store (it describes less than
//     the disk still holds, which recovery takes as it finds it);
//  4. the blocks after the cut are deleted, newest first, each removal made
//     durable before the next, so the store only ever loses a tail;
//  5. the block holding o.n loses its tail (a sealed one is sealed again).
func (s *FileStore) truncate(o *op) {
	seq := o.n
	done := func(err error) {
		if err != nil {
			s.fail(err)
			o.err = err
		}
		if o.cb != nil {
			o.cb(o.rseq, 0, o.err)
		}
	}
	if s.failed() != nil {
		o.err = ErrFailed
		done(nil)
		return
	}
	s.mu.RLock()
	nothing := seq >= s.last
	s.mu.RUnlock()
	if nothing {
		done(nil)
		return
	}
	if s.grouped() {
		// Sealing and deletions queued for the finisher must not touch the
		// files this rewrites.
		b := make(chan struct{})
		s.toFinisher(&commit{barrier: b})
		<-b
	}
	sync := s.cfg.SyncInterval >= 0
	if s.jn != nil {
		// The truncation rewrites block files in place: journaled writes older than it must
		// never be replayed over what it leaves. Sync what they covered, then mark them void.
		if err := s.syncBlocks(); err != nil {
			done(err)
			return
		}
		if err := s.jn.commit(&jreq{key: s.jkey, mark: true}); err != nil {
			done(err)
			return
		}
	}
	if sync && !s.grouped() && s.act != nil && s.act.f != nil {
		// Periodic syncing may have left the active block's tail unsynced.
		if err := s.act.f.Datasync(); err != nil {
			done(err)
			return
		}
	}
	c := &commit{since: time.Now(), ops: s.opsBuf[:0]}
	s.cur = c

	s.mu.Lock()
	s.rep.inBulk(func() {
		for i := len(s.blocks) - 1; i >= 0 && s.blocks[i].end() > seq+1; i-- {
			b := s.blocks[i]
			for x := b.end() - 1; x > seq && x >= b.first && b.live > 0; x-- {
				if b.ents[x-b.first].live() && s.removeSeq(x) {
					o.rseq++
				}
			}
		}
	})
	ci := len(s.blocks) - 1
	for ci >= 0 && s.blocks[ci].first > seq {
		ci--
	}
	dead := slices.Clone(s.blocks[ci+1:])
	var cut *block
	var cutOff int64
	if ci >= 0 && s.blocks[ci].end() > seq+1 {
		cut = s.blocks[ci]
		keep := seq - cut.first + 1
		for _, e := range cut.ents[:keep] {
			if e.slen > 0 {
				cutOff = max(cutOff, int64(e.off)+int64(e.slen))
			}
		}
		cut.ents = cut.ents[:keep]
		if !cut.sealed {
			cut.size = cutOff // a sealed block's is set once it is sealed again
		}
	}
	// Markers to keep: those of the cut and deleted blocks that concern
	// sequences up to seq (a later one would remove a reused sequence).
	var tombs []uint64
	var gaps []seqRange
	from := dead
	if cut != nil {
		from = append([]*block{cut}, dead...)
	}
	for _, b := range from {
		for _, m := range b.markers {
			switch {
			case m.kind == kindTomb && m.seq <= seq:
				tombs = append(tombs, m.seq)
			case m.kind == kindGap && m.seq <= seq:
				gaps = append(gaps, seqRange{m.seq, min(uint64(m.aux), seq)})
			}
		}
	}
	if cut != nil {
		cut.markers = slices.DeleteFunc(cut.markers, func(m marker) bool { return m.seq > seq })
	}
	s.blocks = s.blocks[:ci+1]
	if b, e := s.blockEnt(seq); e != nil && e.live() {
		s.lastTS = s.entTS(b, e)
		if ts, ok := s.recTS(b, e); ok {
			s.lastTS = ts
		}
		s.lastEntTS = s.lastTS
	} else {
		s.lastEntTS = 0
	}
	s.last = seq
	s.durable = min(s.durable, seq)
	s.wakeDurableLocked() // a wait past the new last ends
	if s.msgs == 0 {
		s.first = seq + 1
	}
	s.act = nil // whatever comes next starts a new block
	s.floorAt = min(s.floorAt, s.first)
	gaps = mergeRanges(gaps)
	for _, g := range gaps {
		s.emitMarker(kindGap, g.lo, int64(g.hi))
	}
	s.emitMarker(kindFloor, s.first, s.lastTS) // always true, and it keeps the newest stamp
	for _, t := range tombs {
		if t >= s.first && !contains(gaps, t) {
			s.emitMarker(kindTomb, t, 0)
		}
	}
	// Until the records past seq are gone from the disk, this marker voids
	// them (recovery finishes the job after a crash: finishTruncation).
	s.emitMarker(kindTrunc, seq, 0)
	c.last = s.last
	if ups := s.rep.take(); len(ups) > 0 {
		c.updates = append(c.updates, ups...)
	}
	s.rolled, s.dead = s.rolled[:0], s.dead[:0]
	s.mu.Unlock()

	s.commit() // 2
	if err := s.failed(); err != nil {
		o.err = err
		done(nil)
		return
	}
	if sync && !s.grouped() && s.act != nil && s.act.f != nil {
		if err := s.act.f.Datasync(); err != nil { // a commit does not sync in this mode
			done(err)
			return
		}
	}
	idx := func() []byte { // 3
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.indexBytesLocked(s.durable)
	}()
	if err := s.writeIndexBytes(idx); err != nil {
		done(err)
		return
	}
	s.indexStale = false
	for i := len(dead) - 1; i >= 0; i-- { // 4
		b := dead[i]
		s.cmu.Lock()
		delete(s.cache, b)
		s.cmu.Unlock()
		if b.f == nil {
			continue // its file was never created
		}
		b.f.Close()
		b.f = nil
		if err := s.fs.Remove(s.blockPath(b.id, b.sealed)); err != nil {
			done(err)
			return
		}
		if sync {
			if err := s.fs.SyncDir(s.dir); err != nil {
				done(err)
				return
			}
		}
	}
	if cut != nil { // 5
		if err := s.cutBlock(cut, seq, cutOff, sync); err != nil {
			done(err)
			return
		}
	}
	done(nil)
}

// cutBlock drops a block's records after sequence seq: a plain block's from
// off on, by truncating its file; a sealed one's by sealing what is left
// again (its skips' entries do not point into the sealed data, so the cut
// is found by scanning it).
func (s *FileStore) cutBlock(b *block, seq uint64, off int64, sync bool) error {
	s.cmu.Lock()
	delete(s.cache, b)
	if s.ra.b == b {
		s.ra.b, s.ra.data = nil, nil
	}
	s.cmu.Unlock()
	if !b.sealed {
		if err := b.f.Truncate(off); err != nil || !sync {
			return err
		}
		return b.f.Sync()
	}
	data, err := readAll(b.f)
	if err != nil {
		return err
	}
	raw, err := s.unseal(data)
	if err != nil {
		return err
	}
	off = 0
	for _, r := range scanBlock(raw, nil, nil).recs {
		if (r.kind == kindMsg || r.kind == kindSkip) && r.seq <= seq {
			off = max(off, int64(r.off)+int64(r.slen))
		}
	}
	name := s.blockPath(b.id, true)
	if err := writeFileAtomic(s.fs, s.dir, filepath.Base(name), s.sealBytes(raw[:off])); err != nil {
		return err
	}
	nf, err := s.fs.OpenFile(name, false)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := b.f
	b.f, b.size = nf, off
	s.mu.Unlock()
	return old.Close()
}
