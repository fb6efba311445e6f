package loop

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Route sockets, accepted on the cluster listener or dialled by the cluster layer, run on
// the reactors like client sockets; each driver tells them apart from clients when it opens
// them (openRoute instead of open). gnet_route.go and netpoll_route.go are the two drivers'
// halves.

// listenRoutes opens the cluster listener and starts accepting routes on the reactors.
func (e *Engine) listenRoutes(cfg RouteConfig) error {
	port := cfg.Port
	if port < 0 {
		port = 0
	}
	e.rt.cfg.Store(&cfg)
	if err := e.drv.listenRoutes(net.JoinHostPort(cfg.Host, strconv.Itoa(port))); err != nil {
		e.rt.cfg.Store(nil)
		return err
	}
	return nil
}

// routeListening records the route listener's bound address; drivers call it before their
// first accept.
func (e *Engine) routeListening(addr *net.TCPAddr) { e.rt.addr = addr }

// SetRouteConfig replaces the route settings new connections use (a reload, or the client
// URLs learnt after start).
func (e *Engine) SetRouteConfig(fn func(c *RouteConfig)) {
	e.rt.mu.Lock()
	defer e.rt.mu.Unlock()
	old := e.rt.cfg.Load()
	if old == nil {
		return
	}
	n := *old
	fn(&n)
	e.rt.cfg.Store(&n)
}

// RouteConfig is the route settings in force.
func (e *Engine) RouteConfig() *RouteConfig { return e.rt.cfg.Load() }

// DialRoute connects to the route URL u and runs the connection on a reactor. It blocks
// for the dial only; the handshake continues on the reactor (RouteEvents tell the outcome).
func (e *Engine) DialRoute(u *url.URL, explicit bool, gossipMode byte, account string) error {
	if e.drv == nil || e.rt.cfg.Load() == nil {
		return errors.New("clustering is not enabled")
	}
	if e.stopping.Load() {
		return errors.New("server stopping")
	}
	return e.drv.dialRoute(u.Host, &RouteIntent{URL: u, Explicit: explicit, GossipMode: gossipMode, Account: account})
}

// closeRoutes stops the route listener; the driver's stop closes the connections.
func (e *Engine) closeRoutes() {
	if e.drv != nil && e.rt.cfg.Load() != nil {
		e.drv.closeRoutes()
	}
}

// routeDialTimeout is nats-server's DEFAULT_ROUTE_DIAL.
const routeDialTimeout = time.Second
