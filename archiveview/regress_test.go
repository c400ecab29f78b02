package archiveview

// Regression tests for bugs that survived the existing tests when they
// were seeded one at a time (issue 12 §5). Each pins one behaviour and
// fails when its bug is put back.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestFrameCacheKeyNamesTheObject: two uploads whose chunks have frames at
// the same offsets and of the same sizes, without checksums (so nothing
// else tells them apart), read through one store and one cache: each
// serves its own bytes. (Seeded bugs: the cache key reduced to the frame's
// offset, or without the object key.)
func TestFrameCacheKeyNamesTheObject(t *testing.T) {
	dir := t.TempDir()
	var keys []string
	srcs := []map[string][]byte{{"f.bin": rpRandom(11, 300<<10)}, {"f.bin": rpRandom(12, 300<<10)}}
	for i, files := range srcs {
		res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, rpTime), cargopack.Options{
			Bucket: rpBucket, Prefix: "p", UploadID: []string{"20250101-aaaa", "20250101-bbbb"}[i], Created: rpTime,
			FrameSize: 64 << 10, NoChecksums: true, PlainTar: func(string) bool { return false },
		})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, res.ManifestKey)
	}
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	cache := chunkio.NewFrameCache(64 << 20)
	var arcs []*Archive
	for i, k := range keys {
		a, err := Open(context.Background(), store, rpBucket, k, Options{Name: []string{"a", "b"}[i], Cache: cache, Readahead: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		arcs = append(arcs, a)
	}
	fa, fb := arcs[0].tree.Chunks[0].Frames, arcs[1].tree.Chunks[0].Frames
	if len(fa) < 3 || len(fa) != len(fb) || fa[2].Span() != fb[2].Span() || fa[2].HasSum {
		t.Fatalf("the two chunks' frames differ in layout or have checksums: the test proves nothing")
	}
	for i, a := range arcs {
		f, _ := a.Stat("f.bin")
		if b := vReadAll(t, a, f, 0, f.Size); !bytes.Equal(b, srcs[i]["f.bin"]) {
			t.Fatalf("archive %d served another object's bytes", i)
		}
	}
}

// TestStreamObjectSumChecked: an unframed chunk with no archive offsets
// (read by a tar walk) and no file checksums is covered by its chunk's
// sha256 alone: a swapped-in chunk, a valid zstd tar of the same members
// with other content, is refused, never served. (Seeded bug: the
// whole-object sha256 check of streams switched off.)
func TestStreamObjectSumChecked(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a.txt": rpText(1, 40_000), "b.txt": rpText(2, 70_000)}
	other := map[string][]byte{"a.txt": rpText(3, 40_000), "b.txt": rpText(4, 70_000)}
	var res []*cargopack.Result
	for i, src := range []map[string][]byte{files, other} {
		r, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(src, rpTime), cargopack.Options{
			Bucket: rpBucket, Prefix: "p", UploadID: []string{"20250101-cccc", "20250101-dddd"}[i], Created: rpTime, Version: "2.0",
		})
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	m := res[0].Manifest
	for i := range m.Files {
		m.Files[i].Checksum = "" // only the chunk's sha256 is left
		if m.Files[i].ArchiveOffset != nil {
			t.Fatal("a 2.0 manifest with archive offsets: the test proves nothing")
		}
	}
	if m.Chunks[0].Checksum == "" {
		t.Fatal("no chunk checksum: the test proves nothing")
	}
	rvPutManifest(t, dir, res[0].ManifestKey, m)
	chunkPath := func(r *cargopack.Result) string {
		return filepath.Join(dir, rpBucket, filepath.FromSlash(manifest.ResolveObjectKey(rpBucket, r.Manifest.Prefix, r.Manifest.Chunks[0].S3Key)))
	}
	swapped, err := os.ReadFile(chunkPath(res[1]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(chunkPath(res[0]), swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, rg := range [][2]int64{{0, -1}, {100, 500}} {
		a, err := Open(context.Background(), backend.NewFileStore(dir), rpBucket, res[0].ManifestKey, Options{Name: "swap", Readahead: -1})
		if err != nil {
			t.Fatal(err)
		}
		f, _ := a.Stat("b.txt")
		n := rg[1]
		if n < 0 {
			n = f.Size
		}
		r, err := a.Open(context.Background(), f, rg[0], n)
		var got bytes.Buffer
		if err == nil {
			_, err = got.ReadFrom(r)
			r.Close()
		}
		if err == nil {
			t.Fatalf("a swapped unframed chunk served %d bytes of b.txt [%d,+%d) (equal to the other upload's: %v)",
				got.Len(), rg[0], n, bytes.Equal(got.Bytes(), other["b.txt"][rg[0]:rg[0]+n]))
		}
		a.Close()
	}
	// Verify reads the chunk whole, as a stream: its own check reports
	// the chunk (not only the files read through it).
	a, err := Open(context.Background(), backend.NewFileStore(dir), rpBucket, res[0].ManifestKey, Options{Name: "swap", Readahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	chunkProblem := false
	if _, err := a.Verify(context.Background(), func(p VerifyProblem) {
		chunkProblem = chunkProblem || (p.Key == "" && p.Chunk == a.tree.Chunks[0].Key)
	}); err != nil {
		t.Fatal(err)
	}
	if !chunkProblem {
		t.Fatal("Verify did not report the swapped chunk itself")
	}
}

// TestReadFromFrameBoundary: a read starting exactly where a frame starts
// fetches that frame, not the one before it. (Seeded bug: the covering
// frames off by one at a boundary.)
func TestReadFromFrameBoundary(t *testing.T) {
	files := map[string][]byte{"big.txt": rpText(21, 600<<10)}
	ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10}, Options{Readahead: -1})
	c, e := rpChunkOf(t, ra, "big.txt")
	lo, hi, err := chunkio.CoverFrames(c.Frames, e.Off, e.Off+e.Length)
	if err != nil || hi-lo < 3 {
		t.Fatalf("frames %d-%d (%v): the test needs a file over several frames", lo, hi, err)
	}
	k := lo + 2
	start := c.Frames[k].UOff - e.Off // a file offset on a frame boundary
	if _, err := ra.read(t, "big.txt", 0, 1, true); err != nil {
		t.Fatal(err) // the tar header check is done once, here
	}
	for _, n := range []int64{1, c.Frames[k].USize} {
		rb := rpOpenDir(t, ra.dir, ra.res, files, Options{Readahead: -1, Cache: ra.a.set.Cache()})
		if _, err := rb.read(t, "big.txt", 0, 1, true); err != nil {
			t.Fatal(err)
		}
		rb.faulty.Reset()
		got, err := rb.read(t, "big.txt", start, n, true)
		if err != nil || !bytes.Equal(got, files["big.txt"][start:start+n]) {
			t.Fatalf("read at the boundary: %v", err)
		}
		log := rb.faulty.Log()
		for _, req := range log {
			if req.Op == "range" && req.Off < c.Frames[k].COff {
				t.Fatalf("a read from frame %d's first byte fetched object bytes from %d (frame %d starts at %d): %+v",
					k, req.Off, k, c.Frames[k].COff, log)
			}
		}
	}
}

// TestSplitPartsOutOfOrder: the parts of a split file may be listed in any
// order in the manifest; they are served in part_index order. (Seeded bug:
// the parts no longer sorted.)
func TestSplitPartsOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	src := map[string][]byte{"s.bin": rpText(31, 400_000), "t.txt": rpText(32, 1000)}
	res := rvPack(t, dir, src, cargopack.Options{FrameSize: 32 << 10, SplitSize: 90_000, ChunkSize: 200_000})
	a, err := rvMutate(t, dir, res, func(m *manifest.Manifest) {
		var parts []int
		for i := range m.Files {
			if m.Files[i].TotalParts > 1 {
				parts = append(parts, i)
			}
		}
		if len(parts) < 3 {
			t.Fatalf("%d parts: the test needs a split file", len(parts))
		}
		// Reverse the parts' places in the list.
		entries := make([]manifest.FileEntry, len(parts))
		for j, i := range parts {
			entries[j] = m.Files[i]
		}
		slices.Reverse(entries)
		for j, i := range parts {
			m.Files[i] = entries[j]
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	f, _ := a.Stat("s.bin")
	if b := vReadAll(t, a, f, 0, f.Size); !bytes.Equal(b, src["s.bin"]) {
		t.Fatal("a split file listed out of order is served in the wrong order")
	}
}
