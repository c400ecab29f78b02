package archiveview

// persist.go: the persistent index. An archive's resolved tree (everything
// Open produces) is written to a compact binary file (indexfile.go, format
// version 3) and served from it again with no manifest GET and no JSON
// parse: mapped in place (indexmap.go) when it is a file, so that a large
// archive's index costs page cache, not heap. Open uses it as a cache when
// Options.IndexCache is set; the CLI builds one with "wharf index build".
//
// Tar offsets the read path learned by walking a legacy chunk (no
// archive_offset in the manifest) are written as the extent's offset, so a
// loaded index skips the walk. The read path checks the ustar header in
// front of any recorded offset (name and size) before serving from it, so
// a learned offset is verified exactly like a manifest's archive_offset.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// ErrBadIndex is wrapped by every error about an index file that cannot be
// used: wrong magic, unknown version, checksum mismatch, truncation,
// impossible counts or a tree that violates the index invariants.
var ErrBadIndex = errors.New("invalid index file")

// errStaleIndex: a cached index's manifests changed (or its options differ).
var errStaleIndex = errors.New("index is stale")

const indexCacheSuffix = ".widx"

// indexSource is one manifest (or an absent candidate key) an index was
// built from: the cache is valid while every source still stats the same.
type indexSource struct {
	key     string
	etag    string
	size    int64
	modSec  int64 // LastModified, unix seconds (0 = unknown)
	sha256  [32]byte
	absent  bool // the key was tried and did not exist
	nothash bool // (building only) the body was not read to its end
}

// indexProvenance records where an archive's tree came from.
type indexProvenance struct {
	sources  []indexSource
	maxFrame int64
	limits   manifest.Limits
}

// effectiveMaxFrame is the giant-frame threshold Open applies.
func effectiveMaxFrame(o Options) int64 { return o.chunkOptions().MaxFrame() }

func limitsList(l manifest.Limits) [7]int64 {
	l = l.WithDefaults()
	return [7]int64{l.MaxStoredBytes, l.MaxJSONBytes, int64(l.MaxFiles), int64(l.MaxChunks),
		int64(l.MaxFrames), int64(l.MaxPathBytes), int64(l.MaxChainDepth)}
}

// ---------------------------------------------------------------------------
// Building with provenance

// recordingStore passes every request through and records each Get (the
// manifests Open reads): ETag, size and the sha256 of the whole body.
type recordingStore struct {
	backend.Store
	max int64 // bytes hashed at most per object

	mu      sync.Mutex
	sources []indexSource
}

func (s *recordingStore) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	rc, info, err := s.Store.Get(ctx, bucket, key)
	if errors.Is(err, backend.ErrNotFound) {
		s.add(indexSource{key: key, absent: true})
	}
	if err != nil {
		return rc, info, err
	}
	return &hashingReader{rc: rc, s: s, info: info, h: sha256.New()}, info, nil
}

func (s *recordingStore) add(src indexSource) {
	s.mu.Lock()
	s.sources = append(s.sources, src)
	s.mu.Unlock()
}

// hashingReader hashes what the parser reads; Close reads the rest so the
// sum covers the whole object.
type hashingReader struct {
	rc     io.ReadCloser
	s      *recordingStore
	info   backend.ObjectInfo
	h      hash.Hash
	n      int64
	eof    bool
	failed bool
	closed bool
}

func (r *hashingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	switch {
	case err == io.EOF:
		r.eof = true
	case err != nil:
		r.failed = true
	}
	return n, err
}

func (r *hashingReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if !r.eof && !r.failed {
		n, err := io.Copy(r.h, io.LimitReader(r.rc, r.s.max-r.n+1))
		r.n += n
		r.eof = err == nil && r.n <= r.s.max
		r.failed = !r.eof
	}
	src := indexSource{key: r.info.Key, etag: r.info.ETag, size: r.n, nothash: r.failed || !r.eof}
	if !r.info.LastModified.IsZero() {
		src.modSec = r.info.LastModified.Unix()
	}
	if r.info.Size > 0 && r.info.Size != r.n {
		src.nothash = true
	}
	copy(src.sha256[:], r.h.Sum(nil))
	r.s.add(src)
	return r.rc.Close()
}

