package server

import (
	"errors"
	"sort"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/loop"
	"github.com/natsd/natsd/sublist"
)

// accountSource is what monitoring (HTTP and $SYS) needs to know about accounts. The routing
// core implements it for real accounts; globalSource serves today's single global account
// from the engine. Every method is called off the reactors (HTTP handlers, $SYS workers)
// and may block briefly to gather from them.
type accountSource interface {
	// Accounts names every account the server has loaded, the system account included.
	Accounts() []string
	// ActiveAccounts counts the accounts with at least one client, internal ones included
	// (STATSZ active_accounts).
	ActiveAccounts() int
	// AccountInfo is /accountz?acc=name and $SYS.REQ.ACCOUNT.<name>.INFO, filled completely
	// (imports, exports, mappings, sublist stats ...); false when there is no such account.
	AccountInfo(name string) (*AccountInfo, bool)
	// AccountStat is the account's local connection and traffic figures (/accstatz, STATZ,
	// SERVER.CONNS, STATSZ's subscription count); false when there is no such account. It
	// must be cheap (counters, no round trip to the reactors): the $SYS sender goroutine
	// calls it for heartbeats.
	AccountStat(name string) (*AccountStat, bool)
	// Conns snapshots the open client and leaf connections of account ("" for every
	// account), each with who it is.
	Conns(account string, q loop.ConnsQuery) []*acctConn
	// ClosedConns lists the remembered closed connections of account ("" for all), oldest
	// first.
	ClosedConns(account string) []*acctConn
	// Subs lists the subscriptions of account ("" for every account, internal clients'
	// included, as nats-server's /subsz does), Account and AccountTag filled; with test
	// non-empty only those a publish on that literal subject reaches.
	Subs(account, test string) []SubDetail
	// SublistStats are account's sublist figures ("" sums every account); false when there
	// is no such account.
	SublistStats(account string) (*SublistStats, bool)
}

// acctConn is one connection as monitoring sees it: the engine's snapshot and the identity
// the routing core knows (empty where not known).
type acctConn struct {
	*loop.ConnSnapshot
	Account   string
	User      string // nats-server's raw auth user: nkey, user name, or "[REDACTED]" for a token
	NameTag   string // the account's name tag (its name when it has none)
	Tags      []string
	JWT       string
	IssuerKey string
}

// clientControl is what $SYS.REQ.SERVER.<id>.KICK / LDM and $SYS.REQ.USER.INFO do to or ask of
// one client; the routing core implements it.
type clientControl interface {
	// Kick closes client (or leaf node) cid with reason "Kicked"; nats-server's error is
	// "no such client or leafnode id".
	Kick(cid uint64) error
	// LameDuckClient sends client cid an async INFO with "ldm":true (only to protocol-1
	// clients past their first PONG, else nats-server's "client does not support Lame Duck
	// Mode or is not ready to receive the notification"; "no such client id" if unknown).
	LameDuckClient(cid uint64) error
	// UserPermissions are the publish/subscribe rights of the client ci describes (its ID
	// is the cid, its User the raw auth user), nil when it has no restrictions, and how long
	// until its credentials expire (0 = never).
	UserPermissions(ci *ClientInfo) (*auth.Permissions, time.Duration)
}

// errNoClientControl answers KICK and LDM until the routing core can act on one client.
var errNoClientControl = errors.New("not supported by this server yet")

// globalSource is accountSource and clientControl for today's engine: one global account
// ($G) holding every client, and the system account while the $SYS layer runs (holding only
// the $SYS layer's own subscriptions).
type globalSource struct{ s *Server }

func (g globalSource) sysName() string { return g.s.sysAccountName() }

func (g globalSource) Accounts() []string {
	out := []string{globalAccountName}
	if n := g.sysName(); n != "" {
		out = append(out, n)
	}
	return out
}

func (g globalSource) ActiveAccounts() int {
	n := 0
	if g.s.eng.NumConns() > 0 {
		n++
	}
	if g.sysName() != "" {
		n++ // the system account's internal client
	}
	return n
}

func (g globalSource) AccountInfo(name string) (*AccountInfo, bool) {
	ss, ok := g.SublistStats(name)
	if !ok {
		return nil, false
	}
	ai := &AccountInfo{
		AccountName: name,
		LastUpdate:  g.s.start.UTC(),
		Complete:    true,
		SubCnt:      ss.NumSubs,
		NameTag:     name,
		Sublist:     ss,
	}
	sys := g.sysName()
	switch name {
	case globalAccountName:
		ai.ClientCnt = int(g.s.eng.NumConns())
		if sys != "" {
			ai.Imports = sysImportsFor(name, sys)
		}
	case sys:
		ai.IsSystem = true
		ai.Exports = sysExports()
		ai.Imports = sysOwnImports(sys)
	}
	return ai, true
}

