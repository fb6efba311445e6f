// Package cluster decides which servers of a cluster to connect to and when: the configured
// (explicit) routes, the servers other routes tell of (gossip, implicit routes), and
// reconnecting after a route drops. The connections themselves, their protocol and the
// interest they carry run on the reactors (loop/router.go).
package cluster

import (
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/natsd/natsd/loop"
)

// Engine is what the manager needs of the reactors.
type Engine interface {
	DialRoute(u *url.URL, explicit bool, gossipMode byte, account string) error
	HasRoute(id string) bool
	HasPinnedRoute(id, account string) bool
}

// Logger is the server's logger.
type Logger interface {
	Noticef(format string, v ...any)
	Errorf(format string, v ...any)
	Debugf(format string, v ...any)
}

// Config is what the manager needs of the cluster options.
type Config struct {
	Routes             []*url.URL
	Username, Password string // for implicit routes to servers that require authentication
	ConnectRetries     int
	ConnectBackoff     bool
	NoAdvertise        bool
	// Pinned are the accounts with routes of their own (with pooling): each configured route
	// is dialled once more for each.
	Pinned []string
	// ClientURLs is told the client URLs of every other server (connect_urls for clients);
	// nil when not needed.
	ClientURLs func(urls []string)
}

// Delays as nats-server's: a dial every second (doubling to 30 s with connect_backoff), and a
// dropped explicit route redialled after a second plus up to 100 ms, so that two servers
// that dropped each other's duplicate connections do not dial in lockstep again.
const (
	connectDelay    = time.Second
	connectMaxDelay = 30 * time.Second
	reconnectDelay  = time.Second
	reconnectJitter = 100 * time.Millisecond
)

// Manager implements loop.RouteEvents.
type Manager struct {
	eng Engine
	cfg Config
	log Logger

	mu      sync.Mutex
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup
	dialing map[string]bool // host:port (and pinned account) being dialled
	again   map[string]bool // asked for again while being dialled: one more try if it fails
	// poolWant counts the pool connections asked for while a dial to their place was under
	// way: each stands for a slot still to fill, so each gets a dial of its own afterwards,
	// whether that dial connected or not (a pool's next connection asked for as a redial of
	// another one is under way would otherwise be lost, and the pool stay a slot short).
	poolWant map[string]int
	self     map[string]bool     // URLs that led back to this server
	urlFor   map[string]*url.URL // remote id → explicit route URL it is reached by
	remotes  map[string][]string // remote id → its client URLs
}

// New makes a manager; Start dials the configured routes.
func New(eng Engine, cfg Config, log Logger) *Manager {
	return &Manager{eng: eng, cfg: cfg, log: log, stop: make(chan struct{}),
		dialing: make(map[string]bool), again: make(map[string]bool), poolWant: make(map[string]int),
		self:   make(map[string]bool),
		urlFor: make(map[string]*url.URL), remotes: make(map[string][]string)}
}

// Start dials every configured route (each in its own goroutine until it connects).
func (m *Manager) Start() {
	for _, u := range m.cfg.Routes {
		m.connect(u, true, 0, 0, "")
	}
	for _, acc := range m.cfg.Pinned {
		for _, u := range m.cfg.Routes {
			m.connect(u, true, 0, 0, acc)
		}
	}
}

// Stop ends every dial in progress and waits for them.
func (m *Manager) Stop() {
	m.mu.Lock()
	if !m.stopped {
		m.stopped = true
		close(m.stop)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// SetRoutes replaces the configured routes (a reload): new ones are dialled.
func (m *Manager) SetRoutes(routes []*url.URL) {
	m.mu.Lock()
	old := m.cfg.Routes
	m.cfg.Routes = routes
	m.mu.Unlock()
	for _, u := range routes {
		if !containsURL(old, u) {
			m.connect(u, true, 0, 0, "")
			for _, acc := range m.cfg.Pinned {
				m.connect(u, true, 0, 0, acc)
			}
		}
	}
}

func containsURL(list []*url.URL, u *url.URL) bool {
	for _, x := range list {
		if strings.EqualFold(x.Host, u.Host) {
			return true
		}
	}
	return false
}

func (m *Manager) configured(u *url.URL) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return containsURL(m.cfg.Routes, u)
}

// connect dials u in the background (for a pinned account's own route when account is
// set): explicit routes until they connect, implicit ones connect_retries more times at most.
func (m *Manager) connect(u *url.URL, explicit bool, gossipMode byte, delay time.Duration, account string) {
	m.dial(u, explicit, gossipMode, delay, account, false)
}

// connectPool dials one more connection of a pool (the next one, or a redial of one that
// went): unlike connect's other requests, it is never answered by a dial already under way.
func (m *Manager) connectPool(u *url.URL, explicit bool, delay time.Duration) {
	m.dial(u, explicit, 0, delay, "", true)
}

func (m *Manager) dial(u *url.URL, explicit bool, gossipMode byte, delay time.Duration, account string, pool bool) {
	key := u.Host + " " + account
	m.mu.Lock()
	if m.stopped || m.self[u.Host] {
		m.mu.Unlock()
		return
	}
	if m.dialing[key] && pool {
		m.poolWant[key]++
		m.mu.Unlock()
		return
	}
	if m.dialing[key] {
		// One dial at a time to a place, but this request is not dropped: a redial that is
		// still waiting out its delay may fail (the server restarting is not listening yet)
		// and give up before the request that arrived meanwhile (gossip of the restarted
		// server) would have succeeded.
		m.again[key] = true
		m.mu.Unlock()
		return
	}
	m.dialing[key] = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		connected := false
		defer func() {
			m.mu.Lock()
			again := m.again[key] && !connected && !m.stopped
			delete(m.again, key)
			delete(m.dialing, key)
			want := m.poolWant[key] > 0 && !m.stopped
			if want {
				m.poolWant[key]--
			} else {
				delete(m.poolWant, key)
			}
			m.mu.Unlock()
			if again || want {
				m.dial(u, explicit, gossipMode, 0, account, want)
			}
		}()
		if delay > 0 && !m.sleep(delay) {
			return
		}
		wait := connectDelay
		for attempt := 1; ; attempt++ {
			if explicit && !m.configured(u) {
				return
			}
			m.mu.Lock()
			delete(m.again, key) // this attempt answers every request made before it
			m.mu.Unlock()
			err := m.eng.DialRoute(u, explicit, gossipMode, account)
			if err == nil {
				connected = true
				return
			}
			if attempt == 1 || attempt%60 == 0 {
				m.log.Errorf("Error trying to connect to route (attempt %v): %v", attempt, err)
			} else {
				m.log.Debugf("Error trying to connect to route (attempt %v): %v", attempt, err)
			}
			if !explicit && attempt > m.cfg.ConnectRetries {
				return
			}
			if !m.sleep(wait) {
				return
			}
			if m.cfg.ConnectBackoff {
				wait = min(wait*2, connectMaxDelay)
			}
		}
	}()
}

