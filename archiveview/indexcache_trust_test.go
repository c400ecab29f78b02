package archiveview_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// Issue 20 item 3: whoever can write a shared index prefix must not be able
// to choose what replicas serve. These tests forge index objects the way
// such a writer can (valid index files, re-hashed, with provenance that
// matches the manifest's public HEAD values) and check that a replica
// holding the secret refuses each one, reads the manifest, serves the right
// bytes and replaces the object; and, to show the finding, that a replica
// trusting the prefix's writers (no secret) serves the forgery.

const (
	trBucket = "bkt"
	trPrefix = "wharf-index/"
)

// trPrivate is B's private object, as long as A's a.txt.
var trPrivate = bytes.Repeat([]byte("EVIL private a\n"), 280)

var trTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

type trEnv struct {
	dir    string
	key    string // archive A's manifest
	keyB   string // archive B's manifest (another upload: a private bucket)
	files  map[string][]byte
	secret *archiveview.IndexSecret
}

func trSecret(t testing.TB, seed byte) *archiveview.IndexSecret {
	t.Helper()
	s, err := archiveview.NewIndexSecret(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// trSetup packs two uploads; A's manifest is rewritten as a stored (level
// 0) gzip, so a forged manifest of the same JSON length has the same size
// (and, with the same mtime, the same FileStore ETag).
func trSetup(t *testing.T) *trEnv {
	t.Helper()
	dir := t.TempDir()
	e := &trEnv{dir: dir, secret: trSecret(t, 7), files: map[string][]byte{
		"a.txt": bytes.Repeat([]byte("AAAA public a\n"), 300),
		"b.txt": bytes.Repeat([]byte("BBBB public b\n"), 300),
		"d/c":   []byte("c"),
	}}
	pack := func(id string, files map[string][]byte) string {
		res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, trTime),
			cargopack.Options{Bucket: trBucket, Prefix: "pre", UploadID: id, FrameSize: 4096, Created: trTime})
		if err != nil {
			t.Fatal(err)
		}
		return res.ManifestKey
	}
	e.key = pack("up-aaaa", e.files)
	e.keyB = pack("up-bbbb", map[string][]byte{"private.bin": bytes.Repeat([]byte("secret "), 500)})
	// An object of upload B no key granted only A may read.
	p := filepath.Join(dir, trBucket, "pre", "uploads", "up-bbbb", "private", "secret-data.bin")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, trPrivate, 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeManifest(t, dir, e.manifestJSON(t))
	return e
}

func (e *trEnv) manifestPath(dir string) string {
	return filepath.Join(dir, trBucket, filepath.FromSlash(e.key))
}

func (e *trEnv) manifestJSON(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(e.manifestPath(e.dir))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// writeManifest stores js as A's manifest in dir (stored gzip, fixed mtime).
func (e *trEnv) writeManifest(t *testing.T, dir string, js []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	zw.Write(js)
	zw.Close()
	p := e.manifestPath(dir)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, trTime, trTime); err != nil {
		t.Fatal(err)
	}
}

// name is the shared cache's name of A's index (for A's manifest as it is).
func (e *trEnv) name(t *testing.T, key string) archiveview.IndexName {
	t.Helper()
	info, err := backend.NewFileStore(e.dir).Stat(context.Background(), trBucket, key)
	if err != nil {
		t.Fatal(err)
	}
	return archiveview.IndexName{Bucket: trBucket, ManifestKey: key, ETag: info.ETag}
}

func (e *trEnv) objectPath(n archiveview.IndexName) string {
	return filepath.Join(e.dir, trBucket, filepath.FromSlash(trPrefix+n.String()))
}

