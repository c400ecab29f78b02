package index

// The persistent index file, format version 3: laid out so that an
// archive is served from the file in place (mapped, mapping_unix.go)
// without loading it. Little-endian throughout.
//
//	header (128 bytes): magic "WHARFIDX" | version u32 (3) | reserved u32 (0)
//	        | files u64 | names bytes u64 | extents u64 | extent-name bytes u64
//	        | tombstones u64 | tombstone-name bytes u64 | columns u64 (bit 0:
//	        md5, 1: content type, 2: link) | meta bytes u64 | zeros to 128
//	meta (meta bytes, from byte 128), the small tables, read into memory:
//	        provenance: bucket, manifest key, max frame bytes i64, 7 limits
//	        i64, sources u32 then per source: key, etag, size i64, last-
//	        modified sec i64, sha256 [32], absent u8
//	        metadata: upload id, version, created sec i64 nsec u32 zone-
//	        offset i32, region, chain u32 + ids, shapes u32 + strings,
//	        warnings u32 + strings, totals (frames, compressed, uncompressed)
//	        i64
//	        chunks u32, frames u64; per chunk key, kind u8, size i64, has-sum
//	        u8, sum [32], max-tar i64, frames u32; then every frame: cOff
//	        cSize uOff uSize i64, has-sum u8, sum [32]
//	        roots u32 + strings, content types u32 + strings
//	        verified units u32 (chunkio.VerifiedUnit: spans the read path
//	        checked whole, with the object ETag the check saw), per unit
//	        chunk u32, kind u8, offset i64, length i64, sum [32], ETag
//	columns, each at the next multiple of 64 (zero padding between), in
//	        this order, their sizes fixed by the header's counts:
//	        names [names bytes] (the sorted key table: every key
//	        concatenated), ends u32, size i64, msec i64, mnsec u32,
//	        sum [32]byte, flags u8, chunk i32, off i64, root u32 (one
//	        each per file), md5 [16]byte, content type u32, link u16 (per
//	        file, when their column bit is set), extents (72-byte records:
//	        fileOff off length i64, sum [32], chunk i32, name offset u32,
//	        name length u32, has-sum u8, 3 zero bytes), extent names
//	        [bytes], tombstone names [bytes], tombstone ends u32, tombstone
//	        links u16 (keys whose latest version is a delete marker)
//	zero padding to a multiple of 64, then the trailer: a sha256 tree hash
//	        of every byte before it (sha256 of the concatenated sha256 of
//	        each 8 MiB block; the blocks are hashed in parallel).
//
// Strings in the meta section are a u32 length and the bytes. Columns sit
// at offsets computed from the header alone, aligned, so that each is a
// slice over the file's bytes; columns.go's columns are exactly these.
// The meta fields' encoding is metafields.go, the trailer treehash.go,
// the checks of the tree's files and tombstones check.go.
//
// A file is never trusted. Before anything is used: the length, magic and
// version, then the tree hash over the whole file, then the header's
// counts (bounded, and the layout they give must end exactly where the
// trailer starts), zero padding and reserved bytes. Then the meta section
// is decoded with every count checked against the bytes left, and the
// tree must keep the invariants the resolver guarantees: keys non-empty
// and strictly ascending, chunk indexes in range, frames tiling the tar
// stream (manifest.CheckFrames), extents tiling each file, framed extents
// inside their chunk, keys confined to the archive's upload tree, links
// and content types in range, tombstones sorted and not also files,
// verified units well-formed. Any violation is an error wrapping
// ErrBadIndex that names the file; Open then rebuilds from the manifests.
// Version 2 (read whole into memory) and older are refused the same way.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"
	"unsafe"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

const (
	indexMagic     = "WHARFIDX"
	FormatVersion  = 3
	HeaderBytes    = 128
	TrailerBytes   = sha256.Size
	indexAlign     = 64
	indexHashBlock = 8 << 20

	// Optional-column bits of the header. Written to disk: append only.
	ColMD5   = 1 << 0
	ColCtype = 1 << 1
	ColLink  = 1 << 2

	extRecBytes = 72

	knownFlags = FlagSum | FlagMD5 | FlagMulti | FlagIdentity | FlagSplit

	// Fixed bytes per element of the meta section, for count checks.
	idxSourceMin = 4 + 4 + 8 + 8 + 32 + 1
	idxStrMin    = 4
	idxChunkMin  = 4 + 1 + 8 + 1 + 32 + 8 + 4
	idxFrameSize = 8*4 + 1 + 32
)

