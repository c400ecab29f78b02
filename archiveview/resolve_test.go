package archiveview

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// rvMutate stores a modified deep copy of res's manifest in place of the
// original and opens it.
func rvMutate(t *testing.T, dir string, res *cargopack.Result, mutate func(m *manifest.Manifest)) (*Archive, error) {
	t.Helper()
	js, err := json.Marshal(res.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest.Manifest
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	mutate(&m)
	rvPutManifest(t, dir, res.ManifestKey, &m)
	return rvOpen(t, dir, res.ManifestKey, Options{Name: "arch"})
}

// rvWantErr checks that err is set and names every string in names, the
// archive and the manifest key.
func rvWantErr(t *testing.T, err error, key string, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Open succeeded, want an error naming %q", names)
	}
	for _, n := range append(names, `archive "arch"`, key) {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
}

func TestChunkKindOf(t *testing.T) {
	tests := []struct {
		key, comp string
		frames    bool
		want      chunkio.Kind
		err       bool
	}{
		{"a/chunk-0.tar.zst", "zstd", true, chunkio.FramedZstd, false},
		{"a/chunk-0.tar.zst", "none", false, chunkio.StreamZstd, false}, // the extension wins over compression_type
		{"a/chunk-0.TAR.ZST", "", false, chunkio.StreamZstd, false},
		{"a/chunk-0.zst", "", false, chunkio.StreamZstd, false},
		{"a/chunk-0.tar", "zstd", false, chunkio.PlainTar, false}, // compression_type says zstd, wrongly
		{"a/chunk-0.tar", "", true, 0, true},                      // a plain tar has no frames
		{"a/chunk-0.tar.gz", "zstd", false, 0, true},
		{"a/chunk-0", "", false, chunkio.StreamZstd, false}, // "" = zstd
		{"a/chunk-0", "zstd", true, chunkio.FramedZstd, false},
		{"a/chunk-0", "none", false, chunkio.PlainTar, false},
		{"a/chunk-0", "lz4", false, 0, true},
	}
	for _, tc := range tests {
		got, err := chunkKindOf(tc.key, tc.comp, tc.frames)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("chunkKindOf(%q, %q, %v) = %v, %v; want %v (error %v)", tc.key, tc.comp, tc.frames, got, err, tc.want, tc.err)
		}
	}
}

// TestResolveKeyForms records the chunk and file keys of a real archive in
// every spelling ResolveObjectKey accepts; all must reach the same objects.
func TestResolveKeyForms(t *testing.T) {
	forms := []struct {
		name string
		f    func(stored string) string
	}{
		{"prefix-relative", func(s string) string { return strings.TrimPrefix(s, "pre/") }},
		{"prefix-included", func(s string) string { return s }},
		{"leading-slash", func(s string) string { return "/" + s }},
		{"leading-slash-relative", func(s string) string { return "/" + strings.TrimPrefix(s, "pre/") }},
		{"bucket-qualified", func(s string) string { return rvBucket + "/" + s }},
		{"url", func(s string) string { return "s3://" + rvBucket + "/" + s }},
		{"https-url", func(s string) string { return "https://" + rvBucket + ".s3.amazonaws.com/" + s }},
	}
	for _, shape := range []cargopack.Options{{FrameSize: 1 << 20}, {Direct: true}, {PlainTar: func(string) bool { return true }}} {
		for _, form := range forms {
			t.Run(form.name, func(t *testing.T) {
				dir := t.TempDir()
				src := rvSources()
				shape.Prefix = "pre"
				shape.KeyStyle = cargopack.PrefixIncluded
				res := rvPack(t, dir, src, shape)
				a, err := rvMutate(t, dir, res, func(m *manifest.Manifest) {
					m.Bucket = "some-other-bucket" // never used (cargoship#335)
					for i := range m.Chunks {
						m.Chunks[i].S3Key = form.f(m.Chunks[i].S3Key)
					}
					for i := range m.Files {
						m.Files[i].S3Key = form.f(m.Files[i].S3Key)
					}
				})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				rvCheckArchive(t, dir, a, src)
				if a.Info().Chunks != len(res.ObjectKeys) {
					t.Errorf("chunks %d, want %d", a.Info().Chunks, len(res.ObjectKeys))
				}
			})
		}
	}
}

