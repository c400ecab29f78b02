package chunkio

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// TestSumsForIndexed: finding the block sums of a ranged read of a plain
// tar member costs the same with thousands of checked members as with a
// few (the sums are indexed by their object offsets). On the old code
// every ranged read scanned every kept sum of the chunk, under the
// chunk's units lock: O(checked members) per read, about 500x slower at
// 4000 members than at 4.
func TestSumsForIndexed(t *testing.T) {
	const member = 1024
	lookup := func(n int) time.Duration {
		t.Helper()
		obj := make([]byte, n*member)
		for i := range obj {
			obj[i] = byte(i*31 + i>>10)
		}
		dir := t.TempDir()
		const key = "s/uploads/u/chunks/c0.tar"
		p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, obj, 0o644); err != nil {
			t.Fatal(err)
		}
		set := NewSet(backend.NewFileStore(dir), "bkt", []Chunk{{Key: key, Kind: PlainTar, Size: int64(len(obj))}}, Options{SmallVerifyBytes: -1})
		defer set.Close()
		ctx := context.Background()
		// Members checked in an order that is not the object's.
		for k := range n {
			i := (k * 7919) % n
			if n%7919 == 0 {
				i = k
			}
			off := int64(i * member)
			u := Unit{Kind: UnitExtent, Off: off, N: member, Sum: sha256.Sum256(obj[off : off+member])}
			if err := ensureUnits(ctx, set, 0, []Unit{u}); err != nil {
				t.Fatal(err)
			}
		}
		// Every member's sums are found, each its own.
		for i := range n {
			off := int64(i * member)
			b := set.sumsFor(0, off+10, off+20)
			if b == nil || b.off != off || b.end != off+member {
				t.Fatalf("%d members: the sums of member %d not found (%v)", n, i, b)
			}
		}
		if b := set.sumsFor(0, member-10, member+10); b != nil {
			t.Fatalf("a range across two members found the sums of %d-%d", b.off, b.end)
		}
		best := time.Duration(1 << 62)
		for range 7 {
			t0 := time.Now()
			for i := range 200 {
				off := int64((i * 13 % n) * member)
				set.sumsFor(0, off+1, off+2)
			}
			best = min(best, time.Since(t0))
		}
		return best
	}
	few, many := lookup(4), lookup(4000)
	if many > 20*few+time.Millisecond {
		t.Fatalf("200 lookups of a member's sums: %v with 4000 checked members, %v with 4: the cost grows with the members", many, few)
	}
}

// TestSumsIndexFind: the index finds the sums holding a range among
// disjoint, nested and overlapping units, and none for a range no one
// unit holds whole. (Guard test of sumsIndex.find's walk.)
func TestSumsIndexFind(t *testing.T) {
	mk := func(off, end int64) *blockSums {
		return &blockSums{off: off, end: end, bs: 1 << 30, sums: make([][blockTagBytes]byte, 1)}
	}
	var x sumsIndex
	units := []*blockSums{mk(100, 200), mk(0, 1000), mk(300, 400), mk(350, 380), mk(2000, 2100), mk(1500, 2050)}
	for _, b := range units {
		x.add(b)
	}
	for _, tc := range []struct {
		start, end int64
		want       []*blockSums // any of these
	}{
		{110, 120, []*blockSums{units[0], units[1]}},
		{360, 370, []*blockSums{units[1], units[2], units[3]}},
		{150, 350, []*blockSums{units[1]}},
		{1600, 1700, []*blockSums{units[5]}},
		{2010, 2040, []*blockSums{units[4], units[5]}},
		{2040, 2060, []*blockSums{units[4]}},
		{900, 1100, nil},
		{1000, 1001, nil},
		{2099, 2101, nil},
	} {
		got := x.find(tc.start, tc.end)
		ok := got == nil && tc.want == nil
		for _, w := range tc.want {
			ok = ok || got == w
		}
		if !ok {
			t.Errorf("find(%d, %d) = %v, want one of %v", tc.start, tc.end, got, tc.want)
		}
	}
}
