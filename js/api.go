package js

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/filestore"
	"github.com/natsd/natsd/loop"
)

const typePrefix = "io.nats.jetstream.api.v1."

// apiResponse opens every API reply.
type apiResponse struct {
	Type  string    `json:"type"`
	Error *APIError `json:"error,omitempty"`
}

type accountInfoResponse struct {
	apiResponse
	*AccountStats
}

type streamCreateResponse struct {
	apiResponse
	*StreamInfo
	DidCreate bool `json:"did_create,omitempty"`
}

type streamInfoResponse struct {
	apiResponse
	apiPaged
	*StreamInfo
}

type streamNamesResponse struct {
	apiResponse
	apiPaged
	Streams []string `json:"streams"`
}

type streamListResponse struct {
	apiResponse
	apiPaged
	Streams []*StreamInfo `json:"streams"`
	Missing []string      `json:"missing,omitempty"`
}

type successResponse struct {
	apiResponse
	Success bool `json:"success,omitempty"`
}

type purgeResponse struct {
	apiResponse
	Success bool   `json:"success,omitempty"`
	Purged  uint64 `json:"purged"`
}

type msgGetResponse struct {
	apiResponse
	Message *storedMsgJSON `json:"message,omitempty"`
}

type consumerNamesResponse struct {
	apiResponse
	apiPaged
	Consumers []string `json:"consumers"`
}

type consumerListResponse struct {
	apiResponse
	apiPaged
	Consumers []any    `json:"consumers"`
	Missing   []string `json:"missing,omitempty"`
}

// Paging limits of the list calls, as nats-server's.
const (
	namesLimit = 1024
	listLimit  = 256
)

// apiReq is one request as a handler sees it.
type apiReq struct {
	a       *account
	subject string // without the $JS[.<domain>].API. prefix
	reply   string
	hdr     []byte
	body    []byte
	from    *loop.Origin
}

// apiTry drops, on the publisher's reactor, a direct get or a pull request that a stream's or
// a consumer's own subscription is answering: $JS.API.> matches those too, and the worker would
// only look the stream or consumer up, find it and return (directFallback, nextFallback), at
// the cost of a copy and a goroutine hand-off per KV get. What it cannot tell without waiting
// for a lock, and everything else, goes to handleAPI.
func (a *account) apiTry(m *loop.Msg) bool {
	subj := m.Subject
	if !bytes.HasPrefix(subj, jsPrefix) {
		return false
	}
	subj = subj[len(jsPrefix):]
	if bytes.HasPrefix(subj, apiPrefix) {
		subj = subj[len(apiPrefix):]
	} else if d := a.js.cfg.Domain; d != "" && len(subj) > len(d) && string(subj[:len(d)]) == d &&
		bytes.HasPrefix(subj[len(d):], domainAPIPrefix) {
		subj = subj[len(d)+len(domainAPIPrefix):]
	} else {
		return false
	}
	var name, con []byte
	next := false
	switch {
	case bytes.HasPrefix(subj, directGetPrefix):
		name, _, _ = bytes.Cut(subj[len(directGetPrefix):], dot)
	case bytes.HasPrefix(subj, msgNextPrefix):
		next = true
		name, con, _ = bytes.Cut(subj[len(msgNextPrefix):], dot)
		con, _, _ = bytes.Cut(con, dot)
	default:
		return false
	}
	if len(m.Reply) == 0 {
		return true // the fallback answers only a request
	}
	if !a.mu.TryRLock() {
		return false
	}
	s := a.streams[string(name)]
	a.mu.RUnlock()
	if s == nil {
		return false
	}
	if !next {
		return s.config().AllowDirect
	}
	if !s.cons.mu.TryRLock() {
		return false
	}
	c := s.cons.byID[string(con)]
	s.cons.mu.RUnlock()
	return c != nil
}

var (
	jsPrefix        = []byte("$JS.")
	apiPrefix       = []byte("API.")
	domainAPIPrefix = []byte(".API.")
	directGetPrefix = []byte("DIRECT.GET.")
	msgNextPrefix   = []byte("CONSUMER.MSG.NEXT.")
	dot             = []byte(".")
)

