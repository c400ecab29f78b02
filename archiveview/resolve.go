package archiveview

// Resolution: from a chain of streamed manifests (newest first, their
// entries in a fileStore, build.go) to the effective virtual tree, the
// chunks it needs and the compact index.
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
//
// Errors come in this order: chunks (collectChunks), paths that are no
// keys (files before deleted paths, link by link), then the decisions in
// key order, the duplicates, and each surviving file in key order.
//
// The chunks are resolvechunks.go, the duplicates resolvedups.go.

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// ErrInvalidTree is wrapped by every error about a manifest (chain) whose
// content cannot be served as a consistent tree: key collisions, broken
// split files, unresolvable duplicates, inconsistent frames or offsets.
// (Chain problems wrap ErrBrokenChain.)
var ErrInvalidTree = errors.New("invalid archive tree")

// chainLink is one streamed manifest of an archive's chain.
type chainLink struct {
	key      string
	uploadID string
	m        *manifest.Manifest // Files is nil: the entries are in the chain's fileStore
	verify   bool               // checksum_algorithm is sha256 (or absent): checksums are usable

	mStart, fStart int // first mention, first file of this manifest in the store
	nFiles, nTombs int
	s3keys         []string // raw s3_keys; the store's s3 column holds index+1
	s3res          []int32  // per raw s3_key: its resolved key (resolver.rkeys)
	keyErr         error    // first file path that is no key
	tombErr        error    // first deleted path that is no key
}

// chunkCand is a chunks[] entry seen somewhere in the chain.
type chunkCand struct {
	link  int32 // -1: none
	entry int32
}

type resolver struct {
	bucket string
	chain  []chainLink
	fs     *fileStore
	opts   Options
	root   string // keys must lie under root+"/" ("" = the whole bucket)

	rkeys    []string // resolved object keys
	rkeyIdx  map[string]int32
	cands    []chunkCand // per resolved key: the chosen chunk entry
	chunkIdx []int32     // per resolved key: index in chunks, -1 = not materialized
	chunks   []chunkio.Chunk
	uncomp   []int64 // per chunk: uncompressed tar bytes (frames or manifest)
	bounds   map[int32]int64

	shapes   map[string]bool
	warnings []string

	tombs index.TombTable // keys a tombstone decided (decide; chains only)

	legacyOffsets int
	subFrames     int
	tombstones    int
	duplicates    int
	splitFiles    int
}

// newResolver returns a resolver of chain (newest first, streamed into
// fs), whose newest manifest is manifestKey in bucket.
func newResolver(bucket, manifestKey string, chain []chainLink, fs *fileStore, opts Options) *resolver {
	return &resolver{bucket: bucket, chain: chain, fs: fs, opts: opts, root: manifest.KeyRoot(manifestKey)}
}

// confine refuses an object key outside the archive's prefix and the
// allowed ones (manifest.Confined, the one rule).
func (r *resolver) confine(key string) error {
	if manifest.Confined(r.root, r.opts.AllowKeyPrefixes, key) {
		return nil
	}
	return confinedErr(key, r.root)
}

