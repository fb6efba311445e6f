package server

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/loop"
	"github.com/natsd/natsd/sublist"
)

// Monitoring paths, as nats-server names them (and counts them in /varz http_req_stats).
const (
	rootPath      = "/"
	varzPath      = "/varz"
	connzPath     = "/connz"
	routezPath    = "/routez"
	gatewayzPath  = "/gatewayz"
	leafzPath     = "/leafz"
	subszPath     = "/subsz"
	stackszPath   = "/stacksz"
	accountzPath  = "/accountz"
	accstatzPath  = "/accstatz"
	jszPath       = "/jsz"
	healthzPath   = "/healthz"
	ipqueueszPath = "/ipqueuesz"
	raftzPath     = "/raftz"
	expvarzPath   = "/debug/vars"
	metricsPath   = "/metrics"
	pprofPath     = "/debug/pprof/"

	defaultListSize   = 1024
	globalAccountName = "$G"
)

// monitor is the monitoring HTTP server (and the separate profiling one).
type monitor struct {
	base string // normalized http_base_path

	ln, profLn   net.Listener
	srv, profSrv *http.Server

	mu   sync.Mutex
	reqs map[string]uint64
}

func normalizeBasePath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	return path.Clean(p)
}

func (m *monitor) path(p string) string { return path.Join(m.base, p) }

func (m *monitor) count(p string) {
	m.mu.Lock()
	m.reqs[p]++
	m.mu.Unlock()
}

// startMonitoring opens the monitoring port (HTTPPort) and the profiling port (ProfPort).
func (s *Server) startMonitoring() error {
	o := &s.opts
	if o.HTTPPort == 0 && o.ProfPort == 0 {
		return nil
	}
	m := &monitor{base: normalizeBasePath(o.HTTPBasePath), reqs: make(map[string]uint64)}
	s.mon = m
	if o.ProfPort != 0 {
		ln, err := listenHTTP(o.Host, o.ProfPort, "profiling")
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		addPprof(mux, "")
		m.profLn = ln
		m.profSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		s.log.Noticef("profiling port: %d", ln.Addr().(*net.TCPAddr).Port)
		go func() { _ = m.profSrv.Serve(ln) }()
	}
	if o.HTTPPort == 0 {
		return nil
	}
	ln, err := listenHTTP(o.HTTPHost, o.HTTPPort, "monitor")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	handle := func(p string, h http.HandlerFunc) { mux.HandleFunc(m.path(p), h) }
	handle(rootPath, s.handleRoot)
	handle(varzPath, s.handleVarz)
	handle(connzPath, s.handleConnz)
	handle(routezPath, s.handleRoutez)
	handle(gatewayzPath, s.handleGatewayz)
	handle(leafzPath, s.handleLeafz)
	handle(subszPath, s.handleSubsz)
	handle("/subscriptionsz", s.handleSubsz)
	handle(stackszPath, s.handleStacksz)
	handle(accountzPath, s.handleAccountz)
	handle(accstatzPath, s.handleAccstatz)
	handle(jszPath, s.handleJsz)
	handle(healthzPath, s.handleHealthz)
	handle(ipqueueszPath, s.handleIPQueuesz)
	handle(raftzPath, s.handleRaftz)
	handle(expvarzPath, s.handleExpvarz)
	mux.Handle(m.path(metricsPath), s.metricsHandler())
	if o.ProfPort != 0 {
		addPprof(mux, strings.TrimSuffix(m.base, "/"))
	}
	m.ln = ln
	m.srv = &http.Server{Handler: mux, MaxHeaderBytes: 1 << 20, ReadHeaderTimeout: 5 * time.Second}
	s.log.Noticef("Starting http monitor on %s", net.JoinHostPort(o.HTTPHost, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
	go func() { _ = m.srv.Serve(ln) }()
	return nil
}

// listenHTTP opens an HTTP endpoint's listener; a negative port picks a free one.
func listenHTTP(host string, port int, what string) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(max(port, 0))))
	if err != nil {
		return nil, fmt.Errorf("can't listen to the %s port: %v", what, err)
	}
	return ln, nil
}

func addPprof(mux *http.ServeMux, prefix string) {
	mux.HandleFunc(prefix+pprofPath, pprof.Index)
	mux.HandleFunc(prefix+pprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(prefix+pprofPath+"profile", pprof.Profile)
	mux.HandleFunc(prefix+pprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc(prefix+pprofPath+"trace", pprof.Trace)
}

func (s *Server) stopMonitoring() {
	m := s.mon
	if m == nil {
		return
	}
	if m.srv != nil {
		_ = m.srv.Close()
	}
	if m.profSrv != nil {
		_ = m.profSrv.Close()
	}
}

// MonitorAddr is the bound monitoring address, nil when monitoring is off.
func (s *Server) MonitorAddr() *net.TCPAddr {
	if s.mon == nil || s.mon.ln == nil {
		return nil
	}
	return s.mon.ln.Addr().(*net.TCPAddr)
}

// ProfilerAddr is the bound profiling address, nil when profiling is off.
func (s *Server) ProfilerAddr() *net.TCPAddr {
	if s.mon == nil || s.mon.profLn == nil {
		return nil
	}
	return s.mon.profLn.Addr().(*net.TCPAddr)
}

// writeJSON answers as nats-server's monitoring does: indented JSON, CORS open.
func writeJSON(w http.ResponseWriter, code int, v any, indent bool) {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func badRequest(w http.ResponseWriter, msg string) {
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(msg))
}

// Query decoding with nats-server's error texts; each reports false after answering 400.

func qBool(w http.ResponseWriter, r *http.Request, name string) (bool, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		badRequest(w, fmt.Sprintf("Error decoding boolean for '%s': %v", name, err))
		return false, false
	}
	return b, true
}

func qInt(w http.ResponseWriter, r *http.Request, name string) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		badRequest(w, fmt.Sprintf("Error decoding int for '%s': %v", name, err))
		return 0, false
	}
	return n, true
}

