package filestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// SequencePair is a consumer's position: its own delivery sequence and the stream's.
type SequencePair struct{ Consumer, Stream uint64 }

// PendingAck is one delivered, unacknowledged message: the consumer sequence of its first
// delivery (nats-server keeps the original, and explicit acks move the floor by it) and the
// time of its latest delivery.
type PendingAck struct {
	Sequence  uint64
	Timestamp int64
}

// ConsumerState is what a consumer persists (nats-server's ConsumerState meaning).
type ConsumerState struct {
	Delivered   SequencePair           // highest delivered
	AckFloor    SequencePair           // everything at or below is acknowledged
	Pending     map[uint64]*PendingAck // keyed by stream sequence
	Redelivered map[uint64]uint64      // stream sequence -> number of redeliveries (delivery count - 1)
}

// ConsumerAckPolicy is a consumer's ack policy, as far as its stored state is concerned.
type ConsumerAckPolicy int

const (
	ConsumerAckNone ConsumerAckPolicy = iota
	ConsumerAckAll
	ConsumerAckExplicit
)

// ErrNoAckPolicy is nats-server's answer to a redelivery or an ack on a consumer that takes no acks.
var ErrNoAckPolicy = errors.New("ack policy is none")

// ApplyDelivered applies a delivery (dc = delivery count, 1 for a first delivery) to the
// state. (Not "Delivered", as issue 17's sketch had it: Go allows no method named like the
// field; ApplyAcked goes with it.)
func (st *ConsumerState) ApplyDelivered(dseq, sseq, dc uint64, ts int64, p ConsumerAckPolicy) {
	st.delivered(dseq, sseq, dc, ts, p, nil)
}

// ApplyAcked applies an ack of the delivery dseq of stream seq sseq (AckAll: everything up
// to it). Unknown/already-acked is a no-op.
func (st *ConsumerState) ApplyAcked(dseq, sseq uint64, p ConsumerAckPolicy) {
	st.acked(dseq, sseq, p)
}

// pendSlab hands out PendingAcks from chunks, so that a first delivery costs no allocation
// of its own (a chunk is kept alive while any of its entries is pending: 1 KB at most).
type pendSlab []PendingAck

func (s *pendSlab) get() *PendingAck {
	if s == nil {
		return new(PendingAck)
	}
	if len(*s) == 0 {
		*s = make([]PendingAck, 64)
	}
	p := &(*s)[0]
	*s = (*s)[1:]
	return p
}

// delivered reports whether the state changed (only changes are logged).
func (st *ConsumerState) delivered(dseq, sseq, dc uint64, ts int64, p ConsumerAckPolicy, slab *pendSlab) bool {
	if p == ConsumerAckNone && dc != 1 {
		return false
	}
	// A replay of something older than the floor (a restarted leader's) changes nothing.
	if dseq <= st.AckFloor.Consumer {
		return false
	}
	changed := false
	if p == ConsumerAckNone {
		if dseq > st.Delivered.Consumer {
			st.Delivered.Consumer, st.AckFloor.Consumer = dseq, dseq
			changed = true
		}
		if sseq > st.Delivered.Stream {
			st.Delivered.Stream, st.AckFloor.Stream = sseq, sseq
			changed = true
		}
		return changed
	}
	if st.Pending == nil {
		st.Pending = make(map[uint64]*PendingAck)
	}
	if sseq <= st.Delivered.Stream {
		if pa := st.Pending[sseq]; pa != nil && pa.Timestamp != ts {
			pa.Timestamp = ts
			changed = true
		}
	} else {
		pa := slab.get()
		pa.Sequence, pa.Timestamp = dseq, ts
		st.Pending[sseq] = pa
		st.Delivered.Stream = sseq
		changed = true
	}
	if dseq > st.Delivered.Consumer {
		st.Delivered.Consumer = dseq
		changed = true
	}
	if dc > 1 {
		if st.Redelivered == nil {
			st.Redelivered = make(map[uint64]uint64)
		}
		if st.Redelivered[sseq] < dc-1 {
			st.Redelivered[sseq] = dc - 1
			changed = true
		}
	}
	return changed
}

