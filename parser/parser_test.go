package parser

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unsafe"
)

// rop is an Op with its slices copied out, so results survive the buffers they came from and
// compare with ==.
type rop struct {
	Kind                                 Kind
	Subject, Reply, Queue, Sid, Arg, Msg string
	Max, HdrLen                          int
	// Route and leaf node fields.
	Account, Origin, Queues string
	Weight                  int32
}

func (r rop) String() string {
	s := fmt.Sprintf("%v{subj=%q reply=%q queue=%q sid=%q arg=%q max=%d hdr=%d msg=%q",
		r.Kind, r.Subject, r.Reply, r.Queue, r.Sid, r.Arg, r.Max, r.HdrLen, r.Msg)
	if r.Account != "" || r.Origin != "" || r.Queues != "" || r.Weight != 0 {
		s += fmt.Sprintf(" acc=%q origin=%q queues=%q weight=%d", r.Account, r.Origin, r.Queues, r.Weight)
	}
	return s + "}"
}

func toR(o *Op) rop {
	return rop{o.Kind, string(o.Subject), string(o.Reply), string(o.Queue), string(o.Sid),
		string(o.Arg), string(o.Msg), o.Max, o.HdrLen,
		string(o.Account), string(o.Origin), string(o.Queues), o.Weight}
}

type result struct {
	ops  []rop
	err  error
	rest string // bytes left unconsumed at the end (or at the error)
}

func (r result) String() string {
	return fmt.Sprintf("ops=%v err=%v rest=%q", r.ops, r.err, r.rest)
}

// equal compares results; after an error the unconsumed tail depends on how much had arrived
// when the error was seen, so it is compared only without error.
func (r result) equal(o result) bool {
	if r.err != o.err || (r.err == nil && r.rest != o.rest) || len(r.ops) != len(o.ops) {
		return false
	}
	for i := range r.ops {
		if r.ops[i] != o.ops[i] {
			return false
		}
	}
	return true
}

// within reports whether s lies inside buf (or is empty), i.e. the parser handed out borrowed
// bytes and nothing else.
func within(buf, s []byte) bool {
	if len(s) == 0 {
		return true
	}
	b := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return p >= b && p+uintptr(len(s)) <= b+uintptr(len(buf))
}

// checkStep verifies the invariants of one Next call.
func checkStep(t testing.TB, p *Parser, buf []byte, op *Op, n int, err error) {
	t.Helper()
	if n < 0 || n > len(buf) {
		t.Fatalf("n=%d outside [0,%d]", n, len(buf))
	}
	if err != nil && n != 0 {
		t.Fatalf("n=%d with err=%v", n, err)
	}
	if n > 0 {
		if op.Kind == KindNone {
			t.Fatalf("n=%d with no kind", n)
		}
		for _, s := range [][]byte{op.Subject, op.Reply, op.Queue, op.Sid, op.Arg, op.Msg,
			op.Account, op.Origin, op.Queues} {
			if !within(buf[:n], s) {
				t.Fatalf("op field %q does not alias the consumed bytes", s)
			}
		}
		if op.HdrLen < 0 || op.HdrLen > len(op.Msg) {
			t.Fatalf("HdrLen %d outside Msg of %d", op.HdrLen, len(op.Msg))
		}
		switch op.Kind {
		case KindPub, KindHPub, KindMsg, KindHMsg, KindRMsg, KindLMsg:
			if size := AppendSize(nil, len(op.Msg), op.SizeWidth); !bytes.Contains(buf[:n], size) {
				t.Fatalf("size %q (width %d) for a body of %d is not in %q", size, op.SizeWidth, len(op.Msg), buf[:n])
			}
		}
		hasHdr := op.Kind == KindHPub || op.Kind == KindHMsg ||
			((op.Kind == KindRMsg || op.Kind == KindLMsg) && op.HdrLen > 0)
		if hdr := AppendSize(nil, op.HdrLen, op.HdrWidth); hasHdr && !bytes.Contains(buf[:n], hdr) {
			t.Fatalf("header size %q (width %d) is not in %q", hdr, op.HdrWidth, buf[:n])
		}
		if op.Weight < 0 || (op.Weight == 0) != (op.Queue == nil || (op.Kind != KindRSub && op.Kind != KindLSub)) {
			t.Fatalf("weight %d with queue %q in %v", op.Weight, op.Queue, op.Kind)
		}
		if op.Queues != nil && (len(op.Queues) == 0 || sepTab[op.Queues[0]] != 0 || sepTab[op.Queues[len(op.Queues)-1]] != 0) {
			t.Fatalf("queues %q not trimmed", op.Queues)
		}
	}
	if n == 0 && err == nil && p.Need() != 0 && p.Need() <= len(buf) {
		t.Fatalf("Need()=%d but %d bytes were there", p.Need(), len(buf))
	}
}

