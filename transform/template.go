package transform

import (
	"math"
	"strconv"
	"strings"
)

// fn is what one destination token does.
type fn uint8

const (
	fnLiteral fn = iota
	fnWildcard
	fnPartition
	fnSplitFromLeft
	fnSplitFromRight
	fnSliceFromLeft
	fnSliceFromRight
	fnSplit
	fnLeft
	fnRight
	fnRandom
)

// call is one parsed destination token.
type call struct {
	fn  fn
	idx []int // wildcard numbers as written: 1 is the source's first '*'
	n   int32 // partitions, position, size or random's ceiling
	sep string
}

// functions is in the order nats-server tries them. It finds a call anywhere
// inside a {{…}} token, so in a token holding two calls the earlier entry
// here wins; keeping the order keeps such tokens meaning what they mean there.
var functions = [...]struct {
	name string
	fn   fn
}{
	{"wildcard", fnWildcard},
	{"partition", fnPartition},
	{"splitFromLeft", fnSplitFromLeft},
	{"splitFromRight", fnSplitFromRight},
	{"sliceFromLeft", fnSliceFromLeft},
	{"sliceFromRight", fnSliceFromRight},
	{"right", fnRight},
	{"left", fnLeft},
	{"split", fnSplit},
	{"random", fnRandom},
}

// parseToken reads one destination token: a literal, a legacy "$N", or a
// "{{function(args)}}".
func parseToken(tok string) (call, error) {
	if len(tok) > 1 && tok[0] == '$' {
		n, err := strconv.Atoi(tok[1:])
		if err != nil {
			// $JS, $SYS and friends are ordinary tokens.
			return call{}, nil
		}
		return call{fn: fnWildcard, idx: []int{n}}, nil
	}
	if !isMustache(tok) {
		return call{}, nil
	}
	for _, f := range functions {
		if args, ok := findCall(tok, f.name); ok {
			return parseArgs(tok, f.fn, splitArgs(args))
		}
	}
	return call{}, destErr(tok, ErrUnknownMappingDestinationFunction)
}

// isMustache is nats-server's test for "this token is meant as a function":
// anything else, however odd, is copied literally.
func isMustache(tok string) bool {
	return len(tok) > 4 && strings.HasPrefix(tok, "{{") && strings.HasSuffix(tok, "}}")
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// findCall looks for "{{ name ( args ) }}" anywhere in tok and returns args.
// nats-server does this with an unanchored regular expression, and users'
// configs rely on its quirks, so this reproduces its exact semantics: the
// leftmost "{{" that starts a call wins; args run to the last ")" that is
// followed by optional space and "}}", and cannot span a newline; only the
// first letter of each word of the name may be either case.
func findCall(tok, name string) (string, bool) {
	for p := 0; p+1 < len(tok); p++ {
		if tok[p] != '{' || tok[p+1] != '{' {
			continue
		}
		i := skipSpace(tok, p+2)
		if !nameAt(tok, i, name) {
			continue
		}
		i = skipSpace(tok, i+len(name))
		if i >= len(tok) || tok[i] != '(' {
			continue
		}
		open := i + 1
		end := len(tok)
		if nl := strings.IndexByte(tok[open:], '\n'); nl >= 0 {
			end = open + nl
		}
		for q := end - 1; q >= open; q-- {
			if tok[q] != ')' {
				continue
			}
			if j := skipSpace(tok, q+1); strings.HasPrefix(tok[j:], "}}") {
				return tok[open:q], true
			}
		}
	}
	return "", false
}

// nameAt: "splitFromLeft" matches "SplitFromLeft" and "splitfromleft" but not
// "SPLITFROMLEFT"; the capitals of the camel-case name (and its first letter)
// are the letters that may change case.
func nameAt(s string, i int, name string) bool {
	if len(s)-i < len(name) {
		return false
	}
	for k := 0; k < len(name); k++ {
		c, b := name[k], s[i+k]
		if k == 0 || (c >= 'A' && c <= 'Z') {
			if b|0x20 != c|0x20 {
				return false
			}
		} else if b != c {
			return false
		}
	}
	return true
}

// splitArgs splits at commas and drops the space after each comma (not
// before the first argument: numbers trim their own spaces, a split
// delimiter keeps them and is then refused).
func splitArgs(s string) []string {
	args := strings.Split(s, ",")
	for i := 1; i < len(args); i++ {
		args[i] = args[i][skipSpace(args[i], 0):]
	}
	return args
}

func atoi(s string) (int, error) { return strconv.Atoi(strings.Trim(s, " ")) }

func parseArgs(tok string, f fn, args []string) (call, error) {
	bad := func(reason error) (call, error) { return call{}, destErr(tok, reason) }
	// arity checks for exactly n arguments (an empty list reads as one empty argument).
	arity := func(n int) error {
		switch {
		case len(args) < n || len(args) == 1 && args[0] == "":
			return ErrMappingDestinationNotEnoughArgs
		case len(args) > n:
			return ErrMappingDestinationTooManyArgs
		}
		return nil
	}
	switch f {
	case fnWildcard:
		if err := arity(1); err != nil {
			return bad(err)
		}
		i, err := atoi(args[0])
		if err != nil {
			return bad(ErrMappingDestinationInvalidArg)
		}
		return call{fn: f, idx: []int{i}}, nil

	case fnPartition:
		n, err := atoi(args[0])
		if err != nil || n > math.MaxInt32 {
			return bad(ErrMappingDestinationInvalidArg)
		}
		c := call{fn: f, n: int32(n)}
		for _, a := range args[1:] {
			i, err := atoi(a)
			if err != nil {
				return bad(ErrMappingDestinationInvalidArg)
			}
			c.idx = append(c.idx, i)
		}
		return c, nil

	case fnSplit:
		if err := arity(2); err != nil {
			return bad(err)
		}
		i, err := atoi(args[0])
		if err != nil || strings.ContainsAny(args[1], " .") {
			return bad(ErrMappingDestinationInvalidArg)
		}
		return call{fn: f, idx: []int{i}, sep: args[1]}, nil

	case fnRandom:
		if len(args) != 1 {
			// nats-server says "not enough" for too many as well.
			return bad(ErrMappingDestinationNotEnoughArgs)
		}
		n, err := atoi(args[0])
		if err != nil || n > math.MaxInt32 {
			return bad(ErrMappingDestinationInvalidArg)
		}
		return call{fn: f, n: int32(n)}, nil
	}

	// The (wildcard, number) functions.
	if err := arity(2); err != nil {
		return bad(err)
	}
	i, err := atoi(args[0])
	if err != nil {
		return bad(ErrMappingDestinationInvalidArg)
	}
	n, err := strconv.ParseInt(strings.Trim(args[1], " "), 10, 32)
	if err != nil {
		return bad(ErrMappingDestinationInvalidArg)
	}
	return call{fn: f, idx: []int{i}, n: int32(n)}, nil
}
