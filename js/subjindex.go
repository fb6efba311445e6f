package js

import "strings"

// subjectIndex holds the subjects of an account's streams in a token trie, so that a create,
// update or restore finds a stream whose subjects collide with its own by walking the new
// subjects' tokens rather than comparing them with every stream's (with 10,000 streams that
// comparison was half of each create's time, and creating them quadratic). Collision is
// auth.SubjectsCollide's: token by token, '*' meets any one token, '>' any rest, and
// otherwise the lengths must be equal. Guarded by the account's mu.
type subjectIndex struct{ root sxNode }

type sxNode struct {
	next  map[string]*sxNode
	ends  map[*stream]int // streams with a subject ending at this node (and how many)
	below int             // subjects ending strictly under this node
}

func (x *subjectIndex) add(s *stream, subjects []string) {
	for _, subj := range subjects {
		n := &x.root
		for _, t := range strings.Split(subj, ".") {
			n.below++
			c := n.next[t]
			if c == nil {
				if n.next == nil {
					n.next = make(map[string]*sxNode)
				}
				c = &sxNode{}
				n.next[t] = c
			}
			n = c
		}
		if n.ends == nil {
			n.ends = make(map[*stream]int)
		}
		n.ends[s]++
	}
}

// remove undoes add(s, subjects).
func (x *subjectIndex) remove(s *stream, subjects []string) {
	for _, subj := range subjects {
		removeOne(&x.root, s, strings.Split(subj, "."))
	}
}

// removeOne removes one subject of s under n: whether it was there, and whether n is left
// holding nothing.
func removeOne(n *sxNode, s *stream, toks []string) (removed, empty bool) {
	if len(toks) == 0 {
		if n.ends[s] == 0 {
			return false, false
		}
		if n.ends[s]--; n.ends[s] == 0 {
			delete(n.ends, s)
		}
		return true, len(n.ends) == 0 && n.below == 0
	}
	c := n.next[toks[0]]
	if c == nil {
		return false, false
	}
	removed, gone := removeOne(c, s, toks[1:])
	if !removed {
		return false, false
	}
	n.below--
	if gone {
		delete(n.next, toks[0])
	}
	return true, len(n.ends) == 0 && n.below == 0
}

// collides reports whether any of subjects collides with a subject in the index.
func (x *subjectIndex) collides(subjects []string) bool {
	for _, subj := range subjects {
		if collideAt(&x.root, strings.Split(subj, "."), 0) {
			return true
		}
	}
	return false
}

func collideAt(n *sxNode, toks []string, i int) bool {
	if i == len(toks) {
		return len(n.ends) > 0
	}
	t := toks[i]
	if t == ">" {
		return n.below > 0 // any subject with a token here
	}
	if n.next[">"] != nil {
		return true
	}
	if t == "*" {
		for tok, c := range n.next {
			if tok != ">" && collideAt(c, toks, i+1) {
				return true
			}
		}
		return false
	}
	if c := n.next[t]; c != nil && collideAt(c, toks, i+1) {
		return true
	}
	if c := n.next["*"]; c != nil && collideAt(c, toks, i+1) {
		return true
	}
	return false
}
