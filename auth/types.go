// Package auth holds natsd's authentication and authorization model: users, tokens, nkeys
// and per-user publish/subscribe permissions, with nats-server's semantics.
package auth

import "time"

// SubjectPermission is an allow/deny list of subjects (wildcards allowed; a subscribe entry
// may be "subject queue" to scope it to a queue group).
type SubjectPermission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// ResponsePermission lets a user publish to reply subjects of requests it received
// (allow_responses): at most MaxMsgs replies within Expires.
type ResponsePermission struct {
	MaxMsgs int           `json:"max"`
	Expires time.Duration `json:"ttl"`
}

// Permissions are one user's publish and subscribe rights.
type Permissions struct {
	Publish   *SubjectPermission  `json:"publish"`
	Subscribe *SubjectPermission  `json:"subscribe"`
	Response  *ResponsePermission `json:"responses,omitempty"`
}

// User is a user/password identity (Password may be a bcrypt hash, "$2a$...").
type User struct {
	Username    string
	Password    string
	Permissions *Permissions
	Account     string
	// AllowedConnectionTypes limits the kinds of connection the user may make (STANDARD,
	// WEBSOCKET, ...); empty allows all.
	AllowedConnectionTypes []string
}

// NkeyUser is an nkey identity: the public user key, proven by signing the INFO nonce.
type NkeyUser struct {
	Nkey                   string
	Permissions            *Permissions
	Account                string
	AllowedConnectionTypes []string
}
