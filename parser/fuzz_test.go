package parser

import (
	"math/rand"
	"strings"
	"testing"
)

// fuzzConfig maps the fuzzer's cfg byte onto a parser: bit 0 picks the mode, bit 1 picks tiny
// limits so that the limit paths get exercised by short inputs, bit 2 refuses headers.
func fuzzConfig(cfg uint8) Parser {
	p := Parser{}
	if cfg&1 != 0 {
		p.Mode = ClientMode
	}
	if cfg&4 != 0 {
		p.NoHeaders = true
	}
	if cfg&2 != 0 {
		p.MaxControlLine = 24
		p.MaxPayload = 16
	}
	return p
}

func FuzzParser(f *testing.F) {
	var seeds []string
	for _, tc := range cases {
		seeds = append(seeds, tc.in)
	}
	seeds = append(seeds, strings.Join(validServer, ""), strings.Join(validClient, ""),
		"PUB foo 5\r\nhello\r\nPUB foo 5\r\nhe", "SUB "+strings.Repeat("x", 30)+" 1\r\n",
		"HPUB a 5 3\r\n", "PUB a 999999999\r\n", "CONNECT\n{}\n", "PUB \nfoo 1\nx\r\n",
		"PING\rPONG\n", "UNSUB 1\r2\r\n", "-ERR ''\r\n", "+OKAY\r\n")
	for i, s := range seeds {
		for cfg := uint8(0); cfg < 8; cfg++ {
			f.Add([]byte(s), cfg, uint64(i))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, cfg uint8, seed uint64) {
		p := fuzzConfig(cfg)
		want := parseWhole(t, p, data)
		// The same bytes in any chunks must give the same ops, the same verdict and, without
		// an error, the same unconsumed tail (parseChunks checks n, aliasing and Need on the way).
		r := rand.New(rand.NewSource(int64(seed)))
		for range 4 {
			ch := randomSplits(r, data)
			if got := parseChunks(t, p, ch); !got.equal(want) {
				t.Fatalf("cfg %d splits %q:\n got %v\nwant %v", cfg, ch, got, want)
			}
		}
		if len(data) < 64 {
			one := make([][]byte, len(data))
			for i := range data {
				one[i] = data[i : i+1]
			}
			if got := parseChunks(t, p, one); !got.equal(want) {
				t.Fatalf("cfg %d byte-at-a-time %q:\n got %v\nwant %v", cfg, data, got, want)
			}
		}
	})
}

// peerFuzzConfig maps the fuzzer's cfg byte onto a route or leaf node parser: bit 0 drops
// the account (a pinned route), bit 1 picks tiny limits, bit 2 refuses headers, bit 3 takes
// LS- without origin (an old route peer).
func peerFuzzConfig(mode Mode, cfg uint8) Parser {
	p := Parser{Mode: mode, NoAccount: cfg&1 != 0, NoHeaders: cfg&4 != 0, LeafUnsubNoOrigin: cfg&8 != 0}
	if cfg&2 != 0 {
		p.MaxControlLine = 3 // 48 bytes from a route or leaf node
		p.MaxPayload = 16
	}
	return p
}

func fuzzPeer(f *testing.F, mode Mode, valid []string) {
	var seeds []string
	for _, tc := range routeCases {
		if tc.cfg.Mode == mode && len(tc.in) < 4096 {
			seeds = append(seeds, tc.in)
		}
	}
	seeds = append(seeds, strings.Join(valid, ""), "RMSG $G a + r "+strings.Repeat("q ", 40)+"1\r\nx\r\n",
		"LMSG o a b | q 0 1\r\nx\r\n", "RS+ a b c 0\r\nRS+ a b\r\n", "HMSG a b c d 1 2\r\nxy\r\n",
		"Au x\r\nA+ y\r\n", "LS- a\tb\r\n", "RMSG a\rb c 1\r\nx\r\n", "PUB a\rb 1\r\nx\r\n")
	for i, s := range seeds {
		for _, cfg := range []uint8{0, 1, 2, 4, 8, 15} {
			f.Add([]byte(s), cfg, uint64(i))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, cfg uint8, seed uint64) {
		p := peerFuzzConfig(mode, cfg)
		want := parseWhole(t, p, data)
		r := rand.New(rand.NewSource(int64(seed)))
		for range 4 {
			ch := randomSplits(r, data)
			if got := parseChunks(t, p, ch); !got.equal(want) {
				t.Fatalf("cfg %d splits %q:\n got %v\nwant %v", cfg, ch, got, want)
			}
		}
		if len(data) < 64 {
			one := make([][]byte, len(data))
			for i := range data {
				one[i] = data[i : i+1]
			}
			if got := parseChunks(t, p, one); !got.equal(want) {
				t.Fatalf("cfg %d byte-at-a-time %q:\n got %v\nwant %v", cfg, data, got, want)
			}
		}
		// Every op written back by the appenders parses to the same op.
		q := p
		q.MaxControlLine, q.MaxPayload = -1, -1
		for b := data; len(b) > 0; {
			var op Op
			n, err := p.Next(b, &op)
			if err != nil || n == 0 {
				break
			}
			checkReencode(t, q, &op)
			b = b[n:]
		}
	})
}

func FuzzRoute(f *testing.F) { fuzzPeer(f, RouteMode, validRoute) }

func FuzzLeaf(f *testing.F) { fuzzPeer(f, LeafMode, validLeaf) }
