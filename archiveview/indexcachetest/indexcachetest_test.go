package indexcachetest_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/indexcachetest"
	"github.com/wharf-s3/wharf/backend"
)

func secret(t *testing.T) *archiveview.IndexSecret {
	s, err := archiveview.NewIndexSecret(bytes.Repeat([]byte("k"), 40))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformanceDir: the local directory cache.
func TestConformanceDir(t *testing.T) { indexcachetest.Run(t, indexcachetest.DirHarness()) }

// TestConformanceFileStore: the shared cache in a FileStore prefix, with
// and without a secret.
func TestConformanceFileStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "conformance"), 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, bucket, key string, data []byte) {
		p := filepath.Join(dir, bucket, filepath.FromSlash(key))
		os.MkdirAll(filepath.Dir(p), 0o755)
		// A new mtime, as any rewrite of a real store gives a new ETag.
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Duration(len(data)+1) * time.Millisecond)
		os.Chtimes(p, later, later)
	}
	store := backend.NewFileStore(dir)
	t.Run("trust-writers", func(t *testing.T) { indexcachetest.Run(t, indexcachetest.StoreHarness(store, put, nil)) })
	t.Run("secret", func(t *testing.T) { indexcachetest.Run(t, indexcachetest.StoreHarness(store, put, secret(t))) })
}

// TestConformanceS3: the shared cache in an S3Store over gofakes3, with
// and without a secret.
func TestConformanceS3(t *testing.T) {
	mem := s3mem.New()
	if err := mem.CreateBucket("conformance"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, bucket, key string, data []byte) {
		if _, err := mem.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("trust-writers", func(t *testing.T) { indexcachetest.Run(t, indexcachetest.StoreHarness(store, put, nil)) })
	t.Run("secret", func(t *testing.T) { indexcachetest.Run(t, indexcachetest.StoreHarness(store, put, secret(t))) })
}
