package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// strayList is a store whose listings also return keys outside the
// prefix asked for (an S3-compatible server's bug, a proxy in front).
type strayList struct {
	backend.Store
	stray []string
}

func (s strayList) List(ctx context.Context, b, p string, fn func(backend.ObjectInfo) error) error {
	for _, k := range s.stray {
		if err := fn(backend.ObjectInfo{Key: k, ETag: "e", Size: 100, LastModified: time.Now()}); err != nil {
			return err
		}
	}
	return s.Store.List(ctx, b, p, fn)
}

// TestDiscoverStrayKeys: a listed key that does not lie under the
// prefix listed is skipped with a reason naming it, never classified as
// if it did (served as an upload of the root) and never a crash (a key
// shorter than the prefix).
func TestDiscoverStrayKeys(t *testing.T) {
	dir := t.TempDir()
	packUpload(t, dir, "real", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := strayList{Store: backend.NewFileStore(dir), stray: []string{"b", "other/uploads/x/manifest.json.gz", "basement/CURRENT"}}
	var d Discovery
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Discover panicked: %v", r)
			}
		}()
		d, err = Discover(context.Background(), store, "lake", "base")
	}()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Uploads) != 1 || d.Uploads[0].ManifestKey != "base/uploads/real/manifest.json.gz" || len(d.Datasets) != 0 {
		t.Fatalf("uploads %+v, datasets %+v: want only base/uploads/real", d.Uploads, d.Datasets)
	}
	skipped := map[string]string{}
	for _, s := range d.Skipped {
		skipped[s.Key] = s.Reason
	}
	for _, k := range store.stray {
		if !strings.Contains(skipped[k], "not under the prefix listed") {
			t.Errorf("stray key %q: skipped %q", k, skipped[k])
		}
	}
}

// TestHistoryListingStrayKeys: the history build's listing of DATASET/v/
// takes no key outside it as a version (nor crashes on a key shorter than
// the prefix, as the code before did: slice bounds out of range).
func TestHistoryListingStrayKeys(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "lake"), 0o755); err != nil {
		t.Fatal(err)
	}
	ref := DatasetRef{Bucket: "lake", Prefix: "datasets/sea"}
	store := strayList{Store: backend.NewFileStore(dir), stray: []string{"d", "other/v/20260101T000000Z-aaaaaa/uploads/u/manifest.json.gz"}}
	var l versionListing
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("listVersions panicked: %v", r)
			}
		}()
		l, err = listVersions(context.Background(), store, ref)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.ids) != 0 || len(l.manifests) != 0 {
		t.Fatalf("stray keys listed as versions: ids %v, manifests %v", l.ids, l.manifests)
	}
}

// stalledList delivers the real listing's first object, then nothing
// more until its context ends (a store trickling a page, a proxy holding
// the connection), while stall is set.
type stalledList struct {
	backend.Store
	stall atomic.Bool
}

func (s *stalledList) List(ctx context.Context, b, p string, fn func(backend.ObjectInfo) error) error {
	if !s.stall.Load() {
		return s.Store.List(ctx, b, p, fn)
	}
	first := true
	return s.Store.List(ctx, b, p, func(oi backend.ObjectInfo) error {
		if !first {
			<-ctx.Done()
			return ctx.Err()
		}
		first = false
		return fn(oi)
	})
}

// TestScanListingStallDeadline: a discovery listing that stops listing
// objects ends within --open-timeout of the last one, so a stalled store
// cannot hold the start (or every later rescan, which waits for the scan
// lock) for good: the scan fails with an error naming the root, a
// rescan keeps the catalog it had, and the next scan of a store that
// answers again succeeds. The old code waited for the listing with only
// the caller's context.
func TestScanListingStallDeadline(t *testing.T) {
	dir := t.TempDir()
	packLake(t, dir, 2)
	store := &stalledList{Store: backend.NewFileStore(dir)}
	store.stall.Store(true)
	cm := NewManager(Config{Store: store, Discover: []string{"s3://lake/base"}, WaitOpen: true,
		OpenTimeout: 200 * time.Millisecond, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	scan := func(initial bool) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t0 := time.Now()
		err := cm.Scan(ctx, initial)
		if ctx.Err() != nil {
			t.Fatalf("scan still listing after %s (--open-timeout 200ms): %v", time.Since(t0), err)
		}
		return err
	}
	if err := scan(true); err == nil || !strings.Contains(err.Error(), "s3://lake/base") || !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("stalled start: %v, want an error naming s3://lake/base and wrapping ErrUnavailable", err)
	}
	store.stall.Store(false)
	if err := scan(false); err != nil {
		t.Fatalf("scan of an answering store: %v", err)
	}
	before := len(cm.Catalog().Entries())
	store.stall.Store(true)
	if err := scan(false); err == nil {
		t.Fatal("stalled rescan: no error")
	}
	if n := len(cm.Catalog().Entries()); n != before || n == 0 {
		t.Fatalf("after a stalled rescan: %d buckets, had %d", n, before)
	}
}
