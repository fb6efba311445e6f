package server

import (
	"strings"

	"github.com/nats-io/nuid"

	"github.com/natsd/natsd/auth"
)

// buildAuth compiles the authentication options; nil when none are configured.
func buildAuth(o *Options) (*auth.Config, error) {
	users, noAuth := o.Users, o.NoAuthUser
	if o.ImplicitGlobalNoAuth() {
		// nats-server's hidden user in $G, so that clients without credentials still get in
		// when the only account a file declares is the system account.
		users = append(append([]*auth.User(nil), users...), &auth.User{Username: implicitGlobalUser})
		noAuth = implicitGlobalUser
	}
	return auth.New(auth.Options{
		Username:           o.Username,
		Password:           o.Password,
		Token:              o.Authorization,
		Users:              users,
		Nkeys:              o.Nkeys,
		NoAuthUser:         noAuth,
		DefaultPermissions: o.DefaultPermissions,
		TLSMap:             o.TLSMap,
	})
}

// implicitGlobalUser is the hidden no_auth_user's name, one per process (nats-server's
// "nats-" and a random suffix).
var implicitGlobalUser = "nats-" + strings.ToLower(nuid.Next()[:12])

// authRequired is INFO's auth_required.
func authRequired(o *Options) bool {
	return o.Username != "" || o.Authorization != "" || len(o.Users) > 0 || len(o.Nkeys) > 0
}

// authConfig is the compiled auth of o (validated by New).
func (s *Server) authConfig(o *Options) *auth.Config {
	cfg, err := buildAuth(o)
	if err != nil {
		s.log.Errorf("authorization: %v", err)
	}
	return cfg
}

// plaintextPasswords reports what nats-server warns of at start-up: a password (of the single
// user or of any user) that is not a bcrypt hash. A user without one that a client certificate
// can name (verify_and_map on the client listener) does not count.
func plaintextPasswords(o *Options) bool {
	if o.Password != "" && !auth.IsBcrypt(o.Password) {
		return true
	}
	for _, u := range o.Users {
		if u.Password == "" && o.TLSMap && standardAllowed(u) {
			continue
		}
		if !auth.IsBcrypt(u.Password) {
			return true
		}
	}
	return false
}

// standardAllowed: the user may make plain client connections (no allowed_connection_types,
// or STANDARD among them).
func standardAllowed(u *auth.User) bool {
	if len(u.AllowedConnectionTypes) == 0 {
		return true
	}
	for _, t := range u.AllowedConnectionTypes {
		if strings.EqualFold(t, "STANDARD") {
			return true
		}
	}
	return false
}
