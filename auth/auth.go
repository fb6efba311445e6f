package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"

	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
)

// Options is what the server's options say about client authentication.
type Options struct {
	Username, Password string
	Token              string
	Users              []*User
	Nkeys              []*NkeyUser
	NoAuthUser         string
	DefaultPermissions *Permissions
	// TLSMap: verify_and_map, the client certificate names the user.
	TLSMap bool
}

// Config is a compiled authentication configuration. It is immutable once built and safe to
// use from any goroutine; a reload builds a new one.
type Config struct {
	token              string
	username, password string
	users              map[string]*userEntry
	nkeys              map[string]*nkeyEntry
	noAuthUser         string
	tlsMap             bool
	required           bool
}

type userEntry struct {
	u     *User
	perms *Perms
}

type nkeyEntry struct {
	u     *NkeyUser
	perms *Perms
}

// Errors of New, worded as nats-server's.
var (
	ErrUserPassAndToken = errors.New("Cannot have a user/pass and token")
	ErrNoAuthUser       = errors.New("no_auth_user not present as user or nkey in authorization block or account configuration")
)

// New compiles o; it returns nil (and no error) when o configures no authentication.
func New(o Options) (*Config, error) {
	if o.Token != "" && o.Username != "" {
		return nil, ErrUserPassAndToken
	}
	c := &Config{
		token:      o.Token,
		username:   o.Username,
		password:   o.Password,
		noAuthUser: o.NoAuthUser,
		tlsMap:     o.TLSMap,
	}
	if len(o.Users) > 0 {
		c.users = make(map[string]*userEntry, len(o.Users))
		for _, u := range o.Users {
			c.users[u.Username] = &userEntry{u: u, perms: compileOr(u.Account, u.Permissions, o.DefaultPermissions)}
		}
	}
	if len(o.Nkeys) > 0 {
		c.nkeys = make(map[string]*nkeyEntry, len(o.Nkeys))
		for _, u := range o.Nkeys {
			c.nkeys[u.Nkey] = &nkeyEntry{u: u, perms: compileOr(u.Account, u.Permissions, o.DefaultPermissions)}
		}
	}
	c.required = c.token != "" || c.username != "" || len(c.users) > 0 || len(c.nkeys) > 0
	if !c.required {
		return nil, nil
	}
	if c.noAuthUser != "" && c.users[c.noAuthUser] == nil && c.nkeys[c.noAuthUser] == nil {
		return nil, ErrNoAuthUser
	}
	return c, nil
}

// Required reports whether clients must authenticate (INFO auth_required).
func (c *Config) Required() bool { return c != nil && c.required }

// MapsCerts reports whether client certificates name the users (verify_and_map).
func (c *Config) MapsCerts() bool { return c != nil && c.tlsMap }

// NeedsNonce reports whether INFO carries a nonce (nkey users configured).
func (c *Config) NeedsNonce() bool { return c != nil && len(c.nkeys) > 0 }

// Creds are what a client presented: CONNECT fields, the nonce it was sent, and its
// verified certificate chain (TLS).
type Creds struct {
	User, Pass, Token string
	Nkey, Sig         string
	Nonce             []byte
	Certs             []*x509.Certificate
}

// Identity is an authenticated client.
type Identity struct {
	Name  string // user name, nkey, or "" for token
	Nkey  bool   // Name is an nkey
	Perms *Perms // nil: no restrictions
	// Account is the account the user belongs to; "" is the global account ($G), as for
	// tokens, the single user and users of the authorization block.
	Account string
}

var bcryptRe = regexp.MustCompile(`^\$2[abxy]\$\d{2}\$.*`)

// IsBcrypt reports whether a configured password or token is a bcrypt hash.
func IsBcrypt(s string) bool { return strings.HasPrefix(s, "$") && bcryptRe.MatchString(s) }

// Expensive reports whether checking cr costs enough (bcrypt, ed25519) that it must not run
// on a reactor.
func (c *Config) Expensive(cr *Creds) bool {
	if c == nil {
		return false
	}
	if cr.Nkey != "" && c.nkeys != nil {
		return true
	}
	if c.token != "" {
		return IsBcrypt(c.token)
	}
	if c.username != "" && c.users == nil {
		return IsBcrypt(c.password)
	}
	if cr.User != "" {
		if u := c.users[cr.User]; u != nil {
			return IsBcrypt(u.u.Password)
		}
	}
	return false
}

