package filestore

import (
	"fmt"
	"io"
	"log"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/filestore/vfs"
	"github.com/natsd/natsd/sublist"
)

// Config configures a FileStore.
type Config struct {
	Dir string
	// FS defaults to the OS file system; tests substitute a power-loss double.
	FS FS
	// BlockSize is the raw size at which the active block is sealed and a new
	// one started (default 8MB).
	BlockSize int64
	// SyncInterval 0 (default) means every acknowledged write has been
	// fsync'd. A positive interval acknowledges after write(2) and fsyncs
	// periodically, as nats-server's sync_interval does. Negative never
	// fsyncs (benchmarks and tests only).
	SyncInterval time.Duration
	// Compress seals full blocks with S2.
	Compress bool
	// EncryptionKey enables encryption at rest; Cipher is "chacha" (default)
	// or "aes".
	EncryptionKey []byte
	Cipher        string
	Limits        Limits
	// MaxPending bounds the bytes of records StoreAsync may queue ahead of
	// the writer (default 64MB; negative: no bound). Past it StoreAsync fails
	// at once with ErrBusy, so a publisher faster than the disk is refused
	// (nats-server answers 429 when a stream's ingest queue is full) instead
	// of growing the queue until memory runs out. StoreMsg is not refused:
	// each blocked caller holds one record.
	MaxPending int64
	// Logf receives recovery and corruption reports (default log.Printf).
	Logf func(format string, args ...any)
	// Journal, with SyncInterval 0, makes commits durable through a journal shared with
	// other stores instead of fsyncing this store's own files (see Journal). Dir must be
	// under the journal's root.
	Journal *Journal
	// DirDurable: the caller made Dir/msgs (MsgsDir) and synced Dir since, so Open need
	// not sync Dir to make msgs/'s entry durable.
	DirDurable bool
}

// MsgsDir is the directory under Config.Dir that holds a store's files.
const MsgsDir = "msgs"

const (
	defaultBlockSize  = 8 << 20
	defaultMaxPending = 64 << 20
)

type opKind uint8

const (
	opStore opKind = iota
	opSkip
	opRemove
	opPurge
	opPurgeEx
	opCompact
	opExpire
	opLimits
	opWatch
	opTruncate
)

type op struct {
	kind opKind
	rec  []byte
	subj string
	size uint64
	n    uint64
	keep uint64 // opPurgeEx
	// opStore at a given sequence and time (StoreAt); at 0 takes the next ones.
	at  uint64
	ats int64
	cb  func(seq uint64, ts int64, err error)
	// opLimits, opWatch
	lim   *Limits
	watch StorageUpdate
	// results, filled by the writer
	rseq uint64
	rts  int64
	err  error
}

type subjState struct {
	name  string
	msgs  uint64
	first uint64 // exact while tracked; otherwise no live message of this subject is below it
	last  uint64
	// seqs lists every live sequence of the subject, in order, while it is
	// tracked. Finding a subject's oldest message after a removal otherwise
	// means scanning every other subject's messages in between: a KV bucket
	// of 100,000 keys managed 2.4k appends/s, and 10,000 keys with a history
	// of 100 (more than a KV allows, but any stream's MaxMsgsPerSubject may
	// say so) 17k. A subject is tracked while it has at most maxTracked
	// messages, whatever their spacing, and beyond that while its messages
	// are far apart: it gives the list up once they average fewer than
	// denseGap sequences apart (a scan then finds the next one within a few
	// hundred entries) and takes one back once they average sparseGap or
	// more. A long list makes removing from its middle a long copy (a
	// work queue acked out of order), so a subject also gives its list up
	// once it has more than 2*listRatio messages per sequence of average
	// gap, and takes one back only with at most listRatio: a removal's
	// copy then stays well below the scan the list saves. Most subjects
	// have none (see list), so it sits behind a pointer.
	seqs    *seqList
	id      uint32 // its number in the store's subjIndex (and the file store's ents); 0 once dropped
	tracked bool
}

type seqList struct{ s []uint64 }

// Variables only so that tests can make subjects change state often.
var (
	maxTracked = 64
	denseGap   = 128
	sparseGap  = 512
	listRatio  = 4
)

// span is how many sequences the subject's messages stretch over; with an
// untracked subject, whose first is a lower bound, it may be more.
func (ss *subjState) span() uint64 { return ss.last - ss.first + 1 }

// add counts a new message of the subject, the newest in the store.
func (ss *subjState) add(seq uint64) {
	switch {
	case ss.msgs == 0:
		ss.first = seq
		ss.seqs, ss.tracked = nil, true
	case ss.tracked && (ss.msgs >= 2 || ss.seqs != nil):
		if ss.seqs == nil {
			ss.seqs = &seqList{s: append(make([]uint64, 0, 4), ss.first, ss.last)}
		}
		l := ss.seqs.s
		if len(l) == cap(l) {
			// Removals pop the front, so a list that keeps its length (a key
			// at its history) runs out of room again and again. Growing by a
			// quarter instead of append's doubling keeps that cheap (a copy
			// per quarter turnover) at a quarter of the memory overhead.
			l = append(make([]uint64, 0, len(l)+len(l)/4+4), l...)
		}
		ss.seqs.s = append(l, seq)
	}
	ss.msgs++
	ss.last = seq
	if ss.tracked && ss.msgs > uint64(maxTracked) {
		if gap := ss.span() / ss.msgs; gap < uint64(denseGap) || ss.msgs > 2*uint64(listRatio)*gap {
			ss.seqs, ss.tracked = nil, false
		}
	}
}

