package chunkio

import (
	"bytes"
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

// rawFrame is a zstd frame by hand (RFC 8878): no content size, a window
// descriptor of 2^logWin bytes, one last raw block holding data (< 2 MiB).
func rawFrame(logWin int, data []byte) []byte {
	n := len(data)
	b := append([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, byte(logWin-10) << 3}, byte(1|n<<3), byte(n<<3>>8), byte(n<<3>>16))
	return append(b, data...)
}

// unframedSet stores obj as an unframed zstd chunk (whole-object sha256).
func unframedSet(t *testing.T, obj []byte) *Set {
	t.Helper()
	dir := t.TempDir()
	key := "s/uploads/u/shard-0/chunk-0.tar.zst"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	chunks := []Chunk{{Key: key, Kind: StreamZstd, Size: int64(len(obj)), Sum: sha256.Sum256(obj), HasSum: true}}
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1})
	t.Cleanup(set.Close)
	return set
}

// TestUnframedLaterFrameWindow: an unframed zstd chunk may hold several
// zstd frames; its stream decoder is charged for the window the first
// frame declares (or the default when the object does not start with a
// frame header, e.g. a skippable frame). A later frame declaring a larger
// window is refused (ErrCorrupt) instead of being decoded into a window
// the budget never saw; later frames within the charged window still
// decode. On the old code both hostile reads were served, the decoder
// allocating a 64 MiB window with 2 MiB (or 8 MiB) charged.
func TestUnframedLaterFrameWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	first := make([]byte, 2<<20)
	for i := range first {
		first[i] = byte(rng.Uint32())
	}
	second := make([]byte, 64<<10)
	for i := range second {
		second[i] = byte(rng.Uint32())
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	a := enc.EncodeAll(first, nil)
	if w, ok := zstdWindow(a[:zstdHeaderMax]); !ok || w > 4<<20 {
		t.Fatalf("fixture: the first frame declares a window of %d (%v)", w, ok)
	}
	// A skippable frame (magic 0x184D2A50, 4-byte length, payload).
	skip := []byte{0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4}
	want := append(append([]byte{}, first...), second...)
	for _, tc := range []struct {
		name string
		obj  []byte
		n    int64 // decoded length
		ok   bool
	}{
		{"later frame within the first's window", append(append([]byte{}, a...), rawFrame(20, second)...), int64(len(want)), true},
		{"later frame declaring 64 MiB", append(append([]byte{}, a...), rawFrame(26, second)...), int64(len(want)), false},
		{"skippable frame first, then 64 MiB", append(append([]byte{}, skip...), rawFrame(26, second)...), int64(len(second)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := unframedSet(t, tc.obj)
			got, err := readChunk(context.Background(), set, 0, 0, tc.n)
			if tc.ok {
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("read: %d bytes, %v; want the %d bytes of both frames", len(got), err, len(want))
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read of an unframed chunk whose later frame declares a larger window than the one charged: %d bytes, %v; want ErrCorrupt", len(got), err)
			}
		})
	}
}

// TestStreamWindowBeyondBudget: a stream whose zstd frame declares a
// window whose decoder can never fit the whole read memory budget is
// refused as corrupt (500, remembered), not answered ErrBusy (503
// SlowDown: "retry soon", which can never succeed, each retry costing a
// GET). On the old code the read failed with "537395207 bytes asked of a
// read memory budget of 268435456: read limits exhausted".
func TestStreamWindowBeyondBudget(t *testing.T) {
	set := unframedSet(t, rawFrame(28, []byte("tiny")))
	_, err := readChunk(context.Background(), set, 0, 0, 4)
	if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrBusy) {
		t.Fatalf("read of a stream declaring a 256 MiB window: %v; want ErrCorrupt, not ErrBusy", err)
	}
	set.lim.mu.Lock()
	used, decs, gets := set.lim.used, set.lim.decoders, set.lim.gets
	set.lim.mu.Unlock()
	if used != 0 || decs != 0 || gets != 0 {
		t.Fatalf("after the refusal %d bytes, %d decoder admissions and %d GET slots are still taken", used, decs, gets)
	}
}
