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
//     is served, for partial and whole reads alike (and cached). A larger
//     one read in part is served only after the span one sha256 covers (the
//     whole object, a giant frame's compressed span, or the extent itself)
//     was read whole and checked, once per object (chunkio/verified.go);
//     Options.TrustUnframed skips that check.
//   - Giant frames (decoded or compressed size > MaxFrameBytes) and
//     unframed zstd chunks are stream-decoded; a decode that reaches the
//     end also checks the frame's (or whole object's) sha256 there, and
//     holds back the last segment until it passed, so the HTTP layer
//     aborts the connection rather than end a wrong body cleanly.
//   - Tar-backed extents whose offset comes from the manifest have the ustar
//     header in front of the data checked once (name and size), which
//     catches an archive_offset pointing at another member.
//
// Memory: every buffer of a read (compressed parts in flight, decoded
// frames ahead of the consumer, verified extents, stream segments, decoder
// windows) comes out of the one read memory budget, chunkio.ReadLimits
// (--read-memory), charged before it is allocated: a read takes its first
// part's memory and GET slots at once or waits, holding nothing, at most
// the memory wait (then 503 SlowDown). Beyond its first part a reader's
// window (at most StreamParts parts of PartSize) is speculative and stays
// within its fair share (the budget over the streams reading) and its
// client's share (--client-memory-share). Frames whose decoded or
// compressed size is above MaxFrameBytes are streamed through a 256 KiB
// segment by a stream decoder (its window charged; a bounded number alive
// at once, sized from --max-parts and the budget; at most 8 parked per
// archive); a compressed span too large for one zstd frame of its decoded
// size is refused unread; a background prefetch run stays under a quarter
// of the cache budget. The cache budget should hold several frames, or
// neighbouring small files in one frame each fetch it again.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// Errors of the read path. Each is returned wrapped with the archive, file
// key and chunk key it concerns; backend errors keep their backend sentinel
// (a missing chunk is backend.ErrNotFound: a server-side failure, not 404).
// The first four are chunkio's, re-exported so callers need one package.
var (
	// ErrChecksum: bytes did not match a frame, extent, part, file or
	// object sha256. Nothing after the mismatch (and not the final byte of
	// the checked range) was delivered.
	ErrChecksum = chunkio.ErrChecksum
	// ErrCorrupt: data that cannot be what the manifest describes (bad
	// zstd, wrong decoded length, a tar stream that ends early).
	ErrCorrupt = chunkio.ErrCorrupt
	// ErrWrongMember: the tar header in front of a manifest archive_offset
	// names another member or size.
	ErrWrongMember = chunkio.ErrWrongMember
	// ErrNotInChunk: a tar walk did not find the member.
	ErrNotInChunk = chunkio.ErrNotInChunk
	// ErrBadRange: Open was asked for bytes outside the file.
	ErrBadRange = errors.New("range outside the file")
)