// The layout of extRec is the file's extent record: asserted at compile
// time (a mismatch makes one of these constants negative).
const (
	_ = uint(unsafe.Sizeof(ExtRec{}) - extRecBytes)
	_ = uint(extRecBytes - unsafe.Sizeof(ExtRec{}))
	_ = uint(unsafe.Offsetof(ExtRec{}.Sum) - 24)
	_ = uint(24 - unsafe.Offsetof(ExtRec{}.Sum))
	_ = uint(unsafe.Offsetof(ExtRec{}.Chunk) - 56)
	_ = uint(56 - unsafe.Offsetof(ExtRec{}.Chunk))
	_ = uint(unsafe.Offsetof(ExtRec{}.HasSum) - 68)
	_ = uint(68 - unsafe.Offsetof(ExtRec{}.HasSum))
)

// Column sections, in file order. Written to disk (their order is the
// layout): append only, and only with a new format version.
const (
	SecNames = iota
	SecEnds
	SecSize
	SecMsec
	SecMnsec
	SecSum
	SecFlags
	SecChunk
	SecOff
	SecRoot
	SecMD5
	SecCtype
	SecLink
	SecExts
	SecExtNames
	SecTombNames
	SecTombEnds
	SecTombLink
	NumSections
)

// FileHeader is the header's counts.
type FileHeader struct {
	files, namesLen, exts, extNamesLen, tombs, tombNamesLen, cols, metaLen uint64
}

// counts are the header's u64 fields in file order, from byte 16: the one
// list Write and ParseHeader use.
func (h *FileHeader) counts() [8]*uint64 {
	return [8]*uint64{&h.files, &h.namesLen, &h.exts, &h.extNamesLen, &h.tombs, &h.tombNamesLen, &h.cols, &h.metaLen}
}

func alignUp(v uint64) uint64 { return (v + indexAlign - 1) &^ (indexAlign - 1) }

// Layout returns every section's offset and length and the end of the
// body (where the trailer starts); ok is false for counts out of range.
// The bounds keep every sum far from overflowing.
func (h *FileHeader) Layout() (off, size [NumSections]uint64, end uint64, ok bool) {
	if h.files > math.MaxInt32 || h.exts > math.MaxInt32 || h.tombs > math.MaxInt32 ||
		h.namesLen > math.MaxUint32 || h.extNamesLen > math.MaxUint32 || h.tombNamesLen > math.MaxUint32 ||
		h.metaLen > 1<<40 || h.cols&^(ColMD5|ColCtype|ColLink) != 0 {
		return off, size, 0, false
	}
	f := h.files
	size = [NumSections]uint64{
		SecNames: h.namesLen, SecEnds: 4 * f, SecSize: 8 * f, SecMsec: 8 * f, SecMnsec: 4 * f,
		SecSum: 32 * f, SecFlags: f, SecChunk: 4 * f, SecOff: 8 * f, SecRoot: 4 * f,
		SecExts: extRecBytes * h.exts, SecExtNames: h.extNamesLen,
		SecTombNames: h.tombNamesLen, SecTombEnds: 4 * h.tombs, SecTombLink: 2 * h.tombs,
	}
	if h.cols&ColMD5 != 0 {
		size[SecMD5] = 16 * f
	}
	if h.cols&ColCtype != 0 {
		size[SecCtype] = 4 * f
	}
	if h.cols&ColLink != 0 {
		size[SecLink] = 2 * f
	}
	at := uint64(HeaderBytes) + h.metaLen
	for s := range size {
		at = alignUp(at)
		off[s] = at
		at += size[s]
	}
	return off, size, alignUp(at), true
}

// hostLittleEndian reports whether this machine stores integers as the
// file does (then columns are used in place).
func hostLittleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// ---------------------------------------------------------------------------
// Writing

// learnedFileOffset returns the tar offset of file i's single extent when
// the manifest gave none and a completed tar walk of the read path found
// the member (name and length).
func learnedFileOffset(x *Index, i int, learned Learned) (int64, bool) {
	if learned == nil || x.Flags[i]&FlagMulti != 0 || x.Off[i] >= 0 {
		return 0, false
	}
	return learned(x.Chunk[i], x.Roots[x.Root[i]]+x.RawKey(i), x.Size[i])
}

// learnedExtOffset is learnedFileOffset for extent record r.
func learnedExtOffset(x *Index, r *ExtRec, learned Learned) (int64, bool) {
	if learned == nil || r.Off >= 0 {
		return 0, false
	}
	return learned(r.Chunk, x.ExtNames[r.Name:r.Name+r.NameLen], r.Length)
}

// LearnedOffsets is the number of extents of x without a manifest archive_offset
// whose tar offset the read path has learned (and WriteIndex would record).
// A fault reading a mapped index is an error wrapping ErrFileChanged.
func LearnedOffsets(x *Index, learned Learned) (n int, err error) {
	err = x.Guard(func() { n = learnedOffsets(x, learned) })
	return n, err
}

