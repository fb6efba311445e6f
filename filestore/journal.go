package filestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/filestore/vfs"
)

// A Journal is one write-ahead log shared by every file store under a root directory
// (JetStream's store directory), so that many stores taking publishes at once are made
// durable by one write per group commit instead of one fdatasync per store.
//
// Why: on a virtual disk each fdatasync of a separate file costs a device write and a cache
// flush (~100-300 µs), and concurrent fdatasyncs of different files barely overlap, so N
// streams each committing on their own pay N of them per round (BenchmarkManyStores: 200k
// appends/s with one store, 78k with 100, 10k with 1,000). With the journal a store still
// writes its records into its block files (page cache only), then hands the same bytes to the
// journal, which appends every waiting store's writes to one segment file in one durable
// write (direct and synchronous where the file system allows, see writeDirect; else a write
// and an fdatasync).
// Block files are synced later, in the background, before the journal space that covers
// them is reused (a checkpoint).
//
// Recovery (ReplayJournal, before any store opens) rewrites each journaled write into its
// block file at its offset: the writes are exact bytes at exact offsets, so replaying one
// twice, or one whose data already reached the block, changes nothing. What would not be
// harmless is replaying old bytes over a region that was rewritten since (Truncate, or a
// deleted stream re-created under the same name): before either, the store syncs its block
// files and writes a marker, and replay ignores a store's writes that come before its last
// marker. A block file that no longer exists (deleted, or sealed into .sblk) is skipped.
//
// Segments are zero-filled files of journalSegSize bytes, written front to back and reused
// once checkpointed. Each starts with a header carrying its generation; each entry carries
// the generation too and a checksum, so replay stops at the first torn entry or at the
// first stale one left by the segment's previous use.
type Journal struct {
	fs   FS
	root string // the stores' root: entries name files relative to it
	dir  string // the segments' directory
	logf func(string, ...any)

	mu      sync.Mutex
	queue   []*jreq
	spare   []*jreq
	closed  bool
	leading bool // a committer is writing a group

	// The leading committer's own.
	act    *jseg
	gen    uint64
	wbuf   []byte
	direct bool   // write segments with WriteAtSync (until it fails with ErrNoDirect)
	dbuf   []byte // sector-aligned buffer for direct writes

	cmu     sync.Mutex
	cond    *sync.Cond
	free    []*jseg // checkpointed, ready for reuse
	retired []*jseg // full, waiting for their files to be synced
	nsegs   int
	ckwake  chan struct{}
	ckdone  chan struct{}
	failure atomic.Pointer[error]

	next int // name of the next segment file
}

// Segment sizes (variables so that tests can make segments fill quickly).
var (
	journalSegSize  int64 = 16 << 20
	journalFirstSeg int64 = 4 << 20 // a new journal's first segment: cheap to make at start-up
	journalMaxChunk       = 1 << 20 // a write larger than this is journaled in pieces
)

const (
	journalMaxSegs = 8
	journalHdrLen  = 32
	journalMagic   = "NJL1"

	jKindWrite = 1
	jKindMark  = 2

	// u32 len · u64 gen · u8 kind · u16 key len · key · [u16 name len · name · u64 off · data] · u64 hash
	jFixed = 4 + 8 + 1 + 2 + 8
)

type jseg struct {
	f     File
	name  string
	size  int64
	gen   uint64
	off   int64
	files map[File]struct{} // block files with writes in this segment
	// tail is the segment's bytes from the start of the sector holding off up to off: a
	// direct write rewrites that sector whole.
	tail []byte
}

// jwrite is one write a store made to a block file, to be journaled.
type jwrite struct {
	f    File
	name string // relative to the store's directory
	off  int64
	data []byte
}

type jreq struct {
	key    string // the store's directory, relative to the root
	writes []jwrite
	mark   bool
	done   chan error
}

// ErrJournalClosed is returned to a store that commits after its journal was closed.
var ErrJournalClosed = errors.New("filestore: journal closed")