// BuildIndex is Open that also records, for every manifest of the chain
// (and every candidate key found absent), its key, ETag, size and the
// sha256 of its bytes. WriteIndex then writes a file that Open with
// Options.IndexCache can validate against the store with HEADs alone.
// The manifests are each read once, as by Open.
func BuildIndex(ctx context.Context, store backend.Store, bucket, manifestKey string, opts Options) (*Archive, error) {
	// The manifests are read through the recorder; the archive is built
	// over store itself, so that chunk reads, listings and restores never
	// go through the recorder (which hides the store's optional
	// capabilities, such as its Restorer).
	rec := &recordingStore{Store: store, max: opts.Limits.WithDefaults().MaxStoredBytes}
	t, name, err := resolveManifests(ctx, rec, bucket, manifestKey, opts)
	if err != nil {
		return nil, err
	}
	rec.mu.Lock()
	srcs := slices.Clone(rec.sources)
	rec.mu.Unlock()
	for i := range srcs {
		if srcs[i].key == "" {
			return nil, fmt.Errorf("archive %q (manifest %s/%s): the store returned no key for a manifest", name, bucket, manifestKey)
		}
		if srcs[i].nothash || !srcs[i].absent && srcs[i].etag == "" {
			// Incomplete provenance (body not hashed to its end, or no
			// ETag to compare): the index can be written but is never
			// used as Open's cache.
			srcs = nil
			break
		}
	}
	prov := &indexProvenance{sources: srcs, maxFrame: effectiveMaxFrame(opts), limits: opts.Limits}
	opts.Name = name
	return opened(newArchive(t, store, bucket, manifestKey, opts, prov, nil, nil)), nil
}

// ---------------------------------------------------------------------------
// Open's cache

// openIndexCached serves Open when Options.IndexCache is set: it loads the
// cached index if every recorded manifest still stats the same, else it
// builds from the manifests and publishes a fresh index file. A shared
// cache names the file after the manifest's ETag too (one HEAD, which
// also serves the freshness check of the manifest), so that an index
// published for an older manifest never stands in the way.
func openIndexCached(ctx context.Context, store backend.Store, bucket, manifestKey string, opts Options) (*Archive, error) {
	c := opts.IndexCache
	etag := ""
	var top *backend.ObjectInfo // the manifest's stat, when made
	if c.Shared() {
		if info, err := store.Stat(ctx, bucket, manifestKey); err == nil {
			etag, top = info.ETag, &info
		}
	}
	name := indexName(bucket, manifestKey, etag)
	where := c.String() + " " + name
	path, release, err := c.Fetch(ctx, name)
	if err == nil {
		var a *Archive
		a, err = loadCachedIndex(ctx, store, bucket, manifestKey, top, path, release, opts)
		if err == nil {
			opts.Logger.Info().Str("archive", a.name).Str("manifest", manifestKey).Str("index", where).
				Int("files", a.idx.n()).Msg("archive opened from index cache")
			return a, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, errStaleIndex):
		opts.Logger.Info().Err(err).Str("manifest", manifestKey).Str("index", where).Msg("index cache stale; reading the manifest")
	default:
		opts.Logger.Warn().Err(err).Str("manifest", manifestKey).Str("index", where).Msg("index cache not used (damaged or foreign); reading the manifest")
	}
	a, err := BuildIndex(ctx, store, bucket, manifestKey, opts)
	if err != nil {
		return nil, err
	}
	if len(a.prov.sources) == 0 {
		return a, nil
	}
	served, err := a.publishAndServe(ctx, c, name)
	if err != nil {
		a.log.Warn().Err(err).Str("archive", a.name).Str("index", where).Msg("index cache not written; serving the index from memory")
		return a, nil
	}
	// The index built in memory is no longer used: give it back now.
	files := a.idx.n()
	a.Close()
	a = nil // the last reference goes before the collection
	releaseBuildMemory(files)
	return served, nil
}