// list is a tracked subject's live sequences. A subject with one or two
// messages (most KV keys: one value, and two for a moment while a new one
// replaces it) keeps no list, its first and last say it all; buf holds them
// then. A list made for a third message is kept down to two, so a subject
// going back and forth between two and three does not make one each time.
func (ss *subjState) list(buf *[2]uint64) []uint64 {
	if ss.seqs != nil {
		return ss.seqs.s
	}
	if ss.msgs == 0 {
		return nil
	}
	buf[0], buf[1] = ss.first, ss.last
	return buf[:min(ss.msgs, 2)]
}

// sparse reports whether an untracked subject's messages look far enough
// apart to list them. Its first may lag, so the store makes it exact
// before it decides (see relist).
func (ss *subjState) sparse() bool {
	// Every append asks: the usual answer needs no division.
	if ss.tracked || ss.span() < uint64(sparseGap)*ss.msgs {
		return false
	}
	return ss.msgs <= uint64(listRatio)*(ss.span()/ss.msgs)
}

// remove uncounts the subject's message seq. prev finds the subject's live
// message before a sequence, by scanning; it is needed only when an
// untracked subject loses its last message. With no message left the
// caller drops the subject.
func (ss *subjState) remove(seq uint64, prev func(before uint64) uint64) {
	ss.msgs--
	switch {
	case ss.msgs == 0:
		ss.seqs = nil
		return
	case ss.tracked && ss.seqs == nil: // two unlisted: the other one is left
		if seq == ss.first {
			ss.first = ss.last
		} else {
			ss.last = ss.first
		}
		return
	case ss.tracked:
		l := ss.seqs.s
		if l[0] == seq { // the usual case: limits, acks in order
			l = l[1:]
		} else if i, ok := slices.BinarySearch(l, seq); ok {
			// A list can be long, and removals cluster at its front (limits,
			// acks): move whichever side of seq is shorter.
			if i < len(l)/2 {
				copy(l[1:i+1], l[:i])
				l = l[1:]
			} else {
				l = slices.Delete(l, i, i+1)
			}
		}
		ss.seqs.s = l
		ss.first, ss.last = l[0], l[len(l)-1]
	case seq == ss.first:
		ss.first = seq + 1
	case seq == ss.last:
		ss.last = prev(seq)
	}
	if ss.msgs == 1 { // the one left is the last: the subject is tracked again, with no list
		ss.first = ss.last
		ss.seqs, ss.tracked = nil, true
	}
}

// relist decides again whether an untracked subject that looked sparse
// should be listed. next returns the subject's first live message after a
// sequence (0 for none up to its last). The first message is found first,
// from the lower bound, as the next removal would have to anyway; the list
// is built only if the messages really are far apart, so a subject whose
// first merely lagged is scanned once and stays untracked with an exact
// first.
func (ss *subjState) relist(next func(after uint64) uint64) {
	first := next(ss.first - 1)
	if first == 0 {
		return
	}
	ss.first = first
	if !ss.sparse() {
		return
	}
	if ss.msgs <= 2 { // first and last are exact now: no list needed
		ss.seqs, ss.tracked = nil, true
		return
	}
	seqs := make([]uint64, 1, ss.msgs)
	seqs[0] = first
	for uint64(len(seqs)) < ss.msgs {
		seq := next(seqs[len(seqs)-1])
		if seq == 0 {
			return // counts disagree with the messages: stay untracked
		}
		seqs = append(seqs, seq)
	}
	ss.seqs, ss.tracked = &seqList{s: seqs}, true
}

// ent is one sequence's place in its block. A long stream holds tens of
// millions, so ent has no pointers (the garbage collector never scans the
// index) and packs into 16 bytes. The subject is a number into
// FileStore.subjByID, and 0 means the sequence holds no live message. The
// message's size is not kept: it follows from slen (entSize). Its timestamp
// is kept in milliseconds after the block's base, rounded up, which is all
// expiry needs (a message never expires early, at most 1 ms late); the
// exact time is in the record. A block rolls before a timestamp would not
// fit (maxEntSpan).
type ent struct {
	off  uint32
	slen uint32
	sid  uint32
	tms  uint32
}

func (e *ent) live() bool { return e.sid != 0 }

type marker struct {
	kind byte
	seq  uint64
	aux  int64
}

type block struct {
	id      uint64
	first   uint64 // seq of ents[0]; for an empty block, the next seq when created
	ents    []ent
	live    int
	size    int64 // bytes of the block file including this batch's pending bytes
	f       File
	fresh   bool // file not created yet
	sealed  bool
	limit   int64 // the block rolls once its size reaches this (see firstBlockSize)
	base    int64 // timestamp (ns) ent.tms counts from: its first message's
	markers []marker
}

func (b *block) end() uint64 { return b.first + uint64(len(b.ents)) } // one past the last seq

type seg struct {
	b          *block
	off        int64
	start, end int
}

