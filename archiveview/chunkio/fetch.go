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
	"hash"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"

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

// checkFrame verifies frame i's compressed bytes against its sha256 and
// decodes it into a pooled buffer of exactly uSize bytes.
func (s *Set) checkFrame(ci int32, i int, comp []byte) (*Buf, error) {
	fr := &s.chunks[ci].Frames[i]
	if fr.HasSum {
		if sha256.Sum256(comp) != fr.Sum {
			s.metrics.checksumFailure()
			return nil, fmt.Errorf("frame %d (object bytes %d-%d): sha256 mismatch: %w", i, fr.COff, fr.COff+fr.CSize, ErrChecksum)
		}
	} else if rs := s.state(ci); !rs.noSumNoted.Swap(true) {
		s.log.Debug().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).Int("frame", i).
			Msg("frame has no checksum: decoded and length-checked only")
	}
	buf, err := s.cache.decodeFrame(comp, fr.USize)
	if err != nil {
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, fr.COff, fr.COff+fr.CSize, err)
	}
	s.metrics.frameDecoded()
	return buf, nil
}

// runFits extends a run of frames starting at i (all claimable) while the
// next frame follows in the object within maxRunGap and the run stays under
// maxRunBytes compressed.
func runFits(fr []Frame, j int, runBytes int64) bool {
	p, n := fr[j-1], fr[j]
	gap := n.COff - (p.COff + p.CSize)
	return gap >= 0 && gap <= maxRunGap && runBytes+gap+n.CSize <= maxRunBytes
}

// fetchRun fetches frames i..j of chunk ci, whose flights fls the caller
// claimed, with one range GET. Each frame's compressed bytes are read from
// the body, verified and decoded (up to GOMAXPROCS decodes at once, shared by
// all archives of the cache) and its flight completed; emit is called for
// each frame after its decode was started, in order, and may block (back
// pressure). Every flight is completed exactly once, with an error if the
// GET or the context fails, and emit is called exactly once per frame (so
// the caller can hand over or abandon its claim). fetchRun returns when
// every decode it started has finished.
func (s *Set) fetchRun(ctx context.Context, ci int32, i, j int, fls []*flight, emit func(k int, fl *flight)) {
	c := &s.chunks[ci]
	fr := c.Frames
	start, end := fr[i].COff, fr[j].COff+fr[j].CSize
	var wg sync.WaitGroup
	defer wg.Wait()
	fail := func(from int, err error) {
		for k := from; k <= j; k++ {
			s.cache.complete(s.frameKey(ci, k), fls[k-i], nil, err)
		}
		for k := from; k <= j; k++ {
			emit(k, fls[k-i])
		}
	}
	body, err := s.rangeGet(ctx, ci, start, end-start)
	if err != nil {
		fail(i, fmt.Errorf("frames %d-%d (object bytes %d-%d): %w", i, j, start, end, err))
		return
	}
	defer body.Close()
	pos := start
	for k := i; k <= j; k++ {
		f := fr[k]
		if gap := f.COff - pos; gap > 0 {
			if _, err := io.CopyN(io.Discard, body, gap); err != nil {
				fail(k, fmt.Errorf("frame %d: reading gap at object byte %d: %w", k, pos, shortBody(err)))
				return
			}
		}
		comp := s.cache.bufs.getBuf(f.CSize)
		if n, err := io.ReadFull(body, comp.b); err != nil {
			comp.Release()
			fail(k, fmt.Errorf("frame %d: body ended at object byte %d of %d: %w", k, f.COff+int64(n), f.COff+f.CSize, shortBody(err)))
			return
		}
		pos = f.COff + f.CSize
		s.metrics.frameFetched()
		select {
		case s.cache.decodeSem <- struct{}{}:
		case <-ctx.Done():
			comp.Release()
			fail(k, fmt.Errorf("frame %d: %w", k, ctx.Err()))
			return
		}
		wg.Add(1)
		go func(k int, fl *flight, comp *Buf) {
			defer wg.Done()
			buf, err := s.checkFrame(ci, k, comp.b)
			comp.Release()
			<-s.cache.decodeSem
			if errors.Is(err, ErrChecksum) {
				buf, err = s.refetchFrame(ctx, ci, k, err)
			}
			s.cache.complete(s.frameKey(ci, k), fl, buf, err)
			if buf != nil {
				buf.Release()
			}
		}(k, fls[k-i], comp)
		emit(k, fls[k-i])
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
func (s *Set) fillFrame(ctx context.Context, ci int32, i int) (*Buf, error) {
	k := s.frameKey(ci, i)
	return s.cache.get(ctx, k, s.metrics, func(ctx context.Context) (*Buf, error) {
		buf, err := s.fetchFrame(ctx, ci, i)
		if errors.Is(err, ErrChecksum) {
			buf, err = s.refetchFrame(ctx, ci, i, err)
		}
		return buf, err
	})
}

// fetchFrame fetches frame i of chunk ci alone, verifies and decodes it.
func (s *Set) fetchFrame(ctx context.Context, ci int32, i int) (*Buf, error) {
	f := s.chunks[ci].Frames[i]
	body, err := s.rangeGet(ctx, ci, f.COff, f.CSize)
	if err != nil {
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, f.COff, f.COff+f.CSize, err)
	}
	defer body.Close()
	comp := s.cache.bufs.getBuf(f.CSize)
	defer comp.Release()
	if n, err := io.ReadFull(body, comp.b); err != nil {
		return nil, fmt.Errorf("frame %d: body ended at object byte %d of %d: %w", i, f.COff+int64(n), f.COff+f.CSize, shortBody(err))
	}
	s.metrics.frameFetched()
	// The same decode budget as fetchRun's: at most GOMAXPROCS frame
	// decodes at once across the cache, on every path that decodes.
	sem := s.cache.decodeSem
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("frame %d: %w", i, ctx.Err())
	}
	defer func() { <-sem }()
	return s.checkFrame(ci, i, comp.b)
}

