// Package cluster will hold routes (the full mesh between the servers of one cluster),
// and later gateways and leaf nodes. Today it holds the cluster {} block's options: what the
// config file and the cluster flags say, with nats-server v2.15.2's defaults and checks, in
// the shape the route code consumes.
package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/sublist"
)

// Defaults and limits, nats-server v2.15.2's (const.go, route.go, opts.go setBaselineOptions).
const (
	// DefaultHost is where the route listener binds when the block gives a port but no host:
	// every interface, as for clients.
	DefaultHost = "0.0.0.0"

	// DefaultPoolSize: three connections per pair of servers spread the accounts' traffic
	// over several sockets (and reactors) without multiplying connections in big meshes.
	DefaultPoolSize = 3

	// DefaultTLSTimeout bounds a route's TLS handshake, as a client's.
	DefaultTLSTimeout = 2 * time.Second

	// DefaultAuthTimeout bounds a route's CONNECT without TLS; with TLS it is the TLS timeout
	// plus a second, so that a slow handshake does not eat the whole authentication window.
	DefaultAuthTimeout = 2 * time.Second

	// MaxPingInterval caps a route's PING interval (longer values are cut to it, with a
	// warning at load): s2_auto compression picks its level from the RTT PINGs measure, and
	// stale routes must be noticed well before clients' two-minute default would.
	MaxPingInterval = 30 * time.Second

	// Solicitation timing (not configurable in nats-server either): a route is first dialled
	// after ConnectDelay, retried with ConnectBackoff up to ConnectMaxDelay between
	// attempts, re-dialled ReconnectDelay after it drops, each dial bounded by DialTimeout.
	ConnectDelay    = 1 * time.Second
	ConnectMaxDelay = 30 * time.Second
	ReconnectDelay  = 1 * time.Second
	DialTimeout     = 1 * time.Second

	// ReservedName is the cluster name leaf nodes use for "no origin cluster" on the wire,
	// so no cluster may be called that.
	ReservedName = "_"
)

// Compression modes, as written in the config and negotiated in INFO.
const (
	CompressionNotSupported   = "not supported"
	CompressionOff            = "off"
	CompressionAccept         = "accept"
	CompressionS2Auto         = "s2_auto"
	CompressionS2Uncompressed = "s2_uncompressed"
	CompressionS2Fast         = "s2_fast"
	CompressionS2Better       = "s2_better"
	CompressionS2Best         = "s2_best"

	// DefaultCompression for routes is "accept": never start compressing, but follow a peer
	// that asks, so a cluster upgrades one server at a time without mismatched pairs.
	DefaultCompression = CompressionAccept
	// CompressionOn is what "on", "enabled", "true" (and compression: true) select for
	// routes: the cheapest S2 level, since routes usually run on fast links.
	CompressionOn = CompressionS2Fast
)

// DefaultRTTThresholds are s2_auto's RTT steps: up to 10ms uncompressed, then fast, better,
// and best above 100ms. Compression pays off on slow links, and costs CPU on fast ones.
var DefaultRTTThresholds = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

// Write timeout policies (write_timeout): what to do with a route whose write deadline
// expires. "" is nats-server's default policy (for routes: retry).
const (
	WriteTimeoutDefault = ""
	WriteTimeoutClose   = "close"
	WriteTimeoutRetry   = "retry"
)

