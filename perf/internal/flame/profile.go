// Package flame reads pprof profiles (gzipped profile.proto) with a minimal protobuf decoder
// and renders them as flame graph SVGs, so the perf rig needs neither graphviz nor a module
// beyond the standard library.
package flame

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// Profile is the part of a pprof profile a flame graph needs.
type Profile struct {
	SampleTypes []string   // "type/unit" per value index
	Stacks      [][]string // root-first function names per sample
	Values      [][]int64  // per sample, one per sample type
}

type line struct{ fn uint64 }
type location struct{ lines []line }

// Load reads a pprof file (gzipped or not).
func Load(path string) (*Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if b, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	return Parse(b)
}

type rawSample struct {
	locs []uint64
	vals []int64
}

// Parse decodes an uncompressed profile.proto message.
func Parse(b []byte) (*Profile, error) {
	var strs []string
	var types [][2]int64
	var samples []rawSample
	locs := map[uint64]location{}
	funcs := map[uint64]int64{} // function id → name string index
	err := fields(b, func(num int, wt int, v uint64, data []byte) error {
		switch num {
		case 1: // sample_type
			var t [2]int64
			err := fields(data, func(n, _ int, v uint64, _ []byte) error {
				if n == 1 || n == 2 {
					t[n-1] = int64(v)
				}
				return nil
			})
			types = append(types, t)
			return err
		case 2: // sample
			var s rawSample
			err := fields(data, func(n, wt int, v uint64, d []byte) error {
				switch n {
				case 1:
					if wt == 2 {
						return packed(d, func(x uint64) { s.locs = append(s.locs, x) })
					}
					s.locs = append(s.locs, v)
				case 2:
					if wt == 2 {
						return packed(d, func(x uint64) { s.vals = append(s.vals, int64(x)) })
					}
					s.vals = append(s.vals, int64(v))
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // location
			var id uint64
			var loc location
			err := fields(data, func(n, _ int, v uint64, d []byte) error {
				switch n {
				case 1:
					id = v
				case 4:
					var l line
					if err := fields(d, func(n, _ int, v uint64, _ []byte) error {
						if n == 1 {
							l.fn = v
						}
						return nil
					}); err != nil {
						return err
					}
					loc.lines = append(loc.lines, l)
				}
				return nil
			})
			locs[id] = loc
			return err
		case 5: // function
			var id uint64
			var name int64
			err := fields(data, func(n, _ int, v uint64, _ []byte) error {
				switch n {
				case 1:
					id = v
				case 2:
					name = int64(v)
				}
				return nil
			})
			funcs[id] = name
			return err
		case 6: // string_table
			strs = append(strs, string(data))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i int64) string {
		if i >= 0 && int(i) < len(strs) {
			return strs[i]
		}
		return "?"
	}
	p := &Profile{}
	for _, t := range types {
		p.SampleTypes = append(p.SampleTypes, str(t[0])+"/"+str(t[1]))
	}
	for _, s := range samples {
		var stack []string
		// Locations are leaf-first; within a location, inlined callees come first.
		for i := len(s.locs) - 1; i >= 0; i-- {
			loc := locs[s.locs[i]]
			if len(loc.lines) == 0 {
				stack = append(stack, fmt.Sprintf("0x%x", s.locs[i]))
				continue
			}
			for j := len(loc.lines) - 1; j >= 0; j-- {
				stack = append(stack, str(funcs[loc.lines[j].fn]))
			}
		}
		p.Stacks = append(p.Stacks, stack)
		p.Values = append(p.Values, s.vals)
	}
	return p, nil
}

// ValueIndex returns the index of the sample type whose name (before "/") is want, or last.
func (p *Profile) ValueIndex(want ...string) int {
	for _, w := range want {
		for i, t := range p.SampleTypes {
			if len(t) >= len(w) && t[:len(w)] == w && (len(t) == len(w) || t[len(w)] == '/') {
				return i
			}
		}
	}
	return len(p.SampleTypes) - 1
}

var errTrunc = errors.New("pprof: truncated protobuf")

func uvarint(b []byte) (uint64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if i == 10 {
			return 0, 0
		}
		if c < 0x80 {
			return x | uint64(c)<<s, i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

// fields walks a protobuf message: varints come as v, length-delimited fields as data.
func fields(b []byte, fn func(num, wt int, v uint64, data []byte) error) error {
	for len(b) > 0 {
		key, n := uvarint(b)
		if n == 0 {
			return errTrunc
		}
		b = b[n:]
		num, wt := int(key>>3), int(key&7)
		var v uint64
		var data []byte
		switch wt {
		case 0:
			v, n = uvarint(b)
			if n == 0 {
				return errTrunc
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return errTrunc
			}
			b = b[8:]
		case 2:
			l, n := uvarint(b)
			if n == 0 || uint64(len(b)-n) < l {
				return errTrunc
			}
			data = b[n : n+int(l)]
			b = b[n+int(l):]
		case 5:
			if len(b) < 4 {
				return errTrunc
			}
			b = b[4:]
		default:
			return fmt.Errorf("pprof: wire type %d", wt)
		}
		if err := fn(num, wt, v, data); err != nil {
			return err
		}
	}
	return nil
}

func packed(b []byte, fn func(uint64)) error {
	for len(b) > 0 {
		v, n := uvarint(b)
		if n == 0 {
			return errTrunc
		}
		fn(v)
		b = b[n:]
	}
	return nil
}
