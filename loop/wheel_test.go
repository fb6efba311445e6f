package loop

import (
	"math/rand/v2"
	"testing"
)

func TestWheelFiresInOrderAndOnce(t *testing.T) {
	const tick = int64(100)
	tests := []struct {
		name  string
		delay []int64 // relative to start, in ticks*tick units
	}{
		{"same slot", []int64{150, 150, 150}},
		{"past is next tick", []int64{-500, 0}},
		{"beyond horizon", []int64{wheelSlots*tick + 250, 3*wheelSlots*tick + 10}},
		{"mixed", []int64{1000, 50, wheelSlots * tick * 2, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := int64(1_000_000)
			w := newWheel(tick, start)
			cs := make([]*client, len(tc.delay))
			for i, d := range tc.delay {
				cs[i] = &client{tSlot: -1}
				w.schedule(cs[i], start+d)
			}
			fired := map[*client]int64{}
			for now := start; now <= start+4*wheelSlots*tick; now += tick / 2 {
				w.advance(now, func(c *client) {
					if _, dup := fired[c]; dup {
						t.Fatalf("fired twice")
					}
					fired[c] = now
				})
			}
			for i, c := range cs {
				at, ok := fired[c]
				if !ok {
					t.Fatalf("timer %d never fired", i)
				}
				want := max(start+tc.delay[i], start+tick)
				if at < want || at > want+2*tick {
					t.Fatalf("timer %d fired at %d, want about %d", i, at-start, want-start)
				}
			}
		})
	}
}

func TestWheelRescheduleAndRemove(t *testing.T) {
	const tick = int64(10)
	w := newWheel(tick, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	cs := make([]*client, 200)
	want := map[*client]int64{}
	for i := range cs {
		cs[i] = &client{tSlot: -1}
		w.schedule(cs[i], int64(rng.IntN(20000)))
	}
	// Move every other timer and cancel every third; only the final placement may fire.
	for i, c := range cs {
		switch {
		case i%3 == 0:
			w.remove(c)
		case i%2 == 0:
			d := int64(rng.IntN(20000))
			w.schedule(c, d)
			want[c] = d
		default:
			want[c] = -1 // fires at its first placement
		}
	}
	got := 0
	for now := int64(0); now < 30000; now += tick {
		w.advance(now, func(c *client) {
			if _, ok := want[c]; !ok {
				t.Fatalf("a removed timer fired")
			}
			if d := want[c]; d >= 0 && now < d {
				t.Fatalf("moved timer fired early: %d < %d", now, d)
			}
			delete(want, c)
			got++
		})
	}
	if len(want) != 0 {
		t.Fatalf("%d timers never fired (%d did)", len(want), got)
	}
}