func (e *trEnv) putObject(t *testing.T, n archiveview.IndexName, data []byte) {
	t.Helper()
	p := e.objectPath(n)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replica opens key with the shared cache (secret nil: trusting the
// prefix's writers) and returns the archive, its manifest GETs and logs.
func (e *trEnv) replica(t *testing.T, key string, secret *archiveview.IndexSecret) (*archiveview.Archive, int, string) {
	t.Helper()
	var logs bytes.Buffer
	f := faults.NewFaulty(backend.NewFileStore(e.dir), faults.FaultConfig{})
	c := archiveview.StoreIndexCache{Store: backend.NewFileStore(e.dir), Bucket: trBucket, Prefix: trPrefix, Spool: t.TempDir(), Secret: secret}
	a, err := archiveview.Open(context.Background(), f, trBucket, key, archiveview.Options{Name: "rep", IndexCache: c, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	gets := 0
	for _, r := range f.Log() {
		if r.Op == "get" && strings.HasSuffix(r.Key, "manifest.json.gz") {
			gets++
		}
	}
	return a, gets, logs.String()
}

func trRead(t *testing.T, a *archiveview.Archive, key string) []byte {
	t.Helper()
	fi, ok := a.Stat(key)
	if !ok {
		t.Fatalf("%s: not in the archive", key)
	}
	r, err := a.Open(context.Background(), fi, 0, fi.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return b
}

// checkServesTruth: every file of A with its own bytes, nothing else.
func (e *trEnv) checkServesTruth(t *testing.T, a *archiveview.Archive) {
	t.Helper()
	if a.Files() != len(e.files) {
		t.Errorf("%d files, want %d", a.Files(), len(e.files))
	}
	for k, want := range e.files {
		if got := trRead(t, a, k); !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, not its own (%.20q)", k, len(got), got)
		}
	}
}

// indexBytes builds A's index from the store at dir (the forger's copy).
func trIndexBytes(t *testing.T, dir, key string) []byte {
	t.Helper()
	a, err := archiveview.BuildIndex(context.Background(), backend.NewFileStore(dir), trBucket, key, archiveview.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var buf bytes.Buffer
	if err := a.WriteIndex(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// trReseal recomputes the tree hash trailer of an index file (the format
// is public: sha256 over the sha256 of each 8 MiB block of everything
// before the 32-byte trailer), as a forger does after editing bytes.
func trReseal(file []byte) []byte {
	body := file[:len(file)-32]
	var sums []byte
	for off := 0; off < len(body); off += 8 << 20 {
		s := sha256.Sum256(body[off:min(len(body), off+8<<20)])
		sums = append(sums, s[:]...)
	}
	s := sha256.Sum256(sums)
	return append(bytes.Clone(body), s[:]...)
}

// swapForgery: A's index built from a manifest whose a.txt is another
// upload's private object (B's, the same size, with its checksum): the
// swapped file and the grant crossing in one, of the same size and mtime as the real manifest, so the
// index's recorded key, ETag, size and mtime all match the real manifest's
// HEAD, and every byte served verifies against the forged checksum.
func (e *trEnv) swapForgery(t *testing.T) []byte {
	t.Helper()
	forger := t.TempDir()
	if err := os.CopyFS(filepath.Join(forger, trBucket), os.DirFS(filepath.Join(e.dir, trBucket))); err != nil {
		t.Fatal(err)
	}
	js := e.manifestJSON(t)
	sumA := sha256.Sum256(e.files["a.txt"])
	sumB := sha256.Sum256(trPrivate)
	forged := bytes.Replace(js, []byte(`"s3_key": "uploads/up-aaaa/shard-0/chunk-0.tar.zst",
      "archive_offset": 512,
      "checksum": "`+hex.EncodeToString(sumA[:])), []byte(`"s3_key": "uploads/up-bbbb/private/secret-data.bin",
      "archive_offset": 512,
      "checksum": "`+hex.EncodeToString(sumB[:])), 1)
	if bytes.Equal(forged, js) || len(forged) != len(js) {
		t.Fatalf("the manifest's a.txt entry is not where the forger expects it:\n%s", js)
	}
	e.writeManifest(t, forger, forged)
	real, _ := backend.NewFileStore(e.dir).Stat(context.Background(), trBucket, e.key)
	fake, _ := backend.NewFileStore(forger).Stat(context.Background(), trBucket, e.key)
	if real.ETag != fake.ETag || real.Size != fake.Size {
		t.Fatalf("forged manifest stats %+v, real %+v", fake, real)
	}
	return trIndexBytes(t, forger, e.key)
}

// TestSharedIndexForgedSwapRefused: the swapped-files forgery is served by
// a replica that trusts the prefix's writers (the finding), and refused by
// one holding the secret, which reads the manifest, serves each file's own
// bytes, and replaces the object with its own authenticated index (the
// next replica then opens from it with no manifest GET).
func TestSharedIndexForgedSwapRefused(t *testing.T) {
	e := trSetup(t)
	forged := e.swapForgery(t)
	name := e.name(t, e.key)

	e.putObject(t, name, forged)
	a, gets, logs := e.replica(t, e.key, nil)
	if gets != 0 || !bytes.Equal(trRead(t, a, "a.txt"), bytes.Repeat([]byte("EVIL private a\n"), 280)) {
		t.Fatalf("without a secret the forgery was not served (%d manifest GETs; logs %s): the test forges nothing", gets, logs)
	}

	e.putObject(t, name, forged)
	b, gets, logs := e.replica(t, e.key, e.secret)
	if gets != 1 || !strings.Contains(logs, "index object not authenticated") || !strings.Contains(logs, `"outcome":"damaged, replaced"`) {
		t.Fatalf("forged object: %d manifest GETs, logs %s", gets, logs)
	}
	e.checkServesTruth(t, b)
	c, gets, logs := e.replica(t, e.key, e.secret)
	if gets != 0 {
		t.Fatalf("after the replacement: %d manifest GETs (logs %s)", gets, logs)
	}
	e.checkServesTruth(t, c)

	// The forgery with a trailer MACed under another secret: refused too.
	other := archiveview.StoreIndexCache{Store: backend.NewFileStore(t.TempDir()), Bucket: trBucket, Spool: t.TempDir(), Secret: trSecret(t, 9)}
	e.putObject(t, name, trMACed(t, other, name, forged))
	d, gets, logs := e.replica(t, e.key, e.secret)
	if gets != 1 || !strings.Contains(logs, "MACed with another secret") {
		t.Fatalf("forgery MACed with another secret: %d manifest GETs, logs %s", gets, logs)
	}
	e.checkServesTruth(t, d)
}

// trMACed is data as c would publish it under name (with c's trailer).
func trMACed(t *testing.T, c archiveview.StoreIndexCache, name archiveview.IndexName, data []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, trBucket), 0o755); err != nil {
		t.Fatal(err)
	}
	c.Store, c.Prefix = backend.NewFileStore(dir), ""
	p := filepath.Join(t.TempDir(), "x.widx")
	os.WriteFile(p, data, 0o600)
	if _, err := c.Publish(context.Background(), name, p); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(dir, trBucket, name.String()))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSharedIndexCrossingAndRollbackRefused: authentic objects moved to
// another name. Upload B's index (a private bucket's) put under A's name,
// and A's index of the previous manifest version put under the current
// version's name (a rollback): the MAC covers the bucket, manifest key and
// manifest ETag, so each is refused, replaced, and A's current files are
// served.
func TestSharedIndexCrossingAndRollbackRefused(t *testing.T) {
	e := trSetup(t)
	cache := archiveview.StoreIndexCache{Store: backend.NewFileStore(e.dir), Bucket: trBucket, Prefix: trPrefix, Spool: t.TempDir(), Secret: e.secret}
	nameB := e.name(t, e.keyB)
	e.replica(t, e.keyB, e.secret) // publishes B's authentic object
	objB, err := os.ReadFile(e.objectPath(nameB))
	if err != nil {
		t.Fatal(err)
	}
	name := e.name(t, e.key)
	e.putObject(t, name, objB)
	a, gets, logs := e.replica(t, e.key, e.secret)
	if gets != 1 || !strings.Contains(logs, "the MAC does not match") {
		t.Fatalf("B's object under A's name: %d manifest GETs, logs %s", gets, logs)
	}
	e.checkServesTruth(t, a)
	if _, ok := a.Stat("private.bin"); ok {
		t.Error("A serves B's private file")
	}

	// Rollback: the authentic object of A's first version, after A's
	// manifest changed, put under the new version's name.
	objV1, err := os.ReadFile(e.objectPath(name))
	if err != nil {
		t.Fatal(err)
	}
	js := e.manifestJSON(t)
	e.files["a.txt"] = bytes.Repeat([]byte("AAAA version 2\n"), 300)
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(e.dir), cargopack.FromMap(e.files, trTime),
		cargopack.Options{Bucket: trBucket, Prefix: "pre", UploadID: "up-aaaa", FrameSize: 4096, Created: trTime.Add(time.Hour)})
	if err != nil || res.ManifestKey != e.key {
		t.Fatalf("second version: %v (key %s)", err, res.ManifestKey)
	}
	if bytes.Equal(js, e.manifestJSON(t)) {
		t.Fatal("the manifest did not change")
	}
	name2 := e.name(t, e.key)
	if name2 == name {
		t.Fatal("the manifest's ETag did not change")
	}
	e.putObject(t, name2, objV1)
	b, gets, logs := e.replica(t, e.key, e.secret)
	if gets != 1 || !strings.Contains(logs, "the MAC does not match") || !strings.Contains(logs, `"outcome":"damaged, replaced"`) {
		t.Fatalf("rollback: %d manifest GETs, logs %s", gets, logs)
	}
	e.checkServesTruth(t, b)
	if _, _, err := cache.Fetch(context.Background(), name2); err != nil {
		t.Errorf("the replacement does not verify: %v", err)
	}
}

// TestSharedIndexDotDotKeyRefused: a re-hashed index whose key table
// lists "../aa" (a key recursive downloaders join to their target
// directory) is refused by the MAC before the decoder sees a byte, and
// replaced.
func TestSharedIndexDotDotKeyRefused(t *testing.T) {
	e := trSetup(t)
	good := trIndexBytes(t, e.dir, e.key)
	forged := trReseal(bytes.ReplaceAll(good, []byte("a.txt"), []byte("../aa")))
	if bytes.Equal(forged, good) {
		t.Fatal("no a.txt in the index to rename")
	}
	name := e.name(t, e.key)
	e.putObject(t, name, forged)
	a, gets, logs := e.replica(t, e.key, e.secret)
	if gets != 1 || !strings.Contains(logs, "carries no MAC") || !strings.Contains(logs, `"outcome":"damaged, replaced"`) {
		t.Fatalf("'..' forgery: %d manifest GETs, logs %s", gets, logs)
	}
	if _, ok := a.Stat("../aa"); ok {
		t.Error(`"../aa" served`)
	}
	e.checkServesTruth(t, a)
	// The same bytes with a MAC of another secret.
	other := archiveview.StoreIndexCache{Bucket: trBucket, Spool: t.TempDir(), Secret: trSecret(t, 1)}
	e.putObject(t, name, trMACed(t, other, name, forged))
	b, gets, _ := e.replica(t, e.key, e.secret)
	if gets != 1 {
		t.Fatalf("'..' forgery MACed with another secret: %d manifest GETs", gets)
	}
	e.checkServesTruth(t, b)
}

// TestSharedIndexPublishedUnderReadETag: a replica whose HEAD of the
// manifest failed (a throttled store) still builds the index from the
// manifest it read, and publishes it under that manifest's ETag: the name
// the next replica looks up, which then loads it with no manifest GET
// (the old code published it under the name of an empty ETag, which no
// replica with a working store ever fetches).
func TestSharedIndexPublishedUnderReadETag(t *testing.T) {
	e := trSetup(t)
	f := faults.NewFaulty(backend.NewFileStore(e.dir), faults.FaultConfig{})
	f.SetHook(func(r faults.Request) faults.Fault {
		if r.Op == "stat" && r.Key == e.key {
			return faults.Fault{Kind: faults.FaultError}
		}
		return faults.Fault{}
	})
	c := archiveview.StoreIndexCache{Store: backend.NewFileStore(e.dir), Bucket: trBucket, Prefix: trPrefix, Spool: t.TempDir(), Secret: e.secret}
	a, err := archiveview.Open(context.Background(), f, trBucket, e.key, archiveview.Options{Name: "rep", IndexCache: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	e.checkServesTruth(t, a)
	if _, _, err := c.Fetch(context.Background(), e.name(t, e.key)); err != nil {
		t.Errorf("no index under the manifest's ETag: %v", err)
	}
	b, gets, logs := e.replica(t, e.key, e.secret)
	if gets != 0 {
		t.Fatalf("the next replica: %d manifest GETs, want 0; logs %s", gets, logs)
	}
	e.checkServesTruth(t, b)
}
