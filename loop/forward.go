package loop

import (
	"github.com/natsd/natsd/outbound"
	"github.com/natsd/natsd/parser"
	"github.com/natsd/natsd/sublist"
)

// routeTarget is one remote server a message goes to: once, whatever number of its
// subscriptions matched, naming the queue groups whose member it should pick.
type routeTarget struct {
	c      *client
	queues []string
}

// routeClustered is route's path where the account has interest on other servers or the
// message came from one. A message from a client or server code goes to local subscribers
// and to each remote server with matching interest; a queue group picks one member among
// all of them, local or remote, weighted by each server's member count (nats-server's
// choice). A message from a route goes to local subscribers only, and to the queue groups
// its sender named.
func (r *reactor) routeClustered(acc *Account, res *sublist.Result[*sub], from *client, m *parser.Op, depth int) bool {
	// local: no route takes this message (it came from one, or through an imported stream);
	// filter: it came straight from a route, whose sender named the queue groups to serve.
	local := from.kind == kindRouter || r.localOnly > 0
	filter := from.kind == kindRouter && r.localOnly == 0
	rts := r.rts[depth][:0]
	delivered := false
	for _, s := range res.Plain {
		if s.remote {
			if !local && !s.gone.Load() {
				rts = addTarget(rts, s.c, "")
			}
			continue
		}
		if s.c == from && !from.echo {
			continue
		}
		if r.deliver(s, from, m, depth) {
			delivered = true
		}
	}
	for _, g := range res.Queues {
		if local {
			if (!filter || queueListed(m.Queues, g[0].queue)) && r.deliverLocalQueue(g, from, m, depth) {
				delivered = true
			}
			continue
		}
		total, remote := 0, false
		for _, s := range g {
			if s.remote {
				remote = true
				total += int(s.qw.Load())
			} else {
				total++
			}
		}
		if !remote {
			if r.deliverQueue(g, from, m, depth) {
				delivered = true
			}
			continue
		}
		n := int(r.rng.Uint64() % uint64(max(total, 1)))
		start := 0
		for i, s := range g {
			w := 1
			if s.remote {
				w = int(s.qw.Load())
			}
			if n < w {
				start = i
				break
			}
			n -= w
		}
		for i := range g {
			s := g[(start+i)%len(g)]
			if s.remote {
				if s.gone.Load() {
					continue
				}
				rts = addTarget(rts, s.c, s.queue)
				delivered = true
				break
			}
			if s.c == from && !from.echo {
				continue
			}
			if r.deliver(s, from, m, depth) {
				delivered = true
				break
			}
		}
	}
	for i := range rts {
		if r.sendRouted(&rts[i], acc, m) {
			delivered = true
		}
		rts[i].c = nil
		rts[i].queues = rts[i].queues[:0]
	}
	r.rts[depth] = rts[:0]
	return delivered
}

// deliverLocalQueue gives m to one local member of g.
func (r *reactor) deliverLocalQueue(g []*sub, from *client, m *parser.Op, depth int) bool {
	n := len(g)
	start := r.pick(n)
	for i := 0; i < n; i++ {
		s := g[(start+i)%n]
		if s.remote {
			continue
		}
		if r.deliver(s, from, m, depth) {
			return true
		}
	}
	return false
}

func addTarget(rts []routeTarget, c *client, queue string) []routeTarget {
	for i := range rts {
		if rts[i].c == c {
			if queue != "" {
				rts[i].queues = append(rts[i].queues, queue)
			}
			return rts
		}
	}
	if len(rts) < cap(rts) {
		rts = rts[:len(rts)+1]
		t := &rts[len(rts)-1]
		t.c = c
		t.queues = t.queues[:0]
	} else {
		rts = append(rts, routeTarget{c: c})
	}
	if queue != "" {
		t := &rts[len(rts)-1]
		t.queues = append(t.queues, queue)
	}
	return rts
}

// queueListed reports whether q is one of the space-separated names in list.
func queueListed(list []byte, q string) bool {
	for len(list) > 0 {
		i := 0
		for i < len(list) && list[i] != ' ' {
			i++
		}
		if string(list[:i]) == q {
			return true
		}
		if i == len(list) {
			break
		}
		list = list[i+1:]
	}
	return false
}

// sendRouted writes one RMSG (or HMSG) for t: "RMSG <account> <subject> [reply] <size>", or
// with queue groups "+ <reply> <q>... <size>" / "| <q>... <size>".
func (r *reactor) sendRouted(t *routeTarget, acc *Account, m *parser.Op) bool {
	rc := t.c
	body := m.Msg
	hdr := m.HdrLen
	if hdr > 0 && !rc.route.headers {
		body = body[hdr:]
		hdr = 0
	}
	b := r.scratch[:0]
	if hdr > 0 {
		b = append(b, "HMSG "...)
	} else {
		b = append(b, "RMSG "...)
	}
	if rc.route.pinned == "" {
		b = append(b, acc.Name...)
		b = append(b, ' ')
	}
	b = append(b, m.Subject...)
	b = append(b, ' ')
	if len(t.queues) > 0 {
		if len(m.Reply) > 0 {
			b = append(b, "+ "...)
			b = append(b, m.Reply...)
			b = append(b, ' ')
		} else {
			b = append(b, "| "...)
		}
		for _, q := range t.queues {
			b = append(b, q...)
			b = append(b, ' ')
		}
	} else if len(m.Reply) > 0 {
		b = append(b, m.Reply...)
		b = append(b, ' ')
	}
	if hdr > 0 {
		b = parser.AppendSize(b, hdr, 0)
		b = append(b, ' ')
	}
	b = parser.AppendSize(b, len(body), 0)
	b = append(b, '\r', '\n')
	r.scratch = b
	pending, sched, err := rc.out.AppendMsg(b, body, crlf, r.e.cfg.MaxPending)
	if sched {
		r.enqueue(rc)
	}
	if err == outbound.ErrSlowConsumer {
		return false
	}
	rc.route.outMsgs.Add(1)
	rc.route.outBytes.Add(int64(len(body)))
	if r.pastStallMark(pending) {
		r.stall = rc
	}
	return true
}
