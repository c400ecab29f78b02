package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
)

// framedFixture stores a framed chunk of n frames of size incompressible
// bytes each and returns a Set over it on a cache made with opts, and the
// chunk's tar bytes.
func framedFixture(t *testing.T, n, size int, opts ...CacheOption) (*Set, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(12, 12))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	var obj, tarBytes []byte
	var frames []Frame
	for range n {
		data := make([]byte, size)
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
	chunks := []Chunk{{Key: key, Kind: FramedZstd, Frames: frames, Size: int64(len(obj))}}
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1, Cache: NewFrameCache(0, opts...)})
	t.Cleanup(set.Close)
	return set, tarBytes
}

// TestJoinedFlightGivenUpWhileAhead: a framed read joins another fetch of
// its first frame (here a claim taken by the test, as a prefetch's), and
// its own first part (the next three 2 MiB frames, compressed and
// decoded: 12 MiB, more than its client's 8 MiB share of a 32 MiB budget,
// which a client holding nothing may take once) is under way when that
// fetch gives up (errGaveUp, as a prefetch short of memory does, or a
// fetcher whose client left). The read then fetches the frame itself; it
// must not wait for the share its own part ahead holds for it. On the old
// code it did, and failed with ErrBusy after the whole memory wait.
func TestJoinedFlightGivenUpWhileAhead(t *testing.T) {
	set, want := framedFixture(t, 4, 2<<20, WithMemory(32<<20), WithMemoryWait(time.Second))
	c := set.cache
	k := set.frameKey(0, 0)
	_, fl, mine := c.lookup(k, false)
	if !mine {
		t.Fatal("frame 0 already claimed")
	}
	ctx := WithClient(context.Background(), "key:one")
	type result struct {
		b   []byte
		err error
	}
	res := make(chan result, 1)
	go func() {
		b, err := readChunk(ctx, set, 0, 0, int64(len(want)))
		res <- result{b, err}
	}()
	for deadline := time.Now().Add(2 * time.Second); ; {
		if used, _ := set.lim.MemoryInUse(); used >= 12<<20 {
			break // its part ahead is taken
		}
		if time.Now().After(deadline) {
			t.Fatal("the read's part ahead never started")
		}
		time.Sleep(time.Millisecond)
	}
	c.complete(k, fl, nil, errGaveUp)
	r := <-res
	if r.err != nil || !bytes.Equal(r.b, want) {
		t.Fatalf("read whose joined fetch gave up while its part ahead was held: %v, want its bytes", r.err)
	}
	if used, _ := set.lim.MemoryInUse(); used != 0 {
		t.Errorf("%d bytes still charged after the read", used)
	}
}
