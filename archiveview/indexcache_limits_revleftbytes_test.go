package archiveview

import (
	"context"
	"errors"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// TestIndexCacheOtherFileCap: an index built under a file cap (as the
// catalog sets from --max-files-per-upload) is reused by an open with a
// looser cap (what fit the tighter one fits it: the tree is the same), so
// a restart with a larger --max-files-per-upload does not rebuild every
// index; a tighter cap than the one the index was built with reads the
// manifests again (it must refuse what is now too large).
func TestIndexCacheOtherFileCap(t *testing.T) {
	dir := t.TempDir()
	res := rvPack(t, dir, map[string][]byte{"a.txt": rvText(1, 3000), "b.txt": rvText(2, 500), "c.txt": rvText(3, 50)},
		cargopack.Options{Prefix: "c", UploadID: "20250304-00000001", FrameSize: 16 << 10})
	cache := DirIndexCache{Dir: t.TempDir()}
	open := func(maxFiles int) (int64, error) {
		t.Helper()
		f := piCountingStore(dir)
		a, err := Open(context.Background(), f, rvBucket, res.ManifestKey, Options{IndexCache: cache, Limits: manifest.Limits{MaxFiles: maxFiles}})
		if err == nil {
			a.Close()
		}
		return f.Requests("get"), err
	}
	if _, err := open(1000); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		maxFiles int
		gets     bool // the manifest is read again
		tooLarge bool
	}{
		{1000, false, false},
		{5000, false, false},
		{100000, false, false},
		{2, true, true},
		{999, true, false},
	} {
		gets, err := open(tc.maxFiles)
		if tc.tooLarge != errors.Is(err, manifest.ErrTooLarge) || (!tc.tooLarge && err != nil) {
			t.Fatalf("MaxFiles %d: %v", tc.maxFiles, err)
		}
		if (gets > 0) != tc.gets {
			t.Errorf("MaxFiles %d after an index built with 1000: %d GETs (want the manifest read again: %v)", tc.maxFiles, gets, tc.gets)
		}
	}
}
