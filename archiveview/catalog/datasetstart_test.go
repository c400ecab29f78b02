package catalog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetRescanDuringStartOpen: a rescan while a dataset version the
// start began opening is still opening (a slow manifest) does not wait
// for that open (it did not start it), whether CURRENT still names that
// version or has turned bad meanwhile, and does not cancel it: the bucket
// serves the version once the manifest arrives.
func TestDatasetRescanDuringStartOpen(t *testing.T) {
	for _, bad := range []bool{false, true} {
		name := "same pointer"
		if bad {
			name = "pointer turned bad"
		}
		t.Run(name, func(t *testing.T) {
			d := publishDataset(t)
			gs := newGateStore(backend.NewFileStore(d.dir))
			cm := NewManager(Config{Store: gs, Aliases: []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}},
				OpenTimeout: time.Minute, OpenWait: 50 * time.Millisecond, RetireGrace: time.Hour, Logger: zerolog.Nop()})
			defer cm.CloseAll()
			if err := cm.Scan(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the start's manifest GET", func() bool { n, _, _ := gs.state(); return n == 1 })
			if bad {
				writeObject(t, d.dir, dsPrefix+"/CURRENT", `{"schema":"cargoship.current/2"}`)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now()
			err := cm.Scan(ctx, false)
			if took := time.Since(start); err != nil || took > 2*time.Second {
				t.Fatalf("rescan: %v after %v; want it done at once, not waiting for the start's open", err, took)
			}
			close(gs.gate)
			waitFor(t, "the start's open", cm.Ready)
			checkTree(t, bucketArchive(t, cm, "ocean"), v1Files)
		})
	}
}

// TestDatasetPointerToUnfinishedManifest: a pointer whose manifest_key
// names anything but a finished upload's manifest of its version
// (DATASET/v/<id>/uploads/<upload>/manifest.json[.gz]) is refused, and the
// bucket keeps its last good version: here a resume checkpoint
// (manifest.partial.json.gz, a half-published upload; discovery and a
// pinned @<id> never serve one), which holds a readable manifest listing
// only part of the version's files.
func TestDatasetPointerToUnfinishedManifest(t *testing.T) {
	d := publishDataset(t)
	cm := datasetManager(backend.NewFileStore(d.dir), Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a1 := bucketArchive(t, cm, "ocean")
	v3 := "20260914T000000Z-dddddd"
	part := packVersion(t, d.dir, dsPrefix, v3, "u3", v3, map[string][]byte{"a.txt": []byte("half\n")}, time.Date(2026, 9, 14, 0, 0, 0, 0, time.UTC))
	key := strings.TrimSuffix(part, "manifest.json.gz") + "manifest.partial.json.gz"
	if err := os.Rename(filepath.Join(d.dir, dsBucket, part), filepath.Join(d.dir, dsBucket, key)); err != nil {
		t.Fatal(err)
	}
	writeObject(t, d.dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, v3, key, v1ID, 1))
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	if a := bucketArchive(t, cm, "ocean"); a != a1 {
		t.Fatalf("the bucket serves %s (%d files), not the last good version", a.Info().ManifestKey, a.Files())
	}
	cm.dsMu.Lock()
	last := cm.datasets["ocean"].lastErr
	cm.dsMu.Unlock()
	if !strings.Contains(last, "s3://lake/ocean/CURRENT") || !strings.Contains(last, "manifest.partial.json.gz") {
		t.Fatalf("last pointer error %q: want it naming the pointer and the key", last)
	}
}