func learnedOffsets(x *Index, learned Learned) int {
	defer runtime.KeepAlive(x)
	n := 0
	for i := 0; i < x.N(); i++ {
		if _, ok := learnedFileOffset(x, i, learned); ok {
			n++
		}
	}
	for i := range x.Exts {
		if _, ok := learnedExtOffset(x, &x.Exts[i], learned); ok {
			n++
		}
	}
	return n
}

// encodeMeta encodes the meta section.
func encodeMeta(t *Tree, m *Meta) []byte {
	iw := &idxWriter{b: &bytes.Buffer{}}
	writeMeta(iw, t, m)
	return iw.b.Bytes()
}

// MetaBytes is the length of the meta section, counted without encoding
// it (Info calls this at every metrics scrape).
func MetaBytes(t *Tree, m *Meta) int {
	iw := &idxWriter{}
	writeMeta(iw, t, m)
	return iw.n
}

// writeMeta writes the meta section to iw.
func writeMeta(iw *idxWriter, a *Tree, m *Meta) {
	x := &a.Idx
	prov := m.Prov
	iw.str(m.Bucket)
	iw.str(m.ManifestKey)
	iw.i64(prov.MaxFrame)
	for _, v := range limitsList(prov.Limits) {
		iw.i64(v)
	}
	iw.u32(uint32(len(prov.Sources)))
	for _, s := range prov.Sources {
		iw.str(s.Key)
		iw.str(s.ETag)
		iw.i64(s.Size)
		iw.i64(s.ModSec)
		iw.raw(s.SHA256[:])
		iw.b1(s.Absent)
	}
	iw.str(a.Upload)
	iw.str(a.Version)
	_, zoff := a.CreatedAt.Zone()
	iw.i64(a.CreatedAt.Unix())
	iw.u32(uint32(a.CreatedAt.Nanosecond()))
	iw.u32(uint32(int32(zoff)))
	iw.str(a.RegionName)
	iw.strs(a.Chain)
	iw.strs(a.Shapes)
	iw.strs(a.Warnings)
	iw.i64(int64(x.Frames))
	iw.i64(x.Compressed)
	iw.i64(x.Uncompressed)
	nFrames := 0
	for i := range a.Chunks {
		nFrames += len(a.Chunks[i].Frames)
	}
	iw.u32(uint32(len(a.Chunks)))
	iw.u64(uint64(nFrames))
	for i := range a.Chunks {
		c := &a.Chunks[i]
		iw.str(c.Key)
		iw.u8(uint8(c.Kind))
		iw.i64(c.Size)
		iw.b1(c.HasSum)
		iw.raw(c.Sum[:])
		iw.i64(c.MaxTar)
		iw.u32(uint32(len(c.Frames)))
	}
	for i := range a.Chunks {
		for _, f := range a.Chunks[i].Frames {
			iw.i64(f.COff)
			iw.i64(f.CSize)
			iw.i64(f.UOff)
			iw.i64(f.USize)
			iw.b1(f.HasSum)
			iw.raw(f.Sum[:])
		}
	}
	iw.strs(x.Roots)
	iw.strs(x.Ctypes)
	units := m.Units
	iw.u32(uint32(len(units)))
	for _, u := range units {
		iw.u32(uint32(u.Chunk))
		iw.u8(uint8(u.Kind))
		iw.i64(u.Off)
		iw.i64(u.N)
		iw.raw(u.Sum[:])
		iw.str(u.ETag)
	}
}

// asBytes views a column's memory as bytes (little-endian hosts only).
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// stringBytes views a string column's bytes (written, never changed).
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// writeInts writes an integer column little-endian.
func writeInts[T int32 | uint32 | int64 | uint16](t *treeWriter, s []T) {
	if hostLittleEndian() {
		t.write(asBytes(s))
		return
	}
	var buf [4096]byte
	sz := int(unsafe.Sizeof(T(0)))
	for len(s) > 0 {
		k := min(len(s), len(buf)/sz)
		for i, v := range s[:k] {
			switch sz {
			case 2:
				binary.LittleEndian.PutUint16(buf[i*2:], uint16(v))
			case 4:
				binary.LittleEndian.PutUint32(buf[i*4:], uint32(v))
			default:
				binary.LittleEndian.PutUint64(buf[i*8:], uint64(v))
			}
		}
		t.write(buf[:k*sz])
		s = s[k:]
	}
}

// putExtRec encodes one extent record.
func putExtRec(b []byte, r *ExtRec) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(r.FileOff))
	le.PutUint64(b[8:], uint64(r.Off))
	le.PutUint64(b[16:], uint64(r.Length))
	copy(b[24:56], r.Sum[:])
	le.PutUint32(b[56:], uint32(r.Chunk))
	le.PutUint32(b[60:], r.Name)
	le.PutUint32(b[64:], r.NameLen)
	b[68] = r.HasSum
	b[69], b[70], b[71] = 0, 0, 0
}