func qUint64(w http.ResponseWriter, r *http.Request, name string) (uint64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		badRequest(w, fmt.Sprintf("Error decoding uint64 for '%s': %v", name, err))
		return 0, false
	}
	return n, true
}

// qSubs reads subs=1|true|detail.
func qSubs(w http.ResponseWriter, r *http.Request) (subs, detail, ok bool) {
	if strings.EqualFold(r.URL.Query().Get("subs"), "detail") {
		return false, true, true
	}
	subs, ok = qBool(w, r, "subs")
	return subs, false, ok
}

// uptimeString formats a duration as nats-server's /varz and /connz do ("1d2h3m4s").
func uptimeString(d time.Duration) string {
	secs := int64(d / time.Second)
	mins, hrs := secs/60, secs/3600
	days := hrs / 24
	yrs := days / 365
	switch {
	case yrs > 0:
		return fmt.Sprintf("%dy%dd%dh%dm%ds", yrs, days%365, hrs%24, mins%60, secs%60)
	case days > 0:
		return fmt.Sprintf("%dd%dh%dm%ds", days, hrs%24, mins%60, secs%60)
	case hrs > 0:
		return fmt.Sprintf("%dh%dm%ds", hrs, mins%60, secs%60)
	case mins > 0:
		return fmt.Sprintf("%dm%ds", mins, secs%60)
	}
	return fmt.Sprintf("%ds", secs)
}

func rttString(d time.Duration) string {
	if d > time.Microsecond && d < time.Millisecond {
		d = d.Truncate(time.Microsecond)
	}
	return d.String()
}

// ---- /

func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.mon.base {
		http.NotFound(w, r)
		return
	}
	s.mon.count(rootPath)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	links := []struct{ path, title string }{
		{"varz", "General"}, {"jsz", "JetStream"}, {"connz", "Connections"},
		{"accountz", "Accounts"}, {"accstatz", "Account Stats"}, {"subsz", "Subscriptions"},
		{"routez", "Routes"}, {"leafz", "LeafNodes"}, {"gatewayz", "Gateways"},
		{"raftz", "Raft Groups"}, {"healthz", "Health Probe"}, {"metrics", "Prometheus Metrics"},
		{"debug/vars", "Expvar"},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<html lang=\"en\">\n<head><title>natsd</title>\n<style>body{font-family:sans-serif;margin-left:32px} a{display:block;padding-bottom:6px} .endpoint{font-size:12px;color:#999;font-family:monospace}</style>\n</head>\n<body>\n<h2>natsd v%s <small>(nats-server v%s compatible)</small></h2>\n", Version, ServerVersion)
	for _, l := range links {
		fmt.Fprintf(&b, "<a href=./%s>%s<span class=\"endpoint\"> /%s</span></a>\n", l.path, l.title, l.path)
	}
	if s.getOpts().ProfPort != 0 {
		b.WriteString("<a href=./debug/pprof/>Profiling<span class=\"endpoint\"> /debug/pprof</span></a>\n")
	}
	b.WriteString("<a href=https://docs.nats.io/running-a-nats-service/nats_admin/monitoring>Help</a>\n</body>\n</html>\n")
	_, _ = w.Write([]byte(b.String()))
}

// ---- /varz

// VarzOptions is VARZ's request body (no options yet, as nats-server's).
type VarzOptions struct{}

