package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDiscoveryWorkload runs the discovery workload small: every upload is
// listed, the cold start reads each manifest once, the start from the
// index cache reads none (its HEADs check the cached indexes), and the
// buckets are listed before every archive is open. (The bound itself is
// tested in archiveview/catalog; the timings are the bench's to report.)
func TestDiscoveryWorkload(t *testing.T) {
	const uploads, lat = 64, 20 * time.Millisecond
	rep := &Report{}
	if err := Discovery(context.Background(), DiscoveryConfig{Uploads: uploads, Latency: lat, OpenConcurrency: 16, TempDir: t.TempDir()}, rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, r := range rep.Rows {
		got[r.System+"/"+r.Metric] = r.Value
	}
	if got["wharf cold/manifest GETs"] != uploads || got["wharf index cache/manifest GETs"] != 0 || got["wharf index cache/HEADs"] != uploads {
		t.Errorf("backend requests: %v", got)
	}
	if first := got["wharf cold/first ListBuckets answered"]; first > got["wharf cold/every archive open"] {
		t.Errorf("ListBuckets answered after %.2f s, after every open", first)
	}
}

// TestDiscoveryRefusesBadConfig: no uploads, a negative latency (which
// the --discovery path of the command line does not check) or a negative
// open concurrency is refused before anything is packed.
func TestDiscoveryRefusesBadConfig(t *testing.T) {
	for _, cfg := range []DiscoveryConfig{
		{Uploads: 0},
		{Uploads: 4, Latency: -time.Millisecond},
		{Uploads: 4, OpenConcurrency: -1},
	} {
		cfg.TempDir = t.TempDir()
		rep := &Report{}
		err := Discovery(context.Background(), cfg, rep)
		if err == nil || !strings.Contains(err.Error(), "bench --discovery") || len(rep.Rows) != 0 {
			t.Errorf("%+v: got %v and %d rows, want a bench --discovery error and none", cfg, err, len(rep.Rows))
		}
		if ents, _ := os.ReadDir(cfg.TempDir); len(ents) != 0 {
			t.Errorf("%+v: %d entries left in the temp dir", cfg, len(ents))
		}
	}
}
