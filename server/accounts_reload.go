package server

import "reflect"

// Accounts are reloaded before authentication (this file's init runs first): a client whose
// user moved to another account must find that account in place when its credentials are
// checked again.
func init() { reloadAppliers = append(reloadAppliers, reloadAccounts) }

func reloadAccounts(s *Server, old, n *Options) error {
	if s.eng == nil || (reflect.DeepEqual(old.Accounts, n.Accounts) && reflect.DeepEqual(old.Mappings, n.Mappings)) {
		return nil
	}
	return s.eng.ConfigureAccounts(accountSpecs(n))
}
