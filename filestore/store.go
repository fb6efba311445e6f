// Package filestore holds natsd's per-stream message stores: a crash-safe
// file store with group-commit fsync and a memory store with the same
// interface. See README.md for the on-disk format and the durability model.
package filestore

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/natsd/natsd/sublist"
)

// Store is what a stream appends to and reads from. Both FileStore and
// MemStore implement it; JetStream code must not care which one it has.
type Store interface {
	// StoreAsync appends a record and calls cb once the record is durable
	// (fsync'd by default). It never blocks on disk, so an event loop may call
	// it; cb runs on a store goroutine (FileStore: the one that acknowledges
	// synced batches) and must not block. hdr and msg are copied before
	// StoreAsync returns.
	StoreAsync(subj string, hdr, msg []byte, cb func(seq uint64, ts int64, err error))
	// StoreAsyncHeld is StoreAsync for a caller that stores several records in a row and
	// then calls Flush: the records wait for the Flush (or for the next call that queues
	// other work) before the store starts on them.
	StoreAsyncHeld(subj string, hdr, msg []byte, cb func(seq uint64, ts int64, err error))
	// Flush starts on what StoreAsyncHeld queued. With inline the caller may be made to do
	// the work itself (FileStore: when its writer is idle), so it may block for a commit
	// and have callbacks run on its goroutine; it must hold no lock a callback takes.
	Flush(inline bool)
	// StoreMsg is the blocking form of StoreAsync.
	StoreMsg(subj string, hdr, msg []byte) (seq uint64, ts int64, err error)
	// StoreAt stores a message at seq, stamped ts (a restored snapshot, a mirror, a
	// replica): the sequences between the last one and seq are skipped, and a seq at or
	// below the last fails with ErrSeqOrder. Stamps never go back: one earlier than the
	// newest so far is raised to it. It blocks until the record is durable.
	StoreAt(seq uint64, ts int64, subj string, hdr, msg []byte) error
	// StoreAtAsync is StoreAt that does not wait: cb is called once the record is
	// durable (or with the error), as StoreAsync's. A mirror keeps its origin's
	// sequences with it without waiting a commit per message.
	StoreAtAsync(seq uint64, ts int64, subj string, hdr, msg []byte, cb func(seq uint64, ts int64, err error))
	// SkipMsgs consumes n sequence numbers without storing messages.
	SkipMsgs(n uint64) (first uint64, err error)
	LoadMsg(seq uint64) (*StoredMsg, error)
	// WaitDurable returns once seq, if it has been stored, is durable: readers see only
	// acknowledged messages, so a message a stream's state already counts (stored, its
	// commit not yet synced) is loaded after this. It returns at once for a seq beyond
	// the last stored, and when the store has failed or stopped.
	WaitDurable(seq uint64)
	// Filters below are subjects with NATS wildcards ("orders.*",
	// "orders.>"); "" and ">" match every message, as in nats-server.

	// LoadLastMsg returns the newest message whose subject matches filter.
	LoadLastMsg(filter string) (*StoredMsg, error)
	// TryLoadLastMsg is LoadLastMsg for a subject without wildcards that never
	// waits: where it would have to wait for a lock or for the device it fails
	// with ErrWouldBlock, and the caller asks LoadLastMsg from where it may wait.
	// A reactor answers a KV get with it.
	TryLoadLastMsg(subject string) (*StoredMsg, error)
	// LoadNextMsg returns the first message with seq >= start whose subject
	// matches filter.
	LoadNextMsg(filter string, start uint64) (*StoredMsg, error)
	// LoadNextMsgInto is LoadNextMsg decoding into mb: the message it returns is
	// mb's, its header and payload in mb's buffer, valid until mb's next load. A
	// reader done with each message before it loads the next (a consumer
	// delivering) allocates nothing per message.
	LoadNextMsgInto(mb *MsgBuf, filter string, start uint64) (*StoredMsg, error)
	RemoveMsg(seq uint64) (bool, error)
	// Purge removes every message; sequence numbers continue.
	Purge() (uint64, error)
	// PurgeSubject removes every message whose subject matches filter.
	PurgeSubject(filter string) (uint64, error)
	// PurgeEx is JetStream's purge request, as nats-server's: it removes
	// the messages matching filter below seq (0: no bound), oldest first,
	// keeping the newest keep of all that match (0: none). With a filter
	// that matches everything and no keep, it is Purge (seq 0) or
	// Compact(seq); such a filter with seq > 1 is Compact(seq) whatever
	// keep says, and seq 1 removes nothing.
	PurgeEx(filter string, seq, keep uint64) (uint64, error)
	// FilteredState counts the messages with seq >= start whose subject
	// matches filter (a consumer's pending count) and names the first and
	// last of them.
	FilteredState(filter string, start uint64) SimpleState
	// Compact removes every message below seq.
	Compact(seq uint64) (uint64, error)
	// GetSeqFromTime returns the first message stamped at t or later (a
	// consumer's opt_start_time), or the next sequence to be stored if
	// there is none.
	GetSeqFromTime(t time.Time) uint64
	// SubjectsState returns, for each subject matching filter ("" for all),
	// its message count and its first and last sequences, or nil when no
	// subject matches.
	SubjectsState(filter string) map[string]SimpleState
	// MultiLastSeqs returns, in order, the newest message at or below
	// maxSeq (0: no bound) of each subject matching any of filters: where a
	// consumer delivering the last message per subject starts. With more
	// than maxAllowed (if > 0) it fails with ErrTooManyResults.
	MultiLastSeqs(filters []string, maxSeq uint64, maxAllowed int) ([]uint64, error)
	// State is the full state including per-subject counts; FastState skips
	// the per-subject map, which is costly to copy.
	State() State
	FastState() State
	// Lost describes records found damaged or missing when the store was
	// opened or read; they are never returned as data.
	Lost() LostInfo
	// UpdateLimits replaces the store's limits and applies them at once, as
	// nats-server does when a stream's config is updated: a lowered
	// MaxMsgsPerSubject trims every subject to its newest messages (whatever
	// DiscardNewPerSubject says), lowered MaxMsgs or MaxBytes trim the oldest
	// messages under DiscardOld (under DiscardNew they only refuse new ones),
	// and a changed MaxAge applies from now on. The file store does not
	// persist limits: the caller passes them to Open again.
	UpdateLimits(l Limits) error
	// Truncate removes every message after seq, and the next message stored
	// gets seq+1: a replicated stream rolling back to its leader's log (seq
	// 0 removes everything). Unlike every other removal it reuses
	// sequence numbers. Nothing happens when seq is at or past the last.
	Truncate(seq uint64) error
	// RegisterStorageUpdates sets the function told of every message stored
	// and removed, whatever removed it (see StorageUpdate), so that the
	// stream above can keep account usage and consumers' pending counts. It
	// is called first with the bytes already held, (0, bytes, 0, ""), as
	// nats-server's is. The file store reports a change once it is durable,
	// before the acknowledgements of the same commit, on its writer: fn must
	// not block, nor call the store's blocking methods. The memory store
	// reports on the caller's goroutine once it has released its lock, so
	// concurrent callers' reports may interleave. nil stops the reports.
	RegisterStorageUpdates(fn StorageUpdate)
	Stop() error
	// StopForRemoval is Stop for a store whose files are about to be deleted: it may skip
	// what only serves a later open (FileStore: index.db).
	StopForRemoval() error
}