// Varz gathers the /varz figures.
func (s *Server) Varz() *Varz {
	o := s.getOpts()
	st := s.eng.Stats()
	now := time.Now()
	v := &Varz{
		ID:      s.id,
		Name:    o.ServerName,
		Version: ServerVersion,
		// version stays the compatible nats-server's, which tools gate on; natsd's own
		// version rides in git_commit, the build identity release binaries report there.
		GitCommit:      buildIdentity(),
		Proto:          1,
		GoVersion:      runtime.Version(),
		Host:           o.Host,
		Port:           s.eng.Addr().Port,
		MaxConn:        o.MaxConn,
		MaxSubs:        o.MaxSubs,
		PingInterval:   o.PingInterval,
		MaxPingsOut:    o.MaxPingsOut,
		HTTPHost:       o.HTTPHost,
		HTTPPort:       o.HTTPPort,
		HTTPBasePath:   o.HTTPBasePath,
		HTTPSPort:      o.HTTPSPort,
		AuthTimeout:    o.AuthTimeout.Seconds(),
		MaxControlLine: o.MaxControlLine,
		MaxPayload:     int(o.MaxPayload),
		MaxPending:     o.MaxPending,
		TLSTimeout:     tlsTimeout(o),
		WriteDeadline:  o.WriteDeadline,
		Start:          s.start.UTC(),
		Now:            now.UTC(),
		Uptime:         uptimeString(now.Sub(s.start)),
		Cores:          runtime.NumCPU(),
		MaxProcs:       runtime.GOMAXPROCS(0),

		Connections:      int(st.Connections),
		TotalConnections: st.TotalConnections,
		InMsgs:           int64(st.InMsgs),
		InBytes:          int64(st.InBytes),
		InClientMsgs:     int64(st.InMsgs),
		InClientBytes:    int64(st.InBytes),
		OutMsgs:          int64(st.OutMsgs),
		OutBytes:         int64(st.OutBytes),
		OutClientMsgs:    int64(st.OutMsgs),
		OutClientBytes:   int64(st.OutBytes),
		SlowConsumers:    int64(st.SlowConsumers),
		StaleConnections: int64(st.StaleConnections),
		StalledClients:   int64(st.StalledClients),
		Subscriptions:    uint32(st.Subscriptions),
		ConfigLoadTime:   s.loadTime().UTC(),
		TLSCertNotAfter:  tlsCertNotAfter(o.TLSConfig),
		ConfigDigest:     o.ConfigDigest,

		SlowConsumersStats:   &KindCounts{Clients: st.SlowConsumers},
		StaleConnectionStats: &KindCounts{Clients: st.StaleConnections},
		DiskIOWaitStats:      &DiskIOWaitStats{},
	}
	if o.HTTPPort == -1 || o.HTTPPort == 0 {
		if a := s.MonitorAddr(); a != nil {
			v.HTTPPort = a.Port
		}
	}
	if lim := debug.SetMemoryLimit(-1); lim != math.MaxInt64 {
		v.MemLimit = lim
	}
	v.HTTPReqStats = map[string]uint64{}
	if s.mon != nil {
		s.mon.mu.Lock()
		for k, n := range s.mon.reqs {
			v.HTTPReqStats[k] = n
		}
		s.mon.mu.Unlock()
	}
	v.CPU, v.Mem = s.procUsage(now)
	v.SystemAccount = s.sysAccountName()
	v.JetStream = s.jsVarz()
	v.AuthRequired = authRequired(o)
	v.TLSRequired, v.TLSVerify, _ = tlsInfo(o)
	v.Cluster = s.clusterVarz(o)
	v.Routes, v.Remotes = s.eng.NumRoutes(), s.eng.NumRemotes()
	return v
}

// procUsage samples the process's CPU use and resident size (one sampler for /varz and
// STATSZ, so both see CPU over the same windows).
func (s *Server) procUsage(now time.Time) (pct float64, rss int64) {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	return s.proc.sample(now)
}

func (s *Server) handleVarz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(varzPath)
	writeJSON(w, http.StatusOK, s.Varz(), true)
}

// ---- /connz

// ConnState selects connections by state in /connz (JSON: 0 open, 1 closed, 2 all).
type ConnState int

// Connection states, as nats-server numbers them.
const (
	ConnOpen ConnState = iota
	ConnClosed
	ConnAll
)

// ConnzOptions are /connz's query parameters and CONNZ's request body.
type ConnzOptions struct {
	Sort                string    `json:"sort"`
	Username            bool      `json:"auth"`
	Subscriptions       bool      `json:"subscriptions"`
	SubscriptionsDetail bool      `json:"subscriptions_detail"`
	Offset              int       `json:"offset"`
	Limit               int       `json:"limit"`
	CID                 uint64    `json:"cid"`
	MQTTClient          string    `json:"mqtt_client"`
	State               ConnState `json:"state"`
	User                string    `json:"user"`
	Account             string    `json:"acc"`
	// FilterSubject keeps the connections with a subscription that collides with it (needs
	// Account).
	FilterSubject string `json:"filter_subject"`

	// noPeerCerts leaves the TLS peer chains out of auth's detail (/metrics has no use for them).
	noPeerCerts bool
}

var connzSorts = map[string]bool{
	"": true, "cid": true, "start": true, "subs": true, "pending": true, "msgs_to": true,
	"msgs_from": true, "bytes_to": true, "bytes_from": true, "last": true, "idle": true,
	"uptime": true, "stop": true, "reason": true, "rtt": true,
}

// tlsVersion names a TLS version as /connz does ("1.3").
func tlsVersion(v uint16) string {
	switch v {
	case tls.VersionTLS10:
		return "1.0"
	case tls.VersionTLS11:
		return "1.1"
	case tls.VersionTLS12:
		return "1.2"
	case tls.VersionTLS13:
		return "1.3"
	}
	return fmt.Sprintf("Unknown [0x%x]", v)
}

// peerCerts is /connz's tls_peer_certs: each certificate's subject and the SHA-256 of its
// public key and of the whole certificate.
func peerCerts(chain []*x509.Certificate) []*TLSPeerCert {
	if len(chain) == 0 {
		return nil
	}
	out := make([]*TLSPeerCert, len(chain))
	for i, c := range chain {
		spki := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		whole := sha256.Sum256(c.Raw)
		out[i] = &TLSPeerCert{Subject: c.Subject.String(), SubjectPKISha256: hex.EncodeToString(spki[:]), CertSha256: hex.EncodeToString(whole[:])}
	}
	return out
}