// handleAPI serves one $JS.API request on the account's worker goroutine.
func (a *account) handleAPI(m *loop.WorkMsg) {
	subj := m.Subject
	switch {
	case strings.HasPrefix(subj, "$JS.API."):
		subj = subj[len("$JS.API."):]
	case a.js.cfg.Domain != "" && strings.HasPrefix(subj, "$JS."+a.js.cfg.Domain+".API."):
		subj = subj[len("$JS."+a.js.cfg.Domain+".API."):]
	default:
		return
	}
	r := &apiReq{a: a, subject: subj, reply: m.Reply, hdr: m.Hdr, body: m.Data, from: m.From}
	if strings.HasPrefix(subj, "DIRECT.GET.") {
		a.directFallback(r)
		return
	}
	if strings.HasPrefix(subj, "CONSUMER.MSG.NEXT.") {
		a.nextFallback(r, m.Subject)
		return
	}
	if m.Reply == "" {
		return
	}
	h, typ := a.route(subj)
	if h == nil {
		return // unknown API subjects get no reply, as from nats-server
	}
	if !a.enabled {
		a.respondErr(r.reply, typ, JSNotEnabledForAccountErr)
		return
	}
	if v, _ := header(r.hdr, hdrRequiredAPILevel); len(v) > 0 { // an empty value requires nothing
		if n, err := strconv.Atoi(string(v)); err != nil || n > APILevel {
			a.respondErr(r.reply, typ, JSRequiredApiLevelErr)
			return
		}
	}
	a.lastResp = nil
	h(r, typ)
	a.audit(r)
}

// audit publishes the API audit advisory for a served request, when someone listens.
func (a *account) audit(r *apiReq) {
	const subj = "$JS.EVENT.ADVISORY.API"
	if !a.acc.HasInterest(subj) {
		return
	}
	client := a.clientInfo(r.from)
	prefix := "$JS.API."
	doc := map[string]any{"type": "io.nats.jetstream.advisory.v1.api_audit", "id": randomID(),
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "server": a.js.cfg.ServerName,
		"client": client, "subject": prefix + r.subject, "response": string(a.lastResp)}
	if len(r.body) > 0 {
		doc["request"] = string(r.body)
	}
	if d := a.js.cfg.Domain; d != "" {
		doc["domain"] = d
	}
	b, _ := json.Marshal(doc)
	_ = a.api.Publish(subj, "", nil, b)
}

// clientInfo is the requester as advisories name it.
func (a *account) clientInfo(from *loop.Origin) map[string]any {
	var o loop.Origin
	if from != nil {
		o = *from
	}
	client := map[string]any{"acc": o.Account, "server": a.js.cfg.ServerName}
	if !o.Start.IsZero() {
		client["start"] = o.Start.UTC().Format(time.RFC3339Nano)
	}
	for k, v := range map[string]string{"host": o.Host, "name": o.Name, "lang": o.Lang, "ver": o.Version, "user": o.User} {
		if v != "" {
			client[k] = v
		}
	}
	if o.CID != 0 {
		client["id"] = o.CID
	}
	if o.RTT > 0 {
		client["rtt"] = o.RTT
	}
	if o.Kind == loop.KindClient {
		client["kind"], client["client_type"] = "Client", "nats"
	}
	return client
}

type handler func(r *apiReq, typ string)

