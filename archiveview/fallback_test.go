package archiveview

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// unwritableCache is an index cache that has nothing and cannot take
// anything, not even a temporary file: Open builds the index from the
// manifests and must serve that archive from memory.
type unwritableCache struct{ dir string }

func (c unwritableCache) Fetch(context.Context, IndexName) (string, func(), error) {
	return "", nil, fs.ErrNotExist
}
func (c unwritableCache) Publish(context.Context, IndexName, string) (PublishOutcome, error) {
	return 0, errors.New("cache refuses writes")
}
func (c unwritableCache) TempDir() string            { return c.dir }
func (c unwritableCache) NamesIncludeETag() bool     { return false }
func (c unwritableCache) PublishMovesTempFile() bool { return false }
func (c unwritableCache) String() string             { return "unwritable" }

// fbGlacierS3 is gofakes3 behind the Glacier model's HTTP layer holding the
// objects of dir (a FileStore root written by cargopack), and an S3Store
// over it.
func fbGlacierS3(t *testing.T, dir string) (*backend.S3Store, *faults.Glacier) {
	t.Helper()
	g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
	mem := s3mem.New()
	if err := mem.CreateBucket(rvBucket); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, rvBucket)
	if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		key, _ := filepath.Rel(root, p)
		_, err = mem.PutObject(rvBucket, filepath.ToSlash(key), map[string]string{}, bytes.NewReader(b), int64(len(b)), nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.HTTP(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(context.Background(), backend.S3Config{
		Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxBackoff: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return store, g
}

// TestIndexCacheFallbackKeepsStore: when the index cache cannot be
// written, Open serves the archive it built from the manifests. That
// archive reads and restores through the store it was given, not through
// the recorder that watched the manifest reads: RestoreObject of an
// archived chunk through S3Store is sent (before the fix the chunk Set and
// the storage classes kept the recording wrapper, which hides the
// Restorer, and the restore failed with ErrNoRestorer).
func TestIndexCacheFallbackKeepsStore(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"cold.bin": rvRandom(1, 20000), "warm.txt": rvText(2, 3000)}
	res := rvPack(t, dir, files, cargopack.Options{Prefix: "fb", UploadID: "u1", FrameSize: 8 << 10, ChunkSize: 16 << 10})
	cold, _ := stPartKeys(res.Manifest, "fb", "cold.bin")
	warm, _ := stPartKeys(res.Manifest, "fb", "warm.txt")
	if len(cold) != 1 || cold[0] == warm[0] {
		t.Fatalf("test setup: cold.bin in %q, warm.txt in %q; want different chunks", cold, warm)
	}
	store, g := fbGlacierS3(t, dir)
	g.SetClass(rvBucket, cold[0], backend.ClassGlacier, "")
	ctx := context.Background()

	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Open(ctx, store, rvBucket, res.ManifestKey, Options{StorageClasses: true,
		IndexCache: unwritableCache{dir: filepath.Join(notDir, "tmp")}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.store != store {
		t.Errorf("archive serves through %T, not the store it was given", a.store)
	}
	f := a.mustStat(t, "cold.bin")
	if c := a.StorageClass(f); c != "GLACIER" {
		t.Fatalf("class of cold.bin: %s", c)
	}
	rep, err := a.Restore(ctx, f, backend.RestoreRequest{Days: 1, Tier: backend.RetrievalBulk})
	if err != nil || rep.Result != backend.RestoreStarted {
		t.Fatalf("restore of an archived chunk through S3Store: %+v, %v", rep, err)
	}
	if got := g.Started(); !slices.Equal(got, []string{rvBucket + "/" + cold[0]}) {
		t.Fatalf("restores started: %v", got)
	}
	if b := vReadAll(t, a, a.mustStat(t, "warm.txt"), 0, int64(len(files["warm.txt"]))); !bytes.Equal(b, files["warm.txt"]) {
		t.Fatal("warm.txt differs")
	}
}
