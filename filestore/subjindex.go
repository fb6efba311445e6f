package filestore

import "hash/maphash"

// subjIndex holds a store's subjects. A KV bucket is mostly subjects (a
// million keys with one value each is a million of them), so what one costs
// beyond its state is what a key costs: with a Go map of pointers it was the
// state's own allocation, the map's slot and growth slack and a second
// by-number table, about 140 bytes a subject. Here the states sit by value in
// pages (no allocation per subject, stable addresses, the number is the
// place) and names find numbers through an open-addressing table of 8-byte
// slots: about 85 bytes a subject.
//
// A *subjState stays valid until its subject is dropped; its place is then
// reused for the next new subject, so nothing may keep one past a drop.
type subjIndex struct {
	pages [][]subjState // by id >> subjPageBits; nil while none of its subjects lives
	live  []uint16      // subjects living in each page
	free  []uint32      // ids of dropped subjects, reused before new ones
	next  uint32        // lowest id never handed out; 0 is never one (an ent's sid 0 is "no message")
	n     int
	// slots is a linear-probing table: the name's 32-bit hash << 32 | id,
	// 0 when empty. The hash both places a slot (its low bits) and screens
	// out most names before one is compared.
	slots []uint64
	seed  maphash.Seed
}

const (
	subjPageBits = 8
	subjPageSize = 1 << subjPageBits
	subjMinSlots = 8
)

func (x *subjIndex) len() int { return x.n }

// ids bounds every id in use: a table indexed by id needs this many entries.
func (x *subjIndex) ids() int { return int(max(x.next, 1)) }

func (x *subjIndex) hash(name string) uint32 { return uint32(maphash.String(x.seed, name)) }

// byID returns a living subject by its number.
func (x *subjIndex) byID(id uint32) *subjState {
	return &x.pages[id>>subjPageBits][id&(subjPageSize-1)]
}

func (x *subjIndex) get(name string) *subjState {
	if x.n == 0 {
		return nil
	}
	h := uint64(x.hash(name))
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := x.slots[i]
		if v == 0 {
			return nil
		}
		if v>>32 == h {
			if ss := x.byID(uint32(v)); ss.name == name {
				return ss
			}
		}
	}
}

// add makes a subject that is not in the index; the index keeps name as it is.
func (x *subjIndex) add(name string) *subjState {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.resize(max(subjMinSlots, 2*len(x.slots)))
	}
	var id uint32
	if k := len(x.free); k > 0 {
		id, x.free = x.free[k-1], x.free[:k-1]
	} else {
		if x.next == 0 {
			x.next = 1
		}
		id = x.next
		x.next++
	}
	p := int(id >> subjPageBits)
	for len(x.pages) <= p {
		x.pages = append(x.pages, nil)
		x.live = append(x.live, 0)
	}
	if x.pages[p] == nil {
		x.pages[p] = make([]subjState, subjPageSize)
	}
	x.live[p]++
	ss := x.byID(id)
	*ss = subjState{name: name, id: id}
	x.place(uint64(x.hash(name))<<32 | uint64(id))
	x.n++
	return ss
}

func (x *subjIndex) place(v uint64) {
	mask := uint64(len(x.slots) - 1)
	i := (v >> 32) & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = v
}

// drop forgets a subject; ss must not be used afterwards.
func (x *subjIndex) drop(ss *subjState) {
	id := ss.id
	mask := uint64(len(x.slots) - 1)
	i := uint64(x.hash(ss.name)) & mask
	for uint32(x.slots[i]) != id {
		i = (i + 1) & mask
	}
	// Close the gap by moving back each later slot of the run that the
	// emptied one would otherwise cut off from its home.
	for j := i; ; {
		j = (j + 1) & mask
		v := x.slots[j]
		if v == 0 {
			break
		}
		if (j-(v>>32))&mask >= (j-i)&mask {
			x.slots[i] = v
			i = j
		}
	}
	x.slots[i] = 0
	*ss = subjState{}
	x.n--
	p := id >> subjPageBits
	if x.live[p]--; x.live[p] == 0 {
		x.pages[p] = nil
	}
	if x.n == 0 {
		// Everything is gone (a purge): start over rather than keep a big
		// table and free list for subjects that may never come back.
		*x = subjIndex{seed: x.seed}
		return
	}
	x.free = append(x.free, id)
	if len(x.slots) > 64 && x.n*8 < len(x.slots) {
		x.resize(len(x.slots) / 2)
	}
}

func (x *subjIndex) resize(n int) {
	old := x.slots
	if x.seed == (maphash.Seed{}) {
		x.seed = maphash.MakeSeed()
	}
	x.slots = make([]uint64, n)
	for _, v := range old {
		if v != 0 {
			x.place(v)
		}
	}
}

// all visits every subject in id order. fn may drop the subject it is given
// (or others); subjects added meanwhile may or may not be visited.
func (x *subjIndex) all(fn func(*subjState)) {
	for _, pg := range x.pages {
		for i := range pg {
			if ss := &pg[i]; ss.id != 0 {
				fn(ss)
			}
		}
	}
}
