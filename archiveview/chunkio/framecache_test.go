package chunkio

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
)

func fcKey(n int64) cacheKey {
	return cacheKey{store: "s", bucket: "b", object: "o", kind: keyFrame, n: n}
}

// fcFill returns a fill function producing a buffer of size n filled with b.
func fcFill(c *FrameCache, n int, b byte, calls *atomic.Int32) func(context.Context) (*Buf, error) {
	return func(context.Context) (*Buf, error) {
		calls.Add(1)
		buf, _ := c.lim.alloc(context.Background(), int64(n), demand)
		for i := range buf.b {
			buf.b[i] = b
		}
		return buf, nil
	}
}

func TestFrameCacheEvictsByBytes(t *testing.T) {
	const sz = 64 << 10
	c := NewFrameCache(3 * sz)
	var calls atomic.Int32
	for i := int64(0); i < 10; i++ {
		b, err := c.get(context.Background(), fcKey(i), nil, fcFill(c, sz, byte(i), &calls))
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		if c.Bytes() > c.Budget() {
			t.Fatalf("after %d inserts: %d bytes cached, budget %d", i+1, c.Bytes(), c.Budget())
		}
	}
	if c.Len() != 3 {
		t.Fatalf("%d entries cached, want 3", c.Len())
	}
	// The three most recent are hits, older ones are refilled.
	calls.Store(0)
	for i := int64(7); i < 10; i++ {
		b, _ := c.get(context.Background(), fcKey(i), nil, fcFill(c, sz, 0xff, &calls))
		if b.b[0] != byte(i) {
			t.Fatalf("entry %d holds %d", i, b.b[0])
		}
		b.Release()
	}
	if calls.Load() != 0 {
		t.Fatalf("%d refills of cached entries", calls.Load())
	}
	b, _ := c.get(context.Background(), fcKey(0), nil, fcFill(c, sz, 0xee, &calls))
	if calls.Load() != 1 || b.b[0] != 0xee {
		t.Fatal("evicted entry not refilled")
	}
	b.Release()
}

func TestFrameCacheOversizedServedNotKept(t *testing.T) {
	c := NewFrameCache(100 << 10)
	var calls atomic.Int32
	for i := 0; i < 2; i++ {
		b, err := c.get(context.Background(), fcKey(1), nil, fcFill(c, 200<<10, 7, &calls))
		if err != nil || len(b.b) != 200<<10 || b.b[100] != 7 {
			t.Fatalf("oversized frame not served: %v", err)
		}
		b.Release()
	}
	if calls.Load() != 2 || c.Len() != 0 || c.Bytes() != 0 {
		t.Fatalf("oversized frame kept: calls %d, len %d, bytes %d", calls.Load(), c.Len(), c.Bytes())
	}
}

func TestFrameCacheSingleflight(t *testing.T) {
	c := NewFrameCache(1 << 20)
	var calls atomic.Int32
	release := make(chan struct{})
	fill := func(ctx context.Context) (*Buf, error) {
		calls.Add(1)
		<-release
		buf, _ := c.lim.alloc(context.Background(), 100<<10, demand)
		buf.b[0] = 42
		return buf, nil
	}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := c.get(context.Background(), fcKey(5), nil, fill)
			if err != nil || b.b[0] != 42 {
				t.Errorf("waiter: %v", err)
				return
			}
			b.Release()
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("%d fills for 16 concurrent gets", calls.Load())
	}
}

// A fill that fails because its own context ended is retried by a waiter
// whose context is alive; a real error is shared.
func TestFrameCacheFillerCancelled(t *testing.T) {
	c := NewFrameCache(1 << 20)
	started := make(chan struct{})
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		c.get(ctx, fcKey(1), nil, func(ctx context.Context) (*Buf, error) {
			close(started)
			cancel()
			time.Sleep(20 * time.Millisecond)
			return nil, ctx.Err()
		})
	}()
	<-started
	var calls atomic.Int32
	b, err := c.get(context.Background(), fcKey(1), nil, fcFill(c, 1000, 9, &calls))
	if err != nil || b.b[0] != 9 {
		t.Fatalf("waiter did not retry: %v", err)
	}
	b.Release()
	boom := errors.New("boom")
	_, err = c.get(context.Background(), fcKey(2), nil, func(context.Context) (*Buf, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("error not passed on: %v", err)
	}
}

