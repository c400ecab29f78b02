package archiveview

// Where persistent index files live (persist.go writes and reads them).
// Open with Options.IndexCache looks an archive's index up by a name
// derived from its manifest, loads it after the freshness checks, and on a
// miss builds the tree from the manifests and publishes a fresh file.
//
// A local directory (DirIndexCache) is trusted as the server's own disk. A
// prefix of the backing store shared by replicas (StoreIndexCache) is
// written by others too: with an IndexSecret its objects carry a MAC over
// the file and its IndexName (internal/index/mac.go), and an object that fails it is
// never used and is replaced, conditional on its ETag. The contract every
// implementation keeps is checked by archiveview/indexcachetest.

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

	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/backend"
)

// IndexCache stores persistent index files by name.
//
// Fetch returns a local, readable file holding the index called name, or an
// error wrapping fs.ErrNotExist when the cache has none (any other error:
// the cache holds something under the name that it will not hand out, such
// as an object whose MAC does not verify, ErrUnauthenticatedIndex); release
// is called when the caller no longer needs the file. Publish stores the
// index file at local path under name and says what it found there
// (PublishOutcome). A local cache replaces an older file atomically; a
// shared cache keeps a valid file another replica published first under a
// name (replicas race to publish the same index) and replaces a damaged or
// unauthenticated one, conditional on its ETag.
//
// The conformance suite every implementation passes is
// archiveview/indexcachetest.
type IndexCache interface {
	Fetch(ctx context.Context, name IndexName) (path string, release func(), err error)
	Publish(ctx context.Context, name IndexName, path string) (PublishOutcome, error)
	// TempDir is where a file to publish is best written.
	TempDir() string
	// NamesIncludeETag reports whether the cache names an index after the
	// manifest's ETag too (Open then HEADs the manifest before Fetch), so
	// that a file published for an older manifest never blocks the current
	// one. A cache several servers share must: replicas cannot replace one
	// another's files freely.
	NamesIncludeETag() bool
	// PublishMovesTempFile reports whether Publish of a file written in
	// TempDir moves that file into the cache: the published file is then
	// the caller's file (it must not be removed, and a mapping of it stays
	// the cache's file). false: Publish copies it, and the caller removes
	// it when done.
	PublishMovesTempFile() bool
	String() string
}

// IndexName names the index of one archive in a cache: the bucket and key
// of its manifest and, for a cache whose NamesIncludeETag, the manifest's
// ETag ("" otherwise). An authenticated cache binds its objects to all
// three, so that an object cannot be moved to another name.
type IndexName struct {
	Bucket, ManifestKey, ETag string
}

// String is the file (or object) name of the index in a cache: a digest of
// the three fields.
func (n IndexName) String() string {
	h := sha256.Sum256([]byte(n.Bucket + "\x00" + n.ManifestKey + "\x00" + n.ETag))
	return hex.EncodeToString(h[:16]) + indexCacheSuffix
}

// indexName is the file name of the index of bucket/manifestKey in a
// cache (etag: the manifest's, for a cache whose NamesIncludeETag, else "").
func indexName(bucket, manifestKey, etag string) string {
	return IndexName{Bucket: bucket, ManifestKey: manifestKey, ETag: etag}.String()
}

// PublishOutcome is what IndexCache.Publish found under the name and did.
type PublishOutcome int

const (
	// Published: nothing was there; the file was written.
	Published PublishOutcome = iota + 1
	// Replaced: a damaged, unauthenticated or stale
	// (StoreIndexCache.Publish) object was there; it was replaced,
	// conditional on its ETag.
	Replaced
	// AlreadyValid: a valid index (authenticated, in an authenticated
	// cache) was there and was kept; the file was not written.
	AlreadyValid
	// Raced: a damaged object was there, but another writer replaced it
	// first; the file was not written.
	Raced
)

// Wrote reports whether Publish wrote the file.
func (o PublishOutcome) Wrote() bool { return o == Published || o == Replaced }

