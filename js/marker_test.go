package js

import (
	"testing"
	"time"
)

func TestMarkerHeader(t *testing.T) {
	for ttl, want := range map[time.Duration]string{
		2 * time.Second:         "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 2s\r\nNats-Rollup: sub\r\n\r\n",
		90 * time.Second:        "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1m30s\r\nNats-Rollup: sub\r\n\r\n",
		2500 * time.Millisecond: "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 2s\r\nNats-Rollup: sub\r\n\r\n",
	} {
		if got := string(markerHeader(ttl)); got != want {
			t.Errorf("%v: %q, want %q", ttl, got, want)
		}
	}
	if !isDeleteMarker(markerHeader(time.Second)) || !isDeleteMarker([]byte("NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n")) {
		t.Error("markers not recognised")
	}
	if isDeleteMarker([]byte("NATS/1.0\r\nKV-Operation: DEL\r\n\r\n")) || isDeleteMarker(nil) {
		t.Error("a delete marker or no header taken for a marker")
	}
}

func TestRaiseTTL(t *testing.T) {
	cfg := &StreamConfig{SubjectDeleteMarkerTTL: 5 * time.Second, MaxMsgsPer: -1}
	hdr, ttl := raiseTTL(cfg, []byte("NATS/1.0\r\nA: 1\r\nNats-TTL: 1s\r\nB: 2\r\n\r\n"), 1)
	if ttl != 5 || string(hdr) != "NATS/1.0\r\nA: 1\r\nB: 2\r\nNats-TTL: 5\r\n\r\n" {
		t.Errorf("raised: %d %q", ttl, hdr)
	}
	for _, c := range []struct {
		cfg StreamConfig
		ttl int64
	}{
		{StreamConfig{SubjectDeleteMarkerTTL: 5 * time.Second, MaxMsgsPer: 1}, 1}, // one per subject
		{StreamConfig{SubjectDeleteMarkerTTL: 5 * time.Second}, 7},                // above the floor
		{StreamConfig{MaxMsgsPer: -1}, 1},                                         // no markers
		{StreamConfig{SubjectDeleteMarkerTTL: 5 * time.Second}, 0},                // max_age's
	} {
		in := []byte("NATS/1.0\r\nNats-TTL: x\r\n\r\n")
		if hdr, ttl := raiseTTL(&c.cfg, in, c.ttl); ttl != c.ttl || string(hdr) != string(in) {
			t.Errorf("%+v %d: changed to %d %q", c.cfg, c.ttl, ttl, hdr)
		}
	}
}
