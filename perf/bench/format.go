package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count: 16, 128B, 1KiB, 1k, 16KB, 256KiB, 1MiB (binary multiples).
func ParseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, suf := range []struct {
		s string
		m int
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"k", 1 << 10}, {"m", 1 << 20}, {"b", 1}} {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSuffix(t, suf.s), suf.m
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(t))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// SizeLabel prints a byte count the way the scenario names use it: 16B, 1KiB, 256KiB.
func SizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// CSVHeader and CSV give one line per result.
const CSVHeader = "scenario,size,clients,published,delivered,seconds,msgs_per_sec,mb_per_sec,server_cpu_sec,server_cpu_ns_per_msg,p50_us,p99_us,p999_us,rss_kib_per_conn,errors"

// CSV formats r as one CSV line matching CSVHeader.
func (r Result) CSV() string {
	return fmt.Sprintf("%s,%d,%d,%d,%d,%.4f,%.1f,%.2f,%.4f,%.2f,%.2f,%.2f,%.2f,%.2f,%q",
		r.Scenario, r.Size, r.Clients, r.Published, r.Delivered, r.Seconds, r.Rate, r.MBps,
		r.ServerCPU, r.CPUPerMsg, r.P50us, r.P99us, r.P999us, r.RSSPerConn, strings.Join(r.Errors, "; "))
}