// refetchFrame fetches frame i once more after its bytes failed their
// sha256 (first): corruption in transit passes, corruption at rest fails
// twice. Both failures count in wharf_checksum_failures_total. The error
// of a second failure says that the frame was fetched twice.
func (s *Set) refetchFrame(ctx context.Context, ci int32, i int, first error) (*Buf, error) {
	s.log.Warn().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).Int("frame", i).Err(first).
		Msg("frame checksum mismatch: fetching the frame again")
	buf, err := s.fetchFrame(ctx, ci, i)
	if errors.Is(err, ErrChecksum) {
		return nil, fmt.Errorf("fetched twice: %w", err)
	}
	return buf, err
}

// frameFuture is one frame of a framedSource, in order.
type frameFuture struct {
	i   int
	buf *Buf    // cached (reference held), or
	fl  *flight // a flight the source is registered on
}

func (fu frameFuture) abandon(c *FrameCache) {
	if fu.buf != nil {
		fu.buf.Release()
	} else if fu.fl != nil {
		c.abandonFlight(fu.fl)
	}
}

// framedSource streams tar bytes [u0,u1) from the cacheable frames lo..hi
// of a framed chunk. A producer goroutine looks every frame up in the cache,
// joins fetches already in flight, and fetches each run of missing frames
// with one GET (the next run is fetched while the current one is served);
// the bounded channel keeps at most a few decoded frames ahead.
type framedSource struct {
	set     *Set
	ctx     context.Context
	cancel  context.CancelFunc
	ci      int32
	lo, hi  int
	u0, u1  int64
	ch      chan frameFuture
	next_   int
	started bool
}

func (s *Set) newFramedSource(ctx context.Context, ci int32, lo, hi int, u0, u1 int64) *framedSource {
	ctx, cancel := context.WithCancel(ctx)
	return &framedSource{set: s, ctx: ctx, cancel: cancel, ci: ci, lo: lo, hi: hi, u0: u0, u1: u1,
		ch: make(chan frameFuture, runtime.GOMAXPROCS(0)+1), next_: lo}
}

func (fs *framedSource) send(fu frameFuture) bool {
	select {
	case fs.ch <- fu:
		return true
	case <-fs.ctx.Done():
		fu.abandon(fs.set.cache)
		return false
	}
}

