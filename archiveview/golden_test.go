package archiveview

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// The golden index file: a fixed archive, written with WriteIndex, whose
// bytes are pinned in internal/index/testdata. It proves that the index
// file format does not change by accident: TestGoldenIndex rebuilds the
// archive and compares every byte. A deliberate format change bumps the
// format version and regenerates the file with -update-golden.

var updateGolden = flag.Bool("update-golden", false, "rewrite the pinned golden index file")

// goldenIndexPath is where the golden index file is pinned.
const goldenIndexPath = "internal/index/testdata/golden.widx"

// goldenManifestKey is the newest manifest of the golden archive.
const goldenManifestKey = "g/uploads/20250305-00000002/manifest.json.gz"

// goldenFiles is the golden archive's tree as a client sees it: key ->
// bytes (a.txt replaced by the second upload, z/gone.csv deleted by it).
func goldenFiles() (base, delta, want map[string][]byte) {
	base = map[string][]byte{
		"a.txt":          rvText(101, 3000),
		"dup.txt":        rvText(101, 3000), // a duplicate of the first a.txt
		"dir/split.bin":  rvRandom(102, 40000),
		"dir/sub/c.txt":  rvText(103, 5000),
		"dir/sub/empty":  {},
		"direct/raw.bin": rvRandom(104, 2000),
		"z/gone.csv":     rvText(105, 10),
		"space/é ü.txt":  rvText(106, 100),
	}
	delta = map[string][]byte{
		"a.txt":        rvText(107, 1234),
		"plain/p.dat":  rvRandom(108, 999),
		"plain/q.json": rvText(109, 700),
	}
	want = map[string][]byte{}
	for k, v := range base {
		want[k] = v
	}
	for k, v := range delta {
		want[k] = v
	}
	delete(want, "z/gone.csv")
	return base, delta, want
}

// goldenBuild packs the golden archive into dir (every object's mtime
// fixed, so the FileStore's ETags are too) and returns its index file.
func goldenBuild(t testing.TB, dir string) []byte {
	t.Helper()
	base, delta, _ := goldenFiles()
	ctype := func(rel string) map[string]string {
		if strings.HasSuffix(rel, ".txt") {
			return map[string]string{"magika_mime": "text/plain"}
		}
		return nil
	}
	rvPack(t, dir, base, cargopack.Options{Prefix: "g", UploadID: "20250304-00000001", Hostname: "golden",
		FrameSize: 16 << 10, SplitSize: 15000, Dedup: true, ContentHash: true, Metadata: ctype,
		DirectFor: func(rel string) bool { return strings.HasPrefix(rel, "direct/") }})
	rvPack(t, dir, delta, cargopack.Options{Prefix: "g", UploadID: "20250305-00000002", Hostname: "golden",
		PlainTar: func(string) bool { return true }, Pre492: true,
		PreviousManifestID: "20250304-00000001", SyncType: "incremental", DeletedPaths: []string{"z/gone.csv"}})
	mt := time.Date(2025, 3, 6, 7, 8, 9, 0, time.UTC)
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, mt, mt)
	}); err != nil {
		t.Fatal(err)
	}
	a, err := BuildIndex(context.Background(), backend.NewFileStore(dir), rvBucket, goldenManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.prov == nil || len(a.prov.Sources) == 0 {
		t.Fatal("golden archive: no provenance recorded")
	}
	// One read of a file without archive_offset: the offsets the tar walk
	// learned are recorded too. (Verified units are not pinned: chunkio
	// lists them in map order.)
	f, _ := a.Stat("plain/q.json")
	if got := hoRead(context.Background(), a, f, 0, f.Size, false); got.err != nil {
		t.Fatal(got.err)
	}
	if a.LearnedOffsets() == 0 {
		t.Fatal("golden archive: no offsets learned by the read")
	}
	var buf bytes.Buffer
	if err := a.WriteIndex(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGoldenIndex rebuilds the golden archive and compares its index file
// with the pinned one byte for byte, then serves the pinned file and checks
// what Stat, List and reads answer.
func TestGoldenIndex(t *testing.T) {
	dir := t.TempDir()
	got := goldenBuild(t, dir)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(goldenIndexPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenIndexPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pinned, err := os.ReadFile(goldenIndexPath)
	if err != nil {
		t.Fatalf("pinned golden index: %v (regenerate with -update-golden only for a new format version)", err)
	}
	if !bytes.Equal(got, pinned) {
		at := 0
		for at < min(len(got), len(pinned)) && got[at] == pinned[at] {
			at++
		}
		t.Fatalf("index file of the golden archive differs from %s: %d vs %d bytes, first difference at byte %d",
			goldenIndexPath, len(got), len(pinned), at)
	}

	a, err := OpenIndexFile(context.Background(), backend.NewFileStore(dir), goldenIndexPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, _, want := goldenFiles()
	piReadAll(t, a, want, rand.New(rand.NewPCG(1, 2)))
	if a.Files() != len(want) {
		t.Errorf("Files() = %d, want %d", a.Files(), len(want))
	}
	if v, ok := a.DeleteMarker("z/gone.csv"); !ok || v != "20250305-00000002" {
		t.Errorf("DeleteMarker(z/gone.csv) = %q, %v", v, ok)
	}
	if _, ok := a.Stat("z/gone.csv"); ok {
		t.Error("Stat(z/gone.csv): a deleted key is served")
	}
	for key, ver := range map[string]string{"a.txt": "20250305-00000002", "dup.txt": "20250304-00000001", "plain/p.dat": "20250305-00000002"} {
		f, ok := a.Stat(key)
		if !ok || f.VersionID != ver {
			t.Errorf("Stat(%s): version %q, ok %v; want %q", key, f.VersionID, ok, ver)
		}
	}
	if f, _ := a.Stat("dir/sub/c.txt"); f.ContentType != "text/plain" || len(f.ETag) != 32 {
		t.Errorf("Stat(dir/sub/c.txt): content type %q, ETag %q (want text/plain and the MD5)", f.ContentType, f.ETag)
	}
	res := a.List(ListParams{Delimiter: "/", MaxKeys: 100})
	var names []string
	for _, e := range res.Entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, " "), "a.txt dir/ direct/ dup.txt plain/ space/"; got != want || res.Truncated {
		t.Errorf("List(/) = %q (truncated %v), want %q", got, res.Truncated, want)
	}
	res = a.List(ListParams{Prefix: "dir/", After: "dir/split.bin", MaxKeys: 1})
	if len(res.Entries) != 1 || res.Entries[0].Name() != "dir/sub/c.txt" || !res.Truncated {
		t.Errorf("List(dir/ after split.bin, 1) = %+v", res)
	}
}