func comparePasswords(server, client string) bool {
	if IsBcrypt(server) {
		return bcrypt.CompareHashAndPassword([]byte(server), []byte(client)) == nil
	}
	return subtle.ConstantTimeCompare([]byte(server), []byte(client)) == 1
}

func noCreds(cr *Creds) bool {
	return cr.User == "" && cr.Pass == "" && cr.Token == "" && cr.Nkey == ""
}

// NoAuthIdentity is the identity of a client that sent no credentials at all (ops before
// CONNECT), when no_auth_user is configured.
func (c *Config) NoAuthIdentity() (*Identity, bool) {
	if c == nil || c.noAuthUser == "" {
		return nil, false
	}
	if n := c.nkeys[c.noAuthUser]; n != nil {
		if !standardAllowed(n.u.AllowedConnectionTypes) {
			return nil, false
		}
		return &Identity{Name: n.u.Nkey, Nkey: true, Perms: n.perms, Account: n.u.Account}, true
	}
	if u := c.users[c.noAuthUser]; u != nil {
		if !standardAllowed(u.u.AllowedConnectionTypes) {
			return nil, false
		}
		if IsBcrypt(u.u.Password) {
			// nats-server checks no_auth_user's password against itself (NoAuthCreds), which
			// a bcrypt hash never matches: such a no_auth_user lets nobody in.
			return nil, false
		}
		return &Identity{Name: u.u.Username, Perms: u.perms, Account: u.u.Account}, true
	}
	return nil, false
}

// NoAuthCreds fills cr, which holds no credentials, with no_auth_user's, as nats-server
// writes them into the client's options: a later CONNECT (merged over them) or a reload then
// checks those.
func (c *Config) NoAuthCreds(cr *Creds) {
	if c == nil || c.noAuthUser == "" {
		return
	}
	if n := c.nkeys[c.noAuthUser]; n != nil {
		cr.Nkey = n.u.Nkey
	} else if u := c.users[c.noAuthUser]; u != nil {
		cr.User, cr.Pass = u.u.Username, u.u.Password
	}
}

// Authenticate checks cr with nats-server's order: nkeys, then users (or the certificate with
// verify_and_map), then the single token or user. A client with no credentials at all gets
// no_auth_user's, written into cr (see NoAuthCreds). It may run bcrypt: call it off the
// reactor when Expensive says so.
func (c *Config) Authenticate(cr *Creds) (*Identity, bool) {
	if !c.Required() {
		return &Identity{}, true
	}
	if noCreds(cr) && c.noAuthUser != "" && !c.tlsMap {
		id, ok := c.NoAuthIdentity()
		if ok {
			c.NoAuthCreds(cr)
		}
		return id, ok
	}
	if c.nkeys != nil && cr.Nkey != "" {
		n := c.nkeys[cr.Nkey]
		if n == nil {
			return nil, false
		}
		// no_auth_user's nkey needs no signature (nats-server).
		if n.u.Nkey != c.noAuthUser && !verifyNonce(cr) {
			return nil, false
		}
		if !standardAllowed(n.u.AllowedConnectionTypes) {
			return nil, false
		}
		return &Identity{Name: n.u.Nkey, Nkey: true, Perms: n.perms, Account: n.u.Account}, true
	}
	if c.users != nil {
		var ue *userEntry
		if c.tlsMap {
			ue = c.mapCert(cr.Certs)
			if ue == nil {
				return nil, false
			}
		} else if cr.User != "" {
			ue = c.users[cr.User]
			if ue == nil {
				return nil, false
			}
		}
		if ue != nil {
			// With verify_and_map too: the certificate names the user (a user in CONNECT is
			// ignored), and CONNECT's password must still be that user's, empty for none.
			if !comparePasswords(ue.u.Password, cr.Pass) || !standardAllowed(ue.u.AllowedConnectionTypes) {
				return nil, false
			}
			return &Identity{Name: ue.u.Username, Perms: ue.perms, Account: ue.u.Account}, true
		}
	}
	if c.token != "" {
		return &Identity{}, comparePasswords(c.token, cr.Token)
	}
	if c.username != "" {
		if cr.User != c.username {
			return nil, false
		}
		return &Identity{Name: c.username}, comparePasswords(c.password, cr.Pass)
	}
	return nil, false
}

