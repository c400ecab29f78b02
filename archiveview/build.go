package archiveview

// The build store: what the resolver needs of every file entry and
// tombstone of a chain, held as paged columns while the manifests stream
// in (manifest.Stream), instead of the parsed manifests.
//
// Memory. A manifest's file entry costs about 80 bytes here plus its key
// (against ~400 bytes as a manifest.FileEntry with its strings), in pages
// of 64Ki elements that never move: growing a column copies nothing and
// leaves no garbage, so the Go heap holds what the build uses and little
// else. The columns: the key (in an arena of 1 MiB pages, 8 bytes of
// position per mention), size, mod time (12), sha256 (32), flags (2),
// s3_key id (4), archive_offset (8), root id (4); md5 (16) and content
// type (4) only once some entry has one. What only some entries have
// (split parts, duplicates, paths that are not root+key, malformed
// digests) is in small side tables. Sorting needs 8 bytes per mention
// more (keysort below). The index (internal/index) is then gathered (gather.go) from the
// columns column by column, each freed once gathered.

import (
	"cmp"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"unsafe"

	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// pageBits sets the elements per page of a build column.
const (
	pageBits = 16
	pageLen  = 1 << pageBits
)

// pages is a growable array in fixed pages: elements never move once
// added. The first page grows like a slice (small builds stay small), the
// others are allocated whole.
type pages[T any] struct {
	p [][]T
	n int
}

func (c *pages[T]) add(v T) {
	k := c.n >> pageBits
	if k == len(c.p) {
		size := pageLen
		if k == 0 {
			size = 64
		}
		c.p = append(c.p, make([]T, 0, size))
	}
	c.p[k] = append(c.p[k], v)
	c.n++
}

func (c *pages[T]) at(i int) T     { return c.p[i>>pageBits][i&(pageLen-1)] }
func (c *pages[T]) set(i int, v T) { c.p[i>>pageBits][i&(pageLen-1)] = v }
func (c *pages[T]) len() int       { return c.n }

// padTo adds zero elements up to n (lazily started columns).
func (c *pages[T]) padTo(n int) {
	var zero T
	for c.n < n {
		c.add(zero)
	}
}

// atOr is at for a lazily started column: zero past its end.
func (c *pages[T]) atOr(i int) T {
	if i >= c.n {
		var zero T
		return zero
	}
	return c.at(i)
}

// arenaPage is the size of a key arena page; a key never straddles pages.
const arenaPage = 1 << 20

// byteArena holds keys in pages; a position is page<<40 | offset<<16 |
// length (add).
type byteArena struct {
	p [][]byte
}

// maxArenaKey is the longest key an arena holds (positions keep 16 bits
// of length).
const maxArenaKey = math.MaxUint16

// add copies b in and returns its position (page<<40 | offset<<16 | len).
func (a *byteArena) add(b []byte) uint64 { return a.addString(unsafeString(b)) }

// addString is add for a string.
func (a *byteArena) addString(b string) uint64 {
	k := len(a.p) - 1
	if k < 0 || len(a.p[k])+len(b) > arenaPage {
		size := arenaPage
		if k < 0 {
			size = 4 << 10
		}
		a.p = append(a.p, make([]byte, 0, size))
		k++
	}
	off := len(a.p[k])
	a.p[k] = append(a.p[k], b...)
	return uint64(k)<<40 | uint64(off)<<16 | uint64(len(b))
}

// at returns the bytes at position pos (valid while the arena lives).
func (a *byteArena) at(pos uint64) []byte {
	k, off, n := pos>>40, int(pos>>16)&(1<<24-1), int(pos&0xffff)
	return a.p[k][off : off+n : off+n]
}

// shrinkPos sets the length of the bytes at pos to n <= their length (the
// rest of their room stays unused) and returns the new position.
func shrinkPos(pos uint64, n int) uint64 { return pos&^0xffff | uint64(n) }

// Per-file flags of the build store.
const (
	bSum    uint16 = 1 << iota // checksum parsed: sum column
	bSumBad                    // checksum present but malformed: notes
	bMD5                       // content_hash (or metadata content_hash) parsed: md5 column
	bMD5Bad                    // content hash malformed: notes
	bDup                       // is_duplicate: dups
	bSplit                     // total_parts > 1
	bSide                      // offset/length/part fields: side
	bOdd                       // path is not roots[root]+key: odd
)

// sideInfo holds a file entry's split-part fields (split parts, and the
// other entries where offset or length is set).
type sideInfo struct {
	file             uint32
	offset, length   int64
	partIndex, total int
}

// dupInfo holds a duplicate's fields.
type dupInfo struct {
	file    uint32
	hash    [32]byte // duplicate_of_hash, else the checksum
	hashOK  bool
	chunkID int
	raw     string // the hash text when it does not parse
}

// fileStore is the build store of one chain: mentions (file entries, then
// tombstones, link by link, newest first) and per-file columns.
type fileStore struct {
	keys byteArena
	kpos pages[uint64] // per mention: position of its key in keys

	size  pages[int64]
	msec  pages[int64]
	mnsec pages[uint32]
	sum   pages[[32]byte]
	bits  pages[uint16]
	s3    pages[uint32] // link's s3_key id + 1; 0 = no s3_key
	aoff  pages[int64]  // archive_offset; -1 = absent
	root  pages[uint32] // path = roots[root] + key (unless bOdd)
	md5   pages[[16]byte]
	ctype pages[uint32] // index into ctypes (0 = none)

	roots    []string
	rootIdx  map[string]uint32
	ctypes   []string
	ctypeIdx map[string]uint32

	side    []sideInfo // by file, ascending
	dups    []dupInfo  // by file, ascending
	odd     map[uint32]string
	badSum  map[uint32]error
	badMD5  map[uint32]string
	scratch []byte
}

func newFileStore() *fileStore {
	return &fileStore{
		rootIdx:  map[string]uint32{},
		ctypes:   []string{""},
		ctypeIdx: map[string]uint32{"": 0},
		odd:      map[uint32]string{},
		badSum:   map[uint32]error{},
		badMD5:   map[uint32]string{},
	}
}

func (s *fileStore) mentions() int { return s.kpos.len() }
func (s *fileStore) files() int    { return s.size.len() }

// key returns mention m's key (valid while the store lives).
func (s *fileStore) key(m int) []byte { return s.keys.at(s.kpos.at(m)) }

// linkSink streams one manifest of the chain into the store (the
// manifest.Stream callbacks).
type linkSink struct {
	s    *fileStore
	l    *chainLink
	src  string // source_path, once known
	raw  bool   // source_path not known at the first entry: keys derived at the end
	s3id map[string]uint32

	tombs    byteArena // deleted paths, until the link's files are all in
	tombPos  []uint64
	tombErrI int

	// maxFiles (Limits.MaxFiles) bounds the file entries, and the deleted
	// paths, of the whole chain so far, as the decoder bounds each
	// manifest's: a chain of small manifests must not build a tree many
	// times the size a caller capped (chainCap).
	maxFiles int
}

// chainCap is the error of a chain whose manifests together list more
// than max file entries (what, or deleted paths): the manifest package's
// ErrTooLarge naming the cap, as one manifest over it gets.
func (k *linkSink) chainCap(what string) error {
	return &manifest.Error{Key: k.l.key, Kind: manifest.ErrTooLarge, FilesLimit: k.maxFiles,
		Msg: fmt.Sprintf("the chain's manifests list more than %d %s together (the files limit)", k.maxFiles, what)}
}

func newLinkSink(s *fileStore, l *chainLink) *linkSink {
	l.mStart, l.fStart = s.mentions(), s.files()
	return &linkSink{s: s, l: l, s3id: map[string]uint32{}, tombErrI: -1}
}

// head is manifest.StreamFuncs.Head: keys can be derived as entries arrive
// once source_path is known; else the paths are kept and converted at the
// end (a key is never longer than its path).
func (k *linkSink) head(m *manifest.Manifest, seen func(member string) bool) error {
	k.src = m.SourcePath
	k.raw = !seen("source_path")
	return nil
}

// file is manifest.StreamFuncs.Files.
func (k *linkSink) file(i int, fe *manifest.FileEntry) error {
	s := k.s
	f := s.files()
	if k.maxFiles > 0 && f >= k.maxFiles {
		return k.chainCap("file entries")
	}
	if f >= math.MaxUint32-1 || s.mentions() >= math.MaxUint32-1 {
		return fmt.Errorf("%w: more than %d file entries in the chain", ErrInvalidTree, math.MaxUint32-2)
	}
	if len(fe.Path) > maxArenaKey {
		return fmt.Errorf("%w: manifest %s: path of %d bytes (at most %d)", ErrInvalidTree, k.l.key, len(fe.Path), maxArenaKey)
	}
	var bits uint16
	if k.raw {
		s.kpos.add(s.keys.addString(fe.Path))
		s.root.add(0)
	} else {
		s.addKey(k.l, f, fe.Path, k.src, &bits)
	}
	s.size.add(fe.Size)
	s.msec.add(fe.ModTime.Unix())
	s.mnsec.add(uint32(fe.ModTime.Nanosecond()))

	var sum [32]byte
	if v, ok, err := manifest.ParseChecksum(fe.Checksum); err != nil {
		bits |= bSumBad
		s.badSum[uint32(f)] = err
	} else if ok {
		bits |= bSum
		sum = v
	}
	s.sum.add(sum)

	ch := fe.ContentHash
	if ch == "" {
		ch = fe.Metadata["content_hash"]
	}
	if ch != "" {
		if v, ok, err := manifest.ParseMD5(ch); err != nil {
			bits |= bMD5Bad
			s.badMD5[uint32(f)] = strings.Clone(ch)
		} else if ok {
			bits |= bMD5
			s.md5.padTo(f)
			s.md5.add(v)
		}
	}
	if mime := fe.Metadata["magika_mime"]; mime != "" {
		ci, ok := s.ctypeIdx[mime]
		if !ok {
			ci = uint32(len(s.ctypes))
			c := strings.Clone(mime)
			s.ctypes = append(s.ctypes, c)
			s.ctypeIdx[c] = ci
		}
		s.ctype.padTo(f)
		s.ctype.add(ci)
	}

	var s3 uint32
	if fe.S3Key != "" {
		id, ok := k.s3id[fe.S3Key]
		if !ok {
			id = uint32(len(k.l.s3keys))
			c := strings.Clone(fe.S3Key)
			k.l.s3keys = append(k.l.s3keys, c)
			k.s3id[c] = id
		}
		s3 = id + 1
	}
	s.s3.add(s3)
	aoff := int64(-1)
	if fe.ArchiveOffset != nil && *fe.ArchiveOffset != 0 {
		aoff = *fe.ArchiveOffset
	}
	s.aoff.add(aoff)

	if fe.TotalParts > 1 {
		bits |= bSplit
	}
	if fe.TotalParts > 1 || fe.Offset != 0 || fe.Length != 0 && fe.Length != fe.Size {
		bits |= bSide
		s.side = append(s.side, sideInfo{file: uint32(f), offset: fe.Offset, length: fe.Length, partIndex: fe.PartIndex, total: fe.TotalParts})
	}
	if fe.IsDuplicate {
		bits |= bDup
		d := dupInfo{file: uint32(f), chunkID: fe.ChunkID}
		h := fe.DuplicateOfHash
		if h == "" {
			h = fe.Checksum
		}
		if v, ok, err := manifest.ParseChecksum(h); err == nil && ok {
			d.hash, d.hashOK = v, true
		} else {
			d.raw = strings.Clone(h)
		}
		s.dups = append(s.dups, d)
	}
	s.bits.add(bits)
	k.l.nFiles++
	return nil
}

// relKey derives the bucket key of a manifest path (a file's or a
// deleted path's, what says which) relative to source_path src into the
// store's scratch buffer. A path that has no key records the link's first
// such error in *first and gives an empty key.
func (s *fileStore) relKey(l *chainLink, first *error, what, src, path string) []byte {
	key, err := manifest.AppendRelativeKey(s.scratch[:0], src, path)
	s.scratch = key
	if err != nil {
		if *first == nil {
			*first = fmt.Errorf("%w: manifest %s: %s %q: %w", ErrInvalidTree, l.key, what, path, err)
		}
		key = key[:0]
	}
	return key
}

// addKey derives file f's key from path (mention f of link l) into the
// arena and records how path relates to it (root, or odd).
func (s *fileStore) addKey(l *chainLink, f int, path, src string, bits *uint16) {
	key := s.relKey(l, &l.keyErr, "file", src, path)
	s.kpos.add(s.keys.add(key))
	s.root.add(s.rootOf(f, path, key, bits))
}

// rootOf returns the root id of path = root + key, or marks f odd and
// keeps its path.
func (s *fileStore) rootOf(f int, path string, key []byte, bits *uint16) uint32 {
	if len(key) == 0 || len(path) < len(key) || path[len(path)-len(key):] != string(key) {
		*bits |= bOdd
		s.odd[uint32(f)] = strings.Clone(path)
		return 0
	}
	root := path[:len(path)-len(key)]
	ri, ok := s.rootIdx[root]
	if !ok {
		ri = uint32(len(s.roots))
		c := strings.Clone(root)
		s.roots = append(s.roots, c)
		s.rootIdx[c] = ri
	}
	return ri
}

// path is manifest.StreamFuncs.Path: entry i's path as the manifest
// wrote it (for the archive_offset error).
func (k *linkSink) path(i int) string {
	f := k.l.fStart + i
	if k.raw {
		return string(k.s.key(k.l.mStart + i))
	}
	return k.s.pathOf(k.l, f)
}

// deleted is manifest.StreamFuncs.Deleted: the path waits until the
// link's files are in (tombstones follow them in mention order).
func (k *linkSink) deleted(i int, p string) error {
	if len(p) > maxArenaKey {
		return fmt.Errorf("%w: manifest %s: deleted path of %d bytes (at most %d)", ErrInvalidTree, k.l.key, len(p), maxArenaKey)
	}
	if k.maxFiles > 0 && k.s.mentions()-k.s.files()+len(k.tombPos) >= k.maxFiles {
		return k.chainCap("deleted paths")
	}
	k.tombPos = append(k.tombPos, k.tombs.addString(p))
	return nil
}

// finish completes the link once its manifest is read: keys of entries
// that arrived before source_path, then the tombstones' keys, then the
// resolution of its s3_keys (resolve).
func (k *linkSink) finish(m *manifest.Manifest) error {
	s, l := k.s, k.l
	src := m.SourcePath
	if k.raw {
		for f := l.fStart; f < l.fStart+l.nFiles; f++ {
			m := l.mStart + (f - l.fStart)
			pos := s.kpos.at(m)
			path := string(s.keys.at(pos)) // a copy: the key overwrites it
			key := s.relKey(l, &l.keyErr, "file", src, path)
			copy(s.keys.at(pos), key)
			s.kpos.set(m, shrinkPos(pos, len(key)))
			b := s.bits.at(f)
			s.root.set(f, s.rootOf(f, path, key, &b))
			s.bits.set(f, b)
		}
	}
	for _, pos := range k.tombPos {
		if s.mentions() >= math.MaxUint32-1 {
			return fmt.Errorf("%w: more than %d mentions in the chain", ErrInvalidTree, math.MaxUint32-2)
		}
		p := k.tombs.at(pos)
		key := s.relKey(l, &l.tombErr, "deleted path", src, string(p))
		s.kpos.add(s.keys.add(key))
	}
	if k.tombPos == nil {
		for _, p := range m.DeletedPaths { // not streamed (versions of an old chain)
			key := s.relKey(l, &l.tombErr, "deleted path", src, p)
			s.kpos.add(s.keys.add(key))
			l.nTombs++
		}
	}
	l.nTombs += len(k.tombPos)
	k.tombs, k.tombPos = byteArena{}, nil
	return nil
}

// pathOf returns file f's path as the manifest wrote it.
func (s *fileStore) pathOf(l *chainLink, f int) string {
	if s.bits.at(f)&bOdd != 0 {
		return s.odd[uint32(f)]
	}
	return s.roots[s.root.at(f)] + string(s.key(l.mStart+(f-l.fStart)))
}

// sideOf returns file f's side fields (zero when it has none).
func (s *fileStore) sideOf(f int) sideInfo {
	if s.bits.at(f)&bSide == 0 {
		return sideInfo{file: uint32(f)}
	}
	i, ok := slices.BinarySearchFunc(s.side, uint32(f), func(e sideInfo, f uint32) int { return cmp.Compare(e.file, f) })
	if !ok {
		return sideInfo{file: uint32(f)}
	}
	return s.side[i]
}

// dupOf returns duplicate f's fields.
func (s *fileStore) dupOf(f int) dupInfo {
	i, ok := slices.BinarySearchFunc(s.dups, uint32(f), func(e dupInfo, f uint32) int { return cmp.Compare(e.file, f) })
	if !ok {
		return dupInfo{file: uint32(f)}
	}
	return s.dups[i]
}

// mtime is file f's modification time.
func (s *fileStore) mtime(f int) (int64, uint32) { return s.msec.at(f), s.mnsec.at(f) }

// ---------------------------------------------------------------------------
// Sorting the mentions by key

// keysort orders the mentions by (key, mention index) with bounded memory:
// one uint64 per mention, holding 4 bytes of the key (big-endian, zero
// past its end) above the 32-bit mention index. A range is sorted on that
// word, then every run of equal words whose key bytes go on is sorted
// again 4 bytes deeper (an MSD radix sort whose digit is 4 bytes, ordered
// by pdqsort). Keys hold no NUL byte (manifest.RelativeKey refuses them),
// so a zero byte marks a key's end: a run whose word holds one is a run of
// equal keys, in mention order. A run already in order (manifests are
// mostly written sorted) and a run whose 4 bytes are all equal cost one
// pass and no sort; each pass reads the keys of a run in mention order,
// so the arena is read forward. starts marks the first mention of each
// distinct key.
type keysort struct {
	s      *fileStore
	a      []uint64
	starts []uint64 // bitset: a[i] starts a new key
}

// word is 4 bytes of key m from byte d on, big-endian, zero-padded.
func (s *fileStore) word(m uint32, d int) uint32 {
	k := s.key(int(m))
	var w uint32
	for j := 0; j < 4; j++ {
		w <<= 8
		if d+j < len(k) {
			w |= uint32(k[d+j])
		}
	}
	return w
}

// sortMentions returns the mentions in (key, index) order and the bitset
// of key starts.
func (s *fileStore) sortMentions() (order []uint64, starts []uint64) {
	n := s.mentions()
	ks := keysort{s: s, a: make([]uint64, n), starts: make([]uint64, (n+63)/64)}
	for i := range ks.a {
		ks.a[i] = uint64(i)
	}
	type span struct{ lo, hi, depth int }
	stack := []span{{0, n, 0}}
	if n > 0 {
		ks.mark(0)
	}
	for len(stack) > 0 {
		sp := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		r := ks.a[sp.lo:sp.hi]
		sorted := true
		var prev uint64
		for i := range r {
			m := uint32(r[i])
			v := uint64(s.word(m, sp.depth))<<32 | uint64(m)
			r[i] = v
			if i > 0 && v < prev {
				sorted = false
			}
			prev = v
		}
		if !sorted {
			slices.Sort(r)
		}
		for i := 0; i < len(r); {
			w := r[i] >> 32
			j := i + 1
			for j < len(r) && r[j]>>32 == w {
				j++
			}
			if i > 0 {
				ks.mark(sp.lo + i)
			}
			if j-i > 1 && noZeroByte(uint32(w)) {
				stack = append(stack, span{sp.lo + i, sp.lo + j, sp.depth + 4})
			}
			i = j
		}
	}
	return ks.a, ks.starts
}

func (ks *keysort) mark(i int) { ks.starts[i>>6] |= 1 << (i & 63) }

// isStart reports whether order[i] starts a new key.
func isStart(starts []uint64, i int) bool { return starts[i>>6]&(1<<(i&63)) != 0 }

// noZeroByte reports whether none of w's 4 bytes is zero (the keys of the
// run go on past them).
func noZeroByte(w uint32) bool {
	return w&0xff000000 != 0 && w&0xff0000 != 0 && w&0xff00 != 0 && w&0xff != 0
}

// unsafeString views b as a string without copying; b must not change
// while the string is used.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// bigBuild is the number of file entries from which a build hands the
// memory of each finished phase back at once (releaseBuildMemory).
const bigBuild = 1 << 17

// releaseBuildMemory runs a collection and returns freed memory to the
// operating system, for a build of files entries of at least bigBuild.
// A large build frees hundreds of megabytes at each phase (the sort
// array, the key arena, each column once gathered); left to the pacer,
// that garbage would stay until the heap doubled and the pages would stay
// resident until scavenged, so the build's peak would be the sum of its
// phases instead of the largest one. A collection costs little here: the
// build's memory is large pointer-free arrays.
func releaseBuildMemory(files int) {
	if files >= bigBuild {
		debug.FreeOSMemory()
	}
}
