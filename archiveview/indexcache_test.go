package archiveview

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestStoreIndexCacheReplicas: replicas sharing an index cache in the
// backing store. The first to open an archive builds its index from the
// manifest and publishes it; the next loads it and never GETs a manifest
// (HEADs only), serving the same bytes. A damaged or foreign object under
// the name is ignored (logged), the archive is read from its manifest, and
// the object is replaced (issue 20 item 12; it was kept forever before).
func TestStoreIndexCacheReplicas(t *testing.T) {
	dir, key, want := piSetup(t, piShape{opt: cargopack.Options{FrameSize: 16 << 10}})
	cache := func(spool string) StoreIndexCache {
		return StoreIndexCache{Store: backend.NewFileStore(dir), Bucket: rvBucket, Prefix: "wharf-index/", Spool: spool}
	}
	replica := func(t *testing.T, logs *bytes.Buffer) (*Archive, *faults.Faulty) {
		t.Helper()
		f := piCountingStore(dir)
		a, err := Open(context.Background(), f, rvBucket, key, Options{Name: "shared", IndexCache: cache(t.TempDir()),
			Logger: zerolog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a, f
	}
	manifestGETs := func(f *faults.Faulty) int {
		n := 0
		for _, r := range f.Log() {
			if r.Op == "get" && strings.HasSuffix(r.Key, "manifest.json.gz") {
				n++
			}
		}
		return n
	}

	var logs bytes.Buffer
	a, f1 := replica(t, &logs)
	if manifestGETs(f1) != 1 || !strings.Contains(logs.String(), "index cache: published") {
		t.Fatalf("first replica: %d manifest GETs, logs %s", manifestGETs(f1), logs.String())
	}
	objs, _ := filepath.Glob(filepath.Join(dir, rvBucket, "wharf-index", "*.widx"))
	if len(objs) != 1 {
		t.Fatalf("published objects: %v", objs)
	}
	first, _ := os.ReadFile(objs[0])

	logs.Reset()
	b, f2 := replica(t, &logs)
	if n := manifestGETs(f2); n != 0 || !strings.Contains(logs.String(), "opened from index cache") {
		t.Fatalf("second replica made %d manifest GETs (logs %s)", n, logs.String())
	}
	// One HEAD of the manifest: the one naming the shared file also
	// serves the freshness check.
	manifestHEADs := 0
	for _, r := range f2.Log() {
		if r.Op == "stat" && r.Key == key {
			manifestHEADs++
		}
	}
	if manifestHEADs != 1 {
		t.Errorf("second replica: %d HEADs of the manifest, want 1", manifestHEADs)
	}
	piReadAll(t, b, want, rand.New(rand.NewPCG(1, 2)))
	piReadAll(t, a, want, rand.New(rand.NewPCG(1, 2)))

	// A damaged object: ignored, logged; the replica reads the manifest.
	damaged := bytes.Clone(first)
	damaged[len(damaged)/2] ^= 0x10
	if err := os.WriteFile(objs[0], damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	c, f3 := replica(t, &logs)
	if manifestGETs(f3) != 1 || !strings.Contains(logs.String(), "damaged or foreign") {
		t.Fatalf("damaged shared index: %d manifest GETs, logs %s", manifestGETs(f3), logs.String())
	}
	piReadAll(t, c, want, rand.New(rand.NewPCG(1, 2)))
	// Issue 20 item 12: the damaged object is replaced (conditional on its
	// ETag), so the next replica opens from the cache again.
	if got, _ := os.ReadFile(objs[0]); !bytes.Equal(got, first) || !strings.Contains(logs.String(), `"outcome":"damaged, replaced"`) {
		t.Errorf("the damaged object was not replaced with the index (logs %s)", logs.String())
	}
	logs.Reset()
	if _, f := replica(t, &logs); manifestGETs(f) != 0 {
		t.Errorf("after the replacement: %d manifest GETs, want 0 (logs %s)", manifestGETs(f), logs.String())
	}

	// A foreign object: another archive's valid index under this name.
	dir2, key2, _ := piSetup(t, piShape{opt: cargopack.Options{FrameSize: 32 << 10}})
	other, err := BuildIndex(context.Background(), backend.NewFileStore(dir2), rvBucket, key2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := other.WriteIndex(&buf); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if err := os.WriteFile(objs[0], buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	d, f4 := replica(t, &logs)
	if manifestGETs(f4) != 1 {
		t.Fatalf("foreign shared index: %d manifest GETs, logs %s", manifestGETs(f4), logs.String())
	}
	piReadAll(t, d, want, rand.New(rand.NewPCG(1, 2)))
	if got, _ := os.ReadFile(objs[0]); !bytes.Equal(got, first) {
		t.Error("the foreign object was not replaced")
	}
}

// TestStoreIndexCacheThroughInstrument (issue 21): the shared index cache
// over a wrapped store (Instrument over FileStore, as wharf serve wraps
// its store for metrics) still publishes, and still replaces a damaged
// object: the capabilities are asked with backend.AsPutter and
// AsMatchPutter, which see through the wrapper.
func TestStoreIndexCacheThroughInstrument(t *testing.T) {
	dir, key, want := piSetup(t, piShape{opt: cargopack.Options{FrameSize: 16 << 10}})
	store := backend.Instrument(backend.NewFileStore(dir), backend.NewMetrics(prometheus.NewRegistry()))
	open := func(t *testing.T, logs *bytes.Buffer) *Archive {
		t.Helper()
		a, err := Open(context.Background(), store, rvBucket, key, Options{Name: "shared", Logger: zerolog.New(logs),
			IndexCache: StoreIndexCache{Store: store, Bucket: rvBucket, Prefix: "wharf-index/", Spool: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	var logs bytes.Buffer
	piReadAll(t, open(t, &logs), want, rand.New(rand.NewPCG(3, 4)))
	objs, _ := filepath.Glob(filepath.Join(dir, rvBucket, "wharf-index", "*.widx"))
	if len(objs) != 1 || !strings.Contains(logs.String(), "index cache: published") {
		t.Fatalf("published objects %v, logs %s", objs, logs.String())
	}
	first, _ := os.ReadFile(objs[0])
	damaged := bytes.Clone(first)
	damaged[len(damaged)/3] ^= 0x04
	if err := os.WriteFile(objs[0], damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	piReadAll(t, open(t, &logs), want, rand.New(rand.NewPCG(3, 4)))
	if got, _ := os.ReadFile(objs[0]); !bytes.Equal(got, first) || !strings.Contains(logs.String(), `"outcome":"damaged, replaced"`) {
		t.Errorf("the damaged object was not replaced through the wrapper (logs %s)", logs.String())
	}
}

// TestStoreIndexCacheStaleAncestorReplaced: a shared index of a chain
// whose ancestor changed since (here a gzip manifest appears for it, the
// candidate tried first) stays under the top manifest's name, whose ETag
// did not change. The replica that finds it stale rebuilds and replaces
// it (conditional on its ETag), so the next replica loads the fresh one
// with no manifest GET. The old code kept the stale object
// (AlreadyValid): every replica re-read every manifest at every open.
func TestStoreIndexCacheStaleAncestorReplaced(t *testing.T) {
	dir := t.TempDir()
	rvPack(t, dir, map[string][]byte{"a.txt": rvText(1, 3000), "b.txt": rvText(2, 500)},
		cargopack.Options{Prefix: "c", UploadID: "20250304-00000001", PlainManifest: true, FrameSize: 16 << 10})
	res := rvPack(t, dir, map[string][]byte{"n.txt": rvText(3, 100)}, cargopack.Options{Prefix: "c", UploadID: "20250305-00000002",
		FrameSize: 16 << 10, PreviousManifestID: "20250304-00000001", SyncType: "incremental"})
	secret, err := NewIndexSecret(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	open := func() (*Archive, int64) {
		t.Helper()
		f := piCountingStore(dir)
		c := StoreIndexCache{Store: backend.NewFileStore(dir), Bucket: rvBucket, Prefix: "idx/", Spool: t.TempDir(), Secret: secret}
		a, err := Open(context.Background(), f, rvBucket, res.ManifestKey, Options{IndexCache: c})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a, f.Requests("get")
	}
	open()
	if _, gets := open(); gets != 0 {
		t.Fatalf("second replica: %d GETs, want 0", gets)
	}
	repl := rvPack(t, t.TempDir(), map[string][]byte{"only.txt": rvText(4, 10)},
		cargopack.Options{Prefix: "c", UploadID: "20250304-00000001", FrameSize: 16 << 10})
	rvPutManifest(t, dir, "c/uploads/20250304-00000001/manifest.json.gz", repl.Manifest)
	a, gets := open()
	if gets == 0 {
		t.Fatal("the new ancestor manifest did not invalidate the shared index")
	}
	if _, ok := a.Stat("only.txt"); !ok {
		t.Fatal("the rebuilt tree does not come from the new ancestor manifest")
	}
	b, gets := open()
	if gets != 0 {
		t.Errorf("after the rebuild: %d GETs, want 0 (the stale shared index was kept)", gets)
	}
	if _, ok := b.Stat("only.txt"); !ok {
		t.Error("the next replica does not serve the new ancestor's tree")
	}
}

// TestStoreIndexCacheAllowedPrefixKept: an archive whose direct object
// lies under a prefix the operator allowed (Options.AllowKeyPrefixes, as
// the catalog's history versions use) publishes an index that a second
// Publish finds valid and keeps. The old code checked the object with no
// prefix allowed, judged it damaged and replaced it at every conflicting
// Publish ("damaged, replaced" from every `wharf index build -o s3://`
// and every replica losing the first-publish race).
func TestStoreIndexCacheAllowedPrefixKept(t *testing.T) {
	dir := t.TempDir()
	pooled := []byte("an object of the shared pool\n")
	rvPut(t, dir, "pool/shared.txt", pooled)
	res := rvPack(t, dir, rvSources(), cargopack.Options{FrameSize: 1 << 20, Prefix: "tenant-a", UploadID: "20260101-conf"})
	rvMutate(t, dir, res, func(m *manifest.Manifest) {
		// Keys from the bucket root (the manifest's prefix emptied), so
		// that the pool's key lies outside the archive's tree.
		for i := range m.Chunks {
			m.Chunks[i].S3Key = m.Prefix + "/" + strings.TrimPrefix(m.Chunks[i].S3Key, "/")
		}
		for i := range m.Files {
			m.Files[i].S3Key = m.Prefix + "/" + strings.TrimPrefix(m.Files[i].S3Key, "/")
		}
		m.Prefix = ""
		m.Files = append(m.Files, rvDirectFile(m.SourcePath+"/pooled.txt", "pool/shared.txt", pooled))
	})
	secret, err := NewIndexSecret(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	c := StoreIndexCache{Store: backend.NewFileStore(dir), Bucket: rvBucket, Prefix: "idx/", Spool: t.TempDir(), Secret: secret}
	for i, want := range []PublishOutcome{Published, AlreadyValid} {
		a, err := BuildIndex(context.Background(), backend.NewFileStore(dir), rvBucket, res.ManifestKey, Options{AllowKeyPrefixes: []string{"pool/"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := a.Stat("pooled.txt"); !ok {
			t.Fatal("pooled.txt not in the tree")
		}
		out, err := a.PublishIndex(context.Background(), c)
		a.Close()
		if err != nil || out != want {
			t.Fatalf("publish %d: %v, %v; want %v", i, out, err, want)
		}
	}
}

// readCounter counts the bytes read from the bodies of a store's GETs.
type readCounter struct {
	backend.Store
	n atomic.Int64
}

func (s *readCounter) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	rc, info, err := s.Store.Get(ctx, bucket, key)
	if err != nil {
		return rc, info, err
	}
	return countedBody{rc, &s.n}, info, nil
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestStoreIndexCacheForgedObjectNotSpooled: a writer of the shared
// prefix without the secret cannot make a replica download and spool a
// large object before refusing it. An object whose authenticated header
// is missing or forged is refused after its first bytes, and an authentic
// object with bytes appended after its declared length stops there: the
// old code spooled the whole object (up to MaxObjectBytes, 4 GiB by
// default) before it checked the MAC trailer at its end.
func TestStoreIndexCacheForgedObjectNotSpooled(t *testing.T) {
	dir := t.TempDir()
	secret, err := NewIndexSecret(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	store := &readCounter{Store: backend.NewFileStore(dir)}
	c := StoreIndexCache{Store: store, Bucket: rvBucket, Prefix: "idx/", Spool: t.TempDir(), Secret: secret}
	name := IndexName{Bucket: rvBucket, ManifestKey: "m/manifest.json.gz", ETag: `"e1"`}
	file := bytes.Repeat([]byte("an index file "), 1000)
	p := filepath.Join(t.TempDir(), "x.widx")
	if err := os.WriteFile(p, file, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, rvBucket), 0o755); err != nil {
		t.Fatal(err)
	}
	pub := c
	pub.Store = backend.NewFileStore(dir)
	if out, err := pub.Publish(context.Background(), name, p); err != nil || out != Published {
		t.Fatalf("publish: %v, %v", out, err)
	}
	authentic, err := os.ReadFile(filepath.Join(dir, rvBucket, "idx", name.String()))
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0x5a}, 32<<20)
	// A header of the right shape (magic and the public key id) but a
	// length no secret holder wrote.
	forgedHeader := append(bytes.Clone(authentic[:len(authentic)-len(file)-48]), junk...)
	if len(forgedHeader) > len(junk) {
		forgedHeader[16] ^= 0xff // the declared length, now far larger
	}
	for _, tc := range []struct {
		what string
		obj  []byte
		max  int64 // bytes the refusal may read
	}{
		{"junk, no header", junk, 1 << 20},
		{"forged header", forgedHeader, 1 << 20},
		{"authentic, then junk", append(bytes.Clone(authentic), junk...), int64(len(authentic)) + 1<<20},
	} {
		rvPut(t, dir, "idx/"+name.String(), tc.obj)
		store.n.Store(0)
		_, _, err := c.Fetch(context.Background(), name)
		if !errors.Is(err, ErrUnauthenticatedIndex) {
			t.Errorf("%s: %v, want ErrUnauthenticatedIndex", tc.what, err)
		}
		if got := store.n.Load(); got > tc.max {
			t.Errorf("%s: %d bytes read before the refusal, want at most %d", tc.what, got, tc.max)
		}
	}
	rvPut(t, dir, "idx/"+name.String(), authentic)
	got, release, err := c.Fetch(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, file) {
		t.Fatalf("authentic object: %v, %d bytes", err, len(b))
	}
}

// TestIndexCacheRefusedManifestNotDrained: an Open with an index cache of
// a manifest that is refused at its first bytes reads no more of it than
// an Open without one. The old code's recorder read the rest of the
// refused manifest (up to MaxStoredBytes, 512 MiB by default) to hash it
// for an index that was never written, so an uploader's large, broken
// manifest cost every open (every replica, every rescan) its whole size.
func TestIndexCacheRefusedManifestNotDrained(t *testing.T) {
	dir := t.TempDir()
	const key = "pre/uploads/bad/manifest.json"
	rvPut(t, dir, key, append([]byte(`{"version": [`), bytes.Repeat([]byte("x"), 16<<20)...))
	for _, cached := range []bool{false, true} {
		store := &readCounter{Store: backend.NewFileStore(dir)}
		opts := Options{}
		if cached {
			opts.IndexCache = DirIndexCache{Dir: t.TempDir()}
		}
		_, err := Open(context.Background(), store, rvBucket, key, opts)
		if err == nil {
			t.Fatal("a broken manifest opened")
		}
		if got := store.n.Load(); got > 1<<20 {
			t.Errorf("index cache %v: %d bytes of the refused manifest read (%v)", cached, got, err)
		}
	}
}

// TestStoreIndexCacheOversizeNotPublished: an index larger than the
// cache's MaxObjectBytes, which every replica's Fetch refuses, is not
// published: Publish says why and writes nothing. The old code wrote it,
// and every later open refused it, rebuilt, and wrote it again over
// itself (a "damaged, replaced" upload of the whole index at every open).
func TestStoreIndexCacheOversizeNotPublished(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, rvBucket), 0o755); err != nil {
		t.Fatal(err)
	}
	secret, err := NewIndexSecret(bytes.Repeat([]byte{4}, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*IndexSecret{nil, secret} {
		c := StoreIndexCache{Store: backend.NewFileStore(dir), Bucket: rvBucket, Prefix: "idx/", Spool: t.TempDir(), Secret: s, MaxObjectBytes: 4096}
		name := IndexName{Bucket: rvBucket, ManifestKey: "m/manifest.json.gz", ETag: `"e2"`}
		p := filepath.Join(t.TempDir(), "x.widx")
		if err := os.WriteFile(p, bytes.Repeat([]byte("i"), 5000), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := c.Publish(context.Background(), name, p)
		if err == nil || !strings.Contains(err.Error(), "4096") {
			t.Errorf("secret %v: publish of a 5000-byte index at MaxObjectBytes 4096: %v, %v; want an error naming the limit", s != nil, out, err)
		}
		if _, err := os.Stat(filepath.Join(dir, rvBucket, "idx", name.String())); err == nil {
			t.Errorf("secret %v: the oversize index was written", s != nil)
			os.Remove(filepath.Join(dir, rvBucket, "idx", name.String()))
		}
	}
}