// indexHeader is the header of the archive's index file: its counts and
// optional columns, with metaLen the length of the meta section.
func indexHeader(x *Index, metaLen int) FileHeader {
	h := FileHeader{files: uint64(x.N()), namesLen: uint64(len(x.Names)), exts: uint64(len(x.Exts)),
		extNamesLen: uint64(len(x.ExtNames)), tombs: uint64(x.Tombs.N()), tombNamesLen: uint64(len(x.Tombs.Names)),
		metaLen: uint64(metaLen)}
	if x.MD5 != nil {
		h.cols |= ColMD5
	}
	if x.Ctype != nil {
		h.cols |= ColCtype
	}
	if x.Link != nil {
		h.cols |= ColLink
	}
	return h
}

// FileBytes is the size Write writes, from the counts alone.
func FileBytes(t *Tree, m *Meta) int64 {
	h := indexHeader(&t.Idx, MetaBytes(t, m))
	_, _, end, ok := h.Layout()
	if !ok {
		return -1
	}
	return int64(end) + TrailerBytes
}

// Learned returns the tar offset the read path learned for a piece whose
// manifest gave none (chunkio.Set.LearnedOffset), if it did.
type Learned func(chunk int32, tarName string, length int64) (int64, bool)

// Meta is what an index file records besides the tree: what it indexes,
// the provenance (never nil) and the verified units of the read path.
type Meta struct {
	Bucket, ManifestKey string
	Prov                *Provenance
	Units               []chunkio.VerifiedUnit
}

// Write writes tree a (of the archive called name) and m in the
// persistent index format. Offsets the read path has learned by walking
// legacy chunks (learned, may be nil) are recorded.
func Write(w io.Writer, name string, a *Tree, m *Meta, learned Learned) error {
	defer runtime.KeepAlive(a)
	x := &a.Idx
	if len(a.Chunks) > math.MaxInt32 || x.N() > math.MaxInt32 || len(x.Exts) > math.MaxInt32 {
		return fmt.Errorf("archive %q: too large for the index format", name)
	}
	meta := encodeMeta(a, m)
	h := indexHeader(x, len(meta))
	off, _, end, ok := h.Layout()
	if !ok {
		return fmt.Errorf("archive %q: too large for the index format", name)
	}
	t := newTreeWriter(w)
	var hdr [HeaderBytes]byte
	copy(hdr[:], indexMagic)
	le := binary.LittleEndian
	le.PutUint32(hdr[8:], FormatVersion)
	for i, p := range h.counts() {
		le.PutUint64(hdr[16+8*i:], *p)
	}
	t.write(hdr[:])
	t.write(meta)

	section := func(s int) { t.padTo(off[s]) }
	section(SecNames)
	t.write(stringBytes(x.Names))
	section(SecEnds)
	writeInts(t, x.Ends)
	section(SecSize)
	writeInts(t, x.Size)
	section(SecMsec)
	writeInts(t, x.Msec)
	section(SecMnsec)
	writeInts(t, x.Mnsec)
	section(SecSum)
	t.write(asBytes(x.Sum))
	section(SecFlags)
	t.write(x.Flags)
	section(SecChunk)
	writeInts(t, x.Chunk)
	section(SecOff)
	writeOffsets(t, x, learned)
	section(SecRoot)
	writeInts(t, x.Root)
	section(SecMD5)
	t.write(asBytes(x.MD5))
	section(SecCtype)
	writeInts(t, x.Ctype)
	section(SecLink)
	writeInts(t, x.Link)
	section(SecExts)
	var rec [extRecBytes]byte
	for i := range x.Exts {
		r := x.Exts[i]
		if lo, ok := learnedExtOffset(x, &r, learned); ok {
			r.Off = lo
		}
		putExtRec(rec[:], &r)
		t.write(rec[:])
	}
	section(SecExtNames)
	t.write(stringBytes(x.ExtNames))
	section(SecTombNames)
	t.write(stringBytes(x.Tombs.Names))
	section(SecTombEnds)
	writeInts(t, x.Tombs.Ends)
	section(SecTombLink)
	writeInts(t, x.Tombs.Link)
	t.padTo(end)
	if err := t.finish(); err != nil {
		return fmt.Errorf("archive %q: write index: %w", name, err)
	}
	return nil
}

// writeOffsets writes the off column, with the offsets the read path has
// learned for single extents whose manifest gave none.
func writeOffsets(t *treeWriter, x *Index, learned Learned) {
	unknown := false
	for i, v := range x.Off {
		if v < 0 && x.Flags[i]&FlagMulti == 0 {
			unknown = true
			break
		}
	}
	if !unknown || learned == nil {
		writeInts(t, x.Off)
		return
	}
	buf := make([]int64, 0, 512)
	for i, v := range x.Off {
		if lo, ok := learnedFileOffset(x, i, learned); ok {
			v = lo
		}
		buf = append(buf, v)
		if len(buf) == cap(buf) {
			writeInts(t, buf)
			buf = buf[:0]
		}
	}
	writeInts(t, buf)
}

