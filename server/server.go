// Package server owns natsd's lifecycle: options, start-up, signals, lame duck and shutdown.
// The per-message path lives in loop/; this package only wires it.
package server

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/natsd/natsd/js"
	"github.com/natsd/natsd/loop"
)

// info is the INFO fields common to every connection, in nats-server's order.
type info struct {
	ID         string `json:"server_id"`
	Name       string `json:"server_name"`
	Version    string `json:"version"`
	Proto      int    `json:"proto"`
	Go         string `json:"go"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Headers    bool   `json:"headers"`
	AuthReq    bool   `json:"auth_required,omitempty"`
	TLSReq     bool   `json:"tls_required,omitempty"`
	TLSVerify  bool   `json:"tls_verify,omitempty"`
	TLSAvail   bool   `json:"tls_available,omitempty"`
	MaxPayload int32  `json:"max_payload"`
	JetStream  bool   `json:"jetstream,omitempty"`
}

// apiLevel is the JetStream API level nats-server 2.15 advertises (it does so even with
// JetStream off, and clients read it).
const apiLevel = 5

// Server is one natsd instance.
type Server struct {
	opts  Options
	id    string
	xkey  string // x25519 public key, advertised as nats-server does
	log   *Logger
	eng   *loop.Engine
	start time.Time
	// loaded is when the configuration was last loaded (start, then each reload), unix nanos.
	loaded atomic.Int64
	mon    *monitor

	mu       sync.Mutex
	running  bool
	stopWait bool // a stop signal came while starting: stop once started
	shutdown chan struct{}
	sigDone  chan struct{}

	rl reloadState // config reload (reload.go)

	cl clusterState // cluster name and reload hook (cluster.go)

	procMu sync.Mutex
	proc   cpuSampler // process CPU and memory for /varz and STATSZ

	// Accounts and per-client actions for monitoring and $SYS: the routing core's, or
	// globalSource (today's single account) while it has none (SetAccountSource).
	accs accountSource
	ctl  clientControl

	sys atomic.Pointer[sysState]    // the $SYS layer while it runs (sys.go)
	rts atomic.Pointer[routesState] // routes' manager while clustered (routes.go)
	js  atomic.Pointer[js.JetStream]
}

// New validates opts and returns a server that is not yet listening.
func New(opts *Options) (*Server, error) {
	o := *opts
	if err := prepareOptions(&o); err != nil {
		return nil, err
	}
	if err := CheckUnsupported(&o); err != nil {
		return nil, err
	}
	kp, err := nkeys.CreateServer()
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	if o.ServerName == "" {
		o.ServerName = pub
	}
	xkp, err := nkeys.CreateCurveKeys()
	if err != nil {
		return nil, err
	}
	xpub, err := xkp.PublicKey()
	if err != nil {
		return nil, err
	}
	if o.Cluster.Enabled() {
		if err := clusterAdvertiseError(&o.Cluster); err != nil {
			return nil, err
		}
	}
	l, err := newLogger(&o)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, id: pub, xkey: xpub, log: l, shutdown: make(chan struct{})}
	s.initClusterName()
	return s, nil
}

// prepareOptions fills defaults and validates; New and Reload both run it.
func prepareOptions(o *Options) error {
	tlsDefaults(o)
	o.setDefaults()
	o.Cluster.SetDefaults(clusterSysAccount(o))
	if _, err := buildAuth(o); err != nil {
		return err
	}
	if int64(o.MaxPayload) > o.MaxPending {
		return fmt.Errorf("max_payload (%d) cannot be higher than max_pending (%d)", o.MaxPayload, o.MaxPending)
	}
	if err := validateCluster(o); err != nil {
		return err
	}
	if o.ClientAdvertise != "" {
		if _, _, err := advertised(o.ClientAdvertise, o.Port); err != nil {
			return fmt.Errorf("invalid ClientAdvertise value of %s, err=%v", o.ClientAdvertise, err)
		}
	}
	return nil
}

// advertised splits client_advertise into INFO's host and port; a missing, 0 or -1 port is
// the bound one.
func advertised(hostPort string, bound int) (string, int, error) {
	host, sport, err := net.SplitHostPort(hostPort)
	if ae, ok := err.(*net.AddrError); ok && strings.Contains(ae.Err, "missing port") {
		host, sport, err = net.SplitHostPort(net.JoinHostPort(hostPort, strconv.Itoa(bound)))
	}
	if err != nil {
		return "", -1, err
	}
	port, err := strconv.Atoi(strings.TrimSpace(sport))
	if err != nil {
		return "", -1, err
	}
	if port == 0 || port == -1 {
		port = bound
	}
	return strings.TrimSpace(host), port, nil
}

// ID is the server's public nkey.
func (s *Server) ID() string { return s.id }

// Logger is the server's logger.
func (s *Server) Logger() *Logger { return s.log }

// Start listens and returns once clients can connect.
func (s *Server) Start() error {
	o := &s.opts
	s.start = time.Now()
	s.loaded.Store(s.start.UnixNano())
	s.log.Noticef("Starting natsd")
	s.log.Noticef("  Version:  %s (nats-server compatible %s)", Version, ServerVersion)
	if Commit != "" {
		s.log.Noticef("  Git:      [%s]", Commit)
	}
	s.log.Debugf("  Go build: %s", runtime.Version()) // at debug level, as nats-server
	s.log.Noticef("  Name:     %s", o.ServerName)
	s.log.Noticef("  ID:       %s", s.id)
	if plaintextPasswords(o) {
		s.log.Warnf("Plaintext passwords detected, use nkeys or bcrypt")
	}
	if o.ConfigFile != "" {
		var digest string
		if o.ConfigDigest != "" {
			digest = "(" + o.ConfigDigest + ")"
		}
		s.log.Noticef("Using configuration file: %s %s", o.ConfigFile, digest)
	}

	cfg := loop.Config{
		Host:                o.Host,
		Port:                o.Port,
		Reactors:            o.Reactors,
		ReusePort:           o.ReusePort,
		ReplySpin:           o.ReplySpin,
		Engine:              o.Engine,
		MaxPayload:          int(o.MaxPayload),
		MaxControlLine:      int(o.MaxControlLine),
		MaxPending:          o.MaxPending,
		MaxConn:             o.MaxConn,
		MaxSubs:             o.MaxSubs,
		PingInterval:        o.PingInterval,
		MaxPingsOut:         o.MaxPingsOut,
		AuthTimeout:         o.AuthTimeout,
		WriteDeadline:       o.WriteDeadline,
		NoFastProducerStall: o.NoFastProducerStall,
		TLS:                 loopTLS(o),
		Auth:                s.authConfig(o),
		Log:                 s.log,
		Trace:               o.Trace,
		MaxTracedMsgLen:     o.MaxTracedMsgLen,
	}
	cfg.RequestInfo = s.requestInfo
	if err := s.checkCluster(o); err != nil {
		return err
	}
	cfg.Cluster = s.routeConfig(o)
	sys := o.SystemAccountName()
	if sys != "" {
		cfg.Events = connEvents{s}
	}
	// The INFO template needs the bound port, which a random port only reveals after listening;
	// the loop reads cfg.Info on each accept, so fill it through a pointer the loop shares.
	eng := loop.New(cfg)
	eng.SetInfo(s.infoJSON)
	s.prepareCluster(eng, cfg.Cluster)
	if err := eng.ConfigureAccounts(accountSpecs(o)); err != nil {
		return err
	}
	s.eng = eng
	// JetStream recovers its streams before the first client is accepted.
	if err := s.startJetStream(); err != nil {
		return err
	}
	// Signals are trapped before the pid file and the listener exist: whatever can learn the
	// pid or connect may signal at once, and an untrapped USR1, USR2 or HUP would kill us.
	if !o.NoSigs {
		s.handleSignals()
	}
	// As nats-server: the pid file exists before the first client is accepted, so whatever
	// waits for it (a supervisor, --signal) may act as soon as clients can connect.
	if o.PidFile != "" {
		if err := os.WriteFile(o.PidFile, []byte(strconv.Itoa(os.Getpid())), 0o660); err != nil {
			return fmt.Errorf("could not write pidfile: %v", err)
		}
	}
	if err := eng.Start(); err != nil {
		if o.PidFile != "" {
			_ = os.Remove(o.PidFile)
		}
		s.stopJetStream()
		return fmt.Errorf("error listening on port: %s:%d, %v", o.Host, o.Port, err)
	}
	s.setAccountSource(engineSource{s}, engineSource{s})
	if sys != "" {
		acc := eng.LookupAccount(sys)
		ic := eng.NewInternalClient(loop.KindSystem, acc, "")
		if err := s.startSys(&engineSys{e: eng, ic: ic, acc: acc}, sys); err != nil {
			eng.Stop()
			return err
		}
	}
	s.mu.Lock()
	s.running = true
	stopWait := s.stopWait
	s.mu.Unlock()
	if stopWait {
		defer func() { go s.Shutdown() }()
	}
	if err := s.startMonitoring(); err != nil {
		s.stopMonitoring()
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
		eng.Stop()
		return err
	}
	s.writePortsFile()
	s.log.Noticef("Listening for client connections on %s", net.JoinHostPort(o.Host, strconv.Itoa(eng.Addr().Port)))
	if o.TLSConfig != nil {
		// "TLS Handshake First" without a fallback delay always requires the handshake.
		firstOnly := o.TLSHandshakeFirst && o.TLSHandshakeFirstFallback == 0
		if o.AllowNonTLS && !firstOnly {
			s.log.Noticef("TLS available for client connections")
		} else {
			s.log.Noticef("TLS required for client connections")
		}
		if firstOnly {
			s.log.Warnf("Clients that are not using \"TLS Handshake First\" option will fail to connect")
		}
	}
	s.startRouting()
	s.log.Noticef("Server is ready")
	return nil
}

// infoJSON returns the INFO object up to max_payload and the fields that follow the
// per-connection ones.
func (s *Server) infoJSON(port int) (head, tail []byte) {
	o := &s.opts
	host := o.Host
	if o.ClientAdvertise != "" {
		if h, p, err := advertised(o.ClientAdvertise, port); err == nil {
			host, port = h, p
		}
	}
	head, _ = json.Marshal(info{
		ID:         s.id,
		Name:       o.ServerName,
		Version:    ServerVersion,
		Proto:      1,
		Go:         runtime.Version(),
		Host:       host,
		Port:       port,
		Headers:    true,
		AuthReq:    authRequired(o),
		MaxPayload: o.MaxPayload,
		JetStream:  o.JetStream,
	}.withTLS(o))
	// Fields nats-server puts after client_id/client_ip, spliced in by the loop.
	if s.eng != nil {
		if rc := s.eng.RouteConfig(); rc != nil {
			tail = fmt.Appendf(tail, `,"cluster":%q`, rc.ClusterName)
			if rc.Dynamic {
				tail = append(tail, `,"cluster_dynamic":true`...)
			}
		}
	}
	if o.JetStream && o.JetStreamDomain != "" {
		tail = fmt.Appendf(tail, `,"domain":%q`, o.JetStreamDomain)
	}
	if urls := s.clientConnectURLs(); len(urls) > 0 {
		b, _ := json.Marshal(urls)
		tail = fmt.Appendf(tail, `,"connect_urls":%s`, b)
	}
	tail = fmt.Appendf(tail, `,"api_lvl":%d,"xkey":%q`, apiLevel, s.xkey)
	return head, tail
}

// loadTime is when the configuration was last loaded or reloaded.
func (s *Server) loadTime() time.Time { return time.Unix(0, s.loaded.Load()) }

// Shutdown closes every connection and stops the listeners.
func (s *Server) Shutdown() {
	s.mu.Lock()
	if !s.running {
		s.stopWait = true
		s.mu.Unlock()
		return
	}
	s.running = false
	s.mu.Unlock()
	s.log.Noticef("Initiating Shutdown...")
	// $SYS first, as nats-server: its SHUTDOWN event leaves while the transport is up.
	s.stopSys()
	s.stopCluster()
	s.stopMonitoring()
	s.stopJetStream()
	s.eng.Stop()
	s.removePortsFile()
	if pf := s.getOpts().PidFile; pf != "" {
		_ = os.Remove(pf)
	}
	s.log.Noticef("Server Exiting..")
	s.log.close()
	close(s.shutdown)
}

// LameDuck stops accepting clients, closes the existing ones over lame_duck_duration, then
// shuts down.
func (s *Server) LameDuck() {
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if !running {
		return
	}
	s.log.Noticef("Entering lame duck mode, stop accepting new clients")
	s.sysLameDuck()
	s.eng.EnterLameDuck(s.opts.LameDuckDuration, s.opts.LameDuckGracePeriod)
	s.Shutdown()
}

// WaitForShutdown blocks until Shutdown has completed.
func (s *Server) WaitForShutdown() { <-s.shutdown }

// Addr is the bound client address.
func (s *Server) Addr() *net.TCPAddr { return s.eng.Addr() }

// ClientURL is nats://host:port of the bound client listener.
func (s *Server) ClientURL() string {
	a := s.Addr()
	host := s.opts.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(a.Port))
}

// NumClients is the number of connected clients.
func (s *Server) NumClients() int { return int(s.eng.NumConns()) }

// Stats are the message and connection counters.
func (s *Server) Stats() loop.Stats { return s.eng.Stats() }
