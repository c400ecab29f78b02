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

// streamTarFixture stores one unframed zstd chunk (StreamZstd) holding a
// tar of a 2 MiB and a 1 MiB file (incompressible) and returns a Set over
// it on a cache made with opts, and the 1 MiB file's extent and bytes.
func streamTarFixture(t *testing.T, opts ...CacheOption) (*Set, Extent, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 1))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	a, b := fill(2<<20), fill(1<<20)
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
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	comp := enc.EncodeAll(tb.Bytes(), nil)
	dir := t.TempDir()
	key := "s/uploads/u/chunks/c0.tar.zst"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, comp, 0o644); err != nil {
		t.Fatal(err)
	}
	chunks := []Chunk{{Key: key, Kind: StreamZstd, Size: int64(len(comp)), MaxTar: int64(tb.Len())}}
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1, Cache: NewFrameCache(0, opts...)})
	t.Cleanup(set.Close)
	e := Extent{Chunk: 0, Off: 512 + 2<<20 + 512, Length: 1 << 20, TarName: "b.bin", Sum: sha256.Sum256(b), HasSum: true}
	return set, e, b
}

// TestSmallExtentHoldsNothingWhileItsSourceTakes: a client's partial read
// of a small file with a sha256 in an unframed zstd chunk is fetched and
// verified whole first (verifiedExtent). At a 64 MiB budget (a client's
// share: 16 MiB) the stream decoder's first take (its first part, window
// and segment: about 19 MiB) is more than the client's share, which a
// client holding nothing may always take once. On the old code the read
// took the extent's 1 MiB buffer first and then waited, holding it, for
// the decoder's take: the client held something, so the take waited the
// whole memory wait and failed with ErrBusy, every time.
func TestSmallExtentHoldsNothingWhileItsSourceTakes(t *testing.T) {
	set, e, want := streamTarFixture(t, WithMemory(64<<20), WithMemoryWait(2*time.Second))
	ctx, cancel := context.WithTimeout(WithClient(context.Background(), "key:one"), 10*time.Second)
	defer cancel()
	start := time.Now()
	src, err := set.OpenExtent(ctx, e, 1000, 4096)
	var got []byte
	if err == nil {
		sr := &segReader{src: src}
		got, err = io.ReadAll(sr)
		sr.Close()
	}
	if err != nil || !bytes.Equal(got, want[1000:1000+4096]) {
		t.Fatalf("partial read of a small verified file: %v after %v, want its bytes", err, time.Since(start))
	}
	set.Close() // drops the decoder the read parked
	if used, _ := set.lim.MemoryInUse(); used != 0 {
		t.Errorf("%d bytes still charged after the read and the Set's close", used)
	}
}