// FileStore is the file-backed Store. All mutations run on one writer
// goroutine, which writes a whole commit with one pwrite per touched block;
// with SyncInterval 0 a commit is acknowledged only once an fdatasync started
// after that write has returned (group commit; see writer.go). Work that
// only has to follow durability (sealing, deleting blocks, index.db) runs on
// a finisher goroutine.
type FileStore struct {
	cfg  Config
	fs   FS
	dir  string
	cry  *cryptor
	logf func(string, ...any)

	mu        sync.RWMutex
	blocks    []*block
	act       *block
	subjects  subjIndex
	first     uint64
	last      uint64
	lastEntTS int64 // exact timestamp of the message at last (0 for a skip)
	msgs      uint64
	bytes     uint64
	durable   uint64        // readers see no seq above it: it is not yet acknowledged
	dwait     chan struct{} // closed when durable moves or the store fails (WaitDurable)
	lost      LostInfo
	readErrs  atomic.Uint64
	rep       reporter // writer, under mu

	// Limits.MaxMsgSize, checked by the caller of StoreAsync; the writer
	// owns the rest of cfg.Limits.
	maxMsgSize atomic.Int32

	cmu   sync.Mutex
	cache map[*block][]byte
	// ra is read-ahead from the active (unsealed) block, under cmu: consumers read the
	// newest messages one after another, and one pread per message was most of what a
	// delivery cost. It holds only bytes of records already durable, which are never
	// written again unless cutBlock cuts the block (which drops it).
	ra struct {
		b    *block
		off  int64
		data []byte
		// Where the last record read from the active block ended: only a read that
		// starts there (a reader streaming through it) reads ahead. Readers that skip
		// (filtered consumers, many interleaved) read just their record.
		lastB   *block
		lastEnd int64
		// A chunk to read ahead into: the one the last read-ahead replaced (readers
		// copy out of data under cmu, so once replaced nobody holds it). A reader
		// streaming through a backlog then reads chunk after chunk without
		// allocating; the cost is at most one more chunk held per store read so.
		spare []byte
	}

	qmu      sync.Mutex
	queue    []*op
	queued   int64   // record bytes in queue
	free     [][]*op // op slices handed back after acknowledgement
	closed   bool
	removing bool // StopForRemoval: shutdown only closes the files
	nheld    int  // how many records at the queue's end StoreAsyncHeld left untold
	wRunning bool // a writer goroutine runs (it ends after writerIdle without work)
	syncDue  bool // SyncInterval > 0: the periodic sync is due
	wake     chan struct{}
	done     chan struct{} // closed once the store has shut down
	tickT    *time.Timer   // SyncInterval > 0: sets syncDue every interval

	// drainMu is held by whoever does the writer's work: the writer goroutine, or a caller
	// of Flush that found it idle. Everything under "writer-owned" is theirs.
	drainMu sync.Mutex

	// SyncInterval 0: durable commits with work left for the finisher
	fin        chan *commit
	fmu        sync.Mutex // finRunning
	finRunning bool
	fwg        sync.WaitGroup
	finIdx     []byte // index.db contents a finisher run left unwritten

	// zero-filled files for new blocks, made ahead (askSpare)
	spares  chan spare // one slot
	spareN  int
	spareWG sync.WaitGroup

	failure atomic.Pointer[error] // set once by the first write or sync error

	// writer-owned
	cur        *commit // applied and encoded, not yet durable
	opsBuf     []*op   // the last commit's ops slice, for the next one
	nextID     uint64
	lastTS     int64
	wbuf       []byte
	segs       []seg
	rolled     []*block
	dead       []*block
	floor      uint64 // floor marker to emit at the end of the batch
	floorAt    uint64 // the highest floor marker emitted (or recovered)
	maybeEmpty bool   // a block may have emptied since collectEmpty last looked
	blank      bool   // Open found neither a block nor index.db: a new store
	spareAsked bool   // a spare has been asked for and not yet used
	lastLimit  int64  // room of the newest block
	dirty      bool
	armed      bool
	indexStale bool
	timer      *time.Timer

	jn   *Journal // cfg.Journal when commits go through it
	jkey string   // this store's name in the journal
	jw   []jwrite // the open commit's writes, for the journal
}

var _ Store = (*FileStore)(nil)

