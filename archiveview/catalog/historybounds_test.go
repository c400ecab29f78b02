package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// gatedVersionLists holds every listing of a versions folder (a history
// build's) until release is closed, counting those in flight.
type gatedVersionLists struct {
	backend.Store
	release chan struct{}

	mu                    sync.Mutex
	inFlight, most, lists int
}

func (g *gatedVersionLists) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	if !strings.HasSuffix(prefix, "/v/") {
		return g.Store.List(ctx, bucket, prefix, fn)
	}
	g.mu.Lock()
	g.inFlight++
	g.lists++
	g.most = max(g.most, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.List(ctx, bucket, prefix, fn)
}

func (g *gatedVersionLists) stats() (inFlight, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.most
}

// TestDatasetHistoryBuildsBounded: versioned requests for many dataset
// buckets at once build at most historyBuildsMax histories at a time
// (each build lists the dataset's versions and holds older versions'
// indexes); the rest wait their turn (the requests get 503 SlowDown after
// the open wait, as for one build) and are all built in the end.
func TestDatasetHistoryBuildsBounded(t *testing.T) {
	for _, buckets := range []int{historyBuildsMax + 1, 4 * historyBuildsMax} {
		t.Run(fmt.Sprint(buckets), func(t *testing.T) {
			d := publishHistory(t)
			store := &gatedVersionLists{Store: backend.NewFileStore(d.dir), release: make(chan struct{})}
			var aliases []Alias
			for i := range buckets {
				aliases = append(aliases, Alias{Name: fmt.Sprintf("ocean%d", i), Target: "s3://lake/ocean@current"})
			}
			cm := NewManager(Config{Store: store, Aliases: aliases, WaitOpen: true, RetireGrace: time.Hour, OpenWait: 20 * time.Millisecond})
			defer cm.CloseAll()
			ctx := context.Background()
			if err := cm.Scan(ctx, true); err != nil {
				t.Fatal(err)
			}
			for _, al := range aliases {
				a := bucketArchive(t, cm, al.Name)
				if _, _, err := cm.History(ctx, al.Name, a, true); !errors.Is(err, ErrHistoryBuilding) {
					t.Fatalf("%s: %v, want ErrHistoryBuilding", al.Name, err)
				}
			}
			// Let every build that may start start.
			deadline := time.Now().Add(5 * time.Second)
			for {
				if n, _ := store.stats(); n >= historyBuildsMax || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			if _, most := store.stats(); most != historyBuildsMax {
				t.Fatalf("%d histories built at once for %d buckets, want %d", most, buckets, historyBuildsMax)
			}
			close(store.release)
			for _, al := range aliases {
				a := bucketArchive(t, cm, al.Name)
				for {
					h, _, err := cm.History(ctx, al.Name, a, true)
					if err == nil {
						checkHistory(t, h, histWant{"a.txt": {"V4", "V2", "V1"}, "b.txt": {"V1"}, "d.txt": {"V4", "DM3", "V1"}, "e.txt": {"DM4", "V2"}})
						break
					}
					if !errors.Is(err, ErrHistoryBuilding) || time.Now().After(deadline.Add(10*time.Second)) {
						t.Fatalf("%s: %v", al.Name, err)
					}
				}
			}
			if _, most := store.stats(); most > historyBuildsMax {
				t.Fatalf("%d histories built at once, want at most %d", most, historyBuildsMax)
			}
		})
	}
}

// TestDatasetHistoryBuildsOnce: many first versioned requests for one
// bucket at once, and more while it builds, start one build (one listing
// of the versions folder) and all get the same history.
func TestDatasetHistoryBuildsOnce(t *testing.T) {
	d := publishHistory(t)
	store := &gatedVersionLists{Store: backend.NewFileStore(d.dir), release: make(chan struct{})}
	cm := NewManager(Config{Store: store, Aliases: []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}},
		WaitOpen: true, RetireGrace: time.Hour, OpenWait: 20 * time.Millisecond})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")
	const requests = 32
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := cm.History(ctx, "ocean", a, true)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrHistoryBuilding) {
			t.Fatalf("%v, want ErrHistoryBuilding", err)
		}
	}
	close(store.release)
	got := make(chan any, requests)
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(10 * time.Second)
			for {
				h, _, err := cm.History(ctx, "ocean", a, true)
				if err == nil {
					got <- h
					return
				}
				if !errors.Is(err, ErrHistoryBuilding) || time.Now().After(deadline) {
					got <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(got)
	var first any
	for h := range got {
		if err, ok := h.(error); ok {
			t.Fatal(err)
		}
		if first == nil {
			first = h
		}
		if h != first {
			t.Fatal("two histories for one bucket and version")
		}
	}
	if _, _, err := cm.History(ctx, "ocean", a, true); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	lists := store.lists
	store.mu.Unlock()
	if lists != 1 {
		t.Fatalf("%d listings of the versions folder for %d requests, want 1", lists, 2*requests)
	}
}
