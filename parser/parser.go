// Package parser is an incremental, zero-allocation parser of the NATS text protocol.
//
// The server's event loop keeps inbound bytes in its own buffer and hands all of them to
// Next; Next either consumes one whole op (control line, body and trailing CRLF) or consumes
// nothing. Keeping partial ops in the caller's buffer (instead of copying them into parser
// state as nats-server does) is what lets every returned slice alias the inbound buffer with
// no copy, whatever the TCP split.
//
// Framing, errors and limits follow nats-server v2.15.2 (the wire tests in test/ pin them).
//
// Four modes cover the four kinds of byte stream a server reads or a client reads:
// ServerMode (from a client), ClientMode (from a server), RouteMode (from a route peer; both
// ends of a route parse this) and LeafMode (from a leaf node connection; both ends too).
// The Kind of an op says what nats-server does with it on that kind of connection, which is
// not always what its name says: from a route, UNSUB is an RS- and PUB a routed message with
// no account; from a leaf, SUB and RS+ are an LS+ and PUB and RMSG a leaf message.
package parser

import (
	"bytes"
	"slices"
)

// Kind identifies a protocol operation.
type Kind uint8

const (
	KindNone    Kind = iota
	KindConnect      // CONNECT {json}
	KindPub          // PUB subj [reply] size\r\npayload\r\n
	KindHPub         // HPUB subj [reply] hdrsize totalsize\r\nheaders+payload\r\n
	KindSub          // SUB subj [queue] sid
	KindUnsub        // UNSUB sid [max]
	KindPing
	KindPong
	// server->client ops, parsed in client mode:
	KindInfo // INFO {json}
	KindMsg  // MSG subj sid [reply] size
	KindHMsg // HMSG subj sid [reply] hdrsize totalsize
	KindOK   // +OK
	KindErr  // -ERR 'text'

	// Route and leaf node ops, parsed in RouteMode and LeafMode (see each mode for the wire
	// forms that yield them). A message kind carries headers when HdrLen > 0: an HMSG whose
	// header size is 0 is a message without headers for nats-server too (it delivers by
	// hdr > 0), so RMSG and HMSG share a kind.

	// KindRSub is interest from a route: Account (nil on a pinned route), Subject, and for a
	// queue subscription Queue and Weight. From "RS+".
	KindRSub
	// KindRUnsub is interest withdrawn by a route: Account, Subject, Queue. From "RS-" or
	// "UNSUB" (nats-server reads a route's UNSUB as an RS-).
	KindRUnsub
	// KindRMsg is a message from a route: Account, Subject, Reply, Queues (the queue groups
	// this server is to pick a member of), Origin (the leaf cluster it came from, for LMSG),
	// HdrLen and Msg. From "RMSG", "HMSG" (HdrLen), "LMSG" (Origin; header sizes always
	// there) or "PUB"/"HPUB" (no Account: nats-server then looks up the account "", which does
	// not exist, except on a pinned route, where the route's account is used).
	KindRMsg
	// KindLSub is leaf interest: from a leaf connection ("LS+", or "RS+" or "SUB", which
	// nats-server reads as LS+) Subject and for a queue Queue and Weight; over a route ("LS+",
	// interest a peer holds for a leaf node) also Origin (its leaf's cluster, or "_" for none
	// when the route negotiated "ln") and Account.
	KindLSub
	// KindLUnsub is leaf interest withdrawn: Subject, Queue; over a route also Origin (unless
	// Parser.LeafUnsubNoOrigin) and Account. From "LS-", or from a leaf "RS-" or "UNSUB".
	KindLUnsub
	// KindLMsg is a message from a leaf connection: Subject, Reply, Queues, HdrLen, Msg.
	// From "LMSG", "RMSG", "HMSG" (HdrLen), "PUB" or "HPUB" (HdrLen).
	KindLMsg
	// KindIgnored is an op nats-server reads (limits and framing apply) and then ignores on
	// this connection: SUB from a route, A+/A- from a route or leaf node, and an LS- from a
	// leaf node whose argument has neither 1 nor 2 fields (nats-server looks it up as a key and
	// finds nothing). Arg holds the argument.
	KindIgnored
)

var kindNames = [...]string{"NONE", "CONNECT", "PUB", "HPUB", "SUB", "UNSUB", "PING", "PONG",
	"INFO", "MSG", "HMSG", "+OK", "-ERR", "RS+", "RS-", "RMSG", "LS+", "LS-", "LMSG", "IGNORED"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "UNKNOWN"
}

