package archiveview

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

const rvBucket = "bkt"

var rvTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// rvRandom returns n pseudo-random (incompressible) bytes.
func rvRandom(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// rvText returns n bytes of compressible text.
func rvText(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	words := []string{"wharf ", "cargo ", "ship ", "frame ", "chunk ", "tar\n"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

// rvPack writes files with cargopack into dir (a FileStore root) and
// returns the result.
func rvPack(t testing.TB, dir string, files map[string][]byte, opt cargopack.Options) *cargopack.Result {
	t.Helper()
	if opt.Bucket == "" {
		opt.Bucket = rvBucket
	}
	if opt.Created.IsZero() {
		opt.Created = rvTime
	}
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, rvTime), opt)
	if err != nil {
		t.Fatalf("cargopack.Write: %v", err)
	}
	return res
}

// rvPutManifest stores a hand-built manifest (gzip JSON unless the key ends
// in .json) at dir/bucket/key.
func rvPutManifest(t testing.TB, dir, key string, m *manifest.Manifest) {
	t.Helper()
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data := js
	if strings.HasSuffix(key, ".gz") {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(js)
		zw.Close()
		data = b.Bytes()
	}
	rvPut(t, dir, key, data)
}

func rvPut(t testing.TB, dir, key string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, rvBucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func rvOpen(t testing.TB, dir, key string, opts Options) (*Archive, error) {
	t.Helper()
	return Open(context.Background(), backend.NewFileStore(dir), rvBucket, key, opts)
}

// rvObject reads a stored object whole.
func rvObject(t testing.TB, dir, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rvBucket, filepath.FromSlash(key)))
	if err != nil {
		t.Fatalf("object %s: %v", key, err)
	}
	return b
}

// rvTarStream returns the uncompressed tar stream of chunk c, decoded
// independently of the read path (klauspost zstd over the whole object).
func rvTarStream(t testing.TB, dir string, c *chunkio.Chunk) []byte {
	t.Helper()
	obj := rvObject(t, dir, c.Key)
	switch c.Kind {
	case chunkio.PlainTar, chunkio.Direct:
		return obj
	}
	d, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := d.DecodeAll(obj, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", c.Key, err)
	}
	return out
}

// rvCheckArchive checks every file of a against the source bytes: Stat,
// size, sha256, ETag form, and each extent's bytes found in the stored
// objects (by offset, or by walking the tar for the entry name). Framed
// chunks' frame tables are checked frame by frame.
func rvCheckArchive(t *testing.T, dir string, a *Archive, src map[string][]byte) {
	t.Helper()
	if a.Files() != len(src) {
		t.Fatalf("Files() = %d, want %d", a.Files(), len(src))
	}
	streams := map[int32][]byte{}
	stream := func(ci int32) []byte {
		if s, ok := streams[ci]; ok {
			return s
		}
		s := rvTarStream(t, dir, &a.tree.Chunks[ci])
		streams[ci] = s
		return s
	}
	for ci := range a.tree.Chunks {
		c := &a.tree.Chunks[ci]
		if c.Kind != chunkio.FramedZstd {
			continue
		}
		obj := rvObject(t, dir, c.Key)
		s := stream(int32(ci))
		d, _ := zstd.NewReader(nil)
		for _, f := range c.Frames {
			comp := obj[f.COff : f.COff+f.CSize]
			if f.HasSum && sha256.Sum256(comp) != f.Sum {
				t.Errorf("chunk %s frame at %d: checksum mismatch", c.Key, f.COff)
			}
			got, err := d.DecodeAll(comp, nil)
			if err != nil || !bytes.Equal(got, s[f.UOff:f.UOff+f.USize]) {
				t.Errorf("chunk %s frame at %d does not decode to its uncompressed span (err %v)", c.Key, f.COff, err)
			}
		}
		d.Close()
	}
	for key, want := range src {
		f, ok := a.Stat(key)
		if !ok {
			t.Errorf("Stat(%q): missing", key)
			continue
		}
		if f.Key != key || f.Size != int64(len(want)) {
			t.Errorf("Stat(%q) = key %q size %d, want size %d", key, f.Key, f.Size, len(want))
		}
		sum := sha256.Sum256(want)
		if f.SHA256 != "" && f.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: SHA256 %s does not match the source", key, f.SHA256)
		}
		if len(f.ETag) == 32 && f.ETag != fmt.Sprintf("%x", md5.Sum(want)) {
			t.Errorf("%s: 32-hex ETag %s is not the content MD5", key, f.ETag)
		}
		if !f.ModTime.Equal(rvTime) {
			t.Errorf("%s: ModTime %v, want %v", key, f.ModTime, rvTime)
		}
		var at int64
		for _, e := range a.fileExtents(index.Ordinal(f)) {
			if e.FileOff != at {
				t.Errorf("%s: extent at file offset %d, want %d", key, e.FileOff, at)
			}
			piece := want[e.FileOff : e.FileOff+e.Length]
			if e.HasSum && sha256.Sum256(piece) != e.Sum {
				t.Errorf("%s: extent sum mismatch at %d", key, e.FileOff)
			}
			at += e.Length
			c := &a.tree.Chunks[e.Chunk]
			s := stream(e.Chunk)
			switch {
			case c.Kind == chunkio.Direct:
				if e.TarName != "" {
					t.Errorf("%s: direct extent has tar name %q", key, e.TarName)
				}
				if e.Off != 0 || !bytes.Equal(s[e.Off:e.Off+e.Length], piece) || int64(len(s)) != e.Length {
					t.Errorf("%s: direct object %s does not hold the file", key, c.Key)
				}
			case e.Off >= 0:
				if e.Off+e.Length > int64(len(s)) || !bytes.Equal(s[e.Off:e.Off+e.Length], piece) {
					t.Errorf("%s: bytes at archive offset %d of %s differ from the source", key, e.Off, c.Key)
				}
			default:
				got, found := rvTarEntry(t, s, e.TarName)
				if !found || !bytes.Equal(got, piece) {
					t.Errorf("%s: tar entry %q in %s: found=%v, content matches=%v", key, e.TarName, c.Key, found, bytes.Equal(got, piece))
				}
			}
		}
		if at != f.Size {
			t.Errorf("%s: extents cover %d of %d bytes", key, at, f.Size)
		}
	}
}

