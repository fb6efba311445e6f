package server

// Wiring between the configuration's accounts and the engine's routing core: the account specs
// (mappings, imports, limits, the system account's imports into every account), the $SYS
// layer's transport over the system account's internal client, and the connection events.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/natsd/natsd/loop"
	"github.com/natsd/natsd/sublist"
	"github.com/natsd/natsd/transform"
)

// accountSpecs is what the engine needs to know about every account o configures: the
// global account (server-wide mappings), each configured account, and the system account
// (created when the configuration does not declare it, unless there is none), with the
// $SYS imports every other account gets.
func accountSpecs(o *Options) []loop.AccountSpec {
	sys := o.SystemAccountName()
	specs := []loop.AccountSpec{{Name: loop.GlobalAccount, Limits: noLimits(), Mappings: mappings(o.Mappings)}}
	declared := map[string]bool{}
	for _, a := range o.Accounts {
		declared[a.Name] = true
		sp := loop.AccountSpec{Name: a.Name, System: a.Name == sys, Limits: limits(a.Limits), Mappings: mappings(a.Mappings)}
		for _, im := range a.Imports {
			if !im.Service {
				sp.Streams = append(sp.Streams, loop.StreamImport{
					From: im.Account, Subject: im.RemoteSubject, Local: im.LocalSubject, Transform: im.Transform,
				})
				continue
			}
			rt, threshold := serviceExport(o, im.Account, im.RemoteSubject)
			sp.Services = append(sp.Services, loop.ServiceImport{
				From: im.Account, Local: im.LocalSubject, Remote: im.RemoteSubject, Transform: im.Transform,
				ResponseType: rt, Threshold: threshold, Share: im.Share, RequestInfo: im.Share || im.Account == sys,
			})
		}
		specs = append(specs, sp)
	}
	if sys != "" && !declared[sys] {
		specs = append(specs, loop.AccountSpec{Name: sys, System: true, Limits: noLimits()})
	}
	for i := range specs {
		sp := &specs[i]
		if sys == "" {
			break
		}
		if sp.Name == sys {
			sp.Services = append(sp.Services, sysService(sys, sysImport{From: userDirectInfoSubj, To: fmt.Sprintf(userDirectReqSubj, sys), Share: true}))
			continue
		}
		for _, im := range sysImports(sp.Name) {
			sp.Services = append(sp.Services, sysService(sys, im))
		}
	}
	return specs
}

func sysService(sys string, im sysImport) loop.ServiceImport {
	rt := "Singleton"
	for _, e := range sysExportList {
		if e.Streamed && sublist.MatchFilter(im.To, e.Subject) {
			rt = "Streamed"
		}
	}
	return loop.ServiceImport{From: sys, Local: im.From, Remote: im.To, ResponseType: rt, Share: im.Share, RequestInfo: true}
}

// serviceExport finds the export of account acc that a service import of subject uses, for
// its response type and threshold.
func serviceExport(o *Options, acc, subject string) (string, time.Duration) {
	if a := o.Account(acc); a != nil {
		for _, e := range a.Exports {
			if e.Service && sublist.MatchFilter(subject, e.Subject) || e.Service && e.Subject == subject {
				return e.ResponseType.String(), e.ResponseThreshold
			}
		}
	}
	return "Singleton", DefaultServiceResponseThreshold
}

func mappings(ms []*MappingConfig) []*transform.Mapping {
	var out []*transform.Mapping
	for _, m := range ms {
		if m.Mapping != nil {
			out = append(out, m.Mapping)
		}
	}
	return out
}

func limits(l AccountLimits) loop.AccountLimits {
	return loop.AccountLimits{
		MaxConnections: int(l.MaxConnections), MaxSubscriptions: int(l.MaxSubscriptions), MaxPayload: int(l.MaxPayload),
	}
}

func noLimits() loop.AccountLimits { return limits(NoAccountLimits) }

