package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryMemoryEvicted: a built dataset history is charged to
// the history's share of index memory and to the whole budget; when
// another bucket's history needs the share, the least recently asked one
// is evicted (its charge returned at once), and built again, evicting
// the other in turn, when it is asked for again: the histories of many
// dataset buckets never hold more than the share. Every history built
// answers its versions. On the code before the charge no history is
// ever evicted and their memory counts against nothing.
func TestDatasetHistoryMemoryEvicted(t *testing.T) {
	d := publishHistory(t)
	const charge = 10 << 20 // each history, as charged (the share is 16 MiB)
	cm := NewManager(Config{Store: backend.NewFileStore(d.dir), WaitOpen: true, RetireGrace: time.Hour,
		IndexMemory: 64 << 20, OpenWait: time.Minute,
		Aliases:      []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}, {Name: "sea", Target: "s3://lake/ocean@current"}},
		historyBytes: func(*DatasetHistory) int64 { return charge }})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	versions := func(name string) int {
		t.Helper()
		h, ds, err := cm.History(ctx, name, bucketArchive(t, cm, name), true)
		if err != nil || !ds || h == nil {
			t.Fatalf("%s: history: %v %v %v", name, h, ds, err)
		}
		res, err := h.ListVersions(archiveview.VersionListParams{MaxKeys: 1000})
		if err != nil {
			t.Fatalf("%s: list versions: %v", name, err)
		}
		return len(res.Entries)
	}
	built := func(name string) bool {
		cm.dsMu.Lock()
		defer cm.dsMu.Unlock()
		st := cm.datasets[name]
		return st != nil && st.hist != nil && st.hist.ready() != nil
	}
	want := versions("ocean")
	if want < 4 {
		t.Fatalf("ocean: %d key versions, want at least 4", want)
	}
	if hu, _ := cm.histIndex.state(); hu < charge {
		t.Fatalf("a built history holds %d bytes of the history share, want its %d", hu, charge)
	}
	for i, name := range []string{"sea", "ocean", "sea"} {
		if got := versions(name); got != want {
			t.Fatalf("round %d: %s: %d key versions, want %d", i, name, got, want)
		}
		other := map[string]string{"sea": "ocean", "ocean": "sea"}[name]
		if !built(name) || built(other) {
			t.Fatalf("round %d: after %s's history was built: %s built %v, %s built %v; want only %s (the share holds one)",
				i, name, name, built(name), other, built(other), name)
		}
		if hu, _ := cm.histIndex.state(); hu > cm.histIndex.limit {
			t.Fatalf("round %d: the history share holds %d of its %d bytes", i, hu, cm.histIndex.limit)
		}
	}
	// Retiring a history returns its charge.
	cm.retireHistories()
	cm.retired.Wait()
	if hu, _ := cm.histIndex.state(); hu != 0 {
		t.Fatalf("every history retired, the share still holds %d bytes", hu)
	}
}
