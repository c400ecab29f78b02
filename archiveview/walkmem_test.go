package archiveview

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// TestTarWalkKeepsOnlyManifestNames: a tar walk (a chunk whose manifest
// records no archive_offset) remembers only the members the archive may
// ask for, so what it keeps is bounded by the manifest, not by the
// chunk's members. The chunk here is an unframed zstd stream that holds,
// beside the one file the manifest lists, 200 members the manifest does
// not list, each named by a 256 KiB PAX path record (50 MiB of names
// from an object of a few KiB; the manifest lies about another file's size so
// that the decode bound admits them). On the old code the walk's name map
// kept every name: the heap grew by about 50 MiB more than with 1-byte
// names over a stream of the same length, for as long as the archive was
// open.
func TestTarWalkKeepsOnlyManifestNames(t *testing.T) {
	short := walkHeapGrowth(t, false)
	long := walkHeapGrowth(t, true)
	t.Logf("heap growth after the read: %d KiB with 1-byte names, %d KiB with 256 KiB names", short>>10, long>>10)
	if long-short > 8<<20 {
		t.Fatalf("the walk kept %d MiB more with long names: names the manifest does not list are kept", (long-short)>>20)
	}
}

// walkHeapGrowth builds the hostile archive (longNames: 200 unlisted
// members named by 256 KiB PAX paths; else 1-byte names and one unlisted
// member of the same 50 MiB, so the streams decode alike), reads
// data/a.txt through a tar walk and returns how much the heap grew, the
// archive still open.
func walkHeapGrowth(t *testing.T, longNames bool) int64 {
	dir := t.TempDir()
	want := hoText(5, 3000)
	h := hoPack(t, dir, map[string][]byte{"data/a.txt": want, "data/pad.bin": []byte("pad")},
		cargopack.Options{Pre492: true, ChunkSize: 1 << 30})
	m := h.manifest()
	ci := h.chunkOf(m, "data/a.txt")
	if h.chunkOf(m, "data/pad.bin") != ci {
		t.Fatal("fixture: both files in one chunk")
	}
	fe := hoEntry(t, m, "data/a.txt")
	if fe.ArchiveOffset != nil {
		t.Fatal("fixture: a.txt has an archive_offset")
	}
	hoEntry(t, m, "data/pad.bin").Size = 64 << 20 // the decode bound: 2*64 MiB + 16 MiB

	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: hoTime}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	long := "n"
	if longNames {
		long = strings.Repeat("n", 256<<10)
	} else {
		add("x", make([]byte, 50<<20))
	}
	for i := range 200 {
		add(fmt.Sprintf("%s/%06d", long, i), nil)
	}
	add(fe.Path, want)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	obj := enc.EncodeAll(tb.Bytes(), nil)
	sum := sha256.Sum256(obj)
	ce := &m.Chunks[ci]
	ce.Checksum = hex.EncodeToString(sum[:])
	ce.CompressedSize = int64(len(obj))
	ce.UncompressedSize = int64(tb.Len())
	if err := os.WriteFile(h.objPath(h.chunkKey(m, ci)), obj, 0o644); err != nil {
		t.Fatal(err)
	}
	h.putManifest(m)

	ctx := context.Background()
	a, err := Open(ctx, backend.NewFileStore(dir), h.bucket, h.mkey, Options{Name: hoName})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer a.Close()
	f, ok := a.Stat("data/a.txt")
	if !ok {
		t.Fatal("data/a.txt not listed")
	}
	before := heapAfterGC()
	rc, err := a.Open(ctx, f, 0, f.Size)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read: %d bytes, %v; want the file's %d bytes", len(got), err, len(want))
	}
	after := heapAfterGC()
	runtime.KeepAlive(a)
	return int64(after) - int64(before)
}
