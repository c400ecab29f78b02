// Package cargopack writes CargoShip-format archives: the chunk objects
// (.tar.zst or plain .tar), direct-upload objects and the manifest that the
// real CargoShip writer (github.com/scttfrdmn/cargoship) puts in S3.
//
// It is wharf's test-archive generator. Every shape a reader must handle can
// be produced: framed chunks with archive_offset and per-frame checksums
// (2.1), sub-frames inside large files (#502) or one giant frame per large
// file, unframed single-stream chunks, plain .tar chunks for
// already-compressed content, split files with CARGOSHIP.* PAX records,
// deduplicated entries (patched or not), direct uploads and mixed
// direct/chunked manifests, pre-#492 missing offsets, KMS-encrypted
// manifest wrappers, incremental chain fields, manifest versions
// 1.0/2.0/2.1, and the four s3_key spellings seen in the wild.
//
// Fidelity notes (see /work/shared/docs/cargoship-format-notes.md):
//
//   - Tar headers come from tar.FileInfoHeader with Format left unspecified,
//     so mtimes are whole seconds and long or non-ASCII names get PAX
//     records; the entry name is the manifest path, leading "/" included.
//   - archive_offset is the uncompressed tar-stream position right after
//     WriteHeader (512 for a first entry without PAX).
//   - Frames are cut by closing and resetting one klauspost zstd encoder:
//     after a file once the frame holds >= FrameSize bytes (after Flush wrote
//     the entry padding), and inside the data of files larger than FrameSize.
//     The 1024-byte tar trailer lands in the last frame, which can therefore
//     be trailer-only.
//   - A chunk's uncompressed_size is the sum of its files' sizes, not the tar
//     length; framed chunks have an empty checksum; compressed_size is the
//     real object size.
//
// Memory stays bounded: file bytes are streamed, never held whole, and each
// chunk is spooled to a temporary file before Sink.Put.
package cargopack

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// KeyStyle selects how s3_key (and shard prefixes) are spelled in the
// manifest. The objects themselves are always stored at
// {prefix}/uploads/{id}/...; only the recorded spelling changes.
type KeyStyle int

const (
	// PrefixRelative records "uploads/<id>/shard-N/chunk-M.tar.zst", what the
	// current CargoShip uploader writes (#334). The default.
	PrefixRelative KeyStyle = iota
	// PrefixIncluded records "<prefix>/uploads/...", as docs and fixtures show.
	PrefixIncluded
	// BucketQualified records "<bucket>/<prefix>/uploads/...".
	BucketQualified
	// URL records "s3://<bucket>/<prefix>/uploads/..." (very old uploads, #273).
	URL
)

