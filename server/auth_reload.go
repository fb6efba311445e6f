package server

import "reflect"

func init() { reloadAppliers = append(reloadAppliers, reloadAuth) }

// reloadAuth swaps the authentication configuration in the loop when any auth option
// changed; the loop re-checks every connected client on its own reactor.
func reloadAuth(s *Server, old, n *Options) error {
	if s.eng == nil {
		return nil
	}
	if old.Username == n.Username && old.Password == n.Password && old.Authorization == n.Authorization &&
		old.NoAuthUser == n.NoAuthUser && old.TLSMap == n.TLSMap &&
		reflect.DeepEqual(old.Users, n.Users) && reflect.DeepEqual(old.Nkeys, n.Nkeys) &&
		reflect.DeepEqual(old.DefaultPermissions, n.DefaultPermissions) {
		return nil
	}
	cfg, err := buildAuth(n)
	if err != nil {
		return err
	}
	s.eng.SetAuth(cfg)
	return nil
}