// parseWhole parses buf as one read.
func parseWhole(t testing.TB, cfg Parser, buf []byte) result {
	t.Helper()
	return parseChunks(t, cfg, [][]byte{buf})
}

// parseChunks feeds chunks the way the event loop does: unconsumed bytes are kept and the next
// chunk is appended after them. Each round copies into a fresh buffer so that nothing can lean
// on the identity of an earlier buffer.
func parseChunks(t testing.TB, cfg Parser, chunks [][]byte) result {
	t.Helper()
	p := cfg
	p.Reset()
	var res result
	var pending []byte
	for _, c := range chunks {
		nb := make([]byte, 0, len(pending)+len(c))
		nb = append(nb, pending...)
		pending = append(nb, c...)
		for len(pending) > 0 {
			var op Op
			n, err := p.Next(pending, &op)
			checkStep(t, &p, pending, &op, n, err)
			if err != nil {
				res.err = err
				res.rest = string(pending)
				return res
			}
			if n == 0 {
				break
			}
			res.ops = append(res.ops, toR(&op))
			pending = pending[n:]
		}
	}
	res.rest = string(pending)
	return res
}

// splits returns data cut at the given ascending offsets.
func splits(data []byte, cuts ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		out = append(out, data[prev:c])
		prev = c
	}
	return append(out, data[prev:])
}

func randomSplits(r *rand.Rand, data []byte) [][]byte {
	if len(data) == 0 {
		return [][]byte{data}
	}
	k := r.Intn(8)
	cuts := make([]int, 0, k)
	for range k {
		cuts = append(cuts, r.Intn(len(data)+1))
	}
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return splits(data, cuts...)
}

// checkSplitInvariance asserts that every two-way split, a byte-at-a-time feed and some random
// multi-way splits give exactly what one read gives.
func checkSplitInvariance(t *testing.T, cfg Parser, data []byte, want result) {
	t.Helper()
	for i := 0; i <= len(data); i++ {
		if got := parseChunks(t, cfg, splits(data, i)); !got.equal(want) {
			t.Fatalf("split at %d of %q:\n got %v\nwant %v", i, data, got, want)
		}
	}
	one := make([][]byte, len(data))
	for i := range data {
		one[i] = data[i : i+1]
	}
	if got := parseChunks(t, cfg, one); !got.equal(want) {
		t.Fatalf("byte-at-a-time %q:\n got %v\nwant %v", data, got, want)
	}
	r := rand.New(rand.NewSource(int64(len(data))))
	for range 50 {
		ch := randomSplits(r, data)
		if got := parseChunks(t, cfg, ch); !got.equal(want) {
			t.Fatalf("splits %q:\n got %v\nwant %v", ch, got, want)
		}
	}
}

type tcase struct {
	name string
	cfg  Parser
	in   string
	ops  []rop
	err  error
	rest string // unconsumed tail expected (defaults to "" on success, to the failing op on error)
}

var client = Parser{Mode: ClientMode}

func pub(subj, reply, msg string) rop {
	return rop{Kind: KindPub, Subject: subj, Reply: reply, Msg: msg}
}
func hpub(subj, reply string, hdr int, msg string) rop {
	return rop{Kind: KindHPub, Subject: subj, Reply: reply, HdrLen: hdr, Msg: msg}
}
func sub(subj, queue, sid string) rop {
	return rop{Kind: KindSub, Subject: subj, Queue: queue, Sid: sid}
}
func unsub(sid string, max int) rop { return rop{Kind: KindUnsub, Sid: sid, Max: max} }
func msg(subj, sid, reply, m string) rop {
	return rop{Kind: KindMsg, Subject: subj, Sid: sid, Reply: reply, Msg: m}
}
func hmsg(subj, sid, reply string, hdr int, m string) rop {
	return rop{Kind: KindHMsg, Subject: subj, Sid: sid, Reply: reply, HdrLen: hdr, Msg: m}
}
func arg(k Kind, a string) rop { return rop{Kind: k, Arg: a} }

var (
	ping = rop{Kind: KindPing}
	pong = rop{Kind: KindPong}
	ok   = rop{Kind: KindOK}
)

const hdrBlock = "NATS/1.0\r\n\r\n" // 12 bytes

