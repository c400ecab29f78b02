package backend_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// TestPutIfMatch: a conditional replacement writes only over the object
// whose ETag it names; a stale ETag or a missing object is "not written"
// (false, nil) and leaves what is there. FileStore and S3Store over
// gofakes3.
func TestPutIfMatch(t *testing.T) {
	ctx := context.Background()
	fake := newFakeS3(t, nil)
	fake.put(t, "bkt", "seed", []byte("x"))
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	stores := map[string]backend.Store{"file": backend.NewFileStore(dir), "s3": fake.store}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			if name == "file" {
				if _, err := st.(backend.Putter).PutIfAbsent(ctx, "bkt", "seed", bytes.NewReader([]byte("x")), 1); err != nil {
					t.Fatal(err)
				}
			}
			mp := st.(backend.MatchPutter)
			put := func(key, etag, body string) bool {
				t.Helper()
				ok, err := mp.PutIfMatch(ctx, "bkt", key, etag, bytes.NewReader([]byte(body)), int64(len(body)))
				if err != nil {
					t.Fatal(err)
				}
				return ok
			}
			read := func(key string) (string, string) {
				t.Helper()
				rc, info, err := st.Get(ctx, "bkt", key)
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				b, _ := io.ReadAll(rc)
				return string(b), info.ETag
			}
			if put("absent/key", `"0123"`, "new") {
				t.Error("PutIfMatch wrote a missing object")
			}
			if _, err := st.(backend.Putter).PutIfAbsent(ctx, "bkt", "obj", bytes.NewReader([]byte("first")), 5); err != nil {
				t.Fatal(err)
			}
			_, etag := read("obj")
			if put("obj", "not-"+etag, "second") {
				t.Error("PutIfMatch wrote over an object of another ETag")
			}
			if got, _ := read("obj"); got != "first" {
				t.Errorf("after a refused replacement: %q", got)
			}
			if !put("obj", `"`+etag+`"`, "second!") {
				t.Fatal("PutIfMatch with the current ETag did not write")
			}
			got, etag2 := read("obj")
			if got != "second!" || etag2 == etag {
				t.Errorf("after the replacement: %q, ETag %q (was %q)", got, etag2, etag)
			}
			if put("obj", etag, "third") {
				t.Error("PutIfMatch wrote with the replaced object's ETag")
			}
		})
	}
}

// TestFilePutShortBody: a body shorter than its promised size fails both
// of FileStore's writes (they share writeTemp) with an error, writes
// nothing and leaves no temporary file behind; the object that was there
// stays.
func TestFilePutShortBody(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	st := backend.NewFileStore(dir)
	if ok, err := st.PutIfAbsent(ctx, "bkt", "obj", bytes.NewReader([]byte("first")), 5); !ok || err != nil {
		t.Fatalf("PutIfAbsent: %v, %v", ok, err)
	}
	info, err := st.Stat(ctx, "bkt", "obj")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.PutIfAbsent(ctx, "bkt", "new", bytes.NewReader([]byte("abc")), 5); ok || err == nil {
		t.Errorf("PutIfAbsent of a short body: %v, %v", ok, err)
	}
	if ok, err := st.PutIfMatch(ctx, "bkt", "obj", info.ETag, bytes.NewReader([]byte("abc")), 5); ok || err == nil {
		t.Errorf("PutIfMatch of a short body: %v, %v", ok, err)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "bkt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "obj" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("bucket holds %q, want only obj", names)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "bkt", "obj")); string(b) != "first" {
		t.Errorf("obj is %q after the failed writes", b)
	}
}
