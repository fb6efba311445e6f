// Package transform rewrites subjects as nats-server's subject mappings and
// transforms do: a source pattern ("orders.*.>") and a destination template
// ("shard.{{partition(8,1)}}.$1.>") compile to a Transform that turns each
// matching subject into its destination, and a Mapping spreads one source over
// weighted (optionally per-cluster) destinations.
//
// Everything observable follows nats-server 2.15: which templates are
// accepted, the error texts (config loading reports them), the output subject,
// and the partition a subject lands in. That includes nats-server's odd
// corners (a function found anywhere inside a {{…}} token, "$0" meaning the
// first token, partition(-3)); they are tested against nats-server itself.
//
// A Transform is compiled once and is then read-only and safe for concurrent
// use. Append and AppendMatch write into the caller's buffer without
// allocating, so they can run on the per-message path.
package transform

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Transform is a compiled source → destination rewrite.
type Transform struct {
	src, dest string
	pats      []pat
	ops       []op
	tail      int  // dest ends in '>': copy the subject from this token on; -1 if not
	need      int  // how many leading tokens of a subject apply reads
	same      bool // '>' → '>': Match hands the subject back without looking at it
}

// pat is one source token as the matcher sees it.
type pat struct {
	lit  string
	kind uint8
}

const (
	patExact uint8 = iota
	patAny         // any token: nats-server tests only the first byte for '*'
	patRest        // '>'
)

// op emits one piece of the destination.
type op struct {
	fn   fn
	dot  bool   // a '.' follows
	text string // literal text, or split's delimiter
	tok  int    // the source token the function reads
	keys []int  // partition's source tokens; nil hashes the whole subject
	n    int32
}

// New compiles a transform as nats-server's mappings, stream subject
// transforms, sources and republish do (NewSubjectTransform). An empty src
// means ">"; an empty dest means no transform and returns nil, nil.
func New(src, dest string) (*Transform, error) { return compile(src, dest, false) }

// NewStrict compiles a transform that must be reversible, as imports need
// (NewSubjectTransformStrict): with wildcards in the source, only wildcard
// references are allowed and every source wildcard must be referenced.
func NewStrict(src, dest string) (*Transform, error) { return compile(src, dest, true) }

// Validate applies the checks nats-server makes of a mapping destination,
// and of a stream's subject transform, before it compiles one
// (ValidateMapping): on top of New's, literal tokens may not hold white space
// and a {{…}} token must name a known function. An empty dest is valid.
func Validate(src, dest string) error {
	if dest == "" {
		return nil
	}
	afterFwc := false
	for t := range strings.SplitSeq(dest, ".") {
		if t == "" || afterFwc {
			return destErr(t, ErrInvalidMappingDestinationSubject)
		}
		if isMustache(t) {
			if !namesFunction(t) {
				return destErr(t, ErrUnknownMappingDestinationFunction)
			}
			continue
		}
		if t == ">" {
			afterFwc = true
		} else if strings.ContainsAny(t, "\t\n\f\r ") {
			return ErrInvalidMappingDestinationSubject
		}
	}
	_, err := New(src, dest)
	return err
}

func namesFunction(tok string) bool {
	for _, f := range functions {
		if _, ok := findCall(tok, f.name); ok {
			return true
		}
	}
	return false
}

// shape splits a subject into tokens and reports whether it is well formed
// the way nats-server's transforms require (no empty token, nothing after
// '>'; white space is not checked), how many '*' tokens it has and whether it
// ends in '>'.
func shape(s string) (toks []string, pwcs int, fwc, ok bool) {
	if s == "" {
		return nil, 0, false, false
	}
	toks = strings.Split(s, ".")
	for _, t := range toks {
		if t == "" || fwc {
			return nil, 0, false, false
		}
		switch t {
		case "*":
			pwcs++
		case ">":
			fwc = true
		}
	}
	return toks, pwcs, fwc, true
}

