package faults

import (
	"context"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// TestGlacierStoreListNoAccessTier: the model lists as S3's ListObjectsV2
// does, with each object's class and restore state but never the
// Intelligent-Tiering access tier (HEAD's x-amz-archive-status), which
// Stat and a refused read still report. GlacierHTTP's listing already gave
// none; the store model did, so code that took a listing's tier for known
// passed its tests and failed on S3.
func TestGlacierStoreListNoAccessTier(t *testing.T) {
	fs, _ := newGlacierFiles(t, "up/it", "up/deep")
	clock := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := NewGlacier(GlacierConfig{Now: clock.Now})
	g.SetClass("bkt", "up/it", backend.ClassIntelligentTiering, backend.TierDeepArchiveAccess)
	g.SetClass("bkt", "up/deep", backend.ClassDeepArchive, "")
	s := g.Store(fs)
	ctx := context.Background()
	got := map[string]backend.ObjectInfo{}
	if err := s.List(ctx, "bkt", "up/", func(oi backend.ObjectInfo) error { got[oi.Key] = oi; return nil }); err != nil {
		t.Fatal(err)
	}
	if oi := got["up/it"]; oi.StorageClass != backend.ClassIntelligentTiering || oi.AccessTier != "" {
		t.Fatalf("listed up/it: class %q tier %q; want INTELLIGENT_TIERING and no tier, as ListObjectsV2 lists", oi.StorageClass, oi.AccessTier)
	}
	if oi := got["up/deep"]; oi.StorageClass != backend.ClassDeepArchive {
		t.Fatalf("listed up/deep: %+v", oi)
	}
	if oi, err := s.Stat(ctx, "bkt", "up/it"); err != nil || oi.AccessTier != backend.TierDeepArchiveAccess {
		t.Fatalf("HEAD up/it: %+v %v; want its tier", oi, err)
	}
}
