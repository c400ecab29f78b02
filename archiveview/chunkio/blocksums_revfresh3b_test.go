package chunkio

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
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

// TestCheckBlockBufferCharged: a unit check that tags blocks larger than
// a segment (a part size that is no multiple of sumBlockBytes makes the
// block the whole part: --part-size 100MB is 100,000,000 bytes) reads
// each block into a buffer of the block's size; that buffer comes out of
// the read memory, taken with the check's first part, so it is charged
// by the time the check's first GET goes out. It was a plain make,
// uncharged: a check per unit at once each held a part size the budget
// did not know of.
func TestCheckBlockBufferCharged(t *testing.T) {
	const part = 1_000_000 // no multiple of 256 KiB: blocks of the part size
	f := newBlockSumsFixture(t, part)
	set := NewSet(f.store, "bkt", []Chunk{f.chunk()}, Options{SmallVerifyBytes: -1,
		Cache: NewFrameCache(64<<20, WithPartSize(part), WithStreamParts(1), WithMemory(64<<20))})
	defer set.Close()
	if bs := set.sumBlock(); bs != part {
		t.Fatalf("block size %d, want the part size %d (the test needs blocks over a segment)", bs, part)
	}
	var first atomic.Int64
	first.Store(-1)
	f.armWith(func(faults.Request) faults.Fault {
		used, _ := set.lim.inUse()
		first.CompareAndSwap(-1, used)
		return faults.Fault{}
	})
	if err := check(set, part); err != nil {
		t.Fatalf("the check: %v", err)
	}
	if set.sumsFor(0, 0, part) == nil {
		t.Fatal("the check kept no block sums (the test needs them)")
	}
	if want := 2 * bufSize(part); first.Load() < want {
		t.Fatalf("at the check's first GET %d bytes of read memory in use, want at least %d (its part and its block buffer)", first.Load(), want)
	}
	// (A reader's parts give their memory back moments after its Close.)
	deadline := time.Now().Add(5 * time.Second)
	for used, _ := set.lim.inUse(); used != 0; used, _ = set.lim.inUse() {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the check %d bytes still charged to the read memory", used)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSumsIndexAddNotQuadratic: keeping the sums of many checked members
// of a plain tar costs about the same per member whatever order they were
// checked in. The index kept one sorted slice and inserted each set in
// place, shifting and re-maximizing everything after it under the chunk's
// units lock: members checked from the object's end to its start (a
// client's ranged reads in that order) cost O(n) each, 40,000 of them 3.6
// s and 160,000 3.6 minutes. Every member's sums are still found, and a
// unit holding them all is found for a range across two of them.
func TestSumsIndexAddNotQuadratic(t *testing.T) {
	const n = 70_000
	const bound = 5 * time.Second // merged from a tail: 0.15 s (2 s under -race); in place: about 11 s
	mk := func(off, end int64) *blockSums {
		return &blockSums{off: off, end: end, bs: 1 << 30, sums: make([][blockTagBytes]byte, 1)}
	}
	var x sumsIndex
	t0 := time.Now()
	for i := n - 1; i >= 0; i-- {
		x.add(mk(int64(i)*1024, int64(i)*1024+1000))
		if i%1000 == 0 && time.Since(t0) > bound {
			t.Fatalf("%d of %d sets added in reverse order took %v: the index's adds grow with its size", n-i, n, time.Since(t0))
		}
	}
	for i := range n {
		off := int64(i) * 1024
		if b := x.find(off+10, off+20); b == nil || b.off != off {
			t.Fatalf("the sums of member %d (at %d) not found: %v", i, off, b)
		}
	}
	if b := x.find(1000, 1030); b != nil {
		t.Fatalf("a range between two members found the sums of %d-%d", b.off, b.end)
	}
	whole := mk(0, n*1024)
	x.add(whole)
	if b := x.find(1000, 2000); b != whole {
		t.Fatalf("a range across two members found %v, want the unit holding them all (in the tail)", b)
	}
	x.merge()
	if b := x.find(1000, 2000); b != whole {
		t.Fatalf("a range across two members found %v, want the unit holding them all (merged)", b)
	}
	if b := x.find(5*1024+10, 5*1024+20); b == nil || (b.off != 5*1024 && b != whole) {
		t.Fatalf("the sums of member 5 not found once merged: %v", b)
	}
}
