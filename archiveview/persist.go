package archiveview

// persist.go: the persistent index. An archive's resolved tree (everything
// Open produces) is written to a compact binary file and loaded back with
// no manifest GET and no JSON parse. Open uses it as a cache when
// Options.IndexCache is set; the CLI builds one with "wharf index build".
//
// Format (version 2), little-endian, fixed-width fields (encoding/binary):
//
//	magic "WHARFIDX" | version u32 | reserved u32 (0)
//	counts: sources u32, chain u32, shapes u32, warnings u32, chunks u32,
//	        frames u64, files u32, extents u32, roots u32, ctypes u32,
//	        names u64, columns u8 (bit 0: md5, bit 1: content type)
//	provenance: bucket, manifest key, max frame bytes i64, 7 limits i64,
//	        per source: key, etag, size i64, last-modified sec i64,
//	        sha256 [32], absent u8
//	metadata: upload id, version, created sec i64 nsec u32 zone-offset i32,
//	        region, chain ids, shapes, warnings, totals (frames, compressed,
//	        uncompressed) i64
//	chunks: per chunk key, kind u8, size i64, has-sum u8, sum [32],
//	        frames u32; then every frame: cOff cSize uOff uSize i64,
//	        has-sum u8, sum [32]
//	files: names blob, then columns ends u32, size i64, msec i64,
//	        mnsec u32, sum [32], flags u8, chunk i32, off i64, root u32,
//	        [md5 [16]], [ctype u32], [link u16: the chain link that wrote
//	        the file, chains only]
//	roots, ctypes (strings)
//	extents: chunk i32, fileOff i64, off i64, length i64, has-sum u8,
//	        sum [32], tar name
//	tombstones (keys whose latest version is a delete marker): count u32,
//	        names (a string), then ends u32 and link u16 per key
//	verified units (chunkio.VerifiedUnit: spans the read path checked whole,
//	        with the object ETag the check saw): count u32, then per unit
//	        chunk u32, kind u8, offset i64, length i64, sum [32], ETag
//	trailer: sha256 of every byte before it
//
// Version 1 (no link column, no tombstones) is refused like any other
// unknown version: Open then rebuilds the file from the manifests.
//
// Strings are a u32 length and the bytes. A file is never trusted: the
// trailer is checked first, the counts are checked against the file's
// length before anything is allocated, every length and offset is bounds
// checked, unknown versions are refused, and the decoded tree must keep
// the invariants the resolver guarantees (keys strictly ascending, chunk
// indexes in range, frames tiling the tar stream, extents tiling each file,
// framed extents inside their chunk). Any violation is an error wrapping
// ErrBadIndex that names the file; Open then falls back to the manifest.
//
// Tar offsets the read path learned by walking a legacy chunk (no
// archive_offset in the manifest) are written as the extent's offset, so a
// loaded index skips the walk. The read path checks the ustar header in
// front of any recorded offset (name and size) before serving from it, so
// a learned offset is verified exactly like a manifest's archive_offset.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// indexMapping is a mapped index file (placeholder).
type indexMapping struct{}

// ErrBadIndex is wrapped by every error about an index file that cannot be
// used: wrong magic, unknown version, checksum mismatch, truncation,
// impossible counts or a tree that violates the index invariants.
var ErrBadIndex = errors.New("invalid index file")

// errStaleIndex: a cached index's manifests changed (or its options differ).
var errStaleIndex = errors.New("index is stale")

const (
	indexMagic         = "WHARFIDX"
	indexFormatVersion = 2
	indexHeaderBytes   = 8 + 4 + 4 + 4*5 + 8 + 4*4 + 8 + 1
	indexTrailerBytes  = sha256.Size

	colMD5   = 1 << 0
	colCtype = 1 << 1
	colLink  = 1 << 2

	// Fixed bytes per element, for the up-front size check.
	idxSourceMin = 4 + 4 + 8 + 8 + 32 + 1
	idxStrMin    = 4
	idxChunkMin  = 4 + 1 + 8 + 1 + 32 + 4
	idxFrameSize = 8*4 + 1 + 32
	idxFileMin   = 4 + 8 + 8 + 4 + 32 + 1 + 4 + 8 + 4
	idxExtMin    = 4 + 8 + 8 + 8 + 1 + 32 + 4

	knownFlags = flagSum | flagMD5 | flagMulti | flagIdentity | flagSplit

	indexCacheSuffix = ".widx"
)

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
	rec := &recordingStore{Store: store, max: opts.Limits.WithDefaults().MaxStoredBytes}
	o := opts
	o.IndexCache = nil
	a, err := Open(ctx, rec, bucket, manifestKey, o)
	if err != nil {
		return nil, err
	}
	a.store = store
	a.opts.IndexCache = opts.IndexCache
	rec.mu.Lock()
	srcs := slices.Clone(rec.sources)
	rec.mu.Unlock()
	for i := range srcs {
		if srcs[i].key == "" {
			return nil, fmt.Errorf("archive %q (manifest %s/%s): the store returned no key for a manifest", a.name, bucket, manifestKey)
		}
		if srcs[i].nothash || !srcs[i].absent && srcs[i].etag == "" {
			// Incomplete provenance (body not hashed to its end, or no
			// ETag to compare): the index can be written but is never
			// used as Open's cache.
			srcs = nil
			break
		}
	}
	a.prov = &indexProvenance{sources: srcs, maxFrame: effectiveMaxFrame(opts), limits: opts.Limits}
	return a, nil
}

