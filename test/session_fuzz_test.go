package test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The differential session fuzzer: each session (see session_gen_test.go) is played against
// natsd and nats-server, both in-process with the same limits, its bytes cut into random
// writes with small pauses; after every step each open connection is sent a PING and read up
// to its PONG (or to EOF), so every answer, including messages published by the other
// connections, has a place in that connection's transcript that does not depend on timing.
// The normalized transcripts must be the same.
//
// Normalization:
//   - INFO lines: keys in order, values of server_id, server_name, port, client_id, nonce,
//     xkey, git_commit, go and connect_urls replaced;
//   - server PINGs are dropped (the ping interval is long; a slow run may still see one);
//   - deliveries to sids starting with Q (members of the shared queue group "qg") leave the
//     connection's transcript and are compared per step across connections as a multiset
//     with the sid replaced and an HMSG in the form a member without headers gets: which
//     member gets a message is each server's random choice;
//   - the sid of a no-responders 503 whose reply subject two or more of the requester's
//     subscriptions matched (plan.ambiguous): nats-server's choice then depends on its
//     sublist's map order and cache history;
//   - consecutive MSG/HMSG frames that differ only in their sid (one publish matching several
//     subscriptions of the connection) are sorted: the order among overlapping subscriptions
//     is not pinned (see TestWireOverlappingSubs);
//   - consecutive copies of -ERR 'Invalid Publish Subject' count once: nats-server sends it a
//     second time when a pedantic publish's body arrives in a later read than its control line
//     (its parser runs the PUB arguments again for the split buffer), so how many arrive
//     depends on the TCP split.
// Everything else is compared byte for byte, tagged with the step during which it arrived;
// a close shows as <EOF> at its step, and a connection that did not answer as <timeout>.
// Sessions that reach a documented or split-dependent difference are not played at all (see
// connModel.feed). The tests skip unless NATSD_TARGETS selects both servers: there is no
// recorded expectation, nats-server's answer to the same bytes is the expectation.

// fuzzServer is one server a session runs against.
type fuzzServer struct {
	name  string
	addr  string
	quiet func() bool // no client connections, no subscriptions left
	stop  func()
}

func startFuzzServer(t testing.TB, name string, cfg Config) *fuzzServer {
	t.Helper()
	switch name {
	case "nats-server":
		s := newNatsServer(t, cfg)
		// the global account holds a few internal subscriptions of nats-server's own
		internal := s.GlobalAccount().TotalSubs()
		return &fuzzServer{name: name, addr: hostPort(t, s.ClientURL()),
			quiet: func() bool { return s.NumClients() == 0 && s.GlobalAccount().TotalSubs() <= internal },
			stop:  func() { s.Shutdown(); s.WaitForShutdown() }}
	default:
		s := newNatsd(t, cfg)
		// the system account's internal subscriptions ($SYS requests) are counted too
		internal := s.Stats().Subscriptions
		return &fuzzServer{name: name, addr: hostPort(t, s.ClientURL()),
			quiet: func() bool { return s.NumClients() == 0 && s.Stats().Subscriptions <= internal },
			stop:  s.Shutdown}
	}
}

// serverPair holds one natsd and one nats-server per profile, started on first use.
type serverPair struct {
	t       testing.TB
	mu      sync.Mutex
	servers map[int][2]*fuzzServer
}

func newServerPair(t testing.TB) *serverPair {
	p := &serverPair{t: t, servers: map[int][2]*fuzzServer{}}
	t.Cleanup(func() {
		for _, ss := range p.servers {
			for _, s := range ss {
				s.stop()
			}
		}
	})
	return p
}

func (p *serverPair) get(prof int) [2]*fuzzServer {
	p.mu.Lock()
	defer p.mu.Unlock()
	ss, ok := p.servers[prof]
	if !ok {
		cfg := fuzzProfiles[prof].cfg
		ss = [2]*fuzzServer{startFuzzServer(p.t, "nats-server", cfg), startFuzzServer(p.t, "natsd", cfg)}
		p.servers[prof] = ss
	}
	return ss
}

