package chunkio

import "testing"

// TestGiantFrameClassification: a frame is streamed (never buffered whole)
// when its decoded or its compressed size exceeds MaxFrameBytes, and a
// compressed span no zstd frame of its decoded size could need is refused.
func TestGiantFrameClassification(t *testing.T) {
	o := Options{MaxFrameBytes: 1000}
	for _, tc := range []struct {
		name      string
		f         Frame
		giant     bool
		plausible bool
	}{
		{"small", Frame{CSize: 500, USize: 900}, false, true},
		{"decoded over the limit", Frame{CSize: 500, USize: 1001}, true, true},
		{"compressed over the limit", Frame{CSize: 1001, USize: 1000}, true, true},
		{"incompressible, both at the limit", Frame{CSize: 1000, USize: 1000}, false, true},
		{"huge span for a small frame", Frame{CSize: 600 << 20, USize: 1000}, true, false},
		{"span at the bound", Frame{CSize: 2*1000 + 64<<10, USize: 1000}, true, true},
		{"span one past the bound", Frame{CSize: 2*1000 + 64<<10 + 1, USize: 1000}, true, false},
		{"huge decoded size (no overflow)", Frame{CSize: 1 << 62, USize: 1<<63 - 1}, true, true},
	} {
		if got := o.Giant(tc.f); got != tc.giant {
			t.Errorf("%s: giant = %v, want %v", tc.name, got, tc.giant)
		}
		if err := framePlausible(0, tc.f); (err == nil) != tc.plausible {
			t.Errorf("%s: framePlausible = %v, want plausible %v", tc.name, err, tc.plausible)
		}
	}
}

// TestCompressedGiantFrameStreamed: with MaxFrameBytes between a frame's
// decoded and compressed size (incompressible data), the frame is streamed:
