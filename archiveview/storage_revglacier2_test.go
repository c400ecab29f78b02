package archiveview

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// peakStatStore counts the HEADs in flight at once (each takes 10 ms).
type peakStatStore struct {
	backend.Store
	mu        sync.Mutex
	now, peak int
	stats     int
}

func (s *peakStatStore) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	s.mu.Lock()
	s.now++
	s.stats++
	s.peak = max(s.peak, s.now)
	s.mu.Unlock()
	time.Sleep(10 * time.Millisecond)
	defer func() { s.mu.Lock(); s.now--; s.mu.Unlock() }()
	return s.Store.Stat(ctx, bucket, key)
}

// manyChunkFile packs big (split into parts over many chunks) and returns
// the directory, the manifest key and the distinct chunk keys of big.
func manyChunkFile(t *testing.T) (dir, key string, chunks []string) {
	t.Helper()
	dir = t.TempDir()
	files := map[string][]byte{"big": rvRandom(9, 96<<10), "small": rvText(4, 100)}
	res := rvPack(t, dir, files, cargopack.Options{Prefix: "pre", UploadID: "u1", FrameSize: 2 << 10, ChunkSize: 2 << 10, SplitSize: 2 << 10})
	keys, _ := stPartKeys(res.Manifest, "pre", "big")
	chunks = stDistinct(keys)
	if len(chunks) < 32 {
		t.Fatalf("test setup: big lies in %d chunks, want 32 or more", len(chunks))
	}
	return dir, res.ManifestKey, chunks
}

// TestFileStorageHeadsInParallel: the storage of one file over many
// archived chunks whose restore state is stale (a HEAD or GET of it, a
// restore) refreshes them concurrently, as a listing page does
// (PrepareStorage), not one HEAD after another: on the code before, a HEAD
// of a file over 10,000 archived chunks made 10,000 HEADs in a row (minutes
// of a concurrency slot) every --restore-status-ttl.
func TestFileStorageHeadsInParallel(t *testing.T) {
	dir, key, chunks := manyChunkFile(t)
	ck := &stClock{t: time.Date(2033, 3, 3, 0, 0, 0, 0, time.UTC)}
	g := faults.NewGlacier(faults.GlacierConfig{Now: ck.Now})
	for _, k := range chunks {
		g.SetClass(rvBucket, k, backend.ClassGlacier, "")
	}
	ps := &peakStatStore{Store: g.Store(backend.NewFileStore(dir))}
	a, err := Open(context.Background(), ps, rvBucket, key, Options{StorageClasses: true, RestoreTTL: time.Minute, clock: ck.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	big := a.mustStat(t, "big")
	st, err := a.FileStorage(context.Background(), big)
	if err != nil || !st.Archived || len(st.Objects) != len(chunks) {
		t.Fatalf("storage of big: %d objects, archived %v, %v", len(st.Objects), st.Archived, err)
	}
	for i, o := range st.Objects {
		if o.Key != chunks[i] || !o.RestoreKnown {
			t.Fatalf("object %d: %+v, want %s with its restore state", i, o.ObjectClass, chunks[i])
		}
	}
	ps.mu.Lock()
	stats, peak := ps.stats, ps.peak
	ps.mu.Unlock()
	if stats != len(chunks) {
		t.Fatalf("%d HEADs for %d archived chunks", stats, len(chunks))
	}
	if peak < 2 || peak > maxStorageHeads {
		t.Fatalf("at most %d HEADs at once for %d stale chunks; want 2 to %d", peak, len(chunks), maxStorageHeads)
	}
}
