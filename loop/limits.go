package loop

import (
	"errors"
	"sync/atomic"
	"time"
)

// Limits are the Config fields a config reload may change while connections stay up.
type Limits struct {
	MaxPayload          int
	MaxControlLine      int
	MaxConn             int
	PingInterval        time.Duration
	MaxPingsOut         int
	AuthTimeout         time.Duration
	WriteDeadline       time.Duration
	NoFastProducerStall bool
	Trace               bool
	MaxTracedMsgLen     int
}

// errLimitsTimeout is returned when a reactor did not pause in time; nothing was changed.
var errLimitsTimeout = errors.New("reactors did not pause in time, limits unchanged")

// UpdateLimits changes the reloadable limits of a running engine, race-free and without
// putting anything on the per-message path: reactors read e.cfg without synchronization (all
// such reads happen on reactor goroutines, see Engine.open), so every reactor is parked on a
// task of its own, the fields are written while they all wait, and then they are released
// (the release happens-before their next read). Existing connections pick up the new parser
// limits, and the INFO template is rebuilt (max_payload is in it). Reactors stay parked for
// microseconds; no connection is dropped.
func (e *Engine) UpdateLimits(l Limits) error {
	release := make(chan struct{})
	parked := make(map[*reactor]bool)
	var waits []chan struct{} // one per parked reactor, closed once it applied the limits
	defer func() {
		close(release)
		for _, w := range waits {
			<-w
		}
	}()
	for {
		e.mu.Lock()
		var todo []*reactor
		for _, r := range e.reactorsSnapshot() {
			if !parked[r] {
				todo = append(todo, r)
			}
		}
		if len(todo) == 0 {
			// Every reactor is parked, and holding e.mu keeps a loop that is registering its
			// first connection (reactorFor) from reading before the write.
			e.cfg.MaxPayload = l.MaxPayload
			e.cfg.MaxControlLine = l.MaxControlLine
			e.cfg.MaxConn = l.MaxConn
			e.cfg.PingInterval = l.PingInterval
			e.cfg.MaxPingsOut = l.MaxPingsOut
			e.cfg.AuthTimeout = l.AuthTimeout
			e.cfg.WriteDeadline = l.WriteDeadline
			e.cfg.NoFastProducerStall = l.NoFastProducerStall
			e.cfg.Trace = l.Trace
			e.cfg.MaxTracedMsgLen = l.MaxTracedMsgLen
			if e.infoFn != nil && e.addr != nil {
				e.cfg.Info, e.cfg.InfoTail = e.infoFn(e.addr.Port)
				e.info.Store(&infoTemplate{head: e.cfg.Info, tail: e.cfg.InfoTail})
			}
			e.mu.Unlock()
			return nil
		}
		e.mu.Unlock()
		for _, r := range todo {
			parked[r] = true
			ready, applied := make(chan struct{}), make(chan struct{})
			err := r.ex.Execute(func() {
				close(ready)
				<-release
				// Released: e.cfg holds the new limits; apply them to open connections.
				for c := range r.clients {
					c.applyLimits()
					c.p.MaxControlLine = e.cfg.MaxControlLine
				}
				close(applied)
			})
			if err != nil {
				continue // a stopped reactor reads nothing more
			}
			select {
			case <-ready:
				waits = append(waits, applied)
			case <-e.done:
				return errors.New("engine stopped")
			case <-time.After(5 * time.Second):
				return errLimitsTimeout
			}
		}
	}
}

// TrimConns closes client connections, any of them, until at most limit remain (none for a
// negative limit), each with "-ERR 'maximum connections exceeded'" as nats-server does when a
// reload lowers max_connections. It returns how many it closed.
func (e *Engine) TrimConns(limit int) int {
	excess := e.conns.Load() - int64(max(0, limit))
	if excess <= 0 {
		return 0
	}
	var left atomic.Int64
	left.Store(excess)
	closed := gather(e, func(r *reactor) []int {
		n := 0
		for c := range r.clients {
			if c.closed || c.closing {
				continue
			}
			if left.Add(-1) < 0 {
				break
			}
			c.closeWithErr(errTextMaxConns, closeMaxConns)
			n++
		}
		if n > 0 {
			r.endBatch()
		}
		return []int{n}
	})
	total := 0
	for _, n := range closed {
		total += n
	}
	return total
}
