package chunkio

import (
	"fmt"
	"slices"
	"testing"
)

// frames builds a frame table from (compressed offset, compressed size)
// pairs; decoded sizes are 4x.
func frames(spans ...[2]int64) []Frame {
	var out []Frame
	var u int64
	for _, s := range spans {
		out = append(out, Frame{COff: s[0], CSize: s[1], UOff: u, USize: 4 * s[1]})
		u += 4 * s[1]
	}
	return out
}

func TestPlanFrames(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		name   string
		fr     []Frame
		lo, hi int
		part   int64
		want   [][2]int // frame runs
	}{
		{"adjacent frames merge up to the part size",
			frames([2]int64{0, 3 * M}, [2]int64{3 * M, 3 * M}, [2]int64{6 * M, 3 * M}, [2]int64{9 * M, 3 * M}), 0, 3, 8 * M,
			[][2]int{{0, 1}, {2, 3}}},
		{"exactly the part size still merges",
			frames([2]int64{0, 4 * M}, [2]int64{4 * M, 4 * M}, [2]int64{8 * M, 1}), 0, 2, 8 * M,
			[][2]int{{0, 1}, {2, 2}}},
		{"a gap is never bridged, however small",
			frames([2]int64{0, 100}, [2]int64{101, 100}, [2]int64{201, 100}), 0, 2, 8 * M,
			[][2]int{{0, 0}, {1, 2}}},
		{"a frame over the part size is a part alone",
			frames([2]int64{0, 1 * M}, [2]int64{1 * M, 20 * M}, [2]int64{21 * M, 1 * M}), 0, 2, 8 * M,
			[][2]int{{0, 0}, {1, 1}, {2, 2}}},
		{"only frames lo..hi",
			frames([2]int64{0, 10}, [2]int64{10, 10}, [2]int64{20, 10}, [2]int64{30, 10}), 1, 2, 8 * M,
			[][2]int{{1, 2}}},
		{"frames out of object order do not merge",
			[]Frame{{COff: 100, CSize: 100, USize: 1}, {COff: 0, CSize: 100, UOff: 1, USize: 1}}, 0, 1, 8 * M,
			[][2]int{{0, 0}, {1, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plans := planFrames(tc.fr, tc.lo, tc.hi, tc.part)
			var got [][2]int
			for _, p := range plans {
				got = append(got, [2]int{p.lo, p.hi})
				if p.off != tc.fr[p.lo].COff || p.end != tc.fr[p.hi].COff+tc.fr[p.hi].CSize {
					t.Errorf("part %d-%d spans [%d,%d)", p.lo, p.hi, p.off, p.end)
				}
				if p.hi > p.lo && p.size() > tc.part {
					t.Errorf("part %d-%d of %d bytes exceeds the part size %d", p.lo, p.hi, p.size(), tc.part)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("runs %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanRange(t *testing.T) {
	got := planRange(5, 25, 10)
	want := [][2]int64{{5, 10}, {10, 20}, {20, 25}}
	if len(got) != len(want) {
		t.Fatalf("parts %v", got)
	}
	for i, p := range got {
		if p.off != want[i][0] || p.end != want[i][1] || p.lo <= p.hi {
			t.Errorf("part %d = [%d,%d) frames %d-%d, want %v and no frames", i, p.off, p.end, p.lo, p.hi, want[i])
		}
	}
	if got := planRange(7, 7, 10); len(got) != 0 {
		t.Errorf("empty range planned %v", got)
	}
}

func TestSplitSubs(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		off, end int64
		ways     int
		want     int // sub-ranges
	}{
		{0, 10 * M, 8, 8},      // a cold 10 MB frame: 8 concurrent GETs
		{0, 2600 << 10, 8, 2},  // 2.6 MB: no sub-range under 1 MiB
		{0, 512 << 10, 8, 1},   // small: one GET
		{0, 64 * M, 8, 8},      // never more than the ways
		{0, 8 * M, 1, 1},       // a stream with its window full: one GET per part
		{0, 8 * M, 0, 1},       // ways < 1 counts as 1
		{5, 5 + 3*M + 7, 4, 3}, // uneven sizes
	} {
		subs := splitSubs(tc.off, tc.end, tc.ways, minSubRange)
		if len(subs)-1 != tc.want || subs[0] != tc.off || subs[len(subs)-1] != tc.end {
			t.Errorf("splitSubs(%d,%d,%d) = %v, want %d sub-ranges", tc.off, tc.end, tc.ways, subs, tc.want)
			continue
		}
		for i := 1; i < len(subs); i++ {
			if n := subs[i] - subs[i-1]; n <= 0 || (len(subs) > 2 && n < minSubRange) {
				t.Errorf("splitSubs(%d,%d,%d): sub-range %d is %d bytes", tc.off, tc.end, tc.ways, i-1, n)
			}
		}
	}
}

func TestWaysAndWindow(t *testing.T) {
	for _, tc := range []struct{ parts, inFlight, want int }{
		{8, 1, 8}, {8, 2, 4}, {8, 3, 2}, {8, 8, 1}, {8, 20, 1}, {8, 0, 8},
	} {
		if got := waysFor(tc.parts, tc.inFlight); got != tc.want {
			t.Errorf("waysFor(%d, %d) = %d, want %d", tc.parts, tc.inFlight, got, tc.want)
		}
	}
	w := newWindow(8)
	var seen []int
	for i := 0; i < 5; i++ {
		seen = append(seen, w.n)
		w.starved()
	}
	if fmt.Sprint(seen) != "[2 4 8 8 8]" {
		t.Errorf("window under starvation: %v", seen)
	}
	if w := newWindow(1); w.n != 1 {
		t.Errorf("window with at most 1 part starts at %d", w.n)
	}
}

// TestNextFramePartJoin: the "may this frame join" predicate is asked in
// order, only for frames the adjacency and size rules allow, and not again
// after it refused one: the part ends before the refused frame.
func TestNextFramePartJoin(t *testing.T) {
	fr := frames([2]int64{0, 10}, [2]int64{10, 10}, [2]int64{20, 10}, [2]int64{30, 10}, [2]int64{45, 10})
	at := func(k int) Frame { return fr[k] }
	for _, tc := range []struct {
		name   string
		refuse int // frame join refuses (-1: none)
		part   int64
		wantHi int
		asked  []int
	}{
		{"all join up to the gap", -1, 100, 3, []int{1, 2, 3}},
		{"a refusal ends the part", 2, 100, 1, []int{1, 2}},
		{"the size rule comes first", -1, 25, 1, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []int
			p := nextFramePart(len(fr), at, 0, tc.part, func(k int) bool {
				asked = append(asked, k)
				return k != tc.refuse
			})
			if p.lo != 0 || p.hi != tc.wantHi || p.off != 0 || p.end != fr[tc.wantHi].COff+fr[tc.wantHi].CSize {
				t.Errorf("part %+v, want frames 0-%d", p, tc.wantHi)
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("join asked for %v, want %v", asked, tc.asked)
			}
		})
	}
	if p := nextRange(5, 25, 10); p.off != 5 || p.end != 10 {
		t.Errorf("nextRange(5, 25, 10) = [%d,%d), want [5,10)", p.off, p.end)
	}
	if p := nextRange(20, 25, 10); p.off != 20 || p.end != 25 {
		t.Errorf("nextRange(20, 25, 10) = [%d,%d), want [20,25)", p.off, p.end)
	}
}

// TestPlanFramesBoundsFramesPerPart: a million adjacent 8-byte frames (a
// hostile manifest's) are planned into parts of at most maxPartFrames
// frames, each a claim no budget charges; on the old code one 8 MB part
// claimed all of them.
func TestPlanFramesBoundsFramesPerPart(t *testing.T) {
	const n = 1_000_000
	fr := make([]Frame, n)
	for i := range fr {
		fr[i] = Frame{COff: int64(i) * 8, CSize: 8, UOff: int64(i) * 8, USize: 8}
	}
	parts := planFrames(fr, 0, n-1, DefaultPartSize)
	next := 0
	for _, p := range parts {
		if p.lo != next || p.hi-p.lo+1 > maxPartFrames {
			t.Fatalf("part of frames %d-%d after frame %d: want the next at most %d frames", p.lo, p.hi, next-1, maxPartFrames)
		}
		next = p.hi + 1
	}
	if next != n {
		t.Fatalf("parts cover frames 0-%d of %d", next-1, n)
	}
}
