package manifest_test

// These tests load manifests written by our own CargoShip writer
// (archiveview/cargopack) in every shape it produces, and check what the
// manifest says against the bytes actually stored: each file's bytes,
// located only through the parsed manifest (ResolveObjectKey, frames,
// archive_offset, split parts), must equal the source bytes, and each
// frame's checksum must match the stored frame.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

const bucket = "wharf-test"

// sourceFiles: text (compressible), random bytes (incompressible, .jpg so
// the writer may choose plain .tar), an empty file, a non-ASCII name, one
// large file that spans several frames or is split, and two identical files
// for dedup.
func sourceFiles() map[string][]byte {
	r := rand.New(rand.NewSource(7))
	rnd := func(n int) []byte {
		b := make([]byte, n)
		r.Read(b)
		return b
	}
	text := func(n int, seed int) []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "line %d of file %d: the quick brown fox\n", i, seed)
		}
		return b.Bytes()[:n]
	}
	return map[string][]byte{
		"docs/readme.txt":        text(3000, 1),
		"docs/notes/a.txt":       text(70000, 2),
		"img/photo-1.jpg":        rnd(20000),
		"img/photo-2.jpg":        rnd(9000),
		"img/photo-3.jpg":        rnd(11000),
		"empty.txt":              {},
		"données/été.csv":        text(5000, 3),
		"big/blob.dat":           append(text(150000, 4), rnd(100000)...),
		"dup/one.txt":            text(4000, 5),
		"dup/two.txt":            text(4000, 5),
		"deep/a/b/c/d/e/f/g.txt": text(100, 6),
	}
}

func TestWriterShapes(t *testing.T) {
	tests := []struct {
		name  string
		opt   cargopack.Options
		shape string // what the manifest must show, so a case cannot pass vacuously
	}{
		{"framed", cargopack.Options{FrameSize: 16 << 10, ChunkSize: 64 << 10}, "multiframe"},
		{"framed, giant frames", cargopack.Options{FrameSize: 16 << 10, ChunkSize: 64 << 10, NoSubFrames: true}, "multiframe"},
		{"unframed zstd", cargopack.Options{ChunkSize: 64 << 10}, "unframed"},
		{"plain tar for everything", cargopack.Options{FrameSize: 16 << 10, PlainTar: func(string) bool { return true }}, "plain"},
		{"split files", cargopack.Options{FrameSize: 16 << 10, ChunkSize: 64 << 10, SplitSize: 40 << 10}, "split"},
		{"dedup", cargopack.Options{FrameSize: 16 << 10, Dedup: true}, "dup"},
		{"dedup unpatched", cargopack.Options{FrameSize: 16 << 10, Dedup: true, DedupUnpatched: true}, "dup"},
		{"direct upload", cargopack.Options{Direct: true}, "direct"},
		{"mixed direct and chunked", cargopack.Options{FrameSize: 16 << 10, DirectFor: func(rel string) bool { return strings.HasPrefix(rel, "img/") }}, "mixed"},
		{"pre-#492 offsets", cargopack.Options{ChunkSize: 64 << 10, Pre492: true}, "nooffsets"},
		{"version 2.0", cargopack.Options{Version: "2.0"}, "unframed"},
		{"version 1.0", cargopack.Options{Version: "1.0"}, "unframed"},
		{"prefix-included keys", cargopack.Options{FrameSize: 16 << 10, KeyStyle: cargopack.PrefixIncluded}, "multiframe"},
		{"bucket-qualified keys", cargopack.Options{FrameSize: 16 << 10, KeyStyle: cargopack.BucketQualified}, "multiframe"},
		{"URL keys", cargopack.Options{FrameSize: 16 << 10, KeyStyle: cargopack.URL}, "multiframe"},
		{"empty prefix", cargopack.Options{FrameSize: 16 << 10, Prefix: "-"}, "multiframe"},
		{"relative walk root", cargopack.Options{FrameSize: 16 << 10, RelativePaths: true, SourcePath: "src"}, "multiframe"},
		{"plain manifest, no checksums", cargopack.Options{FrameSize: 16 << 10, PlainManifest: true, NoChecksums: true}, "multiframe"},
		{"incremental fields", cargopack.Options{FrameSize: 16 << 10, PreviousManifestID: "20260101-00000000", SyncType: "incremental", DeletedPaths: []string{"gone/x.txt"}}, "multiframe"},
	}
	src := sourceFiles()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opt := tt.opt
			opt.Bucket = bucket
			switch opt.Prefix {
			case "":
				opt.Prefix = "backups/team"
			case "-":
				opt.Prefix = ""
			}
			if opt.ChunkSize == 0 {
				opt.ChunkSize = 64 << 10 // several chunks, so keys and shards vary
			}
			opt.Created = time.Date(2026, 7, 21, 12, 0, 0, 0, time.UTC)
			opt.Hostname = "test"
			res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(src, opt.Created), opt)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join(dir, bucket, filepath.FromSlash(res.ManifestKey)))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := manifest.Load(f, res.ManifestKey, manifest.Limits{})
			if err != nil {
				t.Fatalf("Load(%s): %v", res.ManifestKey, err)
			}
			if len(m.Warnings) > 0 && tt.name != "version 1.0" {
				t.Errorf("warnings on a writer manifest: %q", m.Warnings)
			}
			if _, id, ok := manifest.UploadDir(res.ManifestKey); !ok || id != m.UploadID {
				t.Errorf("UploadDir(%q) = %q, %v; upload_id %q", res.ManifestKey, id, ok, m.UploadID)
			}
			checkShape(t, m, tt.shape)
			checkBytes(t, dir, m, src)
		})
	}
}