// route finds the handler of an API subject and its reply's type.
func (a *account) route(subj string) (handler, string) {
	tok := strings.Split(subj, ".")
	t := func(name string) string { return typePrefix + name }
	switch {
	case subj == "INFO":
		return a.apiInfo, t("account_info_response")
	case len(tok) == 3 && tok[0] == "STREAM":
		switch tok[1] {
		case "CREATE":
			return a.apiStreamCreate, t("stream_create_response")
		case "UPDATE":
			return a.apiStreamUpdate, t("stream_update_response")
		case "DELETE":
			return a.apiStreamDelete, t("stream_delete_response")
		case "INFO":
			return a.apiStreamInfo, t("stream_info_response")
		case "PURGE":
			return a.apiStreamPurge, t("stream_purge_response")
		case "SNAPSHOT":
			return a.apiSnapshot, t("stream_snapshot_response")
		case "RESTORE":
			return a.apiRestore, t("stream_restore_response")
		}
	case subj == "STREAM.NAMES":
		return a.apiStreamNames, t("stream_names_response")
	case subj == "STREAM.LIST":
		return a.apiStreamList, t("stream_list_response")
	case len(tok) == 4 && tok[0] == "STREAM" && tok[1] == "MSG" && tok[2] == "GET":
		return a.apiMsgGet, t("stream_msg_get_response")
	case len(tok) == 4 && tok[0] == "STREAM" && tok[1] == "MSG" && tok[2] == "DELETE":
		return a.apiMsgDelete, t("stream_msg_delete_response")
	case len(tok) == 4 && tok[0] == "STREAM" && tok[1] == "LEADER" && tok[2] == "STEPDOWN":
		return a.apiNotClustered, t("stream_leader_stepdown_response")
	case len(tok) == 4 && tok[0] == "STREAM" && tok[1] == "PEER" && tok[2] == "REMOVE":
		return a.apiNotClustered, t("stream_remove_peer_response")
	case len(tok) == 3 && tok[0] == "CONSUMER" && tok[1] == "NAMES":
		return a.apiConsumerNames, t("consumer_names_response")
	case len(tok) == 3 && tok[0] == "CONSUMER" && tok[1] == "LIST":
		return a.apiConsumerList, t("consumer_list_response")
	case len(tok) >= 3 && tok[0] == "CONSUMER" && tok[1] == "CREATE":
		return a.apiConsumerCreate, t("consumer_create_response")
	case len(tok) == 5 && tok[0] == "CONSUMER" && tok[1] == "DURABLE" && tok[2] == "CREATE":
		return a.apiConsumerCreate, t("consumer_create_response")
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "INFO":
		return a.apiConsumerInfo, t("consumer_info_response")
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "DELETE":
		return a.apiConsumerDelete, t("consumer_delete_response")
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "PAUSE":
		return a.apiConsumerPause, t("consumer_pause_response")
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "RESET":
		return a.apiConsumerReset, t("consumer_reset_response")
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "UNPIN":
		return a.apiConsumerUnpin, t("consumer_unpin_response")
	case len(tok) == 5 && tok[0] == "CONSUMER" && tok[1] == "LEADER" && tok[2] == "STEPDOWN":
		return a.apiConsumerNotClustered, t("consumer_leader_stepdown_response")
	case len(tok) == 5 && tok[0] == "CONSUMER" && tok[1] == "PEER" && tok[2] == "REMOVE":
		return a.apiConsumerNotClustered, t("consumer_remove_peer_response")
	}
	return nil, ""
}

func (a *account) apiInfo(r *apiReq, typ string) {
	st := a.info()
	a.respond(r.reply, accountInfoResponse{apiResponse{Type: typ}, &st})
}

func (a *account) apiNotClustered(r *apiReq, typ string) {
	if a.streamOf(r, typ, 3) == nil {
		return
	}
	a.respondErr(r.reply, typ, JSClusterNotActiveErr)
}

// streamOf returns the stream named by token i of the request's subject, answering
// "stream not found" when there is none.
func (a *account) streamOf(r *apiReq, typ string, i int) *stream {
	tok := strings.Split(r.subject, ".")
	if i >= len(tok) {
		a.respondErr(r.reply, typ, JSStreamNotFoundErr)
		return nil
	}
	s := a.lookup(tok[i])
	if s == nil {
		a.respondErr(r.reply, typ, JSStreamNotFoundErr)
	}
	return s
}

type StreamConfigRequest struct {
	StreamConfig
	Pedantic bool `json:"pedantic,omitempty"`
}