// OpenJournal replays what an earlier run left in dir (see ReplayJournal) and starts a fresh
// journal there for the stores under root, reusing the earlier run's segment files.
func OpenJournal(fsys FS, root, dir string, logf func(string, ...any)) (*Journal, error) {
	if fsys == nil {
		fsys = OSFS{}
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, err
	}
	_, maxGen, kept, err := replayJournal(fsys, root, dir, logf, true)
	if err != nil {
		return nil, err
	}
	j := &Journal{fs: fsys, root: root, dir: dir, logf: logf, direct: true,
		ckwake: make(chan struct{}, 1), ckdone: make(chan struct{})}
	j.cond = sync.NewCond(&j.cmu)
	// Generations only grow, across runs too: a reused segment's stale entries (an earlier
	// use's) never carry the generation of its new header.
	j.gen = max(maxGen, uint64(time.Now().UnixNano()))
	for _, sg := range kept {
		j.free = append(j.free, sg)
		j.nsegs++
		if n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(sg.name), ".jnl")); err == nil && n > j.next {
			j.next = n
		}
	}
	if len(j.free) == 0 {
		sg, err := j.newSeg(journalFirstSeg)
		if err != nil {
			return nil, err
		}
		j.free = append(j.free, sg)
		if err := fsys.SyncDir(dir); err != nil {
			return nil, err
		}
	}
	go j.checkpointer()
	return j, nil
}

// newSeg creates a zero-filled, synced segment file of size bytes (its name is made durable
// by the caller's directory sync).
func (j *Journal) newSeg(size int64) (*jseg, error) {
	j.cmu.Lock()
	j.next++
	name := filepath.Join(j.dir, strconv.Itoa(j.next)+".jnl")
	j.nsegs++
	j.cmu.Unlock()
	f, err := j.fs.OpenFile(name, true)
	if err == nil {
		if err = writeZeros(f, 0, size); err == nil {
			err = f.Datasync()
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		j.cmu.Lock()
		j.nsegs--
		j.cmu.Unlock()
		return nil, err
	}
	return &jseg{f: f, name: name, size: size}, nil
}

// Close stops the journal once every store using it has stopped.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	j.cmu.Lock()
	segs := append(append([]*jseg(nil), j.free...), j.retired...)
	if j.act != nil {
		segs = append(segs, j.act)
	}
	j.cmu.Unlock()
	close(j.ckwake)
	<-j.ckdone
	for _, sg := range segs {
		sg.f.Close()
	}
	if p := j.failure.Load(); p != nil {
		return *p
	}
	return nil
}

func (j *Journal) fail(err error) {
	if j.failure.CompareAndSwap(nil, &err) {
		j.logf("filestore: journal %s: write or sync failed, stores using it are now read-only: %v", j.dir, err)
	}
}

// errLead tells a waiting committer that the group commit is its to write.
var errLead = errors.New("filestore: journal: lead")

// commit journals a store's writes, or its marker, and returns once that is durable.
//
// There is no journal goroutine: the committer that finds no group commit in progress writes
// one (its own request and whatever else is queued), and while it does, others queue behind
// it; then it hands the next group to the oldest of them. An uncontended commit so costs no
// goroutine hand-off at all, and a contended one a single wake.
func (j *Journal) commit(r *jreq) error {
	if p := j.failure.Load(); p != nil {
		return *p
	}
	r.done = make(chan error, 1)
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrJournalClosed
	}
	j.queue = append(j.queue, r)
	if j.leading {
		j.mu.Unlock()
		if err := <-r.done; err != errLead {
			return err
		}
		j.mu.Lock()
	} else {
		j.leading = true
	}
	reqs := j.queue
	j.queue = j.spare[:0]
	j.spare = nil
	j.mu.Unlock()
	err := j.write(reqs)
	if err != nil {
		j.fail(err)
	}
	for i, q := range reqs {
		if q != r {
			q.done <- err
		}
		reqs[i] = nil
	}
	j.mu.Lock()
	if j.spare == nil {
		j.spare = reqs[:0]
	}
	if len(j.queue) > 0 {
		j.queue[0].done <- errLead
	} else {
		j.leading = false
	}
	j.mu.Unlock()
	return err
}

// Forget marks the journal so that what stores in dir journaled so far is never replayed:
// a store stopped with StopForRemoval, once its directory's removal is durable. (Before
// that, a crash must still find its acknowledged writes here; after it, replay finds no
// files to write them to, and the mark keeps it that way for a store made there again.)
func (j *Journal) Forget(dir string) error {
	key, err := j.key(dir)
	if err != nil {
		return err
	}
	return j.commit(&jreq{key: key, mark: true})
}

// key is a store directory's name in the journal: its path relative to the root.
func (j *Journal) key(dir string) (string, error) {
	rel, err := filepath.Rel(j.root, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("filestore: store %s is not under the journal's root %s", dir, j.root)
	}
	return filepath.ToSlash(rel), nil
}

