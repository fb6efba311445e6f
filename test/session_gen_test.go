package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/parser"
)

// The session fuzzer's input side: profiles (server limits), random sessions (several
// connections, each sent whole protocol ops, valid and malformed), their byte encoding for
// FuzzSession, and a model of how a server frames each connection's bytes, which tells the
// runner what to wait for after each step.

// profile is the set of limits both servers run a session with. The ping interval is long so
// that no server PING lands in a session (the comparator drops any that does).
type profile struct {
	name string
	cfg  Config
}

var fuzzProfiles = []profile{
	{"default", Config{PingInterval: 10 * time.Minute}},
	{"small", Config{MaxPayload: 64, MaxControlLine: 256, PingInterval: 10 * time.Minute}},
	{"maxsubs", Config{MaxPayload: 1024, MaxSubs: 3, PingInterval: 10 * time.Minute}},
}

func (p profile) maxPayload() int {
	if p.cfg.MaxPayload > 0 {
		return int(p.cfg.MaxPayload)
	}
	return parser.DefaultMaxPayload
}

func (p profile) maxControlLine() int {
	if p.cfg.MaxControlLine > 0 {
		return int(p.cfg.MaxControlLine)
	}
	return parser.DefaultMaxControlLine
}

// step is what one connection is sent at once: whole ops (each ending in LF), then, by the
// runner, a PING on it and on every other open connection (the quiescence point).
type step struct {
	conn int
	ops  []string
}

func (s step) data() string { return strings.Join(s.ops, "") }

// session is one fuzz case. splitSeed drives where the runner cuts each step into writes
// and how long it pauses between them.
type session struct {
	profile   int
	conns     int
	splitSeed uint8
	steps     []step
}

// stepSep separates steps in the encoding; the generator never puts it in an op.
const stepSep = 0xFE

// maxSteps and maxSessionBytes bound what a fuzz input may ask for.
const (
	maxSteps        = 40
	maxSessionBytes = 64 << 10
)

// encode is the FuzzSession input for s: profile, connections, split seed, then each step as
// its connection's index and bytes, steps separated by stepSep.
func (s *session) encode() []byte {
	b := []byte{byte(s.profile), byte(s.conns - 1), s.splitSeed}
	for i, st := range s.steps {
		if i > 0 {
			b = append(b, stepSep)
		}
		b = append(b, byte(st.conn))
		b = append(b, st.data()...)
	}
	return b
}

// decodeSession turns any fuzz input into a session (each step one op, the whole of its
// bytes), then normalises it like every generated session (see prepare).
func decodeSession(data []byte) (*session, bool) {
	if len(data) < 3 || len(data) > maxSessionBytes {
		return nil, false
	}
	s := &session{profile: int(data[0]) % len(fuzzProfiles), conns: 1 + int(data[1])%3, splitSeed: data[2]}
	for _, part := range bytes.Split(data[3:], []byte{stepSep}) {
		if len(part) < 2 {
			continue
		}
		s.steps = append(s.steps, step{conn: int(part[0]) % s.conns, ops: []string{string(part[1:])}})
		if len(s.steps) == maxSteps {
			break
		}
	}
	if len(s.steps) == 0 {
		return nil, false
	}
	if _, err := s.prepare(); err != nil {
		return nil, false
	}
	return s, true
}

// expectation is what a connection must answer to one step's bytes and quiescence PING:
// this many more PONGs and async INFOs, or a close.
type expectation struct {
	pongs, infos int
	closed       bool
}

// errIntentional marks input that reaches a behaviour natsd documents as different from
// nats-server's, and errSplitDependent input whose handling by nats-server depends on how
// TCP cuts it; such sessions are not compared (see connModel.feed).
var (
	errIntentional    = errors.New("input reaches an intentional difference")
	errSplitDependent = errors.New("nats-server's answer depends on the TCP split")
	// errFormFeedSub: natsd refuses a form feed in a SUB subject or queue name with
	// Invalid Subject (its sublist holds no whitespace, what nats-server's IsValidSubject
	// demands of a subject); nats-server's sublist Insert checks only for empty tokens and
	// '>' not last, so it subscribes. A known difference, not fixed.
	errFormFeedSub = errors.New("form feed in a SUB")
	// errNatsServerRace: under the race detector, a SUB before the connection's first
	// CONNECT is not played. nats-server's processConnect writes the client's headers flag
	// (client.go:2406) while another connection's readLoop, delivering through a match result
	// it cached before that CONNECT, reads it in msgHeader (client.go:3753) with no lock
	// between them: a data race in nats-server 2.15.2 that fails the run.
	errNatsServerRace = errors.New("SUB before CONNECT races in nats-server")
)