// ---------------------------------------------------------------------------
// Reading

// Decoder holds a verified (tree hash) index file, its header and its
// layout.
type Decoder struct {
	name string
	data []byte
	h    FileHeader
	off  [NumSections]uint64
	size [NumSections]uint64
	c    idxCursor // the meta section

	// copyCols makes every column a copy instead of a view of data
	// (machines that are not little-endian; tests of that path).
	copyCols bool
	// anyPrefix skips the confinement of chunk keys (AnyKeyPrefix).
	anyPrefix bool

	bucket, manifestKey string
	units               []chunkio.VerifiedUnit

	mm *Mapping // the file's mapping (Map), nil for bytes in memory
}

// CopyColumns makes Tree decode every column as a copy instead of a view
// of the file's bytes: the path of hosts that are not little-endian, for
// tests of it on hosts that are. Call it before Tree.
func (d *Decoder) CopyColumns() { d.copyCols = true }

// AnyKeyPrefix makes Tree accept chunk and direct keys under any prefix
// (every other check stays): for a check of whether a file is damaged,
// made without the options of the replicas that will serve it, which
// apply their own confinement when they load it. Call it before Tree.
func (d *Decoder) AnyKeyPrefix() { d.anyPrefix = true }

// Bucket and ManifestKey are what the file says it indexes (set by
// Provenance).
func (d *Decoder) Bucket() string      { return d.bucket }
func (d *Decoder) ManifestKey() string { return d.manifestKey }

// Units are the verified units the file recorded (set by Tree).
func (d *Decoder) Units() []chunkio.VerifiedUnit { return d.units }

// Mapping is the decoder's mapping (Map), nil for Decode.
func (d *Decoder) Mapping() *Mapping { return d.mm }

func (d *Decoder) errf(format string, args ...any) error {
	return fmt.Errorf("index %s: %w: %s", d.name, ErrBadIndex, fmt.Sprintf(format, args...))
}

// Decode checks length, magic, version and the tree hash, then
// the header: its counts and the layout they give, zero padding.
func Decode(data []byte, name string) (*Decoder, error) {
	d := &Decoder{name: name, data: data, copyCols: !hostLittleEndian()}
	if len(data) < HeaderBytes+TrailerBytes {
		return nil, d.errf("%d bytes: too short", len(data))
	}
	if string(data[:8]) != indexMagic {
		return nil, d.errf("not a wharf index (magic %q)", data[:8])
	}
	if v := binary.LittleEndian.Uint32(data[8:12]); v != FormatVersion {
		return nil, d.errf("format version %d, this wharf reads version %d", v, FormatVersion)
	}
	body := data[:len(data)-TrailerBytes]
	if sum := TreeHash(body); !bytes.Equal(sum[:], data[len(body):]) {
		return nil, d.errf("checksum mismatch (file corrupted or truncated)")
	}
	le := binary.LittleEndian
	if r := le.Uint32(data[12:16]); r != 0 {
		return nil, d.errf("reserved field %d", r)
	}
	d.h = ParseHeader(data)
	h := &d.h
	if !allZero(data[80:HeaderBytes]) {
		return nil, d.errf("reserved header bytes not zero")
	}
	off, size, end, ok := h.Layout()
	if !ok || end != uint64(len(body)) {
		return nil, d.errf("counts (%d files, %d name bytes, %d extents, %d tombstones, %d meta bytes, columns %#x) do not lay out the %d bytes present",
			h.files, h.namesLen, h.exts, h.tombs, h.metaLen, h.cols, len(body))
	}
	d.off, d.size = off, size
	at := uint64(HeaderBytes) + h.metaLen
	for s := range off {
		if !allZero(body[at:off[s]]) {
			return nil, d.errf("padding before section %d not zero", s)
		}
		at = off[s] + size[s]
	}
	if !allZero(body[at:]) {
		return nil, d.errf("padding at the end not zero")
	}
	d.c = idxCursor{b: data[HeaderBytes : HeaderBytes+h.metaLen]}
	return d, nil
}

func allZero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

// section returns section s's bytes.
func (d *Decoder) section(s int) []byte {
	return d.data[d.off[s] : d.off[s]+d.size[s] : d.off[s]+d.size[s]]
}

// inPlace reports whether b can be used as a column of elements aligned
// to align bytes.
func (d *Decoder) inPlace(b []byte, align uintptr) bool {
	return !d.copyCols && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%align == 0
}

