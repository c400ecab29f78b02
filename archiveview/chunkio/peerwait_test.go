package chunkio

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
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

// stallFirstStat is a store whose first Stat waits until its caller's
// context ends (a HEAD whose requester left: a peer's ask that met its
// deadline); later ones pass through.
type stallFirstStat struct {
	backend.Store
	calls atomic.Int32
}

func (s *stallFirstStat) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	if s.calls.Add(1) == 1 {
		<-ctx.Done()
		return backend.ObjectInfo{}, ctx.Err()
	}
	return s.Store.Stat(ctx, bucket, key)
}

// TestClassesWaiterOutlivesCancelledHead: a check of an object's storage
// class that joined another caller's HEAD of it is not failed when that
// caller leaves (an owner's PeerFrame checks the chunk under the asking
// peer's context, which ends with the peer's deadline, and this replica's
// own client read waits on that HEAD); it HEADs on its own. Before, it got
// the other caller's "context canceled": a peer leaving failed the
// owner's own client's read.
func TestClassesWaiterOutlivesCancelledHead(t *testing.T) {
	key := "a/uploads/u1/chunks/c0"
	dir := t.TempDir()
	path := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := faults.NewGlacier(faults.GlacierConfig{})
	g.SetClass("bkt", key, backend.ClassGlacier, "")
	store := &stallFirstStat{Store: g.Store(backend.NewFileStore(dir))}
	c := NewClasses(store, "bkt", ClassOptions{RestoreTTL: time.Minute})
	if err := c.Load(context.Background(), []string{key}); err != nil {
		t.Fatal(err)
	}
	leaderCtx, leave := context.WithCancel(context.Background())
	defer leave()
	leader := make(chan error, 1)
	go func() { _, err := c.Object(leaderCtx, key, false); leader <- err }()
	heading := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		o := c.objs[key]
		return o != nil && o.head != nil
	}
	for deadline := time.Now().Add(2 * time.Second); !heading(); {
		if time.Now().After(deadline) {
			t.Fatal("no HEAD in flight")
		}
		time.Sleep(time.Millisecond)
	}
	waiter := make(chan error, 1)
	go func() { waiter <- c.CheckReadable(context.Background(), key) }()
	time.Sleep(50 * time.Millisecond) // the waiter joins the HEAD in flight
	leave()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("the leaving caller: %v", err)
	}
	select {
	case err := <-waiter:
		if isContextErr(err) {
			t.Fatalf("the waiter, whose context is alive, failed with the leaver's: %v", err)
		}
		if !errors.Is(err, backend.ErrArchived) {
			t.Fatalf("the waiter: %v, want the GLACIER object reported archived", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter is still waiting")
	}
	if n := store.calls.Load(); n != 2 {
		t.Errorf("%d HEADs, want 2 (the leaver's, then the waiter's own)", n)
	}
}
