package loop

import (
	"sort"
	"time"
)

// RouteSnapshot is one route's figures for /routez, taken on its reactor.
type RouteSnapshot struct {
	RID                    uint64
	RemoteID, RemoteName   string
	Solicited, Configured  bool
	IP                     string
	Port                   int
	Start, Last            time.Time
	RTT                    time.Duration
	Pending                int64
	InMsgs, InBytes        int64
	OutMsgs, OutBytes      int64
	NumSubs                int
	Subs                   []SubSnapshot // with subs asked for
	Compression            string
	Account                string // the pinned account of a dedicated route
	ImportPerm, ExportPerm []byte // the remote's route permissions (JSON), when it has any
}

// Routes snapshots every registered route, in route id order.
func (e *Engine) Routes(subs bool) []RouteSnapshot {
	var out []RouteSnapshot
	routes := e.routeList()
	if len(routes) == 0 {
		return nil
	}
	ch := make(chan RouteSnapshot, len(routes))
	n := 0
	for _, rc := range routes {
		rc := rc
		if err := rc.r.ex.Execute(func() { ch <- rc.routeSnapshot(subs) }); err == nil {
			n++
		}
	}
	timeout := time.After(reactorWait)
	for i := 0; i < n; i++ {
		select {
		case s := <-ch:
			if s.RID != 0 {
				out = append(out, s)
			}
		case <-timeout:
			i = n
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RID < out[j].RID })
	return out
}

func (c *client) routeSnapshot(subs bool) RouteSnapshot {
	rs := c.route
	if c.closed || !rs.registered {
		return RouteSnapshot{}
	}
	s := RouteSnapshot{
		RID: c.cid, RemoteID: rs.remote.ID, RemoteName: rs.remote.Name,
		Solicited: rs.solicited, Configured: rs.explicit, IP: c.ip, Port: c.port,
		Start: time.Unix(0, c.start), Last: time.Unix(0, c.last), RTT: time.Duration(c.rtt),
		Pending: c.out.Pending(),
		InMsgs:  rs.inMsgs.Load(), InBytes: rs.inBytes.Load(),
		OutMsgs: rs.outMsgs.Load(), OutBytes: rs.outBytes.Load(),
		NumSubs: len(rs.subs), Compression: rs.compressionMode(),
		ImportPerm: rs.remote.Import, ExportPerm: rs.remote.Export,
		Account: rs.pinned,
	}
	if subs {
		for _, x := range rs.subs {
			s.Subs = append(s.Subs, SubSnapshot{Subject: x.subject, Queue: x.queue, Sid: string(x.sid),
				Msgs: x.delivered.Load(), CID: c.cid})
		}
		sort.Slice(s.Subs, func(i, j int) bool { return s.Subs[i].Sid < s.Subs[j].Sid })
	}
	return s
}

// NumRoutes is the number of registered routes.
func (e *Engine) NumRoutes() int { return len(e.routeList()) }
