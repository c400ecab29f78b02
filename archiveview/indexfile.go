package archiveview

// The persistent index file, format version 3: laid out so that an
// archive is served from the file in place (mapped, indexmap_unix.go)
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
// slice over the file's bytes; index.go's columns are exactly these.
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
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

const (
	indexMagic         = "WHARFIDX"
	indexFormatVersion = 3
	indexHeaderBytes   = 128
	indexTrailerBytes  = sha256.Size
	indexAlign         = 64
	indexHashBlock     = 8 << 20

	colMD5   = 1 << 0
	colCtype = 1 << 1
	colLink  = 1 << 2

	extRecBytes = 72

	knownFlags = flagSum | flagMD5 | flagMulti | flagIdentity | flagSplit

	// Fixed bytes per element of the meta section, for count checks.
	idxSourceMin = 4 + 4 + 8 + 8 + 32 + 1
	idxStrMin    = 4
	idxChunkMin  = 4 + 1 + 8 + 1 + 32 + 8 + 4
	idxFrameSize = 8*4 + 1 + 32
)

// The layout of extRec is the file's extent record: asserted at compile
// time (a mismatch makes one of these constants negative).
const (
	_ = uint(unsafe.Sizeof(extRec{}) - extRecBytes)
	_ = uint(extRecBytes - unsafe.Sizeof(extRec{}))
	_ = uint(unsafe.Offsetof(extRec{}.sum) - 24)
	_ = uint(24 - unsafe.Offsetof(extRec{}.sum))
	_ = uint(unsafe.Offsetof(extRec{}.chunk) - 56)
	_ = uint(56 - unsafe.Offsetof(extRec{}.chunk))
	_ = uint(unsafe.Offsetof(extRec{}.hasSum) - 68)
	_ = uint(68 - unsafe.Offsetof(extRec{}.hasSum))
)

// Column sections, in file order.
const (
	secNames = iota
	secEnds
	secSize
	secMsec
	secMnsec
	secSum
	secFlags
	secChunk
	secOff
	secRoot
	secMD5
	secCtype
	secLink
	secExts
	secExtNames
	secTombNames
	secTombEnds
	secTombLink
	numSections
)

// fileHeader is the header's counts.
type fileHeader struct {
	files, namesLen, exts, extNamesLen, tombs, tombNamesLen, cols, metaLen uint64
}

func alignUp(v uint64) uint64 { return (v + indexAlign - 1) &^ (indexAlign - 1) }

// layout returns every section's offset and length and the end of the
// body (where the trailer starts); ok is false for counts out of range.
// The bounds keep every sum far from overflowing.
func (h *fileHeader) layout() (off, size [numSections]uint64, end uint64, ok bool) {
	if h.files > math.MaxInt32 || h.exts > math.MaxInt32 || h.tombs > math.MaxInt32 ||
		h.namesLen > math.MaxUint32 || h.extNamesLen > math.MaxUint32 || h.tombNamesLen > math.MaxUint32 ||
		h.metaLen > 1<<40 || h.cols&^(colMD5|colCtype|colLink) != 0 {
		return off, size, 0, false
	}
	f := h.files
	size = [numSections]uint64{
		secNames: h.namesLen, secEnds: 4 * f, secSize: 8 * f, secMsec: 8 * f, secMnsec: 4 * f,
		secSum: 32 * f, secFlags: f, secChunk: 4 * f, secOff: 8 * f, secRoot: 4 * f,
		secExts: extRecBytes * h.exts, secExtNames: h.extNamesLen,
		secTombNames: h.tombNamesLen, secTombEnds: 4 * h.tombs, secTombLink: 2 * h.tombs,
	}
	if h.cols&colMD5 != 0 {
		size[secMD5] = 16 * f
	}
	if h.cols&colCtype != 0 {
		size[secCtype] = 4 * f
	}
	if h.cols&colLink != 0 {
		size[secLink] = 2 * f
	}
	at := uint64(indexHeaderBytes) + h.metaLen
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
// The tree hash

// treeHash is the trailer of body: sha256 over the sha256 of each
// indexHashBlock-byte block, the blocks hashed by up to 4 goroutines.
func treeHash(body []byte) [32]byte {
	nb := (len(body) + indexHashBlock - 1) / indexHashBlock
	sums := make([]byte, 32*nb)
	workers := min(runtime.GOMAXPROCS(0), 4, nb)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := w; b < nb; b += workers {
				blk := body[b*indexHashBlock : min(len(body), (b+1)*indexHashBlock)]
				s := sha256.Sum256(blk)
				copy(sums[32*b:], s[:])
			}
		}()
	}
	wg.Wait()
	return sha256.Sum256(sums)
}

