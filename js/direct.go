package js

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/filestore"
	"github.com/natsd/natsd/loop"
)

// Direct gets ($JS.API.DIRECT.GET.<stream>[.<subject>]) are answered by the stream itself,
// with the stored message as the reply (its headers plus the stream's), on the account's
// direct-get worker. A stream without allow_direct has no such subscription.

const maxDirectResults = 1024

func status(line string) []byte { return []byte("NATS/1.0 " + line + "\r\n\r\n") }

// directFallback answers a direct get the API subscription caught but no stream serves: a
// stream without allow_direct, or none, looks to the client as if no one listened.
func (a *account) directFallback(r *apiReq) {
	if r.reply == "" {
		return
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(r.subject, "DIRECT.GET."), ".")
	if s := a.lookup(name); s != nil && s.config().AllowDirect {
		return // the stream's own subscription answers
	}
	_ = a.api.Publish(r.reply, "", status("503"), nil)
}

func (s *stream) directGet(m *loop.WorkMsg) {
	if m.Reply == "" || s.closed.Load() {
		return
	}
	send := func(hdr, data []byte) { _ = s.a.direct.Publish(m.Reply, "", hdr, data) }
	if v, _ := header(m.Hdr, hdrRequiredAPILevel); len(v) > 0 {
		if n, err := strconv.Atoi(string(v)); err != nil || n > APILevel {
			send(status("412 Required Api Level"), nil)
			return
		}
	}
	prefix := "$JS.API.DIRECT.GET." + s.name
	if d := s.a.js.cfg.Domain; d != "" && strings.HasPrefix(m.Subject, "$JS."+d+".") {
		prefix = "$JS." + d + ".API.DIRECT.GET." + s.name
	}
	var req JSApiMsgGetRequest
	if key, ok := strings.CutPrefix(m.Subject, prefix+"."); ok {
		if len(m.Data) > 0 && json.Unmarshal(m.Data, &req) != nil {
			send(status("408 Malformed Request"), nil)
			return
		}
		if key == "" || req.LastFor != "" || req.NextFor != "" || len(req.MultiLastFor) > 0 || req.Seq != 0 ||
			req.Batch != 0 || req.StartTime != nil || req.UpToSeq != 0 || req.UpToTime != nil {
			send(status("408 Bad Request"), nil)
			return
		}
		req.LastFor = key
	} else {
		if len(m.Data) == 0 {
			send(status("408 Empty Request"), nil)
			return
		}
		if json.Unmarshal(m.Data, &req) != nil {
			send(status("408 Malformed Request"), nil)
			return
		}
		if req.Seq == 0 && req.LastFor == "" && req.NextFor == "" && len(req.MultiLastFor) == 0 && req.StartTime == nil {
			send(status("408 Empty Request"), nil)
			return
		}
		if (req.Seq > 0 && req.LastFor != "") || (req.Seq > 0 && req.StartTime != nil) ||
			(req.StartTime != nil && req.LastFor != "") || (req.LastFor != "" && req.NextFor != "") ||
			(req.LastFor != "" && req.Batch > 0) || (req.LastFor != "" && len(req.MultiLastFor) > 0) ||
			(req.NextFor != "" && len(req.MultiLastFor) > 0) || (req.UpToSeq > 0 && req.UpToTime != nil) {
			send(status("408 Bad Request"), nil)
			return
		}
	}
	if len(req.MultiLastFor) > 0 {
		s.directMulti(&req, send)
		return
	}
	s.directBatch(&req, send)
}

// directTry answers a get by key (the subject's last message named in the request's own
// subject, no body, no headers: a KV get) on the requester's reactor, when the store can
// load it without waiting; anything else, or a load that would wait, goes to directGet on
// the worker. The answer is the one directGet gives.
func (s *stream) directTry(prefix string) func(m *loop.Msg) bool {
	return func(m *loop.Msg) bool {
		if len(m.Reply) == 0 || m.Hdr != 0 || len(m.Data) != 0 || s.closed.Load() ||
			len(m.Subject) <= len(prefix)+1 || m.Subject[len(prefix)] != '.' || string(m.Subject[:len(prefix)]) != prefix {
			return false
		}
		sm, err := s.store.TryLoadLastMsg(string(m.Subject[len(prefix)+1:]))
		switch err {
		case nil:
			s.a.direct.Respond(m, s.stamped(sm, false, 0, 0), sm.Data)
		case filestore.ErrNotFound:
			s.a.direct.Respond(m, status("404 Message Not Found"), nil)
		default:
			return false
		}
		return true
	}
}

// stamped is a stored message's header block with the direct-get headers added.
func (s *stream) stamped(sm *filestore.StoredMsg, batch bool, np, lseq uint64) []byte {
	var h []byte
	if len(sm.Header) == 0 {
		h = append(h, "NATS/1.0\r\n\r\n"...)
	} else {
		h = append(h, sm.Header...)
	}
	h = appendHeader(h, "Nats-Stream", s.name)
	h = appendHeader(h, "Nats-Subject", sm.Subject)
	h = appendHeader(h, "Nats-Sequence", strconv.FormatUint(sm.Seq, 10))
	h = appendHeader(h, "Nats-Time-Stamp", time.Unix(0, sm.TS).UTC().Format(time.RFC3339Nano))
	if batch {
		h = appendHeader(h, "Nats-Num-Pending", strconv.FormatUint(np, 10))
		h = appendHeader(h, "Nats-Last-Sequence", strconv.FormatUint(lseq, 10))
	}
	return h
}

func (s *stream) maxBytes(req *JSApiMsgGetRequest) int {
	if req.MaxBytes > 0 {
		return req.MaxBytes
	}
	return 64 << 20 // the server's max_pending, as nats-server bounds a batch
}