func (st *ConsumerState) acked(dseq, sseq uint64, p ConsumerAckPolicy) bool {
	if p == ConsumerAckNone {
		return false
	}
	changed := false
	// nats-server forgets the redelivery count of an acked sequence whatever else happens.
	if _, ok := st.Redelivered[sseq]; ok {
		delete(st.Redelivered, sseq)
		changed = true
	}
	if dseq <= st.AckFloor.Consumer {
		return changed
	}
	pa := st.Pending[sseq]
	if pa == nil {
		return changed
	}
	if p == ConsumerAckAll {
		gap := sseq - st.AckFloor.Stream
		st.AckFloor = SequencePair{dseq, sseq}
		// Walk whichever is shorter: the map, or the sequences between the old floor and sseq.
		if gap > uint64(len(st.Pending)) {
			for seq := range st.Pending {
				if seq <= sseq {
					delete(st.Pending, seq)
					delete(st.Redelivered, seq)
				}
			}
		} else {
			for seq := sseq; seq > sseq-gap && len(st.Pending) > 0; seq-- {
				delete(st.Pending, seq)
				delete(st.Redelivered, seq)
			}
		}
		return true
	}
	delete(st.Pending, sseq)
	if dseq > pa.Sequence && pa.Sequence > 0 {
		// A redelivery's ack moves the floor as the first delivery would have.
		dseq = pa.Sequence
	}
	if len(st.Pending) == 0 {
		st.AckFloor = st.Delivered
		return true
	}
	if dseq != st.AckFloor.Consumer+1 {
		return true
	}
	st.AckFloor = SequencePair{dseq, sseq}
	if st.Delivered.Consumer <= dseq {
		return true
	}
	// The floor runs up to just below the next pending message in stream order.
	next, npa := uint64(0), (*PendingAck)(nil)
	if st.Delivered.Stream-sseq > uint64(len(st.Pending)) {
		for seq, x := range st.Pending {
			if seq > sseq && (npa == nil || seq < next) {
				next, npa = seq, x
			}
		}
	} else {
		for seq := sseq + 1; seq <= st.Delivered.Stream; seq++ {
			if x := st.Pending[seq]; x != nil {
				next, npa = seq, x
				break
			}
		}
	}
	if npa != nil && npa.Sequence > 0 {
		st.AckFloor = SequencePair{npa.Sequence - 1, next - 1}
	}
	return true
}

// Copy returns a deep copy.
func (st *ConsumerState) Copy() *ConsumerState {
	c := &ConsumerState{Delivered: st.Delivered, AckFloor: st.AckFloor}
	if st.Pending != nil {
		c.Pending = make(map[uint64]*PendingAck, len(st.Pending))
		slab := make([]PendingAck, len(st.Pending))
		i := 0
		for k, v := range st.Pending {
			slab[i] = *v
			c.Pending[k] = &slab[i]
			i++
		}
	}
	if st.Redelivered != nil {
		c.Redelivered = make(map[uint64]uint64, len(st.Redelivered))
		for k, v := range st.Redelivered {
			c.Redelivered[k] = v
		}
	}
	return c
}

// ConsumerStoreConfig configures OpenConsumerStore.
type ConsumerStoreConfig struct {
	Dir          string   // <stream dir>/obs/<consumer>
	FS           FS       // nil: OSFS{}
	Journal      *Journal // non-nil: commits go through the shared journal (one fdatasync for all stores)
	AckPolicy    ConsumerAckPolicy
	SyncInterval time.Duration // 0: Commit returns once durable; >0: Commit only writes, and syncs at most this often (user opted out of safety)
	Logf         func(string, ...any)
}

// ConsumerStore persists one consumer's state.
type ConsumerStore interface {
	UpdateDelivered(dseq, sseq, dc uint64, ts int64) error // applied to State at once, buffered for disk
	UpdateAcks(dseq, sseq uint64) error                    // the same
	// Commit makes every update made before the call durable, and blocks until it is. Cheap when nothing is buffered.
	// Safe to call from several goroutines; concurrent commits of many stores share the journal's fsync.
	Commit() error
	State() *ConsumerState            // a copy
	SetState(st *ConsumerState) error // replace the whole state (consumer reset / create at a position), durable on return
	Stop() error                      // commit and close
	Delete() error                    // stop and remove the directory
}

// The consumer log: records appended at the end of one file,
//
//	u8 kind · uvarint n · body (n bytes) · u32 CRC-32C of everything before it
//
// A delivered record's body is uvarints dseq, sseq, dc and a varint ts; an acked one's dseq
// and sseq; a snapshot's the whole state (see appendConsumerSnapshot). Replaying the records
// in order through the same state functions rebuilds the state exactly. Zero is no kind, so
// a zero-filled tail ends the log like any damage does.
const (
	consumerLogName = "o.log"
	consumerTmpName = "o.log.tmp"

	crecDelivered = 1
	crecAcked     = 2
	crecSnapshot  = 3
)