// Op is one parsed operation. All slices alias the caller's buffer and are valid only until
// the caller discards those bytes.
type Op struct {
	Kind Kind
	// The widths of the size fields written with leading zeros ("0005" is a size of 5 in 4
	// digits): nats-server writes them back as they came in the MSG/HMSG it delivers. The
	// digits follow from the sizes (AppendSize); 0 means none to keep.
	SizeWidth, HdrWidth uint8
	// Weight is a remote queue subscription's weight (RS+/LS+ with a queue): how many members
	// the group has there. A weight that does not parse or is below 1 counts as 1, as for
	// nats-server; 0 without a queue.
	Weight  int32
	Subject []byte
	Reply   []byte
	Queue   []byte
	Sid     []byte
	Arg     []byte // CONNECT/INFO JSON (trimmed), -ERR text (without the quotes); KindIgnored's argument
	Max     int    // UNSUB max; 0 if absent (or unparsable: nats-server then unsubscribes at once, as for 0)
	HdrLen  int    // header bytes at the start of Msg for HPUB/HMSG (and routed/leaf messages); 0 otherwise
	Msg     []byte // the whole message body (headers + payload), without the trailing \r\n
	// Account is the account of a route op (nil on a pinned route, Parser.NoAccount).
	Account []byte
	// Origin is the leaf node cluster a route's LS+/LS-/LMSG names ("_": none).
	Origin []byte
	// Queues is a routed or leaf message's run of queue group names, exactly as received
	// (separated by blanks, so it may hold tabs); nil when none. NextQueue walks it.
	Queues []byte
	// As is the subject a delivery shows when it is not the one routed on: a JetStream
	// consumer routes on its deliver subject (or a pull request's inbox) and shows the
	// stored message's subject. Only server code sets it; the parser never does.
	As []byte
}

// AppendSize appends v (at least 0) in decimal, left-padded with zeros to width digits.
// Every delivery formats its size: in place, this costs a fraction of strconv's general path.
func AppendSize(b []byte, v int, width uint8) []byte {
	u := uint(v) // unsigned: a division by 10 is then a multiply and a shift
	if width == 0 {
		switch {
		case u < 10:
			return append(b, byte('0'+u))
		case u < 100:
			return append(b, digits2[2*u], digits2[2*u+1])
		case u < 1000:
			t := u % 100
			return append(b, byte('0'+u/100), digits2[2*t], digits2[2*t+1])
		}
	}
	n := 1
	for x := u; x >= 10; x /= 10 {
		n++
	}
	n = max(n, int(width))
	l := len(b)
	if cap(b)-l < n {
		b = slices.Grow(b, n)
	}
	b = b[:l+n]
	for i := l + n - 1; i >= l; i-- {
		b[i] = byte('0' + u%10)
		u /= 10
	}
	return b
}

const digits2 = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" +
	"30313233343536373839" + "40414243444546474849" + "50515253545556575859" +
	"60616263646566676869" + "70717273747576777879" + "80818283848586878889" +
	"90919293949596979899"

// padWidth is a size field's width when it has leading zeros, else 0: the common case
// then costs a delivery nothing beyond formatting the size.
func padWidth(d []byte) uint8 {
	if len(d) > 1 && d[0] == '0' {
		return uint8(len(d))
	}
	return 0
}

// Mode selects which side of the protocol is parsed.
type Mode uint8

const (
	ServerMode Mode = iota // parse what clients send
	ClientMode             // parse what servers send
	// RouteMode parses what a route peer sends (both ends of a route parse it): RS+, RS-,
	// RMSG, HMSG, LS+, LS-, LMSG, A+/A- (ignored), SUB (ignored), UNSUB (an RS-), PUB/HPUB
	// (a routed message without account), CONNECT, INFO, PING, PONG, +OK, -ERR; MSG is an
	// unknown op. No payload limit applies (nats-server has none on routes) and the control
	// line may be 16 times MaxControlLine.
	RouteMode
	// LeafMode parses what a leaf node connection sends (both ends parse it): LS+ (also as
	// RS+ or SUB), LS- (also RS-, UNSUB), LMSG (also RMSG, PUB), HMSG (also HPUB), A+/A-
	// (ignored), CONNECT, INFO, PING, PONG, +OK, -ERR; MSG is an unknown op. MaxPayload
	// applies as for a client; the control line may be 16 times MaxControlLine.
	LeafMode
)

const (
	DefaultMaxControlLine = 4096
	DefaultMaxPayload     = 1 << 20

	// peerControlLine is how many times MaxControlLine a route or leaf node's control line
	// may be: nats-server allows that much for the origin, account, reply and queue groups.
	peerControlLine = 16
)

// Error is a protocol violation. The connection layer sends "-ERR '<Text>'\r\n" when Text is
// not empty and closes the connection when Close is set, recording Reason (the /connz close
// reason nats-server records for it).
type Error struct {
	Text   string
	Close  bool
	Reason string
}

func (e *Error) Error() string {
	if e.Text != "" {
		return "nats protocol: " + e.Text
	}
	return "nats protocol: " + e.Reason
}

var (
	ErrUnknownOp = &Error{Text: "Unknown Protocol Operation", Close: true, Reason: "Protocol Violation"}
	// ErrPayloadEnd is a message body not followed by CRLF (nats-server: Unknown Protocol
	// Operation). Next then leaves the op whose control line it had accepted in *op, without
	// Msg, for checks nats-server makes on that line before the body arrives.
	ErrPayloadEnd     = &Error{Text: "Unknown Protocol Operation", Close: true, Reason: "Protocol Violation"}
	ErrMaxControlLine = &Error{Text: "maximum control line exceeded", Close: true, Reason: "Maximum Control Line Exceeded"}
	ErrMaxPayload     = &Error{Text: "Maximum Payload Violation", Close: true, Reason: "Maximum Message Payload Exceeded"}
	// ErrProtocol is an argument error nats-server answers by closing without -ERR.
	ErrProtocol = &Error{Close: true, Reason: "Protocol Violation"}
)

