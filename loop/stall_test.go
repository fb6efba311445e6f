package loop

import (
	"bytes"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestOwnRepliesStall: a client that pipelines PINGs and never reads its PONGs is held back
// as a fast producer is once its replies are past three quarters of max_pending, and with
// no_fast_producer_stall it is not; either way it ends as a slow consumer.
func TestOwnRepliesStall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noStall bool
	}{{"stall", false}, {"no_fast_producer_stall", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{
				Host: "127.0.0.1", Port: -1, Reactors: 1,
				MaxPayload: 1 << 20, MaxControlLine: 4096, MaxPending: 256 << 10,
				PingInterval: 2 * time.Minute, MaxPingsOut: 2, WriteDeadline: 10 * time.Second,
				NoFastProducerStall: tc.noStall,
				Info:                []byte(`{"server_id":"TEST","version":"2.15.2","proto":1,"max_payload":1048576}`),
			})
			if err := e.Start(); err != nil {
				t.Fatal(err)
			}
			defer e.Stop()
			// A small receive buffer, so that the PONGs stay on the server's side.
			d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) {
					_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
				})
			}}
			c, err := d.Dial("tcp", e.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte("CONNECT {\"verbose\":false}\r\n")); err != nil {
				t.Fatal(err)
			}
			pings := bytes.Repeat([]byte("PING\r\n"), 64<<10) // 384 KiB a write
			cut := make(chan struct{})
			go func() {
				defer close(cut)
				_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
				for {
					if _, err := c.Write(pings); err != nil {
						return // cut off as a slow consumer (or the deadline)
					}
				}
			}()
			select {
			case <-cut:
			case <-time.After(30 * time.Second):
				t.Fatal("a client that never reads its PONGs was not cut off in 30 s")
			}
			st := e.Stats()
			if st.SlowConsumers == 0 {
				t.Errorf("not counted as a slow consumer: %+v", st)
			}
			if tc.noStall && st.StalledClients != 0 {
				t.Errorf("stalled %d times with no_fast_producer_stall", st.StalledClients)
			}
			if !tc.noStall && st.StalledClients == 0 {
				t.Errorf("never stalled while its PONGs piled up past 3/4 of max_pending")
			}
		})
	}
}