// needBothTargets skips the differential tests unless NATSD_TARGETS selects both servers:
// a session's answer is only judged against nats-server's answer to the same session.
func needBothTargets(t testing.TB) {
	t.Helper()
	have := map[string]bool{}
	for _, tg := range selectedTargets() {
		have[tg.name] = true
	}
	if !have["natsd"] || !have["nats-server"] {
		t.Skip("the session fuzzer compares natsd with nats-server: NATSD_TARGETS selects only one")
	}
}

const (
	fuzzWait  = 1500 * time.Millisecond // for an expected answer
	fuzzGreet = 3 * time.Second
	// fuzzWaitLost is the wait on a connection that has already failed to answer as the model
	// expected: its later answers are compared as they come, without costing a full wait each.
	fuzzWaitLost = 50 * time.Millisecond
)

// frame is one server frame (or <EOF>, <timeout>) and the step during which it arrived.
type frame struct {
	step int
	text string
}

// fuzzConn reads one client connection of a session run.
type fuzzConn struct {
	c      net.Conn
	mu     sync.Mutex
	wake   chan struct{}
	raw    []byte
	frames []frame
	step   int
	lost   bool // a wait timed out: the model and the server disagree about this connection
	greet  bool
	pongs  int
	infos  int
	eof    bool
}

