package chunkio

// fetch.go turns chunk byte ranges into verified segments: coalesced range
// GETs of Frame runs, per-Frame sha256 checks before decoding, stream
// decoders for giant frames and unframed zstd chunks (parked between reads),
// and direct ranges of plain objects. read.go assembles files from these.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/wharf-s3/wharf/backend"
)

// Source yields the verified bytes of one range in order, as segments. A
// segment is valid until the next call to Next, or, when rel is not nil,
// until the caller releases rel (the caller owns that reference). Next
// returns io.EOF after the last byte and a wrapped error (ErrChecksum,
// ErrCorrupt, a backend sentinel, the context's error) when the bytes
// cannot be delivered; no byte that failed a check is ever returned. Close
// releases everything the source holds; it is safe to call at any time.
type Source interface {
	Next() (seg []byte, rel *Buf, err error)
	Close()
}

// frameKey names frame i of chunk ci by what it is (compressed span,
// decoded size, sha256), not by its index in this manifest's table.
func (s *Set) frameKey(ci int32, i int) cacheKey {
	f := &s.chunks[ci].Frames[i]
	return cacheKey{store: s.storeID, bucket: s.bucket, object: s.chunks[ci].Key, kind: keyFrame,
		n: f.COff, m: f.CSize, u: f.USize, sum: f.Sum, hasSum: f.HasSum}
}

// checkFrame verifies frame i's compressed bytes comp against its sha256
// (sum: the caller's hash of comp, or nil to hash here) and decodes them
// into out, a buffer of exactly the frame's decoded size charged to the
// budget. On failure out is released. The caller holds a decode slot.
func checkFrame(s *Set, ci int32, i int, comp []byte, sum *[32]byte, out *Buf) (*Buf, error) {
	return checkFrameFlight(context.Background(), s, ci, i, comp, sum, out, nil)
}

// checkFrameFlight is checkFrame, publishing the decode's progress on fl
// (the flight the caller will complete with the frame; nil: none): a
// frame that has a sha256, which its bytes passed, and that is large
// enough is decoded in steps into out (progressive.go), each step
// published on fl as it is done, so fl's waiters get their bytes as soon
// as the decode passed them (FrameCache.waitPrefix). The decoder's
// window is charged to the budget while it decodes, taken without
// waiting (ctx: the client it is charged to); when it cannot be had, or
// the frame has no sha256, the frame is decoded whole first, as without
// fl. A frame without a sha256 publishes nothing: its bytes are served
// only once its whole decode passed the length check.
func checkFrameFlight(ctx context.Context, s *Set, ci int32, i int, comp []byte, sum *[32]byte, out *Buf, fl *flight) (*Buf, error) {
	fr := &s.chunks[ci].Frames[i]
	if fr.HasSum {
		var got [32]byte
		if sum != nil {
			got = *sum
		} else {
			got = sha256.Sum256(comp)
		}
		if got != fr.Sum {
			out.Release()
			return nil, sumMismatch(s, i, fr)
		}
	} else if rs := s.state(ci); !rs.noSumNoted.Swap(true) {
		s.log.Debug().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).Int("frame", i).
			Msg("frame has no checksum: decoded and length-checked only")
	}
	var err error
	if class, ok := progressiveClass(comp, fr.USize); ok && fl != nil && fr.HasSum {
		cost := progressiveCost(class)
		cl, rerr := s.lim.reserve(ctx, cost, speculative)
		if rerr == nil {
			err = s.cache.decodeSteps(comp, out, class, func(n int64) bool { fl.publish(out, n); return true })
			s.lim.unreserve(cl, cost)
			if err != nil {
				fl.unpublish() // before out's reference is dropped
			}
		} else {
			err = s.cache.decodeInto(comp, out)
		}
	} else {
		err = s.cache.decodeInto(comp, out)
	}
	if err != nil {
		out.Release()
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, fr.COff, fr.COff+fr.CSize, err)
	}
	s.metrics.frameDecoded()
	return out, nil
}

// sumMismatch counts and returns the error of frame i (fr) whose bytes
// failed their sha256.
func sumMismatch(s *Set, i int, fr *Frame) error {
	s.metrics.checksumFailure()
	return fmt.Errorf("frame %d (object bytes %d-%d): sha256 mismatch: %w", i, fr.COff, fr.COff+fr.CSize, ErrChecksum)
}