// Open opens or creates the store in cfg.Dir, recovering from whatever a
// crash left behind.
func Open(cfg Config) (*FileStore, error) {
	if cfg.FS == nil {
		cfg.FS = OSFS{}
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = defaultBlockSize
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = defaultMaxPending
	}
	cry, err := newCryptor(cfg.EncryptionKey, cfg.Cipher)
	if err != nil {
		return nil, err
	}
	s := &FileStore{
		cfg:   cfg,
		fs:    cfg.FS,
		dir:   filepath.Join(cfg.Dir, MsgsDir),
		cry:   cry,
		logf:  cfg.Logf,
		cache: make(map[*block][]byte),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	s.maxMsgSize.Store(cfg.Limits.MaxMsgSize)
	if cfg.Journal != nil && cfg.SyncInterval == 0 {
		if s.jkey, err = cfg.Journal.key(cfg.Dir); err != nil {
			return nil, err
		}
		s.jn = cfg.Journal
	}
	if err := s.fs.MkdirAll(s.dir); err != nil {
		return nil, err
	}
	// msgs/ may be new: its entry in the store's directory must be durable before any
	// record in it is acknowledged.
	if !cfg.DirDurable {
		if err := s.fs.SyncDir(cfg.Dir); err != nil {
			return nil, err
		}
	}
	if err := s.recover(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.spares = make(chan spare, 1)
	if s.blank {
		s.askFirst(s.nextLimit(s.lastLimit))
	} else if b := s.act; b == nil || b.size >= b.limit/4 {
		s.askSpare(s.nextLimit(s.lastLimit))
	}
	if s.grouped() {
		s.fin = make(chan *commit, 64) // its finisher starts with the first commit handed to it
	}
	if cfg.SyncInterval > 0 {
		s.qmu.Lock() // tick may run before AfterFunc returns
		s.tickT = time.AfterFunc(cfg.SyncInterval, s.tick)
		s.qmu.Unlock()
	}
	if cfg.Limits.MaxAge > 0 {
		s.enqueue(&op{kind: opExpire}, false, false)
	}
	return s, nil
}

func (s *FileStore) blockPath(id uint64, sealed bool) string {
	if sealed {
		return filepath.Join(s.dir, fmt.Sprintf("%d.sblk", id))
	}
	return filepath.Join(s.dir, fmt.Sprintf("%d.blk", id))
}

// ---- public API ----

func (s *FileStore) StoreAsync(subj string, hdr, msg []byte, cb func(seq uint64, ts int64, err error)) {
	s.storeAsync(subj, hdr, msg, cb, false)
}

// StoreAsyncHeld is StoreAsync without telling the writer: the record waits in the queue
// until the caller's Flush (or any other call that queues work) hands it over. A stream's
// worker stores a whole batch of publishes this way and flushes once at its end.
func (s *FileStore) StoreAsyncHeld(subj string, hdr, msg []byte, cb func(seq uint64, ts int64, err error)) {
	s.storeAsync(subj, hdr, msg, cb, true)
}

func (s *FileStore) storeAsync(subj string, hdr, msg []byte, cb func(seq uint64, ts int64, err error), held bool) {
	if err := checkMsg(s.maxMsgSize.Load(), subj, hdr, msg); err != nil {
		if cb != nil {
			cb(0, 0, err)
		}
		return
	}
	o := &op{kind: opStore, rec: encodeRecord(kindMsg, subj, hdr, msg), subj: subj,
		size: storedSize(subj, hdr, msg), cb: cb}
	if !s.enqueue(o, true, held) && cb != nil {
		cb(0, 0, ErrBusy)
	}
}

// Flush hands over what StoreAsyncHeld queued. With inline, a store that commits in groups
// and whose writer is idle has the caller do the writer's work: apply, write, fsync and call
// the callbacks on the caller's goroutine, which then blocks for the commit. It commits at
// once, without the writer's linger (drain): the caller is taken to be where more records
// would come from.
//
// Why: a worker storing for one publisher at a time (a sync publish, a KV put) otherwise
// wakes the writer goroutine for every message, and on a virtual machine with idle cores
// that wake-up (a futex and an idle vCPU brought back) costs tens of µs of each ack's
// latency. A caller with more work waiting passes inline false and keeps the writer
// overlapping its fsync with that work.
func (s *FileStore) Flush(inline bool) {
	s.qmu.Lock()
	s.nheld = 0
	n := len(s.queue)
	s.qmu.Unlock()
	if n == 0 {
		return
	}
	if inline && s.grouped() && s.drainMu.TryLock() {
		closing := s.drain(false)
		s.drainMu.Unlock()
		if !closing {
			return
		}
		// Stop came in meanwhile: the writer goroutine it started shuts the store down.
	}
	s.kick()
}

func checkMsg(maxSize int32, subj string, hdr, msg []byte) error {
	if subj == "" || len(subj) > 0xffff {
		return ErrBadSubject
	}
	if maxSize > 0 && len(hdr)+len(msg) > int(maxSize) {
		return ErrMaxMsgSize
	}
	return nil
}

type result struct {
	seq uint64
	ts  int64
	err error
}

var resPool = sync.Pool{New: func() any { return make(chan result, 1) }}

func (s *FileStore) wait(o *op) (uint64, int64, error) {
	ch := resPool.Get().(chan result)
	o.cb = func(seq uint64, ts int64, err error) { ch <- result{seq, ts, err} }
	s.enqueue(o, false, false)
	r := <-ch
	resPool.Put(ch)
	return r.seq, r.ts, r.err
}

func (s *FileStore) StoreMsg(subj string, hdr, msg []byte) (uint64, int64, error) {
	if err := checkMsg(s.maxMsgSize.Load(), subj, hdr, msg); err != nil {
		return 0, 0, err
	}
	return s.wait(&op{kind: opStore, rec: encodeRecord(kindMsg, subj, hdr, msg), subj: subj,
		size: storedSize(subj, hdr, msg)})
}

func (s *FileStore) StoreAt(seq uint64, ts int64, subj string, hdr, msg []byte) error {
	if err := checkMsg(s.maxMsgSize.Load(), subj, hdr, msg); err != nil {
		return err
	}
	if seq == 0 {
		return ErrSeqOrder
	}
	_, _, err := s.wait(&op{kind: opStore, rec: encodeRecord(kindMsg, subj, hdr, msg), subj: subj,
		size: storedSize(subj, hdr, msg), at: seq, ats: ts})
	return err
}

func (s *FileStore) StoreAtAsync(seq uint64, ts int64, subj string, hdr, msg []byte, cb func(uint64, int64, error)) {
	if err := checkMsg(s.maxMsgSize.Load(), subj, hdr, msg); err != nil {
		cb(0, 0, err)
		return
	}
	if seq == 0 {
		cb(0, 0, ErrSeqOrder)
		return
	}
	s.enqueue(&op{kind: opStore, rec: encodeRecord(kindMsg, subj, hdr, msg), subj: subj,
		size: storedSize(subj, hdr, msg), at: seq, ats: ts, cb: cb}, false, false)
}

func (s *FileStore) SkipMsgs(n uint64) (uint64, error) {
	if n == 0 {
		n = 1
	}
	seq, _, err := s.wait(&op{kind: opSkip, n: n})
	return seq, err
}

func (s *FileStore) RemoveMsg(seq uint64) (bool, error) {
	n, _, err := s.wait(&op{kind: opRemove, n: seq})
	if err == ErrNotFound {
		return false, nil
	}
	return n == 1, err
}

func (s *FileStore) Purge() (uint64, error) {
	n, _, err := s.wait(&op{kind: opPurge})
	return n, err
}

func (s *FileStore) PurgeSubject(filter string) (uint64, error) {
	return s.PurgeEx(filter, 0, 0)
}

func (s *FileStore) PurgeEx(filter string, seq, keep uint64) (uint64, error) {
	n, _, err := s.wait(&op{kind: opPurgeEx, subj: filter, n: seq, keep: keep})
	return n, err
}

func (s *FileStore) Compact(seq uint64) (uint64, error) {
	n, _, err := s.wait(&op{kind: opCompact, n: seq})
	return n, err
}

func (s *FileStore) UpdateLimits(l Limits) error {
	_, _, err := s.wait(&op{kind: opLimits, lim: &l})
	return err
}

func (s *FileStore) RegisterStorageUpdates(fn StorageUpdate) {
	s.wait(&op{kind: opWatch, watch: fn})
}

func (s *FileStore) Truncate(seq uint64) error {
	_, _, err := s.wait(&op{kind: opTruncate, n: seq})
	return err
}

// enqueue queues o for the writer. With bounded (StoreAsync) it refuses o,
// and reports false, when o would take the queue past MaxPending; a record
// is always taken into an empty queue, however large.
func (s *FileStore) enqueue(o *op, bounded, held bool) bool {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		if o.cb != nil {
			o.cb(0, 0, ErrClosed)
		}
		return true
	}
	if lim := s.cfg.MaxPending; bounded && lim > 0 && s.queued > 0 && s.queued+int64(len(o.rec)) > lim {
		s.qmu.Unlock()
		return false
	}
	s.queue = append(s.queue, o)
	s.queued += int64(len(o.rec))
	if held {
		s.nheld++
		s.qmu.Unlock()
		return true
	}
	// The writer is told when the queue becomes non-empty, or of earlier held records
	// once something not held joins them (its caller may wait for it); one is started
	// when none runs.
	start := !s.wRunning
	tell := !start && (len(s.queue) == 1 || s.nheld > 0)
	s.wRunning = true
	s.nheld = 0
	s.qmu.Unlock()
	if start {
		go s.writer()
	} else if tell {
		s.poke()
	}
	return true
}

// Stop drains pending writes, syncs, writes the index and closes files.
func (s *FileStore) Stop() error {
	return s.stop(true)
}

// StopForRemoval is Stop for a store whose directory is about to be removed: it applies
// and acknowledges what is queued, then closes its files without writing index.db, syncing
// its blocks or marking the journal (an fsync each, and the whole wait of a stream delete
// but for the removal itself). What it acknowledged stays durable through the journal until
// the directory is gone. The caller must then remove the directory, make the removal
// durable and, when the store used a journal, call its Forget for the directory before a
// store is made there again.
func (s *FileStore) StopForRemoval() error {
	return s.stop(false)
}

func (s *FileStore) stop(index bool) error {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	s.removing = !index
	s.qmu.Unlock()
	s.kick()
	<-s.done
	return s.failed()
}

// ---- reads ----

func (s *FileStore) findBlock(seq uint64) *block {
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].end() > seq })
	if i == len(s.blocks) || seq < s.blocks[i].first {
		return nil
	}
	return s.blocks[i]
}