func (fc *fuzzConn) read() {
	buf := make([]byte, 32<<10)
	for {
		n, err := fc.c.Read(buf)
		fc.mu.Lock()
		fc.raw = append(fc.raw, buf[:n]...)
		fc.frameLocked()
		if err != nil {
			if len(fc.raw) > 0 {
				fc.frames = append(fc.frames, frame{fc.step, string(fc.raw)})
				fc.raw = nil
			}
			fc.eof = true
			fc.frames = append(fc.frames, frame{fc.step, "<EOF>"})
		}
		fc.mu.Unlock()
		select {
		case fc.wake <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// frameLocked cuts whole frames off raw: a line, plus its body for MSG and HMSG.
func (fc *fuzzConn) frameLocked() {
	for {
		i := strings.IndexByte(string(fc.raw), '\n')
		if i < 0 {
			return
		}
		n := i + 1
		line := string(fc.raw[:n])
		if strings.HasPrefix(line, "MSG ") || strings.HasPrefix(line, "HMSG ") {
			f := strings.Split(strings.TrimRight(line, "\r\n"), " ")
			if size, err := strconv.Atoi(f[len(f)-1]); err == nil && size >= 0 {
				if len(fc.raw) < n+size+2 {
					return
				}
				n += size + 2
			}
		}
		text := string(fc.raw[:n])
		fc.raw = fc.raw[n:]
		switch {
		case !fc.greet:
			fc.greet = true
		case text == "PONG\r\n":
			fc.pongs++
		case strings.HasPrefix(text, "INFO "):
			fc.infos++
		}
		fc.frames = append(fc.frames, frame{fc.step, text})
	}
}

// wait waits until cond holds (under fc.mu), EOF, or d passes; it reports whether cond held
// or the connection reached EOF.
func (fc *fuzzConn) wait(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		fc.mu.Lock()
		ok, eof := cond(), fc.eof
		fc.mu.Unlock()
		if ok || eof {
			return true
		}
		select {
		case <-fc.wake:
		case <-deadline.C:
			return false
		}
	}
}

func (fc *fuzzConn) setStep(i int) {
	fc.mu.Lock()
	fc.step = i
	fc.mu.Unlock()
}

func (fc *fuzzConn) closed() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.eof
}

func (fc *fuzzConn) note(step int, text string) {
	fc.mu.Lock()
	fc.frames = append(fc.frames, frame{step, text})
	fc.mu.Unlock()
}

// send writes b cut into random writes with small pauses; write errors (the server closed)
// are left to the reader to see.
func (fc *fuzzConn) send(r *rand.Rand, b string) {
	write := func(p string) {
		_ = fc.c.SetWriteDeadline(time.Now().Add(fuzzWait))
		_, _ = io.WriteString(fc.c, p)
		switch k := r.Intn(10); {
		case k < 7:
		case k < 9:
			time.Sleep(100 * time.Microsecond)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	switch mode := r.Intn(10); {
	case mode < 4:
		write(b)
	case mode < 7:
		for len(b) > 0 {
			n := min(len(b), 1+r.Intn(64))
			write(b[:n])
			b = b[n:]
		}
	case mode < 8:
		// byte by byte for a while, then the rest at once
		for k := 1 + r.Intn(64); k > 0 && len(b) > 1; k-- {
			write(b[:1])
			b = b[1:]
		}
		write(b)
	default:
		cuts := []int{0, len(b)}
		for k := 1 + r.Intn(3); k > 0 && len(b) > 1; k-- {
			cuts = append(cuts, 1+r.Intn(len(b)-1))
		}
		sort.Ints(cuts)
		for i := 1; i < len(cuts); i++ {
			if cuts[i] > cuts[i-1] {
				write(b[cuts[i-1]:cuts[i]])
			}
		}
	}
}

// transcript is what one server answered to a session: frames per connection.
type transcript struct {
	server string
	conns  [][]frame
	err    string // the run itself failed (dial, greeting)
}

// runSession plays s against srv.
func runSession(s *session, pl *plan, srv *fuzzServer) *transcript {
	tr := &transcript{server: srv.name}
	conns := make([]*fuzzConn, s.conns)
	defer func() {
		// what was read before the client side closes (its own close is no answer)
		for i, fc := range conns {
			if fc == nil {
				continue
			}
			fc.mu.Lock()
			tr.conns[i] = append([]frame(nil), fc.frames...)
			fc.mu.Unlock()
			fc.c.Close()
		}
		// The next session on this server must not meet this one's subscriptions.
		deadline := time.Now().Add(3 * time.Second)
		for !srv.quiet() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}()
	tr.conns = make([][]frame, s.conns)
	for i := range conns {
		c, err := net.DialTimeout("tcp", srv.addr, fuzzGreet)
		if err != nil {
			tr.err = "dial: " + err.Error()
			return tr
		}
		fc := &fuzzConn{c: c, wake: make(chan struct{}, 1)}
		conns[i] = fc
		go fc.read()
		if !fc.wait(fuzzGreet, func() bool { return fc.greet }) {
			tr.err = "no INFO greeting"
			return tr
		}
	}
	for i, st := range s.steps {
		for _, fc := range conns {
			fc.setStep(i)
		}
		r := rand.New(rand.NewSource(int64(s.splitSeed)<<16 | int64(i)))
		fc := conns[st.conn]
		if fc.closed() {
			continue
		}
		// what has arrived so far; the step's answers come on top
		base := make([][2]int, len(conns))
		for c, o := range conns {
			o.mu.Lock()
			base[c] = [2]int{o.pongs, o.infos}
			o.mu.Unlock()
		}
		await := func(c int) {
			fc, e := conns[c], pl.exp[i][c]
			d := fuzzWait
			if fc.lost {
				d = fuzzWaitLost
			}
			ok := fc.wait(d, func() bool {
				if e.closed {
					return false // only EOF will do
				}
				return fc.pongs >= base[c][0]+e.pongs && fc.infos >= base[c][1]+e.infos
			})
			if !ok && !fc.lost {
				fc.lost = true
				fc.note(i, "<timeout>")
			}
		}
		fc.send(r, st.data()+"PING\r\n")
		await(st.conn)
		var others []int
		for c, o := range conns {
			if c != st.conn && !o.closed() {
				o.send(r, "PING\r\n")
				others = append(others, c)
			}
		}
		for _, c := range others {
			await(c)
		}
	}
	return tr
}

// normalized is a transcript in the form the servers' answers are compared in.
type normalized struct {
	conns  [][]string
	queues []string // deliveries to the shared queue group: "step: frame", sorted
	err    string
}

var volatileInfo = map[string]bool{"server_id": true, "server_name": true, "port": true, "client_id": true,
	"nonce": true, "xkey": true, "git_commit": true, "go": true, "connect_urls": true, "ws_connect_urls": true}

func normalizeInfo(text string) string {
	js := strings.TrimSuffix(strings.TrimPrefix(text, "INFO "), " \r\n")
	dec := json.NewDecoder(strings.NewReader(js))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return text
	}
	var b strings.Builder
	b.WriteString("INFO {")
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return text
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return text
		}
		key, _ := k.(string)
		if volatileInfo[key] {
			v = json.RawMessage(`"*"`)
		}
		fmt.Fprintf(&b, "%q:%s,", key, v)
	}
	b.WriteString("}\r\n")
	return b.String()
}

