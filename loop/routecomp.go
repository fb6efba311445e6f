package loop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
)

// Route compression, as nats-server 2.10+ negotiates it: each side announces its mode in its
// route INFO ("compression"), the first INFO each side receives settles the mode
// (selectRouteCompression), and where that means compressing, the connection switches to an
// s2 stream in both directions at a fixed point of the handshake:
//
//   - the side that dialled sends its INFO naming the mode in plaintext, then compresses
//     everything it writes; what it reads after the INFO it answered is compressed too;
//   - the side that accepted, on that INFO, compresses from its answer (the same INFO, sent
//     compressed) on, and reads compressed after it.
//
// Then each side registers the route on the next INFO it receives, as without compression.
//
// routeComp is the s2 stream as a connection adapter between the engine's connection (any
// driver's Conn, or the TLS layer) and the route's state machine, on the reactor like
// tlsLayer: no goroutine, no buffer while idle. It is put in place when the handshake settles
// on compression, and only then. What the reactor writes (one writev batch) is gathered into
// blocks and framed as s2 chunks into pooled buffers; what arrives is opened a chunk at a time
// into a pooled plaintext buffer the parser reads, no further ahead than a window (or the frame
// the parser waits for) and one block.

// Compression modes (nats-server's values, as INFO and /routez carry them; the configuration
// uses the same, normalised by the cluster package).
const (
	CompressionNotSupported   = "not supported"
	CompressionOff            = "off"
	CompressionAccept         = "accept"
	CompressionS2Auto         = "s2_auto"
	CompressionS2Uncompressed = "s2_uncompressed"
	CompressionS2Fast         = "s2_fast"
	CompressionS2Better       = "s2_better"
	CompressionS2Best         = "s2_best"
)

// defaultRTTThresholds are s2_auto's steps when none are configured.
var defaultRTTThresholds = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

// compressionConfigured reports whether mode makes a route negotiate compression (anything
// but "", off and not supported; nats-server's needsCompression). Applied to a negotiated mode,
// it says whether the route compresses.
func compressionConfigured(mode string) bool {
	return mode != "" && mode != CompressionOff && mode != CompressionNotSupported
}

// selectRouteCompression settles a route's mode from ours (configured, so neither off nor
// not supported) and the one the remote's first INFO announces, by nats-server's rules
// (selectCompressionMode): a remote that announces none (an older server) or "not
// supported" gets none; "off" wins; accept on both sides is off; accept follows the other
// side's s2 mode (s2_auto announced by the remote counts as s2_fast); two s2 modes keep
// ours (compression is asymmetric: each side writes at its own level).
func selectRouteCompression(local, remote string) (string, error) {
	switch remote {
	case "", CompressionNotSupported:
		return CompressionNotSupported, nil
	case CompressionOff:
		return CompressionOff, nil
	case CompressionAccept:
		if local == CompressionAccept {
			return CompressionOff, nil
		}
		return local, nil
	case CompressionS2Auto, CompressionS2Uncompressed, CompressionS2Fast, CompressionS2Better, CompressionS2Best:
		if local == CompressionAccept {
			if remote == CompressionS2Auto {
				return CompressionS2Fast, nil
			}
			return remote, nil
		}
		return local, nil
	}
	return "", fmt.Errorf("unsupported route compression mode %q", remote)
}

// s2AutoLevel is s2_auto's level for a round trip: uncompressed up to the first threshold,
// then fast, better, best (nats-server's selectS2AutoModeBasedOnRTT: a 0 threshold skips its
// level; past the last one, best when all three are given, else the last one's level).
func s2AutoLevel(rtt time.Duration, thresholds []time.Duration) string {
	if len(thresholds) == 0 {
		thresholds = defaultRTTThresholds
	}
	idx := -1
	for i, d := range thresholds {
		if rtt <= d {
			idx = i
			break
		}
	}
	if idx < 0 {
		if len(thresholds) >= 3 {
			idx = 3
		} else {
			idx = len(thresholds) - 1
		}
	}
	switch idx {
	case 0:
		return CompressionS2Uncompressed
	case 1:
		return CompressionS2Fast
	case 2:
		return CompressionS2Better
	}
	return CompressionS2Best
}

