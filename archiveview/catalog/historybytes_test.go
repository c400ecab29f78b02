package catalog

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryWrongBytes: an older version's chunks replaced under
// the server by chunks of the same layout holding other bytes (its
// manifest, and so the history's description, unchanged) are never served
// as that version: the versionId= read fails naming the archive and the
// key.
func TestDatasetHistoryWrongBytes(t *testing.T) {
	d := publishHistory(t)
	cm := datasetManager(backend.NewFileStore(d.dir), Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")
	h, _, err := cm.History(ctx, "ocean", a, true)
	if err != nil {
		t.Fatal(err)
	}
	// V1's upload packed again, a.txt with other bytes of the same size,
	// its chunks copied over V1's.
	other := t.TempDir()
	files := map[string][]byte{"a.txt": []byte("a9"), "b.txt": []byte("b"), "d.txt": []byte("d")}
	packVersion(t, other, dsPrefix, histIDs[0], "u1", histIDs[0], files, time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	root := filepath.Join(other, dsBucket)
	copied := 0
	err = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.Contains(filepath.Base(p), "manifest") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		old, err := os.Stat(filepath.Join(d.dir, dsBucket, rel))
		if err != nil || old.Size() != int64(len(data)) {
			t.Fatalf("%s: the repacked chunk's layout differs (%v)", rel, err)
		}
		copied++
		return os.WriteFile(filepath.Join(d.dir, dsBucket, rel), data, 0o644)
	})
	if err != nil || copied == 0 {
		t.Fatalf("copied %d chunks: %v", copied, err)
	}
	v, ok, err := h.Lookup(ctx, "a.txt", histIDs[0])
	if err != nil || !ok || v.Archive == nil {
		t.Fatalf("a.txt as of V1: %v %v %v", ok, err, v.Archive)
	}
	rc, err := v.Archive.Open(ctx, v.File, 0, v.Size)
	var got []byte
	if err == nil {
		got, err = io.ReadAll(rc)
		rc.Close()
	}
	if err == nil {
		t.Fatalf("a.txt as of V1 with replaced chunks: served %q", got)
	}
	if !strings.Contains(err.Error(), "a.txt") || !strings.Contains(err.Error(), v.Archive.Name()) {
		t.Fatalf("a.txt as of V1 with replaced chunks: %v, want an error naming archive %s and key a.txt", err, v.Archive.Name())
	}
	t.Logf("refused: %v", err)
}
