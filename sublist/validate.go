package sublist

// The helpers are generic over string and []byte so the connection layer can
// validate borrowed protocol bytes without converting (and allocating), while
// Insert validates the string it is about to keep.

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\f':
		return true
	}
	return false
}

func validSubject[S ~string | ~[]byte](s S, literal bool) bool {
	if len(s) == 0 {
		return false
	}
	start := 0
	sawFWC := false
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == tsep {
			if i == start || sawFWC {
				return false
			}
			if i-start == 1 {
				switch s[start] {
				case fwc:
					if literal {
						return false
					}
					sawFWC = true
				case pwc:
					if literal {
						return false
					}
				}
			}
			start = i + 1
			continue
		}
		if !literal && isSpace(s[i]) {
			return false
		}
	}
	return true
}

// ValidSubject reports whether subject is acceptable for SUB: non-empty
// tokens, '*' and '>' count as wildcards only as whole tokens, '>' only as
// the last token, no whitespace.
func ValidSubject(subject []byte) bool { return validSubject(subject, false) }

// ValidLiteralSubject reports whether subject has non-empty tokens and no
// wildcard tokens, which is what pedantic mode demands of a publish subject.
// "foo*" is literal and therefore accepted. Like nats-server's
// IsValidLiteralSubject it does not look for whitespace: a PUB subject holds
// none but CR or form feed ("a\fb"), which nats-server lets through.
func ValidLiteralSubject(subject []byte) bool { return validSubject(subject, true) }

// ValidQueue reports whether q is usable as a queue group name: non-empty and
// free of whitespace. Dots are allowed, as in nats-server and nats.go.
func ValidQueue(q []byte) bool { return validQueue(q) }

func validQueue[S ~string | ~[]byte](q S) bool {
	if len(q) == 0 {
		return false
	}
	for i := 0; i < len(q); i++ {
		if isSpace(q[i]) {
			return false
		}
	}
	return true
}
