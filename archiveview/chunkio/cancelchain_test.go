package chunkio

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaiterOutlivesCancelledFetchers: a reader whose context is alive
// is never failed by other readers' cancellations. Here every fetch of
// the key it joins is led by another reader whose context ends (each
// time a new one has claimed the key before the reader looks again, as a
// client that keeps opening and cancelling requests for the same frame
// would); the reader then fetches the frame itself. On the old code it
// gave up after three such fetches with their "context canceled".
func TestWaiterOutlivesCancelledFetchers(t *testing.T) {
	c := NewFrameCache(1 << 20)
	k := fcKey(1)
	_, fl, mine := c.lookup(k, false)
	if !mine {
		t.Fatal("key already claimed")
	}
	var calls atomic.Int32
	type result struct {
		b   *Buf
		err error
	}
	res := make(chan result, 1)
	go func() {
		b, err := c.get(context.Background(), k, nil, fcFill(c, 100, 7, &calls))
		res <- result{b, err}
	}()
	for range 6 { // more cancelled fetchers than the old three retries
		for deadline := time.Now().Add(2 * time.Second); ; { // the reader waits on fl
			c.mu.Lock()
			w := fl.waiters
			c.mu.Unlock()
			if w > 0 {
				break
			}
			select {
			case r := <-res:
				if r.err != nil {
					t.Fatalf("the reader failed while its context is alive: %v", r.err)
				}
				r.b.Release()
				return // it fetched the frame itself
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("the reader neither waited nor returned")
			}
			time.Sleep(time.Millisecond)
		}
		next := &flight{done: make(chan struct{})}
		c.mu.Lock()
		c.flights[k] = next // the next canceller claimed the key first
		c.mu.Unlock()
		c.complete(k, fl, nil, context.Canceled)
		fl = next
	}
	c.complete(k, fl, nil, context.Canceled)
	r := <-res
	if r.err != nil {
		t.Fatalf("the reader failed while its context is alive: %v", r.err)
	}
	r.b.Release()
}

// TestMemoWaiterOutlivesCancelledRuns: as TestWaiterOutlivesCancelledFetchers,
// for a Memo (a chunk's tar walk, a header check): a caller whose context
// is alive is not failed by six runs in a row whose callers' contexts
// ended. On the old code it gave up after three.
func TestMemoWaiterOutlivesCancelledRuns(t *testing.T) {
	var m Memo[int]
	r := &memoRun[int]{done: make(chan struct{})}
	m.run = r
	res := make(chan error, 1)
	go func() {
		v, err := m.Do(context.Background(), func(context.Context) (int, error) { return 42, nil }, nil)
		if err == nil && v != 42 {
			t.Errorf("value %d", v)
		}
		res <- err
	}()
	for range 6 {
		time.Sleep(20 * time.Millisecond) // the caller waits on r
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("the caller failed while its context is alive: %v", err)
			}
			return // it ran fill itself
		default:
		}
		next := &memoRun[int]{done: make(chan struct{})}
		m.mu.Lock()
		m.run = next // the next canceller started a run first
		m.mu.Unlock()
		r.err = context.Canceled
		close(r.done)
		r = next
	}
	m.mu.Lock()
	m.run = nil
	m.mu.Unlock()
	r.err = context.Canceled
	close(r.done)
	if err := <-res; err != nil {
		t.Fatalf("the caller failed while its context is alive: %v", err)
	}
}
