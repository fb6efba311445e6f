package outbound

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

func takeAll(q *Queue) ([]byte, bool) {
	bufs, slow := q.Take(nil)
	out := bytes.Join(bufs, nil)
	Release(bufs)
	return out, slow
}

func TestQueueFramesInOrder(t *testing.T) {
	tests := []struct {
		name   string
		frames int
		size   int
	}{
		{"small", 100, 16},
		{"spans chunks", 10, ChunkSize/3 + 7},
		{"larger than a chunk", 3, 3*ChunkSize + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue
			var want []byte
			for i := 0; i < tc.frames; i++ {
				line := fmt.Appendf(nil, "MSG foo 1 %d\r\n", tc.size)
				body := bytes.Repeat([]byte{byte('a' + i%26)}, tc.size)
				_, sched, err := q.Append(line, body, []byte("\r\n"), 0)
				if err != nil {
					t.Fatal(err)
				}
				if sched != (i == 0) {
					t.Fatalf("frame %d: schedule=%v", i, sched)
				}
				want = append(append(append(want, line...), body...), "\r\n"...)
			}
			if p := q.Pending(); p != int64(len(want)) {
				t.Fatalf("pending %d, want %d", p, len(want))
			}
			got, slow := takeAll(&q)
			if slow || !bytes.Equal(got, want) {
				t.Fatalf("slow=%v, bytes differ (%d vs %d)", slow, len(got), len(want))
			}
			if q.Pending() != 0 {
				t.Fatal("pending after take")
			}
			// The next frame after a Take must schedule again.
			if _, sched, _ := q.Append([]byte("x"), nil, nil, 0); !sched {
				t.Fatal("no schedule after take")
			}
		})
	}
}

func TestQueueBoundMarksSlow(t *testing.T) {
	var q Queue
	const max = 1000
	if _, _, err := q.Append(make([]byte, 600), nil, nil, max); err != nil {
		t.Fatal(err)
	}
	q.SetSocketPending(300) // what the socket layer still holds counts too
	_, sched, err := q.Append(make([]byte, 200), nil, nil, max)
	if err != ErrSlowConsumer {
		t.Fatalf("err = %v", err)
	}
	if sched {
		t.Fatal("already scheduled: the owner will see slow at Take")
	}
	if _, _, err := q.Append([]byte("x"), nil, nil, 0); err != ErrSlowConsumer {
		t.Fatal("a slow queue must refuse everything")
	}
	if _, slow := takeAll(&q); !slow {
		t.Fatal("Take did not report slow")
	}
}

func TestQueueConcurrentProducers(t *testing.T) {
	var q Queue
	const producers, frames = 4, 2000
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < frames; i++ {
				_, _, _ = q.Append(fmt.Appendf(nil, "%d:%d;", p, i), nil, nil, 0)
			}
		}(p)
	}
	var all []byte
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		b, _ := takeAll(&q)
		all = append(all, b...)
	}
	// Frames stay whole and each producer's order is kept.
	next := make([]int, producers)
	for _, f := range bytes.Split(bytes.TrimSuffix(all, []byte(";")), []byte(";")) {
		var p, i int
		if _, err := fmt.Sscanf(string(f), "%d:%d", &p, &i); err != nil {
			t.Fatalf("torn frame %q", f)
		}
		if i != next[p] {
			t.Fatalf("producer %d: frame %d after %d", p, i, next[p]-1)
		}
		next[p]++
	}
	for p, n := range next {
		if n != frames {
			t.Fatalf("producer %d: %d frames", p, n)
		}
	}
}

func TestInboxWakesOncePerDrain(t *testing.T) {
	var in Inbox[int]
	if !in.Add([]int{1, 2}) {
		t.Fatal("first add must wake")
	}
	if in.Add([]int{3}) {
		t.Fatal("second add before drain must not wake")
	}
	got := in.Drain(nil)
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("drain %v", got)
	}
	if !in.Add([]int{4}) {
		t.Fatal("add after drain must wake")
	}
}

func BenchmarkAppendTake16(b *testing.B) {
	var q Queue
	line := []byte("MSG foo 1 16\r\n")
	body := []byte("0123456789abcdef")
	crlf := []byte("\r\n")
	var iov [][]byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_, _, _ = q.Append(line, body, crlf, 64<<20)
		if i&127 == 127 {
			iov, _ = q.Take(iov[:0])
			Release(iov)
		}
	}
}
