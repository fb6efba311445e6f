package loop

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
)

// The TLS 1.3 record layer of an established session (RFC 8446 section 5), run on the
// reactor once crypto/tls has finished the handshake. Only the record protection is natsd's:
// the handshake, certificate checks and key schedule up to the application traffic secrets
// are crypto/tls's, and the ciphers are the standard library's (x/crypto for ChaCha20).
// What this buys is memory and copies: a session is two AEAD states and a sequence number
// each way (about 2 KiB), records are opened straight from the engine's inbound buffer into
// the parser's and sealed in place into the outbound batch, and no buffer stays with an idle
// connection. A crypto/tls Conn keeps its record buffers for the connection's lifetime.

const (
	recordHeaderLen = 5
	maxPlaintext    = 16384
	// maxCiphertext is the largest TLS 1.3 record body a peer may send: plaintext, content
	// type, padding and tag together may exceed maxPlaintext by at most 256.
	maxCiphertext = maxPlaintext + 256

	recordChangeCipherSpec = 20
	recordAlert            = 21
	recordHandshake        = 22
	recordApplicationData  = 23

	handshakeNewSessionTicket = 4
	handshakeKeyUpdate        = 24
	// maxPostHandshake bounds a post-handshake message a peer may cut across records (a
	// session ticket is a few hundred bytes).
	maxPostHandshake = 64 << 10

	alertCloseNotify = 0
)

var (
	errRecordOverflow = errors.New("tls: oversized record received")
	errBadRecordMAC   = errors.New("tls: invalid record (bad_record_mac)")
	errUnexpectedMsg  = errors.New("tls: unexpected message after the handshake")
	errPeerAlert      = errors.New("tls: peer sent an alert")
	errCloseNotify    = errors.New("tls: peer closed the session (close_notify)")
)

// peerAlertError is an alert the peer sent (errPeerAlert), named as crypto/tls names it
// ("remote error: tls: bad certificate").
type peerAlertError byte

func (e peerAlertError) Error() string        { return "remote error: " + tls.AlertError(e).Error() }
func (e peerAlertError) Is(target error) bool { return target == errPeerAlert }

// trafficKeys protects one direction of a TLS 1.3 session.
type trafficKeys struct {
	aead   cipher.AEAD
	iv     [12]byte
	seq    uint64
	secret []byte
	// scratch holds the record's nonce: a local array would escape to the heap through the
	// AEAD interface on every record.
	scratch [12]byte
}

// record13 is an established TLS 1.3 session's record protection, either side's: in opens
// what the peer sends, out seals what we send.
type record13 struct {
	suite   uint16
	hash    func() hash.Hash
	keyLen  int
	in, out trafficKeys
	// client: this end is the session's client (a dialled route), so the peer may send
	// session tickets, which are read and dropped (routes do not resume sessions).
	client bool
	// hsPart is a post-handshake message whose rest is in the next record.
	hsPart []byte
}

// suite13 returns what a TLS 1.3 cipher suite needs, or ok=false for one natsd leaves to
// crypto/tls.
func suite13(id uint16) (h func() hash.Hash, keyLen int, ok bool) {
	switch id {
	case tls.TLS_AES_128_GCM_SHA256:
		return sha256.New, 16, true
	case tls.TLS_AES_256_GCM_SHA384:
		return sha512.New384, 32, true
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		return sha256.New, chacha20poly1305.KeySize, true
	}
	return nil, 0, false
}

// newRecord13 protects a session opened with the peer's application traffic secret (in) and
// sealed with ours (out): a server passes the client's secret first, a client the server's.
func newRecord13(suite uint16, inSecret, outSecret []byte) (*record13, error) {
	h, keyLen, ok := suite13(suite)
	if !ok {
		return nil, errors.New("tls: cipher suite not handled on the reactor")
	}
	r := &record13{suite: suite, hash: h, keyLen: keyLen}
	if err := r.in.set(r, inSecret); err != nil {
		return nil, err
	}
	if err := r.out.set(r, outSecret); err != nil {
		return nil, err
	}
	return r, nil
}

// expandLabel is HKDF-Expand-Label (RFC 8446 section 7.1) with an empty context.
func expandLabel(h func() hash.Hash, secret []byte, label string, n int) ([]byte, error) {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0)
	return hkdf.Expand(h, secret, string(info), n)
}

func (k *trafficKeys) set(r *record13, secret []byte) error {
	key, err := expandLabel(r.hash, secret, "key", r.keyLen)
	if err != nil {
		return err
	}
	iv, err := expandLabel(r.hash, secret, "iv", 12)
	if err != nil {
		return err
	}
	var a cipher.AEAD
	if r.suite == tls.TLS_CHACHA20_POLY1305_SHA256 {
		a, err = chacha20poly1305.New(key)
	} else {
		var b cipher.Block
		if b, err = aes.NewCipher(key); err == nil {
			a, err = cipher.NewGCM(b)
		}
	}
	if err != nil {
		return err
	}
	k.aead, k.seq, k.secret = a, 0, secret
	copy(k.iv[:], iv)
	return nil
}

// update moves to the next traffic secret (KeyUpdate).
func (k *trafficKeys) update(r *record13) error {
	next, err := expandLabel(r.hash, k.secret, "traffic upd", len(k.secret))
	if err != nil {
		return err
	}
	return k.set(r, next)
}

// nonce is the next record's nonce (RFC 8446 section 5.3), valid until the next call.
func (k *trafficKeys) nonce() []byte {
	k.scratch = k.iv
	for i := 0; i < 8; i++ {
		k.scratch[4+i] ^= byte(k.seq >> (56 - 8*i))
	}
	return k.scratch[:]
}