// WaitDurable is Store's: a waiter sleeps on dwait, which the writer closes each time durable
// moves (or the store fails or is truncated).
func (s *FileStore) WaitDurable(seq uint64) {
	for {
		s.mu.Lock()
		if seq <= s.durable || seq > s.last || s.failed() != nil {
			s.mu.Unlock()
			return
		}
		if s.dwait == nil {
			s.dwait = make(chan struct{})
		}
		ch := s.dwait
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.done:
			return
		}
	}
}

// wakeDurable tells WaitDurable's callers to look again (s.mu held).
func (s *FileStore) wakeDurableLocked() {
	if s.dwait != nil {
		close(s.dwait)
		s.dwait = nil
	}
}

func (s *FileStore) LoadMsg(seq uint64) (*StoredMsg, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if seq > s.durable {
		return nil, ErrEOF
	}
	return s.loadLocked(seq)
}

func (s *FileStore) loadLocked(seq uint64) (*StoredMsg, error) { return s.loadWait(seq, true, nil) }

// loadWait is loadLocked; without wait it reads only what is in memory and fails with
// ErrWouldBlock otherwise. With mb the message is decoded into it, its bytes in mb's
// buffer, and nothing is allocated once that buffer is large enough.
func (s *FileStore) loadWait(seq uint64, wait bool, mb *MsgBuf) (*StoredMsg, error) {
	b := s.findBlock(seq)
	if b == nil {
		return nil, ErrNotFound
	}
	e := &b.ents[seq-b.first]
	if !e.live() {
		return nil, ErrNotFound
	}
	var dst *[]byte
	if mb != nil {
		dst = &mb.buf
	}
	rec, err := s.readRec(b, e, wait, dst)
	if err == ErrWouldBlock {
		return nil, err
	}
	if err == nil {
		rv, n, ok := parseRecord(rec)
		if ok && n == len(rec) && rv.seq == seq && rv.kind == kindMsg {
			var m *StoredMsg
			if mb != nil {
				m = &mb.StoredMsg
			} else {
				m = new(StoredMsg)
			}
			*m = StoredMsg{Subject: s.subjects.byID(e.sid).name, Seq: seq, TS: rv.ts}
			if m.Subject != string(rv.subj) { // cannot happen; the record is the truth
				m.Subject = string(rv.subj)
			}
			switch {
			case b.sealed && mb != nil:
				// rec is in the block cache: the caller gets copies, in its buffer.
				mb.setBody(rv.hdr, rv.msg)
			case b.sealed:
				m.Header, m.Data = clone(rv.hdr), clone(rv.msg)
			default:
				// rec was read for this call alone (into mb's buffer if given and the
				// record small enough), so the caller may have it; capped, so appending to
				// Header cannot run into Data.
				m.Header, m.Data = capped(rv.hdr), capped(rv.msg)
			}
			return m, nil
		}
		err = ErrCorrupt
	}
	s.readErrs.Add(1)
	s.logf("filestore: %s: message %d in block %d failed its checksum on read: %v", s.cfg.Dir, seq, b.id, err)
	return nil, ErrCorrupt
}

