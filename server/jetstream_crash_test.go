package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/natsd/natsd/filestore/powerfs"
)

// Power-cut tests of the whole server's JetStream: natsd runs in-process over filestore/powerfs,
// a double of the page cache in which file contents are durable only once synced and names
// only once their directory is. A client publishes a burst with PublishAsync; power is cut
// at a random moment (in the middle of a random fsync, or after a random number of acks),
// and a new server is started on what the cut left. Every message acknowledged before the
// cut must then be in the stream at its sequence, subject, headers and data identical, the
// stream's configuration must have survived, and the next publish must get a sequence past
// every one acknowledged (none handed out twice). The same run in nats-server's lazy mode
// (sync_interval: acknowledge after write(2), fsync every minute) must be able to lose acked
// messages: that is what shows the default (fsync before the ack) is what makes the first
// test pass, and that the test can fail.

// pcMsg is one published message, as the client sent it.
type pcMsg struct {
	idx  int
	subj string
	hdr  nats.Header
	data []byte
	id   string // Nats-Msg-Id, if any
}

// pcStream is the stream the power-cut tests write, per variant.
func pcStream(name string, compress bool) jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{Name: name, Description: "power cut " + name, Subjects: []string{name + ".>"},
		Storage: jetstream.FileStorage, Duplicates: 5 * time.Minute, MaxMsgSize: 64 << 10}
	if compress {
		cfg.Compression = jetstream.S2Compression
	}
	return cfg
}

