package catalog

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// slowManifests delays every GET of a version's manifest and records how
// many were in flight at most.
type slowManifests struct {
	backend.Store
	delay time.Duration

	mu         sync.Mutex
	now, most  int
	manifests  int
	afterStart bool // count only once set (the scan's open is not the history's)
}

func (s *slowManifests) Get(ctx context.Context, b, k string) (io.ReadCloser, backend.ObjectInfo, error) {
	if !strings.Contains(k, "/v/") || !strings.HasSuffix(k, "manifest.json.gz") {
		return s.Store.Get(ctx, b, k)
	}
	s.mu.Lock()
	counted := s.afterStart
	if counted {
		s.now++
		s.manifests++
		s.most = max(s.most, s.now)
	}
	s.mu.Unlock()
	defer func() {
		if counted {
			s.mu.Lock()
			s.now--
			s.mu.Unlock()
		}
	}()
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, backend.ObjectInfo{}, ctx.Err()
	}
	return s.Store.Get(ctx, b, k)
}

func (s *slowManifests) start() {
	s.mu.Lock()
	s.afterStart = true
	s.mu.Unlock()
}

func (s *slowManifests) stats() (most, manifests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most, s.manifests
}

// TestDatasetHistoryOpensAhead: a history's build opens its older
// versions two at a time (historyOpenAhead), never more, with the same
// history as one at a time; with an index budget that fits one open's
// reservation only, the opens wait for each other in the walk's order
// and the build completes well within the open timeout (no open waits
// for memory a later one holds). With the old build (one at a time) the
// first case saw 1 manifest GET in flight at most.
func TestDatasetHistoryOpensAhead(t *testing.T) {
	want := histWant{
		"a.txt": {"V4", "V2", "V1"},
		"b.txt": {"V1"},
		"d.txt": {"V4", "DM3", "V1"},
		"e.txt": {"DM4", "V2"},
	}
	for _, c := range []struct {
		name   string
		memory int64
		most   int
	}{
		{name: "budget for all", most: 2},
		{name: "budget for one open", memory: minReserveFiles*IndexBytesPerFile + 256<<10, most: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := publishHistory(t)
			store := &slowManifests{Store: backend.NewFileStore(d.dir), delay: 150 * time.Millisecond}
			cm := NewManager(Config{Store: store, Aliases: []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}}, WaitOpen: true,
				RetireGrace: time.Hour, IndexMemory: c.memory, OpenTimeout: 20 * time.Second, OpenWait: time.Minute})
			defer cm.CloseAll()
			ctx := context.Background()
			if err := cm.Scan(ctx, true); err != nil {
				t.Fatal(err)
			}
			a := bucketArchive(t, cm, "ocean")
			store.start()
			t0 := time.Now()
			h, _, err := cm.History(ctx, "ocean", a, true)
			took := time.Since(t0)
			if err != nil || h == nil {
				t.Fatalf("history %v: %v", h, err)
			}
			checkHistory(t, h, want)
			most, n := store.stats()
			if n != 3 || most != c.most {
				t.Fatalf("%d manifest GETs, %d in flight at most; want 3, %d", n, most, c.most)
			}
			if took > 10*time.Second {
				t.Fatalf("the build took %v: an open waited for memory", took)
			}
			if used, peak, limit := cm.IndexMemory(); peak > limit || used > limit {
				t.Fatalf("index memory used %d, peak %d, limit %d", used, peak, limit)
			}
			t.Logf("built in %v, %d manifest GETs in flight at most", took.Round(time.Millisecond), most)
		})
	}
}

// TestDatasetHistoryAheadFallback: an open ahead that fails for index
// memory (here: refused whenever another older version is held) is
// retried with nothing held, one at a time from there, and the history
// is the whole one; without the fallback it ended at V3 ("did not open"; checked).
func TestDatasetHistoryAheadFallback(t *testing.T) {
	d := publishHistory(t)
	store := backend.NewFileStore(d.dir)
	ctx := context.Background()
	open := func(key string) (*archiveview.Archive, error) {
		return archiveview.Open(ctx, store, dsBucket, key, archiveview.Options{AllowKeyPrefixes: []string{dsPrefix + "/v/"}})
	}
	cur, err := open(d.mans[3])
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var (
		mu                   sync.Mutex
		held, most, refusals int
	)
	h, err := BuildHistory(ctx, HistoryParams{
		Store: store, Ref: DatasetRef{Bucket: dsBucket, Prefix: dsPrefix}, Archive: cur, Previous: histIDs[2], Ahead: 2,
		Current: HistoryVersion{ID: histIDs[3], ManifestKey: d.mans[3]},
		Open: func(ctx context.Context, v HistoryVersion) (*archiveview.Archive, error) {
			mu.Lock()
			if held > 0 {
				refusals++
				mu.Unlock()
				return nil, fmt.Errorf("version %s: %w", v.ID, ErrIndexMemory)
			}
			held++
			most = max(most, held)
			mu.Unlock()
			return open(v.ManifestKey)
		},
		Close: func(a *archiveview.Archive, _ bool) {
			a.Close()
			time.Sleep(20 * time.Millisecond) // held a while: the next open ahead finds it held
			mu.Lock()
			held--
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	checkHistory(t, h, histWant{
		"a.txt": {"V4", "V2", "V1"},
		"b.txt": {"V1"},
		"d.txt": {"V4", "DM3", "V1"},
		"e.txt": {"DM4", "V2"},
	})
	mu.Lock()
	defer mu.Unlock()
	if refusals == 0 || held != 0 || most != 1 {
		t.Fatalf("%d refusals (want some: the test opened nothing ahead), %d held at the end, %d at most", refusals, held, most)
	}
}
