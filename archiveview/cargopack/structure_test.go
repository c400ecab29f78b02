package cargopack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// checkOffsets asserts that every stored entry's archive_offset points at its
// bytes in the chunk's decoded tar stream (and, for plain .tar, in the object
// itself), and that it equals the data offset an archive/tar walk finds.
func checkOffsets(t *testing.T, p *packed) {
	t.Helper()
	streams := map[string][]byte{}
	walked := map[string]map[string]int64{}
	for _, c := range p.m.Chunks {
		s := p.tarStream(t, c)
		streams[c.S3Key] = s
		hdrs, offs := tarHeaders(t, s)
		walked[c.S3Key] = map[string]int64{}
		for i, h := range hdrs {
			walked[c.S3Key][h.Name] = offs[i]
		}
	}
	for _, e := range p.m.Files {
		if e.IsDuplicate {
			if e.ArchiveOffset != nil {
				t.Errorf("duplicate %s has archive_offset", e.Path)
			}
			continue
		}
		if e.ArchiveOffset == nil {
			t.Fatalf("%s: no archive_offset", e.Path)
		}
		off := *e.ArchiveOffset
		want := p.entryBytes(t, e)
		s, ok := streams[e.S3Key]
		if !ok {
			t.Fatalf("%s: s3_key %q is no chunk", e.Path, e.S3Key)
		}
		if off <= 0 || off+int64(len(want)) > int64(len(s)) {
			t.Fatalf("%s: archive_offset %d outside stream of %d bytes", e.Path, off, len(s))
		}
		if !bytes.Equal(s[off:off+int64(len(want))], want) {
			t.Errorf("%s: bytes at archive_offset %d differ from the source", e.Path, off)
		}
		name := e.Path
		if e.TotalParts > 1 {
			name = fmt.Sprintf("%s.part%d", e.Path, e.PartIndex)
		}
		if w, ok := walked[e.S3Key][name]; !ok || w != off {
			t.Errorf("%s: archive_offset %d, tar walk finds data at %d (found=%v)", name, off, w, ok)
		}
	}
}

