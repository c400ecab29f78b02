package chunkio

// Written for mutants that survived scripts/mutation.sh (TESTING.md): the
// zstd header oracle (zstdHeaderOracle) checks only the answers our parser
// gives; this checks that it gives them.

import (
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestZstdHeaderAnswersWhenValid: for every seed header the library
// decodes as a (non-skippable) frame, zstdWindow answers, and
// zstdContentSize answers when the header declares a content size; both
// equal the library's values.
func TestZstdHeaderAnswersWhenValid(t *testing.T) {
	seeds := zstdHeaderSeeds(t)
	// Single-segment frames with 1-, 2- and 8-byte content sizes, and
	// multi-segment ones with each window mantissa, written by hand.
	seeds = append(seeds,
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0x20, 200},                             // single segment, 1-byte size 200
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0x60, 0x10, 0x27},                      // single segment, 2-byte size 0x2710+256
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0xE0, 1, 0, 0, 0, 0, 0, 0, 0},          // single segment, 8-byte size 1
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x00},                            // window 1 KiB
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x07},                            // window 1 KiB + 7/8
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0x40, 0x5B, 0x34, 0x12},                // 2-byte content size, window mantissa 3
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0x81, 0x58, 9, 1, 2, 3, 4},             // 1-byte dictionary id, 4-byte size
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0xC0, 0x58, 0, 0, 0, 0, 0, 0, 0, 0x40}, // content size 1<<62, the largest taken
	)
	answered := 0
	for _, h := range seeds {
		var want zstd.Header
		if err := want.Decode(h); err != nil || want.Skippable {
			continue
		}
		answered++
		w, ok := zstdWindow(h)
		switch {
		case !ok:
			t.Errorf("% x: zstdWindow refused a header the library decodes (%+v)", h, want)
		case want.WindowSize != 0 && int64(want.WindowSize) != w:
			t.Errorf("% x: window %d, library %d", h, w, want.WindowSize)
		}
		c, ok := zstdContentSize(h)
		switch {
		case want.HasFCS && !ok:
			t.Errorf("% x: zstdContentSize refused a declared size (%+v)", h, want)
		case want.HasFCS && int64(want.FrameContentSize) != c:
			t.Errorf("% x: content size %d, library %d", h, c, want.FrameContentSize)
		case !want.HasFCS && ok:
			t.Errorf("% x: content size %d where the header declares none", h, c)
		}
	}
	t.Logf("%d of %d seeds are frames the library decodes", answered, len(seeds))
	if answered < 10 {
		t.Fatalf("only %d seeds decode: the test checks too little", answered)
	}
}