func (a *account) apiStreamCreate(r *apiReq, typ string) {
	var req StreamConfigRequest
	if e := decode(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	cfg := req.StreamConfig
	setStaticMetadata(&cfg)
	name := strings.TrimPrefix(r.subject, "STREAM.CREATE.")
	if name != cfg.Name {
		a.respondErr(r.reply, typ, JSStreamMismatchErr)
		return
	}
	if strings.ContainsAny(name, `\/`) {
		a.respondErr(r.reply, typ, JSStreamNameContainsPathSeparatorsErr)
		return
	}
	if cfg.Sealed {
		a.respondErr(r.reply, typ, invalidConfig("stream configuration for create can not be sealed"))
		return
	}
	if cfg.MirrorDirect && cfg.Mirror == nil {
		a.respondErr(r.reply, typ, invalidConfig("stream has no mirror but does have mirror direct"))
		return
	}
	s, e := a.addStream(&cfg, req.Pedantic)
	if e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	info := s.info(false, "")
	info.Domain = "" // nats-server names the domain in every stream info but the create reply's
	a.respond(r.reply, streamCreateResponse{apiResponse{Type: typ}, &info, true})
}

// addStream creates a stream, or returns the existing one when the configuration is the
// same.
func (a *account) addStream(in *StreamConfig, pedantic bool) (*stream, *APIError) {
	cfg, e := a.checkConfig(in, pedantic)
	if e != nil {
		return nil, e
	}
	if cfg.Replicas > 1 {
		return nil, JSStreamReplicasNotSupportedErr
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.checkSourcingLocked(&cfg, pedantic); e != nil {
		return nil, e
	}
	if s := a.streams[cfg.Name]; s != nil {
		old := *s.config()
		keepRequiredLevel(&cfg, &old)
		if reflect.DeepEqual(cfg, old) {
			return s, nil
		}
		return nil, JSStreamNameExistErr
	}
	if a.lim.MaxStreams > 0 && len(a.streams) >= a.lim.MaxStreams {
		return nil, JSMaximumStreamsLimitErr
	}
	if cfg.MaxConsumers > 0 && a.lim.MaxConsumers > 0 && cfg.MaxConsumers > a.lim.MaxConsumers {
		return nil, JSMaximumConsumersLimitErr
	}
	if e := a.checkBytes(&cfg, 0); e != nil {
		return nil, e
	}
	if a.subjects.collides(cfg.Subjects) {
		return nil, JSStreamSubjectOverlapErr
	}
	s, err := openStream(a, cfg, time.Now().UTC(), true)
	if err == nil {
		err = s.start()
	}
	if err != nil {
		a.js.warnf("Stream create failed for '%s > %s': %v", a.name, cfg.Name, err)
		return nil, JSStreamCreateErrF.withErr(err)
	}
	a.streams[cfg.Name] = s
	a.subjects.add(s, cfg.Subjects)
	a.reserve(&cfg, 1)
	s.startSourcing()
	a.advise("STREAM.CREATED."+cfg.Name, "stream_action", map[string]any{"stream": cfg.Name, "action": "create"})
	return s, nil
}

// checkBytes checks a stream's max_bytes (beyond what it already reserves, offset) against
// the account's and the server's room (a.mu held).
func (a *account) checkBytes(cfg *StreamConfig, offset int64) *APIError {
	add := cfg.MaxBytes - offset
	if cfg.MaxBytes <= 0 {
		add = 1
	}
	if add <= 0 {
		return nil
	}
	j := a.js
	if cfg.Storage == MemoryStorage {
		res := a.memReserved
		if a.lim.MaxMemory >= 0 && (res > a.lim.MaxMemory || add > a.lim.MaxMemory-res) {
			return JSMemoryResourcesExceededErr
		}
		if mr := j.memReserved.Load(); j.maxMem.Load() > 0 && (mr > j.maxMem.Load() || add > j.maxMem.Load()-mr) {
			return JSMemoryResourcesExceededErr
		}
		return nil
	}
	res := a.storeReserved
	if a.lim.MaxStore >= 0 && (res > a.lim.MaxStore || add > a.lim.MaxStore-res) {
		return JSStorageResourcesExceededErr
	}
	if sr := j.storeReserved.Load(); j.maxStore.Load() > 0 && (sr > j.maxStore.Load() || add > j.maxStore.Load()-sr) {
		return JSStorageResourcesExceededErr
	}
	return nil
}

func subjectsOverlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if auth.SubjectsCollide(x, y) {
				return true
			}
		}
	}
	return false
}

