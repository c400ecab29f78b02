package chunkio

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

func TestUploadPrefixes(t *testing.T) {
	tests := []struct {
		keys []string
		want []string
	}{
		{[]string{"a/uploads/u1/chunks/c1.tar.zst", "a/uploads/u1/chunks/c2.tar.zst", "a/uploads/u1/files/x/y.bin"}, []string{"a/uploads/u1/"}},
		{[]string{"a/uploads/u2/chunks/c", "a/uploads/u1/chunks/c"}, []string{"a/uploads/u1/", "a/uploads/u2/"}},
		{[]string{"uploads/u1/c", "x/y/z", "top"}, []string{""}},
		{[]string{"uploads/u1/c", "x/y/z"}, []string{"uploads/u1/", "x/y/"}},
		{[]string{"a/uploads/u1", "a/uploads/u1x/c"}, []string{"a/uploads/"}},
		{[]string{"deep/a/uploads/u/b/uploads/v/c"}, []string{"deep/a/uploads/u/b/uploads/v/"}},
		{[]string{"p/uploads//c"}, []string{"p/uploads//"}},
		{nil, nil},
	}
	for _, tc := range tests {
		if got := uploadPrefixes(tc.keys); !slices.Equal(got, tc.want) {
			t.Errorf("uploadPrefixes(%q) = %q, want %q", tc.keys, got, tc.want)
		}
	}
}

// countStore counts the requests that reach a Store (and Restorer).
type countStore struct {
	inner backend.Store
	mu    sync.Mutex
	ops   map[string]int
	list  func(prefix string) error // optional listing failure
}

func (c *countStore) count(op string) {
	c.mu.Lock()
	c.ops[op]++
	c.mu.Unlock()
}

func (c *countStore) n(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

func (c *countStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	c.count("range")
	return c.inner.ReadRange(ctx, bucket, key, off, length, ifMatch)
}
func (c *countStore) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	c.count("get")
	return c.inner.Get(ctx, bucket, key)
}
func (c *countStore) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	c.count("stat")
	return c.inner.Stat(ctx, bucket, key)
}
func (c *countStore) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	c.count("list")
	if c.list != nil {
		if err := c.list(prefix); err != nil {
			return err
		}
	}
	return c.inner.List(ctx, bucket, prefix, fn)
}
func (c *countStore) Restore(ctx context.Context, bucket, key string, req backend.RestoreRequest) (backend.RestoreResult, error) {
	c.count("restore")
	return c.inner.(backend.Restorer).Restore(ctx, bucket, key, req)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// classesFixture is a file store behind the Glacier model behind a
// request counter, with keys written.
func classesFixture(t *testing.T, keys ...string) (*countStore, *faults.Glacier, *clock) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range keys {
		p := filepath.Join(dir, "bkt", filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ck := &clock{t: time.Date(2032, 2, 2, 0, 0, 0, 0, time.UTC)}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: 30 * time.Minute, Now: ck.Now})
	return &countStore{inner: g.Store(backend.NewFileStore(dir)), ops: map[string]int{}}, g, ck
}

