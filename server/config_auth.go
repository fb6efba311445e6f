package server

// The authorization {} block: single user, token, users/nkeys with permissions, default
// permissions and the auth timeout, with nats-server's key names and error texts.

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/sublist"
)

// Defaults of allow_responses (nats-server's DEFAULT_ALLOW_RESPONSE_*).
const (
	defaultAllowResponseMaxMsgs = 1
	defaultAllowResponseExpires = 2 * time.Minute
)

// authBlock is what one authorization {} block says; the top-level block and the cluster's
// apply different rules to it.
type authBlock struct {
	user, pass, token string
	users             []*auth.User
	nkeys             []*auth.NkeyUser
	usersSet          bool
	perms             *auth.Permissions // default_permissions, permissions
	timeout           time.Duration
	timeoutSet        bool
	callout           *entry // auth_callout / auth_hook, when given
}

// authBlock parses an authorization {} block's keys with nats-server's texts; prefix is the
// block's key path for the unsupported-keys report ("authorization.").
func (p *cfgParser) authBlock(e entry, prefix string) (*authBlock, bool) {
	am, ok := p.mapping(e)
	if !ok {
		return nil, false
	}
	b := &authBlock{}
	for _, f := range p.entries(am) {
		switch strings.ToLower(f.key) {
		case "user", "username":
			b.user, _ = p.str(f)
		case "pass", "password":
			b.pass, _ = p.str(f)
		case "token":
			b.token, _ = p.str(f)
		case "timeout":
			d, ok := p.seconds(f, "authorization", true)
			if !ok {
				continue
			}
			if d > 60*time.Second {
				p.warn(f.tk, f.key, fmt.Sprintf("timeout of %v (%f seconds) is high, consider keeping it under 60 seconds. possibly caused by unquoted duration; use '1m' instead of 1m, for example", f.v, d.Seconds()))
			}
			b.timeout, b.timeoutSet = d, true
		case "users":
			b.usersSet = true
			b.nkeys, b.users = p.users(f)
		case "default_permission", "default_permissions", "permissions":
			b.perms = p.permissions(f)
		case "auth_callout", "auth_hook":
			if f.tk == nil || !f.tk.IsUsedVariable() {
				b.callout = &f
			}
		case "proxy_required":
			if _, ok := p.boolean(f); ok {
				p.unsupported(f.tk, prefix+f.key)
			}
		default:
			p.unknown(f.tk, f.key)
		}
	}
	return b, true
}

func (p *cfgParser) authorization(o *Options, e entry) {
	b, ok := p.authBlock(e, "authorization.")
	if !ok {
		return
	}
	if b.timeoutSet {
		o.AuthTimeout = b.timeout
	}
	if c := b.callout; c != nil {
		p.fail(c.tk, "%q (authorization callout) is not supported yet", c.key)
	}
	user, pass, token := b.user, b.pass, b.token
	users, nks, usersSet, defPerms := b.users, b.nkeys, b.usersSet, b.perms
	if (user != "" || pass != "") && token != "" {
		p.fail(e.tk, "Cannot have a user/pass and token")
		return
	}
	p.authUser, p.authToken = user, token
	// Users from accounts written earlier count as a users array too (nats-server checks
	// the other order, accounts after authorization, in the accounts block).
	if usersSet || len(p.userNames) > 0 {
		if user != "" {
			p.fail(e.tk, "Can not have a single user/pass and a users array")
			return
		}
		if token != "" {
			p.fail(e.tk, "Can not have a token and a users array")
			return
		}
	}
	seen := p.userNames
	for _, u := range users {
		if seen[u.Username] {
			p.fail(e.tk, "Duplicate user %q detected", u.Username)
			return
		}
		seen[u.Username] = true
	}
	for _, u := range nks {
		if seen[u.Nkey] {
			p.fail(e.tk, "Duplicate nkey %q detected", u.Nkey)
			return
		}
		seen[u.Nkey] = true
	}
	if defPerms != nil {
		for _, u := range users {
			if u.Permissions == nil {
				u.Permissions = defPerms
			}
		}
		for _, u := range nks {
			if u.Permissions == nil {
				u.Permissions = defPerms
			}
		}
	}
	o.Username, o.Password, o.Authorization = user, pass, token
	// Users of accounts written earlier stay; the block's own follow them.
	p.allUsers, p.allNkeys, p.usersSet = append(p.allUsers, users...), append(p.allNkeys, nks...), true
	o.DefaultPermissions = defPerms
	o.AuthBlockDefined = true
}

