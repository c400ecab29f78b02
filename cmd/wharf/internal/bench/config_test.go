package bench

import (
	"context"
	"strings"
	"testing"
)

// TestRunRefusesBadConfig: Run refuses, before any work, what a workload
// would fail on late, panic on (a large-file size under 8 MiB), or measure
// nothing with (a walk at concurrency 0); DefaultConfig passes.
func TestRunRefusesBadConfig(t *testing.T) {
	if err := DefaultConfig().validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"negative files", func(c *Config) { c.Files = -1 }, "must not be negative"},
		{"negative latency", func(c *Config) { c.Latency = -1 }, "must not be negative"},
		{"no cache", func(c *Config) { c.CacheBytes = 0 }, "frame cache budget 0"},
		{"large size under 8 MiB", func(c *Config) { c.LargeSize = 4 << 20 }, "--large-size 4194304"},
		{"no frame sizes", func(c *Config) { c.FrameSizes = nil }, "at least one frame size"},
		{"no concurrency", func(c *Config) { c.Concurrency = nil }, "one client concurrency"},
		{"zero frame size", func(c *Config) { c.FrameSizes = []int64{0} }, "walk frame size 0"},
		{"concurrency 0", func(c *Config) { c.Concurrency = []int{8, 0} }, "walk concurrency 0"},
		{"no random reads", func(c *Config) { c.RandomReads = 0 }, "needs at least one file"},
		{"no warm time", func(c *Config) { c.WarmFor = 0 }, "warm-cache measurement time 0s"},
		{"unknown S3 model", func(c *Config) { c.Models = []string{"http", "gofakes3"} }, `S3 model "gofakes3"`},
		{"shapes file too small", func(c *Config) { c.ShapeSize = 512 << 10 }, "analytic shapes: file 524288 bytes"},
		{"shapes file negative", func(c *Config) { c.ShapeSize = -1 }, "analytic shapes"},
		{"shapes frames tiny", func(c *Config) { c.ShapeFrame = 4 << 10 }, "in 4096-byte frames"},
		{"shapes frames over the file", func(c *Config) { c.ShapeSize, c.ShapeFrame = 2<<20, 4<<20 }, "frames of 64 KiB up to the file's size"},
		{"S3 model twice", func(c *Config) { c.Models = []string{"http", "http"} }, `S3 model "http" named twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.TempDir = t.TempDir()
			c.edit(&cfg)
			rep, err := Run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) || rep != nil {
				t.Fatalf("got (%v, %v), want an error containing %q and no report", rep, err, c.want)
			}
		})
	}
	// Without the walk, its settings are not needed.
	cfg := DefaultConfig()
	cfg.Files, cfg.FrameSizes, cfg.Concurrency, cfg.RandomReads, cfg.WarmFor = 0, nil, nil, 0, 0
	cfg.LargeSize = minLargeSize
	if err := cfg.validate(); err != nil {
		t.Errorf("no walk, large size %d: %v", cfg.LargeSize, err)
	}
}