// sealedLen is the size of a record carrying n bytes of content.
func sealedLen(n int) int { return recordHeaderLen + n + 1 + 16 }

// seal appends one record of type typ carrying the content already copied to
// dst[len(dst)+recordHeaderLen:][:n]; the content is encrypted in place.
func (r *record13) seal(dst []byte, n int, typ byte) []byte {
	start := len(dst)
	total := sealedLen(n)
	dst = dst[:start+total]
	hdr := dst[start : start+recordHeaderLen]
	hdr[0], hdr[1], hdr[2] = recordApplicationData, 3, 3
	binary.BigEndian.PutUint16(hdr[3:], uint16(total-recordHeaderLen))
	body := dst[start+recordHeaderLen:]
	body[n] = typ
	nonce := r.out.nonce()
	r.out.seq++
	r.out.aead.Seal(body[:0], nonce, body[:n+1], hdr)
	return dst
}

// sealBytes appends a record carrying b.
func (r *record13) sealBytes(dst, b []byte, typ byte) []byte {
	dst = growTo(dst, sealedLen(len(b)))
	copy(dst[len(dst)+recordHeaderLen:cap(dst)], b)
	return r.seal(dst, len(b), typ)
}

// growTo makes room for n more bytes after len(b).
func growTo(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), max(2*cap(b), len(b)+n))
	copy(nb, b)
	return nb
}

// open decrypts the records at the head of raw, appending application data to plain. It
// returns how much of raw it consumed (whole records only), the grown plain, and anything the
// session must send back (a KeyUpdate answer). An error ends the session.
func (r *record13) open(raw, plain []byte, reply []byte) (used int, _ []byte, _ []byte, err error) {
	for len(raw)-used >= recordHeaderLen {
		hdr := raw[used : used+recordHeaderLen]
		n := int(binary.BigEndian.Uint16(hdr[3:]))
		if n > maxCiphertext {
			return used, plain, reply, errRecordOverflow
		}
		if len(raw)-used < recordHeaderLen+n {
			break
		}
		if hdr[0] != recordApplicationData {
			// TLS 1.3 protects every record after the handshake; a middlebox-compatibility
			// ChangeCipherSpec is allowed only during it.
			return used, plain, reply, errUnexpectedMsg
		}
		body := raw[used+recordHeaderLen : used+recordHeaderLen+n]
		if n < 17 {
			return used, plain, reply, errBadRecordMAC
		}
		plain = growTo(plain, n)
		out, oerr := r.in.aead.Open(plain[len(plain):len(plain)], r.in.nonce(), body, hdr)
		if oerr != nil {
			return used, plain, reply, errBadRecordMAC
		}
		r.in.seq++
		used += recordHeaderLen + n
		// TLSInnerPlaintext: content, type, zero padding.
		i := len(out) - 1
		for i >= 0 && out[i] == 0 {
			i--
		}
		if i < 0 {
			return used, plain, reply, errUnexpectedMsg
		}
		typ, content := out[i], out[:i]
		if typ != recordHandshake && len(r.hsPart) > 0 {
			// A handshake message cut across records is not interleaved with others.
			return used, plain, reply, errUnexpectedMsg
		}
		switch typ {
		case recordApplicationData:
			plain = plain[:len(plain)+len(content)]
		case recordAlert:
			if len(content) == 2 && content[1] == alertCloseNotify {
				return used, plain, reply, errCloseNotify
			}
			if len(content) == 2 {
				return used, plain, reply, peerAlertError(content[1])
			}
			return used, plain, reply, errPeerAlert
		case recordHandshake:
			if reply, err = r.handshakeMsgs(content, reply); err != nil {
				return used, plain, reply, err
			}
		default:
			return used, plain, reply, errUnexpectedMsg
		}
	}
	return used, plain, reply, nil
}

// handshakeMsgs handles post-handshake messages from the peer: KeyUpdate from either side,
// and NewSessionTicket from a server (a server never asks a client for renegotiation or
// post-handshake authentication, and a client sends neither). A message may continue in the
// next record, but a KeyUpdate must end its record: nothing may follow it under the old key
// (RFC 8446 section 5.1).
func (r *record13) handshakeMsgs(b, reply []byte) ([]byte, error) {
	if len(r.hsPart) > 0 {
		b = append(r.hsPart, b...)
		r.hsPart = nil
	}
	for len(b) > 0 {
		if len(b) < 4 {
			r.hsPart = append([]byte(nil), b...)
			return reply, nil
		}
		n := int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		if n > maxPostHandshake {
			return reply, errUnexpectedMsg
		}
		if len(b) < 4+n {
			r.hsPart = append([]byte(nil), b...)
			return reply, nil
		}
		typ, body := b[0], b[4:4+n]
		b = b[4+n:]
		switch {
		case typ == handshakeKeyUpdate && n == 1 && body[0] <= 1:
			if len(b) > 0 {
				return reply, errUnexpectedMsg
			}
			if err := r.in.update(r); err != nil {
				return reply, err
			}
			if body[0] == 1 {
				// Answer under the old key, then switch (RFC 8446 section 4.6.3).
				reply = r.sealBytes(reply, []byte{handshakeKeyUpdate, 0, 0, 1, 0}, recordHandshake)
				if err := r.out.update(r); err != nil {
					return reply, err
				}
			}
		case typ == handshakeNewSessionTicket && r.client:
			// Dropped: nothing resumes.
		default:
			return reply, errUnexpectedMsg
		}
	}
	return reply, nil
}