func verifyNonce(cr *Creds) bool {
	if cr.Sig == "" || len(cr.Nonce) == 0 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(cr.Sig)
	if err != nil {
		sig, err = base64.StdEncoding.DecodeString(cr.Sig)
		if err != nil {
			return false
		}
	}
	pub, err := nkeys.FromPublicKey(cr.Nkey)
	if err != nil {
		return false
	}
	return pub.Verify(cr.Nonce, sig) == nil
}

// mapCert finds the user a client certificate names: e-mail addresses, DNS names and URIs
// first, then the subject's distinguished name (verify_and_map).
func (c *Config) mapCert(certs []*x509.Certificate) *userEntry {
	if len(certs) == 0 {
		return nil
	}
	cert := certs[0]
	for _, e := range cert.EmailAddresses {
		if u := c.users[e]; u != nil {
			return u
		}
	}
	for _, d := range cert.DNSNames {
		if u := c.users[d]; u != nil {
			return u
		}
	}
	for _, uri := range cert.URIs {
		if u := c.users[uri.String()]; u != nil {
			return u
		}
	}
	rdn := cert.Subject.ToRDNSequence().String()
	if u := c.users[rdn]; u != nil {
		return u
	}
	certDN := parseDN(rdn)
	if len(certDN) == 0 {
		return nil
	}
	for name, u := range c.users {
		if dn := parseDN(name); len(dn) > 0 && sameDN(dn, certDN) {
			return u
		}
	}
	return nil
}

// parseDN splits "CN=a,O=b" into normalised "TYPE=value" attributes (escaped commas kept).
func parseDN(s string) []string {
	var out []string
	var cur strings.Builder
	esc := false
	flush := func() bool {
		k, v, ok := strings.Cut(cur.String(), "=")
		cur.Reset()
		if !ok {
			return false
		}
		out = append(out, strings.ToUpper(strings.TrimSpace(k))+"="+strings.TrimSpace(v))
		return true
	}
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\':
			cur.WriteRune(r)
			esc = true
		case r == ',' || r == '+':
			if !flush() {
				return nil
			}
		default:
			cur.WriteRune(r)
		}
	}
	if !flush() {
		return nil
	}
	return out
}

// sameDN matches two DNs as sets of attributes (order-independent, as nats-server's RDN match).
func sameDN(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]int, len(a))
	for _, x := range a {
		seen[x]++
	}
	for _, y := range b {
		if seen[y] == 0 {
			return false
		}
		seen[y]--
	}
	return true
}

// NewNonce returns a fresh 15-character base64url challenge for INFO's nonce (11 random
// bytes, as nats-server).
func NewNonce() []byte {
	var raw [11]byte
	_, _ = rand.Read(raw[:])
	b := make([]byte, base64.RawURLEncoding.EncodedLen(len(raw)))
	base64.RawURLEncoding.Encode(b, raw[:])
	return b
}

// compileOr compiles a user's own permissions, or the defaults for users that have none.
// The defaults are the authorization block's: they never reach a user of an account (an
// account's own default permissions are given to its users when the config is read).
func compileOr(account string, own, def *Permissions) *Perms {
	if own == nil && account == "" {
		own = def
	}
	return Compile(own)
}

// UserAccount reports whether the configuration has the user (an nkey when nkey is set) and
// which account it belongs to ("" for the global one). A reload closes the clients of users
// that went away or moved to another account, without an error, as nats-server does.
func (c *Config) UserAccount(name string, nkey bool) (account string, ok bool) {
	if c == nil {
		return "", false
	}
	if nkey {
		if n := c.nkeys[name]; n != nil {
			return n.u.Account, true
		}
		return "", false
	}
	if u := c.users[name]; u != nil {
		return u.u.Account, true
	}
	if c.username != "" && c.username == name {
		return "", true
	}
	return "", false
}

// standardAllowed reports whether a user with these allowed connection types may connect as
// a plain (STANDARD) client; an empty list allows every type.
func standardAllowed(types []string) bool {
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if strings.EqualFold(t, "STANDARD") {
			return true
		}
	}
	return false
}