// ---------------------------------------------------------------------------
// Open's cache

// openIndexCached serves Open when Options.IndexCache is set: it loads the
// cached index if every recorded manifest still stats the same, else it
// builds from the manifests and publishes a fresh index file. A shared
// cache names the file after the manifest's ETag too (one HEAD), so that an
// index published for an older manifest never stands in the way.
func openIndexCached(ctx context.Context, store backend.Store, bucket, manifestKey string, opts Options) (*Archive, error) {
	c := opts.IndexCache
	etag := ""
	if c.Shared() {
		if info, err := store.Stat(ctx, bucket, manifestKey); err == nil {
			etag = info.ETag
		}
	}
	name := indexName(bucket, manifestKey, etag)
	where := c.String() + " " + name
	path, release, err := c.Fetch(ctx, name)
	if err == nil {
		var a *Archive
		a, err = loadCachedIndex(ctx, store, bucket, manifestKey, path, opts)
		release()
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
	if err := a.publishIndex(ctx, c, name); err != nil {
		a.log.Warn().Err(err).Str("archive", a.name).Str("index", where).Msg("index cache not written")
	}
	return a, nil
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

// publishIndex writes the archive's index to a temporary file and
// publishes it in c under name.
func (a *Archive) publishIndex(ctx context.Context, c IndexCache, name string) error {
	_, err := a.publishIndexName(ctx, c, name)
	return err
}

func (a *Archive) publishIndexName(ctx context.Context, c IndexCache, name string) (bool, error) {
	dir := c.TempDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	f, err := os.CreateTemp(dir, ".widx-*")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := a.WriteIndex(f); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
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

// loadCachedIndex loads path if it is valid and still matches the store.
func loadCachedIndex(ctx context.Context, store backend.Store, bucket, manifestKey, path string, opts Options) (*Archive, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d, err := newIndexDecoder(data, path)
	if err != nil {
		return nil, err
	}
	p, err := d.provenance()
	if err != nil {
		return nil, err
	}
	if err := p.matches(ctx, store, d.bucket, d.manifestKey, bucket, manifestKey, opts); err != nil {
		return nil, fmt.Errorf("index %s: %w", path, err)
	}
	return d.archive(store, opts, p)
}

// matches checks the recorded build against the request and the store.
func (p *indexProvenance) matches(ctx context.Context, store backend.Store, pBucket, pKey, bucket, manifestKey string, opts Options) error {
	switch {
	case pBucket != bucket || pKey != manifestKey:
		return fmt.Errorf("%w: built for %s/%s", errStaleIndex, pBucket, pKey)
	case len(p.sources) == 0:
		return fmt.Errorf("%w: no manifest sources recorded", errStaleIndex)
	case p.maxFrame != effectiveMaxFrame(opts) || limitsList(p.limits) != limitsList(opts.Limits):
		return fmt.Errorf("%w: built with other limits", errStaleIndex)
	}
	for _, s := range p.sources {
		info, err := store.Stat(ctx, bucket, s.key)
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

// ---------------------------------------------------------------------------
// Writing

type idxWriter struct {
	w   *bufio.Writer
	err error
	buf [8]byte
}

func (w *idxWriter) raw(b []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}
func (w *idxWriter) u8(v uint8)   { w.raw([]byte{v}) }
func (w *idxWriter) u16(v uint16) { binary.LittleEndian.PutUint16(w.buf[:2], v); w.raw(w.buf[:2]) }
func (w *idxWriter) u32(v uint32) { binary.LittleEndian.PutUint32(w.buf[:4], v); w.raw(w.buf[:4]) }
func (w *idxWriter) u64(v uint64) { binary.LittleEndian.PutUint64(w.buf[:8], v); w.raw(w.buf[:8]) }
func (w *idxWriter) i64(v int64)  { w.u64(uint64(v)) }
func (w *idxWriter) b(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}
func (w *idxWriter) str(s string) {
	w.u32(uint32(len(s)))
	if w.err == nil {
		_, w.err = w.w.WriteString(s)
	}
}
func (w *idxWriter) strs(ss []string) {
	for _, s := range ss {
		w.str(s)
	}
}

// learnedOffset returns the data offset of tar member name in chunk ci if
// a completed tar walk of the read path found it with length bytes.
func (a *Archive) learnedOffset(ci int32, name string, length int64) (int64, bool) {
	return a.set.LearnedOffset(ci, name, length)
}

// LearnedOffsets is the number of extents without a manifest archive_offset
// whose tar offset the read path has learned (and WriteIndex would record).
func (a *Archive) LearnedOffsets() int {
	n := 0
	x := &a.idx
	for i := 0; i < x.n(); i++ {
		if x.flags[i]&flagMulti == 0 {
			if x.off[i] < 0 {
				if _, ok := a.learnedOffset(x.chunk[i], x.roots[x.root[i]]+x.keyAt(i), x.size[i]); ok {
					n++
				}
			}
		}
	}
	for i := range x.exts {
		if e := x.exts[i].extent(x); e.off < 0 {
			if _, ok := a.learnedOffset(e.chunk, e.tarName, e.length); ok {
				n++
			}
		}
	}
	return n
}

// WriteIndex writes the archive's resolved tree in the persistent index
// format (see persist.go). Offsets the read path has learned by walking
// legacy chunks are recorded. An archive opened by Open (not BuildIndex or
// Open with IndexCache) has no recorded manifest sources: its file loads
// with OpenIndex but is never used as Open's cache.
func (a *Archive) WriteIndex(w io.Writer) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<20)
	iw := &idxWriter{w: bw}
	x := &a.idx
	prov := a.prov
	if prov == nil {
		prov = &indexProvenance{maxFrame: effectiveMaxFrame(a.opts), limits: a.opts.Limits}
	}
	nFrames := 0
	for i := range a.chunks {
		nFrames += len(a.chunks[i].Frames)
	}
	var cols uint8
	if x.md5 != nil {
		cols |= colMD5
	}
	if x.ctype != nil {
		cols |= colCtype
	}
	if x.link != nil {
		cols |= colLink
	}
	if len(a.chunks) > math.MaxInt32 || x.n() > math.MaxInt32 || len(x.exts) > math.MaxInt32 {
		return fmt.Errorf("archive %q: too large for the index format", a.name)
	}

	iw.raw([]byte(indexMagic))
	iw.u32(indexFormatVersion)
	iw.u32(0)
	iw.u32(uint32(len(prov.sources)))
	iw.u32(uint32(len(a.chain)))
	iw.u32(uint32(len(a.shapes)))
	iw.u32(uint32(len(a.warnings)))
	iw.u32(uint32(len(a.chunks)))
	iw.u64(uint64(nFrames))
	iw.u32(uint32(x.n()))
	iw.u32(uint32(len(x.exts)))
	iw.u32(uint32(len(x.roots)))
	iw.u32(uint32(len(x.ctypes)))
	iw.u64(uint64(len(x.names)))
	iw.u8(cols)

	// provenance
	iw.str(a.bucket)
	iw.str(a.manifestKey)
	iw.i64(prov.maxFrame)
	for _, v := range limitsList(prov.limits) {
		iw.i64(v)
	}
	for _, s := range prov.sources {
		iw.str(s.key)
		iw.str(s.etag)
		iw.i64(s.size)
		iw.i64(s.modSec)
		iw.raw(s.sha256[:])
		iw.b(s.absent)
	}

	// metadata
	iw.str(a.uploadID)
	iw.str(a.version)
	_, zoff := a.created.Zone()
	iw.i64(a.created.Unix())
	iw.u32(uint32(a.created.Nanosecond()))
	iw.u32(uint32(int32(zoff)))
	iw.str(a.region)
	iw.strs(a.chain)
	iw.strs(a.shapes)
	iw.strs(a.warnings)
	iw.i64(int64(x.frames))
	iw.i64(x.compressed)
	iw.i64(x.uncompressed)

	// chunks, then frames
	for i := range a.chunks {
		c := &a.chunks[i]
		iw.str(c.Key)
		iw.u8(uint8(c.Kind))
		iw.i64(c.Size)
		iw.b(c.HasSum)
		iw.raw(c.Sum[:])
		iw.u32(uint32(len(c.Frames)))
	}
	for i := range a.chunks {
		for _, f := range a.chunks[i].Frames {
			iw.i64(f.COff)
			iw.i64(f.CSize)
			iw.i64(f.UOff)
			iw.i64(f.USize)
			iw.b(f.HasSum)
			iw.raw(f.Sum[:])
		}
	}

	// files
	if iw.err == nil {
		_, iw.err = bw.WriteString(x.names)
	}
	for _, v := range x.ends {
		iw.u32(v)
	}
	for _, v := range x.size {
		iw.i64(v)
	}
	for _, v := range x.msec {
		iw.i64(v)
	}
	for _, v := range x.mnsec {
		iw.u32(v)
	}
	for i := range x.sum {
		iw.raw(x.sum[i][:])
	}
	iw.raw(x.flags)
	for _, v := range x.chunk {
		iw.u32(uint32(v))
	}
	for i, v := range x.off {
		if v < 0 && x.flags[i]&flagMulti == 0 {
			if lo, ok := a.learnedOffset(x.chunk[i], x.roots[x.root[i]]+x.keyAt(i), x.size[i]); ok {
				v = lo
			}
		}
		iw.i64(v)
	}
	for _, v := range x.root {
		iw.u32(v)
	}
	if x.md5 != nil {
		for i := range x.md5 {
			iw.raw(x.md5[i][:])
		}
	}
	if x.ctype != nil {
		for _, v := range x.ctype {
			iw.u32(v)
		}
	}
	for _, v := range x.link {
		iw.u16(v)
	}
	iw.strs(x.roots)
	iw.strs(x.ctypes)
	for i := range x.exts {
		e := x.exts[i].extent(x)
		off := e.off
		if off < 0 {
			if lo, ok := a.learnedOffset(e.chunk, e.tarName, e.length); ok {
				off = lo
			}
		}
		iw.u32(uint32(e.chunk))
		iw.i64(e.fileOff)
		iw.i64(off)
		iw.i64(e.length)
		iw.b(e.hasSum)
		iw.raw(e.sum[:])
		iw.str(e.tarName)
	}
	iw.u32(uint32(x.tombs.n()))
	iw.str(x.tombs.names)
	for _, v := range x.tombs.ends {
		iw.u32(v)
	}
	for _, v := range x.tombs.link {
		iw.u16(v)
	}
	units := a.set.VerifiedUnits()
	iw.u32(uint32(len(units)))
	for _, u := range units {
		iw.u32(uint32(u.Chunk))
		iw.u8(uint8(u.Kind))
		iw.i64(u.Off)
		iw.i64(u.N)
		iw.raw(u.Sum[:])
		iw.str(u.ETag)
	}
	if iw.err != nil {
		return fmt.Errorf("archive %q: write index: %w", a.name, iw.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("archive %q: write index: %w", a.name, err)
	}
	if _, err := w.Write(h.Sum(nil)); err != nil {
		return fmt.Errorf("archive %q: write index: %w", a.name, err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Reading

// OpenIndex loads an index written by WriteIndex and returns the archive,
// reading chunks from store (in the bucket the index records). It makes no
// request: the caller decides whether the index is fresh (Open with
// Options.IndexCache checks the recorded manifests). The whole input is
// read and verified before anything is decoded; errors wrap ErrBadIndex.
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

// openIndexBytes decodes and validates data (an index file called name).
func openIndexBytes(store backend.Store, data []byte, name string, opts Options) (*Archive, error) {
	d, err := newIndexDecoder(data, name)
	if err != nil {
		return nil, err
	}
	p, err := d.provenance()
	if err != nil {
		return nil, err
	}
	return d.archive(store, opts, p)
}

// idxCursor reads fixed-width fields with bounds checks; the first failure
// sticks.
type idxCursor struct {
	b   []byte
	off int
	err error
}

func (c *idxCursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

// take returns the next n bytes, or nil (and fails) past the end.
func (c *idxCursor) take(n uint64) []byte {
	if c.err != nil {
		return nil
	}
	if n > uint64(len(c.b)-c.off) {
		c.fail("truncated at byte %d (%d more bytes wanted, %d left)", c.off, n, len(c.b)-c.off)
		return nil
	}
	s := c.b[c.off : c.off+int(n)]
	c.off += int(n)
	return s
}

func (c *idxCursor) u8() uint8 {
	if b := c.take(1); b != nil {
		return b[0]
	}
	return 0
}
func (c *idxCursor) u16() uint16 {
	if b := c.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}
func (c *idxCursor) u32() uint32 {
	if b := c.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}
func (c *idxCursor) u64() uint64 {
	if b := c.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
func (c *idxCursor) i64() int64 { return int64(c.u64()) }
func (c *idxCursor) flag() bool {
	v := c.u8()
	if v > 1 {
		c.fail("boolean byte %d at %d", v, c.off-1)
	}
	return v == 1
}
func (c *idxCursor) str() string {
	n := c.u32()
	return string(c.take(uint64(n)))
}
func (c *idxCursor) strs(n uint32) []string {
	if c.err != nil {
		return nil
	}
	if uint64(n)*idxStrMin > uint64(len(c.b)-c.off) {
		c.fail("%d strings cannot fit in %d bytes", n, len(c.b)-c.off)
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = c.str()
	}
	return out
}

// indexDecoder holds a verified (checksum) file and its counts.
type indexDecoder struct {
	name string
	c    idxCursor

	nSources, nChain, nShapes, nWarnings, nChunks uint32
	nFrames                                       uint64
	nFiles, nExts, nRoots, nCtypes                uint32
	namesLen                                      uint64
	cols                                          uint8

	bucket, manifestKey string
	units               []chunkio.VerifiedUnit
}

func (d *indexDecoder) errf(format string, args ...any) error {
	return fmt.Errorf("index %s: %w: %s", d.name, ErrBadIndex, fmt.Sprintf(format, args...))
}

// newIndexDecoder checks magic, version and trailer, reads the counts and
// checks that the body can hold them.
func newIndexDecoder(data []byte, name string) (*indexDecoder, error) {
	d := &indexDecoder{name: name}
	if len(data) < indexHeaderBytes+indexTrailerBytes {
		return nil, d.errf("%d bytes: too short", len(data))
	}
	if string(data[:8]) != indexMagic {
		return nil, d.errf("not a wharf index (magic %q)", data[:8])
	}
	if v := binary.LittleEndian.Uint32(data[8:12]); v != indexFormatVersion {
		return nil, d.errf("format version %d, this wharf reads version %d", v, indexFormatVersion)
	}
	body := data[:len(data)-indexTrailerBytes]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[len(body):]) {
		return nil, d.errf("checksum mismatch (file corrupted or truncated)")
	}
	d.c = idxCursor{b: body, off: 12}
	c := &d.c
	if r := c.u32(); r != 0 {
		return nil, d.errf("reserved field %d", r)
	}
	d.nSources, d.nChain, d.nShapes, d.nWarnings, d.nChunks = c.u32(), c.u32(), c.u32(), c.u32(), c.u32()
	d.nFrames = c.u64()
	d.nFiles, d.nExts, d.nRoots, d.nCtypes = c.u32(), c.u32(), c.u32(), c.u32()
	d.namesLen = c.u64()
	d.cols = c.u8()
	if c.err != nil {
		return nil, d.errf("%v", c.err)
	}
	if d.cols&^(colMD5|colCtype|colLink) != 0 {
		return nil, d.errf("unknown columns %#x", d.cols)
	}
	if d.nChunks > math.MaxInt32 || d.nFiles > math.MaxInt32 || d.nExts > math.MaxInt32 || d.nFrames > math.MaxInt32 {
		return nil, d.errf("counts out of range")
	}
	// Every count is bounded by the bytes left before anything is allocated
	// (u32 counts times small sizes cannot overflow a uint64).
	fileSize := uint64(idxFileMin)
	if d.cols&colMD5 != 0 {
		fileSize += 16
	}
	if d.cols&colCtype != 0 {
		fileSize += 4
	}
	if d.cols&colLink != 0 {
		fileSize += 2
	}
	need := uint64(d.nSources)*idxSourceMin + uint64(d.nChain+0)*idxStrMin + uint64(d.nShapes)*idxStrMin +
		uint64(d.nWarnings)*idxStrMin + uint64(d.nChunks)*idxChunkMin + d.nFrames*idxFrameSize +
		uint64(d.nFiles)*fileSize + uint64(d.nExts)*idxExtMin + uint64(d.nRoots)*idxStrMin +
		uint64(d.nCtypes)*idxStrMin
	left := uint64(len(body) - c.off)
	if d.namesLen > left || need > left-d.namesLen {
		return nil, d.errf("counts (%d files, %d chunks, %d frames, %d extents, %d name bytes) need more than the %d bytes present",
			d.nFiles, d.nChunks, d.nFrames, d.nExts, d.namesLen, left)
	}
	return d, nil
}

// provenance decodes the provenance section.
func (d *indexDecoder) provenance() (*indexProvenance, error) {
	c := &d.c
	d.bucket, d.manifestKey = c.str(), c.str()
	p := &indexProvenance{maxFrame: c.i64()}
	var lim [7]int64
	for i := range lim {
		lim[i] = c.i64()
		if c.err == nil && lim[i] <= 0 {
			return nil, d.errf("limit %d is %d", i, lim[i])
		}
	}
	if c.err == nil && p.maxFrame <= 0 {
		return nil, d.errf("max frame bytes %d", p.maxFrame)
	}
	p.limits = manifest.Limits{MaxStoredBytes: lim[0], MaxJSONBytes: lim[1], MaxFiles: int(lim[2]), MaxChunks: int(lim[3]),
		MaxFrames: int(lim[4]), MaxPathBytes: int(lim[5]), MaxChainDepth: int(lim[6])}
	if c.err == nil {
		p.sources = make([]indexSource, d.nSources)
	}
	for i := range p.sources {
		s := &p.sources[i]
		s.key, s.etag = c.str(), c.str()
		s.size, s.modSec = c.i64(), c.i64()
		copy(s.sha256[:], c.take(32))
		s.absent = c.flag()
		if c.err == nil && (s.key == "" || s.size < 0) {
			return nil, d.errf("source %d: key %q size %d", i, s.key, s.size)
		}
	}
	if c.err != nil {
		return nil, d.errf("provenance: %v", c.err)
	}
	if d.bucket == "" || d.manifestKey == "" {
		return nil, d.errf("no bucket or manifest key")
	}
	return p, nil
}

// archive decodes the rest and validates the tree.
func (d *indexDecoder) archive(store backend.Store, opts Options, prov *indexProvenance) (*Archive, error) {
	c := &d.c
	a := &tree{}
	a.uploadID, a.version = c.str(), c.str()
	sec, nsec, zoff := c.i64(), c.u32(), int32(c.u32())
	if nsec >= 1e9 {
		return nil, d.errf("created: nanoseconds %d", nsec)
	}
	a.created = time.Unix(sec, int64(nsec)).UTC()
	if zoff != 0 {
		a.created = a.created.In(time.FixedZone("", int(zoff)))
	}
	a.region = c.str()
	a.chain = c.strs(d.nChain)
	a.shapes = c.strs(d.nShapes)
	a.warnings = c.strs(d.nWarnings)
	x := &a.idx
	x.frames = int(c.i64())
	x.compressed, x.uncompressed = c.i64(), c.i64()
	if c.err != nil {
		return nil, d.errf("metadata: %v", c.err)
	}
	if len(a.chain) == 0 || a.chain[0] != a.uploadID {
		return nil, d.errf("chain %q does not start with upload id %q", a.chain, a.uploadID)
	}
	if x.frames < 0 || uint64(x.frames) != d.nFrames || x.compressed < 0 || x.uncompressed < 0 {
		return nil, d.errf("totals (%d frames, %d, %d bytes) disagree with the chunks", x.frames, x.compressed, x.uncompressed)
	}

	// chunks
	a.chunks = make([]chunkio.Chunk, d.nChunks)
	frameCounts := make([]uint32, d.nChunks)
	confinement := &resolver{root: keyRoot(d.manifestKey), opts: opts}
	var nf uint64
	for i := range a.chunks {
		ch := &a.chunks[i]
		ch.Key = c.str()
		ch.Kind = chunkio.Kind(c.u8())
		ch.Size = c.i64()
		ch.HasSum = c.flag()
		copy(ch.Sum[:], c.take(32))
		frameCounts[i] = c.u32()
		nf += uint64(frameCounts[i])
		if c.err != nil {
			return nil, d.errf("chunk %d: %v", i, c.err)
		}
		if ch.Key == "" || ch.Kind > chunkio.Direct || ch.Size < 0 {
			return nil, d.errf("chunk %d: key %q kind %d size %d", i, ch.Key, ch.Kind, ch.Size)
		}
		if (frameCounts[i] > 0) != (ch.Kind == chunkio.FramedZstd) {
			return nil, d.errf("chunk %s: %d frames on a %s chunk", ch.Key, frameCounts[i], ch.Kind)
		}
		// The same confinement as the resolver's, under the options in
		// force now: an index built with a prefix since disallowed is
		// not used (Open then reads the manifest, which refuses it).
		if err := confinement.confine(ch.Key); err != nil {
			return nil, d.errf("chunk %d: %v", i, err)
		}
	}
	if nf != d.nFrames {
		return nil, d.errf("chunks hold %d frames, header says %d", nf, d.nFrames)
	}
	frames := make([]chunkio.Frame, d.nFrames)
	fb := c.take(d.nFrames * idxFrameSize)
	if c.err != nil {
		return nil, d.errf("frames: %v", c.err)
	}
	for i := range frames {
		b := fb[i*idxFrameSize:]
		f := &frames[i]
		f.COff = int64(binary.LittleEndian.Uint64(b[0:]))
		f.CSize = int64(binary.LittleEndian.Uint64(b[8:]))
		f.UOff = int64(binary.LittleEndian.Uint64(b[16:]))
		f.USize = int64(binary.LittleEndian.Uint64(b[24:]))
		if b[32] > 1 {
			return nil, d.errf("frame %d: boolean byte %d", i, b[32])
		}
		f.HasSum = b[32] == 1
		copy(f.Sum[:], b[33:65])
	}
	uncomp := make([]int64, d.nChunks) // tar bytes of framed chunks
	var compressed int64
	var at uint64
	for i := range a.chunks {
		ch := &a.chunks[i]
		n := uint64(frameCounts[i])
		ch.Frames = frames[at : at+n : at+n]
		at += n
		if ch.Kind == chunkio.FramedZstd {
			// The one frame-table rule (manifest.CheckFrames). The
			// resolver set the size of a chunk whose compressed_size was
			// unknown to its frames' end, so it is always known here.
			fr := ch.Frames
			t, err := manifest.CheckFrames(len(fr), func(i int) manifest.FrameSpan { return fr[i].Span() }, ch.Size)
			if err == nil && ch.Size == 0 {
				err = errors.New("framed chunk of size 0")
			}
			if err != nil {
				return nil, d.errf("chunk %s: %v", ch.Key, err)
			}
			uncomp[i] = t.Total
		}
		if compressed > math.MaxInt64-ch.Size {
			return nil, d.errf("chunk sizes overflow")
		}
		compressed += ch.Size
	}
	if compressed != x.compressed {
		return nil, d.errf("chunks total %d bytes, header says %d", compressed, x.compressed)
	}

	if err := d.files(x, a.chunks, uncomp); err != nil {
		return nil, err
	}
	arc := newArchive(*a, store, d.bucket, d.manifestKey, opts, nil)
	arc.prov = prov
	arc.set.MarkVerified(d.units)
	return arc, nil
}

// checkExtent checks one stored piece against its chunk.
func checkExtent(e *extent, chunks []chunkio.Chunk, uncomp []int64) error {
	if e.chunk < 0 || int(e.chunk) >= len(chunks) {
		return fmt.Errorf("chunk index %d out of range", e.chunk)
	}
	ch := &chunks[e.chunk]
	switch {
	case e.length < 0 || e.off < -1:
		return fmt.Errorf("offset %d length %d", e.off, e.length)
	case ch.Kind == chunkio.Direct:
		if e.off != 0 || e.length != ch.Size || e.tarName != "" {
			return fmt.Errorf("direct object %s: offset %d length %d (object %d bytes)", ch.Key, e.off, e.length, ch.Size)
		}
	case e.tarName == "":
		return fmt.Errorf("no tar name in chunk %s", ch.Key)
	case ch.Kind == chunkio.FramedZstd && e.off >= 0:
		if e.off > uncomp[e.chunk] || e.length > uncomp[e.chunk]-e.off {
			return fmt.Errorf("bytes [%d,+%d) outside chunk %s (%d bytes)", e.off, e.length, ch.Key, uncomp[e.chunk])
		}
	}
	return nil
}

// files decodes the file columns, roots, content types and extents and
// checks every file.
func (d *indexDecoder) files(x *index, chunks []chunkio.Chunk, uncomp []int64) error {
	c := &d.c
	n := int(d.nFiles)
	x.names = string(c.take(d.namesLen))
	col := func(size int) []byte { return c.take(uint64(n) * uint64(size)) }
	ends, size, msec, mnsec := col(4), col(8), col(8), col(4)
	sums, flags, chunkCol, offCol, rootCol := col(32), col(1), col(4), col(8), col(4)
	var md5s, ctypes, links []byte
	if d.cols&colMD5 != 0 {
		md5s = col(16)
	}
	if d.cols&colCtype != 0 {
		ctypes = col(4)
	}
	if d.cols&colLink != 0 {
		links = col(2)
	}
	if c.err != nil {
		return d.errf("files: %v", c.err)
	}
	x.roots = c.strs(d.nRoots)
	x.ctypes = c.strs(d.nCtypes)
	if c.err != nil {
		return d.errf("roots: %v", c.err)
	}
	if d.nExts > 0 {
		x.exts = make([]extRec, d.nExts)
	}
	var extNames []byte
	for i := range x.exts {
		var e extent
		e.chunk = int32(c.u32())
		e.fileOff, e.off, e.length = c.i64(), c.i64(), c.i64()
		e.hasSum = c.flag()
		copy(e.sum[:], c.take(32))
		e.tarName = c.str()
		if c.err != nil {
			return d.errf("extent %d: %v", i, c.err)
		}
		if err := checkExtent(&e, chunks, uncomp); err != nil {
			return d.errf("extent %d: %v", i, err)
		}
		x.exts[i] = extRec{fileOff: e.fileOff, off: e.off, length: e.length, sum: e.sum, chunk: e.chunk,
			name: uint32(len(extNames)), nameLen: uint32(len(e.tarName))}
		if e.hasSum {
			x.exts[i].hasSum = 1
		}
		extNames = append(extNames, e.tarName...)
	}
	x.extNames = string(extNames)
	if err := d.tombstones(&x.tombs); err != nil {
		return err
	}
	units, err := d.verifiedUnits(len(chunks))
	if err != nil {
		return err
	}
	d.units = units
	if c.off != len(c.b) {
		return d.errf("%d bytes left over after the last section", len(c.b)-c.off)
	}
	if (md5s != nil) != (d.cols&colMD5 != 0) {
		return d.errf("md5 column")
	}
	if ctypes != nil && len(x.ctypes) == 0 {
		return d.errf("content-type column without content types")
	}
	if len(x.ctypes) > 0 && ctypes == nil {
		return d.errf("content types without a column")
	}
	if (links != nil) != (d.nChain > 1) {
		return d.errf("link column present %v for a chain of %d", links != nil, d.nChain)
	}
	if links != nil {
		x.link = make([]uint16, n)
		for i := range x.link {
			x.link[i] = binary.LittleEndian.Uint16(links[i*2:])
			if uint32(x.link[i]) >= d.nChain {
				return d.errf("file %d: chain link %d of %d", i, x.link[i], d.nChain)
			}
		}
	}

	le := binary.LittleEndian
	x.ends = make([]uint32, n)
	x.size = make([]int64, n)
	x.msec = make([]int64, n)
	x.mnsec = make([]uint32, n)
	x.sum = make([][32]byte, n)
	x.flags = slices.Clone(flags)
	x.chunk = make([]int32, n)
	x.off = make([]int64, n)
	x.root = make([]uint32, n)
	if md5s != nil {
		x.md5 = make([][16]byte, n)
	}
	if ctypes != nil {
		x.ctype = make([]uint32, n)
	}
	var prevEnd uint32
	nextExt := int64(0)
	for i := 0; i < n; i++ {
		end := le.Uint32(ends[i*4:])
		if end < prevEnd || uint64(end) > d.namesLen {
			return d.errf("file %d: key end %d (previous %d, %d name bytes)", i, end, prevEnd, d.namesLen)
		}
		if i > 0 && x.names[x.ends[i-1]:end] <= x.rawKey(i-1) {
			return d.errf("file %d: key %q does not sort after %q", i, x.names[x.ends[i-1]:end], x.rawKey(i-1))
		}
		x.ends[i] = end
		prevEnd = end
		fsize := int64(le.Uint64(size[i*8:]))
		x.size[i] = fsize
		x.msec[i] = int64(le.Uint64(msec[i*8:]))
		x.mnsec[i] = le.Uint32(mnsec[i*4:])
		copy(x.sum[i][:], sums[i*32:i*32+32])
		fl := x.flags[i]
		ch := int32(le.Uint32(chunkCol[i*4:]))
		off := int64(le.Uint64(offCol[i*8:]))
		root := le.Uint32(rootCol[i*4:])
		x.chunk[i], x.off[i], x.root[i] = ch, off, root
		if md5s != nil {
			copy(x.md5[i][:], md5s[i*16:i*16+16])
		}
		if ctypes != nil {
			ct := le.Uint32(ctypes[i*4:])
			if ct >= d.nCtypes {
				return d.errf("file %d: content type %d of %d", i, ct, d.nCtypes)
			}
			x.ctype[i] = ct
		}
		switch {
		case fsize < 0 || x.mnsec[i] >= 1e9:
			return d.errf("file %d: size %d, nanoseconds %d", i, fsize, x.mnsec[i])
		case fl&^knownFlags != 0:
			return d.errf("file %d: unknown flags %#x", i, fl)
		case (fl&flagSum != 0) == (fl&flagIdentity != 0):
			return d.errf("file %d: flags %#x: exactly one of checksum and identity", i, fl)
		case fl&flagMD5 != 0 && md5s == nil:
			return d.errf("file %d: md5 flag without an md5 column", i)
		case fl&flagSplit != 0 && fl&flagMulti == 0:
			return d.errf("file %d: split file without extents", i)
		}
		if fl&flagMulti == 0 {
			e := extent{chunk: ch, off: off, length: fsize}
			if root >= d.nRoots {
				return d.errf("file %d: root %d of %d", i, root, d.nRoots)
			}
			if ch >= 0 && int(ch) < len(chunks) && chunks[ch].Kind != chunkio.Direct {
				// The tar name is roots[root]+key; only its presence is checked.
				if x.roots[root] != "" || end > x.keyStart(i) {
					e.tarName = "-"
				}
			}
			if err := checkExtent(&e, chunks, uncomp); err != nil {
				return d.errf("file %d: %v", i, err)
			}
			continue
		}
		if ch < 1 || off != nextExt || int64(ch) > int64(len(x.exts))-off {
			return d.errf("file %d: extents [%d,+%d) (expected to start at %d, %d extents)", i, off, ch, nextExt, len(x.exts))
		}
		nextExt += int64(ch)
		var at int64
		for _, e := range x.exts[off : off+int64(ch)] {
			e := e.extent(x)
			if e.fileOff != at || e.length > fsize-at {
				return d.errf("file %d: extent at %d+%d does not continue at %d within %d bytes", i, e.fileOff, e.length, at, fsize)
			}
			if fl&flagSplit != 0 && e.length == 0 {
				return d.errf("file %d: empty split part", i)
			}
			at += e.length
		}
		if at != fsize {
			return d.errf("file %d: extents cover %d of %d bytes", i, at, fsize)
		}
	}
	if n > 0 && uint64(x.ends[n-1]) != d.namesLen || n == 0 && d.namesLen != 0 {
		return d.errf("names: %d bytes, keys use %d", d.namesLen, prevEnd)
	}
	if nextExt != int64(len(x.exts)) {
		return d.errf("%d extents, files use %d", len(x.exts), nextExt)
	}
	if len(x.ctypes) == 1 && x.ctypes[0] == "" {
		return d.errf("content types: only the empty one")
	}
	for i := 0; i < x.tombs.n(); i++ {
		k := x.tombs.key(i)
		if j := x.search(k); j < x.n() && x.keyAt(j) == k {
			return d.errf("key %q is both a file and deleted", k)
		}
	}
	return nil
}

// verifiedUnits decodes the verified-unit section: chunks in range, known
// kinds, non-negative spans, an ETag each.
func (d *indexDecoder) verifiedUnits(nChunks int) ([]chunkio.VerifiedUnit, error) {
	c := &d.c
	n := c.u32()
	const minUnit = 4 + 1 + 8 + 8 + 32 + 4
	if uint64(n)*minUnit > uint64(len(c.b)-c.off) {
		return nil, d.errf("%d verified units cannot fit in %d bytes", n, len(c.b)-c.off)
	}
	var out []chunkio.VerifiedUnit
	for i := uint32(0); i < n; i++ {
		var u chunkio.VerifiedUnit
		u.Chunk = int32(c.u32())
		u.Kind = chunkio.UnitKind(c.u8())
		u.Off, u.N = c.i64(), c.i64()
		copy(u.Sum[:], c.take(32))
		u.ETag = c.str()
		if c.err != nil {
			return nil, d.errf("verified unit %d: %v", i, c.err)
		}
		if u.Chunk < 0 || int(u.Chunk) >= nChunks || u.Kind < chunkio.UnitObject || u.Kind > chunkio.UnitExtent ||
			u.Off < 0 || u.N < 0 || u.ETag == "" {
			return nil, d.errf("verified unit %d: chunk %d kind %d span %d+%d ETag %q", i, u.Chunk, u.Kind, u.Off, u.N, u.ETag)
		}
		out = append(out, u)
	}
	return out, nil
}

// tombstones decodes the tombstone section: keys strictly ascending, links
// within the chain, none for a single upload.
func (d *indexDecoder) tombstones(t *tombTable) error {
	c := &d.c
	n := c.u32()
	t.names = c.str()
	if c.err != nil {
		return d.errf("tombstones: %v", c.err)
	}
	if n > 0 && d.nChain <= 1 {
		return d.errf("%d tombstones in a single upload", n)
	}
	if uint64(n)*6 > uint64(len(c.b)-c.off) {
		return d.errf("%d tombstones cannot fit in %d bytes", n, len(c.b)-c.off)
	}
	if n == 0 {
		if t.names != "" {
			return d.errf("tombstone names without tombstones")
		}
		return nil
	}
	t.ends = make([]uint32, n)
	t.link = make([]uint16, n)
	var prev uint32
	for i := range t.ends {
		t.ends[i] = c.u32()
		if c.err == nil && (t.ends[i] <= prev || int(t.ends[i]) > len(t.names)) {
			return d.errf("tombstone %d: end %d (previous %d, %d name bytes)", i, t.ends[i], prev, len(t.names))
		}
		if c.err == nil && i > 0 && t.key(i) <= t.key(i-1) {
			return d.errf("tombstone %d: key %q does not sort after %q", i, t.key(i), t.key(i-1))
		}
		prev = t.ends[i]
	}
	for i := range t.link {
		t.link[i] = c.u16()
		if c.err == nil && uint32(t.link[i]) >= d.nChain {
			return d.errf("tombstone %d: chain link %d of %d", i, t.link[i], d.nChain)
		}
	}
	if c.err != nil {
		return d.errf("tombstones: %v", c.err)
	}
	if int(t.ends[n-1]) != len(t.names) {
		return d.errf("tombstone names: %d bytes, keys use %d", len(t.names), t.ends[n-1])
	}
	return nil
}

// keyStart is where key i starts in names.
func (x *index) keyStart(i int) uint32 {
	if i == 0 {
		return 0
	}
	return x.ends[i-1]
}
