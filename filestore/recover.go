package filestore

import (
	"cmp"
	"encoding/binary"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

const (
	indexName  = "index.db"
	indexMagic = "NIDX"
)

type idxBlock struct {
	id, first, end, size uint64
}

type index struct {
	last   uint64
	lastTS int64 // State's LastTS (version 2 on): its message may be in no block left
	blocks []idxBlock
}

// writeIndex records which sequences the blocks hold. Recovery always
// verifies every block by checksum; the index is what lets it tell "this
// damaged tail held acknowledged messages 41..57" from "a write was torn".
// It is only written when everything it describes has been synced: by the
// writer when nothing is in flight (open, stop, periodic sync), and by the
// finisher from a snapshot taken when the commit it describes became durable.
func (s *FileStore) writeIndex() {
	s.mu.RLock()
	b := s.indexBytesLocked(s.durable)
	s.mu.RUnlock()
	if s.writeIndexBytes(b) == nil {
		s.indexStale = false
	}
}

// indexBytesLocked encodes index.db for the current block list with last as
// the last durable sequence; the caller holds mu.
func (s *FileStore) indexBytesLocked(last uint64) []byte {
	b := make([]byte, 0, 4+1+8+4+32*len(s.blocks)+8+8)
	b = append(b, indexMagic...)
	b = append(b, 2)
	b = binary.LittleEndian.AppendUint64(b, last)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s.blocks)))
	for _, blk := range s.blocks {
		b = binary.LittleEndian.AppendUint64(b, blk.id)
		b = binary.LittleEndian.AppendUint64(b, blk.first)
		b = binary.LittleEndian.AppendUint64(b, blk.end())
		b = binary.LittleEndian.AppendUint64(b, uint64(blk.size))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(s.lastTS))
	return binary.LittleEndian.AppendUint64(b, recSum(b))
}

func (s *FileStore) writeIndexBytes(b []byte) error {
	err := writeFileAtomic(s.fs, s.dir, indexName, b)
	if err != nil {
		s.logf("filestore: %s: writing index: %v", s.cfg.Dir, err)
	}
	return err
}

func parseIndex(b []byte) (*index, bool) {
	if len(b) < 4+1+8+4+8 || string(b[:4]) != indexMagic || b[4] < 1 || b[4] > 2 {
		return nil, false
	}
	n := len(b) - 8
	if binary.LittleEndian.Uint64(b[n:]) != recSum(b[:n]) {
		return nil, false
	}
	ix := &index{last: binary.LittleEndian.Uint64(b[5:])}
	cnt := int(binary.LittleEndian.Uint32(b[13:]))
	p := 17
	if b[4] >= 2 {
		if n < p+8 {
			return nil, false
		}
		n -= 8
		ix.lastTS = int64(binary.LittleEndian.Uint64(b[n:]))
	}
	if cnt < 0 || p+cnt*32 != n {
		return nil, false
	}
	for i := 0; i < cnt; i++ {
		ix.blocks = append(ix.blocks, idxBlock{
			id:    binary.LittleEndian.Uint64(b[p:]),
			first: binary.LittleEndian.Uint64(b[p+8:]),
			end:   binary.LittleEndian.Uint64(b[p+16:]),
			size:  binary.LittleEndian.Uint64(b[p+24:]),
		})
		p += 32
	}
	return ix, true
}

type loaded struct {
	b     *block
	res   scanResult
	subjs subjTable // numbers the subjects in res
	last  bool
	// damage found while loading, added to the store's once blocks are in
	torn, spans uint64
	voided      bool // holds records a later truncation voided
}

