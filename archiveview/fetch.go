package archiveview

// fetch.go turns chunk byte ranges into verified segments: coalesced range
// GETs of frame runs, per-frame sha256 checks before decoding, stream
// decoders for giant frames and unframed zstd chunks (parked between reads),
// and direct ranges of plain objects. read.go assembles files from these.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
)

// segSource yields the bytes of one range in order, as segments. A segment
// is valid until the next call to next, or, when rel is not nil, until the
// caller releases rel (the caller owns that reference). next returns io.EOF
// after the last byte. close releases everything the source holds.
type segSource interface {
	next() (seg []byte, rel *frameBuf, err error)
	close()
}

// rangeGet issues one range read of chunk ci, pinned to the ETag of the
// chunk's first response.
func (a *Archive) rangeGet(ctx context.Context, ci int32, off, length int64) (io.ReadCloser, error) {
	c := &a.chunks[ci]
	rs := a.chunkState(ci)
	body, info, err := a.store.ReadRange(ctx, a.bucket, c.key, off, length, rs.ifMatch())
	if err != nil {
		return nil, err
	}
	if err := rs.observe(info); err != nil {
		body.Close()
		return nil, err
	}
	if c.kind == kindDirect && info.Size > 0 && info.Size != c.size {
		// A direct object is the file (or split part) itself: one of
		// another size is something else (e.g. a chunk object whose
		// chunks[] entry was renamed away), never a prefix to serve.
		body.Close()
		return nil, fmt.Errorf("direct object is %d bytes, manifest says %d: %w", info.Size, c.size, ErrCorrupt)
	}
	return body, nil
}

// objectSize returns chunk ci's real object size (Stat once if unknown).
func (a *Archive) objectSize(ctx context.Context, ci int32) (int64, error) {
	rs := a.chunkState(ci)
	if sz := rs.objectSize(); sz > 0 {
		return sz, nil
	}
	info, err := a.store.Stat(ctx, a.bucket, a.chunks[ci].key)
	if err != nil {
		return 0, err
	}
	if err := rs.observe(info); err != nil {
		return 0, err
	}
	return info.Size, nil
}

// frameKey names frame i of chunk ci by what it is (compressed span,
// decoded size, sha256), not by its index in this manifest's table.
func (a *Archive) frameKey(ci int32, i int) cacheKey {
	f := &a.chunks[ci].frames[i]
	return cacheKey{store: a.rdState().storeID, bucket: a.bucket, object: a.chunks[ci].key, kind: keyFrame,
		n: f.cOff, m: f.cSize, u: f.uSize, sum: f.sum, hasSum: f.hasSum}
}

// coverFrames returns the frames overlapping [u0,u1) (u1 > u0).
func coverFrames(fr []frame, u0, u1 int64) (lo, hi int, err error) {
	lo = sort.Search(len(fr), func(i int) bool { return fr[i].uOff+fr[i].uSize > u0 })
	hi = sort.Search(len(fr), func(i int) bool { return fr[i].uOff >= u1 }) - 1
	if lo >= len(fr) || hi < lo || fr[lo].uOff > u0 || fr[hi].uOff+fr[hi].uSize < u1 {
		end := int64(0)
		if n := len(fr); n > 0 {
			end = fr[n-1].uOff + fr[n-1].uSize
		}
		return 0, 0, fmt.Errorf("tar bytes %d-%d lie outside the chunk's frames (tar length %d): %w", u0, u1, end, ErrCorrupt)
	}
	return lo, hi, nil
}

// checkFrame verifies frame i's compressed bytes against its sha256 and
// decodes it into a pooled buffer of exactly uSize bytes.
func (a *Archive) checkFrame(ci int32, i int, comp []byte) (*frameBuf, error) {
	fr := &a.chunks[ci].frames[i]
	if fr.hasSum {
		if sha256.Sum256(comp) != fr.sum {
			a.metrics.checksumFailure()
			return nil, fmt.Errorf("frame %d (object bytes %d-%d): sha256 mismatch: %w", i, fr.cOff, fr.cOff+fr.cSize, ErrChecksum)
		}
	} else if rs := a.chunkState(ci); !rs.noSumNoted.Swap(true) {
		a.log.Debug().Str("archive", a.name).Str("chunk", a.chunks[ci].key).Int("frame", i).
			Msg("frame has no checksum: decoded and length-checked only")
	}
	buf, err := a.rdState().cache.decodeFrame(comp, fr.uSize)
	if err != nil {
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, fr.cOff, fr.cOff+fr.cSize, err)
	}
	a.metrics.frameDecoded()
	return buf, nil
}

