package loop

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
)

// compWire is a Conn over byte slices: what arrives is appended to in (Peek/Discard read
// it, as an engine's inbound buffer), what is written goes to out.
type compWire struct {
	in  []byte
	out bytes.Buffer
}

func (w *compWire) Peek(n int) ([]byte, error) {
	if n <= 0 {
		return w.in, nil
	}
	if n > len(w.in) {
		return nil, io.ErrShortBuffer
	}
	return w.in[:n], nil
}

func (w *compWire) Discard(n int) (int, error) {
	if n <= 0 || n > len(w.in) {
		n = len(w.in)
	}
	w.in = w.in[n:]
	return n, nil
}

func (w *compWire) InboundBuffered() int { return len(w.in) }
func (w *compWire) Writev(bs [][]byte) (int, error) {
	n := 0
	for _, b := range bs {
		w.out.Write(b)
		n += len(b)
	}
	return n, nil
}
func (w *compWire) OutboundBuffered() int { return 0 }
func (w *compWire) Close() error          { return nil }
func (w *compWire) Wake() error           { return nil }
func (w *compWire) SetReading(bool)       {}
func (w *compWire) RemoteAddr() net.Addr  { return nil }

// compReader is an adapter reading an s2 stream (no route behind it).
func compReader() (*routeComp, *compWire) {
	w := &compWire{}
	return &routeComp{Conn: w}, w
}

// compDrain consumes everything the adapter can open now, as the parser would, a Peek and a
// Discard at a time.
func compDrain(l *routeComp, into *bytes.Buffer) {
	for l.InboundBuffered() > 0 {
		b, _ := l.Peek(0)
		into.Write(b)
		_, _ = l.Discard(len(b))
	}
}

// routeBatches is traffic as a route carries it: batches of RMSG frames, repetitive but not
// uniform, some large and random.
func routeBatches(rng *rand.Rand, n int) [][][]byte {
	var out [][][]byte
	for i := 0; i < n; i++ {
		var batch [][]byte
		for j := rng.Intn(40); j >= 0; j-- {
			size := rng.Intn(300)
			if rng.Intn(20) == 0 {
				size = rng.Intn(200 << 10)
			}
			payload := make([]byte, size)
			if rng.Intn(2) == 0 {
				rng.Read(payload)
			} else {
				for k := range payload {
					payload[k] = "abcdefgh"[k%8]
				}
			}
			batch = append(batch, []byte("RMSG $G orders."+strconv.Itoa(rng.Intn(100))+" "+strconv.Itoa(size)+"\r\n"), payload, []byte("\r\n"))
		}
		out = append(out, batch)
	}
	return out
}

func compFlat(batches [][][]byte) []byte {
	var b bytes.Buffer
	for _, batch := range batches {
		for _, x := range batch {
			b.Write(x)
		}
	}
	return b.Bytes()
}

var compModes = []string{CompressionS2Uncompressed, CompressionS2Fast, CompressionS2Better, CompressionS2Best}

// What the adapter writes is an s2 stream s2's own reader opens, and the adapter opens it
// back, at every level.
func TestRouteCompRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	batches := routeBatches(rng, 60)
	want := compFlat(batches)
	for _, mode := range compModes {
		t.Run(mode, func(t *testing.T) {
			w := &compWire{}
			l := &routeComp{Conn: w}
			l.compressWrites(mode)
			for _, b := range batches {
				n, err := l.Writev(b)
				if err != nil {
					t.Fatal(err)
				}
				if m := len(compFlat([][][]byte{b})); n != m {
					t.Fatalf("Writev returned %d, want %d", n, m)
				}
			}
			wire := w.out.Bytes()
			if mode != CompressionS2Uncompressed && len(wire) >= len(want) {
				t.Fatalf("%d bytes on the wire for %d of plaintext", len(wire), len(want))
			}
			ref, err := io.ReadAll(s2.NewReader(bytes.NewReader(wire)))
			if err != nil || !bytes.Equal(ref, want) {
				t.Fatalf("s2.Reader: %v, %d bytes, equal %v", err, len(ref), bytes.Equal(ref, want))
			}
			r, in := compReader()
			in.in = append(in.in, wire...)
			var got bytes.Buffer
			compDrain(r, &got)
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("opened %d bytes, want %d (equal %v)", got.Len(), len(want), bytes.Equal(got.Bytes(), want))
			}
			if r.plain != nil || r.dead {
				t.Fatalf("drained reader holds a buffer (%d) or died", cap(r.plain))
			}
		})
	}
}