// checkShape asserts the writer produced the shape the case is about.
func checkShape(t *testing.T, m *manifest.Manifest, shape string) {
	t.Helper()
	var frames, plain, split, dup, direct, noOffset int
	chunk := map[string]bool{}
	for _, c := range m.Chunks {
		chunk[c.S3Key] = true
		frames += len(c.Frames)
		if strings.HasSuffix(c.S3Key, ".tar") {
			plain++
		}
	}
	for _, f := range m.Files {
		switch {
		case f.IsDuplicate:
			dup++
		case !chunk[f.S3Key]:
			direct++
		case f.ArchiveOffset == nil:
			noOffset++
		}
		if f.TotalParts > 1 {
			split++
		}
	}
	ok := map[string]bool{
		"multiframe": frames > len(m.Chunks) && len(m.Chunks) > 1,
		"unframed":   frames == 0 && len(m.Chunks) > 0,
		"plain":      plain == len(m.Chunks) && plain > 0,
		"split":      split >= 2,
		"dup":        dup >= 1,
		"direct":     len(m.Chunks) == 0 && direct == len(m.Files),
		"mixed":      direct > 0 && len(m.Chunks) > 0,
		"nooffsets":  noOffset > 0,
	}[shape]
	if !ok {
		t.Fatalf("manifest lacks shape %q: %d chunks, %d frames, %d plain, %d split parts, %d dups, %d direct, %d without offset",
			shape, len(m.Chunks), frames, plain, split, dup, direct, noOffset)
	}
}

