package test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

const ioTimeout = 3 * time.Second

// rawConn is a client speaking the protocol by hand.
type rawConn struct {
	t        *testing.T
	c        net.Conn
	br       *bufio.Reader
	infoLine string
	info     map[string]any
	// autoPong answers server PINGs and hides them from the test (default on).
	autoPong bool
}

// dialRaw connects and reads the INFO line.
func dialRaw(t *testing.T, u string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", hostPort(t, u), ioTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return wrapRaw(t, c)
}

// wrapRaw takes over a fresh connection and reads the INFO line.
func wrapRaw(t *testing.T, c net.Conn) *rawConn {
	t.Helper()
	r := &rawConn{t: t, c: c, br: bufio.NewReaderSize(c, 64*1024), autoPong: true}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	line, err := r.br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading INFO: %v (got %q)", err, line)
	}
	r.infoLine = line
	if !strings.HasPrefix(line, "INFO ") || !strings.HasSuffix(line, " \r\n") {
		t.Fatalf("INFO line shape: %q", line)
	}
	js := strings.TrimSuffix(strings.TrimPrefix(line, "INFO "), " \r\n")
	if err := json.Unmarshal([]byte(js), &r.info); err != nil {
		t.Fatalf("INFO json: %v in %q", err, line)
	}
	return r
}

// dialConnected dials and sends a quiet CONNECT (plus extra JSON fields).
func dialConnected(t *testing.T, u string, extra string) *rawConn {
	t.Helper()
	r := dialRaw(t, u)
	js := `{"verbose":false,"pedantic":false`
	if extra != "" {
		js += "," + extra
	}
	r.send("CONNECT " + js + "}\r\n")
	return r
}

// withT returns a view of r that reports failures to t (for use inside subtests).
func (r *rawConn) withT(t *testing.T) *rawConn {
	c := *r
	c.t = t
	return &c
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	_ = r.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatalf("write %q: %v", trunc(s), err)
	}
}

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "...(" + strconv.Itoa(len(s)) + " bytes)"
	}
	return s
}

// readFrame reads one server frame: a control line, plus the payload for MSG/HMSG.
// Server PINGs are answered and skipped when autoPong is set.
func (r *rawConn) readFrame() (string, error) {
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return line, err
		}
		if line == "PING\r\n" && r.autoPong {
			_, _ = io.WriteString(r.c, "PONG\r\n")
			continue
		}
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "MSG" || f[0] == "HMSG") {
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil || n < 0 {
				return line, errors.New("bad size in " + line)
			}
			buf := make([]byte, n+2)
			k, err := io.ReadFull(r.br, buf)
			line += string(buf[:k])
			if err != nil {
				return line, err
			}
		}
		return line, nil
	}
}

// expect reads frames until at least len(want) bytes arrived and checks they equal want.
func (r *rawConn) expect(want string) {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(ioTimeout))
	var got strings.Builder
	for got.Len() < len(want) {
		f, err := r.readFrame()
		got.WriteString(f)
		if err != nil {
			r.t.Fatalf("expected %q, got %q then error %v", trunc(want), trunc(got.String()), err)
		}
	}
	if got.String() != want {
		r.t.Fatalf("wire mismatch\n got: %q\nwant: %q", trunc(got.String()), trunc(want))
	}
}

// expectOpen proves the connection is alive and every earlier op was processed: PING → PONG.
func (r *rawConn) expectOpen() {
	r.t.Helper()
	r.send("PING\r\n")
	r.expect("PONG\r\n")
}

// expectClosed reads until EOF; any frame other than a server PING is a failure.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(ioTimeout))
	for {
		f, err := r.readFrame()
		if f != "" {
			r.t.Fatalf("expected close, got %q (err %v)", trunc(f), err)
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			r.t.Fatalf("connection not closed within %v", ioTimeout)
		}
		return // EOF or reset: closed
	}
}

// readAll reads everything until EOF or the deadline and reports whether EOF/reset was seen.
func (r *rawConn) readAll(d time.Duration) (string, bool) {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(r.br)
	if err == nil {
		return string(b), true
	}
	return string(b), !errors.Is(err, os.ErrDeadlineExceeded)
}
