package catalog

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestDatasetHistoryOlderClass: an older version's file shows the storage
// class its objects had in the history's listing of DATASET/v/ (the
// older versions are opened without listing their classes): a.txt's V1
// bytes live in V1's own chunks, archived to GLACIER, while every other
// key version's objects are STANDARD. With the old build every older
// version showed STANDARD (checked).
func TestDatasetHistoryOlderClass(t *testing.T) {
	d := publishHistory(t)
	g := faults.NewGlacier(faults.GlacierConfig{})
	root := filepath.Join(d.dir, dsBucket)
	v1 := dsPrefix + "/v/" + histIDs[0] + "/uploads/u1/"
	n := 0
	err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(v1)), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.HasPrefix(e.Name(), "manifest.json") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		g.SetClass(dsBucket, filepath.ToSlash(rel), backend.ClassGlacier, "")
		n++
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("V1's chunks: %d, %v", n, err)
	}
	cm := datasetManager(g.Store(backend.NewFileStore(d.dir)), Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
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
	res, err := h.ListVersions(archiveview.VersionListParams{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range res.Entries {
		v := e.Version
		if v.DeleteMarker {
			continue
		}
		got[v.Key+"@"+versionName(v.VersionID)] = v.Class
	}
	want := map[string]string{
		"a.txt@4": "", "a.txt@2": backend.ClassStandard, "a.txt@1": backend.ClassGlacier,
		"b.txt@1": "", "d.txt@4": "", "d.txt@1": backend.ClassStandard, "e.txt@2": backend.ClassStandard,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: class %q, want %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("versions %v, want %v", got, want)
	}
}
