package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// TestChainHistoryMemoryWaitOnce: concurrent versioned requests of a chain
// whose history finds no index memory share the one wait of --open-timeout
// and are all refused (503) when it ends. Before, the wait's own deadline
// (context.DeadlineExceeded inside the ErrIndexMemory) was taken by the
// history's Memo for the filler's request ending, so each waiter in turn
// ran the build again and waited one more --open-timeout: the k-th of them
// held its request k times the deadline.
func TestChainHistoryMemoryWaitOnce(t *testing.T) {
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
	const openTimeout = time.Second
	// As TestChainHistoryReservedFirst: room for both archives, not for a
	// history's reservation beside them.
	cm := NewManager(Config{Store: backend.NewFileStore(dir), Discover: []string{"s3://lake/base"}, WaitOpen: true, Logger: zerolog.Nop(),
		MaxFilesPerUpload: 200, IndexMemory: 40 << 10, OpenTimeout: openTimeout})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a, ok, err := cm.Catalog().Bucket(ctx, "chain2")
	if err != nil || !ok {
		t.Fatalf("chain2: %v %v", ok, err)
	}
	const callers = 4
	var wg sync.WaitGroup
	took := make([]time.Duration, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			t0 := time.Now()
			_, errs[i] = a.Versions(rctx)
			took[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	for i := range callers {
		if !errors.Is(errs[i], ErrIndexMemory) || !errors.Is(errs[i], backend.ErrUnavailable) {
			t.Errorf("caller %d: %v, want ErrIndexMemory (503)", i, errs[i])
		}
		if took[i] > 2*openTimeout+openTimeout/2 {
			t.Errorf("caller %d waited %s for the history's memory, want about one --open-timeout (%s)", i, took[i].Round(time.Millisecond), openTimeout)
		}
	}
}
