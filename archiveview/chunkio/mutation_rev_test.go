package chunkio

// Tests written for the hand mutants of the rev-mutation audit that no
// test killed (TESTING.md, "Mutation audit (rev-mutation)").

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// TestSpeculativeLaunchKeepsFairShare: a speculative part is launched only
// while the stream's bytes in flight plus the part stay within its fair
// share of the budget (the budget over the streams reading), though the
// budget itself has room; a demand part is not held to it. With four
// streams reading an 8 MiB budget the share is 2 MiB.
func TestSpeculativeLaunchKeepsFairShare(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 20
	if err := os.MkdirAll(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bkt", "obj"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := NewFrameCache(0, WithMemory(8<<20), WithPartSize(size))
	set := NewSet(backend.NewFileStore(dir), "bkt", []Chunk{{Key: "obj", Kind: Direct, Size: size}}, Options{Readahead: -1, Cache: cache})
	t.Cleanup(set.Close)
	for range 4 {
		set.lim.streamStarted()
	}
	defer func() {
		for range 4 {
			set.lim.streamEnded()
		}
	}()
	if got := set.lim.share(); got != 2<<20 {
		t.Fatalf("share %d with 4 streams on 8 MiB, want 2 MiB", got)
	}
	plan := partPlan{off: 0, end: size}
	for _, tc := range []struct {
		held int64
		mode allocMode
		ok   bool
	}{
		{0, speculative, true},
		{1 << 20, speculative, true},    // 1 + 1 MiB: exactly the share
		{1<<20 + 1, speculative, false}, // one byte over it
		{3 << 20, speculative, false},   // well over it, the budget free
		{3 << 20, demand, true},         // a demand part is not held to it
	} {
		p, err := set.launch(context.Background(), nil, 0, plan, 1, 0, tc.held, tc.mode, nil)
		if err != nil {
			t.Fatalf("held %d, mode %d: %v", tc.held, tc.mode, err)
		}
		if (p != nil) != tc.ok {
			t.Fatalf("held %d bytes, mode %d: launched %v, want %v (share %d)", tc.held, tc.mode, p != nil, tc.ok, set.lim.share())
		}
		if p != nil {
			if _, err := p.wait(context.Background(), size); err != nil {
				t.Fatal(err)
			}
			p.close()
		}
		if used, _ := cache.MemoryInUse(); used != 0 {
			t.Fatalf("held %d: %d bytes still charged after the part closed", tc.held, used)
		}
	}
}

// TestMemoryWaitEndsOnTime: a demand take that finds the budget full
// waits at most the memory wait (WithMemoryWait), then fails with ErrBusy
// (503 SlowDown), however often it is woken meanwhile.
func TestMemoryWaitEndsOnTime(t *testing.T) {
	const wait = 200 * time.Millisecond
	cache := NewFrameCache(0, WithMemory(1<<20), WithMemoryWait(wait))
	lim := cache.Limits()
	ctx := WithClient(context.Background(), "")
	cl, err := lim.reserve(ctx, 1<<20, demand)
	if err != nil {
		t.Fatal(err)
	}
	defer lim.unreserve(cl, 1<<20)
	// Something is freed (and taken back) every 20 ms: each wakes the
	// waiter, which finds the budget full again.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				lim.signal()
			}
		}
	}()
	start := time.Now()
	_, err = lim.reserve(ctx, 1, demand)
	took := time.Since(start)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("a take on a full budget: %v, want ErrBusy", err)
	}
	if took < wait || took > wait+time.Second {
		t.Fatalf("a take on a full budget failed after %v, want the memory wait %v (within a second)", took, wait)
	}
}
