package bench

import (
	"context"
	"strings"
	"testing"
)

// TestListingAtScaleSmall runs the listing-at-scale workload on a small
// manifest: the index answers the probe prefix, and every timed
// ListObjectsV2 request (first page, continued middle page, prefix probe)
// is answered over HTTP and reported.
func TestListingAtScaleSmall(t *testing.T) {
	const n = 3000
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Latency, cfg.TempDir, cfg.ListKeys = 0, t.TempDir(), n
	e, err := newEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	rep := &Report{}
	if err := listingAtScale(ctx, cfg, e, rep); err != nil {
		t.Fatal(err)
	}
	probe := 0
	for i := 0; i < n; i++ {
		if strings.HasPrefix(scaleKey(i), probePrefix) {
			probe++
		}
	}
	if probe == 0 {
		t.Fatalf("no key of %d under the probe prefix %s", n, probePrefix)
	}
	got := map[string]bool{}
	for _, r := range rep.Rows {
		if r.System == "wharf" && r.Metric == "median latency" {
			got[r.Variant] = true
		}
	}
	for _, q := range listQueries("") {
		if !got["ListObjectsV2 over HTTP: "+q.name] {
			t.Errorf("no latency reported for %q (rows: %v)", q.name, got)
		}
	}
}