func (fs *framedSource) produce() {
	defer close(fs.ch)
	s := fs.set
	fr := s.chunks[fs.ci].Frames
	var pending *frameFuture
	for i := fs.lo; i <= fs.hi; {
		var fu frameFuture
		var mine bool
		if pending != nil {
			fu, pending = *pending, nil
		} else {
			buf, fl, m := s.cache.lookup(s.frameKey(fs.ci, i), true)
			fu, mine = frameFuture{i: i, buf: buf, fl: fl}, m
			if buf != nil {
				s.metrics.cacheHit()
			}
		}
		if !mine {
			if !fs.send(fu) {
				return
			}
			i++
			continue
		}
		fls := []*flight{fu.fl}
		j, runBytes := i, fr[i].CSize
		for j < fs.hi && runFits(fr, j+1, runBytes) {
			buf, fl, m := s.cache.lookup(s.frameKey(fs.ci, j+1), true)
			if !m {
				if buf != nil {
					s.metrics.cacheHit()
				}
				pending = &frameFuture{i: j + 1, buf: buf, fl: fl}
				break
			}
			j++
			runBytes += fr[j].COff - (fr[j-1].COff + fr[j-1].CSize) + fr[j].CSize
			fls = append(fls, fl)
		}
		ok := true
		s.fetchRun(fs.ctx, fs.ci, i, j, fls, func(k int, fl *flight) {
			if !ok {
				s.cache.abandonFlight(fl)
				return
			}
			ok = fs.send(frameFuture{i: k, fl: fl}) // abandons fl itself on failure
		})
		if !ok {
			if pending != nil {
				pending.abandon(s.cache)
			}
			return
		}
		i = j + 1
	}
}

func (fs *framedSource) Next() ([]byte, *Buf, error) {
	if !fs.started {
		fs.started = true
		go fs.produce()
	}
	if fs.next_ > fs.hi {
		return nil, nil, io.EOF
	}
	fu, ok := <-fs.ch
	if !ok {
		if err := fs.ctx.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("frame %d: producer stopped early: %w", fs.next_, ErrCorrupt)
	}
	if fu.i != fs.next_ {
		fu.abandon(fs.set.cache)
		return nil, nil, fmt.Errorf("frame %d arrived when %d was expected: %w", fu.i, fs.next_, ErrCorrupt)
	}
	fs.next_++
	buf := fu.buf
	if buf == nil {
		var err error
		buf, err = fs.set.cache.waitFlight(fs.ctx, fu.fl)
		if err != nil && isContextErr(err) && fs.ctx.Err() == nil {
			buf, err = fs.set.fillFrame(fs.ctx, fs.ci, fu.i) // the fetcher's context ended, not ours
		}
		if err != nil {
			return nil, nil, err
		}
	}
	f := fs.set.chunks[fs.ci].Frames[fu.i]
	if int64(len(buf.b)) != f.USize {
		buf.Release()
		return nil, nil, fmt.Errorf("frame %d: decoded buffer holds %d bytes, manifest says %d: %w", fu.i, len(buf.b), f.USize, ErrCorrupt)
	}
	if fu.i == fs.hi {
		// The read reached its last frame: note it for sequential
		// detection and readahead now, not when the read began, so the
		// window past it is fetched for the requests that follow, and a
		// read abandoned half-way (a client that left) starts none.
		fs.set.noteFrames(fs.ci, fs.lo, fs.hi)
	}
	lo := max(fs.u0, f.UOff) - f.UOff
	hi := min(fs.u1, f.UOff+f.USize) - f.UOff
	return buf.b[lo:hi], buf, nil
}

func (fs *framedSource) Close() {
	fs.cancel()
	if fs.started {
		c := fs.set.cache
		go func() {
			for fu := range fs.ch {
				fu.abandon(c)
			}
		}()
	}
}

// noteFrames records that frames lo..hi of chunk ci are being read and, if
// the chunk is read sequentially, prefetches the next frames in chunk order
// (crossing into the following framed chunks).
//
// The window is s.readahead frames past hi, refilled with hysteresis: a
// prefetch starts only when less than half a window is still ahead, and then
// fetches the rest of the window, so a sequential walk costs one coalesced
// GET per half window rather than one GET per frame, and the next frames'
// first-byte latency overlaps the serving of the current ones.
func (s *Set) noteFrames(ci int32, lo, hi int) {
	rs := s.state(ci)
	last := rs.lastFrame.Swap(int64(hi))
	seq := int64(lo) == last || int64(lo) == last+1 || (lo == 0 && last == -2)
	if !seq || s.readahead <= 0 || s.ctx.Err() != nil {
		return
	}
	// A window left behind or far ahead of this read (an earlier pass over
	// the chunk) says nothing about this pass: restart it here, so a second
	// sequential read of the chunk gets readahead again.
	if pt := rs.prefetchedTo.Load(); pt < int64(lo)-1 || pt > int64(hi+s.readahead) {
		rs.prefetchedTo.Store(int64(hi))
	}
	if rs.prefetchedTo.Load() >= int64(hi+(s.readahead+1)/2) {
		return
	}
	select {
	case s.prefetchSem <- struct{}{}:
	default:
		return // enough prefetch in flight; the window is refilled next time
	}
	type span struct {
		ci     int32
		lo, hi int
	}
	var spans []span
	want := s.readahead
	for c, from := ci, hi+1; want > 0 && int(c) < len(s.chunks); c, from = c+1, 0 {
		ch := &s.chunks[c]
		if ch.Kind != FramedZstd {
			break
		}
		to := min(from+want-1, len(ch.Frames)-1)
		cs := s.state(c)
		if start := max(from, int(cs.prefetchedTo.Load())+1); start <= to {
			spans = append(spans, span{c, start, to})
			cs.prefetchedTo.Store(int64(to))
		}
		want -= max(0, to-from+1)
	}
	if len(spans) == 0 {
		<-s.prefetchSem
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.prefetchSem
		return
	}
	s.prefetchWG.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.prefetchWG.Done()
		defer func() { <-s.prefetchSem }()
		budget := s.cache.budget / 4
		for _, sp := range spans {
			s.prefetch(s.ctx, sp.ci, sp.lo, sp.hi, &budget)
		}
	}()
}

