package chunkio

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
)

// frameFuture is one frame of a framedSource, in order: a flight the
// source is registered on (its own part's, another reader's or a
// prefetch's), or, with no flight, a frame that was cached when the
// producer looked (the consumer takes it from the cache then, so frames
// far ahead are not pinned).
type frameFuture struct {
	i      int
	fl     *flight
	last   int64 // > 0 on the last frame of a part this source launched: the bytes it reserved
	joined bool  // fl is another read's fetch (served as a cache hit)
}

func (fu frameFuture) abandon(c *FrameCache) {
	if fu.fl != nil {
		c.abandonFlight(fu.fl)
	}
}

// errGaveUp completes flights a prefetch claimed but could not start: it
// is a context error, so a reader that joined the flight fetches the
// frame itself.
var errGaveUp = fmt.Errorf("prefetch gave up for lack of memory: %w", context.Canceled)

// framedSource streams tar bytes [u0,u1) from the cacheable frames lo..hi
// of a framed chunk. A producer goroutine looks every frame up in the
// cache, joins fetches already in flight (another reader's, or prefetch),
// and plans the missing ones into parts (plan.go), keeping up to its window
// of parts in flight ahead of the consumer. Each part's worker hashes its
// frames as their bytes arrive, verifies and decodes them (across cores)
// and completes their flights; the consumer takes the frames in order.
// The producer and its parts are one run (frameRun); a consumer that must
// fetch a frame itself while the run's parts ahead hold the memory it
// needs drops the run and starts another after that frame (fill).
type framedSource struct {
	set     *Set
	parent  context.Context
	ci      int32
	lo, hi  int
	u0, u1  int64
	run     int // the read's run of tiling reads (readahead.go)
	next    int
	started bool
	closed  bool
	cur     *frameRun // the producer's run, made by the first Next; none for a read of one cached frame
}

// frameRun is one producer of a framedSource, from frame from to hi, and
// the parts it keeps in flight.
type frameRun struct {
	set      *Set
	ci       int32
	from, hi int
	ctx      context.Context
	cancel   context.CancelFunc
	ch       chan frameFuture

	mu    sync.Mutex
	win   window
	ahead int   // parts launched and not yet consumed
	held  int64 // bytes those parts reserved
	wake  chan struct{}
	slots chan struct{} // GETs in flight for this run (StreamParts)
}

func (s *Set) newFramedSource(ctx context.Context, ci int32, lo, hi int, u0, u1 int64, run int) *framedSource {
	// The first run is made by the first Next: a read served from one
	// cached frame needs none (no context, no channels).
	return &framedSource{set: s, parent: ctx, ci: ci, lo: lo, hi: hi, u0: u0, u1: u1, run: run, next: lo}
}

// maxQueuedFrames bounds the futures a run's producer queues ahead of
// its consumer (its window of parts bounds the bytes): a read over
// millions of tiny frames allocates no queue slot per frame. A producer
// with a full queue waits for the consumer (or its context), holding only
// claims whose fetches are under way.
const maxQueuedFrames = 1024

// newRun returns a run producing frames from..hi (not started).
func (fs *framedSource) newRun(from int) *frameRun {
	ctx, cancel := context.WithCancel(fs.parent)
	s := fs.set
	return &frameRun{set: s, ci: fs.ci, from: from, hi: fs.hi, ctx: ctx, cancel: cancel,
		ch:  make(chan frameFuture, min(max(1, fs.hi-from+1), maxQueuedFrames)),
		win: newWindow(s.lim.streamParts), wake: make(chan struct{}), slots: make(chan struct{}, s.lim.streamParts)}
}

// signal wakes the producer (under fs.mu).
func (fs *frameRun) signal() {
	close(fs.wake)
	fs.wake = make(chan struct{})
}

// slot waits until the window has room for another part and returns the
// number of parts in flight and the bytes they hold.
func (fs *frameRun) slot() (ahead int, held int64, ok bool) {
	for {
		fs.mu.Lock()
		if fs.ahead < fs.win.n {
			a, h := fs.ahead, fs.held
			fs.mu.Unlock()
			return a, h, true
		}
		ch := fs.wake
		fs.mu.Unlock()
		select {
		case <-ch:
		case <-fs.ctx.Done():
			return 0, 0, false
		}
	}
}

