package chunkio

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// OpenExtent returns a source of bytes [start, start+n) of extent e (0 <=
// start, start+n <= e.Length, n > 0). It resolves the extent's offset (a
// tar walk when the manifest recorded none), checks the ustar header in
// front of a recorded offset once per (offset, member, length), and picks
// how the bytes are verified:
//
//   - an extent with a sha256 (e.HasSum) that no frame checksum covers and
//     that is at most Options.SmallVerifyBytes long is fetched and verified
//     whole before any of its bytes is delivered, for partial and whole
//     reads alike, and kept in the FrameCache: a damaged small file is a
//     clean error before the response headers rather than an aborted body
//     that began with unverified bytes;
//   - a larger one that no frame checksum covers, read in part (or whole
//     by a caller that does not check it: !e.Checked), is served only after
//     the span its checksum covers was read whole and checked, once
//     (verified.go);
//   - otherwise the bytes come from Range (frames verified before use,
//     stream decoders verified at their end, whole extents checked by the
//     caller).
func (s *Set) OpenExtent(ctx context.Context, e Extent, start, n int64) (Source, error) {
	ci := e.Chunk
	c := &s.chunks[ci]
	base := e.Off
	needHdr := false
	switch {
	case c.Kind == Direct:
		if base < 0 {
			base = 0
		}
	case base < 0:
		off, size, err := s.tarOffset(ctx, ci, e.TarName)
		if err != nil {
			return nil, err
		}
		if size != e.Length {
			return nil, fmt.Errorf("tar member %q has %d bytes, manifest says %d: %w", e.TarName, size, e.Length, ErrWrongMember)
		}
		base = off
	default:
		if base < 512 {
			return nil, fmt.Errorf("archive_offset %d leaves no room for a tar header: %w", base, ErrWrongMember)
		}
		_, ok := s.state(ci).hdrOK.Load(hdrKey{off: base, name: e.TarName, length: e.Length})
		needHdr = !ok
	}
	u0, u1 := base+start, base+start+n
	covered := s.rangeVerified(ci, base, base+e.Length)
	if e.HasSum && s.smallVer > 0 && e.Length <= s.smallVer && !covered {
		buf, err := verifiedExtent(ctx, s, ci, base, e, needHdr)
		if err != nil {
			return nil, err
		}
		if int64(len(buf.b)) != e.Length {
			buf.Release()
			return nil, fmt.Errorf("verified extent at %d holds %d bytes, manifest says %d: %w", base, len(buf.b), e.Length, ErrCorrupt)
		}
		return &bytesSource{buf: buf, b: buf.b[start : start+n]}, nil
	}
	if !covered && !e.Checked && !s.opts.TrustUnframed {
		// No frame checksum covers these bytes and the caller does not
		// check them itself: the object is read whole and checked first
		// (once; verified.go). An extent no checksum covers at all is
		// served as it is (and reported as unverifiable).
		if units, ok := s.units(ci, base, e); ok {
			if err := ensureUnits(ctx, s, ci, units); err != nil {
				return nil, err
			}
		}
	}
	if needHdr && start > 0 && !s.streamDecodedAt(ci, base-512) && !s.streamDecodedAt(ci, u0) {
		// A partial read of a member in cacheable frames: its header is
		// checked while its data frames are fetched, not before (the
		// header's frame and the data's are two cold fetches that would
		// otherwise follow one another), and no data byte is yielded
		// before the check passed.
		src, err := s.Range(ctx, ci, u0, u1)
		if err != nil {
			return nil, err
		}
		return newHdrCheckedSource(ctx, s, ci, base, e, src, u0, u1), nil
	}
	if needHdr && (start > 0 || s.streamDecodedAt(ci, base-512)) {
		// A stream-decoded header is checked on its own too, once for
		// concurrent readers, whose decodes then continue from it
		// (parked.go) instead of each decoding from the start.
		if err := checkHeaderOnce(ctx, s, ci, base, e); err != nil {
			return nil, err
		}
		needHdr = false
	}
	if needHdr {
		src, err := s.Range(ctx, ci, u0-512, u1)
		if err != nil {
			return nil, err
		}
		return &hdrSource{set: s, inner: src, ci: ci, base: base, e: e}, nil
	}
	return s.Range(ctx, ci, u0, u1)
}