// treeWriter writes through a buffer, hashing as treeHash does.
type treeWriter struct {
	w    *bufio.Writer
	h    hash.Hash
	n    uint64 // bytes written
	inBl int    // bytes of the current block
	sums []byte
	err  error
	zero [indexAlign]byte
}

func newTreeWriter(w io.Writer) *treeWriter {
	return &treeWriter{w: bufio.NewWriterSize(w, 1<<20), h: sha256.New()}
}

func (t *treeWriter) write(b []byte) {
	if t.err != nil {
		return
	}
	if _, t.err = t.w.Write(b); t.err != nil {
		return
	}
	t.n += uint64(len(b))
	for len(b) > 0 {
		k := min(len(b), indexHashBlock-t.inBl)
		t.h.Write(b[:k])
		t.inBl += k
		b = b[k:]
		if t.inBl == indexHashBlock {
			t.sums = t.h.Sum(t.sums)
			t.h.Reset()
			t.inBl = 0
		}
	}
}

// padTo writes zeros up to offset at.
func (t *treeWriter) padTo(at uint64) {
	for t.err == nil && t.n < at {
		t.write(t.zero[:min(uint64(len(t.zero)), at-t.n)])
	}
}

// finish writes the trailer and flushes.
func (t *treeWriter) finish() error {
	if t.err != nil {
		return t.err
	}
	if t.inBl > 0 || t.n == 0 {
		t.sums = t.h.Sum(t.sums)
	}
	trailer := sha256.Sum256(t.sums)
	if _, err := t.w.Write(trailer[:]); err != nil {
		return err
	}
	return t.w.Flush()
}

// ---------------------------------------------------------------------------
// Writing

// idxWriter encodes the meta section's fields into b, or (b nil) only
// counts their bytes in n.
type idxWriter struct {
	b   *bytes.Buffer
	n   int
	buf [8]byte
}

