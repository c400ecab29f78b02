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

// stalledVersionLists stalls the first stall listings of a versions
// folder (a history build's) until their context ends, as a store that
// never answers (or pages forever) would; later listings are answered.
type stalledVersionLists struct {
	backend.Store
	mu    sync.Mutex
	stall int
}

func (s *stalledVersionLists) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	if strings.HasSuffix(prefix, "/v/") {
		s.mu.Lock()
		stall := s.stall > 0
		s.stall--
		s.mu.Unlock()
		if stall {
			<-ctx.Done()
			return ctx.Err()
		}
	}
	return s.Store.List(ctx, bucket, prefix, fn)
}

// TestDatasetHistoryListingDeadline: a history build's listing of the
// versions folder ends within --open-timeout, so builds whose listing the
// store never answers cannot hold the historyBuildsMax turns for good:
// they fail with a 503 (the next request builds again) and every bucket's
// history is built. The old code waited for the listing without a
// deadline: two stalled listings kept every other dataset's history from
// ever being built.
func TestDatasetHistoryListingDeadline(t *testing.T) {
	d := publishHistory(t)
	store := &stalledVersionLists{Store: backend.NewFileStore(d.dir), stall: historyBuildsMax}
	var aliases []Alias
	for i := range historyBuildsMax + 1 {
		aliases = append(aliases, Alias{Name: fmt.Sprintf("ocean%d", i), Target: "s3://lake/ocean@current"})
	}
	cm := NewManager(Config{Store: store, Aliases: aliases, WaitOpen: true, RetireGrace: time.Hour,
		OpenWait: 20 * time.Millisecond, OpenTimeout: 300 * time.Millisecond})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	for _, al := range aliases {
		if _, _, err := cm.History(ctx, al.Name, bucketArchive(t, cm, al.Name), true); !errors.Is(err, ErrHistoryBuilding) {
			t.Fatalf("%s: %v, want ErrHistoryBuilding", al.Name, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, al := range aliases {
		a := bucketArchive(t, cm, al.Name)
		for {
			h, _, err := cm.History(ctx, al.Name, a, true)
			if err == nil {
				checkHistory(t, h, histWant{"a.txt": {"V4", "V2", "V1"}, "b.txt": {"V1"}, "d.txt": {"V4", "DM3", "V1"}, "e.txt": {"DM4", "V2"}})
				break
			}
			if !errors.Is(err, backend.ErrUnavailable) {
				t.Fatalf("%s: %v, want a 503 (ErrUnavailable)", al.Name, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: history not built in 10 s with %d listings stalled (--open-timeout 300ms): %v", al.Name, historyBuildsMax, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
