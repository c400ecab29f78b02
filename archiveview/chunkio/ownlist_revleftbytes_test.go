package chunkio

import (
	"context"
	"fmt"
	"testing"
)

// TestEvictOwnVisitsOwnEntries: a client short of its share gives up its
// own oldest cached entry after looking at its own entries only. With
// 2000 older entries of other clients cached, evicting the one entry of client
// "b" visits 1 entry, not the whole LRU (before: every key, under the
// cache's lock, for each eviction). For the decoded frames and the
// compressed frames kept for peers alike.
func TestEvictOwnVisitsOwnEntries(t *testing.T) {
	const others = 2000
	c := NewFrameCache(64 << 20)
	cf := newCompFrames(64 << 20)
	lim := c.lim
	ctx := context.Background()
	buf := func(id string) *Buf {
		t.Helper()
		cl, err := lim.reserve(WithClient(ctx, id), bufSize(1024), demand)
		if err != nil {
			t.Fatal(err)
		}
		return lim.bufs.getBuf(1024, lim, cl)
	}
	key := func(i int) cacheKey { return cacheKey{object: fmt.Sprintf("o%d", i), kind: keyFrame, n: int64(i)} }
	type fill func(k cacheKey, b *Buf)
	cases := []struct {
		name    string
		fill    fill
		evict   func(cl *clientUse) bool
		visited func() int64
		held    func() int
	}{
		{"decoded", func(k cacheKey, b *Buf) {
			_, fl, mine := c.lookup(k, false)
			if !mine {
				t.Fatalf("%v already cached", k)
			}
			c.complete(k, fl, b, nil)
			b.Release()
		}, c.evictOwnFrame, func() int64 { return c.own.visited }, c.Len},
		{"compressed", func(k cacheKey, b *Buf) {
			cf.mu.Lock()
			cf.addLocked(k, b)
			cf.mu.Unlock()
			b.Release()
		}, cf.evictOwn, func() int64 { return cf.own.visited }, func() int { return cf.lru.Len() }},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := ci * (others + 10)
			for i := 1; i <= others; i++ {
				tc.fill(key(base+i), buf(fmt.Sprintf("a%d", i%7)))
			}
			b := buf("b")
			tc.fill(key(base), b) // the newest: client b's one entry
			if n := tc.held(); n < others+1 {
				t.Fatalf("%d entries cached, want %d", n, others+1)
			}
			before := tc.visited()
			if !tc.evict(b.cl) {
				t.Fatal("client b's entry was not evicted")
			}
			if v := tc.visited() - before; v > 1 {
				t.Fatalf("evicting client b's one entry visited %d entries of %d cached", v, others+1)
			}
			if tc.evict(b.cl) {
				t.Fatal("a second entry of client b evicted")
			}
			if n := tc.held(); n != others {
				t.Fatalf("%d entries left, want %d", n, others)
			}
		})
	}
}
