package js

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/natsd/natsd/loop"
)

// account is JetStream in one account: its streams, its limits and usage, and the internal
// client that serves the API there.
type account struct {
	js      *JetStream
	acc     *loop.Account
	name    string
	dir     string
	enabled bool

	api     *loop.InternalClient // API requests, on its worker goroutine
	direct  *loop.InternalClient // direct gets, on another worker so they never wait behind the API
	apiSubs []*loop.Subscription

	mu      sync.RWMutex
	lim     AccountLimits // under mu; a copy in limp for readers that may hold mu
	limp    atomic.Pointer[AccountLimits]
	streams map[string]*stream
	// subjects indexes every stream's subjects for the overlap check (subjindex.go), under mu.
	subjects subjectIndex
	// kept are the stream directories recover could not open (stream name -> why): left
	// as they are, and no stream of that name is created over them while they exist.
	kept sync.Map

	memUsed, storeUsed         atomic.Int64
	apiTotal, apiErrors        atomic.Uint64
	memReserved, storeReserved int64 // under mu

	lastResp []byte // the API worker's last reply, for the audit advisory
}

func newAccount(j *JetStream, acc *loop.Account, lim AccountLimits, enabled bool) *account {
	a := &account{js: j, acc: acc, name: acc.Name, dir: j.accountDir(acc.Name), enabled: enabled,
		lim: lim, streams: make(map[string]*stream)}
	a.limp.Store(&lim)
	a.api = j.eng.NewInternalClient(loop.KindJetStream, acc, "JetStream API")
	a.api.KeepOrigins() // for the audit advisories' client
	if enabled {
		a.direct = j.eng.NewInternalClient(loop.KindJetStream, acc, "JetStream direct get")
	}
	return a
}

// serveAPI subscribes the API subjects (and their domain form).
func (a *account) serveAPI() error {
	subjects := []string{"$JS.API.>"}
	if !a.enabled {
		subjects = []string{"$JS.API.INFO"}
	}
	if d := a.js.cfg.Domain; d != "" {
		n := len(subjects)
		for _, s := range subjects[:n] {
			subjects = append(subjects, "$JS."+d+".API."+strings.TrimPrefix(s, "$JS.API."))
		}
	}
	for _, subj := range subjects {
		sub, err := a.api.WorkerOrInline(subj, "", a.apiTry, a.handleAPI)
		if err != nil {
			return err
		}
		a.apiSubs = append(a.apiSubs, sub)
	}
	return nil
}

// recover opens every stream the account's directory holds.
func (a *account) recover() error {
	dir := filepath.Join(a.dir, "streams")
	names, err := a.js.cfg.FS.ReadDir(dir)
	if err != nil {
		return nil // nothing stored yet
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".tmp") {
			continue
		}
		cfg, created, err := readMeta(a.js.cfg.FS, filepath.Join(dir, n))
		if err != nil {
			if p := filepath.Join(dir, n); cutShortCreate(a.js.cfg.FS, p) {
				// Never answered, so nothing in it was acknowledged: the name is free.
				a.js.warnf("JetStream stream '%s > %s': removing a create that was cut short (%v)", a.name, n, err)
				if err := removeAll(a.js.cfg.FS, p); err == nil {
					continue
				}
			} else if cutShortDelete(a.js.cfg.FS, p) {
				// Its delete was asked for: finishing it frees the name.
				a.js.warnf("JetStream stream '%s > %s': finishing a delete that was cut short", a.name, n)
				if err := removeAll(a.js.cfg.FS, p); err == nil {
					continue
				}
			}
			a.keep(n, filepath.Join(dir, n), err)
			continue
		}
		t0 := time.Now()
		s, err := openStream(a, cfg, created, false)
		if err == nil {
			err = s.start()
		}
		if err != nil {
			a.keep(n, filepath.Join(dir, n), err)
			continue
		}
		a.mu.Lock()
		a.streams[cfg.Name] = s
		a.subjects.add(s, cfg.Subjects)
		a.reserve(&cfg, 1)
		a.mu.Unlock()
		s.recoverConsumers()
		st := s.store.FastState()
		a.js.noticef("  Restored %s messages for stream '%s > %s' in %v", comma(st.Msgs), a.name, cfg.Name,
			time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// startSourcing starts the recovered streams' mirrors and sources, once every stream is back
// (so that their origins are) and the API is served (which an origin in another domain of
// the same account is reached through).
func (a *account) startSourcing() {
	for _, s := range a.streamList() {
		s.startSourcing()
	}
}

// keep records a stream directory recover could not open. nats-server's stores use the same
// names (meta.inf, meta.sum, msgs/*.blk) in another format, so a store_dir shared with it is
// the likely cause; either way its files stay as they are for the operator to move.
func (a *account) keep(name, dir string, err error) {
	a.kept.Store(name, err)
	a.js.warnf("  Error recovering stream %q in account %q: %v (its directory %s is kept untouched; natsd "+
		"reads only stores it wrote, not nats-server's)", name, a.name, err, dir)
}

// keptDir refuses to make a stream's directory over one recover could not open, while it is
// there: creating the stream would write over whatever it holds.
func (a *account) keptDir(name, dir string) error {
	why, ok := a.kept.Load(name)
	if !ok {
		return nil
	}
	if _, err := a.js.cfg.FS.ReadDir(dir); err != nil {
		a.kept.Delete(name) // moved away or removed: the name is free again
		return nil
	}
	return fmt.Errorf("stream directory %s could not be recovered (%v) and is kept untouched: move or remove it to create the stream", dir, why)
}

func (a *account) stop() {
	for _, sub := range a.apiSubs {
		sub.Unsubscribe()
	}
	for _, s := range a.streamList() {
		s.stop(false)
	}
	a.api.Close()
	if a.direct != nil {
		a.direct.Close()
	}
}

func (a *account) streamList() []*stream {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]*stream, 0, len(a.streams))
	for _, s := range a.streams {
		out = append(out, s)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].name < out[k].name })
	return out
}

