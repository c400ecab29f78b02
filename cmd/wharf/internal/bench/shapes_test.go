package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// tinyShapesEnv is a latency-free bench environment of the given S3 model.
func tinyShapesEnv(t *testing.T, model string) (Config, *env) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Latency, cfg.Bandwidth, cfg.TempDir, cfg.Model = 0, 0, t.TempDir(), model
	cfg.ShapeSize, cfg.ShapeFrame, cfg.CacheBytes = 2<<20, 256<<10, 64<<20
	e, err := newEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return cfg, e
}

// TestAnalyticShapesTiny runs every request shape at CI size on both S3
// models: every byte is checked against the source (runShape), and each
// shape reports its GETs, bytes, amplification against the covering frames
// and p50/p99 against the plain object; the Zarr, COG and HDF5 shapes carry
// issue 24's targets.
func TestAnalyticShapesTiny(t *testing.T) {
	for _, model := range []string{ModelHTTP, ModelInProcess} {
		t.Run(model, func(t *testing.T) {
			cfg, e := tinyShapesEnv(t, model)
			rep := &Report{}
			if err := analyticShapesWorkload(context.Background(), cfg, e, rep); err != nil {
				t.Fatal(err)
			}
			shapes := analyticShapes(cfg.ShapeSize, cfg.ShapeFrame, cfg.Seed)
			if len(shapes) != 7 {
				t.Fatalf("%d shapes, want 7", len(shapes))
			}
			for _, s := range shapes {
				got := map[string]float64{}
				for _, r := range rep.Rows {
					if strings.HasSuffix(r.Workload, ": "+s.name) {
						got[r.System+"/"+r.Metric] = r.Value
					}
				}
				for _, m := range []string{"wharf/backend GETs", "per-object/backend GETs", "wharf/request p50", "wharf/request p99",
					"per-object/request p99", "wharf/backend bytes / covering frames", "wharf/wall / per-object"} {
					if _, ok := got[m]; !ok {
						t.Errorf("%s: no %q row", s.name, m)
					}
				}
				if got["wharf/backend GETs"] < 1 || got["wharf/backend bytes / covering frames"] <= 0 {
					t.Errorf("%s: wharf %v GETs, %vx covering frames: nothing was read from the backend", s.name,
						got["wharf/backend GETs"], got["wharf/backend bytes / covering frames"])
				}
			}
			if len(rep.Targets) != 16 {
				t.Errorf("%d targets, want 16 (two each for the two Zarr shapes, the COG and the HDF5 hyperslabs, with readahead on and off)", len(rep.Targets))
			}
		})
	}
}

// TestSuffixRangeOneBackendRequest: a suffix range (DuckDB's bytes=-262144)
// is one backend GET of exactly the frames it needs, never a read of the
// whole chunk, on both S3 models, and within or across frame boundaries.
func TestSuffixRangeOneBackendRequest(t *testing.T) {
	for _, model := range []string{ModelHTTP, ModelInProcess} {
		cfg, e := tinyShapesEnv(t, model)
		ctx := context.Background()
		cfg.ShapeSize = 4 << 20
		data, res, err := packShapes(ctx, cfg, e)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int64{1000, 262144, 600000, 3 << 20} {
			t.Run(fmt.Sprintf("%s/-%d", model, n), func(t *testing.T) {
				s := shape{name: "suffix", batches: []shapeBatch{{conc: 1, ranges: []shapeRange{{n: n, suffix: true}}}}}
				covering, cover, err := coveringFrames(res.Manifest, int64(len(data)), s)
				frames := len(covering)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.serveArchive(ctx, res.ManifestKey, 64<<20, -1); err != nil {
					t.Fatal(err)
				}
				e.faulty.Reset()
				if _, err := runShape(ctx, e.client, "wharf", shapesKey, data, s); err != nil {
					t.Fatal(err)
				}
				var chunk int64
				for _, c := range res.Manifest.Chunks {
					chunk += c.CompressedSize
				}
				// The frames of the suffix in one request, and at most
				// one more: the frame holding the member's tar header,
				// which the read path checks names this file (chunkio's
				// ustar check) when the suffix does not cover it.
				fr := res.Manifest.Chunks[0].Frames
				first := fr[len(fr)-1]
				for _, f := range fr {
					if f.UncompressedOffset+f.UncompressedSize > *res.Manifest.Files[0].ArchiveOffset+int64(len(data))-min(n, int64(len(data))) {
						first = f
						break
					}
				}
				var hdr int64
				for _, f := range fr {
					off := *res.Manifest.Files[0].ArchiveOffset - 512
					if f.UncompressedOffset <= off && off < f.UncompressedOffset+f.UncompressedSize && f.CompressedOffset < first.CompressedOffset {
						hdr = f.CompressedSize
					}
				}
				var span bool
				for _, r := range e.faulty.Log() {
					if r.Op == "range" || r.Op == "get" {
						t.Logf("backend %s off %d len %d", r.Op, r.Off, r.Len)
						if r.Off == first.CompressedOffset && r.Len == cover {
							span = true
						}
					}
				}
				gets, got := getsOf(e.faulty), e.faulty.BytesReturned()
				wantGets := int64(1)
				if hdr > 0 {
					wantGets = 2
				}
				if !span || gets != wantGets || got != cover+hdr {
					t.Fatalf("bytes=-%d: %d backend GETs of %d bytes; want one GET of the %d covering frames' %d bytes (plus %d of the tar header's frame; the chunk is %d)",
						n, gets, got, frames, cover, hdr, chunk)
				}
				if frames < 1 || got >= chunk {
					t.Fatalf("bytes=-%d: %d frames, %d of the chunk's %d bytes", n, frames, got, chunk)
				}
			})
		}
	}
}

// TestCoalesceRanges: pyarrow's rule: holes up to hole bytes merged, no
// span over span bytes, input order not assumed.
func TestCoalesceRanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []shapeRange
		want []shapeRange
	}{
		{"empty", nil, nil},
		{"small hole merged", []shapeRange{{off: 0, n: 10}, {off: 18, n: 2}}, []shapeRange{{off: 0, n: 20}}},
		{"big hole kept", []shapeRange{{off: 0, n: 10}, {off: 19, n: 2}}, []shapeRange{{off: 0, n: 10}, {off: 19, n: 2}}},
		{"unsorted, overlapping", []shapeRange{{off: 30, n: 5}, {off: 0, n: 10}, {off: 5, n: 10}}, []shapeRange{{off: 0, n: 15}, {off: 30, n: 5}}},
		{"span cap", []shapeRange{{off: 0, n: 60}, {off: 60, n: 60}}, []shapeRange{{off: 0, n: 60}, {off: 60, n: 60}}},
	} {
		got := coalesceRanges(tc.in, 8, 100)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