// drained waits until no part of this source is ahead of the consumer.
func (fs *frameRun) drained() bool {
	for {
		fs.mu.Lock()
		if fs.ahead == 0 {
			fs.mu.Unlock()
			return true
		}
		ch := fs.wake
		fs.mu.Unlock()
		select {
		case <-ch:
		case <-fs.ctx.Done():
			return false
		}
	}
}

func (fs *frameRun) send(fu frameFuture) bool {
	select {
	case fs.ch <- fu:
		return true
	case <-fs.ctx.Done():
		fu.abandon(fs.set.cache)
		return false
	}
}

func (fs *frameRun) produce() {
	defer close(fs.ch)
	s := fs.set
	c := s.cache
	fr := s.chunks[fs.ci].Frames
	var pending *frameFuture
	for i := fs.from; i <= fs.hi; {
		var fu frameFuture
		var mine bool
		if pending != nil {
			fu, pending = *pending, nil
		} else {
			// Room in the window first: frames are claimed (their flights
			// made ours) only when their part can start, so a reader that
			// stops reading never holds claims that other readers wait on.
			if _, _, ok := fs.slot(); !ok {
				return
			}
			buf, fl, m := c.lookup(s.frameKey(fs.ci, i), true)
			fu, mine = frameFuture{i: i, fl: fl, joined: fl != nil && !m}, m
			if buf != nil {
				buf.Release()
			}
		}
		if !mine {
			if !fs.send(fu) {
				return
			}
			i++
			continue
		}
		if owner, peer := s.peerOwner(fs.ci, i); peer {
			reserved, ok, retry := fs.startPeer(i, fu.fl, owner)
			if !ok {
				return
			}
			if retry {
				continue // the claim was given back: look frame i up again
			}
			fu.last = reserved
			if !fs.send(fu) {
				return
			}
			i++
			continue
		}
		// Claim the run of adjacent missing frames that fits one part: a
		// frame joins when it is ours to fetch (the first that is not is
		// the next future).
		fls := []*flight{fu.fl}
		plan := nextFramePart(fs.hi+1, func(k int) Frame { return fr[k] }, i, s.lim.partSize, func(k int) bool {
			if _, peer := s.peerOwner(fs.ci, k); peer {
				return false // asked of its owner on its own
			}
			buf, fl, m := c.lookup(s.frameKey(fs.ci, k), true)
			if !m {
				if buf != nil {
					buf.Release()
				}
				pending = &frameFuture{i: k, fl: fl, joined: fl != nil}
				return false
			}
			fls = append(fls, fl)
			return true
		})
		j := plan.hi
		reserved, ok, retry := fs.start(plan, fls)
		if !ok || retry {
			if pending != nil {
				pending.abandon(c)
				pending = nil
			}
			if !ok {
				return
			}
			continue // the claims were given back: plan frame i again
		}
		for k := i; k <= j; k++ {
			f := frameFuture{i: k, fl: fls[k-i]}
			if k == j {
				f.last = reserved
			}
			if !fs.send(f) {
				for _, fl := range fls[k-i+1:] {
					c.abandonFlight(fl)
				}
				if pending != nil {
					pending.abandon(c)
				}
				return
			}
		}
		i = j + 1
	}
}