// colInts returns integer section s as a column: a view of the file, or a
// decoded copy.
func colInts[T int32 | uint32 | int64 | uint16](d *Decoder, s int) []T {
	b := d.section(s)
	sz := int(unsafe.Sizeof(T(0)))
	if len(b) == 0 {
		return nil
	}
	if d.inPlace(b, uintptr(sz)) {
		return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
	}
	out := make([]T, len(b)/sz)
	for i := range out {
		switch sz {
		case 2:
			out[i] = T(binary.LittleEndian.Uint16(b[i*2:]))
		case 4:
			out[i] = T(binary.LittleEndian.Uint32(b[i*4:]))
		default:
			out[i] = T(binary.LittleEndian.Uint64(b[i*8:]))
		}
	}
	return out
}

// colArrays returns section s as a column of byte arrays.
func colArrays[T [16]byte | [32]byte](d *Decoder, s int) []T {
	b := d.section(s)
	var zero T
	sz := len(zero)
	if len(b) == 0 {
		return nil
	}
	if !d.copyCols {
		return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
	}
	out := make([]T, len(b)/sz)
	copy(asBytes(out), b)
	return out
}

// colString returns section s as a string.
func (d *Decoder) colString(s int) string {
	b := d.section(s)
	if len(b) == 0 {
		return ""
	}
	if !d.copyCols {
		return unsafe.String(unsafe.SliceData(b), len(b))
	}
	return string(b)
}

// colExts returns the extent records, checking their reserved bytes.
func (d *Decoder) colExts() ([]ExtRec, error) {
	b := d.section(SecExts)
	if len(b) == 0 {
		return nil, nil
	}
	for i := 0; i < len(b); i += extRecBytes {
		if b[i+68] > 1 || b[i+69]|b[i+70]|b[i+71] != 0 {
			return nil, d.errf("Extent %d: has-sum byte %d, reserved bytes %x", i/extRecBytes, b[i+68], b[i+69:i+72])
		}
	}
	if d.inPlace(b, 8) {
		return unsafe.Slice((*ExtRec)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/extRecBytes), nil
	}
	le := binary.LittleEndian
	out := make([]ExtRec, len(b)/extRecBytes)
	for i := range out {
		r := b[i*extRecBytes:]
		e := &out[i]
		e.FileOff, e.Off, e.Length = int64(le.Uint64(r[0:])), int64(le.Uint64(r[8:])), int64(le.Uint64(r[16:]))
		copy(e.Sum[:], r[24:56])
		e.Chunk, e.Name, e.NameLen, e.HasSum = int32(le.Uint32(r[56:])), le.Uint32(r[60:]), le.Uint32(r[64:]), r[68]
	}
	return out, nil
}

// Provenance decodes the provenance (the start of the meta section): what
// the file indexes and the manifests it was built from. Call it first,
// then Tree.
func (d *Decoder) Provenance() (p *Provenance, err error) {
	if gerr := d.guard(func() { p, err = d.provenance() }); gerr != nil {
		return nil, gerr
	}
	return p, err
}

// guard runs f, a reader of d's bytes: under guardMapped when they are a
// mapping (a file truncated in place while it is decoded fails the decode
// with ErrFileChanged, not the process).
func (d *Decoder) guard(f func()) error {
	if d.mm == nil {
		f()
		return nil
	}
	return guardMapped(d.mm.path, f)
}

