package archiveview

// read.go is the one read path every caller uses: a byte range of a virtual
// file becomes pieces (extent by extent), each piece a source of verified
// chunk bytes (fetch.go), and the reader adds the checks that span pieces:
// the whole-file sha256 and each split part's sha256.
//
// Verification guarantees, and their limits:
//
//   - Framed zstd: every frame's sha256 is checked before any of its bytes
//     is used, and its decoded length must match the manifest.
//   - Whole-file reads (off 0, n = Size) check the file's sha256, and reads
//     covering a whole split part check the part's sha256. The segment that
//     holds the final byte of a checked range is delivered only after the
//     check passed, so a client never receives a complete-looking wrong body.
//   - Extents without frame checksums (plain tar, direct objects, unframed
//     zstd, giant frames) that are at most Options.SmallVerifyBytes long and
//     have a sha256 are fetched and verified whole before any of their bytes
//     is served, for partial and whole reads alike (and cached). Larger ones
//     read by sub-range are verified only by full reads.
//   - Giant frames (decoded or compressed size > MaxFrameBytes) are
//     stream-decoded; their sha256 is
//     known only at the frame's end. Bytes before the end cannot be recalled:
//     the reader fails at the end (holding back the last segment) so the
//     HTTP layer aborts the connection. Unframed zstd chunks are checked
//     against the whole-object sha256 only when a decode reaches the end.
//   - Tar-backed extents whose offset comes from the manifest have the ustar
//     header in front of the data checked once (name and size), which
//     catches an archive_offset pointing at another member.
//
// Memory: a reader holds at most GOMAXPROCS+2 decoded frames ahead of the
// consumer plus one compressed frame being read (frames whose decoded or
// compressed size is above MaxFrameBytes are streamed through a 256 KiB
// buffer instead; a compressed span too large for one zstd frame of its
// decoded size is refused unread); verified small extents
// are at most SmallVerifyBytes; parked decoders are at most 8 per archive;
// a background prefetch run stays under a quarter of the cache budget. The
// cache budget should hold several frames, or neighbouring small files in
// one frame each fetch it again.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// Errors of the read path. Each is returned wrapped with the archive, file
// key and chunk key it concerns; backend errors keep their backend sentinel
// (a missing chunk is backend.ErrNotFound: a server-side failure, not 404).
var (
	// ErrChecksum: bytes did not match a frame, extent, part, file or
	// object sha256. Nothing after the mismatch (and not the final byte of
	// the checked range) was delivered.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrCorrupt: data that cannot be what the manifest describes (bad
	// zstd, wrong decoded length, a tar stream that ends early).
	ErrCorrupt = errors.New("corrupt archive data")
	// ErrWrongMember: the tar header in front of a manifest archive_offset
	// names another member or size.
	ErrWrongMember = errors.New("archive offset points at the wrong tar member")
	// ErrNotInChunk: a tar walk did not find the member.
	ErrNotInChunk = errors.New("tar member not found in chunk")
	// ErrBadRange: Open was asked for bytes outside the file.
	ErrBadRange = errors.New("range outside the file")
)

// piece is the part of one extent a read covers.
type piece struct {
	e      extent
	s, l   int64 // start within the extent, length
	outOff int64 // position in the reader's output
}

// check is a sha256 over output bytes [start,end).
type check struct {
	start, end int64
	ci         int32
	want       [32]byte
	h          hash.Hash
	what       string
	done       bool
}

