package archiveview

// Resolution: from a chain of loaded manifests (newest first) to the
// effective virtual tree, the chunks it needs and the compact index.
//
// Rules (CargoShip format notes §2–§11, "Edge cases a reader must get right"):
//
//   - virtual key = manifest.RelativeKey(source_path, path), per manifest;
//     two different paths of one manifest that sanitize to the same key are
//     an error naming both.
//   - chain: newest first, the first mention of a virtual key decides it; a
//     deleted_paths mention is a tombstone. Within one manifest a file entry
//     beats a tombstone for the same key (the file exists in that upload).
//     Matching is by virtual key rather than raw path so that a re-rooted
//     source_path still shadows correctly; with one source_path the two agree.
//   - a resolved object key with a ".." segment (or an empty one) is an
//     error: such a key is never sent to the store.
//   - keys are confined to the archive's own prefix: every chunk and
//     direct-upload key must lie under the part of the manifest key before
//     "/uploads/" (which holds a chain's uploads and compacted ones), or
//     under a prefix the operator allowed (Options.AllowKeyPrefixes);
//     anything else is refused at open, naming the key, so a manifest
//     cannot publish other objects of its bucket through wharf's
//     credentials.
//   - chunks: union over the chain by resolved s3_key (never chunk_id),
//     resolved against the bucket the manifest was read from and the prefix
//     of the manifest that lists them; only chunks a surviving file uses are
//     kept. Several entries for one key (staging snapshots) keep the largest
//     compressed_size.
//   - a file whose resolved s3_key is no chunk's key is a direct-upload
//     object: the object is the file (or that split part).
//   - split files: grouped by path, ordered by part_index, counted against
//     total_parts, tiling [0,size) exactly.
//   - duplicates: mapped to their original (same s3_key, not a duplicate,
//     checksum == duplicate_of_hash, same size), else any non-duplicate with
//     that checksum and size anywhere in the chain; placeholders, no
//     original, or a duplicate whose own checksum differs from its
//     duplicate_of_hash: error.

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// ErrInvalidTree is wrapped by every error about a manifest (chain) whose
// content cannot be served as a consistent tree: key collisions, broken
// split files, unresolvable duplicates, inconsistent frames or offsets.
// (Chain problems wrap ErrBrokenChain.)
var ErrInvalidTree = errors.New("invalid archive tree")

// chainLink is one loaded manifest of an archive's chain.
type chainLink struct {
	key      string // manifest object key
	uploadID string
	m        *manifest.Manifest
	verify   bool // checksum_algorithm is sha256 (or absent): checksums are usable
}

// fileRef points at one FileEntry of one chain link.
type fileRef struct {
	link  int32
	entry int32
}

// survivor is one decided virtual key: the file entries (one, or the parts of
// a split file) that make it up.
type survivor struct {
	key   string
	first fileRef
	parts []int32 // entry indices of a split file's parts (same link), unsorted
	split bool
}

// chunkCand is a chunks[] entry seen somewhere in the chain.
type chunkCand struct {
	link  int32
	entry int32
}

type resolver struct {
	bucket string
	chain  []chainLink
	opts   Options
	root   string // keys must lie under root+"/" ("" = the whole bucket)

	cands    map[string]chunkCand // resolved chunk key -> chosen entry
	chunkIdx map[string]int32     // resolved key -> index in chunks (materialized)
	chunks   []chunkio.Chunk
	uncomp   []int64 // per chunk: uncompressed tar bytes (frames or manifest)

	shapes   map[string]bool
	warnings []string

	memo struct { // resolveKey's last answer
		link     int32
		raw, key string
		ok       bool
	}

	tombs tombTable // keys a tombstone decided (decide; chains only)

	legacyOffsets int
	subFrames     int
	tombstones    int
	duplicates    int
	splitFiles    int
}

// newResolver returns a resolver of chain (newest first), whose newest
// manifest is manifestKey in bucket.
func newResolver(bucket, manifestKey string, chain []chainLink, opts Options) *resolver {
	return &resolver{bucket: bucket, chain: chain, opts: opts, root: keyRoot(manifestKey)}
}

// keyRoot is the prefix an archive's keys must lie under: the part of the
// manifest key before "/uploads/", else the manifest's directory.
func keyRoot(manifestKey string) string {
	if dir, _, ok := manifest.UploadDir(manifestKey); ok {
		return dir
	}
	if i := strings.LastIndexByte(manifestKey, '/'); i >= 0 {
		return manifestKey[:i]
	}
	return ""
}

