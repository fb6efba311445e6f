package loop

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// On gnet, route sockets are accepted by a goroutine of natsd's (or dialled) and registered
// with gnet's event loops like client sockets; the context they carry tells OnOpen what they
// are.

// routeSocket is the gnet context of a route socket until OnOpen replaces it.
type routeSocket struct {
	intent *RouteIntent // nil: accepted
}

// listenRoutes opens the cluster listener and accepts routes onto the reactors.
func (d *gnetDriver) listenRoutes(hostPort string) error {
	ln, err := net.Listen("tcp", hostPort)
	if err != nil {
		return err
	}
	d.routeLn = ln
	d.e.routeListening(ln.Addr().(*net.TCPAddr))
	go d.acceptRoutes(ln)
	return nil
}

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

// dialRoute connects to hostPort and registers the socket with a reactor as a route.
func (d *gnetDriver) dialRoute(hostPort string, ri *RouteIntent) error {
	c, err := net.DialTimeout("tcp", hostPort, routeDialTimeout)
	if err != nil {
		return err
	}
	if err := d.enroll(c, &routeSocket{intent: ri}); err != nil {
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
	var conn Conn = gcn
	if tl := d.e.routeTLS(gcn, r.ex, func() { _ = gcn.Wake() }, rs.intent); tl != nil {
		conn = tl
	}
	c, greeting, ok := d.e.openRoute(conn, r, rs.intent)
	if !ok {
		return greeting, gnet.Close
	}
	gcn.c = c
	if tl, ok := conn.(*tlsLayer); ok {
		gcn.tls = tl
		greeting = tl.start(c, greeting)
	}
	gc.SetContext(gcn)
	return greeting, gnet.None
}

// closeRoutes stops the route listener (gnet's Stop closes the connections).
func (d *gnetDriver) closeRoutes() {
	if d.routeLn != nil {
		_ = d.routeLn.Close()
	}
}
