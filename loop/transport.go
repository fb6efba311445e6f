package loop

import "net"

// Conn is a transport connection as the client state machine sees it. A driver (gnet, or a
// goroutine-fed path such as TLS) provides one per accepted socket; all methods but Close and
// Wake are called only on the connection's reactor.
type Conn interface {
	// Peek returns every buffered inbound byte (n <= 0) without consuming it; the slice is valid
	// until Discard.
	Peek(n int) ([]byte, error)
	// Discard consumes n > 0 bytes (n <= 0: everything).
	Discard(n int) (int, error)
	InboundBuffered() int
	// Writev sends or buffers bs; the caller may reuse bs once it returns.
	Writev(bs [][]byte) (int, error)
	// OutboundBuffered is what the transport still holds, unsent.
	OutboundBuffered() int
	// Close closes asynchronously, after sending what is buffered; safe from any goroutine.
	Close() error
	// Wake makes the driver run traffic processing for this connection again on its reactor;
	// safe from any goroutine.
	Wake() error
	// SetReading stops (false) or resumes (true) reading the socket. While stopped, what the
	// peer sends stays in the kernel, whose TCP window then pushes back on it; bytes already
	// buffered stay readable with Peek. Called on the reactor; resuming does not Wake.
	SetReading(on bool)
	RemoteAddr() net.Addr
}

// Executor runs tasks on one reactor's goroutine, in order; safe from any goroutine.
type Executor interface {
	Execute(task func()) error
}

// driver accepts connections and feeds them to the engine's reactors.
type driver interface {
	// start listens and returns once connections are accepted.
	start() (*net.TCPAddr, error)
	// stop closes the listener and every connection, then returns.
	stop()

	// listenRoutes opens the cluster listener on hostPort, reports its address with
	// Engine.routeListening and accepts routes (Engine.openRoute) on the reactors.
	listenRoutes(hostPort string) error
	// dialRoute connects to hostPort, blocking for the dial only, and runs the connection
	// on a reactor as the route ri describes.
	dialRoute(hostPort string, ri *RouteIntent) error
	// closeRoutes closes the cluster listener; stop closes the route connections with the
	// others.
	closeRoutes()
}
