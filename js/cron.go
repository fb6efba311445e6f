package js

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Nats-Schedule patterns, with nats-server's meaning:
//
//	@at <RFC 3339 time>    once, at that time (no time zone header allowed)
//	@every <Go duration>   repeatedly, at least a second apart (no time zone header allowed)
//	@yearly @annually @monthly @weekly @daily @midnight @hourly
//	<sec> <min> <hour> <day of month> <month> <day of week>   cron, in UTC or Nats-Schedule-Time-Zone
//
// A cron field is a comma-separated list of items, each "*" or "?", a value or a range a-b,
// optionally followed by /step ("a/step" runs from a to the field's maximum). Months and
// week days may be named by their first three letters; Sunday is 0. When both day fields
// are restricted a day matching either fires; when one is "*" (or "?") both must match.
// A pattern that would not fire within five years is invalid.

// cronField is one field's allowed values as a bit set (bit v: value v).
type cronField struct {
	lo, hi int
	names  []string // names[i] means lo+i ("jan" is 1, "sun" is 0)
}

var (
	cronSeconds = cronField{0, 59, nil}
	cronMinutes = cronField{0, 59, nil}
	cronHours   = cronField{0, 23, nil}
	cronDays    = cronField{1, 31, nil}
	cronMonths  = cronField{1, 12, []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}}
	cronWeek    = cronField{0, 6, []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}
)

// cronSpec is a parsed six-field cron pattern.
type cronSpec struct {
	sec, min, hour, dom, month, dow uint64
	// domAll, dowAll: the field was a bare wildcard (or one with step 1), which makes the
	// day test need both fields rather than either.
	domAll, dowAll bool
}

var errCronFields = errors.New("cron pattern needs 6 fields")

func parseCron(pattern string) (*cronSpec, error) {
	f := strings.Fields(pattern)
	if len(f) != 6 {
		return nil, errCronFields
	}
	var c cronSpec
	var err error
	if c.sec, _, err = cronSeconds.parse(f[0]); err != nil {
		return nil, err
	}
	if c.min, _, err = cronMinutes.parse(f[1]); err != nil {
		return nil, err
	}
	if c.hour, _, err = cronHours.parse(f[2]); err != nil {
		return nil, err
	}
	if c.dom, c.domAll, err = cronDays.parse(f[3]); err != nil {
		return nil, err
	}
	if c.month, _, err = cronMonths.parse(f[4]); err != nil {
		return nil, err
	}
	if c.dow, c.dowAll, err = cronWeek.parse(f[5]); err != nil {
		return nil, err
	}
	return &c, nil
}

// parse reads one field; all reports an unrestricted wildcard among its items.
func (fd cronField) parse(s string) (bits uint64, all bool, err error) {
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			continue // nats-server skips empty items
		}
		rng, stepStr, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			if strings.Contains(stepStr, "/") {
				return 0, false, errors.New("too many slashes: " + item)
			}
			if step, err = cronNumber(stepStr); err != nil {
				return 0, false, err
			}
			if step == 0 {
				return 0, false, errors.New("step must be positive: " + item)
			}
		}
		var lo, hi int
		a, b, isRange := strings.Cut(rng, "-")
		switch {
		case a == "*" || a == "?":
			// What follows a wildcard's hyphen is ignored, as nats-server does.
			lo, hi = fd.lo, fd.hi
			if step == 1 {
				all = true
			}
		default:
			if strings.Contains(b, "-") {
				return 0, false, errors.New("too many hyphens: " + item)
			}
			if lo, err = fd.value(a); err != nil {
				return 0, false, err
			}
			hi = lo
			if isRange {
				if hi, err = fd.value(b); err != nil {
					return 0, false, err
				}
			} else if hasStep {
				hi = fd.hi // "a/step": from a to the end
			}
		}
		if lo < fd.lo || hi > fd.hi || lo > hi {
			return 0, false, errors.New("value out of range: " + item)
		}
		for v := lo; ; v += step {
			bits |= 1 << uint(v)
			if hi-v < step {
				break // checked before the add: a step near the int range must not wrap around
			}
		}
	}
	if bits == 0 {
		// Nothing but commas: it never matches, which a search would take five years of
		// seconds to find out.
		return 0, false, errors.New("no values: " + s)
	}
	return bits, all, nil
}

