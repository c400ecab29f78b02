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

// peakRestoreStore counts the RestoreObjects in flight at once (each takes
// 10 ms).
type peakRestoreStore struct {
	*faults.GlacierStore
	mu             sync.Mutex
	now, peak, all int
}

func (s *peakRestoreStore) Restore(ctx context.Context, bucket, key string, req backend.RestoreRequest) (backend.RestoreResult, error) {
	s.mu.Lock()
	s.now++
	s.all++
	s.peak = max(s.peak, s.now)
	s.mu.Unlock()
	time.Sleep(10 * time.Millisecond)
	defer func() { s.mu.Lock(); s.now--; s.mu.Unlock() }()
	return s.GlacierStore.Restore(ctx, bucket, key, req)
}

// TestRestoreObjectsInParallel: a restore of a file over many archived
// chunks sends their RestoreObjects at most 16 at once, each once, and
// reports them in the file's order. On the code before they went one
// after another: a file over thousands of chunks outlasted a client's
// read timeout (the AWS CLI's is 60 s), so its restore took several
// retries.
func TestRestoreObjectsInParallel(t *testing.T) {
	dir, key, chunks := manyChunkFile(t)
	ck := &stClock{t: time.Date(2033, 3, 3, 0, 0, 0, 0, time.UTC)}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour, Now: ck.Now})
	for _, k := range chunks {
		g.SetClass(rvBucket, k, backend.ClassDeepArchive, "")
	}
	ps := &peakRestoreStore{GlacierStore: g.Store(backend.NewFileStore(dir))}
	a, err := Open(context.Background(), ps, rvBucket, key, Options{StorageClasses: true, RestoreTTL: time.Minute, clock: ck.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rep, err := a.Restore(context.Background(), a.mustStat(t, "big"), backend.RestoreRequest{Days: 3, Tier: backend.RetrievalBulk})
	if err != nil || rep.Result != backend.RestoreStarted || len(rep.Objects) != len(chunks) {
		t.Fatalf("restore: %v, %v, %d objects; want %d started", rep.Result, err, len(rep.Objects), len(chunks))
	}
	for i, o := range rep.Objects {
		if o.Key != chunks[i] || !o.Sent || o.Result != backend.RestoreStarted {
			t.Fatalf("object %d: %s sent %v %v; want %s started", i, o.Key, o.Sent, o.Result, chunks[i])
		}
	}
	ps.mu.Lock()
	all, peak := ps.all, ps.peak
	ps.mu.Unlock()
	if all != len(chunks) || len(g.Started()) != len(chunks) {
		t.Fatalf("%d RestoreObjects (%d started) for %d chunks", all, len(g.Started()), len(chunks))
	}
	if peak < 2 || peak > 16 {
		t.Fatalf("at most %d RestoreObjects at once for %d chunks; want 2 to 16", peak, len(chunks))
	}
}