func rvTarEntry(t testing.TB, stream []byte, name string) ([]byte, bool) {
	tr := tar.NewReader(bytes.NewReader(stream))
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, false
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			return b, err == nil
		}
	}
}

// rvSources is a mixed tree: text (compressible), random (not), empty, a
// large file spanning frames, nested directories.
func rvSources() map[string][]byte {
	return map[string][]byte{
		"a.txt":              rvText(1, 3000),
		"dir/b.txt":          rvText(2, 70000),
		"dir/sub/c.bin":      rvRandom(3, 5000),
		"dir/sub/empty":      {},
		"big/large.dat":      rvText(4, 300000),
		"z/deep/er/d.csv":    rvText(5, 10),
		"space name/é ü.txt": rvText(6, 100),
	}
}

func TestOpenCargopackShapes(t *testing.T) {
	plainAll := func(string) bool { return true }
	tests := []struct {
		name   string
		opt    cargopack.Options
		shapes []string // must be present
		files  map[string][]byte
		etag   string // expected ETag prefix form: "md5", "sha256-", "wharf-"
	}{
		{name: "framed", opt: cargopack.Options{FrameSize: 16 << 10, ChunkSize: 100 << 10}, shapes: []string{"framed-zstd", "sub-frames"}, etag: "sha256-"},
		{name: "framed-giant", opt: cargopack.Options{FrameSize: 16 << 10, NoSubFrames: true}, shapes: []string{"framed-zstd"}, etag: "sha256-"},
		{name: "stream", opt: cargopack.Options{}, shapes: []string{"stream-zstd"}, etag: "sha256-"},
		{name: "plain-tar", opt: cargopack.Options{PlainTar: plainAll}, shapes: []string{"plain-tar"}, etag: "sha256-"},
		{name: "direct", opt: cargopack.Options{Direct: true}, shapes: []string{"direct"}, etag: "sha256-"},
		{name: "split", opt: cargopack.Options{FrameSize: 32 << 10, SplitSize: 64 << 10}, shapes: []string{"split", "framed-zstd"}, etag: "sha256-"},
		{name: "split-plain", opt: cargopack.Options{SplitSize: 50000, PlainTar: plainAll}, shapes: []string{"split", "plain-tar"}, etag: "sha256-"},
		{name: "v2.0-legacy-offsets", opt: cargopack.Options{Version: "2.0"}, shapes: []string{"legacy-offsets", "stream-zstd"}, etag: "sha256-"},
		{name: "v1.0-no-checksums", opt: cargopack.Options{Version: "1.0"}, shapes: []string{"legacy-offsets"}, etag: "wharf-"},
		{name: "no-checksums", opt: cargopack.Options{FrameSize: 16 << 10, NoChecksums: true}, shapes: []string{"framed-zstd"}, etag: "wharf-"},
		{name: "content-hash", opt: cargopack.Options{ContentHash: true, FrameSize: 1 << 20}, etag: "md5"},
		{name: "prefix-included", opt: cargopack.Options{Prefix: "p/q", KeyStyle: cargopack.PrefixIncluded, FrameSize: 1 << 20}},
		{name: "bucket-qualified", opt: cargopack.Options{Prefix: "p", KeyStyle: cargopack.BucketQualified, FrameSize: 1 << 20}},
		{name: "url", opt: cargopack.Options{Prefix: "p", KeyStyle: cargopack.URL, FrameSize: 1 << 20}},
		{name: "prefix-relative", opt: cargopack.Options{Prefix: "p", KeyStyle: cargopack.PrefixRelative, FrameSize: 1 << 20}},
		{name: "relative-paths", opt: cargopack.Options{RelativePaths: true, FrameSize: 1 << 20}},
		{name: "dedup", opt: cargopack.Options{Dedup: true, FrameSize: 16 << 10}, shapes: []string{"dedup"},
			files: map[string][]byte{"x/one": rvText(9, 5000), "x/two": rvText(9, 5000), "y/three": rvText(9, 5000), "other": rvRandom(1, 10)}},
		{name: "dedup-direct", opt: cargopack.Options{Dedup: true, Direct: true}, shapes: []string{"dedup", "direct"},
			files: map[string][]byte{"x/one": rvText(9, 5000), "x/two": rvText(9, 5000)}},
		{name: "dedup-stream", opt: cargopack.Options{Dedup: true, Version: "2.0"}, shapes: []string{"dedup", "legacy-offsets"},
			files: map[string][]byte{"x/one": rvText(9, 5000), "x/two": rvText(9, 5000)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := tc.files
			if src == nil {
				src = rvSources()
			}
			res := rvPack(t, dir, src, tc.opt)
			a, err := rvOpen(t, dir, res.ManifestKey, Options{Name: "served"})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			rvCheckArchive(t, dir, a, src)
			in := a.Info()
			for _, s := range tc.shapes {
				if !slices.Contains(in.Shapes, s) {
					t.Errorf("shapes %v lack %q", in.Shapes, s)
				}
			}
			if in.Name != "served" || in.UploadID != res.Manifest.UploadID || in.ManifestKey != res.ManifestKey ||
				len(in.Chain) != 1 || in.Chain[0] != res.Manifest.UploadID || in.Version != res.Manifest.Version {
				t.Errorf("Info identity = %+v", in)
			}
			if in.Frames != res.Frames {
				t.Errorf("Info.Frames = %d, cargopack wrote %d", in.Frames, res.Frames)
			}
			if in.CompressedBytes != res.CompressedBytes {
				t.Errorf("Info.CompressedBytes = %d, cargopack wrote %d", in.CompressedBytes, res.CompressedBytes)
			}
			if in.Chunks != len(res.ObjectKeys) {
				t.Errorf("Info.Chunks = %d, cargopack wrote %d objects", in.Chunks, len(res.ObjectKeys))
			}
			for k := range src {
				f, _ := a.Stat(k)
				switch tc.etag {
				case "md5":
					if f.ETag != fmt.Sprintf("%x", md5.Sum(src[k])) {
						t.Errorf("%s: ETag %q, want the content MD5", k, f.ETag)
					}
				case "":
				default:
					want := tc.etag
					if len(a.fileExtents(index.Ordinal(f))) > 1 {
						want = "wharf-" // split files have per-part sums only
					}
					if !strings.HasPrefix(f.ETag, want) || len(f.ETag) != len(want)+32 {
						t.Errorf("%s: ETag %q, want %s<32 hex>", k, f.ETag, want)
					}
				}
			}
			// Stable: a second Open gives the same files.
			b, err := rvOpen(t, dir, res.ManifestKey, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for k := range src {
				f1, _ := a.Stat(k)
				f2, _ := b.Stat(k)
				f1, f2 = index.WithOrdinal(f1, 0), index.WithOrdinal(f2, 0) // ordinals differ across builds
				if f1 != f2 {
					t.Errorf("%s: not stable across opens: %+v vs %+v", k, f1, f2)
				}
			}
			if b.Name() != res.Manifest.UploadID {
				t.Errorf("default Name = %q, want the upload id", b.Name())
			}
		})
	}
}

func TestOpenContentTypeAndMetadata(t *testing.T) {
	dir := t.TempDir()
	src := map[string][]byte{"a.json": []byte(`{"a":1}`), "b.bin": rvRandom(2, 100)}
	res := rvPack(t, dir, src, cargopack.Options{FrameSize: 1 << 20, Metadata: func(rel string) map[string]string {
		if rel == "a.json" {
			return map[string]string{"magika_mime": "application/json"}
		}
		return nil
	}})
	a, err := rvOpen(t, dir, res.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rvCheckArchive(t, dir, a, src)
	if f, _ := a.Stat("a.json"); f.ContentType != "application/json" {
		t.Errorf("a.json ContentType %q", f.ContentType)
	}
	if f, _ := a.Stat("b.bin"); f.ContentType != "" {
		t.Errorf("b.bin ContentType %q, want empty", f.ContentType)
	}
}

// TestOpenChain builds a real three-upload chain with cargopack: base, a
// delta that modifies, adds and deletes, and a delta that re-adds a deleted
// file. Newest wins; tombstones hide; a re-add after delete is visible.
func TestOpenChain(t *testing.T) {
	dir := t.TempDir()
	base := map[string][]byte{"keep": rvText(1, 100), "mod": rvText(2, 100), "gone": rvText(3, 100), "back": rvText(4, 100)}
	r1 := rvPack(t, dir, base, cargopack.Options{Prefix: "pre", UploadID: "u1", FrameSize: 1 << 20})
	d2 := map[string][]byte{"mod": rvText(20, 150), "new": rvText(21, 50)}
	rvPack(t, dir, d2, cargopack.Options{Prefix: "pre", UploadID: "u2", FrameSize: 1 << 20,
		PreviousManifestID: "u1", SyncType: "incremental", DeletedPaths: []string{"gone", "back"}})
	d3 := map[string][]byte{"back": rvText(40, 70)}
	r3 := rvPack(t, dir, d3, cargopack.Options{Prefix: "pre", UploadID: "u3", Version: "2.0",
		PreviousManifestID: "u2", SyncType: "incremental"})

	a, err := rvOpen(t, dir, r3.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"keep": base["keep"], "mod": d2["mod"], "new": d2["new"], "back": d3["back"]}
	rvCheckArchive(t, dir, a, want)
	in := a.Info()
	if !slices.Equal(in.Chain, []string{"u3", "u2", "u1"}) {
		t.Errorf("chain %v", in.Chain)
	}
	for _, s := range []string{"chain", "tombstones"} {
		if !slices.Contains(in.Shapes, s) {
			t.Errorf("shapes %v lack %q", in.Shapes, s)
		}
	}
	if _, ok := a.Stat("gone"); ok {
		t.Error("tombstoned file is visible")
	}
	// The base alone is still the base.
	b, err := rvOpen(t, dir, r1.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rvCheckArchive(t, dir, b, base)
}

// rvManifest returns a minimal valid 2.1 manifest with one framed-less
// stream chunk holding nothing, to be filled by tests.
func rvManifest(id string) *manifest.Manifest {
	return &manifest.Manifest{
		Version: "2.1", UploadID: id, CreatedAt: rvTime, CompletedAt: rvTime,
		SourcePath: "/src", Prefix: "pre", Bucket: "elsewhere", CompressionType: "zstd",
		ChecksumAlgorithm: "sha256",
	}
}

func rvDirectFile(path, key string, data []byte) manifest.FileEntry {
	sum := sha256.Sum256(data)
	return manifest.FileEntry{Path: path, Size: int64(len(data)), ModTime: rvTime, S3Key: key, Checksum: hex.EncodeToString(sum[:])}
}

func TestOpenChainErrors(t *testing.T) {
	type link struct {
		id, prev string
		plain    bool // manifest.json instead of .gz
	}
	tests := []struct {
		name    string
		links   []link // stored manifests; the first is opened
		depth   int
		wantErr string   // substring
		names   []string // substrings the error must contain
	}{
		{name: "missing ancestor", links: []link{{id: "u2", prev: "u1"}}, wantErr: "not found",
			names: []string{"pre/uploads/u2/manifest.json.gz", `"u1"`}},
		{name: "cycle", links: []link{{id: "u3", prev: "u2"}, {id: "u2", prev: "u1"}, {id: "u1", prev: "u3"}}, wantErr: "cycle",
			names: []string{"pre/uploads/u1/manifest.json.gz", "pre/uploads/u3/manifest.json.gz"}},
		{name: "self cycle", links: []link{{id: "u1", prev: "u1"}}, wantErr: "cycle"},
		{name: "depth cap", links: []link{{id: "u4", prev: "u3"}, {id: "u3", prev: "u2"}, {id: "u2", prev: "u1"}, {id: "u1"}}, depth: 2,
			wantErr: "depth", names: []string{"pre/uploads/u2/manifest.json.gz", `"u1"`}},
		{name: "depth ok", links: []link{{id: "u4", prev: "u3"}, {id: "u3", prev: "u2"}, {id: "u2", prev: "u1"}, {id: "u1"}}, depth: 3},
		{name: "plain ancestor", links: []link{{id: "u2", prev: "u1"}, {id: "u1", plain: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, l := range tc.links {
				m := rvManifest(l.id)
				m.PreviousManifestID = l.prev
				data := []byte(l.id)
				key := fmt.Sprintf("uploads/%s/files/f%d", l.id, i)
				rvPut(t, dir, "pre/"+key, data)
				m.Files = []manifest.FileEntry{rvDirectFile(fmt.Sprintf("/src/f%d", i), key, data)}
				name := "manifest.json.gz"
				if l.plain {
					name = "manifest.json"
				}
				rvPutManifest(t, dir, "pre/uploads/"+l.id+"/"+name, m)
			}
			top := "pre/uploads/" + tc.links[0].id + "/manifest.json.gz"
			a, err := rvOpen(t, dir, top, Options{Name: "arch", Limits: manifest.Limits{MaxChainDepth: tc.depth}})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if a.Files() != len(tc.links) {
					t.Errorf("files %d, want %d", a.Files(), len(tc.links))
				}
				return
			}
			if err == nil {
				t.Fatalf("Open succeeded, want error %q", tc.wantErr)
			}
			msg := err.Error()
			if !errors.Is(err, ErrBrokenChain) || !strings.Contains(msg, tc.wantErr) {
				t.Errorf("error %q: want ErrBrokenChain with %q", msg, tc.wantErr)
			}
			for _, n := range append(tc.names, `archive "arch"`, top) {
				if !strings.Contains(msg, n) {
					t.Errorf("error %q does not name %q", msg, n)
				}
			}
		})
	}
}

func TestOpenMissingManifest(t *testing.T) {
	dir := t.TempDir()
	_, err := rvOpen(t, dir, "pre/uploads/nope/manifest.json.gz", Options{})
	if !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	for _, n := range []string{`archive "nope"`, "pre/uploads/nope/manifest.json.gz"} {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
}

// TestOpenGiantFrameAndTombstoneOrder: frames over Options.MaxFrameBytes are
// reported; within one manifest a file entry beats a tombstone for its key.
func TestOpenGiantFrameAndTombstoneOrder(t *testing.T) {
	dir := t.TempDir()
	src := rvSources()
	res := rvPack(t, dir, src, cargopack.Options{FrameSize: 16 << 10, NoSubFrames: true,
		DeletedPaths: []string{"a.txt", "not-there"}})
	a, err := rvOpen(t, dir, res.ManifestKey, Options{MaxFrameBytes: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	rvCheckArchive(t, dir, a, src) // a.txt is listed and deleted in the same upload: it exists
	in := a.Info()
	if !slices.Contains(in.Shapes, "giant-frame") || !slices.ContainsFunc(in.Warnings, func(w string) bool {
		return strings.Contains(w, "more than 100000 bytes")
	}) {
		t.Errorf("no giant-frame report: shapes %v warnings %q", in.Shapes, in.Warnings)
	}
	b, err := rvOpen(t, dir, res.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(b.Info().Shapes, "giant-frame") {
		t.Errorf("giant-frame reported under the default 64 MiB threshold")
	}
}

// TestOpenRequests: Open reads exactly the manifests (one GET each, plus one
// not-found GET per missing candidate name), never lists, stats or reads
// chunk ranges; a transient error on an ancestor fails the whole Open and
// names both manifests.
func TestOpenRequests(t *testing.T) {
	dir := t.TempDir()
	rvPack(t, dir, map[string][]byte{"a": rvText(1, 100)}, cargopack.Options{Prefix: "pre", UploadID: "u1", FrameSize: 1 << 20})
	r2 := rvPack(t, dir, map[string][]byte{"b": rvText(2, 100)}, cargopack.Options{Prefix: "pre", UploadID: "u2", FrameSize: 1 << 20,
		PreviousManifestID: "u1", SyncType: "incremental"})
	fs := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	a, err := Open(context.Background(), fs, rvBucket, r2.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Files() != 2 {
		t.Errorf("files %d", a.Files())
	}
	var got []string
	for _, r := range fs.Log() {
		got = append(got, r.Op+" "+r.Key)
	}
	want := []string{"get " + r2.ManifestKey, "get pre/uploads/u1/manifest.json.gz"}
	if !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}

	fs = faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if strings.Contains(r.Key, "u1/") {
			return faults.Fault{Kind: faults.FaultError}
		}
		return faults.Fault{}
	}})
	_, err = Open(context.Background(), fs, rvBucket, r2.ManifestKey, Options{Name: "arch"})
	if !errors.Is(err, ErrBrokenChain) || !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrBrokenChain wrapping ErrUnavailable", err)
	}
	for _, n := range []string{`archive "arch"`, r2.ManifestKey, `"u1"`} {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
}

// stallingList is a store whose listings never answer until their
// context ends.
type stallingList struct{ backend.Store }

func (stallingList) List(ctx context.Context, _, _ string, _ func(backend.ObjectInfo) error) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestOpenFailedDoesNotWaitForListing: an Open with StorageClasses whose
// manifest cannot be read returns its error at once; the listing of the
// upload prefix it started ahead is stopped, not waited for. The old code
// waited for that listing to end, which a stalled store made last as long
// as the caller's context (a catalog open's slot held until
// --open-timeout for an upload that had already failed).
func TestOpenFailedDoesNotWaitForListing(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, rvBucket), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err := Open(ctx, stallingList{backend.NewFileStore(dir)}, rvBucket, "pre/uploads/nope/manifest.json.gz", Options{StorageClasses: true})
	if !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if took := time.Since(t0); took > 2*time.Second {
		t.Fatalf("Open of a missing manifest took %s: it waited for the listing ahead", took)
	}
}

// TestOpenChainFilesCapped: Limits.MaxFiles bounds the file entries (and
// the deleted paths) of the whole chain, not only of each manifest: a
// chain of manifests each under the cap but over it together is refused
// with the manifest package's ErrTooLarge naming the cap (FilesLimit),
// as one manifest over it is, before the next ancestor is read on. The
// old code built the whole chain's tree, so a discovered upload's chain
// of small manifests took many times the index memory the catalog
// reserved for one manifest's files.
func TestOpenChainFilesCapped(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"20250301-00000001", "20250302-00000002", "20250303-00000003"}
	var top string
	for i, id := range ids {
		files := map[string][]byte{}
		for j := range 5 {
			files[fmt.Sprintf("u%d/f%d.txt", i, j)] = rvText(uint64(10*i+j), 100)
		}
		opt := cargopack.Options{Prefix: "c", UploadID: id, FrameSize: 16 << 10}
		if i > 0 {
			opt.PreviousManifestID, opt.SyncType = ids[i-1], "incremental"
		}
		top = rvPack(t, dir, files, opt).ManifestKey
	}
	a, err := rvOpen(t, dir, top, Options{Limits: manifest.Limits{MaxFiles: 15}})
	if err != nil {
		t.Fatalf("a chain of 15 files at a cap of 15: %v", err)
	}
	if n := a.Info().Files; n != 15 {
		t.Fatalf("%d files, want 15", n)
	}
	a.Close()
	for _, cached := range []bool{false, true} {
		opts := Options{Limits: manifest.Limits{MaxFiles: 8}}
		if cached {
			opts.IndexCache = DirIndexCache{Dir: t.TempDir()}
		}
		a, err := rvOpen(t, dir, top, opts)
		var me *manifest.Error
		if err == nil {
			t.Fatalf("index cache %v: a chain of 15 files opened at a cap of 8 (%d files)", cached, a.Info().Files)
		}
		if !errors.Is(err, manifest.ErrTooLarge) || !errors.As(err, &me) || me.FilesLimit != 8 {
			t.Fatalf("index cache %v: %v, want ErrTooLarge with FilesLimit 8", cached, err)
		}
	}
}
