package server

import (
	"crypto/tls"
	"time"

	"github.com/natsd/natsd/loop"
)

// DefaultTLSTimeout is nats-server's TLS handshake timeout.
const DefaultTLSTimeout = 2 * time.Second

// tlsDefaults fills the TLS timeout and, with TLS, the auth timeout nats-server derives from
// it (TLS timeout + 1s) when none was set. It runs before setDefaults.
func tlsDefaults(o *Options) {
	if o.TLSConfig == nil {
		return
	}
	if o.TLSTimeout == 0 {
		o.TLSTimeout = DefaultTLSTimeout
	}
	if o.AuthTimeout == 0 {
		o.AuthTimeout = o.TLSTimeout + time.Second
	}
}

// loopTLS is the loop's client TLS configuration (nil without TLS).
func loopTLS(o *Options) *loop.TLSConfig {
	if o.TLSConfig == nil {
		return nil
	}
	c := o.TLSConfig.Clone()
	if o.TLSVerify || o.TLSMap {
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	fb := time.Duration(0)
	if o.TLSHandshakeFirst {
		fb = o.TLSHandshakeFirstFallback
	}
	return &loop.TLSConfig{
		Config:         c,
		Timeout:        o.TLSTimeout,
		HandshakeFirst: o.TLSHandshakeFirst,
		FallbackDelay:  fb,
		AllowNonTLS:    o.AllowNonTLS && !o.TLSHandshakeFirst,
		PinnedCerts:    o.TLSPinnedCerts,
	}
}

// tlsInfo is INFO's tls_required, tls_verify and tls_available.
func tlsInfo(o *Options) (required, verify, available bool) {
	if o.TLSConfig == nil {
		return false, false, false
	}
	verify = o.TLSVerify || o.TLSMap
	if o.AllowNonTLS && !o.TLSHandshakeFirst {
		return false, verify, true
	}
	return true, verify, false
}

func (i info) withTLS(o *Options) info {
	i.TLSReq, i.TLSVerify, i.TLSAvail = tlsInfo(o)
	return i
}

func init() { reloadAppliers = append(reloadAppliers, reloadTLS) }

// reloadTLS hands new certificates and TLS settings (or none: TLS switched off) to the
// engine; connections accepted from then on use them, established ones keep theirs (as in
// nats-server).
func reloadTLS(s *Server, o, n *Options) error {
	if s.eng == nil || (o.TLSConfig == nil && n.TLSConfig == nil) {
		return nil
	}
	s.eng.SetTLS(loopTLS(n))
	return nil
}
