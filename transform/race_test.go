//go:build race

package transform

// The race detector slows nats-server's regular expressions about tenfold,
// so the differential tests run fewer triples under it.
const raceEnabled = true