// capped is b with no room to grow into what follows it (nil if empty).
func capped(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// readRec returns the plaintext record bytes; the caller holds mu.RLock.
// For a sealed block they are the block cache's, to be copied; otherwise
// they were read (or decrypted) for this call alone, into *dst when dst is
// given. Without wait it fails with ErrWouldBlock where it would have to
// wait for a lock or the device.
func (s *FileStore) readRec(b *block, e *ent, wait bool, dst *[]byte) ([]byte, error) {
	if b.sealed {
		raw, err := s.sealedRaw(b, wait)
		if err != nil {
			return nil, err
		}
		if int(e.off)+int(e.slen) > len(raw) {
			return nil, ErrCorrupt
		}
		return raw[e.off : e.off+e.slen], nil
	}
	if b.f == nil {
		return nil, ErrNotFound
	}
	buf, err := s.readAhead(b, e, wait, dst)
	if err != nil {
		return nil, err
	}
	if s.cry != nil {
		p, n, ok := s.cry.openFrame(buf)
		if !ok || n != len(buf) {
			return nil, ErrCorrupt
		}
		return p, nil
	}
	return buf, nil
}

// recBuf is n bytes for a record to be read or copied into: a fresh slice, or with dst
// the reader's own buffer (grown when short, and left in *dst for its next read). A record
// larger than msgBufKeep gets a fresh slice even so: a reader's buffer stays small.
func recBuf(dst *[]byte, n int64) []byte {
	if dst == nil || n > msgBufKeep {
		return make([]byte, n)
	}
	if int64(cap(*dst)) < n {
		*dst = make([]byte, n, max(n, 1024))
	}
	*dst = (*dst)[:n]
	return *dst
}

// raChunk is how much one read of the active block reads ahead.
const raChunk = 64 << 10

// readAhead returns a copy of e's record bytes in the unsealed block b (mu held for
// reading), from the read-ahead when it has them, else reading them (and, for a reader
// streaming through the block, a chunk past them). The copy is fresh, or in *dst when dst
// is given (see recBuf).
func (s *FileStore) readAhead(b *block, e *ent, wait bool, dst *[]byte) ([]byte, error) {
	off, n := int64(e.off), int64(e.slen)
	if !wait {
		if !s.cmu.TryLock() {
			return nil, ErrWouldBlock
		}
	} else {
		s.cmu.Lock()
	}
	if s.ra.b == b && off >= s.ra.off && off+n <= s.ra.off+int64(len(s.ra.data)) {
		buf := recBuf(dst, n)
		copy(buf, s.ra.data[off-s.ra.off:])
		s.ra.lastB, s.ra.lastEnd = b, off+n
		s.cmu.Unlock()
		return buf, nil
	}
	if !wait {
		// One record from the page cache, leaving the read-ahead to readers that may wait.
		s.cmu.Unlock()
		nw, ok := b.f.(vfs.NoWaitReader)
		if !ok {
			return nil, ErrWouldBlock
		}
		buf := recBuf(dst, n)
		if _, err := nw.ReadAtNoWait(buf, off); err != nil {
			if err == vfs.ErrWouldBlock {
				err = ErrWouldBlock
			}
			return nil, err
		}
		return buf, nil
	}
	streaming := s.ra.lastB == b && s.ra.lastEnd == off
	s.ra.lastB, s.ra.lastEnd = b, off+n
	var spare []byte
	if streaming {
		spare, s.ra.spare = s.ra.spare, nil
	}
	s.cmu.Unlock()
	if !streaming {
		buf := recBuf(dst, n)
		if _, err := b.f.ReadAt(buf, off); err != nil {
			return nil, err
		}
		return buf, nil
	}
	// Read ahead only over records already durable: past them, bytes may not be written yet.
	limit := off + n
	if last := min(s.durable, b.end()-1); last >= b.first {
		for seq, k := last, 0; seq >= b.first && k < 64; seq, k = seq-1, k+1 {
			if le := &b.ents[seq-b.first]; le.live() {
				limit = max(limit, int64(le.off)+int64(le.slen))
				break
			}
		}
	}
	limit = min(limit, off+max(n, raChunk))
	chunk := spare
	if int64(cap(chunk)) < limit-off {
		chunk = make([]byte, limit-off)
	}
	chunk = chunk[:limit-off]
	got, err := b.f.ReadAt(chunk, off)
	if int64(got) < n {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	chunk = chunk[:got]
	buf := recBuf(dst, n)
	copy(buf, chunk)
	s.cmu.Lock()
	if int64(got) > n {
		s.ra.b, s.ra.off, s.ra.data, chunk = b, off, chunk, s.ra.data
	}
	if s.ra.spare == nil && cap(chunk) <= raChunk { // not a chunk stretched for one huge record
		s.ra.spare = chunk[:0]
	}
	s.cmu.Unlock()
	return buf, nil
}

func (s *FileStore) sealedRaw(b *block, wait bool) ([]byte, error) {
	if !wait {
		if !s.cmu.TryLock() {
			return nil, ErrWouldBlock
		}
	} else {
		s.cmu.Lock()
	}
	defer s.cmu.Unlock()
	if raw, ok := s.cache[b]; ok {
		return raw, nil
	}
	if !wait {
		return nil, ErrWouldBlock
	}
	if b.f == nil {
		// Closed: the store has stopped, or the block was dropped.
		return nil, ErrNotFound
	}
	data, err := readAll(b.f)
	if err != nil {
		return nil, err
	}
	raw, err := s.unseal(data)
	if err != nil {
		return nil, err
	}
	// A tiny cache is enough: reads are mostly sequential, one block at a time.
	if len(s.cache) >= 2 {
		clear(s.cache)
	}
	s.cache[b] = raw
	return raw, nil
}

func (s *FileStore) LoadLastMsg(filter string) (*StoredMsg, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var seq uint64
	switch {
	case matchesAll(filter):
		for seq = min(s.last, s.durable); seq >= s.first && seq > 0; seq-- {
			if e := s.entLocked(seq); e != nil && e.live() {
				break
			}
		}
	default:
		eachSubject(&s.subjects, filter, func(ss *subjState) { seq = max(seq, s.lastOfLocked(ss, math.MaxUint64)) })
	}
	if seq == 0 || seq < s.first {
		return nil, ErrNotFound
	}
	return s.loadLocked(seq)
}

func (s *FileStore) TryLoadLastMsg(subject string) (*StoredMsg, error) {
	if matchesAll(subject) || sublist.IsWildcard(subject) {
		return nil, ErrWouldBlock
	}
	if !s.mu.TryRLock() {
		return nil, ErrWouldBlock
	}
	defer s.mu.RUnlock()
	var seq uint64
	if ss := s.subjects.get(subject); ss != nil {
		seq = s.lastOfLocked(ss, math.MaxUint64)
	}
	if seq == 0 || seq < s.first {
		return nil, ErrNotFound
	}
	return s.loadWait(seq, false, nil)
}

// lastOfLocked is the newest acknowledged message of subject ss at or below
// upTo, 0 if none.
func (s *FileStore) lastOfLocked(ss *subjState, upTo uint64) uint64 {
	upTo = min(upTo, ss.last, s.durable)
	if ss.tracked {
		var buf [2]uint64
		return lastListed(ss.list(&buf), upTo)
	}
	for seq := upTo; seq >= max(s.first, ss.first) && seq > 0; seq-- {
		if e := s.entLocked(seq); e != nil && e.sid == ss.id {
			return seq
		}
	}
	return 0
}

func (s *FileStore) entLocked(seq uint64) *ent {
	_, e := s.blockEnt(seq)
	return e
}

func (s *FileStore) LoadNextMsg(filter string, start uint64) (*StoredMsg, error) {
	return s.loadNext(nil, filter, start)
}

func (s *FileStore) LoadNextMsgInto(mb *MsgBuf, filter string, start uint64) (*StoredMsg, error) {
	return s.loadNext(mb, filter, start)
}

func (s *FileStore) loadNext(mb *MsgBuf, filter string, start uint64) (*StoredMsg, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if start < s.first {
		start = s.first
	}
	var ss *subjState
	wild := false
	switch {
	case matchesAll(filter):
	case sublist.IsWildcard(filter):
		wild = true
	default:
		if ss = s.subjects.get(filter); ss == nil || ss.msgs == 0 {
			return nil, ErrEOF
		}
		if ss.tracked { // its messages are listed: no need to look between them
			var buf [2]uint64
			seqs := ss.list(&buf)
			i, _ := slices.BinarySearch(seqs, start)
			if i == len(seqs) || seqs[i] > s.durable {
				return nil, ErrEOF
			}
			return s.loadWait(seqs[i], true, mb)
		}
		if start < ss.first {
			start = ss.first
		}
	}
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].end() > start })
	for ; i < len(s.blocks); i++ {
		b := s.blocks[i]
		seq := max(start, b.first)
		for ; seq < b.end() && seq <= s.durable; seq++ {
			e := &b.ents[seq-b.first]
			if !e.live() || (ss != nil && e.sid != ss.id) {
				continue
			}
			if wild && !sublist.MatchFilter(s.subjects.byID(e.sid).name, filter) {
				continue
			}
			return s.loadWait(seq, true, mb)
		}
	}
	return nil, ErrEOF
}

