package auth

import "strings"

// Matcher is an immutable subject-pattern trie (`*`, `>` wildcards) answering "which entries
// match this subject", as nats-server's permission sublists do. Entries may carry a queue
// ("subject queue"). Safe for concurrent readers; built once per permission set.
type Matcher struct {
	root level
}

type level struct {
	nodes    map[string]*node
	pwc, fwc *node
}

type node struct {
	next   *level
	plain  bool     // an entry without a queue ends here
	queues []string // entries with a queue end here
}

// NewMatcher builds a matcher from entries; with queues, an entry may be "subject queue".
// Invalid entries are skipped (nats-server logs and skips them too).
func NewMatcher(entries []string, queues bool) *Matcher {
	m := &Matcher{}
	for _, e := range entries {
		subj, q := strings.TrimSpace(e), ""
		if queues {
			f := strings.Fields(e)
			switch len(f) {
			case 1:
				subj = f[0]
			case 2:
				subj, q = f[0], f[1]
			default:
				continue
			}
		}
		if !validPattern(subj) {
			continue
		}
		m.insert(subj, q)
	}
	return m
}

func validPattern(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n\f") {
		return false
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		if t == "" || (t == ">" && i != len(toks)-1) {
			return false
		}
	}
	return true
}

func (m *Matcher) insert(subj, q string) {
	l := &m.root
	var n *node
	toks := strings.Split(subj, ".")
	for i, t := range toks {
		switch t {
		case "*":
			if l.pwc == nil {
				l.pwc = &node{}
			}
			n = l.pwc
		case ">":
			if l.fwc == nil {
				l.fwc = &node{}
			}
			n = l.fwc
		default:
			if l.nodes == nil {
				l.nodes = make(map[string]*node)
			}
			n = l.nodes[t]
			if n == nil {
				n = &node{}
				l.nodes[t] = n
			}
		}
		if i < len(toks)-1 {
			if n.next == nil {
				n.next = &level{}
			}
			l = n.next
		}
	}
	if q == "" {
		n.plain = true
	} else {
		n.queues = append(n.queues, q)
	}
}

// matchResult gathers what matched.
type matchResult struct {
	plain  bool
	queues []string
}

func (r *matchResult) add(n *node) {
	if n.plain {
		r.plain = true
	}
	r.queues = append(r.queues, n.queues...)
}

// MatchPlain reports whether an entry without a queue matches subject. Tokens of subject are
// taken literally (a `*` in subject only matches a `*` or wildcard entry), as nats-server does.
// It does not allocate.
func (m *Matcher) MatchPlain(subject []byte) bool {
	if m == nil {
		return false
	}
	return matchAny(&m.root, subject)
}

// matchAny walks the trie for the remaining subject; it reports a plain match.
func matchAny(l *level, subj []byte) bool {
	for l != nil {
		i := indexDot(subj)
		tok := subj
		last := i < 0
		if !last {
			tok = subj[:i]
		}
		if l.fwc != nil && l.fwc.plain {
			return true
		}
		if l.pwc != nil {
			if last {
				if l.pwc.plain {
					return true
				}
			} else if l.pwc.next != nil && matchAny(l.pwc.next, subj[i+1:]) {
				return true
			}
		}
		n := l.nodes[string(tok)]
		if n == nil {
			return false
		}
		if last {
			return n.plain
		}
		l = n.next
		subj = subj[i+1:]
	}
	return false
}

func indexDot(b []byte) int {
	for i, c := range b {
		if c == '.' {
			return i
		}
	}
	return -1
}

// Match reports whether a plain entry matches subject and which queues the matching queue
// entries name (subscribe permissions).
func (m *Matcher) Match(subject string) (plain bool, queues []string) {
	if m == nil {
		return false, nil
	}
	var r matchResult
	matchLevel(&m.root, strings.Split(subject, "."), &r)
	return r.plain, r.queues
}

func matchLevel(l *level, toks []string, r *matchResult) {
	var pwc, n *node
	for i, t := range toks {
		if l == nil {
			return
		}
		if l.fwc != nil {
			r.add(l.fwc)
		}
		if pwc = l.pwc; pwc != nil && i < len(toks)-1 {
			matchLevel(pwc.next, toks[i+1:], r)
		}
		n = l.nodes[t]
		if n != nil {
			l = n.next
		} else {
			l = nil
		}
	}
	if n != nil {
		r.add(n)
	}
	if pwc != nil {
		r.add(pwc)
	}
}

// SubjectsCollide reports whether two subjects (either may hold wildcards) can match a
// common literal subject.
func SubjectsCollide(a, b string) bool {
	if a == b {
		return true
	}
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(ta) && i < len(tb); i++ {
		x, y := ta[i], tb[i]
		if x == ">" || y == ">" {
			return true
		}
		if x != y && x != "*" && y != "*" {
			return false
		}
	}
	return len(ta) == len(tb)
}

// subsetMatch reports whether literal-ish subject s is matched by pattern p.
func subsetMatch(s, p string) bool {
	ts, tp := strings.Split(s, "."), strings.Split(p, ".")
	for i, t := range tp {
		if i >= len(ts) {
			return false
		}
		if t == ">" {
			return true
		}
		if t != "*" && t != ts[i] {
			return false
		}
	}
	return len(ts) == len(tp)
}

func hasWildcard(s string) bool {
	for _, t := range strings.Split(s, ".") {
		if t == "*" || t == ">" {
			return true
		}
	}
	return false
}
