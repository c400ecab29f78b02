package backend

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// randBytes returns n deterministic pseudo-random bytes for seed.
func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 0x77}))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fakeS3 is a real gofakes3 server (in-memory backend) on loopback, behind
// FaultyHTTP, with an S3Store pointed at it.
type fakeS3 struct {
	mem   *s3mem.Backend
	fh    *FaultyHandler
	srv   *httptest.Server
	store *S3Store
}

func newFakeS3(t *testing.T, mod func(*S3Config)) *fakeS3 {
	t.Helper()
	mem := s3mem.New()
	faker := gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog()))
	fh := FaultyHTTP(faker.Server(), nil)
	srv := httptest.NewServer(fh)
	t.Cleanup(srv.Close)
	cfg := S3Config{
		Endpoint:        srv.URL,
		Region:          "us-east-1",
		PathStyle:       true,
		AccessKeyID:     "AKIDTEST",
		SecretAccessKey: "secret",
		MaxBackoff:      5 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	// Keep the environment (profiles, AWS_* endpoints) out of the tests.
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := NewS3Store(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeS3{mem: mem, fh: fh, srv: srv, store: store}
}

func (f *fakeS3) put(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	if ok, _ := f.mem.BucketExists(bucket); !ok {
		if err := f.mem.CreateBucket(bucket); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.mem.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

// readAllRange reads a ReadRange result fully.
func readAllRange(s Store, bucket, key string, off, n int64, ifMatch string) ([]byte, ObjectInfo, error) {
	rc, info, err := s.ReadRange(context.Background(), bucket, key, off, n, ifMatch)
	if err != nil {
		return nil, info, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, info, err
}

// wantErr checks that err wraps sentinel (nil = no error) and, when it is a
// backend error, names bucket and key.
func wantErr(t *testing.T, err, sentinel error, bucket, key string) {
	t.Helper()
	if sentinel == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want one wrapping %v", err, sentinel)
	}
	var be *Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v is not a *backend.Error", err)
	}
	if be.Bucket != bucket || be.Key != key {
		t.Fatalf("error names %s/%s, want %s/%s: %v", be.Bucket, be.Key, bucket, key, err)
	}
}
