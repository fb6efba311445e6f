package sublist

// A stream store answers "which of my messages fall under this filter" for
// consumers, purges and last-by-subject lookups. It holds literal subjects
// and gets the filter as a string, so it needs a one-to-one match, not a
// trie.

// IsWildcard reports whether filter contains a wildcard token ("*" or ">" as
// a whole token; "foo*" is literal).
func IsWildcard(filter string) bool {
	start := 0
	for i := 0; i <= len(filter); i++ {
		if i == len(filter) || filter[i] == tsep {
			if i-start == 1 && (filter[start] == pwc || filter[start] == fwc) {
				return true
			}
			start = i + 1
		}
	}
	return false
}

// MatchFilter reports whether the literal subject falls under filter, with
// the same rules as a subscription: "*" matches exactly one token, a final
// ">" matches one or more. Neither string is validated: a filter token that
// is not a whole "*" or ">" only matches the identical token.
func MatchFilter(subject, filter string) bool {
	for {
		ft, frest, fmore := cutToken(filter)
		st, srest, smore := cutToken(subject)
		switch {
		case len(ft) == 1 && ft[0] == fwc && !fmore:
			return len(st) > 0 || smore
		case len(ft) == 1 && ft[0] == pwc:
		case ft != st:
			return false
		}
		if fmore != smore {
			return false
		}
		if !fmore {
			return true
		}
		filter, subject = frest, srest
	}
}

// cutToken splits s at its first separator: the token, what follows it, and
// whether a separator was found.
func cutToken(s string) (tok, rest string, more bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == tsep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
