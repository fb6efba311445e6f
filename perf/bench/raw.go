// Package bench is the load generator of natsd's perf rig: publishers and subscribers that
// speak the NATS client protocol over raw TCP (so the client is not the bottleneck), a
// nats.go request/reply latency probe, idle-connection RSS, and /proc CPU accounting of the
// server under test. It is used by cmd/natsbench (point it at any server) and cmd/perfrun
// (side-by-side natsd vs nats-server).
package bench

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// hostPort turns nats://host:port (or host:port) into host:port.
func hostPort(server string) (string, error) {
	if !strings.Contains(server, "://") {
		server = "nats://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	h := u.Host
	if u.Port() == "" {
		h = net.JoinHostPort(u.Hostname(), "4222")
	}
	return h, nil
}

// ClientTLS, when set, is the TLS every rig connection starts after INFO (the server must
// require it); nil: plaintext.
var ClientTLS *tls.Config

// rawConn is one client connection speaking the text protocol directly.
type rawConn struct {
	c   net.Conn
	r   *bufio.Reader
	err atomic.Value // first protocol/network error seen (string)
}

const connectLine = "CONNECT {\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\"name\":\"natsbench\",\"lang\":\"go\",\"version\":\"raw\",\"protocol\":1,\"echo\":true,\"headers\":true,\"no_responders\":true}\r\n"

// dialRaw connects, reads INFO, sends CONNECT and waits for the PONG of a PING.
func dialRaw(addr string, readBuf int) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		_ = tc.SetReadBuffer(4 << 20)
		_ = tc.SetWriteBuffer(4 << 20)
	}
	rc := &rawConn{c: c, r: bufio.NewReaderSize(c, readBuf)}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("reading INFO: %w", err)
	}
	if !bytes.HasPrefix(line, []byte("INFO")) {
		c.Close()
		return nil, fmt.Errorf("expected INFO, got %q", trimCRLF(line))
	}
	if ClientTLS != nil {
		tc := tls.Client(c, ClientTLS)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
		rc.c, rc.r = c, bufio.NewReaderSize(c, readBuf)
	}
	if _, err := c.Write([]byte(connectLine + "PING\r\n")); err != nil {
		c.Close()
		return nil, err
	}
	if err := rc.waitPong(); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return rc, nil
}

func trimCRLF(b []byte) string { return strings.TrimRight(string(b), "\r\n") }

// waitPong reads control lines until PONG (answering PINGs), failing on -ERR.
func (rc *rawConn) waitPong() error {
	for i := 0; i < 1000; i++ {
		line, err := rc.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		switch {
		case bytes.HasPrefix(line, []byte("PONG")):
			return nil
		case bytes.HasPrefix(line, []byte("PING")):
			if _, err := rc.c.Write([]byte("PONG\r\n")); err != nil {
				return err
			}
		case bytes.HasPrefix(line, []byte("-ERR")):
			return fmt.Errorf("server: %s", trimCRLF(line))
		}
	}
	return errors.New("no PONG after 1000 lines")
}

// flush sends PING and waits for PONG (the server has processed everything sent before).
func (rc *rawConn) flush(timeout time.Duration) error {
	_ = rc.c.SetDeadline(time.Now().Add(timeout))
	defer rc.c.SetDeadline(time.Time{})
	if _, err := rc.c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	return rc.waitPong()
}

func (rc *rawConn) Close() { _ = rc.c.Close() }

func (rc *rawConn) setErr(s string) {
	if rc.err.Load() == nil {
		rc.err.Store(s)
	}
}

func (rc *rawConn) Err() string {
	if v := rc.err.Load(); v != nil {
		return v.(string)
	}
	return ""
}

// subReader counts MSG/HMSG deliveries on a subscriber connection until stop is closed
// or the connection fails. It answers server PINGs and records -ERR lines.
type subReader struct {
	rc        *rawConn
	count     atomic.Int64 // messages received
	firstNano atomic.Int64 // wall clock of the first read that held a message
	lastNano  atomic.Int64 // wall clock of the last read that held a message
	onMsgs    func(n int64)
	done      chan struct{}
}

func newSubReader(rc *rawConn, onMsgs func(int64)) *subReader {
	return &subReader{rc: rc, onMsgs: onMsgs, done: make(chan struct{})}
}

// run reads until the connection is closed. Counting is done per read batch: each message's
// control line is parsed for its size and the payload skipped.
func (s *subReader) run() {
	defer close(s.done)
	r := s.rc.r
	var pending int64
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if pending > 0 {
				s.account(pending)
			}
			if !errors.Is(err, net.ErrClosed) {
				s.rc.setErr("read: " + err.Error())
			}
			return
		}
		if len(line) > 3 && (line[0] == 'M' || line[0] == 'H') {
			// MSG subj sid [reply] size / HMSG subj sid [reply] hdr total: the last field is the size.
			l := bytes.TrimRight(line, "\r\n")
			i := bytes.LastIndexByte(l, ' ')
			n, perr := strconv.Atoi(string(l[i+1:]))
			if perr != nil {
				s.rc.setErr(fmt.Sprintf("bad MSG line %q", l))
				return
			}
			if _, err := r.Discard(n + 2); err != nil {
				s.rc.setErr("read: " + err.Error())
				return
			}
			pending++
			// Account when the reader has no more buffered bytes (one clock read per batch).
			if r.Buffered() == 0 || pending >= 4096 {
				s.account(pending)
				pending = 0
			}
			continue
		}
		if pending > 0 {
			s.account(pending)
			pending = 0
		}
		switch {
		case bytes.HasPrefix(line, []byte("PING")):
			if _, err := s.rc.c.Write([]byte("PONG\r\n")); err != nil {
				s.rc.setErr("write: " + err.Error())
				return
			}
		case bytes.HasPrefix(line, []byte("-ERR")):
			s.rc.setErr("server: " + trimCRLF(line))
		}
	}
}

func (s *subReader) account(n int64) {
	now := time.Now().UnixNano()
	s.firstNano.CompareAndSwap(0, now)
	s.lastNano.Store(now)
	s.count.Add(n)
	if s.onMsgs != nil {
		s.onMsgs(n)
	}
}
