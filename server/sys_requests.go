package server

// $SYS request/reply: one function per endpoint, from the request's JSON body to its answer
// (transport-independent), and the subscriptions that route requests to them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strings"
	"time"
)

// The endpoints every server answers on $SYS.REQ.SERVER.<id>.<NAME> and
// $SYS.REQ.SERVER.PING.<NAME> (IDZ, STATSZ and PROFILEZ are handled apart).
var sysServerEndpoints = map[string]func(s *Server, msg []byte) *ServerAPIResponse{
	"VARZ":      (*Server).sysVarz,
	"SUBSZ":     (*Server).sysSubsz,
	"CONNZ":     (*Server).sysConnz,
	"ROUTEZ":    (*Server).sysRoutez,
	"GATEWAYZ":  (*Server).sysGatewayz,
	"LEAFZ":     (*Server).sysLeafz,
	"ACCOUNTZ":  (*Server).sysAccountz,
	"JSZ":       (*Server).sysJsz,
	"HEALTHZ":   (*Server).sysHealthz,
	"EXPVARZ":   (*Server).sysExpvarz,
	"IPQUEUESZ": (*Server).sysIpqueuesz,
	"RAFTZ":     (*Server).sysRaftz,
}

// The endpoints on $SYS.REQ.ACCOUNT.<acc>.<NAME> (CONNS is handled apart).
var sysAccountEndpoints = map[string]func(s *Server, acc string, msg []byte) *ServerAPIResponse{
	"SUBSZ": (*Server).sysAccSubsz,
	"CONNZ": (*Server).sysAccConnz,
	"LEAFZ": (*Server).sysAccLeafz,
	"JSZ":   (*Server).sysAccJsz,
	"INFO":  (*Server).sysAccInfo,
	"STATZ": (*Server).sysAccStatz,
}

type sysHandler func(subject, reply string, hdr, msg []byte)

// subscribeAll subscribes every request subject nats-server 2.15.2's system account serves.
func (st *sysState) subscribeAll() error {
	s, id := st.s, st.id
	sub := func(subject string, h sysHandler) error { return st.subscribe(subject, h, false) }
	answer := func(f func(msg []byte) *ServerAPIResponse) sysHandler {
		return func(_, reply string, hdr, msg []byte) { st.respond(reply, hdr, f(msg)) }
	}
	type entry struct {
		subject string
		h       sysHandler
	}
	var list []entry
	for _, name := range []string{"IDZ", "STATSZ", "PROFILEZ"} {
		var h sysHandler
		switch name {
		case "IDZ":
			h = st.idzReq
		case "STATSZ":
			h = st.statszReq
		case "PROFILEZ":
			h = st.profilezReq
		}
		list = append(list, entry{fmt.Sprintf(serverDirectReqSubj, id, name), h}, entry{fmt.Sprintf(serverPingReqSubj, name), h})
	}
	for name, f := range sysServerEndpoints {
		f := f
		h := answer(func(msg []byte) *ServerAPIResponse { return f(s, msg) })
		list = append(list, entry{fmt.Sprintf(serverDirectReqSubj, id, name), h}, entry{fmt.Sprintf(serverPingReqSubj, name), h})
	}
	// Legacy ping-all STATSZ.
	list = append(list, entry{serverStatsPingReqSubj, st.statszReq})
	for name, f := range sysAccountEndpoints {
		f := f
		list = append(list, entry{fmt.Sprintf(accDirectReqSubj, "*", name), func(subject, reply string, hdr, msg []byte) {
			acc, err := accountOfRequest(subject)
			if err != nil {
				st.respond(reply, hdr, s.sysAnswer(nil, nil, nil, func() (any, error) { return nil, err }))
				return
			}
			st.respond(reply, hdr, f(s, acc, msg))
		}})
	}
	list = append(list,
		entry{fmt.Sprintf(accDirectReqSubj, "*", "CONNS"), st.connsReq},
		entry{fmt.Sprintf(accPingReqSubj, "STATZ"), answer(s.sysAccPingStatz)},
		entry{fmt.Sprintf(serverReloadReqSubj, id), answer(s.sysReload)},
		entry{fmt.Sprintf(clientKickReqSubj, id), st.kickReq},
		entry{fmt.Sprintf(clientLDMReqSubj, id), st.ldmReq},
	)
	for _, e := range list {
		if err := sub(e.subject, e.h); err != nil {
			return err
		}
	}
	// Interest in this one stays on this server: only the requester's own server answers.
	return st.subscribe(fmt.Sprintf(userDirectReqSubj, "*"), st.userInfoReq, true)
}

