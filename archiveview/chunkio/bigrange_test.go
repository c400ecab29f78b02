package chunkio

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// TestRangeQueueBoundedByWindow: a read over a chunk of a million small
// frames (a hostile or careless manifest may hold ten million) allocates
// its producer's queue by its window, not one slot per frame: on the old
// code opening the read allocated 32 bytes per frame (32 MB here, 320 MB
// at the manifest limit, per concurrent read), none of it charged to the
// memory budget.
func TestRangeQueueBoundedByWindow(t *testing.T) {
	const n, size = 1_000_000, 1024
	frames := make([]Frame, n)
	for i := range frames {
		frames[i] = Frame{COff: int64(i) * size, CSize: size, UOff: int64(i) * size, USize: size}
	}
	chunks := []Chunk{{Key: "s/uploads/u/chunks/c0.tar.zst", Kind: FramedZstd, Frames: frames, Size: n * size}}
	set := NewSet(backend.NewFileStore(t.TempDir()), "bkt", chunks, Options{Readahead: -1})
	t.Cleanup(set.Close)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	src, err := set.Range(context.Background(), 0, 0, n*size)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("opening a read of %d frames allocated %d bytes, want under 4 MiB", n, got)
	}
}

// TestReadManyFramesThroughFullQueue: a read of 3000 small frames (more
// than a producer queues ahead) gets every byte: a producer with a full
// queue waits for its consumer, and neither waits for the other.
func TestReadManyFramesThroughFullQueue(t *testing.T) {
	set, want := framedFixture(t, 3000, 256)
	got, err := readChunk(context.Background(), set, 0, 0, int64(len(want)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read of 3000 frames: %v (%d of %d bytes)", err, len(got), len(want))
	}
}