// nats-server's writer: each flush is a fresh s2 stream (identifier, then chunks of up to
// 1 MiB) at the route's level.
func natsServerStream(t *testing.T, batches [][][]byte, opts ...s2.WriterOption) []byte {
	t.Helper()
	var wire bytes.Buffer
	w := s2.NewWriter(nil, append([]s2.WriterOption{s2.WriterConcurrency(1)}, opts...)...)
	for _, b := range batches {
		w.Reset(&wire)
		for _, x := range b {
			if _, err := w.Write(x); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return wire.Bytes()
}

// The adapter reads what nats-server writes: a stream identifier before every flush's
// chunks, 1 MiB blocks, stored and compressed chunks.
func TestRouteCompReadsNatsServer(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	batches := routeBatches(rng, 40)
	// One flush far larger than a block.
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(i / 1000)
	}
	batches = append(batches, [][]byte{[]byte("RMSG $G big 3145745\r\n"), big, []byte("\r\n")})
	want := compFlat(batches)
	for _, opt := range []struct {
		name string
		opts []s2.WriterOption
	}{
		{"fast", nil},
		{"uncompressed", []s2.WriterOption{s2.WriterUncompressed()}},
		{"better", []s2.WriterOption{s2.WriterBetterCompression()}},
		{"best", []s2.WriterOption{s2.WriterBestCompression()}},
	} {
		t.Run(opt.name, func(t *testing.T) {
			wire := natsServerStream(t, batches, opt.opts...)
			if n := bytes.Count(wire, []byte(streamIDChunk)); n < len(batches) {
				t.Fatalf("%d stream identifiers, want one per flush (%d)", n, len(batches))
			}
			r, in := compReader()
			var got bytes.Buffer
			// Arbitrary pieces, as TCP delivers them.
			for len(wire) > 0 {
				n := min(len(wire), 1+rng.Intn(70000))
				in.in = append(in.in, wire[:n]...)
				wire = wire[n:]
				compDrain(r, &got)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("opened %d bytes, want %d", got.Len(), len(want))
			}
		})
	}
}

// Any split of the stream opens the same: every cut into two pieces, and a byte at a time.
func TestRouteCompAnySplit(t *testing.T) {
	batches := [][][]byte{
		{[]byte("RMSG $G a 5\r\nhello\r\n")},
		{[]byte("RS+ $G foo\r\n"), []byte("RMSG $G foo.bar reply 11\r\n"), []byte("hello world"), []byte("\r\n")},
		{bytes.Repeat([]byte("RMSG $G x 3\r\nabc\r\n"), 40)},
	}
	want := compFlat(batches)
	w := &compWire{}
	l := &routeComp{Conn: w}
	l.compressWrites(CompressionS2Fast)
	for _, b := range batches {
		_, _ = l.Writev(b)
	}
	// Followed by what nats-server would write: another stream identifier and its chunks.
	wire := append(w.out.Bytes(), natsServerStream(t, batches)...)
	want = append(want, want...)
	check := func(pieces [][]byte) {
		t.Helper()
		r, in := compReader()
		var got bytes.Buffer
		for _, p := range pieces {
			in.in = append(in.in, p...)
			compDrain(r, &got)
		}
		if !bytes.Equal(got.Bytes(), want) || r.dead {
			t.Fatalf("split %v: opened %q (dead %v)", compLens(pieces), got.Bytes(), r.dead)
		}
	}
	for i := 0; i <= len(wire); i++ {
		check([][]byte{wire[:i], wire[i:]})
	}
	var bytewise [][]byte
	for i := range wire {
		bytewise = append(bytewise, wire[i:i+1])
	}
	check(bytewise)
}

func compLens(pieces [][]byte) []int {
	var out []int
	for _, p := range pieces {
		out = append(out, len(p))
	}
	return out
}

// Padding and reserved skippable chunks are skipped (even when they arrive in pieces);
// reserved unskippable ones, a missing stream identifier, a bad checksum, a corrupt block,
// a block over s2's limit end the stream.
func TestRouteCompBadInput(t *testing.T) {
	w := &compWire{}
	l := &routeComp{Conn: w}
	l.compressWrites(CompressionS2Fast)
	_, _ = l.Writev([][]byte{bytes.Repeat([]byte("RMSG $G x 3\r\nabc\r\n"), 100)})
	good := w.out.Bytes()
	id, chunk := good[:len(streamIDChunk)], good[len(streamIDChunk):]

	skippable := append([]byte{0x80, 5, 0, 0}, "12345"...)
	padding := append([]byte{chunkPadding, 3, 0, 0}, 0, 0, 0)
	stream := append(append(append(append([]byte{}, id...), skippable...), padding...), chunk...)
	r, in := compReader()
	var got bytes.Buffer
	for i := range stream {
		in.in = append(in.in, stream[i])
		compDrain(r, &got)
	}
	if got.String() != string(bytes.Repeat([]byte("RMSG $G x 3\r\nabc\r\n"), 100)) || r.dead {
		t.Fatalf("with skippable chunks: %d bytes, dead %v", got.Len(), r.dead)
	}

	flip := func(b []byte, i int) []byte {
		b = append([]byte{}, b...)
		b[i] ^= 0x40
		return b
	}
	oversize := append([]byte{}, id...)
	n := compMaxChunk + 1
	oversize = append(oversize, chunkCompressed, byte(n), byte(n>>8), byte(n>>16))
	// A block that claims more than s2's 4 MiB: its length varint says so.
	huge := []byte{0, 0, 0, 0}
	huge = append(huge, 0x80, 0x80, 0x80, 0x04) // 8 MiB
	huge = append(append([]byte{}, id...), append([]byte{chunkCompressed, byte(len(huge)), 0, 0}, huge...)...)
	for _, tc := range []struct {
		name string
		wire []byte
	}{
		{"no stream identifier", chunk},
		{"bad identifier", flip(good, 6)},
		{"bad checksum", flip(good, len(streamIDChunk)+5)},
		{"corrupt block", flip(good, len(good)-3)},
		{"reserved unskippable chunk", append(append([]byte{}, id...), 0x02, 1, 0, 0, 0)},
		{"chunk over the limit", oversize},
		{"block over s2's limit", huge},
		{"short data chunk", append(append([]byte{}, id...), chunkUncompressed, 2, 0, 0, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, in := compReader()
			in.in = append(in.in, tc.wire...)
			var got bytes.Buffer
			compDrain(r, &got)
			if !r.dead {
				t.Fatalf("stream accepted (%d bytes opened)", got.Len())
			}
			if in.InboundBuffered() != 0 || r.InboundBuffered() != 0 {
				t.Fatal("a dead stream keeps input")
			}
		})
	}
}

// The reader opens no further ahead than its window and a block, whatever is buffered, and
// hands its buffer back once drained.
func TestRouteCompBounded(t *testing.T) {
	payload := bytes.Repeat([]byte("RMSG $G bomb 1\r\nz\r\n"), 20000)
	var batches [][][]byte
	for i := 0; i < 50; i++ {
		batches = append(batches, [][]byte{payload})
	}
	wire := natsServerStream(t, batches)
	r, in := compReader()
	in.in = wire
	if n := r.InboundBuffered(); n > compWindow+1<<20 {
		t.Fatalf("%d bytes opened at once from %d compressed", n, len(wire))
	}
	var got bytes.Buffer
	compDrain(r, &got)
	if got.Len() != len(payload)*50 {
		t.Fatalf("opened %d, want %d", got.Len(), len(payload)*50)
	}
	if r.plain != nil {
		t.Fatal("buffer kept after draining")
	}
}

// selectRouteCompression is nats-server's selectCompressionMode: local (configured, so never
// off or not supported) × what the remote's INFO announces.
func TestRouteCompressionNegotiation(t *testing.T) {
	locals := []string{CompressionAccept, CompressionS2Auto, CompressionS2Fast, CompressionS2Better, CompressionS2Best}
	remotes := []string{"", CompressionNotSupported, CompressionOff, CompressionAccept, CompressionS2Auto,
		CompressionS2Uncompressed, CompressionS2Fast, CompressionS2Better, CompressionS2Best}
	want := map[string][]string{
		//                    ""  not supported  off  accept  s2_auto  s2_uncompressed  s2_fast  s2_better  s2_best
		CompressionAccept:   {"not supported", "not supported", "off", "off", "s2_fast", "s2_uncompressed", "s2_fast", "s2_better", "s2_best"},
		CompressionS2Auto:   {"not supported", "not supported", "off", "s2_auto", "s2_auto", "s2_auto", "s2_auto", "s2_auto", "s2_auto"},
		CompressionS2Fast:   {"not supported", "not supported", "off", "s2_fast", "s2_fast", "s2_fast", "s2_fast", "s2_fast", "s2_fast"},
		CompressionS2Better: {"not supported", "not supported", "off", "s2_better", "s2_better", "s2_better", "s2_better", "s2_better", "s2_better"},
		CompressionS2Best:   {"not supported", "not supported", "off", "s2_best", "s2_best", "s2_best", "s2_best", "s2_best", "s2_best"},
	}
	for _, local := range locals {
		for i, remote := range remotes {
			got, err := selectRouteCompression(local, remote)
			if err != nil || got != want[local][i] {
				t.Errorf("local %q, remote %q: %q, %v; want %q", local, remote, got, err, want[local][i])
			}
		}
		for _, bad := range []string{"bogus", "S2_FAST", "on", "fast"} {
			_, err := selectRouteCompression(local, bad)
			if err == nil || err.Error() != `unsupported route compression mode "`+bad+`"` {
				t.Errorf("local %q, remote %q: %v", local, bad, err)
			}
		}
	}
}

func TestS2AutoLevel(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		rtt        time.Duration
		thresholds []time.Duration
		want       string
	}{
		{time.Nanosecond, nil, CompressionS2Uncompressed},
		{10 * ms, nil, CompressionS2Uncompressed},
		{10*ms + 1, nil, CompressionS2Fast},
		{50 * ms, nil, CompressionS2Fast},
		{51 * ms, nil, CompressionS2Better},
		{100 * ms, nil, CompressionS2Better},
		{101 * ms, nil, CompressionS2Best},
		{time.Second, nil, CompressionS2Best},
		// A 0 skips its level.
		{5 * ms, []time.Duration{0, 0, 20 * ms}, CompressionS2Better},
		{25 * ms, []time.Duration{0, 0, 20 * ms}, CompressionS2Best},
		// Past the last of fewer than three: that one's level.
		{20 * ms, []time.Duration{5 * ms}, CompressionS2Uncompressed},
		{20 * ms, []time.Duration{5 * ms, 10 * ms}, CompressionS2Fast},
		{3 * ms, []time.Duration{5 * ms, 10 * ms}, CompressionS2Uncompressed},
		{200 * ms, []time.Duration{1 * ms, 2 * ms, 3 * ms, 150 * ms}, CompressionS2Best},
	} {
		if got := s2AutoLevel(tc.rtt, tc.thresholds); got != tc.want {
			t.Errorf("rtt %v thresholds %v: %s, want %s", tc.rtt, tc.thresholds, got, tc.want)
		}
	}
}

