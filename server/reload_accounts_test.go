package server

import (
	"strings"
	"testing"
)

// TestReloadAccountsRules: what a reload may change of accounts, the system account and
// no_auth_user, on both servers (same verdict, same text).
func TestReloadAccountsRules(t *testing.T) {
	users := "authorization { users: [{user: a, password: a}, {user: b, password: b}] }\n"
	for _, tc := range []struct {
		name, before, after string
		err                 string // "" = reloaded
	}{
		{"exports and imports change", "accounts { A: { exports: [{stream: x}] }, B: {} }\n",
			"accounts { A: { exports: [{stream: x}, {service: y}] }, B: { imports: [{service: {account: A, subject: y}}] }, C: {} }\n", ""},
		{"account limits change", "accounts { A: {} }\n", "accounts { A: { limits: { max_connections: 3 } } }\n", ""},
		{"no_system_account turned on", "accounts { A: {} }\n", "no_system_account: true\naccounts { A: {} }\n",
			"config reload not supported for NoSystemAccount: old=false, new=true"},
		{"system account changed", "system_account: A\naccounts { A: {}, B: {} }\n", "system_account: B\naccounts { A: {}, B: {} }\n",
			"config reload not supported for SystemAccount: old=A, new=B"},
		{"system account set", "accounts { A: {}, B: {} }\n", "system_account: B\naccounts { A: {}, B: {} }\n",
			"config reload not supported for SystemAccount: old=, new=B"},
		{"declared $SYS named", "accounts { $SYS: {} }\n", "system_account: \"$SYS\"\naccounts { $SYS: {} }\n", ""},
		{"$SYS unset", "system_account: \"$SYS\"\naccounts { $SYS: {} }\n", "accounts { $SYS: {} }\n", ""},
		{"no_auth_user added", users, users + "no_auth_user: a\n",
			"config reload not supported for NoAuthUser: old=, new=a"},
		{"no_auth_user changed", users + "no_auth_user: a\n", users + "no_auth_user: b\n",
			"config reload not supported for NoAuthUser: old=a, new=b"},
		{"no_auth_user removed, user kept", users + "no_auth_user: a\n", users,
			"config reload not supported for NoAuthUser: old=a, new="},
		{"no_auth_user removed with its user", users + "no_auth_user: a\n", "authorization { users: [{user: b, password: b}] }\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forBoth(t, tc.before, func(t *testing.T, s *compatServer) {
				s.write(tc.after)
				err := s.reload()
				switch {
				case tc.err == "" && err != nil:
					t.Fatalf("reload: %v", err)
				case tc.err != "" && (err == nil || err.Error() != tc.err):
					t.Fatalf("reload: %v, want %q", err, tc.err)
				}
			})
		})
	}
}

// Until the routing core lands, a reload to users in an account (or server-wide mappings)
// is refused like start-up is, and nothing is applied (nats-server would reload it).
func TestReloadAccountsUnsupported(t *testing.T) {
	s := startCompat(t, "natsd", "authorization { users: [{user: a, password: a}] }\n")
	for _, after := range []string{
		"accounts { A: { users: [{user: a, password: a}] } }\n",
		"authorization { users: [{user: a, password: a}] }\nmappings { x: y }\n",
	} {
		s.write(after)
		if err := s.reload(); err == nil || !strings.Contains(err.Error(), "not supported yet") {
			t.Fatalf("%q: reload: %v", after, err)
		}
	}
	r := s.dial()
	r.send("CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"a\"}\r\nPING\r\n")
	r.expect("PONG\r\n")
}
