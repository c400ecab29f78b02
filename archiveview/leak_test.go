package archiveview

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// TestNoReferenceLeaks: after walks, concurrent ranged reads, cancelled
// reads and prefetch, every cached buffer is held by the cache alone.
func TestNoReferenceLeaks(t *testing.T) {
	files := rpSmallFiles(300)
	files["big.txt"] = rpText(3, 2<<20)
	cache := chunkio.NewFrameCache(32 << 20)
	ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10, ChunkSize: 1 << 20}, Options{Cache: cache, Readahead: 4})
	ra.walk(t)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			st, _ := ra.a.Stat("big.txt")
			for i := 0; i < 10; i++ {
				off := int64((g*10 + i) * 40_000)
				r, _ := ra.a.Open(context.Background(), st, off, 100_000)
				if i%3 == 0 { // abandon midway
					io.ReadFull(r, make([]byte, 10))
				} else {
					io.Copy(io.Discard, r)
				}
				r.Close()
			}
		}(g)
	}
	wg.Wait()
	ra.a.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, bad := cache.Pinned()
		if bad == 0 {
			t.Logf("%d cached buffers, all held once", n)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d cached buffers have leaked references", bad, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