var cases = []tcase{
	// PUB
	{name: "pub", in: "PUB foo 5\r\nhello\r\n", ops: []rop{pub("foo", "", "hello")}},
	{name: "pub reply", in: "PUB foo bar 5\r\nhello\r\n", ops: []rop{pub("foo", "bar", "hello")}},
	{name: "pub empty", in: "PUB foo 0\r\n\r\n", ops: []rop{pub("foo", "", "")}},
	{name: "pub lower", in: "pub foo 1\r\nx\r\n", ops: []rop{pub("foo", "", "x")}},
	{name: "pub mixed case", in: "pUb foo 1\r\nx\r\n", ops: []rop{pub("foo", "", "x")}},
	{name: "pub tabs and runs", in: "PUB\t \tfoo \t bar\t\t5\r\nhello\r\n", ops: []rop{pub("foo", "bar", "hello")}},
	{name: "pub trailing blanks", in: "PUB foo 5 \t \r\nhello\r\n", ops: []rop{pub("foo", "", "hello")}},
	{name: "pub bare lf", in: "PUB foo 5\nhello\r\n", ops: []rop{pub("foo", "", "hello")}},
	{name: "pub crlf in payload", in: "PUB foo 5\r\nhe\r\nl\r\n", ops: []rop{pub("foo", "", "he\r\nl")}},
	{name: "pub payload looks like ops", in: "PUB foo 6\r\nPING\r\n\r\nPONG\r\n", ops: []rop{pub("foo", "", "PING\r\n"), pong}},
	{name: "pub 9 digit size within limit", cfg: Parser{MaxPayload: -1}, in: "PUB foo 000000003\r\nabc\r\n", ops: []rop{pub("foo", "", "abc")}},
	{name: "pub at max payload", cfg: Parser{MaxPayload: 3}, in: "PUB foo 3\r\nabc\r\n", ops: []rop{pub("foo", "", "abc")}},
	{name: "pub partial body", in: "PUB foo 5\r\nhel", rest: "PUB foo 5\r\nhel"},
	{name: "pub partial line", in: "PUB foo 5", rest: "PUB foo 5"},
	{name: "pub partial name", in: "PU", rest: "PU"},
	{name: "p partial", in: "P", rest: "P"},
	{name: "h partial", in: "h", rest: "h"},
	{name: "pub cr only", in: "PUB foo 5\r", rest: "PUB foo 5\r"},
	{name: "pub missing lf after body", in: "PUB foo 5\r\nhello\r", rest: "PUB foo 5\r\nhello\r"},

	// HPUB
	{name: "hpub", in: "HPUB foo 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{hpub("foo", "", 12, hdrBlock+"hi")}},
	{name: "hpub reply", in: "hpub foo r 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{hpub("foo", "r", 12, hdrBlock+"hi")}},
	{name: "hpub headers only", in: "HPUB foo 12 12\r\n" + hdrBlock + "\r\n", ops: []rop{hpub("foo", "", 12, hdrBlock)}},
	{name: "hpub zero", in: "HPUB foo 0 0\r\n\r\n", ops: []rop{hpub("foo", "", 0, "")}},

	// SUB / UNSUB
	{name: "sub", in: "SUB foo 1\r\n", ops: []rop{sub("foo", "", "1")}},
	{name: "sub queue", in: "SUB foo q 1\r\n", ops: []rop{sub("foo", "q", "1")}},
	{name: "sub blanks lf", in: "sub\tfoo \t q  1 \n", ops: []rop{sub("foo", "q", "1")}},
	{name: "sub wildcard", in: "Sub foo.*.> 22\r\n", ops: []rop{sub("foo.*.>", "", "22")}},
	{name: "unsub", in: "UNSUB 1\r\n", ops: []rop{unsub("1", 0)}},
	{name: "unsub max", in: "unsub 1 5\r\n", ops: []rop{unsub("1", 5)}},
	{name: "unsub max zero", in: "UNSUB 1 0\r\n", ops: []rop{unsub("1", 0)}},
	{name: "unsub bad max means now", in: "UNSUB 1 abc\r\n", ops: []rop{unsub("1", 0)}},

	// PING / PONG / +OK / -ERR / CONNECT / INFO
	{name: "ping", in: "PING\r\n", ops: []rop{ping}},
	{name: "ping lf", in: "ping\n", ops: []rop{ping}},
	{name: "ping trailing blanks", in: "PING  \r\n", ops: []rop{ping}},
	{name: "ping junk", in: "PINGxyz\r\n", ops: []rop{ping}},
	{name: "pong", in: "PONG\r\n", ops: []rop{pong}},
	{name: "pong trailing", in: "pong \r\n", ops: []rop{pong}},
	{name: "ping partial", in: "PING", rest: "PING"},
	{name: "ping cr", in: "PING\r", rest: "PING\r"},
	{name: "ok from client", in: "+OK\r\n", ops: []rop{ok}},
	{name: "err from client", in: "-ERR 'boom'\r\n", ops: []rop{arg(KindErr, "boom")}},
	{name: "connect", in: "CONNECT {\"verbose\":false}\r\n", ops: []rop{arg(KindConnect, `{"verbose":false}`)}},
	{name: "connect no blank", in: "CONNECT{}\r\n", ops: []rop{arg(KindConnect, "{}")}},
	{name: "connect blanks", in: "connect \t {} \t\r\n", ops: []rop{arg(KindConnect, "{}")}},
	{name: "connect empty", in: "CONNECT\r\n", ops: []rop{arg(KindConnect, "")}},
	{name: "connect spaces only", in: "CONNECT   \r\n", ops: []rop{arg(KindConnect, "")}},
	{name: "info from client", in: "INFO {} \r\n", ops: []rop{arg(KindInfo, "{}")}},

	// A typical client session in one read.
	{name: "session", in: "CONNECT {}\r\nPING\r\nSUB a 1\r\nPUB a 2\r\nhi\r\nHPUB a r 12 13\r\n" + hdrBlock + "x\r\nUNSUB 1 3\r\nPONG\r\nPUB b",
		ops: []rop{arg(KindConnect, "{}"), ping, sub("a", "", "1"), pub("a", "", "hi"),
			hpub("a", "r", 12, hdrBlock+"x"), unsub("1", 3), pong},
		rest: "PUB b"},

	// Unknown Protocol Operation
	{name: "unknown op", in: "FOO\r\n", err: ErrUnknownOp},
	{name: "empty line", in: "\r\n", err: ErrUnknownOp},
	{name: "bare lf", in: "\n", err: ErrUnknownOp},
	{name: "leading blank", in: " PING\r\n", err: ErrUnknownOp},
	{name: "bad spelling early", in: "PUX", err: ErrUnknownOp},
	{name: "bad spelling partial", in: "CONNX", err: ErrUnknownOp},
	{name: "pi", in: "PI\r\n", err: ErrUnknownOp},
	{name: "hx", in: "HX\r\n", err: ErrUnknownOp},
	{name: "px", in: "PX\r\n", err: ErrUnknownOp},
	{name: "pub no blank", in: "PUBfoo 1\r\n", err: ErrUnknownOp},
	{name: "pub no args", in: "PUB\r\n", err: ErrUnknownOp},
	{name: "unsub no args", in: "UNSUB\r\n", err: ErrUnknownOp},
	{name: "err no blank", in: "-ERR\r\n", err: ErrUnknownOp},
	{name: "payload too long", in: "PUB foo 3\r\nhello\r\n", err: ErrPayloadEnd},
	{name: "payload lf only", in: "PUB foo 5\r\nhello\n", err: ErrPayloadEnd},
	{name: "payload cr then junk", in: "PUB foo 5\r\nhello\rX", err: ErrPayloadEnd},
	{name: "payload junk judged early", in: "PUB foo 5\r\nhelloX", err: ErrPayloadEnd},
	{name: "hpub payload mismatch", in: "HPUB foo 12 12\r\n" + hdrBlock + "x\r\n", err: ErrPayloadEnd},
	{name: "msg from client", in: "MSG foo 1 5\r\nhello\r\n", err: ErrUnknownOp},
	{name: "hmsg from client", in: "HMSG foo 1 0 0\r\n\r\n", err: ErrUnknownOp},
	{name: "rs+ from client", in: "RS+ $G foo\r\n", err: ErrUnknownOp},
	{name: "ls+ from client", in: "LS+ foo\r\n", err: ErrUnknownOp},
	{name: "rmsg from client", in: "RMSG $G foo 1\r\nx\r\n", err: ErrUnknownOp},
	{name: "a+ from client", in: "A+ $G\r\n", err: ErrUnknownOp},
	{name: "error after good ops", in: "PING\r\nPUB a 1\r\nx\r\nBAD\r\nPING\r\n", ops: []rop{ping, pub("a", "", "x")},
		err: ErrUnknownOp, rest: "BAD\r\nPING\r\n"},

	// Silent close (argument errors)
	{name: "pub missing size", in: "PUB foo\r\n", err: ErrProtocol},
	{name: "pub extra arg", in: "PUB foo bar baz 5\r\n", err: ErrProtocol},
	{name: "pub non numeric", in: "PUB foo 5x\r\n", err: ErrProtocol},
	{name: "pub negative", in: "PUB foo -1\r\n", err: ErrProtocol},
	{name: "pub ten digits", in: "PUB foo 0000000001\r\n", err: ErrProtocol},
	{name: "pub only cr", in: "PUB \r\n", err: ErrProtocol},
	{name: "pub cr inside size", in: "PUB foo 5\rX\r\n", err: ErrProtocol},
	{name: "hpub hdr > total", in: "HPUB foo 20 10\r\n", err: ErrProtocol},
	{name: "hpub missing size", in: "HPUB foo 10\r\n", err: ErrProtocol},
	{name: "hpub bad hdr", in: "HPUB foo x 10\r\n", err: ErrProtocol},
	{name: "hpub bad total", in: "HPUB foo 1 x\r\n", err: ErrProtocol},
	{name: "hpub without headers", cfg: Parser{NoHeaders: true, MaxPayload: 1}, in: "HPUB foo 12 14\r\n", err: ErrProtocol},
	{name: "hpub without headers partial", cfg: Parser{NoHeaders: true}, in: "HPUB foo 12 14", rest: "HPUB foo 12 14"},
	{name: "hpub without headers mcl first", cfg: Parser{NoHeaders: true, MaxControlLine: 4}, in: "HPUB foo 12 14\r\n", err: ErrMaxControlLine},
	{name: "hpub extra", in: "HPUB a b c 1 2\r\n", err: ErrProtocol},
	{name: "pub many args", in: "PUB a b c d e f g h 1\r\n", err: ErrProtocol},
	{name: "sub many args", in: "SUB a b c d e f g\r\n", err: ErrProtocol},
	{name: "sub one arg", in: "SUB foo\r\n", err: ErrProtocol},
	{name: "sub four args", in: "SUB a b c d\r\n", err: ErrProtocol},
	{name: "sub only cr", in: "SUB \r\n", err: ErrProtocol},
	{name: "unsub three args", in: "UNSUB 1 2 3\r\n", err: ErrProtocol},

	// Limits
	{name: "max payload", cfg: Parser{MaxPayload: 10}, in: "PUB foo 11\r\n", err: ErrMaxPayload},
	{name: "max payload before body", cfg: Parser{MaxPayload: 10}, in: "PUB foo 11\r\n01234567890\r\n", err: ErrMaxPayload},
	{name: "max payload hpub total", cfg: Parser{MaxPayload: 13}, in: "HPUB foo 12 14\r\n", err: ErrMaxPayload},
	{name: "default max payload", in: "PUB foo 1048577\r\n", err: ErrMaxPayload},
	{name: "default max payload ok", in: "PUB foo 1048576\r\n", rest: "PUB foo 1048576\r\n"},
	{name: "no max payload", cfg: Parser{MaxPayload: -1}, in: "PUB foo 999999999\r\n", rest: "PUB foo 999999999\r\n"},
	{name: "size error before max payload", cfg: Parser{MaxPayload: 1}, in: "HPUB foo 9 5\r\n", err: ErrProtocol},
	{name: "mcl at limit", cfg: Parser{MaxControlLine: 16}, in: "SUB " + strings.Repeat("a", 14) + " 1\r\n", ops: []rop{sub(strings.Repeat("a", 14), "", "1")}},
	{name: "mcl over", cfg: Parser{MaxControlLine: 16}, in: "SUB " + strings.Repeat("a", 15) + " 1\r\n", err: ErrMaxControlLine},
	{name: "mcl over partial", cfg: Parser{MaxControlLine: 16}, in: "SUB " + strings.Repeat("a", 17), err: ErrMaxControlLine},
	{name: "mcl partial at limit", cfg: Parser{MaxControlLine: 16}, in: "SUB " + strings.Repeat("a", 16) + "\r", rest: "SUB " + strings.Repeat("a", 16) + "\r"},
	{name: "mcl counts trailing blanks", cfg: Parser{MaxControlLine: 8}, in: "SUB a 1      \r\n", err: ErrMaxControlLine},
	{name: "mcl connect", cfg: Parser{MaxControlLine: 8}, in: "CONNECT {\"abc\":1}\r\n", err: ErrMaxControlLine},
	{name: "mcl pub", cfg: Parser{MaxControlLine: 8}, in: "PUB abcdefg 1\r\n", err: ErrMaxControlLine},
	{name: "mcl ping junk", cfg: Parser{MaxControlLine: 8}, in: "PING" + strings.Repeat(" ", 9), err: ErrMaxControlLine},
	{name: "mcl blanks", cfg: Parser{MaxControlLine: 8}, in: "PUB" + strings.Repeat(" ", 10), err: ErrMaxControlLine},
	{name: "mcl default", in: "PUB " + strings.Repeat("a", 4096) + " 0\r\n\r\n", err: ErrMaxControlLine},
	{name: "mcl default ok", in: "PUB " + strings.Repeat("a", 4094) + " 0\r\n\r\n", ops: []rop{pub(strings.Repeat("a", 4094), "", "")}},
	{name: "mcl unlimited", cfg: Parser{MaxControlLine: -1}, in: "SUB " + strings.Repeat("a", 10000) + " 1\r\n", ops: []rop{sub(strings.Repeat("a", 10000), "", "1")}},

	// Client mode
	{name: "msg", cfg: client, in: "MSG foo 1 5\r\nhello\r\n", ops: []rop{msg("foo", "1", "", "hello")}},
	{name: "msg reply", cfg: client, in: "MSG foo 1 _INBOX.x 5\r\nhello\r\n", ops: []rop{msg("foo", "1", "_INBOX.x", "hello")}},
	{name: "msg empty", cfg: client, in: "msg foo 1 0\r\n\r\n", ops: []rop{msg("foo", "1", "", "")}},
	{name: "hmsg", cfg: client, in: "HMSG foo 1 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{hmsg("foo", "1", "", 12, hdrBlock+"hi")}},
	{name: "hmsg reply", cfg: client, in: "HMSG foo 1 r 12 12\r\n" + hdrBlock + "\r\n", ops: []rop{hmsg("foo", "1", "r", 12, hdrBlock)}},
	{name: "info", cfg: client, in: "INFO {\"server_id\":\"N\"} \r\n", ops: []rop{arg(KindInfo, `{"server_id":"N"}`)}},
	{name: "ok", cfg: client, in: "+OK\r\n", ops: []rop{ok}},
	{name: "err", cfg: client, in: "-ERR 'Unknown Protocol Operation'\r\n", ops: []rop{arg(KindErr, "Unknown Protocol Operation")}},
	{name: "err unquoted", cfg: client, in: "-ERR  Stale Connection \r\n", ops: []rop{arg(KindErr, "Stale Connection")}},
	{name: "client ping pong", cfg: client, in: "PING\r\nPONG\r\n", ops: []rop{ping, pong}},
	{name: "client pub", cfg: client, in: "PUB foo 1\r\nx\r\n", err: ErrUnknownOp},
	{name: "client hpub", cfg: client, in: "HPUB foo 0 0\r\n\r\n", err: ErrUnknownOp},
	{name: "client sub", cfg: client, in: "SUB foo 1\r\n", err: ErrUnknownOp},
	{name: "client unsub", cfg: client, in: "UNSUB 1\r\n", err: ErrUnknownOp},
	{name: "client connect", cfg: client, in: "CONNECT {}\r\n", err: ErrUnknownOp},
	{name: "msg missing sid", cfg: client, in: "MSG foo 5\r\n", err: ErrProtocol},
	{name: "msg bad size", cfg: client, in: "MSG foo 1 x\r\n", err: ErrProtocol},
	{name: "hmsg hdr > total", cfg: client, in: "HMSG foo 1 3 2\r\n", err: ErrProtocol},
	{name: "hmsg bad hdr", cfg: client, in: "HMSG foo 1 x 2\r\n", err: ErrProtocol},
	{name: "hmsg too many", cfg: client, in: "HMSG a b c d e f\r\n", err: ErrProtocol},
	{name: "msg max payload", cfg: Parser{Mode: ClientMode, MaxPayload: 4}, in: "MSG foo 1 5\r\n", err: ErrMaxPayload},
}

func TestParser(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := result{ops: tc.ops, err: tc.err, rest: tc.rest}
			if tc.err != nil && len(tc.ops) == 0 {
				// The failing op is left unconsumed.
				want.rest = tc.in
			}
			got := parseWhole(t, tc.cfg, []byte(tc.in))
			if !got.equal(want) {
				t.Fatalf("input %q:\n got %v\nwant %v", tc.in, got, want)
			}
			checkSplitInvariance(t, tc.cfg, []byte(tc.in), want)
		})
	}
}

