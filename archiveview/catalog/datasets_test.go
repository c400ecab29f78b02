package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// A published dataset in the CargoShip layout, in a FileStore:
//
//	lake/ocean/v/V1/uploads/u1/...            version 1: a.txt, b.txt
//	lake/ocean/v/V2/uploads/u2/manifest.json.gz  version 2: a.txt, c.txt (b.txt deleted)
//	lake/ocean/v/V1/uploads/u2/...            version 2's chunks, under version 1's folder
//	lake/ocean/CURRENT                         the pointer
//
// Version 2's manifest names its chunk objects by their full keys
// (PrefixIncluded, a legal ResolveObjectKey form) under ocean/v/V1/: the
// chunks a later version shares with an older one.
const (
	dsBucket = "lake"
	dsPrefix = "ocean"
	v1ID     = "20260913T213437Z-487888"
	v2ID     = "20260913T213513Z-13de9c"
)

var (
	v1Files = map[string][]byte{"a.txt": []byte("alpha one\n"), "b.txt": bytes.Repeat([]byte("b"), 9000)}
	v2Files = map[string][]byte{"a.txt": []byte("alpha two, longer\n"), "c.txt": bytes.Repeat([]byte("c"), 7000)}
)

// packVersion writes version vid of dataset ds (upload id uid) with its
// chunks under version chunksOf's folder, and returns its manifest key.
func packVersion(t testing.TB, dir, ds, vid, uid, chunksOf string, files map[string][]byte, created time.Time) string {
	t.Helper()
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, created),
		cargopack.Options{Bucket: dsBucket, Prefix: ds + "/v/" + chunksOf, UploadID: uid, Created: created,
			FrameSize: 4 << 10, KeyStyle: cargopack.PrefixIncluded})
	if err != nil {
		t.Fatal(err)
	}
	if chunksOf == vid {
		return res.ManifestKey
	}
	// Move the manifest into the version's own folder.
	key := strings.Replace(res.ManifestKey, "/v/"+chunksOf+"/", "/v/"+vid+"/", 1)
	from, to := filepath.Join(dir, dsBucket, res.ManifestKey), filepath.Join(dir, dsBucket, key)
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
	return key
}

// pointerJSON is a pointer in cargoship publish's form.
func pointerJSON(ds, vid, manifestKey, prev string, files int) string {
	return fmt.Sprintf(`{
  "schema": "cargoship.current/1",
  "version_id": %q,
  "manifest_key": %q,
  "index_key": %q,
  "index_sha256": "5c2324ae6e94c29a162fed5f1a2c52c180f6b1ff47995d7270e680142b0e73a8",
  "created": "2026-09-13T21:35:50Z",
  "file_count": %d,
  "total_bytes": 0,
  "previous_version_id": %q
}
`, vid, manifestKey, ds+"/v/"+vid+"/index.lith", files, prev)
}

