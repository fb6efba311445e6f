package loop

import "time"

// A request a reactor answers itself (an inline handler's Respond: a KV get, a direct get)
// is typically one of a sequence: the client reads the reply and sends its next request a
// few tens of µs later. Sleeping in epoll_wait between the two costs more than the turn
// itself on a virtual machine, where waking an idle vCPU takes tens of µs. So after such an
// answer the reactor polls its epoll instance for up to DefaultReplySpin before going back
// to gnet's loop, and the next request finds it awake. Anything that becomes ready on the
// reactor (a socket, a queued task, a cross-reactor wake, a yielded connection's kick) ends
// the poll, so other connections wait no longer than they would have for the answer's turn.
//
// lingerPolicy keeps this from burning a core for clients that do not come back quickly: a
// poll that ends with nothing ready lowers the reactor's score by more than a poll that
// found the next event raises it, and below lingerLow the reactor only lingers after one
// answer in lingerProbe, to notice when the requests come back faster again.

// DefaultReplySpin is the measured default: on this project's 2-core VMs a sequential KV
// get's client turn is 50–150 µs, and 200 µs caught more of them than 100 µs at the same
// score (make perf-js kv get row, README).
const DefaultReplySpin = 200 * time.Microsecond

const (
	lingerMax   = 64
	lingerLow   = 16
	lingerHit   = 4
	lingerMiss  = 8
	lingerProbe = 16
)

type lingerPolicy struct {
	budget time.Duration // <= 0: never
	score  int
	skips  int
	begun  uint64 // lingers begun (monitoring and tests)
}

// try reports whether to linger after this answer.
func (p *lingerPolicy) try() bool {
	if p.budget <= 0 {
		return false
	}
	if p.score < lingerLow {
		if p.skips++; p.skips%lingerProbe != 0 {
			return false
		}
	}
	p.begun++
	return true
}

// record notes how a linger ended: ready is false when the budget ran out.
func (p *lingerPolicy) record(ready bool) {
	if ready {
		p.score = min(p.score+lingerHit, lingerMax)
	} else {
		p.score = max(p.score-lingerMiss, 0)
	}
}