func (fd cronField) value(s string) (int, error) {
	for i, n := range fd.names {
		if strings.EqualFold(s, n) {
			return fd.lo + i, nil
		}
	}
	return cronNumber(s)
}

func cronNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errors.New("not a number: " + s)
	}
	return n, nil
}

func (c *cronSpec) dayOK(t time.Time) bool {
	d := c.dom&(1<<uint(t.Day())) != 0
	w := c.dow&(1<<uint(t.Weekday())) != 0
	if c.domAll || c.dowAll {
		return d && w
	}
	return d || w
}

// next is the first time after `after` (from the next whole second on) that the pattern
// matches in loc; false when there is none within five years.
func (c *cronSpec) next(after time.Time, loc *time.Location) (time.Time, bool) {
	t := after.In(loc).Truncate(time.Second).Add(time.Second)
	limit := t.Year() + 5
	for t.Year() <= limit {
		var n time.Time
		switch {
		case c.month&(1<<uint(t.Month())) == 0:
			n = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc)
		case !c.dayOK(t):
			n = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		case c.hour&(1<<uint(t.Hour())) == 0:
			n = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, loc)
		case c.min&(1<<uint(t.Minute())) == 0:
			n = t.Truncate(time.Minute).Add(time.Minute)
		case c.sec&(1<<uint(t.Second())) == 0:
			n = t.Add(time.Second)
		default:
			return t, true
		}
		if !n.After(t) {
			// A wall-clock step that a daylight-saving change folds back on itself: move
			// on in absolute time instead.
			n = t.Truncate(time.Hour).Add(time.Hour)
		}
		t = n
	}
	return time.Time{}, false
}

// nextFire is when a schedule pattern fires next, counted from ts (unix nanoseconds: the
// schedule message's time, or its last firing), and whether it repeats; ok is false for
// an invalid pattern. A repeating schedule whose next time has already passed (a server
// that was down) fires once, not once per missed time. loc is nil without a time zone
// header.
func nextFire(pattern string, loc *time.Location, ts int64) (at time.Time, repeat, ok bool) {
	if pattern == "" {
		return time.Time{}, false, true
	}
	if v, found := strings.CutPrefix(pattern, "@at "); found {
		if loc != nil {
			return time.Time{}, false, false
		}
		t, err := time.Parse(time.RFC3339, v)
		return t, false, err == nil
	}
	if v, found := strings.CutPrefix(pattern, "@every "); found {
		if loc != nil {
			return time.Time{}, false, false
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return time.Time{}, false, false
		}
		at = time.Unix(0, ts).UTC().Round(time.Second).Add(d)
		if now := time.Now().UTC(); at.Before(now) {
			at = now.Round(time.Second).Add(d)
		}
		return at, true, true
	}
	switch pattern {
	case "@yearly", "@annually":
		pattern = "0 0 0 1 1 *"
	case "@monthly":
		pattern = "0 0 0 1 * *"
	case "@weekly":
		pattern = "0 0 0 * * 0"
	case "@daily", "@midnight":
		pattern = "0 0 0 * * *"
	case "@hourly":
		pattern = "0 0 * * * *"
	}
	c, err := parseCron(pattern)
	if err != nil {
		return time.Time{}, false, false
	}
	if loc == nil {
		loc = time.UTC
	}
	if at, ok = c.next(time.Unix(0, ts), loc); !ok {
		return time.Time{}, false, false
	}
	if now := time.Now().UTC(); at.Before(now) {
		if at, ok = c.next(now.Round(time.Second), loc); !ok {
			return time.Time{}, false, false
		}
	}
	return at, true, true
}