// writeObject writes bucket/key in a FileStore directory, with a distinct
// mtime each time (the FileStore's ETag is mtime and size).
func writeObject(t testing.TB, dir, key, data string) {
	t.Helper()
	p := filepath.Join(dir, dsBucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var old time.Time
	if fi, err := os.Stat(p); err == nil {
		old = fi.ModTime()
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err == nil && !fi.ModTime().After(old) {
		if err := os.Chtimes(p, old.Add(time.Second), old.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

type publishedDataset struct {
	dir        string
	man1, man2 string
}

func publishDataset(t testing.TB) publishedDataset {
	t.Helper()
	dir := t.TempDir()
	d := publishedDataset{dir: dir}
	d.man1 = packVersion(t, dir, dsPrefix, v1ID, "u1", v1ID, v1Files, time.Date(2026, 9, 13, 21, 34, 37, 0, time.UTC))
	d.man2 = packVersion(t, dir, dsPrefix, v2ID, "u2", v1ID, v2Files, time.Date(2026, 9, 13, 21, 35, 13, 0, time.UTC))
	d.point(t, v1ID)
	return d
}

// point writes CURRENT naming version vid.
func (d publishedDataset) point(t testing.TB, vid string) {
	t.Helper()
	switch vid {
	case v1ID:
		writeObject(t, d.dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, v1ID, d.man1, "", len(v1Files)))
	case v2ID:
		writeObject(t, d.dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, v2ID, d.man2, v1ID, len(v2Files)))
	default:
		t.Fatalf("no version %s", vid)
	}
}

// countStore counts every request by kind; ReadSmall is counted once
// (one conditional GET).
type countStore struct {
	backend.Store
	mu sync.Mutex
	n  map[string]int
}

func newCountStore(s backend.Store) *countStore { return &countStore{Store: s, n: map[string]int{}} }

func (c *countStore) add(op string) {
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
}

func (c *countStore) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (c *countStore) total() int {
	n := 0
	for _, v := range c.counts() {
		n += v
	}
	return n
}

func (c *countStore) ReadRange(ctx context.Context, b, k string, off, n int64, m string) (io.ReadCloser, backend.ObjectInfo, error) {
	c.add("range")
	return c.Store.ReadRange(ctx, b, k, off, n, m)
}

func (c *countStore) Get(ctx context.Context, b, k string) (io.ReadCloser, backend.ObjectInfo, error) {
	c.add("get")
	return c.Store.Get(ctx, b, k)
}

func (c *countStore) Stat(ctx context.Context, b, k string) (backend.ObjectInfo, error) {
	c.add("stat")
	return c.Store.Stat(ctx, b, k)
}

func (c *countStore) List(ctx context.Context, b, p string, fn func(backend.ObjectInfo) error) error {
	c.add("list")
	return c.Store.List(ctx, b, p, fn)
}

func (c *countStore) ReadSmall(ctx context.Context, b, k string, limit int64, inm string) ([]byte, backend.ObjectInfo, bool, error) {
	c.add("conditional-get")
	return backend.ReadSmall(ctx, c.Store, b, k, limit, inm)
}

// readKey reads key of a whole.
func readKey(t testing.TB, a *archiveview.Archive, key string) []byte {
	t.Helper()
	f, ok := a.Stat(key)
	if !ok {
		t.Fatalf("archive %s: no %s", a.Name(), key)
	}
	rc, err := a.Open(context.Background(), f, 0, f.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkTree compares every file of a with want, byte for byte, and the
// file count.
func checkTree(t testing.TB, a *archiveview.Archive, want map[string][]byte) {
	t.Helper()
	if a.Files() != len(want) {
		t.Fatalf("archive %s: %d files, want %d", a.Name(), a.Files(), len(want))
	}
	for k, v := range want {
		if got := readKey(t, a, k); !bytes.Equal(got, v) {
			t.Fatalf("archive %s: %s differs", a.Name(), k)
		}
	}
}

func datasetManager(store backend.Store, aliases ...Alias) *Manager {
	return NewManager(Config{Store: store, Aliases: aliases, WaitOpen: true, RetireGrace: time.Hour})
}

func bucketArchive(t testing.TB, cm *Manager, name string) *archiveview.Archive {
	t.Helper()
	a, ok, err := cm.Catalog().Bucket(context.Background(), name)
	if !ok || err != nil || a == nil {
		t.Fatalf("bucket %s: ok %v err %v", name, ok, err)
	}
	return a
}

// TestDatasetFollowsCurrent: the alias serves the version CURRENT names,
// byte for byte (version 2 reading chunks under version 1's folder); an
// unchanged pointer costs one conditional request per rescan and changes
// nothing; a rewritten pointer naming the same version is a no-op; a
// promote is picked up at the next rescan; a read in flight across the
// swap finishes on its version with its bytes; the old version stays
// open until the retire grace.
func TestDatasetFollowsCurrent(t *testing.T) {
	d := publishDataset(t)
	store := newCountStore(backend.NewFileStore(d.dir))
	cm := datasetManager(store, Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cm.DatasetCollector())
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a1 := bucketArchive(t, cm, "ocean")
	checkTree(t, a1, v1Files)
	if v, ok := cm.DatasetVersion("ocean"); !ok || v != v1ID {
		t.Fatalf("serving %q %v", v, ok)
	}
	if got := gather(t, reg, "wharf_dataset_version_info", "ocean", v1ID); got != 1 {
		t.Fatalf("version gauge %v", got)
	}

	// Unchanged: one conditional request, nothing else.
	before := store.total()
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := store.total() - before; n != 1 {
		t.Fatalf("a rescan of an unchanged dataset made %d requests (%v), want 1", n, store.counts())
	}
	if bucketArchive(t, cm, "ocean") != a1 {
		t.Fatal("unchanged pointer: archive replaced")
	}

	// The same version, pointer rewritten (new ETag): no reopen.
	d.point(t, v1ID)
	gets := store.counts()["get"]
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	if bucketArchive(t, cm, "ocean") != a1 || store.counts()["get"] != gets {
		t.Fatal("a pointer naming the served version reopened it")
	}

	// A read in flight across the swap.
	f, _ := a1.Stat("b.txt")
	rc, err := a1.Open(ctx, f, 0, f.Size)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 100)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}

	// Promote version 2.
	d.point(t, v2ID)
	start := time.Now()
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	a2 := bucketArchive(t, cm, "ocean")
	if a2 == a1 {
		t.Fatal("promote not picked up")
	}
	checkTree(t, a2, v2Files)
	rest, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(append(head, rest...), v1Files["b.txt"]) {
		t.Fatalf("the read in flight across the swap: %d bytes, %v", len(head)+len(rest), err)
	}
	checkTree(t, a1, v1Files) // retired only after the grace
	if v, _ := cm.DatasetVersion("ocean"); v != v2ID {
		t.Fatalf("serving %s", v)
	}
	if got := gather(t, reg, "wharf_dataset_version_info", "ocean", v2ID); got != 1 {
		t.Fatalf("version gauge %v", got)
	}
	t.Logf("a new CURRENT to serving it: %v (one rescan: conditional GET, manifest HEAD, open)", took)

	// Roll back (promote version 1 again).
	d.point(t, v1ID)
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	checkTree(t, bucketArchive(t, cm, "ocean"), v1Files)
}

// gather returns the value of metric's sample with these label values.
func gather(t testing.TB, reg *prometheus.Registry, metric string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			var vals []string
			for _, l := range m.GetLabel() {
				vals = append(vals, l.GetValue())
			}
			if strings.Join(vals, ",") == strings.Join(labels, ",") {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", metric, labels)
	return 0
}

// TestDatasetPinned: @<version_id> serves that version whatever CURRENT
// says; a version that does not exist is a start-up error naming the
// version and the dataset.
func TestDatasetPinned(t *testing.T) {
	d := publishDataset(t)
	d.point(t, v2ID)
	store := backend.NewFileStore(d.dir)
	cm := datasetManager(store, Alias{Name: "old", Target: "s3://lake/ocean@" + v1ID}, Alias{Name: "cur", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	checkTree(t, bucketArchive(t, cm, "old"), v1Files)
	checkTree(t, bucketArchive(t, cm, "cur"), v2Files)
	// Cache-Control follows this: a pinned version never changes, CURRENT's
	// bucket does, and a name the manager does not serve is fixed.
	for name, want := range map[string]bool{"old": false, "cur": true, "nobody": false} {
		if got := cm.FollowsUpdates(name); got != want {
			t.Errorf("FollowsUpdates(%q) = %v, want %v", name, got, want)
		}
	}
	d.point(t, v1ID)
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	checkTree(t, bucketArchive(t, cm, "old"), v1Files)
	checkTree(t, bucketArchive(t, cm, "cur"), v1Files)

	bad := datasetManager(store, Alias{Name: "gone", Target: "s3://lake/ocean@20200101T000000Z-000000"})
	defer bad.CloseAll()
	err := bad.Scan(ctx, true)
	if err == nil || !strings.Contains(err.Error(), "version 20200101T000000Z-000000 does not exist") || !strings.Contains(err.Error(), "s3://lake/ocean") {
		t.Fatalf("missing pinned version: %v", err)
	}
}

// TestDatasetSharedChunksConfined: version 2's manifest names chunks under
// version 1's folder; opened on its own (the rule's root is its own
// version folder) it is refused, served as a dataset version it opens;
// a version naming an object outside DATASET/v/ is refused even so.
func TestDatasetSharedChunksConfined(t *testing.T) {
	d := publishDataset(t)
	store := backend.NewFileStore(d.dir)
	ctx := context.Background()
	_, err := archiveview.Open(ctx, store, dsBucket, d.man2, archiveview.Options{})
	if !errors.Is(err, archiveview.ErrInvalidTree) {
		t.Fatalf("version 2 opened on its own: %v (the test's layout does not share chunks)", err)
	}
	// A version whose chunks lie outside the dataset: "evil" is packed
	// with its chunks under other/, its manifest moved into ocean/v/V3/.
	res, err := cargopack.Write(ctx, cargopack.DirSink(d.dir), cargopack.FromMap(v1Files, time.Now()),
		cargopack.Options{Bucket: dsBucket, Prefix: "other", UploadID: "u3", FrameSize: 4 << 10, KeyStyle: cargopack.PrefixIncluded})
	if err != nil {
		t.Fatal(err)
	}
	v3 := "20260914T000000Z-aaaaaa"
	key := dsPrefix + "/v/" + v3 + "/uploads/u3/manifest.json.gz"
	if err := os.MkdirAll(filepath.Dir(filepath.Join(d.dir, dsBucket, key)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(d.dir, dsBucket, res.ManifestKey), filepath.Join(d.dir, dsBucket, key)); err != nil {
		t.Fatal(err)
	}
	writeObject(t, d.dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, v3, key, v2ID, 2))
	cm := datasetManager(store, Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	err = cm.Scan(ctx, true)
	if !errors.Is(err, archiveview.ErrInvalidTree) || !strings.Contains(err.Error(), "other/uploads/u3") {
		t.Fatalf("a version naming objects outside the dataset: %v", err)
	}
}

// badPointers are the malformed pointers (and objects) every start and
// re-read must refuse, with the reason each error names.
func badPointers(d publishedDataset) []struct{ name, data, want string } {
	good := pointerJSON(dsPrefix, v2ID, d.man2, v1ID, 2)
	r := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	return []struct{ name, data, want string }{
		{"empty", "", "empty object"},
		{"empty object", "{}", "empty object"},
		{"other schema", r("cargoship.current/1", "cargoship.current/9"), "schema"},
		{"unknown field", r(`"created"`, `"mirror": "x", "created"`), "unknown field"},
		{"trailing data", good + "{}", "trailing data"},
		{"no version_id", r(`"version_id": "`+v2ID+`",`, ""), "missing version_id"},
		{"no manifest_key", r(`"manifest_key": "`+d.man2+`",`, ""), "missing manifest_key"},
		{"no index_key", r(`"index_key": "`+dsPrefix+"/v/"+v2ID+`/index.lith",`, ""), "missing index_key"},
		{"short index_sha256", r(`"5c2324ae`, `"5c23`), "64 hexadecimal"},
		{"negative file_count", r(`"file_count": 2`, `"file_count": -2`), "negative file_count"},
		{"manifest of another version", r(`"version_id": "`+v2ID+`"`, `"version_id": "`+v1ID+`"`), "does not lie under"},
		{"dangling manifest_key", strings.ReplaceAll(good, "/uploads/u2/", "/uploads/u9/"), "not found"},
		{"larger than 64 KiB", good + strings.Repeat(" ", 64<<10), "at most 65536"},
	}
}

// TestDatasetBadPointerAtStart: every malformed pointer, and a missing
// one, is a start-up error naming the pointer's key and the reason.
func TestDatasetBadPointerAtStart(t *testing.T) {
	d := publishDataset(t)
	for _, c := range append(badPointers(d), struct{ name, data, want string }{"missing", "", "object not found"}) {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "missing" {
				if err := os.Remove(filepath.Join(d.dir, dsBucket, dsPrefix, "CURRENT")); err != nil {
					t.Fatal(err)
				}
			} else {
				writeObject(t, d.dir, dsPrefix+"/CURRENT", c.data)
			}
			cm := datasetManager(backend.NewFileStore(d.dir), Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
			defer cm.CloseAll()
			err := cm.Scan(context.Background(), true)
			if err == nil || !strings.Contains(err.Error(), "s3://lake/ocean/CURRENT") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("start: %v; want an error naming s3://lake/ocean/CURRENT and %q", err, c.want)
			}
		})
	}
}

// TestDatasetBadPointerAtRescan: at a re-read every malformed pointer
// keeps the last good version serving, is counted, and a good pointer
// afterwards is adopted.
func TestDatasetBadPointerAtRescan(t *testing.T) {
	d := publishDataset(t)
	cm := datasetManager(backend.NewFileStore(d.dir), Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cm.DatasetCollector())
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a1 := bucketArchive(t, cm, "ocean")
	cases := badPointers(d)
	for i, c := range cases {
		writeObject(t, d.dir, dsPrefix+"/CURRENT", c.data)
		if err := cm.Scan(ctx, false); err != nil {
			t.Fatalf("%s: rescan: %v", c.name, err)
		}
		if a := bucketArchive(t, cm, "ocean"); a != a1 {
			t.Fatalf("%s: the bucket no longer serves the last good version", c.name)
		}
		checkTree(t, a1, v1Files)
		if got := gather(t, reg, "wharf_dataset_pointer_errors_total", "ocean"); got != float64(i+1) {
			t.Fatalf("%s: %v pointer errors counted, want %d", c.name, got, i+1)
		}
		cm.dsMu.Lock()
		last := cm.datasets["ocean"].lastErr
		cm.dsMu.Unlock()
		if !strings.Contains(last, "s3://lake/ocean/CURRENT") || !strings.Contains(last, c.want) {
			t.Fatalf("%s: last error %q", c.name, last)
		}
	}
	// A good pointer naming a version whose manifest does not open: the
	// last good version stays, counted, and the pointer is read again in
	// full at the next rescan (not a 304 that would hide it).
	v3 := "20260914T000000Z-bbbbbb"
	key := dsPrefix + "/v/" + v3 + "/uploads/u3/manifest.json.gz"
	writeObject(t, d.dir, key, "not a manifest")
	writeObject(t, d.dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, v3, key, v1ID, 2))
	for range 2 {
		if err := cm.Scan(ctx, false); err != nil {
			t.Fatal(err)
		}
		if a := bucketArchive(t, cm, "ocean"); a != a1 {
			t.Fatal("a version that does not open replaced the last good one")
		}
	}
	if got := gather(t, reg, "wharf_dataset_pointer_errors_total", "ocean"); got != float64(len(cases)+2) {
		t.Fatalf("%v errors counted, want %d", got, len(cases)+2)
	}
	d.point(t, v2ID)
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	checkTree(t, bucketArchive(t, cm, "ocean"), v2Files)
}

// TestAliasDataset: which alias targets name a dataset, and how.
func TestAliasDataset(t *testing.T) {
	cases := []struct {
		target string
		ok     bool
		ref    DatasetRef
		err    string
	}{
		{"s3://lake/photos@latest", false, DatasetRef{}, ""},
		{"s3://lake/datasets/ocean@current", true, DatasetRef{Bucket: "lake", Prefix: "datasets/ocean"}, ""},
		{"s3://lake/datasets/ocean/@current", true, DatasetRef{Bucket: "lake", Prefix: "datasets/ocean"}, ""},
		{"s3://lake@current", true, DatasetRef{Bucket: "lake"}, ""},
		{"s3://lake/ocean@" + v1ID, true, DatasetRef{Bucket: "lake", Prefix: "ocean", Version: v1ID}, ""},
		{"s3://lake/ocean@..", true, DatasetRef{}, "version id"},
		{"s3://lake/ocean@a b", true, DatasetRef{}, "version id"},
		{"http://lake/ocean@current", true, DatasetRef{}, "want s3://"},
		{"s3://lake/a@b/c", false, DatasetRef{}, ""},
	}
	for _, c := range cases {
		ref, ok, err := Alias{Name: "x", Target: c.target}.Dataset()
		if ok != c.ok || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) || err == nil && ref != c.ref {
			t.Errorf("%s: %+v %v %v", c.target, ref, ok, err)
		}
		if _, _, rerr := (Alias{Name: "x", Target: c.target}).Root(); c.ok && (rerr == nil) != (c.err == "") {
			t.Errorf("%s: Root: %v", c.target, rerr)
		}
	}
}

// TestDiscoverDatasets: a discovery root finds a dataset whose CURRENT
// lies at PREFIX/<name>/CURRENT or PREFIX/CURRENT, serves it as one bucket
// named after its last segment following CURRENT, and neither publishes
// nor skips the uploads inside its versions; an ordinary upload beside it
// is still a bucket of its own.
func TestDiscoverDatasets(t *testing.T) {
	d := publishDataset(t)
	if _, err := cargopack.Write(context.Background(), cargopack.DirSink(d.dir), cargopack.FromMap(map[string][]byte{"x.txt": []byte("x\n")}, time.Now()),
		cargopack.Options{Bucket: dsBucket, UploadID: "plain-upload", FrameSize: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, root := range []string{"s3://lake", "s3://lake/ocean"} {
		t.Run(root, func(t *testing.T) {
			d.point(t, v1ID)
			cm := NewManager(Config{Store: backend.NewFileStore(d.dir), Discover: []string{root}, WaitOpen: true, RetireGrace: time.Hour})
			defer cm.CloseAll()
			if err := cm.Scan(ctx, true); err != nil {
				t.Fatal(err)
			}
			names := cm.Catalog().BucketNames()
			want := "[ocean]"
			if root == "s3://lake" {
				want = "[ocean plain-upload]"
			}
			if fmt.Sprint(names) != want {
				t.Fatalf("buckets %v, want %s", names, want)
			}
			if p := cm.Page(); len(p.Skipped) != 0 {
				t.Fatalf("skipped %+v", p.Skipped)
			}
			checkTree(t, bucketArchive(t, cm, "ocean"), v1Files)
			if !cm.FollowsUpdates("ocean") || cm.FollowsUpdates("plain-upload") {
				t.Errorf("FollowsUpdates: discovered dataset %v (want true), discovered upload %v (want false)",
					cm.FollowsUpdates("ocean"), cm.FollowsUpdates("plain-upload"))
			}
			d.point(t, v2ID)
			if err := cm.Scan(ctx, false); err != nil {
				t.Fatal(err)
			}
			checkTree(t, bucketArchive(t, cm, "ocean"), v2Files)
			if v, ok := cm.DatasetVersion("ocean"); !ok || v != v2ID {
				t.Fatalf("serving %q", v)
			}
		})
	}
}

// TestDatasetVersionDoesNotOpenAtStart: a good pointer naming a version
// whose manifest does not open is a start-up error with WaitOpen, naming
// the dataset and the manifest; without it the bucket answers that error.
func TestDatasetVersionDoesNotOpenAtStart(t *testing.T) {
	d := publishDataset(t)
	v3 := "20260914T000000Z-cccccc"
	key := dsPrefix + "/v/" + v3 + "/uploads/u3/manifest.json.gz"
	writeObject(t, d.dir, key, "not a manifest")
	writeObject(t, d.dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, v3, key, v1ID, 2))
	store := backend.NewFileStore(d.dir)
	ctx := context.Background()
	cm := datasetManager(store, Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	if err := cm.Scan(ctx, true); err == nil || !strings.Contains(err.Error(), "dataset s3://lake/ocean") || !strings.Contains(err.Error(), key) {
		t.Fatalf("WaitOpen start: %v", err)
	}
	bg := NewManager(Config{Store: store, Aliases: []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}}})
	defer bg.CloseAll()
	if err := bg.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the open to end", bg.Ready)
	if _, ok, err := bg.Catalog().Bucket(ctx, "ocean"); !ok || err == nil {
		t.Fatalf("bucket: %v %v", ok, err)
	}
}

// TestDiscoverDatasetBadPointer: a discovered dataset whose pointer is bad
// fails its own bucket (answering the error, naming the pointer), not the
// start; a good pointer at the next rescan serves it.
func TestDiscoverDatasetBadPointer(t *testing.T) {
	d := publishDataset(t)
	writeObject(t, d.dir, dsPrefix+"/CURRENT", `{"schema":"cargoship.current/1"} trailing`)
	cm := NewManager(Config{Store: backend.NewFileStore(d.dir), Discover: []string{"s3://lake"}, WaitOpen: true, RetireGrace: time.Hour})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	_, ok, err := cm.Catalog().Bucket(ctx, "ocean")
	if !ok || err == nil || !strings.Contains(err.Error(), "s3://lake/ocean/CURRENT") {
		t.Fatalf("bucket with a bad pointer: %v %v", ok, err)
	}
	d.point(t, v2ID)
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	checkTree(t, bucketArchive(t, cm, "ocean"), v2Files)
}

// pageDataset returns bucket name's entry on the /-/archives page.
func pageDataset(t *testing.T, cm *Manager, name string) BucketEntry {
	t.Helper()
	for _, b := range cm.Page().Buckets {
		if b.Bucket == name {
			return b
		}
	}
	t.Fatalf("bucket %s not on the page", name)
	return BucketEntry{}
}

// TestDatasetPage: /-/archives names, per dataset bucket, the version
// served, when CURRENT was last read, and the last pointer error (kept,
// with its time, while the last good version serves; cleared when a new
// version is adopted). A pinned bucket never reads CURRENT; an upload's
// bucket has no dataset part.
func TestDatasetPage(t *testing.T) {
	d := publishDataset(t)
	cm := datasetManager(backend.NewFileStore(d.dir), Alias{Name: "ocean", Target: "s3://lake/ocean@current"},
		Alias{Name: "old", Target: "s3://lake/ocean@" + v1ID})
	defer cm.CloseAll()
	ctx := context.Background()
	t0 := time.Now().UTC()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	e := pageDataset(t, cm, "ocean")
	de := e.Dataset
	if de == nil {
		t.Fatal("no dataset part")
	}
	if de.Dataset != "s3://lake/ocean" || de.Pointer != "s3://lake/ocean/CURRENT" || !de.Follows || de.VersionID != v1ID ||
		!strings.Contains(de.Manifest, "/v/"+v1ID+"/") || de.PointerError != "" || de.PointerErrorAt != nil || de.PointerErrors != 0 {
		t.Fatalf("start: %+v", de)
	}
	if de.PointerReadAt == nil || de.PointerReadAt.Before(t0.Add(-time.Second)) {
		t.Fatalf("pointer read at %v (scan began %v)", de.PointerReadAt, t0)
	}
	first := *de.PointerReadAt
	if p := pageDataset(t, cm, "old").Dataset; p == nil || p.Follows || p.VersionID != v1ID || p.PointerReadAt != nil {
		t.Fatalf("pinned: %+v", p)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"version_id":"` + v1ID + `"`, `"pointer_read_at":`, `"follows_current":true`, `"pointer_errors":0`} {
		if !strings.Contains(string(raw), k) {
			t.Fatalf("JSON %s lacks %s", raw, k)
		}
	}

	// A bad pointer at a rescan: the page shows it, and version 1 still.
	time.Sleep(5 * time.Millisecond)
	writeObject(t, d.dir, dsPrefix+"/CURRENT", `{"schema":"cargoship.current/2"}`)
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	de = pageDataset(t, cm, "ocean").Dataset
	if de.VersionID != v1ID || de.PointerErrors != 1 || !strings.Contains(de.PointerError, "s3://lake/ocean/CURRENT") ||
		de.PointerErrorAt == nil || de.PointerReadAt == nil || !de.PointerReadAt.After(first) {
		t.Fatalf("after a bad pointer: %+v", de)
	}
	// A good pointer naming version 2: adopted, the error cleared, the
	// count kept.
	d.point(t, v2ID)
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	de = pageDataset(t, cm, "ocean").Dataset
	if de.VersionID != v2ID || de.PointerError != "" || de.PointerErrorAt != nil || de.PointerErrors != 1 || de.Opening != "" {
		t.Fatalf("after version 2: %+v", de)
	}
}

// TestDatasetPinnedPruned: a pinned version's manifest is checked (one
// HEAD) at each rescan; once pruned the error is logged, counted and on
// /-/archives naming the version and the manifest, and the bucket keeps
// its entry (whose objects then fail naming their keys).
func TestDatasetPinnedPruned(t *testing.T) {
	d := publishDataset(t)
	store := newCountStore(backend.NewFileStore(d.dir))
	cm := datasetManager(store, Alias{Name: "old", Target: "s3://lake/ocean@" + v1ID})
	defer cm.CloseAll()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cm.DatasetCollector())
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a1 := bucketArchive(t, cm, "old")
	before := store.total()
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := store.total() - before; n != 1 || store.counts()["stat"] == 0 {
		t.Fatalf("a rescan of a pinned version made %d requests (%v), want one HEAD", n, store.counts())
	}
	de := pageDataset(t, cm, "old").Dataset
	if de.PointerErrors != 0 || de.PointerError != "" {
		t.Fatalf("before the prune: %+v", de)
	}
	key := strings.TrimPrefix(de.Manifest, "s3://lake/")
	if err := os.Remove(filepath.Join(d.dir, "lake", filepath.FromSlash(key))); err != nil {
		t.Fatal(err)
	}
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	de = pageDataset(t, cm, "old").Dataset
	if de.PointerErrors != 1 || !strings.Contains(de.PointerError, "pinned version "+v1ID) || !strings.Contains(de.PointerError, key) || de.VersionID != v1ID {
		t.Fatalf("after the prune: %+v", de)
	}
	if got := gather(t, reg, "wharf_dataset_pointer_errors_total", "old"); got != 1 {
		t.Fatalf("%v errors counted", got)
	}
	if bucketArchive(t, cm, "old") != a1 {
		t.Fatal("the entry was replaced")
	}
}