// Parser holds the limits and the little state that survives between calls. The zero value
// parses client traffic with nats-server's default limits.
type Parser struct {
	Mode Mode
	// MaxControlLine is the server's max_control_line: 0 = 4096; < 0 = no limit. A route or
	// leaf node's control line may be 16 times as long.
	MaxControlLine int
	// MaxPayload: 0 = 1 MiB; < 0 = no limit; checked after the control line, before the body
	// arrives. RouteMode ignores it: nats-server sets no payload limit on routes.
	MaxPayload int
	// NoHeaders is set while the client has not negotiated headers:true in CONNECT. nats-server
	// then closes silently on HPUB before judging its arguments, so even an HPUB over
	// max_payload gets no -ERR; only this parser sees the op before that verdict. The same
	// holds for a route or leaf node whose CONNECT or INFO did not announce headers (it
	// still may send HMSG: nats-server takes those).
	NoHeaders bool
	// NoAccount is set, in RouteMode, on a route dedicated to one account (nats-server's
	// pinned accounts: cluster.accounts, and $SYS when routes are pooled; the route's INFO
	// carries route_account): its RS+, RS-, LS+, LS-, RMSG, HMSG and LMSG then carry no
	// account, and Op.Account is nil.
	NoAccount bool
	// LeafUnsubNoOrigin is set, in RouteMode, when the route's peer announced neither "lnocu"
	// nor "ln" in its INFO or CONNECT (older servers; v2.15.2 announces both): its LS- then
	// carries no origin cluster. Its LS+ and LMSG always do.
	LeafUnsubNoOrigin bool

	// need is the total size of the op whose control line was complete but whose body was not;
	// until that many bytes are buffered a call cannot succeed, so it returns at once instead of
	// re-parsing the control line for every chunk of a large body.
	need int
}

// Need reports, after Next returned n == 0, how many bytes in total the pending op needs
// (0 if unknown, e.g. still inside the control line).
func (p *Parser) Need() int { return p.need }

// Reset forgets the pending op, for reuse of the Parser on a new byte stream.
func (p *Parser) Reset() { p.need = 0 }

// sep classifies separator bytes. PUB and HPUB split on space and tab only, while SUB, UNSUB
// and MSG split on CR and LF as well (nats-server's processPub vs splitArg); the difference is
// visible only with stray CRs inside a line.
const (
	sepWS   = 1
	sepCRLF = 2
)

var sepTab = [256]uint8{' ': sepWS | sepCRLF, '\t': sepWS | sepCRLF, '\r': sepCRLF, '\n': sepCRLF}

// maxArgs is one more than the most fields any op split with it has (HMSG with reply, a
// route's LS+ with a queue: 5), so that a surplus field is detected without scanning further.
// Routed and leaf messages name any number of queue groups and are scanned with fields.
const maxArgs = 6

