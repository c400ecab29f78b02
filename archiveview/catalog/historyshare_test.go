package catalog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryIndexShare: older dataset versions opened for a
// history (the build, versionId= reads, and those retiring after a read)
// hold at most 1/historyIndexShare of the index memory: once that share is
// full, the next history open fails within the open deadline with
// ErrIndexMemory (503 SlowDown to the client) while an ordinary upload
// still opens, and closing one history version lets the next one in. One
// client cycling through old versions (each held for the retire grace)
// cannot take the index memory that the served versions and new uploads
// need. On the code before the share every one of the history opens
// succeeds and the whole budget fills.
func TestDatasetHistoryIndexShare(t *testing.T) {
	d := publishHistory(t)
	// Room for 8 reservations in all, so 2 at a time in the share.
	reserve := int64(minReserveFiles) * IndexBytesPerFile
	cm := NewManager(Config{Store: backend.NewFileStore(d.dir), WaitOpen: true, RetireGrace: time.Hour,
		IndexMemory: 8 * reserve, OpenTimeout: 300 * time.Millisecond})
	defer cm.CloseAll()
	ctx := context.Background()
	hist := openExtra{allow: []string{dsPrefix + "/v/"}, noClasses: true, hist: &historyState{}}

	var held []*archiveview.Archive
	defer func() {
		for _, a := range held {
			cm.closeArchive(a)
		}
	}()
	share := cm.histIndex.limit
	var refused error
	for i := 0; i < 200 && refused == nil; i++ {
		a, err := cm.openUpload(ctx, fmt.Sprintf("ocean@%d", i), dsBucket, d.mans[i%3], 0, hist)
		if err != nil {
			refused = err
			break
		}
		held = append(held, a)
	}
	if refused == nil || !errors.Is(refused, ErrIndexMemory) {
		t.Fatalf("%d older versions opened and held, none refused (%v): the history's share (%d of %d bytes) does not bound them",
			len(held), refused, share, cm.index.limit)
	}
	used, _ := cm.index.state()
	if hu, _ := cm.histIndex.state(); hu > share || used > share {
		t.Fatalf("history versions hold %d of their %d-byte share, %d of the whole budget", hu, share, used)
	}
	// The rest of the budget is the served versions' and new uploads'.
	a, err := cm.openUpload(ctx, "upload", dsBucket, d.mans[3], 0, openExtra{allow: []string{dsPrefix + "/v/"}, noClasses: true})
	if err != nil {
		t.Fatalf("an ordinary upload with the history's share full: %v", err)
	}
	cm.closeArchive(a)
	// A history version closed (its grace over) lets the next one open.
	cm.closeArchive(held[0])
	held = held[1:]
	a, err = cm.openUpload(ctx, "ocean@again", dsBucket, d.mans[0], 0, hist)
	if err != nil {
		t.Fatalf("a history open after one was closed: %v", err)
	}
	held = append(held, a)
	t.Logf("%d older versions held in a %d-byte share of %d; the next was refused: %v", len(held)-1, share, cm.index.limit, refused)
}
