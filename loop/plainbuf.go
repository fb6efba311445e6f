package loop

import "sync"

// plainBuf is input a connection adapter has opened (TLS records decrypted, an s2 stream
// decompressed) and the parser has not consumed yet, in pooled buffers of a few size classes:
// an idle connection holds none.
type plainBuf struct {
	plain    []byte  // opened input; plain[rd:] is what the parser has not consumed
	plainBox *[]byte // the pool's handle on plain's buffer (nil: not pooled)
	rd       int
	// seen is where in plain the engine's last Peek ended: what lies beyond it was opened
	// after the engine last looked (netpoll reads while traffic runs).
	seen      int
	plainPool *sync.Pool // where plainBox came from
}

// plainClasses are an adapter's buffer sizes, smallest first, each with its pool.
type plainClasses []plainClass

type plainClass struct {
	size int
	pool *sync.Pool
}

func newPlainClasses(sizes ...int) *plainClasses {
	cs := make(plainClasses, len(sizes))
	for i, n := range sizes {
		cs[i] = plainClass{size: n, pool: &sync.Pool{New: func() any { b := make([]byte, 0, n); return &b }}}
	}
	return &cs
}

// plainFor makes room in plain for n more bytes, moving what is unconsumed to the front of
// the same or a larger pooled buffer. Adapters call it only where the engine holds no slice of
// plain (before Peek or after Discard).
func (p *plainBuf) plainFor(n int, classes *plainClasses) {
	if p.plain != nil && cap(p.plain)-len(p.plain) >= n {
		return
	}
	left := len(p.plain) - p.rd
	want := left + n
	if p.plain != nil && cap(p.plain) >= want {
		copy(p.plain, p.plain[p.rd:])
		p.plain, p.seen, p.rd = p.plain[:left], max(p.seen-p.rd, 0), 0
		return
	}
	var box *[]byte
	var pool *sync.Pool
	for _, c := range *classes {
		if want <= c.size {
			box, pool = c.pool.Get().(*[]byte), c.pool
			break
		}
	}
	var nb []byte
	if box != nil {
		nb = (*box)[:0]
	} else {
		nb = make([]byte, 0, want)
	}
	nb = append(nb, p.plain[p.rd:]...)
	seen := max(p.seen-p.rd, 0)
	p.releasePlain()
	p.plain, p.plainBox, p.plainPool, p.seen = nb, box, pool, seen
}

// releasePlain hands the buffer back to its pool (the pool's own pointer, or a new one would
// be allocated per release; not when it has been regrown past its class).
func (p *plainBuf) releasePlain() {
	if p.plain == nil {
		return
	}
	if box := p.plainBox; box != nil && cap(*box) == cap(p.plain) {
		*box = p.plain[:0]
		p.plainPool.Put(box)
	}
	p.plain, p.plainBox, p.plainPool, p.rd, p.seen = nil, nil, nil, 0, 0
}