func (w *idxWriter) raw(b []byte) {
	w.n += len(b)
	if w.b != nil {
		w.b.Write(b)
	}
}
func (w *idxWriter) u8(v uint8)   { w.buf[0] = v; w.raw(w.buf[:1]) }
func (w *idxWriter) u32(v uint32) { binary.LittleEndian.PutUint32(w.buf[:4], v); w.raw(w.buf[:4]) }
func (w *idxWriter) u64(v uint64) { binary.LittleEndian.PutUint64(w.buf[:8], v); w.raw(w.buf[:8]) }
func (w *idxWriter) i64(v int64)  { w.u64(uint64(v)) }
func (w *idxWriter) str(s string) {
	w.u32(uint32(len(s)))
	w.n += len(s)
	if w.b != nil {
		w.b.WriteString(s)
	}
}
func (w *idxWriter) strs(s []string) {
	w.u32(uint32(len(s)))
	for _, v := range s {
		w.str(v)
	}
}
func (w *idxWriter) b1(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

// learnedFileOffset returns the tar offset of file i's single extent when
// the manifest gave none and a completed tar walk of the read path found
// the member (name and length).
func (a *Archive) learnedFileOffset(i int) (int64, bool) {
	x := &a.idx
	if x.flags[i]&flagMulti != 0 || x.off[i] >= 0 {
		return 0, false
	}
	return a.set.LearnedOffset(x.chunk[i], x.roots[x.root[i]]+x.rawKey(i), x.size[i])
}

// learnedExtOffset is learnedFileOffset for extent record r.
func (a *Archive) learnedExtOffset(r *extRec) (int64, bool) {
	if r.off >= 0 {
		return 0, false
	}
	x := &a.idx
	return a.set.LearnedOffset(r.chunk, x.extNames[r.name:r.name+r.nameLen], r.length)
}

// LearnedOffsets is the number of extents without a manifest archive_offset
// whose tar offset the read path has learned (and WriteIndex would record).
func (a *Archive) LearnedOffsets() int {
	defer runtime.KeepAlive(a)
	n := 0
	x := &a.idx
	for i := 0; i < x.n(); i++ {
		if _, ok := a.learnedFileOffset(i); ok {
			n++
		}
	}
	for i := range x.exts {
		if _, ok := a.learnedExtOffset(&x.exts[i]); ok {
			n++
		}
	}
	return n
}

// encodeMeta encodes the meta section.
func (a *Archive) encodeMeta() []byte {
	iw := &idxWriter{b: &bytes.Buffer{}}
	a.writeMeta(iw)
	return iw.b.Bytes()
}

// metaBytes is the length of the meta section, counted without encoding
// it (Info calls this at every metrics scrape).
func (a *Archive) metaBytes() int {
	iw := &idxWriter{}
	a.writeMeta(iw)
	return iw.n
}

// writeMeta writes the meta section to iw.
func (a *Archive) writeMeta(iw *idxWriter) {
	x := &a.idx
	prov := a.prov
	if prov == nil {
		prov = &indexProvenance{maxFrame: effectiveMaxFrame(a.opts), limits: a.opts.Limits}
	}
	iw.str(a.bucket)
	iw.str(a.manifestKey)
	iw.i64(prov.maxFrame)
	for _, v := range limitsList(prov.limits) {
		iw.i64(v)
	}
	iw.u32(uint32(len(prov.sources)))
	for _, s := range prov.sources {
		iw.str(s.key)
		iw.str(s.etag)
		iw.i64(s.size)
		iw.i64(s.modSec)
		iw.raw(s.sha256[:])
		iw.b1(s.absent)
	}
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
	nFrames := 0
	for i := range a.chunks {
		nFrames += len(a.chunks[i].Frames)
	}
	iw.u32(uint32(len(a.chunks)))
	iw.u64(uint64(nFrames))
	for i := range a.chunks {
		c := &a.chunks[i]
		iw.str(c.Key)
		iw.u8(uint8(c.Kind))
		iw.i64(c.Size)
		iw.b1(c.HasSum)
		iw.raw(c.Sum[:])
		iw.i64(c.MaxTar)
		iw.u32(uint32(len(c.Frames)))
	}
	for i := range a.chunks {
		for _, f := range a.chunks[i].Frames {
			iw.i64(f.COff)
			iw.i64(f.CSize)
			iw.i64(f.UOff)
			iw.i64(f.USize)
			iw.b1(f.HasSum)
			iw.raw(f.Sum[:])
		}
	}
	iw.strs(x.roots)
	iw.strs(x.ctypes)
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
}

// asBytes views a column's memory as bytes (little-endian hosts only).
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

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
func putExtRec(b []byte, r *extRec) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(r.fileOff))
	le.PutUint64(b[8:], uint64(r.off))
	le.PutUint64(b[16:], uint64(r.length))
	copy(b[24:56], r.sum[:])
	le.PutUint32(b[56:], uint32(r.chunk))
	le.PutUint32(b[60:], r.name)
	le.PutUint32(b[64:], r.nameLen)
	b[68] = r.hasSum
	b[69], b[70], b[71] = 0, 0, 0
}