// tlsCertNotAfter is when the server's (first) certificate expires; zero without TLS.
func tlsCertNotAfter(c *tls.Config) time.Time {
	if c == nil || len(c.Certificates) == 0 || len(c.Certificates[0].Certificate) == 0 {
		return time.Time{}
	}
	leaf := c.Certificates[0].Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificates[0].Certificate[0]); err != nil {
			return time.Time{}
		}
	}
	return leaf.NotAfter
}

// tlsTimeout is /varz's tls_timeout in seconds: nats-server reports its default (2) when
// TLS is off too.
func tlsTimeout(o *Options) float64 {
	if o.TLSTimeout > 0 {
		return o.TLSTimeout.Seconds()
	}
	return DefaultTLSTimeout.Seconds()
}

func connInfo(cs *loop.ConnSnapshot, now time.Time, subs, detail bool) *ConnInfo {
	ci := &ConnInfo{
		Cid:          cs.CID,
		Kind:         "Client",
		Type:         "nats",
		IP:           cs.IP,
		Port:         cs.Port,
		Start:        cs.Start.UTC(),
		LastActivity: cs.Last.UTC(),
		Reason:       cs.Reason,
		RTT:          rttString(cs.RTT),
		Pending:      int(cs.Pending),
		InMsgs:       cs.InMsgs,
		OutMsgs:      cs.OutMsgs,
		InBytes:      cs.InBytes,
		OutBytes:     cs.OutBytes,
		Stalls:       cs.Stalls,
		NumSubs:      uint32(cs.NumSubs),
		Name:         cs.Name,
		Lang:         cs.Lang,
		Version:      cs.Version,
		rtt:          cs.RTT,
	}
	if cs.TLSVersion != 0 {
		ci.TLSVersion = tlsVersion(cs.TLSVersion)
		ci.TLSCipher = tls.CipherSuiteName(cs.TLSCipher)
		ci.TLSFirst = cs.TLSFirst
	}
	end := now
	if !cs.Stop.IsZero() {
		stop := cs.Stop.UTC()
		ci.Stop = &stop
		end = cs.Stop
	}
	ci.Uptime = uptimeString(end.Sub(cs.Start))
	ci.Idle = uptimeString(end.Sub(cs.Last))
	if detail {
		ci.SubsDetail = make([]SubDetail, 0, len(cs.Subs))
		for _, sd := range cs.Subs {
			ci.SubsDetail = append(ci.SubsDetail, SubDetail{Subject: sd.Subject, Queue: sd.Queue, Sid: sd.Sid, Msgs: sd.Msgs, Max: sd.Max, Cid: sd.CID})
		}
	} else if subs {
		ci.Subs = make([]string, 0, len(cs.Subs))
		for _, sd := range cs.Subs {
			ci.Subs = append(ci.Subs, sd.Subject)
		}
	}
	return ci
}

// Connz gathers /connz and CONNZ.
func (s *Server) Connz(q *ConnzOptions) (*Connz, error) {
	if q == nil {
		q = &ConnzOptions{}
	}
	if !connzSorts[q.Sort] {
		return nil, fmt.Errorf("invalid sorting option: %s", q.Sort)
	}
	if q.Sort == "stop" && q.State != ConnClosed {
		return nil, fmt.Errorf("sort by stop only valid on closed connections")
	}
	if q.Sort == "reason" && q.State != ConnClosed {
		return nil, fmt.Errorf("sort by reason only valid on closed connections")
	}
	offset := max(q.Offset, 0)
	limit := q.Limit
	if limit <= 0 {
		limit = defaultListSize
	}
	if q.CID > 0 {
		limit = 1
	}
	var filter string
	if q.FilterSubject != "" && q.FilterSubject != ">" {
		if q.Account == "" {
			return nil, fmt.Errorf("filter by subject only valid with account filtering")
		}
		filter = q.FilterSubject
	}
	now := time.Now()
	cz := &Connz{Now: now.UTC(), Offset: offset, Limit: limit}
	src := s.accounts()
	if q.Account != "" {
		if _, ok := src.AccountStat(q.Account); !ok {
			// nats-server answers an unknown account with neither its id nor a list.
			return cz, nil
		}
	}
	cz.ID = s.id

	keep := func(c *acctConn) bool {
		return (q.User == "" || c.User == q.User) && q.MQTTClient == ""
	}
	var conns []*acctConn
	total := 0
	if q.State == ConnOpen || q.State == ConnAll {
		open := src.Conns(q.Account, loop.ConnsQuery{CID: q.CID, Subs: q.Subscriptions || q.SubscriptionsDetail || filter != "", ProbeRTT: true})
		total += len(open)
		for _, c := range open {
			if keep(c) && (filter == "" || subsCollide(c.Subs, filter)) {
				conns = append(conns, c)
			}
		}
	}
	if q.State == ConnClosed || q.State == ConnAll {
		closed := src.ClosedConns(q.Account)
		if q.Account != "" {
			// nats-server remembers no account for a closed $G client, so an account
			// filter, even "$G", never shows one.
			closed = slices.DeleteFunc(slices.Clone(closed), func(c *acctConn) bool { return c.Account == globalAccountName })
		}
		if q.CID == 0 {
			total += len(closed)
		}
		if q.CID == 0 || len(conns) == 0 {
			for _, c := range closed {
				if (q.CID == 0 || c.CID == q.CID) && keep(c) {
					conns = append(conns, c)
				}
			}
		}
	}
	if q.CID > 0 {
		total = len(conns)
	}
	cz.Total = total
	infos := make([]*ConnInfo, 0, len(conns))
	for _, c := range conns {
		ci := connInfo(c.ConnSnapshot, now, q.Subscriptions, q.SubscriptionsDetail)
		if !c.Stop.IsZero() {
			// A closed connection's subscriptions are remembered with their account.
			for i := range ci.SubsDetail {
				ci.SubsDetail[i].Account, ci.SubsDetail[i].AccountTag = c.Account, c.NameTag
			}
		}
		if q.Username {
			if c.Stop.IsZero() && !q.noPeerCerts {
				// nats-server remembers a closed connection without its peer's chain.
				ci.TLSPeerCerts = peerCerts(c.TLSPeerCerts)
			}
			ci.AuthorizedUser = c.User
			if c.Account != globalAccountName {
				ci.Account = c.Account
			}
			if c.Stop.IsZero() {
				// Open connections show their account's name tag, even $G's.
				ci.JWT, ci.IssuerKey, ci.Tags, ci.NameTag = c.JWT, c.IssuerKey, c.Tags, c.NameTag
			} else if ci.Account != "" {
				ci.JWT, ci.NameTag = c.JWT, c.NameTag
			}
		}
		infos = append(infos, ci)
	}
	sortConns(infos, q.Sort, now)
	lo := min(offset, len(infos))
	hi := lo + min(limit, len(infos)-lo)
	cz.Conns = infos[lo:hi]
	cz.NumConns = len(cz.Conns)
	return cz, nil
}