// msgFields splits a MSG/HMSG frame into its control line's fields and the rest; ok is false
// for anything else.
func msgFields(text string) (f []string, rest string, ok bool) {
	if !strings.HasPrefix(text, "MSG ") && !strings.HasPrefix(text, "HMSG ") {
		return nil, "", false
	}
	line, rest, _ := strings.Cut(text, "\n")
	f = strings.Split(strings.TrimRight(line, "\r"), " ")
	if len(f) < 4 {
		return nil, "", false
	}
	return f, rest, true
}

// withoutSid is a MSG/HMSG frame with its sid (the third field) replaced.
func withoutSid(text string) (string, bool) {
	f, rest, ok := msgFields(text)
	if !ok {
		return "", false
	}
	f[2] = "Q"
	return strings.Join(f, " ") + "\r\n" + rest, true
}

// queueKey is a delivery to the shared queue group as the comparator counts it: sid replaced,
// and an HMSG in the form a member without header support gets (the members' connections
// differ in that, and which member gets a message is the server's choice).
func queueKey(text string) string {
	f, rest, _ := msgFields(text)
	f[2] = "Q"
	if f[0] == "HMSG" && len(f) >= 5 {
		hdr, err1 := strconv.Atoi(f[len(f)-2])
		total, err2 := strconv.Atoi(f[len(f)-1])
		if err1 == nil && err2 == nil && hdr <= len(rest) && hdr <= total {
			f = append(append([]string{"MSG"}, f[1:len(f)-2]...), strconv.Itoa(total-hdr))
			rest = rest[hdr:]
		}
	}
	return strings.Join(f, " ") + "\r\n" + rest
}

func normalize(tr *transcript, pl *plan) *normalized {
	n := &normalized{err: tr.err}
	for c, frames := range tr.conns {
		var out []frame
		for _, fr := range frames {
			switch {
			case fr.text == "PING\r\n":
				continue
			case strings.HasPrefix(fr.text, "INFO "):
				fr.text = normalizeInfo(fr.text)
			}
			if f, rest, ok := msgFields(fr.text); ok && strings.HasPrefix(rest, "NATS/1.0 503\r\n") && pl.ambiguous[c][f[1]] {
				f[2] = "*"
				fr.text = strings.Join(f, " ") + "\r\n" + rest
			}
			if f, _, ok := msgFields(fr.text); ok && strings.HasPrefix(f[2], "Q") {
				n.queues = append(n.queues, fmt.Sprintf("%d: %q", fr.step, queueKey(fr.text)))
				continue
			}
			if len(out) > 0 && fr.text == errLine("Invalid Publish Subject") && out[len(out)-1].text == fr.text {
				continue
			}
			out = append(out, fr)
		}
		// sort runs of deliveries of one message to several sids
		for i := 0; i < len(out); {
			key, ok := withoutSid(out[i].text)
			j := i + 1
			for ok && j < len(out) {
				if k2, ok2 := withoutSid(out[j].text); !ok2 || k2 != key || out[j].step != out[i].step {
					break
				}
				j++
			}
			sort.Slice(out[i:j], func(a, b int) bool { return out[i+a].text < out[i+b].text })
			i = j
		}
		lines := make([]string, len(out))
		for i, fr := range out {
			lines[i] = fmt.Sprintf("%d: %q", fr.step, fr.text)
		}
		n.conns = append(n.conns, lines)
	}
	sort.Strings(n.queues)
	return n
}

// diff describes where two normalized transcripts part, or is "" when they agree.
func diff(a, b *normalized, an, bn string) string {
	if a.err != b.err {
		return fmt.Sprintf("run error: %s %q, %s %q", an, a.err, bn, b.err)
	}
	var out strings.Builder
	for c := range a.conns {
		x, y := a.conns[c], b.conns[c]
		if strings.Join(x, "\n") == strings.Join(y, "\n") {
			continue
		}
		k := 0
		for k < len(x) && k < len(y) && x[k] == y[k] {
			k++
		}
		fmt.Fprintf(&out, "conn %d differs at frame %d:\n", c, k)
		for _, side := range []struct {
			name  string
			lines []string
		}{{an, x}, {bn, y}} {
			fmt.Fprintf(&out, "  %s:\n", side.name)
			for i := max(0, k-2); i < len(side.lines) && i < k+6; i++ {
				fmt.Fprintf(&out, "    %s\n", side.lines[i])
			}
		}
	}
	if strings.Join(a.queues, "\n") != strings.Join(b.queues, "\n") {
		fmt.Fprintf(&out, "queue group deliveries differ:\n  %s: %v\n  %s: %v\n", an, a.queues, bn, b.queues)
	}
	return out.String()
}

