package bench

import (
	"math"
	"math/bits"
)

// Hist is a log-linear (HDR-style) histogram of non-negative integer values (nanoseconds
// here): exact below 128, then 64 linear sub-buckets per power of two (≤1.6% error).
type Hist struct {
	counts [128 + 57*64]uint64
	n      uint64
	max    uint64
}

const histSubBits = 6

func histBucket(v uint64) int {
	if v < 128 {
		return int(v)
	}
	msb := bits.Len64(v) - 1 // ≥ 7
	shift := msb - histSubBits
	return 128 + (msb-7)*64 + int(v>>uint(shift)) - 64
}

// histValue is the middle of bucket i.
func histValue(i int) uint64 {
	if i < 128 {
		return uint64(i)
	}
	msb := (i-128)/64 + 7
	sub := uint64((i-128)%64 + 64)
	shift := uint(msb - histSubBits)
	return sub<<shift + (1<<shift)/2
}

// Record adds one value.
func (h *Hist) Record(v uint64) {
	h.counts[histBucket(v)]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

// Merge adds o's counts into h.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of recorded values.
func (h *Hist) Count() uint64 { return h.n }

// Quantile returns the value at quantile q in [0,1] (0 when empty).
func (h *Hist) Quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := histValue(i)
			if v > h.max {
				v = h.max
			}
			return v
		}
	}
	return h.max
}
