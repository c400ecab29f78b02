package archiveview

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
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

// slashStore serves a FileStore's objects under keys with a leading "/"
// or a "//" too, as S3 holds the manifests CargoShip writes with an empty
// prefix ("/uploads/<id>/manifest.json.gz") or a prefix with a trailing
// slash ("p//uploads/...").
type slashStore struct{ backend.Store }

func slashKey(key string) string {
	return strings.ReplaceAll(strings.TrimPrefix(key, "/"), "//", "/")
}

func (s slashStore) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	return s.Store.Get(ctx, bucket, slashKey(key))
}

func (s slashStore) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	return s.Store.Stat(ctx, bucket, slashKey(key))
}

func (s slashStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	return s.Store.ReadRange(ctx, bucket, slashKey(key), off, length, ifMatch)
}

// TestResolveKeysConfinedAtSlashRoot: an upload whose manifest key is
// CargoShip's empty-prefix form "/uploads/<id>/manifest.json.gz" is
// confined to uploads/ like "uploads/<id>/...", and one under
// "p//uploads/" (a prefix with a trailing slash) or "/p/uploads/" to p/.
// On the old code the first confined nothing (KeyRoot gave ""), so its
// manifest could publish any object of the bucket; the others confined to
// "p/" and "/p", under which no resolved key lies.
func TestResolveKeysConfinedAtSlashRoot(t *testing.T) {
	for _, tc := range []struct{ prefix, manifestKey string }{
		{"", "/uploads/20260101-slash/manifest.json.gz"},
		{"p", "p//uploads/20260101-slash/manifest.json.gz"},
		{"p", "/p/uploads/20260101-slash/manifest.json.gz"},
	} {
		t.Run(tc.manifestKey, func(t *testing.T) {
			dir := t.TempDir()
			secret := []byte("another tenant's secret\n")
			rvPut(t, dir, "other-tenant/secret.txt", secret)
			res := rvPack(t, dir, rvSources(), cargopack.Options{FrameSize: 1 << 20, UploadID: "20260101-slash", Prefix: tc.prefix})
			store := slashStore{backend.NewFileStore(dir)}
			a, err := Open(context.Background(), store, rvBucket, tc.manifestKey, Options{Name: "arch"})
			if err != nil {
				t.Fatalf("open of the untouched archive: %v", err)
			}
			a.Close()
			// rvMutate writes the manifest at its canonical key (and opens
			// that); the slash form reads the same object.
			if a, err := rvMutate(t, dir, res, func(m *manifest.Manifest) {
				// bucket-qualified: resolves to other-tenant/secret.txt whatever the prefix
				m.Files = append(m.Files, rvDirectFile(m.SourcePath+"/leak.txt", rvBucket+"/other-tenant/secret.txt", secret))
			}); err == nil {
				a.Close()
			}
			a, err = Open(context.Background(), store, rvBucket, tc.manifestKey, Options{Name: "arch"})
			if err == nil {
				a.Close()
			}
			if !errors.Is(err, ErrInvalidTree) || !strings.Contains(err.Error(), `"other-tenant/secret.txt"`) {
				t.Fatalf("open: %v, want a refusal naming the key", err)
			}
		})
	}
}