// confine refuses an object key outside the archive's prefix and the
// allowed ones.
func (r *resolver) confine(key string) error {
	if r.root == "" || strings.HasPrefix(key, r.root+"/") {
		return nil
	}
	for _, p := range r.opts.AllowKeyPrefixes {
		if p != "" && strings.HasPrefix(key, p) {
			return nil
		}
	}
	return fmt.Errorf("%w: key %q lies outside the archive's prefix %q/ (a manifest may only name objects of its own upload tree; allow other prefixes explicitly if the layout needs them)",
		ErrInvalidTree, key, r.root)
}

func (r *resolver) warnf(format string, args ...any) {
	if len(r.warnings) < 100 {
		r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
	} else if len(r.warnings) == 100 {
		r.warnings = append(r.warnings, "further warnings suppressed")
	}
}

func treeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidTree, fmt.Sprintf(format, args...))
}

// where names a file entry for errors: "path (manifest KEY)".
func (r *resolver) where(ref fileRef) string {
	l := &r.chain[ref.link]
	return fmt.Sprintf("%q (manifest %s)", l.m.Files[ref.entry].Path, l.key)
}

func (r *resolver) entry(ref fileRef) *manifest.FileEntry {
	return &r.chain[ref.link].m.Files[ref.entry]
}

// resolveKey resolves an s3_key of link li against the serving bucket.
// Consecutive files usually share a chunk key, so the last answer is kept.
func (r *resolver) resolveKey(li int32, s3key string) string {
	if r.memo.ok && r.memo.link == li && r.memo.raw == s3key {
		return r.memo.key
	}
	key := manifest.ResolveObjectKey(r.bucket, r.chain[li].m.Prefix, s3key)
	r.memo.link, r.memo.raw, r.memo.key, r.memo.ok = li, s3key, key, true
	return key
}

// build resolves the chain into the index and the chunk table.
func (r *resolver) build() (index, []chunkio.Chunk, error) {
	r.init()
	if err := r.collectChunks(); err != nil {
		return index{}, nil, err
	}
	survivors, err := r.decide()
	if err != nil {
		return index{}, nil, err
	}
	origins, err := r.findOriginals(survivors)
	if err != nil {
		return index{}, nil, err
	}
	idx, err := r.buildIndex(survivors, origins, len(r.chain) > 1)
	if err != nil {
		return index{}, nil, err
	}
	idx.tombs = r.tombs
	for i := range r.chunks {
		c := &r.chunks[i]
		idx.frames += len(c.Frames)
		idx.compressed += c.Size
		idx.uncompressed += r.uncomp[i]
		r.shapes[c.Kind.String()] = true
	}
	if r.legacyOffsets > 0 {
		r.shapes["legacy-offsets"] = true
		r.warnf("%d file(s) or parts have no archive_offset: reads walk the tar to find them", r.legacyOffsets)
	}
	if r.subFrames > 0 {
		r.shapes["sub-frames"] = true
	}
	if r.duplicates > 0 {
		r.shapes["dedup"] = true
	}
	if r.splitFiles > 0 {
		r.shapes["split"] = true
	}
	if r.tombstones > 0 {
		r.shapes["tombstones"] = true
	}
	return idx, r.chunkTable(), nil
}

// init prepares the resolver's maps (before collectChunks).
func (r *resolver) init() {
	r.shapes = map[string]bool{}
	r.chunkIdx = map[string]int32{}
	if len(r.chain) > 1 {
		r.shapes["chain"] = true
	}
}

// buildIndex resolves survivors (in key order) into an index. Each
// survivor is cleared once added.
// With links the index records, per file, the chain link that decided it
// (its S3 version id); the tree of a chain has them, the per-upload history
// indexes of versions.go do not (all their files are of one upload).
func (r *resolver) buildIndex(survivors []survivor, origins map[fileRef]fileRef, links bool) (index, error) {
	nameBytes := 0
	for i := range survivors {
		nameBytes += len(survivors[i].key)
	}
	var b indexBuilder
	b.init(len(survivors), nameBytes)
	b.links = links
	for i := range survivors {
		if err := r.addFile(&b, &survivors[i], origins); err != nil {
			return index{}, err
		}
		survivors[i] = survivor{} // release the key's only other reference early
	}
	return b.finish()
}

