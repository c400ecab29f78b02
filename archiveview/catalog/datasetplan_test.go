package catalog

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// slowPointers makes every pointer read (ReadSmall) take a while,
// recording the most in flight at once.
type slowPointers struct {
	backend.Store
	mu             sync.Mutex
	inflight, most int
}

func (s *slowPointers) ReadSmall(ctx context.Context, b, k string, limit int64, inm string) ([]byte, backend.ObjectInfo, bool, error) {
	s.mu.Lock()
	s.inflight++
	s.most = max(s.most, s.inflight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	select {
	case <-time.After(30 * time.Millisecond):
	case <-ctx.Done():
		return nil, backend.ObjectInfo{}, false, ctx.Err()
	}
	return backend.ReadSmall(ctx, s.Store, b, k, limit, inm)
}

func (s *slowPointers) peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

// TestDatasetPointerReadsBounded: a scan reads the pointers of many
// dataset buckets (an uploader can publish any number of CURRENT objects
// under a discovery root) at most OpenConcurrency at a time, never one
// request per dataset at once (they would take the store connections
// the clients' reads need); every bucket is still served.
func TestDatasetPointerReadsBounded(t *testing.T) {
	d := publishDataset(t)
	const n, bound = 16, 3
	var aliases []Alias
	for i := range n {
		aliases = append(aliases, Alias{Name: fmt.Sprintf("ocean-%02d", i), Target: "s3://lake/ocean@current"})
	}
	store := &slowPointers{Store: backend.NewFileStore(d.dir)}
	cm := NewManager(Config{Store: store, Aliases: aliases, OpenConcurrency: bound, WaitOpen: true,
		RetireGrace: time.Hour, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	ctx := context.Background()
	for _, initial := range []bool{true, false} {
		if err := cm.Scan(ctx, initial); err != nil {
			t.Fatal(err)
		}
	}
	if most := store.peak(); most > bound {
		t.Fatalf("%d pointer reads in flight at once, want at most %d (OpenConcurrency)", most, bound)
	}
	for _, al := range aliases {
		checkTree(t, bucketArchive(t, cm, al.Name), v1Files)
	}
}
