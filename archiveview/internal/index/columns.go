package index

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
// Archive included; building it peaks at 1.5x that (archiveview/build.go).
//
// Every column is a plain slice, so the same index serves from memory (a
// fresh build) and from an index file mapped in place (mapping.go). Keys
// and tar names handed out of the index are copies when it is mapped.

import (
	"encoding/hex"
	"runtime"
	"strings"
	"time"
)

// File flags (the flags column). Written to disk (the index file): append
// only. A bit's meaning never changes and a bit is never reused; a new
// flag takes the next bit and a new format version (doc.go).
const (
	FlagSum      uint8 = 1 << iota // sum is the whole file's sha256
	FlagMD5                        // md5[i] is the manifest's content_hash
	FlagMulti                      // extents are exts[off[i] : off[i]+chunk[i]]
	FlagIdentity                   // sum[:16] is a location digest (no checksum known)
	FlagSplit                      // a split file
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

type Index struct {
	Names string   // every key, concatenated in byte order
	Ends  []uint32 // key i is names[ends[i-1]:ends[i]] (start 0 for i == 0)
	Size  []int64
	Msec  []int64  // mod_time, unix seconds
	Mnsec []uint32 // mod_time, nanoseconds
	Sum   [][32]byte
	Flags []uint8
	Chunk []int32  // single Extent: chunk index; FlagMulti: number of extents
	Off   []int64  // single Extent: tar offset (-1 unknown); FlagMulti: first index into exts
	Root  []uint32 // single Extent: the tar name is roots[root[i]] + key
	Roots []string

	// Exts are the extents of multi-extent files (split files, duplicates,
	// files whose tar name is not root+key), fixed-size records whose tar
	// names are in extNames.
	Exts     []ExtRec
	ExtNames string

	MD5    [][16]byte // nil unless some file has a content_hash
	Ctype  []uint32   // nil unless some file has a content type; index into ctypes
	Ctypes []string

	// Chains only (nil for one upload): Link[i] is the chain Link (0 =
	// newest upload) whose manifest decided file i, so its S3 version id
	// is ids[Link[i]]; tombs are the keys a tombstone decided (the latest
	// version is a delete marker), sorted, with their Link.
	Link  []uint16
	Tombs TombTable

	// IDs are the chain's upload IDs, newest first (set by newArchive,
	// not stored): file i's version id is IDs[link[i]], or IDs[0].
	IDs []string

	// Totals for Info.
	Frames                   int
	Compressed, Uncompressed int64

	// mm is the index file the columns are read from in place (mapping.go;
	// nil for an index in memory). Strings and slices handed out of the
	// index are copies, so nothing outlives the mapping.
	mm *Mapping
}

// ExtRec is one stored piece of a multi-extent file. Its layout is fixed
// (72 bytes, little-endian in an index file, see format.go) so that an
// index file's extent table is used in place. Written to disk: append
// only (a change of layout is a new format version).
type ExtRec struct {
	FileOff int64
	Off     int64 // data offset in the chunk's tar stream (object offset for direct); -1 = unknown
	Length  int64
	Sum     [32]byte // sha256 of exactly this piece, when hasSum
	Chunk   int32
	Name    uint32 // the tar name is extNames[name : name+nameLen]
	NameLen uint32
	HasSum  uint8
	pad     [3]uint8 // zero
}

// N is the number of files.
func (x *Index) N() int { return len(x.Ends) }

// RawKey returns key i as a view of the index: of its mapping, for a
// mapped index. Only for use inside a method of the index that keeps x
// alive (runtime.KeepAlive) while it uses the string.
func (x *Index) RawKey(i int) string {
	start := uint32(0)
	if i > 0 {
		start = x.Ends[i-1]
	}
	return x.Names[start:x.Ends[i]]
}

// KeyAt returns key i, safe to keep: a copy when the index is mapped.
func (x *Index) KeyAt(i int) string {
	defer runtime.KeepAlive(x)
	return x.Own(x.RawKey(i))
}

// Own returns s (a view of the index) as a string safe to keep.
func (x *Index) Own(s string) string {
	if x.mm != nil {
		return strings.Clone(s)
	}
	return s
}

// Search returns the first index whose key is >= k.
func (x *Index) Search(k string) int {
	defer runtime.KeepAlive(x)
	lo, hi := 0, x.N()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.RawKey(m) < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// SearchAfter returns the first index whose key is > k.
func (x *Index) SearchAfter(k string) int {
	defer runtime.KeepAlive(x)
	lo, hi := 0, x.N()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.RawKey(m) <= k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// File builds the File value of index i.
func (x *Index) File(i int) File {
	defer runtime.KeepAlive(x)
	fl := x.Flags[i]
	f := File{
		Key:     x.KeyAt(i),
		Size:    x.Size[i],
		ModTime: time.Unix(x.Msec[i], int64(x.Mnsec[i])).UTC(),
		idx:     int32(i),
	}
	sum := &x.Sum[i]
	switch {
	case fl&FlagSum != 0:
		f.SHA256 = hex.EncodeToString(sum[:])
		f.ETag = etagSHA256Prefix + f.SHA256[:32]
	default:
		f.ETag = etagIdentityPrefix + hex.EncodeToString(sum[:16])
	}
	if fl&FlagMD5 != 0 && fl&FlagSplit == 0 {
		f.ETag = hex.EncodeToString(x.MD5[i][:])
	}
	if x.Ctype != nil {
		f.ContentType = x.Ctypes[x.Ctype[i]]
	}
	switch {
	case x.Link != nil && int(x.Link[i]) < len(x.IDs):
		f.VersionID = x.IDs[x.Link[i]]
	case len(x.IDs) > 0:
		f.VersionID = x.IDs[0]
	}
	return f
}

// TombTable holds the keys of a chain whose latest version is a delete
// marker, sorted, and the link of the upload that deleted each.
type TombTable struct {
	Names string
	Ends  []uint32
	Link  []uint16
}

func (t *TombTable) N() int { return len(t.Ends) }

func (t *TombTable) Key(i int) string {
	start := uint32(0)
	if i > 0 {
		start = t.Ends[i-1]
	}
	return t.Names[start:t.Ends[i]]
}

// Find returns the link that deleted key, if a tombstone decided it.
func (t *TombTable) Find(key string) (uint16, bool) {
	defer runtime.KeepAlive(t)
	lo, hi := 0, t.N()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.Key(m) < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < t.N() && t.Key(lo) == key {
		return t.Link[lo], true
	}
	return 0, false
}

// Extents returns the pieces of file i in file order (a fresh slice).
func (x *Index) Extents(i int) []Extent {
	defer runtime.KeepAlive(x)
	if x.Flags[i]&FlagMulti != 0 {
		start := x.Off[i]
		end := start + int64(x.Chunk[i])
		out := make([]Extent, 0, end-start)
		for _, r := range x.Exts[start:end] {
			out = append(out, r.Extent(x))
		}
		return out
	}
	return []Extent{{
		Chunk:   x.Chunk[i],
		Off:     x.Off[i],
		Length:  x.Size[i],
		TarName: x.Roots[x.Root[i]] + x.RawKey(i),
	}}
}

// extent is the read path's view of an extent record (its tar name
// copied out of the index when it is mapped).
func (r *ExtRec) Extent(x *Index) Extent {
	return Extent{Chunk: r.Chunk, FileOff: r.FileOff, Off: r.Off, Length: r.Length,
		TarName: x.Own(x.ExtNames[r.Name : r.Name+r.NameLen]), Sum: r.Sum, HasSum: r.HasSum == 1}
}

// Stat looks a key up in O(log n).
func (x *Index) Stat(key string) (f File, ok bool) {
	if x.mm != nil {
		x.Must(func() { f, ok = x.stat(key) })
		return f, ok
	}
	return x.stat(key)
}

func (x *Index) stat(key string) (File, bool) {
	defer runtime.KeepAlive(x)
	i := x.Search(key)
	if i < x.N() && x.RawKey(i) == key {
		return x.File(i), true
	}
	return File{}, false
}

// DeleteMarker reports whether key's latest version is a delete marker (a
// later upload of the chain deleted it) and returns that version's id.
func (x *Index) DeleteMarker(key string) (versionID string, ok bool) {
	var l uint16
	x.Must(func() { l, ok = x.Tombs.Find(key) })
	if !ok || int(l) >= len(x.IDs) {
		return "", false
	}
	return x.IDs[l], true
}

// InPlace reports whether the index is served from its file mapped in
// place.
func (x *Index) InPlace() bool { return x.mm != nil }
