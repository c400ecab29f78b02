package bench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestFetchClock: the first response is timed when the store answers (after
// its latency), the fetch ends with the last body read to its end or
// closed, and reset starts over.
func TestFetchClock(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b", "k"), make([]byte, 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	const lat = 30 * time.Millisecond
	c := &fetchClock{Store: faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: lat})}
	ctx := context.Background()
	c.reset(time.Now())
	if h, d := c.times(); h != 0 || d != 0 {
		t.Fatalf("after reset: %v, %v; want 0, 0", h, d)
	}
	a, _, err := c.ReadRange(ctx, "b", "k", 0, 1024, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := c.ReadRange(ctx, "b", "k", 1024, 1024, "")
	if err != nil {
		t.Fatal(err)
	}
	h, d := c.times()
	if h < lat || d != 0 {
		t.Fatalf("two responses, no body done: headers %v (want >= %v), done %v (want 0)", h, lat, d)
	}
	if _, err := io.Copy(io.Discard, a); err != nil {
		t.Fatal(err)
	}
	_, d1 := c.times()
	if d1 < h {
		t.Fatalf("first body read to its end: done %v, want >= headers %v", d1, h)
	}
	time.Sleep(10 * time.Millisecond)
	b.Close()
	a.Close()
	if _, d2 := c.times(); d2 < d1+10*time.Millisecond {
		t.Fatalf("second body closed 10 ms later: done %v, want >= %v", d2, d1+10*time.Millisecond)
	}
}