// checkFrames asserts the frame table tiles the object and the tar stream,
// every frame starts with the zstd magic, decodes on its own to exactly its
// uncompressed span, and its checksum is the sha256 of its bytes.
func checkFrames(t *testing.T, p *packed, c manifest.ChunkEntry) {
	t.Helper()
	obj := p.object(t, p.storedKey(t, c.S3Key))
	stream := p.tarStream(t, c)
	if c.CompressedSize != int64(len(obj)) {
		t.Errorf("%s: compressed_size %d, object is %d bytes", c.S3Key, c.CompressedSize, len(obj))
	}
	if len(c.Frames) == 0 {
		t.Fatalf("%s: no frames", c.S3Key)
	}
	if c.Checksum != "" {
		t.Errorf("%s: framed chunk has a chunk checksum %q (#522: must be empty)", c.S3Key, c.Checksum)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var co, uo int64
	for i, f := range c.Frames {
		if f.CompressedOffset != co || f.UncompressedOffset != uo {
			t.Fatalf("%s frame %d: offsets (%d,%d), want (%d,%d)", c.S3Key, i, f.CompressedOffset, f.UncompressedOffset, co, uo)
		}
		if f.CompressedSize <= 0 || f.UncompressedSize <= 0 {
			t.Fatalf("%s frame %d: empty frame %+v", c.S3Key, i, f)
		}
		raw := obj[co : co+f.CompressedSize]
		if !bytes.HasPrefix(raw, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
			t.Errorf("%s frame %d: no zstd magic", c.S3Key, i)
		}
		sum := sha256.Sum256(raw)
		if f.Checksum != hex.EncodeToString(sum[:]) {
			t.Errorf("%s frame %d: checksum %q, want sha256 of compressed bytes", c.S3Key, i, f.Checksum)
		}
		got, err := dec.DecodeAll(raw, nil)
		if err != nil {
			t.Fatalf("%s frame %d does not decode alone: %v", c.S3Key, i, err)
		}
		if !bytes.Equal(got, stream[uo:uo+f.UncompressedSize]) {
			t.Errorf("%s frame %d: decodes to other bytes than its span", c.S3Key, i)
		}
		co += f.CompressedSize
		uo += f.UncompressedSize
	}
	if co != int64(len(obj)) || uo != int64(len(stream)) {
		t.Errorf("%s: frames cover (%d,%d), object/stream are (%d,%d)", c.S3Key, co, uo, len(obj), len(stream))
	}
}

func TestFramedStructure(t *testing.T) {
	const fs = 16 << 10
	src := independentSources()
	p := pack(t, src, Options{FrameSize: fs, ChunkSize: 256 << 10, Prefix: "backups"})
	if len(p.m.Chunks) < 2 {
		t.Fatalf("want several chunks, got %d", len(p.m.Chunks))
	}
	frames := 0
	for _, c := range p.m.Chunks {
		if strings.HasSuffix(c.S3Key, ".tar.zst") {
			checkFrames(t, p, c)
			frames += len(c.Frames)
		}
	}
	if frames != p.res.Frames {
		t.Errorf("Result.Frames %d, manifest has %d", p.res.Frames, frames)
	}
	checkOffsets(t, p)
	if got := strings.Join(p.m.FormatFeatures, ","); got != "frames" {
		t.Errorf("format_features %q", got)
	}
	if p.m.Version != "2.1" || p.m.ChecksumAlgorithm != "sha256" {
		t.Errorf("version %q checksum_algorithm %q", p.m.Version, p.m.ChecksumAlgorithm)
	}
	// First entry without PAX: offset 512.
	first := p.m.Files[0]
	if *first.ArchiveOffset != 512 {
		t.Errorf("first entry %s: archive_offset %d, want 512", first.Path, *first.ArchiveOffset)
	}
	// File checksums are the sha256 of the file.
	for _, e := range p.m.Files {
		sum := sha256.Sum256(p.entryBytes(t, e))
		if e.Checksum != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: checksum %q", e.Path, e.Checksum)
		}
	}
	// uncompressed_size is the sum of file sizes.
	for _, c := range p.m.Chunks {
		var sum int64
		for _, e := range p.m.Files {
			if e.S3Key == c.S3Key {
				sum += e.Size
			}
		}
		if c.UncompressedSize != sum {
			t.Errorf("%s: uncompressed_size %d, files sum to %d", c.S3Key, c.UncompressedSize, sum)
		}
	}
}

// frameSpans returns the frames overlapping [off, off+n).
func frameSpans(c manifest.ChunkEntry, off, n int64) []manifest.FrameEntry {
	var out []manifest.FrameEntry
	for _, f := range c.Frames {
		if f.UncompressedOffset < off+n && off < f.UncompressedOffset+f.UncompressedSize {
			out = append(out, f)
		}
	}
	return out
}

func TestSubFrames(t *testing.T) {
	const fs = 8 << 10
	src := map[string][]byte{
		"a-small.txt": textBytes(1, 100),
		"b-large.txt": textBytes(2, 10*fs+123),
		"c-after.txt": textBytes(3, 300),
	}
	for _, noSub := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSubFrames=%v", noSub), func(t *testing.T) {
			p := pack(t, src, Options{FrameSize: fs, NoSubFrames: noSub})
			if len(p.m.Chunks) != 1 {
				t.Fatalf("%d chunks", len(p.m.Chunks))
			}
			c := p.m.Chunks[0]
			checkFrames(t, p, c)
			checkOffsets(t, p)
			large := p.m.Files[1]
			spans := frameSpans(c, *large.ArchiveOffset, large.Size)
			if noSub {
				if len(spans) != 1 {
					t.Fatalf("NoSubFrames: large file spans %d frames, want 1 giant frame", len(spans))
				}
				if spans[0].UncompressedSize < large.Size {
					t.Errorf("giant frame %d smaller than the file", spans[0].UncompressedSize)
				}
				return
			}
			if len(spans) < 10 {
				t.Fatalf("large file of %d bytes spans %d frames; want mid-file cuts", large.Size, len(spans))
			}
			midStart := false
			for _, f := range c.Frames {
				if f.UncompressedSize > 2*fs {
					t.Errorf("frame %+v exceeds 2*FrameSize", f)
				}
				if f.UncompressedOffset > *large.ArchiveOffset && f.UncompressedOffset < *large.ArchiveOffset+large.Size {
					midStart = true
				}
			}
			if !midStart {
				t.Error("no frame starts inside the large file's data")
			}
		})
	}
}

