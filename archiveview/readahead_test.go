package archiveview

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// Readahead on evidence only (issue 24): random windows of a file in
// 16 MiB frames (COG tiles, HDF5 hyperslabs, Zarr chunks) fetch only their
// covering frames; a file read in consecutive ranges is still prefetched;
// prefetched frames that leave the cache unread are counted in
// wharf_prefetch_wasted_bytes_total.

// raSettled waits until no more backend bytes arrive (background
// prefetches finished) and returns the bytes returned so far.
func raSettled(ra *rpArchive) int64 {
	last, still := ra.faulty.BytesReturned(), 0
	for still < 4 {
		time.Sleep(150 * time.Millisecond)
		if n := ra.faulty.BytesReturned(); n != last {
			last, still = n, 0
		} else {
			still++
		}
	}
	return last
}

// raCovering is the compressed size of the frames of key's chunk that
// cover the file ranges rgs.
func raCovering(t *testing.T, ra *rpArchive, key string, rgs [][2]int64) (int64, int) {
	t.Helper()
	c, e := rpChunkOf(t, ra, key)
	cover := map[int]bool{}
	for _, rg := range rgs {
		lo, hi, err := chunkio.CoverFrames(c.Frames, e.Off+rg[0], e.Off+rg[0]+rg[1])
		if err != nil {
			t.Fatal(err)
		}
		for i := lo; i <= hi; i++ {
			cover[i] = true
		}
	}
	var n int64
	for i := range cover {
		n += c.Frames[i].CSize
	}
	return n, len(cover)
}

func raOpen(t *testing.T, size, frame int, opts Options) (*rpArchive, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Metrics = chunkio.NewMetrics(reg)
	files := map[string][]byte{"big.bin": rpRandom(71, size)}
	ra := rpNew(t, files, cargopack.Options{FrameSize: int64(frame), PlainTar: func(string) bool { return false }}, opts)
	c, _ := rpChunkOf(t, ra, "big.bin")
	if c.Kind != chunkio.FramedZstd || len(c.Frames) < size/frame || c.Frames[1].USize != int64(frame) {
		t.Fatalf("want a framed chunk in %d-byte frames, got %v with %d frames", frame, c.Kind, len(c.Frames))
	}
	ra.faulty.Reset()
	return ra, reg
}

// TestReadaheadRandomWindows: a COG-like reader (the file's first 16 KiB,
// then 512 KiB windows in frames 6, 7, 2, 3 of a file in ten 16 MiB
// frames, adjacent frames included) fetches at most 1.1x the frames that
// cover its windows, and nothing it prefetched is wasted. On the old
// code (readahead whenever a read started at frame 0 or at the frame after
// the last one read) it fetched 1.40x: seven frames for five.
func TestReadaheadRandomWindows(t *testing.T) {
	const frame = 16 << 20
	ra, reg := raOpen(t, 10*frame, frame, Options{})
	rgs := [][2]int64{{0, 16 << 10}}
	for _, f := range []int64{6, 7, 2, 3} {
		rgs = append(rgs, [2]int64{f*frame + 3<<20 + f*4096, 512 << 10})
	}
	for _, rg := range rgs {
		ra.mustRead(t, "big.bin", rg[0], rg[1], true)
	}
	got := raSettled(ra)
	covering, frames := raCovering(t, ra, "big.bin", rgs)
	t.Logf("fetched %d bytes for %d covering frames of %d bytes: %.2fx", got, frames, covering, float64(got)/float64(covering))
	if float64(got) > 1.1*float64(covering) {
		t.Errorf("random windows fetched %d bytes, %.2fx their %d covering frames (%d bytes); want at most 1.1x",
			got, float64(got)/float64(covering), frames, covering)
	}
	if w := hoCounter(t, reg, "wharf_prefetch_wasted_bytes_total"); w != 0 {
		t.Errorf("wharf_prefetch_wasted_bytes_total = %v after random windows; want 0", w)
	}
}

// TestReadaheadSequentialRanges: a file read in consecutive 4 MiB ranges
// is still prefetched: once the reads tile, the next frames are cached
// before any read asks for them, and the whole file is fetched once.
func TestReadaheadSequentialRanges(t *testing.T) {
	const frame = 16 << 20
	ra, _ := raOpen(t, 5*frame, frame, Options{})
	c, e := rpChunkOf(t, ra, "big.bin")
	ci := e.Chunk
	const step = 4 << 20
	for off := int64(0); off < 4*step; off += step {
		ra.mustRead(t, "big.bin", off, step, true)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !ra.a.set.FrameCached(ci, 1) {
		if time.Now().After(deadline) {
			t.Fatalf("frame 1 not prefetched 5 s after four consecutive reads of frame 0")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for off := int64(4 * step); off < int64(len(ra.files["big.bin"])); off += step {
		ra.mustRead(t, "big.bin", off, min(step, int64(len(ra.files["big.bin"]))-off), off%(2*step) == 0)
	}
	var whole int64
	for _, f := range c.Frames {
		whole += f.CSize
	}
	if got := raSettled(ra); float64(got) > 1.1*float64(whole) {
		t.Errorf("a sequential read fetched %d bytes for a chunk of %d", got, whole)
	}
}

// TestPrefetchWastedBytes: a stream that stops leaves prefetched frames
// unread; when they are evicted their compressed bytes count in
// wharf_prefetch_wasted_bytes_total (never more than was prefetched).
// The old code had no such series.
func TestPrefetchWastedBytes(t *testing.T) {
	const frame = 1 << 20
	ra, reg := raOpen(t, 48*frame, frame, Options{Cache: chunkio.NewFrameCache(16 << 20)})
	_, e := rpChunkOf(t, ra, "big.bin")
	const step = 256 << 10
	for off := int64(0); off < 8*step; off += step { // frames 0-1, tiling: earns a window
		ra.mustRead(t, "big.bin", off, step, true)
	}
	raSettled(ra)
	prefetched := 0
	for i := 2; i < 20; i++ {
		if ra.a.set.FrameCached(e.Chunk, i) {
			prefetched++
		}
	}
	if prefetched == 0 {
		t.Fatal("no frame past the stream was prefetched")
	}
	for f := int64(47); f >= 20; f-- { // reads far away (backwards: no stream) evict the prefetched frames
		ra.mustRead(t, "big.bin", f*frame+1000, 4096, true)
	}
	w := hoCounter(t, reg, "wharf_prefetch_wasted_bytes_total")
	t.Logf("%d frames prefetched past the stream; wasted %v bytes", prefetched, w)
	if w < frame || w > float64(prefetched)*frame*1.01 {
		t.Errorf("wharf_prefetch_wasted_bytes_total = %v; want between one frame and the %d prefetched (%d bytes)", w, prefetched, prefetched*frame)
	}
	if got, _ := ra.read(t, "big.bin", 0, 8*step, true); !bytes.Equal(got, ra.files["big.bin"][:8*step]) {
		t.Error("re-read of the stream's bytes differs")
	}
}
