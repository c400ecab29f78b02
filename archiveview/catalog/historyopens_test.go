package catalog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryOpensClosedOnce: versionId= reads of several older
// versions at once, more than historyOpenMax, open and retire versions
// concurrently; every older version the history opened is closed exactly
// once in the end (its index memory returned once), none left open
// untracked and none closed twice. The old code put a version back in
// the LRU after its open had been evicted, and then evicted another read's
// open still running without closing it (about 5% of the opens never
// closed: their index memory held for good); a history closed during
// reads retired some versions twice.
func TestDatasetHistoryOpensClosedOnce(t *testing.T) {
	for _, closeDuring := range []bool{false, true} {
		t.Run(fmt.Sprintf("close-during-reads=%v", closeDuring), func(t *testing.T) {
			testHistoryOpensClosedOnce(t, closeDuring)
		})
	}
}

// testHistoryOpensClosedOnce hammers h.open from 8 goroutines; with
// closeDuring the history is closed (replaced) while they read.
func testHistoryOpensClosedOnce(t *testing.T, closeDuring bool) {
	const versions = 5
	h := &DatasetHistory{opens: map[int]*chunkio.Memo[*archiveview.Archive]{}}
	for i := range versions {
		h.versions = append(h.versions, HistoryVersion{ID: fmt.Sprint(i)})
	}
	var (
		mu     sync.Mutex
		closes = map[*archiveview.Archive]int{} // every archive opened: its closes
	)
	h.openFn = func(ctx context.Context, v HistoryVersion) (*archiveview.Archive, error) {
		runtime.Gosched()
		a := &archiveview.Archive{}
		mu.Lock()
		closes[a] = 0
		mu.Unlock()
		runtime.Gosched()
		return a, nil
	}
	h.closeFn = func(a *archiveview.Archive, inUse bool) {
		mu.Lock()
		closes[a]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 3000 {
				if closeDuring && g == 0 && n == 1000 {
					h.Close()
				}
				if _, err := h.open(context.Background(), 1+rand.IntN(versions-1)); err != nil {
					if closeDuring && errors.Is(err, backend.ErrUnavailable) {
						return // replaced
					}
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	h.Close()
	mu.Lock()
	defer mu.Unlock()
	leaked, twice := 0, 0
	for _, n := range closes {
		switch {
		case n == 0:
			leaked++
		case n > 1:
			twice++
		}
	}
	if leaked > 0 || twice > 0 {
		t.Fatalf("of %d older versions opened, %d never closed and %d closed more than once", len(closes), leaked, twice)
	}
}
