package chunkio

import (
	"context"
	"testing"
)

// TestCachedRefTouchesOwnIndex: a hit of the cached-frame fast path
// (cachedRef, c65a9dc) makes the frame its client's newest entry in the
// own index (338eb0a) as in the LRU, as a hit through lookup does. Before,
// the two orders parted: evictOwn, which gives up a client's oldest entry
// in the own index, gave up the frame that client's small reads had just
// hit (every small file of a warm archive is read that way) and kept the
// one nobody read since.
func TestCachedRefTouchesOwnIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		hit  func(c *FrameCache, k cacheKey) *Buf
	}{
		{"fast path", func(c *FrameCache, k cacheKey) *Buf { return c.cachedRef(k) }},
		{"lookup", func(c *FrameCache, k cacheKey) *Buf { b, _, _ := c.lookup(k, false); return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewFrameCache(64 << 20)
			ctx := WithClient(context.Background(), "a")
			var cl *clientUse
			add := func(k cacheKey) {
				t.Helper()
				use, err := c.lim.reserve(ctx, bufSize(1024), demand)
				if err != nil {
					t.Fatal(err)
				}
				cl = use
				b := c.lim.bufs.getBuf(1024, c.lim, use)
				_, fl, mine := c.lookup(k, false)
				if !mine {
					t.Fatalf("%v already cached", k)
				}
				c.complete(k, fl, b, nil)
				b.Release()
			}
			older := cacheKey{object: "o", kind: keyFrame, n: 1}
			newer := cacheKey{object: "o", kind: keyFrame, n: 2}
			add(older)
			add(newer)
			// The older entry is read: it is now the client's newest.
			b := tc.hit(c, older)
			if b == nil {
				t.Fatal("the older entry is not cached")
			}
			b.Release()
			if !c.evictOwnFrame(cl) {
				t.Fatal("nothing of the client evicted")
			}
			if _, ok := c.lru.Peek(older); !ok {
				t.Fatal("evictOwn gave up the entry the client just read, not its least recently read one")
			}
			if _, ok := c.lru.Peek(newer); ok {
				t.Fatal("evictOwn kept the entry the client read least recently")
			}
		})
	}
}