// streamDecodedAt reports whether tar-stream byte u of chunk ci is read
// through a stream decoder (a giant frame, an unframed zstd chunk).
func (s *Set) streamDecodedAt(ci int32, u int64) bool {
	c := &s.chunks[ci]
	switch {
	case c.Kind == StreamZstd || (c.Kind == FramedZstd && len(c.Frames) == 0):
		return true
	case c.Kind == FramedZstd:
		lo, _, err := CoverFrames(c.Frames, u, u+1)
		return err == nil && s.giant(c.Frames[lo])
	}
	return false
}

// checkHeaderOnce is checkHeaderAt run once for concurrent readers of the
// same member (the concurrent ranges of one download): they wait for one
// check instead of each reading the header (for a stream-decoded chunk,
// each with a decoder of its own).
func checkHeaderOnce(ctx context.Context, s *Set, ci int32, base int64, e Extent) error {
	k := hdrKey{off: base, name: e.TarName, length: e.Length}
	rs := s.state(ci)
	v, _ := rs.hdrChecks.LoadOrStore(k, &Memo[struct{}]{})
	_, err := v.(*Memo[struct{}]).Do(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, checkHeaderAt(ctx, s, ci, base, e)
	}, s.keepFailure(rs))
	return err
}

// checkHeaderAt reads and checks the 512-byte header ending at base.
func checkHeaderAt(ctx context.Context, s *Set, ci int32, base int64, e Extent) error {
	src, err := s.Range(ctx, ci, base-512, base)
	if err != nil {
		return err
	}
	sr := &segReader{src: src}
	defer sr.Close()
	var hdr [512]byte
	if _, err := io.ReadFull(sr, hdr[:]); err != nil {
		return fmt.Errorf("reading tar header at %d: %w", base-512, err)
	}
	return acceptHeader(s, ci, base, e, hdr[:])
}

func acceptHeader(s *Set, ci int32, base int64, e Extent, hdr []byte) error {
	if err := checkTarHeader(hdr, e.TarName, e.Length); err != nil {
		return fmt.Errorf("archive_offset %d: %w", base, err)
	}
	s.state(ci).hdrOK.Store(hdrKey{off: base, name: e.TarName, length: e.Length}, struct{}{})
	return nil
}

// hdrCheckedSource yields inner's bytes only once the check of the tar
// header in front of its member (checkHeaderOnce, started with the source
// and run while inner fetches) has passed; a failed check is the error of
// the first Next, and none of inner's bytes is returned.
//
// The overlapped check never waits for memory (withoutWait): inner's first
// part is held for the check's verdict, so a check waiting for memory (or
// for its client's share) that part holds would wait for itself. A check
// that cannot have its memory at once fails with errMustWait; the source
// then drops inner, holding nothing, runs the check alone (waiting as any
// demand read does) and reads its bytes [u0,u1) afresh.
type hdrCheckedSource struct {
	ctx     context.Context
	set     *Set
	ci      int32
	base    int64
	e       Extent
	u0, u1  int64
	inner   Source
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // the check's result, set before done is closed
	checked bool
	failed  error
}

func newHdrCheckedSource(ctx context.Context, s *Set, ci int32, base int64, e Extent, inner Source, u0, u1 int64) *hdrCheckedSource {
	cctx, cancel := context.WithCancel(withoutWait(ctx))
	h := &hdrCheckedSource{ctx: ctx, set: s, ci: ci, base: base, e: e, u0: u0, u1: u1,
		inner: inner, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		h.err = checkHeaderOnce(cctx, s, ci, base, e)
	}()
	return h
}

func (h *hdrCheckedSource) Next() ([]byte, *Buf, error) {
	if h.failed != nil {
		return nil, nil, h.failed
	}
	if h.checked {
		return h.inner.Next()
	}
	seg, rel, err := h.inner.Next() // starts the data's fetches; the check runs meanwhile
	<-h.done                        // the check ends with the source's context at the latest
	if errors.Is(h.err, errMustWait) && h.ctx.Err() == nil {
		if rel != nil {
			rel.Release()
		}
		h.inner.Close()
		if h.failed = checkHeaderOnce(h.ctx, h.set, h.ci, h.base, h.e); h.failed != nil {
			return nil, nil, h.failed
		}
		if h.inner, h.failed = h.set.Range(h.ctx, h.ci, h.u0, h.u1); h.failed != nil {
			h.inner = &multiSource{}
			return nil, nil, h.failed
		}
		h.checked = true
		return h.inner.Next()
	}
	if h.err != nil {
		if rel != nil {
			rel.Release()
		}
		h.failed = h.err
		return nil, nil, h.err
	}
	h.checked = true
	return seg, rel, err
}

