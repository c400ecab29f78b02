package bench

import (
	"context"
	"strings"
	"testing"
)

// TestFleetConfigValidate: the fleet's sizes are checked before any work;
// Replicas 0 skips the workload whatever the rest says.
func TestFleetConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		fc   FleetConfig
		want string // "" = valid
	}{
		{"default", DefaultFleetConfig(), ""},
		{"skipped", FleetConfig{}, ""},
		{"one replica", FleetConfig{Replicas: 1, Reads: 1, Files: 1, Clients: 1}, ""},
		{"negative replicas", FleetConfig{Replicas: -1, Reads: 1, Files: 1, Clients: 1}, "replicas"},
		{"too many replicas", FleetConfig{Replicas: 65, Reads: 1, Files: 1, Clients: 1}, "replicas"},
		{"no reads", FleetConfig{Replicas: 4, Files: 1, Clients: 1}, "reads"},
		{"no files", FleetConfig{Replicas: 4, Reads: 1, Clients: 1}, "reads"},
		{"no clients", FleetConfig{Replicas: 4, Reads: 1, Files: 1}, "clients"},
	} {
		err := c.fc.validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
		cfg := DefaultConfig()
		cfg.Fleet = c.fc
		if err2 := cfg.validate(); (err2 == nil) != (err == nil) {
			t.Errorf("%s: Config.validate %v, FleetConfig.validate %v", c.name, err2, err)
		}
	}
}

// TestFleetTiny runs the fleet workload at CI size on both S3 models,
// without latency: three replicas, 150 random reads of 200 files (two
// frames), every byte checked (runFleet fails on a wrong one). Without
// peers each replica fetches the frames its own reads touch, so the
// backend bytes lie between one copy of the touched frames and one per
// replica; the report has every row for the variant.
func TestFleetTiny(t *testing.T) {
	for _, model := range []string{ModelHTTP, ModelInProcess} {
		t.Run(model, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Latency, cfg.Bandwidth, cfg.TempDir, cfg.Model = 0, 0, t.TempDir(), model
			cfg.CacheBytes = 64 << 20
			cfg.Fleet = FleetConfig{Replicas: 3, Reads: 150, Files: 200, Clients: 4}
			e, err := newEnv(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.close)
			rep := &Report{}
			if err := fleetWorkload(context.Background(), cfg, e, rep); err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, r := range rep.Rows {
				if r.Workload == fleetWorkloadName && r.Variant == "no peers" {
					got[r.Metric] = r.Value
				}
			}
			for _, m := range []string{"reads", "touched frames", "touched frames MB", "backend GETs", "backend MB",
				"GETs / touched frame", "backend bytes / touched frames", "request p50", "request p99"} {
				if _, ok := got[m]; !ok {
					t.Errorf("no %q row for the fleet without peers", m)
				}
			}
			if got["reads"] != 150 || got["touched frames"] < 1 {
				t.Errorf("%v reads, %v touched frames: want 150 and at least 1", got["reads"], got["touched frames"])
			}
			if r := got["backend bytes / touched frames"]; r < 1 || r > 3*1.05 {
				t.Errorf("no-peer fleet of 3 fetched %.2fx the touched frames: want 1x to 3x (one copy per replica at most)", r)
			}
			if got["request p99"] < got["request p50"] || got["request p50"] <= 0 {
				t.Errorf("latency p50 %v ms, p99 %v ms", got["request p50"], got["request p99"])
			}
			var md strings.Builder
			rep.WriteMarkdown(&md)
			if !strings.Contains(md.String(), "## "+fleetWorkloadName) {
				t.Errorf("the markdown report has no fleet table:\n%s", md.String())
			}
		})
	}
}
