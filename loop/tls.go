package loop

import (
	"crypto/tls"
	"time"
)

// TLSConfig is TLS served on the engine's own reactors by tlsLayer (tlslayer.go): clients'
// (Config.TLS, SetTLS), and routes' (RouteConfig.TLS: both roles, always TLS first, so
// HandshakeFirst, FallbackDelay and AllowNonTLS do not apply).
type TLSConfig struct {
	Config  *tls.Config
	Timeout time.Duration // handshake timeout
	// HandshakeFirst: TLS before INFO. With FallbackDelay > 0, a client that sends nothing
	// within the delay gets INFO first (handshake_first: auto).
	HandshakeFirst bool
	FallbackDelay  time.Duration
	// AllowNonTLS lets clients that do not start a handshake after INFO stay in plaintext.
	AllowNonTLS bool
	// PinnedCerts, when not nil, admits only clients whose leaf certificate's public key
	// (lower-case hex SHA-256 of its DER SubjectPublicKeyInfo) is in it.
	PinnedCerts map[string]struct{}
}

// SetTLS replaces the client TLS settings (nil: none) for connections accepted from now on;
// established connections keep what they started with, as in nats-server.
func (e *Engine) SetTLS(t *TLSConfig) { e.tlsConf.Store(t) }

// TLS is the client TLS settings new connections get (nil: none).
func (e *Engine) TLS() *TLSConfig { return e.tlsConf.Load() }