// StorageUpdate reports a change in what a store holds. msgs and bytes are
// deltas, negative for removals. A message stored or removed on its own
// (RemoveMsg, limits, expiry) is reported alone, with its seq and subject;
// so is a purge or compaction that removed one message. One that removed
// more is reported as one sum with seq 0 and no subject. These are
// nats-server's arguments.
type StorageUpdate func(msgs, bytes int64, seq uint64, subj string)

type update struct {
	msgs, bytes int64
	seq         uint64
	subj        string
}

// reporter gathers a store's storage updates while its lock is held, for
// delivery once it is released (and, for the file store, once durable).
type reporter struct {
	fn   StorageUpdate
	pend []update
	// A purge or compaction in progress: its removals add up in bulk, and
	// first is the first of them, reported alone if it is the only one.
	bulk  *update
	first update
}

func (r *reporter) add(msgs, bytes int64, seq uint64, subj string) {
	switch {
	case r.fn == nil:
	case r.bulk != nil:
		if r.bulk.msgs == 0 {
			r.first = update{msgs, bytes, seq, subj}
		}
		r.bulk.msgs += msgs
		r.bulk.bytes += bytes
	default:
		r.pend = append(r.pend, update{msgs, bytes, seq, subj})
	}
}

// inBulk runs fn, reporting what it removes as one update.
func (r *reporter) inBulk(fn func()) {
	if r.fn == nil {
		fn()
		return
	}
	r.bulk = &update{}
	fn()
	b := r.bulk
	r.bulk = nil
	switch b.msgs {
	case 0:
	case -1:
		r.pend = append(r.pend, r.first)
	default:
		r.pend = append(r.pend, *b)
	}
}

