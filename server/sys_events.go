package server

// $SYS events: what the routing core calls when clients come and go, and what the $SYS
// layer's own timers send (STATSZ, SERVER.CONNS heartbeats). Every entry point only queues
// work for the sender goroutine: it is safe, and cheap, to call from a reactor.

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"time"
)

// sysClientConnected publishes $SYS.ACCOUNT.<acc>.CONNECT for a client that has just
// authenticated into ci.Account, and the account's SERVER.CONNS update. ci is nats-server's
// ClientInfo of the client: start, host (IP), id (cid), acc, user (raw auth user), name, lang,
// ver, jwt, issuer_key, name_tag (the account's), tags, kind ("Client"), client_type ("nats")
// and client_id (MQTT). The caller may reuse ci afterwards.
func (s *Server) sysClientConnected(ci *ClientInfo) {
	st := s.sys.Load()
	if st == nil || ci == nil {
		return
	}
	m := &ConnectEventMsg{
		TypedEvent: TypedEvent{Type: ConnectEventMsgType, ID: st.nextEventID(), Time: time.Now().UTC()},
		Client:     *ci,
	}
	st.push(&sysMsg{subject: fmt.Sprintf(connectEventSubj, accountOrNA(ci.Account)), si: &m.Server, v: m})
	st.connsChanged(ci.Account)
}

// sysClientDisconnected publishes $SYS.ACCOUNT.<acc>.DISCONNECT for a closed client (every
// client connection, also one that never authenticated: it is in $G then) and the account's
// SERVER.CONNS update. ci also carries stop and rtt; sent is what the client sent to the
// server (its in_msgs/in_bytes), received what the server sent it; reason is the close
// reason as /connz shows it ("Client Closed", "Authentication Failure" ...).
func (s *Server) sysClientDisconnected(ci *ClientInfo, sent, received MsgBytes, reason string) {
	st := s.sys.Load()
	if st == nil || ci == nil {
		return
	}
	m := st.disconnectMsg(ci, sent, received, reason)
	st.push(&sysMsg{subject: fmt.Sprintf(disconnectEventSubj, accountOrNA(ci.Account)), si: &m.Server, v: m})
	st.connsChanged(ci.Account)
}

// sysAuthError publishes $SYS.SERVER.<id>.CLIENT.AUTH.ERR for a client that failed to
// authenticate (before it is closed; its DISCONNECT follows).
func (s *Server) sysAuthError(ci *ClientInfo, sent, received MsgBytes, reason string) {
	st := s.sys.Load()
	if st == nil || ci == nil {
		return
	}
	m := st.disconnectMsg(ci, sent, received, reason)
	st.push(&sysMsg{subject: fmt.Sprintf(authErrorEventSubj, st.id), si: &m.Server, v: m})
}

// sysAccountAuthError publishes $SYS.ACCOUNT.CLIENT.AUTH.ERR into account acc, the account a
// client tried to join and was refused by (account-level checks: expired or revoked
// credentials, auth callout ...), for that account's owners.
func (s *Server) sysAccountAuthError(acc string, ci *ClientInfo, sent, received MsgBytes, reason string) {
	st := s.sys.Load()
	if st == nil || ci == nil || acc == "" {
		return
	}
	m := st.disconnectMsg(ci, sent, received, reason)
	m.Client.Account = acc
	st.push(&sysMsg{subject: authErrorAccountEventSubj, account: accIfNotSys(acc, st.account), si: &m.Server, v: m})
}

func accIfNotSys(acc, sys string) string {
	if acc == sys {
		return ""
	}
	return acc
}

func accountOrNA(acc string) string {
	if acc == "" {
		return "N/A"
	}
	return acc
}

func (st *sysState) disconnectMsg(ci *ClientInfo, sent, received MsgBytes, reason string) *DisconnectEventMsg {
	now := time.Now().UTC()
	m := &DisconnectEventMsg{
		TypedEvent: TypedEvent{Type: DisconnectEventMsgType, ID: st.nextEventID(), Time: now},
		Client:     *ci,
		Sent:       DataStats{MsgBytes: sent},
		Received:   DataStats{MsgBytes: received},
		Reason:     reason,
	}
	if m.Client.Stop == nil {
		m.Client.Stop = &now
	}
	return m
}

