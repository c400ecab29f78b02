package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/metrics"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/backend"
)

// goroutinesCreated is the process's count of goroutines ever created.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// fourFrames is one framed chunk of four 64 KiB frames with sha256s, and
// its decoded bytes.
func fourFrames(t *testing.T) ([]Chunk, []byte, string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	var comp, raw []byte
	var frames []Frame
	for i := 0; i < 4; i++ {
		data := make([]byte, 64<<10)
		for k := range data {
			data[k] = byte('a' + rng.IntN(4))
		}
		c := enc.EncodeAll(data, nil)
		frames = append(frames, Frame{COff: int64(len(comp)), CSize: int64(len(c)), UOff: int64(len(raw)), USize: int64(len(data)), Sum: sha256.Sum256(c), HasSum: true})
		comp, raw = append(comp, c...), append(raw, data...)
	}
	dir := t.TempDir()
	key := "s/uploads/u/chunks/c0.tar.zst"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, comp, 0o644); err != nil {
		t.Fatal(err)
	}
	return []Chunk{{Key: key, Kind: FramedZstd, Frames: frames, Size: int64(len(comp))}}, raw, dir
}

// TestCachedFrameReadStartsNoGoroutine: a read within one cached frame
// (a warm small file) is served without a producer goroutine; it still
// counts as a cache hit, and reads that span frames or miss the cache
// read the same bytes as before. The old code started two goroutines per
// read (the producer and, at Close, the drain of its queue).
func TestCachedFrameReadStartsNoGoroutine(t *testing.T) {
	chunks, raw, dir := fourFrames(t)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1, Cache: NewFrameCache(64 << 20), Metrics: m})
	t.Cleanup(set.Close)
	ctx := context.Background()
	read := func(u0, u1 int64) {
		t.Helper()
		got, err := readChunk(ctx, set, 0, u0, u1)
		if err != nil {
			t.Fatalf("read [%d,%d): %v", u0, u1, err)
		}
		if !bytes.Equal(got, raw[u0:u1]) {
			t.Fatalf("read [%d,%d): wrong bytes", u0, u1)
		}
	}
	read(70<<10, 100<<10) // frame 1, a miss: fetched
	read(10<<10, 80<<10)  // frames 0-1, frame 0 a miss
	hits := testutil.ToFloat64(m.cacheHits)
	const reads = 200
	before := goroutinesCreated()
	for i := 0; i < reads; i++ {
		u0 := int64(64<<10 + (i*997)%(60<<10))
		read(u0, u0+4<<10)
	}
	created := goroutinesCreated() - before
	if created > reads/10 {
		t.Errorf("%d goroutines created by %d reads within a cached frame, want none (at most %d for the test's own)", created, reads, reads/10)
	}
	if got := testutil.ToFloat64(m.cacheHits) - hits; got != reads {
		t.Errorf("%v cache hits counted for %d cached reads", got, reads)
	}
	read(120<<10, 200<<10) // frames 1-3: the producer's way, frames 2-3 fetched
	read(0, 4<<20>>4)      // the whole chunk
}

// TestCachedFrameReadMakesNoRun: a read of one cached frame makes no
// producer run (its context, channels and state) at all: counted in
// allocations per read, read to its end into a buffer of the test's own
// (no allocation of the reading itself: io.ReadAll's growth costs 9
// allocations for 4 KiB, and 16 under the race detector, which would
// hide the count this test is about). The run made at the source's
// creation cost 7 of 10 (go1.26); the fast path makes 3.
func TestCachedFrameReadMakesNoRun(t *testing.T) {
	chunks, raw, dir := fourFrames(t)
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1, Cache: NewFrameCache(64 << 20)})
	t.Cleanup(set.Close)
	ctx, cancel := context.WithCancel(context.Background()) // a request's context: cancellable
	defer cancel()
	const u0, u1 = 70 << 10, 74 << 10
	buf := make([]byte, u1-u0+1) // one byte more: a read past the range shows
	read := func() {
		src, err := set.Range(ctx, 0, u0, u1)
		if err != nil {
			t.Fatalf("cached read: %v", err)
		}
		sr := &segReader{src: src}
		defer sr.Close()
		n := 0
		for err == nil && n < len(buf) {
			var k int
			k, err = sr.Read(buf[n:])
			n += k
		}
		if err != io.EOF || !bytes.Equal(buf[:n], raw[u0:u1]) {
			t.Fatalf("cached read: %d bytes, %v", n, err)
		}
	}
	read() // frame 1 cached
	if n := testing.AllocsPerRun(100, read); n > 6 {
		t.Errorf("%.0f allocations per read of a cached frame, want at most 6", n)
	}
}
