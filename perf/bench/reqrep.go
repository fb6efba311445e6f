package bench

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// runReqRep measures request/reply round trips with real nats.go clients: one responder
// connection echoing the payload, cfg.Clients requester connections each issuing requests
// back to back. Every round trip goes into a log-linear histogram.
func runReqRep(cfg Config) (Result, error) {
	res := Result{Scenario: cfg.Scenario, Size: cfg.Size, Clients: cfg.Clients}
	opts := []nats.Option{nats.Name("natsbench"), nats.MaxReconnects(0), nats.Timeout(5 * time.Second)}
	var errMu sync.Mutex
	addErr := func(s string) {
		errMu.Lock()
		if len(res.Errors) < 20 {
			res.Errors = append(res.Errors, s)
		}
		errMu.Unlock()
	}
	errHandler := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { addErr("async: " + err.Error()) })
	disc := nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
		if err != nil {
			addErr("disconnected: " + err.Error())
		}
	})
	opts = append(opts, errHandler, disc)
	if ClientTLS != nil {
		opts = append(opts, nats.Secure(ClientTLS))
	}
	resp, err := nats.Connect(cfg.Server, opts...)
	if err != nil {
		return res, fmt.Errorf("responder: %w", err)
	}
	defer resp.Close()
	sub, err := resp.Subscribe("bench.rr", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		return res, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := resp.Flush(); err != nil {
		return res, err
	}
	var reqs []*nats.Conn
	defer func() {
		for _, c := range reqs {
			c.Close()
		}
	}()
	for i := 0; i < cfg.Clients; i++ {
		c, err := nats.Connect(cfg.Server, opts...)
		if err != nil {
			return res, fmt.Errorf("requester: %w", err)
		}
		reqs = append(reqs, c)
		// Warm up the response subscription (first Request sets it up).
		if _, err := c.Request("bench.rr", []byte("warm"), 5*time.Second); err != nil {
			return res, fmt.Errorf("warm-up request: %w", err)
		}
	}
	payload := bytes.Repeat([]byte("r"), cfg.Size)
	hists := make([]Hist, len(reqs))
	var done atomic.Int64
	perClient := 0
	if cfg.Msgs > 0 {
		perClient = (cfg.Msgs + len(reqs) - 1) / len(reqs)
	}
	cpu0, _ := procCPU(cfg.PID)
	t0 := time.Now()
	deadline := t0.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i, c := range reqs {
		wg.Add(1)
		go func(h *Hist, c *nats.Conn) {
			defer wg.Done()
			for n := 0; ; n++ {
				if perClient > 0 && n >= perClient {
					return
				}
				start := time.Now()
				if perClient == 0 && start.After(deadline) {
					return
				}
				if _, err := c.Request("bench.rr", payload, 5*time.Second); err != nil {
					addErr("request: " + err.Error())
					return
				}
				h.Record(uint64(time.Since(start).Nanoseconds()))
				done.Add(1)
			}
		}(&hists[i], c)
	}
	wg.Wait()
	el := time.Since(t0)
	cpu1, cpuErr := procCPU(cfg.PID)
	var all Hist
	for i := range hists {
		all.Merge(&hists[i])
	}
	res.Published = done.Load()
	res.Delivered = 2 * res.Published // request to the responder, reply to the requester
	res.Seconds = el.Seconds()
	res.Rate = float64(res.Published) / res.Seconds
	res.MBps = res.Rate * float64(cfg.Size) / 1e6
	res.P50us = float64(all.Quantile(0.50)) / 1e3
	res.P99us = float64(all.Quantile(0.99)) / 1e3
	res.P999us = float64(all.Quantile(0.999)) / 1e3
	if cfg.PID > 0 && cpuErr == nil && res.Delivered > 0 {
		res.ServerCPU = (cpu1 - cpu0).Seconds()
		res.CPUPerMsg = res.ServerCPU * 1e9 / float64(res.Delivered)
	}
	return res, nil
}

// runIdle opens cfg.Clients connections (CONNECT + PING/PONG each), lets the server settle and
// reports the growth of its RSS per connection.
func runIdle(cfg Config, addr string) (Result, error) {
	res := Result{Scenario: cfg.Scenario, Clients: cfg.Clients}
	rss0, rssErr := int64(0), fmt.Errorf("no pid")
	if cfg.PID > 0 {
		rss0, rssErr = ProcRSS(cfg.PID)
	}
	conns := make([]*rawConn, cfg.Clients)
	var mu sync.Mutex
	var firstErr error
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(conns) {
					return
				}
				rc, err := dialRaw(addr, 512)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("connection %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
				conns[i] = rc
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(t0).Seconds()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if firstErr != nil {
		res.Errors = append(res.Errors, firstErr.Error())
	}
	n := 0
	for _, c := range conns {
		if c != nil {
			n++
		}
	}
	res.Published = int64(n)
	res.Rate = float64(n) / res.Seconds // connections/s
	time.Sleep(500 * time.Millisecond)
	if rssErr == nil && n > 0 {
		if rss1, err := ProcRSS(cfg.PID); err == nil {
			res.RSSPerConn = float64(rss1-rss0) / 1024 / float64(n)
		}
	}
	return res, nil
}