// prepare makes the session runnable and returns, per step and connection, what to wait for.
// Each step must end with LF, so the quiescence PING starts a line of its own; a step that
// leaves a message body unfinished gets filler bytes and CRLF appended, so the PING is not
// swallowed by a body that waits for more. Both come from a model of the servers' framing
// (natsd's parser, nats-server's CONNECT checks): where a server frames differently, the
// runner waits in vain, notes the timeout, and the transcripts show the difference.
func (s *session) prepare() (*plan, error) {
	prof := fuzzProfiles[s.profile]
	models := make([]*connModel, s.conns)
	for i := range models {
		models[i] = newConnModel(prof)
	}
	exp := make([][]expectation, len(s.steps))
	total := 0
	// sync feeds the quiescence PING; a connection the model holds closed is expected to
	// answer it anyway should the runner find it open (a difference, which it then shows).
	sync := func(m *connModel, data string) (expectation, error) {
		if m.closed {
			return expectation{pongs: 1}, nil
		}
		p0, i0 := m.pongs, m.infos
		if err := m.feed([]byte(data + "PING\r\n")); err != nil {
			return expectation{}, err
		}
		return expectation{pongs: m.pongs - p0, infos: m.infos - i0, closed: m.closed}, nil
	}
	for i := range s.steps {
		st := &s.steps[i]
		m := models[st.conn]
		if d := st.data(); !strings.HasSuffix(d, "\n") {
			st.ops = append(st.ops, "\r\n")
		}
		if !m.closed {
			// where the body of the step's last message is short, pad it
			probe := *m
			probe.buf = append([]byte(nil), m.buf...)
			if err := probe.feed([]byte(st.data())); err != nil {
				return nil, err
			}
			if pad, ok := probe.padding(); !ok {
				return nil, errors.New("body too large to pad")
			} else if pad != "" {
				st.ops = append(st.ops, pad)
			}
		}
		total += len(st.data())
		exp[i] = make([]expectation, s.conns)
		for c, cm := range models {
			data := ""
			if c == st.conn {
				data = st.data()
			}
			e, err := sync(cm, data)
			if err != nil {
				return nil, err
			}
			exp[i][c] = e
		}
	}
	if total > maxSessionBytes {
		return nil, errors.New("session too large")
	}
	pl := &plan{exp: exp}
	for _, m := range models {
		pl.ambiguous = append(pl.ambiguous, m.ambiguous)
	}
	return pl, nil
}

// plan is what the runner and the comparator need to know of a session beyond its bytes.
type plan struct {
	exp [][]expectation // per step, per connection
	// per connection, the reply subjects of its requests that two or more of its plain
	// subscriptions matched (as far as the model can tell): which sid nats-server answers a
	// no-responders request with then depends on its sublist's history (a subject's
	// subscriptions sit in a map; a cached match result lists later subscriptions last), see
	// TestWireNoRespondersSid for the cases it decides alike every time
	ambiguous []map[string]bool
}

// connModel frames one connection's bytes as natsd does and tracks what decides the answers
// the runner waits for: PONGs, the protocol 1 connect INFO, and closes.
type connModel struct {
	p         parser.Parser
	mcl       int
	buf       []byte
	opts      modelOpts
	connected bool
	firstPong bool
	closed    bool
	pongs     int
	infos     int
	subs      map[string]string // sid → subject of plain subscriptions
	ambiguous map[string]bool
}

