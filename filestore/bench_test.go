package filestore

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// openBench opens a store for a benchmark: "sync" is the default
// sync-before-ack, "nosync" never fsyncs, "periodic" syncs every two minutes.
func openBench(b *testing.B, mode string) *FileStore {
	cfg := Config{Dir: b.TempDir(), Logf: quietLog}
	switch mode {
	case "nosync":
		cfg.SyncInterval = -1
	case "periodic":
		cfg.SyncInterval = 2 * time.Minute
	case "journal":
		root := cfg.Dir
		cfg.Dir = root + "/store"
		j, err := OpenJournal(nil, root, root+"/journal", quietLog)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { j.Close() })
		cfg.Journal = j
	}
	s, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// drive runs n goroutines that each call run until b.N appends have been
// claimed (claim reports whether one more may start), and reports appends/s.
func drive(b *testing.B, n int, run func(claim func() bool)) {
	var next atomic.Int64
	claim := func() bool { return next.Add(1) <= int64(b.N) }
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(claim)
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
}

// BenchmarkAppend measures acknowledged appends of 128-byte records. "sync"
// is the default sync-before-ack; "nosync" never fsyncs, the bound group
// commit is measured against; "periodic" syncs every two minutes
// (nats-server's default sync_interval), so within a run it only syncs
// blocks as they fill.
func BenchmarkAppend(b *testing.B) {
	payload := make([]byte, 128)
	for _, mode := range []string{"sync", "journal", "nosync", "periodic"} {
		for _, writers := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				s := openBench(b, mode)
				defer s.Stop()
				drive(b, writers, func(claim func() bool) {
					for claim() {
						if _, _, err := s.StoreMsg("bench.append", nil, payload); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkAppendAsync is the JetStream publishing pattern: each publisher
// keeps up to window records in flight with StoreAsync (nats.go's
// PublishAsync keeps thousands), so a commit is not limited to one record
// per publisher as it is in BenchmarkAppend.
func BenchmarkAppendAsync(b *testing.B) {
	payload := make([]byte, 128)
	for _, mode := range []string{"sync", "nosync"} {
		for _, pw := range [][2]int{{1, 256}, {16, 64}, {16, 1024}} {
			pubs, window := pw[0], pw[1]
			b.Run(fmt.Sprintf("%s/pubs=%d/window=%d", mode, pubs, window), func(b *testing.B) {
				s := openBench(b, mode)
				defer s.Stop()
				drive(b, pubs, func(claim func() bool) {
					slots := make(chan struct{}, window)
					var inflight sync.WaitGroup
					for claim() {
						slots <- struct{}{}
						inflight.Add(1)
						s.StoreAsync("bench.async", nil, payload, func(_ uint64, _ int64, err error) {
							if err != nil {
								b.Error(err)
							}
							<-slots
							inflight.Done()
						})
					}
					inflight.Wait()
				})
			})
		}
	}
}

// fill stores n records of size bytes with StoreAsync, record i under
// subject subj(i), in rounds small enough to stay under MaxPending.
func fill(b *testing.B, s Store, n, size int, subj func(i int) string) {
	payload := make([]byte, size)
	var wg sync.WaitGroup
	for i := 0; i < n; i += 50000 {
		k := min(50000, n-i)
		wg.Add(k)
		for j := 0; j < k; j++ {
			s.StoreAsync(subj(i+j), nil, payload, func(_ uint64, _ int64, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
	}
}

func benchReadStore(b *testing.B, n int) *FileStore {
	s, err := Open(Config{Dir: b.TempDir(), SyncInterval: -1, Logf: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	fill(b, s, n, 128, func(int) string { return "bench.read" })
	return s
}

func BenchmarkReadSequential(b *testing.B) {
	const n = 100000
	s := benchReadStore(b, n)
	defer s.Stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.LoadMsg(uint64(i%n) + 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

// BenchmarkReadNext reads the store front to back as a consumer does, allocating each
// message (LoadNextMsg) or into one reused MsgBuf (LoadNextMsgInto).
func BenchmarkReadNext(b *testing.B) {
	const n = 100000
	s := benchReadStore(b, n)
	defer s.Stop()
	for _, into := range []bool{false, true} {
		b.Run(map[bool]string{false: "alloc", true: "into"}[into], func(b *testing.B) {
			var mb MsgBuf
			for i := 0; i < b.N; i++ {
				var sm *StoredMsg
				var err error
				if into {
					sm, err = s.LoadNextMsgInto(&mb, "", uint64(i%n)+1)
				} else {
					sm, err = s.LoadNextMsg("", uint64(i%n)+1)
				}
				if err != nil || sm.Seq != uint64(i%n)+1 || len(sm.Data) != 128 {
					b.Fatal(sm, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
		})
	}
}

func BenchmarkReadRandom(b *testing.B) {
	const n = 100000
	s := benchReadStore(b, n)
	defer s.Stop()
	rng := rand.New(rand.NewSource(1))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.LoadMsg(uint64(rng.Intn(n)) + 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

// BenchmarkAppendManyBlocks appends to a store that already holds thousands
// of blocks, as a long-lived stream does: the cost of an append must not
// grow with the number of blocks.
func BenchmarkAppendManyBlocks(b *testing.B) {
	for _, preload := range []int{0, 200000} {
		b.Run(fmt.Sprintf("records=%d", preload), func(b *testing.B) {
			s, err := Open(Config{Dir: b.TempDir(), BlockSize: 4 << 10, SyncInterval: -1, Logf: quietLog})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Stop()
			payload := make([]byte, 128)
			fill(b, s, preload, len(payload), func(int) string { return "bench.blocks" })
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := s.StoreMsg("bench.blocks", nil, payload); err != nil {
					b.Fatal(err)
				}
			}
			s.mu.RLock()
			b.ReportMetric(float64(len(s.blocks)), "blocks")
			s.mu.RUnlock()
		})
	}
}

// BenchmarkLoadNextFiltered walks a store the way a filtered consumer does
// (each load starts after the previous hit), for a subject and for a
// wildcard filter that select the same tenth of the messages.
func BenchmarkLoadNextFiltered(b *testing.B) {
	const n = 100000
	s, err := Open(Config{Dir: b.TempDir(), SyncInterval: -1, Logf: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	fill(b, s, n, 128, func(i int) string { return fmt.Sprintf("bench.%d.x", i%10) })
	for _, filter := range []string{"bench.3.x", "*.3.*"} {
		b.Run(filter, func(b *testing.B) {
			seq := uint64(1)
			for i := 0; i < b.N; i++ {
				m, err := s.LoadNextMsg(filter, seq)
				if err == ErrEOF {
					seq = 1
					continue
				}
				if err != nil {
					b.Fatal(err)
				}
				seq = m.Seq + 1
			}
		})
	}
}

// BenchmarkAppendAtLimit appends to a stream held at MaxMsgs, so every
// append also removes the oldest message (the usual JetStream limits
// stream). The cost must not grow with the number of blocks before it.
func BenchmarkAppendAtLimit(b *testing.B) {
	const limit = 2000000
	s, err := Open(Config{Dir: b.TempDir(), SyncInterval: -1, Logf: quietLog, Limits: Limits{MaxMsgs: limit}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	subj := func(int) string { return "bench.limit" }
	fill(b, s, limit, 128, subj)
	b.ResetTimer()
	fill(b, s, b.N, 128, subj)
	b.StopTimer()
	if st := s.FastState(); st.Msgs != limit {
		b.Fatalf("%d messages, want %d", st.Msgs, limit)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkAppendKV updates random keys of a KV bucket: many subjects,
// each holding at most history messages (MaxMsgsPerSubject), so nearly
// every append removes that key's oldest message, which sits far back in
// the stream among other keys' messages. The last case has more history
// than a KV allows (64), as a stream keeping the last 100 readings of each
// of 10,000 sensors would.
func BenchmarkAppendKV(b *testing.B) {
	for _, kh := range [][2]int{{100000, 1}, {100000, 5}, {10000, 100}} {
		keys, history := kh[0], int64(kh[1])
		b.Run(fmt.Sprintf("keys=%d/history=%d", keys, history), func(b *testing.B) {
			s, err := Open(Config{Dir: b.TempDir(), SyncInterval: -1, Logf: quietLog,
				Limits: Limits{MaxMsgsPerSubject: history}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Stop()
			rng := rand.New(rand.NewSource(1))
			key := func(int) string { return fmt.Sprintf("kv.%d", rng.Intn(keys)) }
			fill(b, s, max(500000, 2*keys*int(history)), 64, key)
			b.ResetTimer()
			fill(b, s, b.N, 64, key)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// BenchmarkSeqFromTime looks up random times in a store of 1M messages
// stamped 1 µs apart (so a millisecond holds a thousand of them, and the
// entries' whole milliseconds leave a record or more to read per lookup).
func BenchmarkSeqFromTime(b *testing.B) {
	const n = 1000000
	base := time.Now().UnixNano()
	var stamp atomic.Int64
	stamp.Store(base)
	old := stampNow
	stampNow = func() int64 { return stamp.Add(int64(time.Microsecond)) }
	defer func() { stampNow = old }()
	s, err := Open(Config{Dir: b.TempDir(), SyncInterval: -1, Logf: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	fill(b, s, n, 128, func(int) string { return "bench.time" })
	rng := rand.New(rand.NewSource(1))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := rng.Int63n(n)
		if seq := s.GetSeqFromTime(time.Unix(0, base+(k+1)*int64(time.Microsecond))); seq != uint64(k+1) {
			b.Fatalf("message %d found at %d", k+1, seq)
		}
	}
}

// BenchmarkMultiLastSeqs finds where a last-per-subject consumer (a KV
// watch) starts: the newest message of each of 100,000 keys with 5
// revisions each.
func BenchmarkMultiLastSeqs(b *testing.B) {
	const keys = 100000
	s, err := Open(Config{Dir: b.TempDir(), SyncInterval: -1, Logf: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	fill(b, s, 5*keys, 64, func(i int) string { return fmt.Sprintf("kv.%d", i%keys) })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if seqs, err := s.MultiLastSeqs([]string{"kv.>"}, 0, 0); err != nil || len(seqs) != keys {
			b.Fatal(len(seqs), err)
		}
	}
}

// BenchmarkManyStores is JetStream with many streams taking publishes at once (a KV bucket
// or stream per tenant): records spread round-robin over the stores, at most window in
// flight in all, each acknowledged once durable. With journal the stores share one Journal
// (what JetStream does): one fdatasync per group commit for all of them, instead of one per
// store.
func BenchmarkManyStores(b *testing.B) {
	payload := make([]byte, 128)
	for _, journal := range []bool{false, true} {
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("journal=%v/stores=%d", journal, n), func(b *testing.B) {
				benchManyStores(b, n, journal, payload)
			})
		}
	}
}

func benchManyStores(b *testing.B, n int, journal bool, payload []byte) {
	{
		{
			stores := make([]*FileStore, n)
			dir := b.TempDir()
			var j *Journal
			if journal {
				var err error
				if j, err = OpenJournal(nil, dir, dir+"/journal", quietLog); err != nil {
					b.Fatal(err)
				}
			}
			for i := range stores {
				s, err := Open(Config{Dir: fmt.Sprintf("%s/%d", dir, i), Logf: quietLog, Journal: j})
				if err != nil {
					b.Fatal(err)
				}
				stores[i] = s
			}
			defer func() {
				for _, s := range stores {
					s.Stop()
				}
				if j != nil {
					j.Close()
				}
			}()
			time.Sleep(time.Duration(n) * time.Millisecond) // let the stores make their spare blocks
			const window = 2048
			slots := make(chan struct{}, window)
			var inflight sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				slots <- struct{}{}
				inflight.Add(1)
				stores[i%n].StoreAsync("bench.many", nil, payload, func(_ uint64, _ int64, err error) {
					if err != nil {
						b.Error(err)
					}
					<-slots
					inflight.Done()
				})
			}
			inflight.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
		}
	}
}