func (o PublishOutcome) String() string {
	switch o {
	case Published:
		return "published"
	case Replaced:
		return "damaged, replaced"
	case AlreadyValid:
		return "already there, valid"
	case Raced:
		return "damaged, replaced by another writer first"
	}
	return fmt.Sprintf("PublishOutcome(%d)", int(o))
}

// DirIndexCache is a local directory of index files (--index-cache DIR).
// Its files carry no MAC: writing the directory already needs local access
// to the server, which could change the binary as well.
type DirIndexCache struct{ Dir string }

// Fetch implements IndexCache.
func (c DirIndexCache) Fetch(ctx context.Context, name IndexName) (string, func(), error) {
	p := filepath.Join(c.Dir, name.String())
	if _, err := os.Stat(p); err != nil {
		return "", nil, err
	}
	return p, func() {}, nil
}

// Publish implements IndexCache: the file is copied (or renamed, when it is
// a temporary file of this directory) into place atomically, replacing
// what was there; the outcome is always Published.
func (c DirIndexCache) Publish(ctx context.Context, name IndexName, path string) (PublishOutcome, error) {
	dst := filepath.Join(c.Dir, name.String())
	if filepath.Dir(path) == filepath.Clean(c.Dir) {
		if err := os.Rename(path, dst); err != nil {
			return 0, err
		}
		return Published, nil
	}
	src, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(c.Dir, ".widx-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return 0, err
	}
	return Published, nil
}

// NamesIncludeETag implements IndexCache: a local cache replaces its files.
func (DirIndexCache) NamesIncludeETag() bool { return false }

// PublishMovesTempFile implements IndexCache: a file of TempDir is renamed.
func (DirIndexCache) PublishMovesTempFile() bool { return true }

// TempDir implements IndexCache.
func (c DirIndexCache) TempDir() string { return c.Dir }

func (c DirIndexCache) String() string { return c.Dir }

// StoreIndexCache keeps index files in a bucket of the backing store
// (--index-cache s3://BUCKET/PREFIX), shared by every replica: the first
// replica to build an archive's index publishes it (a conditional write),
// and the others load it instead of reading the manifests. Fetched files
// are spooled to Spool, a local directory, for reading.
//
// With a Secret, every object is the index file between a header that
// MACs its length and a MAC trailer (internal/index/mac.go) over the whole
// file and its IndexName: Fetch checks the header before it spools
// anything (so it never spools more than a secret holder declared), the
// trailer while spooling, before any byte reaches the decoder, and strips
// both, so the index file format is unchanged. An object without a valid MAC is
// never handed out (ErrUnauthenticatedIndex) and Publish replaces it.
// Without a Secret, the cache trusts whoever can write the prefix: a
// re-hashed index object is served as if this replica had built it.
type StoreIndexCache struct {
	Store  backend.Store // must implement backend.Putter (and MatchPutter to replace)
	Bucket string
	Prefix string // "" or ending in "/"
	Spool  string // local directory for fetched copies
	// Secret authenticates the objects (nil: trust the prefix's writers);
	// NewIndexSecret checks and wraps the bytes.
	Secret *IndexSecret
	// MaxObjectBytes bounds what Fetch spools and what Publish writes
	// (0: 4 GiB).
	MaxObjectBytes int64
	// Observe, if set, is told of each object refused by Fetch
	// ("refused") and of each Publish's outcome (PublishOutcome.String):
	// the metrics hook. It must not block.
	Observe func(event string)
}

func (c StoreIndexCache) observe(event string) {
	if c.Observe != nil {
		c.Observe(event)
	}
}

// defaultMaxIndexObject is StoreIndexCache's MaxObjectBytes by default.
const defaultMaxIndexObject = 4 << 30

// maxObject is the largest object Fetch accepts (MaxObjectBytes).
func (c StoreIndexCache) maxObject() int64 {
	if c.MaxObjectBytes <= 0 {
		return defaultMaxIndexObject
	}
	return c.MaxObjectBytes
}

func (c StoreIndexCache) key(name IndexName) string { return c.Prefix + name.String() }