// infoCompression is the mode a route INFO of ours announces: s2_auto when that is what is
// configured (never the level it picked), else the mode given.
func infoCompression(cfg *RouteConfig, mode string) string {
	switch cfg.Compression {
	case CompressionS2Auto:
		return CompressionS2Auto
	case "":
		return "" // nothing configured: announce nothing, as a server without compression
	}
	return mode
}

// routeRTT is the round trip s2_auto picks a level from: the last one measured, or, with none
// yet, the time since the connection opened (at the handshake: how long the remote took to
// answer, as nats-server takes it).
func (c *client) routeRTT() time.Duration {
	if c.rtt > 0 {
		return time.Duration(c.rtt)
	}
	return max(time.Duration(time.Now().UnixNano()-c.start), time.Nanosecond)
}

// deferRoutePings runs when a route opens with compression configured: the route sends no
// PING before the remote's first INFO settles the mode (a remote that switched to s2 would
// take a plaintext PING for a corrupt stream). A stale-connection watchdog stands in for the
// pings: without a handshake, the route closes after ping_interval * (ping_max+1).
func (c *client) deferRoutePings(now int64) {
	c.route.compWait = true
	c.pingsOut = c.maxPingsOut()
	c.nextPing = now + int64(c.pingInterval())*int64(c.pingsOut+1)
	c.rearm(now)
}

// negotiateRouteCompression runs on the remote's INFOs until one settles the mode (the first;
// nats-server's negotiateRouteCompression). It reports whether the handshake now waits for the
// remote's next INFO (the route compresses) or has failed (the route is closing); otherwise
// the INFO goes on to register the route.
func (c *client) negotiateRouteCompression(cfg *RouteConfig, remote string) (wait bool) {
	rs := c.route
	if rs.compression != "" {
		return false // settled on the INFO before this one
	}
	wasWaiting := rs.compWait
	rs.compWait = false
	if !wasWaiting || !compressionConfigured(cfg.Compression) {
		// No compression configured (when the connection opened, or now: a reload in
		// between): nothing is negotiated.
		if remote == "" || cfg.Compression == CompressionNotSupported {
			rs.compression = CompressionNotSupported
		} else {
			rs.compression = CompressionOff
		}
		if wasWaiting {
			c.startRoutePings()
		}
		return false
	}
	mode, err := selectRouteCompression(cfg.Compression, remote)
	if err != nil {
		if lg := c.routeLog(); lg != nil {
			lg.Errorf("%s:%d - rid:%d - %v", c.ip, c.port, c.cid, err)
		}
		c.closeWithErr(err.Error(), closeProtocol)
		return true
	}
	if mode == CompressionS2Auto {
		if c.rttStart == 0 {
			c.rtt = int64(c.routeRTT()) // the handshake's duration stands for the RTT until a PONG
		}
		mode = s2AutoLevel(c.routeRTT(), cfg.RTTThresholds)
	}
	rs.compression = mode
	c.startRoutePings()
	if !compressionConfigured(mode) {
		return false
	}
	info := c.r.e.routeInfoLineComp(cfg, true, 0, rs.pinned, infoCompression(cfg, mode))
	l := &routeComp{Conn: c.conn, c: c, wl: compLevel(mode)}
	if rs.solicited {
		// Our INFO in plaintext, on its way before the writer compresses.
		c.send(info)
		c.flush()
		c.conn, rs.comp = l, l
	} else {
		c.flush()
		c.conn, rs.comp = l, l
		c.send(info)
	}
	// What follows this INFO on the wire is s2: the parser must not read on in plaintext. The
	// turn ends here, as a paused publisher's does (traffic consumes up to this INFO and reads
	// nothing more); the Wake ends the pause at once, and the next turn reads through l.
	c.stalled, c.stallUntil = true, 0
	_ = l.Wake()
	return true
}