// TestFrameCutsAtFileBoundary: a frame cut after a file begins exactly at the
// next entry's header, and a file ending on a cut leaves a trailer-only frame.
func TestFrameCutsAtFileBoundary(t *testing.T) {
	const fs = 4096
	src := map[string][]byte{
		"a.txt": textBytes(1, fs-512), // header 512 + data 3584 = 4096: cut, no padding
		"b.txt": textBytes(2, 1000),   // 512+1000 < fs: no cut after it
		"c.txt": textBytes(3, 3000),   // frame reaches >= fs: padding flushed, cut
	}
	p := pack(t, src, Options{FrameSize: fs})
	c := p.m.Chunks[0]
	checkFrames(t, p, c)
	checkOffsets(t, p)
	if len(c.Frames) != 3 {
		t.Fatalf("frames %+v, want 3", c.Frames)
	}
	if c.Frames[0].UncompressedSize != 4096 {
		t.Errorf("frame 0: %d bytes, want 4096", c.Frames[0].UncompressedSize)
	}
	// b's header starts frame 1.
	if c.Frames[1].UncompressedOffset != *p.m.Files[1].ArchiveOffset-512 {
		t.Errorf("frame 1 starts at %d, b's header at %d", c.Frames[1].UncompressedOffset, *p.m.Files[1].ArchiveOffset-512)
	}
	// Frame 1 ends after c's padding (512+1000 pad 1024, 512+3000 pad 3072).
	if c.Frames[1].UncompressedSize != 512+1024+512+3072 {
		t.Errorf("frame 1: %d bytes", c.Frames[1].UncompressedSize)
	}
	if last := c.Frames[len(c.Frames)-1]; last.UncompressedSize != 1024 {
		t.Errorf("last frame %d bytes, want the 1024-byte trailer only", last.UncompressedSize)
	}

	// A small framed chunk has exactly one frame holding everything.
	p = pack(t, map[string][]byte{"x": []byte("hello")}, Options{FrameSize: fs})
	c = p.m.Chunks[0]
	checkFrames(t, p, c)
	if len(c.Frames) != 1 || c.Frames[0].UncompressedSize != 512+512+1024 {
		t.Errorf("small chunk frames %+v", c.Frames)
	}
	if *p.m.Files[0].ArchiveOffset != 512 {
		t.Errorf("x: archive_offset %d", *p.m.Files[0].ArchiveOffset)
	}
}

func TestUnframedChunk(t *testing.T) {
	p := pack(t, independentSources(), Options{})
	for _, c := range p.m.Chunks {
		if len(c.Frames) != 0 {
			t.Errorf("%s: frames in an unframed chunk", c.S3Key)
		}
		obj := p.object(t, p.storedKey(t, c.S3Key))
		sum := sha256.Sum256(obj)
		if c.Checksum != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: chunk checksum %q is not the object's sha256", c.S3Key, c.Checksum)
		}
		if c.CompressedSize != int64(len(obj)) {
			t.Errorf("%s: compressed_size %d, object %d", c.S3Key, c.CompressedSize, len(obj))
		}
	}
	if len(p.m.FormatFeatures) != 0 {
		t.Errorf("format_features %v without frames", p.m.FormatFeatures)
	}
	checkOffsets(t, p)
}

