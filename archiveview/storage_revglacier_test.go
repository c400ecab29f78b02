package archiveview

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// s3ListingStore is the Glacier model listed as S3's ListObjectsV2 lists:
// an entry carries the storage class but never the Intelligent-Tiering
// access tier (only HEAD's x-amz-archive-status and a refused GET tell
// it). It counts HEADs and RestoreObjects.
type s3ListingStore struct {
	*faults.GlacierStore
	mu       sync.Mutex
	stats    int
	restores int
}

func (s *s3ListingStore) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	return s.GlacierStore.List(ctx, bucket, prefix, func(oi backend.ObjectInfo) error {
		oi.AccessTier = ""
		return fn(oi)
	})
}

func (s *s3ListingStore) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	s.mu.Lock()
	s.stats++
	s.mu.Unlock()
	return s.GlacierStore.Stat(ctx, bucket, key)
}

func (s *s3ListingStore) Restore(ctx context.Context, bucket, key string, req backend.RestoreRequest) (backend.RestoreResult, error) {
	s.mu.Lock()
	s.restores++
	s.mu.Unlock()
	return s.GlacierStore.Restore(ctx, bucket, key, req)
}

func (s *s3ListingStore) counts() (stats, restores int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats, s.restores
}

// TestStorageIntelligentTieringTierFromHead: an Intelligent-Tiering object
// in an archive access tier, learned from a listing (which names the class
// but not the tier, as on S3), is HEADed once when a HEAD, a listing with
// RestoreStatus or a restore needs its storage: it reports
// ARCHIVE_ACCESS, can be restored (one RestoreObject, no Days), and a
// plain read of it still needs no HEAD (S3's refusal tells the tier). On
// the code before, the file was "INTELLIGENT_TIERING, readable" until a GET
// had been refused, and RestoreObject answered ErrNotArchived (403
// InvalidObjectState), so it could not be restored through wharf.
func TestStorageIntelligentTieringTierFromHead(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"it.bin": rvRandom(5, 7000), "fr.bin": rvRandom(6, 3000)}
	res := rvPack(t, dir, files, cargopack.Options{Prefix: "p", UploadID: "u1", Direct: true})
	ck := &stClock{t: time.Date(2033, 3, 3, 0, 0, 0, 0, time.UTC)}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: 30 * time.Minute, Now: ck.Now})
	g.SetClass(rvBucket, "p/uploads/u1/files/it.bin", backend.ClassIntelligentTiering, backend.TierArchiveAccess)
	g.SetClass(rvBucket, "p/uploads/u1/files/fr.bin", backend.ClassIntelligentTiering, "")
	store := &s3ListingStore{GlacierStore: g.Store(backend.NewFileStore(dir))}
	ctx := context.Background()
	a, err := Open(ctx, store, rvBucket, res.ManifestKey, Options{StorageClasses: true, RestoreTTL: time.Minute, clock: ck.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	it, fr := a.mustStat(t, "it.bin"), a.mustStat(t, "fr.bin")

	st, err := a.FileStorage(ctx, it)
	if err != nil {
		t.Fatal(err)
	}
	if st.Class != backend.ClassIntelligentTiering || st.Tier != backend.TierArchiveAccess || !st.Archived || st.Readable {
		t.Fatalf("storage of it.bin: class %s tier %q archived %v readable %v; want INTELLIGENT_TIERING in ARCHIVE_ACCESS, not readable",
			st.Class, st.Tier, st.Archived, st.Readable)
	}
	heads, _ := store.counts()
	if heads != 1 {
		t.Fatalf("%d HEADs for it.bin's storage, want 1", heads)
	}
	if _, err := a.FileStorage(ctx, it); err != nil {
		t.Fatal(err)
	}
	if st, err := a.FileStorage(ctx, fr); err != nil || st.Archived || !st.Readable || st.Tier != "" {
		t.Fatalf("storage of fr.bin (frequent tier): %+v %v", st, err)
	}
	if _, err := a.FileStorage(ctx, fr); err != nil {
		t.Fatal(err)
	}
	if heads, _ := store.counts(); heads != 2 {
		t.Fatalf("%d HEADs after asking each file's storage twice, want 2 (one per object; the tier is then known)", heads)
	}

	rep, err := a.Restore(ctx, it, backend.RestoreRequest{Tier: backend.RetrievalBulk})
	if err != nil || rep.Result != backend.RestoreStarted {
		t.Fatalf("restore of it.bin: %+v, %v; want started", rep, err)
	}
	if _, restores := store.counts(); restores != 1 || len(g.Started()) != 1 {
		t.Fatalf("%d RestoreObjects, started %v", restores, g.Started())
	}
	if _, err := a.Restore(ctx, fr, backend.RestoreRequest{}); !errors.Is(err, ErrNotArchived) {
		t.Fatalf("restore of fr.bin (frequent tier): %v, want ErrNotArchived", err)
	}

	// A plain read of an Intelligent-Tiering object costs no HEAD: a fresh
	// archive over the same model reads fr.bin and has it.bin refused.
	ck.Add(time.Hour) // it.bin's restore finished: back in the frequent tier
	b, err := Open(ctx, store, rvBucket, res.ManifestKey, Options{StorageClasses: true, RestoreTTL: time.Minute, clock: ck.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	before, _ := store.counts()
	for _, k := range []string{"fr.bin", "it.bin"} {
		f := b.mustStat(t, k)
		if got := vReadAll(t, b, f, 0, f.Size); !bytes.Equal(got, files[k]) {
			t.Fatalf("%s read differs", k)
		}
	}
	if after, _ := store.counts(); after != before {
		t.Fatalf("%d HEADs for plain reads of Intelligent-Tiering files", after-before)
	}
}

// TestRestoreStoreSaysNotArchived: a file whose every archived object the
// store answers needs no restore (moved to a readable class since its
// state was learned) is ErrNotArchived (403 InvalidObjectState), as S3
// answers, not "already restored" (200) as on the code before.
func TestRestoreStoreSaysNotArchived(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"cold.bin": rvRandom(7, 5000)}
	res := rvPack(t, dir, files, cargopack.Options{Prefix: "p", UploadID: "u1", Direct: true})
	a, g, _ := stOpen(t, dir, res.ManifestKey, func(g *faults.Glacier) {
		g.SetClass(rvBucket, "p/uploads/u1/files/cold.bin", backend.ClassGlacier, "")
	})
	ctx := context.Background()
	f := a.mustStat(t, "cold.bin")
	if st, err := a.FileStorage(ctx, f); err != nil || !st.Archived {
		t.Fatalf("storage: %+v %v", st, err)
	}
	g.SetClass(rvBucket, "p/uploads/u1/files/cold.bin", backend.ClassStandard, "") // copied in place to STANDARD
	rep, err := a.Restore(ctx, f, backend.RestoreRequest{Days: 1})
	if !errors.Is(err, ErrNotArchived) {
		t.Fatalf("restore: %+v, %v; want ErrNotArchived", rep, err)
	}
}