// startRoutePings ends the stale watchdog: the handshake is settled, pings may start.
func (c *client) startRoutePings() {
	now := time.Now().UnixNano()
	c.pingsOut = 0
	c.nextPing = now + int64(min(firstPingDelay, c.pingInterval()))
	c.rearm(now)
}

// routePong adjusts an s2_auto route's level to the round trip a PONG just measured.
func (c *client) routePong() {
	rs := c.route
	l := rs.comp
	if l == nil {
		return
	}
	cfg := c.r.e.rt.cfg.Load()
	if cfg == nil || cfg.Compression != CompressionS2Auto {
		return
	}
	if m := s2AutoLevel(time.Duration(c.rtt), cfg.RTTThresholds); m != rs.compression {
		rs.compression = m
		l.compressWrites(m)
	}
}

// compressionMode is the route's mode for /routez.
func (rs *routeState) compressionMode() string {
	if rs.compression == "" {
		return CompressionNotSupported
	}
	return rs.compression
}

// SetRouteCompression applies a reloaded compression mode, as nats-server's reload does: new
// routes negotiate with it; an established route keeps a mode it never compresses with
// ("not supported") or already has, is closed to negotiate again where compression starts or
// stops (its mode or the new one off or accept), and otherwise switches its writer's level
// (s2_auto: the level its round trip picks). nats-server leaves a route compressing when the
// new mode is "not supported"; such a route is closed here, to stop.
func (e *Engine) SetRouteCompression(mode string, thresholds []time.Duration) {
	e.SetRouteConfig(func(c *RouteConfig) {
		c.Compression = mode
		c.RTTThresholds = slices.Clone(thresholds)
	})
	for _, rc := range e.routeList() {
		rc := rc
		_ = rc.r.ex.Execute(func() {
			rs := rc.route
			if rc.closing || rc.closed {
				return
			}
			cur := rs.compressionMode()
			switch {
			case cur == CompressionNotSupported || cur == mode:
			case !compressionConfigured(cur) || rs.comp == nil || mode == CompressionAccept || !compressionConfigured(mode):
				rc.markClosing(closeClient)
			case mode == CompressionS2Auto:
				if m := s2AutoLevel(rc.routeRTT(), thresholds); m != cur {
					rs.compression = m
					rs.comp.compressWrites(m)
				}
			default:
				rs.compression = mode
				rs.comp.compressWrites(mode)
			}
			rc.r.endBatch()
		})
	}
}

// ---------------------------------------------------------------------------------------------
// The adapter

// Writing levels (s2's writer options nats-server picks per mode).
const (
	compFast = iota
	compUncompressed
	compBetter
	compBest
)

func compLevel(mode string) uint8 {
	switch mode {
	case CompressionS2Uncompressed:
		return compUncompressed
	case CompressionS2Better:
		return compBetter
	case CompressionS2Best:
		return compBest
	}
	return compFast
}

// The s2 framing format (snappy's, with s2's identifier): a chunk is a type byte, a 24-bit
// little-endian length, then the body; data chunks' bodies start with the masked CRC-32C of
// their uncompressed bytes.
const (
	chunkCompressed   = 0x00
	chunkUncompressed = 0x01
	chunkPadding      = 0xfe
	chunkStreamID     = 0xff
	chunkHeaderLen    = 4
	chunkCRCLen       = 4
	s2Magic           = "S2sTwO"
	snappyMagic       = "sNaPpY"
	streamIDChunk     = "\xff\x06\x00\x00" + s2Magic
)

// compBlock is how much plaintext one chunk we write carries: large enough for s2 to find
// the repeats of a batch of messages, small enough that a block's buffers stay pooled.
// compMaxBlock is the largest block we accept, s2's own limit (nats-server writes 1 MiB
// blocks); compMaxChunk the largest data chunk that can carry one.
const (
	compBlock    = 64 << 10
	compMaxBlock = 4 << 20
	compIOV      = 8 // chunks handed to the connection per writev
	compWindow   = 64 << 10
)