func TestPlainTarDecision(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), randBytes(1, 500)...)
	gz := append([]byte{0x1f, 0x8b, 8, 0}, randBytes(2, 500)...)
	txt := textBytes(3, 500)
	cases := []struct {
		name string
		src  map[string][]byte
		want string
	}{
		{"majority-compressible", map[string][]byte{"a.txt": txt, "b.csv": txt, "c.png": png}, ".tar.zst"},
		{"tie-is-plain", map[string][]byte{"a.txt": txt, "c.png": png}, ".tar"},
		{"majority-precompressed", map[string][]byte{"a.txt": txt, "c.png": png, "d.jpg": png}, ".tar"},
		{"magic-sniff-no-ext", map[string][]byte{"blob": gz, "blob2": png, "a.txt": txt}, ".tar"},
		{"magic-ignored-for-known-ext", map[string][]byte{"a.csv": gz, "b.json": png, "c.bin": txt}, ".tar.zst"},
		{"dat-sniffed", map[string][]byte{"a.dat": gz, "b.tmp": png, "c.txt": txt}, ".tar"},
		{"ts-is-video", map[string][]byte{"a.ts": txt, "b.ts": txt, "c.txt": txt}, ".tar"},
		{"empty-files-compressible", map[string][]byte{"e1": {}, "e2": {}, "p.png": png}, ".tar.zst"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pack(t, tc.src, Options{FrameSize: 4096})
			if len(p.m.Chunks) != 1 {
				t.Fatalf("%d chunks", len(p.m.Chunks))
			}
			c := p.m.Chunks[0]
			if !strings.HasSuffix(c.S3Key, tc.want) || (tc.want == ".tar" && strings.HasSuffix(c.S3Key, ".tar.zst")) {
				t.Fatalf("chunk %s, want %s", c.S3Key, tc.want)
			}
			if p.m.CompressionType != "zstd" {
				t.Errorf("compression_type %q: CargoShip always writes zstd", p.m.CompressionType)
			}
			checkOffsets(t, p)
			obj := p.object(t, p.storedKey(t, c.S3Key))
			if tc.want == ".tar" {
				if len(c.Frames) != 0 {
					t.Error("plain tar has frames")
				}
				sum := sha256.Sum256(obj)
				if c.Checksum != hex.EncodeToString(sum[:]) {
					t.Error("plain tar chunk checksum is not the object sha256")
				}
				// archive_offset is an object offset: a ranged read works.
				for _, e := range p.m.Files {
					if got := obj[*e.ArchiveOffset : *e.ArchiveOffset+e.Size]; !bytes.Equal(got, p.src[p.relOf(e.Path)]) {
						t.Errorf("%s: object range at archive_offset differs", e.Path)
					}
				}
				if c.CompressedSize <= c.UncompressedSize {
					t.Errorf("plain tar compressed_size %d <= uncompressed_size %d", c.CompressedSize, c.UncompressedSize)
				}
			} else {
				checkFrames(t, p, c)
			}
		})
	}
}

func TestProbeIncompressibleLargeFile(t *testing.T) {
	big := randBytes(11, probeMinSize)
	f := FromMap(map[string][]byte{"odd.xyz": big, "text.xyz": textBytes(1, probeMinSize)}, testMTime)
	for _, tc := range []struct {
		i    int
		want bool
	}{{0, true}, {1, false}} {
		got, err := isPrecompressed(&f[tc.i])
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: precompressed=%v, want %v", f[tc.i].Rel, got, tc.want)
		}
	}
}

