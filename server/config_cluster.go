package server

// The cluster {} block, with nats-server's keys, aliases and error texts (its parseCluster).
// Where nats-server's only answer to a value of the wrong type is a Go runtime panic message
// ("interface conversion: ..."), natsd says what it expected, as for every other block.

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/natsd/natsd/cluster"
)

func (p *cfgParser) cluster(o *Options, e entry) {
	m, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "Expected map to define cluster, got %T", e.v)
		return
	}
	c := &o.Cluster
	// The deprecated authorization { permissions } apply only when the block has no
	// permissions of its own, wherever those are written.
	var authPerms *cluster.RoutePermissions
	var permsSet bool
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "name":
			s, ok := p.str(f)
			if !ok {
				continue
			}
			if strings.Contains(s, " ") {
				p.fail(f.tk, "cluster name cannot contain spaces")
				continue
			}
			if s == cluster.ReservedName {
				p.fail(f.tk, "cluster name is reserved")
				continue
			}
			c.Name = s
		case "listen":
			if h, port, ok := p.hostPort(f); ok {
				c.Host, c.Port = h, port
			}
		case "port":
			if n, ok := p.intRange(f, -1, 65535); ok {
				c.Port = n
			}
		case "host", "net":
			if s, ok := p.str(f); ok {
				c.Host = s
			}
		case "authorization":
			if perms, ok := p.clusterAuthorization(c, f); ok && perms != nil {
				authPerms = perms
			}
		case "routes":
			if urls, ok := p.routeURLs(f); ok {
				c.Routes = urls
			}
		case "tls":
			b, ok := p.tlsBlock(f, tlsContext{route: true, prefix: "cluster.tls."})
			if !ok {
				continue
			}
			// Routes verify both ways: each side is the other's client and server, so the
			// peer's certificate is required and ca_file also serves as the roots to dial.
			b.config.ClientAuth = tls.RequireAndVerifyClientCert
			b.config.RootCAs = b.config.ClientCAs
			c.TLSConfig = b.config
			c.TLSTimeout = b.timeout
			c.TLSMap = b.mapUser
			c.TLSCheckKnownURLs = b.checkKnownURLs
			c.TLSPinnedCerts = b.pinned
		case "cluster_advertise", "advertise":
			if s, ok := p.str(f); ok {
				c.Advertise = s
			}
		case "no_advertise":
			if b, ok := p.boolean(f); ok {
				c.NoAdvertise = b
			}
		case "connect_retries":
			if n, ok := p.intRange(f, -1<<31, 1<<31-1); ok {
				c.ConnectRetries = n
			}
		case "connect_backoff":
			if b, ok := p.boolean(f); ok {
				c.ConnectBackoff = b
			}
		case "permissions":
			perms := p.permissions(f)
			if perms == nil {
				continue
			}
			if perms.Response != nil {
				p.fail(f.tk, "Cluster permissions do not support dynamic responses")
				continue
			}
			rp := &cluster.RoutePermissions{Import: perms.Publish, Export: perms.Subscribe}
			if err := cluster.CheckPermissionSubjects(rp); err != nil {
				p.fail(f.tk, "%v", err)
				continue
			}
			c.Permissions, permsSet = rp, true
		case "pool_size":
			if n, ok := p.intRange(f, -1<<31, 1<<31-1); ok {
				c.PoolSize = n
			}
		case "accounts":
			c.PinnedAccounts = p.stringArray(f)
		case "compression":
			p.compression(&c.Compression, cluster.CompressionOn, f)
		case "ping_interval":
			d, ok := p.duration(f)
			if !ok {
				continue
			}
			c.PingInterval = d
			if d > cluster.MaxPingInterval {
				p.warnf(f.tk, "Cluster 'ping_interval' will reset to %v which is the max for routes", cluster.MaxPingInterval)
			}
		case "ping_max":
			if n, ok := p.intRange(f, -1<<31, 1<<31-1); ok {
				c.MaxPingsOut = n
			}
		case "write_deadline":
			if d, ok := p.duration(f); ok {
				c.WriteDeadline = d
			}
		case "write_timeout":
			if s, ok := p.str(f); ok {
				if policy, ok := writeTimeoutPolicy(s); ok {
					c.WriteTimeout = policy
				} else {
					p.fail(f.tk, "write_timeout must be 'default', 'close' or 'retry'")
				}
			}
		default:
			p.unknown(f.tk, f.key)
		}
	}
	if !permsSet && authPerms != nil {
		c.Permissions = authPerms
	}
}

// writeTimeoutPolicy maps write_timeout's values onto cluster.WriteTimeout*.
func writeTimeoutPolicy(s string) (string, bool) {
	switch s {
	case "default":
		return cluster.WriteTimeoutDefault, true
	case "close":
		return cluster.WriteTimeoutClose, true
	case "retry":
		return cluster.WriteTimeoutRetry, true
	}
	return "", false
}