// consumerCompactMin is the log size below which it is never compacted (a variable so that
// tests can compact often).
var consumerCompactMin int64 = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The small records' bodies are at most 4 varints (40 bytes), so their length is one byte.
func appendDeliveredRec(b []byte, dseq, sseq, dc uint64, ts int64) []byte {
	p := len(b)
	b = append(b, crecDelivered, 0)
	b = binary.AppendUvarint(b, dseq)
	b = binary.AppendUvarint(b, sseq)
	b = binary.AppendUvarint(b, dc)
	b = binary.AppendVarint(b, ts)
	b[p+1] = byte(len(b) - p - 2)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[p:], castagnoli))
}

func appendAckedRec(b []byte, dseq, sseq uint64) []byte {
	p := len(b)
	b = append(b, crecAcked, 0)
	b = binary.AppendUvarint(b, dseq)
	b = binary.AppendUvarint(b, sseq)
	b[p+1] = byte(len(b) - p - 2)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[p:], castagnoli))
}

// appendConsumerSnapshot appends a snapshot record of st: the four sequences, then the
// pending and redelivered entries in stream order, stream sequences as deltas.
func appendConsumerSnapshot(b []byte, st *ConsumerState) []byte {
	body := make([]byte, 0, 48+len(st.Pending)*16+len(st.Redelivered)*6)
	body = binary.AppendUvarint(body, st.Delivered.Consumer)
	body = binary.AppendUvarint(body, st.Delivered.Stream)
	body = binary.AppendUvarint(body, st.AckFloor.Consumer)
	body = binary.AppendUvarint(body, st.AckFloor.Stream)
	keys := make([]uint64, 0, max(len(st.Pending), len(st.Redelivered)))
	for k := range st.Pending {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	body = binary.AppendUvarint(body, uint64(len(keys)))
	prev := uint64(0)
	for _, k := range keys {
		pa := st.Pending[k]
		body = binary.AppendUvarint(body, k-prev)
		body = binary.AppendUvarint(body, pa.Sequence)
		body = binary.AppendVarint(body, pa.Timestamp)
		prev = k
	}
	keys = keys[:0]
	for k := range st.Redelivered {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	body = binary.AppendUvarint(body, uint64(len(keys)))
	prev = 0
	for _, k := range keys {
		body = binary.AppendUvarint(body, k-prev)
		body = binary.AppendUvarint(body, st.Redelivered[k])
		prev = k
	}
	p := len(b)
	b = append(b, crecSnapshot)
	b = binary.AppendUvarint(b, uint64(len(body)))
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[p:], castagnoli))
}

var errBadConsumerRec = errors.New("filestore: malformed consumer record")

// cdec reads varints from a record body; any overrun sets bad instead of panicking, since a
// body that passed its checksum can still be one this code did not write.
type cdec struct {
	b   []byte
	bad bool
}

func (d *cdec) u() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *cdec) i() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func decodeConsumerSnapshot(body []byte) (*ConsumerState, error) {
	d := cdec{b: body}
	st := &ConsumerState{}
	st.Delivered = SequencePair{d.u(), d.u()}
	st.AckFloor = SequencePair{d.u(), d.u()}
	n := d.u()
	// Each entry takes at least 3 bytes: a count beyond that is damage, not an allocation.
	if d.bad || n > uint64(len(d.b))/3 {
		return nil, errBadConsumerRec
	}
	if n > 0 {
		st.Pending = make(map[uint64]*PendingAck, n)
		slab := make([]PendingAck, n)
		seq := uint64(0)
		for i := range slab {
			seq += d.u()
			slab[i] = PendingAck{d.u(), d.i()}
			st.Pending[seq] = &slab[i]
		}
	}
	n = d.u()
	if d.bad || n > uint64(len(d.b))/2 {
		return nil, errBadConsumerRec
	}
	if n > 0 {
		st.Redelivered = make(map[uint64]uint64, n)
		seq := uint64(0)
		for i := uint64(0); i < n; i++ {
			seq += d.u()
			st.Redelivered[seq] = d.u()
		}
	}
	if d.bad || len(d.b) != 0 {
		return nil, errBadConsumerRec
	}
	return st, nil
}

