package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestRefetchHoldsNothingNew: a frame whose bytes fail their sha256 in
// transit (a flipped byte in the first GET only) is fetched once more
// while its part's worker holds the part's buffer and the decoded frames
// it reserved. At a 32 MiB budget (a client's share: 8 MiB) the part (three
// 2 MiB frames, compressed and decoded: 12 MiB) is more than the share,
// which a client holding nothing may take once; the second fetch must not
// wait for more of it. It is read into the part's own bytes of the frame,
// and decoded into the frame's own buffer. On the old code the second
// fetch took a new part and buffer, waited for the client's share its own
// worker held, and failed with ErrBusy after the whole memory wait.
func TestRefetchHoldsNothingNew(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	var obj, tarBytes []byte
	var frames []Frame
	for range 3 {
		data := make([]byte, 2<<20)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		comp := enc.EncodeAll(data, nil)
		frames = append(frames, Frame{COff: int64(len(obj)), CSize: int64(len(comp)), UOff: int64(len(tarBytes)), USize: int64(len(data)),
			Sum: sha256.Sum256(comp), HasSum: true})
		obj = append(obj, comp...)
		tarBytes = append(tarBytes, data...)
	}
	dir := t.TempDir()
	key := "s/uploads/u/chunks/c0.tar.zst"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	flip := frames[1].COff + 1000
	var flipped atomic.Int32
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if r.Op == "range" && r.Off <= flip && flip < r.Off+r.Len && flipped.Add(1) == 1 {
			return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{flip}}
		}
		return faults.Fault{}
	}})
	chunks := []Chunk{{Key: key, Kind: FramedZstd, Frames: frames, Size: int64(len(obj))}}
	cache := NewFrameCache(0, WithMemory(32<<20), WithMemoryWait(time.Second))
	set := NewSet(store, "bkt", chunks, Options{Readahead: -1, Cache: cache})
	t.Cleanup(set.Close)
	ctx := WithClient(context.Background(), "key:one")
	start := time.Now()
	got, err := readChunk(ctx, set, 0, 0, int64(len(tarBytes)))
	if err != nil || !bytes.Equal(got, tarBytes) {
		t.Fatalf("read of a chunk whose frame 1 was flipped in transit: %v after %v, want its bytes", err, time.Since(start))
	}
	if n := flipped.Load(); n < 2 {
		t.Fatalf("%d GETs covered the flipped byte, want the flipped one and a second fetch", n)
	}
	if used, _ := cache.MemoryInUse(); used != 0 {
		t.Errorf("%d bytes still charged after the read", used)
	}
}
