package server

import (
	"github.com/natsd/natsd/auth"
)

// buildAuth compiles the authentication options; nil when none are configured.
func buildAuth(o *Options) (*auth.Config, error) {
	return auth.New(auth.Options{
		Username:           o.Username,
		Password:           o.Password,
		Token:              o.Authorization,
		Users:              o.Users,
		Nkeys:              o.Nkeys,
		NoAuthUser:         o.NoAuthUser,
		DefaultPermissions: o.DefaultPermissions,
		TLSMap:             o.TLSMap,
	})
}

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
