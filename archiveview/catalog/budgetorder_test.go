package catalog

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// slowManifestGets delays every manifest GET.
type slowManifestGets struct {
	backend.Store
	delay time.Duration
}

func (s slowManifestGets) Get(ctx context.Context, b, k string) (io.ReadCloser, backend.ObjectInfo, error) {
	if strings.Contains(k, "/manifest.") {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, backend.ObjectInfo{}, ctx.Err()
		}
	}
	return s.Store.Get(ctx, b, k)
}

// TestIndexMemoryNotHeldWhileQueued: an open queued for an open slot
// holds no index memory, so opens that wait for memory are not failed by
// opens that are merely queued. Here the budget holds two reservations,
// one open runs at a time (each well within --open-timeout) and six
// uploads are discovered: all six open. Before, each open reserved its
// memory and then queued for a slot, so the reservations were held by
// queued opens, and the later uploads' memory waits (counting every open
// queued ahead of them) passed the open timeout: "index memory budget
// exhausted" with nearly nothing built.
func TestIndexMemoryNotHeldWhileQueued(t *testing.T) {
	dir := t.TempDir()
	const n = 6
	for i := range n {
		packUpload(t, dir, fmt.Sprintf("q%02d", i), time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC))
	}
	store := slowManifestGets{Store: backend.NewFileStore(dir), delay: 400 * time.Millisecond}
	cm := NewManager(Config{Store: store, Discover: []string{"s3://lake/base"}, OpenConcurrency: 1, WaitOpen: true,
		IndexMemory: 2*minReserveFiles*IndexBytesPerFile + 1<<20, OpenTimeout: 1500 * time.Millisecond,
		RetireGrace: time.Hour, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	if err := cm.Scan(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("q%02d", i)
		if _, ok, err := cm.Catalog().Bucket(context.Background(), name); !ok || err != nil {
			t.Errorf("bucket %s: %v", name, err)
		}
	}
}