// describe prints a session so a difference can be replayed by hand.
func (s *session) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "profile %s, %d connections, split seed %d\n", fuzzProfiles[s.profile].name, s.conns, s.splitSeed)
	for i, st := range s.steps {
		fmt.Fprintf(&b, "  step %d conn %d: %q\n", i, st.conn, trunc(st.data()))
	}
	return b.String()
}

// compareSession runs s on both servers at once and returns the difference ("" if none).
func compareSession(s *session, pair [2]*fuzzServer) (string, error) {
	pl, err := s.prepare()
	if err != nil {
		return "", err
	}
	var trs [2]*transcript
	var wg sync.WaitGroup
	for i := range pair {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trs[i] = runSession(s, pl, pair[i])
		}()
	}
	wg.Wait()
	if os.Getenv("NATSD_FUZZ_DUMP") != "" {
		for _, tr := range trs {
			fmt.Printf("=== %s\n", tr.server)
			for c, frames := range tr.conns {
				for _, fr := range frames {
					fmt.Printf("  conn %d step %d: %q\n", c, fr.step, fr.text)
				}
			}
		}
	}
	return diff(normalize(trs[0], pl), normalize(trs[1], pl), pair[0].name, pair[1].name), nil
}

// confirmDiff runs s twice more: a difference that does not come back each time is timing.
func confirmDiff(s *session, pair [2]*fuzzServer) string {
	d := ""
	for range 2 {
		d2, _ := compareSession(s, pair)
		if d2 == "" {
			return ""
		}
		d = d2
	}
	return d
}