func TestShardsAndChunkIDs(t *testing.T) {
	src := map[string][]byte{}
	for i := 0; i < 12; i++ {
		src[fmt.Sprintf("f%02d.txt", i)] = textBytes(uint64(i), 3000)
	}
	p := pack(t, src, Options{ChunkSize: 6000, ShardCount: 4, FrameSize: 4096})
	if len(p.m.Chunks) != 6 || p.m.TotalChunks != 6 {
		t.Fatalf("%d chunks (total_chunks %d), want 6", len(p.m.Chunks), p.m.TotalChunks)
	}
	wantIDs := []struct{ shard, id int }{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {0, 1}, {1, 1}}
	keys := map[string]bool{}
	for g, c := range p.m.Chunks {
		if c.ShardID != wantIDs[g].shard || c.ID != wantIDs[g].id {
			t.Errorf("chunk %d: shard %d id %d, want %+v", g, c.ShardID, c.ID, wantIDs[g])
		}
		want := fmt.Sprintf("uploads/20260102-test/shard-%d/chunk-%d.tar.zst", c.ShardID, c.ID)
		if c.S3Key != want {
			t.Errorf("chunk %d key %q, want %q", g, c.S3Key, want)
		}
		if keys[c.S3Key] {
			t.Errorf("duplicate chunk key %s", c.S3Key)
		}
		keys[c.S3Key] = true
		if c.FileCount != 2 || len(c.FilePaths) != 2 {
			t.Errorf("chunk %d: file_count %d paths %v", g, c.FileCount, c.FilePaths)
		}
	}
	if p.m.ShardCount != 4 || len(p.m.Shards) != 4 {
		t.Fatalf("shard_count %d, %d shards", p.m.ShardCount, len(p.m.Shards))
	}
	for _, s := range p.m.Shards {
		var ks []string
		var files int64
		for _, c := range p.m.Chunks {
			if c.ShardID == s.ID {
				ks = append(ks, c.S3Key)
				files += int64(c.FileCount)
			}
		}
		if strings.Join(ks, ",") != strings.Join(s.ChunkKeys, ",") || s.ChunkCount != len(ks) || s.FileCount != files {
			t.Errorf("shard %d: %+v, chunks %v", s.ID, s, ks)
		}
		if s.Prefix != fmt.Sprintf("uploads/20260102-test/shard-%d", s.ID) {
			t.Errorf("shard prefix %q", s.Prefix)
		}
	}
	// Files join to chunks on s3_key, and (shard_id, chunk_id) agree.
	for _, e := range p.m.Files {
		c := p.chunkByKey(t, e.S3Key)
		if c.ShardID != e.ShardID || c.ID != e.ChunkID {
			t.Errorf("%s: (shard %d, chunk %d) vs chunk (%d, %d)", e.Path, e.ShardID, e.ChunkID, c.ShardID, c.ID)
		}
	}
	checkOffsets(t, p)
}

func TestSplitFiles(t *testing.T) {
	big := textBytes(1, 150000)
	src := map[string][]byte{"a.txt": textBytes(2, 100), "big.txt": big, "z.txt": textBytes(3, 100)}
	p := pack(t, src, Options{SplitSize: 64 << 10, ChunkSize: 1 << 20, FrameSize: 16 << 10})
	var parts []manifest.FileEntry
	for _, e := range p.m.Files {
		if strings.HasSuffix(e.Path, "/big.txt") {
			parts = append(parts, e)
		}
	}
	if len(parts) != 3 {
		t.Fatalf("%d parts, want 3", len(parts))
	}
	chunkOf := map[string]bool{}
	var off int64
	for k, e := range parts {
		if e.PartIndex != k || e.TotalParts != 3 || e.Size != int64(len(big)) || e.Offset != off {
			t.Errorf("part %d: %+v", k, e)
		}
		off += e.Length
		if chunkOf[e.S3Key] {
			t.Errorf("parts share chunk %s", e.S3Key)
		}
		chunkOf[e.S3Key] = true
		sum := sha256.Sum256(big[e.Offset : e.Offset+e.Length])
		if e.Checksum != hex.EncodeToString(sum[:]) {
			t.Errorf("part %d checksum is not the part's sha256", k)
		}
		// The tar entry carries the CARGOSHIP.* PAX records.
		c := p.chunkByKey(t, e.S3Key)
		hdrs, _ := tarHeaders(t, p.tarStream(t, c))
		found := false
		for _, h := range hdrs {
			if h.Name == fmt.Sprintf("%s.part%d", e.Path, k) {
				found = true
				want := map[string]string{
					"CARGOSHIP.part_index":    fmt.Sprint(k),
					"CARGOSHIP.total_parts":   "3",
					"CARGOSHIP.offset":        fmt.Sprint(e.Offset),
					"CARGOSHIP.original_path": e.Path,
				}
				for key, v := range want {
					if h.PAXRecords[key] != v {
						t.Errorf("part %d: PAX %s=%q, want %q", k, key, h.PAXRecords[key], v)
					}
				}
				if h.Size != e.Length {
					t.Errorf("part %d: tar size %d, length %d", k, h.Size, e.Length)
				}
			}
		}
		if !found {
			t.Errorf("part %d: no tar entry", k)
		}
	}
	if off != int64(len(big)) {
		t.Errorf("parts cover %d bytes of %d", off, len(big))
	}
	// total_bytes over-counts split files, like CargoShip.
	if want := int64(100 + 100 + 3*len(big)); p.m.TotalBytes != want {
		t.Errorf("total_bytes %d, want %d", p.m.TotalBytes, want)
	}
	checkOffsets(t, p)
}