func compile(src, dest string, strict bool) (*Transform, error) {
	if dest == "" {
		return nil, nil
	}
	if src == "" {
		src = ">"
	}
	stoks, npwc, sfwc, sok := shape(src)
	dtoks, dpwc, dfwc, dok := shape(dest)
	if !sok || !dok || dpwc > 0 || sfwc != dfwc {
		return nil, ErrBadSubject
	}

	// Wildcard number k (1-based) reads the source's k-th '*'. nats-server
	// sends numbers it does not range-check (0, negatives) to the first token.
	var wpos []int
	for i, t := range stoks {
		if t == "*" {
			wpos = append(wpos, i)
		}
	}
	tokOf := func(k int) int {
		if k >= 1 && k <= len(wpos) {
			return wpos[k-1]
		}
		return 0
	}

	t := &Transform{src: src, dest: dest, tail: -1, same: src == ">" && dest == ">"}
	for _, st := range stoks {
		switch {
		case st == ">":
			t.pats = append(t.pats, pat{kind: patRest})
		case st[0] == '*':
			t.pats = append(t.pats, pat{kind: patAny})
		default:
			t.pats = append(t.pats, pat{lit: st})
		}
	}

	wild := npwc > 0 || sfwc
	refs := 0
	for i, tok := range dtoks {
		c, err := parseToken(tok)
		if err != nil {
			return nil, err
		}
		switch {
		case wild:
			if strict && c.fn != fnLiteral && c.fn != fnWildcard {
				return nil, destErr(tok, ErrMappingDestinationNotSupportedForImport)
			}
			if c.fn != fnLiteral && c.fn != fnRandom {
				refs += len(c.idx)
				for _, k := range c.idx {
					if k > npwc {
						return nil, destErr(fmt.Sprintf("%s: [%d]", tok, k), ErrMappingDestinationIndexOutOfRange)
					}
				}
			}
		case c.fn == fnPartition:
			// Without source wildcards there is nothing to pick: the whole
			// subject is hashed whatever tokens were named.
			c.idx = nil
		case c.fn != fnLiteral && c.fn != fnRandom:
			return nil, destErr(tok, ErrMappingDestinationIndexOutOfRange)
		}

		if tok == ">" {
			t.tail = len(stoks) - 1
			continue
		}
		o := op{fn: c.fn, dot: i < len(dtoks)-1, n: c.n}
		switch c.fn {
		case fnLiteral:
			o.text = tok
		case fnPartition:
			for _, k := range c.idx {
				o.keys = append(o.keys, tokOf(k))
			}
		case fnRandom:
		default:
			o.tok = tokOf(c.idx[0])
			o.text = c.sep
		}
		t.ops = append(t.ops, o)
	}
	if strict && wild && refs < npwc {
		return nil, destErr(dest, ErrMappingDestinationNotUsingAllWildcards)
	}
	t.ops = foldLiterals(t.ops)

	for _, o := range t.ops {
		if o.fn != fnLiteral && o.fn != fnRandom && o.fn != fnPartition {
			t.need = max(t.need, o.tok+1)
		}
		for _, k := range o.keys {
			t.need = max(t.need, k+1)
		}
	}
	if t.tail >= 0 {
		t.need = max(t.need, t.tail+1)
	}
	return t, nil
}

// foldLiterals joins runs of literal tokens, and the dots after them, into
// one copy.
func foldLiterals(ops []op) []op {
	out := ops[:0]
	for _, o := range ops {
		if o.fn == fnLiteral && o.dot {
			o.text += "."
			o.dot = false
		}
		if n := len(out); n > 0 && o.fn == fnLiteral && out[n-1].fn == fnLiteral {
			out[n-1].text += o.text
			continue
		}
		out = append(out, o)
	}
	return out
}

// Source is the source pattern (">" when it was given empty).
func (t *Transform) Source() string { return t.src }

// Dest is the destination template as given.
func (t *Transform) Dest() string { return t.dest }