// replayConsumerLog applies b's records to st and returns the length of the valid prefix:
// reading stops at the first record that is torn, fails its checksum or does not decode.
func replayConsumerLog(b []byte, st *ConsumerState, p ConsumerAckPolicy) (int, error) {
	good := 0
	for good < len(b) {
		r := b[good:]
		kind := r[0]
		if kind < crecDelivered || kind > crecSnapshot {
			return good, fmt.Errorf("unknown record kind %d", kind)
		}
		n, k := binary.Uvarint(r[1:])
		if k <= 0 || n > uint64(len(r)) || 1+k+int(n)+4 > len(r) {
			return good, errors.New("torn record")
		}
		end := 1 + k + int(n)
		if binary.LittleEndian.Uint32(r[end:]) != crc32.Checksum(r[:end], castagnoli) {
			return good, errors.New("checksum mismatch")
		}
		body := r[1+k : end]
		switch kind {
		case crecDelivered:
			d := cdec{b: body}
			dseq, sseq, dc, ts := d.u(), d.u(), d.u(), d.i()
			if d.bad || len(d.b) != 0 {
				return good, errBadConsumerRec
			}
			st.delivered(dseq, sseq, dc, ts, p, nil)
		case crecAcked:
			d := cdec{b: body}
			dseq, sseq := d.u(), d.u()
			if d.bad || len(d.b) != 0 {
				return good, errBadConsumerRec
			}
			st.acked(dseq, sseq, p)
		case crecSnapshot:
			ns, err := decodeConsumerSnapshot(body)
			if err != nil {
				return good, err
			}
			*st = *ns
		}
		good += end + 4
	}
	return good, nil
}

// consumerFileStore keeps the state in memory and appends each change to a log.
//
// Two locks, so that an update never waits behind a commit's fsync: mu guards the state and
// the buffer of records not yet written; cmu serializes what writes the file (commits,
// compaction, stop). A commit swaps the buffer out under mu and does its I/O under cmu only.
type consumerFileStore struct {
	cfg  ConsumerStoreConfig
	fs   FS
	logf func(string, ...any)
	jn   *Journal
	jkey string

	mu     sync.Mutex
	st     ConsumerState
	buf    []byte // records not yet written
	slab   pendSlab
	closed bool
	logged atomic.Uint64 // bytes ever put in buf (changed under mu)

	cmu     sync.Mutex
	f       File
	size    int64  // the log's length: where the next record goes
	wb      []byte // the buffer being written (swapped with buf)
	durable atomic.Uint64
	dirty   bool // written since the last sync (periodic mode)
	timer   *time.Timer
	jreq    jreq
	jw      [1]jwrite
	// compactions counts the log's rewrites (tests make sure theirs happened).
	compactions int
	failure     atomic.Pointer[error]
}

