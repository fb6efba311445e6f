package js

import (
	"bytes"
	"cmp"
	"container/heap"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/natsd/natsd/filestore"
	"github.com/natsd/natsd/loop"
)

// Message schedules (allow_msg_schedules). A message carrying Nats-Schedule is a schedule:
// it stays on its subject (stored with Nats-Rollup: sub, so a subject holds one schedule)
// and, each time its pattern (cron.go) comes due, the stream stores a message on the
// schedule's Nats-Schedule-Target: the schedule's own body and headers, or those of the
// last message on Nats-Schedule-Source, with the schedule's headers taken off and
// Nats-Scheduler (the schedule's subject) and Nats-Schedule-Next added: the next time it
// fires, or "purge" for a one-off, whose message purges the schedule when it is stored.
// The schedule ends when its message goes (purge, delete, limits, its own TTL) or another
// message that is not a schedule is stored on its subject; a client ends it by publishing
// Nats-Schedule-Next: purge with Nats-Scheduler naming it.
//
// What is pending lives in memory only, rebuilt from the stored messages when the stream
// opens, so nothing is lost that the store kept: a repeating schedule that came due while
// the server was down fires once, then keeps its pattern. Fired messages go through the
// stream's worker in order with publishes; the timer never fires more often than every
// 250 ms (nats-server's floor), so schedules cannot crowd out ingest.

const (
	hdrScheduleTimeZone = "Nats-Schedule-Time-Zone"
	hdrScheduleTTL      = "Nats-Schedule-TTL"
	hdrScheduleRollup   = "Nats-Schedule-Rollup"
	hdrScheduleTarget   = "Nats-Schedule-Target"
	hdrScheduleSource   = "Nats-Schedule-Source"
	schedulePurge       = "purge"
	scheduleMinWait     = 250 * time.Millisecond
	scheduleRetry       = time.Second // a fired message the stream could not take is tried again
)

// scheduleLocation is the schedule's time zone: nil without the header, an error for an
// empty or unknown one.
func scheduleLocation(hdr []byte) (*time.Location, *APIError) {
	v, ok := header(hdr, hdrScheduleTimeZone)
	if !ok {
		return nil, nil
	}
	if len(v) == 0 {
		return nil, JSMessageSchedulesTimeZoneInvalidErr
	}
	loc, err := time.LoadLocation(string(v))
	if err != nil {
		return nil, JSMessageSchedulesTimeZoneInvalidErr
	}
	return loc, nil
}

// scheduleOf is when a stored message's schedule fires next, counted from ts; ok is false
// for a message that is no (valid) schedule.
func scheduleOf(hdr []byte, ts int64) (at int64, ok bool) {
	p, _ := header(hdr, hdrSchedule)
	if len(p) == 0 {
		return 0, false
	}
	loc, e := scheduleLocation(hdr)
	if e != nil {
		return 0, false
	}
	t, _, valid := nextFire(string(p), loc, ts)
	if !valid || t.IsZero() {
		return 0, false
	}
	return t.UnixNano(), true
}

