package archiveview

import (
	"errors"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// TestResolveKeysConfinedAtRoot: an upload whose manifest sits at the top
// of its bucket (uploads/<id>/manifest.json.gz) is confined to uploads/,
// not the whole bucket: a direct file naming another object of the bucket
// is refused at open, naming the key (issue 22; it was served before).
func TestResolveKeysConfinedAtRoot(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("another tenant's secret\n")
	rvPut(t, dir, "other-tenant/secret.txt", secret)
	res := rvPack(t, dir, rvSources(), cargopack.Options{FrameSize: 1 << 20, UploadID: "20260101-root"})
	if !strings.HasPrefix(res.ManifestKey, "uploads/") {
		t.Fatalf("manifest at %s, want uploads/<id>/", res.ManifestKey)
	}
	// Untouched, it opens: its own chunks lie under uploads/.
	a, err := rvOpen(t, dir, res.ManifestKey, Options{Name: "arch"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	a.Close()
	_, err = rvMutate(t, dir, res, func(m *manifest.Manifest) {
		m.Files = append(m.Files, rvDirectFile(m.SourcePath+"/leak.txt", "other-tenant/secret.txt", secret))
	})
	if !errors.Is(err, ErrInvalidTree) || !strings.Contains(err.Error(), `"other-tenant/secret.txt"`) {
		t.Fatalf("open: %v, want a refusal naming the key", err)
	}
}
