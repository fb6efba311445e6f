package bench

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// probeReply marks the probe messages: the reply subject of the PUBs probeInterest sends.
const probeReply = "_PERF_PROBE"

// probeMissed, when set (by the tests), is called each time a probe has not arrived in time.
var probeMissed func()

// probeInterest makes sure the subscriber connection sub (on one server of a cluster) gets
// messages that pub (on another server) publishes on each of its subscriptions' subjects,
// before any measured message is sent. For every subject it publishes a probe (empty payload,
// reply subject _PERF_PROBE.<n>), waits for pub's server to have taken it (PING/PONG) and gives
// it 50 ms to arrive, again and again, until one arrives: the subscriber's interest has then
// reached pub's server. A final probe (reply _PERF_PROBE.end) follows the same path behind any
// earlier probe still in flight, and everything up to it is read off sub, so the measured run
// starts with no probe left to count.
//
// sub must not have a reader yet; it is read here until the final probe and then handed back
// to the caller with nothing pending.
func probeInterest(pub *pubConn, sub *rawConn, subs []string) error {
	subjects := map[string]bool{}
	for _, s := range subs {
		subj, _, _ := strings.Cut(s, " ") // "subject [queue]"
		if strings.ContainsAny(subj, "*>") {
			return fmt.Errorf("probe: cannot probe wildcard subscription %q", subj)
		}
		subjects[subj] = true
	}
	got := make(chan string, 64) // subject of each probe that arrived
	end := make(chan error, 1)
	go func() {
		r := sub.r
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				end <- fmt.Errorf("probe: subscriber read: %w", err)
				return
			}
			switch {
			case len(line) > 3 && (line[0] == 'M' || line[0] == 'H'):
				f := strings.Fields(trimCRLF(line)) // MSG subj sid [reply] size / HMSG subj sid [reply] hdr total
				if len(f) < 4 {
					end <- fmt.Errorf("probe: bad MSG line %q", trimCRLF(line))
					return
				}
				n, perr := strconv.Atoi(f[len(f)-1])
				if perr != nil {
					end <- fmt.Errorf("probe: bad MSG line %q", trimCRLF(line))
					return
				}
				if _, err := r.Discard(n + 2); err != nil {
					end <- fmt.Errorf("probe: subscriber read: %w", err)
					return
				}
				reply := ""
				if (f[0] == "MSG" && len(f) == 5) || (f[0] == "HMSG" && len(f) == 6) {
					reply = f[3]
				}
				if reply == probeReply+".end" {
					end <- nil
					return
				}
				select {
				case got <- f[1]:
				default:
				}
			case bytes.HasPrefix(line, []byte("PING")):
				if _, err := sub.c.Write([]byte("PONG\r\n")); err != nil {
					end <- fmt.Errorf("probe: subscriber write: %w", err)
					return
				}
			case bytes.HasPrefix(line, []byte("-ERR")):
				end <- fmt.Errorf("probe: subscriber: server: %s", trimCRLF(line))
				return
			}
		}
	}()
	fail := func(err error) error {
		sub.Close() // ends the reader goroutine
		<-end
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	n := 0
	for subj := range subjects {
		for arrived := false; !arrived; {
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("probe: no message on %q reached the subscriber's server within 20s (%d probes): interest did not propagate", subj, n))
			}
			n++
			if err := pub.write(fmt.Appendf(nil, "PUB %s %s.%d 0\r\n\r\n", subj, probeReply, n)); err != nil {
				return fail(fmt.Errorf("probe: publish: %w", err))
			}
			if err := pub.flush(5 * time.Second); err != nil {
				return fail(fmt.Errorf("probe: publisher flush: %w", err))
			}
			wait := time.After(50 * time.Millisecond)
		drain:
			for {
				select {
				case s := <-got:
					if s == subj {
						arrived = true
						break drain
					}
				case err := <-end:
					if err == nil {
						err = errors.New("probe: final probe before the first")
					}
					sub.Close()
					return err
				case <-wait:
					if probeMissed != nil {
						probeMissed()
					}
					break drain
				}
			}
		}
	}
	var last string
	for subj := range subjects {
		last = subj
	}
	if err := pub.write(fmt.Appendf(nil, "PUB %s %s.end 0\r\n\r\n", last, probeReply)); err != nil {
		return fail(fmt.Errorf("probe: publish: %w", err))
	}
	select {
	case err := <-end:
		if err != nil {
			sub.Close()
		}
		return err
	case <-time.After(10 * time.Second):
		return fail(errors.New("probe: final probe did not arrive within 10s"))
	}
}