// recover rebuilds the whole in-memory state from the blocks, verifying every
// record's checksum, and uses index.db to name exactly what was lost.
func (s *FileStore) recover() error {
	names, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return err
	}
	plain := map[uint64]bool{}
	sealed := map[uint64]bool{}
	var ids []uint64
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") {
			_ = s.fs.Remove(filepath.Join(s.dir, n))
			continue
		}
		var id uint64
		var perr error
		switch {
		case strings.HasSuffix(n, ".sblk"):
			id, perr = strconv.ParseUint(strings.TrimSuffix(n, ".sblk"), 10, 64)
			if perr == nil {
				sealed[id] = true
			}
		case strings.HasSuffix(n, ".blk"):
			id, perr = strconv.ParseUint(strings.TrimSuffix(n, ".blk"), 10, 64)
			if perr == nil {
				plain[id] = true
			}
		default:
			continue
		}
		if perr == nil && id > 0 && !(plain[id] && sealed[id]) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })

	var ix *index
	if f, err := s.fs.OpenFile(filepath.Join(s.dir, indexName), false); err == nil {
		data, rerr := readAll(f)
		f.Close()
		var ok bool
		if rerr == nil {
			ix, ok = parseIndex(data)
		}
		if !ok {
			ix = nil
			s.logf("filestore: %s: index.db is damaged; rebuilding it from the blocks", s.cfg.Dir)
		}
	}
	s.blank = len(ids) == 0 && ix == nil

	// Reading and checksumming blocks is most of an open; blocks are
	// independent until rebuild, so every core takes a share.
	all := make([]*loaded, len(ids))
	errs := make([]error, len(ids))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(ids)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(ids); i = int(next.Add(1) - 1) {
				id := ids[i]
				ld := &loaded{b: &block{id: id}, last: i == len(ids)-1}
				if sealed[id] {
					if !s.loadSealed(ld, plain[id]) {
						continue
					}
				} else if errs[i] = s.loadPlain(ld); errs[i] != nil {
					continue
				}
				all[i] = ld
			}
		}()
	}
	wg.Wait()
	var lds []*loaded
	for i, ld := range all {
		if errs[i] != nil {
			for _, ld := range all {
				if ld != nil && ld.b.f != nil {
					ld.b.f.Close()
				}
			}
			return errs[i]
		}
		if ld == nil {
			continue
		}
		s.lost.TornBytes += ld.torn
		s.lost.CorruptSpans += ld.spans
		lds = append(lds, ld)
		s.nextID = ld.b.id
		s.lastLimit = ld.b.limit
	}
	return s.rebuild(lds, ix)
}

// recoveredLimit is the room of a block found on disk with a file of size
// bytes: what it was preallocated for (preallocFor), as blocks grow one by
// one. Without fsync files are not preallocated, so nothing can be told.
func (s *FileStore) recoveredLimit(size int64) int64 {
	if s.cfg.SyncInterval < 0 {
		return s.cfg.BlockSize
	}
	return min(s.cfg.BlockSize, max(s.firstLimit(), size*8/9))
}

func (s *FileStore) loadSealed(ld *loaded, hasPlain bool) bool {
	id := ld.b.id
	f, err := s.fs.OpenFile(s.blockPath(id, true), false)
	if err == nil {
		data, rerr := readAll(f)
		if rerr == nil {
			if raw, uerr := s.unseal(data); uerr == nil {
				ld.b.f, ld.b.sealed, ld.b.size, ld.b.limit = f, true, int64(len(raw)), s.cfg.BlockSize
				ld.res = scanBlock(raw, nil, &ld.subjs)
				if hasPlain {
					// The crash came between the rename and removing the old file.
					_ = s.fs.Remove(s.blockPath(id, false))
				}
				return true
			}
		}
		f.Close()
	}
	if hasPlain {
		_ = s.fs.Remove(s.blockPath(id, true))
		return s.loadPlain(ld) == nil
	}
	ld.spans++
	s.logf("filestore: %s: compressed block %d is damaged; all its messages are lost", s.cfg.Dir, id)
	if f != nil {
		ld.b.f, ld.b.sealed, ld.b.limit = f, true, s.cfg.BlockSize
	}
	return true
}