// Open returns a reader of exactly n verified bytes of f starting at off
// (0 <= off, off+n <= f.Size; n = 0 is valid). Reading happens lazily under
// ctx; cancelling it stops the backend requests. The reader implements
// io.WriterTo, writing cached frame slices directly. Errors name the
// archive, the key and the chunk. Close the reader when done.
func (a *Archive) Open(ctx context.Context, f File, off, n int64) (io.ReadCloser, error) {
	if f.ver != 0 { // an older version (versions.go): its upload's history index
		sh, vf, err := a.openVersion(f)
		if err != nil {
			return nil, err
		}
		return sh.Open(ctx, vf, off, n)
	}
	if off < 0 || n < 0 || off > f.Size-n {
		return nil, fmt.Errorf("archive %s: key %s: bytes %d+%d of %d: %w", a.name, f.Key, off, n, f.Size, ErrBadRange)
	}
	exts := a.fileExtents(f.idx)
	var at int64
	for _, e := range exts {
		if e.fileOff != at || e.length < 0 || e.chunk < 0 || int(e.chunk) >= len(a.chunks) {
			return nil, fmt.Errorf("archive %s: key %s: extents do not tile the file at byte %d: %w", a.name, f.Key, at, ErrCorrupt)
		}
		at += e.length
	}
	if at != f.Size {
		return nil, fmt.Errorf("archive %s: key %s: extents cover %d bytes of %d: %w", a.name, f.Key, at, f.Size, ErrCorrupt)
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &fileReader{a: a, ctx: rctx, cancel: cancel, f: f}
	end := off + n
	for _, e := range exts {
		s := max(off, e.fileOff)
		t := min(end, e.fileOff+e.length)
		if t <= s {
			continue
		}
		p := piece{e: e, s: s - e.fileOff, l: t - s, outOff: s - off}
		r.pieces = append(r.pieces, p)
		if p.s == 0 && p.l == e.length && e.hasSum {
			r.checks = append(r.checks, &check{start: p.outOff, end: p.outOff + p.l, ci: e.chunk, want: e.sum,
				h: sha256.New(), what: fmt.Sprintf("part at file byte %d (%d bytes)", e.fileOff, e.length)})
		}
	}
	if want, ok := parseSum(f.SHA256); ok && off == 0 && n == f.Size {
		ci := int32(-1)
		if len(exts) > 0 {
			ci = exts[len(exts)-1].chunk
		}
		r.checks = append(r.checks, &check{start: 0, end: n, ci: ci, want: want, h: sha256.New(), what: "file"})
	}
	return r, nil
}

// parseSum decodes a File's hex sha256 ("" = unknown).
func parseSum(s string) ([32]byte, bool) {
	sum, ok, err := manifest.ParseChecksum(s)
	return sum, ok && err == nil
}

// extentSum is the sha256 of exactly extent e's bytes, if known.
func extentSum(e extent, f File) ([32]byte, bool) {
	if e.hasSum {
		return e.sum, true
	}
	if e.fileOff == 0 && e.length == f.Size {
		return parseSum(f.SHA256)
	}
	return [32]byte{}, false
}

type fileReader struct {
	a      *Archive
	ctx    context.Context
	cancel context.CancelFunc
	f      File

	pieces   []piece
	pi       int
	src      segSource
	pieceGot int64

	seg      []byte
	rel      *frameBuf
	produced int64
	checks   []*check
	err      error
}

func (r *fileReader) wrap(ci int32, err error) error {
	chunk := "?"
	if ci >= 0 && int(ci) < len(r.a.chunks) {
		chunk = r.a.chunks[ci].key
	}
	return fmt.Errorf("archive %s: key %s: chunk %s: %w", r.a.name, r.f.Key, chunk, err)
}

// fill makes r.seg non-empty with verified bytes, or returns the reader's
// terminal error (io.EOF at the end).
func (r *fileReader) fill() error {
	for len(r.seg) == 0 {
		if r.rel != nil {
			r.rel.release()
			r.rel = nil
		}
		if r.err != nil {
			return r.err
		}
		if r.pi >= len(r.pieces) {
			for _, c := range r.checks {
				if !c.done {
					if err := r.verify(c); err != nil {
						r.err = err
						return err
					}
				}
			}
			r.err = io.EOF
			return io.EOF
		}
		p := &r.pieces[r.pi]
		if r.src == nil {
			src, err := r.openPiece(p)
			if err != nil {
				r.err = r.wrap(p.e.chunk, err)
				return r.err
			}
			r.src, r.pieceGot = src, 0
		}
		seg, rel, err := r.src.next()
		if err == io.EOF {
			r.src.close()
			r.src = nil
			if r.pieceGot != p.l {
				r.err = r.wrap(p.e.chunk, fmt.Errorf("extent source ended after %d of %d bytes: %w", r.pieceGot, p.l, ErrCorrupt))
				return r.err
			}
			r.pi++
			continue
		}
		if err == nil && int64(len(seg)) > p.l-r.pieceGot {
			err = fmt.Errorf("extent source overran by %d bytes: %w", int64(len(seg))-(p.l-r.pieceGot), ErrCorrupt)
		}
		if err != nil {
			if rel != nil {
				rel.release()
			}
			r.err = r.wrap(p.e.chunk, err)
			return r.err
		}
		start, end := r.produced, r.produced+int64(len(seg))
		for _, c := range r.checks {
			if c.done || c.end <= start || c.start >= end {
				continue
			}
			c.h.Write(seg[max(c.start, start)-start : min(c.end, end)-start])
			if c.end <= end {
				if err := r.verify(c); err != nil {
					if rel != nil {
						rel.release()
					}
					r.err = err
					return err
				}
			}
		}
		r.produced = end
		r.pieceGot += int64(len(seg))
		r.seg, r.rel = seg, rel
	}
	return nil
}

func (r *fileReader) verify(c *check) error {
	c.done = true
	var got [32]byte
	c.h.Sum(got[:0])
	if got != c.want {
		r.a.metrics.checksumFailure()
		return r.wrap(c.ci, fmt.Errorf("%s sha256 mismatch: %w", c.what, ErrChecksum))
	}
	return nil
}

// Read implements io.Reader.
func (r *fileReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := r.fill(); err != nil {
		return 0, err
	}
	n := copy(p, r.seg)
	r.seg = r.seg[n:]
	return n, nil
}

// WriteTo implements io.WriterTo: verified segments (slices of cached
// frames) are written directly, without a copy.
func (r *fileReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.fill(); err != nil {
			if err == io.EOF {
				return total, nil
			}
			return total, err
		}
		k, err := w.Write(r.seg)
		total += int64(k)
		r.seg = r.seg[k:]
		if err != nil {
			return total, err
		}
		if k == 0 {
			return total, io.ErrShortWrite
		}
	}
}

