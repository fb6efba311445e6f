package sublist

import "hash/maphash"

// DefaultCacheSize is used by NewCache when size < 1.
const DefaultCacheSize = 4096

// Cache is an L1 match cache owned by one goroutine (a reactor); not safe for
// concurrent use. Being single-owner is what lets a hit skip every lock: the
// only shared state it reads is two shard generations, atomically.
type Cache[T comparable] struct {
	s    *Sublist[T]
	m    map[string]*cacheEntry[T]
	size int
	// seen admits a subject on its second miss only: a small Bloom filter of recently
	// missed subjects, cleared every admitReset misses so it stays sparse. Request/reply
	// traffic publishes every reply to a fresh inbox subject; caching those would cost a
	// key allocation each and evict the hot subjects every few thousand requests.
	seen   [admitBits / 64]uint64
	misses int
	seed   maphash.Seed // for seen: the runtime's hash is several times faster than FNV on long subjects
	// lookups and hits feed /subsz's num_matches and cache_hit_rate; plain counters,
	// since only the owner writes them and reads go through the owner too.
	lookups, hits uint64
}

const (
	admitBits  = 1 << 15 // 4 KiB per cache
	admitReset = 1024    // keeps the filter under 7% full: about 0.4% false admissions
)

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
	// The map grows to size as subjects come: a reactor has a cache per account, and most
	// accounts publish on a handful of subjects.
	return &Cache[T]{s: s, m: make(map[string]*cacheEntry[T], min(size, 16)), size: size, seed: maphash.MakeSeed()}
}

// Match is Sublist.Match through the cache. On a hit whose shard generations
// are unchanged it takes no lock and allocates nothing. Any Insert/Remove that
// happened-before this call and touched the subject's literal shard or the
// wildcard shard has bumped a generation, so a stale result is never returned.
func (c *Cache[T]) Match(subject []byte) *Result[T] {
	c.lookups++
	if e := c.m[string(subject)]; e != nil {
		if e.lit.gen.Load() == e.gl && c.s.wild.gen.Load() == e.gw {
			c.hits++
			return e.res
		}
		e.res, e.lit, e.gl, e.gw = c.s.match(subject)
		return e.res
	}
	res, lit, gl, gw := c.s.match(subject)
	if !c.admit(uint32(maphash.Bytes(c.seed, subject))) {
		return res
	}
	if len(c.m) >= c.size {
		c.evict()
	}
	c.m[string(subject)] = &cacheEntry[T]{res: res, lit: lit, gl: gl, gw: gw}
	return res
}

// admit reports whether a missed subject with hash h was missed recently too, and
// remembers it otherwise. Two bit positions from one 32-bit hash keep false
// admissions rare.
func (c *Cache[T]) admit(h uint32) bool {
	b1, b2 := h%admitBits, (h>>15|h<<17)%admitBits
	m1, m2 := uint64(1)<<(b1%64), uint64(1)<<(b2%64)
	if c.seen[b1/64]&m1 != 0 && c.seen[b2/64]&m2 != 0 {
		return true
	}
	if c.misses++; c.misses > admitReset {
		c.seen = [admitBits / 64]uint64{}
		c.misses = 0
	}
	c.seen[b1/64] |= m1
	c.seen[b2/64] |= m2
	return false
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

// CacheStats are a cache's figures, in nats-server's /subsz terms: fanout is the
// number of plain subscriptions plus queue groups a cached subject reaches.
type CacheStats struct {
	Len       int
	Lookups   uint64
	Hits      uint64 // lookups answered from a current entry
	MaxFanout int
	TotFanout int // over every entry; divide by Len for the average
}

// Stats returns c's figures. Like every other method it must run on c's owner: it walks
// the entries for the fanout.
func (c *Cache[T]) Stats() CacheStats {
	st := CacheStats{Len: len(c.m), Lookups: c.lookups, Hits: c.hits}
	for _, e := range c.m {
		n := len(e.res.Plain) + len(e.res.Queues)
		st.TotFanout += n
		st.MaxFanout = max(st.MaxFanout, n)
	}
	return st
}