// clusterAuthorization is cluster { authorization }: one user, its password and the auth
// timeout. Permissions inside are deprecated (a warning) and returned for the caller to
// apply when the block has none of its own.
func (p *cfgParser) clusterAuthorization(c *cluster.Options, e entry) (*cluster.RoutePermissions, bool) {
	b, ok := p.authBlock(e, "cluster.authorization.")
	if !ok {
		return nil, false
	}
	switch {
	case b.usersSet:
		p.fail(e.tk, "Cluster authorization does not allow multiple users")
		return nil, false
	case b.token != "":
		p.fail(e.tk, "Cluster authorization does not support tokens")
		return nil, false
	case b.callout != nil:
		p.fail(e.tk, "Cluster authorization does not support callouts")
		return nil, false
	}
	c.Username, c.Password, c.AuthTimeout = b.user, b.pass, b.timeout
	if b.perms == nil {
		return nil, true
	}
	rp := &cluster.RoutePermissions{Import: b.perms.Publish, Export: b.perms.Subscribe}
	if err := cluster.CheckPermissionSubjects(rp); err != nil {
		p.fail(e.tk, "%v", err)
		return nil, false
	}
	p.warn(e.tk, e.key, `setting "permissions" within cluster authorization block is deprecated`)
	return rp, true
}

// routeURLs is cluster { routes }: an array of URLs; a repeated one is a warning and kept once.
func (p *cfgParser) routeURLs(e entry) ([]*url.URL, bool) {
	arr, ok := e.v.([]any)
	if !ok {
		p.fail(e.tk, "expected an array for %q, got %s", e.key, typeName(e.v))
		return nil, false
	}
	urls := make([]*url.URL, 0, len(arr))
	seen := map[string]bool{}
	good := true
	for _, raw := range arr {
		tk, v := p.unwrap(raw)
		if tk == nil {
			tk = e.tk
		}
		s, ok := v.(string)
		if !ok {
			p.fail(tk, "expected a string for a route URL, got %s", typeName(v))
			good = false
			continue
		}
		if seen[s] {
			p.warn(tk, s, "Duplicate route entry detected")
			continue
		}
		seen[s] = true
		u, err := cluster.ParseRouteURL(s, "route")
		if err != nil {
			p.fail(tk, "%v", err)
			good = false
			continue
		}
		urls = append(urls, u)
	}
	return urls, good
}

// stringArray reads a string or an array of strings (nats-server's parseStringArray): an
// element of another type is an error and left out.
func (p *cfgParser) stringArray(e entry) []string {
	switch v := e.v.(type) {
	case string:
		return []string{v}
	case []any:
		strs := make([]string, 0, len(v))
		for _, raw := range v {
			tk, ev := p.unwrap(raw)
			if tk == nil {
				tk = e.tk
			}
			s, ok := ev.(string)
			if !ok {
				p.fail(tk, "error parsing %s: unsupported type in array %T", e.key, ev)
				continue
			}
			strs = append(strs, s)
		}
		return strs
	}
	p.fail(e.tk, "error parsing %s: unsupported type %T", e.key, e.v)
	return nil
}

// compression reads compression: a boolean (true selects onMode), a mode (checked when the
// server starts, as nats-server does), or {mode, rtt_thresholds}.
func (p *cfgParser) compression(c *cluster.Compression, onMode string, e entry) {
	switch v := e.v.(type) {
	case string:
		c.Mode = v
	case bool:
		c.Mode = cluster.CompressionOff
		if v {
			c.Mode = onMode
		}
	case map[string]any:
		for _, f := range p.entries(v) {
			switch strings.ToLower(f.key) {
			case "mode":
				if s, ok := p.str(f); ok {
					c.Mode = s
				}
			case "rtt_thresholds", "thresholds", "rtts", "rtt":
				arr, ok := f.v.([]any)
				if !ok {
					p.fail(f.tk, "expected an array for %q, got %s", f.key, typeName(f.v))
					continue
				}
				var rtts []time.Duration
				for _, raw := range arr {
					tk, ev := p.unwrap(raw)
					if tk == nil {
						tk = f.tk
					}
					s, ok := ev.(string)
					if !ok {
						p.fail(tk, "expected a duration for %q, got %s", f.key, typeName(ev))
						rtts = nil
						break
					}
					d, err := time.ParseDuration(s)
					if err != nil {
						// nats-server points at the key, not at the bad element.
						p.fail(f.tk, "%v", err)
						rtts = nil
						break
					}
					rtts = append(rtts, d)
				}
				if rtts != nil {
					c.RTTThresholds = append(c.RTTThresholds, rtts...)
				}
			default:
				p.unknown(f.tk, f.key)
			}
		}
	default:
		p.fail(e.tk, "field %q should be a boolean or a structure, got %T", e.key, e.v)
	}
}

// warnf records a located warning in nats-server's plain form (no "invalid use of field").
func (p *cfgParser) warnf(tk confToken, format string, args ...any) {
	p.rep.Warnings = append(p.rep.Warnings, p.errAt(tk, format, args...))
}

// clusterAdvertiseError is nats-server's check of cluster advertise, made when the route
// listener starts (a reload makes its own, with another text).
func clusterAdvertiseError(c *cluster.Options) error {
	if c.Advertise == "" {
		return nil
	}
	if _, _, err := advertised(c.Advertise, c.Port); err != nil {
		return fmt.Errorf("Error setting route INFO with Cluster.Advertise value of %s, err=%v", c.Advertise, err)
	}
	return nil
}
