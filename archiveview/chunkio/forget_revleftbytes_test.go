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

// TestCorruptionForgotten: a direct object corrupt at rest fails its whole
// check twice and is remembered (its reads are refused without a request);
// once the operator replaced it with the right bytes, it is served again
// after ForgetCorruptAfter, not only after a restart.
func TestCorruptionForgotten(t *testing.T) {
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
	cs := &countStore{inner: backend.NewFileStore(dir), ops: map[string]int{}}
	ck := &clock{t: time.Date(2032, 2, 2, 0, 0, 0, 0, time.UTC)}
	sum := sha256.Sum256(good)
	chunks := []Chunk{{Key: key, Kind: Direct, Size: int64(len(good)), Sum: sum, HasSum: true}}
	set := NewSet(cs, "bkt", chunks, Options{SmallVerifyBytes: -1, ForgetCorruptAfter: time.Minute, Now: ck.Now})
	defer set.Close()
	ctx := context.Background()
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
	// The operator replaces the object (a new file: a new ETag).
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
	gets := cs.n("range") + cs.n("get") + cs.n("stat")
	if _, err := read(); !errors.Is(err, ErrChecksum) {
		t.Fatalf("read within ForgetCorruptAfter: %v, want the remembered mismatch", err)
	}
	if n := cs.n("range") + cs.n("get") + cs.n("stat"); n != gets {
		t.Fatalf("a remembered failure made %d store requests", n-gets)
	}
	ck.Add(2 * time.Minute)
	got, err := read()
	if err != nil {
		t.Fatalf("read %v after the object was replaced and ForgetCorruptAfter passed: %v", 2*time.Minute, err)
	}
	if !bytes.Equal(got, good[1000:1100]) {
		t.Fatal("wrong bytes after the replacement")
	}
}
