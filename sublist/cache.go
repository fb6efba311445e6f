package sublist

// DefaultCacheSize is used by NewCache when size < 1.
const DefaultCacheSize = 4096

// Cache is an L1 match cache owned by one goroutine (a reactor); not safe for
// concurrent use. Being single-owner is what lets a hit skip every lock: the
// only shared state it reads is two shard generations, atomically.
type Cache[T comparable] struct {
	s    *Sublist[T]
	m    map[string]*cacheEntry[T]
	size int
}

// cacheEntry is held by pointer so that revalidating a stale entry rewrites
// it in place instead of re-inserting the key (which would allocate a string).
type cacheEntry[T comparable] struct {
	res *Result[T]
	lit *shard[T] // the literal shard the subject hashes to
	gl  uint64    // lit's generation the result reflects
	gw  uint64    // the wildcard shard's generation the result reflects
}

// NewCache returns an L1 cache in front of s holding at most size subjects.
func NewCache[T comparable](s *Sublist[T], size int) *Cache[T] {
	if size < 1 {
		size = DefaultCacheSize
	}
	return &Cache[T]{s: s, m: make(map[string]*cacheEntry[T], size), size: size}
}

// Match is Sublist.Match through the cache. On a hit whose shard generations
// are unchanged it takes no lock and allocates nothing. Any Insert/Remove that
// happened-before this call and touched the subject's literal shard or the
// wildcard shard has bumped a generation, so a stale result is never returned.
func (c *Cache[T]) Match(subject []byte) *Result[T] {
	if e := c.m[string(subject)]; e != nil {
		if e.lit.gen.Load() == e.gl && c.s.wild.gen.Load() == e.gw {
			return e.res
		}
		e.res, e.lit, e.gl, e.gw = c.s.match(subject)
		return e.res
	}
	res, lit, gl, gw := c.s.match(subject)
	if len(c.m) >= c.size {
		c.evict()
	}
	c.m[string(subject)] = &cacheEntry[T]{res: res, lit: lit, gl: gl, gw: gw}
	return res
}

// evict drops about half the entries. Map iteration starts at a random
// point, which is random enough and costs no bookkeeping on the hit path
// (an LRU would need a write per hit). Halving amortises the O(n) sweep.
func (c *Cache[T]) evict() {
	drop := len(c.m) - c.size/2
	for k := range c.m {
		if drop <= 0 {
			break
		}
		delete(c.m, k)
		drop--
	}
}

// Len returns the number of cached subjects.
func (c *Cache[T]) Len() int { return len(c.m) }
