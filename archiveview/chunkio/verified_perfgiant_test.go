package chunkio

import (
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

// TestChangedCheckNotResent: a unit check whose If-Match GET fails with
// ErrChanged (the object was replaced after another unit of it pinned its
// ETag) is sent once. The check is retried only when the chunk's state
// was started afresh (repinChanged, for an object remembered corrupt);
// here the state keeps its pin, so a retry would send the same failing
// GET again. On the old code every such read sent it twice.
func TestChangedCheckNotResent(t *testing.T) {
	const half = 64 << 10
	good := make([]byte, 2*half)
	for i := range good {
		good[i] = byte(i*11 + i>>7)
	}
	const key = "s/uploads/u/files/d"
	dir := t.TempDir()
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, good, 0o644); err != nil {
		t.Fatal(err)
	}
	cs := &countStore{inner: backend.NewFileStore(dir), ops: map[string]int{}}
	chunks := []Chunk{{Key: key, Kind: Direct, Size: int64(len(good))}}
	set := NewSet(cs, "bkt", chunks, Options{SmallVerifyBytes: -1})
	defer set.Close()
	ea := Extent{Chunk: 0, Off: 0, Length: half, Sum: sha256.Sum256(good[:half]), HasSum: true}
	eb := Extent{Chunk: 0, Off: half, Length: half, Sum: sha256.Sum256(good[half:]), HasSum: true}
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
	if err := read(ea); err != nil {
		t.Fatalf("first extent (its check pins the ETag): %v", err)
	}
	// The object is replaced (a new file: a new ETag).
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
	before := cs.n("range") + cs.n("get")
	if err := read(eb); !errors.Is(err, backend.ErrChanged) {
		t.Fatalf("second extent of the replaced object: %v, want ErrChanged", err)
	}
	if n := cs.n("range") + cs.n("get") - before; n != 1 {
		t.Fatalf("the second extent's check sent %d GETs that fail If-Match, want 1", n)
	}
}