func (m *Manager) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-m.stop:
		return false
	}
}

// RouteUp records a registered route (and its clients' URLs).
func (m *Manager) RouteUp(ri loop.RemoteRoute) {
	m.mu.Lock()
	if ri.Solicited && ri.Explicit && ri.URL != nil {
		m.urlFor[ri.ID] = ri.URL
	}
	m.remotes[ri.ID] = ri.ConnectURLs
	urls := m.clientURLs()
	m.mu.Unlock()
	if m.cfg.ClientURLs != nil && !m.cfg.NoAdvertise {
		m.cfg.ClientURLs(urls)
	}
}

// PoolNext dials the next connection of a pool.
func (m *Manager) PoolNext(ri loop.RemoteRoute) {
	if ri.URL != nil {
		m.connectPool(ri.URL, ri.Explicit, 0)
	}
}

// RouteDown redials a solicited route, unless another connection to the same server took
// its place (it then inherits the URL to redial) or it led back to this server. Each
// connection of a pool, and each pinned account's route, is redialled on its own.
func (m *Manager) RouteDown(ri loop.RemoteRoute, retry bool) {
	m.mu.Lock()
	if ri.Self && ri.URL != nil {
		m.self[ri.URL.Host] = true
		m.mu.Unlock()
		m.log.Debugf("Detected route to self, ignoring %q", ri.URL.Redacted())
		return
	}
	u, explicit := ri.URL, ri.Explicit
	if ri.ID != "" {
		if ri.Solicited && ri.Explicit && ri.URL != nil {
			// Even a duplicate we dialled tells which configured route reaches that server:
			// whichever connection to it survived is redialled there when it goes.
			m.urlFor[ri.ID] = ri.URL
		}
		if eu := m.urlFor[ri.ID]; eu != nil {
			u, explicit = eu, true
		}
	}
	connected := ri.ID != "" && m.eng.HasRoute(ri.ID)
	if ri.ID != "" && !connected {
		delete(m.remotes, ri.ID)
	}
	urls := m.clientURLs()
	m.mu.Unlock()
	if !connected {
		m.tellURLs(urls)
	}
	if ri.NoRetry || u == nil || !(ri.Solicited || retry || explicit) {
		return
	}
	switch {
	case ri.Account != "":
		// A pinned account's route: redialled unless another one to that server replaced it.
		if m.eng.HasPinnedRoute(ri.ID, ri.Account) {
			return
		}
	case ri.Pooled:
		// One connection of a pool: redial it (it takes a free slot; the first of a pool
		// dials the rest), whatever the others' state.
	default:
		// The only route to a server without pooling: not while another one is up.
		if connected {
			return
		}
	}
	delay := time.Duration(rand.Int64N(int64(reconnectJitter)))
	if explicit {
		delay += reconnectDelay
	}
	if ri.Pooled {
		m.connectPool(u, explicit, delay)
		return
	}
	m.connect(u, explicit, 0, delay, ri.Account)
}

func (m *Manager) tellURLs(urls []string) {
	if m.cfg.ClientURLs != nil && !m.cfg.NoAdvertise {
		m.cfg.ClientURLs(urls)
	}
}

// Gossip connects to a server another route told of, unless a route to it exists or is
// configured.
func (m *Manager) Gossip(ri loop.RemoteRoute) {
	if ri.URL == nil || m.configured(ri.URL) {
		return
	}
	if ri.Account != "" {
		if len(m.cfg.Pinned) == 0 || m.eng.HasPinnedRoute(ri.ID, ri.Account) {
			return
		}
	} else if m.eng.HasRoute(ri.ID) {
		return
	}
	u := *ri.URL
	if ri.AuthReq && m.cfg.Username != "" {
		u.User = url.UserPassword(m.cfg.Username, m.cfg.Password)
	}
	m.connect(&u, false, ri.GossipMode, 0, ri.Account)
}

// clientURLs is every other server's client URLs, once each. Callers hold m.mu.
func (m *Manager) clientURLs() []string {
	seen := make(map[string]bool)
	var out []string
	for _, l := range m.remotes {
		for _, u := range l {
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

var _ loop.RouteEvents = (*Manager)(nil)
