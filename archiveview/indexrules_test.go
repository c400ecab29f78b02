package archiveview

import (
	"github.com/wharf-s3/wharf/archiveview/internal/index"

	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// irResealed returns the index file data with every occurrence of from
// replaced by to (of the same length, so the layout holds) and a fresh
// trailer: an index file a writer of the cache could forge, which passes
// the tree hash.
func irResealed(t *testing.T, data []byte, from, to string) []byte {
	t.Helper()
	if len(from) != len(to) {
		t.Fatalf("test setup: %q and %q differ in length", from, to)
	}
	body := bytes.Clone(data[:len(data)-sha256.Size])
	if !bytes.Contains(body, []byte(from)) {
		t.Fatalf("test setup: %q not in the index file", from)
	}
	body = bytes.ReplaceAll(body, []byte(from), []byte(to))
	// The tree hash of a body under 8 MiB: sha256 of its one block's sha256.
	blk := sha256.Sum256(body)
	sum := sha256.Sum256(blk[:])
	return append(body, sum[:]...)
}

// TestIndexLoaderKeyRules: a loaded index can describe only what a
// manifest could. Re-hashed index files whose file key, tombstone key or
// chunk key no manifest could give (a ".." path a downloader would join
// to its target directory, a chunk key with ".." segments sent to the
// store, a chunk outside the archive's prefix) are each refused with an
// error naming the index file and the key. The first three loaded before
// the loader applied the manifest path's rules.
func TestIndexLoaderKeyRules(t *testing.T) {
	tests := []struct {
		name     string
		pack     func(t *testing.T, dir string) string // returns the manifest key
		from, to string
	}{
		{
			name: "file key with .. segments",
			pack: func(t *testing.T, dir string) string {
				return rvPack(t, dir, map[string][]byte{"aa/bb/etc/passwd": rvText(1, 100)},
					cargopack.Options{Prefix: "p", UploadID: "u1", FrameSize: 4 << 10}).ManifestKey
			},
			from: "aa/bb/etc/passwd", to: "../../etc/passwd",
		},
		{
			name: "tombstone key with .. segments",
			pack: func(t *testing.T, dir string) string {
				rvPack(t, dir, map[string][]byte{"aa/bb/etc/passwd": rvText(1, 100), "k.txt": rvText(2, 100)},
					cargopack.Options{Prefix: "p", UploadID: "u1", FrameSize: 4 << 10})
				return rvPack(t, dir, map[string][]byte{"k.txt": rvText(3, 100)},
					cargopack.Options{Prefix: "p", UploadID: "u2", FrameSize: 4 << 10, PreviousManifestID: "u1",
						SyncType: "incremental", DeletedPaths: []string{"aa/bb/etc/passwd"}}).ManifestKey
			},
			from: "aa/bb/etc/passwd", to: "../../etc/passwd",
		},
		{
			name: "chunk key with .. segments",
			pack: func(t *testing.T, dir string) string {
				return rvPack(t, dir, map[string][]byte{"0123456789abc": rvText(1, 100)},
					cargopack.Options{UploadID: "u1", Direct: true}).ManifestKey
			},
			from: "uploads/u1/files/0123456789abc", to: "uploads/../../privy/secret.bin",
		},
		{
			name: "chunk key outside the archive's prefix",
			pack: func(t *testing.T, dir string) string {
				return rvPack(t, dir, map[string][]byte{"x.bin": rvText(1, 100)},
					cargopack.Options{Prefix: "p", UploadID: "u1", Direct: true}).ManifestKey
			},
			from: "p/uploads/u1/files/x.bin", to: "q/uploads/u1/files/x.bin",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key := tc.pack(t, dir)
			store := backend.NewFileStore(dir)
			a, err := BuildIndex(context.Background(), store, rvBucket, key, Options{})
			if err != nil {
				t.Fatal(err)
			}
			good := piIndexBytes(t, a)
			a.Close()
			path := filepath.Join(t.TempDir(), "forged.widx")
			if err := os.WriteFile(path, irResealed(t, good, tc.from, tc.from), 0o600); err != nil {
				t.Fatal(err)
			}
			// The unforged file loads: the refusal below is the key's.
			b, err := OpenIndexFile(context.Background(), store, path, Options{})
			if err != nil {
				t.Fatalf("unforged index refused: %v", err)
			}
			b.Close()
			if err := os.WriteFile(path, irResealed(t, good, tc.from, tc.to), 0o600); err != nil {
				t.Fatal(err)
			}
			b, err = OpenIndexFile(context.Background(), store, path, Options{})
			if err == nil {
				b.Close()
				t.Fatalf("forged index with %q loaded", tc.to)
			}
			if !errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.to) {
				t.Fatalf("error %q: want ErrBadIndex naming %s and %q", err, path, tc.to)
			}
			// Open with the forged file as its cache refuses it and reads
			// the manifest instead.
			cache := t.TempDir()
			name := indexName(rvBucket, key, "")
			if err := os.WriteFile(filepath.Join(cache, name), irResealed(t, good, tc.from, tc.to), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Open(context.Background(), store, rvBucket, key, Options{IndexCache: DirIndexCache{Dir: cache}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, ok := c.Stat("../../etc/passwd"); ok {
				t.Fatal("the forged key is served")
			}
		})
	}
}

// TestTruncatedMappedIndexRead: an archive served from its index file in
// place, the file then truncated in place: a GET of a file fails with an
// error wrapping index.ErrFileChanged that names the archive and the key,
// a HEAD (Stat) fails with a panic of that error (net/http fails that
// request alone), and the process lives. In a child process, so that the
// old behaviour (SIGBUS) fails the test instead of the test binary.
func TestTruncatedMappedIndexRead(t *testing.T) {
	if path := os.Getenv("WHARF_TRUNCATED_ARCHIVE"); path != "" {
		a, err := OpenIndexFile(context.Background(), backend.NewFileStore(t.TempDir()), path, Options{Name: "trunc"})
		if err != nil {
			t.Fatal(err)
		}
		f, ok := a.Stat("a.txt")
		if !ok {
			t.Fatal("a.txt missing")
		}
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		_, err = a.Open(context.Background(), f, 0, f.Size)
		println("get:", errors.Is(err, index.ErrFileChanged), err.Error())
		func() {
			defer func() {
				e, _ := recover().(error)
				println("head:", errors.Is(e, index.ErrFileChanged))
			}()
			a.Stat("a.txt")
		}()
		println("survived")
		return
	}
	data, err := os.ReadFile(goldenIndexPath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mapped.widx")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTruncatedMappedIndexRead$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WHARF_TRUNCATED_ARCHIVE="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the process did not survive: %v\n%s", err, out)
	}
	for _, want := range []string{"get: true archive trunc: key a.txt: index " + path, "head: true", "survived"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("child output lacks %q:\n%s", want, out)
		}
	}
}
