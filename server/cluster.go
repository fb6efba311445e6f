package server

// The server's side of the cluster block: the cluster options' defaults and start-up checks,
// the cluster name, the reload rules and the hook through which the route code (routes.go,
// loop/router.go) applies a reloaded cluster block.

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/nats-io/nuid"

	"github.com/natsd/natsd/cluster"
	"github.com/natsd/natsd/loop"
)

// ClusterReloadFunc applies a reloaded cluster block to the running routes. old and new are
// private copies of the options before and after the reload (defaulted and validated), ch is
// what changed between them (cluster.Diff). It runs after the new options are in place
// (getOpts returns them) and after the cluster name was updated.
type ClusterReloadFunc func(old, new *cluster.Options, ch cluster.Change)

// clusterState is the server's cluster bookkeeping (Server.cl).
type clusterState struct {
	mu sync.Mutex
	// name is the cluster's name: the configured one; else, with a cluster configured, one
	// made up at New as nats-server does (a peer's configured name replaces it once routes
	// exist); else "".
	name string
	// reload applies reloaded cluster options to the routes; the route code sets it
	// (SetClusterReloadHook) when routing starts. nil: no route listener runs.
	reload ClusterReloadFunc
}

// clusterSysAccount is the account nats-server pins a dedicated route for (its
// setBaselineOptions): system_account as written, else $SYS unless no_system_account.
func clusterSysAccount(o *Options) string {
	if o.SystemAccount != "" {
		return o.SystemAccount
	}
	if o.NoSystemAccount {
		return ""
	}
	return DefaultSystemAccount
}

// validateCluster is nats-server's validateCluster, and the clustered half of its
// validateJetStreamOptions, with their texts.
func validateCluster(o *Options) error {
	if err := o.Cluster.Validate(); err != nil {
		return err
	}
	if o.JetStream && o.Cluster.Enabled() {
		if o.ServerName == "" {
			return errors.New("jetstream cluster requires `server_name` to be set")
		}
		if o.Cluster.Name == "" {
			return errors.New("jetstream cluster requires `cluster.name` to be set")
		}
	}
	return nil
}

// initClusterName settles the cluster name at New.
func (s *Server) initClusterName() {
	c := &s.opts.Cluster
	switch {
	case c.Name != "":
		s.cl.name = c.Name
	case c.Enabled():
		s.cl.name = nuid.Next()
	}
}

// ClusterName is the name of the server's cluster ("" without one).
func (s *Server) ClusterName() string {
	if s.eng != nil {
		if rc := s.eng.RouteConfig(); rc != nil {
			// The routes may have adopted a peer's name.
			return rc.ClusterName
		}
	}
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	return s.cl.name
}

// setClusterName adopts a new cluster name (a reload, or a peer's configured name).
func (s *Server) setClusterName(name string) {
	s.cl.mu.Lock()
	changed := s.cl.name != name
	s.cl.name = name
	s.cl.mu.Unlock()
	if changed {
		s.log.Noticef("Cluster name updated to %s", name)
	}
}

// SetClusterReloadHook installs fn, which applies reloaded cluster options to the routes.
func (s *Server) SetClusterReloadHook(fn ClusterReloadFunc) {
	s.cl.mu.Lock()
	s.cl.reload = fn
	s.cl.mu.Unlock()
}

// startRouting logs the cluster and starts dialling the configured routes (the engine
// already listens for routes: routes.go).
func (s *Server) startRouting() {
	c := &s.opts.Cluster
	if !c.Enabled() {
		if len(c.Routes) > 0 {
			// nats-server dials nothing either, and says nothing.
			s.log.Warnf("Cluster routes are ignored: the cluster block has no port")
		}
		return
	}
	s.startCluster()
}

// clusterSame tells whether a reload leaves the cluster options as they are. A TLS config is
// always re-applied (its certificates may have been renewed on disk), as the client one is.
func clusterSame(a, b *cluster.Options) bool {
	if a.TLSConfig != nil || b.TLSConfig != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// clusterReloadRule is nats-server's validateClusterOpts and its check of newly pinned
// accounts: the listener cannot move, advertise must parse, and an account can only be
// pinned if the running server has it.
func clusterReloadRule(old, new *Options) error {
	oc, nc := &old.Cluster, &new.Cluster
	if oc.Host != nc.Host {
		return fmt.Errorf("config reload not supported for cluster host: old=%s, new=%s", oc.Host, nc.Host)
	}
	if oc.Port != nc.Port {
		return fmt.Errorf("config reload not supported for cluster port: old=%d, new=%d", oc.Port, nc.Port)
	}
	if nc.Advertise != "" {
		if _, _, err := advertised(nc.Advertise, 0); err != nil {
			return fmt.Errorf("invalid Cluster.Advertise value of %s, err=%v", nc.Advertise, err)
		}
	}
	for _, a := range cluster.Diff(oc, nc).AccountsAdded {
		// nats-server looks the account up among the running ones, before the reload's own
		// accounts are applied: an account added by the same reload cannot be pinned yet.
		if a != globalAccountName && old.Account(a) == nil && a != old.SystemAccountName() {
			return fmt.Errorf("unable to add account %q to the list of dedicated routes: account missing", a)
		}
	}
	return nil
}

// reloadCluster applies reloaded cluster options (the options themselves are already in
// place): the cluster name, then whatever the route code does with the rest.
func (s *Server) reloadCluster(old, new *cluster.Options) {
	ch := cluster.Diff(old, new)
	if ch.NameChanged && new.Name != s.ClusterName() {
		s.setClusterName(new.Name)
		if s.eng != nil {
			s.eng.SetRouteConfig(func(c *loop.RouteConfig) { c.ClusterName, c.Dynamic = new.Name, new.Name == "" })
		}
	}
	s.cl.mu.Lock()
	fn := s.cl.reload
	s.cl.mu.Unlock()
	if fn == nil {
		// No route listener runs (the cluster block has no port), and a reload cannot start
		// one: clusterReloadRule refuses a new cluster host or port, as nats-server does
		// ("config reload not supported for cluster host: old=, new=0.0.0.0"). The name is
		// applied above; the rest is kept for /varz and for the next start.
		s.log.Debugf("Reloaded: cluster (no route listener: only the name applies)")
		return
	}
	fn(old, new, ch)
}

// clusterVarz is /varz "cluster" as nats-server fills it: the name (dynamic ones included),
// and for an enabled cluster the listener, timeouts in seconds, TLS (routes verify whenever
// they use TLS), pool size, write deadline and policy, and the route URLs' host:port only
// (never their credentials).
func (s *Server) clusterVarz(o *Options) ClusterOptsVarz {
	c := &o.Cluster
	tlsReq := c.TLSConfig != nil
	v := ClusterOptsVarz{
		Name:            s.ClusterName(),
		Host:            c.Host,
		Port:            c.Port,
		AuthTimeout:     c.AuthTimeout.Seconds(),
		TLSTimeout:      c.TLSTimeout.Seconds(),
		TLSRequired:     tlsReq,
		TLSVerify:       tlsReq,
		PoolSize:        c.PoolSize,
		WriteDeadline:   c.WriteDeadline,
		WriteTimeout:    c.WriteTimeout,
		TLSCertNotAfter: tlsCertNotAfter(c.TLSConfig),
	}
	for _, u := range c.Routes {
		v.URLs = append(v.URLs, u.Host)
	}
	if s.eng != nil {
		if a := s.eng.RouteAddr(); a != nil {
			v.Port = a.Port
		}
	}
	return v
}
