package chunkio

import (
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsRegisteredAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		if v := mf.GetMetric()[0].GetCounter().GetValue(); v != 0 {
			t.Errorf("%s starts at %v", mf.GetName(), v)
		}
	}
	sort.Strings(names)
	want := []string{"wharf_checksum_failures_total", "wharf_frame_cache_hits_total", "wharf_frames_decoded_total", "wharf_frames_fetched_total", "wharf_prefetch_wasted_bytes_total"}
	if len(names) != len(want) {
		t.Fatalf("series %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("series %v, want %v", names, want)
		}
	}
	var m *Metrics // nil is safe
	m.frameFetched()
	m.frameDecoded()
	m.cacheHit()
	m.checksumFailure()
}
