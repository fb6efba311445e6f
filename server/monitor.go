package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

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
	cpu  cpuSampler
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
		GitCommit:      "natsd-v" + Version,
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
		TLSTimeout:     2,
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
		ConfigLoadTime:   s.start.UTC(),

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
	if s.mon != nil {
		s.mon.mu.Lock()
		v.HTTPReqStats = make(map[string]uint64, len(s.mon.reqs))
		for k, n := range s.mon.reqs {
			v.HTTPReqStats[k] = n
		}
		v.CPU, v.Mem = s.mon.cpu.sample(now)
		s.mon.mu.Unlock()
	} else {
		var c cpuSampler
		v.CPU, v.Mem = c.sample(now)
		v.HTTPReqStats = map[string]uint64{}
	}
	return v
}

func (s *Server) handleVarz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(varzPath)
	writeJSON(w, http.StatusOK, s.Varz(), true)
}

// ---- /connz

// ConnzOptions are /connz's query parameters.
type ConnzOptions struct {
	Sort                string
	Username            bool
	Subscriptions       bool
	SubscriptionsDetail bool
	Offset, Limit       int
	CID                 uint64
	State               string // "open" (default), "closed", "all"
	User, Account       string
	MQTTClient          string
}

var connzSorts = map[string]bool{
	"": true, "cid": true, "start": true, "subs": true, "pending": true, "msgs_to": true,
	"msgs_from": true, "bytes_to": true, "bytes_from": true, "last": true, "idle": true,
	"uptime": true, "stop": true, "reason": true, "rtt": true,
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

// Connz gathers /connz.
func (s *Server) Connz(q *ConnzOptions) (*Connz, error) {
	if !connzSorts[q.Sort] {
		return nil, fmt.Errorf("invalid sorting option: %s", q.Sort)
	}
	state := q.State
	if state == "" {
		state = "open"
	}
	if q.Sort == "stop" && state != "closed" {
		return nil, fmt.Errorf("sort by stop only valid on closed connections")
	}
	if q.Sort == "reason" && state != "closed" {
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
	now := time.Now()
	cz := &Connz{ID: s.id, Now: now.UTC(), Offset: offset, Limit: limit}

	// natsd has only the global account and no users yet: filters on either match all or none.
	none := (q.Account != "" && q.Account != globalAccountName) || q.User != "" || q.MQTTClient != ""
	var snaps []*loop.ConnSnapshot
	total := 0
	if state == "open" || state == "all" {
		open := s.eng.Conns(loop.ConnsQuery{CID: q.CID, Subs: q.Subscriptions || q.SubscriptionsDetail, ProbeRTT: true})
		snaps = append(snaps, open...)
		total += len(open)
	}
	if state == "closed" || state == "all" {
		closed := s.eng.ClosedConns()
		if q.CID == 0 {
			total += len(closed)
		}
		if q.CID == 0 || len(snaps) == 0 {
			for _, cs := range closed {
				if q.CID == 0 || cs.CID == q.CID {
					snaps = append(snaps, cs)
				}
			}
		}
	}
	if none {
		snaps, total = nil, 0
	}
	if q.CID > 0 {
		total = len(snaps)
	}
	cz.Total = total
	infos := make([]*ConnInfo, 0, len(snaps))
	for _, cs := range snaps {
		infos = append(infos, connInfo(cs, now, q.Subscriptions, q.SubscriptionsDetail))
	}
	sortConns(infos, q.Sort, now)
	lo := min(offset, len(infos))
	hi := lo + min(limit, len(infos)-lo)
	cz.Conns = infos[lo:hi]
	cz.NumConns = len(cz.Conns)
	return cz, nil
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
		q.State = "open"
	case "closed":
		q.State = "closed"
	case "any", "all":
		q.State = "all"
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

func (s *Server) sublistStats() *SublistStats {
	st := s.eng.SubStats()
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

func subDetails(list []loop.SubSnapshot) []SubDetail {
	sort.Slice(list, func(i, j int) bool {
		if list[i].CID != list[j].CID {
			return list[i].CID < list[j].CID
		}
		return list[i].Sid < list[j].Sid
	})
	out := make([]SubDetail, 0, len(list))
	for _, sd := range list {
		out = append(out, SubDetail{
			Account: globalAccountName, AccountTag: globalAccountName,
			Subject: sd.Subject, Queue: sd.Queue, Sid: sd.Sid, Msgs: sd.Msgs, Max: sd.Max, Cid: sd.CID,
		})
	}
	return out
}

func (s *Server) handleSubsz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(subszPath)
	subs, ok := qBool(w, r, "subs")
	if !ok {
		return
	}
	offset, ok := qInt(w, r, "offset")
	if !ok {
		return
	}
	limit, ok := qInt(w, r, "limit")
	if !ok {
		return
	}
	test := r.URL.Query().Get("test")
	if test != "" && !sublist.ValidLiteralSubject([]byte(test)) {
		badRequest(w, "invalid test subject, must be valid publish subject: "+test)
		return
	}
	acc := r.URL.Query().Get("acc")
	offset = max(offset, 0)
	if limit <= 0 {
		limit = defaultListSize
	}
	sz := &Subsz{ID: s.id, Now: time.Now().UTC(), SublistStats: &SublistStats{}, Offset: offset, Limit: limit}
	if acc == "" || acc == globalAccountName {
		sz.SublistStats = s.sublistStats()
		if subs {
			var list []loop.SubSnapshot
			if test != "" {
				list = s.eng.MatchSubs(nil, test)
			} else {
				list = s.eng.Subs()
			}
			d := subDetails(list)
			lo := min(offset, len(d))
			hi := lo + min(limit, len(d)-lo)
			sz.Subs = d[lo:hi]
			sz.Total = len(d)
		}
	}
	writeJSON(w, http.StatusOK, sz, true)
}

// ---- endpoints of parts natsd does not have yet: nats-server's empty answers

func (s *Server) handleRoutez(w http.ResponseWriter, r *http.Request) {
	s.mon.count(routezPath)
	if _, _, ok := qSubs(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, &Routez{ID: s.id, Name: s.getOpts().ServerName, Now: time.Now().UTC(), Routes: []any{}}, true)
}

func (s *Server) handleGatewayz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(gatewayzPath)
	if _, _, ok := qSubs(w, r); !ok {
		return
	}
	if _, ok := qBool(w, r, "accs"); !ok {
		return
	}
	writeJSON(w, http.StatusOK, &Gatewayz{
		ID: s.id, Now: time.Now().UTC(),
		OutboundGateways: map[string]any{}, InboundGateways: map[string][]any{},
	}, true)
}

func (s *Server) handleLeafz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(leafzPath)
	if _, _, ok := qSubs(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, &Leafz{ID: s.id, Now: time.Now().UTC(), Leafs: []any{}}, true)
}

func (s *Server) handleAccountz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(accountzPath)
	az := &Accountz{ID: s.id, Now: time.Now().UTC()}
	acc := r.URL.Query().Get("acc")
	switch acc {
	case "":
		az.Accounts = []string{globalAccountName}
	case globalAccountName:
		st := s.sublistStats()
		az.Account = &AccountInfo{
			AccountName: globalAccountName,
			LastUpdate:  s.start.UTC(),
			Complete:    true,
			ClientCnt:   int(s.eng.NumConns()),
			SubCnt:      st.NumSubs,
			NameTag:     globalAccountName,
			Sublist:     st,
		}
	default:
		badRequest(w, fmt.Sprintf("Account %s does not exist", acc))
		return
	}
	writeJSON(w, http.StatusOK, az, true)
}