func (c StoreIndexCache) where(name IndexName) string {
	return "s3://" + c.Bucket + "/" + c.key(name)
}

// Fetch implements IndexCache: the object is copied to the spool directory
// (its MAC verified and stripped, with a Secret).
func (c StoreIndexCache) Fetch(ctx context.Context, name IndexName) (string, func(), error) {
	path, _, err := c.fetch(ctx, name)
	if errors.Is(err, ErrUnauthenticatedIndex) {
		c.observe("refused")
	}
	if err != nil {
		return "", nil, err
	}
	return path, func() { os.Remove(path) }, nil
}

// fetch spools the object under name and returns the spooled file and the
// object's ETag. An object that cannot be authenticated is an error
// wrapping ErrUnauthenticatedIndex, its ETag returned too.
func (c StoreIndexCache) fetch(ctx context.Context, name IndexName) (path, etag string, err error) {
	rc, info, err := c.Store.Get(ctx, c.Bucket, c.key(name))
	if errors.Is(err, backend.ErrNotFound) {
		return "", "", fmt.Errorf("index %s: %w", c.where(name), fs.ErrNotExist)
	}
	if err != nil {
		return "", "", err
	}
	defer rc.Close()
	limit := c.maxObject()
	if info.Size > limit {
		// Refused from the size the store reports, before a byte is
		// spooled: without a secret nothing else would stop a writer of
		// the prefix from making every open download and spool limit
		// bytes to the spool directory first.
		return "", info.ETag, fmt.Errorf("index %s: %w: %d bytes, larger than %d", c.where(name), ErrUnauthenticatedIndex, info.Size, limit)
	}
	if err := os.MkdirAll(c.Spool, 0o700); err != nil {
		return "", "", err
	}
	f, err := os.CreateTemp(c.Spool, "fetched-*"+indexCacheSuffix)
	if err != nil {
		return "", "", err
	}
	err = index.SpoolObject(f, io.LimitReader(rc, limit+1), limit, c.Secret, index.ObjectName(name))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", info.ETag, fmt.Errorf("index %s: %w", c.where(name), err)
	}
	return f.Name(), info.ETag, nil
}

// Publish implements IndexCache. The file (with its MAC header and
// trailer, given a Secret) is written only if no object has the name. If one has, it is
// fetched and checked as a replica would use it (MAC, then every check of
// the index file, and the manifest key it was built for): a valid one is
// kept (AlreadyValid); a damaged or unauthenticated one, or one of the
// same manifest version built from other ancestor manifests (stale: an
// ancestor changed, which the name does not show), is replaced with a
// write conditional on the ETag it was fetched with (Replaced, or Raced
// when another writer changed it first).
func (c StoreIndexCache) Publish(ctx context.Context, name IndexName, path string) (PublishOutcome, error) {
	out, err := c.publish(ctx, name, path)
	if err == nil {
		c.observe(out.String())
	}
	return out, err
}

func (c StoreIndexCache) publish(ctx context.Context, name IndexName, path string) (PublishOutcome, error) {
	p, ok := backend.AsPutter(c.Store)
	if !ok {
		return 0, fmt.Errorf("index cache %s: the store cannot write", c)
	}
	body, size, closeBody, err := c.objectBody(name, path)
	if err != nil {
		return 0, err
	}
	defer closeBody()
	if size > c.maxObject() {
		// Every replica's Fetch would refuse it, and each would then
		// rebuild and write it again over itself.
		return 0, fmt.Errorf("index cache %s: index %s of %d bytes is larger than the cache accepts (%d bytes): not published", c, path, size, c.maxObject())
	}
	var ours []index.Source // the manifests path was built from, once needed
	for attempt := 0; ; attempt++ {
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
		wrote, err := p.PutIfAbsent(ctx, c.Bucket, c.key(name), body, size)
		switch {
		case err != nil:
			return 0, err
		case wrote:
			return Published, nil
		}
		if ours == nil {
			if ours, err = fileSources(path); err != nil {
				return 0, err
			}
		}
		etag, bad, err := c.inspect(ctx, name, ours)
		switch {
		case errors.Is(err, fs.ErrNotExist) && attempt == 0:
			continue // removed since: publish again, once
		case errors.Is(err, fs.ErrNotExist):
			return Raced, nil
		case err != nil:
			return 0, err
		case bad == nil:
			return AlreadyValid, nil
		}
		mp, ok := backend.AsMatchPutter(c.Store)
		if !ok {
			return 0, fmt.Errorf("index cache %s: %s is unusable (%v) and the store cannot replace it conditionally", c, c.key(name), bad)
		}
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
		wrote, err = mp.PutIfMatch(ctx, c.Bucket, c.key(name), etag, body, size)
		switch {
		case err != nil:
			return 0, err
		case wrote:
			return Replaced, nil
		}
		return Raced, nil
	}
}