func (s *FileStore) loadPlain(ld *loaded) error {
	f, err := s.fs.OpenFile(s.blockPath(ld.b.id, false), false)
	if err != nil {
		return err
	}
	data, err := readAll(f)
	if err != nil {
		f.Close()
		return err
	}
	ld.b.f = f
	ld.b.limit = s.recoveredLimit(int64(len(data)))
	ld.res = scanBlock(data, s.cry, &ld.subjs)
	ld.b.size = ld.res.validEnd
	if ld.res.tail > 0 {
		if ld.last {
			// A torn write: whatever follows the last valid record was never
			// acknowledged as durable unless the index says otherwise.
			ld.torn += uint64(ld.res.tail)
			// It is zeroed (not truncated: the file stays preallocated), and
			// durably so before anything is appended, so that nothing in it
			// can ever be read as a record once later writes cover part of it.
			s.logf("filestore: %s: zeroing %d bytes of torn tail in block %d", s.cfg.Dir, ld.res.tail, ld.b.id)
			if err := writeZeros(f, ld.res.validEnd, ld.res.tail); err != nil {
				return err
			}
			if err := f.Datasync(); err != nil {
				return err
			}
		} else {
			ld.spans++
			s.logf("filestore: %s: block %d has %d damaged bytes at its end", s.cfg.Dir, ld.b.id, ld.res.tail)
		}
	}
	if ld.res.spans > 0 {
		ld.spans += uint64(ld.res.spans)
		s.logf("filestore: %s: block %d has %d damaged records ranges", s.cfg.Dir, ld.b.id, ld.res.spans)
	}
	return nil
}

type seqRange struct{ lo, hi uint64 } // inclusive