// chunkTable materializes the chunks resolved so far.
func (r *resolver) chunkTable() []chunkio.Chunk {
	chunks := slices.Clone(r.chunks)
	if bounds := r.streamBounds(); bounds != nil {
		for i := range chunks {
			chunks[i].MaxTar = bounds[i]
		}
	}
	return chunks
}

// Slack of the decode bound of an unframed zstd chunk (streamBounds).
const (
	tarMemberOverhead = 4 << 10  // ustar + PAX headers and records per member, beyond the name
	tarBoundSlack     = 16 << 20 // added to twice the computed tar length
)

// streamBounds returns, per chunk, a bound on the tar stream an unframed
// zstd chunk can decode to (0 for other chunks), or nil when there are no
// such chunks. A chunk's members are the file entries of the chain that
// name it (a chunk is written by one upload, which lists every member);
// each needs at most its data rounded up to 512 bytes plus its headers. The
// bound is twice that sum plus 16 MiB, so that a manifest that leaves out
// a few members is still read, while a zstd bomb stops after a bounded
// decode instead of expanding to whatever it claims.
func (r *resolver) streamBounds() []int64 {
	any := false
	for _, c := range r.chunks {
		any = any || c.Kind == chunkio.StreamZstd
	}
	if !any {
		return nil
	}
	sums := make([]int64, len(r.chunks))
	add := func(ci int32, v int64) {
		if v < 0 || sums[ci] < 0 || sums[ci] > math.MaxInt64/4-v {
			sums[ci] = -1 // overflow: unbounded
			return
		}
		sums[ci] += v
	}
	for li := range r.chain {
		for ei := range r.chain[li].m.Files {
			fe := &r.chain[li].m.Files[ei]
			if fe.S3Key == "" || fe.IsDuplicate {
				continue
			}
			ci, ok := r.chunkIdx[r.resolveKey(int32(li), fe.S3Key)]
			if !ok || r.chunks[ci].Kind != chunkio.StreamZstd {
				continue
			}
			n := fe.Size
			if fe.TotalParts > 1 {
				n = fe.Length
			}
			if n < 0 || n > math.MaxInt64/4 {
				add(ci, -1)
				continue
			}
			add(ci, (n+511)/512*512+tarMemberOverhead+2*int64(len(fe.Path)))
		}
	}
	for i := range sums {
		switch {
		case r.chunks[i].Kind != chunkio.StreamZstd || sums[i] < 0:
			sums[i] = 0
		default:
			sums[i] = 2*(sums[i]+1024) + tarBoundSlack
		}
	}
	return sums
}

// collectChunks records every chunks[] entry of the chain by resolved key.
func (r *resolver) collectChunks() error {
	r.cands = map[string]chunkCand{}
	for li := range r.chain {
		m := r.chain[li].m
		for ci := range m.Chunks {
			ce := &m.Chunks[ci]
			if ce.S3Key == "" {
				return treeErr("manifest %s: chunk %d (shard %d) has no s3_key", r.chain[li].key, ce.ID, ce.ShardID)
			}
			key := r.resolveKey(int32(li), ce.S3Key)
			if err := manifest.CheckObjectKey(key); err != nil {
				return fmt.Errorf("%w: manifest %s: chunk %d (s3_key %q): %w", ErrInvalidTree, r.chain[li].key, ce.ID, ce.S3Key, err)
			}
			if err := r.confine(key); err != nil {
				return fmt.Errorf("manifest %s: chunk %d: %w", r.chain[li].key, ce.ID, err)
			}
			prev, ok := r.cands[key]
			if !ok {
				r.cands[key] = chunkCand{int32(li), int32(ci)}
				continue
			}
			pe := &r.chain[prev.link].m.Chunks[prev.entry]
			if pe.CompressedSize == ce.CompressedSize && len(pe.Frames) == len(ce.Frames) {
				continue // the same chunk listed again (chain union)
			}
			r.shapes["staging-snapshots"] = true
			r.warnf("chunk %s is listed more than once with different sizes (%d and %d bytes): keeping the largest (staging snapshot)",
				key, pe.CompressedSize, ce.CompressedSize)
			if ce.CompressedSize > pe.CompressedSize {
				r.cands[key] = chunkCand{int32(li), int32(ci)}
			}
		}
	}
	return nil
}

// mention is one file entry or tombstone of the chain, under its virtual key.
type mention struct {
	key   string
	link  int32
	entry int32 // index into Files; tombstones: -1
}

