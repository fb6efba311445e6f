// Package js is natsd's JetStream: streams over filestore/, served through the routing core.
// A stream is a set of internal subscriptions in its account whose messages are copied, on
// the publisher's reactor, into the stream's bounded ingest queue; the stream's worker
// checks them, hands them to the store and publishes each PubAck once the store reports the
// record durable (fsync'd, unless the user opted out). The $JS.API is another internal
// subscription, served on its account's worker goroutine, never on a reactor.
package js

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/filestore"
	"github.com/natsd/natsd/loop"
)

// APILevel is the JetStream API level natsd speaks (nats-server 2.15's).
const APILevel = 5

// Version is the server version stream metadata reports (_nats.ver).
const Version = "2.15.2"

// Config is the server-wide JetStream configuration.
type Config struct {
	// Dir is <store_dir>/jetstream: accounts' streams live in Dir/<account>/streams/<name>.
	Dir string
	// MaxMemory and MaxStore bound what all memory and file streams may hold (and reserve).
	MaxMemory, MaxStore int64
	// SyncInterval 0 acknowledges a publish once it is fsync'd (natsd's default). A positive
	// interval is nats-server's sync_interval: acknowledge after write(2), sync that often.
	SyncInterval time.Duration
	Domain       string
	// Strict refuses API requests with unknown JSON fields (jetstream.strict, default true).
	Strict bool
	// MaxBufferedMsgs and MaxBufferedSize bound each stream's ingest queue.
	MaxBufferedMsgs int
	MaxBufferedSize int64
	// DuplicateWindowLimit caps streams' duplicate windows (0: none).
	DuplicateWindowLimit time.Duration
	// MaxAckPending is the server's cap on a consumer's max_ack_pending (0: none).
	MaxAckPending int
	// MaxRequestBatch caps (and defaults) pull consumers' max_batch; DefaultMaxConsumers is
	// the consumer count of a stream that sets none (0: none).
	MaxRequestBatch, DefaultMaxConsumers int
	// FS is the file system stores and metadata are written through (tests: power loss).
	FS filestore.FS

	ServerName, ServerID string
	Logf                 func(level, format string, args ...any)
}

// Default queue bounds, as nats-server's (100,000 messages, 128 MiB per stream).
const (
	defaultMaxBufferedMsgs = 100_000
	defaultMaxBufferedSize = 128 << 20
)

// JetStream is the server's JetStream: its accounts and their streams.
type JetStream struct {
	cfg Config
	eng *loop.Engine

	mu       sync.Mutex
	accounts map[string]*account
	stopped  bool

	maxMem, maxStore           atomic.Int64 // cfg's, raised by reload
	memReserved, storeReserved atomic.Int64
	memUsed, storeUsed         atomic.Int64
	apiTotal, apiErrors        atomic.Uint64
	atomicBatches, fastBatches atomic.Int64 // in progress, bounded server-wide
	started                    time.Time

	// journal makes file streams' fsync-before-ack commits durable together (one fsync for
	// all streams per group commit); nil when acks do not wait for fsync.
	journal *filestore.Journal

	durableDirs sync.Map // directories whose entries are durable (syncParents)

	removing sync.Map // deleted streams' directories being removed: dir → chan closed at the end

	sysAPI *loop.InternalClient // the system account's requests (purge.go)
}

// New makes the server's JetStream; accounts are enabled one by one with EnableAccount.
func New(eng *loop.Engine, cfg Config) (*JetStream, error) {
	if cfg.FS == nil {
		cfg.FS = filestore.OSFS{}
	}
	if cfg.MaxBufferedMsgs <= 0 {
		cfg.MaxBufferedMsgs = defaultMaxBufferedMsgs
	}
	if cfg.MaxBufferedSize <= 0 {
		cfg.MaxBufferedSize = defaultMaxBufferedSize
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, string, ...any) {}
	}
	if err := cfg.FS.MkdirAll(cfg.Dir); err != nil {
		return nil, fmt.Errorf("could not create storage directory - %v", err)
	}
	j := &JetStream{cfg: cfg, eng: eng, accounts: make(map[string]*account), started: time.Now()}
	// Whatever mode this run is in, what an earlier run journaled goes into the block files
	// before any stream opens.
	jdir := journalDir(cfg.Dir)
	logf := func(f string, a ...any) { cfg.Logf("INF", f, a...) }
	if cfg.SyncInterval == 0 {
		jn, err := filestore.OpenJournal(cfg.FS, cfg.Dir, jdir, logf)
		if err != nil {
			return nil, fmt.Errorf("could not open the JetStream journal - %v", err)
		}
		j.journal = jn
	} else if _, err := filestore.ReplayJournal(cfg.FS, cfg.Dir, jdir, logf); err != nil {
		return nil, fmt.Errorf("could not replay the JetStream journal - %v", err)
	}
	j.maxMem.Store(cfg.MaxMemory)
	j.maxStore.Store(cfg.MaxStore)
	return j, nil
}