// write appends the requests' entries to the active segment (moving to the next one when it
// fills) and syncs what it wrote.
func (j *Journal) write(reqs []*jreq) error {
	if p := j.failure.Load(); p != nil {
		return *p
	}
	var touched []*jseg // segments written through the page cache: synced at the end
	j.wbuf = j.wbuf[:0]
	var start int64
	flush := func() error {
		if len(j.wbuf) == 0 {
			return nil
		}
		if j.direct {
			err := j.writeDirect(j.act, start, j.wbuf)
			if err == nil {
				j.wbuf = j.wbuf[:0]
				return nil
			}
			if !errors.Is(err, vfs.ErrNoDirect) {
				return err
			}
			j.direct = false
			j.logf("filestore: journal %s: no direct writes here, writing through the page cache", j.dir)
		}
		if _, err := j.act.f.WriteAt(j.wbuf, start); err != nil {
			return err
		}
		if !slices.Contains(touched, j.act) {
			touched = append(touched, j.act)
		}
		j.wbuf = j.wbuf[:0]
		return nil
	}
	room := func(n int) error {
		if j.act != nil && j.act.off+int64(n) <= j.act.size {
			return nil
		}
		if j.act != nil {
			// The full segment is made durable before it is retired: once retired it may
			// be checkpointed and reused, and its entries are not acknowledged yet.
			if err := flush(); err != nil {
				return err
			}
			if slices.Contains(touched, j.act) {
				if err := j.act.f.Datasync(); err != nil {
					return err
				}
			}
			touched = touched[:0]
		}
		if err := j.rotate(); err != nil {
			return err
		}
		start = 0
		j.wbuf = appendJournalHeader(j.wbuf, j.act.gen)
		j.act.off = journalHdrLen
		return nil
	}
	if j.act != nil {
		start = j.act.off
	}
	for _, r := range reqs {
		if r.mark {
			n := jFixed + len(r.key)
			if err := room(n); err != nil {
				return err
			}
			j.wbuf = appendJournalEntry(j.wbuf, j.act.gen, jKindMark, r.key, "", 0, nil)
			j.act.off += int64(n)
			continue
		}
		for _, w := range r.writes {
			for data, off := w.data, w.off; len(data) > 0; {
				k := min(len(data), journalMaxChunk)
				n := jFixed + len(r.key) + 2 + len(w.name) + 8 + k
				if err := room(n); err != nil {
					return err
				}
				j.wbuf = appendJournalEntry(j.wbuf, j.act.gen, jKindWrite, r.key, w.name, off, data[:k])
				j.act.off += int64(n)
				j.act.files[w.f] = struct{}{}
				data, off = data[k:], off+int64(k)
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, sg := range touched {
		if err := sg.f.Datasync(); err != nil {
			return err
		}
	}
	return nil
}

// writeDirect writes b at off in sg by whole sectors, durably: the sector b starts in is
// rewritten with the bytes before off that it already holds (sg.tail), and the last one
// is padded with zeros, which replay reads as the end of the entries (a segment's unused
// space is zeros or an earlier use's entries, which replay stops at too).
func (j *Journal) writeDirect(sg *jseg, off int64, b []byte) error {
	dw, ok := sg.f.(vfs.DirectWriter)
	if !ok {
		return vfs.ErrNoDirect
	}
	const sec = vfs.SectorSize
	first := off &^ (sec - 1)
	pre := int(off - first)
	if pre != len(sg.tail) {
		return fmt.Errorf("filestore: journal %s: direct write at %d with %d bytes of its sector known", j.dir, off, len(sg.tail))
	}
	n := pre + len(b)
	size := (n + sec - 1) &^ (sec - 1)
	if cap(j.dbuf) < size {
		j.dbuf = vfs.AlignedBuf(max(size, 2*cap(j.dbuf)))
	}
	buf := j.dbuf[:size]
	copy(buf, sg.tail)
	copy(buf[pre:], b)
	clear(buf[n:])
	if err := dw.WriteAtSync(buf, first); err != nil {
		return err
	}
	end := off + int64(len(b))
	last := end &^ (sec - 1)
	sg.tail = append(sg.tail[:0], buf[last-first:end-first]...)
	return nil
}

// rotate retires the active segment (the checkpointer syncs the files it covers) and makes
// the next free one active, waiting for a checkpoint when every segment is in use.
func (j *Journal) rotate() error {
	j.cmu.Lock()
	if j.act != nil {
		j.retired = append(j.retired, j.act)
		j.act = nil
		select {
		case j.ckwake <- struct{}{}:
		default:
		}
	}
	for len(j.free) == 0 {
		if j.nsegs < journalMaxSegs {
			j.cmu.Unlock()
			sg, err := j.newSeg(journalSegSize)
			if err == nil {
				err = j.fs.SyncDir(j.dir)
			}
			j.cmu.Lock()
			if err != nil {
				j.cmu.Unlock()
				return err
			}
			j.free = append(j.free, sg)
			break
		}
		if p := j.failure.Load(); p != nil {
			j.cmu.Unlock()
			return *p
		}
		j.cond.Wait()
	}
	sg := j.free[0]
	j.free = j.free[1:]
	j.gen++
	sg.gen, sg.off, sg.files, sg.tail = j.gen, 0, make(map[File]struct{}), sg.tail[:0]
	j.act = sg
	if len(j.free) == 0 && j.nsegs < journalMaxSegs {
		// The checkpointer makes the next segment now, off the commit path.
		select {
		case j.ckwake <- struct{}{}:
		default:
		}
	}
	j.cmu.Unlock()
	return nil
}

// checkpointer syncs the block files a retired segment covers, then frees the segment.
func (j *Journal) checkpointer() {
	defer close(j.ckdone)
	for range j.ckwake {
		j.cmu.Lock()
		short := len(j.free) == 0 && len(j.retired) == 0 && j.nsegs < journalMaxSegs
		j.cmu.Unlock()
		if short {
			sg, err := j.newSeg(journalSegSize)
			if err == nil {
				err = j.fs.SyncDir(j.dir)
			}
			if err != nil {
				j.fail(err)
			} else {
				j.cmu.Lock()
				j.free = append(j.free, sg)
				j.cond.Broadcast()
				j.cmu.Unlock()
			}
		}
		for {
			j.cmu.Lock()
			if len(j.retired) == 0 {
				j.cmu.Unlock()
				break
			}
			sg := j.retired[0]
			j.cmu.Unlock()
			var err error
			for f := range sg.files {
				// A file closed since was deleted (its data is not needed) or belongs to a
				// store that synced it when it stopped.
				if e := f.Datasync(); e != nil && !errors.Is(e, os.ErrClosed) {
					err = e
					break
				}
			}
			j.cmu.Lock()
			if err != nil {
				j.cmu.Unlock()
				j.fail(err)
				j.cond.Broadcast()
				break
			}
			sg.files = nil
			j.retired = j.retired[1:]
			j.free = append(j.free, sg)
			j.cond.Broadcast()
			j.cmu.Unlock()
		}
	}
}

func appendJournalHeader(b []byte, gen uint64) []byte {
	var h [journalHdrLen]byte
	copy(h[:], journalMagic)
	binary.LittleEndian.PutUint64(h[8:], gen)
	binary.LittleEndian.PutUint64(h[16:], recSum(h[:16]))
	return append(b, h[:]...)
}

func appendJournalEntry(b []byte, gen uint64, kind byte, key, name string, off int64, data []byte) []byte {
	n := jFixed + len(key)
	if kind == jKindWrite {
		n += 2 + len(name) + 8 + len(data)
	}
	p := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint64(b, gen)
	b = append(b, kind)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(key)))
	b = append(b, key...)
	if kind == jKindWrite {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = binary.LittleEndian.AppendUint64(b, uint64(off))
		b = append(b, data...)
	}
	return binary.LittleEndian.AppendUint64(b, recSum(b[p+4:]))
}

type jentry struct {
	kind      byte
	key, name string
	off       int64
	data      []byte
}

// readSegment returns a segment's generation and its valid entries, in order, stopping at
// the first torn, corrupt or stale one; ok is false when the header is not a valid one.
func readSegment(f File) (gen uint64, ents []jentry, ok bool, err error) {
	b, err := readAll(f)
	if err != nil {
		return 0, nil, false, err
	}
	if len(b) < journalHdrLen || string(b[:4]) != journalMagic ||
		binary.LittleEndian.Uint64(b[16:]) != recSum(b[:16]) {
		return 0, nil, false, nil
	}
	gen = binary.LittleEndian.Uint64(b[8:])
	for p := journalHdrLen; p+4 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[p:]))
		if n < jFixed || p+n > len(b) {
			break
		}
		e := b[p : p+n]
		if binary.LittleEndian.Uint64(e[n-8:]) != recSum(e[4:n-8]) || binary.LittleEndian.Uint64(e[4:]) != gen {
			break
		}
		je := jentry{kind: e[12]}
		q := 13
		kl := int(binary.LittleEndian.Uint16(e[q:]))
		q += 2
		if q+kl > n-8 {
			break
		}
		je.key = string(e[q : q+kl])
		q += kl
		if je.kind == jKindWrite {
			if q+2 > n-8 {
				break
			}
			nl := int(binary.LittleEndian.Uint16(e[q:]))
			q += 2
			if q+nl+8 > n-8 {
				break
			}
			je.name = string(e[q : q+nl])
			q += nl
			je.off = int64(binary.LittleEndian.Uint64(e[q:]))
			q += 8
			je.data = e[q : n-8]
		} else if je.kind != jKindMark {
			break
		}
		ents = append(ents, je)
		p += n
	}
	return gen, ents, true, nil
}