func (h *hdrCheckedSource) Close() {
	h.cancel()
	h.inner.Close()
}

// hdrSource consumes and checks the 512 header bytes in front of the data
// before yielding any data.
type hdrSource struct {
	set     *Set
	inner   Source
	ci      int32
	base    int64
	e       Extent
	checked bool
	pend    []byte
	pendRel *Buf
}

func (h *hdrSource) Next() ([]byte, *Buf, error) {
	if !h.checked {
		var hdr [512]byte
		got := 0
		for got < 512 {
			seg, rel, err := h.inner.Next()
			if err == io.EOF {
				err = fmt.Errorf("tar header at %d truncated: %w", h.base-512, ErrCorrupt)
			}
			if err != nil {
				return nil, nil, err
			}
			k := copy(hdr[got:], seg)
			got += k
			if k < len(seg) {
				h.pend, h.pendRel = seg[k:], rel
			} else if rel != nil {
				rel.Release()
			}
		}
		if err := acceptHeader(h.set, h.ci, h.base, h.e, hdr[:]); err != nil {
			if h.pendRel != nil {
				h.pendRel.Release()
				h.pendRel = nil
			}
			h.pend = nil
			return nil, nil, err
		}
		h.checked = true
		if len(h.pend) > 0 {
			seg, rel := h.pend, h.pendRel
			h.pend, h.pendRel = nil, nil
			return seg, rel, nil
		}
		if h.pendRel != nil {
			h.pendRel.Release()
			h.pendRel = nil
		}
	}
	return h.inner.Next()
}

func (h *hdrSource) Close() {
	if h.pendRel != nil {
		h.pendRel.Release()
		h.pendRel = nil
	}
	h.inner.Close()
}

// verifiedExtent returns extent e (data at base) whole, fetched once,
// checked against e.Sum and kept in the FrameCache under the extent's key.
func verifiedExtent(ctx context.Context, s *Set, ci int32, base int64, e Extent, needHdr bool) (*Buf, error) {
	k := cacheKey{store: s.storeID, bucket: s.bucket, object: s.chunks[ci].Key, kind: keyExtent, n: base, m: e.Length,
		name: e.TarName, sum: e.Sum, hasSum: true}
	return s.cache.get(ctx, k, s.metrics, func(ctx context.Context) (*Buf, error) {
		// The buffer is taken with the source's first take (its first
		// part, or a stream decoder's first part and window), in one
		// take: the read never holds the buffer while it waits for the
		// source's memory (nor a client its share).
		ft := &firstTake{n: bufSize(e.Length)}
		fctx := withFirstTake(ctx, ft)
		settle := func() {
			if cl, took := ft.settle(); took {
				s.lim.unreserve(cl, ft.n)
			}
		}
		var src Source
		var err error
		if needHdr {
			src, err = s.Range(fctx, ci, base-512, base+e.Length)
			if err == nil {
				src = &hdrSource{set: s, inner: src, ci: ci, base: base, e: e}
			}
		} else {
			src, err = s.Range(fctx, ci, base, base+e.Length)
		}
		if err != nil {
			settle()
			return nil, err
		}
		sr := &segReader{src: src}
		defer sr.Close()
		sr.seg, sr.rel, sr.err = src.Next()
		if sr.err != nil && sr.err != io.EOF {
			settle()
			return nil, sr.err
		}
		var buf *Buf
		if cl, took := ft.settle(); took {
			buf = s.lim.bufReserved(cl, e.Length)
		} else {
			// No take of the source carried it (its first bytes were
			// cached or continue a parked decoder): taken now.
			if buf, err = s.lim.alloc(ctx, e.Length, demand); err != nil {
				return nil, err
			}
		}
		if _, err := io.ReadFull(sr, buf.b); err != nil {
			buf.Release()
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = fmt.Errorf("extent source ended early: %w", ErrCorrupt)
			}
			return nil, err
		}
		if sha256.Sum256(buf.b) != e.Sum {
			buf.Release()
			s.metrics.checksumFailure()
			return nil, fmt.Errorf("extent at %d (%d bytes) sha256 mismatch: %w", base, e.Length, ErrChecksum)
		}
		return buf, nil
	})
}
