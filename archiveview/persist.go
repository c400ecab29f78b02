package archiveview

// persist.go: the persistent index. An archive's resolved tree (everything
// Open produces) is written to a compact binary file (internal/index/format.go, format
// version 3) and served from it again with no manifest GET and no JSON
// parse: mapped in place (internal/index/mapping.go) when it is a file, so that a large
// archive's index costs page cache, not heap. Open uses it as a cache when
// Options.IndexCache is set; the CLI builds one with "wharf index build".
//
// Tar offsets the read path learned by walking a legacy chunk (no
// archive_offset in the manifest) are written as the extent's offset, so a
// loaded index skips the walk. The read path checks the ustar header in
// front of any recorded offset (name and size) before serving from it, so
// a learned offset is verified exactly like a manifest's archive_offset.

import (
	"github.com/wharf-s3/wharf/archiveview/internal/index"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"

	"github.com/wharf-s3/wharf/backend"
)

// ErrBadIndex is wrapped by every error about an index file that cannot be
// used (index.ErrBadIndex).
var ErrBadIndex = index.ErrBadIndex

const indexCacheSuffix = ".widx"

// effectiveMaxFrame is the giant-frame threshold Open applies.
func effectiveMaxFrame(o Options) int64 { return o.chunkOptions().MaxFrame() }

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
	rec := index.NewRecorder(store, opts.Limits.WithDefaults().MaxStoredBytes)
	t, name, err := resolveManifests(ctx, rec, bucket, manifestKey, opts)
	if err != nil {
		return nil, err
	}
	srcs := rec.Sources()
	for i := range srcs {
		if srcs[i].Key == "" {
			return nil, fmt.Errorf("archive %q (manifest %s/%s): the store returned no key for a manifest", name, bucket, manifestKey)
		}
		if srcs[i].NotHash || !srcs[i].Absent && srcs[i].ETag == "" {
			// Incomplete provenance (body not hashed to its end, or no
			// ETag to compare): the index can be written but is never
			// used as Open's cache.
			srcs = nil
			break
		}
	}
	prov := &index.Provenance{Sources: srcs, MaxFrame: effectiveMaxFrame(opts), Limits: opts.Limits}
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
// published for an older manifest never stands in the way; a fresh index
// is published under the ETag recorded while its manifest was read (the
// HEAD may have failed, or seen an older version).
func openIndexCached(ctx context.Context, store backend.Store, bucket, manifestKey string, opts Options) (*Archive, error) {
	c := opts.IndexCache
	etag := ""
	var top *backend.ObjectInfo // the manifest's stat, when made
	if c.NamesIncludeETag() {
		if info, err := store.Stat(ctx, bucket, manifestKey); err == nil {
			etag, top = info.ETag, &info
		}
	}
	name := IndexName{Bucket: bucket, ManifestKey: manifestKey, ETag: etag}
	where := c.String() + " " + name.String()
	path, release, err := c.Fetch(ctx, name)
	if err == nil {
		var a *Archive
		a, err = loadCachedIndex(ctx, store, bucket, manifestKey, top, path, release, opts)
		if err == nil {
			opts.Logger.Info().Str("archive", a.name).Str("manifest", manifestKey).Str("index", where).
				Int("files", a.tree.Idx.N()).Msg("archive opened from index cache")
			return a, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, index.ErrStale):
		opts.Logger.Info().Err(err).Str("manifest", manifestKey).Str("index", where).Msg("index cache stale; reading the manifest")
	default:
		opts.Logger.Warn().Err(err).Str("manifest", manifestKey).Str("index", where).Msg("index cache not used (damaged or foreign); reading the manifest")
	}
	a, err := BuildIndex(ctx, store, bucket, manifestKey, opts)
	if err != nil {
		return nil, err
	}
	if len(a.prov.Sources) == 0 {
		return a, nil
	}
	if c.NamesIncludeETag() {
		// The name of the manifest the index was built from: the HEAD
		// above may have failed (no ETag) or seen an older version.
		name.ETag = a.builtETag()
		where = c.String() + " " + name.String()
	}
	served, err := a.publishAndServe(ctx, c, name)
	if err != nil {
		a.log.Warn().Err(err).Str("archive", a.name).Str("index", where).Msg("index cache not written; serving the index from memory")
		return a, nil
	}
	// The index built in memory is no longer used: give it back now.
	files := a.tree.Idx.N()
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
func (a *Archive) publishAndServe(ctx context.Context, c IndexCache, name IndexName) (*Archive, error) {
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
	d, _, err := index.Map(tmp, release)
	if err != nil {
		return nil, err
	}
	b, err := serveMapped(d, a.store, a.opts, nil)
	if err != nil {
		return nil, err
	}
	where := c.String() + " " + name.String()
	published, err := c.Publish(ctx, name, tmp)
	switch {
	case err != nil:
		b.log.Warn().Err(err).Str("archive", b.name).Str("index", where).Msg("index cache not written")
	case !published.Wrote():
		b.log.Info().Str("archive", b.name).Str("index", where).Stringer("outcome", published).Msg("index cache: another replica published this index first")
	default:
		renamed.Store(c.PublishMovesTempFile())
		b.log.Info().Str("archive", b.name).Str("index", where).Stringer("outcome", published).Msg("index cache: published")
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
// file, and what it found (IndexCache.Publish).
func (a *Archive) PublishIndex(ctx context.Context, c IndexCache) (PublishOutcome, error) {
	if a.prov == nil || len(a.prov.Sources) == 0 {
		return 0, fmt.Errorf("archive %q: no manifest provenance recorded (build the index with BuildIndex)", a.name)
	}
	etag := ""
	if c.NamesIncludeETag() {
		etag = a.builtETag()
	}
	name := IndexName{Bucket: a.bucket, ManifestKey: a.manifestKey, ETag: etag}
	return a.publishIndexName(ctx, c, name)
}

// builtETag is the ETag of the manifest the archive's index was built
// from, as recorded while it was read ("" when none was recorded).
func (a *Archive) builtETag() string {
	etag := ""
	if a.prov != nil {
		for _, s := range a.prov.Sources {
			if s.Key == a.manifestKey && !s.Absent {
				etag = s.ETag
			}
		}
	}
	return etag
}

// publishIndexName writes the archive's index to a temporary file and
// publishes it in c under name (the temporary file is removed after).
func (a *Archive) publishIndexName(ctx context.Context, c IndexCache, name IndexName) (PublishOutcome, error) {
	tmp, err := a.writeIndexTemp(c.TempDir())
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp)
	published, err := c.Publish(ctx, name, tmp)
	if err != nil {
		return 0, err
	}
	if !published.Wrote() {
		a.log.Info().Str("archive", a.name).Str("index", c.String()+" "+name.String()).Stringer("outcome", published).Msg("index cache: another replica published this index first")
	} else {
		a.log.Info().Str("archive", a.name).Str("index", c.String()+" "+name.String()).Stringer("outcome", published).Msg("index cache: published")
	}
	return published, nil
}

// loadCachedIndex serves path in place if it is a valid index that still
// matches the store (top: the manifest's stat if already made, else nil).
// release (the cache's) runs once the file is unmapped: at once when it is
// not used.
func loadCachedIndex(ctx context.Context, store backend.Store, bucket, manifestKey string, top *backend.ObjectInfo, path string, release func(), opts Options) (*Archive, error) {
	d, _, err := index.Map(path, release)
	if err != nil {
		return nil, err
	}
	return serveMapped(d, store, opts, func(p *index.Provenance) error {
		if err := p.Matches(ctx, store, d.Bucket(), d.ManifestKey(), bucket, manifestKey, top, effectiveMaxFrame(opts), opts.Limits); err != nil {
			return fmt.Errorf("index %s: %w", path, err)
		}
		return nil
	})
}

// serveMapped decodes the provenance of d (a mapped file, index.Map), runs
// check on it (if not nil), then decodes and validates the tree and
// returns the archive served from the mapping. On any error the file is
// unmapped (and its release run).
func serveMapped(d *index.Decoder, store backend.Store, opts Options, check func(*index.Provenance) error) (*Archive, error) {
	p, err := d.Provenance()
	if err == nil && check != nil {
		err = check(p)
	}
	var a *Archive
	if err == nil {
		a, err = loadTree(d, p, store, opts)
	}
	if err != nil {
		d.Mapping().Unmap()
		return nil, err
	}
	return a, nil
}

// loadTree decodes and validates d's tree (after its provenance p) and
// builds the archive from it: the one way an index file becomes an
// Archive.
func loadTree(d *index.Decoder, p *index.Provenance, store backend.Store, opts Options) (*Archive, error) {
	t, err := d.Tree(opts.AllowKeyPrefixes)
	if err != nil {
		return nil, err
	}
	return newArchive(*t, store, d.Bucket(), d.ManifestKey(), opts, p, d.Units(), nil), nil
}

// OpenIndexFile serves the archive of the index file at path in place (a
// read-only mapping; internal/index/mapping.go says how long it lives), reading chunks
// from store in the bucket the index records. It makes no request: the
// caller decides whether the index is fresh (Open with Options.IndexCache
// checks the recorded manifests). Every check of index.Decode runs first;
// errors wrap ErrBadIndex.
func OpenIndexFile(ctx context.Context, store backend.Store, path string, opts Options) (*Archive, error) {
	d, m, err := index.Map(path, nil)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		m.Unmap()
		return nil, err
	}
	return serveMapped(d, store, opts, nil)
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
	d, err := index.Decode(data, name)
	if err != nil {
		return nil, err
	}
	p, err := d.Provenance()
	if err != nil {
		return nil, err
	}
	return loadTree(d, p, store, opts)
}

// WriteIndex writes the archive's resolved tree in the persistent index
// format (package internal/index). Offsets the read path has learned by
// walking legacy chunks are recorded, and the verified units. An archive
// opened by Open without IndexCache (not BuildIndex) has no recorded
// manifest sources: its file loads with OpenIndex but is never used as
// Open's cache.
func (a *Archive) WriteIndex(w io.Writer) error {
	defer runtime.KeepAlive(a)
	var err error
	if gerr := a.tree.Idx.Guard(func() { err = index.Write(w, a.name, &a.tree, indexMeta(a), a.set.LearnedOffset) }); gerr != nil {
		return fmt.Errorf("archive %q: write index: %w", a.name, gerr)
	}
	return err
}

// indexMeta is what the archive's index file records besides the tree.
func indexMeta(a *Archive) *index.Meta {
	prov := a.prov
	if prov == nil {
		prov = &index.Provenance{MaxFrame: effectiveMaxFrame(a.opts), Limits: a.opts.Limits}
	}
	return &index.Meta{Bucket: a.bucket, ManifestKey: a.manifestKey, Prov: prov, Units: a.set.VerifiedUnits()}
}

// LearnedOffsets is the number of extents without a manifest archive_offset
// whose tar offset the read path has learned (and WriteIndex would record).
// A fault reading an index mapped in place (a file truncated under the
// server) is an error wrapping index.ErrFileChanged.
func (a *Archive) LearnedOffsets() (int, error) {
	n, err := index.LearnedOffsets(&a.tree.Idx, a.set.LearnedOffset)
	if err != nil {
		return 0, fmt.Errorf("archive %s: learned offsets: %w", a.name, err)
	}
	return n, nil
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
