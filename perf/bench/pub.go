package bench

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"
)

// pubConn is a raw publisher: one goroutine writes pre-built chunks of PUB frames, another
// reads control lines (PONG for flushes, PING, -ERR).
type pubConn struct {
	rc   *rawConn
	wmu  sync.Mutex
	pong chan struct{}
	done chan struct{}
}

func dialPub(addr string) (*pubConn, error) {
	rc, err := dialRaw(addr, 64<<10)
	if err != nil {
		return nil, err
	}
	p := &pubConn{rc: rc, pong: make(chan struct{}, 16), done: make(chan struct{})}
	go p.readLoop()
	return p, nil
}

func (p *pubConn) readLoop() {
	defer close(p.done)
	for {
		line, err := p.rc.r.ReadSlice('\n')
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.rc.setErr("read: " + err.Error())
			}
			return
		}
		switch {
		case bytes.HasPrefix(line, []byte("PONG")):
			select {
			case p.pong <- struct{}{}:
			default:
			}
		case bytes.HasPrefix(line, []byte("PING")):
			p.wmu.Lock()
			_, err = p.rc.c.Write([]byte("PONG\r\n"))
			p.wmu.Unlock()
			if err != nil {
				p.rc.setErr("write: " + err.Error())
				return
			}
		case bytes.HasPrefix(line, []byte("-ERR")):
			p.rc.setErr("server: " + trimCRLF(line))
		}
	}
}

func (p *pubConn) write(b []byte) error {
	p.wmu.Lock()
	_, err := p.rc.c.Write(b)
	p.wmu.Unlock()
	return err
}

// flush sends PING and waits for the PONG.
func (p *pubConn) flush(timeout time.Duration) error {
	if err := p.write([]byte("PING\r\n")); err != nil {
		return err
	}
	select {
	case <-p.pong:
		return nil
	case <-p.done:
		return errors.New("connection closed while flushing")
	case <-time.After(timeout):
		return errors.New("flush timed out")
	}
}

func (p *pubConn) Close() {
	p.rc.Close()
	<-p.done
}

// chunk is a run of PUB frames written with one write(2), and how many deliveries it should cause.
type chunk struct {
	buf        []byte
	msgs       int
	deliveries int64
	ends       []int   // end offset of each frame in buf
	cum        []int64 // deliveries caused by frames [0..i]
}

// buildChunks lays out PUB frames for the given subjects (cycled), ~64 KiB per chunk.
// deliveriesOf tells how many deliveries one message on a subject causes.
func buildChunks(subjects []string, size int, deliveriesOf func(subj string) int64) []chunk {
	payload := bytes.Repeat([]byte("x"), size)
	frameLen := len("PUB ") + len(subjects[0]) + 1 + len(strconv.Itoa(size)) + 2 + size + 2
	per := (64 << 10) / frameLen
	if per < 1 {
		per = 1
	}
	if per > 4096 {
		per = 4096
	}
	total := len(subjects)
	if total < per {
		total = per
	}
	var chunks []chunk
	for i := 0; i < total; {
		var ch chunk
		for j := 0; j < per && i < total; j++ {
			s := subjects[i%len(subjects)]
			ch.buf = append(ch.buf, "PUB "...)
			ch.buf = append(ch.buf, s...)
			ch.buf = append(ch.buf, ' ')
			ch.buf = strconv.AppendInt(ch.buf, int64(size), 10)
			ch.buf = append(ch.buf, "\r\n"...)
			ch.buf = append(ch.buf, payload...)
			ch.buf = append(ch.buf, "\r\n"...)
			ch.msgs++
			if deliveriesOf != nil {
				ch.deliveries += deliveriesOf(s)
			}
			ch.ends = append(ch.ends, len(ch.buf))
			ch.cum = append(ch.cum, ch.deliveries)
			i++
		}
		chunks = append(chunks, ch)
	}
	return chunks
}

// truncateChunk returns the first n frames of a chunk (the last chunk of a --msgs run).
func truncateChunk(ch chunk, n int) chunk {
	if n >= ch.msgs {
		return ch
	}
	return chunk{buf: ch.buf[:ch.ends[n-1]], msgs: n, deliveries: ch.cum[n-1]}
}
