package loop

import (
	"testing"
	"time"
)

func TestLameDuckPace(t *testing.T) {
	for _, c := range []struct {
		window time.Duration
		n      int
		si     time.Duration
		batch  int
	}{
		{20 * time.Second, 3, time.Second, 1}, // a few clients: at most a second apart
		{20 * time.Second, 100, 200 * time.Millisecond, 1},
		{0, 4, 250 * time.Millisecond, 1}, // no window left after the grace: one second
		{time.Microsecond, 5000, 1, 5},    // more clients than nanoseconds: batches
	} {
		if si, batch := lameDuckPace(c.window, c.n); si != c.si || batch != c.batch {
			t.Errorf("lameDuckPace(%v, %d) = %v, %d; want %v, %d", c.window, c.n, si, batch, c.si, c.batch)
		}
	}
}
