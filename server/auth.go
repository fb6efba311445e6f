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
