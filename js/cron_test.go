package js

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func TestCronNext(t *testing.T) {
	from := time.Date(2030, 3, 14, 15, 9, 26, 500, time.UTC) // a Thursday
	for _, tc := range []struct {
		pattern, want string
	}{
		{"* * * * * *", "2030-03-14T15:09:27Z"},
		{"0 * * * * *", "2030-03-14T15:10:00Z"},
		{"30 9 15 * * *", "2030-03-14T15:09:30Z"},
		{"26 9 15 * * *", "2030-03-15T15:09:26Z"}, // strictly after, from the next second
		{"0 0 0 * * *", "2030-03-15T00:00:00Z"},
		{"*/15 * * * * *", "2030-03-14T15:09:30Z"},
		{"5/20 * * * * *", "2030-03-14T15:09:45Z"},
		{"10-20/5 * * * * *", "2030-03-14T15:10:10Z"},
		{"0 0 12 1 * *", "2030-04-01T12:00:00Z"},
		{"0 0 0 1 1 *", "2031-01-01T00:00:00Z"},
		{"0 0 0 * * 0", "2030-03-17T00:00:00Z"},
		{"0 0 0 * * sun", "2030-03-17T00:00:00Z"},
		{"0 0 0 * * MON-wed", "2030-03-18T00:00:00Z"},
		{"0 0 0 * feb *", "2031-02-01T00:00:00Z"},
		{"0 0 0 29 2 *", "2032-02-29T00:00:00Z"},
		// Both day fields restricted: either may match (the 20th, or the next Monday).
		{"0 0 0 20 * 1", "2030-03-18T00:00:00Z"},
		{"0 0 0 16 * 1", "2030-03-16T00:00:00Z"},
		{"0 0 0 13 * 5", "2030-03-15T00:00:00Z"},
		// One a wildcard: both must match.
		{"0 0 0 13 * ?", "2030-04-13T00:00:00Z"},
		{"0 0 0 13 5 *", "2030-05-13T00:00:00Z"},
		{"0 0 0 * * 5/7", "2030-03-15T00:00:00Z"},
		{"0 0 0 1,15 * *", "2030-03-15T00:00:00Z"},
		{"0 0 0 ,15 * *", "2030-03-15T00:00:00Z"},
		{"0 0 0 */1 * 1", "2030-03-18T00:00:00Z"},                   // "*/1" is still a wildcard
		{"0 0 0 */2 * 1", "2030-03-15T00:00:00Z"},                   // "*/2" is not: odd days or Mondays
		{"0 0 0 *-3 * *", "2030-03-15T00:00:00Z"},                   // a wildcard's hyphen is ignored
		{"5/9223372036854775807 * * * * *", "2030-03-14T15:10:05Z"}, // a step past the range: the start only
		{"0 0 0 30 2 *", ""},                                        // never
		{"0 0 0 31 4,6,9,11 *", ""},
	} {
		c, err := parseCron(tc.pattern)
		if err != nil {
			t.Errorf("%q: %v", tc.pattern, err)
			continue
		}
		got, ok := c.next(from, time.UTC)
		s := ""
		if ok {
			s = got.Format(time.RFC3339Nano)
		}
		if s != tc.want {
			t.Errorf("%q: next %q, want %q", tc.pattern, s, tc.want)
		}
	}
}

func TestCronInvalid(t *testing.T) {
	for _, p := range []string{
		"", "* * * * *", "* * * * * * *", "60 * * * * *", "* 60 * * * *", "* * 24 * * *",
		"* * * 0 * *", "* * * 32 * *", "* * * * 0 *", "* * * * 13 *", "* * * * * 7",
		"5-1 * * * * *", "1-2-3 * * * * *", "*/0 * * * * *", "1/2/3 * * * * *", "-1 * * * * *",
		"x * * * * *", "* * * * * sunday", "* * * * * */x", "* * * jan * *", ",, * * * * *", "* * * * , *",
	} {
		if _, err := parseCron(p); err == nil {
			t.Errorf("%q parsed", p)
		}
	}
}