// take hands the pending updates over.
func (r *reporter) take() []update {
	p := r.pend
	r.pend = nil
	return p
}

func deliver(fn StorageUpdate, ups []update) {
	if fn == nil {
		return
	}
	for _, u := range ups {
		fn(u.msgs, u.bytes, u.seq, u.subj)
	}
}

// StoredMsg is one message as returned by the Load methods. Its slices are
// owned by the caller.
type StoredMsg struct {
	Subject string
	Header  []byte
	Data    []byte
	Seq     uint64
	TS      int64 // Unix nanoseconds
}

// MsgBuf is a reader's reusable message for LoadNextMsgInto. The zero value is ready.
type MsgBuf struct {
	StoredMsg
	buf []byte
}

// setBody makes hdr and msg the message's header and payload, copied into mb's buffer, or
// into allocations of their own when together larger than the buffer may keep.
func (mb *MsgBuf) setBody(hdr, msg []byte) {
	if len(hdr)+len(msg) > msgBufKeep {
		mb.Header, mb.Data = clone(hdr), clone(msg)
		return
	}
	mb.buf = append(append(mb.buf[:0], hdr...), msg...)
	mb.Header, mb.Data = capped(mb.buf[:len(hdr)]), capped(mb.buf[len(hdr):])
}

// msgBufKeep bounds what a MsgBuf keeps between loads: a larger message is loaded into an
// allocation of its own, so that a thousand consumers that once saw a big message do not
// each hold its size for good.
const msgBufKeep = 8 << 10

// State summarises a store.
type State struct {
	Msgs     uint64
	Bytes    uint64
	FirstSeq uint64
	LastSeq  uint64
	FirstTS  int64 // the first message's stamp; 0 with no messages
	// LastTS is the stamp of the newest message stored, even once it is
	// removed or purged (nats-server's last_ts); 0 if none ever was.
	LastTS  int64
	Deleted uint64 // interior gaps between FirstSeq and LastSeq
	// NumSubjects counts the distinct subjects held (FastState too); Subjects, from State
	// only, maps each to its message count.
	NumSubjects int
	Subjects    map[string]uint64
}

// SimpleState is what FilteredState reports; First and Last are 0 when no
// message matches.
type SimpleState struct {
	Msgs  uint64
	First uint64
	Last  uint64
}

// add counts n matching messages from first to last into st.
func (st *SimpleState) add(n, first, last uint64) {
	if n == 0 {
		return
	}
	st.Msgs += n
	if st.First == 0 || first < st.First {
		st.First = first
	}
	st.Last = max(st.Last, last)
}

// LostInfo reports damage. Seqs lists damaged message sequences (capped at
// maxLostList entries; Msgs always has the full count).
type LostInfo struct {
	Msgs         uint64
	Seqs         []uint64
	CorruptSpans uint64 // damaged byte ranges found by checksum while scanning
	TornBytes    uint64 // bytes truncated from a torn tail at open
	ReadErrors   uint64 // records whose checksum failed on a later read
}

const maxLostList = 10000

// DiscardPolicy decides what happens when a limit is reached.
type DiscardPolicy int

const (
	DiscardOld DiscardPolicy = iota
	DiscardNew
)

// Limits are enforced by the store itself so that expiry costs one marker
// record per batch rather than one delete per message.
type Limits struct {
	MaxMsgs           int64
	MaxBytes          int64
	MaxAge            time.Duration
	MaxMsgsPerSubject int64
	MaxMsgSize        int32
	Discard           DiscardPolicy
	// DiscardNewPerSubject rejects a message when its subject is at
	// MaxMsgsPerSubject instead of removing the subject's oldest message.
	DiscardNewPerSubject bool
}