// piece is the part of one extent a read covers.
type piece struct {
	e      chunkio.Extent
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
// archive, the key and the chunk. A range whose bytes lie in an archived
// object without a finished restore fails here, before any fetch, with an
// error wrapping ErrArchived. Close the reader when done.
func (a *Archive) Open(ctx context.Context, f File, off, n int64) (io.ReadCloser, error) {
	if index.Link(f) != 0 { // an older version (versions.go): its upload's history index
		sh, vf, err := openVersion(a, f)
		if err != nil {
			return nil, err
		}
		return sh.Open(ctx, vf, off, n)
	}
	if off < 0 || n < 0 || off > f.Size-n {
		return nil, fmt.Errorf("archive %s: key %s: bytes %d+%d of %d: %w", a.name, f.Key, off, n, f.Size, ErrBadRange)
	}
	exts, err := readExtents(a, f)
	if err != nil {
		return nil, err
	}
	var at int64
	for _, e := range exts {
		if e.FileOff != at || e.Length < 0 || e.Chunk < 0 || int(e.Chunk) >= len(a.tree.Chunks) {
			return nil, fmt.Errorf("archive %s: key %s: extents do not tile the file at byte %d: %w", a.name, f.Key, at, ErrCorrupt)
		}
		at += e.Length
	}
	if at != f.Size {
		return nil, fmt.Errorf("archive %s: key %s: extents cover %d bytes of %d: %w", a.name, f.Key, at, f.Size, ErrCorrupt)
	}
	// Bytes in an archived object without a finished restore: refused
	// before any fetch (storage.go); a range elsewhere is served.
	if err := checkReadable(ctx, a, f, exts, off, n); err != nil {
		return nil, err
	}
	fileWant, fileSum := parseSum(f.SHA256)
	rctx, cancel := context.WithCancel(ctx)
	r := &fileReader{a: a, ctx: rctx, cancel: cancel, f: f}
	end := off + n
	for _, e := range exts {
		s := max(off, e.FileOff)
		t := min(end, e.FileOff+e.Length)
		if t <= s {
			continue
		}
		ce := chunkio.Extent{Chunk: e.Chunk, Off: e.Off, Length: e.Length, TarName: e.TarName}
		ce.Sum, ce.HasSum = extentSum(e, f.Size, fileWant, fileSum)
		// Bytes this reader checks itself as they stream (a whole split
		// part against its sum, or the whole file against the file's sum)
		// need no check before their first byte.
		ce.Checked = (e.HasSum && s == e.FileOff && t == e.FileOff+e.Length) || (fileSum && off == 0 && n == f.Size)
		p := piece{e: ce, s: s - e.FileOff, l: t - s, outOff: s - off}
		r.pieces = append(r.pieces, p)
		if p.s == 0 && p.l == e.Length && e.HasSum {
			r.checks = append(r.checks, &check{start: p.outOff, end: p.outOff + p.l, ci: e.Chunk, want: e.Sum,
				h: sha256.New(), what: fmt.Sprintf("part at file byte %d (%d bytes)", e.FileOff, e.Length)})
		}
	}
	if fileSum && off == 0 && n == f.Size {
		ci := int32(-1)
		if len(exts) > 0 {
			ci = exts[len(exts)-1].Chunk
		}
		r.checks = append(r.checks, &check{start: 0, end: n, ci: ci, want: fileWant, h: sha256.New(), what: "file"})
	}
	return r, nil
}

// parseSum decodes a File's hex sha256 ("" = unknown).
func parseSum(s string) ([32]byte, bool) {
	sum, ok, err := manifest.ParseChecksum(s)
	return sum, ok && err == nil
}

// extentSum is the sha256 of exactly extent e's bytes, if known: its own,
// or the file's (fileWant, when hasFile) for an extent that is the whole
// file of size bytes.
func extentSum(e extent, size int64, fileWant [32]byte, hasFile bool) ([32]byte, bool) {
	if e.HasSum {
		return e.Sum, true
	}
	if e.FileOff == 0 && e.Length == size {
		return fileWant, hasFile
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
	src      chunkio.Source
	pieceGot int64

	seg      []byte
	rel      *chunkio.Buf
	produced int64
	checks   []*check
	err      error
}

func (r *fileReader) wrap(ci int32, err error) error {
	chunk := "?"
	if ci >= 0 && int(ci) < len(r.a.tree.Chunks) {
		chunk = r.a.tree.Chunks[ci].Key
	}
	if sf, ok := backend.Describe(err); ok && sf.Kind != nil && sf.Key == chunk {
		// The store failed on the chunk: name it once, say what happened.
		return &chunkStoreError{where: fmt.Sprintf("archive %s: key %s: chunk %s", r.a.name, r.f.Key, objectURL(sf.Bucket, sf.Key)),
			what: storeFailure(sf.Kind, sf.Detail, "check that the upload finished and its chunk objects were not deleted or moved"), err: err}
	}
	return fmt.Errorf("archive %s: key %s: chunk %s: %w", r.a.name, r.f.Key, chunk, err)
}

// chunkStoreError is a read that failed because the store failed on a
// chunk object: "archive A: key K: chunk s3://B/C not found (check ...)".
// It unwraps to the whole chain (the store's sentinel among it).
type chunkStoreError struct {
	where, what string
	err         error
}

func (e *chunkStoreError) Error() string { return e.where + e.what }
func (e *chunkStoreError) Unwrap() error { return e.err }

// fill makes r.seg non-empty with verified bytes, or returns the reader's
// terminal error (io.EOF at the end).
func (r *fileReader) fill() error {
	for len(r.seg) == 0 {
		if r.rel != nil {
			r.rel.Release()
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
			src, err := r.a.set.OpenExtent(r.ctx, p.e, p.s, p.l)
			if err != nil {
				r.err = r.wrap(p.e.Chunk, err)
				return r.err
			}
			r.src, r.pieceGot = src, 0
		}
		seg, rel, err := r.src.Next()
		if err == io.EOF {
			r.src.Close()
			r.src = nil
			if r.pieceGot != p.l {
				r.err = r.wrap(p.e.Chunk, fmt.Errorf("extent source ended after %d of %d bytes: %w", r.pieceGot, p.l, ErrCorrupt))
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
				rel.Release()
			}
			r.err = r.wrap(p.e.Chunk, err)
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
						rel.Release()
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
		r.a.set.Metrics().ChecksumFailure()
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
		r.src.Close()
		r.src = nil
	}
	if r.rel != nil {
		r.rel.Release()
		r.rel = nil
	}
	r.seg = nil
	if r.err == nil {
		r.err = errors.New("archiveview: read after Close")
	}
	return nil
}
