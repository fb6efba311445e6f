package server

import (
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

// A reload that moves a connected user into an account closes its connection without an
// error, as nats-server does; a new connection of that user lands in the account.
func TestReloadMovesUserToAccount(t *testing.T) {
	for _, name := range []string{"nats-server", "natsd"} {
		t.Run(name, func(t *testing.T) {
			s := startCompat(t, name, "authorization { users: [{user: a, password: a}, {user: b, password: b}] }\n")
			r := s.dial()
			r.send("CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"a\"}\r\nPING\r\n")
			r.expect("PONG\r\n")
			s.write("accounts { A: { users: [{user: a, password: a}] } }\nauthorization { users: [{user: b, password: b}] }\n")
			if err := s.reload(); err != nil {
				t.Fatal(err)
			}
			r.expectClosed()
			// a is in A now, b in $G: they do not see each other.
			ra, rb := s.dial(), s.dial()
			ra.send("CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"a\"}\r\nSUB x 1\r\nPING\r\n")
			ra.expect("PONG\r\n")
			rb.send("CONNECT {\"verbose\":false,\"user\":\"b\",\"pass\":\"b\"}\r\nSUB x 1\r\nPUB x 1\r\nb\r\nPING\r\n")
			rb.expect("MSG x 1 1\r\n")
			rb.expect("b\r\n")
			rb.expect("PONG\r\n")
			ra.send("PUB x 1\r\na\r\nPING\r\n")
			ra.expect("MSG x 1 1\r\n")
			ra.expect("a\r\n")
			ra.expect("PONG\r\n")
			rb.send("PING\r\n")
			rb.expect("PONG\r\n")
		})
	}
}