func (st *sysState) subscribe(subject string, h sysHandler, local bool) error {
	var unsub func()
	var err error
	if ls, ok := st.conn.(sysLocalSubscriber); ok && local {
		unsub, err = ls.SubscribeLocal(subject, "", h)
	} else {
		unsub, err = st.conn.Subscribe(subject, "", h)
	}
	if err != nil {
		return fmt.Errorf("error setting up internal tracking for %s: %v", subject, err)
	}
	st.mu.Lock()
	st.sid++
	st.subs = append(st.subs, sysSubRec{subject: subject, sid: fmt.Sprint(st.sid), unsub: unsub})
	st.mu.Unlock()
	return nil
}

// sysSubs lists the $SYS layer's own subscriptions (the system account's internal client).
func (s *Server) sysSubs() []SubDetail {
	st := s.sys.Load()
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]SubDetail, 0, len(st.subs))
	for _, r := range st.subs {
		out = append(out, SubDetail{Subject: r.subject, Queue: r.queue, Sid: r.sid})
	}
	return out
}

// accountOfRequest is <acc> in $SYS.REQ.ACCOUNT.<acc>.<NAME>.
func accountOfRequest(subject string) (string, error) {
	tk := strings.Split(subject, ".")
	if len(tk) != 5 {
		return "", fmt.Errorf("subject %q is malformed", subject)
	}
	return tk[3], nil
}

// respond sends resp (nil: no answer) to reply, compressed as hdr's Accept-Encoding asks.
func (st *sysState) respond(reply string, hdr []byte, resp *ServerAPIResponse) {
	if resp == nil || reply == "" {
		return
	}
	if resp.Error == nil && len(hdr) > 0 {
		resp.compress = acceptEncoding(hdr)
	}
	st.push(&sysMsg{subject: reply, si: resp.Server, v: resp, compress: resp.compress})
}

// sysAnswer is nats-server's request flow: decode msg (when not empty) into optz, stay
// silent when the filter does not select this server, else run fn. A decoding error is a
// 400, an error from fn a 500 (Data keeps what fn returned, as nats-server's does); errSkip
// means no answer (nil).
func (s *Server) sysAnswer(msg []byte, filter *EventFilterOptions, optz any, fn func() (any, error)) *ServerAPIResponse {
	resp := &ServerAPIResponse{Server: &ServerInfo{}}
	var err error
	status := 0
	if len(msg) != 0 && optz != nil {
		if err = json.Unmarshal(msg, optz); err != nil {
			status = http.StatusBadRequest
		} else if !s.sysFilterMatches(filter) {
			return nil
		}
	}
	if err == nil {
		resp.Data, err = fn()
		if errors.Is(err, errSkip) {
			return nil
		} else if err != nil {
			status = http.StatusInternalServerError
		}
	}
	if err != nil {
		resp.Error = &ApiError{Code: status, Description: err.Error()}
	}
	return resp
}

// sysFilterMatches reports whether a request's filter selects this server.
func (s *Server) sysFilterMatches(f *EventFilterOptions) bool {
	if f == nil {
		return true
	}
	o := s.getOpts()
	name, host, cluster := o.ServerName, o.Host, s.ClusterName()
	if f.ExactMatch {
		if (f.Name != "" && f.Name != name) || (f.Host != "" && f.Host != host) || (f.Cluster != "" && f.Cluster != cluster) {
			return false
		}
	} else if (f.Name != "" && !strings.Contains(name, f.Name)) || (f.Host != "" && !strings.Contains(host, f.Host)) ||
		(f.Cluster != "" && !strings.Contains(cluster, f.Cluster)) {
		return false
	}
	// natsd has no server tags yet: any tag filter excludes it.
	if len(f.Tags) > 0 {
		return false
	}
	return f.Domain == "" || f.Domain == s.jsDomain()
}

