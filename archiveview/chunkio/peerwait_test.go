package chunkio

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestPeerFrameWaiterOutlivesCancelledAskers: as
// TestWaiterOutlivesCancelledFetchers, for the owner's compressed frames
// (PeerFrame's one flight per frame): an ask whose context is alive is not
// failed by six fills in a row whose askers left (each peer's ask ends with
// its own deadline, and anyone holding the secret can open and drop asks).
// On the old code it gave up after three with "context canceled" (the
// owner answered 502 and its asker read the backend).
func TestPeerFrameWaiterOutlivesCancelledAskers(t *testing.T) {
	c := NewFrameCache(1 << 20)
	cf := newCompFrames(1 << 20)
	k := fcKey(1)
	fl := &flight{done: make(chan struct{})}
	cf.flights[k] = fl // another asker's fill is in flight
	var calls atomic.Int32
	type result struct {
		b   *Buf
		err error
	}
	res := make(chan result, 1)
	go func() {
		b, _, err := cf.get(context.Background(), c, k, fcFill(c, 100, 7, &calls))
		res <- result{b, err}
	}()
	check := func(r result) {
		t.Helper()
		if r.err != nil {
			t.Fatalf("the ask failed while its context is alive: %v", r.err)
		}
		if len(r.b.b) != 100 || r.b.b[0] != 7 {
			t.Fatalf("wrong bytes: %d of %d", len(r.b.b), r.b.b[0])
		}
		r.b.Release()
	}
	for range 6 { // more cancelled fills than three retries
		for deadline := time.Now().Add(2 * time.Second); ; { // the ask waits on fl
			cf.mu.Lock()
			w := fl.waiters
			cf.mu.Unlock()
			if w > 0 {
				break
			}
			select {
			case r := <-res:
				check(r)
				return // it fetched the frame itself
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("the ask neither waited nor returned")
			}
			time.Sleep(time.Millisecond)
		}
		next := &flight{done: make(chan struct{})}
		cf.mu.Lock()
		cf.flights[k] = next // the next asker, who leaves too, claimed the frame first
		fl.err = context.Canceled
		cf.mu.Unlock()
		close(fl.done)
		fl = next
	}
	cf.mu.Lock()
	delete(cf.flights, k)
	fl.err = context.Canceled
	cf.mu.Unlock()
	close(fl.done)
	check(<-res)
}

// TestPeerCacheBoundsTinyEntries: as TestFrameCacheBoundsTinyEntries, for
// the compressed frames an owner keeps for its peers: a manifest of tiny
// frames (8 bytes each) cannot make it keep millions of entries, whose
// bookkeeping no budget charges; at most one per 512 bytes of its budget.
// Before, the peer cache's only bound was its bytes: 10,000 entries here
// (1M of them in an 8 MiB peer cache).
func TestPeerCacheBoundsTinyEntries(t *testing.T) {
	c := NewFrameCache(1 << 20)
	cf := newCompFrames(1 << 20)
	var calls atomic.Int32
	for i := int64(0); i < 10_000; i++ {
		b, _, err := cf.get(context.Background(), c, fcKey(i), fcFill(c, 8, byte(i), &calls))
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	cf.mu.Lock()
	n, bytes := cf.lru.Len(), cf.bytes
	cf.mu.Unlock()
	if n > (1<<20)/512 {
		t.Fatalf("%d tiny entries kept in a 1 MiB peer cache, want at most %d", n, (1<<20)/512)
	}
	if used, _ := c.MemoryInUse(); used != bytes {
		t.Fatalf("%d bytes charged, %d kept", used, bytes)
	}
}
