package chunkio

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// part is one planned backend read in flight: object bytes [off, end) of
// chunk ci, fetched into one buffer by one GET per sub-range, all at once.
// Bytes arrive in any order across sub-ranges; avail is the length of the
// prefix that has fully arrived, which is what consumers (a frame worker
// hashing and decoding, a stream reader) may use. A part holds its buffer
// (charged to the memory budget) and one GET slot per sub-range until that
// sub-range is done.
type part struct {
	set      *Set
	ci       int32
	off, end int64
	buf      *Buf
	cl       *clientUse // the client buf and the launch's extra bytes are charged to
	prefetch bool       // a readahead part: its frames count as wasted if evicted unread

	cancel context.CancelFunc
	slots  chan struct{} // the stream's GET slots (one per sub-range), or nil

	mu      sync.Mutex
	got     []int64 // bytes received per sub-range
	errs    []error // per sub-range: why it stopped early
	subs    []int64 // sub-range boundaries (object offsets)
	avail   int64   // contiguous bytes from off that have arrived
	checked int64   // end of the blocks checked against their sums (partReader.head; blocksums.go)
	changed chan struct{}
	fetches sync.WaitGroup
}

// startPart launches the GETs of plan (its buffer and GET slots already
// taken: buf holds plan.size() bytes, and the caller holds one GET slot per
// sub-range, which the fetches return). The part lives under ctx.
func (s *Set) startPart(ctx context.Context, ci int32, plan partPlan, buf *Buf, slots chan struct{}) *part {
	ctx, cancel := context.WithCancel(ctx)
	p := &part{
		set: s, ci: ci, off: plan.off, end: plan.end, buf: buf, cancel: cancel, slots: slots,
		subs: plan.subs, got: make([]int64, len(plan.subs)-1), errs: make([]error, len(plan.subs)-1),
		changed: make(chan struct{}),
	}
	for i := 0; i+1 < len(plan.subs); i++ {
		p.fetches.Add(1)
		go p.fetchSub(ctx, i)
	}
	return p
}

// fetchSub reads sub-range i into the part's buffer.
func (p *part) fetchSub(ctx context.Context, i int) {
	defer p.fetches.Done()
	defer func() {
		p.set.lim.putGets(1)
		if p.slots != nil {
			<-p.slots
		}
	}()
	a, b := p.subs[i], p.subs[i+1]
	body, err := p.set.rangeGet(ctx, p.ci, a, b-a)
	if err != nil {
		p.fail(i, fmt.Errorf("object bytes %d-%d: %w", a, b, err))
		return
	}
	defer body.Close()
	dst := p.buf.b[a-p.off : b-p.off]
	for at := 0; at < len(dst); {
		step := min(len(dst)-at, segmentBytes)
		n, err := io.ReadFull(body, dst[at:at+step])
		at += n
		p.progress(i, int64(at))
		if err != nil {
			p.fail(i, fmt.Errorf("body ended at object byte %d of %d: %w", a+int64(at), b, shortBody(err)))
			return
		}
	}
}

// progress records that sub-range i has received got bytes.
func (p *part) progress(i int, got int64) {
	p.mu.Lock()
	p.got[i] = got
	avail := int64(0)
	for k := range p.got {
		avail += p.got[k]
		if p.got[k] < p.subs[k+1]-p.subs[k] {
			break
		}
	}
	grew := avail > p.avail
	p.avail = avail
	if grew {
		close(p.changed)
		p.changed = make(chan struct{})
	}
	p.mu.Unlock()
}

// fail records that sub-range i stopped early with err. The other
// sub-ranges go on: the bytes before the failure can still be used (a
// frame that arrived whole is served, the next one fails), and bytes after
// it are never available.
func (p *part) fail(i int, err error) {
	p.mu.Lock()
	p.errs[i] = err
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// stalled returns the failure of the sub-range holding the first missing
// byte, if it failed (under p.mu).
func (p *part) stalled() error {
	at := p.off + p.avail
	for k := range p.errs {
		if at < p.subs[k+1] {
			return p.errs[k]
		}
	}
	return nil
}

// wait blocks until at least n bytes from off have arrived (n <= size) and
// returns how many have; or the failure that keeps them from arriving, or
// ctx's error.
func (p *part) wait(ctx context.Context, n int64) (int64, error) {
	for {
		p.mu.Lock()
		avail, err, ch := p.avail, p.stalled(), p.changed
		p.mu.Unlock()
		if avail >= n {
			return avail, nil
		}
		if err != nil {
			return avail, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return avail, ctx.Err()
		}
	}
}

// ready reports how many bytes have arrived without waiting.
func (p *part) ready() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.avail
}

// close stops the part's GETs, waits for them and drops the part's
// reference to its buffer (consumers holding their own keep it).
func (p *part) close() {
	p.cancel()
	p.fetches.Wait()
	if p.buf != nil {
		p.buf.Release()
		p.buf = nil
	}
}

// launch plans plan's sub-ranges and starts it. It takes what the part
// needs: GET slots of the stream (slots, may be nil: no stream limit) for
// up to ways concurrent sub-ranges (at least one, waiting for it: they are
// held only by the stream's own GETs in flight), then, in one take of the
// ReadLimits (limits.go), memory for the buffer plus extra bytes (e.g. the
// decoded frames a worker will write) together with between one and that
// many process-wide GET slots: the part gets as many sub-ranges as slots
// were free. held is the stream's bytes in flight: a speculative launch
// that would take the stream past its fair share of the budget, or finds
// no memory or no slot, returns (nil, nil). On success the caller owns the
// extra reserved bytes (charged to the part's client, p.cl). ctx bounds the waits; the part's GETs live under
// life (nil: ctx), so a part can outlive the request that launched it (a
// parked stream's parts, partReader.pause).
func (s *Set) launch(ctx, life context.Context, ci int32, plan partPlan, ways int, extra, held int64, mode allocMode, slots chan struct{}) (*part, error) {
	l := s.lim
	need := bufSize(plan.size()) + extra
	if mode == speculative && held+need > l.share() {
		return nil, nil
	}
	k, err := takeStreamSlots(ctx, slots, ways)
	if err != nil {
		return nil, err
	}
	putStream := func(m int) {
		for i := 0; i < m && slots != nil; i++ {
			<-slots
		}
	}
	useful := len(splitSubs(plan.off, plan.end, k, minSubRange)) - 1
	putStream(k - useful)
	cl, n, err := l.take(ctx, need, useful, mode)
	if err != nil {
		putStream(useful)
		if err == errNoMemory {
			return nil, nil
		}
		return nil, err
	}
	putStream(useful - n)
	plan.subs = splitSubs(plan.off, plan.end, n, minSubRange)
	if life == nil {
		life = ctx
	}
	p := s.startPart(life, ci, plan, l.bufReserved(cl, plan.size()), slots)
	p.cl = cl
	return p, nil
}

// takeStreamSlots takes up to want of a stream's GET slots: the first
// waits for a free slot (ctx), the others are taken only if free. (A
// caller that must not wait, a partReader's speculative part, launches
// only when a slot is free.) With no
// stream (nil slots) it grants want. It returns how many it took (>= 1).
func takeStreamSlots(ctx context.Context, slots chan struct{}, want int) (int, error) {
	want = max(want, 1)
	if slots == nil {
		return want, nil
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	n := 1
	for n < want {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}