// Match rewrites subject if it matches the source: ErrBadSubject if subject
// is not a valid literal subject, ErrNoTransforms if it does not match.
func (t *Transform) Match(subject string) (string, error) {
	b, err := t.AppendMatch(make([]byte, 0, len(t.dest)+len(subject)), bytesOf(subject))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Apply rewrites a subject the caller knows matches the source.
func (t *Transform) Apply(subject string) string {
	return string(t.Append(make([]byte, 0, len(t.dest)+len(subject)), bytesOf(subject)))
}

// AppendMatch is Match appending to dst.
func (t *Transform) AppendMatch(dst, subject []byte) ([]byte, error) {
	if t.same {
		return append(dst, subject...), nil
	}
	return t.run(dst, subject, true)
}

// Append rewrites a subject the caller knows matches the source (found
// through a sublist, say) and appends the result to dst. A subject that does
// not match gives a meaningless result, never a panic.
func (t *Transform) Append(dst, subject []byte) []byte {
	dst, _ = t.run(dst, subject, false)
	return dst
}

// run sizes the token table to what the template reads: Go zeroes a local
// array on every call, and 16 spans cost more than a short rewrite does.
func (t *Transform) run(dst, subject []byte, check bool) ([]byte, error) {
	switch {
	case t.need <= 4:
		var buf [4]span
		return t.runWith(dst, subject, buf[:t.need], check)
	case t.need <= 16:
		var buf [16]span
		return t.runWith(dst, subject, buf[:t.need], check)
	}
	return t.runWith(dst, subject, make([]span, t.need), check)
}

func (t *Transform) runWith(dst, subject []byte, sp []span, check bool) ([]byte, error) {
	if !check {
		locate(subject, sp)
		return t.emit(dst, subject, sp), nil
	}
	valid, matched := t.scan(subject, sp)
	if !valid {
		return dst, ErrBadSubject
	}
	if !matched {
		return dst, ErrNoTransforms
	}
	return t.emit(dst, subject, sp), nil
}

// span is where a token sits in the subject. Subjects are far below 2 GiB
// (max_payload caps a whole message at 64 MiB).
type span struct{ lo, hi int32 }

// locate records where the first len(sp) tokens of s are; tokens s lacks are
// empty, at its end.
func locate(s []byte, sp []span) {
	lo, n := 0, 0
	for i := 0; i < len(s) && n < len(sp); i++ {
		if s[i] == '.' {
			sp[n] = span{int32(lo), int32(i)}
			n++
			lo = i + 1
		}
	}
	if n < len(sp) {
		sp[n] = span{int32(lo), int32(len(s))}
		n++
	}
	for ; n < len(sp); n++ {
		sp[n] = span{int32(len(s)), int32(len(s))}
	}
}

// scan is locate that also checks, in one pass, that s is a valid literal
// subject (no empty or wildcard token) and whether it matches the source.
func (t *Transform) scan(s []byte, sp []span) (valid, matched bool) {
	matched = true
	rest := false // a '>' has taken the remaining tokens
	n, lo := 0, 0
	for lo <= len(s) {
		hi := bytes.IndexByte(s[lo:], '.')
		if hi < 0 {
			hi = len(s)
		} else {
			hi += lo
		}
		tok := s[lo:hi]
		if len(tok) == 0 || (len(tok) == 1 && (tok[0] == '*' || tok[0] == '>')) {
			return false, false
		}
		if n < len(sp) {
			sp[n] = span{int32(lo), int32(hi)}
		}
		if matched && !rest {
			switch {
			case n >= len(t.pats):
				matched = false
			case t.pats[n].kind == patRest:
				rest = true
			case t.pats[n].kind == patExact && string(tok) != t.pats[n].lit:
				matched = false
			}
		}
		n++
		lo = hi + 1
	}
	return true, matched && (rest || n == len(t.pats))
}

func (t *Transform) emit(dst, s []byte, sp []span) []byte {
	tok := func(i int) []byte { return s[sp[i].lo:sp[i].hi] }
	for i := range t.ops {
		o := &t.ops[i]
		switch o.fn {
		case fnLiteral:
			dst = append(dst, o.text...)
		case fnWildcard:
			dst = append(dst, tok(o.tok)...)
		case fnPartition:
			h := uint32(fnvOffset)
			if o.keys == nil {
				h = fnv1a(h, s)
			}
			for _, k := range o.keys {
				h = fnv1a(h, tok(k))
			}
			if o.n == 0 {
				dst = append(dst, '0')
			} else {
				dst = strconv.AppendUint(dst, uint64(h%uint32(o.n)), 10)
			}
		case fnRandom:
			if o.n == 0 {
				dst = append(dst, '0')
			} else {
				dst = strconv.AppendInt(dst, int64(rand.Int32())%int64(o.n), 10)
			}
		case fnSplit:
			dst = appendSplit(dst, tok(o.tok), o.text)
		default:
			dst = appendCut(dst, o.fn, tok(o.tok), int(o.n))
		}
		if o.dot {
			dst = append(dst, '.')
		}
	}
	if t.tail >= 0 {
		dst = append(dst, s[sp[t.tail].lo:]...)
	}
	return dst
}

const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// fnv1a is 32-bit FNV-1a, the hash nats-server partitions by: the same
// subject must land in the same partition on both servers.
func fnv1a(h uint32, b []byte) uint32 {
	for _, c := range b {
		h ^= uint32(c)
		h *= fnvPrime
	}
	return h
}

// appendCut does the functions that cut one token by a size or position.
// Each leaves a token shorter than (or as long as) its number untouched.
func appendCut(dst []byte, f fn, x []byte, n int) []byte {
	if n <= 0 || n >= len(x) {
		return append(dst, x...)
	}
	switch f {
	case fnLeft:
		return append(dst, x[:n]...)
	case fnRight:
		return append(dst, x[len(x)-n:]...)
	case fnSplitFromLeft:
		dst = append(dst, x[:n]...)
		return append(append(dst, '.'), x[n:]...)
	case fnSplitFromRight:
		dst = append(dst, x[:len(x)-n]...)
		return append(append(dst, '.'), x[len(x)-n:]...)
	case fnSliceFromLeft:
		for i := 0; i < len(x); i += n {
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = append(dst, x[i:min(i+n, len(x))]...)
		}
		return dst
	case fnSliceFromRight:
		first := len(x) % n
		if first == 0 {
			first = n
		}
		dst = append(dst, x[:first]...)
		for i := first; i < len(x); i += n {
			dst = append(append(dst, '.'), x[i:i+n]...)
		}
		return dst
	}
	return append(dst, x...)
}

// appendSplit splits x at each sep into tokens, dropping empty pieces the
// way nats-server does: a dot goes before every non-empty piece except the
// first piece, and except the second when the first was empty. So "a--b"
// gives "a.b" but "--a" gives ".a", which nats-server does too. An empty sep
// splits between UTF-8 characters.
func appendSplit(dst, x []byte, sep string) []byte {
	if sep == "" {
		for i := 0; i < len(x); {
			_, w := utf8.DecodeRune(x[i:])
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = append(dst, x[i:i+w]...)
			i += w
		}
		return dst
	}
	cut := func(x []byte) (piece, rest []byte, more bool) {
		i := bytes.Index(x, bytesOf(sep))
		if i < 0 {
			return x, nil, false
		}
		return x[:i], x[i+len(sep):], true
	}
	cur, rest, more := cut(x)
	for j := 0; ; j++ {
		dst = append(dst, cur...)
		if !more {
			return dst
		}
		next, rest2, more2 := cut(rest)
		if len(next) > 0 && (j > 0 || len(cur) > 0) {
			dst = append(dst, '.')
		}
		cur, rest, more = next, rest2, more2
	}
}

// bytesOf views s as bytes without copying; nothing here writes through it.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Tokenize turns a source's '*' tokens into "$1", "$2"…: the destination
// that maps a subject to itself ("a.*.>" → "a.$1.>").
func Tokenize(subject string) string {
	toks := strings.Split(subject, ".")
	n := 0
	for i, t := range toks {
		if t == "*" {
			n++
			toks[i] = "$" + strconv.Itoa(n)
		}
	}
	return strings.Join(toks, ".")
}

// Untokenize turns a destination's wildcard references back into '*' and
// returns them in order ("a.$2.{{wildcard(1)}}" → "a.*.*", ["$2",
// "{{wildcard(1)}}"]), as imports do to know what subjects a transform emits.
func Untokenize(dest string) (string, []string) {
	var refs []string
	toks := strings.Split(dest, ".")
	for i, t := range toks {
		if isRef(t) {
			refs = append(refs, t)
			toks[i] = "*"
		}
	}
	return strings.Join(toks, "."), refs
}

// isRef is nats-server's looser test used when untokenizing: "$" and a digit
// 1-9 is enough ("$1x" counts), or a wildcard call with one argument.
func isRef(t string) bool {
	if len(t) > 1 && t[0] == '$' && t[1] >= '1' && t[1] <= '9' {
		return true
	}
	args, ok := findCall(t, "wildcard")
	return ok && !strings.Contains(args, ",") && args != ""
}

// Reverse is the transform that undoes a strict one (destination back to
// source), as service imports need for replies; nil if there is none.
func (t *Transform) Reverse() *Transform {
	nsrc, refs := Untokenize(t.dest)
	toks := strings.Split(t.src, ".")
	for i, tok := range toks {
		if tok == "*" {
			if len(refs) == 0 {
				return nil
			}
			toks[i], refs = refs[0], refs[1:]
		}
	}
	r, err := NewStrict(nsrc, strings.Join(toks, "."))
	if err != nil {
		return nil
	}
	return r
}