// publishAndServe writes a's index to a temporary file of c, maps it and
// loads it (the same checks as any index file), publishes it in c under
// name, and returns the archive served from the file (the caller drops
// the one built in memory). The temporary file stays while mapped: published by
// rename (a local cache) it is the cache's file; else (a shared cache's
// spool) it is removed once unmapped.
func (a *Archive) publishAndServe(ctx context.Context, c IndexCache, name string) (*Archive, error) {
	tmp, err := a.writeIndexTemp(c.TempDir())
	if err != nil {
		return nil, err
	}
	var renamed atomic.Bool
	release := func() {
		if !renamed.Load() {
			os.Remove(tmp)
		}
	}
	d, m, err := openMapped(tmp, release)
	if err != nil {
		return nil, err
	}
	b, err := d.serveMapped(m, a.store, a.opts, nil)
	if err != nil {
		return nil, err
	}
	where := c.String() + " " + name
	published, err := c.Publish(ctx, name, tmp)
	switch {
	case err != nil:
		b.log.Warn().Err(err).Str("archive", b.name).Str("index", where).Msg("index cache not written")
	case !published:
		b.log.Info().Str("archive", b.name).Str("index", where).Msg("index cache: another replica published this index first")
	default:
		renamed.Store(!c.Shared())
		b.log.Info().Str("archive", b.name).Str("index", where).Msg("index cache: published")
	}
	return b, nil
}

// writeIndexTemp writes the archive's index to a new temporary file in dir.
func (a *Archive) writeIndexTemp(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".widx-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	err = a.WriteIndex(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// PublishIndex publishes the archive's index in c under the name Open
// looks for (a shared cache's name includes the manifest's ETag recorded
// when the index was built). The archive must come from BuildIndex or from
// Open with an IndexCache. It reports whether this call published the
// file (false: a shared cache already had one).
func (a *Archive) PublishIndex(ctx context.Context, c IndexCache) (bool, error) {
	if a.prov == nil || len(a.prov.sources) == 0 {
		return false, fmt.Errorf("archive %q: no manifest provenance recorded (build the index with BuildIndex)", a.name)
	}
	etag := ""
	if c.Shared() {
		for _, s := range a.prov.sources {
			if s.key == a.manifestKey && !s.absent {
				etag = s.etag
			}
		}
	}
	name := indexName(a.bucket, a.manifestKey, etag)
	return a.publishIndexName(ctx, c, name)
}

// publishIndexName writes the archive's index to a temporary file and
// publishes it in c under name (the temporary file is removed after).
func (a *Archive) publishIndexName(ctx context.Context, c IndexCache, name string) (bool, error) {
	tmp, err := a.writeIndexTemp(c.TempDir())
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	published, err := c.Publish(ctx, name, tmp)
	if err != nil {
		return false, err
	}
	if !published {
		a.log.Info().Str("archive", a.name).Str("index", c.String()+" "+name).Msg("index cache: another replica published this index first")
	} else {
		a.log.Info().Str("archive", a.name).Str("index", c.String()+" "+name).Msg("index cache: published")
	}
	return published, nil
}

// loadCachedIndex serves path in place if it is a valid index that still
// matches the store (top: the manifest's stat if already made, else nil).
// release (the cache's) runs once the file is unmapped: at once when it is
// not used.
func loadCachedIndex(ctx context.Context, store backend.Store, bucket, manifestKey string, top *backend.ObjectInfo, path string, release func(), opts Options) (*Archive, error) {
	d, m, err := openMapped(path, release)
	if err != nil {
		return nil, err
	}
	return d.serveMapped(m, store, opts, func(p *indexProvenance) error {
		if err := p.matches(ctx, store, d.bucket, d.manifestKey, bucket, manifestKey, top, opts); err != nil {
			return fmt.Errorf("index %s: %w", path, err)
		}
		return nil
	})
}

// serveMapped decodes the provenance of d (the file mapped by m), runs
// check on it (if not nil), then decodes and validates the tree and
// returns the archive served from the mapping. On any error the file is
// unmapped (and its release run).
func (d *indexDecoder) serveMapped(m *indexMapping, store backend.Store, opts Options, check func(*indexProvenance) error) (*Archive, error) {
	p, err := d.provenance()
	if err == nil && check != nil {
		err = check(p)
	}
	var a *Archive
	if err == nil {
		a, err = d.archive(store, opts, p, m)
	}
	if err != nil {
		m.st.unmap()
		return nil, err
	}
	return a, nil
}

// OpenIndexFile serves the archive of the index file at path in place (a
// read-only mapping; indexmap.go says how long it lives), reading chunks
// from store in the bucket the index records. It makes no request: the
// caller decides whether the index is fresh (Open with Options.IndexCache
// checks the recorded manifests). Every check of indexfile.go runs first;
// errors wrap ErrBadIndex.
func OpenIndexFile(ctx context.Context, store backend.Store, path string, opts Options) (*Archive, error) {
	d, m, err := openMapped(path, nil)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		m.st.unmap()
		return nil, err
	}
	return d.serveMapped(m, store, opts, nil)
}

