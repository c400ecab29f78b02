package catalog_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestBrokenUploadNotReread: a discovered upload whose manifest failed to
// parse was fetched and parsed again at every --rescan, though the
// listing showed the same object (key and ETag). The failure is now kept
// while the object is unchanged (it is not read again, and /-/archives
// says so); a changed object is tried again, and a failure of the store
// (unavailable) is retried at the next rescan as before.
func TestBrokenUploadNotReread(t *testing.T) {
	dir := t.TempDir()
	key := "base/uploads/up0001/manifest.json"
	p := filepath.Join(dir, "lake", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int64
	var mu sync.Mutex
	down := false
	st := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if r.Op != "get" && r.Op != "range" || r.Key != key {
			return faults.Fault{}
		}
		gets.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if down {
			return faults.Fault{Kind: faults.FaultError}
		}
		return faults.Fault{}
	}})
	cm := catalog.NewManager(catalog.Config{Store: st, Discover: []string{"s3://lake/base"},
		WaitOpen: true, RetireGrace: time.Hour, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	ctx := context.Background()
	failed := func(when string) catalog.BucketEntry {
		t.Helper()
		for _, b := range cm.Page().Buckets {
			if b.State == "failed" {
				return b
			}
		}
		t.Fatalf("%s: no failed bucket on the page: %+v", when, cm.Page().Buckets)
		return catalog.BucketEntry{}
	}
	scan := func(initial bool) int64 {
		t.Helper()
		before := gets.Load()
		if err := cm.Scan(ctx, initial); err != nil {
			t.Fatal(err)
		}
		return gets.Load() - before
	}
	if n := scan(true); n == 0 {
		t.Fatal("the first scan did not read the manifest")
	}
	if b := failed("first scan"); !strings.Contains(b.Retry, "changes") {
		t.Errorf("first scan: retry %q, want it to say the manifest is read again when it changes", b.Retry)
	}
	for i := range 3 {
		if n := scan(false); n != 0 {
			t.Errorf("rescan %d: the unchanged broken manifest was read %d times again, want 0", i, n)
		}
		b := failed("rescan")
		if !strings.Contains(b.Error, "manifest") || !strings.Contains(b.Retry, "changes") {
			t.Errorf("rescan %d: failed bucket error %q retry %q, want the parse error kept and retry saying it waits for the object to change", i, b.Error, b.Retry)
		}
	}
	// A changed object (another size and mtime: another ETag) is read again.
	if err := os.WriteFile(p, []byte("still not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Now(), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := scan(false); n == 0 {
		t.Error("a changed manifest was not read again")
	}
	// A failure of the store is not the manifest's: the next rescan retries.
	if err := os.WriteFile(p, []byte("a third broken manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	down = true
	mu.Unlock()
	scan(false)
	mu.Lock()
	down = false
	mu.Unlock()
	if n := scan(false); n == 0 {
		t.Error("after the store was unavailable, the rescan did not read the manifest again")
	}
}