// Buffers return to the pool only when the last holder releases them: a
// reader's slice stays intact after the cache evicted its buffer and the
// pool handed out new buffers.
func TestFrameCacheRefcountProtectsReaders(t *testing.T) {
	const sz = 128 << 10
	c := NewFrameCache(sz)
	var calls atomic.Int32
	held, _ := c.get(context.Background(), fcKey(0), nil, fcFill(c, sz, 1, &calls))
	for i := int64(1); i < 20; i++ { // evicts key 0 and churns the pool
		b, _ := c.get(context.Background(), fcKey(i), nil, fcFill(c, sz, 2, &calls))
		b.Release()
	}
	if !bytes.Equal(held.b, bytes.Repeat([]byte{1}, sz)) {
		t.Fatal("held buffer was reused while referenced")
	}
	held.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("double release not detected")
		}
	}()
	held.Release()
}

func TestDecodeFrameChecksLength(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	src := bytes.Repeat([]byte("abcdefgh"), 10_000)
	comp := enc.EncodeAll(src, nil)
	c := NewFrameCache(1 << 20)
	b, err := c.decodeFrame(comp, int64(len(src)))
	if err != nil || !bytes.Equal(b.b, src) {
		t.Fatalf("decode: %v", err)
	}
	b.Release()
	for _, n := range []int64{int64(len(src)) - 1, int64(len(src)) + 1, 0} {
		if _, err := c.decodeFrame(comp, n); !errors.Is(err, ErrCorrupt) {
			t.Errorf("usize %d: err %v, want ErrCorrupt", n, err)
		}
	}
	if _, err := c.decodeFrame(comp[:len(comp)/2], int64(len(src))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated frame: err %v", err)
	}
}

// TestFrameCacheStoreID: archives on one Store instance share an id; any
// other instance (even of the same type, even after the first became
// garbage) gets another; a non-comparable store value shares nothing.
func TestFrameCacheStoreID(t *testing.T) {
	c := NewFrameCache(1 << 20)
	s1, s2 := backend.NewFileStore(t.TempDir()), backend.NewFileStore(t.TempDir())
	type uncomparable struct{ _ []int }
	seen := map[string]bool{}
	for _, tc := range []struct {
		name  string
		a, b  any
		equal bool
	}{
		{"same store", s1, s1, true},
		{"two stores", s1, s2, false},
		{"non-comparable value", uncomparable{}, uncomparable{}, false},
	} {
		ia, ib := c.storeID(tc.a), c.storeID(tc.b)
		if (ia == ib) != tc.equal {
			t.Errorf("%s: ids %q and %q (want equal: %v)", tc.name, ia, ib, tc.equal)
		}
		seen[ia], seen[ib] = true, true
	}
	for i := 0; i < 100; i++ { // fresh stores never reuse an id
		id := c.storeID(backend.NewFileStore(t.TempDir()))
		if seen[id] {
			t.Fatalf("id %q reused", id)
		}
		seen[id] = true
	}
}

// TestFrameCacheBoundsTinyEntries: 10,000 frames of 8 bytes (a hostile
// manifest's) fit a 1 MiB budget by their bytes, but the cache keeps at
// most one entry per 512 bytes of budget: each entry's key, node and map
// slot cost far more than its 8 charged bytes. On the old code all 10,000
// were kept.
func TestFrameCacheBoundsTinyEntries(t *testing.T) {
	c := NewFrameCache(1 << 20)
	var calls atomic.Int32
	for i := int64(0); i < 10_000; i++ {
		b, err := c.get(context.Background(), fcKey(i), nil, fcFill(c, 8, byte(i), &calls))
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	if n := c.Len(); n > (1<<20)/512 {
		t.Fatalf("%d tiny entries cached in a 1 MiB budget, want at most %d", n, (1<<20)/512)
	}
	if used, _ := c.MemoryInUse(); used != c.Bytes() {
		t.Fatalf("%d bytes charged, %d cached", used, c.Bytes())
	}
}
