package cargopack

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestMixedManifest: DirectFor gives one manifest with chunked and direct
// files, including a direct file whose name ends in .tar.zst.
func TestMixedManifest(t *testing.T) {
	src := map[string][]byte{
		"chunked/a.txt":     textBytes(1, 3000),
		"chunked/b.txt":     textBytes(2, 3000),
		"direct/c.txt":      textBytes(3, 200),
		"direct/x.tar.zst":  randBytes(4, 500),
		"direct/empty.dat":  {},
		"chunked/z.csv":     textBytes(5, 10),
		"chunked/big.bin":   randBytes(6, 70000),
		"direct/big-d.bin":  randBytes(7, 70000),
		"chunked/zz/e.json": []byte("{}"),
	}
	isDirect := func(rel string) bool { return strings.HasPrefix(rel, "direct/") }
	p := pack(t, src, Options{DirectFor: isDirect, FrameSize: 8192, SplitSize: 32768, Prefix: "mix"})
	chunkKeys := map[string]bool{}
	for _, c := range p.m.Chunks {
		chunkKeys[c.S3Key] = true
	}
	if len(p.m.Chunks) == 0 || p.m.TotalChunks != len(p.m.Chunks) {
		t.Fatalf("%d chunks", len(p.m.Chunks))
	}
	for _, e := range p.m.Files {
		rel := p.relOf(e.Path)
		if isDirect(rel) {
			if chunkKeys[e.S3Key] || e.ArchiveOffset != nil || e.TotalParts > 1 {
				t.Errorf("%s: direct file in a chunk, with an offset or split: %+v", rel, e)
			}
			if got := p.object(t, p.storedKey(t, e.S3Key)); !bytes.Equal(got, src[rel]) {
				t.Errorf("%s: direct object differs", rel)
			}
		} else if !chunkKeys[e.S3Key] {
			t.Errorf("%s: chunked file's s3_key %q is no chunk", rel, e.S3Key)
		}
	}
	checkOffsetsOf(t, p, func(rel string) bool { return !isDirect(rel) })
}

func TestDedupUnpatched(t *testing.T) {
	same := textBytes(1, 100)
	p := pack(t, map[string][]byte{"a": same, "b": same}, Options{Dedup: true, DedupUnpatched: true})
	d := p.m.Files[1]
	if !d.IsDuplicate || d.S3Key != "" || d.ChunkID != -1 || d.ShardID != -1 || d.OriginalS3Key != "" {
		t.Fatalf("unpatched duplicate %+v", d)
	}
	if !bytes.Contains(p.raw, []byte(`"chunk_id": -1`)) {
		t.Error("placeholder chunk_id -1 not serialized")
	}
}

func TestPre492(t *testing.T) {
	src := map[string][]byte{"a.txt": textBytes(1, 100), "b.png": randBytes(2, 100), "c.png": randBytes(3, 100)}
	cases := []struct {
		name    string
		opt     Options
		offsets bool
	}{
		{"unframed", Options{Pre492: true}, false},
		{"plain", Options{Pre492: true, FrameSize: 4096}, false}, // majority .png: plain .tar
		{"framed", Options{Pre492: true, FrameSize: 4096, PlainTar: func(string) bool { return false }}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pack(t, src, tc.opt)
			for _, e := range p.m.Files {
				if (e.ArchiveOffset != nil) != tc.offsets {
					t.Errorf("%s: archive_offset present=%v, want %v", e.Path, e.ArchiveOffset != nil, tc.offsets)
				}
			}
		})
	}
}

func TestEncryptedManifest(t *testing.T) {
	src := map[string][]byte{"a.txt": textBytes(1, 100)}
	for _, plain := range []bool{false, true} {
		p0 := &packed{}
		dir := t.TempDir()
		res, err := Write(t.Context(), DirSink(dir), FromMap(src, testMTime), Options{Bucket: "b", UploadID: "enc", EncryptedManifest: true, PlainManifest: plain})
		if err != nil {
			t.Fatal(err)
		}
		want := "uploads/enc/manifest.encrypted.json.gz"
		if plain {
			want = "uploads/enc/manifest.encrypted.json"
		}
		if res.ManifestKey != want {
			t.Fatalf("key %q, want %q", res.ManifestKey, want)
		}
		p0.dir, p0.opt = dir, Options{Bucket: "b"}
		raw := p0.object(t, res.ManifestKey)
		if !plain {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ = io.ReadAll(zr)
		}
		var w map[string]any
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatal(err)
		}
		if w["algorithm"] != "AES-256-GCM" || w["encrypted_data"] == "" || w["binding_version"] != float64(1) || w["files"] != nil {
			t.Errorf("wrapper %v", w)
		}
	}
}

// checkOffsetsOf runs checkOffsets on the chunked files only.
func checkOffsetsOf(t *testing.T, p *packed, keep func(rel string) bool) {
	t.Helper()
	q := *p
	m := *p.m
	m.Files = nil
	for _, e := range p.m.Files {
		if keep(p.relOf(e.Path)) {
			m.Files = append(m.Files, e)
		}
	}
	q.m = &m
	checkOffsets(t, &q)
}