// shrink removes steps and ops from s while the difference stays.
func shrink(s *session, pair [2]*fuzzServer) *session {
	cur := s
	try := func(c *session) bool {
		if _, err := c.prepare(); err != nil || len(c.steps) == 0 {
			return false
		}
		if confirmDiff(c, pair) != "" {
			cur = c
			return true
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(cur.steps); i++ {
			c := cur.clone()
			c.steps = append(c.steps[:i], c.steps[i+1:]...)
			if try(c) {
				changed = true
				i--
			}
		}
		for i := 0; i < len(cur.steps); i++ {
			for j := 0; j < len(cur.steps[i].ops) && len(cur.steps[i].ops) > 1; j++ {
				c := cur.clone()
				c.steps[i].ops = append(c.steps[i].ops[:j], c.steps[i].ops[j+1:]...)
				if try(c) {
					changed = true
					j--
				}
			}
		}
	}
	return cur
}

func (s *session) clone() *session {
	c := *s
	c.steps = make([]step, len(s.steps))
	for i, st := range s.steps {
		c.steps[i] = step{conn: st.conn, ops: append([]string(nil), st.ops...)}
	}
	return &c
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestSessionFuzz plays NATSD_FUZZ_SESSIONS (default 600, about 5 s under -race on 2 cores)
// generated sessions, from seed NATSD_FUZZ_SEED (default 1) on, NATSD_FUZZ_WORKERS (default
// 3) at a time, each worker with its own servers, against both servers and expects the same
// answers. NATSD_FUZZ_SHRINK=1 minimises each difference before reporting it;
// NATSD_FUZZ_DUMP=1 prints every frame each server sent.
func TestSessionFuzz(t *testing.T) {
	needBothTargets(t)
	n := envInt("NATSD_FUZZ_SESSIONS", 600)
	base := int64(envInt("NATSD_FUZZ_SEED", 1))
	workers := envInt("NATSD_FUZZ_WORKERS", 3)
	doShrink := os.Getenv("NATSD_FUZZ_SHRINK") != ""
	seeds := make(chan int64)
	var mu sync.Mutex
	failed := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		pairs := newServerPair(t)
		for i := range fuzzProfiles {
			pairs.get(i) // started here: a start-up failure must fail from the test's goroutine
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				s := generateSession(seed)
				pair := pairs.get(s.profile)
				d, err := compareSession(s, pair)
				if err != nil {
					t.Errorf("seed %d: %v", seed, err)
					continue
				}
				if d == "" {
					continue
				}
				if d = confirmDiff(s, pair); d == "" {
					t.Logf("seed %d: a difference that did not come back (timing)", seed)
					continue
				}
				if doShrink {
					s = shrink(s, pair)
					if d2 := confirmDiff(s, pair); d2 != "" {
						d = d2
					}
				}
				mu.Lock()
				failed++
				if failed <= 10 {
					t.Errorf("seed %d (NATSD_FUZZ_SEED=%d NATSD_FUZZ_SESSIONS=1): natsd and nats-server differ\n%s%s",
						seed, seed, s.describe(), d)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range int64(n) {
		seeds <- base + i
	}
	close(seeds)
	wg.Wait()
	if failed > 10 {
		t.Errorf("%d sessions of %d differ (first 10 shown)", failed, n)
	}
	t.Logf("%d sessions in %v", n, time.Since(start))
}

// FuzzSession decodes each input into a session (see decodeSession: profile, connections,
// split seed, then steps of raw bytes separated by 0xFE) and expects both servers to answer
// it alike. Seeds are generated sessions. go test -fuzz FuzzSession ./test/
func FuzzSession(f *testing.F) {
	needBothTargets(f)
	for seed := int64(1); seed <= 24; seed++ {
		f.Add(generateSession(seed * 7919).encode())
	}
	pairs := newServerPair(f)
	for i := range fuzzProfiles {
		pairs.get(i)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, ok := decodeSession(data)
		if !ok {
			return
		}
		pair := pairs.get(s.profile)
		start := time.Now()
		d, err := compareSession(s, pair)
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("the session took %v\n%s", took, s.describe())
		}
		if err != nil || d == "" {
			return
		}
		if d = confirmDiff(s, pair); d != "" {
			t.Fatalf("natsd and nats-server differ\n%s%s", s.describe(), d)
		}
	})
}

// TestSessionNormalize pins what the comparator treats as the same answer.
func TestSessionNormalize(t *testing.T) {
	h := hdr("Foo: bar")
	for _, tc := range []struct{ a, b string }{
		{hmsg("foo", "Q3", "", h, "payload"), msg("foo", "Q1", "", "payload")},
		{hmsg("foo", "Q3", "r", h, "payload"), msg("foo", "Q2", "r", "payload")},
	} {
		if ka, kb := queueKey(tc.a), queueKey(tc.b); ka != kb {
			t.Errorf("queue deliveries %q and %q count apart: %q, %q", tc.a, tc.b, ka, kb)
		}
	}
	pl := &plan{ambiguous: []map[string]bool{{"_INBOX.a": true}}}
	tr := func(frames ...string) *transcript {
		var fs []frame
		for _, f := range frames {
			fs = append(fs, frame{1, f})
		}
		return &transcript{conns: [][]frame{fs}}
	}
	nr := "NATS/1.0 503\r\n\r\n"
	a := normalize(tr(`INFO {"server_id":"A","port":1,"max_payload":5} `+"\r\n", msg("foo", "1", "", "x"), msg("foo", "2", "", "x"),
		errLine("Invalid Publish Subject"), errLine("Invalid Publish Subject"), "PING\r\n", hmsg("_INBOX.a", "4", "", nr, "")), pl)
	b := normalize(tr(`INFO {"server_id":"B","port":2,"max_payload":5} `+"\r\n", msg("foo", "2", "", "x"), msg("foo", "1", "", "x"),
		errLine("Invalid Publish Subject"), hmsg("_INBOX.a", "6", "", nr, "")), pl)
	if d := diff(a, b, "a", "b"); d != "" {
		t.Errorf("normalised transcripts differ:\n%s", d)
	}
	c := normalize(tr(`INFO {"server_id":"B","port":2,"max_payload":6} `+"\r\n"), pl)
	if d := diff(a, c, "a", "c"); d == "" {
		t.Error("a different max_payload went unnoticed")
	}
}
