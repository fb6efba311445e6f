package auth

import (
	"strings"
	"time"
)

// Defaults of allow_responses, as nats-server.
const (
	DefaultResponseMaxMsgs = 1
	DefaultResponseExpires = 2 * time.Minute
)

// Perms is a compiled permission set: immutable, shared by every connection of a user.
type Perms struct {
	PubAllow, PubDeny *Matcher // nil: no list
	SubAllow, SubDeny *Matcher
	// Resp is allow_responses (defaults filled in); nil when not granted.
	Resp *ResponsePermission
	// subDeny lists the subscribe deny subjects, for the delivery-time filter of wildcard
	// subscriptions that overlap them.
	subDeny []string
}

// Compile builds the matchers of p; nil p (no permissions) gives nil.
func Compile(p *Permissions) *Perms {
	if p == nil {
		return nil
	}
	cp := &Perms{}
	pub := p.Publish
	if p.Response != nil {
		rp := *p.Response
		if rp.MaxMsgs == 0 {
			rp.MaxMsgs = DefaultResponseMaxMsgs
		}
		if rp.Expires == 0 {
			rp.Expires = DefaultResponseExpires
		}
		cp.Resp = &rp
		// Granting responses turns off the blanket publish allow (nats-server does the same).
		if pub == nil || pub.Allow == nil {
			np := SubjectPermission{Allow: []string{}}
			if pub != nil {
				np.Deny = pub.Deny
			}
			pub = &np
		}
	}
	if pub != nil {
		if pub.Allow != nil {
			cp.PubAllow = NewMatcher(pub.Allow, false)
		}
		if len(pub.Deny) > 0 {
			var deny []string
			for _, d := range pub.Deny {
				// A queue qualifier means nothing for publish: keep the subject's scope.
				if f := strings.Fields(d); len(f) > 0 {
					deny = append(deny, f[0])
				}
			}
			cp.PubDeny = NewMatcher(deny, false)
		}
	}
	if s := p.Subscribe; s != nil {
		if len(s.Allow) > 0 {
			cp.SubAllow = NewMatcher(s.Allow, true)
		}
		if len(s.Deny) > 0 {
			cp.SubDeny = NewMatcher(s.Deny, true)
			for _, d := range s.Deny {
				if f := strings.Fields(d); len(f) > 0 {
					cp.subDeny = append(cp.subDeny, f[0])
				}
			}
		}
	}
	return cp
}

// HasPub reports whether publishing is restricted at all.
func (p *Perms) HasPub() bool { return p != nil && (p.PubAllow != nil || p.PubDeny != nil) }

// PubAllowed checks subject against the publish allow and deny lists (not the dynamic
// response permission). It does not allocate.
func (p *Perms) PubAllowed(subject []byte) bool {
	if p == nil {
		return true
	}
	if p.PubAllow != nil && !p.PubAllow.MatchPlain(subject) {
		return false
	}
	if p.PubDeny != nil && p.PubDeny.MatchPlain(subject) {
		return false
	}
	return true
}

// SubAllowed checks a subscription (queue may be empty) against the subscribe lists with
// nats-server's rules: a plain allow entry allows any queue; queue entries allow only their
// queues; deny entries work the same way in reverse.
func (p *Perms) SubAllowed(subject, queue string) bool {
	if p == nil {
		return true
	}
	allowed := true
	if p.SubAllow != nil {
		plain, qs := p.SubAllow.Match(subject)
		allowed = plain
		if queue != "" && len(qs) > 0 {
			allowed = queueMatches(queue, qs)
		}
	}
	if allowed && p.SubDeny != nil {
		plain, qs := p.SubDeny.Match(subject)
		allowed = !plain
		if allowed && queue != "" && len(qs) > 0 {
			allowed = !queueMatches(queue, qs)
		}
	}
	return allowed
}

func queueMatches(queue string, qs []string) bool {
	for _, q := range qs {
		if queue == q || (hasWildcard(q) && subsetMatch(queue, q)) {
			return true
		}
	}
	return false
}

// NeedsDeliveryFilter reports whether a (wildcard or queue) subscription may receive
// messages on subjects the subscribe deny list names; those are then filtered at delivery.
func (p *Perms) NeedsDeliveryFilter(subject string, hasQueue bool) bool {
	if p == nil || len(p.subDeny) == 0 || (!hasQueue && !hasWildcard(subject)) {
		return false
	}
	for _, d := range p.subDeny {
		if SubjectsCollide(d, subject) {
			return true
		}
	}
	return false
}

// DeliveryDenied reports whether a message on subject must not be delivered to a filtered
// subscription.
func (p *Perms) DeliveryDenied(subject []byte) bool {
	return p != nil && p.SubDeny != nil && p.SubDeny.MatchPlain(subject)
}
