// Package indexcachetest is the conformance suite of archiveview.IndexCache:
// every implementation (the local directory, the shared store prefix, a
// future cache tier) runs Run, which checks the contract stated on the
// interface with real index files:
//
//   - Fetch of a name never published wraps fs.ErrNotExist;
//   - Publish then Fetch gives back the published bytes exactly, and
//     PublishMovesTempFile says truly whether Publish took the file;
//   - a second, different valid index under the same name replaces the
//     first where NamesIncludeETag is false (a local cache), and is kept
//     out (AlreadyValid) where it is true (a shared cache);
//   - bytes damaged behind the cache's back are replaced by the next
//     Publish (Replaced, for a shared cache), and an authenticated cache
//     never hands out bytes it did not MAC under that name: a copy of the
//     index without its MAC, or an authentic object moved from another
//     name, is refused with archiveview.ErrUnauthenticatedIndex;
//   - replicas publishing one name at once leave one valid object, and
//     exactly one of them reports Published.
package indexcachetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// Harness describes an implementation under test.
type Harness struct {
	// New returns an empty cache.
	New func(t *testing.T) archiveview.IndexCache
	// Overwrite replaces what the cache stores under name with data,
	// behind its back (a fault, or whoever else can write its storage).
	Overwrite func(t *testing.T, name archiveview.IndexName, data []byte)
	// Raw returns what the cache stores under name (nil: nothing).
	Raw func(t *testing.T, name archiveview.IndexName) []byte
	// Authenticated: Fetch hands out only what the cache itself wrote
	// (a MAC under the name).
	Authenticated bool
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	ix := buildIndexes(t)
	ctx := context.Background()
	name := archiveview.IndexName{Bucket: bucket, ManifestKey: ix.key, ETag: "etag-1"}

	publish := func(t *testing.T, c archiveview.IndexCache, n archiveview.IndexName, data []byte) archiveview.PublishOutcome {
		t.Helper()
		if err := os.MkdirAll(c.TempDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := os.CreateTemp(c.TempDir(), ".conformance-*")
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		f.Close()
		out, err := c.Publish(ctx, n, f.Name())
		if err != nil {
			t.Fatalf("Publish %s: %v", n, err)
		}
		_, statErr := os.Stat(f.Name())
		if c.PublishMovesTempFile() && out.Wrote() && statErr == nil {
			t.Errorf("PublishMovesTempFile, but %s is still there after Publish", f.Name())
		}
		if !c.PublishMovesTempFile() {
			if statErr != nil {
				t.Errorf("Publish copies, but removed its input: %v", statErr)
			}
			os.Remove(f.Name())
		}
		return out
	}
	fetch := func(t *testing.T, c archiveview.IndexCache, n archiveview.IndexName) ([]byte, error) {
		t.Helper()
		p, release, err := c.Fetch(ctx, n)
		if err != nil {
			return nil, err
		}
		defer release()
		return os.ReadFile(p)
	}
	wantFetch := func(t *testing.T, c archiveview.IndexCache, n archiveview.IndexName, want []byte) {
		t.Helper()
		got, err := fetch(t, c, n)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Fetch %s: %d bytes, err %v; want the %d bytes published", n, len(got), err, len(want))
		}
	}

	t.Run("missing", func(t *testing.T) {
		c := h.New(t)
		if _, _, err := c.Fetch(ctx, name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Fetch of a name never published: %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("publish-fetch", func(t *testing.T) {
		c := h.New(t)
		if out := publish(t, c, name, ix.v1); out != archiveview.Published {
			t.Fatalf("first Publish: %v", out)
		}
		wantFetch(t, c, name, ix.v1)
		wantFetch(t, c, name, ix.v1) // a release does not take the cache's copy
	})
	t.Run("second-publish", func(t *testing.T) {
		c := h.New(t)
		publish(t, c, name, ix.v1)
		out := publish(t, c, name, ix.v2)
		if c.NamesIncludeETag() {
			if out != archiveview.AlreadyValid {
				t.Fatalf("a second index under a shared name: %v, want %v", out, archiveview.AlreadyValid)
			}
			wantFetch(t, c, name, ix.v1)
		} else {
			if out != archiveview.Published {
				t.Fatalf("a second index in a local cache: %v, want %v", out, archiveview.Published)
			}
			wantFetch(t, c, name, ix.v2)
		}
	})
	t.Run("damaged-replaced", func(t *testing.T) {
		c := h.New(t)
		publish(t, c, name, ix.v1)
		raw := h.Raw(t, name)
		for _, damage := range []struct {
			what string
			data []byte
		}{
			{"flipped byte", flip(raw, len(raw)/2)},
			{"truncated", raw[:len(raw)-7]},
			{"empty", nil},
			{"not an index", []byte("not an index")},
		} {
			h.Overwrite(t, name, damage.data)
			if got, err := fetch(t, c, name); h.Authenticated && err == nil {
				t.Errorf("%s: an authenticated cache handed out %d damaged bytes", damage.what, len(got))
			} else if errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: Fetch says nothing is there: %v", damage.what, err)
			}
			want := archiveview.Published
			if c.NamesIncludeETag() {
				want = archiveview.Replaced
			}
			if out := publish(t, c, name, ix.v1); out != want {
				t.Errorf("%s: Publish %v, want %v", damage.what, out, want)
			}
			wantFetch(t, c, name, ix.v1)
		}
	})
	if h.Authenticated {
		t.Run("unauthenticated-refused", func(t *testing.T) {
			c := h.New(t)
			h.Overwrite(t, name, ix.v1) // a valid index, without the MAC
			if _, err := fetch(t, c, name); !errors.Is(err, archiveview.ErrUnauthenticatedIndex) {
				t.Fatalf("an index without MAC: Fetch %v, want ErrUnauthenticatedIndex", err)
			}
			if out := publish(t, c, name, ix.v1); out != archiveview.Replaced {
				t.Fatalf("Publish over an unauthenticated index: %v", out)
			}
			wantFetch(t, c, name, ix.v1)
			// The authentic object moved to other names: another ETag (a
			// rollback), another manifest key, another bucket.
			for _, other := range []archiveview.IndexName{
				{Bucket: name.Bucket, ManifestKey: name.ManifestKey, ETag: "etag-2"},
				{Bucket: name.Bucket, ManifestKey: name.ManifestKey + "x", ETag: name.ETag},
				{Bucket: name.Bucket + "x", ManifestKey: name.ManifestKey, ETag: name.ETag},
			} {
				h.Overwrite(t, other, h.Raw(t, name))
				if _, err := fetch(t, c, other); !errors.Is(err, archiveview.ErrUnauthenticatedIndex) {
					t.Errorf("the object of %+v under %+v: Fetch %v, want ErrUnauthenticatedIndex", name, other, err)
				}
			}
		})
	}
	t.Run("concurrent-publish", func(t *testing.T) {
		c := h.New(t)
		const replicas = 4
		outs := make([]archiveview.PublishOutcome, replicas)
		errs := make([]error, replicas)
		paths := make([]string, replicas)
		for i := range paths {
			os.MkdirAll(c.TempDir(), 0o700)
			paths[i] = filepath.Join(c.TempDir(), ".conformance-"+string(rune('a'+i)))
			if err := os.WriteFile(paths[i], ix.v1, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = c.Publish(ctx, name, paths[i])
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("replica %d: Publish: %v", i, err)
			}
			os.Remove(paths[i])
		}
		published := 0
		for _, o := range outs {
			if o == archiveview.Published {
				published++
			}
		}
		if c.NamesIncludeETag() && published != 1 {
			t.Errorf("outcomes %v: want exactly one Published", outs)
		}
		wantFetch(t, c, name, ix.v1)
	})
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x20
	return b
}

const bucket = "conformance"

type indexes struct {
	key    string
	v1, v2 []byte // two valid index files of one manifest key
}

// buildIndexes packs two versions of one archive and writes their indexes.
func buildIndexes(t *testing.T) indexes {
	t.Helper()
	dir := t.TempDir()
	mtime := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	var ix indexes
	for i, files := range []map[string][]byte{
		{"a.txt": bytes.Repeat([]byte("one "), 3000), "d/b": []byte("b")},
		{"a.txt": bytes.Repeat([]byte("two "), 3000), "d/c": []byte("c")},
	} {
		res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, mtime),
			cargopack.Options{Bucket: bucket, Prefix: "pre", UploadID: "u-conf", FrameSize: 4096, Created: mtime.Add(time.Duration(i) * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := archiveview.BuildIndex(context.Background(), backend.NewFileStore(dir), bucket, res.ManifestKey, archiveview.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		err = a.WriteIndex(&buf)
		a.Close()
		if err != nil {
			t.Fatal(err)
		}
		ix.key = res.ManifestKey
		if i == 0 {
			ix.v1 = buf.Bytes()
		} else {
			ix.v2 = buf.Bytes()
		}
	}
	if bytes.Equal(ix.v1, ix.v2) {
		t.Fatal("the two versions have the same index")
	}
	return ix
}

// DirHarness is the harness of an archiveview.DirIndexCache.
func DirHarness() Harness {
	var dir string
	return Harness{
		New: func(t *testing.T) archiveview.IndexCache {
			dir = t.TempDir()
			return archiveview.DirIndexCache{Dir: dir}
		},
		Overwrite: func(t *testing.T, n archiveview.IndexName, data []byte) {
			if err := os.WriteFile(filepath.Join(dir, n.String()), data, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		Raw: func(t *testing.T, n archiveview.IndexName) []byte {
			b, _ := os.ReadFile(filepath.Join(dir, n.String()))
			return b
		},
	}
}

// StoreHarness is the harness of an archiveview.StoreIndexCache in a
// prefix of store (which must hold bucket "conformance"), with secret or
// none; put writes an object behind the cache's back.
func StoreHarness(store backend.Store, put func(t *testing.T, bucket, key string, data []byte), secret *archiveview.IndexSecret) Harness {
	var c archiveview.StoreIndexCache
	n := 0
	return Harness{
		New: func(t *testing.T) archiveview.IndexCache {
			n++
			c = archiveview.StoreIndexCache{Store: store, Bucket: bucket, Prefix: "idx-" + string(rune('a'+n%26)) + time.Now().Format("150405.000000000") + "/",
				Spool: t.TempDir(), Secret: secret}
			return c
		},
		Overwrite: func(t *testing.T, name archiveview.IndexName, data []byte) {
			put(t, bucket, c.Prefix+name.String(), data)
		},
		Raw: func(t *testing.T, name archiveview.IndexName) []byte {
			rc, _, err := store.Get(context.Background(), bucket, c.Prefix+name.String())
			if err != nil {
				return nil
			}
			defer rc.Close()
			b, _ := io.ReadAll(rc)
			return b
		},
		Authenticated: secret != nil,
	}
}