// start launches the part for plan, whose flights fls the producer
// claimed, once the window has room: speculatively while other parts of
// this source are ahead of the consumer, as a demand read when none is.
// A part that cannot start completes its flights with the error (the
// consumer then sees it). One that finds no room to speculate gives its
// claims back (errGaveUp: whoever joined them fetches the frames itself),
// waits, holding nothing, until the consumer caught up (or, when only the
// source's GET slots were short, until one is free), and asks the
// producer to plan again (retry). It returns the bytes the part holds.
func (fs *frameRun) start(plan partPlan, fls []*flight) (reserved int64, ok, retry bool) {
	s := fs.set
	c := s.cache
	fr := s.chunks[fs.ci].Frames
	fail := func(err error) {
		for k, fl := range fls {
			c.complete(s.frameKey(fs.ci, plan.lo+k), fl, nil, err)
		}
	}
	var decoded int64
	for k := plan.lo; k <= plan.hi; k++ {
		decoded += bufSize(fr[k].USize)
	}
	var p *part
	for p == nil {
		ahead, held, ok := fs.slot()
		if !ok {
			fail(fs.ctx.Err())
			return 0, false, false
		}
		mode := speculative
		if ahead == 0 {
			mode = demand
		}
		if mode == speculative && len(fs.slots) == cap(fs.slots) {
			// Every GET slot of this source is held by its parts ahead,
			// whose GETs may be slow to end: the claims are given back
			// before waiting for one (readers that joined them fetch the
			// frames themselves), and the frames are planned again once
			// one is free. Only the producer takes slots: one free now is
			// free at launch.
			fail(errGaveUp)
			select {
			case fs.slots <- struct{}{}:
				<-fs.slots
			case <-fs.ctx.Done():
				return 0, false, false
			}
			return 0, true, true
		}
		var err error
		p, err = s.launch(fs.ctx, nil, fs.ci, plan, waysFor(s.lim.streamParts, ahead+1), decoded, held, mode, fs.slots)
		if err != nil {
			fail(fmt.Errorf("frames %d-%d (object bytes %d-%d): %w", plan.lo, plan.hi, plan.off, plan.end, err))
			return 0, true, false // the consumer reads the error from the flights
		}
		if p == nil { // no room to speculate: wait until the reader caught up
			fail(errGaveUp)
			if !fs.drained() {
				return 0, false, false
			}
			return 0, true, true
		}
	}
	need := bufSize(plan.size()) + decoded
	fs.mu.Lock()
	fs.ahead++
	fs.held += need
	fs.mu.Unlock()
	go partWorker(fs.ctx, s, p, plan.lo, plan.hi, fls, decoded)
	return need, true, false
}

// startPeer asks owner for frame i (whose flight fl the producer
// claimed) once the window has room, like start does for a part: the
// compressed bytes and the decoded frame are taken at once, as a demand
// take when nothing of this source is ahead of the consumer, else
// speculatively (within the stream's fair share, never waiting). One that
// finds no room gives its claim back (errGaveUp), waits until the
// consumer caught up and asks the producer to look the frame up again
// (retry). It returns the bytes the fetch holds.
func (fs *frameRun) startPeer(i int, fl *flight, owner string) (reserved int64, ok, retry bool) {
	s := fs.set
	key := s.frameKey(fs.ci, i)
	need := peerCost(s.chunks[fs.ci].Frames[i])
	ahead, held, ok := fs.slot()
	if !ok {
		s.cache.complete(key, fl, nil, fs.ctx.Err())
		return 0, false, false
	}
	mode := speculative
	if ahead == 0 {
		mode = demand
	}
	var cl *clientUse
	var err error
	if mode == speculative && held+need > s.lim.share() {
		err = errNoMemory
	} else {
		cl, err = s.lim.reserve(fs.ctx, need, mode)
	}
	if err == errNoMemory {
		s.cache.complete(key, fl, nil, errGaveUp)
		if !fs.drained() {
			return 0, false, false
		}
		return 0, true, true
	}
	if err != nil {
		s.cache.complete(key, fl, nil, fmt.Errorf("frame %d: %w", i, err))
		return 0, true, false
	}
	fs.mu.Lock()
	fs.ahead++
	fs.held += need
	fs.mu.Unlock()
	go func() {
		buf, err := peerOrBackend(fs.ctx, s, fs.ci, i, owner, cl, demand)
		s.cache.complete(key, fl, buf, err)
		if buf != nil {
			buf.Release()
		}
	}()
	return need, true, false
}

// consumed is called when the consumer took the last frame of a part this
// source launched, which held bytes.
func (fs *frameRun) consumed(bytes int64) {
	fs.mu.Lock()
	fs.ahead--
	fs.held -= bytes
	fs.signal()
	fs.mu.Unlock()
}

// starved grows the window: the consumer had to wait for a frame.
func (fs *frameRun) starved() {
	fs.mu.Lock()
	if fs.win.n < fs.win.max {
		fs.win.starved()
		fs.signal()
	}
	fs.mu.Unlock()
}

