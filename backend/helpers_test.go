package backend

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
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
