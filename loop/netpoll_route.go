package loop

import (
	"context"
	"errors"
	"net"

	"github.com/cloudwego/netpoll"
)

// On netpoll, routes run on the same virtual reactors, pump and write path as clients. The
// cluster listener is a second netpoll EventLoop whose connections are set up as routes;
// dialled routes are netpoll connections too (DialConnection), set up the same way, with
// the pump installed as their OnRequest once open is queued on their reactor.

// listenRoutes opens the cluster listener and accepts routes onto the reactors.
func (d *netpollDriver) listenRoutes(hostPort string) error {
	ln, err := netpoll.CreateListener("tcp", hostPort)
	if err != nil {
		return err
	}
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		ln.Close()
		return errors.New("netpoll: unexpected listener address")
	}
	evl, err := netpoll.NewEventLoop(d.onRequest,
		netpoll.WithOnPrepare(func(conn netpoll.Connection) context.Context {
			return d.newConn(conn, true, nil).ctx
		}),
		netpoll.WithOnConnect(d.onConnect),
	)
	if err != nil {
		ln.Close()
		return err
	}
	d.e.routeListening(addr)
	d.routeEvl = evl
	d.routeDone = make(chan struct{})
	go func() {
		_ = evl.Serve(ln)
		close(d.routeDone)
	}()
	return nil
}

// dialRoute connects to hostPort and runs the connection on a reactor as a route.
func (d *netpollDriver) dialRoute(hostPort string, ri *RouteIntent) error {
	nc, err := netpoll.DialConnection("tcp", hostPort, routeDialTimeout)
	if err != nil {
		return err
	}
	// The socket is registered for reads already: what the remote sends (its INFO) waits in
	// netpoll's buffer until the pump is installed.
	n := d.newConn(nc, true, ri)
	// stop closes what it finds in conns once stopping is set: either it finds n, or n
	// sees stopping here.
	if d.e.stopping.Load() {
		_ = nc.Close()
		return errors.New("server stopping")
	}
	// open is queued before any traffic task the pump queues.
	if err := n.vr.Execute(n.open); err != nil {
		_ = nc.Close()
		return err
	}
	// SetOnRequest runs the pump at once if bytes came in meanwhile.
	_ = nc.SetOnRequest(func(context.Context, netpoll.Connection) error { return n.pump() })
	if !nc.IsActive() {
		// netpoll leaves a connection without handlers for its owner to close: a hang-up
		// before SetOnRequest ran no close callbacks. Closing now runs them (once).
		_ = nc.Close()
	}
	return nil
}

// closeRoutes stops the route listener and closes the idle route connections it accepted;
// stop closes the rest.
func (d *netpollDriver) closeRoutes() {
	if d.routeEvl == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no waiting for busy connections: stop closes them
	shutdownEventLoop(ctx, d.routeEvl, d.routeDone)
}