// SetServerLimits replaces max_memory_store and max_file_store (a reload may raise them).
func (j *JetStream) SetServerLimits(mem, store int64) {
	j.maxMem.Store(mem)
	j.maxStore.Store(store)
}

func (j *JetStream) noticef(f string, a ...any) { j.cfg.Logf("INF", f, a...) }
func (j *JetStream) warnf(f string, a ...any)   { j.cfg.Logf("WRN", f, a...) }

// Config is the configuration JetStream runs with.
func (j *JetStream) Config() Config { return j.cfg }

// EnableAccount serves JetStream in acc with lim, recovering its streams from disk. Called
// again for an enabled account it only replaces the limits.
func (j *JetStream) EnableAccount(acc *loop.Account, lim AccountLimits) error {
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		return errors.New("jetstream stopped")
	}
	if a := j.accounts[acc.Name]; a != nil {
		j.mu.Unlock()
		a.setLimits(lim)
		return nil
	}
	a := newAccount(j, acc, lim, true)
	j.accounts[acc.Name] = a
	j.mu.Unlock()
	if err := a.recover(); err != nil {
		return err
	}
	if err := a.serveAPI(); err != nil {
		return err
	}
	a.startSourcing()
	return nil
}

// ServeDisabled answers $JS.API.INFO in an account without JetStream with the reference's
// "not enabled for account" error, as nats-server does; other API subjects get no reply.
func (j *JetStream) ServeDisabled(acc *loop.Account) error {
	j.mu.Lock()
	if j.accounts[acc.Name] != nil {
		j.mu.Unlock()
		return nil
	}
	a := newAccount(j, acc, AccountLimits{}, false)
	j.accounts[acc.Name] = a
	j.mu.Unlock()
	return a.serveAPI()
}

// Stop stops every stream, syncing and closing their stores.
func (j *JetStream) Stop() {
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		return
	}
	j.stopped = true
	accs := make([]*account, 0, len(j.accounts))
	for _, a := range j.accounts {
		accs = append(accs, a)
	}
	j.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range accs {
		wg.Add(1)
		go func() { defer wg.Done(); a.stop() }()
	}
	wg.Wait()
	if j.sysAPI != nil {
		j.sysAPI.Close()
	}
	j.WaitRemovals() // deleted streams' removals end with the journal's Forget
	if j.journal != nil {
		_ = j.journal.Close()
	}
}

// journalDir is where the journal lives: beside <store_dir>/jetstream, not in it, where
// nats-server's layout has only account directories.
func journalDir(dir string) string { return filepath.Join(filepath.Dir(dir), "natsd-journal") }

// Stats are the server-wide figures /varz, /jsz and STATSZ report.
type Stats struct {
	Memory, Store                 uint64
	ReservedMemory, ReservedStore uint64
	Accounts, HAAssets            int
	Streams, Consumers            int
	Messages, Bytes               uint64
	APITotal, APIErrors           uint64
}

// Stats sums every enabled account.
func (j *JetStream) Stats() Stats {
	st := Stats{
		Memory: uint64(max(j.memUsed.Load(), 0)), Store: uint64(max(j.storeUsed.Load(), 0)),
		ReservedMemory: uint64(j.memReserved.Load()), ReservedStore: uint64(j.storeReserved.Load()),
		APITotal: j.apiTotal.Load(), APIErrors: j.apiErrors.Load(),
	}
	for _, a := range j.enabledAccounts() {
		st.Accounts++
		for _, s := range a.streamList() {
			st.Streams++
			st.Consumers += s.numConsumers()
			fs := s.store.FastState()
			st.Messages += fs.Msgs
			st.Bytes += fs.Bytes
		}
	}
	return st
}

func (j *JetStream) enabledAccounts() []*account {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]*account, 0, len(j.accounts))
	for _, a := range j.accounts {
		if a.enabled {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].name < out[k].name })
	return out
}

// AccountDetail is one account's JetStream usage and streams, for /jsz and $SYS JSZ.
type AccountDetail struct {
	Name    string
	Stats   AccountStats
	Streams []StreamInfo
}

// Accounts details every enabled account (streams only when withStreams).
func (j *JetStream) Accounts(withStreams bool) []AccountDetail {
	var out []AccountDetail
	for _, a := range j.enabledAccounts() {
		d := AccountDetail{Name: a.name, Stats: a.info()}
		if withStreams {
			for _, s := range a.streamList() {
				si := s.info(false, "")
				if n := j.cfg.ServerName; n != "" {
					si.Cluster = &ClusterInfo{Leader: n}
				}
				d.Streams = append(d.Streams, si)
			}
		}
		out = append(out, d)
	}
	return out
}

// Enabled reports whether JetStream serves the named account.
func (j *JetStream) Enabled(name string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	a := j.accounts[name]
	return a != nil && a.enabled
}

func (j *JetStream) accountDir(name string) string { return filepath.Join(j.cfg.Dir, name) }
