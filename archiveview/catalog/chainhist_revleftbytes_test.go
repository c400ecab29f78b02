package catalog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
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

// TestChainHistoryReservedFirst: the memory of building a chain's history
// is reserved before the build (what the archive's open reserved: the
// chain's manifests are read again under the same file cap), so a budget
// that cannot hold it refuses the versioned request (ErrIndexMemory,
// 503 SlowDown) without reading a manifest, instead of building first.
func TestChainHistoryReservedFirst(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"chain1", "chain2"}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range ids {
		files := map[string][]byte{}
		for j := range 50 {
			files[fmt.Sprintf("f%04d.txt", j)] = []byte(id + fmt.Sprint(j))
		}
		opt := cargopack.Options{Bucket: "lake", Prefix: "base", UploadID: id, Created: created.Add(time.Duration(i) * time.Hour), FrameSize: 4 << 10}
		if i > 0 {
			opt.PreviousManifestID, opt.SyncType = ids[i-1], "incremental"
		}
		if _, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, created), opt); err != nil {
			t.Fatal(err)
		}
	}
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	// Opens reserve 200 files (32,000 bytes) each and then hold their
	// index (about 6 KB each): 40 KiB holds both archives and one open's
	// reservation at a time, not a history's reservation beside both.
	cm := NewManager(Config{Store: store, Discover: []string{"s3://lake/base"}, WaitOpen: true, Logger: zerolog.Nop(),
		MaxFilesPerUpload: 200, IndexMemory: 40 << 10, OpenTimeout: 2 * time.Second})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a, ok, err := cm.Catalog().Bucket(ctx, "chain2")
	if err != nil || !ok {
		t.Fatalf("chain2: %v %v", ok, err)
	}
	gets := store.Requests("get")
	_, err = a.Versions(ctx)
	if !errors.Is(err, ErrIndexMemory) || !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("history with no room for its build: %v, want ErrIndexMemory (503)", err)
	}
	if n := store.Requests("get") - gets; n != 0 {
		t.Fatalf("the refused history read %d manifests first", n)
	}
}
