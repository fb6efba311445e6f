package js

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/natsd/natsd/filestore"
	"github.com/natsd/natsd/loop"
)

// Snapshots ($JS.API.STREAM.SNAPSHOT / RESTORE, what `nats stream backup` and `restore`
// use) move a stream as one S2-compressed byte stream, chunked over NATS with the
// reference's flow control: each chunk carries a reply subject the client acknowledges,
// and at most window bytes are unacknowledged. Inside is natsd's own format, a logical copy
// rather than the store's files, so that a snapshot taken while publishers run is
// consistent and restores into any storage:
//
//	magic "NATSDSN1" · u32 len · meta JSON {config, created, first_seq, last_seq}
//	then per message: 'm' · u64 seq · i64 ts · u16 subj · u32 hdr · u32 data · bytes
//	then 'e' (end)
//
// S2's framing checksums every block, so a damaged snapshot fails to restore instead of
// restoring wrong data.

const (
	snapMagic          = "NATSDSN1"
	defaultChunkSize   = 128 * 1024
	defaultWindowSize  = 8 * 1024 * 1024
	snapshotAckTimeout = 5 * time.Second
)

type JSApiStreamSnapshotRequest struct {
	DeliverSubject string `json:"deliver_subject"`
	NoConsumers    bool   `json:"no_consumers,omitempty"`
	ChunkSize      int    `json:"chunk_size,omitempty"`
	WindowSize     int    `json:"window_size,omitempty"`
	CheckMsgs      bool   `json:"jsck,omitempty"`
}

type snapshotResponse struct {
	apiResponse
	Config *StreamConfig `json:"config,omitempty"`
	State  *StreamState  `json:"state,omitempty"`
}

type JSApiStreamRestoreRequest struct {
	Config StreamConfig `json:"config"`
	State  StreamState  `json:"state"`
}

type restoreResponse struct {
	apiResponse
	DeliverSubject string `json:"deliver_subject"`
}

type snapMeta struct {
	Config   StreamConfig `json:"config"`
	Created  time.Time    `json:"created"`
	FirstSeq uint64       `json:"first_seq"`
	LastSeq  uint64       `json:"last_seq"`
}

func (a *account) apiSnapshot(r *apiReq, typ string) {
	// An empty request is refused before the stream is looked up, as by nats-server.
	if emptyRequest(r.body) {
		a.respondErr(r.reply, typ, JSBadRequestErr)
		return
	}
	s := a.streamOf(r, typ, 2)
	if s == nil {
		return
	}
	var req JSApiStreamSnapshotRequest
	if e := decode(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	if req.DeliverSubject == "" || strings.ContainsAny(req.DeliverSubject, "*> \t") || !validSubject(req.DeliverSubject) {
		a.respondErr(r.reply, typ, JSSnapshotDeliverSubjectInvalidErr)
		return
	}
	s.settle()
	info := s.info(false, "")
	cfg := *s.config() // the stored configuration, without the server's dynamic metadata
	a.respond(r.reply, snapshotResponse{apiResponse{Type: typ}, &cfg, &info.State})
	client := a.clientInfo(r.from)
	a.advise("STREAM.SNAPSHOT_CREATE."+s.name, "snapshot_create", map[string]any{"stream": s.name,
		"state": info.State, "client": client})
	start := time.Now()
	go func() {
		err := s.sendSnapshot(&req, info.State.FirstSeq, info.State.LastSeq)
		fields := map[string]any{"stream": s.name, "start": start.UTC().Format(time.RFC3339Nano),
			"end": time.Now().UTC().Format(time.RFC3339Nano), "client": client}
		if err != nil {
			a.js.warnf("Snapshot for stream '%s > %s' failed: %v", a.name, s.name, err)
			fields["error"] = err.Error()
		}
		a.advise("STREAM.SNAPSHOT_COMPLETE."+s.name, "snapshot_complete", fields)
	}()
}

// writeSnapshot writes the stream's messages from first to last.
func (s *stream) writeSnapshot(w io.Writer, first, last uint64, consumers bool) error {
	sw := s2.NewWriter(w)
	bw := bufio.NewWriterSize(sw, 64*1024)
	meta, _ := json.Marshal(snapMeta{Config: *s.config(), Created: s.created, FirstSeq: first, LastSeq: last})
	var hdr [27]byte
	bw.WriteString(snapMagic)
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(meta)))
	bw.Write(hdr[:4])
	bw.Write(meta)
	var mb filestore.MsgBuf // each message is written out before the next is loaded
	for seq := max(first, 1); seq != 0 && seq <= last; {
		sm, err := s.store.LoadNextMsgInto(&mb, "", seq)
		if err != nil || sm.Seq > last {
			break
		}
		hdr[0] = 'm'
		binary.LittleEndian.PutUint64(hdr[1:], sm.Seq)
		binary.LittleEndian.PutUint64(hdr[9:], uint64(sm.TS))
		binary.LittleEndian.PutUint16(hdr[17:], uint16(len(sm.Subject)))
		binary.LittleEndian.PutUint32(hdr[19:], uint32(len(sm.Header)))
		binary.LittleEndian.PutUint32(hdr[23:], uint32(len(sm.Data)))
		bw.Write(hdr[:27])
		bw.WriteString(sm.Subject)
		bw.Write(sm.Header)
		if _, err := bw.Write(sm.Data); err != nil {
			return err
		}
		seq = sm.Seq + 1
	}
	if consumers {
		// Then each consumer: its configuration and its state, as a restore makes it anew.
		for _, c := range s.publicConsumers() {
			b, err := json.Marshal(c.snapshot())
			if err != nil {
				return err
			}
			bw.WriteByte('c')
			binary.LittleEndian.PutUint32(hdr[:4], uint32(len(b)))
			bw.Write(hdr[:4])
			if _, err := bw.Write(b); err != nil {
				return err
			}
		}
	}
	bw.WriteByte('e')
	if err := bw.Flush(); err != nil {
		return err
	}
	return sw.Close()
}

