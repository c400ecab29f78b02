package faults

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// randBytes returns n deterministic pseudo-random bytes for seed.
func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0xfa017))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// readAllRange reads a ReadRange result fully.
func readAllRange(s backend.Store, bucket, key string, off, n int64, ifMatch string) ([]byte, backend.ObjectInfo, error) {
	rc, info, err := s.ReadRange(context.Background(), bucket, key, off, n, ifMatch)
	if err != nil {
		return nil, info, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, info, err
}

// wantErr checks that err wraps sentinel (nil = no error) and is a
// *backend.Error naming bucket and key, as every store error must be.
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
	var be *backend.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v is not a *backend.Error", err)
	}
	if be.Bucket != bucket || be.Key != key {
		t.Fatalf("error names %s/%s, want %s/%s: %v", be.Bucket, be.Key, bucket, key, err)
	}
}