// inspect fetches the object under name and checks it: bad is why it
// cannot be used (nil: a valid index for name), etag the object's ETag.
// An index of the same manifest version (the same ETag recorded for
// name's manifest as in ours, the sources of the index being published)
// built from other ancestors or absent candidates is stale: the one
// being published was built since, from the store as it is now. err is
// an error of the store or the spool (fs.ErrNotExist: no object).
func (c StoreIndexCache) inspect(ctx context.Context, name IndexName, ours []index.Source) (etag string, bad, err error) {
	path, etag, err := c.fetch(ctx, name)
	if errors.Is(err, ErrUnauthenticatedIndex) {
		return etag, err, nil
	}
	if err != nil {
		return "", nil, err
	}
	defer os.Remove(path)
	// Every check of a load but the confinement of the keys, which is
	// the serving replicas' own (Options.AllowKeyPrefixes), applied when
	// they load it.
	var p *index.Provenance
	d, m, err := index.Map(path, nil)
	if err == nil {
		defer m.Unmap()
		if p, err = d.Provenance(); err == nil {
			d.AnyKeyPrefix()
			_, err = d.Tree(nil)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		return etag, err, nil
	}
	if got := d.ManifestKey(); got != name.ManifestKey {
		return etag, fmt.Errorf("%w: index %s was built for manifest %s, not %s", ErrBadIndex, c.where(name), got, name.ManifestKey), nil
	}
	if theirs := p.Sources; index.SameVersion(theirs, ours, name.ManifestKey) && !index.SameSources(theirs, ours) {
		return etag, fmt.Errorf("%w: index %s was built from other ancestor manifests", index.ErrStale, c.where(name)), nil
	}
	return etag, nil, nil
}

// fileSources are the manifest sources the index file at path records.
func fileSources(path string) ([]index.Source, error) {
	d, m, err := index.Map(path, nil)
	if err != nil {
		return nil, err
	}
	defer m.Unmap()
	p, err := d.Provenance()
	if err != nil {
		return nil, err
	}
	return p.Sources, nil
}

// objectBody is what Publish writes for the index file at path: the file,
// between its MAC header and trailer given a Secret.
func (c StoreIndexCache) objectBody(name IndexName, path string) (io.ReadSeeker, int64, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, nil, err
	}
	if c.Secret == nil {
		return f, fi.Size(), func() { f.Close() }, nil
	}
	header, trailer, err := c.Secret.Seal(index.ObjectName(name), io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		f.Close()
		return nil, 0, nil, fmt.Errorf("index %s: MAC: %w", path, err)
	}
	body := index.NewTrailed(header, io.NewSectionReader(f, 0, fi.Size()), trailer)
	return body, int64(len(header)) + fi.Size() + int64(len(trailer)), func() { f.Close() }, nil
}

// NamesIncludeETag implements IndexCache: replicas never replace a valid
// index, so each manifest version has its own name.
func (StoreIndexCache) NamesIncludeETag() bool { return true }

// PublishMovesTempFile implements IndexCache: Publish uploads a copy.
func (StoreIndexCache) PublishMovesTempFile() bool { return false }

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