// OpenIndex loads an index written by WriteIndex from r into memory and
// returns the archive, reading chunks from store (in the bucket the index
// records). It makes no request. The whole input is read and verified
// before anything is decoded; errors wrap ErrBadIndex.
func OpenIndex(ctx context.Context, store backend.Store, r io.Reader, opts Options) (*Archive, error) {
	name := "index"
	if f, ok := r.(*os.File); ok {
		name = f.Name()
	}
	var buf bytes.Buffer
	switch v := r.(type) {
	case *os.File:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
			buf.Grow(int(min(fi.Size(), 1<<34)) + bytes.MinRead)
		}
	case interface{ Len() int }:
		buf.Grow(v.Len() + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("index %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return openIndexBytes(store, buf.Bytes(), name, opts)
}

// openIndexBytes decodes and validates data (an index file called name);
// the archive's columns are views of data, which must not change after.
func openIndexBytes(store backend.Store, data []byte, name string, opts Options) (*Archive, error) {
	d, err := newIndexDecoder(data, name)
	if err != nil {
		return nil, err
	}
	p, err := d.provenance()
	if err != nil {
		return nil, err
	}
	return d.archive(store, opts, p, nil)
}

// matches checks the recorded build against the request and the store:
// one stat per recorded source, but none for the manifest itself when top
// (its stat, made by the caller) is not nil.
func (p *indexProvenance) matches(ctx context.Context, store backend.Store, pBucket, pKey, bucket, manifestKey string, top *backend.ObjectInfo, opts Options) error {
	switch {
	case pBucket != bucket || pKey != manifestKey:
		return fmt.Errorf("%w: built for %s/%s", errStaleIndex, pBucket, pKey)
	case len(p.sources) == 0:
		return fmt.Errorf("%w: no manifest sources recorded", errStaleIndex)
	case p.maxFrame != effectiveMaxFrame(opts) || limitsList(p.limits) != limitsList(opts.Limits):
		return fmt.Errorf("%w: built with other limits", errStaleIndex)
	}
	for _, s := range p.sources {
		var info backend.ObjectInfo
		var err error
		if top != nil && s.key == manifestKey {
			info = *top
		} else {
			info, err = store.Stat(ctx, bucket, s.key)
		}
		if s.absent {
			if errors.Is(err, backend.ErrNotFound) {
				continue
			}
			if err == nil {
				return fmt.Errorf("%w: manifest %s now exists", errStaleIndex, s.key)
			}
			return fmt.Errorf("stat manifest %s: %w", s.key, err)
		}
		if err != nil {
			return fmt.Errorf("stat manifest %s: %w", s.key, err)
		}
		mod := int64(0)
		if !info.LastModified.IsZero() {
			mod = info.LastModified.Unix()
		}
		if info.ETag != s.etag || info.Size != s.size || (s.modSec != 0 && mod != 0 && mod != s.modSec) {
			return fmt.Errorf("%w: manifest %s changed (ETag %q size %d, indexed %q size %d)",
				errStaleIndex, s.key, info.ETag, info.Size, s.etag, s.size)
		}
	}
	return nil
}

// WriteIndexFile writes the archive's index (WriteIndex) to path
// atomically: a temporary file in the same directory, synced, then renamed
// over path. The directory is created if needed.
func (a *Archive) WriteIndexFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".widx-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := a.WriteIndex(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("index %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("index %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}