// users parses the users array: {user, password, permissions} or {nkey, permissions}.
func (p *cfgParser) users(e entry) ([]*auth.NkeyUser, []*auth.User) {
	arr, ok := e.v.([]any)
	if !ok {
		p.fail(e.tk, "Expected users field to be an array, got %s", typeName(e.v))
		return nil, nil
	}
	var nks []*auth.NkeyUser
	users := []*auth.User{}
	for _, raw := range arr {
		tk, v := p.unwrap(raw)
		if tk == nil {
			tk = e.tk
		}
		um, ok := v.(map[string]any)
		if !ok {
			p.fail(tk, "Expected user entry to be a map/struct, got %s", typeName(v))
			continue
		}
		u := &auth.User{}
		nk := &auth.NkeyUser{}
		var perms *auth.Permissions
		for _, f := range p.entries(um) {
			switch strings.ToLower(f.key) {
			case "nkey":
				nk.Nkey, _ = p.str(f)
			case "user", "username":
				u.Username, _ = p.str(f)
			case "pass", "password":
				u.Password, _ = p.str(f)
			case "permission", "permissions", "authorization":
				perms = p.permissions(f)
			case "allowed_connection_types", "connection_types", "clients":
				types := p.connectionTypes(f)
				u.AllowedConnectionTypes, nk.AllowedConnectionTypes = types, types
			case "proxy_required":
				if _, ok := p.boolean(f); ok {
					p.unsupported(f.tk, "users."+f.key)
				}
			default:
				p.unknown(f.tk, f.key)
			}
		}
		switch {
		case nk.Nkey == "" && u.Username == "":
			p.fail(tk, "User entry requires a user")
		case nk.Nkey != "":
			if !nkeys.IsValidPublicUserKey(nk.Nkey) {
				p.fail(tk, "Not a valid public nkey for a user")
				continue
			}
			if u.Username != "" || u.Password != "" {
				p.fail(tk, "Nkey users do not take usernames or passwords")
				continue
			}
			nk.Permissions = perms
			nks = append(nks, nk)
		default:
			u.Permissions = perms
			users = append(users, u)
		}
	}
	return nks, users
}

// connectionTypes parses allowed_connection_types. natsd serves STANDARD client connections
// only, so a list without STANDARD shuts the user out (as on nats-server for those clients).
func (p *cfgParser) connectionTypes(e entry) []string {
	var names []string
	switch v := e.v.(type) {
	case string:
		names = []string{v}
	case []any:
		for _, raw := range v {
			tk, s := p.unwrap(raw)
			str, ok := s.(string)
			if !ok {
				p.fail(tk, "error parsing allowed connection types: unsupported type %s", typeName(s))
				return nil
			}
			names = append(names, str)
		}
	default:
		p.fail(e.tk, "error parsing allowed connection types: unsupported type %s", typeName(e.v))
		return nil
	}
	for _, n := range names {
		switch strings.ToUpper(n) {
		case "STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS":
		default:
			p.fail(e.tk, "unknown connection type %q", n)
			return nil
		}
	}
	if names == nil {
		names = []string{} // given, but empty: nats-server then allows any type
	}
	return names
}