// checkSchedule runs nats-server's checks of a published message's schedule headers. It
// returns the header block to store (a schedule gets Nats-Rollup: sub) and, for a message
// that ends a schedule, that schedule's subject. isSchedule tells whether a subject's last
// message is a schedule (false, false: it has none).
func checkSchedule(cfg *StreamConfig, subject string, hdr []byte, isSchedule func(subj string) (sched, found bool)) ([]byte, string, *APIError) {
	if !bytes.Contains(hdr, []byte(hdrSchedule)) {
		return hdr, "", nil // every header checked here starts so: one scan for most messages
	}
	loc, e := scheduleLocation(hdr)
	p, _ := header(hdr, hdrSchedule)
	if e == nil && len(p) > 0 {
		if _, _, ok := nextFire(string(p), loc, time.Now().UnixNano()); !ok {
			e = JSMessageSchedulesPatternInvalidErr
		}
	}
	if e != nil {
		if !cfg.AllowMsgSchedules {
			e = JSMessageSchedulesDisabledErr
		}
		return nil, "", e
	}
	if len(p) > 0 {
		if !cfg.AllowMsgSchedules {
			return nil, "", JSMessageSchedulesDisabledErr
		}
		ttl := headerString(hdr, hdrScheduleTTL)
		if ttl != "" {
			if _, _, ok := parseTTL([]byte(ttl)); !ok {
				return nil, "", JSMessageSchedulesTTLInvalidErr
			}
		}
		if r := headerString(hdr, hdrScheduleRollup); r != "" && r != rollupSubject {
			return nil, "", JSMessageSchedulesRollupInvalidErr
		}
		if ttl != "" && !cfg.AllowMsgTTL {
			return nil, "", JSMessageTTLDisabledErr
		}
		target := headerString(hdr, hdrScheduleTarget)
		if target == "" || !validPublishSubject(target) || target == subject {
			return nil, "", JSMessageSchedulesTargetInvalidErr
		}
		source := headerString(hdr, hdrScheduleSource)
		if source != "" && (source == target || source == subject || !validPublishSubject(source)) {
			return nil, "", JSMessageSchedulesSourceInvalidErr
		}
		inStream := func(subj string) bool {
			return slices.ContainsFunc(cfg.Subjects, func(f string) bool { return subjectsCollide(f, subj) })
		}
		if !inStream(target) {
			return nil, "", JSMessageSchedulesTargetInvalidErr
		}
		if source != "" && !inStream(source) {
			return nil, "", JSMessageSchedulesSourceInvalidErr
		}
		switch r := headerString(hdr, hdrRollup); r {
		case "":
			hdr = appendHeader(append([]byte(nil), hdr...), hdrRollup, rollupSubject)
		case rollupSubject:
		default:
			return nil, "", JSMessageSchedulesRollupInvalidErr
		}
	}
	if next, _ := header(hdr, hdrScheduleNext); len(next) > 0 {
		if string(next) != schedulePurge {
			return nil, "", JSMessageSchedulesSchedulerInvalidErr
		}
		sch := headerString(hdr, hdrScheduler)
		if sch == "" || sch == subject || !validPublishSubject(sch) {
			return nil, "", JSMessageSchedulesSchedulerInvalidErr
		}
		if !cfg.AllowMsgSchedules {
			return nil, "", JSMessageSchedulesDisabledErr
		}
		// Purging a subject that holds anything but a schedule is refused; one that holds
		// nothing is let through, as nats-server does.
		if sched, found := isSchedule(sch); found && !sched {
			return nil, "", JSMessageSchedulesSchedulerInvalidErr
		}
		return hdr, sch, nil
	}
	if v, _ := header(hdr, hdrScheduler); len(v) > 0 {
		return nil, "", JSMessageSchedulesSchedulerInvalidErr
	}
	return hdr, "", nil
}

// storedIsSchedule is checkSchedule's isSchedule for what the store holds.
func (s *stream) storedIsSchedule(subj string) (sched, found bool) {
	s.settle()
	sm, err := s.store.LoadLastMsg(subj)
	if err != nil || sm == nil {
		return false, false
	}
	p, _ := header(sm.Header, hdrSchedule)
	return len(p) > 0, true
}

// afterStore runs on the worker once a message is stored (synchronously): a message that
// ends a schedule purges it, and the schedules learn what was stored.
func (s *stream) afterStore(seq uint64, ts int64, subject string, hdr []byte) {
	sc := s.sch.Load()
	if sc == nil {
		return
	}
	if next, _ := header(hdr, hdrScheduleNext); string(next) == schedulePurge {
		if sch := headerString(hdr, hdrScheduler); sch != "" {
			if _, err := s.store.PurgeEx(sch, 0, 0); err != nil {
				s.a.js.warnf("JetStream stream '%s > %s' could not purge message schedule '%s': %v", s.a.name, s.name, sch, err)
			}
		}
	}
	sc.stored(seq, ts, subject, hdr)
}

// schedule is one subject's schedule: the message that holds it and when it fires next.
type schedule struct {
	subj string
	seq  uint64
	at   int64
	idx  int // in the heap; -1 while its fired message is on its way to the store
}

type schedHeap []*schedule

func (h schedHeap) Len() int           { return len(h) }
func (h schedHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h schedHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *schedHeap) Push(x any) {
	e := x.(*schedule)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *schedHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}

// scheduler is a stream's schedules, by subject, with one timer for the earliest.
type scheduler struct {
	s       *stream
	mu      sync.Mutex
	bySubj  map[string]*schedule
	h       schedHeap
	timer   *time.Timer
	due     int64 // when the timer fires (0: not armed)
	stopped bool
}

func newScheduler(s *stream) *scheduler {
	return &scheduler{s: s, bySubj: make(map[string]*schedule)}
}