// decodeSlot takes one of the GOMAXPROCS decode slots shared by every
// path that decodes a frame; the caller gives it back with
// <-s.cache.decodeSem.
func decodeSlot(ctx context.Context, s *Set) error {
	select {
	case s.cache.decodeSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shortBody turns an early end of a body into ErrBadResponse.
func shortBody(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("short body: %w", backend.ErrBadResponse)
	}
	return err
}

// fillFrame fetches and decodes frame i alone (used when a shared fetch
// failed for someone else's reason).
func fillFrame(ctx context.Context, s *Set, ci int32, i int) (*Buf, error) {
	k := s.frameKey(ci, i)
	return s.cache.get(ctx, k, s.metrics, func(ctx context.Context) (*Buf, error) {
		if owner, peer := s.peerOwner(ci, i); peer {
			cl, err := s.lim.reserve(ctx, peerCost(s.chunks[ci].Frames[i]), demand)
			if err != nil {
				return nil, fmt.Errorf("frame %d: %w", i, err)
			}
			return peerOrBackend(ctx, s, ci, i, owner, cl, demand)
		}
		buf, err := fetchFrame(ctx, s, ci, i)
		if errors.Is(err, ErrChecksum) {
			buf, err = refetchFrame(ctx, s, ci, i, err)
		}
		return buf, err
	})
}

// fetchFrame fetches frame i of chunk ci alone (one part, split into
// sub-ranges like any cold read), verifies and decodes it.
func fetchFrame(ctx context.Context, s *Set, ci int32, i int) (*Buf, error) {
	f := s.chunks[ci].Frames[i]
	plan := partPlan{off: f.COff, end: f.COff + f.CSize, lo: i, hi: i}
	out := bufSize(f.USize)
	p, err := s.launch(ctx, nil, ci, plan, s.lim.streamParts, out, 0, demand, nil)
	if err != nil {
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, f.COff, f.COff+f.CSize, err)
	}
	defer p.close()
	if _, err := p.wait(ctx, plan.size()); err != nil {
		s.lim.unreserve(p.cl, out)
		return nil, fmt.Errorf("frame %d: %w", i, err)
	}
	s.metrics.frameFetched()
	if err := decodeSlot(ctx, s); err != nil {
		s.lim.unreserve(p.cl, out)
		return nil, fmt.Errorf("frame %d: %w", i, err)
	}
	defer func() { <-s.cache.decodeSem }()
	buf, err := checkFrame(s, ci, i, p.buf.b, nil, s.lim.bufReserved(p.cl, f.USize))
	if err == nil {
		keepOwned(s, ci, i, p.buf.b)
	}
	return buf, err
}

// refetchFrame fetches frame i once more after its bytes failed their
// sha256 (first): corruption in transit passes, corruption at rest fails
// twice. Both failures count in wharf_checksum_failures_total. The error
// of a second failure says that the frame was fetched twice.
func refetchFrame(ctx context.Context, s *Set, ci int32, i int, first error) (*Buf, error) {
	s.log.Warn().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).Int("frame", i).Err(first).
		Msg("frame checksum mismatch: fetching the frame again")
	buf, err := fetchFrame(ctx, s, ci, i)
	if errors.Is(err, ErrChecksum) {
		return nil, fmt.Errorf("fetched twice: %w", err)
	}
	return buf, err
}

// bytesSource yields one slice of a held buffer.
type bytesSource struct {
	buf  *Buf
	b    []byte
	done bool
}

func (s *bytesSource) Next() ([]byte, *Buf, error) {
	if s.done || len(s.b) == 0 {
		return nil, nil, io.EOF
	}
	s.done = true
	s.buf.retain()
	return s.b, s.buf, nil
}

func (s *bytesSource) Close() {
	if s.buf != nil {
		s.buf.Release()
		s.buf = nil
	}
}

// multiSource concatenates sources created on demand.
type multiSource struct {
	mk  []func() Source
	i   int
	cur Source
}

