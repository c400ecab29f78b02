package cargopack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

const testBucket = "arch"

var testMTime = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("X", -7*3600))

// randBytes returns n deterministic pseudo-random (incompressible) bytes.
func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// textBytes returns n deterministic, compressible bytes of word-ish text.
func textBytes(seed uint64, n int) []byte {
	words := []string{"harbour", "crane", "ship", "cargo", "manifest", "chunk", "frame", "tar", "zstd", "wharf", "\n"}
	r := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

// packed is an archive written into a temporary DirSink.
type packed struct {
	dir string
	res *Result
	m   *manifest.Manifest // decoded from the stored manifest object
	raw []byte             // stored manifest JSON (after gunzip)
	src map[string][]byte  // Rel -> content
	opt Options
}

func pack(t *testing.T, src map[string][]byte, opt Options) *packed {
	t.Helper()
	if opt.Bucket == "" {
		opt.Bucket = testBucket
	}
	if opt.Created.IsZero() {
		opt.Created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	if opt.UploadID == "" {
		opt.UploadID = "20260102-test"
	}
	dir := t.TempDir()
	res, err := Write(context.Background(), DirSink(dir), FromMap(src, testMTime), opt)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	p := &packed{dir: dir, res: res, src: src, opt: opt}
	data := p.object(t, res.ManifestKey)
	if !opt.PlainManifest {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("manifest %s is not gzip: %v", res.ManifestKey, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			t.Fatalf("gunzip manifest: %v", err)
		}
	}
	p.raw = data
	p.m = new(manifest.Manifest)
	if err := json.Unmarshal(data, p.m); err != nil {
		t.Fatalf("manifest does not decode into manifest.Manifest: %v", err)
	}
	return p
}

// object reads a stored object.
func (p *packed) object(t *testing.T, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, p.opt.Bucket, filepath.FromSlash(key)))
	if err != nil {
		t.Fatalf("read object %s: %v", key, err)
	}
	return b
}

// storedKey maps a recorded s3_key to the stored object key.
func (p *packed) storedKey(t *testing.T, recorded string) string {
	t.Helper()
	k := recorded
	k = strings.TrimPrefix(k, "s3://")
	k = strings.TrimPrefix(k, p.opt.Bucket+"/")
	if p.opt.Prefix != "" && !strings.HasPrefix(k, p.opt.Prefix+"/") {
		k = p.opt.Prefix + "/" + k
	}
	return k
}

// tarStream returns a chunk's whole uncompressed tar stream.
func (p *packed) tarStream(t *testing.T, c manifest.ChunkEntry) []byte {
	t.Helper()
	obj := p.object(t, p.storedKey(t, c.S3Key))
	if strings.HasSuffix(c.S3Key, ".tar") {
		return obj
	}
	d, err := zstd.NewReader(bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := io.ReadAll(d)
	if err != nil {
		t.Fatalf("decode %s: %v", c.S3Key, err)
	}
	return out
}

// chunkByKey finds a chunk entry by its recorded key.
func (p *packed) chunkByKey(t *testing.T, key string) manifest.ChunkEntry {
	t.Helper()
	for _, c := range p.m.Chunks {
		if c.S3Key == key {
			return c
		}
	}
	t.Fatalf("no chunk with key %q", key)
	return manifest.ChunkEntry{}
}

// relOf maps a manifest path back to the source Rel.
func (p *packed) relOf(path string) string {
	if p.opt.RelativePaths {
		return path
	}
	sp := p.opt.SourcePath
	if sp == "" {
		sp = "/cargopack/src"
	}
	return strings.TrimPrefix(path, strings.TrimSuffix(sp, "/")+"/")
}

// entryBytes is the source bytes a file entry (or part) must hold.
func (p *packed) entryBytes(t *testing.T, e manifest.FileEntry) []byte {
	t.Helper()
	src, ok := p.src[p.relOf(e.Path)]
	if !ok {
		t.Fatalf("manifest path %q maps to no source file", e.Path)
	}
	if e.TotalParts > 1 {
		return src[e.Offset : e.Offset+e.Length]
	}
	return src
}

// tarHeaders lists a tar stream's headers with their data offsets.
func tarHeaders(t *testing.T, stream []byte) (hdrs []*tar.Header, offs []int64) {
	t.Helper()
	cr := &countingReader{r: bytes.NewReader(stream)}
	tr := tar.NewReader(cr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, offs
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		hdrs = append(hdrs, h)
		offs = append(offs, cr.n)
	}
}