// OpenConsumerStore opens (creating it if needed) the consumer store in cfg.Dir and
// recovers its state.
func OpenConsumerStore(cfg ConsumerStoreConfig) (ConsumerStore, error) {
	if cfg.FS == nil {
		cfg.FS = OSFS{}
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	s := &consumerFileStore{cfg: cfg, fs: cfg.FS, logf: cfg.Logf}
	if cfg.Journal != nil && cfg.SyncInterval == 0 {
		k, err := cfg.Journal.key(cfg.Dir)
		if err != nil {
			return nil, err
		}
		s.jn, s.jkey = cfg.Journal, k
	}
	if err := mkdirDurable(s.fs, cfg.Dir); err != nil {
		return nil, err
	}
	names, err := s.fs.ReadDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	fresh := !slices.Contains(names, consumerLogName)
	if slices.Contains(names, consumerTmpName) {
		// A compaction that had not renamed its snapshot yet: the log is still whole.
		if err := s.fs.Remove(filepath.Join(cfg.Dir, consumerTmpName)); err != nil {
			return nil, err
		}
	}
	f, err := s.fs.OpenFile(filepath.Join(cfg.Dir, consumerLogName), true)
	if err != nil {
		return nil, err
	}
	s.f = f
	if err := s.recover(fresh); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// mkdirDurable makes dir and whichever of its parents are missing, and syncs the parent of
// each one it made: a consumer acked to exist must not vanish with its directory entry.
func mkdirDurable(fsys FS, dir string) error {
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.ReadDir(d); err == nil {
			break
		}
		made = append(made, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(made) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return err
	}
	for i := len(made) - 1; i >= 0; i-- {
		if p := filepath.Dir(made[i]); p != made[i] {
			if err := fsys.SyncDir(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *consumerFileStore) recover(fresh bool) error {
	if fresh {
		// The log's name is durable before the journal names it. Writes an earlier consumer
		// of the same name journaled are void already: its Stop wrote a marker before Delete
		// removed its files.
		return s.fs.SyncDir(s.cfg.Dir)
	}
	b, err := readAll(s.f)
	if err != nil {
		return err
	}
	good, perr := replayConsumerLog(b, &s.st, s.cfg.AckPolicy)
	if good < len(b) {
		// Whatever follows the damage is never applied: its records may depend on the
		// ones lost. Cutting it (durably) keeps new records from landing after it.
		s.logf("filestore: consumer %s: %s at offset %d of %d: %v; state recovered up to it, the rest (%d bytes) dropped",
			s.cfg.Dir, consumerLogName, good, len(b), perr, len(b)-good)
		if err := s.f.Truncate(int64(good)); err != nil {
			return err
		}
		if err := s.f.Datasync(); err != nil {
			return err
		}
	}
	s.size = int64(good)
	return nil
}

func (s *consumerFileStore) failed() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *consumerFileStore) fail(err error) {
	if s.failure.CompareAndSwap(nil, &err) {
		s.logf("filestore: consumer %s: write or sync failed, its state is no longer persisted: %v", s.cfg.Dir, err)
	}
}

func (s *consumerFileStore) UpdateDelivered(dseq, sseq, dc uint64, ts int64) error {
	p := s.cfg.AckPolicy
	if p == ConsumerAckNone && dc != 1 {
		return ErrNoAckPolicy
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.st.delivered(dseq, sseq, dc, ts, p, &s.slab) {
		n := len(s.buf)
		s.buf = appendDeliveredRec(s.buf, dseq, sseq, dc, ts)
		s.logged.Add(uint64(len(s.buf) - n))
	}
	s.mu.Unlock()
	return s.failed()
}

func (s *consumerFileStore) UpdateAcks(dseq, sseq uint64) error {
	p := s.cfg.AckPolicy
	if p == ConsumerAckNone {
		return ErrNoAckPolicy
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.st.acked(dseq, sseq, p) {
		n := len(s.buf)
		s.buf = appendAckedRec(s.buf, dseq, sseq)
		s.logged.Add(uint64(len(s.buf) - n))
	}
	s.mu.Unlock()
	return s.failed()
}

func (s *consumerFileStore) State() *ConsumerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Copy()
}

func (s *consumerFileStore) SetState(st *ConsumerState) error {
	c := st.Copy()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.st = *c
	n := len(s.buf)
	s.buf = appendConsumerSnapshot(s.buf, &s.st)
	s.logged.Add(uint64(len(s.buf) - n))
	s.mu.Unlock()
	return s.commit(true)
}

func (s *consumerFileStore) Commit() error { return s.commit(false) }

// commit writes what is buffered and makes it durable (with force, even in periodic mode).
// Callers whose updates an earlier commit already covered return without touching the file.
func (s *consumerFileStore) commit(force bool) error {
	want := s.logged.Load()
	if !force && s.durable.Load() >= want {
		return s.failed()
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if err := s.failed(); err != nil {
		return err
	}
	if s.f == nil {
		return ErrClosed
	}
	if !force && s.durable.Load() >= want {
		return nil
	}
	s.mu.Lock()
	b := s.buf
	s.buf = s.wb[:0]
	upto := s.logged.Load()
	var snap []byte
	if next := s.size + int64(len(b)); next > consumerCompactMin {
		// Compact once the log is several times what a snapshot of the state would take.
		est := int64(64 + 16*len(s.st.Pending) + 6*len(s.st.Redelivered))
		if next > 4*est {
			snap = appendConsumerSnapshot(nil, &s.st)
		}
	}
	s.mu.Unlock()
	s.wb = b
	var err error
	if snap != nil {
		// The snapshot already holds b's changes.
		err = s.compact(snap)
	} else {
		err = s.write(b, force)
	}
	if err != nil {
		s.fail(err)
		return err
	}
	s.durable.Store(upto)
	return nil
}

func (s *consumerFileStore) write(b []byte, force bool) error {
	off := s.size
	if len(b) > 0 {
		if _, err := s.f.WriteAt(b, off); err != nil {
			return err
		}
		s.size += int64(len(b))
	}
	switch {
	case s.jn != nil:
		if len(b) == 0 {
			return nil
		}
		// The journal copies the bytes before it returns, so b can be reused.
		s.jw[0] = jwrite{f: s.f, name: consumerLogName, off: off, data: b}
		s.jreq = jreq{key: s.jkey, writes: s.jw[:]}
		err := s.jn.commit(&s.jreq)
		s.jw[0].data = nil
		return err
	case s.cfg.SyncInterval == 0 || force:
		if len(b) == 0 && !s.dirty {
			return nil
		}
		s.dirty = false
		return s.f.Datasync()
	default:
		if len(b) > 0 {
			s.dirty = true
			if s.cfg.SyncInterval > 0 && s.timer == nil {
				s.timer = time.AfterFunc(s.cfg.SyncInterval, s.periodicSync)
			}
		}
		return nil
	}
}

func (s *consumerFileStore) periodicSync() {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.timer = nil
	if !s.dirty || s.f == nil || s.failed() != nil {
		return
	}
	s.dirty = false
	if err := s.f.Datasync(); err != nil {
		s.fail(err)
	}
}

// compact replaces the log with a file holding one snapshot. The journal may hold writes at
// offsets of the old log, and replaying those over the new file would corrupt it: so the old
// log is synced (nothing journaled for it is needed any more) and a marker voids its writes
// before the rename can make the new file visible. A crash in between leaves the old log,
// complete up to the last acknowledged commit.
func (s *consumerFileStore) compact(snap []byte) error {
	dir := s.cfg.Dir
	tmp := filepath.Join(dir, consumerTmpName)
	nf, err := s.fs.OpenFile(tmp, true)
	if err != nil {
		return err
	}
	if err = nf.Truncate(0); err == nil {
		if _, err = nf.WriteAt(snap, 0); err == nil {
			err = nf.Datasync()
		}
	}
	if err == nil && s.jn != nil {
		if err = s.f.Datasync(); err == nil {
			err = s.jn.commit(&jreq{key: s.jkey, mark: true})
		}
	}
	if err == nil {
		if err = s.fs.Rename(tmp, filepath.Join(dir, consumerLogName)); err == nil {
			err = s.fs.SyncDir(dir)
		}
	}
	if err != nil {
		nf.Close()
		return err
	}
	s.f.Close()
	s.f, s.size, s.dirty = nf, int64(len(snap)), false
	s.compactions++
	return nil
}

func (s *consumerFileStore) Stop() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.commit(false)
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.f == nil {
		return err
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if err == nil && s.failed() == nil {
		if s.dirty || s.jn != nil {
			// The journal's checkpointer skips closed files: the log must be synced here.
			err = s.f.Datasync()
			s.dirty = false
		}
		if err == nil && s.jn != nil {
			// A consumer made later under the same name must not get these writes replayed.
			if e := s.jn.commit(&jreq{key: s.jkey, mark: true}); e != nil && !errors.Is(e, ErrJournalClosed) {
				err = e
			}
		}
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f = nil
	return err
}

func (s *consumerFileStore) Delete() error {
	serr := s.Stop()
	dir := s.cfg.Dir
	names, err := s.fs.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, n := range names {
		if err := s.fs.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := s.fs.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := s.fs.SyncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	// A failed Stop matters less once the state is gone; report it all the same.
	return serr
}

// consumerMemStore is a memory consumer's state: the same rules, nothing on disk.
type consumerMemStore struct {
	p      ConsumerAckPolicy
	mu     sync.Mutex
	st     ConsumerState
	slab   pendSlab
	closed bool
}

// NewConsumerMemStore returns a ConsumerStore for a memory consumer.
func NewConsumerMemStore(p ConsumerAckPolicy) ConsumerStore { return &consumerMemStore{p: p} }

func (m *consumerMemStore) UpdateDelivered(dseq, sseq, dc uint64, ts int64) error {
	if m.p == ConsumerAckNone && dc != 1 {
		return ErrNoAckPolicy
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.st.delivered(dseq, sseq, dc, ts, m.p, &m.slab)
	return nil
}

func (m *consumerMemStore) UpdateAcks(dseq, sseq uint64) error {
	if m.p == ConsumerAckNone {
		return ErrNoAckPolicy
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.st.acked(dseq, sseq, m.p)
	return nil
}

func (m *consumerMemStore) Commit() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

func (m *consumerMemStore) State() *ConsumerState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Copy()
}

func (m *consumerMemStore) SetState(st *ConsumerState) error {
	c := st.Copy()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.st = *c
	return nil
}

func (m *consumerMemStore) Stop() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

func (m *consumerMemStore) Delete() error { return m.Stop() }
