package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/natsd/natsd/auth"
)

// TestSysSubjects pins the subjects the $SYS layer subscribes (nats-server 2.15.2's
// initEventTracking for a standalone server, less the resolver and remote-server tracking).
func TestSysSubjects(t *testing.T) {
	s, fc := startSysNatsd(t, nil)
	id := s.ID()
	want := map[string]bool{}
	for _, n := range []string{"IDZ", "STATSZ", "VARZ", "SUBSZ", "CONNZ", "ROUTEZ", "GATEWAYZ", "LEAFZ", "ACCOUNTZ",
		"JSZ", "HEALTHZ", "PROFILEZ", "EXPVARZ", "IPQUEUESZ", "RAFTZ"} {
		want["$SYS.REQ.SERVER."+id+"."+n] = false
		want["$SYS.REQ.SERVER.PING."+n] = false
	}
	for _, n := range []string{"SUBSZ", "CONNZ", "LEAFZ", "JSZ", "INFO", "STATZ", "CONNS"} {
		want["$SYS.REQ.ACCOUNT.*."+n] = false
	}
	for _, n := range []string{"RELOAD", "KICK", "LDM"} {
		want["$SYS.REQ.SERVER."+id+"."+n] = false
	}
	want["$SYS.REQ.SERVER.PING"] = false
	want["$SYS.REQ.ACCOUNT.PING.STATZ"] = false
	want["$SYS.REQ.USER.*.INFO"] = true // local: no interest beyond this server
	got := fc.subjects()
	var diff []string
	for k, local := range want {
		if l, ok := got[k]; !ok || l != local {
			diff = append(diff, "-"+k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, "+"+k)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Fatalf("subscriptions differ: %v", diff)
	}
	// (With its real transport the layer's subscriptions are the system account's; this
	// test's fake transport holds them instead: end-to-end tests check /subsz.)
	if v := s.Varz(); v.SystemAccount != "SYS" {
		t.Fatalf("varz system_account %q", v.SystemAccount)
	}
	s.stopSys()
	if got := fc.subjects(); len(got) != 0 {
		t.Fatalf("still subscribed after stopSys: %v", got)
	}
	if v := s.Varz(); v.SystemAccount != "" {
		t.Fatalf("varz system_account %q after stop", v.SystemAccount)
	}
}

func testClientInfo(acc string) *ClientInfo {
	start := time.Now().Add(-time.Second).UTC()
	return &ClientInfo{
		Start: &start, Host: "127.0.0.1", ID: 42, Account: acc, User: "alice", Name: "app",
		Lang: "go", Version: "1.55.0", RTT: time.Millisecond, Kind: "Client", ClientType: "nats", NameTag: acc,
	}
}

// TestSysEvents drives every event entry point and decodes what goes out into nats-server's
// types, unknown fields rejected.
func TestSysEvents(t *testing.T) {
	s, fc := startSysNatsd(t, nil)
	id := s.ID()
	ci := testClientInfo(globalAccountName)
	sent, recv := MsgBytes{Msgs: 3, Bytes: 30}, MsgBytes{Msgs: 5, Bytes: 50}

	cases := []struct {
		name    string
		fire    func()
		subject string
		account string
		check   func(t *testing.T, b []byte)
	}{
		{"connect", func() { s.sysClientConnected(ci) }, "$SYS.ACCOUNT.$G.CONNECT", "", func(t *testing.T, b []byte) {
			var m natsserver.ConnectEventMsg
			decodeStrict(t, "connect", b, &m)
			if m.Type != ConnectEventMsgType || m.ID == "" || m.Client.ID != 42 || m.Client.User != "alice" || m.Server.ID != id {
				t.Fatalf("connect event %s", b)
			}
		}},
		{"disconnect", func() { s.sysClientDisconnected(ci, sent, recv, "Client Closed") }, "$SYS.ACCOUNT.$G.DISCONNECT", "", func(t *testing.T, b []byte) {
			var m natsserver.DisconnectEventMsg
			decodeStrict(t, "disconnect", b, &m)
			if m.Type != DisconnectEventMsgType || m.Reason != "Client Closed" || m.Sent.Msgs != 3 || m.Received.Bytes != 50 || m.Client.Stop == nil {
				t.Fatalf("disconnect event %s", b)
			}
		}},
		{"auth error", func() { s.sysAuthError(ci, sent, recv, "Authentication Failure") }, "$SYS.SERVER." + id + ".CLIENT.AUTH.ERR", "", func(t *testing.T, b []byte) {
			var m natsserver.DisconnectEventMsg
			decodeStrict(t, "auth error", b, &m)
			if m.Reason != "Authentication Failure" {
				t.Fatalf("auth error event %s", b)
			}
		}},
		{"account auth error", func() { s.sysAccountAuthError("A", ci, sent, recv, "Authentication Expired") }, "$SYS.ACCOUNT.CLIENT.AUTH.ERR", "A", func(t *testing.T, b []byte) {
			var m natsserver.DisconnectEventMsg
			decodeStrict(t, "account auth error", b, &m)
			if m.Client.Account != "A" || m.Reason != "Authentication Expired" {
				t.Fatalf("account auth error event %s", b)
			}
		}},
		{"account auth error in the system account", func() { s.sysAccountAuthError("SYS", ci, sent, recv, "x") }, "$SYS.ACCOUNT.CLIENT.AUTH.ERR", "", nil},
		{"lame duck", s.sysLameDuck, "$SYS.SERVER." + id + ".LAMEDUCK", "", func(t *testing.T, b []byte) {
			var m natsserver.ServerInfo
			decodeStrict(t, "lame duck", b, &m)
			if m.ID != id || m.Version != ServerVersion {
				t.Fatalf("lame duck event %s", b)
			}
		}},
		{"shutdown", s.stopSys, "$SYS.SERVER." + id + ".SHUTDOWN", "", func(t *testing.T, b []byte) {
			var m natsserver.ServerInfo
			decodeStrict(t, "shutdown", b, &m)
			if m.ID != id {
				t.Fatalf("shutdown event %s", b)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inAcc := func() []fakeMsg {
				var out []fakeMsg
				for _, m := range fc.published(c.subject) {
					if m.account == c.account {
						out = append(out, m)
					}
				}
				return out
			}
			n := len(inAcc())
			c.fire()
			waitFor(t, func() bool { return len(inAcc()) > n })
			m := inAcc()[n]
			if c.check != nil {
				c.check(t, m.msg)
			}
		})
	}
	// $G never gets SERVER.CONNS updates; everything after SHUTDOWN is dropped; every
	// message's server.seq is one more than the previous one's.
	s.sysClientConnected(ci)
	time.Sleep(50 * time.Millisecond)
	fc.mu.Lock()
	msgs := append([]fakeMsg(nil), fc.msgs...)
	fc.mu.Unlock()
	last := msgs[len(msgs)-1]
	if !strings.HasSuffix(last.subject, ".SHUTDOWN") {
		t.Fatalf("last message on %s, want SHUTDOWN", last.subject)
	}
	var seq uint64
	for _, m := range msgs {
		if strings.Contains(m.subject, "CONNS") {
			t.Fatalf("SERVER.CONNS for $G: %s", m.subject)
		}
		var env struct {
			Server *struct {
				Seq uint64 `json:"seq"`
			} `json:"server"`
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(m.msg, &env); err != nil {
			t.Fatal(err)
		}
		got := env.Seq // ServerInfo itself (SHUTDOWN, LAMEDUCK)
		if env.Server != nil {
			got = env.Server.Seq
		}
		if got != seq+1 {
			t.Fatalf("%s: seq %d after %d", m.subject, got, seq)
		}
		seq = got
	}
}

// TestSysEventsMatchNatsServer has nats-server publish its events (a client connecting and
// leaving, a failed authentication, the system account's SERVER.CONNS, lame duck), feeds
// natsd's entry points the ClientInfo nats-server reported, and compares the JSON keys.
func TestSysEventsMatchNatsServer(t *testing.T) {
	ns, sysnc := startSysNatsServer(t)
	s, fc := startSysNatsd(t, nil)
	events, err := sysnc.SubscribeSync("$SYS.>")
	if err != nil {
		t.Fatal(err)
	}
	sysnc.Flush()
	c := connect(t, ns.ClientURL(), "app")
	c.Close()
	if _, err := nats.Connect(ns.ClientURL(), nats.UserInfo("g", "wrong")); err == nil {
		t.Fatal("bad password accepted")
	}
	sys2, err := nats.Connect(ns.ClientURL(), nats.UserInfo("sys", "pass"))
	if err != nil {
		t.Fatal(err)
	}
	sys2.Close()
	go ns.LameDuckShutdown()

	theirs := map[string][]byte{}
	kinds := func(subj string) string {
		subj = strings.Replace(subj, ns.ID(), "ID", 1)
		return subj
	}
	want := []string{"$SYS.ACCOUNT.$G.CONNECT", "$SYS.ACCOUNT.$G.DISCONNECT", "$SYS.SERVER.ID.CLIENT.AUTH.ERR",
		"$SYS.ACCOUNT.SYS.SERVER.CONNS", "$SYS.SERVER.ACCOUNT.SYS.CONNS", "$SYS.SERVER.ID.LAMEDUCK"}
	have := func() int {
		n := 0
		for _, w := range want {
			if theirs[w] != nil {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(5 * time.Second)
	for have() < len(want) && time.Now().Before(deadline) {
		m, err := events.NextMsg(time.Until(deadline))
		if err != nil {
			t.Logf("events: %v (have %d)", err, len(theirs))
			break
		}
		k := kinds(m.Subject)
		if _, ok := theirs[k]; !ok {
			theirs[k] = m.Data
		}
	}
	// What natsd sends for the same happenings, from the same client descriptions.
	clientOf := func(subj string) *ClientInfo {
		var m struct {
			Client ClientInfo `json:"client"`
		}
		if err := json.Unmarshal(theirs[subj], &m); err != nil {
			t.Fatalf("%s: %v (%s)", subj, err, theirs[subj])
		}
		return &m.Client
	}
	ours := map[string]func(){
		"$SYS.ACCOUNT.$G.CONNECT": func() { s.sysClientConnected(clientOf("$SYS.ACCOUNT.$G.CONNECT")) },
		"$SYS.ACCOUNT.$G.DISCONNECT": func() {
			s.sysClientDisconnected(clientOf("$SYS.ACCOUNT.$G.DISCONNECT"), MsgBytes{}, MsgBytes{}, "Client Closed")
		},
		"$SYS.SERVER.ID.CLIENT.AUTH.ERR": func() {
			s.sysAuthError(clientOf("$SYS.SERVER.ID.CLIENT.AUTH.ERR"), MsgBytes{}, MsgBytes{}, "Authentication Failure")
		},
		"$SYS.ACCOUNT.SYS.SERVER.CONNS": func() { s.sys.Load().connsChanged("SYS") },
		"$SYS.SERVER.ACCOUNT.SYS.CONNS": func() {},
		"$SYS.SERVER.ID.LAMEDUCK":       s.sysLameDuck,
	}
	for _, subj := range want {
		t.Run(subj, func(t *testing.T) {
			tb, ok := theirs[subj]
			if !ok {
				t.Fatalf("nats-server sent nothing on %s", subj)
			}
			ours[subj]()
			ourSubj := strings.Replace(subj, "ID", s.ID(), 1)
			ob := fc.waitPublished(t, ourSubj, 1)[0].msg
			tk, ok2 := keySet(t, tb), keySet(t, ob)
			var diff []string
			for k := range tk {
				if !ok2[k] && !strings.HasPrefix(k, "server.feature_flags") && !strings.HasPrefix(k, "feature_flags") {
					diff = append(diff, "-"+k)
				}
			}
			for k := range ok2 {
				if !tk[k] {
					diff = append(diff, "+"+k)
				}
			}
			sort.Strings(diff)
			if len(diff) > 0 {
				t.Errorf("keys differ %v\nnats-server: %s\nnatsd: %s", diff, tb, ob)
			}
		})
	}
}

// TestSysStatszHeartbeat checks the periodic STATSZ: first after 250ms, the interval
// doubling; a ping without a reply is broadcast at once and pushes the next beat to at
// least 500ms (the current interval) later; nothing is sent while nobody listens.
func TestSysStatszHeartbeat(t *testing.T) {
	s, fc := startSysNatsd(t, nil)
	subj := fmt.Sprintf(serverStatsSubj, s.ID())
	start := time.Now()
	first := fc.waitPublished(t, subj, 1)
	if el := time.Since(start); el > 250*time.Millisecond+200*time.Millisecond {
		t.Fatalf("first STATSZ after %v", el)
	}
	var m natsserver.ServerStatsMsg
	decodeStrict(t, "statsz", first[0].msg, &m)
	if m.Server.ID != s.ID() || m.Stats.Cores == 0 || m.Stats.ActiveAccounts != 1 || m.Stats.ActiveServers != 1 {
		t.Fatalf("statsz %s", first[0].msg)
	}
	// The second comes 500ms after the first.
	fc.waitPublished(t, subj, 2)
	if el := time.Since(start); el < 600*time.Millisecond {
		t.Fatalf("second STATSZ after %v", el)
	}

	// A ping with no reply: broadcast now, outside the rate limit.
	s2, fc2 := startSysNatsd(t, nil)
	subj2 := fmt.Sprintf(serverStatsSubj, s2.ID())
	fc2.deliver("$SYS.REQ.SERVER.PING", "", nil, nil)
	fc2.waitPublished(t, subj2, 1)
	time.Sleep(350 * time.Millisecond)
	if n := len(fc2.published(subj2)); n != 1 {
		t.Fatalf("%d STATSZ within 350ms of a ping, want 1 (the 250ms beat is rate limited)", n)
	}
	fc2.waitPublished(t, subj2, 2)

	// Nobody listens: no beats, but requests are answered.
	s3 := startMonitored(t, nil)
	fc3 := newFakeSysConn()
	fc3.noInt = true
	swapSysConn(t, s3, fc3, "")
	if ans, ok := fc3.request(t, "$SYS.REQ.SERVER.PING.STATSZ", nil, nil, 2*time.Second); !ok {
		t.Fatal("no STATSZ answer")
	} else {
		decodeStrict(t, "statsz", ans.msg, &natsserver.ServerStatsMsg{})
	}
	time.Sleep(400 * time.Millisecond)
	if n := len(fc3.published(fmt.Sprintf(serverStatsSubj, s3.ID()))); n != 0 {
		t.Fatalf("%d STATSZ broadcasts with no interest", n)
	}
}

// fakeAccounts adds account A (with a settable connection count) to the global source.
type fakeAccounts struct {
	globalSource
	conns atomic.Int64
}

func (f *fakeAccounts) Accounts() []string { return append(f.globalSource.Accounts(), "A") }

func (f *fakeAccounts) AccountStat(name string) (*AccountStat, bool) {
	if name != "A" {
		return f.globalSource.AccountStat(name)
	}
	n := int(f.conns.Load())
	return &AccountStat{Account: "A", Name: "A", Conns: n, TotalConns: n, NumSubs: 3}, true
}

// TestSysAccountConns checks SERVER.CONNS: sent on both subjects when a connection of the
// account comes or goes, again every heartbeat while it has connections, once with zero when
// the last one goes and then no more; $SYS.REQ.ACCOUNT.A.CONNS is answered while it has some.
func TestSysAccountConns(t *testing.T) {
	old := accConnsHB
	t.Cleanup(func() { accConnsHB = old }) // after the server's own cleanup has stopped $SYS
	accConnsHB = 200 * time.Millisecond
	s := startMonitored(t, nil)
	accs := &fakeAccounts{globalSource: globalSource{s}}
	s.setAccountSource(accs, nil)
	fc := newFakeSysConn()
	swapSysConn(t, s, fc, "")
	const newSubj, oldSubj = "$SYS.ACCOUNT.A.SERVER.CONNS", "$SYS.SERVER.ACCOUNT.A.CONNS"
	accs.conns.Store(1)
	s.sysClientConnected(testClientInfo("A"))
	fc.waitPublished(t, oldSubj, 1)
	got := fc.waitPublished(t, newSubj, 1)
	var m natsserver.AccountNumConns
	decodeStrict(t, "conns", got[0].msg, &m)
	if m.Type != AccountNumConnsMsgType || m.Account != "A" || m.Conns != 1 || m.NumSubs != 3 {
		t.Fatalf("conns event %s", got[0].msg)
	}
	// Heartbeats.
	fc.waitPublished(t, newSubj, 3)
	if ans, ok := fc.request(t, "$SYS.REQ.ACCOUNT.A.CONNS", nil, nil, 2*time.Second); !ok {
		t.Fatal("no CONNS answer")
	} else {
		decodeStrict(t, "conns answer", ans.msg, &natsserver.AccountNumConns{})
	}
	// The last connection goes: one update with zero, then silence.
	accs.conns.Store(0)
	s.sysClientDisconnected(testClientInfo("A"), MsgBytes{}, MsgBytes{}, "Client Closed")
	deadline := time.Now().Add(2 * time.Second)
	for {
		l := fc.published(newSubj)
		var last AccountNumConns
		_ = json.Unmarshal(l[len(l)-1].msg, &last)
		if last.TotalConns == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no zero update")
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := len(fc.published(newSubj))
	time.Sleep(3 * accConnsHB)
	if m := len(fc.published(newSubj)); m != n {
		t.Fatalf("%d heartbeats after the account emptied", m-n)
	}
	if _, ok := fc.request(t, "$SYS.REQ.ACCOUNT.A.CONNS", nil, nil, 300*time.Millisecond); ok {
		t.Fatal("CONNS answered for an account without connections")
	}
	// STATZ names A only while it has connections, unless include_unused.
	if _, ok := fc.request(t, "$SYS.REQ.ACCOUNT.A.STATZ", nil, nil, 300*time.Millisecond); ok {
		t.Fatal("STATZ answered for an account without connections")
	}
	if ans, ok := fc.request(t, "$SYS.REQ.ACCOUNT.A.STATZ", nil, []byte(`{"include_unused":true}`), 2*time.Second); !ok {
		t.Fatal("no STATZ answer with include_unused")
	} else {
		var r apiResp[natsserver.AccountStatz]
		decodeStrict(t, "statz", ans.msg, &r)
		if len(r.Data.Accounts) != 1 || r.Data.Accounts[0].Account != "A" {
			t.Fatalf("statz %s", ans.msg)
		}
	}
}

// fakeClients is a clientControl that knows client 7.
type fakeClients struct {
	mu     sync.Mutex
	kicked []uint64
	ldm    []uint64
}

func (f *fakeClients) Kick(cid uint64) error {
	if cid != 7 {
		return errors.New("no such client or leafnode id")
	}
	f.mu.Lock()
	f.kicked = append(f.kicked, cid)
	f.mu.Unlock()
	return nil
}

func (f *fakeClients) LameDuckClient(cid uint64) error {
	if cid != 7 {
		return errors.New("no such client id")
	}
	f.mu.Lock()
	f.ldm = append(f.ldm, cid)
	f.mu.Unlock()
	return nil
}

func (f *fakeClients) UserPermissions(ci *ClientInfo) (*auth.Permissions, time.Duration) {
	if ci.ID != 7 {
		return nil, 0
	}
	return &auth.Permissions{Publish: &auth.SubjectPermission{Deny: []string{"x"}}, Subscribe: &auth.SubjectPermission{}}, time.Hour
}

// TestSysClientRequests checks KICK, LDM and USER.INFO against a clientControl, and the
// request filters.
func TestSysClientRequests(t *testing.T) {
	s := startMonitored(t, func(o *Options) { o.ServerName, o.Cluster.Name = "srv-a", "east" })
	ctl := &fakeClients{}
	s.setAccountSource(nil, ctl)
	fc := newFakeSysConn()
	swapSysConn(t, s, fc, "")
	id := s.ID()
	type want struct {
		answer bool
		err    string
	}
	cases := []struct {
		subject, body string
		hdr           string
		want          want
	}{
		{"$SYS.REQ.SERVER." + id + ".KICK", `{"cid":7}`, "", want{true, ""}},
		{"$SYS.REQ.SERVER." + id + ".KICK", `{"cid":8}`, "", want{true, "no such client or leafnode id"}},
		{"$SYS.REQ.SERVER." + id + ".KICK", `{"cid":7,"server_name":"other"}`, "", want{false, ""}},
		{"$SYS.REQ.SERVER." + id + ".KICK", `nope`, "", want{false, ""}},
		{"$SYS.REQ.SERVER." + id + ".LDM", `{"cid":7}`, "", want{true, ""}},
		{"$SYS.REQ.SERVER." + id + ".LDM", `{"cid":9}`, "", want{true, "no such client id"}},
		{"$SYS.REQ.SERVER.PING.IDZ", `{"server_name":"other"}`, "", want{true, ""}}, // IDZ has no filter
		{"$SYS.REQ.SERVER.PING.VARZ", `{"server_name":"srv"}`, "", want{true, ""}},
		{"$SYS.REQ.SERVER.PING.VARZ", `{"server_name":"srv","exact_match":true}`, "", want{false, ""}},
		{"$SYS.REQ.SERVER.PING.VARZ", `{"server_name":"srv-a","exact_match":true}`, "", want{true, ""}},
		{"$SYS.REQ.SERVER.PING.VARZ", `{"cluster":"c"}`, "", want{false, ""}},
		{"$SYS.REQ.SERVER.PING.VARZ", `{"cluster":"ea"}`, "", want{true, ""}},
		{"$SYS.REQ.SERVER.PING.VARZ", `{"cluster":"ea","exact_match":true}`, "", want{false, ""}},
		{"$SYS.REQ.SERVER.PING.VARZ", `{"cluster":"east","exact_match":true}`, "", want{true, ""}},
		{"$SYS.REQ.SERVER.PING.VARZ", `{"domain":"d"}`, "", want{false, ""}},
		{"$SYS.REQ.USER.$G.INFO", "", `{"acc":"$G","user":"bob","id":7,"name_tag":"Bob"}`, want{true, ""}},
		{"$SYS.REQ.USER.$G.INFO", "", `{bad`, want{true, "400"}},
	}
	for _, c := range cases {
		t.Run(c.subject+" "+c.body+c.hdr, func(t *testing.T) {
			var hdr []byte
			if c.hdr != "" {
				hdr = []byte("NATS/1.0\r\n" + clientInfoHdr + ": " + c.hdr + "\r\n\r\n")
			}
			wait := 2 * time.Second
			if !c.want.answer {
				wait = 300 * time.Millisecond
			}
			m, ok := fc.request(t, c.subject, hdr, []byte(c.body), wait)
			if ok != c.want.answer {
				t.Fatalf("answered %v, want %v (%s)", ok, c.want.answer, m.msg)
			}
			if !ok || strings.HasSuffix(c.subject, ".IDZ") {
				return
			}
			var r apiResp[json.RawMessage]
			decodeStrict(t, "answer", m.msg, &r)
			if !strings.Contains(string(m.msg), `"cluster":"east"`) {
				t.Fatalf("server info without the cluster name: %s", m.msg)
			}
			switch {
			case c.want.err == "400":
				if r.Error == nil || r.Error.Code != 400 {
					t.Fatalf("want a 400: %s", m.msg)
				}
			case c.want.err != "":
				if r.Error == nil || r.Error.Code != 500 || r.Error.Description != c.want.err {
					t.Fatalf("want error %q: %s", c.want.err, m.msg)
				}
			case r.Error != nil:
				t.Fatalf("error: %s", m.msg)
			}
			if strings.Contains(c.subject, ".USER.") && c.want.err == "" {
				var u natsserver.UserInfo
				decodeStrict(t, "user info", *r.Data, &u)
				if u.UserID != "bob" || u.Account != "$G" || u.AccountName != "$G" || u.UserName != "Bob" ||
					u.Expires != time.Hour || u.Permissions == nil || u.Permissions.Publish.Deny[0] != "x" {
					t.Fatalf("user info %s", *r.Data)
				}
			}
		})
	}
	if len(ctl.kicked) != 1 || len(ctl.ldm) != 1 {
		t.Fatalf("kicked %v, ldm %v", ctl.kicked, ctl.ldm)
	}
}

// TestSysProfilez takes a short CPU profile (on its own goroutine: other requests are
// answered meanwhile) and a named one.
func TestSysProfilez(t *testing.T) {
	s, fc := startSysNatsd(t, nil)
	done := make(chan fakeMsg, 1)
	go func() {
		m, _ := fc.request(t, "$SYS.REQ.SERVER."+s.ID()+".PROFILEZ", nil, []byte(`{"name":"cpu","duration":300000000}`), 5*time.Second)
		done <- m
	}()
	time.Sleep(50 * time.Millisecond)
	if _, ok := fc.request(t, "$SYS.REQ.SERVER.PING.IDZ", nil, nil, 200*time.Millisecond); !ok {
		t.Fatal("IDZ not answered while a CPU profile runs")
	}
	for _, m := range []fakeMsg{<-done} {
		var r apiResp[natsserver.ProfilezStatus]
		decodeStrict(t, "profilez", m.msg, &r)
		if r.Data == nil || r.Data.Error != "" || len(r.Data.Profile) == 0 {
			t.Fatalf("cpu profile: %.200s", m.msg)
		}
	}
	m, ok := fc.request(t, "$SYS.REQ.SERVER.PING.PROFILEZ", nil, []byte(`{"name":"heap","debug":1}`), 5*time.Second)
	if !ok {
		t.Fatal("no heap profile")
	}
	var r apiResp[natsserver.ProfilezStatus]
	decodeStrict(t, "profilez", m.msg, &r)
	if !strings.Contains(string(r.Data.Profile), "heap profile") {
		t.Fatalf("heap profile: %.200s", r.Data.Profile)
	}
}
