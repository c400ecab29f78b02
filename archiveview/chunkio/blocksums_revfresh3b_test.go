package chunkio

import (
	"runtime"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// TestBlockSumsChargeCoversTheirMemory: a set of block tags is charged
// to the cache's bound at least what it holds in memory. Each set has
// its own AES-256-GCM instance (key schedules, GHASH table: several
// hundred bytes) besides its 16-byte tags, so a check of a one-block
// unit (a small plain-tar member read by range) charged only its tag,
// and a client reading many such members kept tens of times the
// bound's bytes.
func TestBlockSumsChargeCoversTheirMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int64 // unit bytes
	}{
		{"one block", 100},
		{"two blocks", sumBlockBytes + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const sets = 4000
			cache := NewFrameCache(1<<30, WithMemory(256<<20))
			set := NewSet(backend.NewFileStore(t.TempDir()), "bkt", []Chunk{{Key: "k", Kind: PlainTar, Size: 1 << 40}}, Options{Cache: cache})
			defer set.Close()
			keep := make([]*blockHasher, 0, sets)
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			before := set.sumHeld.Load()
			for i := int64(0); i < sets; i++ {
				off := i * 2 * sumBlockBytes
				bh := set.newBlockHasher(off, off+tc.n)
				if bh == nil {
					t.Fatalf("set %d: no sums kept (bound full?)", i)
				}
				keep = append(keep, bh)
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			charged := (set.sumHeld.Load() - before) / sets
			held := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / sets
			runtime.KeepAlive(keep)
			if charged < held {
				t.Fatalf("a set of block sums of a %d-byte unit is charged %d bytes and holds %d", tc.n, charged, held)
			}
			for _, bh := range keep {
				set.dropSums(bh)
			}
			if got := set.sumHeld.Load(); got != before {
				t.Fatalf("after dropping them all, %d bytes still charged, want %d", got, before)
			}
		})
	}
}