func split(arg []byte, dst *[maxArgs][]byte, mask uint8) int {
	n, start := 0, -1
	for i, b := range arg {
		if sepTab[b]&mask != 0 {
			if start >= 0 {
				if n == maxArgs {
					return n
				}
				dst[n] = arg[start:i]
				n++
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 && n < maxArgs {
		dst[n] = arg[start:]
		n++
	}
	return n
}

// parseSize mirrors nats-server: 1 to 9 decimal digits, anything else is -1. Nine digits keep
// any size far from overflow and make "PUB s 0000000001" as invalid as it is for the reference.
func parseSize(d []byte) int {
	if len(d) == 0 || len(d) > 9 {
		return -1
	}
	n := 0
	for _, c := range d {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

func isWS(c byte) bool { return c == ' ' || c == '\t' }

func trim(b []byte) []byte {
	for len(b) > 0 && sepTab[b[0]] != 0 {
		b = b[1:]
	}
	for len(b) > 0 && sepTab[b[len(b)-1]] != 0 {
		b = b[:len(b)-1]
	}
	return b
}

// wop is an op as named on the wire. The mode decides which are accepted and which Kind each
// one yields; the per-op argument parsers below work on wops.
type wop uint8

const (
	oNone wop = iota
	oPub
	oHPub
	oSub
	oUnsub
	oPing
	oPong
	oConnect
	oInfo
	oMsg
	oHMsg
	oOK
	oErr
	oRSub
	oRUnsub
	oRMsg
	oLSub
	oLUnsub
	oLMsg
	oASub
	oAUnsub
	oAU // "Au": nats-server takes a lower-case u after A for a minus

	// Prefixes, which the next byte decides; all ops are below them.
	oP  // PUB, PING, PONG
	oH  // HPUB, HMSG
	oR  // RS+, RS-, RMSG
	oL  // LS+, LS-, LMSG
	oA  // A+, A-
	oRS // RS+, RS-
	oLS // LS+, LS-
)

// words are the op names as typed by the spec (lower case); input is compared
// case-insensitively.
var words = [...]string{
	oPub:     "pub",
	oHPub:    "hpub",
	oSub:     "sub",
	oUnsub:   "unsub",
	oPing:    "ping",
	oPong:    "pong",
	oConnect: "connect",
	oInfo:    "info",
	oMsg:     "msg",
	oHMsg:    "hmsg",
	oOK:      "+ok",
	oErr:     "-err",
	oRSub:    "rs+",
	oRUnsub:  "rs-",
	oRMsg:    "rmsg",
	oLSub:    "ls+",
	oLUnsub:  "ls-",
	oLMsg:    "lmsg",
	oASub:    "a+",
	oAUnsub:  "a-",
	oAU:      "au",
}

// opStart maps an op's first byte to the op or prefix it starts, opNext a prefix and the next
// byte to the op or longer prefix; letters match in either case.
var opStart, opNext = opTables()

func opTables() (start [256]wop, next [oLS - oP + 1][256]wop) {
	set := func(t *[256]wop, m map[byte]wop) {
		for c, w := range m {
			t[c] = w
			if c >= 'a' && c <= 'z' {
				t[c-'a'+'A'] = w
			}
		}
	}
	set(&start, map[byte]wop{'p': oP, 'h': oH, 's': oSub, 'u': oUnsub, 'c': oConnect,
		'i': oInfo, 'm': oMsg, '+': oOK, '-': oErr, 'r': oR, 'l': oL, 'a': oA})
	set(&next[oP-oP], map[byte]wop{'u': oPub, 'i': oPing, 'o': oPong})
	set(&next[oH-oP], map[byte]wop{'p': oHPub, 'm': oHMsg})
	set(&next[oR-oP], map[byte]wop{'s': oRS, 'm': oRMsg})
	set(&next[oL-oP], map[byte]wop{'s': oLS, 'm': oLMsg})
	set(&next[oRS-oP], map[byte]wop{'+': oRSub, '-': oRUnsub})
	set(&next[oLS-oP], map[byte]wop{'+': oLSub, '-': oLUnsub})
	next[oA-oP]['+'], next[oA-oP]['-'], next[oA-oP]['u'] = oASub, oAUnsub, oAU
	return start, next
}

// modeOps is, per mode, the set of ops and prefixes (bit 1<<wop) it accepts: a prefix is
// rejected as soon as it arrives when the mode has no op it could start. oNone is never in
// it, and a Mode outside the known ones accepts nothing.
//
// A client's HMSG drives nats-server into a degenerate zero-size message state that only a
// bare "\r\n" survives; it is no op a client can use, so ServerMode rejects it. Clients may send
// INFO (nats-server parses its JSON, closing on a syntax error, and ignores it) and -ERR
// (nats-server closes the connection; the caller decides).
//
// From a route or a leaf node (nats-server's ROUTER and LEAF connections) every op a client
// may send is read, plus the R, L and A ops, and HMSG; MSG is not (nats-server's parser has
// no M state at the start of an op). What each one means there is in RouteMode and LeafMode.
var modeOps = [256]uint32{
	ServerMode: 1<<oP | 1<<oH | 1<<oPub | 1<<oHPub | 1<<oSub | 1<<oUnsub | 1<<oPing | 1<<oPong |
		1<<oConnect | 1<<oInfo | 1<<oOK | 1<<oErr,
	ClientMode: 1<<oP | 1<<oH | 1<<oPing | 1<<oPong | 1<<oInfo | 1<<oMsg | 1<<oHMsg | 1<<oOK |
		1<<oErr,
	RouteMode: peerOps,
	LeafMode:  peerOps,
}

const peerOps = 1<<oP | 1<<oH | 1<<oR | 1<<oL | 1<<oA | 1<<oRS | 1<<oLS |
	1<<oPub | 1<<oHPub | 1<<oHMsg | 1<<oSub | 1<<oUnsub | 1<<oPing | 1<<oPong | 1<<oConnect |
	1<<oInfo | 1<<oOK | 1<<oErr | 1<<oRSub | 1<<oRUnsub | 1<<oRMsg | 1<<oLSub | 1<<oLUnsub |
	1<<oLMsg | 1<<oASub | 1<<oAUnsub | 1<<oAU

// msgOps are the ops with a body.
const msgOps = 1<<oPub | 1<<oHPub | 1<<oMsg | 1<<oHMsg | 1<<oRMsg | 1<<oLMsg

// maxControlLine is the limit on a control line's argument (and on the blanks and junk
// around it) in this mode.
func (p *Parser) maxControlLine() int {
	mcl := p.MaxControlLine
	switch {
	case mcl == 0:
		mcl = DefaultMaxControlLine
	case mcl < 0:
		return maxInt
	}
	if p.Mode >= RouteMode { // RouteMode, LeafMode; no other mode gets this far
		if mcl > maxInt/peerControlLine {
			return maxInt
		}
		mcl *= peerControlLine
	}
	return mcl
}

const maxInt = int(^uint(0) >> 1)

// maxPayload is the limit on a message body in this mode; < 0 is none.
func (p *Parser) maxPayload() int {
	switch {
	case p.Mode == RouteMode:
		return -1
	case p.MaxPayload == 0:
		return DefaultMaxPayload
	}
	return p.MaxPayload
}

// Next parses one op from the front of buf. It returns n > 0 bytes consumed and fills *op when
// a whole op (including the body and its trailing CRLF) is present; n == 0 and err == nil when
// buf holds only part of an op (the caller keeps those bytes and calls again with more).
// *op is written only when n > 0. After an error the stream cannot be resynchronised;
// the error says what to send before closing.
//
// Next only identifies the op and frames it (name, separators, control line, body); the
// argument parsers below give each op its fields.
func (p *Parser) Next(buf []byte, op *Op) (n int, err error) {
	// need-1: the byte after the body is judged on its own (see below), so that a bad one is
	// reported on the same bytes whatever the split.
	if len(buf) < p.need-1 || len(buf) == 0 {
		return 0, nil
	}
	p.need = 0

	// Identify the op from as few bytes as decide it, so that garbage is rejected as soon as it
	// arrives, as nats-server's byte-at-a-time state machine does.
	ops := modeOps[p.Mode]
	w := opStart[buf[0]]
	i := 1 // bytes that decided w
	for ; w >= oP; i++ {
		if ops&(1<<w) == 0 {
			return 0, ErrUnknownOp
		}
		if i == len(buf) {
			return 0, nil
		}
		w = opNext[w-oP][buf[i]]
	}
	if ops&(1<<w) == 0 {
		return 0, ErrUnknownOp
	}
	// Then the rest of its name.
	word := words[w]
	wl := len(word)
	for ; i < wl && i < len(buf); i++ {
		if lower(buf[i]) != word[i] {
			return 0, ErrUnknownOp
		}
	}
	if len(buf) < wl {
		return 0, nil
	}
	mcl := p.maxControlLine()

	switch w {
	case oPing, oPong, oOK:
		// nats-server ignores anything between these names and the LF ("PING foo" is a PING).
		// It never limits that junk; we must, since an endless line would sit in our buffer.
		rest := buf[wl:]
		nl := bytes.IndexByte(rest, '\n')
		junk := nl
		if nl < 0 {
			junk = len(rest)
		}
		if junk > 0 && rest[junk-1] == '\r' {
			junk--
		}
		if junk > mcl {
			return 0, ErrMaxControlLine
		}
		if nl < 0 {
			return 0, nil
		}
		k := KindPing
		switch w {
		case oPong:
			k = KindPong
		case oOK:
			k = KindOK
		}
		*op = Op{Kind: k}
		return wl + nl + 1, nil
	}

	// The argument starts at the first byte after the name and its separators; CONNECT and
	// INFO need no separator ("CONNECT{}" is valid for nats-server), the others need one.
	pos := wl
	if w != oConnect && w != oInfo {
		if len(buf) == wl {
			return 0, nil
		}
		if !isWS(buf[wl]) {
			return 0, ErrUnknownOp
		}
		pos++
	}
	for pos < len(buf) && isWS(buf[pos]) {
		pos++
	}
	// nats-server skips any run of separators; bound it like the argument so that a stream of
	// blanks cannot grow the caller's buffer forever.
	if pos-wl > mcl {
		return 0, ErrMaxControlLine
	}
	if pos == len(buf) {
		return 0, nil
	}
	as := pos
	// The argument's first byte is taken as such even when it is CR or LF (nats-server's state
	// machine consumes it on entering the argument state), so the LF that ends the line is
	// searched for after it.
	nl := bytes.IndexByte(buf[as+1:], '\n')
	if nl < 0 {
		// Measured like the final argument will be at the least, so the verdict on a partial
		// line never differs from the one on the whole line.
		partial := len(buf) - as
		if partial > 1 && buf[len(buf)-1] == '\r' {
			partial--
		}
		if partial > mcl {
			return 0, ErrMaxControlLine
		}
		return 0, nil
	}
	nl += as + 1
	end := nl
	if end-1 > as && buf[end-1] == '\r' {
		end--
	}
	arg := buf[as:end]
	if len(arg) > mcl {
		return 0, ErrMaxControlLine
	}

	var o Op
	var size, hdr int
	switch w {
	case oConnect:
		*op = Op{Kind: KindConnect, Arg: trim(arg)}
		return nl + 1, nil
	case oInfo:
		*op = Op{Kind: KindInfo, Arg: trim(arg)}
		return nl + 1, nil
	case oErr:
		*op = Op{Kind: KindErr, Arg: errText(arg)}
		return nl + 1, nil
	case oSub:
		switch p.Mode {
		case ServerMode:
			o.Kind = KindSub
			err = parseSubArgs(arg, &o)
		case RouteMode:
			o = Op{Kind: KindIgnored, Arg: trim(arg)}
		default:
			err = parseLeafSubArgs(arg, &o)
		}
	case oUnsub:
		switch p.Mode {
		case ServerMode:
			o.Kind = KindUnsub
			err = parseUnsubArgs(arg, &o)
		case RouteMode:
			err = p.parseRouteUnsubArgs(arg, &o, false)
		default:
			parseLeafUnsubArgs(arg, &o)
		}
	case oPub:
		o.Kind = msgKind[p.Mode]
		size, err = parsePubArgs(arg, &o)
	case oHPub:
		if p.NoHeaders {
			return 0, ErrProtocol
		}
		o.Kind = hmsgKind[p.Mode]
		size, hdr, err = parseHPubArgs(arg, &o)
	case oMsg:
		o.Kind = KindMsg
		size, err = parseMsgArgs(arg, &o)
	case oHMsg:
		if p.Mode == ClientMode {
			o.Kind = KindHMsg
			size, hdr, err = parseHMsgArgs(arg, &o)
		} else {
			size, hdr, err = p.parseQueueMsgArgs(arg, &o, false, 2)
		}
	case oRMsg:
		size, hdr, err = p.parseQueueMsgArgs(arg, &o, false, 1)
	case oLMsg:
		if p.Mode == RouteMode {
			size, hdr, err = p.parseQueueMsgArgs(arg, &o, true, 2)
		} else {
			size, hdr, err = p.parseQueueMsgArgs(arg, &o, false, 1)
		}
	case oRSub, oLSub:
		if p.Mode == RouteMode {
			err = p.parseRouteSubArgs(arg, &o, w == oLSub)
		} else {
			err = parseLeafSubArgs(arg, &o)
		}
	case oRUnsub, oLUnsub:
		if p.Mode == RouteMode {
			err = p.parseRouteUnsubArgs(arg, &o, w == oLUnsub)
		} else {
			parseLeafUnsubArgs(arg, &o)
		}
	case oASub, oAUnsub, oAU:
		// nats-server acts on A+/A- only from a gateway.
		o = Op{Kind: KindIgnored, Arg: trim(arg)}
	}
	if err != nil {
		return 0, err
	}
	if msgOps&(1<<w) == 0 {
		*op = o
		return nl + 1, nil
	}

	// Body: exactly size bytes then CRLF; a bare LF is not accepted here. The byte after the
	// body is judged as soon as it is present, as nats-server does.
	if mp := p.maxPayload(); mp > 0 && size > mp {
		return 0, ErrMaxPayload
	}
	bs := nl + 1
	be := bs + size
	if len(buf) > be && buf[be] != '\r' {
		*op = o
		return 0, ErrPayloadEnd
	}
	if len(buf) < be+2 {
		p.need = be + 2
		return 0, nil
	}
	if buf[be+1] != '\n' {
		*op = o
		return 0, ErrPayloadEnd
	}
	o.HdrLen = hdr
	o.Msg = buf[bs:be:be]
	*op = o
	return be + 2, nil
}

// errText is a -ERR argument without blanks and quotes around it.
func errText(arg []byte) []byte {
	t := trim(arg)
	for len(t) > 0 && t[0] == '\'' {
		t = t[1:]
	}
	for len(t) > 0 && t[len(t)-1] == '\'' {
		t = t[:len(t)-1]
	}
	return t
}

// The argument parsers: each fills *o from one op's argument (the control line without the
// op name, blanks before it and CRLF after it) and returns the sizes of the body to follow.
// A malformed argument is ErrProtocol (nats-server closes without -ERR); a size that does not
// parse is returned as -1 and rejected with the same error.

// parseSubArgs: SUB <subject> [<queue>] <sid>.
func parseSubArgs(arg []byte, o *Op) error {
	var a [maxArgs][]byte
	switch split(arg, &a, sepCRLF) {
	case 2:
		o.Subject, o.Sid = a[0], a[1]
	case 3:
		o.Subject, o.Queue, o.Sid = a[0], a[1], a[2]
	default:
		return ErrProtocol
	}
	return nil
}

// parseUnsubArgs: UNSUB <sid> [<max>]; a max that does not parse counts as 0, as for
// nats-server (which then unsubscribes at once).
func parseUnsubArgs(arg []byte, o *Op) error {
	var a [maxArgs][]byte
	switch split(arg, &a, sepCRLF) {
	case 1:
		o.Sid = a[0]
	case 2:
		o.Sid, o.Max = a[0], max(parseSize(a[1]), 0)
	default:
		return ErrProtocol
	}
	return nil
}

// parsePubArgs: PUB <subject> [<reply>] <size>; split on blanks only (nats-server's processPub).
func parsePubArgs(arg []byte, o *Op) (size int, err error) {
	var a [maxArgs][]byte
	switch split(arg, &a, sepWS) {
	case 2:
		o.Subject, o.SizeWidth = a[0], padWidth(a[1])
		size = parseSize(a[1])
	case 3:
		o.Subject, o.Reply, o.SizeWidth = a[0], a[1], padWidth(a[2])
		size = parseSize(a[2])
	default:
		return 0, ErrProtocol
	}
	if size < 0 {
		return 0, ErrProtocol
	}
	return size, nil
}

// parseHPubArgs: HPUB <subject> [<reply>] <hdrsize> <size>; split on blanks only.
func parseHPubArgs(arg []byte, o *Op) (size, hdr int, err error) {
	var a [maxArgs][]byte
	switch split(arg, &a, sepWS) {
	case 3:
		o.Subject, o.HdrWidth, o.SizeWidth = a[0], padWidth(a[1]), padWidth(a[2])
		hdr, size = parseSize(a[1]), parseSize(a[2])
	case 4:
		o.Subject, o.Reply, o.HdrWidth, o.SizeWidth = a[0], a[1], padWidth(a[2]), padWidth(a[3])
		hdr, size = parseSize(a[2]), parseSize(a[3])
	default:
		return 0, 0, ErrProtocol
	}
	return checkSizes(size, hdr)
}

// parseMsgArgs: MSG <subject> <sid> [<reply>] <size>.
func parseMsgArgs(arg []byte, o *Op) (size int, err error) {
	var a [maxArgs][]byte
	switch split(arg, &a, sepCRLF) {
	case 3:
		o.Subject, o.Sid, o.SizeWidth = a[0], a[1], padWidth(a[2])
		size = parseSize(a[2])
	case 4:
		o.Subject, o.Sid, o.Reply, o.SizeWidth = a[0], a[1], a[2], padWidth(a[3])
		size = parseSize(a[3])
	default:
		return 0, ErrProtocol
	}
	if size < 0 {
		return 0, ErrProtocol
	}
	return size, nil
}

// parseHMsgArgs: HMSG <subject> <sid> [<reply>] <hdrsize> <size>.
func parseHMsgArgs(arg []byte, o *Op) (size, hdr int, err error) {
	var a [maxArgs][]byte
	switch split(arg, &a, sepCRLF) {
	case 4:
		o.Subject, o.Sid, o.HdrWidth, o.SizeWidth = a[0], a[1], padWidth(a[2]), padWidth(a[3])
		hdr, size = parseSize(a[2]), parseSize(a[3])
	case 5:
		o.Subject, o.Sid, o.Reply, o.HdrWidth, o.SizeWidth = a[0], a[1], a[2], padWidth(a[3]), padWidth(a[4])
		hdr, size = parseSize(a[3]), parseSize(a[4])
	default:
		return 0, 0, ErrProtocol
	}
	return checkSizes(size, hdr)
}

// checkSizes rejects a header size or a total size that does not parse, and a header larger
// than the whole.
func checkSizes(size, hdr int) (int, int, error) {
	if hdr < 0 || size < 0 || hdr > size {
		return 0, 0, ErrProtocol
	}
	return size, hdr, nil
}

// msgKind and hmsgKind are the kinds a PUB and an HPUB yield per mode: from a route or leaf
// node nats-server reads them as that connection's messages (with no queue groups, and from
// a route with no account).
var msgKind = [256]Kind{ServerMode: KindPub, RouteMode: KindRMsg, LeafMode: KindLMsg}
var hmsgKind = [256]Kind{ServerMode: KindHPub, RouteMode: KindRMsg, LeafMode: KindLMsg}

// weight is a remote queue subscription's weight: nats-server counts one that does not parse
// or is below 1 as a single member.
func weight(d []byte) int32 {
	if w := parseSize(d); w > 0 {
		return int32(w)
	}
	return 1
}

// parseRouteSubArgs (RouteMode): RS+ [<account>] <subject> [<queue> <weight>], and with leaf
// set LS+ <origin> [<account>] <subject> [<queue> <weight>] (nats-server's processRemoteSub).
func (p *Parser) parseRouteSubArgs(arg []byte, o *Op, leaf bool) error {
	var a [maxArgs][]byte
	n := split(arg, &a, sepCRLF)
	o.Kind = KindRSub
	i := 0
	if leaf {
		o.Kind = KindLSub
		o.Origin = a[i]
		i++
	}
	if !p.NoAccount {
		o.Account = a[i]
		i++
	}
	switch n - i {
	case 1:
		o.Subject = a[i]
	case 3:
		o.Subject, o.Queue, o.Weight = a[i], a[i+1], weight(a[i+2])
	default:
		return ErrProtocol
	}
	return nil
}

// parseRouteUnsubArgs (RouteMode): RS- [<account>] <subject> [<queue>], and with leaf set
// LS- <origin> [<account>] <subject> [<queue>], the origin there unless the peer is too old
// to send it (nats-server's processRemoteUnsub).
func (p *Parser) parseRouteUnsubArgs(arg []byte, o *Op, leaf bool) error {
	var a [maxArgs][]byte
	n := split(arg, &a, sepCRLF)
	o.Kind = KindRUnsub
	i := 0
	if leaf {
		o.Kind = KindLUnsub
		if !p.LeafUnsubNoOrigin {
			o.Origin = a[i]
			i++
		}
	}
	if !p.NoAccount {
		o.Account = a[i]
		i++
	}
	switch n - i {
	case 1:
		o.Subject = a[i]
	case 2:
		o.Subject, o.Queue = a[i], a[i+1]
	default:
		return ErrProtocol
	}
	return nil
}

// parseLeafSubArgs (LeafMode): LS+ <subject> [<queue> <weight>] (nats-server's
// processLeafSub).
func parseLeafSubArgs(arg []byte, o *Op) error {
	var a [maxArgs][]byte
	o.Kind = KindLSub
	switch split(arg, &a, sepCRLF) {
	case 1:
		o.Subject = a[0]
	case 3:
		o.Subject, o.Queue, o.Weight = a[0], a[1], weight(a[2])
	default:
		return ErrProtocol
	}
	return nil
}

// parseLeafUnsubArgs (LeafMode): LS- <subject> [<queue>]. nats-server never rejects it: it
// looks the argument up as the key of a subscription, and with more or fewer fields finds
// none, so such an LS- is KindIgnored.
func parseLeafUnsubArgs(arg []byte, o *Op) {
	var a [maxArgs][]byte
	o.Kind = KindLUnsub
	switch split(arg, &a, sepCRLF) {
	case 1:
		o.Subject = a[0]
	case 2:
		o.Subject, o.Queue = a[0], a[1]
	default:
		*o = Op{Kind: KindIgnored, Arg: trim(arg)}
	}
}

// parseQueueMsgArgs parses a routed (RouteMode) or leaf (LeafMode) message's argument:
//
//	[<origin>] [<account>] <subject> [<reply> | + <reply> <queue>... | | <queue>...] [<hdrsize>] <size>
//
// The origin is there when origin is set (a route's LMSG); the account in RouteMode unless
// NoAccount; trail is the number of size fields (2 with a header size). As for nats-server
// (processRoutedMsgArgs, processRoutedHeaderMsgArgs, processRoutedOriginClusterMsgArgs,
// processLeafMsgArgs, processLeafHeaderMsgArgs) the number of fields decides: one field
// between the subject and the sizes is a reply, more start with the indicator, "+" (a reply
// follows, then queues) or "|" (queues only). Any number of queue groups may follow.
func (p *Parser) parseQueueMsgArgs(arg []byte, o *Op, origin bool, trail int) (size, hdr int, err error) {
	var f fields
	f.scan(arg)
	o.Kind = KindLMsg
	account := false
	if p.Mode == RouteMode {
		o.Kind = KindRMsg
		account = !p.NoAccount
	}
	i := 0 // the next field
	if origin {
		i++
	}
	if account {
		i++
	}
	mid := f.n - i - 1 - trail // fields between the subject and the sizes
	if mid < 0 {
		return 0, 0, ErrProtocol
	}
	if origin {
		o.Origin = f.at(arg, 0)
	}
	if account {
		o.Account = f.at(arg, i-1)
	}
	o.Subject = f.at(arg, i)
	i++
	switch {
	case mid == 1:
		o.Reply = f.at(arg, i)
	case mid > 1:
		ind := f.at(arg, i)
		if len(ind) != 1 {
			return 0, 0, ErrProtocol
		}
		switch ind[0] {
		case '+':
			o.Reply = f.at(arg, i+1)
			i += 2
		case '|':
			i++
		default:
			return 0, 0, ErrProtocol
		}
		if last := f.n - trail - 1; i <= last {
			o.Queues = arg[f.span(i).s:f.span(last).e]
		}
	}
	if trail == 2 {
		d := f.at(arg, f.n-2)
		o.HdrWidth, hdr = padWidth(d), parseSize(d)
	}
	d := f.at(arg, f.n-1)
	o.SizeWidth, size = padWidth(d), parseSize(d)
	return checkSizes(size, hdr)
}

// fields is a scan of an argument of any length that keeps, without allocating, what a
// message's argument needs: its first fields (origin, account, subject, indicator, reply, a
// first queue) and its last (the sizes, the last queue).
type fields struct {
	n    int
	head [maxArgs]span
	tail [3]span // the last three fields, the last at tail[2]
}

type span struct{ s, e int }

func (f *fields) scan(arg []byte) {
	start := -1
	for i, b := range arg {
		if sepTab[b]&sepCRLF != 0 {
			if start >= 0 {
				f.add(start, i)
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		f.add(start, len(arg))
	}
}

func (f *fields) add(s, e int) {
	if f.n < len(f.head) {
		f.head[f.n] = span{s, e}
	}
	f.tail[0], f.tail[1], f.tail[2] = f.tail[1], f.tail[2], span{s, e}
	f.n++
}

// span is field i, which must be one of the first len(head) or the last len(tail).
func (f *fields) span(i int) span {
	if i < len(f.head) {
		return f.head[i]
	}
	return f.tail[len(f.tail)-f.n+i]
}

func (f *fields) at(arg []byte, i int) []byte {
	sp := f.span(i)
	return arg[sp.s:sp.e]
}
