package catalog

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// TestStartOpensBoundedGoroutines: the start's background opens run on
// at most OpenConcurrency goroutines, however many uploads are found
// (an uploader decides how many): the others wait in a queue, not each
// on a goroutine of its own blocked for a slot; every one opens.
func TestStartOpensBoundedGoroutines(t *testing.T) {
	dir := t.TempDir()
	const n, bound = 120, 2
	for i := range n {
		packUpload(t, dir, fmt.Sprintf("g%03d", i), time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
	}
	gs := newGateStore(backend.NewFileStore(dir))
	before := runtime.NumGoroutine()
	cm := NewManager(Config{Store: gs, Discover: []string{"s3://lake/base"}, OpenConcurrency: bound,
		OpenWait: 50 * time.Millisecond, RetireGrace: time.Hour, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	if err := cm.Scan(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first opens to reach the store", func() bool { n, _, _ := gs.state(); return n == bound })
	if grew := runtime.NumGoroutine() - before; grew > 4*bound+8 {
		t.Fatalf("%d goroutines more while %d uploads wait to open %d at a time", grew, n, bound)
	}
	close(gs.gate)
	waitFor(t, "every open", cm.Ready)
	for i := range n {
		name := fmt.Sprintf("g%03d", i)
		if _, ok, err := cm.Catalog().Bucket(context.Background(), name); !ok || err != nil {
			t.Fatalf("bucket %s: %v", name, err)
		}
	}
}
