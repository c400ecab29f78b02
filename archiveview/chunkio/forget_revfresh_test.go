package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
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

// flapStore reports an ETag of its own for its one object: "A" until
// armed, then "A" and "B" in turn, one per response to a read at or after
// cut (a store whose replicas disagree, or an object overwritten again
// and again, seen by the reads of one part of it). A ranged read whose
// If-Match is not the ETag it would report fails as S3's 412 does.
// ranges counts the ranged reads that start before cut.
type flapStore struct {
	inner  backend.Store
	armed  atomic.Bool
	n      atomic.Int64
	cut    int64
	ranges atomic.Int64
}

func (f *flapStore) etag(off int64) string {
	if off >= f.cut && f.armed.Load() && f.n.Add(1)%2 == 0 {
		return "B"
	}
	return "A"
}

func (f *flapStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	et := f.etag(off)
	if ifMatch != "" && ifMatch != et {
		return nil, backend.ObjectInfo{}, &backend.Error{Op: "range", Bucket: bucket, Key: key, Err: backend.ErrChanged}
	}
	if off < f.cut {
		f.ranges.Add(1)
	}
	b, info, err := f.inner.ReadRange(ctx, bucket, key, off, length, "")
	info.ETag = et
	return b, info, err
}

func (f *flapStore) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	b, info, err := f.inner.Get(ctx, bucket, key)
	info.ETag = f.etag(0)
	return b, info, err
}

func (f *flapStore) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	info, err := f.inner.Stat(ctx, bucket, key)
	info.ETag = f.etag(f.cut)
	return info, err
}

func (f *flapStore) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	return f.inner.List(ctx, bucket, prefix, fn)
}

// TestCorruptionRecheckBoundedFlapping: a span remembered as corrupt is
// read whole again at most twice per ForgetCorruptAfter, also when the
// store's ETag flaps. Before, every response with another ETag (here: to
// reads of another, unchecked extent of the same object) started the
// chunk's state afresh, forgetting the failure, so a client alternating
// two reads made wharf read the corrupt span whole twice for each pair:
// with a span of gigabytes, a cost amplification only the store's
// flapping bounded.
func TestCorruptionRecheckBoundedFlapping(t *testing.T) {
	const half = 64 << 10
	good := make([]byte, 2*half)
	for i := range good {
		good[i] = byte(i*5 + i>>8)
	}
	bad := bytes.Clone(good)
	bad[1000] ^= 0x10
	const key = "s/uploads/u/files/d"
	dir := t.TempDir()
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	fs := &flapStore{inner: backend.NewFileStore(dir), cut: half}
	ck := &clock{t: time.Date(2032, 2, 2, 0, 0, 0, 0, time.UTC)}
	chunks := []Chunk{{Key: key, Kind: Direct, Size: int64(len(good))}}
	set := NewSet(fs, "bkt", chunks, Options{SmallVerifyBytes: -1, ForgetCorruptAfter: time.Minute, Now: ck.Now})
	defer set.Close()
	// Extent a has its own sum (checked whole: corrupt at rest); extent
	// c has none (served as read, never a unit).
	ea := Extent{Chunk: 0, Off: 0, Length: half, Sum: sha256.Sum256(good[:half]), HasSum: true}
	ec := Extent{Chunk: 0, Off: half, Length: half}
	read := func(e Extent) error {
		src, err := set.OpenExtent(context.Background(), e, 10, 100)
		if err != nil {
			return err
		}
		sr := &segReader{src: src}
		defer sr.Close()
		_, err = io.ReadAll(sr)
		return err
	}
	if err := read(ea); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt extent: %v, want a checksum mismatch", err)
	}
	first := fs.ranges.Load()
	fs.armed.Store(true)
	for range 20 {
		read(ec) // fails or not: the flapping ETag is what is tested
		if err := read(ea); err == nil {
			t.Fatal("the corrupt extent was served")
		}
	}
	// At most one more pair of whole reads of the corrupt extent (one
	// fresh state for a replaced object) within ForgetCorruptAfter.
	if n := fs.ranges.Load() - first; n > 2*first {
		t.Fatalf("the corrupt extent was read %d more times within ForgetCorruptAfter (%d reads for its first check pair), want at most %d", n, first, 2*first)
	}
}

// TestCorruptionRecheckSecondReadFails: a span corrupt at rest whose
// second whole read (the one after its first mismatch) fails for a
// reason not of the data (a 503, a reset) is remembered at its next
// mismatch, not read whole twice again by every read. Before, nothing was
// remembered until both reads of one check mismatched, so a store that
// failed every second GET had the corrupt span read whole by every read.
func TestCorruptionRecheckSecondReadFails(t *testing.T) {
	good := make([]byte, 64<<10)
	for i := range good {
		good[i] = byte(i*5 + i>>8)
	}
	bad := bytes.Clone(good)
	bad[1000] ^= 0x10
	const key = "s/uploads/u/files/d"
	dir := t.TempDir()
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	var ranges atomic.Int64
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if r.Op != "range" {
			return faults.Fault{}
		}
		if ranges.Add(1)%2 == 0 {
			return faults.Fault{Kind: faults.FaultError} // every second GET: 503
		}
		return faults.Fault{}
	}})
	chunks := []Chunk{{Key: key, Kind: Direct, Size: int64(len(good))}}
	set := NewSet(store, "bkt", chunks, Options{SmallVerifyBytes: -1})
	defer set.Close()
	e := Extent{Chunk: 0, Off: 0, Length: int64(len(good)), Sum: sha256.Sum256(good), HasSum: true}
	const reads = 6
	for i := range reads {
		src, err := set.OpenExtent(context.Background(), e, 10, 100)
		if err == nil {
			sr := &segReader{src: src}
			_, err = io.ReadAll(sr)
			sr.Close()
		}
		if err == nil {
			t.Fatalf("read %d: the corrupt extent was served", i)
		}
	}
	if n := ranges.Load(); n > 4 {
		t.Fatalf("%d reads of the corrupt extent read it %d times, want at most 4 (a mismatch, a failed re-read, a second mismatch remembered)", reads, n)
	}
}
