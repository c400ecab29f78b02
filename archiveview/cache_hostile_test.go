package archiveview

// Hostile-archive cases (see hostile_test.go for the harness and what every
// case must satisfy).

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// hoPoison: an honest archive A and a hostile manifest B (another upload in
// the same bucket and prefix) that lists A's chunk with two frames swapped:
// each frame's span and checksum are real, only their order in the tar
// stream is a lie. Both are opened on one store with one chunkio.FrameCache, as a
// server does. B is read first; then every read of A must still be exact.
// (Issue 7 bug 4, fixed: frames were cached by (store, bucket, object, frame
// index), so B's frame k, A's frame k+1 verified against its own checksum,
// was served to A as A's frame k: wrong bytes, or with frames of different
// lengths a slice-bounds panic in framedSource.next.)
func hoPoison(t *testing.T, sizes bool) {
	files := hoBaseFiles()
	dir := t.TempDir()
	h := hoPack(t, dir, files, hoFramed)
	mb := h.manifest()
	c := &mb.Chunks[0]
	ob := *hoEntry(t, mb, "b.bin").ArchiveOffset
	k := hoFrameAt(c, ob+16384+100) // a frame inside b.bin, after its header's frame
	if sizes {
		// The last two frames: 17408 and 6656 bytes with these files.
		// B's frame k decodes to 6656 bytes (an exact-size buffer); A
		// slices it as its 17408-byte frame k.
		k = len(c.Frames) - 2
		if c.Frames[k].UncompressedSize <= c.Frames[k+1].UncompressedSize {
			t.Fatalf("frame layout changed: %+v", c.Frames)
		}
	}
	if k < 1 || k+1 >= len(c.Frames) {
		t.Fatalf("frame layout: k=%d of %d", k, len(c.Frames))
	}
	fa, fb := c.Frames[k], c.Frames[k+1]
	c.Frames[k] = manifest.FrameEntry{CompressedOffset: fb.CompressedOffset, CompressedSize: fb.CompressedSize,
		UncompressedOffset: fa.UncompressedOffset, UncompressedSize: fb.UncompressedSize, Checksum: fb.Checksum}
	c.Frames[k+1] = manifest.FrameEntry{CompressedOffset: fa.CompressedOffset, CompressedSize: fa.CompressedSize,
		UncompressedOffset: fa.UncompressedOffset + fb.UncompressedSize, UncompressedSize: fa.UncompressedSize, Checksum: fa.Checksum}
	idA := mb.UploadID
	mb.UploadID = "20250304-b0b0b0b0"
	js, err := json.Marshal(mb)
	if err != nil {
		t.Fatal(err)
	}
	keyB := strings.Replace(h.mkey, idA, mb.UploadID, 1)
	h.putJSON(keyB, js)

	ctx, cancel := context.WithTimeout(context.Background(), hoDeadline)
	defer cancel()
	fs := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	cache := chunkio.NewFrameCache(16 << 20)
	b, err := Open(ctx, fs, h.bucket, keyB, Options{Name: "hostile-b", Cache: cache, Readahead: -1})
	if err != nil {
		t.Fatalf("Open B: %v", err)
	}
	defer b.Close()
	a, err := Open(ctx, fs, h.bucket, h.mkey, Options{Name: hoName, Cache: cache, Readahead: -1})
	if err != nil {
		t.Fatalf("Open A: %v", err)
	}
	defer a.Close()
	for _, f := range hoAllKeys(b) {
		hoRead(ctx, b, f, 0, f.Size, true) // outcome irrelevant: B is hostile
	}
	for _, f := range hoAllKeys(a) {
		src := files[f.Key]
		for _, rg := range [][2]int64{{f.Size / 2, min(64, f.Size/2)}, {0, f.Size}, {f.Size - 10, 10}} {
			res := hoRead(ctx, a, f, rg[0], rg[1], true)
			switch {
			case res.err != nil:
				t.Errorf("honest archive A: read %s [%d,+%d): %v", f.Key, rg[0], rg[1], res.err)
			case !bytes.Equal(res.got, src[rg[0]:rg[0]+rg[1]]):
				t.Errorf("honest archive A: read %s [%d,+%d): WRONG BYTES served", f.Key, rg[0], rg[1])
			}
		}
	}
}

// TestHostileCachePoisoning: a hostile manifest over an honest archive's
// chunk, read first through the same store and chunkio.FrameCache, never changes
// what the honest archive serves (issue 7 bug 4: frames were cached by
// index, and a decoded buffer was sliced without a length check).
func TestHostileCachePoisoning(t *testing.T) {
	t.Run("frames swapped", func(t *testing.T) { hoPoison(t, false) })
	t.Run("frames swapped, other frame sizes (was a slice-bounds panic)", func(t *testing.T) { hoPoison(t, true) })
}