// Options control the archive's shape. The zero value (plus Bucket) gives
// the current CargoShip default shape except that FrameSize is 0 (unframed);
// the CLI defaults to framed chunks.
type Options struct {
	Bucket   string // bucket the objects are stored in (and recorded)
	Prefix   string // key prefix, recorded as manifest.prefix; "" stores under "uploads/..."
	UploadID string // default YYYYMMDD-<8 hex> from Created

	// SourcePath is the recorded source_path; each file's manifest path is
	// SourcePath + "/" + Rel (absolute, as CargoShip walks), unless
	// RelativePaths. Default "/cargopack/src".
	SourcePath string
	// RelativePaths records path = Rel (a relative walk root).
	RelativePaths bool

	// Version is "2.1" (default), "2.0" or "1.0". 1.0 and 2.0 omit
	// archive_offset, frames and format_features (chunks are single zstd
	// streams whatever FrameSize says); 2.0 keeps checksum_algorithm and
	// checksums; 1.0 has no checksums.
	Version string

	// FrameSize > 0 gives framed .tar.zst chunks: a frame is cut after a file
	// once it holds >= FrameSize bytes, and inside the data of files larger
	// than FrameSize (sub-frames, #502). 0: one zstd stream per chunk, no
	// frame table.
	FrameSize int64
	// NoSubFrames turns large files into one giant frame (the shape lith
	// rejects).
	NoSubFrames bool
	// ChunkSize is the target of summed file bytes per chunk (default 64 MiB).
	// A chunk is closed before a file that would overflow it, so a file
	// larger than ChunkSize gets a chunk of its own.
	ChunkSize int64
	// ShardCount (default 4): chunk g (in write order) goes to shard
	// g % ShardCount and gets id = per-shard counter, so ids repeat across
	// shards (#494).
	ShardCount int
	// SplitSize > 0: files larger than SplitSize are split into parts of
	// SplitSize bytes, each its own tar entry "path.partN" with CARGOSHIP.*
	// PAX records; consecutive parts never share a chunk.
	SplitSize int64
	// Dedup: a file whose content equals an earlier file's (sha256) becomes
	// an is_duplicate entry with no tar entry, patched with the original's
	// s3_key/chunk_id/shard_id. Split files are never deduplicated.
	Dedup bool
	// Direct: the direct-upload shape: total_chunks 0, chunks [], each file
	// its own object of raw bytes at {prefix}/uploads/{id}/files/{Rel}, no
	// archive_offset. Exclusive with SplitSize.
	Direct bool
	// DirectFor (ignored when Direct) stores the files it returns true for
	// as direct objects and chunks the rest: the mixed manifest a chain
	// merge or compaction leaves behind. Those files are never split.
	DirectFor func(rel string) bool
	// DedupUnpatched leaves duplicates with CargoShip's placeholders
	// (chunk_id/shard_id -1, s3_key ""), as when PatchDuplicateLocations
	// could not find the original: a reader must report them unreadable.
	DedupUnpatched bool
	// Pre492 omits archive_offset for files in unframed and plain .tar
	// chunks, as uploads before #492 did (framed chunks keep theirs).
	Pre492 bool
	// EncryptedManifest stores a KMS-envelope wrapper
	// (manifest.encrypted.json.gz, or .json with PlainManifest) holding
	// random bytes instead of the manifest, for reject tests. The data
	// objects are written as usual; Result.Manifest is the plaintext.
	EncryptedManifest bool
	// PlainTar classifies one file: true means "already compressed". A
	// chunk is zstd only if its compressible files strictly outnumber the
	// already-compressed ones (a tie gives a plain .tar). nil = CargoShip's
	// rule (extension skip list, magic sniff, #511 probe).
	PlainTar func(rel string) bool
	// KeyStyle selects how s3_key is recorded.
	KeyStyle KeyStyle

	// Incremental-chain fields, recorded as given. DeletedPaths are Rel
	// paths, recorded in manifest path form (like files' paths). A delta
	// manifest lists only the files given.
	PreviousManifestID string
	SyncType           string
	DeletedPaths       []string

	PlainManifest bool // manifest.json instead of manifest.json.gz
	NoChecksums   bool // no file, chunk or frame checksums, no checksum_algorithm
	ContentHash   bool // also record content_hash (MD5) per file
	// Metadata returns optional per-file metadata (e.g. magika_mime).
	Metadata func(rel string) map[string]string
	// Created is created_at/completed_at and every chunk's times (default
	// time.Now().UTC()).
	Created time.Time
	// ZstdLevel is the zstd level (default 3 = klauspost SpeedDefault).
	ZstdLevel int
	// Region is recorded as manifest.region (default "us-east-1").
	Region string
	// Hostname is recorded as manifest.hostname (default os.Hostname()).
	Hostname string
	// Progress, when not nil, is called on Write's goroutine with source
	// bytes as the data pass stores them (tar members, split parts, direct
	// objects), and with a duplicate's whole size when it is recorded as
	// one. When Write succeeds the calls add up to the files' total size.
	// (Reads that only sniff or hash a file are not counted.)
	Progress func(n int64)
}

func (o *Options) progress(n int64) {
	if o.Progress != nil && n > 0 {
		o.Progress(n)
	}
}

func (o *Options) checksums() bool { return !o.NoChecksums && o.Version != "1.0" }
func (o *Options) v21() bool       { return o.Version == "2.1" }