// TestResolvePaths: hand-built direct-upload manifests with every path form.
func TestResolvePaths(t *testing.T) {
	tests := []struct {
		name, source string
		paths        []string
		keys         []string // in the same order as paths
		err          string   // substring of an expected error
	}{
		{name: "absolute", source: "/home/u/proj", paths: []string{"/home/u/proj/a.txt", "/home/u/proj/d/b.txt"}, keys: []string{"a.txt", "d/b.txt"}},
		{name: "source trailing slash", source: "/home/u/proj/", paths: []string{"/home/u/proj/a.txt"}, keys: []string{"a.txt"}},
		{name: "single file upload", source: "/home/u/file.bin", paths: []string{"/home/u/file.bin"}, keys: []string{"file.bin"}},
		{name: "not under source", source: "/home/u/proj", paths: []string{"/home/u/projX/a", "/etc/x"}, keys: []string{"home/u/projX/a", "etc/x"}},
		{name: "relative walk", source: "src", paths: []string{"src/a", "src/./b//c"}, keys: []string{"a", "b/c"}},
		{name: "windows", source: `C:\data`, paths: []string{`C:\data\x\y.txt`}, keys: []string{"x/y.txt"}},
		{name: "collision", source: "/s", paths: []string{"/s/a/b", "/s/a//b"}, err: `"/s/a//b"`},
		{name: "collision 2", source: "/s", paths: []string{"/s/x", "/other/../s/x"}, err: "unsafe"},
		{name: "listed twice", source: "/s", paths: []string{"/s/a", "/s/a"}, err: "more than once"},
		{name: "dotdot", source: "/s", paths: []string{"/s/../etc/passwd"}, err: "passwd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := rvManifest("u1")
			m.SourcePath = tc.source
			src := map[string][]byte{}
			for i, p := range tc.paths {
				data := rvText(uint64(i), 10+i)
				key := "uploads/u1/files/" + string(rune('a'+i))
				rvPut(t, dir, "pre/"+key, data)
				m.Files = append(m.Files, rvDirectFile(p, key, data))
				if tc.keys != nil {
					src[tc.keys[i]] = data
				}
			}
			mk := "pre/uploads/u1/manifest.json.gz"
			rvPutManifest(t, dir, mk, m)
			a, err := rvOpen(t, dir, mk, Options{Name: "arch"})
			if tc.err != "" {
				rvWantErr(t, err, mk, tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rvCheckArchive(t, dir, a, src)
			if !slices.Contains(a.Info().Shapes, "direct") {
				t.Errorf("shapes %v", a.Info().Shapes)
			}
		})
	}
}

// TestResolveCollisionNamesBoth checks the collision error names both paths.
func TestResolveCollisionNamesBoth(t *testing.T) {
	dir := t.TempDir()
	m := rvManifest("u1")
	for i, p := range []string{"/src/a/b", "/src/a//b"} {
		data := []byte{byte(i)}
		key := "uploads/u1/f" + string(rune('0'+i))
		rvPut(t, dir, "pre/"+key, data)
		m.Files = append(m.Files, rvDirectFile(p, key, data))
	}
	mk := "pre/uploads/u1/manifest.json.gz"
	rvPutManifest(t, dir, mk, m)
	_, err := rvOpen(t, dir, mk, Options{Name: "arch"})
	rvWantErr(t, err, mk, `"/src/a/b"`, `"/src/a//b"`, `"a/b"`)
	if !errors.Is(err, ErrInvalidTree) {
		t.Errorf("error %v does not wrap ErrInvalidTree", err)
	}
}

// TestResolveSplitErrors breaks a real split archive's part table in every
// way; each must fail naming the file and manifest, never serve.
func TestResolveSplitErrors(t *testing.T) {
	parts := func(m *manifest.Manifest, path string) []int {
		var out []int
		for i := range m.Files {
			if strings.HasSuffix(m.Files[i].Path, path) && m.Files[i].TotalParts > 1 {
				out = append(out, i)
			}
		}
		return out
	}
	const big = "big/large.dat" // 300000 bytes, 5 parts of 64 KiB
	tests := []struct {
		name   string
		mutate func(m *manifest.Manifest)
	}{
		{"missing part", func(m *manifest.Manifest) {
			p := parts(m, big)
			m.Files = slices.Delete(m.Files, p[2], p[2]+1)
		}},
		{"total_parts too high", func(m *manifest.Manifest) {
			for _, i := range parts(m, big) {
				m.Files[i].TotalParts++
			}
		}},
		{"repeated part index", func(m *manifest.Manifest) {
			p := parts(m, big)
			m.Files[p[1]].PartIndex = 2
		}},
		{"gap", func(m *manifest.Manifest) {
			p := parts(m, big)
			m.Files[p[1]].Offset++
			m.Files[p[1]].Length--
		}},
		{"overlap", func(m *manifest.Manifest) {
			p := parts(m, big)
			m.Files[p[1]].Offset--
		}},
		{"short", func(m *manifest.Manifest) {
			p := parts(m, big)
			m.Files[p[len(p)-1]].Length--
		}},
		{"size differs on a part", func(m *manifest.Manifest) {
			p := parts(m, big)
			m.Files[p[3]].Size++
		}},
		{"zero length part", func(m *manifest.Manifest) {
			p := parts(m, big)
			m.Files[p[4]].Length = 0
		}},
		{"split part marked duplicate", func(m *manifest.Manifest) {
			p := parts(m, big)
			m.Files[p[0]].IsDuplicate = true
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res := rvPack(t, dir, rvSources(), cargopack.Options{SplitSize: 64 << 10, FrameSize: 32 << 10})
			if n := len(parts(res.Manifest, big)); n != 5 {
				t.Fatalf("cargopack wrote %d parts, want 5", n)
			}
			_, err := rvMutate(t, dir, res, tc.mutate)
			rvWantErr(t, err, res.ManifestKey, big)
		})
	}
}

// TestResolveNonSplitLength: a file that is not split must have length 0 or
// its size.
func TestResolveNonSplitLength(t *testing.T) {
	dir := t.TempDir()
	res := rvPack(t, dir, rvSources(), cargopack.Options{FrameSize: 1 << 20})
	_, err := rvMutate(t, dir, res, func(m *manifest.Manifest) {
		for i := range m.Files {
			if strings.HasSuffix(m.Files[i].Path, "a.txt") {
				m.Files[i].Length = m.Files[i].Size - 1
			}
		}
	})
	rvWantErr(t, err, res.ManifestKey, "a.txt", "length")
}

func TestResolveDuplicates(t *testing.T) {
	same := rvText(9, 5000)
	src := map[string][]byte{"x/one": same, "x/two": same, "y/three": same, "other": rvRandom(1, 10), "more": rvText(3, 50)}
	dups := func(m *manifest.Manifest) []int {
		var out []int
		for i := range m.Files {
			if m.Files[i].IsDuplicate {
				out = append(out, i)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		mutate func(m *manifest.Manifest)
		err    []string // nil: must resolve
		warn   string
	}{
		{name: "as written", mutate: func(m *manifest.Manifest) {}},
		{name: "placeholder key", mutate: func(m *manifest.Manifest) {
			d := dups(m)[0]
			m.Files[d].S3Key, m.Files[d].ChunkID = "", -1
		}, err: []string{"never patched"}},
		{name: "placeholder chunk id", mutate: func(m *manifest.Manifest) {
			m.Files[dups(m)[0]].ChunkID = -1
		}, err: []string{"never patched"}},
		{name: "missing original", mutate: func(m *manifest.Manifest) {
			for _, d := range dups(m) {
				m.Files[d].DuplicateOfHash = strings.Repeat("ab", 32)
				m.Files[d].Checksum = strings.Repeat("ab", 32)
			}
		}, err: []string{"original", "not found"}},
		{name: "original deleted from the manifest", mutate: func(m *manifest.Manifest) {
			m.Files = slices.DeleteFunc(m.Files, func(f manifest.FileEntry) bool {
				return !f.IsDuplicate && strings.HasSuffix(f.Path, "/x/one")
			})
		}, err: []string{"not found"}},
		{name: "fallback by checksum", mutate: func(m *manifest.Manifest) {
			// the duplicate's s3_key names another chunk: the original is
			// still found by its checksum anywhere in the chain
			var other string
			for _, c := range m.Chunks {
				if c.S3Key != m.Files[dups(m)[0]].S3Key {
					other = c.S3Key
				}
			}
			if other == "" {
				panic("test needs two chunks")
			}
			m.Files[dups(m)[0]].S3Key = other
		}, warn: "same checksum"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res := rvPack(t, dir, src, cargopack.Options{Dedup: true, FrameSize: 4 << 10, ChunkSize: 2000})
			if len(dups(res.Manifest)) != 2 {
				t.Fatalf("cargopack wrote %d duplicates, want 2", len(dups(res.Manifest)))
			}
			a, err := rvMutate(t, dir, res, tc.mutate)
			if tc.err != nil {
				rvWantErr(t, err, res.ManifestKey, tc.err...)
				if !errors.Is(err, ErrInvalidTree) {
					t.Errorf("error %v does not wrap ErrInvalidTree", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rvCheckArchive(t, dir, a, src)
			if tc.warn != "" && !slices.ContainsFunc(a.Info().Warnings, func(w string) bool { return strings.Contains(w, tc.warn) }) {
				t.Errorf("warnings %q lack %q", a.Info().Warnings, tc.warn)
			}
			// The duplicates read their original's tar entry.
			for _, k := range []string{"x/two", "y/three"} {
				f, _ := a.Stat(k)
				e := a.fileExtents(index.Ordinal(f))
				if len(e) != 1 || !strings.HasSuffix(e[0].TarName, "/x/one") {
					t.Errorf("%s: extents %+v, want the original x/one", k, e)
				}
			}
		})
	}
}

// TestResolveMixedDirect: a file whose s3_key is in no chunks[] entry is a
// standalone object even when its key ends in .tar.zst (edge case 1).
func TestResolveMixedDirect(t *testing.T) {
	dir := t.TempDir()
	res := rvPack(t, dir, rvSources(), cargopack.Options{FrameSize: 1 << 20})
	data := rvText(77, 1234)
	rvPut(t, dir, "uploads/"+res.Manifest.UploadID+"/direct/user.tar.zst", data)
	a, err := rvMutate(t, dir, res, func(m *manifest.Manifest) {
		f := rvDirectFile(m.SourcePath+"/user.tar.zst", "uploads/"+m.UploadID+"/direct/user.tar.zst", data)
		m.Files = append(m.Files, f)
	})
	if err != nil {
		t.Fatal(err)
	}
	src := rvSources()
	src["user.tar.zst"] = data
	rvCheckArchive(t, dir, a, src)
	in := a.Info()
	if !slices.Contains(in.Shapes, "direct") || !slices.Contains(in.Shapes, "framed-zstd") {
		t.Errorf("shapes %v", in.Shapes)
	}
}

// TestResolveUnknownAlgorithm: checksums under an unknown algorithm are not
// used (never claimed as verified).
func TestResolveUnknownAlgorithm(t *testing.T) {
	dir := t.TempDir()
	src := rvSources()
	res := rvPack(t, dir, src, cargopack.Options{FrameSize: 16 << 10})
	a, err := rvMutate(t, dir, res, func(m *manifest.Manifest) { m.ChecksumAlgorithm = "blake3" })
	if err != nil {
		t.Fatal(err)
	}
	rvCheckArchive(t, dir, a, src)
	for k := range src {
		f, _ := a.Stat(k)
		if f.SHA256 != "" || !strings.HasPrefix(f.ETag, "wharf-") {
			t.Errorf("%s: SHA256 %q ETag %q under an unknown algorithm", k, f.SHA256, f.ETag)
		}
	}
	for ci := range a.tree.Chunks {
		for _, fr := range a.tree.Chunks[ci].Frames {
			if fr.HasSum {
				t.Fatalf("frame sum kept under an unknown algorithm")
			}
		}
	}
}

// TestResolveMissingS3Key: a non-duplicate file without s3_key is an error.
func TestResolveMissingS3Key(t *testing.T) {
	dir := t.TempDir()
	res := rvPack(t, dir, rvSources(), cargopack.Options{FrameSize: 1 << 20})
	_, err := rvMutate(t, dir, res, func(m *manifest.Manifest) {
		for i := range m.Files {
			if strings.HasSuffix(m.Files[i].Path, "/a.txt") {
				m.Files[i].S3Key = ""
			}
		}
	})
	rvWantErr(t, err, res.ManifestKey, "a.txt", "no s3_key")
}

// FuzzResolve feeds arbitrary manifest JSON (seeded with real cargopack
// manifests of every shape) through Open. Open must either fail or give a
// tree whose invariants hold: keys strictly sorted and found by Stat,
// extents tiling each file and pointing at valid chunks, offsets inside
// framed chunks' tar streams, and a full listing equal to the keys.
func FuzzResolve(f *testing.F) {
	dir := f.TempDir()
	small := map[string][]byte{"a": rvText(1, 3000), "d/b": rvText(2, 9000), "d/c": rvText(2, 9000), "e": {}}
	for i, opt := range []cargopack.Options{
		{FrameSize: 2048},
		{SplitSize: 4000, FrameSize: 2048},
		{Dedup: true},
		{Direct: true},
		{Version: "2.0", PlainTar: func(string) bool { return true }},
		{PreviousManifestID: "gone", DeletedPaths: []string{"x"}},
	} {
		opt.Prefix = "p"
		opt.UploadID = "u" + string(rune('0'+i))
		res := rvPack(f, dir, small, opt)
		js, err := json.Marshal(res.Manifest)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(js)
	}
	f.Fuzz(func(t *testing.T, js []byte) {
		d := t.TempDir()
		rvPut(t, d, "p/uploads/u9/manifest.json", js)
		a, err := rvOpen(t, d, "p/uploads/u9/manifest.json", Options{Limits: manifest.Limits{MaxFiles: 1000, MaxChunks: 100, MaxFrames: 1000}})
		if err != nil {
			if !strings.Contains(err.Error(), "p/uploads/u9/manifest.json") {
				t.Fatalf("error does not name the manifest: %v", err)
			}
			return
		}
		var keys []string
		for i := 0; i < a.Files(); i++ {
			f := a.tree.Idx.File(i)
			if i > 0 && f.Key <= keys[i-1] {
				t.Fatalf("keys out of order: %q after %q", f.Key, keys[i-1])
			}
			keys = append(keys, f.Key)
			if g, ok := a.Stat(f.Key); !ok || g != f {
				t.Fatalf("Stat(%q) = %+v, %v", f.Key, g, ok)
			}
			var at int64
			for _, e := range a.fileExtents(index.Ordinal(f)) {
				if e.Chunk < 0 || int(e.Chunk) >= len(a.tree.Chunks) || e.FileOff != at || e.Length < 0 {
					t.Fatalf("%s: bad extent %+v at %d", f.Key, e, at)
				}
				at += e.Length
				c := &a.tree.Chunks[e.Chunk]
				if c.Kind == chunkio.FramedZstd && e.Off >= 0 {
					last := c.Frames[len(c.Frames)-1]
					if e.Off+e.Length > last.UOff+last.USize {
						t.Fatalf("%s: extent past the frames of %s", f.Key, c.Key)
					}
				}
			}
			if at != f.Size {
				t.Fatalf("%s: extents cover %d of %d", f.Key, at, f.Size)
			}
		}
		var listed []string
		for _, e := range a.List(ListParams{MaxKeys: len(keys) + 1}).Entries {
			listed = append(listed, e.Name())
		}
		if !slices.Equal(listed, keys) {
			t.Fatalf("listing %q != keys %q", listed, keys)
		}
	})
}

// TestResolveKeysConfined: a manifest cannot name objects outside its own
// upload tree (the part of the manifest key before "/uploads/"), however
// it spells the key: such an archive is refused at open, naming the key,
// unless the operator allowed that prefix.
func TestResolveKeysConfined(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("another tenant's secret\n")
	rvPut(t, dir, "other-tenant/secret.txt", secret)
	// The manifest's own prefix field is the lever: emptied, keys resolve
	// from the bucket root. (Its chunks are rewritten to the
	// prefix-included form so that only the leak is out of place.)
	rootKeys := func(m *manifest.Manifest) {
		for i := range m.Chunks {
			m.Chunks[i].S3Key = m.Prefix + "/" + strings.TrimPrefix(m.Chunks[i].S3Key, "/")
		}
		for i := range m.Files {
			m.Files[i].S3Key = m.Prefix + "/" + strings.TrimPrefix(m.Files[i].S3Key, "/")
		}
		m.Prefix = ""
	}
	for _, tc := range []struct {
		name   string
		mutate func(m *manifest.Manifest)
	}{
		{"direct file, manifest prefix emptied", func(m *manifest.Manifest) {
			rootKeys(m)
			m.Files = append(m.Files, rvDirectFile(m.SourcePath+"/leak.txt", "other-tenant/secret.txt", secret))
		}},
		{"direct file, s3:// URL key", func(m *manifest.Manifest) {
			rootKeys(m)
			m.Files = append(m.Files, rvDirectFile(m.SourcePath+"/leak.txt", "s3://"+rvBucket+"/other-tenant/secret.txt", secret))
		}},
		{"direct file, bucket-qualified key", func(m *manifest.Manifest) {
			rootKeys(m)
			m.Files = append(m.Files, rvDirectFile(m.SourcePath+"/leak.txt", rvBucket+"/other-tenant/secret.txt", secret))
		}},
		{"chunk key", func(m *manifest.Manifest) {
			rootKeys(m)
			m.Chunks[0].S3Key = "other-tenant/secret.txt"
			for i := range m.Files {
				m.Files[i].S3Key = m.Chunks[0].S3Key
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := rvPack(t, dir, rvSources(), cargopack.Options{FrameSize: 1 << 20, Prefix: "tenant-a", UploadID: "20260101-conf"})
			_, err := rvMutate(t, dir, res, tc.mutate)
			if !errors.Is(err, ErrInvalidTree) || !strings.Contains(err.Error(), `"other-tenant/secret.txt"`) || !strings.Contains(err.Error(), "tenant-a") {
				t.Fatalf("open: %v, want a refusal naming the key and the archive's prefix", err)
			}
			if tc.name == "chunk key" {
				return
			}
			// Allowed explicitly: served.
			a, err := rvOpen(t, dir, res.ManifestKey, Options{Name: "arch", AllowKeyPrefixes: []string{"other-tenant/"}})
			if err != nil {
				t.Fatalf("open with the prefix allowed: %v", err)
			}
			defer a.Close()
			f, ok := a.Stat("leak.txt")
			if !ok {
				t.Fatal("leak.txt not served with its prefix allowed")
			}
			if b := vReadAll(t, a, f, 0, f.Size); string(b) != string(secret) {
				t.Fatalf("served %q", b)
			}
		})
	}
}