// requestInfo is the Nats-Request-Info header value of a request crossing a service import:
// the requester in full when the import shares it, else only its account and round trip, as
// nats-server's getClientInfo(detailed) writes them.
func (s *Server) requestInfo(org loop.Origin, share bool) []byte {
	o := s.getOpts()
	ci := &ClientInfo{Account: org.Account, RTT: org.RTT, Server: o.ServerName}
	if share {
		start := org.Start.UTC()
		ci.Start = &start
		ci.Host, ci.ID, ci.Name, ci.User = org.Host, org.CID, org.Name, org.User
		ci.Lang, ci.Version = org.Lang, org.Version
		ci.Kind, ci.ClientType = kindName(org.Kind), clientType(org.Kind)
	}
	b, _ := json.Marshal(ci)
	return b
}

func kindName(k loop.Kind) string {
	switch k {
	case loop.KindClient:
		return "Client"
	case loop.KindRouter:
		return "Router"
	case loop.KindGateway:
		return "Gateway"
	case loop.KindLeaf:
		return "Leafnode"
	case loop.KindJetStream:
		return "JetStream"
	case loop.KindAccount:
		return "Account"
	case loop.KindSystem:
		return "System"
	}
	return "Unknown Type"
}

func clientType(k loop.Kind) string {
	if k == loop.KindClient {
		return "nats"
	}
	return ""
}

// clientInfo describes a connection the way $SYS events do.
func (s *Server) clientInfo(cs *loop.ConnSnapshot) *ClientInfo {
	start := cs.Start.UTC()
	ci := &ClientInfo{
		Start: &start, Host: cs.IP, ID: cs.CID, Account: accountOf(cs), User: cs.User,
		Name: cs.Name, Lang: cs.Lang, Version: cs.Version, RTT: cs.RTT,
		Kind: "Client", ClientType: "nats", NameTag: "",
	}
	if !cs.Stop.IsZero() {
		stop := cs.Stop.UTC()
		ci.Stop = &stop
	}
	return ci
}

func accountOf(cs *loop.ConnSnapshot) string {
	if cs.Account == "" {
		return loop.GlobalAccount
	}
	return cs.Account
}

// connEvents turns the engine's connection events into $SYS events.
type connEvents struct{ s *Server }

func (ev connEvents) ClientConnected(cs *loop.ConnSnapshot) {
	ev.s.sysClientConnected(ev.s.clientInfo(cs))
}

func (ev connEvents) ClientDisconnected(cs *loop.ConnSnapshot) {
	ev.s.sysClientDisconnected(ev.s.clientInfo(cs),
		MsgBytes{Msgs: cs.OutMsgs, Bytes: cs.OutBytes}, MsgBytes{Msgs: cs.InMsgs, Bytes: cs.InBytes}, cs.Reason)
}

func (ev connEvents) AuthFailed(cs *loop.ConnSnapshot) {
	ev.s.sysAuthError(ev.s.clientInfo(cs),
		MsgBytes{Msgs: cs.OutMsgs, Bytes: cs.OutBytes}, MsgBytes{Msgs: cs.InMsgs, Bytes: cs.InBytes}, cs.Reason)
}

// engineSys is the $SYS layer's transport: the system account's internal client.
type engineSys struct {
	e   *loop.Engine
	ic  *loop.InternalClient
	acc *loop.Account
}

func (es *engineSys) Subscribe(subject, queue string, fn func(subject, reply string, hdr, msg []byte)) (func(), error) {
	sub, err := es.ic.Worker(subject, queue, func(m *loop.WorkMsg) { fn(m.Subject, m.Reply, m.Hdr, m.Data) })
	if err != nil {
		return nil, err
	}
	return sub.Unsubscribe, nil
}

func (es *engineSys) Publish(subject, reply string, hdr, msg []byte) error {
	return es.ic.Publish(subject, reply, hdr, msg)
}

func (es *engineSys) PublishAccount(account, subject, reply string, hdr, msg []byte) error {
	a := es.e.LookupAccount(account)
	if a == nil {
		return fmt.Errorf("no account %q", account)
	}
	return es.e.AccountClient(a).Publish(subject, reply, hdr, msg)
}

// HasInterest reports whether anything in the system account subscribes to subject (a
// standalone nats-server sends its periodic STATSZ only then).
func (es *engineSys) HasInterest(subject string) bool { return es.acc.HasInterest(subject) }

// Flush waits until what was published has been routed.
func (es *engineSys) Flush(timeout time.Duration) error { return es.ic.Flush(timeout) }
