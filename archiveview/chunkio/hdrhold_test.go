package chunkio

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
)

// hdrFrameFixture stores a framed chunk holding a tar of a 1 MiB file and
// a 6 MiB file (incompressible), cut into frames at the second file's
// data: frame 0 ends with its tar header, its data is frames 1-3 (2 MiB
// each). It returns the chunk table, the store's root and the second
// file's extent and bytes.
func hdrFrameFixture(t *testing.T) ([]Chunk, string, Extent, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(4, 4))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	a, b := fill(1<<20), fill(6<<20)
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, f := range []struct {
		name string
		data []byte
	}{{"a.bin", a}, {"b.bin", b}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ts := tb.Bytes()
	base := int64(512 + 1<<20 + 512)
	cuts := []int64{0, base, base + 2<<20, base + 4<<20, int64(len(ts))}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	var obj []byte
	var frames []Frame
	for i := 0; i+1 < len(cuts); i++ {
		comp := enc.EncodeAll(ts[cuts[i]:cuts[i+1]], nil)
		frames = append(frames, Frame{COff: int64(len(obj)), CSize: int64(len(comp)), UOff: cuts[i], USize: cuts[i+1] - cuts[i],
			Sum: sha256.Sum256(comp), HasSum: true})
		obj = append(obj, comp...)
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
	e := Extent{Chunk: 0, Off: base, Length: int64(len(b)), TarName: "b.bin", Sum: sha256.Sum256(b), HasSum: true}
	return chunks, dir, e, b
}

// TestHeaderCheckHoldAndWait: a client's cold partial read of a member
// whose tar header lies in the frame before its data checks the header
// while the data's frames are fetched (hdrCheckedSource). At a 32 MiB
// budget (a client's share: 8 MiB) the data's first part (three 2 MiB
// frames, compressed and decoded: 12 MiB) is more than the share, which
// a client holding nothing may take once; the header check's part then
// must not wait for the share while the data's part is held for the
// check's verdict. Each of 8 fresh Sets is read once.
func TestHeaderCheckHoldAndWait(t *testing.T) {
	chunks, dir, e, want := hdrFrameFixture(t)
	for i := range 8 {
		cache := NewFrameCache(0, WithMemory(32<<20), WithMemoryWait(time.Second))
		set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1, Cache: cache})
		ctx := WithClient(context.Background(), "key:one")
		start := time.Now()
		src, err := set.OpenExtent(ctx, e, 1000, e.Length-1000)
		var got []byte
		if err == nil {
			sr := &segReader{src: src}
			got, err = io.ReadAll(sr)
			sr.Close()
		}
		set.Close()
		if err != nil || !bytes.Equal(got, want[1000:]) {
			t.Fatalf("read %d: %v after %v, want the member's bytes", i, err, time.Since(start))
		}
		// A part's fetch goroutine gives its buffer back just after its
		// reader has the bytes (as in TestProgressiveDecodeFailsAtEnd):
		// wait for it, a while; a buffer never given back still fails.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			used, _ := cache.MemoryInUse()
			if used == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("read %d: %d bytes still charged 5s after the read", i, used)
			}
		}
	}
}
