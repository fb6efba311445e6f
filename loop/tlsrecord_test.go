package loop

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"testing"
)

// pair13 is a session seen from both ends: srv opens what cli seals and the other way round.
func pair13(t *testing.T, suite uint16) (srv, cli *record13) {
	t.Helper()
	n := 32
	if suite == tls.TLS_AES_256_GCM_SHA384 {
		n = 48
	}
	cs, ss := make([]byte, n), make([]byte, n)
	_, _ = rand.Read(cs)
	_, _ = rand.Read(ss)
	srv, err := newRecord13(suite, cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	// The client's view: it opens with the server's secret and seals with its own.
	cli, err = newRecord13(suite, ss, cs)
	if err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

// TestRecord13 covers what interop with crypto/tls clients (tlslayer_test.go) cannot reach:
// every suite, records split anywhere, KeyUpdate in both forms, alerts, tampering and sizes.
func TestRecord13(t *testing.T) {
	for _, suite := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256} {
		t.Run(tls.CipherSuiteName(suite), func(t *testing.T) {
			srv, cli := pair13(t, suite)
			msg := make([]byte, 3*maxPlaintext+5)
			_, _ = rand.Read(msg)
			var wire []byte
			for off := 0; off < len(msg); off += maxPlaintext {
				wire = cli.sealBytes(wire, msg[off:min(off+maxPlaintext, len(msg))], recordApplicationData)
			}
			// Fed a byte at a time, only whole records are consumed.
			var plain []byte
			raw := []byte{}
			for _, b := range wire {
				raw = append(raw, b)
				used, p, reply, err := srv.open(raw, plain, nil)
				if err != nil || len(reply) > 0 {
					t.Fatal(err, reply)
				}
				plain, raw = p, raw[used:]
			}
			if !bytes.Equal(plain, msg) || len(raw) != 0 {
				t.Fatalf("opened %d bytes, %d left", len(plain), len(raw))
			}

			// KeyUpdate asking for an answer: the server answers under its old key, then both
			// directions move on, and traffic still flows.
			ku := cli.sealBytes(nil, []byte{handshakeKeyUpdate, 0, 0, 1, 1}, recordHandshake)
			if err := cli.out.update(cli); err != nil {
				t.Fatal(err)
			}
			ku = cli.sealBytes(ku, []byte("after"), recordApplicationData)
			used, p, reply, err := srv.open(ku, nil, nil)
			if err != nil || used != len(ku) || string(p) != "after" || len(reply) == 0 {
				t.Fatalf("KeyUpdate: used %d/%d %q reply %d %v", used, len(ku), p, len(reply), err)
			}
			_, p, back, err := cli.open(reply, nil, nil)
			if err != nil || len(p) != 0 || len(back) != 0 {
				t.Fatalf("client reading the answer: %q %v", p, err)
			}
			down := srv.sealBytes(nil, []byte("down"), recordApplicationData)
			if _, p, _, err := cli.open(down, nil, nil); err != nil || string(p) != "down" {
				t.Fatalf("after KeyUpdate: %q %v", p, err)
			}
			// And one that asks for nothing.
			ku = cli.sealBytes(nil, []byte{handshakeKeyUpdate, 0, 0, 1, 0}, recordHandshake)
			_ = cli.out.update(cli)
			ku = cli.sealBytes(ku, []byte("x"), recordApplicationData)
			if _, p, reply, err := srv.open(ku, nil, nil); err != nil || string(p) != "x" || len(reply) != 0 {
				t.Fatalf("KeyUpdate not requested: %q %d %v", p, len(reply), err)
			}

			for _, bad := range []struct {
				name string
				rec  func() []byte
				want error
			}{
				{"close_notify", func() []byte { return cli.sealBytes(nil, []byte{1, alertCloseNotify}, recordAlert) }, errCloseNotify},
				{"fatal alert", func() []byte { return cli.sealBytes(nil, []byte{2, 40}, recordAlert) }, errPeerAlert},
				{"other handshake message", func() []byte { return cli.sealBytes(nil, []byte{4, 0, 0, 0}, recordHandshake) }, errUnexpectedMsg},
				{"plaintext record", func() []byte { return []byte{recordHandshake, 3, 3, 0, 1, 0} }, errUnexpectedMsg},
				{"oversized", func() []byte { return []byte{recordApplicationData, 3, 3, 0x41, 0x01} }, errRecordOverflow},
				{"tampered", func() []byte {
					r := cli.sealBytes(nil, []byte("hello"), recordApplicationData)
					r[len(r)-1] ^= 1
					return r
				}, errBadRecordMAC},
			} {
				s2, c2 := pair13(t, suite)
				cli = c2
				if _, _, _, err := s2.open(bad.rec(), nil, nil); !errors.Is(err, bad.want) {
					t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
				}
			}
		})
	}
}

func BenchmarkRecord13Seal16K(b *testing.B) {
	srv, _ := pair13(&testing.T{}, tls.TLS_AES_128_GCM_SHA256)
	payload := make([]byte, maxPlaintext)
	buf := make([]byte, 0, sealedLen(maxPlaintext))
	b.SetBytes(maxPlaintext)
	b.ReportAllocs()
	for b.Loop() {
		buf = srv.sealBytes(buf[:0], payload, recordApplicationData)
	}
}

func BenchmarkRecord13Open16K(b *testing.B) {
	srv, cli := pair13(&testing.T{}, tls.TLS_AES_128_GCM_SHA256)
	payload := make([]byte, maxPlaintext)
	plain := make([]byte, 0, maxPlaintext+64)
	b.SetBytes(maxPlaintext)
	b.ReportAllocs()
	recs := make([][]byte, 0, 1024)
	for b.Loop() {
		if len(recs) == 0 {
			b.StopTimer()
			for range 1024 {
				recs = append(recs, cli.sealBytes(nil, payload, recordApplicationData))
			}
			b.StartTimer()
		}
		r := recs[0] // in order: each record's nonce is its sequence number
		recs = recs[1:]
		if _, _, _, err := srv.open(r, plain[:0], nil); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzRecord13Open: whatever a peer sends, opening neither panics nor consumes a partial
// record, and a valid record after garbage is never taken as valid.
func FuzzRecord13Open(f *testing.F) {
	srv, cli := pair13(&testing.T{}, tls.TLS_AES_128_GCM_SHA256)
	f.Add(cli.sealBytes(nil, []byte("PING\r\n"), recordApplicationData))
	f.Add([]byte{recordApplicationData, 3, 3, 0, 17})
	f.Add([]byte{recordApplicationData, 3, 3, 0xff, 0xff, 1, 2, 3})
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := *srv
		used, _, _, err := s.open(raw, nil, nil)
		if used > len(raw) {
			t.Fatalf("used %d of %d", used, len(raw))
		}
		if err == nil && used > 0 && s.in.seq == srv.in.seq {
			t.Fatal("consumed bytes without opening a record")
		}
	})
}

func TestPartialTail(t *testing.T) {
	rec := func(n int) []byte {
		return append([]byte{recordApplicationData, 3, 3, byte(n >> 8), byte(n)}, make([]byte, n)...)
	}
	two := append(rec(300), rec(5)...)
	for _, c := range []struct {
		raw  []byte
		want int
	}{
		{nil, 0}, {two, 0}, {two[:3], 2}, {two[:5], 300}, {two[:305], 0}, {two[:307], 3}, {two[:309], 1},
	} {
		if got := partialTail(c.raw); got != c.want {
			t.Errorf("partialTail(%d bytes) = %d, want %d", len(c.raw), got, c.want)
		}
	}
}

// sinkConn is an engine connection that takes every write.
type sinkConn struct {
	Conn
	n int
}

func (s *sinkConn) Writev(bs [][]byte) (int, error) {
	for _, b := range bs {
		s.n += len(b)
	}
	return s.n, nil
}

// BenchmarkTLSLayerWritev is a flush of one 128-byte delivery through an established TLS 1.3
// session: sealing into the pooled batch and the write to the engine.
func BenchmarkTLSLayerWritev(b *testing.B) {
	srv, _ := pair13(&testing.T{}, tls.TLS_AES_128_GCM_SHA256)
	l := &tlsLayer{Conn: &sinkConn{}, state: tlsOpen, rec: srv}
	msg := [][]byte{[]byte("MSG x 1 128\r\n"), make([]byte, 130)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Writev(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRecord13PostHandshake: the client side of a session reads past a server's session
// tickets, whole or cut across records; the server side refuses them. A KeyUpdate must end
// its record, and a handshake message cut across records must not be interleaved with data.
func TestRecord13PostHandshake(t *testing.T) {
	srv, cli := pair13(t, tls.TLS_AES_128_GCM_SHA256)
	cli.client = true
	ticket := append([]byte{handshakeNewSessionTicket, 0, 1, 4}, make([]byte, 260)...)
	var wire []byte
	wire = srv.sealBytes(wire, ticket, recordHandshake)
	wire = srv.sealBytes(wire, ticket[:3], recordHandshake) // cut inside the header
	wire = srv.sealBytes(wire, ticket[3:100], recordHandshake)
	wire = srv.sealBytes(wire, ticket[100:], recordHandshake)
	wire = srv.sealBytes(wire, []byte("INFO {}\r\n"), recordApplicationData)
	used, plain, reply, err := cli.open(wire, nil, nil)
	if err != nil || used != len(wire) || string(plain) != "INFO {}\r\n" || len(reply) != 0 || len(cli.hsPart) != 0 {
		t.Fatalf("client reading tickets: used %d/%d %q %v", used, len(wire), plain, err)
	}
	// And a KeyUpdate the server asks to be answered, after them.
	ku := srv.sealBytes(nil, []byte{handshakeKeyUpdate, 0, 0, 1, 1}, recordHandshake)
	_ = srv.out.update(srv)
	ku = srv.sealBytes(ku, []byte("x"), recordApplicationData)
	if _, p, reply, err := cli.open(ku, nil, nil); err != nil || string(p) != "x" || len(reply) == 0 {
		t.Fatalf("client KeyUpdate: %q %d %v", p, len(reply), err)
	}

	for _, bad := range []struct {
		name string
		recs func(srv, cli *record13) []byte
	}{
		{"ticket to a server", func(srv, cli *record13) []byte { return cli.sealBytes(nil, ticket, recordHandshake) }},
		{"data after KeyUpdate in its record", func(srv, cli *record13) []byte {
			return cli.sealBytes(nil, []byte{handshakeKeyUpdate, 0, 0, 1, 0, handshakeKeyUpdate, 0, 0, 1, 0}, recordHandshake)
		}},
		{"data inside a cut message", func(srv, cli *record13) []byte {
			b := cli.sealBytes(nil, []byte{handshakeKeyUpdate, 0, 0}, recordHandshake)
			return cli.sealBytes(b, []byte("x"), recordApplicationData)
		}},
		{"oversized message", func(srv, cli *record13) []byte {
			return cli.sealBytes(nil, []byte{handshakeKeyUpdate, 2, 0, 0}, recordHandshake)
		}},
	} {
		s2, c2 := pair13(t, tls.TLS_AES_128_GCM_SHA256)
		if _, _, _, err := s2.open(bad.recs(s2, c2), nil, nil); !errors.Is(err, errUnexpectedMsg) {
			t.Errorf("%s: %v, want %v", bad.name, err, errUnexpectedMsg)
		}
	}
}