// indexHeader is the header of the archive's index file: its counts and
// optional columns, with metaLen the length of the meta section.
func (a *Archive) indexHeader(metaLen int) fileHeader {
	x := &a.idx
	h := fileHeader{files: uint64(x.n()), namesLen: uint64(len(x.names)), exts: uint64(len(x.exts)),
		extNamesLen: uint64(len(x.extNames)), tombs: uint64(x.tombs.n()), tombNamesLen: uint64(len(x.tombs.names)),
		metaLen: uint64(metaLen)}
	if x.md5 != nil {
		h.cols |= colMD5
	}
	if x.ctype != nil {
		h.cols |= colCtype
	}
	if x.link != nil {
		h.cols |= colLink
	}
	return h
}

// indexFileBytes is the size WriteIndex writes, from the counts alone.
func (a *Archive) indexFileBytes() int64 {
	h := a.indexHeader(a.metaBytes())
	_, _, end, ok := h.layout()
	if !ok {
		return -1
	}
	return int64(end) + indexTrailerBytes
}

// WriteIndex writes the archive's resolved tree in the persistent index
// format (indexfile.go). Offsets the read path has learned by walking
// legacy chunks are recorded. An archive opened by Open without
// IndexCache (not BuildIndex) has no recorded manifest sources: its file
// loads with OpenIndex but is never used as Open's cache.
func (a *Archive) WriteIndex(w io.Writer) error {
	defer runtime.KeepAlive(a)
	x := &a.idx
	if len(a.chunks) > math.MaxInt32 || x.n() > math.MaxInt32 || len(x.exts) > math.MaxInt32 {
		return fmt.Errorf("archive %q: too large for the index format", a.name)
	}
	meta := a.encodeMeta()
	h := a.indexHeader(len(meta))
	off, _, end, ok := h.layout()
	if !ok {
		return fmt.Errorf("archive %q: too large for the index format", a.name)
	}
	t := newTreeWriter(w)
	var hdr [indexHeaderBytes]byte
	copy(hdr[:], indexMagic)
	le := binary.LittleEndian
	le.PutUint32(hdr[8:], indexFormatVersion)
	for i, v := range []uint64{h.files, h.namesLen, h.exts, h.extNamesLen, h.tombs, h.tombNamesLen, h.cols, h.metaLen} {
		le.PutUint64(hdr[16+8*i:], v)
	}
	t.write(hdr[:])
	t.write(meta)

	section := func(s int) { t.padTo(off[s]) }
	section(secNames)
	t.write(unsafe.Slice(unsafe.StringData(x.names), len(x.names)))
	section(secEnds)
	writeInts(t, x.ends)
	section(secSize)
	writeInts(t, x.size)
	section(secMsec)
	writeInts(t, x.msec)
	section(secMnsec)
	writeInts(t, x.mnsec)
	section(secSum)
	t.write(asBytes(x.sum))
	section(secFlags)
	t.write(x.flags)
	section(secChunk)
	writeInts(t, x.chunk)
	section(secOff)
	a.writeOffsets(t)
	section(secRoot)
	writeInts(t, x.root)
	section(secMD5)
	t.write(asBytes(x.md5))
	section(secCtype)
	writeInts(t, x.ctype)
	section(secLink)
	writeInts(t, x.link)
	section(secExts)
	var rec [extRecBytes]byte
	for i := range x.exts {
		r := x.exts[i]
		if lo, ok := a.learnedExtOffset(&r); ok {
			r.off = lo
		}
		putExtRec(rec[:], &r)
		t.write(rec[:])
	}
	section(secExtNames)
	t.write(unsafe.Slice(unsafe.StringData(x.extNames), len(x.extNames)))
	section(secTombNames)
	t.write(unsafe.Slice(unsafe.StringData(x.tombs.names), len(x.tombs.names)))
	section(secTombEnds)
	writeInts(t, x.tombs.ends)
	section(secTombLink)
	writeInts(t, x.tombs.link)
	t.padTo(end)
	if err := t.finish(); err != nil {
		return fmt.Errorf("archive %q: write index: %w", a.name, err)
	}
	return nil
}