// prefetch fetches the frames lo..hi of chunk ci that are neither cached nor
// in flight, in coalesced runs, without taking references to them. It stops
// when budget (uncompressed bytes) is spent; giant frames are skipped.
func (s *Set) prefetch(ctx context.Context, ci int32, lo, hi int, budget *int64) {
	fr := s.chunks[ci].Frames
	for i := lo; i <= hi && ctx.Err() == nil; i++ {
		if s.giant(fr[i]) || fr[i].USize > *budget {
			return
		}
		if s.cache.contains(s.frameKey(ci, i)) {
			continue
		}
		buf, fl, mine := s.cache.lookup(s.frameKey(ci, i), false)
		if !mine {
			if buf != nil {
				buf.Release()
			}
			continue
		}
		*budget -= fr[i].USize
		fls := []*flight{fl}
		j, runBytes := i, fr[i].CSize
		for j < hi && runFits(fr, j+1, runBytes) && !s.giant(fr[j+1]) && fr[j+1].USize <= *budget {
			buf, fl2, m := s.cache.lookup(s.frameKey(ci, j+1), false)
			if !m {
				if buf != nil {
					buf.Release()
				}
				break
			}
			j++
			runBytes += fr[j].COff - (fr[j-1].COff + fr[j-1].CSize) + fr[j].CSize
			*budget -= fr[j].USize
			fls = append(fls, fl2)
		}
		s.fetchRun(ctx, ci, i, j, fls, func(int, *flight) {})
		i = j
	}
}

// lazyRange reads object bytes [start,end) of chunk ci for a stream decoder,
// (re)opening a range GET on demand with the current context, so a parked
// decoder holds no connection. It hashes what it delivers and, at the end,
// compares with want (if set): the decoder then fails instead of finishing.
type lazyRange struct {
	set        *Set
	ci         int32
	ctx        context.Context
	start, end int64
	n          int64
	body       io.ReadCloser
	h          hash.Hash
	want       [32]byte
	what       string
	whole      bool // the whole unframed object (its failure is remembered)
	verified   bool
	failed     error
}

func (r *lazyRange) Read(p []byte) (int, error) {
	if r.failed != nil {
		return 0, r.failed
	}
	total := r.end - r.start
	if r.n >= total {
		return 0, io.EOF
	}
	if r.body == nil {
		b, err := r.set.rangeGet(r.ctx, r.ci, r.start+r.n, total-r.n)
		if err != nil {
			r.failed = err
			return 0, err
		}
		r.body = b
	}
	if int64(len(p)) > total-r.n {
		p = p[:total-r.n]
	}
	k, err := r.body.Read(p)
	if k > 0 {
		if r.h != nil {
			r.h.Write(p[:k])
		}
		r.n += int64(k)
	}
	if err == io.EOF {
		r.body.Close()
		r.body = nil
		err = nil
		if r.n < total {
			err = fmt.Errorf("body ended at object byte %d of %d: %w", r.start+r.n, r.end, backend.ErrBadResponse)
		}
	}
	if err == nil && r.n == total {
		err = r.finish()
	}
	if err != nil {
		r.failed = err
	}
	return k, err
}