func subsCollide(subs []loop.SubSnapshot, filter string) bool {
	for _, sd := range subs {
		if auth.SubjectsCollide(filter, sd.Subject) {
			return true
		}
	}
	return false
}

func sortConns(c []*ConnInfo, by string, now time.Time) {
	desc := func(less func(a, b *ConnInfo) bool) {
		sort.SliceStable(c, func(i, j int) bool { return less(c[j], c[i]) })
	}
	uptime := func(ci *ConnInfo) time.Duration {
		if ci.Stop != nil {
			return ci.Stop.Sub(ci.Start)
		}
		return now.Sub(ci.Start)
	}
	switch by {
	case "", "cid", "start":
		sort.SliceStable(c, func(i, j int) bool { return c[i].Cid < c[j].Cid })
	case "subs":
		desc(func(a, b *ConnInfo) bool { return a.NumSubs < b.NumSubs })
	case "pending":
		desc(func(a, b *ConnInfo) bool { return a.Pending < b.Pending })
	case "msgs_to":
		desc(func(a, b *ConnInfo) bool { return a.OutMsgs < b.OutMsgs })
	case "msgs_from":
		desc(func(a, b *ConnInfo) bool { return a.InMsgs < b.InMsgs })
	case "bytes_to":
		desc(func(a, b *ConnInfo) bool { return a.OutBytes < b.OutBytes })
	case "bytes_from":
		desc(func(a, b *ConnInfo) bool { return a.InBytes < b.InBytes })
	case "last":
		desc(func(a, b *ConnInfo) bool { return a.LastActivity.Before(b.LastActivity) })
	case "idle":
		desc(func(a, b *ConnInfo) bool { return now.Sub(a.LastActivity) < now.Sub(b.LastActivity) })
	case "uptime":
		sort.SliceStable(c, func(i, j int) bool { return uptime(c[i]) < uptime(c[j]) })
	case "stop":
		desc(func(a, b *ConnInfo) bool { return a.Stop.Before(*b.Stop) })
	case "reason":
		sort.SliceStable(c, func(i, j int) bool { return c[i].Reason < c[j].Reason })
	case "rtt":
		desc(func(a, b *ConnInfo) bool { return a.rtt < b.rtt })
	}
}

func (s *Server) handleConnz(w http.ResponseWriter, r *http.Request) {
	q := &ConnzOptions{Sort: r.URL.Query().Get("sort")}
	var ok bool
	if q.Username, ok = qBool(w, r, "auth"); !ok {
		return
	}
	if q.Subscriptions, q.SubscriptionsDetail, ok = qSubs(w, r); !ok {
		return
	}
	if q.Offset, ok = qInt(w, r, "offset"); !ok {
		return
	}
	if q.Limit, ok = qInt(w, r, "limit"); !ok {
		return
	}
	if q.CID, ok = qUint64(w, r, "cid"); !ok {
		return
	}
	switch st := r.URL.Query().Get("state"); strings.ToLower(st) {
	case "", "open":
		q.State = ConnOpen
	case "closed":
		q.State = ConnClosed
	case "any", "all":
		q.State = ConnAll
	default:
		badRequest(w, "Error decoding state for "+st)
		return
	}
	q.User = r.URL.Query().Get("user")
	q.Account = r.URL.Query().Get("acc")
	q.MQTTClient = r.URL.Query().Get("mqtt_client")
	s.mon.count(connzPath)
	cz, err := s.Connz(q)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, cz, true)
}