// Close stops the reader's backend requests and releases its buffers.
func (r *fileReader) Close() error {
	r.cancel()
	if r.src != nil {
		r.src.close()
		r.src = nil
	}
	if r.rel != nil {
		r.rel.release()
		r.rel = nil
	}
	r.seg = nil
	if r.err == nil {
		r.err = errors.New("archiveview: read after Close")
	}
	return nil
}

// openPiece resolves the piece's extent offset (tar walk if unknown), runs
// the header check once per extent, and returns its source.
func (r *fileReader) openPiece(p *piece) (segSource, error) {
	a, e, ctx := r.a, p.e, r.ctx
	ci := e.chunk
	c := &a.chunks[ci]
	rd := a.rdState()
	base := e.off
	needHdr := false
	switch {
	case c.kind == kindDirect:
		if base < 0 {
			base = 0
		}
	case base < 0:
		off, size, err := a.walkOffset(ctx, ci, e.tarName)
		if err != nil {
			return nil, err
		}
		if size != e.length {
			return nil, fmt.Errorf("tar member %q has %d bytes, manifest says %d: %w", e.tarName, size, e.length, ErrWrongMember)
		}
		base = off
	default:
		if base < 512 {
			return nil, fmt.Errorf("archive_offset %d leaves no room for a tar header: %w", base, ErrWrongMember)
		}
		_, ok := a.chunkState(ci).hdrOK.Load(hdrKey{off: base, name: e.tarName, length: e.length})
		needHdr = !ok
	}
	u0, u1 := base+p.s, base+p.s+p.l
	// An extent with a sha256 but no frame checksum covering it, and small
	// enough, is fetched and verified whole before any of its bytes is
	// delivered: for partial reads (the bytes outside the range are needed
	// for the check) and for whole reads too, so a damaged small file is a
	// clean error before the response headers rather than an aborted body
	// that began with unverified bytes.
	if sum, ok := extentSum(e, r.f); ok && rd.smallVer > 0 && e.length <= rd.smallVer &&
		!a.rangeVerified(ci, base, base+e.length) {
		buf, err := a.verifiedExtent(ctx, ci, base, e, sum, needHdr)
		if err != nil {
			return nil, err
		}
		if int64(len(buf.b)) != e.length {
			buf.release()
			return nil, fmt.Errorf("verified extent at %d holds %d bytes, manifest says %d: %w", base, len(buf.b), e.length, ErrCorrupt)
		}
		return &bytesSource{buf: buf, b: buf.b[p.s : p.s+p.l]}, nil
	}
	if needHdr && p.s > 0 {
		if err := a.checkHeaderAt(ctx, ci, base, e); err != nil {
			return nil, err
		}
		needHdr = false
	}
	if needHdr {
		src, err := a.chunkRange(ctx, ci, u0-512, u1)
		if err != nil {
			return nil, err
		}
		return &hdrSource{a: a, inner: src, ci: ci, base: base, e: e}, nil
	}
	return a.chunkRange(ctx, ci, u0, u1)
}