// modelOpts has the fields and types of nats-server's client options (a value of the wrong
// type in any of them fails the CONNECT).
type modelOpts struct {
	Echo         bool   `json:"echo"`
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	TLSRequired  bool   `json:"tls_required"`
	Nkey         string `json:"nkey"`
	JWT          string `json:"jwt"`
	Sig          string `json:"sig"`
	Token        string `json:"auth_token"`
	User         string `json:"user"`
	Pass         string `json:"pass"`
	Name         string `json:"name"`
	Lang         string `json:"lang"`
	Version      string `json:"version"`
	Protocol     int    `json:"protocol"`
	Account      string `json:"account"`
	NewAccount   bool   `json:"new_account"`
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
	Import       *struct {
		Allow, Deny []string
	} `json:"import"`
	Export *struct {
		Allow, Deny []string
	} `json:"export"`
	RemoteAccount string `json:"remote_account"`
	ProxySig      string `json:"proxy_sig"`
}

func newConnModel(p profile) *connModel {
	m := &connModel{mcl: p.maxControlLine(), subs: map[string]string{}, ambiguous: map[string]bool{}}
	m.p.MaxControlLine = int(p.cfg.MaxControlLine)
	m.p.MaxPayload = int(p.cfg.MaxPayload)
	m.p.NoHeaders = true
	m.opts = modelOpts{Verbose: true, Pedantic: true, Echo: true}
	return m
}

// feed frames b after what came before; it reports errIntentional for input whose handling
// natsd documents as different (parser/parser.go), so that the session is not compared:
//   - a client's HMSG (nats-server enters a message state no client can use; natsd answers
//     Unknown Protocol Operation);
//   - junk after PING/PONG/+OK, or a run of blanks after an op's name, longer than
//     max_control_line (nats-server never limits them; natsd does, to bound its buffer).
//
// It reports errSplitDependent for a client's -ERR followed by more than the quiescence PING:
// nats-server closes the connection but goes on with the rest of the bytes it read with the
// -ERR, so a PUB behind it in the same read is still delivered to other connections, one in a
// later read is not.
//
// It reports errSplitDependent for a CR inside the control line of an op with arguments
// (PUB, HPUB, SUB, UNSUB, CONNECT, INFO, -ERR) other than the one before its LF: nats-server
// remembers having seen a CR and then drops the line's last byte when it ends in a bare LF,
// or, when the line is cut across two reads, the last byte of the first read (so
// "PUB a\rb 27\n" declares a 2-byte body when read whole, a 7-byte one when cut after "2").
func (m *connModel) feed(b []byte) error {
	m.buf = append(m.buf, b...)
	for !m.closed && len(m.buf) > 0 {
		if strayCR(m.buf) {
			return errSplitDependent
		}
		if formFeedSub(m.buf) {
			return errFormFeedSub
		}
		if raceBuild && !m.connected && len(m.buf) >= 3 && strings.EqualFold(string(m.buf[:3]), "sub") {
			return errNatsServerRace
		}
		var op parser.Op
		n, err := m.p.Next(m.buf, &op)
		if err != nil {
			if intentional(m.buf, err, m.mcl) {
				return errIntentional
			}
			m.closed = true
			m.buf = nil
			return nil
		}
		if n == 0 {
			return nil
		}
		if op.Kind == parser.KindErr && len(m.buf) > n && string(m.buf[n:]) != "PING\r\n" {
			return errSplitDependent
		}
		m.process(&op)
		m.buf = m.buf[n:]
	}
	return nil
}

// strayCR reports whether the op at the start of buf takes arguments and has a CR in its
// control line other than right before the LF.
func strayCR(buf []byte) bool {
	line := buf
	if nl := bytes.IndexByte(buf, '\n'); nl >= 0 {
		line = buf[:nl]
	}
	cr := bytes.IndexByte(line, '\r')
	if cr < 0 || cr == len(line)-1 && len(line) < len(buf) {
		return false
	}
	for _, w := range []string{"hpub", "pub", "sub", "unsub", "connect", "info", "-err"} {
		if len(line) > len(w) && strings.EqualFold(string(line[:len(w)]), w) {
			return true
		}
	}
	return false
}

