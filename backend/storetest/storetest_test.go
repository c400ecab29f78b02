package storetest_test

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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/backend/storetest"
)

const bucket = "conf"

// fileFixture is a FileStore over a fresh directory.
func fileFixture(t *testing.T) (*backend.FileStore, func(*testing.T, string, string, []byte)) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, b, k string, data []byte) {
		p := filepath.Join(dir, b, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return backend.NewFileStore(dir), put
}

func TestFileStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Fixture {
		s, put := fileFixture(t)
		return storetest.Fixture{Store: s, Bucket: bucket, Put: put, Puts: true}
	})
}

// TestS3StoreGofakes3: S3Store against a real S3 server on loopback
// (gofakes3, in memory).
func TestS3StoreGofakes3(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Fixture {
		mem := s3mem.New()
		if err := mem.CreateBucket(bucket); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
		t.Cleanup(srv.Close)
		t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
		s, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
			AccessKeyID: "k", SecretAccessKey: "s", MaxBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		put := func(t *testing.T, b, k string, data []byte) {
			if _, err := mem.PutObject(b, k, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
				t.Fatal(err)
			}
		}
		// S3Store restores (RestoreObject); gofakes3 has no archive classes.
		return storetest.Fixture{Store: s, Bucket: bucket, Put: put, Puts: true, Restores: true}
	})
}

// TestFaultyNoFaults: faults.Faulty with no faults is a conforming store
// and keeps the capabilities of the store it wraps: writes over a
// FileStore, and restores over the Glacier model.
func TestFaultyNoFaults(t *testing.T) {
	t.Run("over FileStore", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Fixture {
			fs, put := fileFixture(t)
			return storetest.Fixture{Store: faults.NewFaulty(fs, faults.FaultConfig{}), Inner: fs, Bucket: bucket, Put: put, Puts: true}
		})
	})
	t.Run("over Glacier", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Fixture {
			fs, put := fileFixture(t)
			g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
			gs := g.Store(fs)
			return storetest.Fixture{Store: faults.NewFaulty(gs, faults.FaultConfig{}), Inner: gs, Bucket: bucket, Put: put,
				Puts: true, Restores: true, Archive: func(b, k string) { g.SetClass(b, k, backend.ClassGlacier, "") }}
		})
	})
}

// TestGlacier: the Glacier model's store restores and keeps the inner
// store's writes.
func TestGlacier(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Fixture {
		fs, put := fileFixture(t)
		g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
		return storetest.Fixture{Store: g.Store(fs), Bucket: bucket, Put: put, Puts: true, Restores: true}
	})
}

// TestInstrumented: backend.Instrument keeps what the store it wraps can
// do, and claims nothing more.
func TestInstrumented(t *testing.T) {
	t.Run("over FileStore", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Fixture {
			fs, put := fileFixture(t)
			return storetest.Fixture{Store: backend.Instrument(fs, backend.NewMetrics(prometheus.NewRegistry())), Inner: fs,
				Bucket: bucket, Put: put, Puts: true}
		})
	})
	t.Run("over Glacier", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Fixture {
			fs, put := fileFixture(t)
			g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
			gs := g.Store(fs)
			return storetest.Fixture{Store: backend.Instrument(gs, backend.NewMetrics(prometheus.NewRegistry())), Inner: gs,
				Bucket: bucket, Put: put, Puts: true, Restores: true,
				Archive: func(b, k string) { g.SetClass(b, k, backend.ClassGlacier, "") }}
		})
	})
	t.Run("over a store that cannot write", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Fixture {
			fs, put := fileFixture(t)
			ro := readOnly{fs}
			return storetest.Fixture{Store: backend.Instrument(ro, backend.NewMetrics(prometheus.NewRegistry())), Inner: ro,
				Bucket: bucket, Put: put}
		})
	})
}

// readOnly hides every optional capability of a store.
type readOnly struct{ backend.Store }