// decide resolves the chain newest first and returns the surviving files in
// key order. Instead of a map it sorts every mention by (key, link, file
// before tombstone, entry): the first mention of each key then decides it.
// Sorting is cheap for the (usually already sorted) manifest order and
// keeps the peak small: 24 bytes per mention plus the key.
func (r *resolver) decide() ([]survivor, error) {
	ms, err := r.mentions()
	if err != nil {
		return nil, err
	}
	var survivors []survivor
	var tb strings.Builder
	for i := 0; i < len(ms); {
		j := mentionGroupEnd(ms, i)
		s, ok, err := r.decideMention(ms[i:j])
		if err != nil {
			return nil, err
		}
		if !ok {
			r.tombstones++ // decided by a tombstone
			if len(r.chain) > 1 {
				if ms[i].link > math.MaxUint16 || tb.Len()+len(ms[i].key) > math.MaxUint32 {
					return nil, treeErr("too many tombstones or chain links")
				}
				tb.WriteString(ms[i].key)
				r.tombs.ends = append(r.tombs.ends, uint32(tb.Len()))
				r.tombs.link = append(r.tombs.link, uint16(ms[i].link))
			}
		} else {
			survivors = append(survivors, s)
		}
		i = j
	}
	r.tombs.names = tb.String()
	return survivors, nil
}

// mentions returns every file entry and tombstone of the chain under its
// virtual key, sorted by (key, link, file before tombstone, entry).
func (r *resolver) mentions() ([]mention, error) {
	n := 0
	for li := range r.chain {
		n += len(r.chain[li].m.Files) + len(r.chain[li].m.DeletedPaths)
	}
	ms := make([]mention, 0, n)
	for li := range r.chain {
		l := &r.chain[li]
		for ei := range l.m.Files {
			fe := &l.m.Files[ei]
			key, err := manifest.RelativeKey(l.m.SourcePath, fe.Path)
			if err != nil {
				return nil, fmt.Errorf("%w: manifest %s: file %q: %w", ErrInvalidTree, l.key, fe.Path, err)
			}
			ms = append(ms, mention{key, int32(li), int32(ei)})
		}
		for _, p := range l.m.DeletedPaths {
			key, err := manifest.RelativeKey(l.m.SourcePath, p)
			if err != nil {
				return nil, fmt.Errorf("%w: manifest %s: deleted path %q: %w", ErrInvalidTree, l.key, p, err)
			}
			ms = append(ms, mention{key, int32(li), -1})
		}
	}
	slices.SortFunc(ms, func(a, b mention) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		if a.link != b.link {
			return int(a.link - b.link)
		}
		// files (entry >= 0) before tombstones, then manifest order
		ae, be := a.entry, b.entry
		if (ae < 0) != (be < 0) {
			return int(be>>31) - int(ae>>31)
		}
		return int(ae - be)
	})
	return ms, nil
}

// mentionGroupEnd returns the end of the run of mentions of ms[i].key.
func mentionGroupEnd(ms []mention, i int) int {
	j := i + 1
	for j < len(ms) && ms[j].key == ms[i].key {
		j++
	}
	return j
}

// decideMention decides one key from its sorted mentions, of which the
// first (ms[0]) is the deciding one: a tombstone gives ok == false; a file
// gives its survivor (with the parts of a split file from the same
// manifest). Mentions from other manifests, or this manifest's tombstone,
// are shadowed.
func (r *resolver) decideMention(ms []mention) (survivor, bool, error) {
	first := ms[0]
	if first.entry < 0 {
		return survivor{}, false, nil
	}
	l := &r.chain[first.link]
	fe := &l.m.Files[first.entry]
	s := survivor{key: first.key, first: fileRef{first.link, first.entry}, split: fe.TotalParts > 1}
	if s.split {
		s.parts = []int32{first.entry}
	}
	for _, o := range ms[1:] {
		if o.link != first.link || o.entry < 0 {
			break // older manifests, or this manifest's tombstone: shadowed
		}
		other := &l.m.Files[o.entry]
		switch {
		case other.Path != fe.Path:
			return survivor{}, false, treeErr("manifest %s: files %q and %q both map to key %q", l.key, fe.Path, other.Path, first.key)
		case !s.split || other.TotalParts <= 1:
			return survivor{}, false, treeErr("manifest %s: file %q is listed more than once (not as parts of a split file)", l.key, fe.Path)
		}
		s.parts = append(s.parts, o.entry)
	}
	return s, true, nil
}