func (s *FileStore) FilteredState(filter string, start uint64) SimpleState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var st SimpleState
	if s.msgs == 0 {
		return st
	}
	start = max(start, s.first)
	switch {
	case matchesAll(filter):
		s.allFromLocked(start, &st)
	default:
		eachSubject(&s.subjects, filter, func(ss *subjState) { s.subjFromLocked(ss, start, &st) })
	}
	return st
}

// subjFromLocked adds subject ss's messages at or after start to st. Its
// count and last are exact; its first is only a lower bound, so the first
// message is looked for.
func (s *FileStore) subjFromLocked(ss *subjState, start uint64, st *SimpleState) {
	if ss.msgs == 0 || start > ss.last {
		return
	}
	if ss.tracked {
		var buf [2]uint64
		seqs := ss.list(&buf)
		i, _ := slices.BinarySearch(seqs, start)
		st.add(uint64(len(seqs)-i), seqs[i], ss.last)
		return
	}
	var n, first uint64
	for seq := max(start, ss.first); seq <= ss.last; seq++ {
		if e := s.entLocked(seq); e != nil && e.sid == ss.id {
			if first == 0 {
				first = seq
				if start <= ss.first {
					n = ss.msgs // all of them: no need to count
					break
				}
			}
			n++
		}
	}
	st.add(n, first, ss.last)
}

// allFromLocked adds every message at or after start to st, counting whole
// blocks by their live counts.
func (s *FileStore) allFromLocked(start uint64, st *SimpleState) {
	last := s.last
	for ; last >= start; last-- {
		if e := s.entLocked(last); e != nil && e.live() {
			break
		}
	}
	if last < start {
		return
	}
	if start <= s.first {
		st.add(s.msgs, s.first, last)
		return
	}
	var n, first uint64
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].end() > start })
	for ; i < len(s.blocks); i++ {
		b := s.blocks[i]
		if b.first >= start && first != 0 {
			n += uint64(b.live)
			continue
		}
		for seq := max(start, b.first); seq < b.end(); seq++ {
			if b.ents[seq-b.first].live() {
				if first == 0 {
					first = seq
				}
				n++
			}
		}
	}
	st.add(n, first, last)
}

