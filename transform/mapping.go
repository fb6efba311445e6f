package transform

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

// Dest is one destination of a mapping, as a config's `mappings {}` names it.
type Dest struct {
	Subject string
	Weight  uint8 // percent of the messages
	Cluster string
}

// Mapping is one source subject with its weighted destinations: nats-server's
// per-account subject mapping. Read-only once built.
type Mapping struct {
	src    string
	wild   bool
	dests  []weighted
	byClus map[string][]weighted
}

// weighted holds a destination and the cumulative weight up to and
// including it: a roll in [0,100) picks the first entry whose upto exceeds it.
type weighted struct {
	tr      *Transform
	upto    uint8
	cluster string
}

// Rand is the random source Select draws from; *rand.Rand of math/rand/v2
// is one. A per-reactor source keeps selection off any shared lock.
type Rand interface {
	Uint32N(n uint32) uint32
}

// NewMapping checks and compiles a mapping the way nats-server's
// AddWeightedMappings does, in the same order and with the same errors: an
// invalid source, a destination listed twice (across clusters too), a weight
// over 100, weights of one cluster adding up to over 100, then Validate and
// New for each destination. Where one cluster's weights (or the
// cluster-less ones') add up to less than 100, the rest of the share keeps
// its subject, unless the source is itself listed as a destination: then
// that share is dropped (Select returns nil), which is how nats-server
// injects loss.
func NewMapping(src string, dests ...Dest) (*Mapping, error) {
	if !validSubject(src) {
		return nil, ErrBadSubject
	}
	m := &Mapping{src: src, wild: hasWildcard(src)}
	seen := make(map[string]bool, len(dests))
	total := make(map[string]uint8)
	for _, d := range dests {
		if seen[d.Subject] {
			return nil, fmt.Errorf("duplicate entry for %q", d.Subject)
		}
		seen[d.Subject] = true
		if d.Weight > 100 {
			return nil, errors.New("individual weights need to be <= 100")
		}
		total[d.Cluster] += d.Weight
		if total[d.Cluster] > 100 {
			return nil, errors.New("total weight needs to be <= 100")
		}
		if err := Validate(src, d.Subject); err != nil {
			return nil, err
		}
		tr, err := New(src, d.Subject)
		if err != nil {
			return nil, err
		}
		w := weighted{tr: tr, upto: d.Weight, cluster: d.Cluster}
		if d.Cluster == "" {
			m.dests = append(m.dests, w)
		} else {
			if m.byClus == nil {
				m.byClus = make(map[string][]weighted)
			}
			m.byClus[d.Cluster] = append(m.byClus[d.Cluster], w)
		}
	}

	var err error
	if m.dests, err = m.complete(m.dests, "", seen[src]); err != nil {
		return nil, err
	}
	for c, ds := range m.byClus {
		if m.byClus[c], err = m.complete(ds, c, seen[src]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// complete adds the unchanged-subject share, orders the destinations by
// weight (nats-server's order, which /accountz shows) and makes the weights
// cumulative.
func (m *Mapping) complete(ds []weighted, cluster string, srcListed bool) ([]weighted, error) {
	var sum uint8
	for _, d := range ds {
		sum += d.upto
	}
	if sum != 100 && !srcListed {
		dest := m.src
		if m.wild {
			dest = Tokenize(dest)
		}
		tr, err := New(m.src, dest)
		if err != nil {
			return nil, err
		}
		ds = append(ds, weighted{tr: tr, upto: 100 - sum, cluster: cluster})
	}
	slices.SortStableFunc(ds, func(a, b weighted) int { return cmp.Compare(a.upto, b.upto) })
	var acc uint8
	for i := range ds {
		acc += ds[i].upto
		ds[i].upto = acc
	}
	return ds, nil
}

// Source is the mapping's source subject.
func (m *Mapping) Source() string { return m.src }

// HasWildcard reports whether the source has a '*' or '>' token.
func (m *Mapping) HasWildcard() bool { return m.wild }

// Matches reports whether a published subject is this mapping's, by
// nats-server's test: equal to a literal source, or a subset match of a
// wildcard one (where, as in nats-server, any source token starting with
// '*' matches any token).
func (m *Mapping) Matches(subject []byte) bool {
	if !m.wild && string(subject) == m.src {
		return true
	}
	return subsetMatch(subject, m.src)
}

// Select picks the destination for one message published from a server of
// the given cluster: that cluster's destinations if the mapping has any,
// the cluster-less ones otherwise. nil means the message is dropped (the
// share left over when the source is listed as a destination). r nil draws
// from math/rand/v2's global source.
//
// An empty destination subject also selects nil: nats-server accepts one
// and then crashes on the first message published to the source.
func (m *Mapping) Select(cluster string, r Rand) *Transform {
	ds := m.dests
	if m.byClus != nil {
		if c, ok := m.byClus[cluster]; ok {
			ds = c
		}
	}
	if len(ds) == 1 && ds[0].upto == 100 {
		return ds[0].tr
	}
	var roll uint32
	if r != nil {
		roll = r.Uint32N(100)
	} else {
		roll = rand.Uint32N(100)
	}
	for _, d := range ds {
		if roll < uint32(d.upto) {
			return d.tr
		}
	}
	return nil
}

// Dests lists the destinations as nats-server's /accountz does: the
// unchanged-subject share included, cumulative weights, cluster-less ones
// first, then by cluster name.
func (m *Mapping) Dests() []Dest {
	var out []Dest
	add := func(ds []weighted) {
		for _, d := range ds {
			var subj string
			if d.tr != nil {
				subj = d.tr.dest
			}
			out = append(out, Dest{Subject: subj, Weight: d.upto, Cluster: d.cluster})
		}
	}
	add(m.dests)
	clusters := make([]string, 0, len(m.byClus))
	for c := range m.byClus {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	for _, c := range clusters {
		add(m.byClus[c])
	}
	return out
}

// validSubject is nats-server's IsValidSubject: non-empty tokens, no white
// space, nothing after '>'.
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	toks, _, _, ok := shape(s)
	if !ok {
		return false
	}
	for _, t := range toks {
		for i := 0; i < len(t); i++ {
			if isSpace(t[i]) {
				return false
			}
		}
	}
	return true
}

func hasWildcard(s string) bool {
	for i := 0; i < len(s); i++ {
		if (s[i] == '*' || s[i] == '>') && (i == 0 || s[i-1] == '.') && (i+1 == len(s) || s[i+1] == '.') {
			return true
		}
	}
	return false
}

// subsetMatch is nats-server's isSubsetMatch of a subject's tokens against a
// source pattern, subject wildcards included: "*" in the subject only
// matches "*" in the pattern, ">" in the subject matches nothing but a ">".
func subsetMatch(subject []byte, pattern string) bool {
	si, pi := 0, 0 // offsets of the current tokens
	for pi <= len(pattern) {
		pe := indexDot(pattern, pi)
		p := pattern[pi:pe]
		if si > len(subject) {
			return false
		}
		se := indexDotBytes(subject, si)
		s := subject[si:se]
		if len(p) == 0 {
			return false
		}
		if p == ">" {
			return true
		}
		if len(s) == 0 || string(s) == ">" {
			return false
		}
		if string(s) == "*" {
			if p != "*" {
				return false
			}
		} else if p[0] != '*' && string(s) != p {
			return false
		}
		pi, si = pe+1, se+1
	}
	return si > len(subject)
}

func indexDot(s string, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == '.' {
			return i
		}
	}
	return len(s)
}

func indexDotBytes(s []byte, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == '.' {
			return i
		}
	}
	return len(s)
}