// findOriginals maps every surviving duplicate to its original entry.
func (r *resolver) findOriginals(survivors []survivor) (map[fileRef]fileRef, error) {
	wanted := map[[32]byte]bool{}
	type dup struct {
		ref  fileRef
		hash [32]byte
	}
	var dups []dup
	for i := range survivors {
		s := &survivors[i]
		fe := r.entry(s.first)
		if !fe.IsDuplicate {
			continue
		}
		if s.split {
			return nil, treeErr("file %s is both a duplicate and a split file", r.where(s.first))
		}
		r.duplicates++
		if fe.S3Key == "" || fe.ChunkID < 0 {
			return nil, treeErr("duplicate file %s was never patched with its original's location (s3_key %q, chunk_id %d): unreadable",
				r.where(s.first), fe.S3Key, fe.ChunkID)
		}
		h := fe.DuplicateOfHash
		if h == "" {
			h = fe.Checksum
		}
		sum, ok, err := manifest.ParseChecksum(h)
		if err != nil || !ok {
			return nil, treeErr("duplicate file %s has no usable duplicate_of_hash (%q)", r.where(s.first), h)
		}
		// The duplicate's own checksum, when it has one, is a claim about
		// its bytes: it must name the same content as duplicate_of_hash,
		// or the original's bytes would be served under another checksum.
		if own, ok, err := manifest.ParseChecksum(fe.Checksum); err == nil && ok && own != sum {
			return nil, treeErr("duplicate file %s: its checksum %x differs from its duplicate_of_hash %x", r.where(s.first), own, sum)
		}
		wanted[sum] = true
		dups = append(dups, dup{s.first, sum})
	}
	if len(dups) == 0 {
		return nil, nil
	}
	// Candidates: every non-duplicate, non-split entry of the chain whose
	// checksum is wanted, newest first.
	cands := map[[32]byte][]fileRef{}
	for li := range r.chain {
		for ei := range r.chain[li].m.Files {
			fe := &r.chain[li].m.Files[ei]
			if fe.IsDuplicate || fe.TotalParts > 1 || fe.S3Key == "" || fe.Checksum == "" {
				continue
			}
			sum, ok, err := manifest.ParseChecksum(fe.Checksum)
			if err != nil || !ok || !wanted[sum] {
				continue
			}
			cands[sum] = append(cands[sum], fileRef{int32(li), int32(ei)})
		}
	}
	out := make(map[fileRef]fileRef, len(dups))
	for _, d := range dups {
		fe := r.entry(d.ref)
		want := r.resolveKey(d.ref.link, fe.S3Key)
		var found, fallback fileRef
		ok, okFallback := false, false
		for _, c := range cands[d.hash] {
			ce := r.entry(c)
			if ce.Size != fe.Size {
				continue
			}
			if r.resolveKey(c.link, ce.S3Key) == want {
				found, ok = c, true
				break
			}
			if !okFallback {
				fallback, okFallback = c, true
			}
		}
		if !ok && okFallback {
			found, ok = fallback, true
			r.warnf("duplicate %s: no original in %s, using %s with the same checksum", r.where(d.ref), want, r.where(found))
		}
		if !ok {
			return nil, treeErr("duplicate file %s: original (checksum %x, %d bytes) not found in the manifest chain", r.where(d.ref), d.hash, fe.Size)
		}
		out[d.ref] = found
	}
	return out, nil
}