func TestDedup(t *testing.T) {
	same := textBytes(1, 5000)
	src := map[string][]byte{"a/orig.txt": same, "b/copy.txt": same, "c/other.txt": textBytes(2, 100), "d/copy2.txt": same}
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			p := pack(t, src, Options{Dedup: true, Direct: direct, FrameSize: 4096, ContentHash: true, ShardCount: 2, ChunkSize: 5000})
			byPath := map[string]manifest.FileEntry{}
			for _, e := range p.m.Files {
				byPath[p.relOf(e.Path)] = e
			}
			orig := byPath["a/orig.txt"]
			sum := sha256.Sum256(same)
			h := hex.EncodeToString(sum[:])
			for _, rel := range []string{"b/copy.txt", "d/copy2.txt"} {
				d := byPath[rel]
				if !d.IsDuplicate || d.DuplicateOfHash != h || d.Checksum != h {
					t.Errorf("%s: %+v", rel, d)
				}
				if d.S3Key != orig.S3Key || d.ChunkID != orig.ChunkID || d.ShardID != orig.ShardID {
					t.Errorf("%s not patched with the original's location: %+v vs %+v", rel, d, orig)
				}
				if d.OriginalS3Key != orig.S3Key || d.OriginalChunkID != orig.ChunkID || d.OriginalShardID != orig.ShardID {
					t.Errorf("%s: original_* fields %+v", rel, d)
				}
				if d.ArchiveOffset != nil {
					t.Errorf("%s: duplicate has archive_offset", rel)
				}
				if d.ContentHash != orig.ContentHash || d.ContentHash == "" {
					t.Errorf("%s: content_hash %q vs %q", rel, d.ContentHash, orig.ContentHash)
				}
			}
			if orig.IsDuplicate || orig.Checksum != h {
				t.Errorf("original %+v", orig)
			}
			dd := p.m.Deduplication
			if dd == nil || !dd.Enabled || dd.DuplicateFiles != 2 || dd.UniqueFiles != 2 || dd.BytesSaved != 10000 {
				t.Fatalf("deduplication block %+v", dd)
			}
			if ref := dd.FileReferences[h]; ref.RefCount != 3 || ref.S3Key != orig.S3Key {
				t.Errorf("file_references[%s] = %+v", h, ref)
			}
			if direct {
				if len(p.res.ObjectKeys) != 2 {
					t.Errorf("direct dedup stored %d objects, want 2", len(p.res.ObjectKeys))
				}
				return
			}
			// No tar member for a duplicate.
			members := 0
			for _, c := range p.m.Chunks {
				hdrs, _ := tarHeaders(t, p.tarStream(t, c))
				members += len(hdrs)
				for _, hd := range hdrs {
					if strings.Contains(hd.Name, "copy") {
						t.Errorf("duplicate %s archived", hd.Name)
					}
				}
			}
			if members != 2 {
				t.Errorf("%d tar members, want 2", members)
			}
			checkOffsets(t, p)
		})
	}
}