// Result describes what Write stored.
type Result struct {
	ManifestKey     string             // object key of the manifest
	Manifest        *manifest.Manifest // the manifest as written
	ObjectKeys      []string           // object keys of the data objects (chunks or direct files), in write order
	CompressedBytes int64              // total bytes of the data objects
	Frames          int                // frames across all chunks
}

// Write packs files into sink according to opt and writes the manifest
// last, as CargoShip does. Files are archived in the order given. Errors
// name the file or object key concerned.
func Write(ctx context.Context, sink Sink, files []File, opt Options) (*Result, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	w := &writer{ctx: ctx, sink: sink, opt: &opt, files: files}
	return w.run()
}

func (o *Options) defaults() error {
	if o.Bucket == "" {
		return errors.New("cargopack: Options.Bucket is required")
	}
	switch o.Version {
	case "":
		o.Version = "2.1"
	case "2.1", "2.0", "1.0":
	default:
		return fmt.Errorf("cargopack: unsupported manifest version %q (want 2.1, 2.0 or 1.0)", o.Version)
	}
	if !o.v21() {
		o.FrameSize = 0
	}
	if o.Created.IsZero() {
		o.Created = time.Now().UTC()
	}
	if o.UploadID == "" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("cargopack: upload id: %w", err)
		}
		o.UploadID = o.Created.Format("20060102") + "-" + hex.EncodeToString(b[:])
	}
	if strings.ContainsAny(o.UploadID, "/\\") || o.UploadID == "." || o.UploadID == ".." {
		return fmt.Errorf("cargopack: invalid upload id %q", o.UploadID)
	}
	if o.SourcePath == "" {
		o.SourcePath = "/cargopack/src"
	}
	if o.FrameSize < 0 || o.ChunkSize < 0 || o.SplitSize < 0 || o.ShardCount < 0 {
		return errors.New("cargopack: negative size or count in Options")
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = 64 << 20
	}
	if o.ShardCount == 0 {
		o.ShardCount = 4
	}
	if o.Direct && o.SplitSize > 0 {
		return errors.New("cargopack: Direct and SplitSize are exclusive (direct uploads never split)")
	}
	if o.ZstdLevel == 0 {
		o.ZstdLevel = 3
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			h = "localhost"
		}
		o.Hostname = h
	}
	return nil
}

// writer holds the state of one Write call.
type writer struct {
	ctx   context.Context
	sink  Sink
	opt   *Options
	files []File

	m       *manifest.Manifest
	entries []manifest.FileEntry
	items   []item
	dupOf   map[int]int // duplicate entry -> original entry
	res     *Result
}

// manifestPath returns the recorded path of a Rel.
func (w *writer) manifestPath(rel string) string {
	if w.opt.RelativePaths {
		return rel
	}
	return strings.TrimSuffix(w.opt.SourcePath, "/") + "/" + rel
}

// objectKey returns the stored key and the recorded spelling of tail
// (relative to {prefix}/uploads/{id}/).
func (w *writer) objectKey(tail string) (stored, recorded string) {
	rel := "uploads/" + w.opt.UploadID
	if tail != "" {
		rel += "/" + tail
	}
	stored = rel
	if w.opt.Prefix != "" {
		stored = w.opt.Prefix + "/" + rel
	}
	switch w.opt.KeyStyle {
	case PrefixIncluded:
		recorded = stored
	case BucketQualified:
		recorded = w.opt.Bucket + "/" + stored
	case URL:
		recorded = "s3://" + w.opt.Bucket + "/" + stored
	default:
		recorded = rel
	}
	return stored, recorded
}

func validRel(rel string) error {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.HasSuffix(rel, "/") {
		return fmt.Errorf("cargopack: invalid relative path %q", rel)
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("cargopack: invalid relative path %q", rel)
		}
	}
	return nil
}