// addFile resolves one surviving key and appends it to the index builder.
func (r *resolver) addFile(b *indexBuilder, s *survivor, origins map[fileRef]fileRef) error {
	fe := r.entry(s.first)
	l := &r.chain[s.first.link]
	rec := fileRec{key: s.key, size: fe.Size, mtime: fe.ModTime, link: s.first.link}
	if fe.Size < 0 {
		return treeErr("file %s has negative size %d", r.where(s.first), fe.Size)
	}
	if mime := fe.Metadata["magika_mime"]; mime != "" {
		rec.ctype = mime
	}
	if s.split {
		return r.addSplit(b, s, rec)
	}
	if fe.Length != 0 && fe.Length != fe.Size {
		return treeErr("file %s: length %d differs from size %d on a file that is not split", r.where(s.first), fe.Length, fe.Size)
	}
	if fe.Offset != 0 {
		return treeErr("file %s: offset %d on a file that is not split", r.where(s.first), fe.Offset)
	}
	if l.verify {
		rec.sum, rec.hasSum = r.sum(fe.Checksum, func() string { return "file " + r.where(s.first) })
	}
	ch := fe.ContentHash
	if ch == "" {
		ch = fe.Metadata["content_hash"]
	}
	if ch != "" {
		md5, ok, err := manifest.ParseMD5(ch)
		if err != nil {
			r.warnf("file %s: ignoring malformed content_hash %q", r.where(s.first), ch)
		} else {
			rec.md5, rec.hasMD5 = md5, ok
		}
	}

	src := s.first
	if fe.IsDuplicate {
		src = origins[s.first]
	}
	se := r.entry(src)
	if fe.IsDuplicate && !rec.hasSum && r.chain[src.link].verify {
		// The original was chosen for its checksum (== duplicate_of_hash):
		// whole reads of the duplicate are checked against it.
		rec.sum, rec.hasSum = r.sum(se.Checksum, nil)
	}
	ext, err := r.place(src, se, se.Size, se.Path)
	if err != nil {
		return err
	}
	if src == s.first && strings.HasSuffix(se.Path, s.key) {
		rec.root = se.Path[:len(se.Path)-len(s.key)]
		rec.single = ext
		rec.isSingle = true
	} else {
		rec.exts = []extent{ext}
	}
	if !rec.hasSum && !rec.hasMD5 {
		rec.identity = r.identity(rec, []extent{ext})
	}
	return b.add(rec)
}

// addSplit validates and appends a split file.
func (r *resolver) addSplit(b *indexBuilder, s *survivor, rec fileRec) error {
	l := &r.chain[s.first.link]
	parts := s.parts
	files := l.m.Files
	slices.SortFunc(parts, func(a, b int32) int { return files[a].PartIndex - files[b].PartIndex })
	first := &files[parts[0]]
	if len(parts) != first.TotalParts {
		return treeErr("split file %s: %d part(s) listed, total_parts says %d", r.where(s.first), len(parts), first.TotalParts)
	}
	r.splitFiles++
	var at int64
	exts := make([]extent, 0, len(parts))
	for i, pi := range parts {
		ref := fileRef{s.first.link, pi}
		p := &files[pi]
		switch {
		case p.PartIndex != i:
			return treeErr("split file %s: part_index %d where %d was expected (missing or repeated part)", r.where(ref), p.PartIndex, i)
		case p.TotalParts != first.TotalParts:
			return treeErr("split file %s: part %d says total_parts %d, part 0 says %d", r.where(ref), i, p.TotalParts, first.TotalParts)
		case p.Size != first.Size:
			return treeErr("split file %s: part %d says size %d, part 0 says %d (size is the whole-file size on every part)", r.where(ref), i, p.Size, first.Size)
		case p.IsDuplicate:
			return treeErr("split file %s: part %d is marked as a duplicate", r.where(ref), i)
		case p.Length <= 0:
			return treeErr("split file %s: part %d has length %d", r.where(ref), i, p.Length)
		case p.Offset != at:
			return treeErr("split file %s: part %d starts at %d, expected %d (parts must tile the file)", r.where(ref), i, p.Offset, at)
		}
		at += p.Length
		if at > first.Size || at < 0 {
			return treeErr("split file %s: parts run past the file size %d", r.where(ref), first.Size)
		}
		ext, err := r.place(ref, p, p.Length, p.Path+".part"+strconv.Itoa(i))
		if err != nil {
			return err
		}
		ext.fileOff = p.Offset
		if l.verify {
			ext.sum, ext.hasSum = r.sum(p.Checksum, func() string { return fmt.Sprintf("split file %s part %d", r.where(ref), i) })
		}
		exts = append(exts, ext)
		if p.ModTime.After(rec.mtime) {
			rec.mtime = p.ModTime
		}
	}
	if at != first.Size {
		return treeErr("split file %s: parts cover %d of %d bytes", r.where(s.first), at, first.Size)
	}
	rec.exts = exts
	rec.split = true
	rec.identity = r.identity(rec, exts)
	return b.add(rec)
}