func (r *lazyRange) finish() error {
	if r.body != nil {
		r.body.Close()
		r.body = nil
	}
	if r.h != nil {
		var got [32]byte
		r.h.Sum(got[:0])
		if got != r.want {
			r.set.metrics.checksumFailure()
			err := fmt.Errorf("%s: sha256 mismatch: %w", r.what, ErrChecksum)
			if r.whole {
				r.set.state(r.ci).failStream(err)
			}
			return err
		}
	}
	r.verified = true
	return nil
}

// suspend closes the connection; the next Read reopens at the same place.
func (r *lazyRange) suspend() {
	if r.body != nil {
		r.body.Close()
		r.body = nil
	}
}

// zstream is a positioned stream decoder over a giant frame (frame >= 0) or
// a whole unframed zstd chunk (frame == -1).
type zstream struct {
	ci    int32
	frame int
	dec   *zstd.Decoder
	src   *lazyRange
	pos   int64 // uncompressed bytes produced
	ulen  int64 // expected uncompressed length; -1 = unknown
	limit int64 // whole object: decoding past this many bytes fails; 0 = none
}

// overLimit fails a whole-object decode that ran past the chunk's bound.
func (z *zstream) overLimit() error {
	if z.limit > 0 && z.pos > z.limit {
		err := fmt.Errorf("zstd stream decodes past %d bytes, more than its manifest entries can need: %w", z.limit, ErrCorrupt)
		z.src.set.state(z.ci).failStream(err) // the object itself is at fault: remembered
		return err
	}
	return nil
}

func (s *Set) newZstream(ctx context.Context, ci int32, frame int) (*zstream, error) {
	c := &s.chunks[ci]
	src := &lazyRange{set: s, ci: ci, ctx: ctx}
	z := &zstream{ci: ci, frame: frame, src: src, ulen: -1}
	if frame >= 0 {
		f := c.Frames[frame]
		src.start, src.end, z.ulen = f.COff, f.COff+f.CSize, f.USize
		src.what = fmt.Sprintf("frame %d (object bytes %d-%d)", frame, f.COff, f.COff+f.CSize)
		if f.HasSum {
			src.h, src.want = sha256.New(), f.Sum
		}
	} else {
		if err := s.state(ci).streamFailure(); err != nil {
			return nil, err // this object failed its check before: not decoded again
		}
		size, err := s.objectSize(ctx, ci)
		if err != nil {
			return nil, err
		}
		src.end = size
		src.what = "whole object"
		src.whole = true
		z.limit = c.MaxTar
		if c.HasSum {
			src.h, src.want = sha256.New(), c.Sum
		}
	}
	dec, err := s.cache.decoder(src)
	if err != nil {
		return nil, err
	}
	z.dec = dec
	return z, nil
}

// read decodes into p, mapping decoder failures to their cause.
func (z *zstream) read(p []byte) (int, error) {
	n, err := io.ReadFull(z.dec, p)
	z.pos += int64(n)
	if lerr := z.overLimit(); lerr != nil {
		return n, lerr
	}
	if err == nil {
		return n, nil
	}
	if z.src.failed != nil {
		return n, z.src.failed
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, fmt.Errorf("zstd stream ends at uncompressed byte %d, before %d: %w", z.pos, z.pos+int64(len(p)-n), ErrCorrupt)
	}
	return n, fmt.Errorf("zstd at uncompressed byte %d: %v: %w", z.pos, err, ErrCorrupt)
}

// atEnd confirms that the stream ends exactly here and that its checksum
// (if any) matched.
func (z *zstream) atEnd() error {
	var one [1]byte
	k, err := z.dec.Read(one[:])
	for k == 0 && err == nil {
		k, err = z.dec.Read(one[:])
	}
	if z.src.failed != nil {
		return z.src.failed
	}
	if k > 0 {
		return fmt.Errorf("zstd stream continues past its declared %d bytes: %w", z.pos, ErrCorrupt)
	}
	if err != io.EOF {
		return fmt.Errorf("zstd at end (%d bytes): %v: %w", z.pos, err, ErrCorrupt)
	}
	if !z.src.verified {
		if z.src.n < z.src.end-z.src.start {
			return fmt.Errorf("zstd stream ended after %d of %d compressed bytes: %w", z.src.n, z.src.end-z.src.start, ErrCorrupt)
		}
		if err := z.src.finish(); err != nil {
			return err
		}
	}
	return nil
}

// discard releases the stream; healthy decoders return to the pool.
func (z *zstream) discard(c *FrameCache, healthy bool) {
	z.src.suspend()
	if z.dec == nil {
		return
	}
	if healthy {
		c.putDecoder(z.dec)
	} else {
		z.dec.Close()
	}
	z.dec = nil
}

