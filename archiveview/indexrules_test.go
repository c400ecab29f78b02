package archiveview

import (
	"github.com/wharf-s3/wharf/archiveview/internal/index"

	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
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
// place (the golden chain: two uploads, a tombstone), the file then
// truncated in place. Every reader of the mapping survives: a GET of a file
// fails with an error wrapping index.ErrFileChanged that names the archive,
// the key and the file; Stat, List and Versions.StatVersion fail with a
// panic of that error (net/http fails that request alone); the versions
// listing, a version history built after the truncation, LearnedOffsets,
// VerifyBytes, VerifyWith, FileStorage and WriteIndex return it; Info
// returns with IndexFault set. Each check runs in a child process of its
// own, so that a reader left unguarded (SIGBUS) fails its check instead of
// the test binary, and one check's death hides no other.
func TestTruncatedMappedIndexRead(t *testing.T) {
	if dir := os.Getenv("WHARF_TRUNCATED_ARCHIVE"); dir != "" {
		truncatedArchiveChild(t, dir, os.Getenv("WHARF_TRUNCATED_CHECK"))
		return
	}
	dir := t.TempDir()
	data := goldenBuild(t, filepath.Join(dir, "store"))
	for _, check := range truncatedChecks {
		t.Run(check, func(t *testing.T) {
			path := filepath.Join(dir, check+".widx")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestTruncatedMappedIndexRead$", "-test.count=1")
			cmd.Env = append(os.Environ(), "WHARF_TRUNCATED_ARCHIVE="+dir, "WHARF_TRUNCATED_CHECK="+check)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the process did not survive: %v\n%s", err, out)
			}
			want := "check " + check + ": survived: " + "true"
			if !strings.Contains(string(out), want) || !strings.Contains(string(out), path) {
				t.Fatalf("child output lacks %q and the file's name %s:\n%s", want, path, out)
			}
		})
	}
}

// truncatedChecks are the readers TestTruncatedMappedIndexRead runs on a
// truncated mapping, one child process each.
var truncatedChecks = []string{"get", "stat", "list", "delete-marker", "list-versions", "stat-version",
	"build-versions", "info", "learned-offsets", "verify-bytes", "verify", "file-storage", "write-index", "each-identity", "object-keys"}

// truncatedArchiveChild serves dir/check.widx (the golden archive's index
// file, its objects in dir/store) in place, truncates the file and runs
// check, printing "check NAME: survived: BOOL DETAIL" where BOOL says
// that the reader failed with index.ErrFileChanged.
func truncatedArchiveChild(t *testing.T, dir, check string) {
	ctx := context.Background()
	path := filepath.Join(dir, check+".widx")
	a, err := OpenIndexFile(ctx, backend.NewFileStore(filepath.Join(dir, "store")), path, Options{Name: "trunc"})
	if err != nil {
		t.Fatal(err)
	}
	f, ok := a.Stat("a.txt")
	if !ok {
		t.Fatal("a.txt missing")
	}
	var vs *Versions
	if check == "list-versions" || check == "stat-version" {
		if vs, err = a.Versions(ctx); err != nil { // built before the truncation
			t.Fatal(err)
		}
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	// panicked runs f and returns the error it panicked with.
	panicked := func(f func()) (err error) {
		defer func() { err, _ = recover().(error) }()
		f()
		return errors.New("no panic")
	}
	switch check {
	case "get":
		_, err = a.Open(ctx, f, 0, f.Size)
		if err != nil && !strings.Contains(err.Error(), "archive trunc: key a.txt: index "+path) {
			err = fmt.Errorf("error does not name the archive, the key and the file: %w", err)
		}
	case "stat":
		err = panicked(func() { a.Stat("a.txt") })
	case "list":
		err = panicked(func() { a.List(ListParams{MaxKeys: 100}) })
	case "delete-marker":
		err = panicked(func() { a.DeleteMarker("z/gone.csv") })
	case "list-versions":
		_, err = vs.ListVersions(VersionListParams{MaxKeys: 100})
	case "stat-version":
		err = panicked(func() { vs.StatVersion("a.txt", "") })
	case "build-versions":
		_, err = a.Versions(ctx)
	case "info":
		err = errors.New("Info().IndexFault is empty")
		if in := a.Info(); strings.Contains(in.IndexFault, index.ErrFileChanged.Error()) {
			err = fmt.Errorf("Info().IndexFault %q: %w", in.IndexFault, index.ErrFileChanged)
		}
	case "learned-offsets":
		_, err = a.LearnedOffsets()
	case "verify-bytes":
		_, err = a.VerifyBytes()
	case "verify":
		_, err = a.VerifyWith(ctx, VerifyOptions{})
	case "file-storage":
		_, err = a.FileStorage(ctx, f)
	case "write-index":
		err = a.WriteIndex(io.Discard)
	case "each-identity":
		err = a.EachIdentity(func(string, FileIdentity) error { return nil })
	case "object-keys":
		_, err = a.ObjectKeys(f)
	default:
		t.Fatalf("unknown check %q", check)
	}
	detail := "<nil>"
	if err != nil {
		detail = err.Error()
	}
	println("check "+check+": survived:", errors.Is(err, index.ErrFileChanged), detail)
}
