package archiveview

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/backend/faults"
)

func TestMetricsCountReads(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := chunkio.NewMetrics(reg)
	files := rpTree(31)
	ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10}, Options{Metrics: m, Readahead: -1})
	ra.walk(t)
	// Frames holding some file's header or data (a trailer-only frame is never read).
	touched := map[[2]int]bool{}
	for key := range files {
		f, _ := ra.a.Stat(key)
		for _, e := range ra.a.fileExtents(index.Ordinal(f)) {
			c := &ra.a.tree.Chunks[e.Chunk]
			lo, hi, err := chunkio.CoverFrames(c.Frames, e.Off-512, e.Off+max(e.Length, 1))
			if err != nil {
				t.Fatal(err)
			}
			for i := lo; i <= hi; i++ {
				touched[[2]int{int(e.Chunk), i}] = true
			}
		}
	}
	frames := float64(len(touched))
	if frames < float64(ra.res.Frames)-float64(len(ra.a.tree.Chunks)) {
		t.Fatalf("only %v of %d frames hold file bytes", frames, ra.res.Frames)
	}
	if v := counterValue(t, reg, "wharf_frames_fetched_total"); v != frames {
		t.Errorf("frames fetched %v, want %v", v, frames)
	}
	if v := counterValue(t, reg, "wharf_frames_decoded_total"); v != frames {
		t.Errorf("frames decoded %v, want %v", v, frames)
	}
	if v := counterValue(t, reg, "wharf_frame_cache_hits_total"); v == 0 {
		t.Error("no cache hits on a walk")
	}
	if v := counterValue(t, reg, "wharf_checksum_failures_total"); v != 0 {
		t.Errorf("checksum failures %v on a clean archive", v)
	}
	// Flip a byte of every frame GET: the next uncached read counts a failure.
	ra2 := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10}, Options{Metrics: m, Readahead: -1})
	c, _ := rpChunkOf(t, ra2, "big/large.txt")
	ra2.faulty.SetHook(func(r faults.Request) faults.Fault {
		return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{r.Off + r.Len/2}}
	})
	_ = c
	if _, err := ra2.read(t, "big/large.txt", 0, 10, true); err == nil {
		t.Fatal("flipped frame read without error")
	}
	if v := counterValue(t, reg, "wharf_checksum_failures_total"); v < 1 {
		t.Errorf("checksum failures %v after a flipped frame", v)
	}
}

// counterValue reads counter name from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}
