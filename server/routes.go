package server

import (
	"crypto/tls"
	"errors"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/cluster"
	"github.com/natsd/natsd/loop"
)

// routeProto is the route protocol version nats-server 2.15 announces (message tracing).
const routeProto = 3

// routesState is the server's side of clustering: the manager that dials routes, and the
// client URLs of the other servers (INFO connect_urls).
type routesState struct {
	mgr     *cluster.Manager
	started bool // the refresher runs (startCluster)

	mu      sync.Mutex
	remote  []string // other servers' client URLs
	pending bool
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// checkCluster refuses what natsd's routes cannot honour yet, where ignoring it would
// weaken security or silently change behaviour; it warns where the difference is only speed.
func (s *Server) checkCluster(o *Options) error {
	co := &o.Cluster
	if !co.Enabled() {
		return nil
	}
	if o.JetStream {
		return errors.New("jetstream in a cluster is not supported yet: natsd cannot replicate streams; run JetStream on a server without a cluster block")
	}
	return nil
}

// clusterTLSInsecureWarning is nats-server's warning for a cluster tls {} block with
// insecure: true.
const clusterTLSInsecureWarning = "TLS certificate chain and hostname of solicited routes will not be verified. DO NOT USE IN PRODUCTION!"

// routeTLS is the loop's route TLS (nil without a cluster tls {} block): the block's
// tls.Config, which the config parser made verify both ways (the peer's certificate is
// required, and ca_file is also the roots for the routes this server dials), its handshake
// timeout and pinned certificates.
func routeTLS(co *cluster.Options) *loop.TLSConfig {
	if co.TLSConfig == nil {
		return nil
	}
	c := co.TLSConfig.Clone()
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return &loop.TLSConfig{Config: c, Timeout: co.TLSTimeout, PinnedCerts: co.TLSPinnedCerts}
}

// setRouteTLS copies the cluster block's TLS settings into the loop's route settings.
func setRouteTLS(c *loop.RouteConfig, co *cluster.Options) {
	c.TLS = routeTLS(co)
	c.TLSMap, c.TLSCheckKnownURLs = co.TLSMap, co.TLSCheckKnownURLs
	c.Routes = co.Routes
}

// routeConfig is the loop's view of the cluster options (nil: no cluster).
func (s *Server) routeConfig(o *Options) *loop.RouteConfig {
	co := &o.Cluster
	if !co.Enabled() {
		return nil
	}
	name, dynamic := s.ClusterName(), co.Name == ""
	ping := co.PingInterval
	if ping <= 0 {
		ping = o.PingInterval
	}
	if ping > cluster.MaxPingInterval {
		ping = cluster.MaxPingInterval
	}
	var pinned []string
	if co.PoolSize > 0 {
		pinned = co.PinnedAccounts
	}
	var imp, exp *auth.SubjectPermission
	if p := co.Permissions; p != nil {
		imp, exp = p.Import, p.Export
	}
	rc := &loop.RouteConfig{
		Import: imp, Export: exp,
		Host: co.Host, Port: co.Port,
		ClusterName: name, Dynamic: dynamic,
		ServerID: s.id, ServerName: o.ServerName,
		Version: ServerVersion, Proto: routeProto, GoVersion: runtime.Version(),
		Advertise: co.Advertise, NoAdvertise: co.NoAdvertise,
		Username: co.Username, Password: co.Password, AuthTimeout: co.AuthTimeout,
		PingInterval: ping, MaxPingsOut: co.MaxPingsOut,
		PoolSize: max(co.PoolSize, 0), Pinned: pinned,
		Compression: co.Compression.Mode, RTTThresholds: co.Compression.RTTThresholds,
	}
	setRouteTLS(rc, co)
	return rc
}

// prepareCluster makes the route manager, which hears route events from the first route on.
func (s *Server) prepareCluster(eng *loop.Engine, rc *loop.RouteConfig) {
	if rc == nil {
		return
	}
	co := &s.opts.Cluster
	cs := &routesState{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	cs.mgr = cluster.New(eng, cluster.Config{
		Routes:   co.Routes,
		Username: co.Username, Password: co.Password,
		ConnectRetries: co.ConnectRetries, ConnectBackoff: co.ConnectBackoff,
		NoAdvertise: co.NoAdvertise,
		ClientURLs:  func(urls []string) { s.remoteClientURLs(cs, urls) },
		Pinned:      rc.Pinned,
	}, s.log)
	rc.Events = cs.mgr
	s.rts.Store(cs)
}

// startCluster logs the cluster, learns our client URLs and starts dialling routes; the
// engine is running and listening for routes.
func (s *Server) startCluster() {
	o := &s.opts
	cfg := s.eng.RouteConfig()
	cs := s.rts.Load()
	if cfg == nil || cs == nil {
		return
	}
	co := &o.Cluster
	s.log.Noticef("Cluster name is %s", cfg.ClusterName)
	if cfg.Dynamic {
		s.log.Warnf("Cluster name was dynamically generated, consider setting one")
	}
	addr := s.eng.RouteAddr()
	s.log.Noticef("Listening for route connections on %s", net.JoinHostPort(co.Host, strconv.Itoa(addr.Port)))
	if co.TLSConfig != nil && co.TLSConfig.InsecureSkipVerify {
		s.log.Warnf(clusterTLSInsecureWarning)
	}
	own := s.ownClientURLs()
	s.eng.SetRouteConfig(func(c *loop.RouteConfig) { c.ConnectURLs = own })
	cs.started = true
	go s.infoRefresher(cs)
	s.SetClusterReloadHook(func(old, new *cluster.Options, ch cluster.Change) {
		s.eng.SetRouteConfig(func(c *loop.RouteConfig) {
			c.Username, c.Password, c.AuthTimeout = new.Username, new.Password, new.AuthTimeout
			c.Advertise, c.NoAdvertise = new.Advertise, new.NoAdvertise
			c.Import, c.Export = nil, nil
			if p := new.Permissions; p != nil {
				c.Import, c.Export = p.Import, p.Export
			}
			// Routes that connect from now on use the new certificates and settings (TLS
			// switched on or off included); established ones keep their sessions.
			setRouteTLS(c, new)
		})
		if ch.CompressionChanged {
			s.eng.SetRouteCompression(new.Compression.Mode, new.Compression.RTTThresholds)
		}
		if len(ch.RoutesAdded) > 0 || len(ch.RoutesRemoved) > 0 {
			cs.mgr.SetRoutes(new.Routes)
			for _, u := range ch.RoutesRemoved {
				s.eng.CloseRoutesTo(u.Host)
				s.log.Noticef("Removed route %v", u.Redacted())
			}
			s.log.Noticef("Reloaded: cluster routes")
		}
	})
	// Clients' INFO now names the cluster and this server's URL.
	s.eng.RefreshInfo()
	cs.mgr.Start()
}

func (s *Server) stopCluster() {
	cs := s.rts.Load()
	if cs == nil {
		return
	}
	cs.mgr.Stop()
	select {
	case <-cs.stop:
	default:
		close(cs.stop)
		if cs.started {
			<-cs.done
		}
	}
}

// remoteClientURLs is told (on a reactor) the other servers' client URLs; clients hear of
// them through an async INFO sent from another goroutine.
func (s *Server) remoteClientURLs(cs *routesState, urls []string) {
	cs.mu.Lock()
	cs.remote = urls
	cs.mu.Unlock()
	select {
	case cs.kick <- struct{}{}:
	default:
	}
}

func (s *Server) infoRefresher(cs *routesState) {
	defer close(cs.done)
	for {
		select {
		case <-cs.stop:
			return
		case <-cs.kick:
			s.eng.RefreshInfo()
		}
	}
}

// clientConnectURLs is INFO's connect_urls: ours, then the other servers'.
func (s *Server) clientConnectURLs() []string {
	cs := s.rts.Load()
	if cs == nil {
		return nil
	}
	urls := s.ownClientURLs()
	cs.mu.Lock()
	for _, u := range cs.remote {
		dup := false
		for _, x := range urls {
			if x == u {
				dup = true
				break
			}
		}
		if !dup {
			urls = append(urls, u)
		}
	}
	cs.mu.Unlock()
	return urls
}

// ownClientURLs are the host:port clients reach this server at: client_advertise, the
// bound host, or every non-loopback address when bound to all of them (as nats-server).
func (s *Server) ownClientURLs() []string {
	o := &s.opts
	port := 0
	if a := s.eng.Addr(); a != nil {
		port = a.Port
	}
	if o.ClientAdvertise != "" {
		if h, p, err := advertised(o.ClientAdvertise, port); err == nil {
			return []string{net.JoinHostPort(h, strconv.Itoa(p))}
		}
	}
	host := o.Host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		var out []string
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				ipn, ok := a.(*net.IPNet)
				if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
					continue
				}
				out = append(out, net.JoinHostPort(ipn.IP.String(), strconv.Itoa(port)))
			}
		}
		if len(out) > 0 {
			return out
		}
		host = "127.0.0.1"
	}
	return []string{net.JoinHostPort(host, strconv.Itoa(port))}
}

