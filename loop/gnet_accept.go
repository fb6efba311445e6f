package loop

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// gnet's own acceptor treats any accept error but EAGAIN/EINTR/ECONNABORTED as fatal and shuts
// the whole engine down, so running out of file descriptors (EMFILE) would drop every client.
// Unless SO_REUSEPORT listeners are asked for, natsd therefore accepts on a listener of its own
// and hands each socket to gnet's event loops (Engine.Register); gnet itself only listens on an
// unused loopback port. Accept errors are logged and retried with a growing pause.

// maxInflightEnroll bounds sockets handed to gnet and not yet opened on a loop: an accept storm
// then queues in the kernel's backlog instead of in goroutines.
const maxInflightEnroll = 64

// probed runs on a gnet loop when the probe connection opens (or a stray one does).
func (d *gnetDriver) probed() {
	d.readyOnce.Do(func() { close(d.ready) })
}

// waitLoops dials gnet's own listener and waits until a loop opens that connection.
func (d *gnetDriver) waitLoops() error {
	c, err := net.DialTimeout("tcp", d.probe.String(), 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	select {
	case <-d.ready:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("gnet event loops did not start")
	}
}

func (d *gnetDriver) acceptLoop(ln net.Listener) {
	inflight := make(chan (<-chan gnet.RegisteredResult), maxInflightEnroll)
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		for ch := range inflight {
			if res, ok := <-ch; ok && res.Err != nil && d.e.cfg.Log != nil && !d.e.stopping.Load() {
				d.e.cfg.Log.Errorf("Error registering client connection: %v", res.Err)
			}
		}
	}()
	defer func() {
		close(inflight)
		<-reaped
	}()
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
			if d.e.cfg.Log != nil && (pause == 5*time.Millisecond || pause == time.Second) {
				d.e.cfg.Log.Errorf("Temporary Client Accept Error(%v), sleeping %v", err, pause)
			}
			time.Sleep(pause)
			continue
		}
		pause = 0
		ch, err := d.register(gnet.NewNetConnContext(context.Background(), c))
		if err != nil {
			c.Close()
			if d.e.stopping.Load() {
				return
			}
			continue
		}
		inflight <- ch
	}
}