// numSubs counts an account's subscriptions without asking the reactors.
func (g globalSource) numSubs(name string) (uint32, bool) {
	switch sys := g.sysName(); name {
	case globalAccountName:
		return uint32(g.s.eng.Stats().Subscriptions), true
	case sys:
		if sys != "" {
			return uint32(len(g.s.sysSubs())), true
		}
	}
	return 0, false
}

func (g globalSource) AccountStat(name string) (*AccountStat, bool) {
	n, ok := g.numSubs(name)
	if !ok {
		return nil, false
	}
	as := &AccountStat{Account: name, Name: name, NumSubs: n}
	as.Sent = DataStats{Gateways: &MsgBytes{}, Routes: &MsgBytes{}, Leafs: &MsgBytes{}}
	as.Received = DataStats{Gateways: &MsgBytes{}, Routes: &MsgBytes{}, Leafs: &MsgBytes{}}
	if name == globalAccountName {
		st := g.s.eng.Stats()
		as.Conns = int(st.Connections)
		as.TotalConns = as.Conns
		as.Sent.MsgBytes = MsgBytes{Msgs: int64(st.OutMsgs), Bytes: int64(st.OutBytes)}
		as.Received.MsgBytes = MsgBytes{Msgs: int64(st.InMsgs), Bytes: int64(st.InBytes)}
		as.SlowConsumers = int64(st.SlowConsumers)
	}
	return as, true
}

func wrapConns(list []*loop.ConnSnapshot) []*acctConn {
	out := make([]*acctConn, 0, len(list))
	for _, cs := range list {
		out = append(out, &acctConn{ConnSnapshot: cs, Account: globalAccountName, NameTag: globalAccountName})
	}
	return out
}

func (g globalSource) Conns(account string, q loop.ConnsQuery) []*acctConn {
	if account != "" && account != globalAccountName {
		return nil
	}
	return wrapConns(g.s.eng.Conns(q))
}

func (g globalSource) ClosedConns(account string) []*acctConn {
	if account != "" && account != globalAccountName {
		return nil
	}
	return wrapConns(g.s.eng.ClosedConns())
}

func (g globalSource) Subs(account, test string) []SubDetail {
	var out []SubDetail
	if account == "" || account == globalAccountName {
		var list []loop.SubSnapshot
		if test != "" {
			list = g.s.eng.MatchSubs(nil, test)
		} else {
			list = g.s.eng.Subs()
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].CID != list[j].CID {
				return list[i].CID < list[j].CID
			}
			return list[i].Sid < list[j].Sid
		})
		for _, sd := range list {
			out = append(out, SubDetail{
				Account: globalAccountName, AccountTag: globalAccountName,
				Subject: sd.Subject, Queue: sd.Queue, Sid: sd.Sid, Msgs: sd.Msgs, Max: sd.Max, Cid: sd.CID,
			})
		}
	}
	if sys := g.sysName(); sys != "" && (account == "" || account == sys) {
		for _, sd := range g.s.sysSubs() {
			if test == "" || sublist.MatchFilter(test, sd.Subject) {
				sd.Account, sd.AccountTag = sys, sys
				out = append(out, sd)
			}
		}
	}
	return out
}

func (g globalSource) SublistStats(account string) (*SublistStats, bool) {
	sys := g.sysName()
	switch account {
	case "", globalAccountName:
		st := g.s.engineSublistStats()
		if account == "" && sys != "" {
			st.NumSubs += uint32(len(g.s.sysSubs()))
		}
		return st, true
	case sys:
		if sys == "" {
			return nil, false
		}
		return &SublistStats{NumSubs: uint32(len(g.s.sysSubs()))}, true
	}
	return nil, false
}

func (g globalSource) Kick(uint64) error           { return errNoClientControl }
func (g globalSource) LameDuckClient(uint64) error { return errNoClientControl }

// UserPermissions looks the user up in the configuration: today's clients are all
// configured users (or anonymous) of the global account.
func (g globalSource) UserPermissions(ci *ClientInfo) (*auth.Permissions, time.Duration) {
	o := g.s.getOpts()
	if ci == nil || ci.User == "" {
		return nil, 0
	}
	for _, u := range o.Users {
		if u.Username == ci.User {
			if u.Permissions != nil {
				return u.Permissions, 0
			}
			return o.DefaultPermissions, 0
		}
	}
	for _, u := range o.Nkeys {
		if u.Nkey == ci.User {
			if u.Permissions != nil {
				return u.Permissions, 0
			}
			return o.DefaultPermissions, 0
		}
	}
	if o.Username != "" && o.Username == ci.User {
		return o.DefaultPermissions, 0
	}
	return nil, 0
}