func (w *writer) run() (*Result, error) {
	opt := w.opt
	w.res = &Result{}
	seen := make(map[string]bool, len(w.files))
	for i := range w.files {
		f := &w.files[i]
		if err := validRel(f.Rel); err != nil {
			return nil, err
		}
		if seen[f.Rel] {
			return nil, fmt.Errorf("cargopack: duplicate path %q", f.Rel)
		}
		seen[f.Rel] = true
		if f.Size < 0 || f.Open == nil {
			return nil, fmt.Errorf("cargopack: file %q: negative size or nil Open", f.Rel)
		}
	}
	if err := w.plan(); err != nil {
		return nil, err
	}
	if err := w.writeDirect(); err != nil {
		return nil, err
	}
	if !opt.Direct {
		if err := w.writeChunks(); err != nil {
			return nil, err
		}
	}
	w.patchDuplicates()
	if err := w.writeManifest(); err != nil {
		return nil, err
	}
	return w.res, nil
}

// hashFile streams a whole file through sha256 (and md5).
func (w *writer) hashFile(f *File) (sum, md5sum string, err error) {
	rc, err := f.Open()
	if err != nil {
		return "", "", fmt.Errorf("cargopack: open %s: %w", f.Rel, err)
	}
	defer rc.Close()
	sh, mh := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(sh, mh), &ctxReader{ctx: w.ctx, r: rc})
	if err != nil {
		return "", "", fmt.Errorf("cargopack: read %s: %w", f.Rel, err)
	}
	if n != f.Size {
		return "", "", fmt.Errorf("cargopack: read %s: got %d bytes, declared size %d", f.Rel, n, f.Size)
	}
	return hex.EncodeToString(sh.Sum(nil)), hex.EncodeToString(mh.Sum(nil)), nil
}

// plan builds the file entries (in input order) and the tar items, and
// finds duplicates.
func (w *writer) plan() error {
	opt := w.opt
	w.dupOf = map[int]int{}
	firstByHash := map[string]int{}
	for i := range w.files {
		f := &w.files[i]
		p := w.manifestPath(f.Rel)
		var meta map[string]string
		if opt.Metadata != nil {
			meta = opt.Metadata(f.Rel)
		}
		direct := opt.Direct || (opt.DirectFor != nil && opt.DirectFor(f.Rel))
		if !direct && opt.SplitSize > 0 && f.Size > opt.SplitSize {
			total := int((f.Size + opt.SplitSize - 1) / opt.SplitSize)
			for k := 0; k < total; k++ {
				off := int64(k) * opt.SplitSize
				n := min(opt.SplitSize, f.Size-off)
				w.items = append(w.items, item{f: f, entry: len(w.entries), name: p, part: k, totalParts: total, off: off, n: n})
				w.entries = append(w.entries, manifest.FileEntry{
					Path: p, Size: f.Size, ModTime: f.ModTime,
					Offset: off, Length: n, PartIndex: k, TotalParts: total,
					Metadata: meta,
				})
			}
			continue
		}
		e := manifest.FileEntry{Path: p, Size: f.Size, ModTime: f.ModTime, Metadata: meta}
		if opt.Dedup {
			sum, md5sum, err := w.hashFile(f)
			if err != nil {
				return err
			}
			if orig, ok := firstByHash[sum]; ok {
				e.IsDuplicate = true
				e.DuplicateOfHash = sum
				e.Checksum = sum
				if opt.ContentHash {
					e.ContentHash = md5sum
				}
				e.ChunkID, e.ShardID = -1, -1
				w.dupOf[len(w.entries)] = orig
				w.entries = append(w.entries, e)
				opt.progress(f.Size)
				continue
			}
			firstByHash[sum] = len(w.entries)
		}
		w.items = append(w.items, item{f: f, entry: len(w.entries), name: p, n: f.Size, direct: direct})
		w.entries = append(w.entries, e)
	}
	return nil
}

