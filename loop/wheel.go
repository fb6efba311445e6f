package loop

// wheel is a hashed timing wheel owned by one reactor: every connection's next deadline
// (first PING, keepalive PING, auth timeout) sits in one slot of an intrusive list, so a
// million idle connections cost no timers and no goroutines, and a tick touches only the
// connections whose slot came up.
type wheel struct {
	slots []*client // heads of intrusive doubly-linked lists
	tick  int64     // nanoseconds per slot
	cur   int64     // absolute tick number processed so far
}

const wheelSlots = 512

func newWheel(tick int64, now int64) *wheel {
	return &wheel{slots: make([]*client, wheelSlots), tick: tick, cur: now / tick}
}

// schedule (re)places c to fire at or after when (unix nanos).
func (w *wheel) schedule(c *client, when int64) {
	w.remove(c)
	t := (when + w.tick - 1) / w.tick // round up: never fire early
	if t <= w.cur {
		t = w.cur + 1
	}
	slot := int(t % wheelSlots)
	c.tRounds = int32((t - w.cur - 1) / wheelSlots)
	c.tSlot = int32(slot)
	c.tNext = w.slots[slot]
	c.tPrev = nil
	if c.tNext != nil {
		c.tNext.tPrev = c
	}
	w.slots[slot] = c
}

func (w *wheel) remove(c *client) {
	if c.tSlot < 0 {
		return
	}
	if c.tPrev != nil {
		c.tPrev.tNext = c.tNext
	} else {
		w.slots[c.tSlot] = c.tNext
	}
	if c.tNext != nil {
		c.tNext.tPrev = c.tPrev
	}
	c.tPrev, c.tNext, c.tSlot = nil, nil, -1
}

// advance fires every connection whose slot has come up by now; fire may reschedule.
func (w *wheel) advance(now int64, fire func(*client)) {
	end := now / w.tick
	for w.cur < end {
		w.cur++
		slot := int(w.cur % wheelSlots)
		for c := w.slots[slot]; c != nil; {
			next := c.tNext
			if c.tRounds > 0 {
				c.tRounds--
			} else {
				w.remove(c)
				fire(c)
			}
			c = next
		}
	}
}