// sendSnapshot streams the snapshot to the client in acknowledged chunks.
func (s *stream) sendSnapshot(req *JSApiStreamSnapshotRequest, first, last uint64) error {
	a := s.a
	chunkSize, wnd := req.ChunkSize, req.WindowSize
	if chunkSize == 0 {
		chunkSize = defaultChunkSize
	}
	if wnd == 0 {
		wnd = defaultWindowSize
	}
	chunkSize = min(max(1024, chunkSize), 1024*1024)
	wnd = max(min(max(1024, wnd), 32*1024*1024), chunkSize)
	inflight := wnd / chunkSize
	deliver := req.DeliverSubject
	send := func(hdr, data []byte, reply string) { _ = a.api.Publish(deliver, reply, hdr, data) }

	// Clients subscribe the deliver subject once the snapshot response reaches them, and
	// often on an inbox their response multiplexer already covers, which would drop the
	// chunks: wait (up to 2 s, as the reference waits for interest) for the subscription
	// itself.
	for deadline := time.Now().Add(2 * time.Second); !a.acc.HasSubscriber(deliver) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	slots := make(chan struct{}, inflight)
	for range inflight {
		slots <- struct{}{}
	}
	ackSubj := "$JS.SNAPSHOT.ACK." + s.name + "." + randomID()
	ack, err := a.api.Inline(ackSubj+".>", "", func(*loop.Msg) {
		select {
		case slots <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer ack.Unsubscribe()

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(s.writeSnapshot(pw, first, last, !req.NoConsumers)) }()
	defer pr.Close()
	chunk := make([]byte, chunkSize)
	timer := time.NewTimer(snapshotAckTimeout)
	defer timer.Stop()
	// As nats-server: full chunks carry the reply to acknowledge them, the last short one
	// none, and the end says 204 only when a full chunk went before it.
	var end []byte
	var result error
	for index := 1; ; index++ {
		select {
		case <-slots:
		case <-timer.C:
			send([]byte("NATS/1.0 408 No Flow Response\r\n\r\n"), nil, "")
			return errors.New("no flow response")
		}
		if !a.acc.HasInterest(deliver) {
			send([]byte("NATS/1.0 408 No Interest\r\n\r\n"), nil, "")
			return errors.New("no interest")
		}
		n, err := io.ReadFull(pr, chunk)
		if err != nil {
			if n > 0 {
				send(nil, chunk[:n], "")
			}
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				end = fmt.Appendf(nil, "NATS/1.0 500 %s\r\n\r\n", err)
				result = err
			}
			break
		}
		if end == nil {
			end = []byte("NATS/1.0 204\r\n\r\n")
		}
		send(nil, chunk, fmt.Sprintf("%s.%d.%d", ackSubj, n, index))
		timer.Reset(snapshotAckTimeout)
	}
	send(end, nil, "")
	return result
}

func (a *account) apiRestore(r *apiReq, typ string) {
	var req JSApiStreamRestoreRequest
	if e := decode(r.body, &req, a.js.cfg.Strict); e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	name := strings.TrimPrefix(r.subject, "STREAM.RESTORE.")
	if name != req.Config.Name {
		a.respondErr(r.reply, typ, JSStreamMismatchErr)
		return
	}
	if a.lookup(name) != nil {
		a.respondErr(r.reply, typ, JSStreamNameExistRestoreFailedErr)
		return
	}
	cfg, e := a.checkConfig(&req.Config, false)
	if e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	a.mu.RLock()
	e = a.checkBytes(&cfg, 0)
	a.mu.RUnlock()
	if e != nil {
		a.respondErr(r.reply, typ, e)
		return
	}
	a.js.noticef("Starting restore for stream '%s > %s'", a.name, name)
	client := a.clientInfo(r.from)
	a.advise("STREAM.RESTORE_CREATE."+name, "restore_create", map[string]any{"stream": name, "client": client})
	subj := "$JS.SNAPSHOT.RESTORE." + name + "." + randomID()
	rs := &restore{a: a, name: name, start: time.Now(), client: client}
	rs.pr, rs.pw = io.Pipe()
	rs.done = make(chan result, 1)
	go func() { rs.done <- rs.run() }()
	sub, err := a.api.Worker(subj, "", rs.chunk)
	if err != nil {
		rs.pw.CloseWithError(err)
		a.respondErr(r.reply, typ, JSRestoreSubscribeFailedErrF.with("subject", subj, "err", err.Error()))
		return
	}
	rs.sub = sub
	rs.activity = time.AfterFunc(snapshotAckTimeout*2, rs.idle)
	a.respond(r.reply, restoreResponse{apiResponse{Type: typ}, subj})
}

type result struct {
	s   *stream
	err error
}

// restore receives one snapshot's chunks (on a worker goroutine, in order) and feeds them to
// run through a pipe.
type restore struct {
	a        *account
	name     string
	start    time.Time
	pr       *io.PipeReader
	pw       *io.PipeWriter
	done     chan result
	sub      *loop.Subscription
	activity *time.Timer
	once     sync.Once
	bytes    int64          // what the client sent
	client   map[string]any // who asked, for the advisories
}

func (rs *restore) finish() {
	rs.once.Do(func() {
		rs.sub.Unsubscribe()
		rs.activity.Stop()
	})
}

// idle gives up on a client that stopped sending.
func (rs *restore) idle() {
	rs.pw.CloseWithError(errors.New("restore timed out"))
	rs.finish()
}

func (rs *restore) chunk(m *loop.WorkMsg) {
	a := rs.a
	const typ = typePrefix + "stream_create_response"
	if m.Reply == "" {
		rs.pw.CloseWithError(errors.New("restore requires reply subject for each chunk"))
		rs.finish()
		return
	}
	rs.activity.Reset(snapshotAckTimeout * 2)
	if len(m.Data) > 0 {
		// A write fails once run has given up; as nats-server, the chunks are still
		// acknowledged and the last one is answered with why.
		if n, err := rs.pw.Write(m.Data); err == nil {
			rs.bytes += int64(n)
		}
		_ = a.api.Publish(m.Reply, "", nil, nil)
		return
	}
	// The empty chunk ends the upload: answer once the stream is restored.
	rs.pw.Close()
	rs.finish()
	res := <-rs.done
	if res.err == nil {
		// The restored stream is a new one, announced as nats-server announces it.
		a.advise("STREAM.CREATED."+rs.name, "stream_action", map[string]any{"stream": rs.name, "action": "create"})
	}
	a.advise("STREAM.RESTORE_COMPLETE."+rs.name, "restore_complete", map[string]any{"stream": rs.name,
		"start": rs.start.UTC().Format(time.RFC3339Nano), "end": time.Now().UTC().Format(time.RFC3339Nano),
		"bytes": rs.bytes, "client": rs.client})
	if res.err != nil {
		a.respondErr(m.Reply, typ, JSStreamRestoreErrF.withErr(res.err))
		return
	}
	info := res.s.info(false, "")
	info.Domain = "" // as in the create reply
	a.respond(m.Reply, streamCreateResponse{apiResponse{Type: typ}, &info, false})
}

// run reads the snapshot and builds the stream from it.
func (rs *restore) run() result {
	a, j := rs.a, rs.a.js
	defer rs.pr.Close()
	br := bufio.NewReaderSize(s2.NewReader(rs.pr), 64*1024)
	var magic [8]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil || string(magic[:]) != snapMagic {
		return result{err: errors.New("unknown snapshot format (natsd restores snapshots taken by natsd)")}
	}
	var lb [4]byte
	if _, err := io.ReadFull(br, lb[:]); err != nil {
		return result{err: err}
	}
	mb := make([]byte, binary.LittleEndian.Uint32(lb[:]))
	if _, err := io.ReadFull(br, mb); err != nil {
		return result{err: err}
	}
	var meta snapMeta
	if err := json.Unmarshal(mb, &meta); err != nil {
		return result{err: err}
	}
	cfg, e := a.checkConfig(&meta.Config, false)
	if e != nil {
		return result{err: e}
	}
	cfg.Name = rs.name
	// nats-server makes a restored stream anew: its created time is the restore's, not the
	// snapshot's.
	created := time.Now().UTC()
	// Written without a sync per message; the store syncs as it stops, before the stream
	// is opened for real.
	s, err := openStreamWith(a, cfg, created, true, time.Hour)
	if err != nil {
		return result{err: err}
	}
	fail := func(err error) result {
		s.stop(true)
		return result{err: err}
	}
	var h [27]byte
	var consumers []consumerSnapshot
	for {
		kind, err := br.ReadByte()
		if err != nil {
			return fail(err)
		}
		if kind == 'e' {
			break
		}
		if kind == 'c' {
			if _, err := io.ReadFull(br, lb[:]); err != nil {
				return fail(err)
			}
			cb := make([]byte, binary.LittleEndian.Uint32(lb[:]))
			if _, err := io.ReadFull(br, cb); err != nil {
				return fail(err)
			}
			var cs consumerSnapshot
			if err := json.Unmarshal(cb, &cs); err != nil {
				return fail(err)
			}
			consumers = append(consumers, cs)
			continue
		}
		if kind != 'm' {
			return fail(errors.New("corrupt snapshot"))
		}
		if _, err := io.ReadFull(br, h[1:27]); err != nil {
			return fail(err)
		}
		seq := binary.LittleEndian.Uint64(h[1:])
		ts := int64(binary.LittleEndian.Uint64(h[9:]))
		sl, hl, dl := int(binary.LittleEndian.Uint16(h[17:])), int(binary.LittleEndian.Uint32(h[19:])), int(binary.LittleEndian.Uint32(h[23:]))
		buf := make([]byte, sl+hl+dl)
		if _, err := io.ReadFull(br, buf); err != nil {
			return fail(err)
		}
		var hdr []byte
		if hl > 0 {
			hdr = buf[sl : sl+hl]
		}
		if err := s.store.StoreAt(seq, ts, string(buf[:sl]), hdr, buf[sl+hl:]); err != nil {
			return fail(err)
		}
	}
	if st := s.store.FastState(); st.LastSeq < meta.LastSeq {
		if _, err := s.store.SkipMsgs(meta.LastSeq - st.LastSeq); err != nil {
			return fail(err)
		}
	}
	if cfg.Storage != FileStorage {
		// Stored at their sequences, past the hooks: a memory stream's TTLs and schedules
		// are read from the messages (a file stream's as it is reopened below).
		s.recoverTimed()
	}
	if cfg.Storage == FileStorage {
		// Reopen with the server's durability: stopping synced everything written.
		if err := s.stop(false); err != nil {
			_ = removeAll(j.cfg.FS, filepath.Join(a.dir, "streams", cfg.Name))
			return result{err: err}
		}
		if s, err = openStream(a, cfg, created, false); err != nil {
			_ = removeAll(j.cfg.FS, filepath.Join(a.dir, "streams", cfg.Name))
			return result{err: err}
		}
	}
	a.mu.Lock()
	if a.streams[cfg.Name] != nil {
		a.mu.Unlock()
		return fail(JSStreamNameExistRestoreFailedErr)
	}
	if a.subjects.collides(cfg.Subjects) {
		a.mu.Unlock()
		return fail(JSStreamSubjectOverlapErr)
	}
	a.streams[cfg.Name] = s
	a.subjects.add(s, cfg.Subjects)
	a.reserve(&cfg, 1)
	a.mu.Unlock()
	if err := s.start(); err != nil {
		a.mu.Lock()
		delete(a.streams, cfg.Name)
		a.subjects.remove(s, cfg.Subjects)
		a.reserve(&cfg, -1)
		a.mu.Unlock()
		return result{err: err}
	}
	for _, cs := range consumers {
		if err := s.restoreConsumer(cs); err != nil {
			a.js.warnf("Restore of stream '%s > %s': consumer %q not restored: %v", a.name, cfg.Name, cs.Name, err)
		}
	}
	s.startSourcing()
	a.js.noticef("Completed restore of %s for stream '%s > %s' in %v", friendly(s.store.FastState().Bytes), a.name,
		cfg.Name, time.Since(rs.start).Round(time.Millisecond))
	return result{s: s}
}

func friendly(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %cB", float64(b)/float64(div), "KMGTPE"[exp])
}