// partWorker turns part p (frames lo..hi, whose flights fls it completes,
// each exactly once) into verified decoded frames: it hashes each frame's
// compressed bytes as they arrive, then verifies and decodes the frame
// into a buffer from reserved (the decoded sizes, reserved at launch; what
// is not used is returned). A frame that fails its sha256 is fetched once
// more on its own, into the part's and the frame's own bytes
// (refetchInto). The part is closed when every frame is done.
func partWorker(ctx context.Context, s *Set, p *part, lo, hi int, fls []*flight, reserved int64) {
	defer p.close()
	c := s.cache
	fr := s.chunks[p.ci].Frames
	for k := lo; k <= hi; k++ {
		f := fr[k]
		key := s.frameKey(p.ci, k)
		var h hash.Hash
		if f.HasSum {
			h = sha256.New()
		}
		size := bufSize(f.USize)
		reserved -= size
		out := s.lim.bufReserved(p.cl, f.USize)
		// A frame decoded in steps starts its decode once its bytes have
		// arrived, beside the hash (progressive.go: earlyDecode);
		// nothing of it is published before the hash matched.
		ed := startEarlyDecode(ctx, s, p, k, out, fls[k-lo])
		err := p.hashThrough(ctx, f.COff, f.COff+f.CSize, h)
		if err == nil {
			s.metrics.frameFetched()
			if ed == nil {
				err = decodeSlot(ctx, s)
			}
		}
		if err != nil {
			if ed != nil {
				ed.abort()
				<-ed.done
			}
			out.Release()
			err = fmt.Errorf("frame %d (object bytes %d-%d): %w", k, f.COff, f.COff+f.CSize, err)
			for m := k; m <= hi; m++ {
				c.complete(s.frameKey(p.ci, m), fls[m-lo], nil, err)
			}
			s.lim.unreserve(p.cl, reserved)
			return
		}
		var sum [32]byte
		if h != nil {
			h.Sum(sum[:0])
		}
		comp := p.buf.b[f.COff-p.off : f.COff+f.CSize-p.off]
		var buf *Buf
		out.retain() // kept across a sha256 mismatch: the second fetch decodes into it
		if ed != nil {
			buf, err = ed.finish(ctx, s, p.ci, k, comp, sum)
		} else {
			buf, err = checkFrameFlight(ctx, s, p.ci, k, comp, &sum, out, fls[k-lo])
			<-c.decodeSem
		}
		if err == nil {
			keepOwned(s, p.ci, k, comp)
		}
		if errors.Is(err, ErrChecksum) {
			buf, err = p.refetchInto(ctx, k, err, out, fls[k-lo])
		} else {
			out.Release() // the extra reference (a decoded buf holds its own)
		}
		if buf != nil && p.prefetch {
			buf.prefetchedBy, buf.prefetchBytes = s.metrics, f.CSize // before the buffer is cached
		}
		c.complete(key, fls[k-lo], buf, err)
		if buf != nil {
			buf.Release()
		}
	}
	s.lim.unreserve(p.cl, reserved)
}

// refetchInto fetches frame k's compressed bytes, which failed their
// sha256 (first), once more into the part's own bytes of the frame
// (corruption in transit passes, corruption at rest fails twice), then
// checks and decodes them into out, the frame's own buffer, whose
// reference it takes over. It takes one GET slot and no memory (the
// bytes are the part's and the frame's, already charged; the slot is
// charged to no client), so the worker never waits for memory it holds.
// The error of a second failure says that the frame was fetched twice.
func (p *part) refetchInto(ctx context.Context, k int, first error, out *Buf, fl *flight) (*Buf, error) {
	s := p.set
	f := s.chunks[p.ci].Frames[k]
	s.log.Warn().Str("archive", s.name).Str("chunk", s.chunks[p.ci].Key).Int("frame", k).Err(first).
		Msg("frame checksum mismatch: fetching the frame again")
	fail := func(err error) (*Buf, error) {
		out.Release()
		return nil, fmt.Errorf("frame %d (object bytes %d-%d), fetched again: %w", k, f.COff, f.COff+f.CSize, err)
	}
	if _, _, err := s.lim.take(WithClient(ctx, ""), 0, 1, demand); err != nil {
		return fail(err)
	}
	comp := p.buf.b[f.COff-p.off : f.COff+f.CSize-p.off]
	body, err := s.rangeGet(ctx, p.ci, f.COff, f.CSize)
	if err == nil {
		_, err = io.ReadFull(body, comp)
		body.Close()
		err = shortBody(err)
	}
	s.lim.putGets(1)
	if err != nil {
		return fail(err)
	}
	s.metrics.frameFetched()
	if err := decodeSlot(ctx, s); err != nil {
		return fail(err)
	}
	defer func() { <-s.cache.decodeSem }()
	buf, err := checkFrameFlight(ctx, s, p.ci, k, comp, nil, out, fl)
	if errors.Is(err, ErrChecksum) {
		return nil, fmt.Errorf("fetched twice: %w", err)
	}
	if err == nil {
		keepOwned(s, p.ci, k, comp)
	}
	return buf, err
}

