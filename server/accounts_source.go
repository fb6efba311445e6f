package server

import (
	"sort"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/loop"
)

// engineSource is accountSource and clientControl over the engine's real accounts: every
// configured account, the global account and the system account, each with its own
// connections, subscriptions and counters.
type engineSource struct{ s *Server }

func (g engineSource) eng() *loop.Engine { return g.s.eng }

func (g engineSource) Accounts() []string {
	var out []string
	for _, a := range g.eng().Accounts() {
		out = append(out, a.Name)
	}
	return out
}

func (g engineSource) ActiveAccounts() int {
	n := 0
	sys := g.s.sysAccountName()
	for _, a := range g.eng().Accounts() {
		if a.NumConnections() > 0 || a.Name == sys {
			n++
		}
	}
	return n
}

func (g engineSource) account(name string) *loop.Account {
	if g.s.eng == nil {
		return nil
	}
	return g.eng().LookupAccount(name)
}

func (g engineSource) AccountInfo(name string) (*AccountInfo, bool) {
	a := g.account(name)
	if a == nil {
		return nil, false
	}
	ss, _ := g.SublistStats(name)
	o := g.s.getOpts()
	sys := g.s.sysAccountName()
	ai := &AccountInfo{
		AccountName: name,
		LastUpdate:  g.s.start.UTC(),
		Complete:    true,
		ClientCnt:   a.NumConnections(),
		SubCnt:      uint32(a.NumSubscriptions()),
		NameTag:     name,
		Sublist:     ss,
		IsSystem:    name == sys,
	}
	var maps []*MappingConfig
	if name == loop.GlobalAccount {
		maps = o.Mappings
	}
	if ac := o.Account(name); ac != nil {
		maps = ac.Mappings
		for _, e := range ac.Exports {
			x := ExtExport{Subject: e.Subject, Type: "stream", ApprovedAccounts: append([]string{}, e.Accounts...)}
			if e.Service {
				x.Type = "service"
				x.ResponseType = e.ResponseType.String()
				x.ResponseThreshold = e.ResponseThreshold
			}
			ai.Exports = append(ai.Exports, x)
		}
		for _, im := range ac.Imports {
			x := ExtImport{Subject: im.RemoteSubject, Account: im.Account, LocalSubject: im.LocalSubject,
				To: im.LocalSubject, Type: "stream", Share: im.Share, AllowTrace: im.AllowTrace}
			if im.Service {
				x.Type = "service"
			}
			ai.Imports = append(ai.Imports, x)
		}
	}
	if len(maps) > 0 {
		ai.Mappings = map[string][]MapDest{}
		for _, m := range maps {
			for _, d := range m.Dests {
				ai.Mappings[m.Source] = append(ai.Mappings[m.Source], MapDest{Subject: d.Subject, Weight: d.Weight, Cluster: d.Cluster})
			}
		}
	}
	if sys != "" {
		if name == sys {
			ai.Exports = append(ai.Exports, sysExports()...)
			ai.Imports = append(ai.Imports, sysOwnImports(sys)...)
		} else {
			ai.Imports = append(ai.Imports, sysImportsFor(name, sys)...)
		}
	}
	return ai, true
}

func (g engineSource) AccountStat(name string) (*AccountStat, bool) {
	a := g.account(name)
	if a == nil {
		return nil, false
	}
	st := a.Stats()
	as := &AccountStat{Account: name, Name: name, Conns: st.Conns, TotalConns: st.TotalConns,
		NumSubs: uint32(st.Subs), SlowConsumers: st.SlowConsumers}
	// Sent is what the account's clients were sent, received what they published.
	as.Sent = DataStats{MsgBytes: MsgBytes{Msgs: st.OutMsgs, Bytes: st.OutBytes},
		Gateways: &MsgBytes{}, Routes: &MsgBytes{}, Leafs: &MsgBytes{}}
	as.Received = DataStats{MsgBytes: MsgBytes{Msgs: st.InMsgs, Bytes: st.InBytes},
		Gateways: &MsgBytes{}, Routes: &MsgBytes{}, Leafs: &MsgBytes{}}
	return as, true
}

func (g engineSource) wrap(list []*loop.ConnSnapshot, account string) []*acctConn {
	out := make([]*acctConn, 0, len(list))
	for _, cs := range list {
		acc := accountOf(cs)
		if account != "" && acc != account {
			continue
		}
		out = append(out, &acctConn{ConnSnapshot: cs, Account: acc, User: cs.User, NameTag: acc})
	}
	return out
}

func (g engineSource) Conns(account string, q loop.ConnsQuery) []*acctConn {
	return g.wrap(g.eng().Conns(q), account)
}

func (g engineSource) ClosedConns(account string) []*acctConn {
	return g.wrap(g.eng().ClosedConns(), account)
}

func (g engineSource) Subs(account, test string) []SubDetail {
	var accs []*loop.Account
	if account == "" {
		accs = g.eng().Accounts()
	} else if a := g.account(account); a != nil {
		accs = []*loop.Account{a}
	}
	var out []SubDetail
	for _, a := range accs {
		var list []loop.SubSnapshot
		if test != "" {
			list = g.eng().MatchSubs(a, test)
		} else {
			list = g.eng().AccountSubs(a, true)
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].CID != list[j].CID {
				return list[i].CID < list[j].CID
			}
			return list[i].Sid < list[j].Sid
		})
		for _, sd := range list {
			out = append(out, SubDetail{Account: a.Name, AccountTag: a.Name,
				Subject: sd.Subject, Queue: sd.Queue, Sid: sd.Sid, Msgs: sd.Msgs, Max: sd.Max, Cid: sd.CID})
		}
	}
	return out
}

func (g engineSource) SublistStats(account string) (*SublistStats, bool) {
	var a *loop.Account
	if account != "" {
		if a = g.account(account); a == nil {
			return nil, false
		}
	}
	return subStats(g.eng().AccountSubStats(a)), true
}

func (g engineSource) Kick(cid uint64) error           { return g.eng().Kick(cid) }
func (g engineSource) LameDuckClient(cid uint64) error { return g.eng().LameDuckClient(cid) }

// UserPermissions looks the user up in the configuration, in whichever account it is.
func (g engineSource) UserPermissions(ci *ClientInfo) (*auth.Permissions, time.Duration) {
	return globalSource(g).UserPermissions(ci)
}
