package filestore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"

	"github.com/minio/highwayhash"
	"golang.org/x/crypto/chacha20poly1305"
)

// Record layout, little-endian:
//
//	0  u32  total record length (header, body and checksum)
//	4  u8   kind
//	5  u64  seq
//	13 i64  timestamp (ns); for a gap marker the last seq of the range
//	21 u16  subject length
//	23 u32  header length
//	27      subject, headers, payload
//
// A message without headers (kind 1) has no header length field: its subject starts at 23.
// A message with headers is kind 7 on disk; both parse as kindMsg. That makes every
// message record one byte longer than nats-server's, so the sizes limits and state count
// are nats-server's (storedSize).
//
//	len-8   u64 HighwayHash-64 of bytes [4, len-8)
//
// The length is outside the checksum so that a scan can skip a damaged
// record whose length field survived and carry on with the next one.
const (
	recHdrLen = 27
	msgHdrLen = 23 // a message without headers
	recSumLen = 8
	recMin    = recHdrLen + recSumLen
	recMinAny = msgHdrLen + 1 + recSumLen // the shortest record of any kind
	recMax    = 64 << 20

	kindMsg   = 1 // a message
	kindSkip  = 2 // a consumed sequence without a message
	kindTomb  = 3 // seq was removed
	kindFloor = 4 // every seq below seq was removed (purge, compact, limits)
	kindGap   = 5 // seqs [seq, ts] were removed with their block
	kindTrunc = 6 // records before this one for seqs after seq are void (Truncate)
	kindHMsg  = 7 // on disk: a message with headers (parsed as kindMsg)

	kindVoid = 0 // recovery's mark for a record a later truncation voided; never on disk

	// An encrypted record is framed: u32 frame length, 12-byte nonce, AEAD
	// ciphertext of the record (with its own checksum inside).
	frameHdr = 4 + 12
)

var hwKey = []byte("natsd-filestore-record-checksum!")

func recSum(b []byte) uint64 { return highwayhash.Sum64(b, hwKey) }

// encodeRecord builds a record with seq and ts left for patchRecord, so that
// the copy of the caller's bytes happens on the caller's goroutine.
func encodeRecord(kind byte, subj string, hdr, msg []byte) []byte {
	if kind == kindMsg && len(hdr) == 0 {
		n := msgHdrLen + len(subj) + len(msg) + recSumLen
		b := make([]byte, n)
		binary.LittleEndian.PutUint32(b[0:], uint32(n))
		b[4] = kindMsg
		binary.LittleEndian.PutUint16(b[21:], uint16(len(subj)))
		copy(b[msgHdrLen+copy(b[msgHdrLen:], subj):], msg)
		return b
	}
	if kind == kindMsg {
		kind = kindHMsg
	}
	n := recHdrLen + len(subj) + len(hdr) + len(msg) + recSumLen
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b[0:], uint32(n))
	b[4] = kind
	binary.LittleEndian.PutUint16(b[21:], uint16(len(subj)))
	binary.LittleEndian.PutUint32(b[23:], uint32(len(hdr)))
	p := recHdrLen
	p += copy(b[p:], subj)
	p += copy(b[p:], hdr)
	copy(b[p:], msg)
	return b
}

func patchRecord(b []byte, seq uint64, ts int64) {
	binary.LittleEndian.PutUint64(b[5:], seq)
	binary.LittleEndian.PutUint64(b[13:], uint64(ts))
	n := len(b)
	binary.LittleEndian.PutUint64(b[n-recSumLen:], recSum(b[4:n-recSumLen]))
}

// appendMarker appends a body-less record.
func appendMarker(dst []byte, kind byte, seq uint64, aux int64) []byte {
	var b [recMin]byte
	binary.LittleEndian.PutUint32(b[0:], recMin)
	b[4] = kind
	binary.LittleEndian.PutUint64(b[5:], seq)
	binary.LittleEndian.PutUint64(b[13:], uint64(aux))
	binary.LittleEndian.PutUint64(b[recHdrLen:], recSum(b[4:recHdrLen]))
	return append(dst, b[:]...)
}

type recView struct {
	kind byte
	seq  uint64
	ts   int64
	subj []byte
	hdr  []byte
	msg  []byte
}

