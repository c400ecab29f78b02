package archiveview

// The index: an archive's virtual files sorted by key in byte order, held as
// a struct of arrays so that a million-file archive stays small and the
// garbage collector has few pointers to chase.
//
// Per file the fixed cost is 73 bytes (ends 4, size 8, msec 8, mnsec 4,
// sum 32, flags 1, chunk 4, off 8, root 4) plus the key's bytes once, in one
// shared string. Optional columns cost 16 bytes (md5) and 4 bytes (content
// type) per file only when some file of the archive has them. Files with a
// single extent whose tar name is root+key (the common case) store the
// extent inline; split files, duplicates and files whose tar name is not
// root+key keep their extents in one table of fixed-size records (72 bytes
// each) and their tar names in one string. Measured by BenchmarkOpen1M
// (index_bench_test.go, keys of ~36 bytes, 1000 chunks, 16000 frames): 109
// bytes per file retained, 104 MB for 1,000,000 files, everything of the
// Archive included; building it peaks at 1.5x that (build.go).
//
// Every column is a plain slice, so the same index serves from memory (a
// fresh build) and from an index file mapped in place (persist.go). Keys
// and tar names handed out of the index are copies when it is mapped.

import (
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// File flags.
const (
	flagSum      uint8 = 1 << iota // sum is the whole file's sha256
	flagMD5                        // md5[i] is the manifest's content_hash
	flagMulti                      // extents are exts[off[i] : off[i]+chunk[i]]
	flagIdentity                   // sum[:16] is a location digest (no checksum known)
	flagSplit                      // a split file
)

// etagSHA256Prefix and etagIdentityPrefix start the ETags of files whose
// manifest has no content_hash: "sha256-" + the first 32 hex digits of the
// file's sha256, or "wharf-" + 32 hex digits of a digest of where the bytes
// are (chunk keys, offsets, lengths, part checksums, size, mtime). Neither
// can be mistaken for an MD5 (not 32 pure hex digits) nor for a multipart
// ETag (which ends in "-<number>").
const (
	etagSHA256Prefix   = "sha256-"
	etagIdentityPrefix = "wharf-"
)

type index struct {
	names string   // every key, concatenated in byte order
	ends  []uint32 // key i is names[ends[i-1]:ends[i]] (start 0 for i == 0)
	size  []int64
	msec  []int64  // mod_time, unix seconds
	mnsec []uint32 // mod_time, nanoseconds
	sum   [][32]byte
	flags []uint8
	chunk []int32  // single extent: chunk index; flagMulti: number of extents
	off   []int64  // single extent: tar offset (-1 unknown); flagMulti: first index into exts
	root  []uint32 // single extent: the tar name is roots[root[i]] + key
	roots []string

	// exts are the extents of multi-extent files (split files, duplicates,
	// files whose tar name is not root+key), fixed-size records whose tar
	// names are in extNames.
	exts     []extRec
	extNames string

	md5    [][16]byte // nil unless some file has a content_hash
	ctype  []uint32   // nil unless some file has a content type; index into ctypes
	ctypes []string

	// Chains only (nil for one upload): link[i] is the chain link (0 =
	// newest upload) whose manifest decided file i, so its S3 version id
	// is ids[link[i]]; tombs are the keys a tombstone decided (the latest
	// version is a delete marker), sorted, with their link.
	link  []uint16
	tombs tombTable

	// ids are the chain's upload ids, newest first (set by newArchive,
	// not stored): file i's version id is ids[link[i]], or ids[0].
	ids []string

	// Totals for Info.
	frames                   int
	compressed, uncompressed int64

	// mm is the index file the columns are read from in place (persist.go;
	// nil for an index in memory). Strings and slices handed out of the
	// index are copies, so nothing outlives the mapping.
	mm *indexMapping
}

// extRec is one stored piece of a multi-extent file. Its layout is fixed
// (72 bytes, little-endian in an index file, see persist.go) so that an
// index file's extent table is used in place.
type extRec struct {
	fileOff int64
	off     int64 // data offset in the chunk's tar stream (object offset for direct); -1 = unknown
	length  int64
	sum     [32]byte // sha256 of exactly this piece, when hasSum
	chunk   int32
	name    uint32 // the tar name is extNames[name : name+nameLen]
	nameLen uint32
	hasSum  uint8
	pad     [3]uint8 // zero
}

// treeBuilder gathers an index from a fileStore: the survivors' keys
// first, then the placed files (flags, chunks, offsets, roots, extents),
// then the other columns, each gathered in key order and (when consuming
// the store) released from the store once gathered.
type treeBuilder struct {
	x        index
	fs       *fileStore
	roots    map[uint32]uint32 // store root id -> index root id
	extNames []byte
	anyMD5   bool
}

// gatherNames sets the index's keys: those of files (in key order, whose
// keys are mentions fileMention(f)).
func (b *treeBuilder) gatherNames(files []uint32, fileMention func(int) int) error {
	total := 0
	for _, f := range files {
		total += len(b.fs.key(fileMention(int(f))))
		if total > math.MaxUint32 {
			return fmt.Errorf("%w: keys exceed 4 GiB in total", ErrInvalidTree)
		}
	}
	names := make([]byte, 0, total)
	ends := make([]uint32, len(files))
	var prev []byte
	for i, f := range files {
		k := b.fs.key(fileMention(int(f)))
		if i > 0 && string(k) <= string(prev) {
			return fmt.Errorf("%w: keys out of order at %q", ErrInvalidTree, k)
		}
		names = append(names, k...)
		ends[i] = uint32(len(names))
		prev = names[len(names)-len(k):]
	}
	b.x.names = unsafeString(names) // never written again
	b.x.ends = ends
	return nil
}

// startPlacing allocates the columns add fills, for n files.
func (b *treeBuilder) startPlacing(n int) {
	b.x.flags = make([]uint8, n)
	b.x.chunk = make([]int32, n)
	b.x.off = make([]int64, n)
	b.x.root = make([]uint32, n)
	b.roots = map[uint32]uint32{}
}

// add records survivor s (file f) as placed. Its final sha256 (or
// identity digest) is written over the store's sum of f, and a split
// file's newest part time over f's time: f is this key's alone, and no
// later placement reads them (a duplicate reads its original's sum only
// when the original's manifest verifies checksums, and such an original
// keeps its sum).
func (b *treeBuilder) add(s, f int, rec fileRec) error {
	x := &b.x
	var fl uint8
	var sum [32]byte
	switch {
	case rec.hasSum:
		fl |= flagSum
		sum = rec.sum
	default:
		fl |= flagIdentity
		copy(sum[:], rec.identity[:])
	}
	if rec.hasMD5 {
		fl |= flagMD5
		b.anyMD5 = true
	}
	b.fs.sum.set(f, sum)
	b.fs.msec.set(f, rec.msec)
	b.fs.mnsec.set(f, rec.mnsec)
	if rec.isSingle {
		ri, ok := b.roots[rec.root]
		if !ok {
			ri = uint32(len(x.roots))
			b.roots[rec.root] = ri
			x.roots = append(x.roots, b.fs.roots[rec.root])
		}
		x.chunk[s], x.off[s], x.root[s] = rec.single.chunk, rec.single.off, ri
	} else {
		fl |= flagMulti
		if rec.split {
			fl |= flagSplit
		}
		if len(x.exts)+len(rec.exts) > math.MaxInt32 || len(b.extNames) > math.MaxUint32-len(rec.exts)*maxArenaKey*2 {
			return fmt.Errorf("%w: too many extents", ErrInvalidTree)
		}
		x.chunk[s] = int32(len(rec.exts))
		x.off[s] = int64(len(x.exts))
		for _, e := range rec.exts {
			r := extRec{fileOff: e.fileOff, off: e.off, length: e.length, sum: e.sum, chunk: e.chunk,
				name: uint32(len(b.extNames)), nameLen: uint32(len(e.tarName))}
			if e.hasSum {
				r.hasSum = 1
			}
			b.extNames = append(b.extNames, e.tarName...)
			x.exts = append(x.exts, r)
		}
	}
	x.flags[s] = fl
	return nil
}

// gatherColumns sets the remaining columns from the store, in key order
// (files). With release set, each store column is dropped once gathered
// and release is called (the store is consumed). linkOf, when not nil,
// gives the link column.
func (b *treeBuilder) gatherColumns(files []uint32, release func(), linkOf func(int) int32) error {
	fs, x := b.fs, &b.x
	consume := release != nil
	x.size = gather(&fs.size, files)
	x.msec = gather(&fs.msec, files)
	if consume {
		fs.size, fs.msec = pages[int64]{}, pages[int64]{}
		fs.bits, fs.s3, fs.aoff, fs.root = pages[uint16]{}, pages[uint32]{}, pages[int64]{}, pages[uint32]{}
		release()
	}
	x.mnsec = gather(&fs.mnsec, files)
	x.sum = gather(&fs.sum, files)
	if consume {
		fs.mnsec, fs.sum = pages[uint32]{}, pages[[32]byte]{}
		release()
	}
	if b.anyMD5 {
		x.md5 = make([][16]byte, len(files))
		for s, f := range files {
			if x.flags[s]&flagMD5 != 0 {
				x.md5[s] = fs.md5.atOr(int(f))
			}
		}
	}
	ctypeMap := map[uint32]uint32{0: 0} // store content type id -> index id
	for s, f := range files {
		c := fs.ctype.atOr(int(f))
		if c == 0 && x.ctype == nil {
			continue
		}
		if x.ctype == nil {
			x.ctype = make([]uint32, len(files))
			x.ctypes = []string{""}
		}
		ci, ok := ctypeMap[c]
		if !ok {
			ci = uint32(len(x.ctypes))
			ctypeMap[c] = ci
			x.ctypes = append(x.ctypes, fs.ctypes[c])
		}
		x.ctype[s] = ci
	}
	if linkOf != nil {
		x.link = make([]uint16, len(files))
		for s, f := range files {
			l := linkOf(int(f))
			if l < 0 || l > math.MaxUint16 {
				return fmt.Errorf("%w: chain link %d out of range", ErrInvalidTree, l)
			}
			x.link[s] = uint16(l)
		}
	}
	x.extNames = string(b.extNames)
	return nil
}

// gather returns c's elements at files, in order.
func gather[T any](c *pages[T], files []uint32) []T {
	out := make([]T, len(files))
	for s, f := range files {
		out[s] = c.at(int(f))
	}
	return out
}

// n is the number of files.
func (x *index) n() int { return len(x.ends) }

// rawKey returns key i as a view of the index: of its mapping, for a
// mapped index. Only for use inside a method of the index that keeps x
// alive (runtime.KeepAlive) while it uses the string.
func (x *index) rawKey(i int) string {
	start := uint32(0)
	if i > 0 {
		start = x.ends[i-1]
	}
	return x.names[start:x.ends[i]]
}

// keyAt returns key i, safe to keep: a copy when the index is mapped.
func (x *index) keyAt(i int) string {
	defer runtime.KeepAlive(x)
	return x.own(x.rawKey(i))
}

// own returns s (a view of the index) as a string safe to keep.
func (x *index) own(s string) string {
	if x.mm != nil {
		return strings.Clone(s)
	}
	return s
}

// search returns the first index whose key is >= k.
func (x *index) search(k string) int {
	defer runtime.KeepAlive(x)
	lo, hi := 0, x.n()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.rawKey(m) < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// searchAfter returns the first index whose key is > k.
func (x *index) searchAfter(k string) int {
	defer runtime.KeepAlive(x)
	lo, hi := 0, x.n()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.rawKey(m) <= k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// file builds the File value of index i.
func (x *index) file(i int) File {
	defer runtime.KeepAlive(x)
	fl := x.flags[i]
	f := File{
		Key:     x.keyAt(i),
		Size:    x.size[i],
		ModTime: time.Unix(x.msec[i], int64(x.mnsec[i])).UTC(),
		idx:     int32(i),
	}
	sum := &x.sum[i]
	switch {
	case fl&flagSum != 0:
		f.SHA256 = hex.EncodeToString(sum[:])
		f.ETag = etagSHA256Prefix + f.SHA256[:32]
	default:
		f.ETag = etagIdentityPrefix + hex.EncodeToString(sum[:16])
	}
	if fl&flagMD5 != 0 && fl&flagSplit == 0 {
		f.ETag = hex.EncodeToString(x.md5[i][:])
	}
	if x.ctype != nil {
		f.ContentType = x.ctypes[x.ctype[i]]
	}
	switch {
	case x.link != nil && int(x.link[i]) < len(x.ids):
		f.VersionID = x.ids[x.link[i]]
	case len(x.ids) > 0:
		f.VersionID = x.ids[0]
	}
	return f
}

// tombTable holds the keys of a chain whose latest version is a delete
// marker, sorted, and the link of the upload that deleted each.
type tombTable struct {
	names string
	ends  []uint32
	link  []uint16
}

func (t *tombTable) n() int { return len(t.ends) }

func (t *tombTable) key(i int) string {
	start := uint32(0)
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.names[start:t.ends[i]]
}

// find returns the link that deleted key, if a tombstone decided it.
func (t *tombTable) find(key string) (uint16, bool) {
	defer runtime.KeepAlive(t)
	lo, hi := 0, t.n()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.key(m) < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < t.n() && t.key(lo) == key {
		return t.link[lo], true
	}
	return 0, false
}

// extents returns the pieces of file i in file order (a fresh slice).
func (x *index) extents(i int) []extent {
	defer runtime.KeepAlive(x)
	if x.flags[i]&flagMulti != 0 {
		start := x.off[i]
		end := start + int64(x.chunk[i])
		out := make([]extent, 0, end-start)
		for _, r := range x.exts[start:end] {
			out = append(out, r.extent(x))
		}
		return out
	}
	return []extent{{
		chunk:   x.chunk[i],
		off:     x.off[i],
		length:  x.size[i],
		tarName: x.roots[x.root[i]] + x.rawKey(i),
	}}
}

// extent is the read path's view of an extent record (its tar name
// copied out of the index when it is mapped).
func (r *extRec) extent(x *index) extent {
	return extent{chunk: r.chunk, fileOff: r.fileOff, off: r.off, length: r.length,
		tarName: x.own(x.extNames[r.name : r.name+r.nameLen]), sum: r.sum, hasSum: r.hasSum == 1}
}

// Stat looks a key up in O(log n).
func (a *Archive) Stat(key string) (File, bool) {
	defer runtime.KeepAlive(a)
	i := a.idx.search(key)
	if i < a.idx.n() && a.idx.rawKey(i) == key {
		return a.idx.file(i), true
	}
	return File{}, false
}

// DeleteMarker reports whether key's latest version is a delete marker (a
// later upload of the chain deleted it) and returns that version's id. It
// needs no version history: the tree records which upload deleted which
// key.
func (a *Archive) DeleteMarker(key string) (versionID string, ok bool) {
	l, ok := a.idx.tombs.find(key)
	if !ok || int(l) >= len(a.chain) {
		return "", false
	}
	return a.chain[l], true
}

// Files is the number of virtual files.
func (a *Archive) Files() int { return a.idx.n() }

// fileExtents returns the pieces of file idx in file order. The slice must
// not be modified.
func (a *Archive) fileExtents(idx int32) []extent {
	exts := a.idx.extents(int(idx))
	if a.idx.flags[idx]&flagMulti == 0 && a.chunks[exts[0].chunk].Kind == chunkio.Direct {
		exts[0].tarName = "" // a direct object has no tar entry
	}
	return exts
}
