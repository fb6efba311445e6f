package parser

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

var (
	route      = Parser{Mode: RouteMode}
	pinned     = Parser{Mode: RouteMode, NoAccount: true}
	oldPeer    = Parser{Mode: RouteMode, LeafUnsubNoOrigin: true}
	leaf       = Parser{Mode: LeafMode}
	leafSmall  = Parser{Mode: LeafMode, MaxPayload: 4}
	routeSmall = Parser{Mode: RouteMode, MaxPayload: 4, MaxControlLine: 8}
)

func rsub(acc, subj, queue string, w int32) rop {
	return rop{Kind: KindRSub, Account: acc, Subject: subj, Queue: queue, Weight: w}
}
func runsub(acc, subj, queue string) rop {
	return rop{Kind: KindRUnsub, Account: acc, Subject: subj, Queue: queue}
}
func rmsg(acc, subj, reply, queues string, hdr int, m string) rop {
	return rop{Kind: KindRMsg, Account: acc, Subject: subj, Reply: reply, Queues: queues, HdrLen: hdr, Msg: m}
}
func rlmsg(origin, acc, subj, reply, queues string, hdr int, m string) rop {
	r := rmsg(acc, subj, reply, queues, hdr, m)
	r.Origin = origin
	return r
}
func lsub(origin, acc, subj, queue string, w int32) rop {
	return rop{Kind: KindLSub, Origin: origin, Account: acc, Subject: subj, Queue: queue, Weight: w}
}
func lunsub(origin, acc, subj, queue string) rop {
	return rop{Kind: KindLUnsub, Origin: origin, Account: acc, Subject: subj, Queue: queue}
}
func lmsg(subj, reply, queues string, hdr int, m string) rop {
	return rop{Kind: KindLMsg, Subject: subj, Reply: reply, Queues: queues, HdrLen: hdr, Msg: m}
}
func ign(a string) rop { return rop{Kind: KindIgnored, Arg: a} }

var manyQueues = func() string {
	var q []string
	for i := range 1000 {
		q = append(q, fmt.Sprintf("queue.%d", i))
	}
	return strings.Join(q, " ")
}()