// hashThrough waits for object bytes [from, to) of the part to arrive,
// writing them to h (if not nil) as they do.
func (p *part) hashThrough(ctx context.Context, from, to int64, h hash.Hash) error {
	for at := from; at < to; {
		avail, err := p.wait(ctx, at-p.off+1)
		if err != nil {
			return err
		}
		upto := min(p.off+avail, to)
		if h != nil {
			h.Write(p.buf.b[at-p.off : upto-p.off])
		}
		at = upto
	}
	return nil
}

func (fs *framedSource) Next() ([]byte, *Buf, error) {
	if !fs.started {
		fs.started = true
		fs.set.lim.streamStarted()
		if fs.lo == fs.hi && fs.parent.Err() == nil {
			// A read within one frame that is cached (every small file of
			// a warm archive, the tree walk's GETs) takes it at once: no
			// producer goroutine, no future, no second lookup. Anything
			// else (missing, being fetched) goes the producer's way.
			if buf := fs.set.cache.cachedRef(fs.set.frameKey(fs.ci, fs.lo)); buf != nil {
				fs.next++
				fs.set.metrics.cacheHit()
				return fs.take(fs.lo, buf)
			}
		}
		fs.cur = fs.newRun(fs.lo)
		go fs.cur.produce()
	}
	if fs.next > fs.hi {
		return nil, nil, io.EOF
	}
	r := fs.cur
	fu, ok := <-r.ch
	if !ok {
		if err := r.ctx.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("frame %d: producer stopped early: %w", fs.next, ErrCorrupt)
	}
	if fu.i != fs.next {
		fu.abandon(fs.set.cache)
		return nil, nil, fmt.Errorf("frame %d arrived when %d was expected: %w", fu.i, fs.next, ErrCorrupt)
	}
	fs.next++
	f := fs.set.chunks[fs.ci].Frames[fu.i]
	var buf *Buf
	var err error
	if fu.fl == nil {
		buf, err = fs.fill(fu.i) // cached when planned: a hit, unless evicted since
	} else {
		select {
		case <-fu.fl.done:
		default:
			r.starved() // the reader waits for data: more parts in flight would help
		}
		// Only the bytes this read needs: a frame being decoded in steps
		// hands them over as soon as its decode passed them.
		need := min(fs.u1, f.UOff+f.USize) - f.UOff
		buf, err = fs.set.cache.waitPrefix(r.ctx, fu.fl, need)
		if err != nil && isContextErr(err) && r.ctx.Err() == nil {
			if fu.last > 0 { // the frame's part is done with
				r.consumed(fu.last)
				fu.last = 0
			}
			buf, err = fs.fill(fu.i) // the fetcher's context ended, not ours
		} else if err == nil && fu.joined {
			fs.set.metrics.cacheHit() // joined another read's fetch: no fetch of its own
		}
	}
	if fu.last > 0 {
		if fu.fl != nil && err == nil {
			select {
			case <-fu.fl.done:
				r.consumed(fu.last)
			default:
				// Handed over mid-decode (waitPrefix): the part holds its
				// bytes until its worker completes the frame, and counts
				// in this source's window until then.
				go func(fl *flight, n int64) {
					<-fl.done
					r.consumed(n)
				}(fu.fl, fu.last)
			}
		} else {
			r.consumed(fu.last)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return fs.take(fu.i, buf)
}

// take hands the consumer frame i's decoded buffer buf (one reference,
// the consumer's): its length checked against the manifest, the read
// noted for readahead when it reached its last frame, the bytes of
// [u0,u1) in it.
func (fs *framedSource) take(i int, buf *Buf) ([]byte, *Buf, error) {
	f := fs.set.chunks[fs.ci].Frames[i]
	buf.read.Store(true) // a prefetched frame that is read was not wasted
	if int64(len(buf.b)) != f.USize {
		buf.Release()
		return nil, nil, fmt.Errorf("frame %d: decoded buffer holds %d bytes, manifest says %d: %w", i, len(buf.b), f.USize, ErrCorrupt)
	}
	if i == fs.hi {
		// The read reached its last frame: note it for sequential
		// detection and readahead now, not when the read began, so the
		// window past it is fetched for the requests that follow, and a
		// read abandoned half-way (a client that left) starts none.
		noteFrames(fs.set, fs.ci, fs.lo, fs.hi, fs.run)
	}
	lo := max(fs.u0, f.UOff) - f.UOff
	hi := min(fs.u1, f.UOff+f.USize) - f.UOff
	return buf.b[lo:hi], buf, nil
}

// fill fetches frame i for the consumer itself: a frame that was cached
// when the producer looked and was evicted since, or one whose fetch ended
// for another read's reason (a fetcher whose client left, a prefetch that
// gave up). Its take does not wait (withoutWait): the memory the run's
// parts ahead hold (its client's share; a part may be being taken right
// now) may be what it would wait for, and they are held until the
// consumer takes them. When it is short, the run is dropped (its parts
// stop and their frames are released), the frame is taken holding
// nothing (waiting as any demand read does), and then a new run produces
// the frames after it.
func (fs *framedSource) fill(i int) (*Buf, error) {
	r := fs.cur
	buf, err := fillFrame(withoutWait(r.ctx), fs.set, fs.ci, i)
	if !errors.Is(err, errMustWait) || fs.parent.Err() != nil {
		return buf, err
	}
	r.cancel()
	r.abandonQueued()
	fs.cur = fs.newRun(i + 1)
	buf, err = fillFrame(fs.cur.ctx, fs.set, fs.ci, i)
	go fs.cur.produce() // after the frame was taken: its parts would compete with it
	return buf, err
}

func (fs *framedSource) Close() {
	r := fs.cur // nil before the first Next and for a read of one cached frame
	if r != nil {
		r.cancel()
	}
	if fs.started && !fs.closed {
		fs.closed = true
		fs.set.lim.streamEnded()
		if r != nil {
			r.abandonQueued()
		}
	}
}

// abandonQueued abandons, in the background, every future r's producer
// queued or still queues (until it stops: r is cancelled first).
func (r *frameRun) abandonQueued() {
	c := r.set.cache
	go func() {
		for fu := range r.ch {
			fu.abandon(c)
		}
	}()
}

// noteFrames is called when a read of frames lo..hi of chunk ci, the
// run-th of a run of tiling reads, reached its last frame. If the run
// proves a stream (readaheadFor, readahead.go), it prefetches the
// next frames in chunk order (crossing into the following framed chunks).
//
// The window is as many frames as the evidence earns (at most
// s.readahead) past hi, refilled with hysteresis: a prefetch starts only
// when less than half a window is still ahead, and then fetches the rest
// of the window, in parts planned like any read and fetched in parallel,
// so a sequential walk of small files costs about one GET per part rather
// than one per file, and the next frames' first-byte latency overlaps the
// serving of the current ones. Random windows (COG tiles, HDF5 chunks,
// Zarr chunks) earn no window: they fetch only their covering frames.
func noteFrames(s *Set, ci int32, lo, hi, run int) {
	if s.readahead <= 0 || s.ctx.Err() != nil {
		return
	}
	rs := s.state(ci)
	w := readaheadFor(run, s.readahead)
	if w == 0 {
		return
	}
	// A window left behind or far ahead of this read (an earlier pass over
	// the chunk) says nothing about this pass: restart it here, so a second
	// sequential read of the chunk gets readahead again.
	if pt := rs.prefetchedTo.Load(); pt < int64(lo)-1 || pt > int64(hi+s.readahead) {
		rs.prefetchedTo.Store(int64(hi))
	}
	if rs.prefetchedTo.Load() >= int64(hi+(w+1)/2) {
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
	want := w
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
		var workers sync.WaitGroup
		var held int64
		slots := make(chan struct{}, s.lim.streamParts)
		for _, sp := range spans {
			prefetch(s.ctx, s, sp.ci, sp.lo, sp.hi, &budget, &held, slots, &workers)
		}
		workers.Wait()
	}()
}

// prefetch fetches the frames lo..hi of chunk ci that are neither cached
// nor in flight, in parts, without taking references to them; each part is
// speculative (it starts only when memory and GET slots, its own among
// them, are free, within the prefetch's fair share). It stops when budget (decoded bytes) is
// spent; giant frames are skipped. The parts' workers are added to workers.
func prefetch(ctx context.Context, s *Set, ci int32, lo, hi int, budget, held *int64, slots chan struct{}, workers *sync.WaitGroup) {
	c := s.cache
	fr := s.chunks[ci].Frames
	for i := lo; i <= hi && ctx.Err() == nil; i++ {
		if s.giant(fr[i]) || fr[i].USize > *budget {
			return
		}
		if c.contains(s.frameKey(ci, i)) {
			continue
		}
		buf, fl, mine := c.lookup(s.frameKey(ci, i), false)
		if !mine {
			if buf != nil {
				buf.Release()
			}
			continue
		}
		if owner, peer := s.peerOwner(ci, i); peer {
			// Asked of its owner on its own, speculatively.
			need := peerCost(fr[i])
			var cl *clientUse
			var err error = errNoMemory
			if *held+need <= s.lim.share() {
				cl, err = s.lim.reserve(ctx, need, speculative)
			}
			if err != nil {
				c.complete(s.frameKey(ci, i), fl, nil, errGaveUp)
				return
			}
			*budget -= bufSize(fr[i].USize)
			*held += need
			workers.Add(1)
			go func(i int) {
				defer workers.Done()
				buf, err := peerOrBackend(ctx, s, ci, i, owner, cl, speculative)
				if buf != nil {
					buf.prefetchedBy, buf.prefetchBytes = s.metrics, fr[i].CSize // before the buffer is published
				}
				c.complete(s.frameKey(ci, i), fl, buf, err)
				if buf != nil {
					buf.Release()
				}
			}(i)
			continue
		}
		// A frame joins the part when it is cached, fits the prefetch's
		// budget and is ours to fetch.
		fls := []*flight{fl}
		decoded := bufSize(fr[i].USize)
		plan := nextFramePart(hi+1, func(k int) Frame { return fr[k] }, i, s.lim.partSize, func(k int) bool {
			if s.giant(fr[k]) || decoded+fr[k].USize > *budget {
				return false
			}
			if _, peer := s.peerOwner(ci, k); peer {
				return false // asked of its owner on its own
			}
			buf, fl2, m := c.lookup(s.frameKey(ci, k), false)
			if !m {
				if buf != nil {
					buf.Release()
				}
				return false
			}
			decoded += bufSize(fr[k].USize)
			fls = append(fls, fl2)
			return true
		})
		j := plan.hi
		var p *part
		if len(slots) < cap(slots) { // never waits for its own GETs, claims held (only this prefetch takes its slots)
			p, _ = s.launch(ctx, nil, ci, plan, 1, decoded, *held, speculative, slots)
		}
		if p == nil {
			for k, fl := range fls {
				c.complete(s.frameKey(ci, i+k), fl, nil, errGaveUp)
			}
			return
		}
		*budget -= decoded
		*held += bufSize(plan.size()) + decoded
		p.prefetch = true
		workers.Add(1)
		go func() {
			defer workers.Done()
			partWorker(ctx, s, p, plan.lo, plan.hi, fls, decoded)
		}()
		i = j
	}
}