// permissions parses {publish, subscribe, allow_responses}; publish and subscribe take a
// subject, a list, or {allow, deny}.
func (p *cfgParser) permissions(e entry) *auth.Permissions {
	pm, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "Expected permissions to be a map/struct, got %s", typeName(e.v))
		return nil
	}
	perms := &auth.Permissions{}
	for _, f := range p.entries(pm) {
		switch strings.ToLower(f.key) {
		case "pub", "publish", "import":
			perms.Publish = p.subjectPermission(f, false)
		case "sub", "subscribe", "export":
			perms.Subscribe = p.subjectPermission(f, true)
		case "publish_allow_responses", "allow_responses":
			if b, ok := f.v.(bool); ok {
				if b {
					perms.Response = &auth.ResponsePermission{MaxMsgs: defaultAllowResponseMaxMsgs, Expires: defaultAllowResponseExpires}
				}
			} else {
				perms.Response = p.allowResponses(f)
			}
		default:
			if f.tk == nil || !f.tk.IsUsedVariable() {
				p.fail(f.tk, "Unknown field %q parsing permissions", f.key)
			}
		}
	}
	if perms.Response != nil {
		// Responses are allowed on top of an explicit publish list: no blanket allow.
		if perms.Publish == nil {
			perms.Publish = &auth.SubjectPermission{}
		}
		if perms.Publish.Allow == nil {
			perms.Publish.Allow = []string{}
		}
	}
	return perms
}

func (p *cfgParser) subjectPermission(e entry, allowQueue bool) *auth.SubjectPermission {
	m, ok := e.v.(map[string]any)
	if !ok {
		subs, ok := p.permSubjects(e, allowQueue)
		if !ok {
			return nil
		}
		return &auth.SubjectPermission{Allow: subs}
	}
	if len(m) == 0 {
		return nil
	}
	sp := &auth.SubjectPermission{}
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "allow":
			sp.Allow, _ = p.permSubjects(f, allowQueue)
		case "deny":
			sp.Deny, _ = p.permSubjects(f, allowQueue)
		default:
			if f.tk == nil || !f.tk.IsUsedVariable() {
				p.fail(f.tk, "Unknown field name %q parsing subject permissions, only 'allow' or 'deny' are permitted", f.key)
			}
		}
	}
	return sp
}

func (p *cfgParser) permSubjects(e entry, allowQueue bool) ([]string, bool) {
	var subs []string
	switch v := e.v.(type) {
	case string:
		subs = []string{v}
	case []any:
		for _, raw := range v {
			tk, s := p.unwrap(raw)
			str, ok := s.(string)
			if !ok {
				if tk == nil {
					tk = e.tk
				}
				p.fail(tk, "Subject in permissions array cannot be cast to string")
				return nil, false
			}
			subs = append(subs, str)
		}
	default:
		p.fail(e.tk, "Expected subject permissions to be a subject, or array of subjects, got %s", typeName(e.v))
		return nil, false
	}
	for _, s := range subs {
		if sublist.ValidSubject([]byte(s)) {
			continue
		}
		f := strings.Fields(s)
		switch {
		case !allowQueue || len(f) != 2:
			p.fail(e.tk, "subject %q is not a valid subject", s)
		case !sublist.ValidSubject([]byte(f[0])):
			p.fail(e.tk, "subject %q is not a valid subject", f[0])
		case !sublist.ValidSubject([]byte(f[1])):
			p.fail(e.tk, "queue %q is not a valid queue", f[1])
		default:
			continue
		}
		return nil, false
	}
	return subs, true
}

func (p *cfgParser) allowResponses(e entry) *auth.ResponsePermission {
	m, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "error parsing response permissions, expected a boolean or a map")
		return nil
	}
	rp := &auth.ResponsePermission{MaxMsgs: defaultAllowResponseMaxMsgs, Expires: defaultAllowResponseExpires}
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "max", "max_msgs", "max_messages", "max_responses":
			// Negative means unlimited; 0 keeps the default.
			if n, ok := p.intRange(f, -1<<31, 1<<31-1); ok && n != 0 {
				rp.MaxMsgs = n
			}
		case "expires", "expiration", "ttl":
			s, ok := f.v.(string)
			if !ok {
				p.fail(f.tk, "error parsing expires, not a duration string")
				return nil
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				p.fail(f.tk, "error parsing expires: %v", err)
				return nil
			}
			if d != 0 {
				rp.Expires = d
			}
		default:
			if f.tk == nil || !f.tk.IsUsedVariable() {
				p.fail(f.tk, "Unknown field %q parsing permissions", f.key)
			}
		}
	}
	return rp
}