// rmsgBatch is 64 RMSG frames of 128 bytes each, as the reactor hands a route's flush to
// its connection (control line, payload, CRLF per message). The payloads are small JSON
// documents with random fields: neither incompressible nor all alike.
func rmsgBatch() [][]byte {
	rng := rand.New(rand.NewSource(3))
	var out [][]byte
	size := 128 - len("RMSG $G orders.00 99\r\n") - 2
	for i := 0; i < 64; i++ {
		subj := "orders." + strconv.Itoa(10+i%90)
		doc := fmt.Sprintf(`{"id":%d,"sku":"%08x","qty":%d,"px":%d.%02d,"tag":"%016x"}`,
			100000+i, rng.Uint32(), rng.Intn(100), rng.Intn(1000), rng.Intn(100), rng.Uint64())
		payload := []byte((doc + strings.Repeat(" ", size))[:size])
		out = append(out, []byte("RMSG $G "+subj+" "+strconv.Itoa(len(payload))+"\r\n"), payload, []byte("\r\n"))
	}
	return out
}

// Whatever arrives, the reader neither panics nor opens more than a window and a block at
// once; a stream that opens is what s2's own reader opens.
func FuzzRouteCompRead(f *testing.F) {
	w := &compWire{}
	l := &routeComp{Conn: w}
	l.compressWrites(CompressionS2Fast)
	_, _ = l.Writev(rmsgBatch())
	f.Add(w.out.Bytes(), uint16(100))
	f.Add([]byte(streamIDChunk+"\x01\x09\x00\x00\x00\x00\x00\x00hello"), uint16(3))
	f.Add([]byte(streamIDChunk+"\x80\x02\x00\x00ab"+streamIDChunk), uint16(1))
	f.Fuzz(func(t *testing.T, wire []byte, piece uint16) {
		r, in := compReader()
		var got bytes.Buffer
		step := int(piece%4096) + 1
		for off := 0; off < len(wire); off += step {
			in.in = append(in.in, wire[off:min(off+step, len(wire))]...)
			if n := r.InboundBuffered(); n > compWindow+compMaxBlock {
				t.Fatalf("%d bytes opened at once", n)
			}
			compDrain(r, &got)
		}
		if r.dead {
			return
		}
		// (s2's reader with small blocks: its buffers are allocated per reader.)
		ref, err := io.ReadAll(s2.NewReader(bytes.NewReader(wire), s2.ReaderMaxBlockSize(64<<10)))
		if err == nil && !bytes.Equal(ref, got.Bytes()) {
			t.Fatalf("opened %q, s2.Reader %q", got.Bytes(), ref)
		}
	})
}