var routeCases = []tcase{
	// RS+ / RS-
	{name: "rs+", cfg: route, in: "RS+ $G foo\r\n", ops: []rop{rsub("$G", "foo", "", 0)}},
	{name: "rs+ queue", cfg: route, in: "RS+ $G bar q1 1\r\n", ops: []rop{rsub("$G", "bar", "q1", 1)}},
	{name: "rs+ lower blanks", cfg: route, in: "rs+\t$G  bar\tq1 17 \n", ops: []rop{rsub("$G", "bar", "q1", 17)}},
	{name: "rs+ weight zero is one", cfg: route, in: "RS+ A s q 0\r\n", ops: []rop{rsub("A", "s", "q", 1)}},
	{name: "rs+ weight junk is one", cfg: route, in: "RS+ A s q x\r\n", ops: []rop{rsub("A", "s", "q", 1)}},
	{name: "rs+ weight negative is one", cfg: route, in: "RS+ A s q -5\r\n", ops: []rop{rsub("A", "s", "q", 1)}},
	{name: "rs+ weight ten digits is one", cfg: route, in: "RS+ A s q 1000000000\r\n", ops: []rop{rsub("A", "s", "q", 1)}},
	{name: "rs+ weight max", cfg: route, in: "RS+ A s q 999999999\r\n", ops: []rop{rsub("A", "s", "q", 999999999)}},
	{name: "rs+ one field", cfg: route, in: "RS+ $G\r\n", err: ErrProtocol},
	{name: "rs+ three fields", cfg: route, in: "RS+ $G foo q\r\n", err: ErrProtocol},
	{name: "rs+ five fields", cfg: route, in: "RS+ $G foo q 1 x\r\n", err: ErrProtocol},
	{name: "rs+ many fields", cfg: route, in: "RS+ a b c d e f g h\r\n", err: ErrProtocol},
	{name: "rs+ no blank", cfg: route, in: "RS+$G foo\r\n", err: ErrUnknownOp},
	{name: "rs+ no args", cfg: route, in: "RS+\r\n", err: ErrUnknownOp},
	{name: "rs other", cfg: route, in: "RS* $G foo\r\n", err: ErrUnknownOp},
	{name: "r other", cfg: route, in: "RX", err: ErrUnknownOp},
	{name: "rs partial", cfg: route, in: "RS", rest: "RS"},
	{name: "r partial", cfg: route, in: "r", rest: "r"},
	{name: "rs+ pinned", cfg: pinned, in: "RS+ foo\r\n", ops: []rop{rsub("", "foo", "", 0)}},
	{name: "rs+ pinned queue", cfg: pinned, in: "RS+ foo q 2\r\n", ops: []rop{rsub("", "foo", "q", 2)}},
	{name: "rs+ pinned with account", cfg: pinned, in: "RS+ $G foo\r\n", err: ErrProtocol},
	{name: "rs-", cfg: route, in: "RS- $G foo\r\n", ops: []rop{runsub("$G", "foo", "")}},
	{name: "rs- queue", cfg: route, in: "RS- $G foo q1\r\n", ops: []rop{runsub("$G", "foo", "q1")}},
	{name: "rs- one field", cfg: route, in: "RS- $G\r\n", err: ErrProtocol},
	{name: "rs- four fields", cfg: route, in: "RS- $G foo q 1\r\n", err: ErrProtocol},
	{name: "rs- pinned", cfg: pinned, in: "RS- foo q\r\n", ops: []rop{runsub("", "foo", "q")}},
	{name: "rs- pinned three", cfg: pinned, in: "RS- A foo q\r\n", err: ErrProtocol},
	{name: "unsub is rs-", cfg: route, in: "UNSUB $G foo q\r\n", ops: []rop{runsub("$G", "foo", "q")}},
	{name: "unsub bad", cfg: route, in: "UNSUB 1\r\n", err: ErrProtocol},
	{name: "sub ignored", cfg: route, in: "SUB foo 1\r\n", ops: []rop{ign("foo 1")}},
	{name: "sub ignored any args", cfg: route, in: "sub a b c d e f g h i\r\n", ops: []rop{ign("a b c d e f g h i")}},
	{name: "sub no args", cfg: route, in: "SUB\r\n", err: ErrUnknownOp},

	// LS+ / LS- over a route: origin first.
	{name: "route ls+", cfg: route, in: "LS+ hub $G foo\r\n", ops: []rop{lsub("hub", "$G", "foo", "", 0)}},
	{name: "route ls+ no origin queue", cfg: route, in: "LS+ _ $G foo q 3\r\n", ops: []rop{lsub("_", "$G", "foo", "q", 3)}},
	{name: "route ls+ missing subject", cfg: route, in: "LS+ $G foo\r\n", err: ErrProtocol},
	{name: "route ls+ four", cfg: route, in: "LS+ c $G foo q\r\n", err: ErrProtocol},
	{name: "route ls+ pinned", cfg: pinned, in: "LS+ hub foo q 2\r\n", ops: []rop{lsub("hub", "", "foo", "q", 2)}},
	{name: "route ls-", cfg: route, in: "LS- hub $G foo\r\n", ops: []rop{lunsub("hub", "$G", "foo", "")}},
	{name: "route ls- queue", cfg: route, in: "LS- hub $G foo q\r\n", ops: []rop{lunsub("hub", "$G", "foo", "q")}},
	{name: "route ls- five", cfg: route, in: "LS- hub $G foo q x\r\n", err: ErrProtocol},
	{name: "route ls- old peer", cfg: oldPeer, in: "LS- $G foo q\r\n", ops: []rop{lunsub("", "$G", "foo", "q")}},
	{name: "route ls- old peer ls+ keeps origin", cfg: oldPeer, in: "LS+ hub $G foo\r\n", ops: []rop{lsub("hub", "$G", "foo", "", 0)}},
	{name: "route ls- pinned", cfg: pinned, in: "LS- hub foo\r\n", ops: []rop{lunsub("hub", "", "foo", "")}},
	{name: "ls other", cfg: route, in: "LSX", err: ErrUnknownOp},
	{name: "l other", cfg: route, in: "LX", err: ErrUnknownOp},

	// RMSG
	{name: "rmsg", cfg: route, in: "RMSG $G foo 2\r\nhi\r\n", ops: []rop{rmsg("$G", "foo", "", "", 0, "hi")}},
	{name: "rmsg reply", cfg: route, in: "RMSG $G foo r.1 2\r\nhi\r\n", ops: []rop{rmsg("$G", "foo", "r.1", "", 0, "hi")}},
	{name: "rmsg queue", cfg: route, in: "RMSG $G bar | q1 2\r\nhi\r\n", ops: []rop{rmsg("$G", "bar", "", "q1", 0, "hi")}},
	{name: "rmsg reply queues", cfg: route, in: "rmsg $G bar + r q1 q2 q3 2\r\nhi\r\n", ops: []rop{rmsg("$G", "bar", "r", "q1 q2 q3", 0, "hi")}},
	{name: "rmsg queues raw", cfg: route, in: "RMSG $G bar |\tq1\tq2  q3 \t2\r\nhi\r\n", ops: []rop{rmsg("$G", "bar", "", "q1\tq2  q3", 0, "hi")}},
	{name: "rmsg plus no queues", cfg: route, in: "RMSG $G bar + r 2\r\nhi\r\n", ops: []rop{rmsg("$G", "bar", "r", "", 0, "hi")}},
	{name: "rmsg bar alone is a reply", cfg: route, in: "RMSG $G bar | 2\r\nhi\r\n", ops: []rop{rmsg("$G", "bar", "|", "", 0, "hi")}},
	{name: "rmsg plus alone is a reply", cfg: route, in: "RMSG $G bar + 2\r\nhi\r\n", ops: []rop{rmsg("$G", "bar", "+", "", 0, "hi")}},
	{name: "rmsg padded", cfg: route, in: "RMSG $G bar | q 0005\r\nhello\r\n", ops: []rop{rmsg("$G", "bar", "", "q", 0, "hello")}},
	{name: "rmsg many queues", cfg: route, in: "RMSG $G bar + _INBOX.x " + manyQueues + " 1\r\nx\r\n",
		ops: []rop{rmsg("$G", "bar", "_INBOX.x", manyQueues, 0, "x")}},
	{name: "rmsg empty", cfg: route, in: "RMSG $G foo 0\r\n\r\n", ops: []rop{rmsg("$G", "foo", "", "", 0, "")}},
	{name: "rmsg payload looks like ops", cfg: route, in: "RMSG $G foo 6\r\nPING\r\n\r\nPONG\r\n", ops: []rop{rmsg("$G", "foo", "", "", 0, "PING\r\n"), pong}},
	{name: "rmsg partial body", cfg: route, in: "RMSG $G foo 5\r\nhel", rest: "RMSG $G foo 5\r\nhel"},
	{name: "rmsg two fields", cfg: route, in: "RMSG $G foo\r\n", err: ErrProtocol},
	{name: "rmsg bad indicator", cfg: route, in: "RMSG $G foo x q 2\r\n", err: ErrProtocol},
	{name: "rmsg long indicator", cfg: route, in: "RMSG $G foo ++ r q 2\r\n", err: ErrProtocol},
	{name: "rmsg bad size", cfg: route, in: "RMSG $G foo r x\r\n", err: ErrProtocol},
	{name: "rmsg negative", cfg: route, in: "RMSG $G foo -1\r\n", err: ErrProtocol},
	{name: "rmsg queues bad size", cfg: route, in: "RMSG $G foo | q1 q2 2x\r\n", err: ErrProtocol},
	{name: "rmsg no payload limit", cfg: routeSmall, in: "RMSG $G foo 999999999\r\n", rest: "RMSG $G foo 999999999\r\n"},
	{name: "rmsg payload end", cfg: route, in: "RMSG $G foo 2\r\nhiX", err: ErrPayloadEnd},
	{name: "rmsg pinned", cfg: pinned, in: "RMSG foo 2\r\nhi\r\n", ops: []rop{rmsg("", "foo", "", "", 0, "hi")}},
	{name: "rmsg pinned reply", cfg: pinned, in: "RMSG foo r 2\r\nhi\r\n", ops: []rop{rmsg("", "foo", "r", "", 0, "hi")}},
	{name: "rmsg pinned queues", cfg: pinned, in: "RMSG foo | q1 q2 2\r\nhi\r\n", ops: []rop{rmsg("", "foo", "", "q1 q2", 0, "hi")}},
	{name: "rmsg pinned reply queues", cfg: pinned, in: "RMSG foo + r q1 2\r\nhi\r\n", ops: []rop{rmsg("", "foo", "r", "q1", 0, "hi")}},
	{name: "rmsg pinned one field", cfg: pinned, in: "RMSG 2\r\n", err: ErrProtocol},

	// HMSG on a route
	{name: "route hmsg", cfg: route, in: "HMSG $G foo 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{rmsg("$G", "foo", "", "", 12, hdrBlock+"hi")}},
	{name: "route hmsg reply", cfg: route, in: "HMSG $G foo r 12 12\r\n" + hdrBlock + "\r\n", ops: []rop{rmsg("$G", "foo", "r", "", 12, hdrBlock)}},
	{name: "route hmsg queues", cfg: route, in: "hmsg $G foo + r q1 q2 012 014\r\n" + hdrBlock + "hi\r\n", ops: []rop{rmsg("$G", "foo", "r", "q1 q2", 12, hdrBlock+"hi")}},
	{name: "route hmsg bar queues", cfg: route, in: "HMSG $G foo | q1 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{rmsg("$G", "foo", "", "q1", 12, hdrBlock+"hi")}},
	{name: "route hmsg zero header", cfg: route, in: "HMSG $G foo 0 2\r\nhi\r\n", ops: []rop{rmsg("$G", "foo", "", "", 0, "hi")}},
	{name: "route hmsg three fields", cfg: route, in: "HMSG $G foo 2\r\n", err: ErrProtocol},
	{name: "route hmsg hdr > size", cfg: route, in: "HMSG $G foo 3 2\r\n", err: ErrProtocol},
	{name: "route hmsg bad hdr", cfg: route, in: "HMSG $G foo x 2\r\n", err: ErrProtocol},
	{name: "route hmsg bad indicator", cfg: route, in: "HMSG $G foo r q 1 2\r\n", err: ErrProtocol},
	{name: "route hmsg pinned", cfg: pinned, in: "HMSG foo 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{rmsg("", "foo", "", "", 12, hdrBlock+"hi")}},
	{name: "route hmsg pinned queues", cfg: pinned, in: "HMSG foo | q 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{rmsg("", "foo", "", "q", 12, hdrBlock+"hi")}},

	// LMSG on a route: origin, account, header sizes always.
	{name: "route lmsg", cfg: route, in: "LMSG hub $G foo 0 2\r\nhi\r\n", ops: []rop{rlmsg("hub", "$G", "foo", "", "", 0, "hi")}},
	{name: "route lmsg reply", cfg: route, in: "LMSG hub $G foo r 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{rlmsg("hub", "$G", "foo", "r", "", 12, hdrBlock+"hi")}},
	{name: "route lmsg queues", cfg: route, in: "LMSG hub $G foo + r q1 q2 0 2\r\nhi\r\n", ops: []rop{rlmsg("hub", "$G", "foo", "r", "q1 q2", 0, "hi")}},
	{name: "route lmsg bar queues", cfg: route, in: "LMSG hub $G foo | q1 0 2\r\nhi\r\n", ops: []rop{rlmsg("hub", "$G", "foo", "", "q1", 0, "hi")}},
	{name: "route lmsg no header size", cfg: route, in: "LMSG hub $G foo 2\r\n", err: ErrProtocol},
	{name: "route lmsg bad indicator", cfg: route, in: "LMSG hub $G foo - q 0 2\r\n", err: ErrProtocol},
	{name: "route lmsg pinned", cfg: pinned, in: "LMSG hub foo 0 2\r\nhi\r\n", ops: []rop{rlmsg("hub", "", "foo", "", "", 0, "hi")}},
	{name: "route lmsg pinned three", cfg: pinned, in: "LMSG hub foo 2\r\n", err: ErrProtocol},

	// PUB / HPUB from a route: a routed message without an account, no payload limit.
	{name: "route pub", cfg: route, in: "PUB foo 2\r\nhi\r\n", ops: []rop{rmsg("", "foo", "", "", 0, "hi")}},
	{name: "route pub reply", cfg: route, in: "PUB foo r 2\r\nhi\r\n", ops: []rop{rmsg("", "foo", "r", "", 0, "hi")}},
	{name: "route hpub", cfg: route, in: "HPUB foo 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{rmsg("", "foo", "", "", 12, hdrBlock+"hi")}},
	{name: "route pub no payload limit", cfg: routeSmall, in: "PUB foo 999999999\r\n", rest: "PUB foo 999999999\r\n"},
	{name: "route pub args", cfg: route, in: "PUB $G foo r 2\r\n", err: ErrProtocol},
	{name: "route hpub without headers", cfg: Parser{Mode: RouteMode, NoHeaders: true}, in: "HPUB foo 12 14\r\n", err: ErrProtocol},

	// A+ / A- are read and ignored (nats-server acts on them from gateways only).
	{name: "a+", cfg: route, in: "A+ $G\r\n", ops: []rop{ign("$G")}},
	{name: "a-", cfg: route, in: "a- $G \r\n", ops: []rop{ign("$G")}},
	{name: "au", cfg: route, in: "Au $G\r\n", ops: []rop{ign("$G")}},
	{name: "AU", cfg: route, in: "AU $G\r\n", err: ErrUnknownOp},
	{name: "a+ no blank", cfg: route, in: "A+$G\r\n", err: ErrUnknownOp},
	{name: "a other", cfg: route, in: "AX", err: ErrUnknownOp},
	{name: "a partial", cfg: route, in: "A", rest: "A"},

	// What a route shares with clients.
	{name: "route msg", cfg: route, in: "MSG foo 1 2\r\nhi\r\n", err: ErrUnknownOp},
	{name: "route m", cfg: route, in: "M", err: ErrUnknownOp},
	{name: "route session", cfg: route,
		in: "CONNECT {\"name\":\"S\"}\r\nINFO {}\r\nPING\r\nPONG\r\n+OK\r\nRS+ $G a\r\nRMSG $G a 1\r\nx\r\n-ERR 'x'\r\n",
		ops: []rop{arg(KindConnect, `{"name":"S"}`), arg(KindInfo, "{}"), ping, pong, ok, rsub("$G", "a", "", 0),
			rmsg("$G", "a", "", "", 0, "x"), arg(KindErr, "x")}},

	// A route's control line may be 16 times max_control_line.
	{name: "route mcl at limit", cfg: routeSmall, in: "RS+ $G " + strings.Repeat("a", 125) + "\r\n", ops: []rop{rsub("$G", strings.Repeat("a", 125), "", 0)}},
	{name: "route mcl over", cfg: routeSmall, in: "RS+ $G " + strings.Repeat("a", 126) + "\r\n", err: ErrMaxControlLine},
	{name: "route mcl over partial", cfg: routeSmall, in: "RMSG $G " + strings.Repeat("a", 130), err: ErrMaxControlLine},
	{name: "route mcl ping junk", cfg: routeSmall, in: "PING" + strings.Repeat(" ", 129), err: ErrMaxControlLine},
	{name: "route mcl default", cfg: route, in: "RMSG $G " + strings.Repeat("a", 65536-4) + " 0\r\n\r\n", err: ErrMaxControlLine},
	{name: "route mcl default ok", cfg: route, in: "RMSG $G " + strings.Repeat("a", 65536-5) + " 0\r\n\r\n",
		ops: []rop{rmsg("$G", strings.Repeat("a", 65536-5), "", "", 0, "")}},

	// Leaf node connections.
	{name: "leaf ls+", cfg: leaf, in: "LS+ foo\r\n", ops: []rop{lsub("", "", "foo", "", 0)}},
	{name: "leaf ls+ queue", cfg: leaf, in: "LS+ foo q 3\r\n", ops: []rop{lsub("", "", "foo", "q", 3)}},
	{name: "leaf ls+ weight junk", cfg: leaf, in: "ls+ foo q 0\r\n", ops: []rop{lsub("", "", "foo", "q", 1)}},
	{name: "leaf rs+ is ls+", cfg: leaf, in: "RS+ foo q 2\r\n", ops: []rop{lsub("", "", "foo", "q", 2)}},
	{name: "leaf sub is ls+", cfg: leaf, in: "SUB foo\r\n", ops: []rop{lsub("", "", "foo", "", 0)}},
	{name: "leaf ls+ two", cfg: leaf, in: "LS+ foo q\r\n", err: ErrProtocol},
	{name: "leaf ls+ four", cfg: leaf, in: "LS+ $G foo q 1\r\n", err: ErrProtocol},
	{name: "leaf sub with sid", cfg: leaf, in: "SUB foo 1\r\n", err: ErrProtocol},
	{name: "leaf ls-", cfg: leaf, in: "LS- foo\r\n", ops: []rop{lunsub("", "", "foo", "")}},
	{name: "leaf ls- queue", cfg: leaf, in: "LS- foo q\r\n", ops: []rop{lunsub("", "", "foo", "q")}},
	{name: "leaf rs- is ls-", cfg: leaf, in: "RS- foo q\r\n", ops: []rop{lunsub("", "", "foo", "q")}},
	{name: "leaf unsub is ls-", cfg: leaf, in: "UNSUB foo\r\n", ops: []rop{lunsub("", "", "foo", "")}},
	{name: "leaf ls- three ignored", cfg: leaf, in: "LS- a b c\r\n", ops: []rop{ign("a b c")}},
	{name: "leaf ls- empty ignored", cfg: leaf, in: "LS- \r\n", ops: []rop{ign("")}},
	{name: "leaf lmsg", cfg: leaf, in: "LMSG foo 2\r\nhi\r\n", ops: []rop{lmsg("foo", "", "", 0, "hi")}},
	{name: "leaf lmsg reply", cfg: leaf, in: "LMSG foo r 2\r\nhi\r\n", ops: []rop{lmsg("foo", "r", "", 0, "hi")}},
	{name: "leaf lmsg queues", cfg: leaf, in: "LMSG foo + r q1 q2 2\r\nhi\r\n", ops: []rop{lmsg("foo", "r", "q1 q2", 0, "hi")}},
	{name: "leaf lmsg bar queues", cfg: leaf, in: "LMSG foo | q1 2\r\nhi\r\n", ops: []rop{lmsg("foo", "", "q1", 0, "hi")}},
	{name: "leaf lmsg many queues", cfg: leaf, in: "LMSG foo | " + manyQueues + " 2\r\nhi\r\n", ops: []rop{lmsg("foo", "", manyQueues, 0, "hi")}},
	{name: "leaf rmsg is lmsg", cfg: leaf, in: "RMSG foo r 2\r\nhi\r\n", ops: []rop{lmsg("foo", "r", "", 0, "hi")}},
	{name: "leaf hmsg", cfg: leaf, in: "HMSG foo 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{lmsg("foo", "", "", 12, hdrBlock+"hi")}},
	{name: "leaf hmsg reply", cfg: leaf, in: "HMSG foo r 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{lmsg("foo", "r", "", 12, hdrBlock+"hi")}},
	{name: "leaf hmsg queues", cfg: leaf, in: "HMSG foo + r q 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{lmsg("foo", "r", "q", 12, hdrBlock+"hi")}},
	{name: "leaf pub", cfg: leaf, in: "PUB foo r 2\r\nhi\r\n", ops: []rop{lmsg("foo", "r", "", 0, "hi")}},
	{name: "leaf hpub", cfg: leaf, in: "HPUB foo 12 14\r\n" + hdrBlock + "hi\r\n", ops: []rop{lmsg("foo", "", "", 12, hdrBlock+"hi")}},
	{name: "leaf lmsg one field", cfg: leaf, in: "LMSG foo\r\n", err: ErrProtocol},
	{name: "leaf lmsg bad indicator", cfg: leaf, in: "LMSG foo x y 2\r\n", err: ErrProtocol},
	{name: "leaf lmsg bad size", cfg: leaf, in: "LMSG foo | q x\r\n", err: ErrProtocol},
	{name: "leaf hmsg two fields", cfg: leaf, in: "HMSG foo 2\r\n", err: ErrProtocol},
	{name: "leaf hmsg hdr > size", cfg: leaf, in: "HMSG foo 3 2\r\n", err: ErrProtocol},
	{name: "leaf lmsg max payload", cfg: leafSmall, in: "LMSG foo 5\r\n", err: ErrMaxPayload},
	{name: "leaf lmsg at max payload", cfg: leafSmall, in: "LMSG foo | q 4\r\nabcd\r\n", ops: []rop{lmsg("foo", "", "q", 0, "abcd")}},
	{name: "leaf hmsg max payload", cfg: leafSmall, in: "HMSG foo 1 5\r\n", err: ErrMaxPayload},
	{name: "leaf hmsg size error before max payload", cfg: leafSmall, in: "HMSG foo 9 5\r\n", err: ErrProtocol},
	{name: "leaf pub max payload", cfg: leafSmall, in: "PUB foo 5\r\n", err: ErrMaxPayload},
	{name: "leaf default max payload", cfg: leaf, in: "LMSG foo 1048577\r\n", err: ErrMaxPayload},
	{name: "leaf a+", cfg: leaf, in: "A+ $G\r\n", ops: []rop{ign("$G")}},
	{name: "leaf msg", cfg: leaf, in: "MSG foo 1 2\r\nhi\r\n", err: ErrUnknownOp},
	{name: "leaf mcl", cfg: Parser{Mode: LeafMode, MaxControlLine: 2}, in: "LS+ " + strings.Repeat("a", 33) + "\r\n", err: ErrMaxControlLine},
	{name: "leaf mcl at limit", cfg: Parser{Mode: LeafMode, MaxControlLine: 2}, in: "LS+ " + strings.Repeat("a", 32) + "\r\n", ops: []rop{lsub("", "", strings.Repeat("a", 32), "", 0)}},

	// The other modes do not take route or leaf ops.
	{name: "server rs-", in: "RS- $G foo\r\n", err: ErrUnknownOp},
	{name: "server r", in: "R", err: ErrUnknownOp},
	{name: "server l", in: "L", err: ErrUnknownOp},
	{name: "server a", in: "A", err: ErrUnknownOp},
	{name: "client r", cfg: client, in: "R", err: ErrUnknownOp},
	{name: "client lmsg", cfg: client, in: "LMSG foo 1\r\nx\r\n", err: ErrUnknownOp},
	{name: "unknown mode", cfg: Parser{Mode: 9}, in: "PING\r\n", err: ErrUnknownOp},
}

func TestRouteParser(t *testing.T) {
	for _, tc := range routeCases {
		t.Run(tc.name, func(t *testing.T) {
			want := result{ops: tc.ops, err: tc.err, rest: tc.rest}
			if tc.err != nil && len(tc.ops) == 0 {
				want.rest = tc.in
			}
			got := parseWhole(t, tc.cfg, []byte(tc.in))
			if !got.equal(want) {
				t.Fatalf("input %q:\n got %v\nwant %v", tc.in, got, want)
			}
			if len(tc.in) < 2000 {
				checkSplitInvariance(t, tc.cfg, []byte(tc.in), want)
			} else {
				// Every split is quadratic here; a sample does.
				r := rand.New(rand.NewSource(1))
				for range 200 {
					ch := randomSplits(r, []byte(tc.in))
					if got := parseChunks(t, tc.cfg, ch); !got.equal(want) {
						t.Fatalf("splits of %q:\n got %v\nwant %v", tc.in, got, want)
					}
				}
			}
		})
	}
}

func TestKindNames(t *testing.T) {
	for k, want := range map[Kind]string{KindRSub: "RS+", KindRUnsub: "RS-", KindRMsg: "RMSG",
		KindLSub: "LS+", KindLUnsub: "LS-", KindLMsg: "LMSG", KindIgnored: "IGNORED", KindIgnored + 1: "UNKNOWN"} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", k, k.String(), want)
		}
	}
}

// TestRouteSizeArgs: routed sizes are kept with their widths, like a client's.
func TestRouteSizeArgs(t *testing.T) {
	p := route
	var op Op
	in := "HMSG $G foo | q 012 0014\r\n" + hdrBlock + "hi\r\n"
	if n, err := p.Next([]byte(in), &op); n != len(in) || err != nil {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if s, h := string(AppendSize(nil, len(op.Msg), op.SizeWidth)), string(AppendSize(nil, op.HdrLen, op.HdrWidth)); s != "0014" || h != "012" {
		t.Fatalf("sizes %q %q", s, h)
	}
}

func TestRoutePayloadEndKeepsOp(t *testing.T) {
	for _, tc := range []struct {
		cfg Parser
		in  string
		op  rop
	}{
		{route, "RMSG $G foo.* + r q1 q2 2\r\nhiX", rmsg("$G", "foo.*", "r", "q1 q2", 0, "")},
		{leaf, "LMSG a..b | q 2\r\nhi\rX", lmsg("a..b", "", "q", 0, "")},
	} {
		p := tc.cfg
		var op Op
		if n, err := p.Next([]byte(tc.in), &op); n != 0 || err != ErrPayloadEnd {
			t.Fatalf("%q: n=%d err=%v", tc.in, n, err)
		}
		if got := toR(&op); got != tc.op || op.Msg != nil {
			t.Fatalf("%q: op %v, want %v", tc.in, got, tc.op)
		}
	}
}

func TestNextQueue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{"q", []string{"q"}},
		{"q1 q2\tq3  q4\r\nq5 ", []string{"q1", "q2", "q3", "q4", "q5"}},
		{manyQueues, strings.Fields(manyQueues)},
	} {
		var got []string
		for q, rest := NextQueue([]byte(tc.in)); q != nil; q, rest = NextQueue(rest) {
			if cap(q) != len(q) {
				t.Fatalf("%q: name %q not capped", tc.in, q)
			}
			got = append(got, string(q))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
	if q, rest := NextQueue(nil); q != nil || rest != nil {
		t.Fatal("nil")
	}
}

// TestAppenders pins the exact bytes nats-server writes.
func TestAppenders(t *testing.T) {
	b := func(s string) []byte {
		if s == "" {
			return nil
		}
		return []byte(s)
	}
	qs := func(s ...string) [][]byte {
		var out [][]byte
		for _, q := range s {
			out = append(out, []byte(q))
		}
		return out
	}
	for _, tc := range []struct{ got, want string }{
		{string(AppendRSub(nil, b("$G"), b("foo"), nil, 0)), "RS+ $G foo\r\n"},
		{string(AppendRSub(nil, b("$G"), b("bar"), b("q1"), 1)), "RS+ $G bar q1 1\r\n"},
		{string(AppendRSub(nil, b("$G"), b("bar"), b("q1"), 0)), "RS+ $G bar q1 1\r\n"},
		{string(AppendRSub(nil, b("$G"), b("bar"), b("q1"), 2147483647)), "RS+ $G bar q1 2147483647\r\n"},
		{string(AppendRSub(nil, nil, b("bar"), b("q1"), 12)), "RS+ bar q1 12\r\n"},
		{string(AppendRUnsub(nil, b("$G"), b("foo"), nil)), "RS- $G foo\r\n"},
		{string(AppendRUnsub(nil, b("$G"), b("foo"), b("q"))), "RS- $G foo q\r\n"},
		{string(AppendRUnsub(nil, nil, b("foo"), b("q"))), "RS- foo q\r\n"},
		{string(AppendRMsgLine(nil, b("$G"), b("foo"), nil, nil, 0, 2)), "RMSG $G foo 2\r\n"},
		{string(AppendRMsgLine(nil, b("$G"), b("foo"), b("r.1"), nil, 0, 2)), "RMSG $G foo r.1 2\r\n"},
		{string(AppendRMsgLine(nil, b("$G"), b("bar"), nil, qs("q1"), 0, 2)), "RMSG $G bar | q1 2\r\n"},
		{string(AppendRMsgLine(nil, b("$G"), b("bar"), b("r"), qs("q1", "q2"), 0, 2)), "RMSG $G bar + r q1 q2 2\r\n"},
		{string(AppendRMsgLine(nil, b("$G"), b("bar"), b("r"), qs("q1", "q2"), 12, 14)), "HMSG $G bar + r q1 q2 12 14\r\n"},
		{string(AppendRMsgLine(nil, b("$G"), b("bar"), nil, nil, 12, 14)), "HMSG $G bar 12 14\r\n"},
		{string(AppendRMsgLine(nil, nil, b("bar"), nil, qs("q"), 0, 0)), "RMSG bar | q 0\r\n"},
		{string(AppendRMsgLine(nil, nil, b("bar"), b("r"), nil, 3, 5)), "HMSG bar r 3 5\r\n"},
		{string(AppendLSub(nil, b("foo"), nil, 5)), "LS+ foo\r\n"},
		{string(AppendLSub(nil, b("foo"), b("q"), 5)), "LS+ foo q 5\r\n"},
		{string(AppendLSub(nil, b("foo"), b("q"), -1)), "LS+ foo q 1\r\n"},
		{string(AppendLUnsub(nil, b("foo"), b("q"))), "LS- foo q\r\n"},
		{string(AppendLUnsub(nil, b("foo"), nil)), "LS- foo\r\n"},
		{string(AppendLMsgLine(nil, b("foo"), nil, nil, 0, 2)), "LMSG foo 2\r\n"},
		{string(AppendLMsgLine(nil, b("foo"), b("r"), qs("a", "b"), 0, 2)), "LMSG foo + r a b 2\r\n"},
		{string(AppendLMsgLine(nil, b("foo"), nil, qs("a"), 12, 14)), "HMSG foo | a 12 14\r\n"},
		{string(AppendRouteLSub(nil, b("hub"), b("$G"), b("foo"), nil, 0)), "LS+ hub $G foo\r\n"},
		{string(AppendRouteLSub(nil, b("_"), nil, b("foo"), b("q"), 3)), "LS+ _ foo q 3\r\n"},
		{string(AppendRouteLUnsub(nil, b("hub"), b("$G"), b("foo"), b("q"))), "LS- hub $G foo q\r\n"},
		{string(AppendRouteLUnsub(nil, nil, b("$G"), b("foo"), nil)), "LS- $G foo\r\n"},
		{string(AppendRouteLMsgLine(nil, b("hub"), b("$G"), b("foo"), nil, nil, 0, 2)), "LMSG hub $G foo 0 2\r\n"},
		{string(AppendRouteLMsgLine(nil, b("hub"), nil, b("foo"), b("r"), qs("q"), 12, 14)), "LMSG hub foo + r q 12 14\r\n"},
		{string(AppendRMsgLine([]byte("x"), b("A"), b("s"), nil, nil, 0, 1048576)), "xRMSG A s 1048576\r\n"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// queueNames lists Queues' names.
func queueNames(q []byte) []string {
	var out []string
	for n, rest := NextQueue(q); n != nil; n, rest = NextQueue(rest) {
		out = append(out, string(n))
	}
	return out
}

func nonNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// reencode writes op back with the appender for its kind and mode, or returns nil when it has
// no canonical form: KindIgnored, and a route message without account on a route that
// carries accounts (from PUB, which nats-server routes to the account "").
func reencode(p *Parser, op *Op) []byte {
	var qs [][]byte
	for n, rest := NextQueue(op.Queues); n != nil; n, rest = NextQueue(rest) {
		qs = append(qs, n)
	}
	var b []byte
	switch {
	case op.Kind == KindRSub:
		b = AppendRSub(nil, op.Account, op.Subject, op.Queue, op.Weight)
	case op.Kind == KindRUnsub:
		b = AppendRUnsub(nil, op.Account, op.Subject, op.Queue)
	case op.Kind == KindRMsg && (op.Account != nil) == !p.NoAccount:
		if op.Origin != nil {
			b = AppendRouteLMsgLine(nil, op.Origin, op.Account, op.Subject, op.Reply, qs, op.HdrLen, len(op.Msg))
		} else {
			b = AppendRMsgLine(nil, op.Account, op.Subject, op.Reply, qs, op.HdrLen, len(op.Msg))
		}
	case op.Kind == KindLSub && p.Mode == RouteMode:
		b = AppendRouteLSub(nil, op.Origin, op.Account, op.Subject, op.Queue, op.Weight)
	case op.Kind == KindLUnsub && p.Mode == RouteMode:
		b = AppendRouteLUnsub(nil, op.Origin, op.Account, op.Subject, op.Queue)
	case op.Kind == KindLSub:
		b = AppendLSub(nil, op.Subject, op.Queue, op.Weight)
	case op.Kind == KindLUnsub:
		b = AppendLUnsub(nil, op.Subject, op.Queue)
	case op.Kind == KindLMsg:
		b = AppendLMsgLine(nil, op.Subject, op.Reply, qs, op.HdrLen, len(op.Msg))
	default:
		return nil
	}
	if op.Kind == KindRMsg || op.Kind == KindLMsg {
		b = append(b, op.Msg...)
		b = append(b, '\r', '\n')
	}
	return b
}

// sameOp compares two ops field by field as far as the wire form decides them: queue runs by
// their names, not their blanks.
func sameOp(a, b *Op) bool {
	ra, rb := toR(a), toR(b)
	ra.Queues, rb.Queues = "", ""
	return ra == rb && fmt.Sprint(queueNames(a.Queues)) == fmt.Sprint(queueNames(b.Queues))
}

// checkReencode: an op written back by its appender parses to the same op. Fields holding
// CR or LF (possible from PUB, which splits on blanks only) have no such form.
func checkReencode(t testing.TB, p Parser, op *Op) {
	t.Helper()
	for _, f := range [][]byte{op.Subject, op.Reply, op.Account} {
		if bytes.ContainsAny(f, "\r\n") {
			return
		}
	}
	b := reencode(&p, op)
	if b == nil {
		return
	}
	p.Reset()
	var back Op
	n, err := p.Next(b, &back)
	if err != nil || n != len(b) || !sameOp(op, &back) {
		t.Fatalf("%v written as %q parses to n=%d err=%v %v", toR(op), b, n, err, toR(&back))
	}
}

// TestRoundTrip: what the appenders write parses back to what they were given, in every
// form (account or none, reply or none, 0 to many queues, headers or none).
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	name := func() []byte {
		const chars = "abcxyz.*>$_-+|0123456789"
		b := make([]byte, 1+r.Intn(12))
		for i := range b {
			b[i] = chars[r.Intn(len(chars))]
		}
		return b
	}
	maybe := func() []byte {
		if r.Intn(2) == 0 {
			return nil
		}
		return name()
	}
	for i := range 20000 {
		var qs [][]byte
		if r.Intn(2) == 0 {
			for range r.Intn(6) {
				qs = append(qs, name())
			}
		}
		acc, subj, reply, origin, queue := maybe(), name(), maybe(), name(), maybe()
		w := int32(r.Intn(5))
		hdr := r.Intn(3) * r.Intn(20)
		body := make([]byte, hdr+r.Intn(20))
		r.Read(body)
		p := Parser{Mode: RouteMode, NoAccount: acc == nil}
		var in []byte
		var want Op
		switch i % 9 {
		case 0:
			in = AppendRSub(nil, acc, subj, queue, w)
			want = Op{Kind: KindRSub, Account: acc, Subject: subj, Queue: queue}
			if queue != nil {
				want.Weight = max(w, 1)
			}
		case 1:
			in = AppendRUnsub(nil, acc, subj, queue)
			want = Op{Kind: KindRUnsub, Account: acc, Subject: subj, Queue: queue}
		case 2:
			in = append(AppendRMsgLine(nil, acc, subj, reply, qs, hdr, len(body)), body...)
			want = Op{Kind: KindRMsg, Account: acc, Subject: subj, Reply: reply, HdrLen: hdr, Msg: body}
		case 3:
			in = append(AppendRouteLMsgLine(nil, origin, acc, subj, reply, qs, hdr, len(body)), body...)
			want = Op{Kind: KindRMsg, Origin: origin, Account: acc, Subject: subj, Reply: reply, HdrLen: hdr, Msg: body}
		case 4:
			in = AppendRouteLSub(nil, origin, acc, subj, queue, w)
			want = Op{Kind: KindLSub, Origin: origin, Account: acc, Subject: subj, Queue: queue}
			if queue != nil {
				want.Weight = max(w, 1)
			}
		case 5:
			o := maybe()
			p.LeafUnsubNoOrigin = o == nil
			in = AppendRouteLUnsub(nil, o, acc, subj, queue)
			want = Op{Kind: KindLUnsub, Origin: o, Account: acc, Subject: subj, Queue: queue}
		case 6:
			p = Parser{Mode: LeafMode, MaxPayload: -1}
			in = AppendLSub(nil, subj, queue, w)
			want = Op{Kind: KindLSub, Subject: subj, Queue: queue}
			if queue != nil {
				want.Weight = max(w, 1)
			}
		case 7:
			p = Parser{Mode: LeafMode, MaxPayload: -1}
			in = AppendLUnsub(nil, subj, queue)
			want = Op{Kind: KindLUnsub, Subject: subj, Queue: queue}
		case 8:
			p = Parser{Mode: LeafMode, MaxPayload: -1}
			in = append(AppendLMsgLine(nil, subj, reply, qs, hdr, len(body)), body...)
			want = Op{Kind: KindLMsg, Subject: subj, Reply: reply, HdrLen: hdr, Msg: body}
		}
		if want.Kind == KindRMsg || want.Kind == KindLMsg {
			in = append(in, '\r', '\n')
			if len(qs) > 0 {
				want.Queues = bytes.Join(qs, []byte(" "))
			}
		}
		var got Op
		n, err := p.Next(in, &got)
		if err != nil || n != len(in) || toR(&got) != toR(&want) {
			t.Fatalf("%q (mode %d): n=%d err=%v\n got %v\nwant %v", in, p.Mode, n, err, toR(&got), toR(&want))
		}
		checkReencode(t, p, &got)
	}
}

// validRoute and validLeaf are the building blocks of the property tests' streams.
var validRoute = []string{
	"CONNECT {\"name\":\"S\",\"headers\":true}\r\n", "INFO {\"cluster\":\"c\"}\r\n",
	"PING\r\n", "PONG\r\n", "+OK\r\n",
	"RS+ $G foo\r\n", "RS+ $G foo.* q1 3\r\n", "rs- $G foo\r\n", "RS- $G foo.* q1\r\n",
	"LS+ hub $G foo\r\n", "LS+ _ $G bar q 2\r\n", "LS- hub $G foo\r\n", "UNSUB $G foo\r\n",
	"RMSG $G foo 5\r\nhello\r\n", "RMSG $G foo r.1 0\r\n\r\n", "RMSG $G foo | q1 q2 2\r\nhi\r\n",
	"RMSG $G foo + _INBOX.a q1 q2 q3 4\r\nPING\r\n",
	"HMSG $G foo 12 14\r\n" + hdrBlock + "hi\r\n", "HMSG $G foo + r q 12 12\r\n" + hdrBlock + "\r\n",
	"LMSG hub $G foo 0 2\r\nhi\r\n", "LMSG hub $G foo | q 12 12\r\n" + hdrBlock + "\r\n",
	"SUB foo 1\r\n", "A+ $G\r\n", "A- $G\r\n", "PUB foo 2\r\nhi\r\n",
}

var validLeaf = []string{
	"CONNECT {\"headers\":true}\r\n", "INFO {}\r\n", "PING\r\n", "PONG\r\n",
	"LS+ foo\r\n", "LS+ foo.> q 5\r\n", "LS- foo\r\n", "LS- foo.> q\r\n", "SUB bar\r\n", "RS+ x q 1\r\n",
	"LMSG foo 5\r\nhello\r\n", "LMSG foo r 0\r\n\r\n", "LMSG foo + r q1 q2 2\r\nhi\r\n",
	"LMSG foo | q1 4\r\nPING\r\n", "HMSG foo 12 14\r\n" + hdrBlock + "hi\r\n",
	"HMSG foo | a b 12 12\r\n" + hdrBlock + "\r\n", "PUB foo 1\r\nx\r\n", "A- $G\r\n", "LS- a b c\r\n",
}

func TestRouteSplitInvariance(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, mode := range []struct {
		cfg   Parser
		parts []string
	}{{route, validRoute}, {leaf, validLeaf}} {
		all := []byte(strings.Join(mode.parts, ""))
		for _, s := range append(mode.parts, string(all)) {
			want := parseWhole(t, mode.cfg, []byte(s))
			if want.err != nil || want.rest != "" {
				t.Fatalf("stream %q does not parse: %v", s, want)
			}
			checkSplitInvariance(t, mode.cfg, []byte(s), want)
		}
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

func TestRouteZeroAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	for _, tc := range []struct {
		cfg Parser
		in  string
	}{
		{route, strings.Join(validRoute, "")},
		{leaf, strings.Join(validLeaf, "")},
		{route, "RMSG $G foo + r " + manyQueues + " 2\r\nhi\r\n"},
		{pinned, "RMSG foo | q 5\r\nhel"},
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
				for q, rest := NextQueue(op.Queues); q != nil; q, rest = NextQueue(rest) {
				}
				b = b[n:]
			}
			p.Reset()
		})
		if allocs != 0 {
			t.Errorf("%.40q…: %v allocs per run", tc.in, allocs)
		}
	}
	out := make([]byte, 0, 4096)
	acc, subj, reply, q := []byte("$G"), []byte("foo.bar"), []byte("_INBOX.x"), []byte("workers")
	qs := [][]byte{q, q, q}
	allocs := testing.AllocsPerRun(100, func() {
		b := out[:0]
		b = AppendRSub(b, acc, subj, q, 3)
		b = AppendRUnsub(b, acc, subj, q)
		b = AppendRMsgLine(b, acc, subj, reply, qs, 12, 100)
		b = AppendLSub(b, subj, q, 3)
		b = AppendLUnsub(b, subj, q)
		b = AppendLMsgLine(b, subj, reply, qs, 0, 100)
		b = AppendRouteLSub(b, acc, acc, subj, q, 3)
		b = AppendRouteLUnsub(b, acc, acc, subj, q)
		_ = AppendRouteLMsgLine(b, acc, acc, subj, reply, qs, 0, 100)
	})
	if allocs != 0 {
		t.Errorf("appenders: %v allocs per run", allocs)
	}
}
