package sublist

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

type bsub struct{ id int }

// wildcardHeavy builds 10k subscriptions of mixed literal, '*' and '>'
// patterns over a 3-4 token space, roughly what a busy account looks like.
func wildcardHeavy() (*Sublist[*bsub], [][]byte) {
	s := New[*bsub]()
	r := rand.New(rand.NewPCG(1, 1))
	tok := func(n int) string { return fmt.Sprint("t", r.IntN(n)) }
	for i := range 10000 {
		var subj string
		switch i % 6 {
		case 0:
			subj = fmt.Sprintf("%s.%s.%s", tok(20), tok(20), tok(50))
		case 1:
			subj = fmt.Sprintf("%s.*.%s", tok(20), tok(50))
		case 2:
			subj = fmt.Sprintf("%s.%s.>", tok(20), tok(20))
		case 3:
			subj = fmt.Sprintf("*.%s.%s", tok(20), tok(50))
		case 4:
			subj = fmt.Sprintf("%s.*.*.%s", tok(20), tok(10))
		case 5:
			subj = fmt.Sprintf("*.%s.>", tok(20))
		}
		q := ""
		if i%5 == 0 {
			q = fmt.Sprint("q", i%7)
		}
		s.Insert(subj, q, &bsub{i})
	}
	var pubs [][]byte
	for range 1024 {
		pubs = append(pubs, fmt.Appendf(nil, "%s.%s.%s", tok(20), tok(20), tok(50)))
	}
	return s, pubs
}

func BenchmarkCacheMatchHit(b *testing.B) {
	s := New[*bsub]()
	s.Insert("foo.bar", "", &bsub{1})
	s.Insert("foo.*", "q", &bsub{2})
	s.Insert(">", "", &bsub{3})
	c := NewCache(s, 1024)
	subj := []byte("foo.bar")
	c.Match(subj)
	b.ReportAllocs()
	for b.Loop() {
		c.Match(subj)
	}
}

func BenchmarkCacheMatchHitWildcardHeavy(b *testing.B) {
	s, pubs := wildcardHeavy()
	c := NewCache(s, 4096)
	for _, p := range pubs {
		c.Match(p)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Match(pubs[i&1023])
		i++
	}
}

func BenchmarkSublistMatchLiteral(b *testing.B) {
	s := New[*bsub]()
	for i := range 1000 {
		s.Insert(fmt.Sprintf("svc.%d.req", i), "", &bsub{i})
	}
	subj := []byte("svc.500.req")
	s.Match(subj)
	b.ReportAllocs()
	for b.Loop() {
		s.Match(subj)
	}
}

func BenchmarkSublistMatchWildcardHeavy(b *testing.B) {
	s, pubs := wildcardHeavy()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Match(pubs[i&1023])
		i++
	}
}

func BenchmarkInsertRemove(b *testing.B) {
	s, _ := wildcardHeavy()
	x := &bsub{-1}
	b.ReportAllocs()
	for b.Loop() {
		s.Insert("t1.t2.inbox", "", x)
		s.Remove("t1.t2.inbox", "", x)
	}
}

// Every reactor matches through its own cache while another goroutine churns
// subscriptions. "inbox" churns one first token (_INBOX, the usual source of
// SUB/UNSUB churn), which thanks to per-shard generations leaves the other
// shards' cache entries valid; "spread" churns first tokens the publishers use,
// so hits keep turning into misses (the worst case).
func BenchmarkParallelMatchWithInserts(b *testing.B) {
	for _, mode := range []string{"inbox", "spread"} {
		b.Run(mode, func(b *testing.B) {
			s, pubs := wildcardHeavy()
			stop := make(chan struct{})
			done := make(chan struct{})
			var churn atomic.Int64
			go func() {
				defer close(done)
				x := &bsub{-1}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					subj := fmt.Sprintf("_INBOX.%d", i)
					if mode == "spread" {
						subj = fmt.Sprintf("t%d.churn.%d", i%20, i%64)
					}
					s.Insert(subj, "", x)
					s.Remove(subj, "", x)
					churn.Add(1)
				}
			}()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				c := NewCache(s, 4096)
				i := 0
				for pb.Next() {
					c.Match(pubs[i&1023])
					i++
				}
			})
			close(stop)
			<-done
			b.ReportMetric(float64(churn.Load())/float64(b.N), "churn/op")
		})
	}
}

// BenchmarkCacheMatchMissUnique is the JetStream ack path: every publish goes to a subject never
// seen before ($JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>), matched by
// one '>' subscription, so each lookup misses the cache and is turned away by its admission filter.
func BenchmarkCacheMatchMissUnique(b *testing.B) {
	s := New[*bsub]()
	s.Insert("$JS.ACK.benchstream.fp.>", "", &bsub{1})
	s.Insert("_INBOX.abcdefghijklmnopqrstuv.*", "", &bsub{2})
	c := NewCache(s, DefaultCacheSize)
	subjs := make([][]byte, 1<<16)
	for i := range subjs {
		subjs[i] = fmt.Appendf(nil, "$JS.ACK.benchstream.fp.1.%d.%d.1796650000%09d.%d", 1000000+i, 1000000+i, i, 500000-i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if r := c.Match(subjs[i&(len(subjs)-1)]); len(r.Plain) != 1 {
			b.Fatal("no match")
		}
		i++
	}
}