func TestErrors(t *testing.T) {
	for _, e := range []*Error{ErrUnknownOp, ErrMaxControlLine, ErrMaxPayload, ErrProtocol} {
		if !e.Close || e.Error() == "" || e.Reason == "" {
			t.Errorf("%#v", e)
		}
	}
	for k := KindNone; k <= KindErr+1; k++ {
		if k.String() == "" {
			t.Errorf("kind %d has no name", k)
		}
	}
	if KindHPub.String() != "HPUB" {
		t.Error(KindHPub.String())
	}
	if ErrProtocol.Text != "" {
		t.Error("argument errors close silently in nats-server")
	}
}

func TestNeed(t *testing.T) {
	var p Parser
	var op Op
	line := "PUB foo 5\r\n"
	if n, err := p.Next([]byte("PUB fo"), &op); n != 0 || err != nil || p.Need() != 0 {
		t.Fatalf("partial line: n=%d err=%v need=%d", n, err, p.Need())
	}
	if n, err := p.Next([]byte(line+"he"), &op); n != 0 || err != nil || p.Need() != len(line)+7 {
		t.Fatalf("partial body: n=%d err=%v need=%d", n, err, p.Need())
	}
	// Short of Need the call returns at once, whatever the bytes.
	if n, err := p.Next([]byte(line+"hell"), &op); n != 0 || err != nil {
		t.Fatalf("short of need: n=%d err=%v", n, err)
	}
	if n, err := p.Next([]byte(line+"hello\r\nPI"), &op); n != len(line)+7 || err != nil || string(op.Msg) != "hello" {
		t.Fatalf("complete: n=%d err=%v op=%v", n, err, toR(&op))
	}
	if p.Need() != 0 {
		t.Fatalf("need not cleared: %d", p.Need())
	}
	p.Next([]byte(line), &op)
	p.Reset()
	if p.Need() != 0 {
		t.Fatal("Reset kept need")
	}
}