// TestCronNextBruteForce checks next against a second-by-second scan over three days,
// for random patterns dense enough to fire in that window.
func TestCronNextBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	field := func(lo, hi int) string {
		switch rng.Intn(6) {
		case 0:
			return "*"
		case 1:
			return fmt.Sprintf("*/%d", 1+rng.Intn(hi-lo+1))
		case 2:
			a := lo + rng.Intn(hi-lo+1)
			return fmt.Sprintf("%d-%d", a, a+rng.Intn(hi-a+1))
		case 3:
			return fmt.Sprintf("%d/%d", lo+rng.Intn(hi-lo+1), 1+rng.Intn(5))
		case 4:
			return fmt.Sprintf("%d,%d", lo+rng.Intn(hi-lo+1), lo+rng.Intn(hi-lo+1))
		}
		return fmt.Sprint(lo + rng.Intn(hi-lo+1))
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("X", -5*3600)
	}
	kolkata := time.FixedZone("IST", 5*3600+1800) // half-hour offset
	tried := 0
	for i := 0; i < 4000 && tried < 150; i++ {
		p := strings.Join([]string{field(0, 59), field(0, 59), field(0, 23), "*", "*", field(0, 6)}, " ")
		if rng.Intn(3) == 0 {
			p = strings.Join([]string{field(0, 59), field(0, 59), field(0, 23), field(1, 31), "*", "*"}, " ")
		}
		c, err := parseCron(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		loc := []*time.Location{time.UTC, ny, kolkata}[i%3]
		// Midsummer: no daylight-saving change within the window.
		from := time.Date(2031, 7, 1+rng.Intn(20), rng.Intn(24), rng.Intn(60), rng.Intn(60), rng.Intn(1e9), loc)
		var want time.Time
		end := from.Add(72 * time.Hour)
		for s := from.Truncate(time.Second).Add(time.Second); s.Before(end); s = s.Add(time.Second) {
			l := s.In(loc)
			if c.sec&(1<<uint(l.Second())) != 0 && c.min&(1<<uint(l.Minute())) != 0 &&
				c.hour&(1<<uint(l.Hour())) != 0 && c.month&(1<<uint(l.Month())) != 0 && c.dayOK(l) {
				want = s
				break
			}
		}
		if want.IsZero() {
			continue
		}
		tried++
		got, ok := c.next(from, loc)
		if !ok || !got.Equal(want) {
			t.Errorf("%q in %s from %s: next %s (%v), scan %s", p, loc, from, got, ok, want)
		}
	}
	if tried < 100 {
		t.Fatalf("only %d patterns fired within the window", tried)
	}
}

// TestCronDaylightSaving: across a time change a schedule keeps its wall-clock time and
// always moves forward.
func TestCronDaylightSaving(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	c, _ := parseCron("0 30 2 * * *")
	// 2030-03-10 02:30 does not exist in New York (clocks go from 02:00 to 03:00).
	got, ok := c.next(time.Date(2030, 3, 9, 12, 0, 0, 0, ny), ny)
	if !ok || got.Format("2006-01-02 15:04") != "2030-03-11 02:30" {
		t.Errorf("spring forward: %s %v", got, ok)
	}
	c, _ = parseCron("0 0 * * * *")
	prev := time.Date(2030, 11, 2, 22, 0, 0, 0, ny)
	for i := 0; i < 10; i++ {
		n, ok := c.next(prev, ny)
		if !ok || !n.After(prev) || n.Minute() != 0 || n.Second() != 0 {
			t.Fatalf("fall back: after %s came %s %v", prev, n, ok)
		}
		prev = n
	}
}

