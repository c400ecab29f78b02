package catalog

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// TestOpenChargesStorageState: an open discovered upload whose storage
// classes are learned keeps about 210 bytes of class and restore state
// per chunk (chunkio.Classes) beside its index: the index memory budget
// charges it, at least 200 bytes per chunk beyond the index's own bytes,
// and gives it back when the archive is closed. Without storage classes
// nothing more is charged. On the code before, the state was charged to
// no budget.
func TestOpenChargesStorageState(t *testing.T) {
	dir := t.TempDir()
	writeWideUpload(t, dir, "wide", 400_000) // 400 chunks
	for _, tc := range []struct {
		name    string
		classes bool
		least   int64 // per chunk, beyond the index
	}{
		{"with storage classes", true, 200},
		{"without", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := NewManager(Config{Store: backend.NewFileStore(dir), IndexMemory: 256 << 20, Logger: zerolog.Nop(),
				Options: archiveview.Options{StorageClasses: tc.classes}})
			a, err := cm.openUpload(context.Background(), "wide", "lake", "base/uploads/wide/manifest.json.gz", 1, openExtra{})
			if err != nil {
				t.Fatal(err)
			}
			info := a.Info()
			index := info.IndexBytes
			if info.IndexInPlace {
				index = 0
			}
			used, _, _ := cm.IndexMemory()
			extra := used - index
			t.Logf("%d chunks: index %d bytes, charged %d (%d beyond the index)", info.Chunks, index, used, extra)
			if want := tc.least * int64(info.Chunks); extra < want || !tc.classes && extra != 0 {
				t.Errorf("charged %d bytes beyond the index for %d chunks; want at least %d (and 0 without storage classes)", extra, info.Chunks, want)
			}
			cm.closeArchive(a)
			cm.CloseAll()
			if used, _, _ := cm.IndexMemory(); used != 0 {
				t.Errorf("%d bytes still charged after the close", used)
			}
		})
	}
}