// Options is the cluster {} block and the cluster flags (--cluster, --routes,
// --cluster_name, --cluster_advertise, --no_advertise, --connect_retries). Field names
// follow nats-server's ClusterOpts, so its route code reads across; units are natsd's
// (durations, not float seconds).
//
// Every key nats-server's parseCluster accepts lands here, including those natsd does not act
// on yet: nothing in the block is silently dropped. (nats-server has no gossip key: INFO's
// gossip_mode is set by the route code, not configured.)
type Options struct {
	// Name (name, --cluster_name) must match on every server of the cluster; "" lets the
	// server make one up and adopt the first configured name a peer sends.
	Name string

	// Host and Port (listen, host/net, port, --cluster) are the route listener. Port 0 means
	// no cluster: no listener, and configured Routes are not dialled (nats-server accepts
	// such a file and runs alone). -1 picks a random port. Host defaults to DefaultHost.
	Host string
	Port int

	// Advertise (advertise, cluster_advertise, --cluster_advertise) is the host[:port] peers
	// are told to dial instead of the bound address (NAT, containers).
	Advertise string
	// NoAdvertise (no_advertise, --no_advertise): do not pass peers' client URLs on to our
	// clients in INFO connect_urls.
	NoAdvertise bool

	// Routes (routes, --routes) are the seed URLs this server dials, nats://[user:pass@]h:p.
	// Peers learned from them are dialled too (implicit routes).
	Routes []*url.URL

	// Username and Password (authorization { user, password }, or user:pass in --cluster)
	// are the single identity peers must present: routes authenticate as one user, never a
	// users list, token or callout. AuthTimeout (authorization { timeout }) bounds CONNECT.
	Username    string
	Password    string
	AuthTimeout time.Duration

	// Permissions (permissions {import, export}; the deprecated authorization { permissions }
	// when the block has none) limit the interest exchanged with peers.
	Permissions *RoutePermissions

	// TLS (tls {}, the same keys as the client block). Routes always verify both ways: a
	// TLSConfig requires and checks the peer's certificate, and trusts ca_file as roots for
	// the routes it dials. TLSTimeout bounds the handshake; TLSMap (verify_and_map) maps the
	// peer's certificate to Username; TLSCheckKnownURLs (verify_cert_and_check_known_urls)
	// also checks the certificate's SANs against the configured route URLs; TLSPinnedCerts
	// (pinned_certs) restricts peers to these SPKI SHA-256 hashes. insecure sets the
	// config's InsecureSkipVerify (solicited routes only; warned about at start).
	TLSConfig         *tls.Config
	TLSTimeout        time.Duration
	TLSMap            bool
	TLSCheckKnownURLs bool
	TLSPinnedCerts    map[string]struct{}

	// ConnectRetries (connect_retries, --connect_retries) is how often an implicit (gossiped)
	// route is retried before giving up; explicit Routes retry forever. ConnectBackoff
	// (connect_backoff) grows the delay between attempts up to ConnectMaxDelay.
	ConnectRetries int
	ConnectBackoff bool

	// PoolSize (pool_size) is the number of connections per pair of servers, over which
	// accounts are hashed. 0 means DefaultPoolSize; negative disables pooling (one route per
	// peer, the pre-2.10 protocol) and with it pinned accounts.
	PoolSize int
	// PinnedAccounts (accounts) get a dedicated route each. With pooling on, the system
	// account is added, so $SYS traffic never queues behind an account's.
	PinnedAccounts []string

	// Compression (compression: bool, mode string or {mode, rtt_thresholds}); the mode is
	// normalized by Validate.
	Compression Compression

	// PingInterval (ping_interval) overrides the server's for routes (<= 0: the server's),
	// capped at MaxPingInterval. MaxPingsOut (ping_max) likewise (0: the server's).
	PingInterval time.Duration
	MaxPingsOut  int

	// WriteDeadline (write_deadline) overrides the server's for routes (0: the server's);
	// WriteTimeout (write_timeout) is the policy when it expires (WriteTimeout* constants).
	WriteDeadline time.Duration
	WriteTimeout  string
}

// RoutePermissions are cluster { permissions }: Import limits the subjects we register
// interest in with peers (what we accept from them), Export the subjects peers may register
// interest in with us (what we send). The config's publish/subscribe aliases map onto them.
type RoutePermissions struct {
	Import *auth.SubjectPermission
	Export *auth.SubjectPermission
}

// Compression is a compression mode and, for s2_auto, the RTT thresholds at which the level
// steps from uncompressed to fast, better and best (a 0 skips a level).
type Compression struct {
	Mode          string
	RTTThresholds []time.Duration
}

// Enabled reports whether the options ask for a cluster: a route listener (and the routes
// it dials). A block without a port configures nothing that runs, as in nats-server.
func (o *Options) Enabled() bool { return o.Port != 0 }

// SetDefaults fills what nats-server's setBaselineOptions fills for an enabled cluster;
// sysAccount is the system account nats-server would pin (system_account, else "$SYS" unless
// no_system_account; "" for none). A disabled block is left as written (/varz then shows
// only the name, as nats-server's does).
func (o *Options) SetDefaults(sysAccount string) {
	if !o.Enabled() {
		return
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.TLSTimeout == 0 {
		o.TLSTimeout = DefaultTLSTimeout
	}
	if o.AuthTimeout == 0 {
		o.AuthTimeout = DefaultAuthTimeout
		if o.TLSConfig != nil {
			o.AuthTimeout = o.TLSTimeout + time.Second
		}
	}
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize
	}
	if o.PoolSize > 0 && sysAccount != "" && !slices.Contains(o.PinnedAccounts, sysAccount) {
		// A new slice: the caller's options may share the backing array.
		o.PinnedAccounts = append(slices.Clip(o.PinnedAccounts), sysAccount)
	}
	if o.Compression.Mode == "" {
		o.Compression.Mode = DefaultCompression
	}
}