func TestNextFire(t *testing.T) {
	now := time.Now().UTC()
	ts := now.Add(-time.Hour).UnixNano()
	utc := (*time.Location)(nil)
	zone := time.FixedZone("Z", 3600)
	for _, tc := range []struct {
		pattern string
		loc     *time.Location
		ts      int64
		repeat  bool
		ok      bool
		check   func(at time.Time) bool
	}{
		{"", utc, ts, false, true, func(at time.Time) bool { return at.IsZero() }},
		{"@at 2030-01-02T03:04:05Z", utc, ts, false, true, func(at time.Time) bool { return at.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) }},
		{"@at 2001-01-02T03:04:05+02:00", utc, ts, false, true, func(at time.Time) bool { return at.Equal(time.Date(2001, 1, 2, 1, 4, 5, 0, time.UTC)) }},
		{"@at 2030-01-02T03:04:05Z", zone, ts, false, false, nil},
		{"@at 2030-01-02 03:04:05", utc, ts, false, false, nil},
		{"@every 5s", utc, now.UnixNano(), true, true, func(at time.Time) bool { return at.Sub(now) > 3*time.Second && at.Sub(now) < 7*time.Second }},
		// Missed while the server was down: once, from now on.
		{"@every 5s", utc, ts, true, true, func(at time.Time) bool { return at.Sub(now) > 3*time.Second && at.Sub(now) < 7*time.Second }},
		{"@every 500ms", utc, ts, false, false, nil},
		{"@every 1s", zone, ts, false, false, nil},
		{"@every x", utc, ts, false, false, nil},
		{"@hourly", utc, ts, true, true, func(at time.Time) bool {
			return at.After(now) && at.Sub(now) <= time.Hour && at.Minute() == 0 && at.Second() == 0
		}},
		{"@daily", zone, ts, true, true, func(at time.Time) bool { return at.In(zone).Hour() == 0 && at.Sub(now) <= 24*time.Hour }},
		{"@weekly", utc, ts, true, true, func(at time.Time) bool { return at.Weekday() == time.Sunday }},
		{"@monthly", utc, ts, true, true, func(at time.Time) bool { return at.Day() == 1 }},
		{"@yearly", utc, ts, true, true, func(at time.Time) bool { return at.Day() == 1 && at.Month() == 1 }},
		{"@annually", utc, ts, true, true, func(at time.Time) bool { return at.Day() == 1 && at.Month() == 1 }},
		{"@midnight", utc, ts, true, true, func(at time.Time) bool { return at.Hour() == 0 }},
		{"@never", utc, ts, false, false, nil},
		{"0 0 0 30 2 *", utc, ts, false, false, nil},
		{"* * * * *", utc, ts, false, false, nil},
	} {
		at, repeat, ok := nextFire(tc.pattern, tc.loc, tc.ts)
		if ok != tc.ok || (ok && repeat != tc.repeat) || (ok && tc.check != nil && !tc.check(at)) {
			t.Errorf("%q (%v): %s repeat=%v ok=%v", tc.pattern, tc.loc, at, repeat, ok)
		}
	}
}

func BenchmarkCronNext(b *testing.B) {
	c, _ := parseCron("0 0 0 29 2 *") // the next 29 February: a long search
	from := time.Date(2030, 3, 14, 15, 9, 26, 0, time.UTC)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.next(from, time.UTC)
	}
}

// FuzzSchedulePattern: no pattern a client sends can panic or hang the parser, and a
// parsed cron pattern's next time matches every field.
func FuzzSchedulePattern(f *testing.F) {
	for _, p := range []string{"* * * * * *", "*/5 1-3,7 0 1 jan-mar sun", "5/9223372036854775807 * * * * *",
		"@every 1s", "@at 2030-01-01T00:00:00Z", "@hourly", "0 0 0 29 2 *", "*-3/2 ? * * * *", "1-2-3 * * * * *"} {
		f.Add(p)
	}
	from := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	f.Fuzz(func(t *testing.T, p string) {
		nextFire(p, nil, from.UnixNano())
		c, err := parseCron(p)
		if err != nil {
			return
		}
		at, ok := c.next(from, time.UTC)
		if !ok {
			return
		}
		if !at.After(from) || c.sec&(1<<uint(at.Second())) == 0 || c.min&(1<<uint(at.Minute())) == 0 ||
			c.hour&(1<<uint(at.Hour())) == 0 || c.month&(1<<uint(at.Month())) == 0 || !c.dayOK(at) {
			t.Fatalf("%q: next %s does not match", p, at)
		}
	})
}
