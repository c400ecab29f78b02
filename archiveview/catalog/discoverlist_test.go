package catalog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