// place locates one stored piece (a whole file or one split part) of
// length bytes, whose tar entry is named tarName.
func (r *resolver) place(ref fileRef, fe *manifest.FileEntry, length int64, tarName string) (extent, error) {
	if fe.S3Key == "" {
		return extent{}, treeErr("file %s has no s3_key", r.where(ref))
	}
	key := r.resolveKey(ref.link, fe.S3Key)
	if err := manifest.CheckObjectKey(key); err != nil {
		return extent{}, fmt.Errorf("%w: file %s (s3_key %q): %w", ErrInvalidTree, r.where(ref), fe.S3Key, err)
	}
	if _, ok := r.cands[key]; !ok {
		if err := r.confine(key); err != nil {
			return extent{}, fmt.Errorf("direct-upload file %s: %w", r.where(ref), err)
		}
		ci, err := r.directChunk(ref, key, length, fe)
		if err != nil {
			return extent{}, err
		}
		return extent{chunk: ci, off: 0, length: length}, nil
	}
	ci, err := r.chunkFor(key)
	if err != nil {
		return extent{}, fmt.Errorf("file %s: %w", r.where(ref), err)
	}
	off := int64(-1)
	if fe.ArchiveOffset != nil && *fe.ArchiveOffset != 0 {
		off = *fe.ArchiveOffset
		if off < 0 {
			return extent{}, treeErr("file %s: negative archive_offset %d", r.where(ref), off)
		}
	}
	if off < 0 {
		r.legacyOffsets++
	}
	c := &r.chunks[ci]
	if off >= 0 && c.Kind == chunkio.FramedZstd {
		total := r.uncomp[ci]
		if off > total || length > total-off {
			return extent{}, treeErr("file %s: bytes [%d,%d) lie outside chunk %s, whose frames cover %d bytes",
				r.where(ref), off, off+length, key, total)
		}
		fi, _ := slices.BinarySearchFunc(c.Frames, off, func(f chunkio.Frame, o int64) int {
			switch {
			case f.UOff+f.USize <= o:
				return -1
			case f.UOff > o:
				return 1
			}
			return 0
		})
		if fi < len(c.Frames) && off+length > c.Frames[fi].UOff+c.Frames[fi].USize {
			r.subFrames++
		}
	}
	return extent{chunk: ci, off: off, length: length, tarName: tarName}, nil
}

// directChunk returns the chunk for a direct-upload object.
func (r *resolver) directChunk(ref fileRef, key string, length int64, fe *manifest.FileEntry) (int32, error) {
	var sum [32]byte
	hasSum := false
	if r.chain[ref.link].verify && fe.TotalParts <= 1 {
		sum, hasSum = r.sum(fe.Checksum, nil)
	}
	if ci, ok := r.chunkIdx[key]; ok {
		c := &r.chunks[ci]
		if c.Kind != chunkio.Direct {
			return 0, treeErr("file %s: object %s is used both as a chunk and as a direct object", r.where(ref), key)
		}
		if c.Size != length || (hasSum && c.HasSum && sum != c.Sum) {
			return 0, treeErr("file %s: direct object %s is claimed by files of different size or checksum", r.where(ref), key)
		}
		return ci, nil
	}
	ci := int32(len(r.chunks))
	r.chunks = append(r.chunks, chunkio.Chunk{Key: key, Kind: chunkio.Direct, Size: length, Sum: sum, HasSum: hasSum})
	r.uncomp = append(r.uncomp, length)
	r.chunkIdx[key] = ci
	return ci, nil
}

// chunkFor materializes the chunk with resolved key (which has a candidate).
func (r *resolver) chunkFor(key string) (int32, error) {
	if ci, ok := r.chunkIdx[key]; ok {
		if r.chunks[ci].Kind == chunkio.Direct {
			return 0, treeErr("object %s is used both as a chunk and as a direct object", key)
		}
		return ci, nil
	}
	cand := r.cands[key]
	l := &r.chain[cand.link]
	ce := &l.m.Chunks[cand.entry]
	where := fmt.Sprintf("chunk %s (manifest %s)", key, l.key)

	c := chunkio.Chunk{Key: key, Size: ce.CompressedSize}
	if c.Size < 0 || ce.UncompressedSize < 0 {
		return 0, treeErr("%s: negative size", where)
	}
	kind, err := chunkKindOf(key, l.m.CompressionType, len(ce.Frames) > 0)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrInvalidTree, where, err)
	}
	c.Kind = kind
	uncomp := ce.UncompressedSize
	if kind == chunkio.FramedZstd {
		frames, t, err := r.frames(ce, l.verify, where)
		if err != nil {
			return 0, err
		}
		c.Frames = frames
		uncomp = t.Total
		if c.Size == 0 {
			c.Size = t.End
		}
	} else if l.verify {
		c.Sum, c.HasSum = r.sum(ce.Checksum, func() string { return where })
	}
	ci := int32(len(r.chunks))
	r.chunks = append(r.chunks, c)
	r.uncomp = append(r.uncomp, uncomp)
	r.chunkIdx[key] = ci
	return ci, nil
}