func (s *Server) handleAccstatz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(accstatzPath)
	unused, ok := qBool(w, r, "unused")
	if !ok {
		return
	}
	as := &AccountStatz{ID: s.id, Now: time.Now().UTC(), Accounts: []*AccountStat{}}
	st := s.eng.Stats()
	if st.Connections > 0 || unused {
		as.Accounts = append(as.Accounts, &AccountStat{
			Account:       globalAccountName,
			Name:          globalAccountName,
			Conns:         int(st.Connections),
			TotalConns:    int(st.Connections),
			NumSubs:       uint32(st.Subscriptions),
			Sent:          DataStats{MsgBytes: MsgBytes{Msgs: int64(st.OutMsgs), Bytes: int64(st.OutBytes)}, Gateways: &MsgBytes{}, Routes: &MsgBytes{}, Leafs: &MsgBytes{}},
			Received:      DataStats{MsgBytes: MsgBytes{Msgs: int64(st.InMsgs), Bytes: int64(st.InBytes)}, Gateways: &MsgBytes{}, Routes: &MsgBytes{}, Leafs: &MsgBytes{}},
			SlowConsumers: int64(st.SlowConsumers),
		})
	}
	writeJSON(w, http.StatusOK, as, true)
}

func (s *Server) handleJsz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(jszPath)
	for _, p := range []string{"accounts", "streams", "consumers", "config", "leader-only", "raft", "stream-leader-only", "direct-consumers"} {
		if _, ok := qBool(w, r, p); !ok {
			return
		}
	}
	for _, p := range []string{"offset", "limit"} {
		if _, ok := qInt(w, r, p); !ok {
			return
		}
	}
	writeJSON(w, http.StatusOK, &JSInfo{ID: s.id, Now: time.Now().UTC(), Disabled: true}, true)
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(healthzPath)
	var details bool
	for _, p := range []string{"js-enabled", "js-enabled-only", "js-server-only", "js-meta-only", "details"} {
		v, ok := qBool(w, r, p)
		if !ok {
			return
		}
		if p == "details" {
			details = v
		}
	}
	q := r.URL.Query()
	hs := &HealthStatus{Status: "ok"}
	code := http.StatusOK
	fail := func(c int, msg string) {
		code = c
		if details {
			hs.Status = "error"
			hs.Errors = append(hs.Errors, HealthzError{Type: 1, Error: msg})
		} else {
			hs.Status, hs.Error = "error", msg
		}
	}
	switch {
	case q.Get("account") == "" && q.Get("stream") != "":
		fail(http.StatusBadRequest, `"account" must not be empty when checking stream health`)
	case q.Get("stream") == "" && q.Get("consumer") != "":
		fail(http.StatusBadRequest, `"stream" must not be empty when checking consumer health`)
	case !s.isRunning():
		code = http.StatusInternalServerError
		hs.Status, hs.Error = "error", "server not ready for connections"
	}
	// JetStream is not enabled, so every JetStream check passes as nats-server's does then.
	writeJSON(w, code, hs, false)
}

func (s *Server) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func (s *Server) handleIPQueuesz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(ipqueueszPath)
	if _, ok := qBool(w, r, "all"); !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{}, true)
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

// handleExpvarz is Go's expvar output limited to what nats-server publishes.
func (s *Server) handleExpvarz(w http.ResponseWriter, r *http.Request) {
	s.mon.count(expvarzPath)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	mb, _ := json.Marshal(&ms)
	cb, _ := json.Marshal(os.Args)
	fmt.Fprintf(w, "{\n\"cmdline\": %s,\n\"memstats\": %s\n}\n", cb, mb)
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
