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
// root+key keep their extents in one shared slice (~80 bytes each plus the
// tar name). Measured by BenchmarkOpen1M (index_bench_test.go, keys of
// ~36 bytes, 1000 chunks, 16000 frames): 109 bytes per file retained,
// 104 MB for 1,000,000 files, everything of the Archive included.

import (
	"encoding/hex"
	"fmt"
	"math"
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
	exts  []extent

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
}

// fileRec is one resolved file on its way into the index.
type fileRec struct {
	key      string
	size     int64
	mtime    time.Time
	sum      [32]byte
	hasSum   bool
	md5      [16]byte
	hasMD5   bool
	identity [16]byte // used when !hasSum
	ctype    string
	split    bool
	link     int32 // chain link that decided the file (indexBuilder.links only)

	// Either a single extent whose tar name is root+key, or exts.
	isSingle bool
	single   extent
	root     string
	exts     []extent
}

type indexBuilder struct {
	idx    index
	names  strings.Builder
	roots  map[string]uint32
	ctypes map[string]uint32
	n      int
	links  bool // keep the link column (the tree of a chain)
}

func (b *indexBuilder) init(n, nameBytes int) {
	b.idx = index{
		ends:  make([]uint32, 0, n),
		size:  make([]int64, 0, n),
		msec:  make([]int64, 0, n),
		mnsec: make([]uint32, 0, n),
		sum:   make([][32]byte, 0, n),
		flags: make([]uint8, 0, n),
		chunk: make([]int32, 0, n),
		off:   make([]int64, 0, n),
		root:  make([]uint32, 0, n),
	}
	b.names.Grow(nameBytes)
	b.roots = map[string]uint32{}
	b.ctypes = map[string]uint32{"": 0}
	b.idx.ctypes = []string{""}
	b.n = n
}

func (b *indexBuilder) add(rec fileRec) error {
	x := &b.idx
	i := len(x.ends)
	if i > 0 && rec.key <= x.key(i-1, b.names.String()) {
		return fmt.Errorf("%w: keys out of order at %q", ErrInvalidTree, rec.key)
	}
	if b.names.Len()+len(rec.key) > math.MaxUint32 {
		return fmt.Errorf("%w: keys exceed 4 GiB in total", ErrInvalidTree)
	}
	b.names.WriteString(rec.key)
	x.ends = append(x.ends, uint32(b.names.Len()))
	x.size = append(x.size, rec.size)
	x.msec = append(x.msec, rec.mtime.Unix())
	x.mnsec = append(x.mnsec, uint32(rec.mtime.Nanosecond()))

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
		if x.md5 == nil {
			x.md5 = make([][16]byte, i, b.n)
		}
	}
	if x.md5 != nil {
		x.md5 = append(x.md5, rec.md5)
	}
	if rec.ctype != "" && x.ctype == nil {
		x.ctype = make([]uint32, i, b.n)
	}
	if x.ctype != nil {
		ci, ok := b.ctypes[rec.ctype]
		if !ok {
			ci = uint32(len(x.ctypes))
			b.ctypes[rec.ctype] = ci
			x.ctypes = append(x.ctypes, rec.ctype)
		}
		x.ctype = append(x.ctype, ci)
	}
	x.sum = append(x.sum, sum)
	if b.links {
		if rec.link < 0 || rec.link > math.MaxUint16 {
			return fmt.Errorf("%w: chain link %d of %q out of range", ErrInvalidTree, rec.link, rec.key)
		}
		x.link = append(x.link, uint16(rec.link))
	}

	if rec.isSingle {
		ri, ok := b.roots[rec.root]
		if !ok {
			ri = uint32(len(x.roots))
			b.roots[rec.root] = ri
			x.roots = append(x.roots, rec.root)
		}
		x.chunk = append(x.chunk, rec.single.chunk)
		x.off = append(x.off, rec.single.off)
		x.root = append(x.root, ri)
	} else {
		fl |= flagMulti
		if rec.split {
			fl |= flagSplit
		}
		x.chunk = append(x.chunk, int32(len(rec.exts)))
		x.off = append(x.off, int64(len(x.exts)))
		x.root = append(x.root, 0)
		x.exts = append(x.exts, rec.exts...)
	}
	x.flags = append(x.flags, fl)
	return nil
}

func (b *indexBuilder) finish() (index, error) {
	b.idx.names = b.names.String()
	if len(b.idx.ctypes) == 1 {
		b.idx.ctypes = nil
	}
	return b.idx, nil
}

// n is the number of files.
func (x *index) n() int { return len(x.ends) }

// key returns key i of names (names is x.names except while building).
func (x *index) key(i int, names string) string {
	start := uint32(0)
	if i > 0 {
		start = x.ends[i-1]
	}
	return names[start:x.ends[i]]
}

// keyAt returns key i.
func (x *index) keyAt(i int) string { return x.key(i, x.names) }

// search returns the first index whose key is >= k.
func (x *index) search(k string) int {
	lo, hi := 0, x.n()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.keyAt(m) < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// searchAfter returns the first index whose key is > k.
func (x *index) searchAfter(k string) int {
	lo, hi := 0, x.n()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.keyAt(m) <= k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// file builds the File value of index i.
func (x *index) file(i int) File {
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

// extents returns the pieces of file i in file order.
func (x *index) extents(i int) []extent {
	if x.flags[i]&flagMulti != 0 {
		start := x.off[i]
		end := start + int64(x.chunk[i])
		return x.exts[start:end:end]
	}
	return []extent{{
		chunk:   x.chunk[i],
		off:     x.off[i],
		length:  x.size[i],
		tarName: x.roots[x.root[i]] + x.keyAt(i),
	}}
}

// Stat looks a key up in O(log n).
func (a *Archive) Stat(key string) (File, bool) {
	i := a.idx.search(key)
	if i < a.idx.n() && a.idx.keyAt(i) == key {
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