// confinedErr is the error of a key outside the archive's prefix.
func confinedErr(key, root string) error {
	return fmt.Errorf("%w: key %q lies outside the archive's prefix %q/ (a manifest may only name objects of its own upload tree; allow other prefixes explicitly if the layout needs them)",
		ErrInvalidTree, key, root)
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

// linkHolding returns the chain link whose range of the store's files
// (mentions: of its mentions, files then tombstones) holds entry i; the
// links' ranges are in chain order.
func (r *resolver) linkHolding(i int, mentions bool) int32 {
	li, _ := slices.BinarySearchFunc(r.chain, i, func(l chainLink, i int) int {
		start, n := l.fStart, l.nFiles
		if mentions {
			start, n = l.mStart, l.nFiles+l.nTombs
		}
		switch {
		case i < start:
			return 1
		case i >= start+n:
			return -1
		}
		return 0
	})
	return int32(li)
}

// linkOfFile returns the chain link that file f belongs to.
func (r *resolver) linkOfFile(f int) int32 {
	return r.linkHolding(f, false)
}

// mention returns mention m's link and, for a file entry, its file (-1
// for a tombstone).
func (r *resolver) mention(m int) (int32, int) {
	i := r.linkHolding(m, true)
	l := &r.chain[i]
	if m-l.mStart < l.nFiles {
		return int32(i), l.fStart + (m - l.mStart)
	}
	return int32(i), -1
}

// fileMention is file f's mention (whose key is f's key).
func (r *resolver) fileMention(f int) int {
	l := &r.chain[r.linkOfFile(f)]
	return l.mStart + (f - l.fStart)
}

// where names file f for errors: "path (manifest KEY)", with the path as
// the store still has it (while the key arena lives).
func (r *resolver) where(f int) string {
	l := &r.chain[r.linkOfFile(f)]
	return whereIn(r.fs.pathOf(l, f), l)
}

// whereIn names a file of link l by its path for errors: "path (manifest
// KEY)".
func whereIn(path string, l *chainLink) string {
	return fmt.Sprintf("%q (manifest %s)", path, l.key)
}

// rkey returns file f's resolved s3_key id, or -1 when it has none.
func (r *resolver) rkey(f int) int32 {
	s3 := r.fs.s3.at(f)
	if s3 == 0 {
		return -1
	}
	return r.chain[r.linkOfFile(f)].s3res[s3-1]
}

// rawS3Key returns file f's s3_key as the manifest wrote it.
func (r *resolver) rawS3Key(f int) string {
	s3 := r.fs.s3.at(f)
	if s3 == 0 {
		return ""
	}
	return r.chain[r.linkOfFile(f)].s3keys[s3-1]
}

// internKey returns the id of resolved object key k.
func (r *resolver) internKey(k string) int32 {
	if id, ok := r.rkeyIdx[k]; ok {
		return id
	}
	id := int32(len(r.rkeys))
	r.rkeys = append(r.rkeys, k)
	r.rkeyIdx[k] = id
	r.cands = append(r.cands, chunkCand{link: -1})
	r.chunkIdx = append(r.chunkIdx, -1)
	return id
}

// init prepares the resolver's tables and resolves every link's s3_keys
// (before collectChunks).
func (r *resolver) init() {
	r.shapes = map[string]bool{}
	r.rkeyIdx = map[string]int32{}
	r.bounds = map[int32]int64{}
	if len(r.chain) > 1 {
		r.shapes["chain"] = true
	}
	for li := range r.chain {
		l := &r.chain[li]
		l.s3res = make([]int32, len(l.s3keys))
		for i, k := range l.s3keys {
			l.s3res[i] = r.internKey(manifest.ResolveObjectKey(r.bucket, l.m.Prefix, k))
		}
	}
}

// keyErrors returns the first path of the chain that is no key: files
// before deleted paths, link by link.
func (r *resolver) keyErrors() error {
	for _, l := range r.chain {
		if l.keyErr != nil {
			return l.keyErr
		}
		if l.tombErr != nil {
			return l.tombErr
		}
	}
	return nil
}

// build resolves the chain into the index and the chunk table. It
// consumes the store: its columns are released as the index is gathered.
func (r *resolver) build() (index.Index, []chunkio.Chunk, error) {
	r.init()
	if err := r.collectChunks(); err != nil {
		return index.Index{}, nil, err
	}
	if err := r.keyErrors(); err != nil {
		return index.Index{}, nil, err
	}
	order, starts := r.fs.sortMentions()
	surv, err := r.decide(order, starts)
	order, starts = nil, nil
	if err != nil {
		return index.Index{}, nil, err
	}
	releaseBuildMemory(r.fs.files())
	origins, err := r.findOriginals(surv.files)
	if err != nil {
		return index.Index{}, nil, err
	}
	r.streamBounds()
	idx, err := r.buildIndex(surv, origins, len(r.chain) > 1, true)
	if err != nil {
		return index.Index{}, nil, err
	}
	idx.Tombs = r.tombs
	for i := range r.chunks {
		c := &r.chunks[i]
		idx.Frames += len(c.Frames)
		idx.Compressed += c.Size
		idx.Uncompressed += r.uncomp[i]
		r.shapes[c.Kind.String()] = true
	}
	if r.legacyOffsets > 0 {
		r.warnf("%d file(s) or parts have no archive_offset: reads walk the tar to find them", r.legacyOffsets)
	}
	for _, c := range []struct {
		n     int
		shape string
	}{{r.legacyOffsets, "legacy-offsets"}, {r.subFrames, "sub-frames"}, {r.duplicates, "dedup"}, {r.splitFiles, "split"}, {r.tombstones, "tombstones"}} {
		if c.n > 0 {
			r.shapes[c.shape] = true
		}
	}
	return idx, r.chunkTable(), nil
}

// buildIndex resolves survivors (in key order) into an index. With links
// the index records, per file, the chain link that decided it (its S3
// version id); the tree of a chain has them, the per-upload history
// indexes of versions.go do not (all their files are of one upload). With
// consume, the store's columns are released as they are gathered (Open's
// build); without, the store stays whole for further indexes (the
// version history builds one per upload).
func (r *resolver) buildIndex(surv survivors, origins map[uint32]origin, links, consume bool) (index.Index, error) {
	b := &treeBuilder{fs: r.fs}
	if err := b.gatherNames(surv.files, r.fileMention); err != nil {
		return index.Index{}, err
	}
	n := r.fs.files()
	if consume {
		// Every key is in the index now; paths are built from it.
		r.fs.keys, r.fs.kpos = byteArena{}, pages[uint64]{}
		releaseBuildMemory(n)
	}
	b.startPlacing(len(surv.files))
	p := placer{r: r, b: b, origins: origins}
	for s, f := range surv.files {
		if err := p.addFile(s, int(f), surv.parts[int32(s)]); err != nil {
			return index.Index{}, err
		}
	}
	var linkOf func(int) int32
	if links {
		linkOf = r.linkOfFile
	}
	var release func()
	if consume {
		release = func() { releaseBuildMemory(n) }
	}
	if err := b.gatherColumns(surv.files, release, linkOf); err != nil {
		return index.Index{}, err
	}
	return b.x, nil
}

// survivors are the decided files in key order: files[i] is the (first)
// entry of key i; parts[i] lists a split file's parts (its entries in
// its manifest, in mention order).
type survivors struct {
	files []uint32
	parts map[int32][]uint32
}

// decide walks the mentions in (key, link, file before tombstone, entry)
// order (fileStore.sortMentions): the first mention of each key decides it.
// A tombstone hides the key (and, in a chain, is recorded); a file
// survives, with the parts of a split file from the same manifest.
func (r *resolver) decide(order, starts []uint64) (survivors, error) {
	groups := 0
	for _, w := range starts {
		groups += bits.OnesCount64(w)
	}
	out := survivors{files: make([]uint32, 0, groups), parts: map[int32][]uint32{}}
	var tb strings.Builder
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && !isStart(starts, j) {
			j++
		}
		f, parts, ok, err := r.decideGroup(order[i:j])
		if err != nil {
			return survivors{}, err
		}
		if !ok {
			r.tombstones++ // decided by a tombstone
			if len(r.chain) > 1 {
				link, _ := r.mention(int(uint32(order[i])))
				key := r.fs.key(int(uint32(order[i])))
				if link > math.MaxUint16 || tb.Len()+len(key) > math.MaxUint32 {
					return survivors{}, treeErr("too many tombstones or chain links")
				}
				tb.Write(key)
				r.tombs.Ends = append(r.tombs.Ends, uint32(tb.Len()))
				r.tombs.Link = append(r.tombs.Link, uint16(link))
			}
		} else {
			if parts != nil {
				out.parts[int32(len(out.files))] = parts
			}
			out.files = append(out.files, uint32(f))
		}
		i = j
	}
	r.tombs.Names = tb.String()
	return out, nil
}