// TestClassesLifecycle: one listing per upload prefix teaches every class;
// a read of an archived object is refused with one HEAD (the listing said
// nothing of its restore) and then from the state alone for the TTL; a
// restore is sent once however many callers ask; a finished restore is
// trusted until its expiry; objects that need no restore are never HEADed.
func TestClassesLifecycle(t *testing.T) {
	keys := []string{"a/uploads/u2/chunks/c1", "a/uploads/u2/chunks/c2", "a/uploads/u1/chunks/c0", "a/uploads/u1/files/d"}
	cs, g, ck := classesFixture(t, append(keys, "a/uploads/u1/manifest.json")...)
	g.SetPrefixClass("bkt", "a/uploads/u1/", backend.ClassDeepArchive, "")
	g.SetClass("bkt", "a/uploads/u2/chunks/c2", backend.ClassGlacier, "")
	c := NewClasses(cs, "bkt", ClassOptions{RestoreTTL: time.Minute, Now: ck.Now})
	ctx := context.Background()

	// Nothing is asked before Load: unknown objects read as STANDARD.
	if err := c.CheckReadable(ctx, "a/uploads/u1/chunks/c0"); err != nil || cs.n("stat")+cs.n("list") != 0 {
		t.Fatalf("before Load: %v, %v", err, cs.ops)
	}
	if c.AnyNonStandard() {
		t.Fatal("classes known before Load")
	}
	if err := c.Load(ctx, keys); err != nil {
		t.Fatal(err)
	}
	if !c.AnyNonStandard() {
		t.Fatal("no archived class known after Load")
	}
	if cs.n("list") != 2 {
		t.Fatalf("%d listings for two upload prefixes", cs.n("list"))
	}
	for k, want := range map[string]string{keys[0]: "STANDARD", keys[1]: "GLACIER", keys[2]: "DEEP_ARCHIVE", keys[3]: "DEEP_ARCHIVE"} {
		if oc := c.Cached(k); oc.Class != want || oc.Size != 10 {
			t.Errorf("%s: %+v, want %s", k, oc, want)
		}
	}
	if err := c.CheckReadable(ctx, keys[0]); err != nil || cs.n("stat") != 0 {
		t.Fatalf("STANDARD chunk: %v, %d HEADs", err, cs.n("stat"))
	}
	err := c.CheckReadable(ctx, keys[1])
	var ae *backend.ArchivedError
	if !errors.Is(err, backend.ErrArchived) || !errors.As(err, &ae) || ae.StorageClass != "GLACIER" || cs.n("stat") != 1 {
		t.Fatalf("GLACIER chunk: %v, %d HEADs", err, cs.n("stat"))
	}
	for range 5 {
		if err := c.CheckReadable(ctx, keys[1]); !errors.Is(err, backend.ErrArchived) {
			t.Fatal(err)
		}
	}
	if cs.n("stat") != 1 {
		t.Fatalf("%d HEADs for repeated checks within the TTL", cs.n("stat"))
	}

	// Concurrent restores of one object: one RestoreObject.
	var wg sync.WaitGroup
	results := make([]RestoreSent, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.Restore(ctx, keys[1], backend.RestoreRequest{Days: 1})
		}()
	}
	wg.Wait()
	sent := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Sent {
			sent++
			if r.Result != backend.RestoreStarted {
				t.Fatalf("sent restore: %v", r.Result)
			}
		} else if r.Result != backend.RestoreInProgress {
			t.Fatalf("unsent restore: %+v", r)
		}
	}
	if sent != 1 || cs.n("restore") != 1 || len(g.Started()) != 1 {
		t.Fatalf("%d sent, %d RestoreObject, started %v", sent, cs.n("restore"), g.Started())
	}
	if _, err := c.Restore(ctx, keys[0], backend.RestoreRequest{Days: 1}); !errors.Is(err, backend.ErrNotArchived) || cs.n("restore") != 1 {
		t.Fatalf("restore of a STANDARD chunk: %v", err)
	}
	stats := cs.n("stat")
	if err := c.CheckReadable(ctx, keys[1]); !errors.Is(err, backend.ErrArchived) || !errors.As(err, &ae) || !ae.Restore.Ongoing || cs.n("stat") != stats {
		t.Fatalf("during the restore: %v (%d HEADs)", err, cs.n("stat")-stats)
	}
	ck.Add(30 * time.Minute) // restored; our state is older than the TTL
	if err := c.CheckReadable(ctx, keys[1]); err != nil || cs.n("stat") != stats+1 {
		t.Fatalf("after the restore: %v (%d HEADs)", err, cs.n("stat")-stats)
	}
	oc := c.Cached(keys[1])
	if !oc.RestoreKnown || !oc.Restore.Done(ck.Now()) || !oc.Restore.Expiry.Equal(ck.Now().Add(24*time.Hour)) {
		t.Fatalf("restored state %+v", oc)
	}
	ck.Add(23 * time.Hour) // within the expiry: no HEAD whatever the TTL
	if err := c.CheckReadable(ctx, keys[1]); err != nil || cs.n("stat") != stats+1 {
		t.Fatalf("before the expiry: %v (%d HEADs)", err, cs.n("stat")-stats)
	}
	if r, err := c.Restore(ctx, keys[1], backend.RestoreRequest{Days: 1}); err != nil || r.Sent || r.Result != backend.RestoreAlreadyRestored {
		t.Fatalf("restore of a restored copy: %+v %v", r, err)
	}
	ck.Add(time.Hour) // expired: HEAD, archived again
	if err := c.CheckReadable(ctx, keys[1]); !errors.Is(err, backend.ErrArchived) || cs.n("stat") != stats+2 {
		t.Fatalf("after the expiry: %v (%d HEADs)", err, cs.n("stat")-stats)
	}

	// A refused GET teaches the state without a request.
	c.Refused("a/uploads/u9/x", &backend.ArchivedError{StorageClass: "INTELLIGENT_TIERING", AccessTier: "ARCHIVE_ACCESS"})
	stats = cs.n("stat")
	if err := c.CheckReadable(ctx, "a/uploads/u9/x"); !errors.As(err, &ae) || ae.AccessTier != "ARCHIVE_ACCESS" || cs.n("stat") != stats {
		t.Fatalf("refused object: %v", err)
	}
	// A missing key under a listed prefix is not HEADed.
	if err := c.CheckReadable(ctx, "a/uploads/u2/chunks/missing"); err != nil || cs.n("stat") != stats {
		t.Fatalf("missing key: %v (%d HEADs)", err, cs.n("stat")-stats)
	}
}

