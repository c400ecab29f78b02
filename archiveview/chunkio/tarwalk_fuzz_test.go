package chunkio

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// FuzzTarWalk: a tar walk over arbitrary plain-tar bytes never panics;
// it fails with ErrCorrupt or ErrNotInChunk, or gives an offset and
// length inside the object whose bytes are exactly what archive/tar
// reads as that (one, regular, not sparse) member's content.
func FuzzTarWalk(f *testing.F) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range []struct{ name, data string }{{"/src/a.txt", "hello"}, {"/src/" + string(bytes.Repeat([]byte("d"), 120)), "long"}, {"/src/é.txt", "pax"}} {
		tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg})
		tw.Write([]byte(m.data))
	}
	tw.Close()
	f.Add(b.Bytes(), "/src/a.txt")
	f.Add(b.Bytes(), "/src/é.txt")
	f.Add(rawTarBlock("x", tar.TypeGNULongName, 3), "x")
	f.Add(append(rawTarBlock("big", tar.TypeReg, 1<<20), make([]byte, 1536)...), "big") // data past the object's end
	f.Add(append(rawTarBlock("big", tar.TypeReg, 1<<20), make([]byte, 1536)...), "other")
	f.Add([]byte{}, "a")
	f.Add(sparseTar("/src/s"), "/src/s")
	f.Add(append(rawTarBlock("/src/old-sparse", tar.TypeGNUSparse, 0), make([]byte, 1024)...), "/src/old-sparse")
	dir := f.TempDir()
	key := "s/uploads/u/shard-0/chunk-0.tar"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.Fatal(err)
	}
	store := backend.NewFileStore(dir)
	f.Fuzz(func(t *testing.T, obj []byte, name string) {
		if err := os.WriteFile(p, obj, 0o644); err != nil {
			t.Fatal(err)
		}
		set := NewSet(store, "bkt", []Chunk{{Key: key, Kind: PlainTar, Size: int64(len(obj))}}, Options{Readahead: -1})
		defer set.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		off, size, err := set.tarOffset(ctx, 0, name)
		if ctx.Err() != nil {
			t.Fatalf("walk of a %d-byte object still running after 5 s: %v", len(obj), err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotInChunk) {
				t.Fatalf("walk error wraps neither ErrCorrupt nor ErrNotInChunk: %v", err)
			}
			return
		}
		if off < 512 || size < 0 || off > int64(len(obj)) || size > int64(len(obj))-off {
			t.Fatalf("member %q at %d, %d bytes: outside the %d-byte object", name, off, size, len(obj))
		}
		tr := tar.NewReader(bytes.NewReader(obj))
		for {
			hdr, err := tr.Next()
			if err != nil {
				t.Fatalf("walk found %q, archive/tar does not: %v", name, err)
			}
			if hdr.Name != name || hdr.Typeflag != tar.TypeReg {
				continue
			}
			content, err := io.ReadAll(tr)
			if err != nil || !bytes.Equal(content, obj[off:off+size]) {
				t.Fatalf("member %q: walk's bytes %q, archive/tar's %q (%v)", name, obj[off:off+size], content, err)
			}
			return
		}
	})
}
