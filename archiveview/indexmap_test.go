package archiveview

import (
	"github.com/wharf-s3/wharf/archiveview/internal/index"

	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// imMapped reports whether path is mapped into this process (Linux); ok is
// false where /proc/self/maps cannot tell.
func imMapped(t *testing.T, path string) (mapped, ok bool) {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false, false
	}
	abs, _ := filepath.Abs(path)
	return bytes.Contains(maps, []byte(abs)), true
}

// imWaitUnmapped collects garbage until path is no longer mapped.
func imWaitUnmapped(t *testing.T, path string) bool {
	t.Helper()
	for i := 0; i < 50; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		if m, _ := imMapped(t, path); !m {
			return true
		}
	}
	return false
}

// TestMappedIndexLifetime: an archive opened from a local index cache is
// served from the cache file mapped in place; Close leaves the mapping
// (reads after Close still work, as before); the file is unmapped once
// the archive is unreachable. A file replaced by rename while mapped (as
// wharf publishes) does not disturb the archive that maps the old one.
func TestMappedIndexLifetime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/maps") // the mapping itself is tested everywhere by the other tests
	}
	dir, key, want := piSetup(t, piShape{opt: cargopack.Options{FrameSize: 16 << 10, SplitSize: 60000, Dedup: true}, files: hoDupFiles()})
	cache := t.TempDir()
	path := filepath.Join(cache, indexName(rvBucket, key, ""))
	store := backend.NewFileStore(dir)
	open := func() *Archive {
		a, err := Open(context.Background(), store, rvBucket, key, Options{Name: "m", IndexCache: DirIndexCache{Dir: cache}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := open() // builds, publishes, serves from the published file
	if !first.tree.Idx.InPlace() {
		t.Fatal("a fresh build with a local cache is not served from its index file")
	}
	first.Close()
	first = nil
	a := open() // loads the published file
	if !a.tree.Idx.InPlace() {
		t.Fatal("not served from the mapped file")
	}
	if m, _ := imMapped(t, path); !m {
		t.Fatalf("%s is not mapped", path)
	}
	keys := hoAllKeys(a)

	// Replace the cache file by rename (a rebuild publishing) while a is
	// mapped: a keeps serving its own (old) inode.
	junk := filepath.Join(cache, ".widx-junk")
	if err := os.WriteFile(junk, []byte("not an index"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(junk, path); err != nil {
		t.Fatal(err)
	}
	a.Close()
	piReadAll(t, a, want, rand.New(rand.NewPCG(1, 1))) // after Close and the rename
	if got := hoAllKeys(a); len(got) != len(keys) {
		t.Fatalf("listing after the rename: %d keys, want %d", len(got), len(keys))
	}

	// The junk file is refused and rebuilt; the new archive maps the new file.
	b := open()
	if !b.tree.Idx.InPlace() {
		t.Fatal("rebuilt archive not served from the mapped file")
	}
	b.Close()
	b, a = nil, nil
	if !imWaitUnmapped(t, path) {
		t.Errorf("%s still mapped after its archives became unreachable", path)
	}
}

// TestStoreIndexCacheSpoolReleasedAfterUnmap: the shared cache's spooled
// copy stays on disk while mapped and is removed after the unmap.
func TestStoreIndexCacheSpoolReleasedAfterUnmap(t *testing.T) {
	dir, key, want := piSetup(t, piShape{opt: cargopack.Options{FrameSize: 16 << 10}})
	spool := t.TempDir()
	c := StoreIndexCache{Store: backend.NewFileStore(dir), Bucket: rvBucket, Prefix: "wharf-index/", Spool: spool}
	open := func() *Archive {
		a, err := Open(context.Background(), piCountingStore(dir), rvBucket, key, Options{Name: "s", IndexCache: c})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	spooled := func() []string {
		ents, _ := os.ReadDir(spool)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	a := open() // builds: serves from its temporary file in the spool
	if !a.tree.Idx.InPlace() {
		t.Fatal("a fresh build with a shared cache is not served from its index file")
	}
	b := open() // fetches the published object into the spool
	if !b.tree.Idx.InPlace() {
		t.Fatal("a fetched index is not served in place")
	}
	if n := len(spooled()); n != 2 {
		t.Fatalf("spool holds %v while both are mapped; want 2 files", spooled())
	}
	piReadAll(t, b, want, rand.New(rand.NewPCG(1, 1)))
	a.Close()
	b.Close()
	a, b = nil, nil
	for i := 0; i < 100 && len(spooled()) > 0; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if s := spooled(); len(s) != 0 {
		t.Errorf("spool still holds %v after the archives became unreachable", s)
	}
}

// TestIndexColumnsCopied: the path for machines that cannot use the file
// in place (not little-endian, or misaligned bytes) decodes copies that
// equal the in-place views and serves the same tree.
func TestIndexColumnsCopied(t *testing.T) {
	for _, sh := range []piShape{{name: "dedup-split", opt: cargopack.Options{FrameSize: 16 << 10, SplitSize: 60000, Dedup: true,
		ContentHash: true, Metadata: func(string) map[string]string { return map[string]string{"magika_mime": "text/plain"} }}, files: hoDupFiles()},
		{name: "chain", chain: piChain}} {
		t.Run(sh.name, func(t *testing.T) {
			dir, key, want := piSetup(t, sh)
			a, err := Open(context.Background(), backend.NewFileStore(dir), rvBucket, key, Options{})
			if err != nil {
				t.Fatal(err)
			}
			data := piIndexBytes(t, a)
			d, err := index.Decode(data, "copied")
			if err != nil {
				t.Fatal(err)
			}
			d.CopyColumns()
			p, err := d.Provenance()
			if err != nil {
				t.Fatal(err)
			}
			b, err := loadTree(d, p, backend.NewFileStore(dir), Options{})
			if err != nil {
				t.Fatal(err)
			}
			piSameIndex(t, a, b)
			piSameTree(t, a, b)
			if !bytes.Equal(piIndexBytes(t, b), data) {
				t.Error("the copied index does not write back to the same file")
			}
			// Misaligned bytes: the loader copies instead of viewing.
			shifted := make([]byte, len(data)+1)
			copy(shifted[1:], data)
			c, err := openIndexBytes(backend.NewFileStore(dir), shifted[1:], "misaligned", Options{})
			if err != nil {
				t.Fatal(err)
			}
			piSameIndex(t, a, c)
			piReadAll(t, c, want, rand.New(rand.NewPCG(2, 2)))
		})
	}
}

// TestOpenIndexFile: serving an index file in place through the public
// call; a truncated file and a file that is not an index are refused.
func TestOpenIndexFile(t *testing.T) {
	dir, key, want := piSetup(t, piShape{opt: cargopack.Options{FrameSize: 16 << 10}})
	a, err := Open(context.Background(), backend.NewFileStore(dir), rvBucket, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "a.widx")
	if err := a.WriteIndexFile(p); err != nil {
		t.Fatal(err)
	}
	b, err := OpenIndexFile(context.Background(), backend.NewFileStore(dir), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !b.tree.Idx.InPlace() {
		t.Error("not mapped")
	}
	piSameTree(t, a, b)
	piReadAll(t, b, want, rand.New(rand.NewPCG(3, 3)))
	data, _ := os.ReadFile(p)
	for name, bad := range map[string][]byte{"truncated": data[:len(data)-1000], "empty": {}, "text": []byte("hello")} {
		q := filepath.Join(t.TempDir(), name)
		os.WriteFile(q, bad, 0o644)
		if _, err := OpenIndexFile(context.Background(), backend.NewFileStore(dir), q, Options{}); err == nil ||
			!strings.Contains(err.Error(), q) {
			t.Errorf("%s: err %v, want an error naming the file", name, err)
		}
	}
	if _, err := OpenIndexFile(context.Background(), backend.NewFileStore(dir), filepath.Join(t.TempDir(), "missing"), Options{}); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}
