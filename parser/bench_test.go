package parser

import (
	"strings"
	"testing"
)

func benchOps(b *testing.B, p Parser, in string) {
	buf := []byte(in)
	var op Op
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		rest := buf
		for len(rest) > 0 {
			n, err := p.Next(rest, &op)
			if err != nil || n == 0 {
				b.Fatalf("n=%d err=%v", n, err)
			}
			rest = rest[n:]
		}
	}
}

func BenchmarkPub16(b *testing.B) {
	benchOps(b, Parser{}, "PUB foo.bar 16\r\n0123456789abcdef\r\n")
}

func BenchmarkPubReply16(b *testing.B) {
	benchOps(b, Parser{}, "PUB foo.bar _INBOX.abcdefghijklmnop.1 16\r\n0123456789abcdef\r\n")
}

func BenchmarkHPub(b *testing.B) {
	benchOps(b, Parser{}, "HPUB foo.bar 35 51\r\nNATS/1.0\r\nNats-Msg-Id: abcdefgh\r\n\r\n0123456789abcdef\r\n")
}

func BenchmarkSub(b *testing.B) {
	benchOps(b, Parser{}, "SUB foo.bar.* workers 12345\r\n")
}

func BenchmarkMsg(b *testing.B) {
	benchOps(b, Parser{Mode: ClientMode}, "MSG foo.bar 12345 16\r\n0123456789abcdef\r\n")
}

func BenchmarkPubBatch100(b *testing.B) {
	benchOps(b, Parser{}, strings.Repeat("PUB foo.bar 16\r\n0123456789abcdef\r\n", 100))
}

// BenchmarkPubLargeSplit is the case the Need short-cut exists for: a 1 MiB body arriving in
// 64 KiB reads, with the loop calling Next after each.
func BenchmarkPubLargeSplit(b *testing.B) {
	body := strings.Repeat("x", 1<<20)
	buf := []byte("PUB big 1048576\r\n" + body + "\r\n")
	var op Op
	var p Parser
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		for have := 64 << 10; ; have += 64 << 10 {
			have = min(have, len(buf))
			n, err := p.Next(buf[:have], &op)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				break
			}
		}
	}
}

func BenchmarkRouteRMSG(b *testing.B) {
	const body = " 16\r\n0123456789abcdef\r\n"
	for _, bc := range []struct{ name, line string }{
		{"plain", "RMSG $G foo.bar"},
		{"reply", "RMSG $G foo.bar _INBOX.abcdefghijklmnop.1"},
		{"queues3", "RMSG $G foo.bar | workers.a workers.b workers.c"},
		{"reply_queues3", "RMSG $G foo.bar + _INBOX.abcdefghijklmnop.1 workers.a workers.b workers.c"},
	} {
		b.Run(bc.name, func(b *testing.B) { benchOps(b, route, bc.line+body) })
	}
}

func BenchmarkRouteRSub(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchOps(b, route, "RS+ $G foo.bar.*\r\n") })
	b.Run("queue", func(b *testing.B) { benchOps(b, route, "RS+ $G foo.bar.* workers 3\r\n") })
}

func BenchmarkLeafLMSG(b *testing.B) {
	benchOps(b, leaf, "LMSG foo.bar + _INBOX.abcdefghijklmnop.1 workers.a 16\r\n0123456789abcdef\r\n")
}

func BenchmarkAppendRMsgLine(b *testing.B) {
	out := make([]byte, 0, 256)
	acc, subj, reply := []byte("$G"), []byte("foo.bar"), []byte("_INBOX.abcdefghijklmnop.1")
	qs := [][]byte{[]byte("workers.a"), []byte("workers.b"), []byte("workers.c")}
	b.ReportAllocs()
	for b.Loop() {
		out = AppendRMsgLine(out[:0], acc, subj, reply, qs, 0, 16)
	}
}

func BenchmarkAppendRSub(b *testing.B) {
	out := make([]byte, 0, 256)
	acc, subj, q := []byte("$G"), []byte("foo.bar.*"), []byte("workers")
	b.ReportAllocs()
	for b.Loop() {
		out = AppendRSub(out[:0], acc, subj, q, 3)
	}
}
