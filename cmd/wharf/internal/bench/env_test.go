package bench

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestFreshAndRunningBackend: with the HTTP S3 model a running wharf
// opens an archive and reads a cold frame over the connections it already
// has (none dialled), while after renewBacking (a freshly started wharf)
// the same open and read dial their own; the in-process model has no connections to renew. This is what
// the cold-frame workload's two wharf lines rest on.
func TestFreshAndRunningBackend(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Latency, cfg.Bandwidth, cfg.TempDir = 0, 0, t.TempDir()
	e, err := newEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	files := map[string][]byte{}
	for i := 0; i < 4; i++ {
		b, err := io.ReadAll(newMixedReader(uint64(i), 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		files[fmt.Sprintf("f/%d.bin", i)] = b
	}
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), cargopack.FromMap(files, mtime), cargopack.Options{
		Bucket: benchBucket, Prefix: "fr", UploadID: "fresh", FrameSize: 4 << 20, ChunkSize: 1 << 30, ShardCount: 1, Created: mtime,
	})
	if err != nil {
		t.Fatal(err)
	}
	read := func(renew bool) int64 {
		t.Helper()
		if renew {
			if ok, err := e.renewBacking(ctx); !ok || err != nil {
				t.Fatalf("renewBacking: %v, %v", ok, err)
			}
		}
		c0, _ := e.backendConns() // the open's manifest GET counts too
		if _, err := e.serveArchive(ctx, res.ManifestKey, 64<<20, -1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := timedGet(ctx, e.client, "wharf", "f/2.bin", files["f/2.bin"]); err != nil {
			t.Fatal(err)
		}
		c1, _ := e.backendConns()
		return c1 - c0
	}
	// Warm: a fresh start, then cold reads until one dials nothing (the
	// pool grows to as many connections as a cold read of this frame runs
	// at once: its sub-range GETs are parallel, and a connection is back
	// in the pool only once its body is closed, so the first reads may
	// dial one more). Then every cold read of the running wharf reuses.
	read(true)
	for i := 0; i < 5 && read(false) != 0; i++ {
	}
	for i := 0; i < 3; i++ {
		if n := read(false); n != 0 {
			t.Errorf("running wharf: cold read %d dialled %d connections, want 0 (reused)", i+1, n)
		}
	}
	if n := read(true); n < 1 {
		t.Errorf("freshly started wharf: the cold read dialled %d connections, want at least 1", n)
	}

	cfg.Model = ModelInProcess
	cfg.TempDir = t.TempDir()
	ip, err := newEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ip.close()
	if ok, err := ip.renewBacking(ctx); ok || err != nil {
		t.Errorf("in-process model: renewBacking = %v, %v; want false, nil", ok, err)
	}
	if _, ok := ip.backendConns(); ok {
		t.Error("in-process model reports backend connections")
	}
}