func formFeedSub(buf []byte) bool {
	line := buf
	if nl := bytes.IndexByte(buf, '\n'); nl >= 0 {
		line = buf[:nl]
	}
	return len(line) > 3 && strings.EqualFold(string(line[:3]), "sub") && bytes.IndexByte(line, '\f') >= 0
}

func intentional(buf []byte, err error, mcl int) bool {
	word := func(w string) bool {
		return len(buf) >= len(w) && strings.EqualFold(string(buf[:len(w)]), w)
	}
	if err == parser.ErrUnknownOp && word("hm") {
		return true
	}
	if err != parser.ErrMaxControlLine {
		return false
	}
	if word("ping") || word("pong") || word("+ok") {
		return true
	}
	for _, w := range []string{"hpub", "pub", "sub", "unsub", "connect", "info", "-err"} {
		if word(w) {
			i := len(w)
			for i < len(buf) && (buf[i] == ' ' || buf[i] == '\t') {
				i++
			}
			return i-len(w) > mcl || i == len(buf)
		}
	}
	return false
}

func (m *connModel) process(op *parser.Op) {
	switch op.Kind {
	case parser.KindPing:
		m.pongs++
		if m.connected && !m.firstPong {
			m.firstPong = true
			if m.opts.Protocol >= 1 {
				m.infos++
			}
		}
	case parser.KindConnect:
		o := m.opts
		if err := json.Unmarshal(op.Arg, &o); err != nil {
			m.closed = true
			return
		}
		m.opts = o
		if m.connected {
			clear(m.subs) // a later CONNECT drops them
		}
		m.connected = true
		m.p.NoHeaders = !o.Headers
		if o.Account != "" || o.NewAccount || o.Protocol < 0 || o.Protocol > 1 || (o.NoResponders && !o.Headers) {
			m.closed = true
		}
	case parser.KindSub:
		if _, ok := m.subs[string(op.Sid)]; ok || len(op.Queue) > 0 {
			return
		}
		m.subs[string(op.Sid)] = string(op.Subject)
	case parser.KindPub, parser.KindHPub:
		if len(op.Reply) == 0 {
			return
		}
		n := 0
		for _, subj := range m.subs {
			if subjectMatches(subj, string(op.Reply)) {
				n++
			}
		}
		if n > 1 {
			m.ambiguous[string(op.Reply)] = true
		}
	case parser.KindUnsub:
		if op.Max == 0 { // one with a max stays until it has had that many
			delete(m.subs, string(op.Sid))
		}
	case parser.KindInfo:
		// nats-server closes on INFO JSON it cannot unmarshal; the model sees syntax only
		// (the runner waits for nothing on a close the model does not expect)
		var v map[string]any
		if json.Unmarshal(op.Arg, &v) != nil {
			m.closed = true
		}
	case parser.KindErr:
		m.closed = true
	}
}

