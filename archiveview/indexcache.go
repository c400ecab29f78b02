package archiveview

// Where persistent index files live (persist.go writes and reads them).
// Open with Options.IndexCache looks an archive's index up by a name
// derived from its manifest, loads it after the freshness checks, and on a
// miss builds the tree from the manifests and publishes a fresh file.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/wharf-s3/wharf/backend"
)

// IndexCache stores persistent index files by name.
//
// Fetch returns a local, readable file holding the index called name, or an
// error wrapping fs.ErrNotExist when the cache has none; release is called
// when the caller no longer needs the file. Publish stores the index file at
// local path under name. A local cache replaces an older file atomically; a
// shared cache keeps the first file published under a name (replicas race
// to publish the same index) and reports published == false to the others.
type IndexCache interface {
	Fetch(ctx context.Context, name string) (path string, release func(), err error)
	Publish(ctx context.Context, name, path string) (published bool, err error)
	// TempDir is where a file to publish is best written (Publish then
	// moves rather than copies it).
	TempDir() string
	// Shared reports whether several servers use the cache: names then
	// include the manifest's ETag, so that a file published for an older
	// manifest never blocks the current one.
	Shared() bool
	String() string
}

// indexName is the name of the index of bucket/manifestKey in a cache: a
// digest of the two (and, for a shared cache, of the manifest's ETag).
func indexName(bucket, manifestKey, etag string) string {
	h := sha256.Sum256([]byte(bucket + "\x00" + manifestKey + "\x00" + etag))
	return hex.EncodeToString(h[:16]) + indexCacheSuffix
}

// DirIndexCache is a local directory of index files (--index-cache DIR).
type DirIndexCache struct{ Dir string }

// Fetch implements IndexCache.
func (c DirIndexCache) Fetch(ctx context.Context, name string) (string, func(), error) {
	p := filepath.Join(c.Dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", nil, err
	}
	return p, func() {}, nil
}

// Publish implements IndexCache: the file is copied (or renamed, when it is
// a temporary file of this directory) into place atomically.
func (c DirIndexCache) Publish(ctx context.Context, name, path string) (bool, error) {
	dst := filepath.Join(c.Dir, name)
	if filepath.Dir(path) == filepath.Clean(c.Dir) {
		return true, os.Rename(path, dst)
	}
	src, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(c.Dir, ".widx-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), dst)
}

// Shared implements IndexCache.
func (DirIndexCache) Shared() bool { return false }

// TempDir implements IndexCache.
func (c DirIndexCache) TempDir() string { return c.Dir }

func (c DirIndexCache) String() string { return c.Dir }

// StoreIndexCache keeps index files in a bucket of the backing store
// (--index-cache s3://BUCKET/PREFIX), shared by every replica: the first
// replica to build an archive's index publishes it (a conditional write),
// and the others load it instead of reading the manifests. Fetched files
// are spooled to Spool, a local directory, for reading.
type StoreIndexCache struct {
	Store  backend.Store // must implement backend.Putter to publish
	Bucket string
	Prefix string // "" or ending in "/"
	Spool  string // local directory for fetched copies
}

func (c StoreIndexCache) key(name string) string { return c.Prefix + name }

// Fetch implements IndexCache: the object is copied to the spool directory.
func (c StoreIndexCache) Fetch(ctx context.Context, name string) (string, func(), error) {
	rc, _, err := c.Store.Get(ctx, c.Bucket, c.key(name))
	if errors.Is(err, backend.ErrNotFound) {
		return "", nil, fmt.Errorf("index %s: %w", c.key(name), fs.ErrNotExist)
	}
	if err != nil {
		return "", nil, err
	}
	defer rc.Close()
	if err := os.MkdirAll(c.Spool, 0o700); err != nil {
		return "", nil, err
	}
	f, err := os.CreateTemp(c.Spool, "fetched-*"+indexCacheSuffix)
	if err != nil {
		return "", nil, err
	}
	release := func() { os.Remove(f.Name()) }
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		release()
		return "", nil, fmt.Errorf("index s3://%s/%s: %w", c.Bucket, c.key(name), err)
	}
	if err := f.Close(); err != nil {
		release()
		return "", nil, err
	}
	return f.Name(), release, nil
}

// Publish implements IndexCache with a write that succeeds only if no
// object has the name yet.
func (c StoreIndexCache) Publish(ctx context.Context, name, path string) (bool, error) {
	p, ok := c.Store.(backend.Putter)
	if !ok {
		return false, fmt.Errorf("index cache %s: the store cannot write", c)
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	return p.PutIfAbsent(ctx, c.Bucket, c.key(name), f, fi.Size())
}

// Shared implements IndexCache.
func (StoreIndexCache) Shared() bool { return true }

// TempDir implements IndexCache.
func (c StoreIndexCache) TempDir() string { return c.Spool }

func (c StoreIndexCache) String() string { return "s3://" + c.Bucket + "/" + c.Prefix }

// ParseIndexCacheURL splits --index-cache s3://BUCKET/PREFIX into bucket
// and prefix (ending in "/" unless empty); ok is false for a value that is
// not an s3:// URL.
func ParseIndexCacheURL(v string) (bucket, prefix string, ok bool, err error) {
	rest, isURL := strings.CutPrefix(v, "s3://")
	if !isURL {
		return "", "", false, nil
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if bucket == "" || strings.ContainsAny(bucket, " \t\r\n\\") {
		return "", "", true, fmt.Errorf("index cache %q: want s3://BUCKET/PREFIX", v)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	for _, seg := range strings.Split(prefix, "/") {
		if seg == "." || seg == ".." {
			return "", "", true, fmt.Errorf("index cache %q: a prefix with %q", v, seg)
		}
	}
	return bucket, prefix, true, nil
}