// ---- server endpoints

func (s *Server) sysVarz(msg []byte) *ServerAPIResponse {
	o := &VarzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Varz(), nil })
}

func (s *Server) sysSubsz(msg []byte) *ServerAPIResponse {
	o := &SubszEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Subsz(&o.SubszOptions) })
}

func (s *Server) sysConnz(msg []byte) *ServerAPIResponse {
	o := &ConnzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Connz(&o.ConnzOptions) })
}

func (s *Server) sysRoutez(msg []byte) *ServerAPIResponse {
	o := &RoutezEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Routez(&o.RoutezOptions) })
}

func (s *Server) sysGatewayz(msg []byte) *ServerAPIResponse {
	o := &GatewayzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Gatewayz(&o.GatewayzOptions) })
}

func (s *Server) sysLeafz(msg []byte) *ServerAPIResponse {
	o := &LeafzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Leafz(&o.LeafzOptions) })
}

func (s *Server) sysAccountz(msg []byte) *ServerAPIResponse {
	o := &AccountzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Accountz(&o.AccountzOptions) })
}

func (s *Server) sysJsz(msg []byte) *ServerAPIResponse {
	o := &JszEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Jsz(&o.JSzOptions) })
}

func (s *Server) sysHealthz(msg []byte) *ServerAPIResponse {
	o := &HealthzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.healthz(&o.HealthzOptions), nil })
}

func (s *Server) sysExpvarz(msg []byte) *ServerAPIResponse {
	o := &ExpvarzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.expvarz(), nil })
}

func (s *Server) sysIpqueuesz(msg []byte) *ServerAPIResponse {
	o := &IpqueueszEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Ipqueuesz(&o.IpqueueszOptions), nil })
}

func (s *Server) sysRaftz(msg []byte) *ServerAPIResponse {
	o := &RaftzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.Raftz(&o.RaftzOptions), nil })
}

// sysProfilez takes a profile: "cpu" for Duration (at most 15s), or any runtime/pprof
// profile by name with Debug as its format.
func (s *Server) sysProfilez(msg []byte) *ServerAPIResponse {
	o := &ProfilezEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return profilez(&o.ProfilezOptions), nil })
}

// ProfilezOptions are PROFILEZ's request body.
type ProfilezOptions struct {
	Name     string        `json:"name"`
	Debug    int           `json:"debug"`
	Duration time.Duration `json:"duration,omitempty"`
}

func profilez(o *ProfilezOptions) *ProfilezStatus {
	var buf strings.Builder
	switch o.Name {
	case "":
		return &ProfilezStatus{Error: "Profile name not specified"}
	case "cpu":
		if o.Duration <= 0 || o.Duration > 15*time.Second {
			return &ProfilezStatus{Error: fmt.Sprintf("Duration %s should be between 0s and 15s", o.Duration)}
		}
		if err := pprof.StartCPUProfile(&buf); err != nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Failed to start CPU profile: %s", err)}
		}
		time.Sleep(o.Duration)
		pprof.StopCPUProfile()
	default:
		p := pprof.Lookup(o.Name)
		if p == nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Profile %q not found", o.Name)}
		}
		if err := p.WriteTo(&buf, o.Debug); err != nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Profile %q error: %s", o.Name, err)}
		}
	}
	return &ProfilezStatus{Profile: []byte(buf.String())}
}

// profilezReq runs on its own goroutine: a CPU profile takes up to 15 seconds.
func (st *sysState) profilezReq(_, reply string, hdr, msg []byte) {
	go st.respond(reply, hdr, st.s.sysProfilez(msg))
}

// sysReload reloads the configuration file (RELOAD).
func (s *Server) sysReload(msg []byte) *ServerAPIResponse {
	o := &EventFilterOptions{}
	return s.sysAnswer(msg, o, o, func() (any, error) { return nil, s.Reload() })
}

