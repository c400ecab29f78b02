package catalog

import (
	"context"
	"errors"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryRetiredUnbuilt: a request that found a bucket's
// history state just before a scan retired it, the build not started
// (the version served changed in between), gets an error wrapping
// backend.ErrUnavailable (503: retry), never a history that is not there.
// The old code answered a nil *DatasetHistory with no error, and the
// request's Lookup dereferenced it.
func TestDatasetHistoryRetiredUnbuilt(t *testing.T) {
	d := publishHistory(t)
	cm := datasetManager(backend.NewFileStore(d.dir), Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")
	for _, started := range []bool{false, true} {
		cm.dsMu.Lock()
		hs := cm.newHistoryState("ocean", cm.datasets["ocean"], a)
		cm.dsMu.Unlock()
		if started {
			hs.start(cm)
		}
		hs.retire(cm)
		h, ds, err := cm.waitHistory(ctx, "ocean", hs)
		if started && err == nil { // the build may have ended before the retire
			continue
		}
		if !ds || err == nil || !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("started %v: a retired history: %v %v %v, want an error wrapping ErrUnavailable", started, h, ds, err)
		}
		if !hs.failed() {
			t.Fatalf("started %v: a retired history is not failed (a request would take it as built)", started)
		}
	}
}