func (d *Decoder) provenance() (*Provenance, error) {
	c := &d.c
	d.bucket, d.manifestKey = c.str(), c.str()
	p := &Provenance{MaxFrame: c.i64()}
	var lim [7]int64
	for i := range lim {
		lim[i] = c.i64()
		if c.err == nil && lim[i] <= 0 {
			return nil, d.errf("limit %d is %d", i, lim[i])
		}
	}
	if c.err == nil && p.MaxFrame <= 0 {
		return nil, d.errf("max frame bytes %d", p.MaxFrame)
	}
	p.Limits = manifest.Limits{MaxStoredBytes: lim[0], MaxJSONBytes: lim[1], MaxFiles: int(lim[2]), MaxChunks: int(lim[3]),
		MaxFrames: int(lim[4]), MaxPathBytes: int(lim[5]), MaxChainDepth: int(lim[6])}
	n := c.u32()
	if c.err == nil && uint64(n)*idxSourceMin > c.left() {
		return nil, d.errf("%d sources cannot fit in %d bytes", n, c.left())
	}
	if c.err == nil && n > 0 {
		p.Sources = make([]Source, n)
	}
	for i := range p.Sources {
		s := &p.Sources[i]
		s.Key, s.ETag = c.str(), c.str()
		s.Size, s.ModSec = c.i64(), c.i64()
		copy(s.SHA256[:], c.take(32))
		s.Absent = c.flag()
		if c.err == nil && (s.Key == "" || s.Size < 0) {
			return nil, d.errf("source %d: key %q size %d", i, s.Key, s.Size)
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

// Tree decodes the rest of the meta section (after Provenance) and the
// columns, validates the tree and returns it: served from the file's bytes
// in place (the mapping, for a decoder from Map), which must not change
// while it is used. allow are the key prefixes, besides the archive's own
// (manifest.KeyRoot of the recorded manifest key), its chunk and direct
// keys may lie under (manifest.Confined). The verified units the file
// recorded are d.Units() after.
func (d *Decoder) Tree(allow []string) (t *Tree, err error) {
	if gerr := d.guard(func() { t, err = d.tree(allow) }); gerr != nil {
		return nil, gerr
	}
	return t, err
}

func (d *Decoder) tree(allow []string) (*Tree, error) {
	c := &d.c
	a := &Tree{}
	a.Upload, a.Version = c.str(), c.str()
	sec, nsec, zoff := c.i64(), c.u32(), int32(c.u32())
	if nsec >= 1e9 {
		return nil, d.errf("created: nanoseconds %d", nsec)
	}
	a.CreatedAt = time.Unix(sec, int64(nsec)).UTC()
	if zoff != 0 {
		a.CreatedAt = a.CreatedAt.In(time.FixedZone("", int(zoff)))
	}
	a.RegionName = c.str()
	a.Chain = c.strs()
	a.Shapes = c.strs()
	a.Warnings = c.strs()
	x := &a.Idx
	x.Frames = int(c.i64())
	x.Compressed, x.Uncompressed = c.i64(), c.i64()
	if c.err != nil {
		return nil, d.errf("metadata: %v", c.err)
	}
	if len(a.Chain) == 0 || a.Chain[0] != a.Upload {
		return nil, d.errf("chain %q does not start with upload id %q", a.Chain, a.Upload)
	}
	if len(a.Chain) > math.MaxUint16+1 {
		return nil, d.errf("chain of %d uploads", len(a.Chain))
	}

	// chunks
	nChunks, nFrames := c.u32(), c.u64()
	if c.err == nil && (nChunks > math.MaxInt32 || uint64(nChunks)*idxChunkMin > c.left() || nFrames > c.left()/idxFrameSize) {
		return nil, d.errf("%d chunks and %d frames cannot fit in %d bytes", nChunks, nFrames, c.left())
	}
	if c.err != nil {
		return nil, d.errf("chunks: %v", c.err)
	}
	if x.Frames < 0 || uint64(x.Frames) != nFrames || x.Compressed < 0 || x.Uncompressed < 0 {
		return nil, d.errf("totals (%d frames, %d, %d bytes) disagree with the chunks", x.Frames, x.Compressed, x.Uncompressed)
	}
	a.Chunks = make([]chunkio.Chunk, nChunks)
	frameCounts := make([]uint32, nChunks)
	root := manifest.KeyRoot(d.manifestKey)
	var nf uint64
	for i := range a.Chunks {
		ch := &a.Chunks[i]
		ch.Key = c.str()
		ch.Kind = chunkio.Kind(c.u8())
		ch.Size = c.i64()
		ch.HasSum = c.flag()
		copy(ch.Sum[:], c.take(32))
		ch.MaxTar = c.i64()
		frameCounts[i] = c.u32()
		nf += uint64(frameCounts[i])
		if c.err != nil {
			return nil, d.errf("chunk %d: %v", i, c.err)
		}
		if ch.Key == "" || ch.Kind > chunkio.Direct || ch.Size < 0 || ch.MaxTar < 0 || ch.MaxTar > 0 && ch.Kind != chunkio.StreamZstd {
			return nil, d.errf("chunk %d: key %q kind %d size %d max-tar %d", i, ch.Key, ch.Kind, ch.Size, ch.MaxTar)
		}
		if (frameCounts[i] > 0) != (ch.Kind == chunkio.FramedZstd) {
			return nil, d.errf("chunk %s: %d frames on a %s chunk", ch.Key, frameCounts[i], ch.Kind)
		}
		// The rules the manifest path applies to every object key: no
		// ".." segment, and the one confinement rule under the options
		// in force now (an index built with a prefix since disallowed is
		// not used: Open then reads the manifest, which refuses it).
		if err := manifest.CheckObjectKey(ch.Key); err != nil {
			return nil, d.errf("chunk %d: %v", i, err)
		}
		if !d.anyPrefix && !manifest.Confined(root, allow, ch.Key) {
			return nil, d.errf("chunk %d: key %q lies outside the archive's prefix %q/ and the allowed ones", i, ch.Key, root)
		}
	}
	if nf != nFrames {
		return nil, d.errf("chunks hold %d frames, the meta says %d", nf, nFrames)
	}
	frames := make([]chunkio.Frame, nFrames)
	fb := c.take(nFrames * idxFrameSize)
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
	uncomp := make([]int64, nChunks) // tar bytes of framed chunks
	var compressed int64
	var at uint64
	for i := range a.Chunks {
		ch := &a.Chunks[i]
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
	if compressed != x.Compressed {
		return nil, d.errf("chunks total %d bytes, header says %d", compressed, x.Compressed)
	}
	x.Roots = c.strs()
	x.Ctypes = c.strs()
	if c.err != nil {
		return nil, d.errf("roots: %v", c.err)
	}
	units, err := d.verifiedUnits(len(a.Chunks))
	if err != nil {
		return nil, err
	}
	d.units = units
	if c.off != len(c.b) {
		return nil, d.errf("%d bytes left over after the meta section", len(c.b)-c.off)
	}

	if err := d.columns(x, len(a.Chain)); err != nil {
		return nil, err
	}
	x.mm = d.mm
	if err := d.checkFiles(x, a.Chunks, uncomp); err != nil {
		return nil, err
	}
	if err := d.checkTombstones(x, len(a.Chain)); err != nil {
		return nil, err
	}
	return a, nil
}

// columns sets x's columns from the file.
func (d *Decoder) columns(x *Index, nChain int) error {
	x.Names = d.colString(SecNames)
	x.Ends = colInts[uint32](d, SecEnds)
	x.Size = colInts[int64](d, SecSize)
	x.Msec = colInts[int64](d, SecMsec)
	x.Mnsec = colInts[uint32](d, SecMnsec)
	x.Sum = colArrays[[32]byte](d, SecSum)
	x.Flags = d.section(SecFlags)
	if len(x.Flags) == 0 {
		x.Flags = nil
	} else if d.copyCols {
		x.Flags = bytes.Clone(x.Flags)
	}
	x.Chunk = colInts[int32](d, SecChunk)
	x.Off = colInts[int64](d, SecOff)
	x.Root = colInts[uint32](d, SecRoot)
	// An optional column is present (not nil, maybe empty) exactly when
	// its bit is set, as WriteIndex sets the bit.
	x.MD5 = colArrays[[16]byte](d, SecMD5)
	if d.h.cols&ColMD5 != 0 && x.MD5 == nil {
		x.MD5 = [][16]byte{}
	}
	x.Ctype = colInts[uint32](d, SecCtype)
	if d.h.cols&ColCtype != 0 && x.Ctype == nil {
		x.Ctype = []uint32{}
	}
	x.Link = colInts[uint16](d, SecLink)
	if d.h.cols&ColLink != 0 && x.Link == nil {
		x.Link = []uint16{}
	}
	exts, err := d.colExts()
	if err != nil {
		return err
	}
	x.Exts = exts
	x.ExtNames = d.colString(SecExtNames)
	x.Tombs.Names = d.colString(SecTombNames)
	x.Tombs.Ends = colInts[uint32](d, SecTombEnds)
	x.Tombs.Link = colInts[uint16](d, SecTombLink)

	switch {
	case (x.Ctype != nil) != (len(x.Ctypes) > 0):
		return d.errf("content-type column present %v with %d content types", x.Ctype != nil, len(x.Ctypes))
	case len(x.Ctypes) == 1 && x.Ctypes[0] == "":
		return d.errf("content types: only the empty one")
	case (d.h.cols&ColLink != 0) != (nChain > 1):
		return d.errf("link column present %v for a chain of %d", d.h.cols&ColLink != 0, nChain)
	case d.h.tombs > 0 && nChain <= 1:
		return d.errf("%d tombstones in a single upload", d.h.tombs)
	}
	return nil
}

// verifiedUnits decodes the verified-unit section: chunks in range, known
// kinds, non-negative spans, an ETag each.
func (d *Decoder) verifiedUnits(nChunks int) ([]chunkio.VerifiedUnit, error) {
	c := &d.c
	n := c.u32()
	const minUnit = 4 + 1 + 8 + 8 + 32 + 4
	if c.err == nil && uint64(n)*minUnit > c.left() {
		return nil, d.errf("%d verified units cannot fit in %d bytes", n, c.left())
	}
	var out []chunkio.VerifiedUnit
	for i := uint32(0); i < n && c.err == nil; i++ {
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
	if c.err != nil {
		return nil, d.errf("verified units: %v", c.err)
	}
	return out, nil
}

// ParseHeader reads the counts of an index file's header (data holds at
// least HeaderBytes; nothing is checked: Decode checks).
func ParseHeader(data []byte) FileHeader {
	var h FileHeader
	for i, p := range h.counts() {
		*p = binary.LittleEndian.Uint64(data[16+8*i:])
	}
	return h
}