// ---- /subsz

// engineSublistStats are the engine's interest-graph figures (the global account's).
func (s *Server) engineSublistStats() *SublistStats { return subStats(s.eng.SubStats()) }

// subStats is the engine's interest-graph figures in /subsz terms.
func subStats(st loop.SubStats) *SublistStats {
	n := uint64(st.Subscriptions)
	ss := &SublistStats{
		NumSubs:    uint32(st.Subscriptions),
		NumCache:   uint32(st.Cache),
		NumInserts: st.Inserts,
		NumRemoves: st.Inserts - min(st.Inserts, n),
		NumMatches: st.Matches,
		MaxFanout:  uint32(st.MaxFanout),
	}
	if st.Matches > 0 {
		ss.CacheHitRate = float64(st.CacheHits) / float64(st.Matches)
	}
	if st.Cache > 0 {
		ss.AvgFanout = float64(st.TotFanout) / float64(st.Cache)
	}
	return ss
}

// sublistStats are the figures summed over every account (/metrics, /subsz).
func (s *Server) sublistStats() *SublistStats {
	if st, ok := s.accounts().SublistStats(""); ok {
		return st
	}
	return &SublistStats{}
}

// SubszOptions are /subsz's query parameters and SUBSZ's request body.
type SubszOptions struct {
	Offset        int    `json:"offset"`
	Limit         int    `json:"limit"`
	Subscriptions bool   `json:"subscriptions"`
	Account       string `json:"account,omitempty"`
	// Test keeps the subscriptions a publish on this literal subject reaches.
	Test string `json:"test,omitempty"`
}

// Subsz gathers /subsz and SUBSZ.
func (s *Server) Subsz(q *SubszOptions) (*Subsz, error) {
	if q == nil {
		q = &SubszOptions{}
	}
	offset := max(q.Offset, 0)
	limit := q.Limit
	if limit <= 0 {
		limit = defaultListSize
	}
	if q.Test != "" && !sublist.ValidLiteralSubject([]byte(q.Test)) {
		return nil, fmt.Errorf("invalid test subject, must be valid publish subject: %s", q.Test)
	}
	src := s.accounts()
	sz := &Subsz{ID: s.id, Now: time.Now().UTC(), SublistStats: &SublistStats{}, Offset: offset, Limit: limit}
	if st, ok := src.SublistStats(q.Account); ok {
		sz.SublistStats = st
		if q.Subscriptions {
			d := src.Subs(q.Account, q.Test)
			lo := min(offset, len(d))
			hi := lo + min(limit, len(d)-lo)
			sz.Subs = d[lo:hi]
			sz.Total = len(d)
		}
	}
	return sz, nil
}

func (s *Server) handleSubsz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(subszPath)
	q := &SubszOptions{Test: r.URL.Query().Get("test"), Account: r.URL.Query().Get("acc")}
	var ok bool
	if q.Subscriptions, ok = qBool(w, r, "subs"); !ok {
		return
	}
	if q.Offset, ok = qInt(w, r, "offset"); !ok {
		return
	}
	if q.Limit, ok = qInt(w, r, "limit"); !ok {
		return
	}
	sz, err := s.Subsz(q)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, sz, true)
}

// ---- endpoints of parts natsd does not have yet: nats-server's empty answers

// RoutezOptions are /routez's query parameters and ROUTEZ's request body.
type RoutezOptions struct {
	Subscriptions       bool `json:"subscriptions"`
	SubscriptionsDetail bool `json:"subscriptions_detail"`
}

// Routez gathers /routez and ROUTEZ (no routes until clustering exists).
func (s *Server) Routez(q *RoutezOptions) (*Routez, error) {
	rz := &Routez{ID: s.id, Name: s.getOpts().ServerName, Now: time.Now().UTC(), Routes: []*RouteInfo{}}
	if s.eng == nil {
		return rz, nil
	}
	var subs, detail bool
	if q != nil {
		subs, detail = q.Subscriptions, q.SubscriptionsDetail
	}
	for _, ri := range s.routezRoutes(subs, detail) {
		rz.Routes = append(rz.Routes, &ri)
	}
	rz.NumRoutes = len(rz.Routes)
	return rz, nil
}

func (s *Server) handleRoutez(w http.ResponseWriter, r *http.Request) {
	s.mon.count(routezPath)
	var q RoutezOptions
	var ok bool
	if q.Subscriptions, q.SubscriptionsDetail, ok = qSubs(w, r); !ok {
		return
	}
	rz, _ := s.Routez(&q)
	writeJSON(w, http.StatusOK, rz, true)
}

// GatewayzOptions are /gatewayz's query parameters and GATEWAYZ's request body.
type GatewayzOptions struct {
	Name                       string `json:"name"`
	Accounts                   bool   `json:"accounts"`
	AccountName                string `json:"account_name"`
	AccountSubscriptions       bool   `json:"subscriptions"`
	AccountSubscriptionsDetail bool   `json:"subscriptions_detail"`
}

