package manifest

import (
	"testing"
)

// BenchmarkLoad1M loads a 1,000,000-file manifest (plain JSON, writer
// shape, generated in-process) end to end: decode, per-entry checks and
// Validate.
func BenchmarkLoad1M(b *testing.B) {
	data := encode(b, synth(1000, 1000), false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m, err := Parse(data, "bench/manifest.json", Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if len(m.Files) != 1_000_000 {
			b.Fatalf("%d files", len(m.Files))
		}
	}
}
