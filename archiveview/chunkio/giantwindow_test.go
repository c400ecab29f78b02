package chunkio

import (
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
)

// TestGiantFrameSecondFrameWindow: a giant frame's span (one zstd frame,
// as the manifest says) that holds a second zstd frame declaring a 64 MiB
// window after a first one of 2 MiB is refused (ErrCorrupt): its decoder
// was charged for the first frame's window, and would have allocated the
// second's uncharged. On the old code the read was served, its decoder
// holding a 64 MiB window the budget never saw.
func TestGiantFrameSecondFrameWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	first := make([]byte, 2<<20)
	for i := range first {
		first[i] = byte(rng.Uint32())
	}
	second := make([]byte, 64<<10)
	for i := range second {
		second[i] = byte(rng.Uint32())
	}
	encA, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	a := encA.EncodeAll(first, nil)
	// The second frame by hand (RFC 8878): no content size, a window
	// descriptor of 2^26 bytes, one last raw block of 64 KiB.
	n := len(second)
	b := append([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 16 << 3}, byte(1|n<<3), byte(n<<3>>8), byte(n<<3>>16))
	b = append(b, second...)
	if w, ok := zstdWindow(b[:zstdHeaderMax]); !ok || w != 64<<20 {
		t.Fatalf("fixture: the second frame declares a window of %d (%v), want 64 MiB", w, ok)
	}
	obj := append(append([]byte{}, a...), b...)
	dir := t.TempDir()
	key := "s/uploads/u/chunks/c0.tar.zst"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	usize := int64(len(first) + len(second))
	fr := Frame{COff: 0, CSize: int64(len(obj)), USize: usize, Sum: sha256.Sum256(obj), HasSum: true}
	chunks := []Chunk{{Key: key, Kind: FramedZstd, Frames: []Frame{fr}, Size: int64(len(obj))}}
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1, MaxFrameBytes: 1 << 20})
	t.Cleanup(set.Close)
	_, err = readChunk(context.Background(), set, 0, 0, usize)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a giant frame whose span holds a second frame with a larger window: %v, want ErrCorrupt", err)
	}
}