// decideGroup decides one key from its sorted mentions ms, of which the
// first is the deciding one: a tombstone gives ok == false; a file gives
// its file (and the parts of a split file, from the same manifest).
// Mentions from other manifests, or this manifest's tombstone, are
// shadowed.
func (r *resolver) decideGroup(ms []uint64) (file int, parts []uint32, ok bool, err error) {
	link, f := r.mention(int(uint32(ms[0])))
	if f < 0 {
		return 0, nil, false, nil
	}
	fs := r.fs
	l := &r.chain[link]
	split := fs.bits.at(f)&bSplit != 0
	if split {
		parts = []uint32{uint32(f)}
	}
	for _, o := range ms[1:] {
		ol, of := r.mention(int(uint32(o)))
		if ol != link || of < 0 {
			break // older manifests, or this manifest's tombstone: shadowed
		}
		if !r.samePath(l, f, of) {
			return 0, nil, false, treeErr("manifest %s: files %q and %q both map to key %q", l.key, fs.pathOf(l, f), fs.pathOf(l, of), fs.key(int(uint32(ms[0]))))
		}
		if !split || fs.bits.at(of)&bSplit == 0 {
			return 0, nil, false, treeErr("manifest %s: file %q is listed more than once (not as parts of a split file)", l.key, fs.pathOf(l, f))
		}
		parts = append(parts, uint32(of))
	}
	return f, parts, true, nil
}

// samePath reports whether files a and b (of link l, same key) have the
// same path.
func (r *resolver) samePath(l *chainLink, a, b int) bool {
	fs := r.fs
	if fs.bits.at(a)&bOdd == 0 && fs.bits.at(b)&bOdd == 0 {
		return fs.root.at(a) == fs.root.at(b)
	}
	return fs.pathOf(l, a) == fs.pathOf(l, b)
}