var pinnedCertRE = regexp.MustCompile("^[a-f0-9]{64}$")

// Validate is nats-server's validateCluster for what the block alone decides, with its
// error texts; it normalizes the compression mode. It runs at start-up and on every reload.
func (o *Options) Validate() error {
	if strings.Contains(o.Name, " ") {
		return errors.New("cluster name cannot contain spaces")
	}
	if p := o.Permissions; p != nil {
		if err := CheckPermissionSubjects(p); err != nil {
			return err
		}
	}
	if o.Compression.Mode != "" {
		if err := o.Compression.Normalize(CompressionOn); err != nil {
			return err
		}
	}
	for c := range o.TLSPinnedCerts {
		if e := strings.ToLower(c); !pinnedCertRE.MatchString(e) {
			return fmt.Errorf("cluster: error parsing 'pinned_certs' key %s does not look like lower case hex-encoded sha256 of DER encoded SubjectPublicKeyInfo", e)
		}
	}
	if o.Name == ReservedName {
		return errors.New("cluster name is reserved")
	}
	if len(o.PinnedAccounts) > 0 {
		if o.PoolSize < 0 {
			return errors.New("pool_size cannot be negative if pinned accounts are specified")
		}
		seen := make(map[string]struct{}, len(o.PinnedAccounts))
		for _, a := range o.PinnedAccounts {
			if _, dup := seen[a]; dup {
				return fmt.Errorf("found duplicate account name %q in pinned accounts list %q", a, o.PinnedAccounts)
			}
			seen[a] = struct{}{}
		}
	}
	return nil
}

// CheckPermissionSubjects refuses route permissions that are not plain subjects (no queue
// groups, unlike users' subscribe permissions), naming the list at fault.
func CheckPermissionSubjects(p *RoutePermissions) error {
	check := func(what string, subs []string) error {
		for _, s := range subs {
			if !sublist.ValidSubject([]byte(s)) {
				return fmt.Errorf("cluster %s: subject %q is not a valid subject", what, s)
			}
		}
		return nil
	}
	if p.Import != nil {
		if err := check("import allow", p.Import.Allow); err != nil {
			return err
		}
		if err := check("import deny", p.Import.Deny); err != nil {
			return err
		}
	}
	if p.Export != nil {
		if err := check("export allow", p.Export.Allow); err != nil {
			return err
		}
		if err := check("export deny", p.Export.Deny); err != nil {
			return err
		}
	}
	return nil
}

// Normalize turns a written mode into one of the Compression* constants (on selects onMode;
// s2_uncompressed is a level s2_auto picks, not a mode one may configure)
// and, for s2_auto, settles the thresholds: defaults when none were given, negative ones as
// 0, trailing zeros dropped; they must ascend (zeros aside) and be at most 4.
// nats-server's validateAndNormalizeCompressionOption, with its error texts.
func (c *Compression) Normalize(onMode string) error {
	m := strings.ToLower(c.Mode)
	switch m {
	case "on", "enabled", "true":
		m = onMode
	}
	switch m {
	case "not supported", "not_supported":
		c.Mode = CompressionNotSupported
	case "disabled", "off", "false":
		c.Mode = CompressionOff
	case "accept":
		c.Mode = CompressionAccept
	case "auto", "s2_auto":
		var rtts []time.Duration
		if len(c.RTTThresholds) == 0 {
			rtts = slices.Clone(DefaultRTTThresholds)
		} else {
			for _, n := range c.RTTThresholds {
				n = max(n, 0)
				if n != 0 {
					for _, v := range rtts {
						if n < v {
							return fmt.Errorf("RTT threshold values %v should be in ascending order", c.RTTThresholds)
						}
					}
				}
				rtts = append(rtts, n)
			}
			for len(rtts) > 0 && rtts[len(rtts)-1] == 0 {
				rtts = rtts[:len(rtts)-1]
			}
			if len(rtts) > 4 {
				return fmt.Errorf("compression mode %q should have no more than 4 RTT thresholds: %v", c.Mode, c.RTTThresholds)
			}
			if len(rtts) == 0 {
				return fmt.Errorf("compression mode %q requires at least one RTT threshold", c.Mode)
			}
		}
		c.Mode, c.RTTThresholds = CompressionS2Auto, rtts
	case "fast", "s2_fast":
		c.Mode = CompressionS2Fast
	case "better", "s2_better":
		c.Mode = CompressionS2Better
	case "best", "s2_best":
		c.Mode = CompressionS2Best
	default:
		return fmt.Errorf("unsupported compression mode %q", c.Mode)
	}
	return nil
}