// sum parses a sha256 checksum. A malformed value (fixtures and old tools
// wrote placeholders) counts as absent, never as verified; what, when not
// nil, names the owner in the warning (called only then).
func (r *resolver) sum(s string, what func() string) ([32]byte, bool) {
	sum, ok, err := manifest.ParseChecksum(s)
	if err != nil {
		if what != nil {
			r.warnf("%s: unusable checksum ignored: %v", what(), err)
		}
		return [32]byte{}, false
	}
	return sum, ok
}

// chunkKindOf decides a chunk's decoding from its key, as CargoShip does:
// the extension is the only per-chunk signal; any other ending falls back
// to the manifest-wide compression_type ("" = zstd).
func chunkKindOf(key, compressionType string, hasFrames bool) (chunkio.Kind, error) {
	k := strings.ToLower(key)
	comp := ""
	switch {
	case strings.HasSuffix(k, ".tar.zst"), strings.HasSuffix(k, ".zst"):
		comp = "zstd"
	case strings.HasSuffix(k, ".tar.gz"), strings.HasSuffix(k, ".gz"):
		comp = "gzip"
	case strings.HasSuffix(k, ".tar"):
		comp = "none"
	default:
		comp = strings.ToLower(compressionType)
		if comp == "" {
			comp = "zstd"
		}
	}
	switch comp {
	case "zstd":
		if hasFrames {
			return chunkio.FramedZstd, nil
		}
		return chunkio.StreamZstd, nil
	case "none":
		if hasFrames {
			return 0, errors.New("a plain tar chunk cannot have zstd frames")
		}
		return chunkio.PlainTar, nil
	}
	return 0, fmt.Errorf("unsupported chunk compression %q", comp)
}

// frames checks a framed chunk's frame table with manifest.CheckFrames
// (the one frame-table rule) and returns it with the table's tar length
// and compressed end. A compressed_size of 0 (unknown) is allowed.
func (r *resolver) frames(ce *manifest.ChunkEntry, verify bool, where string) ([]chunkio.Frame, manifest.FrameTable, error) {
	fs := make([]chunkio.Frame, len(ce.Frames))
	for i, fe := range ce.Frames {
		f := chunkio.Frame{COff: fe.CompressedOffset, CSize: fe.CompressedSize, UOff: fe.UncompressedOffset, USize: fe.UncompressedSize}
		if verify {
			sum, ok, err := manifest.ParseChecksum(fe.Checksum)
			if err != nil {
				return nil, manifest.FrameTable{}, fmt.Errorf("%w: %s: frame %d checksum: %w", ErrInvalidTree, where, i, err)
			}
			f.Sum, f.HasSum = sum, ok
		}
		fs[i] = f
	}
	t, err := manifest.CheckFrames(len(fs), func(i int) manifest.FrameSpan { return fs[i].Span() }, ce.CompressedSize)
	if err != nil {
		return nil, t, fmt.Errorf("%w: %s: %w", ErrInvalidTree, where, err)
	}
	o := r.opts.chunkOptions()
	giant := 0
	for _, f := range fs {
		if o.Giant(f) {
			giant++
		}
	}
	if giant > 0 {
		r.shapes["giant-frame"] = true
		r.warnf("%s: %d frame(s) decode to, or are stored in, more than %d bytes; reads stream them instead of caching", where, giant, o.MaxFrame())
	}
	return fs, t, nil
}

// identity is a stable digest of where a file's bytes are, for files that
// have no whole-file checksum (split files, legacy manifests): the resolved
// chunk keys, offsets, lengths and part checksums, plus size and mtime.
func (r *resolver) identity(rec fileRec, exts []extent) [16]byte {
	h := sha256.New()
	var buf [8]byte
	put := func(v int64) {
		binary.BigEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	put(rec.size)
	put(rec.mtime.Unix())
	put(int64(rec.mtime.Nanosecond()))
	for _, e := range exts {
		h.Write([]byte(r.chunks[e.chunk].Key))
		h.Write([]byte{0})
		put(e.fileOff)
		put(e.off)
		put(e.length)
		if e.hasSum {
			h.Write(e.sum[:])
		}
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}
