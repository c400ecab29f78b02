package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchFleetFlags: "wharf bench --fleet-replicas" refuses a fleet it
// cannot run before any work, and --fleet-replicas N --fleet-reads M run
// the fleet workload alone (the other workloads off) with both variants
// and issue 23's targets in report.md.
func TestBenchFleetFlags(t *testing.T) {
	none := []string{"--files", "0", "--list-keys", "0", "--large-size", "0", "--cold-files", "0", "--shapes-size", "0", "--latency", "0", "--bandwidth", "0"}
	for _, bad := range [][]string{{"--fleet-replicas", "-1"}, {"--fleet-replicas", "65"}, {"--fleet-reads", "0"}} {
		err := runBench(context.Background(), append(append([]string{"--out", t.TempDir()}, bad...), none...))
		if err == nil || !strings.Contains(err.Error(), "fleet") {
			t.Errorf("%v: %v, want an error naming the fleet", bad, err)
		}
	}
	out := t.TempDir()
	if err := runBench(context.Background(), append([]string{"--out", out, "--fleet-replicas", "2", "--fleet-reads", "40"}, none...)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Fleet: random small-file reads", "| wharf x 2 replicas | no peers | 8 | 40 |", "| wharf x 2 replicas | peers | 8 | 40 |",
		"fleet of 2 as peers: backend bytes / touched frames", "fleet of 2 as peers: median latency vs without peers"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("report.md lacks %q:\n%s", w, b)
		}
	}
}
