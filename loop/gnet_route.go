package loop

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Route sockets, accepted on the cluster listener or dialled by the cluster layer, are handed
// to gnet's event loops like client sockets; the context they carry tells OnOpen what they
// are.

// routeSocket is the gnet context of a route socket until OnOpen replaces it.
type routeSocket struct {
	intent *RouteIntent // nil: accepted
}

// listenRoutes opens the cluster listener and starts accepting routes on the reactors.
func (e *Engine) listenRoutes(cfg RouteConfig) error {
	d, ok := e.drv.(*gnetDriver)
	if !ok {
		return errors.New("cluster routes run on the gnet engine only")
	}
	port := cfg.Port
	if port < 0 {
		port = 0
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	e.rt.ln = ln
	e.rt.addr = ln.Addr().(*net.TCPAddr)
	e.rt.cfg.Store(&cfg)
	go d.acceptRoutes(ln)
	return nil
}

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

func (d *gnetDriver) acceptRoutes(ln net.Listener) {
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || d.e.stopping.Load() {
				return
			}
			if pause == 0 {
				pause = 5 * time.Millisecond
			} else if pause *= 2; pause > time.Second {
				pause = time.Second
			}
			if d.e.cfg.Log != nil {
				d.e.cfg.Log.Errorf("Temporary Route Accept Error(%v), sleeping %v", err, pause)
			}
			time.Sleep(pause)
			continue
		}
		pause = 0
		if err := d.enroll(c, &routeSocket{}); err != nil {
			c.Close()
		}
	}
}

// enroll hands a socket to a reactor; OnOpen finds ctx as its context.
func (d *gnetDriver) enroll(c net.Conn, ctx any) error {
	gctx := gnet.NewContext(gnet.NewNetConnContext(context.Background(), c), ctx)
	ch, err := d.register(gctx)
	if err != nil {
		return err
	}
	go func() {
		if res, ok := <-ch; ok && res.Err != nil && d.e.cfg.Log != nil && !d.e.stopping.Load() {
			d.e.cfg.Log.Errorf("Error registering route connection: %v", res.Err)
		}
	}()
	return nil
}

// routeDialTimeout is nats-server's DEFAULT_ROUTE_DIAL.
const routeDialTimeout = time.Second

// DialRoute connects to the route URL u and runs the connection on a reactor. It blocks
// for the dial only; the handshake continues on the reactor (RouteEvents tell the outcome).
func (e *Engine) DialRoute(u *url.URL, explicit bool, gossipMode byte, account string) error {
	d, ok := e.drv.(*gnetDriver)
	if !ok || e.rt.cfg.Load() == nil {
		return errors.New("clustering is not enabled")
	}
	if e.stopping.Load() {
		return errors.New("server stopping")
	}
	c, err := net.DialTimeout("tcp", u.Host, routeDialTimeout)
	if err != nil {
		return err
	}
	if err := d.enroll(c, &routeSocket{intent: &RouteIntent{URL: u, Explicit: explicit, GossipMode: gossipMode, Account: account}}); err != nil {
		c.Close()
		return err
	}
	return nil
}

// openRouteSocket runs OnOpen for a route socket.
func (d *gnetDriver) openRouteSocket(gc gnet.Conn, rs *routeSocket) ([]byte, gnet.Action) {
	el := gc.EventLoop()
	r := d.e.reactorFor(el, gnetLoop{el})
	if r.kick == nil {
		d.startKicker(r, el)
	}
	d.discoverEpoll(r, gc)
	gcn := &gnetConn{Conn: gc, epfd: r.epfd}
	c, greeting, ok := d.e.openRoute(gcn, r, rs.intent)
	if !ok {
		return greeting, gnet.Close
	}
	gcn.c = c
	gc.SetContext(gcn)
	return greeting, gnet.None
}

// closeRoutes stops the route listener (the reactors close the connections).
func (e *Engine) closeRoutes() {
	if e.rt.ln != nil {
		_ = e.rt.ln.Close()
	}
}