var (
	compMaxChunk = chunkCRCLen + s2.MaxEncodedLen(compMaxBlock)
	compOutCap   = len(streamIDChunk) + chunkHeaderLen + chunkCRCLen + s2.MaxEncodedLen(compBlock)
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)

	errCompCorrupt  = errors.New("s2: corrupt input")
	errCompCRC      = errors.New("s2: corrupt input, crc mismatch")
	errCompTooLarge = errors.New("s2: block too large")
	errCompChunk    = errors.New("s2: unsupported input")
)

// Pools: output chunks (one block compressed, with its header), the staging block a writev
// batch is gathered into, and the opened plaintext in two classes (a window and one of our
// blocks; a window and one of nats-server's 1 MiB blocks). Larger plaintext (a frame the
// parser waits for, a 4 MiB block) is allocated and dropped when drained.
const (
	compPlainSmall = compWindow + compBlock
	compPlainLarge = compWindow + 1<<20
)

var (
	compOutPool   = sync.Pool{New: func() any { b := make([]byte, 0, compOutCap); return &b }}
	compStagePool = sync.Pool{New: func() any { b := make([]byte, compBlock); return &b }}
)

var compPlainClasses = newPlainClasses(compPlainSmall, compPlainLarge)

// routeComp is the adapter (see the top of the file). All its methods but Close and Wake run
// on the connection's reactor.
type routeComp struct {
	Conn // the engine's connection: what travels on the wire
	c    *client

	streamOK bool // the stream identifier arrived
	dead     bool // the stream was corrupt: nothing more is read
	skip     int  // bytes of a skippable chunk still to drop

	plainBuf      // opened plaintext
	looked   bool // the engine Peeked this turn (its next InboundBuffered ends the turn)

	wl     uint8 // writing level
	idSent bool  // the stream identifier went out
	iov    [compIOV][]byte
	boxes  [compIOV]*[]byte
}

// compressWrites compresses what is written from now on at mode's level.
func (l *routeComp) compressWrites(mode string) {
	l.wl = compLevel(mode)
}

func (l *routeComp) Peek(n int) ([]byte, error) {
	if l.rd == len(l.plain) {
		l.pump()
	}
	b := l.plain[l.rd:]
	if n > 0 && n < len(b) {
		b = b[:n]
	}
	l.seen = l.rd + len(b)
	l.looked = true
	return b, nil
}

func (l *routeComp) Discard(n int) (int, error) {
	avail := len(l.plain) - l.rd
	if n <= 0 {
		_, _ = l.Conn.Discard(-1)
		n = avail
	} else if n > avail {
		n = avail
	}
	l.rd += n
	if l.rd == len(l.plain) {
		l.releasePlain()
	}
	return n, nil
}

func (l *routeComp) InboundBuffered() int {
	capped := l.pump()
	if l.looked {
		// The engine asks after its Peek: its turn ends. Plaintext opened since that Peek, or
		// chunks left unopened at the window, need another turn: no new bytes may come to
		// make the driver run one.
		l.looked = false
		if c := l.c; c != nil && !c.closing && !c.stalled &&
			(capped || len(l.plain) > l.seen && len(l.plain)-l.rd >= max(c.need, 1)) {
			c.yielded = true
		}
	}
	return len(l.plain) - l.rd
}