// Gatewayz gathers /gatewayz and GATEWAYZ (no gateways yet).
func (s *Server) Gatewayz(*GatewayzOptions) (*Gatewayz, error) {
	return &Gatewayz{
		ID: s.id, Now: time.Now().UTC(),
		OutboundGateways: map[string]any{}, InboundGateways: map[string][]any{},
	}, nil
}

func (s *Server) handleGatewayz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(gatewayzPath)
	q := GatewayzOptions{Name: r.URL.Query().Get("gw_name"), AccountName: r.URL.Query().Get("acc_name")}
	var ok bool
	if q.AccountSubscriptions, q.AccountSubscriptionsDetail, ok = qSubs(w, r); !ok {
		return
	}
	if q.Accounts, ok = qBool(w, r, "accs"); !ok {
		return
	}
	gz, _ := s.Gatewayz(&q)
	writeJSON(w, http.StatusOK, gz, true)
}

// LeafzOptions are /leafz's query parameters and LEAFZ's request body.
type LeafzOptions struct {
	Subscriptions bool   `json:"subscriptions"`
	Account       string `json:"account"`
}

// Leafz gathers /leafz and LEAFZ (no leaf nodes yet).
func (s *Server) Leafz(*LeafzOptions) (*Leafz, error) {
	return &Leafz{ID: s.id, Now: time.Now().UTC(), Leafs: []any{}}, nil
}

func (s *Server) handleLeafz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(leafzPath)
	q := LeafzOptions{Account: r.URL.Query().Get("acc")}
	var ok bool
	if q.Subscriptions, _, ok = qSubs(w, r); !ok {
		return
	}
	lz, _ := s.Leafz(&q)
	writeJSON(w, http.StatusOK, lz, true)
}

// AccountzOptions are /accountz's query parameters and ACCOUNTZ's request body.
type AccountzOptions struct {
	Account string `json:"account"`
}

// Accountz gathers /accountz and ACCOUNTZ: the account names, or one account's detail.
func (s *Server) Accountz(q *AccountzOptions) (*Accountz, error) {
	az := &Accountz{ID: s.id, Now: time.Now().UTC(), SystemAccount: s.sysAccountName()}
	if q == nil || q.Account == "" {
		az.Accounts = s.accounts().Accounts()
		return az, nil
	}
	ai, err := s.accountInfo(q.Account)
	if err != nil {
		return nil, err
	}
	az.Account = ai
	return az, nil
}

// accountInfo is one account's detail (ACCOUNTZ with an account, $SYS.REQ.ACCOUNT.<acc>.INFO).
func (s *Server) accountInfo(name string) (*AccountInfo, error) {
	ai, ok := s.accounts().AccountInfo(name)
	if !ok {
		return nil, fmt.Errorf("Account %s does not exist", name)
	}
	if j := s.JetStream(); j != nil {
		ai.JetStream = j.Enabled(name)
	}
	return ai, nil
}

func (s *Server) handleAccountz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(accountzPath)
	az, err := s.Accountz(&AccountzOptions{Account: r.URL.Query().Get("acc")})
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, az, true)
}

// AccountStatzOptions are /accstatz's query parameters and STATZ's request body.
type AccountStatzOptions struct {
	Accounts      []string `json:"accounts"`
	IncludeUnused bool     `json:"include_unused"`
}

// AccountStatz gathers /accstatz and STATZ: the named accounts (every account when none is
// named) that have local connections, or all of them with IncludeUnused.
func (s *Server) AccountStatz(q *AccountStatzOptions) (*AccountStatz, error) {
	if q == nil {
		q = &AccountStatzOptions{}
	}
	src := s.accounts()
	as := &AccountStatz{ID: s.id, Now: time.Now().UTC(), Accounts: []*AccountStat{}}
	names := q.Accounts
	if len(names) == 0 {
		names = src.Accounts()
	}
	for _, n := range names {
		st, ok := src.AccountStat(n)
		if ok && (q.IncludeUnused || st.Conns != 0 || st.LeafNodes != 0) {
			as.Accounts = append(as.Accounts, st)
		}
	}
	return as, nil
}

func (s *Server) handleAccstatz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(accstatzPath)
	unused, ok := qBool(w, r, "unused")
	if !ok {
		return
	}
	as, _ := s.AccountStatz(&AccountStatzOptions{IncludeUnused: unused})
	writeJSON(w, http.StatusOK, as, true)
}

// JSzOptions are /jsz's query parameters and JSZ's request body.
type JSzOptions struct {
	Account          string `json:"account,omitempty"`
	Accounts         bool   `json:"accounts,omitempty"`
	Streams          bool   `json:"streams,omitempty"`
	Consumer         bool   `json:"consumer,omitempty"`
	DirectConsumer   bool   `json:"direct_consumer,omitempty"`
	Config           bool   `json:"config,omitempty"`
	LeaderOnly       bool   `json:"leader_only,omitempty"`
	Offset           int    `json:"offset,omitempty"`
	Limit            int    `json:"limit,omitempty"`
	RaftGroups       bool   `json:"raft,omitempty"`
	StreamLeaderOnly bool   `json:"stream_leader_only,omitempty"`
}

// errSkip marks an answer a server must not send (nats-server's errSkipZreq): a filtered
// request, or one meant only for a leader.
var errSkip = errors.New("filtered response")

