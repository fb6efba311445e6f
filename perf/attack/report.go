package attack

import (
	"fmt"
	"strings"
	"time"
)

// Table renders results as a Markdown table, one row per attack and server.
func Table(rs []Result) string {
	var b strings.Builder
	b.WriteString("\n| attack | server | peak RSS | RSS before → after | PING p50 unloaded → attacked | p99 unloaded → attacked | first slow consumer cut | attacker sent | cut off |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		name := r.Attack
		if r.TLS {
			name += " (TLS)"
		}
		cut := "-"
		if r.FirstCut > 0 {
			cut = r.FirstCut.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f MiB | %.0f → %.0f MiB | %v → %v | %v → %v | %s | %.0f MiB | %d× |\n",
			name, r.Target, mib(r.RSSPeak), mib(r.RSSStart), mib(r.RSSAfter),
			us(r.BaseP50), us(r.LoadP50), us(r.BaseP99), us(r.LoadP99), cut, mib(r.Sent), r.Cuts)
	}
	for _, r := range rs {
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "\n%s %s: problem: %s", r.Attack, r.Target, p)
		}
		if r.ProbeErr != "" {
			fmt.Fprintf(&b, "\n%s %s: probe: %s", r.Attack, r.Target, r.ProbeErr)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// Check applies the bounds natsd must stay within, each against nats-server's figure for the
// same attack in the same run or against natsd's own unloaded figure; it returns what failed.
//
//   - peak RSS at most PeakRatio × nats-server's (or nats-server's plus PeakSlack, for attacks
//     that cost either server little);
//   - the unrelated client's PING p50 under attack at most RTTRatio × its unloaded p50 (or
//     its unloaded p50 plus RTTSlack: a round trip on loopback is tens of microseconds, and a
//     2-core box shares them with the attacker);
//   - RSS once the attacker left within a quarter of the way back up from start to peak (plus
//     FallSlack);
//   - no problems (server panic, probe cut off).
func Check(rs []Result) []Finding {
	var bad []Finding
	add := func(k Kind, format string, args ...any) {
		bad = append(bad, Finding{Kind: k, Text: fmt.Sprintf(format, args...)})
	}
	ref := map[string]Result{}
	for _, r := range rs {
		if r.Target == "nats-server" {
			ref[key(r)] = r
		}
	}
	for _, r := range rs {
		for _, p := range r.Problems {
			add(Problem, "%s %s: %s", key(r), r.Target, p)
		}
		if r.ProbeErr != "" {
			add(Problem, "%s %s: unrelated client: %s", key(r), r.Target, r.ProbeErr)
		}
		if r.Target == "nats-server" {
			continue
		}
		if n, ok := ref[key(r)]; ok {
			limit := max(int64(PeakRatio*float64(n.RSSPeak)), n.RSSPeak+PeakSlack)
			if r.RSSPeak > limit {
				add(Memory, "%s %s: peak RSS %.0f MiB, over %.1f× nats-server's %.0f MiB",
					key(r), r.Target, mib(r.RSSPeak), PeakRatio, mib(n.RSSPeak))
			}
		}
		if r.BaseP50 > 0 && r.Probes > 0 {
			limit := max(time.Duration(RTTRatio*float64(r.BaseP50)), r.BaseP50+RTTSlack)
			if r.LoadP50 > limit {
				add(Latency, "%s %s: PING p50 %v under attack, over %.1f× its unloaded %v",
					key(r), r.Target, us(r.LoadP50), RTTRatio, us(r.BaseP50))
			}
		}
		if up := r.RSSPeak - r.RSSStart; up > 0 && r.RSSAfter-r.RSSStart > up/4+FallSlack {
			add(Memory, "%s %s: RSS %.0f MiB after the attack (start %.0f, peak %.0f): did not fall back",
				key(r), r.Target, mib(r.RSSAfter), mib(r.RSSStart), mib(r.RSSPeak))
		}
	}
	return bad
}

// Kind sorts Check's findings: memory and problems are asserted by the test suite, latency
// only by the soak (timing on a shared box is not something a unit test may depend on).
type Kind int

const (
	Memory Kind = iota
	Latency
	Problem
)

// Finding is one bound a result broke.
type Finding struct {
	Kind Kind
	Text string
}

// The bounds Check applies (the issue's: 2× nats-server's peak, 2× the unloaded round trip).
var (
	PeakRatio = 2.0
	PeakSlack = int64(16 << 20)
	RTTRatio  = 2.0
	RTTSlack  = 100 * time.Microsecond
	FallSlack = int64(16 << 20)
)

func key(r Result) string {
	if r.TLS {
		return r.Attack + "/tls"
	}
	return r.Attack
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func us(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