// Equal compares two normalized settings as a reload does: s2_auto without thresholds means
// the default ones.
func (c *Compression) Equal(d *Compression) bool {
	if c.Mode != d.Mode {
		return false
	}
	if c.Mode != CompressionS2Auto {
		return true
	}
	a, b := c.RTTThresholds, d.RTTThresholds
	if len(a) == 0 {
		a = DefaultRTTThresholds
	}
	if len(b) == 0 {
		b = DefaultRTTThresholds
	}
	return slices.Equal(a, b)
}

// Change is what a reload changed in the cluster options, sorted the way the route code
// applies it (nats-server's clusterOption and routesOption).
type Change struct {
	// RoutesAdded are dialled; routes to RoutesRemoved are closed and not redialled.
	RoutesAdded, RoutesRemoved []*url.URL
	// PermissionsChanged: interest sent to and accepted from peers is recomputed.
	PermissionsChanged bool
	// CompressionChanged: routes renegotiate (or just switch level) per nats-server's rules.
	CompressionChanged bool
	// PoolSizeChanged, AccountsAdded, AccountsRemoved: routes are rebuilt for the pool and
	// the pinned accounts that moved.
	PoolSizeChanged                bool
	AccountsAdded, AccountsRemoved []string
	// NameChanged: the new name is adopted (and told to peers).
	NameChanged bool
}

// Diff lists what changed between two (defaulted, validated) option sets. Host and Port
// cannot change at run time; the server refuses such a reload before it gets here.
func Diff(old, new *Options) Change {
	var ch Change
	ch.RoutesAdded, ch.RoutesRemoved = diffURLs(old.Routes, new.Routes)
	ch.PermissionsChanged = !reflect.DeepEqual(old.Permissions, new.Permissions)
	ch.CompressionChanged = !old.Compression.Equal(&new.Compression)
	ch.PoolSizeChanged = old.PoolSize != new.PoolSize
	for _, a := range new.PinnedAccounts {
		if !slices.Contains(old.PinnedAccounts, a) {
			ch.AccountsAdded = append(ch.AccountsAdded, a)
		}
	}
	for _, a := range old.PinnedAccounts {
		if !slices.Contains(new.PinnedAccounts, a) {
			ch.AccountsRemoved = append(ch.AccountsRemoved, a)
		}
	}
	ch.NameChanged = new.Name != "" && new.Name != old.Name
	return ch
}

// diffURLs: URLs are the same route when they are identical, credentials included (a route
// whose password changed is closed and dialled again with the new one).
func diffURLs(old, new []*url.URL) (add, remove []*url.URL) {
	has := func(list []*url.URL, u *url.URL) bool {
		return slices.ContainsFunc(list, func(v *url.URL) bool { return reflect.DeepEqual(u, v) })
	}
	for _, u := range old {
		if !has(new, u) {
			remove = append(remove, u)
		}
	}
	for _, u := range new {
		if !has(old, u) {
			add = append(add, u)
		}
	}
	return add, remove
}

// ParseRouteURL parses one route URL as nats-server does (surrounding spaces ignored), with
// its error text; where names the source ("route" for the config and the flag).
func ParseRouteURL(s, where string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil {
		// The URL is quoted whole: if it does not parse, its credentials cannot be found to
		// redact (nats-server does the same).
		return nil, fmt.Errorf("error parsing %s url [%q]", where, s)
	}
	return u, nil
}

// RoutesFromStr parses --routes: comma-separated URLs. nats-server keeps URLs that do not
// parse as nil and crashes when it dials them; an empty entry makes it dial nothing forever.
// Both are refused here.
func RoutesFromStr(s string) ([]*url.URL, error) {
	var urls []*url.URL
	for _, r := range strings.Split(s, ",") {
		if strings.TrimSpace(r) == "" {
			return nil, fmt.Errorf("error parsing route url [%q]: empty entry in %q", "", s)
		}
		u, err := ParseRouteURL(r, "route")
		if err != nil {
			return nil, err
		}
		urls = append(urls, u)
	}
	return urls, nil
}