// HealthzOptions are /healthz's query parameters and HEALTHZ's request body.
type HealthzOptions struct {
	JSEnabled     bool   `json:"js-enabled,omitempty"` // deprecated: JSEnabledOnly
	JSEnabledOnly bool   `json:"js-enabled-only,omitempty"`
	JSServerOnly  bool   `json:"js-server-only,omitempty"`
	JSMetaOnly    bool   `json:"js-meta-only,omitempty"`
	Account       string `json:"account,omitempty"`
	Stream        string `json:"stream,omitempty"`
	Consumer      string `json:"consumer,omitempty"`
	Details       bool   `json:"details,omitempty"`
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(healthzPath)
	var q HealthzOptions
	for _, p := range []struct {
		name string
		dst  *bool
	}{{"js-enabled", &q.JSEnabled}, {"js-enabled-only", &q.JSEnabledOnly}, {"js-server-only", &q.JSServerOnly}, {"js-meta-only", &q.JSMetaOnly}, {"details", &q.Details}} {
		v, ok := qBool(w, r, p.name)
		if !ok {
			return
		}
		*p.dst = v
	}
	q.Account = r.URL.Query().Get("account")
	q.Stream = r.URL.Query().Get("stream")
	q.Consumer = r.URL.Query().Get("consumer")
	hs := s.healthz(&q)
	// The status code is the HTTP status, not part of the body.
	code := hs.StatusCode
	hs.StatusCode = 0
	writeJSON(w, code, hs, false)
}

func (s *Server) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// IpqueueszOptions are /ipqueuesz's query parameters and IPQUEUESZ's request body.
type IpqueueszOptions struct {
	All    bool   `json:"all"`
	Filter string `json:"filter"`
}

// Ipqueuesz lists the internal queues (natsd has none of nats-server's).
func (s *Server) Ipqueuesz(*IpqueueszOptions) *IpqueueszStatus {
	return &IpqueueszStatus{}
}

func (s *Server) handleIPQueuesz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(ipqueueszPath)
	all, ok := qBool(w, r, "all")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.Ipqueuesz(&IpqueueszOptions{All: all, Filter: r.URL.Query().Get("queues")}), true)
}

// RaftzOptions are /raftz's query parameters and RAFTZ's request body.
type RaftzOptions struct {
	AccountFilter string `json:"account"`
	GroupFilter   string `json:"group"`
}

// Raftz lists the Raft groups of an account (the system account by default): none yet, so
// an empty map while a system account exists and nil without one.
func (s *Server) Raftz(q *RaftzOptions) *RaftzStatus {
	if (q == nil || q.AccountFilter == "") && s.sysAccountName() == "" {
		return nil
	}
	return &RaftzStatus{}
}

// handleRaftz answers as nats-server does on a server without Raft groups.
func (s *Server) handleRaftz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(raftzPath)
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte("No Raft nodes registered"))
}

func (s *Server) handleStacksz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(stackszPath)
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(buf)
}

// expvarz is what nats-server publishes of Go's expvar: memory statistics and command line.
func (s *Server) expvarz() *ExpvarzStatus {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mb, _ := json.Marshal(&ms)
	cb, _ := json.Marshal(os.Args)
	return &ExpvarzStatus{Memstats: mb, Cmdline: cb}
}

// handleExpvarz is Go's expvar output limited to what nats-server publishes.
func (s *Server) handleExpvarz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(expvarzPath)
	ev := s.expvarz()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	fmt.Fprintf(w, "{\n\"cmdline\": %s,\n\"memstats\": %s\n}\n", ev.Cmdline, ev.Memstats)
}

// ---- process figures (mem, cpu) from /proc

type cpuSampler struct {
	at   time.Time
	cpu  time.Duration
	last float64
}

// sample returns the CPU use (percent of one core since the previous sample at least a
// second ago) and the resident set size.
func (c *cpuSampler) sample(now time.Time) (pct float64, rss int64) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0
	}
	// Fields after the parenthesised command name.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return 0, 0
	}
	const hz = 100 // USER_HZ on Linux
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	pages, _ := strconv.ParseInt(f[21], 10, 64)
	rss = pages * int64(os.Getpagesize())
	cpu := time.Duration(ut+st) * time.Second / hz
	if c.at.IsZero() {
		c.at, c.cpu = now, cpu
		return c.last, rss
	}
	if d := now.Sub(c.at); d >= time.Second {
		c.last = math.Round(float64(cpu-c.cpu)/float64(d)*10000) / 100
		c.at, c.cpu = now, cpu
	}
	return c.last, rss
}

// OwnVersion is natsd's own version line (`natsd -v` prints it after nats-server's):
// "natsd: v0.1.0", with the commit when the build was stamped ("natsd: v0.1.0 (1a2b3c4)").
func OwnVersion() string {
	if Commit == "" {
		return "natsd: v" + Version
	}
	return "natsd: v" + Version + " (" + Commit + ")"
}

// buildIdentity is natsd's version and, when stamped, the commit it was built from
// ("natsd-v0.1.0+1a2b3c4"): /varz's git_commit, where release binaries report their build.
func buildIdentity() string {
	if Commit == "" {
		return "natsd-v" + Version
	}
	return "natsd-v" + Version + "+" + Commit
}