// checkHeaderAt reads and checks the 512-byte header ending at base.
func (a *Archive) checkHeaderAt(ctx context.Context, ci int32, base int64, e extent) error {
	src, err := a.chunkRange(ctx, ci, base-512, base)
	if err != nil {
		return err
	}
	sr := &segReader{src: src}
	defer sr.Close()
	var hdr [512]byte
	if _, err := io.ReadFull(sr, hdr[:]); err != nil {
		return fmt.Errorf("reading tar header at %d: %w", base-512, err)
	}
	return a.acceptHeader(ci, base, e, hdr[:])
}

func (a *Archive) acceptHeader(ci int32, base int64, e extent, hdr []byte) error {
	if err := checkTarHeader(hdr, e.tarName, e.length); err != nil {
		return fmt.Errorf("archive_offset %d: %w", base, err)
	}
	a.chunkState(ci).hdrOK.Store(hdrKey{off: base, name: e.tarName, length: e.length}, struct{}{})
	return nil
}

// hdrSource consumes and checks the 512 header bytes in front of the data
// before yielding any data.
type hdrSource struct {
	a       *Archive
	inner   segSource
	ci      int32
	base    int64
	e       extent
	checked bool
	pend    []byte
	pendRel *frameBuf
}

func (s *hdrSource) next() ([]byte, *frameBuf, error) {
	if !s.checked {
		var hdr [512]byte
		got := 0
		for got < 512 {
			seg, rel, err := s.inner.next()
			if err == io.EOF {
				err = fmt.Errorf("tar header at %d truncated: %w", s.base-512, ErrCorrupt)
			}
			if err != nil {
				return nil, nil, err
			}
			k := copy(hdr[got:], seg)
			got += k
			if k < len(seg) {
				s.pend, s.pendRel = seg[k:], rel
			} else if rel != nil {
				rel.release()
			}
		}
		if err := s.a.acceptHeader(s.ci, s.base, s.e, hdr[:]); err != nil {
			if s.pendRel != nil {
				s.pendRel.release()
				s.pendRel = nil
			}
			s.pend = nil
			return nil, nil, err
		}
		s.checked = true
		if len(s.pend) > 0 {
			seg, rel := s.pend, s.pendRel
			s.pend, s.pendRel = nil, nil
			return seg, rel, nil
		}
		if s.pendRel != nil {
			s.pendRel.release()
			s.pendRel = nil
		}
	}
	return s.inner.next()
}

func (s *hdrSource) close() {
	if s.pendRel != nil {
		s.pendRel.release()
		s.pendRel = nil
	}
	s.inner.close()
}

// verifiedExtent returns extent e (data at base) whole, fetched once,
// checked against sum and kept in the FrameCache under the extent's key.
func (a *Archive) verifiedExtent(ctx context.Context, ci int32, base int64, e extent, sum [32]byte, needHdr bool) (*frameBuf, error) {
	rd := a.rdState()
	k := cacheKey{store: rd.storeID, bucket: a.bucket, object: a.chunks[ci].key, kind: keyExtent, n: base, m: e.length,
		name: e.tarName, sum: sum, hasSum: true}
	return rd.cache.get(ctx, k, a.metrics, func(ctx context.Context) (*frameBuf, error) {
		var src segSource
		var err error
		if needHdr {
			src, err = a.chunkRange(ctx, ci, base-512, base+e.length)
			if err == nil {
				src = &hdrSource{a: a, inner: src, ci: ci, base: base, e: e}
			}
		} else {
			src, err = a.chunkRange(ctx, ci, base, base+e.length)
		}
		if err != nil {
			return nil, err
		}
		sr := &segReader{src: src}
		defer sr.Close()
		buf := rd.cache.bufs.getBuf(e.length)
		if _, err := io.ReadFull(sr, buf.b); err != nil {
			buf.release()
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = fmt.Errorf("extent source ended early: %w", ErrCorrupt)
			}
			return nil, err
		}
		if sha256.Sum256(buf.b) != sum {
			buf.release()
			a.metrics.checksumFailure()
			return nil, fmt.Errorf("extent at %d (%d bytes) sha256 mismatch: %w", base, e.length, ErrChecksum)
		}
		return buf, nil
	})
}