// sum parses a sha256 checksum stored for file f. A malformed value
// (fixtures and old tools wrote placeholders) counts as absent, never as
// verified; what, when not nil, names the owner in the warning (called
// only then).
func (r *resolver) sum(f int, what func() string) ([32]byte, bool) {
	bits := r.fs.bits.at(f)
	if bits&bSumBad != 0 {
		if what != nil {
			r.warnf("%s: unusable checksum ignored: %v", what(), r.fs.badSum[uint32(f)])
		}
		return [32]byte{}, false
	}
	if bits&bSum == 0 {
		return [32]byte{}, false
	}
	return r.fs.sum.at(f), true
}

// fileRec is one resolved file on its way into the index.
type fileRec struct {
	size     int64
	msec     int64
	mnsec    uint32
	sum      [32]byte
	hasSum   bool
	hasMD5   bool
	identity [16]byte // used when !hasSum
	split    bool

	// Either a single extent whose tar name is root+key, or exts.
	isSingle bool
	single   extent
	root     uint32 // the store's root id
	exts     []extent
}

// placer places the survivors, in key order, into the index being built
// (treeBuilder, gather.go).
type placer struct {
	r       *resolver
	b       *treeBuilder
	origins map[uint32]origin
}

// pathOf is survivor s's (file f's) path: its key is index key s.
func (p *placer) pathOf(s int, f int) string {
	fs := p.r.fs
	if fs.bits.at(f)&bOdd != 0 {
		return fs.odd[uint32(f)]
	}
	return fs.roots[fs.root.at(f)] + p.b.x.KeyAt(s)
}

// addFile resolves survivor s (file f) into the index builder.
func (p *placer) addFile(s int, f int, parts []uint32) error {
	r, fs := p.r, p.r.fs
	li := r.linkOfFile(f)
	l := &r.chain[li]
	where := func() string { return whereIn(p.pathOf(s, f), l) }
	bits := fs.bits.at(f)
	rec := fileRec{size: fs.size.at(f), msec: fs.msec.at(f), mnsec: fs.mnsec.at(f)}
	if rec.size < 0 {
		return treeErr("file %s has negative size %d", where(), rec.size)
	}
	if parts != nil {
		return p.addSplit(s, f, l, parts, rec, where)
	}
	side := fs.sideOf(f)
	if side.length != 0 && side.length != rec.size {
		return treeErr("file %s: length %d differs from size %d on a file that is not split", where(), side.length, rec.size)
	}
	if side.offset != 0 {
		return treeErr("file %s: offset %d on a file that is not split", where(), side.offset)
	}
	if l.verify {
		rec.sum, rec.hasSum = r.sum(f, func() string { return "file " + where() })
	}
	if bits&bMD5Bad != 0 {
		r.warnf("file %s: ignoring malformed content_hash %q", where(), fs.badMD5[uint32(f)])
	}
	rec.hasMD5 = bits&bMD5 != 0

	src, srcPath := f, ""
	srcWhere := where
	if bits&bDup != 0 {
		o := p.origins[uint32(f)]
		src, srcPath = int(o.file), o.path
		sl := &r.chain[r.linkOfFile(src)]
		srcWhere = func() string { return whereIn(o.path, sl) }
		if !rec.hasSum && sl.verify {
			// The original was chosen for its checksum (== duplicate_of_hash):
			// whole reads of the duplicate are checked against it.
			rec.sum, rec.hasSum = r.sum(src, nil)
		}
	} else if bits&bOdd != 0 {
		srcPath = p.pathOf(s, f)
	} // else: a single extent, whose tar name is root+key (not stored)
	ext, err := r.place(src, srcWhere, fs.size.at(src), srcPath)
	if err != nil {
		return err
	}
	if src == f && bits&bOdd == 0 {
		rec.root = fs.root.at(f)
		rec.single = ext
		rec.isSingle = true
	} else {
		rec.exts = []extent{ext}
	}
	if !rec.hasSum && !rec.hasMD5 {
		rec.identity = r.identity(rec, []extent{ext})
	}
	return p.b.add(s, f, rec)
}

