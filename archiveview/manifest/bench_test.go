package manifest

import (
	"runtime"
	"testing"
)

// BenchmarkLoad1M loads a 1,000,000-file manifest (plain JSON in the
// writer's shape, ~430 MB, generated in-process) end to end: decode,
// per-entry checks and Validate. Besides ns/op it reports cpu-s/op (user+
// system CPU of the whole process per load, GC included), which stays
// meaningful when the machine is shared.
func BenchmarkLoad1M(b *testing.B) {
	data := encode(b, synth(1000, 1000), false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	n := 0
	var m *Manifest
	for b.Loop() {
		m = nil
		var err error
		m, err = Parse(data, "bench/manifest.json", Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if len(m.Files) != 1_000_000 {
			b.Fatalf("%d files", len(m.Files))
		}
		n++
	}
	if d := cpuTime() - cpu0; d > 0 {
		b.ReportMetric(d.Seconds()/float64(n), "cpu-s/op")
	}
	// Heap the loaded Manifest retains (the in-memory index's raw material).
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	with := int64(ms.HeapAlloc)
	runtime.KeepAlive(m)
	m = nil
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(with-int64(ms.HeapAlloc))/(1<<20), "retained-MiB")
}

// BenchmarkLoad1MGzip is BenchmarkLoad1M through gzip, as manifests are
// stored (manifest.json.gz).
func BenchmarkLoad1MGzip(b *testing.B) {
	data := encode(b, synth(1000, 1000), true)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		m, err := Parse(data, "bench/manifest.json.gz", Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if len(m.Files) != 1_000_000 {
			b.Fatalf("%d files", len(m.Files))
		}
		n++
	}
	if d := cpuTime() - cpu0; d > 0 {
		b.ReportMetric(d.Seconds()/float64(n), "cpu-s/op")
	}
}