// writeOffsets writes the off column, with the offsets the read path has
// learned for single extents whose manifest gave none.
func (a *Archive) writeOffsets(t *treeWriter) {
	x := &a.idx
	learned := false
	for i, v := range x.off {
		if v < 0 && x.flags[i]&flagMulti == 0 {
			learned = true
			break
		}
	}
	if !learned {
		writeInts(t, x.off)
		return
	}
	buf := make([]int64, 0, 512)
	for i, v := range x.off {
		if lo, ok := a.learnedFileOffset(i); ok {
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

func (c *idxCursor) left() uint64 { return uint64(len(c.b) - c.off) }

// take returns the next n bytes, or nil (and fails) past the end.
func (c *idxCursor) take(n uint64) []byte {
	if c.err != nil {
		return nil
	}
	if n > c.left() {
		c.fail("truncated at byte %d (%d more bytes wanted, %d left)", c.off, n, c.left())
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

// strs reads a count and that many strings, the count checked against the
// bytes left first.
func (c *idxCursor) strs() []string {
	n := c.u32()
	if c.err != nil {
		return nil
	}
	if uint64(n)*idxStrMin > c.left() {
		c.fail("%d strings cannot fit in %d bytes", n, c.left())
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

// indexDecoder holds a verified (tree hash) index file, its header and its
// layout.
type indexDecoder struct {
	name string
	data []byte
	h    fileHeader
	off  [numSections]uint64
	size [numSections]uint64
	c    idxCursor // the meta section

	// copyCols makes every column a copy instead of a view of data
	// (machines that are not little-endian; tests of that path).
	copyCols bool

	bucket, manifestKey string
	units               []chunkio.VerifiedUnit
}

func (d *indexDecoder) errf(format string, args ...any) error {
	return fmt.Errorf("index %s: %w: %s", d.name, ErrBadIndex, fmt.Sprintf(format, args...))
}

// newIndexDecoder checks length, magic, version and the tree hash, then
// the header: its counts and the layout they give, zero padding.
func newIndexDecoder(data []byte, name string) (*indexDecoder, error) {
	d := &indexDecoder{name: name, data: data, copyCols: !hostLittleEndian()}
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
	if sum := treeHash(body); !bytes.Equal(sum[:], data[len(body):]) {
		return nil, d.errf("checksum mismatch (file corrupted or truncated)")
	}
	le := binary.LittleEndian
	if r := le.Uint32(data[12:16]); r != 0 {
		return nil, d.errf("reserved field %d", r)
	}
	h := &d.h
	for i, p := range []*uint64{&h.files, &h.namesLen, &h.exts, &h.extNamesLen, &h.tombs, &h.tombNamesLen, &h.cols, &h.metaLen} {
		*p = le.Uint64(data[16+8*i:])
	}
	if !allZero(data[80:indexHeaderBytes]) {
		return nil, d.errf("reserved header bytes not zero")
	}
	off, size, end, ok := h.layout()
	if !ok || end != uint64(len(body)) {
		return nil, d.errf("counts (%d files, %d name bytes, %d extents, %d tombstones, %d meta bytes, columns %#x) do not lay out the %d bytes present",
			h.files, h.namesLen, h.exts, h.tombs, h.metaLen, h.cols, len(body))
	}
	d.off, d.size = off, size
	at := uint64(indexHeaderBytes) + h.metaLen
	for s := range off {
		if !allZero(body[at:off[s]]) {
			return nil, d.errf("padding before section %d not zero", s)
		}
		at = off[s] + size[s]
	}
	if !allZero(body[at:]) {
		return nil, d.errf("padding at the end not zero")
	}
	d.c = idxCursor{b: data[indexHeaderBytes : indexHeaderBytes+h.metaLen]}
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
func (d *indexDecoder) section(s int) []byte {
	return d.data[d.off[s] : d.off[s]+d.size[s] : d.off[s]+d.size[s]]
}

// inPlace reports whether b can be used as a column of elements aligned
// to align bytes.
func (d *indexDecoder) inPlace(b []byte, align uintptr) bool {
	return !d.copyCols && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%align == 0
}

// colInts returns integer section s as a column: a view of the file, or a
// decoded copy.
func colInts[T int32 | uint32 | int64 | uint16](d *indexDecoder, s int) []T {
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
func colArrays[T [16]byte | [32]byte](d *indexDecoder, s int) []T {
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
func (d *indexDecoder) colString(s int) string {
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
func (d *indexDecoder) colExts() ([]extRec, error) {
	b := d.section(secExts)
	if len(b) == 0 {
		return nil, nil
	}
	for i := 0; i < len(b); i += extRecBytes {
		if b[i+68] > 1 || b[i+69]|b[i+70]|b[i+71] != 0 {
			return nil, d.errf("extent %d: has-sum byte %d, reserved bytes %x", i/extRecBytes, b[i+68], b[i+69:i+72])
		}
	}
	if d.inPlace(b, 8) {
		return unsafe.Slice((*extRec)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/extRecBytes), nil
	}
	le := binary.LittleEndian
	out := make([]extRec, len(b)/extRecBytes)
	for i := range out {
		r := b[i*extRecBytes:]
		e := &out[i]
		e.fileOff, e.off, e.length = int64(le.Uint64(r[0:])), int64(le.Uint64(r[8:])), int64(le.Uint64(r[16:]))
		copy(e.sum[:], r[24:56])
		e.chunk, e.name, e.nameLen, e.hasSum = int32(le.Uint32(r[56:])), le.Uint32(r[60:]), le.Uint32(r[64:]), r[68]
	}
	return out, nil
}

// provenance decodes the provenance (the start of the meta section).
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
	n := c.u32()
	if c.err == nil && uint64(n)*idxSourceMin > c.left() {
		return nil, d.errf("%d sources cannot fit in %d bytes", n, c.left())
	}
	if c.err == nil && n > 0 {
		p.sources = make([]indexSource, n)
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

// archive decodes the rest of the meta section and the columns, validates
// the tree and returns the archive (served from d.data in place).
func (d *indexDecoder) archive(store backend.Store, opts Options, prov *indexProvenance, mm *indexMapping) (*Archive, error) {
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
	a.chain = c.strs()
	a.shapes = c.strs()
	a.warnings = c.strs()
	x := &a.idx
	x.frames = int(c.i64())
	x.compressed, x.uncompressed = c.i64(), c.i64()
	if c.err != nil {
		return nil, d.errf("metadata: %v", c.err)
	}
	if len(a.chain) == 0 || a.chain[0] != a.uploadID {
		return nil, d.errf("chain %q does not start with upload id %q", a.chain, a.uploadID)
	}
	if len(a.chain) > math.MaxUint16+1 {
		return nil, d.errf("chain of %d uploads", len(a.chain))
	}

	// chunks
	nChunks, nFrames := c.u32(), c.u64()
	if c.err == nil && (nChunks > math.MaxInt32 || uint64(nChunks)*idxChunkMin > c.left() || nFrames > c.left()/idxFrameSize) {
		return nil, d.errf("%d chunks and %d frames cannot fit in %d bytes", nChunks, nFrames, c.left())
	}
	if c.err != nil {
		return nil, d.errf("chunks: %v", c.err)
	}
	if x.frames < 0 || uint64(x.frames) != nFrames || x.compressed < 0 || x.uncompressed < 0 {
		return nil, d.errf("totals (%d frames, %d, %d bytes) disagree with the chunks", x.frames, x.compressed, x.uncompressed)
	}
	a.chunks = make([]chunkio.Chunk, nChunks)
	frameCounts := make([]uint32, nChunks)
	root := manifest.KeyRoot(d.manifestKey)
	var nf uint64
	for i := range a.chunks {
		ch := &a.chunks[i]
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
		if !manifest.Confined(root, opts.AllowKeyPrefixes, ch.Key) {
			return nil, d.errf("chunk %d: %v", i, confinedErr(ch.Key, root))
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
	x.roots = c.strs()
	x.ctypes = c.strs()
	if c.err != nil {
		return nil, d.errf("roots: %v", c.err)
	}
	units, err := d.verifiedUnits(len(a.chunks))
	if err != nil {
		return nil, err
	}
	d.units = units
	if c.off != len(c.b) {
		return nil, d.errf("%d bytes left over after the meta section", len(c.b)-c.off)
	}

	if err := d.columns(x, len(a.chain)); err != nil {
		return nil, err
	}
	x.mm = mm
	if err := d.checkFiles(x, a.chunks, uncomp); err != nil {
		return nil, err
	}
	if err := d.checkTombstones(x, len(a.chain)); err != nil {
		return nil, err
	}
	return newArchive(*a, store, d.bucket, d.manifestKey, opts, prov, d.units, nil), nil
}

// columns sets x's columns from the file.
func (d *indexDecoder) columns(x *index, nChain int) error {
	x.names = d.colString(secNames)
	x.ends = colInts[uint32](d, secEnds)
	x.size = colInts[int64](d, secSize)
	x.msec = colInts[int64](d, secMsec)
	x.mnsec = colInts[uint32](d, secMnsec)
	x.sum = colArrays[[32]byte](d, secSum)
	x.flags = d.section(secFlags)
	if len(x.flags) == 0 {
		x.flags = nil
	} else if d.copyCols {
		x.flags = bytes.Clone(x.flags)
	}
	x.chunk = colInts[int32](d, secChunk)
	x.off = colInts[int64](d, secOff)
	x.root = colInts[uint32](d, secRoot)
	// An optional column is present (not nil, maybe empty) exactly when
	// its bit is set, as WriteIndex sets the bit.
	x.md5 = colArrays[[16]byte](d, secMD5)
	if d.h.cols&colMD5 != 0 && x.md5 == nil {
		x.md5 = [][16]byte{}
	}
	x.ctype = colInts[uint32](d, secCtype)
	if d.h.cols&colCtype != 0 && x.ctype == nil {
		x.ctype = []uint32{}
	}
	x.link = colInts[uint16](d, secLink)
	if d.h.cols&colLink != 0 && x.link == nil {
		x.link = []uint16{}
	}
	exts, err := d.colExts()
	if err != nil {
		return err
	}
	x.exts = exts
	x.extNames = d.colString(secExtNames)
	x.tombs.names = d.colString(secTombNames)
	x.tombs.ends = colInts[uint32](d, secTombEnds)
	x.tombs.link = colInts[uint16](d, secTombLink)

	switch {
	case (x.ctype != nil) != (len(x.ctypes) > 0):
		return d.errf("content-type column present %v with %d content types", x.ctype != nil, len(x.ctypes))
	case len(x.ctypes) == 1 && x.ctypes[0] == "":
		return d.errf("content types: only the empty one")
	case (d.h.cols&colLink != 0) != (nChain > 1):
		return d.errf("link column present %v for a chain of %d", d.h.cols&colLink != 0, nChain)
	case d.h.tombs > 0 && nChain <= 1:
		return d.errf("%d tombstones in a single upload", d.h.tombs)
	}
	return nil
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

// checkFiles checks every file against the tree's invariants.
func (d *indexDecoder) checkFiles(x *index, chunks []chunkio.Chunk, uncomp []int64) error {
	n := x.n()
	nRoots, nCtypes := uint32(len(x.roots)), uint32(len(x.ctypes))
	for i := range x.exts {
		r := &x.exts[i]
		if uint64(r.name)+uint64(r.nameLen) > uint64(len(x.extNames)) {
			return d.errf("extent %d: tar name [%d,+%d) past %d name bytes", i, r.name, r.nameLen, len(x.extNames))
		}
		e := r.extent(x)
		if err := checkExtent(&e, chunks, uncomp); err != nil {
			return d.errf("extent %d: %v", i, err)
		}
	}
	var prevStart, prevEnd uint32
	nextExt := int64(0)
	for i := 0; i < n; i++ {
		end := x.ends[i]
		if end <= prevEnd || uint64(end) > d.h.namesLen {
			return d.errf("file %d: key end %d (previous %d, %d name bytes)", i, end, prevEnd, d.h.namesLen)
		}
		if i > 0 && x.names[prevEnd:end] <= x.names[prevStart:prevEnd] {
			return d.errf("file %d: key %q does not sort after %q", i, x.names[prevEnd:end], x.names[prevStart:prevEnd])
		}
		if err := manifest.CheckVirtualKey(x.names[prevEnd:end]); err != nil {
			return d.errf("file %d: %v", i, err)
		}
		prevStart, prevEnd = prevEnd, end
		fsize := x.size[i]
		fl := x.flags[i]
		ch, off, root := x.chunk[i], x.off[i], x.root[i]
		if x.ctype != nil && x.ctype[i] >= nCtypes {
			return d.errf("file %d: content type %d of %d", i, x.ctype[i], nCtypes)
		}
		switch {
		case fsize < 0 || x.mnsec[i] >= 1e9:
			return d.errf("file %d: size %d, nanoseconds %d", i, fsize, x.mnsec[i])
		case fl&^knownFlags != 0:
			return d.errf("file %d: unknown flags %#x", i, fl)
		case (fl&flagSum != 0) == (fl&flagIdentity != 0):
			return d.errf("file %d: flags %#x: exactly one of checksum and identity", i, fl)
		case fl&flagMD5 != 0 && x.md5 == nil:
			return d.errf("file %d: md5 flag without an md5 column", i)
		case fl&flagSplit != 0 && fl&flagMulti == 0:
			return d.errf("file %d: split file without extents", i)
		}
		if fl&flagMulti == 0 {
			e := extent{chunk: ch, off: off, length: fsize}
			if root >= nRoots {
				return d.errf("file %d: root %d of %d", i, root, nRoots)
			}
			if ch >= 0 && int(ch) < len(chunks) && chunks[ch].Kind != chunkio.Direct {
				e.tarName = "-" // roots[root]+key, never empty (keys are not)
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
		for j := off; j < off+int64(ch); j++ {
			e := &x.exts[j]
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
	if uint64(prevEnd) != d.h.namesLen {
		return d.errf("names: %d bytes, keys use %d", d.h.namesLen, prevEnd)
	}
	if nextExt != int64(len(x.exts)) {
		return d.errf("%d extents, files use %d", len(x.exts), nextExt)
	}
	return nil
}

// checkTombstones checks the tombstone table and the link column: keys
// strictly ascending, links within the chain, no key both a file and
// deleted.
func (d *indexDecoder) checkTombstones(x *index, nChain int) error {
	for i, l := range x.link {
		if int(l) >= nChain {
			return d.errf("file %d: chain link %d of %d", i, l, nChain)
		}
	}
	t := &x.tombs
	var prev uint32
	for i := range t.ends {
		if t.ends[i] <= prev || uint64(t.ends[i]) > d.h.tombNamesLen {
			return d.errf("tombstone %d: end %d (previous %d, %d name bytes)", i, t.ends[i], prev, d.h.tombNamesLen)
		}
		if i > 0 && t.key(i) <= t.key(i-1) {
			return d.errf("tombstone %d: key %q does not sort after %q", i, t.key(i), t.key(i-1))
		}
		if err := manifest.CheckVirtualKey(t.key(i)); err != nil {
			return d.errf("tombstone %d: %v", i, err)
		}
		if int(t.link[i]) >= nChain {
			return d.errf("tombstone %d: chain link %d of %d", i, t.link[i], nChain)
		}
		prev = t.ends[i]
	}
	if uint64(prev) != d.h.tombNamesLen {
		return d.errf("tombstone names: %d bytes, keys use %d", d.h.tombNamesLen, prev)
	}
	for i := 0; i < t.n(); i++ {
		k := t.key(i)
		if j := x.search(k); j < x.n() && x.rawKey(j) == k {
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