// connsChanged sends acc's SERVER.CONNS update after a connection came or went (never for
// $G, as nats-server).
func (st *sysState) connsChanged(acc string) {
	if acc == "" || acc == globalAccountName {
		return
	}
	st.runOnSender(func() {
		st.accConnsUpdate(acc, time.Now(), fmt.Sprintf(accConnsEventSubjOld, acc), fmt.Sprintf(accConnsEventSubjNew, acc))
	})
}

// accConnsUpdate sends acc's AccountNumConns to each subject and re-arms its heartbeat: due
// again in 30s while it has connections, dropped once it has none. Sender goroutine only.
func (st *sysState) accConnsUpdate(acc string, now time.Time, subjects ...string) {
	stat, ok := st.s.accounts().AccountStat(acc)
	if !ok {
		delete(st.connsHB, acc)
		return
	}
	m := &AccountNumConns{
		TypedEvent:  TypedEvent{Type: AccountNumConnsMsgType, ID: st.nextEventID(), Time: now.UTC()},
		AccountStat: *stat,
	}
	if m.TotalConns == 0 {
		delete(st.connsHB, acc)
	} else {
		st.connsHB[acc] = now.Add(accConnsHB)
	}
	for _, subj := range subjects {
		st.send(&sysMsg{subject: subj, si: &m.Server, v: m})
	}
}

// statsz gathers a STATSZ (cheap: counters only, no round trip to the reactors).
func (s *Server) statsz() *ServerStatsMsg {
	m := &ServerStatsMsg{}
	v := &m.Stats
	v.CPU, v.Mem = s.procUsage(time.Now())
	v.Cores = runtime.NumCPU()
	v.MaxProcs = runtime.GOMAXPROCS(0)
	if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
		v.MemLimit = lim
	}
	st := s.eng.Stats()
	src := s.accounts()
	v.Start = s.start
	v.Connections = int(st.Connections)
	v.TotalConnections = st.TotalConnections
	v.ActiveAccounts = src.ActiveAccounts()
	v.NumSubs = s.numSubscriptions()
	v.Received.MsgBytes = MsgBytes{Msgs: int64(st.InMsgs), Bytes: int64(st.InBytes)}
	v.ReceivedFromClients = v.Received
	v.Sent.MsgBytes = MsgBytes{Msgs: int64(st.OutMsgs), Bytes: int64(st.OutBytes)}
	v.SentToClients = v.Sent
	v.SlowConsumers = int64(st.SlowConsumers)
	if st.SlowConsumers != 0 {
		v.SlowConsumersStats = &KindCounts{Clients: st.SlowConsumers}
	}
	v.StaleConnections = int64(st.StaleConnections)
	if st.StaleConnections != 0 {
		v.StaleConnectionStats = &KindCounts{Clients: st.StaleConnections}
	}
	v.StalledClients = int64(st.StalledClients)
	v.ActiveServers = 1 // this one; other servers are counted once routes exist
	v.JetStream = s.jsStatsz()
	return m
}

// numSubscriptions sums every account's subscriptions, internal ones included.
func (s *Server) numSubscriptions() uint32 {
	src := s.accounts()
	var n uint32
	for _, a := range src.Accounts() {
		if st, ok := src.AccountStat(a); ok {
			n += st.NumSubs
		}
	}
	return n
}

// broadcastStatsz is the periodic $SYS.SERVER.<id>.STATSZ. Sender goroutine only.
func (st *sysState) broadcastStatsz(now time.Time) {
	st.sendBroadcastStatsz(now, nil)
}

// sendBroadcastStatsz sends m (gathered now when nil) on the broadcast subject, at most once
// per min(1s, current interval): a broadcast too soon moves the next heartbeat to the end of
// that window instead. As a standalone nats-server, it sends only when someone listens.
func (st *sysState) sendBroadcastStatsz(now time.Time, m *ServerStatsMsg) {
	subj := fmt.Sprintf(serverStatsSubj, st.id)
	interval := min(statszRateLimit, st.cstatsz)
	if !st.lastStatsz.IsZero() && now.Sub(st.lastStatsz) < interval {
		st.nextStatsz = st.lastStatsz.Add(interval)
		return
	}
	st.lastStatsz = now
	if hi, ok := st.conn.(sysInterest); ok && !hi.HasInterest(subj) {
		return
	}
	if m == nil {
		m = st.s.statsz()
	}
	st.send(&sysMsg{subject: subj, si: &m.Server, v: m})
}