// patchDuplicates copies each original's location into its duplicates
// (CargoShip's PatchDuplicateLocations, #481).
func (w *writer) patchDuplicates() {
	if w.opt.DedupUnpatched {
		return
	}
	for d, o := range w.dupOf {
		e, orig := &w.entries[d], &w.entries[o]
		e.S3Key, e.ChunkID, e.ShardID = orig.S3Key, orig.ChunkID, orig.ShardID
		e.OriginalS3Key, e.OriginalChunkID, e.OriginalShardID = orig.S3Key, orig.ChunkID, orig.ShardID
	}
}

// writeDirect stores every direct item as its own raw object.
func (w *writer) writeDirect() error {
	for i := range w.items {
		it := &w.items[i]
		if !it.direct {
			continue
		}
		f := it.f
		stored, recorded := w.objectKey("files/" + f.Rel)
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("cargopack: open %s: %w", f.Rel, err)
		}
		sh, mh := sha256.New(), md5.New()
		cr := &countingReader{r: io.TeeReader(rc, io.MultiWriter(sh, mh)), progress: w.opt.progress}
		err = w.sink.Put(w.ctx, w.opt.Bucket, stored, io.LimitReader(cr, f.Size), f.Size)
		if err == nil {
			// A file longer than declared must fail, not be truncated.
			var one [1]byte
			if k, _ := io.ReadFull(rc, one[:]); k > 0 {
				err = fmt.Errorf("cargopack: read %s: file longer than its declared size %d", f.Rel, f.Size)
			}
		}
		rc.Close()
		if err != nil {
			return fmt.Errorf("cargopack: direct object %s for %s: %w", stored, f.Rel, err)
		}
		if cr.n != f.Size {
			return fmt.Errorf("cargopack: read %s: got %d bytes, declared size %d", f.Rel, cr.n, f.Size)
		}
		e := &w.entries[it.entry]
		e.S3Key = recorded
		if w.opt.checksums() {
			e.Checksum = hex.EncodeToString(sh.Sum(nil))
		}
		if w.opt.ContentHash {
			e.ContentHash = hex.EncodeToString(mh.Sum(nil))
		}
		w.res.ObjectKeys = append(w.res.ObjectKeys, stored)
		w.res.CompressedBytes += f.Size
	}
	return nil
}

type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64) // nil: none
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil {
		c.progress(int64(n))
	}
	return n, err
}