func (s *multiSource) Next() ([]byte, *Buf, error) {
	for {
		if s.cur == nil {
			if s.i >= len(s.mk) {
				return nil, nil, io.EOF
			}
			s.cur = s.mk[s.i]()
			s.i++
		}
		seg, rel, err := s.cur.Next()
		if err == io.EOF {
			s.cur.Close()
			s.cur = nil
			continue
		}
		return seg, rel, err
	}
}

func (s *multiSource) Close() {
	if s.cur != nil {
		s.cur.Close()
		s.cur = nil
	}
	s.i = len(s.mk)
}

// chunkRange returns a source of chunk ci's tar-stream bytes [u0,u1) (object
// bytes for plain tar and direct objects).
func (s *Set) Range(ctx context.Context, ci int32, u0, u1 int64) (Source, error) {
	c := &s.chunks[ci]
	if u1 <= u0 {
		return &multiSource{}, nil
	}
	switch {
	case c.Kind == Direct || c.Kind == PlainTar:
		return &rangeSource{r: s.newPartReader(ctx, ci, u0, u1)}, nil
	case c.Kind == StreamZstd || (c.Kind == FramedZstd && len(c.Frames) == 0):
		return &zSource{set: s, ctx: ctx, ci: ci, frame: -1, u0: u0, u1: u1}, nil
	case c.Kind == FramedZstd:
	default:
		return nil, fmt.Errorf("chunk kind %v: %w", c.Kind, ErrCorrupt)
	}
	fr := c.Frames
	lo, hi, err := CoverFrames(fr, u0, u1)
	if err != nil {
		return nil, err
	}
	for i := lo; i <= hi; i++ {
		if err := framePlausible(i, fr[i]); err != nil {
			return nil, err
		}
	}
	run := s.state(ci).evidence.record(u0, u1) // readahead on evidence only (readahead.go)
	var mk []func() Source
	for i := lo; i <= hi; {
		f := fr[i]
		if s.giant(f) {
			s0, s1 := max(u0, f.UOff)-f.UOff, min(u1, f.UOff+f.USize)-f.UOff
			fi := i
			mk = append(mk, func() Source {
				return &zSource{set: s, ctx: ctx, ci: ci, frame: fi, u0: s0, u1: s1}
			})
			i++
			continue
		}
		j := i
		for j < hi && !s.giant(fr[j+1]) {
			j++
		}
		s0, s1, fi, fj := max(u0, f.UOff), min(u1, fr[j].UOff+fr[j].USize), i, j
		mk = append(mk, func() Source { return s.newFramedSource(ctx, ci, fi, fj, s0, s1, run) })
		i = j + 1
	}
	if len(mk) == 1 {
		return mk[0](), nil
	}
	return &multiSource{mk: mk}, nil
}

// rangeVerified reports whether every byte of [u0,u1) of chunk ci is
// covered by a frame checksum checked before use.
func (s *Set) rangeVerified(ci int32, u0, u1 int64) bool {
	c := &s.chunks[ci]
	if c.Kind != FramedZstd || len(c.Frames) == 0 {
		return false
	}
	lo, hi, err := CoverFrames(c.Frames, u0, max(u1, u0+1))
	if err != nil {
		return false
	}
	for _, f := range c.Frames[lo : hi+1] {
		if !f.HasSum || s.giant(f) {
			return false
		}
	}
	return true
}

// segReader adapts a Source to io.Reader.
type segReader struct {
	src Source
	seg []byte
	rel *Buf
	err error
}

func (r *segReader) Read(p []byte) (int, error) {
	for len(r.seg) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.rel != nil {
			r.rel.Release()
			r.rel = nil
		}
		r.seg, r.rel, r.err = r.src.Next()
	}
	n := copy(p, r.seg)
	r.seg = r.seg[n:]
	return n, nil
}

func (r *segReader) Close() error {
	if r.rel != nil {
		r.rel.Release()
		r.rel = nil
	}
	r.seg = nil
	r.src.Close()
	return nil
}

// FrameCached reports whether frame i of chunk ci is in the cache (or
// being filled). It does not count as a use.
func (s *Set) FrameCached(ci int32, i int) bool {
	return s.cache.contains(s.frameKey(ci, i))
}