// routezRoutes fills /routez's route list.
func (s *Server) routezRoutes(subs, detail bool) []RouteInfo {
	routes := s.eng.Routes(subs || detail)
	out := make([]RouteInfo, 0, len(routes))
	now := time.Now()
	for _, r := range routes {
		ri := RouteInfo{
			RID: r.RID, RemoteID: r.RemoteID, RemoteName: r.RemoteName,
			DidSolicit: r.Solicited, IsConfigured: r.Configured,
			IP: r.IP, Port: r.Port, Start: r.Start.UTC(), LastActivity: r.Last.UTC(),
			Uptime: uptimeString(now.Sub(r.Start)), Idle: uptimeString(now.Sub(r.Last)),
			Pending: int(r.Pending), InMsgs: r.InMsgs, OutMsgs: r.OutMsgs,
			InBytes: r.InBytes, OutBytes: r.OutBytes, NumSubs: uint32(r.NumSubs),
			Compression: r.Compression, Account: r.Account,
		}
		if r.RTT > 0 {
			ri.RTT = r.RTT.String()
		}
		if subs && !detail {
			ri.Subs = make([]string, 0, len(r.Subs))
			for _, x := range r.Subs {
				ri.Subs = append(ri.Subs, x.Subject)
			}
		}
		if detail {
			ri.SubsDetail = make([]SubDetail, 0, len(r.Subs))
			for _, x := range r.Subs {
				ri.SubsDetail = append(ri.SubsDetail, SubDetail{Subject: x.Subject, Queue: x.Queue, Sid: x.Sid, Msgs: x.Msgs, Cid: x.CID})
			}
		}
		out = append(out, ri)
	}
	return out
}