func (s *FileStore) GetSeqFromTime(t time.Time) uint64 {
	ts := t.UnixNano()
	s.mu.RLock()
	defer s.mu.RUnlock()
	// Stamps never go back, so "the first message from x on is stamped at
	// ts or later (or there is none)" holds for every x past some point:
	// search for it. Only durable messages count. An entry's time, rounded
	// up to the millisecond, settles most probes without reading a record.
	end := s.durable + 1
	if s.first >= end {
		return end
	}
	next := func(x uint64) (*block, *ent, uint64) {
		i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].end() > x })
		for ; i < len(s.blocks) && s.blocks[i].first < end; i++ {
			b := s.blocks[i]
			if b.live == 0 {
				continue
			}
			for seq := max(x, b.first); seq < b.end() && seq < end; seq++ {
				if e := &b.ents[seq-b.first]; e.live() {
					return b, e, seq
				}
			}
		}
		return nil, nil, 0
	}
	x := s.first + uint64(sort.Search(int(end-s.first), func(i int) bool {
		b, e, _ := next(s.first + uint64(i))
		if e == nil {
			return true
		}
		switch at := s.entTS(b, e); {
		case at < ts: // at is at or after the exact time
			return false
		case at-int64(time.Millisecond) >= ts: // and less than a millisecond after it
			return true
		}
		exact, ok := s.recTS(b, e)
		return !ok || exact >= ts
	}))
	if _, _, seq := next(x); seq != 0 {
		return seq
	}
	return end
}

func (s *FileStore) MultiLastSeqs(filters []string, maxSeq uint64, maxAllowed int) ([]uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if maxSeq == 0 {
		maxSeq = math.MaxUint64
	}
	return multiLast(&s.subjects, filters, maxAllowed, func(ss *subjState) uint64 { return s.lastOfLocked(ss, maxSeq) })
}

func (s *FileStore) SubjectsState(filter string) map[string]SimpleState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if filter == "" {
		filter = ">"
	}
	var st map[string]SimpleState
	eachSubject(&s.subjects, filter, func(ss *subjState) {
		var one SimpleState
		s.subjFromLocked(ss, 0, &one)
		if one.Msgs == 0 {
			return
		}
		if st == nil {
			st = map[string]SimpleState{}
		}
		st[ss.name] = one
	})
	return st
}

func (s *FileStore) FastState() State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.stateLocked(false)
}

func (s *FileStore) State() State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.stateLocked(true)
}

func (s *FileStore) stateLocked(subjects bool) State {
	st := State{Msgs: s.msgs, Bytes: s.bytes, FirstSeq: s.first, LastSeq: s.last, NumSubjects: s.subjects.len()}
	st.LastTS = s.lastTS
	if s.msgs > 0 {
		// The exact times are in the records: the first one's is read back
		// (or, in the moment its record is still being written, taken to the
		// millisecond from the index).
		if b, e := s.blockEnt(s.first); e != nil {
			if s.first == s.last {
				st.FirstTS = s.lastEntTS
			} else if ts, ok := s.recTS(b, e); ok {
				st.FirstTS = ts
			} else {
				st.FirstTS = s.entTS(b, e)
			}
		}
		st.Deleted = s.last - s.first + 1 - s.msgs
	}
	if subjects {
		st.Subjects = make(map[string]uint64, s.subjects.len())
		s.subjects.all(func(ss *subjState) { st.Subjects[ss.name] = ss.msgs })
	}
	return st
}

func (s *FileStore) Lost() LostInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := s.lost
	l.Seqs = append([]uint64(nil), l.Seqs...)
	l.ReadErrors = s.readErrs.Load()
	return l
}

// maxEntSpan is how far past its block's base a timestamp may be and still
// fit ent.tms; tmsUnknown marks one that did not (a block written before
// blocks rolled on it), whose time is then read from its record.
const (
	tmsUnknown = math.MaxUint32
	maxEntSpan = int64(tmsUnknown-1) * int64(time.Millisecond)
)

// packTS is ts as ent.tms in block b, setting b's base on its first message.
func packTS(b *block, ts int64) uint32 {
	if b.base == 0 {
		b.base = ts
	}
	d := ts - b.base
	if d < 0 || d > maxEntSpan {
		return tmsUnknown
	}
	return uint32((d + int64(time.Millisecond) - 1) / int64(time.Millisecond))
}

// entTS is e's timestamp rounded up to the millisecond; mu held.
func (s *FileStore) entTS(b *block, e *ent) int64 {
	if e.tms != tmsUnknown {
		return b.base + int64(e.tms)*int64(time.Millisecond)
	}
	if ts, ok := s.recTS(b, e); ok {
		return ts
	}
	return math.MinInt64 // unreadable, so never served: let expiry take it rather than stop at it
}

// recTS reads e's exact timestamp from its record; mu held.
func (s *FileStore) recTS(b *block, e *ent) (int64, bool) {
	rec, err := s.readRec(b, e, true, nil)
	if err != nil {
		return 0, false
	}
	rv, n, ok := parseRecord(rec)
	if !ok || n != len(rec) {
		return 0, false
	}
	return rv.ts, true
}

// entSize is the size e's message counts against the limits (storedSize):
// its plaintext record's length, which is slen less the encryption frame
// when the block holds framed records.
func (s *FileStore) entSize(b *block, e *ent) uint64 {
	if s.cry != nil && !b.sealed {
		return uint64(e.slen) - uint64(frameHdr+s.cry.aead.Overhead()) - 1
	}
	return uint64(e.slen) - 1
}

// blockEnt is seq's block and entry, or nils; mu held.
func (s *FileStore) blockEnt(seq uint64) (*block, *ent) {
	b := s.findBlock(seq)
	if b == nil {
		return nil, nil
	}
	return b, &b.ents[seq-b.first]
}