// Writev compresses bs (one flush of the route's queue) into s2 chunks of compBlock bytes
// and hands them to the connection, a few chunks per writev.
func (l *routeComp) Writev(bs [][]byte) (int, error) {
	total := 0
	for _, b := range bs {
		total += len(b)
	}
	if total == 0 {
		return 0, nil
	}
	var stage *[]byte
	var err error
	k, bi, off := 0, 0, 0
	for left := total; left > 0; {
		m := min(left, compBlock)
		left -= m
		box := compOutPool.Get().(*[]byte)
		out := (*box)[:0]
		if !l.idSent {
			out = append(out, streamIDChunk...)
			l.idSent = true
		}
		for off == len(bs[bi]) {
			bi, off = bi+1, 0
		}
		var src []byte
		inPlace := false
		if len(bs[bi])-off >= m {
			src = bs[bi][off : off+m] // the block lies in one buffer: no gathering
			off += m
		} else {
			if l.wl == compUncompressed {
				// Stored as is: gathered straight into the chunk.
				at := len(out) + chunkHeaderLen + chunkCRCLen
				src, inPlace = out[at:at+m], true
			} else {
				if stage == nil {
					stage = compStagePool.Get().(*[]byte)
				}
				src = (*stage)[:m]
			}
			for j := 0; j < m; {
				if off == len(bs[bi]) {
					bi, off = bi+1, 0
					continue
				}
				c := copy(src[j:], bs[bi][off:])
				j += c
				off += c
			}
		}
		l.iov[k], l.boxes[k] = l.appendChunk(out, src, inPlace), box
		if k++; k == compIOV || left == 0 {
			if err == nil {
				_, err = l.Conn.Writev(l.iov[:k])
			}
			for i := 0; i < k; i++ {
				*l.boxes[i] = l.iov[i][:0]
				compOutPool.Put(l.boxes[i])
				l.iov[i], l.boxes[i] = nil, nil
			}
			k = 0
		}
	}
	if stage != nil {
		compStagePool.Put(stage)
	}
	if err != nil {
		return 0, err
	}
	return total, nil
}

// appendChunk appends src as one data chunk at the writer's level; out has room for it
// compressed (s2.MaxEncodedLen) or stored. inPlace: src already lies where a stored chunk's
// bytes go.
func (l *routeComp) appendChunk(out, src []byte, inPlace bool) []byte {
	h := len(out)
	body := h + chunkHeaderLen + chunkCRCLen
	typ := byte(chunkUncompressed)
	out = out[:body]
	if l.wl != compUncompressed {
		dst := out[body:body]
		var enc []byte
		switch l.wl {
		case compBetter:
			enc = s2.EncodeBetter(dst, src)
		case compBest:
			enc = s2.EncodeBest(dst, src)
		default:
			enc = s2.Encode(dst, src)
		}
		// Stored when compressing saves too little to be worth decoding (as s2's writer).
		if len(enc) < len(src)-len(src)>>5 {
			typ = chunkCompressed
			out = out[:body+len(enc)]
		}
	}
	if typ == chunkUncompressed {
		if inPlace {
			out = out[:body+len(src)]
		} else {
			out = append(out, src...)
		}
	}
	n := len(out) - h - chunkHeaderLen
	out[h] = typ
	out[h+1], out[h+2], out[h+3] = byte(n), byte(n>>8), byte(n>>16)
	binary.LittleEndian.PutUint32(out[h+chunkHeaderLen:], maskedCRC(src))
	return out
}

// maskedCRC is the framing format's checksum: CRC-32C, rotated and offset.
func maskedCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// pump opens whole chunks from the connection's buffer into plain until the parser has a
// window (or the frame it waits for) unconsumed; it reports whether it stopped there with
// input left. Bytes of a chunk that has not fully arrived stay in the connection's buffer.
func (l *routeComp) pump() (capped bool) {
	if l.dead {
		_, _ = l.Conn.Discard(-1)
		return false
	}
	limit := compWindow
	if l.c != nil {
		limit = max(limit, l.c.need)
	}
	var err error
	for {
		avail := l.Conn.InboundBuffered()
		if l.skip > 0 {
			n := min(l.skip, avail)
			if n == 0 {
				break
			}
			_, _ = l.Conn.Discard(n)
			l.skip -= n
			continue
		}
		if avail < chunkHeaderLen {
			break
		}
		if len(l.plain)-l.rd >= limit {
			capped = true
			break
		}
		h, perr := l.Conn.Peek(chunkHeaderLen)
		if perr != nil {
			break
		}
		typ := h[0]
		clen := int(h[1]) | int(h[2])<<8 | int(h[3])<<16
		if typ == chunkStreamID {
			// Every flush of nats-server's writer starts a stream anew.
			if clen != len(s2Magic) {
				err = errCompCorrupt
				break
			}
			if avail < chunkHeaderLen+clen {
				break
			}
			b, _ := l.Conn.Peek(chunkHeaderLen + clen)
			if m := string(b[chunkHeaderLen:]); m != s2Magic && m != snappyMagic {
				err = errCompCorrupt
				break
			}
			_, _ = l.Conn.Discard(chunkHeaderLen + clen)
			l.streamOK = true
			continue
		}
		if !l.streamOK {
			err = errCompCorrupt // a stream starts with its identifier
			break
		}
		if typ != chunkCompressed && typ != chunkUncompressed {
			if typ < 0x80 {
				err = errCompChunk // reserved, unskippable
				break
			}
			l.skip = chunkHeaderLen + clen // padding, or a reserved skippable chunk
			continue
		}
		if clen < chunkCRCLen || clen > compMaxChunk {
			err = errCompCorrupt
			break
		}
		if avail < chunkHeaderLen+clen {
			break
		}
		if err = l.open(typ, clen); err != nil {
			break
		}
	}
	if err != nil {
		l.failed(err)
		return false
	}
	if !capped {
		if avail := l.Conn.InboundBuffered(); avail > 0 {
			// A chunk has not fully arrived: look at all of it, so that a driver that runs
			// traffic again for bytes the engine has not looked at (netpoll) waits for more.
			_, _ = l.Conn.Peek(avail)
		}
	}
	if len(l.plain) == l.rd {
		l.releasePlain()
	}
	return capped
}