// BenchmarkRouteComp compresses a batch of 64 × 128 B RMSGs and opens it again.
func BenchmarkRouteComp(b *testing.B) {
	batch := rmsgBatch()
	plain := len(compFlat([][][]byte{batch}))
	for _, mode := range compModes {
		b.Run(mode, func(b *testing.B) {
			w := &compWire{}
			l := &routeComp{Conn: w}
			l.compressWrites(mode)
			r, in := compReader()
			var wire int
			var buf []byte
			b.SetBytes(int64(plain))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.out.Reset()
				_, _ = l.Writev(batch)
				wire = w.out.Len()
				buf = append(buf[:0], w.out.Bytes()...)
				in.in = buf
				for r.InboundBuffered() > 0 {
					p, _ := r.Peek(0)
					_, _ = r.Discard(len(p))
				}
			}
			b.ReportMetric(float64(wire)/float64(plain), "wire/plain")
		})
	}
}

// BenchmarkRouteCompWrite and BenchmarkRouteCompRead are the two halves of BenchmarkRouteComp.
func BenchmarkRouteCompWrite(b *testing.B) {
	batch := rmsgBatch()
	plain := len(compFlat([][][]byte{batch}))
	for _, mode := range compModes[:3] {
		b.Run(mode, func(b *testing.B) {
			w := &compWire{}
			l := &routeComp{Conn: w}
			l.compressWrites(mode)
			b.SetBytes(int64(plain))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				w.out.Reset()
				_, _ = l.Writev(batch)
			}
		})
	}
}

func BenchmarkRouteCompRead(b *testing.B) {
	batch := rmsgBatch()
	plain := len(compFlat([][][]byte{batch}))
	for _, mode := range compModes[:3] {
		b.Run(mode, func(b *testing.B) {
			w := &compWire{}
			l := &routeComp{Conn: w}
			l.compressWrites(mode)
			_, _ = l.Writev(batch)
			stream := append([]byte{}, w.out.Bytes()...)
			r, in := compReader()
			b.SetBytes(int64(plain))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				in.in = stream
				for r.InboundBuffered() > 0 {
					p, _ := r.Peek(0)
					_, _ = r.Discard(len(p))
				}
				r.streamOK = false
			}
		})
	}
}