func TestDirectShape(t *testing.T) {
	src := independentSources()
	p := pack(t, src, Options{Direct: true, Prefix: "pre", KeyStyle: PrefixIncluded, FrameSize: 4096})
	if p.m.TotalChunks != 0 || p.m.Chunks == nil || len(p.m.Chunks) != 0 {
		t.Fatalf("total_chunks %d chunks %v", p.m.TotalChunks, p.m.Chunks)
	}
	if !bytes.Contains(p.raw, []byte(`"chunks": []`)) {
		t.Error(`manifest lacks "chunks": []`)
	}
	if len(p.m.FormatFeatures) != 0 || p.res.Frames != 0 {
		t.Error("direct upload has frames")
	}
	for _, e := range p.m.Files {
		if e.ArchiveOffset != nil || e.ChunkID != 0 {
			t.Errorf("%s: archive_offset %v chunk_id %d", e.Path, e.ArchiveOffset, e.ChunkID)
		}
		if !strings.HasPrefix(e.S3Key, "pre/uploads/20260102-test/files/") {
			t.Errorf("%s: s3_key %q", e.Path, e.S3Key)
		}
		got := p.object(t, e.S3Key)
		if !bytes.Equal(got, p.src[p.relOf(e.Path)]) {
			t.Errorf("%s: direct object differs from source", e.Path)
		}
		sum := sha256.Sum256(got)
		if e.Checksum != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: checksum", e.Path)
		}
	}
	if len(p.res.ObjectKeys) != len(src) {
		t.Errorf("%d objects for %d files", len(p.res.ObjectKeys), len(src))
	}
}

func TestVersions(t *testing.T) {
	src := independentSources()
	for _, v := range []string{"1.0", "2.0", "2.1"} {
		t.Run(v, func(t *testing.T) {
			p := pack(t, src, Options{Version: v, FrameSize: 16 << 10})
			if p.m.Version != v {
				t.Fatalf("version %q", p.m.Version)
			}
			for _, key := range []string{`"archive_offset"`, `"frames"`, `"format_features"`} {
				if has := bytes.Contains(p.raw, []byte(key)); has != (v == "2.1") {
					t.Errorf("%s present=%v", key, has)
				}
			}
			hasSums := bytes.Contains(p.raw, []byte(`"checksum"`))
			hasAlg := bytes.Contains(p.raw, []byte(`"checksum_algorithm"`))
			if v == "1.0" && (hasSums || hasAlg) {
				t.Error("1.0 manifest has checksums")
			}
			if v != "1.0" && (!hasSums || !hasAlg) {
				t.Error("checksums or checksum_algorithm missing")
			}
			if v == "2.1" {
				checkOffsets(t, p)
				return
			}
			// Pre-2.1 chunks are single zstd streams; tar walk finds every file.
			for _, c := range p.m.Chunks {
				if strings.HasSuffix(c.S3Key, ".tar.zst") {
					obj := p.object(t, p.storedKey(t, c.S3Key))
					if n := bytes.Count(obj, []byte{0x28, 0xb5, 0x2f, 0xfd}); n < 1 {
						t.Errorf("%s: no zstd frame", c.S3Key)
					}
				}
			}
		})
	}
}