// TestClassesListingRefused: where the listing is refused, each object is
// HEADed once when first needed, and its class then kept.
func TestClassesListingRefused(t *testing.T) {
	keys := []string{"z/uploads/u/chunks/a", "z/uploads/u/chunks/b"}
	cs, g, ck := classesFixture(t, keys...)
	g.SetClass("bkt", keys[1], backend.ClassDeepArchive, "")
	cs.list = func(string) error {
		return &backend.Error{Op: "list", Bucket: "bkt", Err: backend.ErrAccessDenied}
	}
	c := NewClasses(cs, "bkt", ClassOptions{Now: ck.Now})
	ctx := context.Background()
	if err := c.Load(ctx, keys); !errors.Is(err, backend.ErrAccessDenied) {
		t.Fatalf("Load: %v", err)
	}
	if c.Cached(keys[0]).Class != "" {
		t.Fatal("class known without a listing")
	}
	for range 3 {
		if err := c.CheckReadable(ctx, keys[0]); err != nil {
			t.Fatal(err)
		}
		if err := c.CheckReadable(ctx, keys[1]); !errors.Is(err, backend.ErrArchived) {
			t.Fatal(err)
		}
	}
	if cs.n("stat") != 2 {
		t.Fatalf("%d HEADs, want one per object", cs.n("stat"))
	}
	if oc := c.Cached(keys[1]); oc.Class != "DEEP_ARCHIVE" || !oc.RestoreKnown || oc.Restore.Requested {
		t.Fatalf("HEADed state %+v", oc)
	}
}