func TestOpUntouchedWhenIncomplete(t *testing.T) {
	var p Parser
	op := Op{Kind: KindPing}
	if n, _ := p.Next([]byte("PUB foo 5\r\nhel"), &op); n != 0 || op.Kind != KindPing || op.Subject != nil {
		t.Fatalf("op written on n=0: %v", toR(&op))
	}
}

func TestMsgCapped(t *testing.T) {
	// Appending to Msg must not overwrite the next op in the caller's buffer.
	var p Parser
	var op Op
	buf := []byte("PUB a 1\r\nx\r\nPING\r\n")
	n, _ := p.Next(buf, &op)
	_ = append(op.Msg, 'Z', 'Z', 'Z')
	if string(buf[n-2:]) != "\r\nPING\r\n" {
		t.Fatalf("buffer clobbered: %q", buf)
	}
}

// validServer and validClient are the building blocks of the property test's streams.
var validServer = []string{
	"CONNECT {\"verbose\":false,\"headers\":true}\r\n",
	"PING\r\n", "PONG\r\n", "ping\n", "PING \r\n",
	"SUB foo 1\r\n", "SUB foo.* q 2\r\n", "sub\tbar  3\n",
	"UNSUB 1\r\n", "UNSUB 2 10\r\n",
	"PUB foo 5\r\nhello\r\n", "PUB foo bar 0\r\n\r\n", "pub foo 4\nPUB \r\n",
	"PUB x 6\r\nPING\r\n\r\n",
	"HPUB foo 12 14\r\n" + hdrBlock + "hi\r\n",
	"HPUB foo r 18 21\r\nNATS/1.0\r\nA: b\r\n\r\nabc\r\n",
	"INFO {}\r\n", "+OK\r\n",
}