// zSource streams uncompressed bytes [u0,u1) of a zstream, continuing a
// parked decoder when one stopped at or before u0 (so sequential ranged
// reads cost O(size) decode work in total), and parking its decoder at u1.
// For a giant frame the segment holding the frame's last byte is released
// only after the frame's sha256 and decoded length were confirmed.
type zSource struct {
	set    *Set
	ctx    context.Context
	ci     int32
	frame  int
	u0, u1 int64
	z      *zstream
	buf    *Buf
}

func (zs *zSource) Next() ([]byte, *Buf, error) {
	s := zs.set
	if zs.z == nil {
		if zs.u0 >= zs.u1 {
			return nil, nil, io.EOF
		}
		z := s.unpark(zs.ci, zs.frame, zs.u0)
		if z == nil {
			var err error
			if z, err = zs.set.newZstream(zs.ctx, zs.ci, zs.frame); err != nil {
				return nil, nil, err
			}
		}
		z.src.ctx = zs.ctx
		zs.z = z
		zs.buf = s.cache.bufs.getBuf(segmentBytes)
		for z.pos < zs.u0 {
			n, err := z.read(zs.buf.b[:min(int64(len(zs.buf.b)), zs.u0-z.pos)])
			s.decoded.Add(int64(n))
			if err != nil {
				zs.fail()
				return nil, nil, err
			}
		}
	}
	z := zs.z
	if z.pos >= zs.u1 {
		return nil, nil, io.EOF
	}
	n, err := z.read(zs.buf.b[:min(int64(len(zs.buf.b)), zs.u1-z.pos)])
	s.decoded.Add(int64(n))
	if err == nil && z.ulen >= 0 && z.pos == z.ulen {
		err = z.atEnd()
	}
	if err != nil {
		zs.fail()
		return nil, nil, err
	}
	return zs.buf.b[:n], nil, nil
}

func (zs *zSource) fail() {
	if zs.z != nil {
		zs.z.discard(zs.set.cache, false)
		zs.z = nil
	}
}

func (zs *zSource) Close() {
	s := zs.set
	if z := zs.z; z != nil {
		zs.z = nil
		if z.ulen < 0 || z.pos < z.ulen {
			s.park(z)
		} else {
			z.discard(s.cache, true)
		}
	}
	if zs.buf != nil {
		zs.buf.Release()
		zs.buf = nil
	}
}

// rangeSource streams object bytes [pos,end) of a plain tar or direct
// object with one range GET.
type rangeSource struct {
	set      *Set
	ctx      context.Context
	ci       int32
	pos, end int64
	body     io.ReadCloser
	buf      *Buf
}

func (rs *rangeSource) Next() ([]byte, *Buf, error) {
	if rs.pos >= rs.end {
		return nil, nil, io.EOF
	}
	if rs.body == nil {
		b, err := rs.set.rangeGet(rs.ctx, rs.ci, rs.pos, rs.end-rs.pos)
		if err != nil {
			return nil, nil, fmt.Errorf("object bytes %d-%d: %w", rs.pos, rs.end, err)
		}
		rs.body = b
		rs.buf = rs.set.cache.bufs.getBuf(segmentBytes)
	}
	want := min(int64(len(rs.buf.b)), rs.end-rs.pos)
	n, err := io.ReadFull(rs.body, rs.buf.b[:want])
	if err != nil {
		return nil, nil, fmt.Errorf("body ended at object byte %d of %d: %w", rs.pos+int64(n), rs.end, shortBody(err))
	}
	rs.pos += want
	return rs.buf.b[:want], nil, nil
}

func (rs *rangeSource) Close() {
	if rs.body != nil {
		rs.body.Close()
		rs.body = nil
	}
	if rs.buf != nil {
		rs.buf.Release()
		rs.buf = nil
	}
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
	s.buf.Retain()
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
		return &rangeSource{set: s, ctx: ctx, ci: ci, pos: u0, end: u1}, nil
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
		mk = append(mk, func() Source { return s.newFramedSource(ctx, ci, fi, fj, s0, s1) })
		i = j + 1
	}
	if len(mk) == 1 {
		return mk[0](), nil
	}
	return &multiSource{mk: mk}, nil
}

// RangeVerified reports whether every byte of [u0,u1) of chunk ci is
// covered by a frame checksum checked before use.
func (s *Set) RangeVerified(ci int32, u0, u1 int64) bool {
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