// sysKick closes one client (KICK, body {"cid": N}).
func (s *Server) sysKick(msg []byte) *ServerAPIResponse {
	var req KickClientReq
	if err := json.Unmarshal(msg, &req); err != nil {
		s.log.Errorf("Error unmarshalling kick client request: %v", err)
		return nil
	}
	o := &EventFilterOptions{}
	return s.sysAnswer(msg, o, o, func() (any, error) { return nil, s.clients().Kick(req.CID) })
}

// sysLDM tells one client that this server is going away (LDM, body {"cid": N}).
func (s *Server) sysLDM(msg []byte) *ServerAPIResponse {
	var req LDMClientReq
	if err := json.Unmarshal(msg, &req); err != nil {
		// nats-server logs the kick text here too.
		s.log.Errorf("Error unmarshalling kick client request: %v", err)
		return nil
	}
	o := &EventFilterOptions{}
	return s.sysAnswer(msg, o, o, func() (any, error) { return nil, s.clients().LameDuckClient(req.CID) })
}

func (st *sysState) kickReq(_, reply string, hdr, msg []byte) {
	st.respond(reply, hdr, st.s.sysKick(msg))
}
func (st *sysState) ldmReq(_, reply string, hdr, msg []byte) {
	st.respond(reply, hdr, st.s.sysLDM(msg))
}

// idzReq answers IDZ with the bare ServerID (no envelope, no filter).
func (st *sysState) idzReq(_, reply string, _, _ []byte) {
	if reply == "" {
		return
	}
	st.push(&sysMsg{subject: reply, v: &ServerID{Name: st.name, Host: st.host, ID: st.id}})
}

// sysStatsz answers STATSZ: the bare ServerStatsMsg, a 400 ServerAPIResponse for a body
// that does not decode, or nil when the filter does not select this server.
func (s *Server) sysStatsz(msg []byte) any {
	if len(msg) != 0 {
		var o StatszEventOptions
		if err := json.Unmarshal(msg, &o); err != nil {
			return &ServerAPIResponse{Server: &ServerInfo{}, Error: &ApiError{Code: http.StatusBadRequest, Description: err.Error()}}
		}
		if !s.sysFilterMatches(&o.EventFilterOptions) {
			return nil
		}
	}
	return s.statsz()
}

// statszReq answers STATSZ and $SYS.REQ.SERVER.PING; without a reply subject it asks for a
// broadcast on $SYS.SERVER.<id>.STATSZ outside the rate limit.
func (st *sysState) statszReq(_, reply string, _, msg []byte) {
	ans := st.s.sysStatsz(msg)
	if ans == nil {
		return
	}
	if reply != "" {
		st.pushStatsz(reply, ans)
		return
	}
	st.runOnSender(func() {
		st.lastStatsz = time.Time{}
		if m, ok := ans.(*ServerStatsMsg); ok {
			st.sendBroadcastStatsz(time.Now(), m)
		} else {
			st.pushStatsz(fmt.Sprintf(serverStatsSubj, st.id), ans)
		}
	})
}

func (st *sysState) pushStatsz(subject string, ans any) {
	switch m := ans.(type) {
	case *ServerStatsMsg:
		st.push(&sysMsg{subject: subject, si: &m.Server, v: m})
	case *ServerAPIResponse:
		st.push(&sysMsg{subject: subject, si: m.Server, v: m})
	}
}

// ---- account endpoints ($SYS.REQ.ACCOUNT.<acc>.<NAME>)

func (s *Server) sysAccSubsz(acc string, msg []byte) *ServerAPIResponse {
	o := &SubszEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) {
		o.Subscriptions, o.Account = true, acc
		return s.Subsz(&o.SubszOptions)
	})
}

func (s *Server) sysAccConnz(acc string, msg []byte) *ServerAPIResponse {
	o := &ConnzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) {
		o.Account = acc
		return s.Connz(&o.ConnzOptions)
	})
}