// startPowerServer starts natsd with JetStream written through fs. StoreDir is a real, empty
// directory that must stay empty: everything JetStream writes goes through fs.
func startPowerServer(t *testing.T, fs *powerfs.FS, storeDir string, syncInterval time.Duration) *Server {
	t.Helper()
	s, err := New(&Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: storeDir, JetStreamFS: fs, SyncInterval: syncInterval,
		JetStreamMaxStore: 1 << 30, JetStreamMaxMemory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// pcResult is what one verification after a restart found.
type pcResult struct {
	lost      []uint64 // acked before the cut, missing after it
	differs   []string // served at an acked sequence, but not what was acked there
	bogus     []string // unacked messages that are not ones sent, or out of order, or twice
	nextSeq   uint64   // the sequence the first publish after the restart got
	maxAcked  uint64
	lastSeq   uint64
	recovered uint64
}

func (r *pcResult) ok() bool {
	return len(r.lost) == 0 && len(r.differs) == 0 && len(r.bogus) == 0 && r.nextSeq > r.maxAcked
}

func (r *pcResult) String() string {
	short := func(v any, n int) string {
		rv := reflect.ValueOf(v)
		if rv.Len() > n {
			return fmt.Sprintf("%v... (%d)", rv.Slice(0, n).Interface(), rv.Len())
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("recovered %d msgs, last seq %d, max acked %d, next seq %d; lost %s; differs %s; bogus %s",
		r.recovered, r.lastSeq, r.maxAcked, r.nextSeq, short(r.lost, 10), short(r.differs, 5), short(r.bogus, 5))
}

func sameHeader(a, b nats.Header) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(map[string][]string(a), map[string][]string(b))
}

// checkRecovered reads the restarted server's stream back: every message in must (acked before
// a cut, this one or an earlier one) at its sequence, identical; everything else stored must
// be messages sent (sent[i] is the i-th), each once, in publish order after the acked ones.
// It then publishes one message and checks its sequence is past every acked one and that a
// message re-sent with an acked Nats-Msg-Id is a duplicate of the original sequence.
func checkRecovered(t *testing.T, js jetstream.JetStream, want jetstream.StreamConfig, must map[uint64]pcMsg,
	sent map[int]pcMsg) *pcResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	str, err := js.Stream(ctx, want.Name)
	if err != nil {
		t.Fatalf("stream %s after the restart: %v", want.Name, err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := info.Config
	if got.Name != want.Name || got.Description != want.Description || !reflect.DeepEqual(got.Subjects, want.Subjects) ||
		got.Storage != want.Storage || got.Duplicates != want.Duplicates || got.MaxMsgSize != want.MaxMsgSize ||
		got.Compression != want.Compression {
		t.Fatalf("stream config after the restart: %+v, want %+v", got, want)
	}
	r := &pcResult{lastSeq: info.State.LastSeq, recovered: info.State.Msgs}
	var seqs []uint64
	for seq := range must {
		seqs = append(seqs, seq)
		r.maxAcked = max(r.maxAcked, seq)
	}
	sort.Slice(seqs, func(i, k int) bool { return seqs[i] < seqs[k] })
	for _, seq := range seqs {
		w := must[seq]
		m, err := str.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			r.lost = append(r.lost, seq)
			continue
		}
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		if m.Sequence != seq || m.Subject != w.subj || !bytes.Equal(m.Data, w.data) || !sameHeader(m.Header, w.hdr) {
			r.differs = append(r.differs, fmt.Sprintf("seq %d: got %s %v %d bytes, acked %s %v %d bytes",
				seq, m.Subject, m.Header, len(m.Data), w.subj, w.hdr, len(w.data)))
		}
	}
	// What is stored and was not acked (in flight at the cut) must be sent messages, each
	// once, in publish order: a torn or resurrected record would show up here.
	lastIdx := -1
	seen := map[int]bool{}
	for _, w := range must {
		seen[w.idx] = true
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		if _, ok := must[seq]; ok {
			lastIdx = max(lastIdx, must[seq].idx)
			continue
		}
		m, err := str.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		idx := pcIndex(m.Header, m.Data)
		w, ok := sent[idx]
		switch {
		case !ok || m.Subject != w.subj || !bytes.Equal(m.Data, w.data) || !sameHeader(m.Header, w.hdr):
			r.bogus = append(r.bogus, fmt.Sprintf("seq %d: %s, %d bytes: not a message sent", seq, m.Subject, len(m.Data)))
		case seen[idx]:
			r.bogus = append(r.bogus, fmt.Sprintf("seq %d: message %d stored twice", seq, idx))
		case idx < lastIdx:
			r.bogus = append(r.bogus, fmt.Sprintf("seq %d: message %d stored after message %d", seq, idx, lastIdx))
		}
		seen[idx] = true
		lastIdx = max(lastIdx, idx)
	}
	ack, err := js.Publish(ctx, want.Name+".next", []byte("after the restart"))
	if err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	r.nextSeq = ack.Sequence
	if ack.Sequence != info.State.LastSeq+1 {
		t.Fatalf("publish after the restart got seq %d; the stream's last was %d", ack.Sequence, info.State.LastSeq)
	}
	// The dedupe window survives too: an acked Nats-Msg-Id sent again is that sequence's duplicate.
	if r.ok() {
		for _, seq := range seqs {
			w := must[seq]
			if w.id == "" {
				continue
			}
			m := &nats.Msg{Subject: w.subj, Header: w.hdr, Data: w.data}
			ack, err := js.PublishMsg(ctx, m)
			if err != nil || !ack.Duplicate || ack.Sequence != seq {
				t.Fatalf("Nats-Msg-Id %s (seq %d) sent again after the restart: %+v, %v", w.id, seq, ack, err)
			}
			break
		}
	}
	return r
}

// pcIndex reads the index a message was sent with: its data's "i<n>;" prefix, or (for an
// empty payload) its Idx header.
func pcIndex(h nats.Header, data []byte) int {
	s := h.Get("Idx")
	if len(data) > 0 {
		if i := bytes.IndexByte(data, ';'); i > 1 && data[0] == 'i' {
			s = string(data[1:i])
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// pcMessage makes message idx of a burst: sizes from 0 to 16 KB (now and then up to 60 KB),
// a third with headers, half of those and a quarter of the rest with a Nats-Msg-Id.
func pcMessage(rng *rand.Rand, stream string, idx int) pcMsg {
	w := pcMsg{idx: idx, subj: fmt.Sprintf("%s.s%d", stream, rng.Intn(7))}
	n := rng.Intn(2 << 10)
	switch rng.Intn(20) {
	case 0:
		n = 0
	case 1, 2:
		n = rng.Intn(16 << 10)
	case 3:
		n = 32<<10 + rng.Intn(28<<10)
	}
	if n > 0 {
		w.data = fmt.Appendf(nil, "i%d;", idx)
		for len(w.data) < n {
			w.data = append(w.data, byte(rng.Intn(256)))
		}
	}
	if n == 0 || rng.Intn(3) == 0 {
		w.hdr = nats.Header{"Idx": {strconv.Itoa(idx)}, "Kind": {"crash", fmt.Sprintf("v%d", rng.Intn(100))}}
		if rng.Intn(2) == 0 {
			w.hdr["Trace-Id"] = []string{fmt.Sprintf("%016x", rng.Uint64())}
		}
	}
	if rng.Intn(4) == 0 || (w.hdr != nil && rng.Intn(2) == 0) {
		if w.hdr == nil {
			w.hdr = nats.Header{}
		}
		w.id = fmt.Sprintf("id-%d-%x", idx, rng.Uint32())
		w.hdr[jetstream.MsgIDHeader] = []string{w.id}
	}
	return w
}

// pcRound is one burst ended by a power cut.
type pcRound struct {
	cutAtSync int // cut in the middle of this sync (counted from the burst's start); 0: not
	cutAtAck  int // cut after this many acks; 0: not
	afterAll  bool
	clean     bool // nothing written and not synced survives the cut (no torn writes)
	n         int  // messages in the burst
}

// runPowerCut publishes a burst into the server on fs and cuts the power as r says. It returns
// the file system the cut left and the messages acknowledged before the cut.
func runPowerCut(t *testing.T, rng *rand.Rand, fs *powerfs.FS, s *Server, stream string, r pcRound,
	sent map[int]pcMsg, next *int) (*powerfs.FS, map[uint64]pcMsg) {
	t.Helper()
	var mu sync.Mutex // guards acked, byMsg and the cut, so a cut sees a consistent ack set
	acked := map[uint64]pcMsg{}
	byMsg := map[*nats.Msg]pcMsg{}
	var cut *powerfs.FS
	var snapshot map[uint64]pcMsg
	cutDone := make(chan struct{})
	cutRng := rand.New(rand.NewSource(rng.Int63()))
	if r.clean {
		cutRng = nil
	}
	doCutLocked := func() {
		if cut != nil {
			return
		}
		cut = fs.Cut(cutRng)
		snapshot = make(map[uint64]pcMsg, len(acked))
		for k, v := range acked {
			snapshot[k] = v
		}
		close(cutDone)
	}
	doCut := func() {
		mu.Lock()
		defer mu.Unlock()
		doCutLocked()
	}
	var ackErrs []string
	nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(512),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, a *jetstream.PubAck) {
			mu.Lock()
			defer mu.Unlock()
			w, ok := byMsg[m]
			switch {
			case !ok:
				ackErrs = append(ackErrs, "ack for a message not sent")
			case a.Stream != stream || a.Duplicate:
				ackErrs = append(ackErrs, fmt.Sprintf("message %d: ack %+v", w.idx, a))
			case acked[a.Sequence].subj != "":
				ackErrs = append(ackErrs, fmt.Sprintf("seq %d acked twice (messages %d and %d)", a.Sequence, acked[a.Sequence].idx, w.idx))
			}
			acked[a.Sequence] = w
			if r.cutAtAck > 0 && len(acked) == r.cutAtAck {
				doCutLocked()
			}
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			mu.Lock()
			defer mu.Unlock()
			if cut == nil {
				ackErrs = append(ackErrs, fmt.Sprintf("publish %s: %v", m.Subject, err))
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	if r.cutAtSync > 0 {
		var nsync int
		var smu sync.Mutex
		fs.SetOnSync(func() {
			smu.Lock()
			nsync++
			hit := nsync == r.cutAtSync
			smu.Unlock()
			if hit {
				doCut()
			}
		})
		defer fs.SetOnSync(nil)
	}
	for i := 0; i < r.n; i++ {
		select {
		case <-cutDone:
			i = r.n // the power is off: publishing on is pointless
			continue
		default:
		}
		w := pcMessage(rng, stream, *next)
		*next++
		sent[w.idx] = w
		m := &nats.Msg{Subject: w.subj, Header: w.hdr, Data: w.data}
		mu.Lock()
		byMsg[m] = w
		mu.Unlock()
		// nats.go gives up on a full window after 200 ms by default; under -race on a
		// loaded box the acks of 512 messages can take longer than that.
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(10*time.Second)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-cutDone:
	case <-time.After(20 * time.Second):
		t.Fatalf("burst not acknowledged in 20s (%d pending)", js.PublishAsyncPending())
	}
	doCut() // if no cut came yet (r.afterAll, or too few syncs or acks): here, all acked
	mu.Lock()
	defer mu.Unlock()
	if len(ackErrs) > 0 {
		t.Fatalf("acks: %v", ackErrs)
	}
	return cut, snapshot
}

// powerCutVariant runs rounds bursts over one stream, each ended by a power cut and followed
// by a restart on what it left, and returns each restart's findings. Unless lazy, any loss
// fails the test at once.
func powerCutVariant(t *testing.T, rng *rand.Rand, name string, compress bool, syncInterval time.Duration,
	rounds []pcRound, lazy bool) []*pcResult {
	t.Helper()
	storeDir := t.TempDir()
	fs := powerfs.New()
	cfg := pcStream(name, compress)
	must := map[uint64]pcMsg{}
	sent := map[int]pcMsg{}
	next := 0
	var results []*pcResult
	for i, r := range rounds {
		s := startPowerServer(t, fs, storeDir, syncInterval)
		if i == 0 {
			nc, err := nats.Connect(s.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = js.CreateStream(ctx, cfg)
			cancel()
			nc.Close()
			if err != nil {
				t.Fatalf("create stream: %v", err)
			}
		}
		cut, acked := runPowerCut(t, rng, fs, s, name, r, sent, &next)
		// The old server goes on writing into fs, which the cut copy shares nothing with; its
		// orderly shutdown (which syncs) cannot reach the new one either.
		s.Shutdown()
		var maxAcked uint64
		for seq, w := range acked {
			must[seq] = w
			maxAcked = max(maxAcked, seq)
		}
		fs = cut
		s = startPowerServer(t, fs, storeDir, syncInterval)
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		res := checkRecovered(t, js, cfg, must, sent)
		nc.Close()
		t.Logf("round %d (%+v): %d acked in the burst (max seq %d); %s", i, r, len(acked), maxAcked, res)
		if !lazy && !res.ok() {
			t.Fatalf("round %d (%+v): acknowledged messages did not survive the power cut: %s", i, r, res)
		}
		results = append(results, res)
		if lazy {
			// What was lost is gone: only what is there now has to survive the next cut.
			for _, seq := range res.lost {
				delete(must, seq)
			}
		}
		// The next publish in checkRecovered was acked after the restart; the next round cuts
		// power over it too.
		if res.nextSeq > 0 {
			must[res.nextSeq] = pcMsg{idx: -1, subj: name + ".next", data: []byte("after the restart")}
		}
		// Let the next round run on the restarted file system: start it again there.
		s.Shutdown()
	}
	if ents, err := os.ReadDir(storeDir); err != nil || len(ents) != 0 {
		t.Fatalf("the real store directory was written to (%v, %v): JetStream bypassed its FS", ents, err)
	}
	return results
}

// TestJetStreamPowerCut is the default (fsync before every ack): nothing acknowledged is ever
// lost, whatever moment the power is cut at.
func TestJetStreamPowerCut(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for _, v := range []struct {
		name     string
		compress bool
	}{{"PLAIN", false}, {"S2", true}} {
		t.Run(v.name, func(t *testing.T) {
			var rounds []pcRound
			for i := 0; i < 4; i++ {
				r := pcRound{n: 1500 + rng.Intn(1500)}
				if i%2 == 0 {
					r.cutAtSync = 1 + rng.Intn(80)
				} else {
					r.cutAtAck = 1 + rng.Intn(r.n)
				}
				rounds = append(rounds, r)
			}
			powerCutVariant(t, rng, v.name, v.compress, 0, rounds, false)
		})
	}
}

// TestJetStreamPowerCutLazy is the negative control: with sync_interval (nats-server's lazy
// mode, acks after write(2)) acked messages are lost when the power is cut, which the default
// mode's test would catch. One cut comes right after a burst is fully acknowledged and lets
// nothing survive that was not synced: the active block has been written since the last
// block roll (which syncs what it leaves) and never synced, so it must lose messages; the
// random cuts, where torn writes may save part of what was written, may.
func TestJetStreamPowerCutLazy(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	rounds := []pcRound{
		{n: 1000 + rng.Intn(1000), afterAll: true, clean: true},
		{n: 1500, cutAtAck: 500 + rng.Intn(1000)},
		{n: 1500, cutAtSync: 1 + rng.Intn(4)},
	}
	res := powerCutVariant(t, rng, "LAZY", false, time.Minute, rounds, true)
	if len(res[0].lost) == 0 {
		t.Fatalf("lazy mode lost nothing of a fully acked burst cut right after it: %s", res[0])
	}
	for i, r := range res {
		if len(r.differs) > 0 || len(r.bogus) > 0 {
			t.Fatalf("round %d: lazy mode may lose a tail, never serve other data: %s", i, r)
		}
	}
	var lost, reused int
	for _, r := range res {
		lost += len(r.lost)
		if r.nextSeq <= r.maxAcked {
			reused++
		}
	}
	t.Logf("lazy mode lost %d acked messages over %d cuts; %d restarts handed out an acked sequence again", lost, len(res), reused)
}

// TestJetStreamCrashDuringStreamUpdate crashes the server (a process crash: everything written
// survives) in the middle of a stream update, at every sync it makes, and restarts it on what
// is left: the stream must come back, with its old configuration or its new one, and its
// messages. A stream's meta.inf and meta.sum are renamed into place one after the other
// (js/meta.go writeMeta), so a crash between the two renames leaves the new meta.inf beside
// the old meta.sum, and recovery then skips the stream (checksum mismatch).
func TestJetStreamCrashDuringStreamUpdate(t *testing.T) {
	storeDir := t.TempDir()
	fs := powerfs.New()
	s := startPowerServer(t, fs, storeDir, 0)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := pcStream("UPD", false)
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := js.Publish(ctx, "UPD.x", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var crashes []*powerfs.FS
	fs.SetOnSync(func() {
		c := fs.Crash()
		mu.Lock()
		crashes = append(crashes, c)
		mu.Unlock()
	})
	upd := cfg
	upd.Description = "updated"
	uctx, ucancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = js.UpdateStream(uctx, upd)
	ucancel()
	fs.SetOnSync(nil)
	if err != nil {
		// (No Shutdown: it waits for the API worker, which a hung update never frees.)
		t.Fatalf("stream update: %v", err)
	}
	nc.Close()
	s.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	if len(crashes) < 3 {
		t.Fatalf("only %d syncs in a stream update", len(crashes))
	}
	for i, c := range crashes {
		s := startPowerServer(t, c, storeDir, 0)
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		str, err := js.Stream(ctx, "UPD")
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = str.Info(ctx)
		}
		nc.Close()
		s.Shutdown()
		if err != nil {
			t.Fatalf("crash at sync %d of %d in a stream update: the stream is gone after the restart: %v", i+1, len(crashes), err)
		}
		if d := info.Config.Description; (d != cfg.Description && d != upd.Description) || info.State.Msgs != 10 {
			t.Fatalf("crash at sync %d: description %q, %d msgs", i+1, d, info.State.Msgs)
		}
	}
}

// TestJetStreamPowerCutAfterStreamDelete cuts the power after a stream delete was answered:
// the stream must stay deleted. js/meta.go removeAll unlinks the stream's files but never
// syncs a directory, so the removals are not durable and the stream comes back.
func TestJetStreamPowerCutAfterStreamDelete(t *testing.T) {
	storeDir := t.TempDir()
	fs := powerfs.New()
	s := startPowerServer(t, fs, storeDir, 0)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, pcStream("DEL", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "DEL.x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "DEL"); err != nil {
		t.Fatal(err)
	}
	cut := fs.Cut(nil)
	nc.Close()
	s.Shutdown()
	s = startPowerServer(t, cut, storeDir, 0)
	defer s.Shutdown()
	nc, err = nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ = jetstream.New(nc)
	if str, err := js.Stream(ctx, "DEL"); err == nil {
		info, _ := str.Info(ctx)
		t.Fatalf("a deleted stream is back after a power cut: %+v", info.State)
	}
}

// pcConnect connects a client and its JetStream context to s.
func pcConnect(t *testing.T, s *Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	return nc, js
}

// TestJetStreamPowerCutAroundStreamCreate: a stream whose create was answered survives a
// power cut with its configuration; a cut in the middle of a create (at each of its syncs in
// turn) leaves the stream either whole or absent, and its name free for the next create (no
// unreadable leftover that recovery keeps and create refuses to overwrite).
func TestJetStreamPowerCutAroundStreamCreate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(s *Server) (*nats.Conn, jetstream.JetStream) { return pcConnect(t, s) }
	check := func(js jetstream.JetStream, name string) error {
		str, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		if si := str.CachedInfo(); si.Config.Description != "power cut "+name || si.Config.Subjects[0] != name+".>" {
			return fmt.Errorf("config %+v", si.Config)
		}
		if ack, err := js.Publish(ctx, name+".x", []byte("x")); err != nil || ack.Sequence != 1 {
			return fmt.Errorf("publish: %v %v", ack, err)
		}
		return nil
	}

	t.Run("after", func(t *testing.T) {
		storeDir, fs := t.TempDir(), powerfs.New()
		s := startPowerServer(t, fs, storeDir, 0)
		nc, js := connect(s)
		names := []string{"A", "B", "C", "D"}
		for _, n := range names {
			if _, err := js.CreateStream(ctx, pcStream(n, false)); err != nil {
				t.Fatal(err)
			}
		}
		cut := fs.Cut(rand.New(rand.NewSource(1)))
		nc.Close()
		s.Shutdown()
		s = startPowerServer(t, cut, storeDir, 0)
		defer s.Shutdown()
		nc, js = connect(s)
		defer nc.Close()
		for _, n := range names {
			if err := check(js, n); err != nil {
				t.Errorf("stream %s after the cut: %v", n, err)
			}
		}
	})

	t.Run("during", func(t *testing.T) {
		whole, absent := 0, 0
		for k := 1; k <= 8; k++ {
			storeDir, fs := t.TempDir(), powerfs.New()
			s := startPowerServer(t, fs, storeDir, 0)
			nc, js := connect(s)
			if _, err := js.CreateStream(ctx, pcStream("W", false)); err != nil { // warms the account's directories
				t.Fatal(err)
			}
			take := fs.CutAtSync(rand.New(rand.NewSource(int64(k))), k)
			if _, err := js.CreateStream(ctx, pcStream("N", false)); err != nil {
				t.Fatal(err)
			}
			cut, _ := take()
			nc.Close()
			s.Shutdown()
			s = startPowerServer(t, cut, storeDir, 0)
			nc, js = connect(s)
			if _, err := js.Stream(ctx, "N"); err == nil {
				whole++
				if err := check(js, "N"); err != nil {
					t.Errorf("cut at sync %d: stream N is back but not whole: %v", k, err)
				}
			} else {
				absent++
				if _, err := js.CreateStream(ctx, pcStream("N", false)); err != nil {
					t.Errorf("cut at sync %d: creating N again: %v", k, err)
				} else if err := check(js, "N"); err != nil {
					t.Errorf("cut at sync %d: N made again: %v", k, err)
				}
			}
			nc.Close()
			s.Shutdown()
		}
		t.Logf("cut during a create: %d times the stream was whole, %d times absent", whole, absent)
		if absent == 0 {
			t.Error("no cut came before the create's last sync: the test cut nothing that mattered")
		}
	})
}

// TestJetStreamPowerCutDeleteThenCreate: a stream deleted and at once made again under the
// same name (the delete's removal still running after its answer) never gets the old
// stream's messages or consumers back, whichever sync a power cut comes at; once the new
// stream's publish was answered and every sync done, it is there.
func TestJetStreamPowerCutDeleteThenCreate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for k := 1; ; k++ {
		if k > 80 {
			t.Fatal("a delete and create took over 80 syncs")
		}
		storeDir, fs := t.TempDir(), powerfs.New()
		s := startPowerServer(t, fs, storeDir, 0)
		nc, js := pcConnect(t, s)
		str, err := js.CreateStream(ctx, pcStream("D", false))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"old-1", "old-2"} {
			if _, err := js.Publish(ctx, "D.x", []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := str.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		take := fs.CutAtSync(rand.New(rand.NewSource(int64(k))), k)
		if err := js.DeleteStream(ctx, "D"); err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateStream(ctx, pcStream("D", false)); err != nil {
			t.Fatalf("create after delete: %v", err)
		}
		if ack, err := js.Publish(ctx, "D.x", []byte("new")); err != nil || ack.Sequence != 1 {
			t.Fatalf("publish to the new stream: %v %v", ack, err)
		}
		s.JetStream().WaitRemovals()
		cut, during := take()
		nc.Close()
		s.Shutdown()
		s = startPowerServer(t, cut, storeDir, 0)
		nc, js = pcConnect(t, s)
		// D is the old stream, whole (the cut came before the delete was durable), the new
		// one (its message or, before that was durable, none), or absent: never a mix.
		if str, err := js.Stream(ctx, "D"); err == nil {
			si, err := str.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var held []string
			for seq := si.State.FirstSeq; si.State.Msgs > 0 && seq <= si.State.LastSeq; seq++ {
				if m, err := str.GetMsg(ctx, seq); err == nil {
					held = append(held, string(m.Data))
				}
			}
			_, cerr := str.Consumer(ctx, "C")
			old := slices.Equal(held, []string{"old-1", "old-2"}) && cerr == nil
			fresh := (len(held) == 0 || slices.Equal(held, []string{"new"}) && si.State.FirstSeq == 1) && cerr != nil
			switch {
			case !old && !fresh:
				t.Errorf("cut at sync %d: stream D holds %q (consumer C: %v)", k, held, cerr)
			case !during && !slices.Equal(held, []string{"new"}):
				t.Errorf("cut after every sync: stream D holds %q", held)
			}
		} else if !during {
			t.Errorf("cut after every sync: stream D is gone: %v", err)
		}
		nc.Close()
		s.Shutdown()
		if !during {
			t.Logf("%d syncs from the delete to the publish's", k-1)
			break
		}
	}
}

// TestJetStreamPowerCutDuringStreamDelete cuts the power in the middle of a stream delete (at
// each of its syncs in turn), the stream holding messages and a durable consumer: after the
// restart the stream is either whole, with its message and consumer, or gone, and its name is
// free for the next create. A partly removed directory (its metadata gone, its blocks or its
// consumers' directory still there) must not be kept as an unreadable stream that blocks the
// name.
func TestJetStreamPowerCutDuringStreamDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	connect := func(s *Server) (*nats.Conn, jetstream.JetStream) { return pcConnect(t, s) }
	whole, gone := 0, 0
	for k := 1; ; k++ {
		if k > 60 {
			t.Fatal("a delete took over 60 syncs")
		}
		storeDir, fs := t.TempDir(), powerfs.New()
		s := startPowerServer(t, fs, storeDir, 0)
		nc, js := connect(s)
		str, err := js.CreateStream(ctx, pcStream("D", false))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "D.x", []byte("kept")); err != nil {
			t.Fatal(err)
		}
		if _, err := str.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		take := fs.CutAtSync(rand.New(rand.NewSource(int64(k))), k)
		if err := js.DeleteStream(ctx, "D"); err != nil {
			t.Fatal(err)
		}
		s.JetStream().WaitRemovals() // what the delete leaves for after its answer
		cut, during := take()
		nc.Close()
		s.Shutdown()
		s = startPowerServer(t, cut, storeDir, 0)
		nc, js = connect(s)
		if str, err := js.Stream(ctx, "D"); err == nil {
			whole++
			if !during {
				t.Errorf("cut after the delete's syncs (k=%d): the stream is back", k)
			}
			if m, err := str.GetMsg(ctx, 1); err != nil || string(m.Data) != "kept" {
				t.Errorf("cut at sync %d: stream D is back but not whole: %v", k, err)
			}
			if _, err := str.Consumer(ctx, "C"); err != nil {
				t.Errorf("cut at sync %d: stream D is back without its consumer: %v", k, err)
			}
		} else {
			gone++
			if _, err := js.CreateStream(ctx, pcStream("D", false)); err != nil {
				t.Errorf("cut at sync %d: creating D again: %v", k, err)
			} else if ack, err := js.Publish(ctx, "D.x", []byte("new")); err != nil || ack.Sequence != 1 {
				t.Errorf("cut at sync %d: D made again: %v %v", k, ack, err)
			}
		}
		nc.Close()
		s.Shutdown()
		if !during {
			break // past the delete's last sync
		}
	}
	t.Logf("cut during a delete: %d times the stream was whole, %d times gone", whole, gone)
	if whole == 0 || gone == 0 {
		t.Errorf("the cuts fell only %s the delete's syncs: the test checked nothing in between",
			map[bool]string{true: "before", false: "after"}[gone == 0])
	}
}