// groupChunks assigns items to chunks: a chunk is closed before an item
// that would push its summed sizes past ChunkSize, and before a split part
// whose previous part is in it.
func (w *writer) groupChunks() [][]int {
	var groups [][]int
	var cur []int
	var curBytes int64
	for i := range w.items {
		it := &w.items[i]
		if it.direct {
			continue
		}
		if len(cur) > 0 && (curBytes+it.n > w.opt.ChunkSize || (it.totalParts > 1 && it.part > 0)) {
			groups = append(groups, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, i)
		curBytes += it.n
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// compressChunk applies the strict-majority rule to one chunk's items.
func (w *writer) compressChunk(group []int) (bool, error) {
	var compressible, pre int
	for _, i := range group {
		f := w.items[i].f
		var isPre bool
		if w.opt.PlainTar != nil {
			isPre = w.opt.PlainTar(f.Rel)
		} else {
			var err error
			if isPre, err = isPrecompressed(f); err != nil {
				return false, err
			}
		}
		if isPre {
			pre++
		} else {
			compressible++
		}
	}
	return compressible > pre, nil
}

func (w *writer) writeChunks() error {
	opt := w.opt
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(opt.ZstdLevel)),
		zstd.WithEncoderConcurrency(1))
	if err != nil {
		return fmt.Errorf("cargopack: zstd encoder: %w", err)
	}
	defer enc.Close()

	perShard := make([]int, opt.ShardCount)
	shards := make([]manifest.ShardEntry, opt.ShardCount)
	for s := range shards {
		_, rec := w.objectKey(fmt.Sprintf("shard-%d", s))
		shards[s] = manifest.ShardEntry{ID: s, Prefix: rec, ChunkKeys: []string{}}
	}
	chunks := []manifest.ChunkEntry{}
	for g, group := range w.groupChunks() {
		if err := w.ctx.Err(); err != nil {
			return fmt.Errorf("cargopack: %w", err)
		}
		shard := g % opt.ShardCount
		id := perShard[shard]
		perShard[shard]++
		compress, err := w.compressChunk(group)
		if err != nil {
			return err
		}
		ext := ".tar"
		if compress {
			ext = ".tar.zst"
		}
		stored, recorded := w.objectKey(fmt.Sprintf("shard-%d/chunk-%d%s", shard, id, ext))
		out, err := w.buildChunk(group, compress, enc, stored)
		if err != nil {
			return err
		}
		err = w.sink.Put(w.ctx, opt.Bucket, stored, out.tmp, out.size)
		_ = out.tmp.Close()
		_ = os.Remove(out.tmp.Name())
		if err != nil {
			return fmt.Errorf("cargopack: upload chunk %s: %w", stored, err)
		}
		ce := manifest.ChunkEntry{
			ID: id, ShardID: shard, S3Key: recorded,
			FilePaths:      []string{},
			CompressedSize: out.size,
			CreatedAt:      opt.Created, UploadedAt: opt.Created,
		}
		if opt.v21() && len(out.frames) > 0 {
			ce.Frames = out.frames
		} else if opt.checksums() {
			ce.Checksum = out.sha256
		}
		for k, i := range group {
			it := &w.items[i]
			r := out.items[k]
			e := &w.entries[it.entry]
			e.ChunkID, e.ShardID, e.S3Key = id, shard, recorded
			if opt.v21() && !(opt.Pre492 && len(out.frames) == 0) {
				off := r.archiveOffset
				e.ArchiveOffset = &off
			}
			if opt.checksums() {
				e.Checksum = r.sha256
			}
			if opt.ContentHash {
				e.ContentHash = r.md5
			}
			ce.FileCount++
			ce.FilePaths = append(ce.FilePaths, it.name)
			ce.UncompressedSize += it.n
		}
		chunks = append(chunks, ce)
		sh := &shards[shard]
		sh.ChunkCount++
		sh.FileCount += int64(ce.FileCount)
		sh.UncompressedSize += ce.UncompressedSize
		sh.CompressedSize += ce.CompressedSize
		sh.ChunkKeys = append(sh.ChunkKeys, recorded)
		w.res.ObjectKeys = append(w.res.ObjectKeys, stored)
		w.res.CompressedBytes += out.size
		w.res.Frames += len(out.frames)
	}
	w.m = &manifest.Manifest{Chunks: chunks, Shards: shards, ShardCount: opt.ShardCount}
	return nil
}

// buildChunk writes one chunk's tar (and zstd) stream to a spool file.
func (w *writer) buildChunk(group []int, compress bool, enc *zstd.Encoder, key string) (*chunkOut, error) {
	cw, err := newChunkWriter(w.opt, compress, enc)
	if err != nil {
		return nil, err
	}
	results := make([]itemResult, 0, len(group))
	for _, i := range group {
		if err := w.ctx.Err(); err != nil {
			cw.discard()
			return nil, fmt.Errorf("cargopack: chunk %s: %w", key, err)
		}
		r, err := cw.add(&w.items[i])
		if err != nil {
			cw.discard()
			return nil, fmt.Errorf("%w (chunk %s)", err, key)
		}
		results = append(results, r)
	}
	out, err := cw.finish()
	if err != nil {
		cw.discard()
		return nil, fmt.Errorf("%w (chunk %s)", err, key)
	}
	out.items = results
	return out, nil
}

// writeManifest fills the top-level fields and stores the manifest.
func (w *writer) writeManifest() error {
	opt := w.opt
	m := w.m
	if m == nil { // direct upload
		m = &manifest.Manifest{Chunks: []manifest.ChunkEntry{}, Shards: []manifest.ShardEntry{}}
	}
	m.Version = opt.Version
	m.UploadID = opt.UploadID
	m.CreatedAt, m.CompletedAt = opt.Created, opt.Created
	m.SourcePath = opt.SourcePath
	m.Hostname = opt.Hostname
	m.PreviousManifestID = opt.PreviousManifestID
	m.SyncType = opt.SyncType
	for _, d := range opt.DeletedPaths {
		m.DeletedPaths = append(m.DeletedPaths, w.manifestPath(d))
	}
	m.Bucket, m.Prefix, m.Region = opt.Bucket, opt.Prefix, opt.Region
	m.Files = w.entries
	if m.Files == nil {
		m.Files = []manifest.FileEntry{}
	}
	m.TotalFiles = int64(len(m.Files))
	var uncompressed int64
	for _, e := range m.Files {
		m.TotalBytes += e.Size // over-counts split files, as CargoShip's AddFile does
	}
	for _, it := range w.items {
		uncompressed += it.n
	}
	m.TotalChunks = len(m.Chunks)
	m.CompressionType = "zstd"
	m.CompressionLevel = opt.ZstdLevel
	if uncompressed > 0 {
		m.CompressionRatio = min(1, float64(w.res.CompressedBytes)/float64(uncompressed))
	}
	if opt.checksums() {
		m.ChecksumAlgorithm = "sha256"
	}
	if opt.v21() && w.res.Frames > 0 {
		m.FormatFeatures = []string{"frames"}
	}
	if opt.Dedup {
		d := &manifest.ManifestDeduplication{Enabled: true, FileReferences: map[string]manifest.FileReference{}}
		for _, it := range w.items {
			d.BytesProcessed += it.n
		}
		d.UniqueFiles = int64(len(w.items))
		refs := map[int]int32{}
		for dup, o := range w.dupOf {
			d.DuplicateFiles++
			d.BytesSaved += w.entries[dup].Size
			d.BytesProcessed += w.entries[dup].Size
			refs[o]++
		}
		for o, n := range refs {
			e := w.entries[o]
			h := e.Checksum
			if h == "" {
				continue
			}
			d.FileReferences[h] = manifest.FileReference{Hash: h, ShardID: e.ShardID, ChunkID: e.ChunkID, S3Key: e.S3Key, Size: e.Size, RefCount: n + 1}
		}
		if d.BytesProcessed > 0 {
			d.DeduplicationPct = 100 * float64(d.BytesSaved) / float64(d.BytesProcessed)
		}
		m.Deduplication = d
	}

	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("cargopack: encode manifest: %w", err)
	}
	name := "manifest.json.gz"
	if opt.EncryptedManifest {
		name = "manifest.encrypted.json.gz"
		if body, err = encryptedWrapper(); err != nil {
			return err
		}
	}
	if opt.PlainManifest {
		name = strings.TrimSuffix(name, ".gz")
	} else {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(body); err != nil {
			return fmt.Errorf("cargopack: gzip manifest: %w", err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("cargopack: gzip manifest: %w", err)
		}
		body = buf.Bytes()
	}
	key, _ := w.objectKey(name)
	if err := w.sink.Put(w.ctx, opt.Bucket, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("cargopack: upload manifest %s: %w", key, err)
	}
	w.res.ManifestKey = key
	w.res.Manifest = m
	return nil
}

// encryptedWrapper returns a CargoShip KMS-envelope wrapper around random
// bytes: the shape of manifest.encrypted.json[.gz], which no reader without
// the KMS key can open.
func encryptedWrapper() ([]byte, error) {
	b64 := func(n int) (string, error) {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("cargopack: encrypted manifest: %w", err)
		}
		return base64.StdEncoding.EncodeToString(b), nil
	}
	dek, err := b64(184)
	if err != nil {
		return nil, err
	}
	iv, err := b64(12)
	if err != nil {
		return nil, err
	}
	data, err := b64(1024)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(map[string]any{
		"algorithm":       "AES-256-GCM",
		"kms_key_id":      "arn:aws:kms:us-east-1:111122223333:key/00000000-0000-0000-0000-000000000000",
		"encrypted_dek":   dek,
		"iv":              iv,
		"encrypted_data":  data,
		"binding_version": 1,
	}, "", "  ")
}
