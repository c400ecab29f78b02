package catalog

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// TestPageDuringStartOpens: /-/archives read while the start's opens end
// (an @latest alias resolving, a dataset version adopted) reads a report
// nobody writes any more: the report a scan publishes is never changed
// after (settle and the adoption publish a new one). Under -race the old
// code fails here (Page read the Sources map the start's settling wrote);
// in any build, a report captured before the opens ended is unchanged
// after, and the page then shows the resolved sources.
func TestPageDuringStartOpens(t *testing.T) {
	d := publishDataset(t)
	packUpload(t, d.dir, "up1", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gs := newGateStore(backend.NewFileStore(d.dir))
	cm := NewManager(Config{Store: gs, Discover: []string{"s3://lake/base"},
		Aliases:  []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}, {Name: "newest", Target: "s3://lake/base@latest"}},
		OpenWait: 50 * time.Millisecond, RetireGrace: time.Hour, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	if err := cm.Scan(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	rep := cm.report.Load()
	before := map[string]string{}
	for k, v := range rep.Sources {
		before[k] = v
	}
	skipped := len(rep.Skipped)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, b := range cm.Page().Buckets {
				_ = b.Source
			}
		}
	}()
	close(gs.gate)
	waitFor(t, "the start's opens", cm.Ready)
	close(stop)
	wg.Wait()
	if len(rep.Sources) != len(before) || len(rep.Skipped) != skipped {
		t.Fatalf("the published report changed after it was served: %d sources (was %d), %d skipped (was %d)", len(rep.Sources), len(before), len(rep.Skipped), skipped)
	}
	for k, v := range before {
		if rep.Sources[k] != v {
			t.Fatalf("the published report changed after it was served: %s: %q, was %q", k, rep.Sources[k], v)
		}
	}
	got := map[string]string{}
	for _, b := range cm.Page().Buckets {
		got[b.Bucket] = b.Source
	}
	if want := "alias s3://lake/base@latest -> s3://lake/base/uploads/up1/manifest.json.gz"; got["newest"] != want {
		t.Fatalf("page source of newest %q, want %q", got["newest"], want)
	}
	if want := "alias s3://lake/ocean@current -> version " + v1ID + " (s3://lake/" + d.man1 + ")"; got["ocean"] != want {
		t.Fatalf("page source of ocean %q, want %q", got["ocean"], want)
	}
}
