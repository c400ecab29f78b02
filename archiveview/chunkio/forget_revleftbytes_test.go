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

// TestCorruptionForgottenKeepsPin: a chunk with a unit checked whole that
// later ranged reads rely on keeps its ETag pin when a corrupt unit of it
// is forgotten and the object turns out replaced: neither unit is read
// from the new object (both refused with ErrChanged) until a restart,
// since the checked unit's reads are only safe under the pin. (Guard
// test of the rule in forget.go.)
func TestCorruptionForgottenKeepsPin(t *testing.T) {
	const half = 64 << 10
	good := make([]byte, 2*half)
	for i := range good {
		good[i] = byte(i*5 + i>>8)
	}
	bad := bytes.Clone(good)
	bad[half+1000] ^= 0x10
	const key = "s/uploads/u/files/d"
	dir := t.TempDir()
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	ck := &clock{t: time.Date(2032, 2, 2, 0, 0, 0, 0, time.UTC)}
	chunks := []Chunk{{Key: key, Kind: Direct, Size: int64(len(good))}}
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{SmallVerifyBytes: -1, ForgetCorruptAfter: time.Minute, Now: ck.Now})
	defer set.Close()
	// Two extents of one direct object, each with its own sum (a split
	// file's parts): the first checks, the second is corrupt at rest.
	ea := Extent{Chunk: 0, Off: 0, Length: half, Sum: sha256.Sum256(good[:half]), HasSum: true}
	eb := Extent{Chunk: 0, Off: half, Length: half, Sum: sha256.Sum256(good[half:]), HasSum: true}
	read := func(e Extent) ([]byte, error) {
		src, err := set.OpenExtent(context.Background(), e, 10, 100)
		if err != nil {
			return nil, err
		}
		sr := &segReader{src: src}
		defer sr.Close()
		return io.ReadAll(sr)
	}
	if got, err := read(ea); err != nil || !bytes.Equal(got, good[10:110]) {
		t.Fatalf("first extent: %v", err)
	}
	if _, err := read(eb); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt extent: %v, want a checksum mismatch", err)
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
	for _, e := range []Extent{eb, ea, eb} {
		if _, err := read(e); !errors.Is(err, backend.ErrChanged) {
			t.Fatalf("extent at %d after the replacement: %v, want ErrChanged (the pin kept)", e.Off, err)
		}
	}
}
