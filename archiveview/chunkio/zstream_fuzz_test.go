package chunkio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// FuzzUnframedChunk: reading arbitrary bytes as an unframed zstd chunk
// never panics or hangs, and what it serves is exactly what an
// independent stream decode of the object yields; a refusal wraps
// ErrCorrupt or ErrChecksum.
func FuzzUnframedChunk(f *testing.F) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		f.Fatal(err)
	}
	a := enc.EncodeAll([]byte("hello, unframed world"), nil)
	f.Add(a, int64(21))
	f.Add(append(append([]byte{}, a...), rawFrame(26, []byte("more"))...), int64(25))
	f.Add(append([]byte{0x50, 0x2A, 0x4D, 0x18, 1, 0, 0, 0, 9}, a...), int64(21))
	f.Add(rawFrame(12, []byte("raw")), int64(3))
	f.Add([]byte{0x28, 0xB5, 0x2F, 0xFD}, int64(1))
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, obj []byte, n int64) {
		if n <= 0 || n > 1<<20 {
			return
		}
		set := unframedSet(t, obj)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := readChunk(ctx, set, 0, 0, n)
		if ctx.Err() != nil {
			t.Fatalf("read of a %d-byte object still running after 5 s: %v", len(obj), err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) {
				t.Fatalf("refusal wraps neither ErrCorrupt nor ErrChecksum: %v", err)
			}
			return
		}
		// An independent stream decode: what it yields before any error
		// (a read of a prefix may be served before the stream's end).
		if err := dec.Reset(bytes.NewReader(obj)); err != nil {
			t.Fatalf("served %d bytes of an object an independent decoder refuses (%v)", len(got), err)
		}
		want, derr := io.ReadAll(io.LimitReader(dec, n))
		if int64(len(want)) < n || !bytes.Equal(got, want) {
			t.Fatalf("served %q, an independent decode yields %q (%v)", got, want, derr)
		}
	})
}