func (a *account) lookup(name string) *stream {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.streams[name]
}

// reserve adds (sign 1) or removes (-1) a stream's max_bytes from the reservations.
func (a *account) reserve(cfg *StreamConfig, sign int64) {
	if cfg.MaxBytes <= 0 {
		return
	}
	n := sign * cfg.MaxBytes
	if cfg.Storage == MemoryStorage {
		a.memReserved += n
		a.js.memReserved.Add(n)
	} else {
		a.storeReserved += n
		a.js.storeReserved.Add(n)
	}
}

// usage is the storage-update hook's view: bytes held by the account's streams.
func (a *account) usage(st Storage, bytes int64) {
	if st == MemoryStorage {
		a.memUsed.Add(bytes)
		a.js.memUsed.Add(bytes)
	} else {
		a.storeUsed.Add(bytes)
		a.js.storeUsed.Add(bytes)
	}
}

// limits are the account's JetStream limits; safe whatever locks the caller holds.
func (a *account) limits() AccountLimits {
	if l := a.limp.Load(); l != nil {
		return *l
	}
	return a.lim
}

// setLimits replaces them (a reload).
func (a *account) setLimits(lim AccountLimits) {
	a.mu.Lock()
	a.lim = lim
	a.limp.Store(&lim)
	a.mu.Unlock()
}

// limitsExceeded reports whether the account or the server has no room left for st.
func (a *account) limitsExceeded(st Storage) *APIError {
	lim := a.limits()
	j := a.js
	if st == MemoryStorage {
		if lim.MaxMemory >= 0 && a.memUsed.Load() > lim.MaxMemory {
			return JSAccountResourcesExceededErr
		}
		if j.maxMem.Load() > 0 && j.memUsed.Load() > j.maxMem.Load() {
			return JSInsufficientResourcesErr
		}
		return nil
	}
	if lim.MaxStore >= 0 && a.storeUsed.Load() > lim.MaxStore {
		return JSAccountResourcesExceededErr
	}
	if j.maxStore.Load() > 0 && j.storeUsed.Load() > j.maxStore.Load() {
		return JSInsufficientResourcesErr
	}
	return nil
}

// info is $JS.API.INFO's document.
func (a *account) info() AccountStats {
	a.mu.RLock()
	lim := a.lim
	n := len(a.streams)
	mr, sr := a.memReserved, a.storeReserved
	a.mu.RUnlock()
	return AccountStats{
		Memory: uint64(max(a.memUsed.Load(), 0)), Store: uint64(max(a.storeUsed.Load(), 0)),
		ReservedMemory: uint64(max(mr, 0)), ReservedStore: uint64(max(sr, 0)),
		Streams: n, Consumers: a.numConsumers(), Limits: lim, Domain: a.js.cfg.Domain,
		API: apiStats{Level: APILevel, Total: a.apiTotal.Load(), Errors: a.apiErrors.Load()},
	}
}

// respond publishes an API reply and counts it (api.total), as nats-server counts a reply.
func (a *account) respond(reply string, v any) {
	a.countAPI(false)
	a.send(reply, v)
}

// respondHdr is respond with a header block.
func (a *account) respondHdr(reply, hdr string, v any) {
	a.countAPI(false)
	if reply == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	a.lastResp = b
	_ = a.api.Publish(reply, "", []byte(hdr), b)
}

// send publishes an API reply without counting it (a successful MSG.GET, as nats-server).
func (a *account) send(reply string, v any) {
	if reply == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	a.lastResp = b
	_ = a.api.Publish(reply, "", nil, b)
}

func (a *account) countAPI(isErr bool) {
	a.apiTotal.Add(1)
	a.js.apiTotal.Add(1)
	if isErr {
		a.apiErrors.Add(1)
		a.js.apiErrors.Add(1)
	}
}

// respondErr publishes a failed call's reply, in the shape of its type's document, and
// counts it as an error.
func (a *account) respondErr(reply, typ string, e *APIError) {
	a.countAPI(true)
	a.send(reply, errorDoc(typ, e))
}

// respondFailed publishes a failure that nats-server counts as a plain reply (MSG.DELETE's).
func (a *account) respondFailed(reply, typ string, e *APIError) {
	a.countAPI(false)
	a.send(reply, errorDoc(typ, e))
}

// errorDoc is a failed call's document: the type's own, whose fields that are never omitted
// show their zero values beside the error, as nats-server marshals them.
func errorDoc(typ string, e *APIError) any {
	r := apiResponse{Type: typ, Error: e}
	switch strings.TrimPrefix(typ, typePrefix) {
	case "stream_info_response":
		return streamInfoResponse{apiResponse: r}
	case "stream_purge_response":
		return purgeResponse{apiResponse: r}
	case "stream_names_response":
		return streamNamesResponse{apiResponse: r}
	case "stream_list_response":
		return streamListResponse{apiResponse: r, Streams: []*StreamInfo{}}
	case "consumer_names_response":
		return consumerNamesResponse{apiResponse: r}
	case "consumer_list_response":
		return consumerListResponse{apiResponse: r}
	case "stream_restore_response":
		return restoreResponse{apiResponse: r}
	}
	return r
}

// comma prints n with thousands separators, as nats-server's recovery lines do.
func comma(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