// checkBytes reads every file through the parsed manifest alone and
// compares with the source.
func checkBytes(t *testing.T, dir string, m *manifest.Manifest, src map[string][]byte) {
	t.Helper()
	chunks := map[string]*manifest.ChunkEntry{}
	for i := range m.Chunks {
		chunks[m.Chunks[i].S3Key] = &m.Chunks[i]
	}
	object := func(s3key string) []byte {
		k := manifest.ResolveObjectKey(bucket, m.Prefix, s3key)
		b, err := os.ReadFile(filepath.Join(dir, bucket, filepath.FromSlash(k)))
		if err != nil {
			t.Fatalf("s3_key %q resolves to %q: %v", s3key, k, err)
		}
		return b
	}
	tarStream := map[string][]byte{}
	stream := func(c *manifest.ChunkEntry) []byte {
		if b, ok := tarStream[c.S3Key]; ok {
			return b
		}
		obj := object(c.S3Key)
		var out []byte
		switch {
		case strings.HasSuffix(c.S3Key, ".tar"):
			out = obj
			if len(c.Frames) > 0 {
				t.Fatalf("plain chunk %q has frames", c.S3Key)
			}
		case len(c.Frames) > 0:
			var end int64
			for i, fr := range c.Frames {
				raw := obj[fr.CompressedOffset : fr.CompressedOffset+fr.CompressedSize]
				if sum, ok, err := manifest.ParseChecksum(fr.Checksum); err != nil {
					t.Fatal(err)
				} else if ok && sum != sha256.Sum256(raw) {
					t.Fatalf("chunk %q frame %d: checksum does not match the stored frame", c.S3Key, i)
				}
				dec, err := zstd.NewReader(bytes.NewReader(raw), zstd.WithDecoderConcurrency(1))
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(dec)
				dec.Close()
				if err != nil || int64(len(b)) != fr.UncompressedSize {
					t.Fatalf("chunk %q frame %d decodes to %d bytes (%v), manifest says %d", c.S3Key, i, len(b), err, fr.UncompressedSize)
				}
				out = append(out, b...)
				end = max(end, fr.CompressedOffset+fr.CompressedSize)
			}
			if end != int64(len(obj)) || c.CompressedSize != int64(len(obj)) {
				t.Fatalf("chunk %q: frames end at %d, compressed_size %d, object %d bytes", c.S3Key, end, c.CompressedSize, len(obj))
			}
		default:
			dec, err := zstd.NewReader(bytes.NewReader(obj))
			if err != nil {
				t.Fatal(err)
			}
			out, err = io.ReadAll(dec)
			dec.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		tarStream[c.S3Key] = out
		return out
	}
	seen := map[string]int64{}
	for _, fe := range m.Files {
		rel, err := manifest.RelativeKey(m.SourcePath, fe.Path)
		if err != nil {
			t.Fatalf("RelativeKey(%q, %q): %v", m.SourcePath, fe.Path, err)
		}
		want, ok := src[rel]
		if !ok {
			t.Fatalf("path %q (key %q) is not a source file", fe.Path, rel)
		}
		if fe.IsDuplicate {
			seen[rel] = int64(len(want))
			continue // no bytes of its own
		}
		part := want
		if fe.TotalParts > 1 {
			part = want[fe.Offset : fe.Offset+fe.Length]
		}
		if sum, ok, err := manifest.ParseChecksum(fe.Checksum); err != nil {
			t.Fatal(err)
		} else if ok && sum != sha256.Sum256(part) {
			t.Fatalf("%s: checksum does not match the source bytes", rel)
		}
		var got []byte
		if c, isChunk := chunks[fe.S3Key]; isChunk {
			if fe.ArchiveOffset == nil {
				seen[rel] += int64(len(part))
				continue // pre-#492 / pre-2.1: a tar walk finds it (read path's job)
			}
			s := stream(c)
			off := *fe.ArchiveOffset
			if off+int64(len(part)) > int64(len(s)) {
				t.Fatalf("%s: archive_offset %d + %d past the tar stream (%d)", rel, off, len(part), len(s))
			}
			got = s[off : off+int64(len(part))]
		} else {
			got = object(fe.S3Key)
		}
		if !bytes.Equal(got, part) {
			t.Fatalf("%s: bytes located through the manifest differ from the source", rel)
		}
		seen[rel] += int64(len(part))
	}
	for rel, b := range src {
		if seen[rel] != int64(len(b)) {
			t.Errorf("%s: manifest accounts for %d of %d bytes", rel, seen[rel], len(b))
		}
	}
}

// TestWriterEncryptedManifest: the writer's KMS wrapper is rejected by name
// and, read under a plain name, by content.
func TestWriterEncryptedManifest(t *testing.T) {
	dir := t.TempDir()
	opt := cargopack.Options{Bucket: bucket, Prefix: "p", EncryptedManifest: true}
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(sourceFiles(), time.Now()), opt)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, bucket, filepath.FromSlash(res.ManifestKey)))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{res.ManifestKey, "p/uploads/x/manifest.json.gz"} {
		_, err := manifest.Parse(data, key, manifest.Limits{})
		if !errors.Is(err, manifest.ErrEncrypted) || !strings.Contains(err.Error(), "binding_version 1") || !strings.Contains(err.Error(), key) {
			t.Errorf("key %q: got %v", key, err)
		}
	}
}