// headerSane rejects most garbage before the checksum is computed, which
// keeps byte-by-byte resynchronisation over a damaged region cheap.
func headerSane(b []byte) (int, bool) {
	if len(b) < recMinAny {
		return 0, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < recMinAny || n > recMax || n > len(b) || b[4] < kindMsg || b[4] > kindHMsg {
		return 0, false
	}
	sl := int(binary.LittleEndian.Uint16(b[21:]))
	if b[4] == kindMsg {
		return n, sl > 0 && sl <= n-msgHdrLen-recSumLen
	}
	if n < recMin {
		return 0, false
	}
	hl := int(binary.LittleEndian.Uint32(b[23:]))
	if sl+hl > n-recMin || hl < 0 {
		return 0, false
	}
	if b[4] == kindHMsg && sl == 0 {
		return 0, false
	}
	return n, true
}

// parseRecord checks and decodes the record at the start of b.
func parseRecord(b []byte) (recView, int, bool) {
	n, ok := headerSane(b)
	if !ok {
		return recView{}, 0, false
	}
	if binary.LittleEndian.Uint64(b[n-recSumLen:]) != recSum(b[4:n-recSumLen]) {
		return recView{}, 0, false
	}
	sl := int(binary.LittleEndian.Uint16(b[21:]))
	r := recView{
		kind: b[4],
		seq:  binary.LittleEndian.Uint64(b[5:]),
		ts:   int64(binary.LittleEndian.Uint64(b[13:])),
	}
	if r.kind == kindMsg {
		r.subj = b[msgHdrLen : msgHdrLen+sl]
		r.msg = b[msgHdrLen+sl : n-recSumLen]
		return r, n, true
	}
	if r.kind == kindHMsg {
		r.kind = kindMsg
	}
	hl := int(binary.LittleEndian.Uint32(b[23:]))
	p := recHdrLen
	r.subj = b[p : p+sl]
	p += sl
	r.hdr = b[p : p+hl]
	p += hl
	r.msg = b[p : n-recSumLen]
	return r, n, true
}

// cryptor seals records (and compressed blocks) when encryption is on.
type cryptor struct{ aead cipher.AEAD }

func newCryptor(key []byte, cipherName string) (*cryptor, error) {
	if len(key) == 0 {
		return nil, nil
	}
	// The configured key is a secret of any length; derive the AEAD key so the
	// same server key never keys two different purposes.
	m := hmac.New(sha256.New, key)
	m.Write([]byte("natsd-filestore-v1"))
	k := m.Sum(nil)
	var a cipher.AEAD
	var err error
	switch cipherName {
	case "", "chacha", "chachapoly":
		a, err = chacha20poly1305.New(k)
	case "aes":
		var blk cipher.Block
		if blk, err = aes.NewCipher(k); err == nil {
			a, err = cipher.NewGCM(blk)
		}
	default:
		return nil, errors.New("filestore: unknown cipher " + cipherName)
	}
	if err != nil {
		return nil, err
	}
	return &cryptor{aead: a}, nil
}

// appendSealed appends nonce||AEAD(plain) to dst. A random nonce per frame
// means a rewritten (truncated then re-appended) region never reuses one.
func (c *cryptor) appendSealed(dst, plain []byte) []byte {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	dst = append(dst, nonce[:]...)
	return c.aead.Seal(dst, nonce[:], plain, nil)
}

func (c *cryptor) open(b []byte) ([]byte, error) {
	if len(b) < 12+c.aead.Overhead() {
		return nil, ErrCorrupt
	}
	return c.aead.Open(nil, b[:12], b[12:], nil)
}

func (c *cryptor) appendFrame(dst, rec []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = c.appendSealed(dst, rec)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// openFrame decodes the frame at the start of b, returning the plaintext
// record and the frame length.
func (c *cryptor) openFrame(b []byte) ([]byte, int, bool) {
	if len(b) < frameHdr+recMinAny+c.aead.Overhead() {
		return nil, 0, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < frameHdr+recMinAny+c.aead.Overhead() || n > len(b) || n > recMax+64 {
		return nil, 0, false
	}
	p, err := c.open(b[4:n])
	if err != nil {
		return nil, 0, false
	}
	return p, n, true
}

// scanRec is one valid record found by scanBlock.
type scanRec struct {
	kind byte
	seq  uint64
	ts   int64
	off  uint32 // offset of the stored form (frame when encrypted)
	slen uint32 // length of the stored form
	sub  uint32 // a message's subject, by its number in the scan's subjTable
}

// subjTable numbers the subjects a scan meets. Scan results then hold no
// strings: recovering millions of records leaves the garbage collector
// nothing to trace in them, and each subject is allocated once.
type subjTable struct {
	ids   map[string]uint32
	names []string
}

func (t *subjTable) id(b []byte) uint32 {
	if id, ok := t.ids[string(b)]; ok {
		return id
	}
	if t.ids == nil {
		t.ids = make(map[string]uint32)
	}
	name := string(b)
	t.names = append(t.names, name)
	t.ids[name] = uint32(len(t.names))
	return uint32(len(t.names))
}

func (t *subjTable) name(id uint32) string { return t.names[id-1] }

type scanResult struct {
	recs     []scanRec
	spans    int   // damaged regions followed by a valid record
	validEnd int64 // end of the last valid record: where the written region ends
	tail     int64 // non-zero bytes after validEnd that held no valid record
}

// scanBlock walks a block's bytes, verifying each record. A block file is
// preallocated with zeros, so the written region ends at a record boundary
// followed only by zeros (or at the end of the file). After damage the scan
// resynchronises byte by byte on the next record that passes its checksum,
// so one flipped bit costs one record, not the rest of the block. A zero
// length word is the end only when nothing but zeros follows it; otherwise
// (a length flipped to zero, say) it is damage like any other.
//
// Subjects are numbered in subjs, or not recorded when subjs is nil.
func scanBlock(data []byte, c *cryptor, subjs *subjTable) scanResult {
	var res scanResult
	nz := lastNonZero(data) // no record starts at or after nz: it would be all zero
	off := 0
	var lastSeq uint64
	for off < nz {
		rv, n, ok := decodeAt(data[off:], c)
		if ok {
			res.add(rv, off, n, &lastSeq, subjs)
			off += n
			res.validEnd = int64(off)
			continue
		}
		found := -1
		for p := off + 1; p < nz && p+recMinAny <= len(data); p++ {
			rv2, n2, ok2 := decodeAt(data[p:], c)
			if ok2 && plausible(rv2, lastSeq) {
				found = p
				rv, n = rv2, n2
				break
			}
		}
		if found < 0 {
			res.tail = int64(nz - off)
			break
		}
		res.spans++
		res.add(rv, found, n, &lastSeq, subjs)
		off = found + n
		res.validEnd = int64(off)
	}
	return res
}

func plausible(rv recView, lastSeq uint64) bool {
	if rv.kind == kindMsg || rv.kind == kindSkip {
		return rv.seq > lastSeq
	}
	return true
}

func decodeAt(b []byte, c *cryptor) (recView, int, bool) {
	if c == nil {
		return parseRecord(b)
	}
	if len(b) < 4 {
		return recView{}, 0, false
	}
	// Cheap length check first: AEAD open on every byte offset is costly.
	if n := int(binary.LittleEndian.Uint32(b)); n < frameHdr+recMinAny || n > len(b) {
		return recView{}, 0, false
	}
	p, n, ok := c.openFrame(b)
	if !ok {
		return recView{}, 0, false
	}
	rv, rn, ok := parseRecord(p)
	if !ok || rn != len(p) {
		return recView{}, 0, false
	}
	return rv, n, true
}

func (r *scanResult) add(rv recView, off, n int, lastSeq *uint64, subjs *subjTable) {
	sr := scanRec{kind: rv.kind, seq: rv.seq, ts: rv.ts, off: uint32(off), slen: uint32(n)}
	if rv.kind == kindMsg && subjs != nil {
		sr.sub = subjs.id(rv.subj)
	}
	if rv.kind == kindMsg || rv.kind == kindSkip {
		*lastSeq = rv.seq
	}
	r.recs = append(r.recs, sr)
}
