package archiveview

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// every file reads back byte-exact and the frame never enters the cache.
func TestCompressedGiantFrameStreamed(t *testing.T) {
	files := map[string][]byte{"r1.bin": hoRandom(21, 40000), "r2.bin": hoRandom(22, 9000), "t.txt": hoText(23, 5000)}
	h := hoPack(t, t.TempDir(), files, hoFramed)
	m := h.manifest()
	var maxFrame int64 // an incompressible frame's decoded size
	for _, f := range m.Chunks[0].Frames {
		if f.CompressedSize > f.UncompressedSize {
			maxFrame = f.UncompressedSize
			break
		}
	}
	if maxFrame == 0 {
		t.Fatalf("no incompressible frame: %+v", m.Chunks[0].Frames)
	}
	cache := chunkio.NewFrameCache(16 << 20)
	a, err := Open(context.Background(), backend.NewFileStore(h.dir), h.bucket, h.mkey,
		Options{Name: hoName, Cache: cache, MaxFrameBytes: maxFrame, Readahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ci := int32(-1)
	for i := range a.tree.Chunks {
		if a.tree.Chunks[i].Kind == chunkio.FramedZstd {
			ci = int32(i)
		}
	}
	var streamed []int
	for i, f := range a.tree.Chunks[ci].Frames {
		if f.CSize > maxFrame && f.USize <= maxFrame {
			streamed = append(streamed, i)
		}
	}
	if len(streamed) == 0 {
		t.Fatalf("no frame is larger compressed than %d", maxFrame)
	}
	for _, f := range hoAllKeys(a) {
		src := files[f.Key]
		for _, rg := range [][2]int64{{0, f.Size}, {f.Size / 2, min(100, f.Size-f.Size/2)}} {
			res := hoRead(context.Background(), a, f, rg[0], rg[1], rg[0] == 0)
			if res.err != nil || !bytes.Equal(res.got, src[rg[0]:rg[0]+rg[1]]) {
				t.Errorf("%s [%d,+%d): %v (bytes equal: %v)", f.Key, rg[0], rg[1], res.err, bytes.Equal(res.got, src[rg[0]:rg[0]+rg[1]]))
			}
		}
	}
	for _, i := range streamed {
		if a.set.FrameCached(ci, i) {
			t.Errorf("frame %d (compressed %d > MaxFrameBytes %d) was cached, not streamed", i, a.tree.Chunks[ci].Frames[i].CSize, maxFrame)
		}
	}
}

// TestFrameRefetchedOnceAfterChecksumMismatch: a frame whose bytes are
// corrupted in transit once is fetched again and served; corrupted at
// every fetch, it fails after two tries. Every mismatch counts in
// wharf_checksum_failures_total.
func TestFrameRefetchedOnceAfterChecksumMismatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flips     int // fetches of the frame that are corrupted
		wantErr   bool
		wantFails float64
	}{
		{"transient corruption", 1, false, 1},
		{"persistent corruption", 1 << 30, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := rpTree(3)
			reg := prometheus.NewRegistry()
			m := chunkio.NewMetrics(reg)
			ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10}, Options{Readahead: -1, Metrics: m})
			c, e := rpChunkOf(t, ra, "mid/two.txt")
			lo, _, err := chunkio.CoverFrames(c.Frames, e.Off, e.Off+1)
			if err != nil {
				t.Fatal(err)
			}
			flip := c.Frames[lo].COff + c.Frames[lo].CSize/2
			var mu sync.Mutex
			left := tc.flips
			ra.faulty.SetHook(func(r faults.Request) faults.Fault {
				mu.Lock()
				defer mu.Unlock()
				if r.Key == c.Key && r.Off <= flip && flip < r.Off+r.Len && left > 0 {
					left--
					return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{flip}}
				}
				return faults.Fault{}
			})
			size := int64(len(files["mid/two.txt"]))
			got, err := ra.read(t, "mid/two.txt", 0, size, true)
			switch {
			case tc.wantErr && !errors.Is(err, ErrChecksum):
				t.Errorf("err = %v, want ErrChecksum", err)
			case tc.wantErr && len(got) != 0:
				t.Errorf("%d bytes delivered before the frame check", len(got))
			case !tc.wantErr && (err != nil || !bytes.Equal(got, files["mid/two.txt"])):
				t.Errorf("err = %v (bytes equal: %v)", err, bytes.Equal(got, files["mid/two.txt"]))
			}
			if n := hoCounter(t, reg, "wharf_checksum_failures_total"); n != tc.wantFails {
				t.Errorf("wharf_checksum_failures_total = %v, want %v", n, tc.wantFails)
			}
		})
	}
}

// hoCounter returns the value of counter name in reg.
func hoCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("counter %s not found", name)
	return 0
}