// addSplit validates and appends a split file. where names it and every
// one of its parts: decideGroup let only parts of the same path through.
func (p *placer) addSplit(s int, f int, l *chainLink, parts []uint32, rec fileRec, where func() string) error {
	r, fs := p.r, p.r.fs
	sides := make([]sideInfo, len(parts))
	for i, pf := range parts {
		sides[i] = fs.sideOf(int(pf))
	}
	slices.SortFunc(sides, func(a, b sideInfo) int { return cmp.Compare(a.partIndex, b.partIndex) })
	first := sides[0]
	if len(parts) != first.total {
		return treeErr("split file %s: %d part(s) listed, total_parts says %d", where(), len(parts), first.total)
	}
	r.splitFiles++
	firstSize := fs.size.at(int(first.file))
	var at int64
	exts := make([]extent, 0, len(parts))
	path := p.pathOf(s, f)
	for i, sd := range sides {
		pf := int(sd.file)
		switch {
		case sd.partIndex != i:
			return treeErr("split file %s: part_index %d where %d was expected (missing or repeated part)", where(), sd.partIndex, i)
		case sd.total != first.total:
			return treeErr("split file %s: part %d says total_parts %d, part 0 says %d", where(), i, sd.total, first.total)
		case fs.size.at(pf) != firstSize:
			return treeErr("split file %s: part %d says size %d, part 0 says %d (size is the whole-file size on every part)", where(), i, fs.size.at(pf), firstSize)
		case fs.bits.at(pf)&bDup != 0:
			return treeErr("split file %s: part %d is marked as a duplicate", where(), i)
		case sd.length <= 0:
			return treeErr("split file %s: part %d has length %d", where(), i, sd.length)
		case sd.offset != at:
			return treeErr("split file %s: part %d starts at %d, expected %d (parts must tile the file)", where(), i, sd.offset, at)
		}
		at += sd.length
		if at > firstSize || at < 0 {
			return treeErr("split file %s: parts run past the file size %d", where(), firstSize)
		}
		ext, err := r.place(pf, where, sd.length, path+".part"+strconv.Itoa(i))
		if err != nil {
			return err
		}
		ext.FileOff = sd.offset
		if l.verify {
			ext.Sum, ext.HasSum = r.sum(pf, func() string { return fmt.Sprintf("split file %s part %d", where(), i) })
		}
		exts = append(exts, ext)
		if ps, pn := fs.mtime(pf); ps > rec.msec || ps == rec.msec && pn > rec.mnsec {
			rec.msec, rec.mnsec = ps, pn
		}
	}
	if at != firstSize {
		return treeErr("split file %s: parts cover %d of %d bytes", where(), at, firstSize)
	}
	rec.exts = exts
	rec.split = true
	rec.identity = r.identity(rec, exts)
	return p.b.add(s, f, rec)
}

// place locates one stored piece (a whole file or one split part) of
// file f, length bytes, whose tar entry is named tarName.
func (r *resolver) place(f int, where func() string, length int64, tarName string) (extent, error) {
	rk := r.rkey(f)
	if rk < 0 {
		return extent{}, treeErr("file %s has no s3_key", where())
	}
	key := r.rkeys[rk]
	if r.cands[rk].link < 0 {
		// A chunk's key was checked once by collectChunks; a direct
		// object's is checked here.
		if err := manifest.CheckObjectKey(key); err != nil {
			return extent{}, fmt.Errorf("%w: file %s (s3_key %q): %w", ErrInvalidTree, where(), r.rawS3Key(f), err)
		}
		if err := r.confine(key); err != nil {
			return extent{}, fmt.Errorf("direct-upload file %s: %w", where(), err)
		}
		ci, err := r.directChunk(f, where, rk, length)
		if err != nil {
			return extent{}, err
		}
		return extent{Chunk: ci, Off: 0, Length: length}, nil
	}
	ci, err := r.chunkFor(rk)
	if err != nil {
		return extent{}, fmt.Errorf("file %s: %w", where(), err)
	}
	off := r.fs.aoff.at(f)
	if off < -1 {
		return extent{}, treeErr("file %s: negative archive_offset %d", where(), off)
	}
	if off < 0 {
		r.legacyOffsets++
	}
	c := &r.chunks[ci]
	if off >= 0 && c.Kind == chunkio.FramedZstd {
		total := r.uncomp[ci]
		if off > total || length > total-off {
			return extent{}, treeErr("file %s: bytes [%d,%d) lie outside chunk %s, whose frames cover %d bytes",
				where(), off, off+length, key, total)
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
	return extent{Chunk: ci, Off: off, Length: length, TarName: tarName}, nil
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
	put(rec.msec)         // the mod time's Unix seconds
	put(int64(rec.mnsec)) // and nanoseconds (< 1e9)
	for _, e := range exts {
		h.Write([]byte(r.chunks[e.Chunk].Key))
		h.Write([]byte{0})
		put(e.FileOff)
		put(e.Off)
		put(e.Length)
		if e.HasSum {
			h.Write(e.Sum[:])
		}
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}