// ReplayJournal brings the block files under root up to date with what the journal in dir
// made durable, syncs them, and then removes the journal's segments; it must run before any
// store under root opens. It returns how many writes it applied.
func ReplayJournal(fsys FS, root, dir string, logf func(string, ...any)) (int, error) {
	if fsys == nil {
		fsys = OSFS{}
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	n, _, _, err := replayJournal(fsys, root, dir, logf, false)
	return n, err
}

// replayJournal replays dir's segments; then, with keep, it voids their headers (durably) and
// returns them open for reuse, else it removes them. maxGen is the newest generation seen.
func replayJournal(fsys FS, root, dir string, logf func(string, ...any), keep bool) (applied int, maxGen uint64, kept []*jseg, err error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, 0, nil, nil
		}
		return 0, 0, nil, err
	}
	type seg struct {
		gen  uint64
		ents []jentry
	}
	var segs []seg
	var files []string
	for _, name := range names {
		if !strings.HasSuffix(name, ".jnl") {
			continue
		}
		path := filepath.Join(dir, name)
		files = append(files, path)
		f, err := fsys.OpenFile(path, false)
		if err != nil {
			return 0, 0, nil, err
		}
		gen, ents, ok, err := readSegment(f)
		f.Close()
		if err != nil {
			return 0, 0, nil, err
		}
		if ok {
			segs = append(segs, seg{gen, ents})
			maxGen = max(maxGen, gen)
		}
	}
	sort.Slice(segs, func(a, b int) bool { return segs[a].gen < segs[b].gen })
	// A store's writes before its last marker are void.
	type pos struct{ seg, ent int }
	lastMark := map[string]pos{}
	for si, sg := range segs {
		for ei, e := range sg.ents {
			if e.kind == jKindMark {
				lastMark[e.key] = pos{si, ei}
			}
		}
	}
	open := map[string]File{}
	var ferr error
	for si, sg := range segs {
		for ei, e := range sg.ents {
			if e.kind != jKindWrite {
				continue
			}
			if m, ok := lastMark[e.key]; ok && (si < m.seg || si == m.seg && ei < m.ent) {
				continue
			}
			path := filepath.Join(root, filepath.FromSlash(e.key), filepath.FromSlash(e.name))
			f, ok := open[path]
			if !ok {
				f, err = fsys.OpenFile(path, false)
				if err != nil {
					// Deleted (an emptied block, a removed stream) or sealed into .sblk.
					open[path] = nil
					continue
				}
				open[path] = f
			}
			if f == nil {
				continue
			}
			if _, err := f.WriteAt(e.data, e.off); err != nil && ferr == nil {
				ferr = err
			}
			applied++
		}
	}
	for _, f := range open {
		if f == nil {
			continue
		}
		if err := f.Datasync(); err != nil && ferr == nil {
			ferr = err
		}
		f.Close()
	}
	if ferr != nil {
		return applied, maxGen, nil, ferr
	}
	if applied > 0 {
		logf("filestore: journal %s: replayed %d writes into their block files", dir, applied)
	}
	// Everything the journal held is in the block files now: the next run must not replay
	// it over whatever the stores write from here on.
	if !keep {
		for _, path := range files {
			if err := fsys.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return applied, maxGen, nil, err
			}
		}
		if len(files) > 0 {
			err = fsys.SyncDir(dir)
		}
		return applied, maxGen, nil, err
	}
	var zero [journalHdrLen]byte
	for _, path := range files {
		f, err := fsys.OpenFile(path, false)
		if err != nil {
			return applied, maxGen, kept, err
		}
		size, err := f.Size()
		if err == nil && size < journalFirstSeg {
			// Cut short while it was being made, before it was ever used.
			f.Close()
			if err := fsys.Remove(path); err != nil {
				return applied, maxGen, kept, err
			}
			continue
		}
		if err == nil {
			if _, err = f.WriteAt(zero[:], 0); err == nil {
				err = f.Datasync()
			}
		}
		if err != nil {
			f.Close()
			for _, sg := range kept {
				sg.f.Close()
			}
			return applied, maxGen, nil, err
		}
		kept = append(kept, &jseg{f: f, name: path, size: size})
	}
	return applied, maxGen, kept, nil
}
