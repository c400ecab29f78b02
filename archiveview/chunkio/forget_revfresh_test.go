package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// TestCorruptionForgottenListedDirect: the recovery of 0ad6304 (a direct
// object remembered as corrupt is served again once the operator replaced
// it and ForgetCorruptAfter passed) when the archive's storage-class
// listing reported the object's ETag at open, as every S3 listing does.
// The state started afresh for the new object pinned its first GET to
// that listed ETag again (pinListed), the old object's, so every read of
// the replaced object was refused with ErrChanged until a restart.
func TestCorruptionForgottenListedDirect(t *testing.T) {
	good := make([]byte, 96<<10)
	for i := range good {
		good[i] = byte(i*7 + i>>9)
	}
	bad := bytes.Clone(good)
	bad[50000] ^= 0x40
	const key = "s/uploads/u/files/d"
	dir := t.TempDir()
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	store := backend.NewFileStore(dir)
	ck := &clock{t: time.Date(2032, 2, 2, 0, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	cls := NewClasses(store, "bkt", ClassOptions{Now: ck.Now})
	if err := cls.Load(ctx, []string{key}); err != nil {
		t.Fatal(err)
	}
	if cls.listedETag(key) == "" {
		t.Fatal("the listing reported no ETag (the test needs one)")
	}
	chunks := []Chunk{{Key: key, Kind: Direct, Size: int64(len(good)), Sum: sha256.Sum256(good), HasSum: true}}
	set := NewSet(store, "bkt", chunks, Options{SmallVerifyBytes: -1, ForgetCorruptAfter: time.Minute, Now: ck.Now, Classes: cls})
	defer set.Close()
	e := Extent{Chunk: 0, Off: 0, Length: int64(len(good))}
	read := func() ([]byte, error) {
		src, err := set.OpenExtent(ctx, e, 1000, 100)
		if err != nil {
			return nil, err
		}
		sr := &segReader{src: src}
		defer sr.Close()
		return io.ReadAll(sr)
	}
	if _, err := read(); !errors.Is(err, ErrChecksum) {
		t.Fatalf("read of the corrupt object: %v, want a checksum mismatch", err)
	}
	np := p + ".new"
	if err := os.WriteFile(np, good, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(np, later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(np, p); err != nil {
		t.Fatal(err)
	}
	ck.Add(2 * time.Minute)
	for i := range 2 {
		got, err := read()
		if err != nil {
			t.Fatalf("read %d after the listed object was replaced and ForgetCorruptAfter passed: %v", i, err)
		}
		if !bytes.Equal(got, good[1000:1100]) {
			t.Fatal("wrong bytes after the replacement")
		}
	}
}