func TestNoChecksumsAndKeyStyles(t *testing.T) {
	src := map[string][]byte{"a.txt": textBytes(1, 100)}
	p := pack(t, src, Options{NoChecksums: true, FrameSize: 4096})
	if bytes.Contains(p.raw, []byte(`"checksum"`)) || p.m.ChecksumAlgorithm != "" {
		t.Error("NoChecksums manifest has checksums")
	}
	cases := []struct {
		style KeyStyle
		want  string
	}{
		{PrefixRelative, "uploads/u1/shard-0/chunk-0.tar.zst"},
		{PrefixIncluded, "data/set/uploads/u1/shard-0/chunk-0.tar.zst"},
		{BucketQualified, "arch/data/set/uploads/u1/shard-0/chunk-0.tar.zst"},
		{URL, "s3://arch/data/set/uploads/u1/shard-0/chunk-0.tar.zst"},
	}
	for _, tc := range cases {
		p := pack(t, src, Options{KeyStyle: tc.style, Prefix: "data/set", UploadID: "u1"})
		if p.m.Chunks[0].S3Key != tc.want || p.m.Files[0].S3Key != tc.want || p.m.Shards[0].ChunkKeys[0] != tc.want {
			t.Errorf("style %d: keys %q, want %q", tc.style, p.m.Chunks[0].S3Key, tc.want)
		}
		if p.res.ManifestKey != "data/set/uploads/u1/manifest.json.gz" {
			t.Errorf("manifest key %q", p.res.ManifestKey)
		}
		if p.res.ObjectKeys[0] != "data/set/uploads/u1/shard-0/chunk-0.tar.zst" {
			t.Errorf("stored key %q", p.res.ObjectKeys[0])
		}
	}
}

// TestManifestRoundTrip: the stored manifest is 2-space-indented JSON that
// decodes into manifest.Manifest and re-encodes to the same bytes.
func TestManifestRoundTrip(t *testing.T) {
	p := pack(t, independentSources(), Options{
		FrameSize: 16 << 10, Dedup: true, ContentHash: true, SplitSize: 100000,
		PreviousManifestID: "20251231-parent", SyncType: "incremental", DeletedPaths: []string{"gone/old.txt"},
		Metadata: func(rel string) map[string]string {
			if strings.HasSuffix(rel, ".png") {
				return map[string]string{"magika_mime": "image/png"}
			}
			return nil
		},
	})
	again, err := json.MarshalIndent(p.m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, p.raw) {
		t.Error("manifest does not round-trip through manifest.Manifest")
	}
	if !bytes.HasPrefix(p.raw, []byte("{\n  \"version\": \"2.1\",\n  \"upload_id\"")) {
		t.Errorf("manifest not 2-space indented: %.60q", p.raw)
	}
	if p.m.PreviousManifestID != "20251231-parent" || p.m.SyncType != "incremental" ||
		len(p.m.DeletedPaths) != 1 || p.m.DeletedPaths[0] != "/cargopack/src/gone/old.txt" {
		t.Errorf("chain fields %q %q %v", p.m.PreviousManifestID, p.m.SyncType, p.m.DeletedPaths)
	}
	if p.m.TotalFiles != int64(len(p.m.Files)) || p.m.ShardCount != len(p.m.Shards) || p.m.TotalChunks != len(p.m.Chunks) {
		t.Error("totals inconsistent")
	}
	for _, e := range p.m.Files {
		if !e.ModTime.Equal(testMTime) || e.ModTime.Nanosecond() != testMTime.Nanosecond() {
			t.Errorf("%s: mod_time %v lost precision", e.Path, e.ModTime)
		}
		if strings.HasSuffix(e.Path, ".png") && e.Metadata["magika_mime"] != "image/png" {
			t.Errorf("%s: metadata %v", e.Path, e.Metadata)
		}
	}
	if !bytes.Contains(p.raw, []byte(`"mod_time": "2025-03-14T15:09:26.535897932-07:00"`)) {
		t.Error("mod_time not RFC 3339 with nanoseconds and the source zone")
	}
	// Also decodable by the exported type with unknown-field strictness.
	dec := json.NewDecoder(bytes.NewReader(p.raw))
	dec.DisallowUnknownFields()
	var m manifest.Manifest
	if err := dec.Decode(&m); err != nil {
		t.Errorf("strict decode: %v", err)
	}
	_ = io.EOF
}
