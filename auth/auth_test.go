package auth

import (
	"encoding/base64"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestMatcherPublish(t *testing.T) {
	m := NewMatcher([]string{"foo.*", "bar.>", "baz"}, false)
	for s, want := range map[string]bool{
		"foo.a": true, "foo.a.b": false, "foo": false, "bar.a.b": true, "bar": false,
		"baz": true, "baz.x": false, "qux": false,
	} {
		if got := m.MatchPlain([]byte(s)); got != want {
			t.Errorf("%s: got %v want %v", s, got, want)
		}
	}
}

func TestSubAllowedQueues(t *testing.T) {
	p := Compile(&Permissions{Subscribe: &SubjectPermission{
		Allow: []string{"a.*", "q.> v1", "w.* v.*"},
		Deny:  []string{"a.secret", "a.* bad"},
	}})
	cases := []struct {
		s, q string
		ok   bool
	}{
		{"a.x", "", true}, {"a.secret", "", false}, {"a.x", "bad", false}, {"a.x", "good", true},
		{"q.x", "v1", true}, {"q.x", "v2", false}, {"q.x", "", false},
		{"w.x", "v.1", true}, {"w.x", "u", false}, {"a.*", "", true},
		{"a.>", "", true}, // as nats-server: ">" is taken as one token, which "a.*" matches
	}
	for _, c := range cases {
		if got := p.SubAllowed(c.s, c.q); got != c.ok {
			t.Errorf("%q %q: got %v want %v", c.s, c.q, got, c.ok)
		}
	}
	if !p.NeedsDeliveryFilter("a.*", false) || p.NeedsDeliveryFilter("a.x", false) {
		t.Error("delivery filter")
	}
	if !p.DeliveryDenied([]byte("a.secret")) || p.DeliveryDenied([]byte("a.x")) {
		t.Error("delivery denied")
	}
}

func TestResponsesTurnOffPublish(t *testing.T) {
	p := Compile(&Permissions{Response: &ResponsePermission{}})
	if p.PubAllowed([]byte("x")) || p.Resp.MaxMsgs != 1 || p.Resp.Expires != DefaultResponseExpires {
		t.Fatal(p.Resp)
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := New(Options{Token: "t", Username: "u"}); err != ErrUserPassAndToken {
		t.Fatal(err)
	}
	if _, err := New(Options{Users: []*User{{Username: "a"}}, NoAuthUser: "b"}); err != ErrNoAuthUser {
		t.Fatal(err)
	}
	if c, err := New(Options{}); c != nil || err != nil {
		t.Fatal(c, err)
	}
	if !IsBcrypt("$2a$11$abcdefghijklmnopqrstuv") || IsBcrypt("$2zz") {
		t.Fatal("bcrypt detection")
	}
	if n := NewNonce(); len(n) != 15 {
		t.Fatal(string(n))
	}
}

// Users and nkeys of accounts authenticate into their account; the authorization block's
// (and tokens, the single user, no_auth_user of the block) into the global one (""). The
// authorization block's default permissions never reach a user of an account.
func TestIdentityAccount(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	nonce := []byte("nonce-for-test")
	sig, _ := kp.Sign(nonce)
	def := &Permissions{Publish: &SubjectPermission{Allow: []string{"def.>"}}}
	c, err := New(Options{
		Users: []*User{
			{Username: "global", Password: "g"},
			{Username: "orders", Password: "o", Account: "ORDERS"},
			{Username: "guest", Account: "PUBLIC"},
		},
		Nkeys:              []*NkeyUser{{Nkey: pub, Account: "ORDERS"}},
		NoAuthUser:         "guest",
		DefaultPermissions: def,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cr      Creds
		account string
		defPerm bool
	}{
		{"block user", Creds{User: "global", Pass: "g"}, "", true},
		{"account user", Creds{User: "orders", Pass: "o"}, "ORDERS", false},
		{"account nkey", Creds{Nkey: pub, Sig: base64.RawURLEncoding.EncodeToString(sig), Nonce: nonce}, "ORDERS", false},
		{"no_auth_user of an account", Creds{}, "PUBLIC", false},
	} {
		id, ok := c.Authenticate(&tc.cr)
		if !ok || id.Account != tc.account {
			t.Errorf("%s: ok=%v identity %+v, want account %q", tc.name, ok, id, tc.account)
			continue
		}
		if got := id.Perms != nil && !id.Perms.PubAllowed([]byte("x")); got != tc.defPerm {
			t.Errorf("%s: default permissions applied = %v, want %v", tc.name, got, tc.defPerm)
		}
	}
	if id, ok := c.NoAuthIdentity(); !ok || id.Account != "PUBLIC" || id.Name != "guest" {
		t.Errorf("NoAuthIdentity = %+v %v", id, ok)
	}
	tok, _ := New(Options{Token: "t"})
	if id, ok := tok.Authenticate(&Creds{Token: "t"}); !ok || id.Account != "" {
		t.Errorf("token identity %+v %v", id, ok)
	}
}