// runFits extends a run of frames starting at i (all claimable) while the
// next frame follows in the object within maxRunGap and the run stays under
// maxRunBytes compressed.
func runFits(fr []frame, j int, runBytes int64) bool {
	p, n := fr[j-1], fr[j]
	gap := n.cOff - (p.cOff + p.cSize)
	return gap >= 0 && gap <= maxRunGap && runBytes+gap+n.cSize <= maxRunBytes
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
func (a *Archive) fetchRun(ctx context.Context, ci int32, i, j int, fls []*flight, emit func(k int, fl *flight)) {
	rd := a.rdState()
	c := &a.chunks[ci]
	fr := c.frames
	start, end := fr[i].cOff, fr[j].cOff+fr[j].cSize
	var wg sync.WaitGroup
	defer wg.Wait()
	fail := func(from int, err error) {
		for k := from; k <= j; k++ {
			rd.cache.complete(a.frameKey(ci, k), fls[k-i], nil, err)
		}
		for k := from; k <= j; k++ {
			emit(k, fls[k-i])
		}
	}
	body, err := a.rangeGet(ctx, ci, start, end-start)
	if err != nil {
		fail(i, fmt.Errorf("frames %d-%d (object bytes %d-%d): %w", i, j, start, end, err))
		return
	}
	defer body.Close()
	pos := start
	for k := i; k <= j; k++ {
		f := fr[k]
		if gap := f.cOff - pos; gap > 0 {
			if _, err := io.CopyN(io.Discard, body, gap); err != nil {
				fail(k, fmt.Errorf("frame %d: reading gap at object byte %d: %w", k, pos, shortBody(err)))
				return
			}
		}
		comp := rd.cache.bufs.getBuf(f.cSize)
		if n, err := io.ReadFull(body, comp.b); err != nil {
			comp.release()
			fail(k, fmt.Errorf("frame %d: body ended at object byte %d of %d: %w", k, f.cOff+int64(n), f.cOff+f.cSize, shortBody(err)))
			return
		}
		pos = f.cOff + f.cSize
		a.metrics.frameFetched()
		select {
		case rd.cache.decodeSem <- struct{}{}:
		case <-ctx.Done():
			comp.release()
			fail(k, fmt.Errorf("frame %d: %w", k, ctx.Err()))
			return
		}
		wg.Add(1)
		go func(k int, fl *flight, comp *frameBuf) {
			defer wg.Done()
			buf, err := a.checkFrame(ci, k, comp.b)
			comp.release()
			<-rd.cache.decodeSem
			if errors.Is(err, ErrChecksum) {
				buf, err = a.refetchFrame(ctx, ci, k, err)
			}
			rd.cache.complete(a.frameKey(ci, k), fl, buf, err)
			if buf != nil {
				buf.release()
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
func (a *Archive) fillFrame(ctx context.Context, ci int32, i int) (*frameBuf, error) {
	rd := a.rdState()
	k := a.frameKey(ci, i)
	return rd.cache.get(ctx, k, a.metrics, func(ctx context.Context) (*frameBuf, error) {
		buf, err := a.fetchFrame(ctx, ci, i)
		if errors.Is(err, ErrChecksum) {
			buf, err = a.refetchFrame(ctx, ci, i, err)
		}
		return buf, err
	})
}

// fetchFrame fetches frame i of chunk ci alone, verifies and decodes it.
func (a *Archive) fetchFrame(ctx context.Context, ci int32, i int) (*frameBuf, error) {
	f := a.chunks[ci].frames[i]
	body, err := a.rangeGet(ctx, ci, f.cOff, f.cSize)
	if err != nil {
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, f.cOff, f.cOff+f.cSize, err)
	}
	defer body.Close()
	comp := a.rdState().cache.bufs.getBuf(f.cSize)
	defer comp.release()
	if n, err := io.ReadFull(body, comp.b); err != nil {
		return nil, fmt.Errorf("frame %d: body ended at object byte %d of %d: %w", i, f.cOff+int64(n), f.cOff+f.cSize, shortBody(err))
	}
	a.metrics.frameFetched()
	// The same decode budget as fetchRun's: at most GOMAXPROCS frame
	// decodes at once across the cache, on every path that decodes.
	sem := a.rdState().cache.decodeSem
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("frame %d: %w", i, ctx.Err())
	}
	defer func() { <-sem }()
	return a.checkFrame(ci, i, comp.b)
}

// refetchFrame fetches frame i once more after its bytes failed their
// sha256 (first): corruption in transit passes, corruption at rest fails
// twice. Both failures count in wharf_checksum_failures_total. The error
// of a second failure says that the frame was fetched twice.
func (a *Archive) refetchFrame(ctx context.Context, ci int32, i int, first error) (*frameBuf, error) {
	a.log.Warn().Str("archive", a.name).Str("chunk", a.chunks[ci].key).Int("frame", i).Err(first).
		Msg("frame checksum mismatch: fetching the frame again")
	buf, err := a.fetchFrame(ctx, ci, i)
	if errors.Is(err, ErrChecksum) {
		return nil, fmt.Errorf("fetched twice: %w", err)
	}
	return buf, err
}

// giant reports whether frame f is streamed rather than fetched whole and
// cached: its decoded or its compressed size exceeds MaxFrameBytes. Both
// count, so a manifest claiming a huge compressed span for a small frame
// never makes the reader allocate that span (a cached frame's compressed
// bytes are read into one buffer before they are verified).
func (rd *archiveReadState) giant(f frame) bool {
	return f.uSize > rd.maxFrame || f.cSize > rd.maxFrame
}

// framePlausible refuses a frame whose compressed span is larger than any
// zstd frame of its decoded size can be (a frame span holds exactly one
// zstd frame): such a manifest entry is a lie, and reading (or hashing) the
// span would only cost time. The bound is far above zstd's own compress
// bound (size + size/256 + 64 KiB): twice the decoded size plus 64 KiB.
func framePlausible(i int, f frame) error {
	const slack = 64 << 10
	if f.uSize <= (math.MaxInt64-slack)/2 && f.cSize > 2*f.uSize+slack {
		return fmt.Errorf("frame %d (object bytes %d-%d): %d compressed bytes cannot hold one zstd frame of %d bytes: %w",
			i, f.cOff, f.cOff+f.cSize, f.cSize, f.uSize, ErrCorrupt)
	}
	return nil
}

// frameFuture is one frame of a framedSource, in order.
type frameFuture struct {
	i   int
	buf *frameBuf // cached (reference held), or
	fl  *flight   // a flight the source is registered on
}

func (fu frameFuture) abandon(c *FrameCache) {
	if fu.buf != nil {
		fu.buf.release()
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
	a       *Archive
	ctx     context.Context
	cancel  context.CancelFunc
	ci      int32
	lo, hi  int
	u0, u1  int64
	ch      chan frameFuture
	next_   int
	started bool
}

func (a *Archive) newFramedSource(ctx context.Context, ci int32, lo, hi int, u0, u1 int64) *framedSource {
	ctx, cancel := context.WithCancel(ctx)
	return &framedSource{a: a, ctx: ctx, cancel: cancel, ci: ci, lo: lo, hi: hi, u0: u0, u1: u1,
		ch: make(chan frameFuture, runtime.GOMAXPROCS(0)+1), next_: lo}
}

func (s *framedSource) send(fu frameFuture) bool {
	select {
	case s.ch <- fu:
		return true
	case <-s.ctx.Done():
		fu.abandon(s.a.rdState().cache)
		return false
	}
}

func (s *framedSource) produce() {
	defer close(s.ch)
	a, rd := s.a, s.a.rdState()
	fr := a.chunks[s.ci].frames
	var pending *frameFuture
	for i := s.lo; i <= s.hi; {
		var fu frameFuture
		var mine bool
		if pending != nil {
			fu, pending = *pending, nil
		} else {
			buf, fl, m := rd.cache.lookup(a.frameKey(s.ci, i), true)
			fu, mine = frameFuture{i: i, buf: buf, fl: fl}, m
			if buf != nil {
				a.metrics.cacheHit()
			}
		}
		if !mine {
			if !s.send(fu) {
				return
			}
			i++
			continue
		}
		fls := []*flight{fu.fl}
		j, runBytes := i, fr[i].cSize
		for j < s.hi && runFits(fr, j+1, runBytes) {
			buf, fl, m := rd.cache.lookup(a.frameKey(s.ci, j+1), true)
			if !m {
				if buf != nil {
					a.metrics.cacheHit()
				}
				pending = &frameFuture{i: j + 1, buf: buf, fl: fl}
				break
			}
			j++
			runBytes += fr[j].cOff - (fr[j-1].cOff + fr[j-1].cSize) + fr[j].cSize
			fls = append(fls, fl)
		}
		ok := true
		a.fetchRun(s.ctx, s.ci, i, j, fls, func(k int, fl *flight) {
			if !ok {
				rd.cache.abandonFlight(fl)
				return
			}
			ok = s.send(frameFuture{i: k, fl: fl}) // abandons fl itself on failure
		})
		if !ok {
			if pending != nil {
				pending.abandon(rd.cache)
			}
			return
		}
		i = j + 1
	}
}

func (s *framedSource) next() ([]byte, *frameBuf, error) {
	if !s.started {
		s.started = true
		go s.produce()
	}
	if s.next_ > s.hi {
		return nil, nil, io.EOF
	}
	fu, ok := <-s.ch
	if !ok {
		if err := s.ctx.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("frame %d: producer stopped early: %w", s.next_, ErrCorrupt)
	}
	if fu.i != s.next_ {
		fu.abandon(s.a.rdState().cache)
		return nil, nil, fmt.Errorf("frame %d arrived when %d was expected: %w", fu.i, s.next_, ErrCorrupt)
	}
	s.next_++
	buf := fu.buf
	if buf == nil {
		var err error
		buf, err = s.a.rdState().cache.waitFlight(s.ctx, fu.fl)
		if err != nil && isContextErr(err) && s.ctx.Err() == nil {
			buf, err = s.a.fillFrame(s.ctx, s.ci, fu.i) // the fetcher's context ended, not ours
		}
		if err != nil {
			return nil, nil, err
		}
	}
	f := s.a.chunks[s.ci].frames[fu.i]
	if int64(len(buf.b)) != f.uSize {
		buf.release()
		return nil, nil, fmt.Errorf("frame %d: decoded buffer holds %d bytes, manifest says %d: %w", fu.i, len(buf.b), f.uSize, ErrCorrupt)
	}
	if fu.i == s.hi {
		// The read reached its last frame: note it for sequential
		// detection and readahead now, not when the read began, so the
		// window past it is fetched for the requests that follow, and a
		// read abandoned half-way (a client that left) starts none.
		s.a.noteFrames(s.ci, s.lo, s.hi)
	}
	lo := max(s.u0, f.uOff) - f.uOff
	hi := min(s.u1, f.uOff+f.uSize) - f.uOff
	return buf.b[lo:hi], buf, nil
}

func (s *framedSource) close() {
	s.cancel()
	if s.started {
		c := s.a.rdState().cache
		go func() {
			for fu := range s.ch {
				fu.abandon(c)
			}
		}()
	}
}

// noteFrames records that frames lo..hi of chunk ci are being read and, if
// the chunk is read sequentially, prefetches the next frames in chunk order
// (crossing into the following framed chunks).
//
// The window is rd.readahead frames past hi, refilled with hysteresis: a
// prefetch starts only when less than half a window is still ahead, and then
// fetches the rest of the window, so a sequential walk costs one coalesced
// GET per half window rather than one GET per frame, and the next frames'
// first-byte latency overlaps the serving of the current ones.
func (a *Archive) noteFrames(ci int32, lo, hi int) {
	rd := a.rdState()
	rs := a.chunkState(ci)
	last := rs.lastFrame.Swap(int64(hi))
	seq := int64(lo) == last || int64(lo) == last+1 || (lo == 0 && last == -2)
	if !seq || rd.readahead <= 0 || rd.ctx.Err() != nil {
		return
	}
	// A window left behind or far ahead of this read (an earlier pass over
	// the chunk) says nothing about this pass: restart it here, so a second
	// sequential read of the chunk gets readahead again.
	if pt := rs.prefetchedTo.Load(); pt < int64(lo)-1 || pt > int64(hi+rd.readahead) {
		rs.prefetchedTo.Store(int64(hi))
	}
	if rs.prefetchedTo.Load() >= int64(hi+(rd.readahead+1)/2) {
		return
	}
	select {
	case rd.prefetchSem <- struct{}{}:
	default:
		return // enough prefetch in flight; the window is refilled next time
	}
	type span struct {
		ci     int32
		lo, hi int
	}
	var spans []span
	want := rd.readahead
	for c, from := ci, hi+1; want > 0 && int(c) < len(a.chunks); c, from = c+1, 0 {
		ch := &a.chunks[c]
		if ch.kind != kindFramedZstd {
			break
		}
		to := min(from+want-1, len(ch.frames)-1)
		cs := a.chunkState(c)
		if start := max(from, int(cs.prefetchedTo.Load())+1); start <= to {
			spans = append(spans, span{c, start, to})
			cs.prefetchedTo.Store(int64(to))
		}
		want -= max(0, to-from+1)
	}
	if len(spans) == 0 {
		<-rd.prefetchSem
		return
	}
	rd.mu.Lock()
	if rd.closed {
		rd.mu.Unlock()
		<-rd.prefetchSem
		return
	}
	rd.prefetchWG.Add(1)
	rd.mu.Unlock()
	go func() {
		defer rd.prefetchWG.Done()
		defer func() { <-rd.prefetchSem }()
		budget := rd.cache.budget / 4
		for _, sp := range spans {
			a.prefetch(rd.ctx, sp.ci, sp.lo, sp.hi, &budget)
		}
	}()
}

// prefetch fetches the frames lo..hi of chunk ci that are neither cached nor
// in flight, in coalesced runs, without taking references to them. It stops
// when budget (uncompressed bytes) is spent; giant frames are skipped.
func (a *Archive) prefetch(ctx context.Context, ci int32, lo, hi int, budget *int64) {
	rd := a.rdState()
	fr := a.chunks[ci].frames
	for i := lo; i <= hi && ctx.Err() == nil; i++ {
		if rd.giant(fr[i]) || fr[i].uSize > *budget {
			return
		}
		if rd.cache.contains(a.frameKey(ci, i)) {
			continue
		}
		buf, fl, mine := rd.cache.lookup(a.frameKey(ci, i), false)
		if !mine {
			if buf != nil {
				buf.release()
			}
			continue
		}
		*budget -= fr[i].uSize
		fls := []*flight{fl}
		j, runBytes := i, fr[i].cSize
		for j < hi && runFits(fr, j+1, runBytes) && !rd.giant(fr[j+1]) && fr[j+1].uSize <= *budget {
			buf, fl2, m := rd.cache.lookup(a.frameKey(ci, j+1), false)
			if !m {
				if buf != nil {
					buf.release()
				}
				break
			}
			j++
			runBytes += fr[j].cOff - (fr[j-1].cOff + fr[j-1].cSize) + fr[j].cSize
			*budget -= fr[j].uSize
			fls = append(fls, fl2)
		}
		a.fetchRun(ctx, ci, i, j, fls, func(int, *flight) {})
		i = j
	}
}

// lazyRange reads object bytes [start,end) of chunk ci for a stream decoder,
// (re)opening a range GET on demand with the current context, so a parked
// decoder holds no connection. It hashes what it delivers and, at the end,
// compares with want (if set): the decoder then fails instead of finishing.
type lazyRange struct {
	a          *Archive
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
		b, err := r.a.rangeGet(r.ctx, r.ci, r.start+r.n, total-r.n)
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
			r.a.metrics.checksumFailure()
			err := fmt.Errorf("%s: sha256 mismatch: %w", r.what, ErrChecksum)
			if r.whole {
				r.a.chunkState(r.ci).failStream(err)
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
		z.src.a.chunkState(z.ci).failStream(err) // the object itself is at fault: remembered
		return err
	}
	return nil
}

func (a *Archive) newZstream(ctx context.Context, ci int32, frame int) (*zstream, error) {
	rd := a.rdState()
	c := &a.chunks[ci]
	src := &lazyRange{a: a, ci: ci, ctx: ctx}
	z := &zstream{ci: ci, frame: frame, src: src, ulen: -1}
	if frame >= 0 {
		f := c.frames[frame]
		src.start, src.end, z.ulen = f.cOff, f.cOff+f.cSize, f.uSize
		src.what = fmt.Sprintf("frame %d (object bytes %d-%d)", frame, f.cOff, f.cOff+f.cSize)
		if f.hasSum {
			src.h, src.want = sha256.New(), f.sum
		}
	} else {
		if err := a.chunkState(ci).streamFailure(); err != nil {
			return nil, err // this object failed its check before: not decoded again
		}
		size, err := a.objectSize(ctx, ci)
		if err != nil {
			return nil, err
		}
		src.end = size
		src.what = "whole object"
		src.whole = true
		z.limit = c.maxTar
		if c.hasSum {
			src.h, src.want = sha256.New(), c.sum
		}
	}
	dec, err := rd.cache.decoder(src)
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
	a      *Archive
	ctx    context.Context
	ci     int32
	frame  int
	u0, u1 int64
	z      *zstream
	buf    *frameBuf
}

func (s *zSource) next() ([]byte, *frameBuf, error) {
	rd := s.a.rdState()
	if s.z == nil {
		if s.u0 >= s.u1 {
			return nil, nil, io.EOF
		}
		z := rd.unpark(s.ci, s.frame, s.u0)
		if z == nil {
			var err error
			if z, err = s.a.newZstream(s.ctx, s.ci, s.frame); err != nil {
				return nil, nil, err
			}
		}
		z.src.ctx = s.ctx
		s.z = z
		s.buf = rd.cache.bufs.getBuf(segmentBytes)
		for z.pos < s.u0 {
			n, err := z.read(s.buf.b[:min(int64(len(s.buf.b)), s.u0-z.pos)])
			rd.decoded.Add(int64(n))
			if err != nil {
				s.fail()
				return nil, nil, err
			}
		}
	}
	z := s.z
	if z.pos >= s.u1 {
		return nil, nil, io.EOF
	}
	n, err := z.read(s.buf.b[:min(int64(len(s.buf.b)), s.u1-z.pos)])
	rd.decoded.Add(int64(n))
	if err == nil && z.ulen >= 0 && z.pos == z.ulen {
		err = z.atEnd()
	}
	if err != nil {
		s.fail()
		return nil, nil, err
	}
	return s.buf.b[:n], nil, nil
}

func (s *zSource) fail() {
	if s.z != nil {
		s.z.discard(s.a.rdState().cache, false)
		s.z = nil
	}
}

func (s *zSource) close() {
	rd := s.a.rdState()
	if z := s.z; z != nil {
		s.z = nil
		if z.ulen < 0 || z.pos < z.ulen {
			rd.park(z)
		} else {
			z.discard(rd.cache, true)
		}
	}
	if s.buf != nil {
		s.buf.release()
		s.buf = nil
	}
}

// rangeSource streams object bytes [pos,end) of a plain tar or direct
// object with one range GET.
type rangeSource struct {
	a        *Archive
	ctx      context.Context
	ci       int32
	pos, end int64
	body     io.ReadCloser
	buf      *frameBuf
}

func (s *rangeSource) next() ([]byte, *frameBuf, error) {
	if s.pos >= s.end {
		return nil, nil, io.EOF
	}
	if s.body == nil {
		b, err := s.a.rangeGet(s.ctx, s.ci, s.pos, s.end-s.pos)
		if err != nil {
			return nil, nil, fmt.Errorf("object bytes %d-%d: %w", s.pos, s.end, err)
		}
		s.body = b
		s.buf = s.a.rdState().cache.bufs.getBuf(segmentBytes)
	}
	want := min(int64(len(s.buf.b)), s.end-s.pos)
	n, err := io.ReadFull(s.body, s.buf.b[:want])
	if err != nil {
		return nil, nil, fmt.Errorf("body ended at object byte %d of %d: %w", s.pos+int64(n), s.end, shortBody(err))
	}
	s.pos += want
	return s.buf.b[:want], nil, nil
}

func (s *rangeSource) close() {
	if s.body != nil {
		s.body.Close()
		s.body = nil
	}
	if s.buf != nil {
		s.buf.release()
		s.buf = nil
	}
}

// bytesSource yields one slice of a held buffer.
type bytesSource struct {
	buf  *frameBuf
	b    []byte
	done bool
}

func (s *bytesSource) next() ([]byte, *frameBuf, error) {
	if s.done || len(s.b) == 0 {
		return nil, nil, io.EOF
	}
	s.done = true
	s.buf.retain()
	return s.b, s.buf, nil
}

func (s *bytesSource) close() {
	if s.buf != nil {
		s.buf.release()
		s.buf = nil
	}
}

// multiSource concatenates sources created on demand.
type multiSource struct {
	mk  []func() segSource
	i   int
	cur segSource
}

func (s *multiSource) next() ([]byte, *frameBuf, error) {
	for {
		if s.cur == nil {
			if s.i >= len(s.mk) {
				return nil, nil, io.EOF
			}
			s.cur = s.mk[s.i]()
			s.i++
		}
		seg, rel, err := s.cur.next()
		if err == io.EOF {
			s.cur.close()
			s.cur = nil
			continue
		}
		return seg, rel, err
	}
}

func (s *multiSource) close() {
	if s.cur != nil {
		s.cur.close()
		s.cur = nil
	}
	s.i = len(s.mk)
}

// chunkRange returns a source of chunk ci's tar-stream bytes [u0,u1) (object
// bytes for plain tar and direct objects).
func (a *Archive) chunkRange(ctx context.Context, ci int32, u0, u1 int64) (segSource, error) {
	c := &a.chunks[ci]
	if u1 <= u0 {
		return &multiSource{}, nil
	}
	switch {
	case c.kind == kindDirect || c.kind == kindPlainTar:
		return &rangeSource{a: a, ctx: ctx, ci: ci, pos: u0, end: u1}, nil
	case c.kind == kindStreamZstd || (c.kind == kindFramedZstd && len(c.frames) == 0):
		return &zSource{a: a, ctx: ctx, ci: ci, frame: -1, u0: u0, u1: u1}, nil
	case c.kind == kindFramedZstd:
	default:
		return nil, fmt.Errorf("chunk kind %v: %w", c.kind, ErrCorrupt)
	}
	fr := c.frames
	lo, hi, err := coverFrames(fr, u0, u1)
	if err != nil {
		return nil, err
	}
	for i := lo; i <= hi; i++ {
		if err := framePlausible(i, fr[i]); err != nil {
			return nil, err
		}
	}
	rd := a.rdState()
	var mk []func() segSource
	for i := lo; i <= hi; {
		f := fr[i]
		if rd.giant(f) {
			s0, s1 := max(u0, f.uOff)-f.uOff, min(u1, f.uOff+f.uSize)-f.uOff
			fi := i
			mk = append(mk, func() segSource {
				return &zSource{a: a, ctx: ctx, ci: ci, frame: fi, u0: s0, u1: s1}
			})
			i++
			continue
		}
		j := i
		for j < hi && !rd.giant(fr[j+1]) {
			j++
		}
		s0, s1, fi, fj := max(u0, f.uOff), min(u1, fr[j].uOff+fr[j].uSize), i, j
		mk = append(mk, func() segSource { return a.newFramedSource(ctx, ci, fi, fj, s0, s1) })
		i = j + 1
	}
	if len(mk) == 1 {
		return mk[0](), nil
	}
	return &multiSource{mk: mk}, nil
}

// rangeVerified reports whether every byte of [u0,u1) of chunk ci is
// covered by a frame checksum checked before use.
func (a *Archive) rangeVerified(ci int32, u0, u1 int64) bool {
	c := &a.chunks[ci]
	if c.kind != kindFramedZstd || len(c.frames) == 0 {
		return false
	}
	lo, hi, err := coverFrames(c.frames, u0, max(u1, u0+1))
	if err != nil {
		return false
	}
	rd := a.rdState()
	for _, f := range c.frames[lo : hi+1] {
		if !f.hasSum || rd.giant(f) {
			return false
		}
	}
	return true
}

// segReader adapts a segSource to io.Reader.
type segReader struct {
	src segSource
	seg []byte
	rel *frameBuf
	err error
}

func (r *segReader) Read(p []byte) (int, error) {
	for len(r.seg) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.rel != nil {
			r.rel.release()
			r.rel = nil
		}
		r.seg, r.rel, r.err = r.src.next()
	}
	n := copy(p, r.seg)
	r.seg = r.seg[n:]
	return n, nil
}

func (r *segReader) Close() error {
	if r.rel != nil {
		r.rel.release()
		r.rel = nil
	}
	r.seg = nil
	r.src.close()
	return nil
}
