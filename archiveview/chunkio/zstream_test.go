package chunkio

import (
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdHeaderSeeds are frame headers the encoder writes, and hand-made ones.
func zstdHeaderSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, n := range []int{0, 1, 255, 256, 300, 65535 + 256, 1 << 20} {
		enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, enc.EncodeAll(make([]byte, n), nil))
		enc.Close()
	}
	out = append(out,
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x58},                         // multi-segment, window descriptor only
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0xC0, 0x58, 1, 2, 3, 4, 5, 6, 7, 8}, // 8-byte content size
		[]byte{0x28, 0xB5, 0x2F, 0xFD, 0x23, 1, 2, 3, 4, 9},                // single segment, 4-byte dictionary id
		[]byte{0x28, 0xB5, 0x2F},                                           // short
		[]byte{0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0},                         // skippable frame
	)
	return out
}

// TestZstdHeader checks zstdWindow and zstdContentSize against the zstd
// library's own header decoder.
func TestZstdHeader(t *testing.T) {
	for _, h := range zstdHeaderSeeds(t) {
		zstdHeaderOracle(t, h)
	}
}

func FuzzZstdHeader(f *testing.F) {
	for _, h := range zstdHeaderSeeds(f) {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h []byte) { zstdHeaderOracle(t, h) })
}

// zstdHeaderOracle: whenever our parsers answer, the library agrees.
func zstdHeaderOracle(t *testing.T, h []byte) {
	t.Helper()
	var want zstd.Header
	werr := want.Decode(h)
	if fcs, ok := zstdContentSize(h); ok {
		if werr != nil || want.Skippable || !want.HasFCS || int64(want.FrameContentSize) != fcs {
			t.Fatalf("% x: content size %d, library says %+v (%v)", h, fcs, want, werr)
		}
	}
	if w, ok := zstdWindow(h); ok {
		if werr != nil || want.Skippable || (want.WindowSize != 0 && int64(want.WindowSize) != w) ||
			(want.WindowSize == 0 && (!want.SingleSegment || int64(want.FrameContentSize) != w)) {
			t.Fatalf("% x: window %d, library says %+v (%v)", h, w, want, werr)
		}
	}
}