// subjectMatches reports whether subscription subject pat matches subject.
func subjectMatches(pat, subject string) bool {
	p, s := strings.Split(pat, "."), strings.Split(subject, ".")
	for i, t := range p {
		if t == ">" {
			return len(s) > i
		}
		if i >= len(s) || t != "*" && t != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}

// padding is what completes a message body the buffered bytes leave unfinished: filler, then
// CRLF. ok is false when that would take more than the session may send.
func (m *connModel) padding() (pad string, ok bool) {
	if m.closed || len(m.buf) == 0 {
		return "", true
	}
	need := m.p.Need() - len(m.buf)
	if need <= 0 {
		// inside a control line: end it
		return "\r\n", true
	}
	if need > 16<<10 {
		return "", false
	}
	if need == 1 {
		return "\n", true
	}
	return strings.Repeat("x", need-2) + "\r\n", true
}

// --- the generator ---

type gen struct {
	r    *rand.Rand
	prof profile
	s    *session
	q    int     // fresh queue names
	h    float64 // hostility: how often ops are malformed (1 = the rates as written)
}

func (g *gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }
func (g *gen) chance(p float64) bool    { return g.r.Float64() < p }

// bad is a chance of malforming something, scaled by the session's hostility.
func (g *gen) bad(p float64) bool { return g.chance(p * g.h) }

// generateSession builds a random session from seed.
func generateSession(seed int64) *session {
	r := rand.New(rand.NewSource(seed))
	s := &session{profile: r.Intn(len(fuzzProfiles)), splitSeed: uint8(r.Intn(256))}
	switch n := r.Intn(100); {
	case n < 30:
		s.conns = 1
	case n < 75:
		s.conns = 2
	default:
		s.conns = 3
	}
	// Half the sessions are mostly well-behaved, so that connections live long enough for
	// deliveries, queue groups and no-responders to be compared.
	g := &gen{r: r, prof: fuzzProfiles[s.profile], s: s, h: 1}
	if r.Intn(2) == 0 {
		g.h = 0.15
	}
	// Most connections start with a CONNECT (and perhaps subscriptions in the same step).
	for _, c := range r.Perm(s.conns) {
		// (the same draw with and without -race, so a seed is the same session in both)
		if skip := g.chance(0.08); skip && !raceBuild { // see errNatsServerRace
			continue
		}
		st := step{conn: c, ops: []string{g.connect(true)}}
		for n := r.Intn(3); n > 0; n-- {
			st.ops = append(st.ops, g.sub())
		}
		s.steps = append(s.steps, st)
	}
	for n := 2 + r.Intn(9); n > 0; n-- {
		c := r.Intn(s.conns)
		st := step{conn: c}
		for k := 1 + r.Intn(5); k > 0; k-- {
			st.ops = append(st.ops, g.op(c))
		}
		s.steps = append(s.steps, st)
	}
	if _, err := s.prepare(); err != nil {
		// garbage that happened to reach an intentional or split-dependent difference
		return generateSession(seed*1000003 + 1)
	}
	return s
}

func (g *gen) eol() string {
	if g.chance(0.15) {
		return "\n"
	}
	return "\r\n"
}

func (g *gen) sep() string {
	switch n := g.r.Intn(100); {
	case n < 80:
		return " "
	case n < 88:
		return "\t"
	case n < 95:
		return "  "
	default:
		return " \t "
	}
}

// name is an op name as clients type it: mostly upper case, sometimes lower or mixed.
func (g *gen) name(w string) string {
	switch n := g.r.Intn(100); {
	case n < 85:
		return w
	case n < 93:
		return strings.ToLower(w)
	default:
		b := []byte(w)
		for i := range b {
			if g.chance(0.5) {
				b[i] = strings.ToLower(string(b[i]))[0]
			}
		}
		return string(b)
	}
}

var (
	validSubjects   = []string{"foo", "foo.bar", "foo.baz", "bar", "foo.bar.baz", "_INBOX.a", "_INBOX.b", "q.x", "svc.a"}
	wildSubjects    = []string{"foo.*", "foo.>", ">", "*", "*.bar", "_INBOX.*", "q.*", "foo.*.baz"}
	invalidSubjects = []string{"foo..bar", ".foo", "foo.", "foo.>.bar", ">.foo", "a\x00b", "f\xc3\xb8\xc3\xb8", "foo*", "*x.y", "a\fb"}
)

func (g *gen) subSubject() string {
	switch {
	case g.bad(0.12):
		return g.pick(invalidSubjects[:len(invalidSubjects)-1]...) // not "a\fb" (errFormFeedSub)
	case g.chance(0.6):
		return g.pick(validSubjects...)
	default:
		return g.pick(wildSubjects...)
	}
}

func (g *gen) pubSubject() string {
	switch {
	case g.bad(0.1):
		return g.pick(invalidSubjects...)
	case g.bad(0.1):
		return g.pick(wildSubjects...)
	default:
		return g.pick(validSubjects...)
	}
}

func (g *gen) reply() string {
	switch n := g.r.Intn(100); {
	case n < 60:
		return ""
	case n < 92:
		return g.pick("_INBOX.a", "_INBOX.b", "foo", "_INBOX.a.1")
	default:
		return g.pick("foo.*", "a..b", ">")
	}
}

// sid is a subscription id: a few per session so UNSUB and duplicate SUBs hit.
func (g *gen) sid() string {
	switch n := g.r.Intn(100); {
	case n < 85:
		return strconv.Itoa(1 + g.r.Intn(6))
	case n < 95:
		return g.pick("abc", "x-1", "99")
	default:
		return "Q" + strconv.Itoa(1+g.r.Intn(3))
	}
}

// sub is SUB subject [queue] sid. Members of the one shared queue group ("qg") get sids
// starting with Q: which member gets a message is the server's random choice, so the
// comparator counts those deliveries per step across connections instead of per sid.
func (g *gen) sub() string {
	subj := g.subSubject()
	args := []string{subj}
	sid := g.sid()
	switch n := g.r.Intn(100); {
	case n < 70:
		if strings.HasPrefix(sid, "Q") {
			sid = sid[1:]
		}
	case n < 85:
		g.q++
		args = append(args, "q"+strconv.Itoa(g.q))
		if strings.HasPrefix(sid, "Q") {
			sid = sid[1:]
		}
	default:
		args = append(args, g.pick("qg", "qg", "qg", "q..bad", "q*"))
		if !strings.HasPrefix(sid, "Q") {
			sid = "Q" + sid
		}
	}
	args = append(args, sid)
	if g.bad(0.04) {
		args = args[:1] // too few
	} else if g.bad(0.03) {
		args = append(args, "extra", "more") // too many
	}
	return g.name("SUB") + g.sep() + strings.Join(args, g.sep()) + g.eol()
}

func (g *gen) unsub() string {
	args := []string{g.sid()}
	switch n := g.r.Intn(100); {
	case n < 50:
	case n < 85:
		args = append(args, strconv.Itoa(g.r.Intn(4)))
	case n < 95:
		args = append(args, g.pick("x", "-1", "0001", "1234567890"))
	default:
		args = append(args, "1", "2") // too many
	}
	if g.bad(0.03) {
		args = args[:0]
	}
	s := g.name("UNSUB")
	if len(args) > 0 {
		s += g.sep() + strings.Join(args, g.sep())
	}
	return s + g.eol()
}

func (g *gen) payload() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 .*>\t"
	var n int
	mp := g.prof.maxPayload()
	switch k := g.r.Intn(100); {
	case k < 10:
		n = 0
	case k < 60:
		n = 1 + g.r.Intn(16)
	case k < 88:
		n = 17 + g.r.Intn(84)
	default:
		if mp <= 1024 {
			n = mp - 1 + g.r.Intn(3) // at the limit, one each side
		} else {
			n = 200 + g.r.Intn(800)
		}
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.Intn(len(alphabet))]
	}
	s := string(b)
	if n > 6 && g.chance(0.2) {
		// protocol text inside a body is just bytes
		at := g.r.Intn(n - 5)
		s = s[:at] + g.pick("\r\n", "PING\r\n", "\n", "MSG ") + s[at:]
		s = s[:n]
	}
	return s
}

