package manifest

import (
	"fmt"
	"math"
	"slices"
)

// FrameSpan is one entry of a framed chunk's frame table: the frame's
// compressed bytes [COff, COff+CSize) in the chunk object, and the tar-stream
// bytes [UOff, UOff+USize) they decode to.
type FrameSpan struct {
	COff, CSize, UOff, USize int64
}

// FrameTable is what CheckFrames learned about a valid frame table.
type FrameTable struct {
	Total int64 // tar-stream bytes the frames decode to (the end of the last uncompressed span)
	End   int64 // the end of the furthest compressed span: the object must be at least this long
}

// FrameError is the error CheckFrames returns: which frame (in table
// order; -1 when the rule concerns the table as a whole) broke which rule.
// Callers wrap it with their own sentinel (ErrInvalid, the resolver's
// ErrInvalidTree, the index loader's ErrBadIndex) and the chunk's name.
type FrameError struct {
	Frame  int
	Reason string
}

func (e *FrameError) Error() string {
	if e.Frame < 0 {
		return e.Reason
	}
	return fmt.Sprintf("frame %d: %s", e.Frame, e.Reason)
}

// CheckFrames is the one frame-table rule of wharf. Validate (manifests),
// the resolver (archives) and the persistent-index loader all call it, so a
// table is accepted or refused the same way wherever it comes from. The
// rules, in the order they are checked:
//
//  1. every frame has positive compressed and uncompressed sizes and
//     non-negative offsets, and neither span overflows an int64;
//  2. the uncompressed spans tile [0, total) contiguously, in table order
//     (a table listed out of order is refused, not sorted: the writer
//     always lists frames in stream order);
//  3. compressed spans do not overlap, in any order (one frame pointing at
//     another's bytes would serve the other's content); gaps between them
//     (skippable frames) are allowed;
//  4. when compressedSize is known (> 0), no frame ends past it: the
//     object cannot hold that frame. A compressed_size of 0 means unknown
//     (old writers); the object size is then taken as End.
//
// Rule 4 used to be a warning in Validate and an error in the resolver;
// the error wins, since an archive whose frames run past their chunk was
// refused at open either way.
//
// n is the number of frames and span(i) returns frame i, so callers need
// not build a slice. CheckFrames allocates only to check overlap when the
// compressed offsets are not already ascending.
func CheckFrames(n int, span func(i int) FrameSpan, compressedSize int64) (FrameTable, error) {
	var t FrameTable
	ascending := true
	var prevC int64
	for i := 0; i < n; i++ {
		f := span(i)
		switch {
		case f.CSize <= 0 || f.USize <= 0:
			return t, &FrameError{i, fmt.Sprintf("non-positive size (compressed %d, uncompressed %d)", f.CSize, f.USize)}
		case f.COff < 0 || f.UOff < 0:
			return t, &FrameError{i, fmt.Sprintf("negative offset (compressed %d, uncompressed %d)", f.COff, f.UOff)}
		case f.COff > math.MaxInt64-f.CSize:
			return t, &FrameError{i, "compressed span overflows"}
		case f.UOff > math.MaxInt64-f.USize:
			return t, &FrameError{i, "uncompressed span overflows"}
		case f.UOff != t.Total:
			return t, &FrameError{i, fmt.Sprintf("uncompressed_offset %d, want %d (spans must be contiguous from 0 in order)", f.UOff, t.Total)}
		}
		t.Total += f.USize
		if i > 0 && f.COff < prevC {
			ascending = false
		}
		prevC = f.COff
		t.End = max(t.End, f.COff+f.CSize)
	}
	if ascending {
		for i := 1; i < n; i++ {
			p, q := span(i-1), span(i)
			if q.COff < p.COff+p.CSize {
				return t, overlapErr(i-1, i, p, q)
			}
		}
	} else {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmpInt64(span(a).COff, span(b).COff) })
		for k := 1; k < n; k++ {
			p, q := span(order[k-1]), span(order[k])
			if q.COff < p.COff+p.CSize {
				return t, overlapErr(order[k-1], order[k], p, q)
			}
		}
	}
	if compressedSize > 0 && t.End > compressedSize {
		return t, &FrameError{-1, fmt.Sprintf("frames end at byte %d, past compressed_size %d", t.End, compressedSize)}
	}
	return t, nil
}

func overlapErr(a, b int, p, q FrameSpan) error {
	return &FrameError{-1, fmt.Sprintf("frames %d and %d: compressed spans [%d,+%d) and [%d,+%d) overlap",
		a, b, p.COff, p.CSize, q.COff, q.CSize)}
}

// FrameSlack is the room CheckFramePlausible allows above twice a frame's
// decoded size.
const FrameSlack = 64 << 10

// CheckFramePlausible refuses a frame whose compressed span is larger than
// any single zstd frame of its decoded size can be: 2 × USize + 64 KiB, far
// above zstd's own bound (size + size/256 + 64 KiB). Such an entry is a
// lie, and reading or hashing the span would only cost time and memory.
// The read path applies it before fetching a frame (a table is still
// accepted at open, so the other frames of the chunk stay readable).
func CheckFramePlausible(f FrameSpan) error {
	if f.USize <= (math.MaxInt64-FrameSlack)/2 && f.CSize > 2*f.USize+FrameSlack {
		return fmt.Errorf("%d compressed bytes cannot hold one zstd frame of %d bytes", f.CSize, f.USize)
	}
	return nil
}