// stored takes note of a stored message (any goroutine): a schedule (re)starts, another
// message on a schedule's subject ends it, and a fired message moves its schedule on or,
// with "purge", ends it.
func (sc *scheduler) stored(seq uint64, ts int64, subj string, hdr []byte) {
	at, isSched := scheduleOf(hdr, ts)
	var next []byte
	var scheduler string
	if len(hdr) > 0 {
		next, _ = header(hdr, hdrScheduleNext)
		scheduler = headerString(hdr, hdrScheduler)
	}
	var nextAt time.Time
	if len(next) > 0 && string(next) != schedulePurge {
		var err error
		if nextAt, err = time.Parse(time.RFC3339Nano, string(next)); err != nil {
			next = nil
		}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.stopped {
		return
	}
	switch e := sc.bySubj[subj]; {
	case isSched && e != nil:
		e.seq, e.at = seq, at
		sc.queueLocked(e)
	case isSched:
		e = &schedule{subj: subj, seq: seq, at: at, idx: -1}
		sc.bySubj[subj] = e
		sc.queueLocked(e)
	case e != nil && scheduler == "":
		sc.removeLocked(e)
	}
	if len(next) > 0 && scheduler != "" {
		if e := sc.bySubj[scheduler]; e != nil {
			if string(next) == schedulePurge {
				sc.removeLocked(e)
			} else {
				e.at = nextAt.UnixNano()
				sc.queueLocked(e)
			}
		}
	}
	sc.armLocked()
}

// queueLocked puts e in (or back in) the heap at its time.
func (sc *scheduler) queueLocked(e *schedule) {
	if e.idx >= 0 {
		heap.Fix(&sc.h, e.idx)
	} else {
		heap.Push(&sc.h, e)
	}
}

func (sc *scheduler) removeLocked(e *schedule) {
	if e.idx >= 0 {
		heap.Remove(&sc.h, e.idx)
	}
	delete(sc.bySubj, e.subj)
}

func (sc *scheduler) armLocked() {
	if sc.stopped || len(sc.h) == 0 {
		return // a timer that fires with nothing due only re-arms
	}
	wait := max(time.Until(time.Unix(0, sc.h[0].at)), scheduleMinWait)
	due := time.Now().Add(wait).UnixNano()
	if sc.due != 0 && sc.due <= due {
		return
	}
	sc.due = due
	if sc.timer == nil {
		sc.timer = time.AfterFunc(wait, sc.fire)
	} else {
		sc.timer.Reset(wait)
	}
}

func (sc *scheduler) stop() {
	sc.mu.Lock()
	sc.stopped = true
	if sc.timer != nil {
		sc.timer.Stop()
	}
	sc.mu.Unlock()
}

// dueSchedule is a schedule taken out of the heap to fire.
type dueSchedule struct {
	subj string
	seq  uint64
	at   int64
}

func (sc *scheduler) fire() {
	sc.mu.Lock()
	sc.due = 0
	if sc.stopped {
		sc.mu.Unlock()
		return
	}
	now := time.Now().UnixNano()
	var due []dueSchedule
	for len(sc.h) > 0 && sc.h[0].at <= now {
		e := heap.Pop(&sc.h).(*schedule)
		due = append(due, dueSchedule{e.subj, e.seq, e.at})
	}
	sc.mu.Unlock()
	// In the order the schedules were stored, as nats-server fires them.
	slices.SortFunc(due, func(a, b dueSchedule) int { return cmp.Compare(a.seq, b.seq) })
	for _, d := range due {
		sc.produce(d)
	}
	sc.mu.Lock()
	sc.armLocked()
	sc.mu.Unlock()
}

// produce builds the message a due schedule fires and queues it on the stream's worker.
// A schedule whose message is gone or no longer valid ends.
func (sc *scheduler) produce(d dueSchedule) {
	s := sc.s
	sm, err := s.store.LoadMsg(d.seq)
	if err != nil || sm == nil || sm.Subject != d.subj {
		sc.drop(d)
		return
	}
	p, _ := header(sm.Header, hdrSchedule)
	loc, e := scheduleLocation(sm.Header)
	if len(p) == 0 || e != nil {
		sc.drop(d)
		return
	}
	next, repeat, ok := nextFire(string(p), loc, d.at)
	ttl := headerString(sm.Header, hdrScheduleTTL)
	if ttl != "" {
		if _, _, valid := parseTTL([]byte(ttl)); !valid {
			ok = false
		}
	}
	target := headerString(sm.Header, hdrScheduleTarget)
	if !ok || target == "" {
		sc.drop(d)
		return
	}
	rollup := headerString(sm.Header, hdrScheduleRollup)
	hdr, msg := sm.Header, sm.Data
	if src := headerString(sm.Header, hdrScheduleSource); src != "" {
		// The source's last message, or the schedule's own when the source has none.
		if last, err := s.store.LoadLastMsg(src); err == nil && last != nil {
			hdr, msg = last.Header, last.Data
		}
	}
	hdr = removeHeader(hdr, func(k string) bool {
		return strings.HasPrefix(k, hdrSchedule) || strings.HasPrefix(k, "Nats-Expected-") ||
			k == hdrMsgID || k == hdrTTL || k == hdrRollup
	})
	hdr = appendHeader(hdr, hdrScheduler, d.subj)
	if repeat {
		hdr = appendHeader(hdr, hdrScheduleNext, next.Format(time.RFC3339Nano))
	} else {
		hdr = appendHeader(hdr, hdrScheduleNext, schedulePurge)
	}
	if ttl != "" {
		hdr = appendHeader(hdr, hdrTTL, ttl)
	}
	if rollup != "" {
		hdr = appendHeader(hdr, hdrRollup, rollup)
	}
	msg = append([]byte(nil), msg...)
	s.ic.Enqueue(func(*loop.WorkMsg) { s.storeScheduled(sc, d, target, rollup, hdr, msg) },
		loop.WorkMsg{Subject: target, Hdr: hdr, Data: msg})
}

// drop ends a schedule that can no longer fire (unless it was replaced meanwhile).
func (sc *scheduler) drop(d dueSchedule) {
	sc.mu.Lock()
	if e := sc.bySubj[d.subj]; e != nil && e.seq == d.seq && e.idx < 0 {
		delete(sc.bySubj, d.subj)
	}
	sc.mu.Unlock()
}

// retry puts a schedule whose fired message was not stored back, to fire again shortly.
func (sc *scheduler) retry(d dueSchedule) {
	sc.mu.Lock()
	if e := sc.bySubj[d.subj]; e != nil && e.seq == d.seq && e.idx < 0 && !sc.stopped {
		e.at = time.Now().Add(scheduleRetry).UnixNano()
		sc.queueLocked(e)
		sc.armLocked()
	}
	sc.mu.Unlock()
}

// storeScheduled stores a fired message on the worker, through the roll-up path (stored
// and synced before the schedule moves on).
func (s *stream) storeScheduled(sc *scheduler, d dueSchedule, target, rollup string, hdr, msg []byte) {
	if s.closed.Load() {
		return
	}
	cfg := s.config()
	var ttl int64
	if v, ok := header(hdr, hdrTTL); ok {
		if secs, _, valid := parseTTL(v); valid {
			hdr, ttl = raiseTTL(cfg, hdr, secs)
		}
	}
	if s.a.limitsExceeded(cfg.Storage) != nil {
		sc.retry(d)
		return
	}
	if rollup == "" && cfg.Retention == InterestPolicy && !s.interested(target) {
		// No consumer wants it: it takes a sequence only, and the schedule moves on.
		s.skipUninterested("", "")
		s.afterStore(0, time.Now().UnixNano(), target, hdr)
		return
	}
	if err := s.storeRollup(cfg, target, "", "", rollup, hdr, msg, ttl); err != nil {
		sc.retry(d)
	}
}

// recovered takes note of a stored message while the schedules are rebuilt (recoverTimed).
// A message that ends a schedule is stored before the schedule is purged: when a crash came
// between the two, it returns the subject whose messages below it are still to be purged.
func (sc *scheduler) recovered(sm *filestore.StoredMsg) (purge string) {
	sc.stored(sm.Seq, sm.TS, sm.Subject, sm.Header)
	if next, _ := header(sm.Header, hdrScheduleNext); string(next) == schedulePurge {
		if sch := headerString(sm.Header, hdrScheduler); sch != "" {
			if fs := sc.s.store.FilteredState(sch, 0); fs.Msgs > 0 && fs.First < sm.Seq {
				return sch
			}
		}
	}
	return ""
}

// recoverTimed reads the stored messages once for what their TTLs and schedules need (the
// stream opened or restored), and finishes the schedule purges a crash cut short.
func (s *stream) recoverTimed() {
	ttl, sc := s.ttl, s.sch.Load()
	if ttl == nil && sc == nil {
		return
	}
	type purge struct {
		subj  string
		below uint64
	}
	var unfinished []purge
	st := s.store.FastState()
	for seq := st.FirstSeq; seq != 0 && seq <= st.LastSeq; {
		sm, err := s.store.LoadNextMsg("", seq)
		if err != nil {
			break
		}
		if ttl != nil {
			ttl.recovered(sm)
		}
		if sc != nil {
			if subj := sc.recovered(sm); subj != "" {
				unfinished = append(unfinished, purge{subj, sm.Seq})
			}
		}
		seq = sm.Seq + 1
	}
	for _, p := range unfinished {
		if _, err := s.store.PurgeEx(p.subj, p.below, 0); err != nil {
			s.a.js.warnf("JetStream stream '%s > %s' could not purge message schedule '%s': %v", s.a.name, s.name, p.subj, err)
		}
	}
}