// size is the size field for a body of n bytes: mostly right, sometimes not.
func (g *gen) size(n int) string {
	if !g.bad(0.18) {
		return strconv.Itoa(n)
	}
	switch k := 82 + g.r.Intn(18); {
	case k < 86:
		return strconv.Itoa(max(n-1, 0))
	case k < 91:
		return strconv.Itoa(n + 1 + g.r.Intn(3))
	case k < 94:
		return strconv.Itoa(g.prof.maxPayload() + 1)
	default:
		return g.pick("x", "-1", "0005", "1234567890", "2x", "+3")
	}
}

func (g *gen) pub() string {
	subj := g.pubSubject()
	args := []string{subj}
	if rp := g.reply(); rp != "" {
		args = append(args, rp)
	}
	p := g.payload()
	args = append(args, g.size(len(p)))
	if g.bad(0.02) {
		args = args[:1]
	} else if g.bad(0.02) {
		args = append([]string{"extra"}, args...)
		args = append(args, "more")
	}
	body := p + "\r\n"
	if g.bad(0.04) {
		body = p + g.pick("\n", "X\r\n", "\r\r\n", "")
	}
	if strings.HasSuffix(p, "\n") || !strings.HasSuffix(body, "\n") {
		body += "\r\n"
	}
	return g.name("PUB") + g.sep() + strings.Join(args, g.sep()) + g.eol() + body
}

