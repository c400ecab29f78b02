package archiveview

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// TestDuplicateOriginalsLinear: mapping duplicates to their originals
// costs time linear in the entries, whatever the manifest: here 40,000
// entries share one checksum and size in one chunk, and 40,000 duplicates
// of that content name another chunk, so no candidate is in the
// duplicate's own chunk and each takes the fallback (any entry with the
// checksum and size). On the old code each duplicate scanned every
// candidate: 1.6e9 steps, Open took many seconds (quadratic CPU an
// uploader controls); now Open takes well under a second of that work.
func TestDuplicateOriginalsLinear(t *testing.T) {
	const n = 40000
	dir := t.TempDir()
	h := hoPack(t, dir, map[string][]byte{"data/a.txt": hoText(1, 100), "data/b.txt": hoText(2, 100)}, cargopack.Options{ChunkSize: 1, FrameSize: 1 << 20})
	m := h.manifest()
	ca, cb := h.chunkOf(m, "data/a.txt"), h.chunkOf(m, "data/b.txt")
	if ca == cb {
		t.Fatal("fixture: a and b in one chunk")
	}
	a := *hoEntry(t, m, "data/a.txt")
	bKey := m.Chunks[cb].S3Key
	files := make([]manifest.FileEntry, 0, 2*n+2)
	files = append(files, m.Files...)
	for i := range n {
		o := a
		o.Path = fmt.Sprintf("%s/orig/%06d", m.SourcePath, i)
		files = append(files, o)
		d := a
		d.Path = fmt.Sprintf("%s/dup/%06d", m.SourcePath, i)
		d.IsDuplicate, d.DuplicateOfHash, d.S3Key, d.ArchiveOffset = true, a.Checksum, bKey, nil
		files = append(files, d)
	}
	m.Files = files
	m.TotalFiles = int64(len(files))
	h.putManifest(m)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	ar, err := Open(ctx, backend.NewFileStore(dir), h.bucket, h.mkey, Options{Name: hoName})
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer ar.Close()
	if _, ok := ar.Stat("dup/039999"); !ok {
		t.Fatal("dup/039999 not listed")
	}
	t.Logf("Open of %d entries (%d duplicates): %v", len(files), n, took)
	if took > 4*time.Second {
		t.Fatalf("Open took %v: duplicates are mapped to originals in quadratic time", took)
	}
}
