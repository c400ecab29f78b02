package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// TestChainHistoryCharged: the version history of a discovered chain
// (built on the first versioned request) is charged to --index-memory
// while its archive is open, and given back when it is closed.
func TestChainHistoryCharged(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"chain1", "chain2", "chain3"}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range ids {
		files := map[string][]byte{}
		for j := range 300 {
			files[fmt.Sprintf("dir/some/longer/path/f%04d.txt", j)] = []byte(id + fmt.Sprint(j))
		}
		opt := cargopack.Options{Bucket: "lake", Prefix: "base", UploadID: id, Created: created.Add(time.Duration(i) * time.Hour), FrameSize: 4 << 10}
		if i > 0 {
			opt.PreviousManifestID, opt.SyncType = ids[i-1], "incremental"
		}
		if _, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, created), opt); err != nil {
			t.Fatal(err)
		}
	}
	cm := NewManager(Config{Store: backend.NewFileStore(dir), Discover: []string{"s3://lake/base"}, WaitOpen: true, Logger: zerolog.Nop()})
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a, ok, err := cm.Catalog().Bucket(ctx, "chain3")
	if err != nil || !ok {
		t.Fatalf("chain3: %v %v", ok, err)
	}
	before, _, _ := cm.IndexMemory()
	v, err := a.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := v.Bytes()
	if n < 2*300*20 {
		t.Fatalf("a history of 600 older versions estimated at %d bytes", n)
	}
	after, _, _ := cm.IndexMemory()
	if after-before != n {
		t.Fatalf("building the history of %d bytes changed the index memory used by %d (%d -> %d)", n, after-before, before, after)
	}
	cm.CloseAll()
	if used, _, _ := cm.IndexMemory(); used != 0 {
		t.Fatalf("%d bytes of index memory still used after every archive was closed", used)
	}
}