func (a *account) apiStreamUpdate(r *apiReq, typ string) {
	var req StreamConfigRequest
	if e := decode(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	cfg := req.StreamConfig
	name := strings.TrimPrefix(r.subject, "STREAM.UPDATE.")
	if name != cfg.Name {
		a.respondErr(r.reply, typ, JSStreamMismatchErr)
		return
	}
	s := a.lookup(name)
	if s == nil {
		a.respondErr(r.reply, typ, JSStreamNotFoundErr)
		return
	}
	if e := a.updateStream(s, &cfg, req.Pedantic); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	info := s.info(false, "")
	a.respond(r.reply, streamCreateResponse{apiResponse{Type: typ}, &info, false})
}

func (a *account) updateStream(s *stream, in *StreamConfig, pedantic bool) *APIError {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := *s.config()
	cfg, e := a.checkUpdate(&old, in, pedantic)
	if e != nil {
		return e
	}
	if e := a.checkSourcingLocked(&cfg, pedantic); e != nil {
		return e
	}
	keepRequiredLevel(&cfg, &old)
	if cfg.AllowMsgTTL && !old.AllowMsgTTL {
		cfg.Metadata = withLevel(cfg.Metadata, requiredLevel(&cfg))
	}
	a.subjects.remove(s, old.Subjects) // checked against the other streams only
	clash := a.subjects.collides(cfg.Subjects)
	a.subjects.add(s, old.Subjects)
	if clash {
		return JSStreamSubjectOverlapErr
	}
	if e := a.checkBytes(&cfg, max(old.MaxBytes, 0)); e != nil && cfg.MaxBytes > old.MaxBytes {
		return e
	}
	if err := s.store.UpdateLimits(limitsOf(&cfg)); err != nil {
		return JSStreamUpdateErrF.withErr(err)
	}
	if cfg.Storage == FileStorage {
		if err := writeMeta(a.js.cfg.FS, s.dir, &cfg, s.created); err != nil {
			return JSStreamUpdateErrF.withErr(err)
		}
	}
	a.reserve(&old, -1)
	a.reserve(&cfg, 1)
	a.subjects.remove(s, old.Subjects)
	a.subjects.add(s, cfg.Subjects)
	s.setConfig(&cfg)
	if cfg.AllowMsgTTL && s.ttl == nil {
		s.ttl = newTTLWheel(s)
	}
	if cfg.AllowMsgSchedules && s.sch.Load() == nil {
		// Nothing stored before could be a schedule: the stream refused them.
		s.sch.Store(newScheduler(s))
	}
	s.age.kick()
	if err := s.subscribe(&cfg); err != nil {
		return JSStreamUpdateErrF.withErr(err)
	}
	if !reflect.DeepEqual(old.Mirror, cfg.Mirror) || !reflect.DeepEqual(old.Sources, cfg.Sources) {
		if cfg.Mirror == nil && len(cfg.Sources) == 0 {
			s.stopSourcing()
		} else {
			s.startSourcing()
		}
	}
	a.advise("STREAM.UPDATED."+cfg.Name, "stream_action", map[string]any{"stream": cfg.Name, "action": "modify"})
	return nil
}

func withLevel(md map[string]string, l int) map[string]string {
	if md == nil {
		md = map[string]string{}
	}
	md["_nats.req.level"] = strconv.Itoa(l)
	return md
}

func (a *account) apiStreamDelete(r *apiReq, typ string) {
	s := a.streamOf(r, typ, 2)
	if s == nil {
		return
	}
	if err := a.deleteStream(s); err != nil {
		if errors.Is(err, errStreamGone) {
			a.respondErr(r.reply, typ, JSStreamNotFoundErr)
		} else {
			a.respondErr(r.reply, typ, JSStreamDeleteErrF.withErr(err))
		}
		return
	}
	a.respond(r.reply, successResponse{apiResponse{Type: typ}, true})
}

var errStreamGone = errors.New("stream not found")

// deleteStream takes s out of the account and deletes it, with its advisory.
func (a *account) deleteStream(s *stream) error {
	a.mu.Lock()
	if a.streams[s.name] != s {
		a.mu.Unlock()
		return errStreamGone
	}
	delete(a.streams, s.name)
	a.subjects.remove(s, s.config().Subjects)
	a.reserve(s.config(), -1)
	a.mu.Unlock()
	if err := s.stop(true); err != nil {
		return err
	}
	a.advise("STREAM.DELETED."+s.name, "stream_action", map[string]any{"stream": s.name, "action": "delete"})
	return nil
}

func (a *account) apiStreamInfo(r *apiReq, typ string) {
	// The request is read before the stream is looked up, as nats-server does.
	var req JSApiStreamInfoRequest
	if e := decodeIfObject(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	s := a.streamOf(r, typ, 2)
	if s == nil {
		return
	}
	info := s.info(req.DeletedDetails, req.SubjectsFilter)
	if n := a.js.cfg.ServerName; n != "" {
		info.Cluster = &ClusterInfo{Leader: n} // nats-server names the leader here only
	}
	resp := streamInfoResponse{apiResponse: apiResponse{Type: typ}, StreamInfo: &info}
	if subs := info.State.Subjects; len(subs) > 0 {
		// The subjects map is paged, in name order, as nats-server pages it.
		const limit = 100_000
		names := make([]string, 0, len(subs))
		for k := range subs {
			names = append(names, k)
		}
		sort.Strings(names)
		off := min(max(req.Offset, 0), len(names))
		end := min(off+limit, len(names))
		page := make(map[string]uint64, end-off)
		for _, k := range names[off:end] {
			page[k] = subs[k]
		}
		info.State.Subjects = page
		resp.apiPaged = apiPaged{Total: len(names), Offset: off, Limit: limit}
	}
	a.respond(r.reply, resp)
}

// names lists the streams whose subjects collide with filter ("" for all), in name order.
func (a *account) names(filter string) []*stream {
	var out []*stream
	for _, s := range a.streamList() {
		if filter == "" || filter == ">" || subjectsOverlap([]string{filter}, s.config().Subjects) {
			out = append(out, s)
		}
	}
	return out
}

func (a *account) apiStreamNames(r *apiReq, typ string) {
	var req JSApiStreamNamesRequest
	if e := decodeIfObject(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	all := a.names(req.Subject)
	off := min(max(req.Offset, 0), len(all))
	end := min(off+namesLimit, len(all))
	resp := streamNamesResponse{apiResponse: apiResponse{Type: typ},
		apiPaged: apiPaged{Total: len(all), Offset: off, Limit: namesLimit}}
	for _, s := range all[off:end] {
		resp.Streams = append(resp.Streams, s.name)
	}
	a.respond(r.reply, resp)
}

func (a *account) apiStreamList(r *apiReq, typ string) {
	var req JSApiStreamListRequest
	if e := decodeIfObject(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	all := a.names(req.Subject)
	off := min(max(req.Offset, 0), len(all))
	end := min(off+listLimit, len(all))
	resp := streamListResponse{apiResponse: apiResponse{Type: typ},
		apiPaged: apiPaged{Total: len(all), Offset: off, Limit: listLimit}, Streams: []*StreamInfo{}}
	for _, s := range all[off:end] {
		info := s.info(false, "")
		info.Config.Metadata = s.config().Metadata // lists show the stored metadata only
		resp.Streams = append(resp.Streams, &info)
	}
	a.respond(r.reply, resp)
}

func (a *account) apiStreamPurge(r *apiReq, typ string) {
	// nats-server reads and checks the request before it looks the stream up.
	var req JSApiStreamPurgeRequest
	if e := decodeIfObject(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	if req.Sequence > 0 && req.Keep > 0 {
		a.respondErr(r.reply, typ, JSBadRequestErr)
		return
	}
	s := a.streamOf(r, typ, 2)
	if s == nil {
		return
	}
	cfg := s.config()
	if cfg.Sealed {
		a.respondErr(r.reply, typ, JSStreamSealedErr)
		return
	}
	if cfg.DenyPurge {
		a.respondErr(r.reply, typ, JSStreamPurgeFailedF.with("err", "stream purge not permitted"))
		return
	}
	if req.Subject != "" && !validSubject(req.Subject) {
		a.respondErr(r.reply, typ, JSStreamPurgeFailedF.with("err", "invalid subject"))
		return
	}
	defer s.lockCounters()()
	s.settle()
	n, err := s.store.PurgeEx(req.Subject, req.Sequence, req.Keep)
	if err != nil {
		a.respondErr(r.reply, typ, JSStreamPurgeFailedF.withErr(err))
		return
	}
	for _, c := range s.consumerList() {
		c.purged()
	}
	a.respond(r.reply, purgeResponse{apiResponse{Type: typ}, true, n})
}

// decodeRequired reads a request that must have a body into v, answering the error (and
// reporting false) when it is empty or does not decode.
func (a *account) decodeRequired(r *apiReq, typ string, v any) bool {
	if emptyRequest(r.body) {
		a.respondErr(r.reply, typ, JSBadRequestErr)
		return false
	}
	if e := decode(r.body, v, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return false
	}
	return true
}

func (a *account) apiMsgDelete(r *apiReq, typ string) {
	// nats-server reads the request before it looks the stream up.
	var req JSApiMsgDeleteRequest
	if !a.decodeRequired(r, typ, &req) {
		return
	}
	s := a.streamOf(r, typ, 3)
	if s == nil {
		return
	}
	cfg := s.config()
	if cfg.Sealed {
		a.respondErr(r.reply, typ, JSStreamSealedErr)
		return
	}
	if cfg.DenyDelete {
		a.respondErr(r.reply, typ, JSStreamMsgDeleteFailedF.with("err", "message delete not permitted"))
		return
	}
	defer s.lockCounters()()
	s.settle()
	// The file store overwrites nothing in place: a removed record is unreachable at once
	// and gone from disk when its block is compacted or dropped, with or without no_erase.
	st := s.store.FastState()
	ok, err := s.store.RemoveMsg(req.Seq)
	switch {
	case err == filestore.ErrEOF || (err == nil && !ok && req.Seq > st.LastSeq):
		a.respondFailed(r.reply, typ, JSStreamMsgDeleteFailedF.with("err", "stream store EOF"))
	case err != nil:
		a.respondFailed(r.reply, typ, JSStreamMsgDeleteFailedF.withErr(err))
	case !ok && req.Seq >= st.FirstSeq:
		a.respondFailed(r.reply, typ, JSSequenceNotFoundErrF.with("seq", strconv.FormatUint(req.Seq, 10)))
	case !ok:
		a.respondFailed(r.reply, typ, JSStreamMsgDeleteFailedF.with("err", "no message found"))
	default:
		a.respond(r.reply, successResponse{apiResponse{Type: typ}, true})
	}
}

func (a *account) apiMsgGet(r *apiReq, typ string) {
	// nats-server reads and checks the request before it looks the stream up.
	var req JSApiMsgGetRequest
	if !a.decodeRequired(r, typ, &req) {
		return
	}
	if bad := badGetRequest(&req, false); bad {
		a.respondErr(r.reply, typ, JSBadRequestErr)
		return
	}
	s := a.streamOf(r, typ, 3)
	if s == nil {
		return
	}
	sm, err := s.get(&req)
	if err != nil {
		a.respondErr(r.reply, typ, JSNoMessageFoundErr)
		return
	}
	a.send(r.reply, msgGetResponse{apiResponse{Type: typ}, &storedMsgJSON{Subject: sm.Subject,
		Sequence: sm.Seq, Header: sm.Header, Data: sm.Data, Time: time.Unix(0, sm.TS).UTC()}})
}

// badGetRequest applies nats-server's rules on which MSG.GET fields go together.
func badGetRequest(req *JSApiMsgGetRequest, direct bool) bool {
	n := 0
	if req.Seq > 0 {
		n++
	}
	if req.LastFor != "" {
		n++
	}
	if req.StartTime != nil {
		n++
	}
	switch {
	case req.NextFor != "" && req.LastFor != "":
		return true
	case req.Seq > 0 && req.StartTime != nil:
		return true
	case req.LastFor != "" && (req.Seq > 0 || req.StartTime != nil):
		return true
	case !direct && (req.Batch > 0 || len(req.MultiLastFor) > 0):
		return true
	case n == 0 && req.NextFor == "" && len(req.MultiLastFor) == 0:
		return true
	}
	return false
}

// get loads the message a MSG.GET request names.
func (s *stream) get(req *JSApiMsgGetRequest) (*filestore.StoredMsg, error) {
	switch {
	case req.Seq > 0 && req.NextFor == "":
		// The stream's state counts what is stored and not yet synced (a sourced
		// message, which no publisher waits for): a get of it waits for its commit.
		s.store.WaitDurable(req.Seq)
		return s.store.LoadMsg(req.Seq)
	case req.LastFor != "":
		return s.store.LoadLastMsg(req.LastFor)
	case req.StartTime != nil:
		seq := s.store.GetSeqFromTime(*req.StartTime)
		return s.store.LoadNextMsg(req.NextFor, seq)
	default:
		return s.store.LoadNextMsg(req.NextFor, max(req.Seq, 1))
	}
}

// apiConsumerNotClustered answers the consumer requests only a cluster serves, as a
// standalone nats-server does: before it looks the consumer up.
func (a *account) apiConsumerNotClustered(r *apiReq, typ string) {
	a.respondErr(r.reply, typ, JSClusterRequiredErr)
}

// advise publishes a JetStream advisory when someone listens for it.
func (a *account) advise(suffix, kind string, fields map[string]any) {
	subj := "$JS.EVENT.ADVISORY." + suffix
	if !a.acc.HasInterest(subj) {
		return
	}
	doc := map[string]any{"type": "io.nats.jetstream.advisory.v1." + kind, "id": randomID(),
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano)}
	for k, v := range fields {
		doc[k] = v
	}
	if d := a.js.cfg.Domain; d != "" {
		doc["domain"] = d
	}
	b, _ := json.Marshal(doc)
	_ = a.api.Publish(subj, "", nil, b)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
