package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryEvictsOnlyToFit: a history open that needs more of
// the history share than evicting every other bucket's built history
// would free evicts none: it waits for the share, and fails at its
// deadline, while the other bucket's history stays built and answers its
// versions without any open. So a client holding one bucket's older
// versions open cannot make every other bucket's history be dropped (and
// built again, listing and opening its versions) for nothing. The old
// code evicted it and then waited anyway.
func TestDatasetHistoryEvictsOnlyToFit(t *testing.T) {
	d := publishHistory(t)
	reserve := int64(minReserveFiles) * IndexBytesPerFile // one open's first reservation
	var charge atomic.Int64
	cm := NewManager(Config{Store: backend.NewFileStore(d.dir), WaitOpen: true, RetireGrace: time.Hour,
		IndexMemory: 8 * reserve, OpenTimeout: 300 * time.Millisecond, OpenWait: time.Minute,
		Aliases:      []Alias{{Name: "sea", Target: "s3://lake/ocean@current"}},
		historyBytes: func(*DatasetHistory) int64 { return charge.Load() }})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	// sea's history, charged a little of the share.
	charge.Store(64 << 10)
	h, _, err := cm.History(ctx, "sea", bucketArchive(t, cm, "sea"), true)
	if err != nil {
		t.Fatalf("sea's history: %v", err)
	}
	// Another bucket's client holds a few older versions open, then asks
	// for one whose listed manifest needs the whole share: evicting sea's
	// history cannot make room for it.
	ocean := openExtra{allow: []string{dsPrefix + "/v/"}, noClasses: true, hist: &historyState{}}
	var held []*archiveview.Archive
	defer func() {
		for _, a := range held {
			cm.closeArchive(a)
		}
	}()
	for i := range 3 {
		a, err := cm.openUpload(ctx, fmt.Sprintf("ocean@%d", i), dsBucket, d.mans[i], 0, ocean)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		held = append(held, a)
	}
	used, _ := cm.histIndex.state()
	if short := used - charge.Load(); short <= charge.Load() {
		t.Fatalf("test setup: the big open is short of %d bytes, evicting sea frees %d", short, charge.Load())
	}
	big := 8 * cm.histIndex.limit // listed bytes: the reservation is the whole share
	_, err = cm.openUpload(ctx, "ocean@big", dsBucket, d.mans[3], big, ocean)
	if !errors.Is(err, ErrIndexMemory) {
		t.Fatalf("an open needing the whole share while versions are held: %v, want ErrIndexMemory", err)
	}
	cm.dsMu.Lock()
	st := cm.datasets["sea"]
	kept := st.hist != nil && st.hist.ready() == h
	cm.dsMu.Unlock()
	if !kept {
		t.Fatal("sea's history was evicted for an open that evicting it could not make room for")
	}
	checkHistory(t, h, histWant{"a.txt": {"V4", "V2", "V1"}, "b.txt": {"V1"}, "d.txt": {"V4", "DM3", "V1"}, "e.txt": {"DM4", "V2"}})
	if hu, _ := cm.histIndex.state(); hu != used {
		t.Fatalf("the share holds %d bytes, want %d (the versions held and sea's history)", hu, used)
	}
}

// TestDatasetHistoryOwnChargeNoStarve: a bucket whose built history takes
// nearly all of the history share can still open its own older versions
// for versionId= reads. The old code made every such open wait for the
// share its own history held (no other history to evict: eviction never
// picks the history it reserves for) and fail at --open-timeout, so the
// bucket's versioned reads gave 503 for as long as its history stayed
// built.
func TestDatasetHistoryOwnChargeNoStarve(t *testing.T) {
	d := publishHistory(t)
	reserve := int64(minReserveFiles) * IndexBytesPerFile // one open's first reservation
	var charge atomic.Int64
	cm := NewManager(Config{Store: backend.NewFileStore(d.dir), WaitOpen: true, RetireGrace: time.Millisecond,
		IndexMemory: 8 * reserve, OpenTimeout: 300 * time.Millisecond, OpenWait: time.Minute,
		Aliases:      []Alias{{Name: "sea", Target: "s3://lake/ocean@current"}},
		historyBytes: func(*DatasetHistory) int64 { return charge.Load() }})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	// The history, charged all of the share but half an open's reservation.
	charge.Store(cm.histIndex.limit - reserve/2)
	h, _, err := cm.History(ctx, "sea", bucketArchive(t, cm, "sea"), true)
	if err != nil {
		t.Fatalf("sea's history: %v", err)
	}
	for i := range 3 {
		v, ok, err := h.Lookup(ctx, "a.txt", histIDs[0])
		if err != nil || !ok || v.Archive == nil {
			t.Fatalf("read %d of a.txt as of V1: ok %v, %v", i, ok, err)
		}
	}
	if used, _ := cm.index.state(); used > cm.index.limit {
		t.Fatalf("the index budget holds %d of %d bytes", used, cm.index.limit)
	}
}