// mergeRanges sorts rs and merges overlapping or adjacent ranges, so that
// contains is a binary search. A long-lived work queue can leave thousands
// of gap markers, and recovery asks about every record.
func mergeRanges(rs []seqRange) []seqRange {
	slices.SortFunc(rs, func(a, b seqRange) int { return cmp.Compare(a.lo, b.lo) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// contains reports whether seq is in one of rs, which mergeRanges made.
func contains(rs []seqRange, seq uint64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi >= seq })
	return i < len(rs) && rs[i].lo <= seq
}

// finishTruncation applies truncation markers. A marker voids every record
// written before it (in block order) for a sequence after its own: messages,
// skips and tombstones; gaps and floors are clipped to it. A truncation
// deletes and cuts those records itself once its marker is durable, so any
// left were left by a crash; they are removed here (whole blocks deleted,
// others cut after their last record kept) before anything is appended,
// since the sequences past the marker are reused and the marker's own block
// may later be dropped. Every marker and deletion they held that concerns
// kept sequences was copied next to the marker. exempt is the first
// sequence past a truncation that index.db may still list because it was
// written before that truncation; they are not lost.
func (s *FileStore) finishTruncation(lds []*loaded, ix *index) ([]*loaded, uint64, error) {
	exempt := uint64(math.MaxUint64)
	t := uint64(math.MaxUint64)
	for i := len(lds) - 1; i >= 0; i-- {
		ld := lds[i]
		recs := ld.res.recs
		for j := len(recs) - 1; j >= 0; j-- {
			r := &recs[j]
			switch {
			case r.kind == kindTrunc:
				t = min(t, r.seq)
				if ix == nil || len(ix.blocks) == 0 || ix.blocks[len(ix.blocks)-1].id < ld.b.id {
					exempt = min(exempt, r.seq) // the index predates it
				}
			case t == math.MaxUint64:
			case r.kind == kindFloor:
				r.seq = min(r.seq, t+1)
			case r.kind == kindGap && r.seq <= t:
				r.ts = int64(min(uint64(r.ts), t))
			case r.seq > t:
				r.kind = kindVoid
				ld.voided = true
			}
		}
	}
	if t == math.MaxUint64 {
		return lds, exempt, nil
	}
	sync := s.cfg.SyncInterval >= 0
	kept := lds[:0]
	for _, ld := range lds {
		if !ld.voided {
			kept = append(kept, ld)
			continue
		}
		var end int64 // of the last message or skip kept
		for _, r := range ld.res.recs {
			if r.kind == kindMsg || r.kind == kindSkip {
				end = max(end, int64(r.off)+int64(r.slen))
			}
		}
		b := ld.b
		if end == 0 {
			s.logf("filestore: %s: deleting block %d, left behind by an interrupted truncation", s.cfg.Dir, b.id)
			if b.f != nil {
				b.f.Close()
			}
			if err := s.fs.Remove(s.blockPath(b.id, b.sealed)); err != nil {
				return nil, 0, err
			}
			if sync {
				if err := s.fs.SyncDir(s.dir); err != nil {
					return nil, 0, err
				}
			}
			continue
		}
		s.logf("filestore: %s: cutting block %d, left whole by an interrupted truncation", s.cfg.Dir, b.id)
		if err := s.cutBlock(b, t, end, sync); err != nil {
			return nil, 0, err
		}
		if !b.sealed {
			b.size = end
		}
		ld.res.recs = slices.DeleteFunc(ld.res.recs, func(r scanRec) bool { return int64(r.off) >= end })
		kept = append(kept, ld)
	}
	return kept, exempt, nil
}

func (s *FileStore) rebuild(lds []*loaded, ix *index) error {
	lds, exempt, err := s.finishTruncation(lds, ix)
	if err != nil {
		return err
	}
	var floor, last uint64
	tombs := map[uint64]bool{}
	var gaps []seqRange
	for _, ld := range lds {
		for _, r := range ld.res.recs {
			switch r.kind {
			case kindFloor:
				floor = max(floor, r.seq)
				last = max(last, r.seq-1)
				s.lastTS = max(s.lastTS, r.ts) // the newest stamp when it was written
			case kindTomb:
				tombs[r.seq] = true
				last = max(last, r.seq)
			case kindGap:
				gaps = append(gaps, seqRange{r.seq, uint64(r.ts)})
			case kindTrunc:
				last = max(last, r.seq)
			}
			if r.kind >= kindTomb && r.kind <= kindGap { // a truncation marker is not carried on
				ld.b.markers = append(ld.b.markers, marker{r.kind, r.seq, r.ts})
			}
		}
	}
	gaps = mergeRanges(gaps)
	s.floorAt = floor
	deleted := func(seq uint64) bool {
		return seq < floor || tombs[seq] || contains(gaps, seq)
	}

	var prevEnd uint64
	var lastTS int64 // of the newest entry
	for _, ld := range lds {
		b := ld.b
		b.first = 0
		for _, r := range ld.res.recs {
			if r.kind != kindMsg && r.kind != kindSkip {
				continue
			}
			if r.seq < prevEnd || (b.first != 0 && r.seq < b.end()) {
				continue // out of order: cannot come from this store's writer
			}
			if b.first == 0 {
				b.first = r.seq
			}
			for b.end() < r.seq {
				b.ents = append(b.ents, ent{}) // damaged record
			}
			e := ent{off: r.off, slen: r.slen}
			if r.kind == kindMsg {
				e.tms = packTS(b, r.ts)
				lastTS = r.ts
				s.lastTS = max(s.lastTS, r.ts) // new stamps never go below a removed message's either
			} else {
				lastTS = 0
				s.lastTS = max(s.lastTS, r.ts) // a skip's stamp
			}
			if r.kind == kindMsg && !deleted(r.seq) {
				name := ld.subjs.name(r.sub)
				ss := s.subjects.get(name)
				if ss == nil {
					ss = s.subjects.add(name)
				}
				ss.add(r.seq)
				e.sid = ss.id
				b.live++
				s.msgs++
				s.bytes += s.entSize(b, &e) // what removing it takes off again
				if s.first == 0 {
					s.first = r.seq
				}
			}
			b.ents = append(b.ents, e)
		}
		if b.first == 0 {
			b.first = max(prevEnd, floor, 1)
		}
		prevEnd = b.end()
		last = max(last, prevEnd-1)
		s.blocks = append(s.blocks, b)
	}
	for _, g := range gaps {
		last = max(last, g.hi)
	}
	// Subjects gave their lists up while their messages were dense so far;
	// those whose messages ended up far apart take them back.
	s.subjects.all(func(ss *subjState) {
		if ss.sparse() {
			ss.relist(func(after uint64) uint64 { return s.nextOf(ss, after) })
		}
	})

	// Name the lost sequences: holes inside and between blocks, and whatever
	// the index knew about that the blocks no longer hold.
	lost := map[uint64]bool{}
	check := func(lo, hi uint64) { // inclusive
		lo = max(lo, floor, 1)
		for seq := lo; seq <= hi && seq >= lo; seq++ {
			if lost[seq] || deleted(seq) || seq > exempt {
				continue
			}
			if b := s.findBlock(seq); b != nil && b.ents[seq-b.first].slen > 0 {
				continue
			}
			lost[seq] = true
		}
	}
	for i, b := range s.blocks {
		if len(b.ents) > 0 {
			check(b.first, b.end()-1)
		}
		if i > 0 && len(b.ents) > 0 {
			prev := s.blocks[i-1]
			if b.first > prev.end() {
				check(prev.end(), b.first-1)
			}
		}
	}
	if ix != nil {
		if exempt == math.MaxUint64 { // an index from before a truncation has a newer stamp than what is left
			s.lastTS = max(s.lastTS, ix.lastTS)
		}
		stale := len(ix.blocks) != len(s.blocks)
		for _, ib := range ix.blocks {
			if ib.end > ib.first {
				check(ib.first, ib.end-1)
			}
		}
		if ix.last > last {
			check(last+1, ix.last)
			last = ix.last // never reuse a sequence a client may have been given
		}
		for i := 0; !stale && i < len(ix.blocks); i++ {
			stale = ix.blocks[i].id != s.blocks[i].id || ix.blocks[i].end > s.blocks[i].end()
		}
		if stale {
			s.logf("filestore: %s: index.db is stale; state rebuilt from blocks", s.cfg.Dir)
		}
	}
	if len(lost) > 0 {
		s.lost.Msgs = uint64(len(lost))
		for seq := range lost {
			if len(s.lost.Seqs) < maxLostList {
				s.lost.Seqs = append(s.lost.Seqs, seq)
			}
		}
		sort.Slice(s.lost.Seqs, func(i, j int) bool { return s.lost.Seqs[i] < s.lost.Seqs[j] })
		s.logf("filestore: %s: %d messages lost to damage (first %d)", s.cfg.Dir, len(lost), s.lost.Seqs[0])
	}

	s.last = last
	if n := len(s.blocks); n > 0 && s.blocks[n-1].end() == last+1 {
		s.lastEntTS = lastTS
	}
	if s.msgs == 0 {
		s.first = last + 1
	}
	s.durable = last
	s.maybeEmpty = true // blocks left empty are dropped with the first batch
	if n := len(s.blocks); n > 0 {
		b := s.blocks[n-1]
		if !b.sealed && b.f != nil && b.size > 0 && s.cfg.SyncInterval >= 0 {
			// A process that crashed (rather than lost power) may have left
			// unsynced records in the page cache that were read above as
			// valid. Sync them before anything is written after them: a
			// later block must never be durable ahead of an earlier one.
			if err := b.f.Datasync(); err != nil {
				return err
			}
		}
		if !b.sealed && b.size < b.limit && b.f != nil {
			s.act = b
		}
	}
	if s.last > 0 || len(s.blocks) > 1 || len(s.blocks) == 1 && s.blocks[0].size > 0 {
		// A new, empty store (at most its first block, made ahead and still empty:
		// askFirst) has nothing to describe: its first commit writes the index.
		s.writeIndex()
	}
	return nil
}
