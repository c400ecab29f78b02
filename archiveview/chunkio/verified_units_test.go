package chunkio

import (
	"reflect"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// TestUnitsChoice pins which checksum units the first ranged read of an
// extent no frame checksum covers must check, for every chunk kind and
// combination of sums: the chunk's sum where hashing it needs no decoding,
// a giant frame's span, else the extent's own sum, else none.
func TestUnitsChoice(t *testing.T) {
	csum, esum, fsum := [32]byte{1}, [32]byte{2}, [32]byte{3}
	obj := []Unit{{Kind: UnitObject, Sum: csum}}
	ext := []Unit{{Kind: UnitExtent, Off: 1024, N: 100, Sum: esum}}
	// Frames of 1000 tar bytes each; frame 1 is giant (over MaxFrameBytes).
	frames := func(sums ...bool) []Frame {
		var fr []Frame
		for i, has := range sums {
			f := Frame{COff: int64(i) * 500, CSize: 500, UOff: int64(i) * 1000, USize: 1000, HasSum: has}
			if has {
				f.Sum = fsum
			}
			if i == 1 {
				f.CSize, f.USize = 500, 4000
			}
			fr = append(fr, f)
		}
		return fr
	}
	for _, tc := range []struct {
		name         string
		kind         Kind
		frames       []Frame
		chunkSum     bool
		extSum       bool
		extOff, extN int64
		want         []Unit
		ok           bool
	}{
		{"direct: extent sum first", Direct, nil, true, true, 1024, 100, ext, true},
		{"direct: chunk sum", Direct, nil, true, false, 1024, 100, obj, true},
		{"direct: none", Direct, nil, false, false, 1024, 100, nil, false},
		{"plain tar: extent sum first", PlainTar, nil, true, true, 1024, 100, ext, true},
		{"plain tar: chunk sum", PlainTar, nil, true, false, 1024, 100, obj, true},
		{"plain tar: extent sum only", PlainTar, nil, false, true, 1024, 100, ext, true},
		{"stream zstd: chunk sum first", StreamZstd, nil, true, true, 1024, 100, obj, true},
		{"stream zstd: extent sum", StreamZstd, nil, false, true, 1024, 100, ext, true},
		{"stream zstd: none", StreamZstd, nil, false, false, 1024, 100, nil, false},
		{"framed, no table: chunk sum", FramedZstd, nil, true, true, 1024, 100, obj, true},
		{"framed, no table: extent sum", FramedZstd, nil, false, true, 1024, 100, ext, true},
		{"framed, no table: none", FramedZstd, nil, false, false, 1024, 100, nil, false},
		{"framed: small frames with sums need no unit", FramedZstd, frames(true, true, true), false, true, 100, 50, nil, true},
		{"framed: giant frame span", FramedZstd, frames(true, true, true), false, true, 1024, 100,
			[]Unit{{Kind: UnitSpan, Off: 500, N: 500, Sum: fsum}}, true},
		{"framed: frame without sum, extent sum", FramedZstd, frames(true, false, true), false, true, 1024, 100, ext, true},
		{"framed: frame without sum, no extent sum", FramedZstd, frames(true, false, true), true, false, 1024, 100, nil, false},
		{"framed: outside the table, extent sum", FramedZstd, frames(true, true, true), false, true, 1 << 20, 100,
			[]Unit{{Kind: UnitExtent, Off: 1 << 20, N: 100, Sum: esum}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Chunk{Key: "c", Kind: tc.kind, Frames: tc.frames, HasSum: tc.chunkSum}
			if tc.chunkSum {
				c.Sum = csum
			}
			set := NewSet(backend.NewFileStore(t.TempDir()), "bkt", []Chunk{c}, Options{MaxFrameBytes: 2000})
			e := Extent{Chunk: 0, Off: tc.extOff, Length: tc.extN, HasSum: tc.extSum}
			if tc.extSum {
				e.Sum = esum
			}
			got, ok := set.units(0, tc.extOff, e)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("units = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