func (s *Server) sysAccLeafz(acc string, msg []byte) *ServerAPIResponse {
	o := &LeafzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) {
		o.Account = acc
		return s.Leafz(&o.LeafzOptions)
	})
}

func (s *Server) sysAccJsz(acc string, msg []byte) *ServerAPIResponse {
	o := &JszEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) {
		o.Account = acc
		return s.JszAccount(&o.JSzOptions)
	})
}

func (s *Server) sysAccInfo(acc string, msg []byte) *ServerAPIResponse {
	o := &AccInfoEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.accountInfo(acc) })
}

// sysAccStatz is one account's STATZ; silent when it has no local connections (unless
// include_unused) and for the PING pseudo-account, which sysAccPingStatz answers.
func (s *Server) sysAccStatz(acc string, msg []byte) *ServerAPIResponse {
	o := &AccountStatzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) {
		if acc == "PING" {
			return nil, errSkip
		}
		o.Accounts = []string{acc}
		return s.accountStatzOrSkip(&o.AccountStatzOptions)
	})
}

// sysAccPingStatz is $SYS.REQ.ACCOUNT.PING.STATZ in the system account: the requested
// accounts (all by default) that have local connections.
func (s *Server) sysAccPingStatz(msg []byte) *ServerAPIResponse {
	o := &AccountStatzEventOptions{}
	return s.sysAnswer(msg, &o.EventFilterOptions, o, func() (any, error) { return s.accountStatzOrSkip(&o.AccountStatzOptions) })
}

func (s *Server) accountStatzOrSkip(o *AccountStatzOptions) (any, error) {
	stz, err := s.AccountStatz(o)
	if err != nil {
		return nil, err
	}
	if len(stz.Accounts) == 0 && !o.IncludeUnused {
		return nil, errSkip
	}
	return stz, nil
}

// connsReq answers $SYS.REQ.ACCOUNT.<acc>.CONNS with the account's AccountNumConns, when it
// has local connections (and restarts its heartbeat).
func (st *sysState) connsReq(subject, reply string, _, msg []byte) {
	acc, err := accountOfRequest(subject)
	if err != nil {
		st.s.log.Errorf("Bad subject account connections request message")
		return
	}
	m := accNumConnsReq{Account: acc}
	if len(msg) > 0 {
		if err := json.Unmarshal(msg, &m); err != nil {
			st.s.log.Errorf("Error unmarshalling account connections request message: %v", err)
			return
		}
	}
	if m.Account != acc {
		st.s.log.Errorf("Error unmarshalled account does not match subject")
		return
	}
	stat, ok := st.s.accounts().AccountStat(acc)
	if !ok || stat.Conns == 0 || reply == "" {
		return
	}
	st.runOnSender(func() { st.accConnsUpdate(acc, time.Now(), reply) })
}

// userInfoReq answers $SYS.REQ.USER.<acc>.INFO (reached by importing $SYS.REQ.USER.INFO):
// the requester's identity from the Nats-Request-Info header the import added, and its
// permissions.
func (st *sysState) userInfoReq(_, reply string, hdr, _ []byte) {
	if reply == "" {
		return
	}
	st.respond(reply, nil, st.s.sysUserInfo(hdr))
}

func (s *Server) sysUserInfo(hdr []byte) *ServerAPIResponse {
	resp := &ServerAPIResponse{Server: &ServerInfo{}}
	var ci ClientInfo
	if v := headerValue(hdr, clientInfoHdr); v != "" {
		if err := json.Unmarshal([]byte(v), &ci); err != nil {
			resp.Error = &ApiError{Code: http.StatusBadRequest}
			return resp
		}
	}
	var accName string
	if ci.Account != "" {
		if ai, ok := s.accounts().AccountInfo(ci.Account); ok {
			accName = ai.NameTag
			if accName == "" {
				accName = ai.AccountName
			}
		}
	}
	perms, expires := s.clients().UserPermissions(&ci)
	resp.Data = &UserInfo{
		UserID:      ci.User,
		Account:     ci.Account,
		AccountName: accName,
		UserName:    ci.NameTag,
		Permissions: perms,
		Expires:     expires,
	}
	return resp
}