var validClient = []string{
	"INFO {\"server_id\":\"N\",\"max_payload\":1048576} \r\n",
	"PING\r\n", "PONG\r\n", "+OK\r\n", "-ERR 'Stale Connection'\r\n",
	"MSG foo 1 5\r\nhello\r\n", "MSG foo 1 _INBOX.a 0\r\n\r\n", "msg foo 9 3\nMSG\r\n",
	"HMSG foo 1 12 14\r\n" + hdrBlock + "hi\r\n",
	"HMSG foo 2 r 18 21\r\nNATS/1.0\r\nA: b\r\n\r\nabc\r\n",
}

func randomStream(r *rand.Rand, parts []string, n int) []byte {
	var b []byte
	for range n {
		b = append(b, parts[r.Intn(len(parts))]...)
	}
	return b
}

func TestSplitInvariance(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, mode := range []struct {
		cfg   Parser
		parts []string
	}{{Parser{}, validServer}, {client, validClient}} {
		// Every part alone, and all parts in order, checked at every split point.
		all := []byte(strings.Join(mode.parts, ""))
		for _, s := range append(mode.parts, string(all)) {
			want := parseWhole(t, mode.cfg, []byte(s))
			if want.err != nil || want.rest != "" {
				t.Fatalf("stream %q does not parse: %v", s, want)
			}
			checkSplitInvariance(t, mode.cfg, []byte(s), want)
		}
		// Random mixes, each with random multi-way splits, plus a partial tail.
		for range 200 {
			s := randomStream(r, mode.parts, 1+r.Intn(20))
			tail := mode.parts[r.Intn(len(mode.parts))]
			s = append(s, tail[:r.Intn(len(tail))]...)
			want := parseWhole(t, mode.cfg, s)
			if want.err != nil {
				t.Fatalf("stream %q: %v", s, want.err)
			}
			for range 20 {
				ch := randomSplits(r, s)
				if got := parseChunks(t, mode.cfg, ch); !got.equal(want) {
					t.Fatalf("splits %q:\n got %v\nwant %v", ch, got, want)
				}
			}
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	for _, tc := range []struct {
		cfg Parser
		in  string
	}{
		{Parser{}, strings.Join(validServer, "")},
		{client, strings.Join(validClient, "")},
		{Parser{}, "PUB foo 5\r\nhel"},
	} {
		buf := []byte(tc.in)
		p := tc.cfg
		var op Op
		allocs := testing.AllocsPerRun(100, func() {
			b := buf
			for {
				n, err := p.Next(b, &op)
				if err != nil || n == 0 {
					break
				}
				b = b[n:]
			}
			p.Reset()
		})
		if allocs != 0 {
			t.Errorf("%q: %v allocs per run", tc.in, allocs)
		}
	}
}

// TestPayloadEndKeepsOp: when a body is not followed by CRLF, Next reports ErrPayloadEnd and
// leaves the op whose control line it accepted (no Msg), whatever the split.
func TestPayloadEndKeepsOp(t *testing.T) {
	for _, tc := range []struct {
		in          string
		kind        Kind
		subj, reply string
		cfg         Parser
	}{
		{in: "PUB foo.* 2\r\nhiX", kind: KindPub, subj: "foo.*"},
		{in: "PUB a..b r 2\r\nhi\rX", kind: KindPub, subj: "a..b", reply: "r"},
		{in: "HPUB h.> 12 14\r\n" + hdrBlock + "hi\n", kind: KindHPub, subj: "h.>"},
	} {
		for cut := 1; cut <= len(tc.in); cut++ {
			p := tc.cfg
			buf := []byte(tc.in[:cut])
			var op Op
			n, err := p.Next(buf, &op)
			if err == nil {
				if n != 0 {
					t.Fatalf("%q cut %d: consumed %d", tc.in, cut, n)
				}
				buf = []byte(tc.in)
				n, err = p.Next(buf, &op)
			}
			if err != ErrPayloadEnd || n != 0 {
				t.Fatalf("%q cut %d: n=%d err=%v", tc.in, cut, n, err)
			}
			if op.Kind != tc.kind || string(op.Subject) != tc.subj || string(op.Reply) != tc.reply || op.Msg != nil {
				t.Fatalf("%q cut %d: op %v", tc.in, cut, toR(&op))
			}
		}
	}
}

// TestSizeArgs: the size fields are handed back as sent, leading zeros and all, for the
// connection layer to write into MSG/HMSG as nats-server does.
func TestSizeArgs(t *testing.T) {
	for _, tc := range []struct {
		in, size, hdr string
	}{
		{"PUB foo 0005\r\nhello\r\n", "0005", ""},
		{"PUB foo r 5\r\nhello\r\n", "5", ""},
		{"HPUB foo 012 014\r\nNATS/1.0\r\n\r\nhi\r\n", "014", "012"},
		{"HPUB foo r 0 2\r\nhi\r\n", "2", "0"},
	} {
		var p Parser
		var op Op
		if n, err := p.Next([]byte(tc.in), &op); n != len(tc.in) || err != nil {
			t.Fatalf("%q: n=%d err=%v", tc.in, n, err)
		}
		size := string(AppendSize(nil, len(op.Msg), op.SizeWidth))
		hdr := ""
		if op.Kind == KindHPub {
			hdr = string(AppendSize(nil, op.HdrLen, op.HdrWidth))
		}
		if size != tc.size || hdr != tc.hdr {
			t.Errorf("%q: sizes %q %q, want %q %q", tc.in, size, hdr, tc.size, tc.hdr)
		}
	}
}

// TestAppendSize: every size up to 2^20 and a few beyond, bare and padded, as strconv and
// fmt would write them.
func TestAppendSize(t *testing.T) {
	check := func(v int, w uint8) {
		want := fmt.Sprintf("%0*d", w, v)
		if got := string(AppendSize([]byte("x"), v, w)); got != "x"+want {
			t.Fatalf("AppendSize(%d, %d) = %q, want %q", v, w, got, "x"+want)
		}
	}
	for v := 0; v <= 1<<20; v++ {
		check(v, 0)
	}
	for _, v := range []int{0, 5, 16, 99, 100, 128, 999, 1000, 65536, 1 << 20, 999999999, 1 << 40} {
		for w := uint8(0); w <= 12; w++ {
			check(v, w)
		}
	}
}