func (s *stream) directBatch(req *JSApiMsgGetRequest, send func(hdr, data []byte)) {
	seq := req.Seq
	if req.StartTime != nil {
		seq = s.store.GetSeqFromTime(*req.StartTime)
	}
	batch, isBatch := req.Batch, req.Batch > 0
	if batch == 0 {
		batch = 1
	}
	var np, lseq uint64
	if isBatch {
		np = s.store.FilteredState(req.NextFor, max(seq, 1)).Msgs
	}
	mb, sent := s.maxBytes(req), 0
	for i := 0; i < batch; i++ {
		var sm *filestore.StoredMsg
		var err error
		switch {
		case seq > 0 && req.NextFor == "":
			if i == 0 && !isBatch {
				s.store.WaitDurable(seq) // as MSG.GET (stream.get)
				sm, err = s.store.LoadMsg(seq)
			} else {
				sm, err = s.store.LoadNextMsg("", seq)
			}
		case req.NextFor != "":
			sm, err = s.store.LoadNextMsg(req.NextFor, max(seq, 1))
		default:
			sm, err = s.store.LoadLastMsg(req.LastFor)
		}
		if err != nil {
			if isBatch && i > 0 {
				break
			}
			send(status("404 Message Not Found"), nil)
			return
		}
		seq = sm.Seq + 1
		var h []byte
		if !req.NoHeaders {
			if isBatch && np > 0 {
				np--
			}
			h = s.stamped(sm, isBatch, np, lseq)
		}
		lseq = sm.Seq
		send(h, sm.Data)
		if sent += len(sm.Subject) + len(sm.Header) + len(sm.Data); sent >= mb {
			break
		}
	}
	if isBatch {
		np = s.store.FilteredState(req.NextFor, max(seq, 1)).Msgs
		send([]byte(fmt.Sprintf("NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n", np, lseq)), nil)
	}
}

func (s *stream) directMulti(req *JSApiMsgGetRequest, send func(hdr, data []byte)) {
	upTo := req.UpToSeq
	st := s.store.FastState()
	if req.UpToTime != nil {
		upTo = s.store.GetSeqFromTime(req.UpToTime.UTC())
		if upTo <= st.FirstSeq {
			send(status("404 No Results"), nil)
			return
		}
		upTo--
	}
	if upTo == 0 {
		upTo = st.LastSeq
	}
	seqs, err := s.store.MultiLastSeqs(req.MultiLastFor, upTo, maxDirectResults)
	if err != nil {
		if err == filestore.ErrTooManyResults {
			send(status("413 Too Many Results"), nil)
		} else {
			send(status("500 "+err.Error()), nil)
		}
		return
	}
	var list []uint64
	for _, q := range seqs {
		if q >= req.Seq {
			list = append(list, q)
		}
	}
	if len(list) == 0 {
		send(status("404 No Results"), nil)
		return
	}
	mb, sent, lseq := s.maxBytes(req), 0, uint64(0)
	np := uint64(len(list))
	for i, q := range list {
		sm, err := s.store.LoadMsg(q)
		if err != nil {
			continue
		}
		np = uint64(len(list) - i - 1)
		send(s.stamped(sm, true, np, lseq), sm.Data)
		lseq = sm.Seq
		if sent += len(sm.Subject) + len(sm.Header) + len(sm.Data); sent >= mb {
			break
		}
		if req.Batch > 0 && i+1 >= req.Batch {
			break
		}
	}
	send([]byte(fmt.Sprintf("NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\nNats-UpTo-Sequence: %d\r\n\r\n",
		np, lseq, upTo)), nil)
}

// info reports the stream (with deleted sequences and a subjects map when asked).
func (s *stream) info(deleted bool, subjects string) StreamInfo {
	cfg := reported(*s.config())
	st := s.store.FastState()
	ss := StreamState{Msgs: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq,
		NumDeleted: int(st.Deleted)}
	if st.FirstTS != 0 {
		ss.FirstTime = time.Unix(0, st.FirstTS).UTC()
	}
	if st.LastTS != 0 {
		ss.LastTime = time.Unix(0, st.LastTS).UTC()
	}
	if subjects != "" {
		all := s.store.SubjectsState(subjects)
		if len(all) > 0 {
			ss.Subjects = make(map[string]uint64, len(all))
			for k, v := range all {
				ss.Subjects[k] = v.Msgs
			}
		}
	}
	ss.NumSubjects = st.NumSubjects
	if deleted && st.Deleted > 0 {
		for q := st.FirstSeq; q <= st.LastSeq; q++ {
			if _, err := s.store.LoadMsg(q); err != nil {
				ss.Deleted = append(ss.Deleted, q)
			}
		}
	}
	if l := s.store.Lost(); l.Msgs > 0 {
		ss.Lost = &LostStreamData{Msgs: l.Seqs}
	}
	if ss.Msgs == 0 && ss.LastSeq == 0 {
		ss.FirstSeq = 0 // a stream that never held a message, as nats-server reports it
	}
	ss.Consumers = s.numConsumers()
	mirror, sources := s.sourceInfos()
	return StreamInfo{Config: cfg, Created: s.created, State: ss, Domain: s.a.js.cfg.Domain,
		Mirror: mirror, Sources: sources, TimeStamp: time.Now().UTC()}
}

func randomID() string {
	var b [11]byte
	_, _ = rand.Read(b[:])
	const alpha = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	out := make([]byte, 22)
	for i := range out {
		out[i] = alpha[int(b[i%11]+byte(i*7))%len(alpha)]
	}
	return string(out)
}
