// Package outbound holds per-connection outbound queues: producers on any reactor append whole
// frames under a short lock, and the owning reactor drains them with one writev per batch.
// Chunks come from a shared pool and go back after each flush, so an idle connection holds no
// outbound memory.
package outbound

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ChunkSize is the unit of outbound storage. 64 KiB keeps a 1→N fan-out of small messages in
// one or two iovecs per connection per batch while a large payload spans a handful.
const ChunkSize = 64 * 1024

var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, 0, ChunkSize)
	return &b
}}

// GetChunk returns an empty ChunkSize buffer from the pool the queues use; other
// per-connection byte backlogs (netpoll's unsent bytes) share it.
func GetChunk() []byte { return (*chunkPool.Get().(*[]byte))[:0] }

// PutChunk returns a buffer from GetChunk (or Take) to the pool; others are dropped.
func PutChunk(b []byte) {
	if cap(b) != ChunkSize {
		return
	}
	b = b[:0]
	chunkPool.Put(&b)
}

// AppendChunks copies b onto the end of a backlog of pooled chunks (filling the last one
// first), so a backlog never needs one big buffer grown by copying.
func AppendChunks(chunks [][]byte, b []byte) [][]byte {
	for len(b) > 0 {
		last := len(chunks) - 1
		if last < 0 || len(chunks[last]) == cap(chunks[last]) {
			chunks = append(chunks, GetChunk())
			last++
		}
		c := chunks[last]
		k := copy(c[len(c):cap(c)], b)
		chunks[last] = c[:len(c)+k]
		b = b[k:]
	}
	return chunks
}

// ErrSlowConsumer reports that accepting a frame would take the connection past its bound.
var ErrSlowConsumer = errors.New("slow consumer")

// Queue is one connection's outbound bytes. The zero value is ready to use.
type Queue struct {
	mu     sync.Mutex
	chunks [][]byte
	queued int64 // bytes appended and not yet handed to the socket layer
	// sched is set while the queue sits in some reactor's flush list, so a burst of frames
	// costs one entry (and at most one wake) however many producers touch it.
	sched bool
	slow  bool
	// sock is what the socket layer still holds after the last flush (gnet's own buffer); the
	// owner publishes it so producers on other reactors can apply the bound without touching gnet.
	sock atomic.Int64
	// msgs and bytes count the messages delivered through AppendMsg (monitoring's out_msgs and
	// out_bytes), under the lock Append takes anyway.
	msgs, bytes int64
	// peak is the most pending bytes an append has seen: a connection that held a lot tells
	// the engine, when it closes, that memory is worth handing back to the OS.
	peak int64
}

// Append adds one frame made of up to three parts (control line, body, trailer) atomically.
// max bounds queued plus socket-held bytes; 0 means unbounded. It reports the pending bytes
// after the append and whether the caller must schedule a flush (the queue was not yet
// scheduled). When the bound would be exceeded nothing is appended, the queue is marked slow
// and ErrSlowConsumer is returned together with schedule=true once, so the owner closes it.
func (q *Queue) Append(a, b, c []byte, max int64) (pending int64, schedule bool, err error) {
	return q.append(a, b, c, max, false)
}

// AppendMsg is Append for a delivered message whose payload is b: it also counts the message
// and its payload bytes (see Counts).
func (q *Queue) AppendMsg(a, b, c []byte, max int64) (pending int64, schedule bool, err error) {
	return q.append(a, b, c, max, true)
}

func (q *Queue) append(a, b, c []byte, max int64, msg bool) (pending int64, schedule bool, err error) {
	n := int64(len(a) + len(b) + len(c))
	q.mu.Lock()
	if q.slow {
		q.mu.Unlock()
		return 0, false, ErrSlowConsumer
	}
	pending = q.queued + q.sock.Load() + n
	if max > 0 && pending > max {
		q.slow = true
		schedule = !q.sched
		q.sched = true
		q.mu.Unlock()
		return pending, schedule, ErrSlowConsumer
	}
	q.write(a)
	q.write(b)
	q.write(c)
	q.queued += n
	if pending > q.peak {
		q.peak = pending
	}
	if msg {
		q.msgs++
		q.bytes += int64(len(b))
	}
	schedule = !q.sched
	q.sched = true
	q.mu.Unlock()
	return pending, schedule, nil
}

func (q *Queue) write(p []byte) {
	for len(p) > 0 {
		last := len(q.chunks) - 1
		if last < 0 || len(q.chunks[last]) == cap(q.chunks[last]) {
			q.chunks = append(q.chunks, GetChunk())
			last++
		}
		t := q.chunks[last]
		k := copy(t[len(t):cap(t)], p)
		q.chunks[last] = t[:len(t)+k]
		p = p[k:]
	}
}

// Take hands the queued chunks to the owner for writing, appending them to dst, and clears the
// scheduled mark. slow reports a queue that went over its bound: the owner closes it instead.
// The caller must Release the chunks once the socket layer has copied or sent them.
func (q *Queue) Take(dst [][]byte) (out [][]byte, slow bool) {
	q.mu.Lock()
	out = append(dst, q.chunks...)
	for i := range q.chunks {
		q.chunks[i] = nil
	}
	q.chunks = q.chunks[:0]
	q.queued = 0
	q.sched = false
	slow = q.slow
	q.mu.Unlock()
	return out, slow
}

// Release returns chunks obtained from Take to the pool.
func Release(chunks [][]byte) {
	for i, c := range chunks {
		PutChunk(c)
		chunks[i] = nil
	}
}

// SetSocketPending records how many bytes the socket layer still holds for this connection.
func (q *Queue) SetSocketPending(n int) { q.sock.Store(int64(n)) }

// Pending is the total of queued and socket-held bytes.
func (q *Queue) Pending() int64 {
	q.mu.Lock()
	n := q.queued
	q.mu.Unlock()
	return n + q.sock.Load()
}

// Peak is the most bytes the queue and the socket layer held at once.
func (q *Queue) Peak() int64 {
	q.mu.Lock()
	n := q.peak
	q.mu.Unlock()
	return n
}

// Counts reports the messages and payload bytes appended with AppendMsg so far.
func (q *Queue) Counts() (msgs, bytes int64) {
	q.mu.Lock()
	msgs, bytes = q.msgs, q.bytes
	q.mu.Unlock()
	return msgs, bytes
}

// Reset drops everything queued (the connection is gone) and marks the queue slow so late
// producers stop appending.
func (q *Queue) Reset() {
	q.mu.Lock()
	Release(q.chunks)
	q.chunks = q.chunks[:0]
	q.queued = 0
	q.slow = true
	q.mu.Unlock()
}