var (
	ErrNotFound       = errors.New("filestore: message not found")
	ErrEOF            = errors.New("filestore: sequence beyond last")
	ErrClosed         = errors.New("filestore: store closed")
	ErrMaxMsgs        = errors.New("maximum messages exceeded")
	ErrMaxBytes       = errors.New("maximum bytes exceeded")
	ErrMaxMsgsPerSubj = errors.New("maximum messages per subject exceeded")
	ErrMaxMsgSize     = errors.New("message size exceeds maximum allowed")
	ErrCorrupt        = errors.New("filestore: record checksum failed")
	ErrBadSubject     = errors.New("filestore: invalid subject")
	ErrFailed         = errors.New("filestore: store failed after a write error")
	ErrBusy           = errors.New("filestore: too many pending writes")
	ErrTooManyResults = errors.New("filestore: too many matching results for request")
	ErrSeqOrder       = errors.New("filestore: sequence at or below the last one")
	ErrMemGap         = errors.New("filestore: sequence gap too large for a memory store")
	// ErrWouldBlock is TryLoadLastMsg's answer when it could not answer at once.
	ErrWouldBlock = errors.New("filestore: load would block")
)

// matchesAll reports whether a filter selects every message.
func matchesAll(filter string) bool { return filter == "" || filter == ">" }

// eachSubject calls fn for each subject of subjects that filter (a subject
// or a wildcard filter) selects. A filter that selects everything is the
// caller's to handle: it has cheaper ways than going subject by subject.
func eachSubject(subjects *subjIndex, filter string, fn func(*subjState)) {
	if !sublist.IsWildcard(filter) {
		if ss := subjects.get(filter); ss != nil {
			fn(ss)
		}
		return
	}
	subjects.all(func(ss *subjState) {
		if sublist.MatchFilter(ss.name, filter) {
			fn(ss)
		}
	})
}

// subjectsOver lists the subjects that a per-subject limit lowered from old
// to l leaves over it, in name order, so that what trimming them reports
// does not depend on the map's order (and trimming may drop subjects from
// the map while the list is walked).
func subjectsOver(subjects *subjIndex, old, l Limits) []*subjState {
	n := l.MaxMsgsPerSubject
	if n <= 0 || (old.MaxMsgsPerSubject > 0 && n >= old.MaxMsgsPerSubject) {
		return nil
	}
	var over []*subjState
	subjects.all(func(ss *subjState) {
		if ss.msgs > uint64(n) {
			over = append(over, ss)
		}
	})
	slices.SortFunc(over, func(a, b *subjState) int { return strings.Compare(a.name, b.name) })
	return over
}

// multiLast is MultiLastSeqs over subjects, with last giving a subject's
// newest message in bounds (0 for none).
func multiLast(subjects *subjIndex, filters []string, maxAllowed int, last func(*subjState) uint64) ([]uint64, error) {
	var seqs []uint64
	var seen map[*subjState]bool // several filters may overlap
	if len(filters) > 1 {
		seen = map[*subjState]bool{}
	}
	for _, f := range filters {
		if f == "" {
			f = ">"
		}
		eachSubject(subjects, f, func(ss *subjState) {
			if seen != nil {
				if seen[ss] {
					return
				}
				seen[ss] = true
			}
			if seq := last(ss); seq != 0 {
				seqs = append(seqs, seq)
			}
		})
		if maxAllowed > 0 && len(seqs) > maxAllowed {
			return nil, ErrTooManyResults
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// lastListed is the newest of a subject's listed sequences at or below
// upTo, 0 if none.
func lastListed(seqs []uint64, upTo uint64) uint64 {
	i, found := slices.BinarySearch(seqs, upTo)
	switch {
	case found:
		return upTo
	case i == 0:
		return 0
	}
	return seqs[i-1]
}

// storedSize is the byte cost a file-store message counts against MaxBytes and in State:
// nats-server's (its record's length), which is natsd's record less one byte, so that
// limits and reported sizes are the same as with nats-server and still track disk use.
func storedSize(subj string, hdr, msg []byte) uint64 {
	if len(hdr) == 0 {
		return uint64(msgHdrLen + len(subj) + len(msg) + recSumLen - 1)
	}
	return uint64(recHdrLen + len(subj) + len(hdr) + len(msg) + recSumLen - 1)
}

// memSize is a memory-store message's cost, as nats-server's memory store counts it.
func memSize(subj string, hdr, msg []byte) uint64 {
	return uint64(len(subj) + len(hdr) + len(msg) + 16)
}