func (g *gen) header() string {
	switch n := g.r.Intn(100); {
	case n < 50:
		return hdr(g.pick("A: b", "Foo: bar baz", "X-Y: 1"))
	case n < 65:
		return hdr()
	case n < 75:
		return hdr("A: b", "A: c", "B:")
	case n < 85:
		return "NATS/1.0 503\r\n\r\n"
	case n < 92:
		return "garbage\r\n\r\n"
	default:
		return ""
	}
}

func (g *gen) hpub() string {
	subj := g.pubSubject()
	args := []string{subj}
	if rp := g.reply(); rp != "" {
		args = append(args, rp)
	}
	h, p := g.header(), g.payload()
	if len(h)+len(p) > g.prof.maxPayload()+1 {
		p = p[:max(0, g.prof.maxPayload()+1-len(h))]
	}
	hs, ts := strconv.Itoa(len(h)), strconv.Itoa(len(h)+len(p))
	k := 0
	if g.bad(0.18) {
		k = 82 + g.r.Intn(18)
	}
	switch {
	case k < 82:
	case k < 86:
		hs = strconv.Itoa(len(h) + len(p) + 1) // header larger than total
	case k < 90:
		hs = g.pick("x", "-1", "")
	default:
		ts = g.size(len(h) + len(p))
	}
	if hs != "" {
		args = append(args, hs)
	}
	args = append(args, ts)
	return g.name("HPUB") + g.sep() + strings.Join(args, g.sep()) + g.eol() + h + p + "\r\n"
}

func (g *gen) ping() string {
	w := g.pick("PING", "PING", "PING", "PONG")
	s := g.name(w)
	if g.chance(0.1) {
		s += g.pick(" ", " foo", "\tx y", "XYZ")
	}
	return s + g.eol()
}

// connect is CONNECT with a random option set; clean favours options a client would send.
func (g *gen) connect(clean bool) string {
	kw := g.name("CONNECT") + g.pick(" ", " ", " ", " ", "\t", "  ", "")
	bad := !clean || g.bad(0.15)
	if bad {
		switch n := g.r.Intn(100); {
		case n < 15:
			return kw + g.pick(`{bad json`, `{"verbose":tru}`, `[]`, `"x"`, `garbage`, `{`, `{}}`, `{"a":1,}`) + g.eol()
		case n < 25:
			return kw + g.pick(`null`, `{}`, ` {} `, `{"verbose":false}{}`) + g.eol()
		case n < 45:
			// a field of the wrong type
			f := g.pick(`"verbose":"true"`, `"protocol":1.5`, `"protocol":"1"`, `"name":5`, `"echo":1`,
				`"headers":null`, `"tls_required":"x"`, `"jwt":1`, `"lang":[]`, `"import":"x"`,
				`"remote_account":7`, `"proxy_sig":false`, `"export":{"allow":5}`)
			return kw + `{"verbose":false,"pedantic":false,` + f + `}` + g.eol()
		}
	}
	var fields []string
	boolField := func(name string, p float64) {
		if g.chance(p) {
			fields = append(fields, fmt.Sprintf("%q:%v", name, g.chance(0.5)))
		}
	}
	if clean && g.chance(0.6) {
		fields = append(fields, `"verbose":false`, `"pedantic":false`)
	} else {
		boolField("verbose", 0.8)
		boolField("pedantic", 0.8)
	}
	boolField("echo", 0.3)
	if g.chance(0.7) {
		fields = append(fields, `"headers":true`)
	} else {
		boolField("headers", 0.3)
	}
	boolField("no_responders", 0.3)
	if g.chance(0.5) {
		p := "1"
		if g.chance(0.1) {
			p = g.pick("0", "2", "-1", "3")
		}
		fields = append(fields, `"protocol":`+p)
	}
	if g.chance(0.3) {
		fields = append(fields, `"name":"fz"`, `"lang":"go"`, `"version":"1.55.0"`)
	}
	if bad || g.bad(0.05) {
		fields = append(fields, g.pick(`"tls_required":false`, `"user":"u","pass":"p"`, `"auth_token":"t"`,
			`"account":"A"`, `"new_account":false`, `"new_account":true`, `"jwt":"x"`, `"sig":"s"`, `"nkey":"n"`,
			`"unknown":1`, `"verbose":true,"verbose":false`, `"import":{"allow":["a"]}`))
	}
	g.r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	return kw + "{" + strings.Join(fields, ",") + "}" + g.eol()
}