// wireNeed is c.need (the size of the frame the parser waits for, in plaintext) in bytes of
// the wire: the same, unless the route reads an s2 stream, whose chunks carrying the frame are
// shorter (0: any new bytes may complete it). A driver that waits for input by size (netpoll's
// pump) must wait by this, as it does for TLS.
func (c *client) wireNeed() int {
	if _, ok := c.conn.(*routeComp); ok {
		return 0
	}
	return c.need
}

// open decodes one whole data chunk of the connection's buffer onto plain.
func (l *routeComp) open(typ byte, clen int) error {
	b, err := l.Conn.Peek(chunkHeaderLen + clen)
	if err != nil {
		return err
	}
	sum := binary.LittleEndian.Uint32(b[chunkHeaderLen:])
	body := b[chunkHeaderLen+chunkCRCLen:]
	n := len(body)
	if typ == chunkCompressed {
		if n, err = s2.DecodedLen(body); err != nil {
			return errCompCorrupt
		}
	}
	if n > compMaxBlock {
		return errCompTooLarge
	}
	l.plainFor(n, compPlainClasses)
	at := len(l.plain)
	dst := l.plain[at : at+n]
	if typ == chunkCompressed {
		if _, err := s2.Decode(dst, body); err != nil {
			return errCompCorrupt
		}
	} else {
		copy(dst, body)
	}
	if maskedCRC(dst) != sum {
		return errCompCRC
	}
	l.plain = l.plain[:at+n]
	_, _ = l.Conn.Discard(chunkHeaderLen + clen)
	return nil
}

// failed ends a corrupt stream: the route closes (nats-server: a read error).
func (l *routeComp) failed(err error) {
	l.dead = true
	_, _ = l.Conn.Discard(-1)
	c := l.c
	if c == nil {
		return
	}
	if lg := c.r.e.cfg.Log; lg != nil {
		lg.Errorf("%s:%d - rid:%d - Error decompressing route data: %v", c.ip, c.port, c.cid, err)
	}
	c.markClosing(closeReadError)
}

// closeReadError is nats-server's ReadError close reason.
const closeReadError = "Read Error"

// closed releases the adapter once the connection is gone (on the reactor).
func (l *routeComp) closed() {
	l.dead = true
	l.releasePlain()
}

// unseener is a layer that may hold input opened beyond what the parser last looked at (TLS);
// traffic runs again for it rather than wait for bytes.
type unseener interface{ unseen(need int) bool }

// unseen passes the question to the layer below (a compressed route over TLS).
func (l *routeComp) unseen(need int) bool {
	if u, ok := l.Conn.(unseener); ok {
		return u.unseen(need)
	}
	return false
}
