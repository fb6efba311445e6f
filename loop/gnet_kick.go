package loop

import (
	"context"
	"net"
	"os"
	"path/filepath"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// A connection that ends its turn with input left (client.yielded) must run again, but only
// after the reactor has served the other connections that are ready: a task queued with
// Wake would not do, since gnet runs tasks queued while it drains its task queue in that same
// drain, before it polls again. So each gnet reactor owns a socket pair whose one end is one
// of its connections (the kicker): a yield writes a byte to the other end, the loop's next
// poll reports the kicker readable together with every other ready socket, and the kicker's
// OnTraffic gives each yielded connection one more turn.
type gnetKicker struct {
	r   *reactor
	wfd int // the end natsd writes to
}

// seedKickers gives every loop its kicker before the first client arrives: made lazily, a
// kicker would need four descriptors at the moment the process has run out of them (an accept
// storm). The sockets are handed out round-robin like clients, one per loop; OnOpen adopts
// each on the loop it lands on (adopt) and drops any second one a loop receives.
func (d *gnetDriver) seedKickers() {
	for i := 0; i < d.e.cfg.Reactors; i++ {
		wfd, theirs, ok := d.kickerSocket()
		if !ok {
			return
		}
		k := &gnetKicker{wfd: wfd}
		ctx := gnet.NewContext(gnet.NewNetConnContext(context.Background(), theirs), k)
		res, err := d.register(ctx)
		if err != nil {
			theirs.Close()
			unix.Close(wfd)
			d.kickerFailed(err)
			return
		}
		if rr, ok := <-res; ok && rr.Err != nil {
			unix.Close(wfd)
			d.kickerFailed(rr.Err)
			return
		}
	}
}

// adopt makes a seeded kicker its loop's own; it reports false for a loop that has one.
func (d *gnetDriver) adopt(k *gnetKicker, gc gnet.Conn) bool {
	el := gc.EventLoop()
	r := d.e.reactorFor(el, gnetLoop{el})
	if r.kick != nil {
		unix.Close(k.wfd)
		return false
	}
	k.r = r
	r.kick = k.kick
	r.kickFd = gc.Fd()
	d.discoverEpoll(r, gc)
	d.mu.Lock()
	d.kickers = append(d.kickers, k)
	d.mu.Unlock()
	return true
}

// startKicker creates r's kicker and enrolls it on el; until gnet has registered it, kicks
// wait in the socket. gnet can only enroll a socket with a peer address, so the pair is made
// through a listener on a temporary path rather than with socketpair(2). Without a kicker the
// reactor falls back to Wake (gnet then gives a yielded connection its next turn in the same
// drain of its task queue, which is correct, only less fair).
func (d *gnetDriver) startKicker(r *reactor, el gnet.EventLoop) {
	wfd, theirs, ok := d.kickerSocket()
	if !ok {
		return
	}
	k := &gnetKicker{r: r, wfd: wfd}
	res, err := el.Enroll(gnet.NewContext(context.Background(), k), theirs)
	if err != nil {
		theirs.Close()
		unix.Close(wfd)
		d.kickerFailed(err)
		return
	}
	r.kick = k.kick
	d.mu.Lock()
	d.kickers = append(d.kickers, k)
	d.mu.Unlock()
	go func() {
		if rr, ok := <-res; ok && rr.Err != nil {
			d.kickerFailed(rr.Err)
			_ = r.ex.Execute(func() {
				r.kick = nil
				for _, c := range r.runq {
					c.queued = false
					_ = c.conn.Wake()
				}
				r.runq = r.runq[:0]
			})
		}
	}()
}

// kickerSocket makes a kicker's socket pair: the non-blocking descriptor kicks are written
// to, and the end gnet reads (and owns once registered). It logs a failure.
func (d *gnetDriver) kickerSocket() (wfd int, theirs *net.UnixConn, ok bool) {
	ours, theirs, err := kickerPair()
	if err != nil {
		d.kickerFailed(err)
		return -1, nil, false
	}
	wfd, err = dupNonblock(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		d.kickerFailed(err)
		return -1, nil, false
	}
	return wfd, theirs, true
}

func (d *gnetDriver) kickerFailed(err error) {
	if d.e.cfg.Log != nil {
		d.e.cfg.Log.Warnf("Cannot set up a reactor's kicker (%v): busy connections take turns less fairly", err)
	}
}

// kickerPair returns both ends of a connected Unix socket.
func kickerPair() (ours, theirs *net.UnixConn, err error) {
	dir, err := os.MkdirTemp("", "natsd-kick")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "k"), Net: "unix"})
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	theirs, err = net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	if err != nil {
		return nil, nil, err
	}
	ours, err = ln.AcceptUnix()
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return ours, theirs, nil
}

// dupNonblock returns a non-blocking duplicate of c's descriptor, written to with raw
// syscalls from the reactor.
func dupNonblock(c *net.UnixConn) (int, error) {
	f, err := c.File() // a blocking duplicate
	if err != nil {
		return -1, err
	}
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func (k *gnetKicker) kick() {
	// EAGAIN: the socket is full of earlier kicks, which will do.
	_, _ = unix.Write(k.wfd, []byte{1})
}

// onTraffic runs the reactor's yielded connections, one turn each.
func (k *gnetKicker) onTraffic(d *gnetDriver, gc gnet.Conn) {
	_, _ = gc.Discard(-1)
	r := k.r
	r.kickPending = false
	list := r.runq
	r.runq = r.runqSpare[:0]
	for i, c := range list {
		list[i] = nil
		c.queued = false
		if c.closed || c.closing {
			continue
		}
		if d.e.traffic(c) {
			_ = c.conn.Close()
			continue
		}
		if c.yielded {
			r.yield(c)
		}
	}
	r.runqSpare = list[:0]
}

func (k *gnetKicker) close() { unix.Close(k.wfd) }
