package cluster

import (
	"slices"
	"testing"
	"time"
)

func TestSetDefaults(t *testing.T) {
	// Not enabled: left as written.
	o := Options{Name: "c"}
	o.SetDefaults("$SYS")
	if o.Enabled() || o.Host != "" || o.PoolSize != 0 || o.Compression.Mode != "" {
		t.Fatalf("%+v", o)
	}
	// The caller's pinned list is never written through.
	pinned := make([]string, 1, 4)
	pinned[0] = "A"
	o = Options{Port: -1, PinnedAccounts: pinned}
	o.SetDefaults("$SYS")
	if !slices.Equal(o.PinnedAccounts, []string{"A", "$SYS"}) || pinned[:2][1] == "$SYS" {
		t.Fatalf("pinned %v (caller's %v)", o.PinnedAccounts, pinned[:2])
	}
	if o.Host != DefaultHost || o.PoolSize != DefaultPoolSize || o.Compression.Mode != CompressionAccept ||
		o.AuthTimeout != DefaultAuthTimeout || o.TLSTimeout != DefaultTLSTimeout {
		t.Fatalf("%+v", o)
	}
	// No pooling: no system account pinned; already pinned: not twice.
	o = Options{Port: 1, PoolSize: -1}
	o.SetDefaults("$SYS")
	if o.PinnedAccounts != nil {
		t.Fatalf("%v", o.PinnedAccounts)
	}
	o = Options{Port: 1, PinnedAccounts: []string{"$SYS"}}
	o.SetDefaults("$SYS")
	if len(o.PinnedAccounts) != 1 {
		t.Fatalf("%v", o.PinnedAccounts)
	}
}

func TestCompressionNormalize(t *testing.T) {
	ms := time.Millisecond
	for in, want := range map[string]string{
		"on": CompressionS2Fast, "Enabled": CompressionS2Fast, "true": CompressionS2Fast, "off": CompressionOff,
		"disabled": CompressionOff, "false": CompressionOff, "accept": CompressionAccept, "fast": CompressionS2Fast,
		"s2_better": CompressionS2Better, "best": CompressionS2Best, "auto": CompressionS2Auto,
		"not_supported": CompressionNotSupported,
	} {
		c := Compression{Mode: in}
		if err := c.Normalize(CompressionOn); err != nil || c.Mode != want {
			t.Errorf("%q: %q %v, want %q", in, c.Mode, err, want)
		}
	}
	// Negative as 0, trailing zeros dropped, zeros anywhere else kept (that level skipped).
	c := Compression{Mode: "s2_auto", RTTThresholds: []time.Duration{0, -5 * ms, 10 * ms, 0}}
	if err := c.Normalize(CompressionOn); err != nil || !slices.Equal(c.RTTThresholds, []time.Duration{0, 0, 10 * ms}) {
		t.Fatalf("%v %v", c.RTTThresholds, err)
	}
}

func TestRoutesFromStr(t *testing.T) {
	urls, err := RoutesFromStr("nats://a:1, nats://u:p@b:2 ")
	if err != nil || len(urls) != 2 || urls[1].User.Username() != "u" || urls[1].Host != "b:2" {
		t.Fatalf("%v %v", urls, err)
	}
	for _, bad := range []string{"nats://a:1,", "%zz", ","} {
		if _, err := RoutesFromStr(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