// unknown is an op no client may send, or a misspelled one.
func (g *gen) unknown() string {
	return g.pick("FOO bar", "PUX foo 1", "SUBB foo 1", "RS+ $G foo", "A+ x", "LS- x", "MSG foo 1 0",
		"INFO {}", "INFO {bad", "+OK", "-ERR 'x'", "UNSUBX 1", "CONNECTX{}", "P", "PI NG", "\x00",
		"", "RMSG $G foo 1", "LMSG foo 1", "PINGX", "+OKAY", "PUBLISH foo 1", "S UB foo 1") + g.eol()
}

// garbage is random bytes ending a line (never a client HMSG, never stepSep).
func (g *gen) garbage() string {
	const alphabet = "abcdefxyzPUBSINGHMOK +-.*>\t\r\x00\xff{}\"'0123456789"
	b := make([]byte, 1+g.r.Intn(30))
	for i := range b {
		b[i] = alphabet[g.r.Intn(len(alphabet))]
	}
	for i := range b {
		if (i == 0 || b[i-1] == '\n') && (b[i] == 'H' || b[i] == 'h') {
			b[i] = 'x'
		}
	}
	return string(b) + "\r\n"
}

// long is a control line around max_control_line (at, just under, just over, far over),
// sometimes without its line end.
func (g *gen) long() string {
	mcl := g.prof.maxControlLine()
	n := mcl - 4 + g.r.Intn(9)
	if g.chance(0.2) {
		n = mcl + 500
	}
	switch g.r.Intn(4) {
	case 0:
		// "SUB " + subject + " 1": the argument is the subject plus 2
		return "SUB " + strings.Repeat("a", max(1, n-2)) + " 1\r\n"
	case 1:
		return "PUB " + strings.Repeat("b", max(1, n-2)) + " 0\r\n\r\n"
	case 2:
		return "CONNECT {\"verbose\":false,\"name\":\"" + strings.Repeat("c", max(1, n-20)) + "\"}\r\n"
	default:
		return "UNSUB " + strings.Repeat("9", max(1, n))
	}
}

// op is one random op for connection c.
func (g *gen) op(c int) string {
	// weights: pub, hpub, sub, unsub, ping, connect, unknown, garbage, long, request
	w := []float64{220, 90, 220, 80, 140, 40 * g.h, 40 * g.h, 30 * g.h, 20 * g.h, 110}
	if c == 0 && g.s.conns > 1 {
		// the first connection leans to subscribing, the others to publishing
		w[0], w[1], w[2] = 60, 30, 400
	}
	total := 0.0
	for _, x := range w {
		total += x
	}
	n, k := g.r.Float64()*total, 0
	for k < len(w)-1 && n >= w[k] {
		n -= w[k]
		k++
	}
	switch k {
	case 0:
		return g.pub()
	case 1:
		return g.hpub()
	case 2:
		return g.sub()
	case 3:
		return g.unsub()
	case 4:
		return g.ping()
	case 5:
		return g.connect(g.chance(0.5))
	case 6:
		return g.unknown()
	case 7:
		return g.garbage()
	case 8:
		return g.long()
	default:
		// request/reply and no-responders: subscribe to an inbox, publish with it as reply
		inbox := g.pick("_INBOX.a", "_INBOX.b")
		return g.name("SUB") + " " + inbox + " " + strconv.Itoa(1+g.r.Intn(6)) + g.eol() +
			g.name("PUB") + " " + g.pubSubject() + " " + inbox + " 1" + g.eol() + "r\r\n"
	}
}