// TestSetRefusesArchivedBeforeFetch: a Set's range GET of an archived chunk
// fails with ErrArchived before any GET once its class is known, and a
// store refusal is remembered.
func TestSetRefusesArchivedBeforeFetch(t *testing.T) {
	keys := []string{"s/uploads/u/chunks/a", "s/uploads/u/chunks/b"}
	cs, g, ck := classesFixture(t, keys...)
	g.SetClass("bkt", keys[1], backend.ClassGlacier, "")
	chunks := []Chunk{{Key: keys[0], Kind: PlainTar, Size: 10}, {Key: keys[1], Kind: PlainTar, Size: 10}}
	set := NewSet(cs, "bkt", chunks, Options{Classes: NewClasses(cs, "bkt", ClassOptions{Now: ck.Now})})
	defer set.Close()
	ctx := context.Background()
	// Nothing known yet: the GET goes out and the store refuses it.
	if _, err := set.rangeGet(ctx, 1, 0, 5); !errors.Is(err, backend.ErrArchived) || cs.n("range") != 1 {
		t.Fatalf("first read: %v (%d GETs)", err, cs.n("range"))
	}
	// Now known: refused before fetching.
	if err := set.CheckReadable(ctx, 1); !errors.Is(err, backend.ErrArchived) {
		t.Fatal(err)
	}
	if _, err := set.rangeGet(ctx, 1, 0, 5); !errors.Is(err, backend.ErrArchived) || cs.n("range") != 1 {
		t.Fatalf("second read: %v (%d GETs)", err, cs.n("range"))
	}
	b, err := set.rangeGet(ctx, 0, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(b)
	b.Close()
	if string(got) != "01234" {
		t.Fatalf("%q", got)
	}
}

// TestClassesNonStandardCount: AnyNonStandard follows every change of a
// known class (listing, HEAD, refusal, a missing object).
func TestClassesNonStandardCount(t *testing.T) {
	c := NewClasses(nil, "bkt", ClassOptions{})
	steps := []struct {
		do   func()
		want bool
	}{
		{func() { c.Observe(backend.ObjectInfo{Key: "a", StorageClass: "STANDARD"}) }, false},
		{func() { c.Observe(backend.ObjectInfo{Key: "a", StorageClass: "GLACIER"}) }, true},
		{func() { c.Observe(backend.ObjectInfo{Key: "b", StorageClass: "STANDARD_IA"}) }, true},
		{func() { c.Observe(backend.ObjectInfo{Key: "a", StorageClass: "STANDARD"}) }, true},
		{func() { c.Observe(backend.ObjectInfo{Key: "b", StorageClass: "STANDARD"}) }, false},
		{func() { c.Observe(backend.ObjectInfo{Key: "b", StorageClass: ""}) }, false}, // no classes: ignored
		{func() { c.Refused("c", &backend.ArchivedError{}) }, true},
		{func() { c.Observe(backend.ObjectInfo{Key: "c", StorageClass: "STANDARD"}) }, false},
	}
	for i, st := range steps {
		st.do()
		if got := c.AnyNonStandard(); got != st.want {
			t.Fatalf("step %d: AnyNonStandard = %v", i, got)
		}
	}
	if oc := c.Cached("c"); oc.Class != "STANDARD" {
		t.Fatalf("c: %+v", oc)
	}
}

// TestClassesLoadAhead: a prefix listed ahead (while the manifests were
// read) is not listed again by Load and teaches the same classes; a
// prefix listed ahead that failed, or that was not listed ahead, is
// listed by Load itself.
func TestClassesLoadAhead(t *testing.T) {
	keys := []string{"a/uploads/u2/chunks/c1", "a/uploads/u2/chunks/c2", "a/uploads/u1/chunks/c0"}
	cs, g, ck := classesFixture(t, keys...)
	g.SetClass("bkt", "a/uploads/u2/chunks/c2", backend.ClassGlacier, "")
	g.SetPrefixClass("bkt", "a/uploads/u1/", backend.ClassDeepArchive, "")
	ctx := context.Background()

	ahead := ListAhead(ctx, cs, "bkt", UploadPrefixOf("a/uploads/u2/manifest.json.gz"))
	if ahead.Prefix != "a/uploads/u2/" || len(ahead.Objects) != 2 || cs.n("list") != 1 {
		t.Fatalf("listed ahead %q: %d objects, %d listings", ahead.Prefix, len(ahead.Objects), cs.n("list"))
	}
	c := NewClasses(cs, "bkt", ClassOptions{Now: ck.Now})
	if err := c.Load(ctx, keys, ahead); err != nil {
		t.Fatal(err)
	}
	if cs.n("list") != 2 {
		t.Errorf("%d listings in all, want 2 (u2 ahead, u1 by Load)", cs.n("list"))
	}
	for k, want := range map[string]string{keys[0]: "STANDARD", keys[1]: "GLACIER", keys[2]: "DEEP_ARCHIVE"} {
		if oc := c.Cached(k); oc.Class != want || oc.Size != 10 {
			t.Errorf("%s: %+v, want %s", k, oc, want)
		}
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	failed := ListAhead(cancelled, cs, "bkt", "a/uploads/u1/")
	before := cs.n("list")
	if err := NewClasses(cs, "bkt", ClassOptions{Now: ck.Now}).Load(ctx, keys[2:], failed); err != nil {
		t.Fatal(err)
	}
	if cs.n("list") != before+1 {
		t.Errorf("a failed listing ahead was used: %d listings by Load", cs.n("list")-before)
	}
}

// TestClassesMissingObjectForgetsClass: an archived object that is gone
// when its stale state is refreshed (HEAD answers 404) no longer counts as
// non-STANDARD, and its class is unknown again.
func TestClassesMissingObjectForgetsClass(t *testing.T) {
	key := "a/uploads/u1/chunks/c0"
	dir := t.TempDir()
	path := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	ck := &clock{t: time.Date(2032, 2, 2, 0, 0, 0, 0, time.UTC)}
	g := faults.NewGlacier(faults.GlacierConfig{Now: ck.Now})
	g.SetClass("bkt", key, backend.ClassGlacier, "")
	c := NewClasses(g.Store(backend.NewFileStore(dir)), "bkt", ClassOptions{RestoreTTL: time.Minute, Now: ck.Now})
	ctx := context.Background()
	if err := c.Load(ctx, []string{key}); err != nil {
		t.Fatal(err)
	}
	if !c.AnyNonStandard() || c.Cached(key).Class != backend.ClassGlacier {
		t.Fatalf("after Load: %+v", c.Cached(key))
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	ck.Add(2 * time.Minute) // the restore state is stale: the next need HEADs
	oc, err := c.Object(ctx, key, false)
	if err != nil {
		t.Fatal(err)
	}
	if oc.Class != "" || c.AnyNonStandard() {
		t.Fatalf("after a 404: %+v, AnyNonStandard %v", oc, c.AnyNonStandard())
	}
}
