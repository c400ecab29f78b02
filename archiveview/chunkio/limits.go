package chunkio

// ReadLimits: what every read of a process shares and takes from, apart
// from the cache. The one memory budget: every buffer of the read path
// (compressed parts in flight, decoded frames in the cache or ahead of a
// reader, verified extents, stream segments) and every stream decoder's
// window is charged to one byte budget before the bytes are allocated,
// and returned when the last reference is dropped, so the bytes in use
// never exceed it. The backend GETs in flight (MaxParts). The stream
// decoders alive at once (giant frames, unframed streams). The planner's
// part size and per-stream GETs.
//
// No hold-and-wait. A read takes what it needs at once or not at all:
// one take grants the bytes of a part (its buffer and the decoded frames
// or decoder window that go with it) together with at least one GET slot
// (up to as many as its sub-ranges, as many as are free), or nothing; a
// read that cannot have them waits holding nothing of the limits' (only
// its own stream's slots, which its own GETs in flight return). A stream
// decoder is admitted (one of the few decodersFor allows) before it takes anything, and
// its first part, its window and its segment are taken in one take. Every
// wait has a deadline (MemoryWait) and ends in ErrBusy, which the S3 layer
// answers with 503 SlowDown and Retry-After:
//
//   - a demand take (what a reader needs now: the first part of a read,
//     a stream's next part) evicts cached frames oldest first and parked
//     decoders, and, short of a GET slot, drops the parked decoders whose
//     parts ahead hold GETs in flight (speculative GETs that may be slow
//     to end), then waits at most MemoryWait for memory and a GET slot;
//   - a speculative take (readahead, the later parts of a window) evicts
//     cached frames but never waits, and never takes a stream past its
//     fair share (the budget divided by the streams reading), so a
//     stalled or abandoned reader cannot pin more than its share.
//
// A client's share. Memory is charged to the client of the read that
// takes it (WithClient: the S3 layer names the access key or, for
// anonymous callers, the IP its per-key limiter counts), until the bytes
// are freed; frames a client's reads brought into the cache count against
// it until they are evicted. One client may hold at most ClientShare of
// the budget (DefaultClientShare, WithClientShare) and of the stream
// decoders: past it, its demand takes first evict its own oldest cached
// frames, then its own parked stream decoders, then wait (and end in
// ErrBusy), and its speculative takes are
// refused, while other clients' reads proceed. A client holding nothing
// may always take one part, however large (so a read larger than the
// share is still served, one at a time). Reads without a client (prefetch,
// background verification) are charged to the budget alone.
//
// Idle pooled buffers are not charged: they are garbage the runtime may
// collect (sync.Pool).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// ErrBusy: a read could not have the memory, backend GET slot or stream
// decoder it needs within MemoryWait (every one held by other readers).
// It wraps backend.ErrUnavailable, so the client is told to retry (503
// SlowDown with Retry-After).
var ErrBusy = fmt.Errorf("read limits exhausted: %w", backend.ErrUnavailable)

// errNoMemory: a speculative take found no free memory or GET slot (never
// returned to callers: they do without the readahead).
var errNoMemory = errors.New("no memory for a speculative read")

// DefaultClientShare is the fraction of the memory budget and of the
// stream decoders one client may hold (WithClientShare).
const DefaultClientShare = 0.25

// DefaultMemoryWait bounds every wait of a read for memory, a GET slot or
// a stream decoder.
const DefaultMemoryWait = 30 * time.Second

// defaultMemoryExtra is what the memory budget adds to the cache budget by
// default: room for the parts and frames in flight beyond what is cached.
const defaultMemoryExtra = 128 << 20

// CacheOption configures a FrameCache and its ReadLimits (NewFrameCache).
type CacheOption func(*cacheConfig)

type cacheConfig struct {
	memory      int64
	partSize    int64
	streamParts int
	maxParts    int
	memoryWait  time.Duration
	clientShare float64
	peers       Peers // peers.go
	peerCache   int64
}

// WithMemory sets the hard memory budget of all reads (bytes): cached
// frames, parts in flight, frames ahead of readers, verified extents,
// segments and decoder windows. Default: the cache budget + 128 MiB.
func WithMemory(n int64) CacheOption { return func(c *cacheConfig) { c.memory = n } }

// WithPartSize sets the planner's part size (bytes): adjacent frames are
// merged into one GET up to this size, and plain ranges are cut at it.
// Default 8 MiB, as AWS recommends for ranged GETs.
func WithPartSize(n int64) CacheOption { return func(c *cacheConfig) { c.partSize = n } }

// WithStreamParts sets how many GETs one sequential read keeps in flight
// at most. Default 8.
func WithStreamParts(n int) CacheOption { return func(c *cacheConfig) { c.streamParts = n } }

// WithMaxParts sets how many backend GETs the whole process keeps in
// flight at most. Default 64.
func WithMaxParts(n int) CacheOption { return func(c *cacheConfig) { c.maxParts = n } }

// WithClientShare sets the fraction (0 < f <= 1) of the memory budget and
// of the stream decoders one client (WithClient) may hold. Default 0.25;
// 1 turns the per-client bound off. Out-of-range values take the default.
func WithClientShare(f float64) CacheOption { return func(c *cacheConfig) { c.clientShare = f } }

// WithMemoryWait bounds how long a read waits for memory, a GET slot or a
// stream decoder before failing with ErrBusy. Default 30 s.
func WithMemoryWait(d time.Duration) CacheOption { return func(c *cacheConfig) { c.memoryWait = d } }

// ReadLimits is the memory budget, the backend GET slots and the stream
// decoder admissions shared by every read of a process (see the comment
// at the top of limits.go). A FrameCache makes one (NewFrameCache) and
// evicts from the cache when it is short of memory.
type ReadLimits struct {
	memory      int64
	wait        time.Duration
	maxGets     int
	maxDecoders int
	partSize    int64
	streamParts int
	clientMem   int64 // bytes one client may hold (clientShare of memory)
	clientDecs  int   // stream decoders one client may hold

	mu       sync.Mutex
	clients  map[string]*clientUse
	used     int64
	peak     int64
	gets     int
	decoders int
	freed    chan struct{} // closed (and replaced) whenever something is returned

	streams atomic.Int64 // streams reading (fair share)
	bufs    bufPool

	// reclaim frees memory held by the cache: a cached frame (frames) or
	// a parked stream decoder; false when there is nothing to drop.
	reclaim func(frames bool) bool
	// reclaimOwn evicts the oldest cached frame charged to cl that no
	// reader holds, else a parked stream decoder holding memory charged
	// to cl; false when there is none.
	reclaimOwn func(cl *clientUse) bool
	// reclaimOwnDecoder drops the oldest parked stream decoder whose
	// admission is counted for cl; false when there is none.
	reclaimOwnDecoder func(cl *clientUse) bool
	// reclaimGets drops a parked stream decoder whose parts ahead still
	// have GETs in flight (their slots return as the GETs stop); false
	// when there is none.
	reclaimGets func() bool
}

// clientUse is what one client holds (under ReadLimits.mu). It lives in
// ReadLimits.clients while the client holds anything.
type clientUse struct {
	id       string
	used     int64
	decoders int
}

type clientKey struct{}

// WithClient returns ctx carrying the identity of the client a read is
// for (an access key, a client IP): the memory and stream decoders the
// read takes are charged to it, and bounded by its share (ClientShare).
func WithClient(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, clientKey{}, id)
}

// clientOf is the client ctx carries ("" for none).
func clientOf(ctx context.Context) string {
	id, _ := ctx.Value(clientKey{}).(string)
	return id
}

// clientLocked returns id's record, creating it (under l.mu); nil for no
// client.
func (l *ReadLimits) clientLocked(id string) *clientUse {
	if id == "" {
		return nil
	}
	cl := l.clients[id]
	if cl == nil {
		cl = &clientUse{id: id}
		if l.clients == nil {
			l.clients = make(map[string]*clientUse)
		}
		l.clients[id] = cl
	}
	return cl
}

// dropIdleLocked forgets cl once it holds nothing (under l.mu).
func (l *ReadLimits) dropIdleLocked(cl *clientUse) {
	if cl != nil && cl.used == 0 && cl.decoders == 0 && l.clients[cl.id] == cl {
		delete(l.clients, cl.id)
	}
}

func newReadLimits(cfg cacheConfig) *ReadLimits {
	l := &ReadLimits{
		memory: cfg.memory, wait: cfg.memoryWait, maxGets: cfg.maxParts,
		partSize: cfg.partSize, streamParts: cfg.streamParts,
		freed:             make(chan struct{}),
		reclaim:           func(bool) bool { return false },
		reclaimOwn:        func(*clientUse) bool { return false },
		reclaimGets:       func() bool { return false },
		reclaimOwnDecoder: func(*clientUse) bool { return false },
	}
	l.maxDecoders = decodersFor(cfg.memory, cfg.maxParts, cfg.partSize, cfg.streamParts)
	f := cfg.clientShare
	if !(f > 0 && f <= 1) {
		f = DefaultClientShare
	}
	l.clientMem = int64(float64(cfg.memory) * f)
	l.clientDecs = max(1, int(float64(l.maxDecoders)*f))
	return l
}

// decodersFor is how many stream decoders may live at once: together they
// take at most half the GET slots (each keeps about streamParts/2 GETs in
// flight for its first parts) and half the memory budget (each holds a
// part, a default window twice over and a segment), so the other reads of
// the process always find the other half. At least one.
func decodersFor(memory int64, maxParts int, partSize int64, streamParts int) int {
	perGets := max(1, streamParts/2)
	perMem := partSize + decoderCost(defaultDecoderWindow) + bufSize(segmentBytes)
	return max(1, min(maxParts/(2*perGets), int(memory/(2*perMem))))
}

// share is a stream's fair share of the budget.
func (l *ReadLimits) share() int64 {
	return l.memory / max(1, l.streams.Load())
}

// allocMode says whether a take may wait.
type allocMode uint8

const (
	demand      allocMode = iota // wait (up to MemoryWait) after evicting
	speculative                  // evict, never wait
)

// signalLocked wakes every waiter (under l.mu).
func (l *ReadLimits) signalLocked() {
	close(l.freed)
	l.freed = make(chan struct{})
}

// signal wakes every waiter: something they may reclaim appeared.
func (l *ReadLimits) signal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.signalLocked()
}

// tryTake takes n bytes, charged to client id, and between 1 and gets GET
// slots (none when gets is 0) if all are free now; it returns the slots
// granted and the client record the bytes are charged to. short says what
// was missing: "memory", "GET slot" or "client share".
func (l *ReadLimits) tryTake(id string, n int64, gets int) (cl *clientUse, granted int, short string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cl = l.clientLocked(id)
	switch {
	case cl != nil && cl.used > 0 && cl.used+n > l.clientMem:
		l.dropIdleLocked(cl)
		return cl, 0, "client share", false
	case l.used+n > l.memory:
		l.dropIdleLocked(cl)
		return cl, 0, "memory", false
	case gets > 0 && l.gets >= l.maxGets:
		l.dropIdleLocked(cl)
		return cl, 0, "GET slot", false
	}
	l.used += n
	l.peak = max(l.peak, l.used)
	if cl != nil {
		cl.used += n
		l.dropIdleLocked(cl)
	}
	granted = min(gets, l.maxGets-l.gets)
	l.gets += granted
	return cl, granted, "", true
}

// take charges n bytes and takes between 1 and gets backend GET slots
// (none for gets == 0), all at once, charging the bytes to ctx's client
// (WithClient), whose record it returns. While they are not all free it
// evicts cached frames (when memory is short); a speculative take then
// returns errNoMemory, a demand take waits, holding nothing, at most
// MemoryWait, then fails with ErrBusy (under withoutWait it fails at once
// with errMustWait). A demand take also takes the bytes of a firstTake
// ctx carries that no take committed yet (see firstTake). The caller
// returns the bytes with unreserve (or hands them to buffers made with
// bufReserved) and the slots with putGets.
func (l *ReadLimits) take(ctx context.Context, n int64, gets int, mode allocMode) (*clientUse, int, error) {
	if n > l.memory {
		return nil, 0, fmt.Errorf("%d bytes asked of a read memory budget of %d: %w", n, l.memory, ErrBusy)
	}
	id := clientOf(ctx)
	ft, _ := ctx.Value(firstTakeKey{}).(*firstTake)
	if mode != demand || ft == nil || n+ft.n > l.memory {
		ft = nil
	}
	dl := deadline{wait: l.wait}
	defer dl.stop()
	for {
		l.mu.Lock()
		ch := l.freed
		l.mu.Unlock()
		extra := int64(0)
		if ft.free() {
			extra = ft.n
		}
		cl, k, short, ok := l.tryTake(id, n+extra, gets)
		if ok {
			if extra > 0 && !ft.commit(cl) {
				l.unreserve(cl, extra) // settled meanwhile: not needed
			}
			return cl, k, nil
		}
		if short == "memory" && l.reclaim(true) {
			continue
		}
		if short == "client share" && l.reclaimOwn(cl) {
			continue
		}
		if short == "GET slot" && mode == demand && l.reclaimGets() {
			continue
		}
		if mode == speculative {
			return nil, 0, errNoMemory
		}
		if ctx.Value(noWaitKey{}) != nil {
			return nil, 0, fmt.Errorf("%d bytes and a backend GET not free at once (short of %s): %w", n, short, errMustWait)
		}
		if err := dl.await(ctx, ch); err == errWaitExpired {
			used, inFlight := l.inUse()
			return nil, 0, fmt.Errorf("waited %v for %d bytes and a backend GET (short of %s; %d of %d bytes in use, %d of %d GETs in flight): %w",
				l.wait, n, short, used, l.memory, inFlight, l.maxGets, ErrBusy)
		} else if err != nil {
			return nil, 0, err
		}
	}
}

// errMustWait: a demand take under withoutWait found its memory or GET
// slot not free. It wraps context.Canceled, so that a read that joined
// the flight of such a take fetches the frame itself.
var errMustWait = fmt.Errorf("read limits not free at once: %w", context.Canceled)

type noWaitKey struct{}

// withoutWait returns ctx under which demand takes do not wait: one
// that finds its memory or GET slot short (after evicting) fails with
// errMustWait. For work whose caller holds memory it would wait on: the
// header check beside a member's data (hdrCheckedSource), a framed read's
// own fetch of a frame while its parts ahead are held (framedSource.fill).
// The caller then gives back what it holds and takes again, waiting.
func withoutWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noWaitKey{}, true)
}

// firstTake is memory a read needs beside what its source takes (a
// verified extent's buffer, verifiedExtent), carried in the read's
// context (withFirstTake): the first demand take of the read (its
// source's first part, a stream decoder's first take) takes these bytes
// with its own, in one take, so the read never holds them while it
// waits for the rest. The read settles it once (settle): the bytes a take
// committed are its own from then on.
type firstTake struct {
	n int64

	mu   sync.Mutex
	done bool       // committed by a take, or settled by the read
	took bool       // committed by a take
	cl   *clientUse // the client a take charged the bytes to
}

type firstTakeKey struct{}

// withFirstTake returns ctx carrying ft.
func withFirstTake(ctx context.Context, ft *firstTake) context.Context {
	return context.WithValue(ctx, firstTakeKey{}, ft)
}

// free reports whether no take committed ft and the read did not settle
// it (false for nil).
func (ft *firstTake) free() bool {
	if ft == nil {
		return false
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return !ft.done
}

// commit records that a take charged ft's bytes to cl; false when ft was
// committed or settled meanwhile (the take returns them).
func (ft *firstTake) commit(cl *clientUse) bool {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.done {
		return false
	}
	ft.done, ft.took, ft.cl = true, true, cl
	return true
}

// settle ends ft: took reports whether a take charged its bytes (to cl),
// which the caller then owns; otherwise no take will.
func (ft *firstTake) settle() (cl *clientUse, took bool) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.done = true
	return ft.cl, ft.took
}

func (l *ReadLimits) inUse() (used int64, gets int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used, l.gets
}

// reserve charges n bytes (no GET slot): take for memory alone.
func (l *ReadLimits) reserve(ctx context.Context, n int64, mode allocMode) (*clientUse, error) {
	cl, _, err := l.take(ctx, n, 0, mode)
	return cl, err
}

// unreserve returns n bytes reserved for client cl and wakes the waiters.
func (l *ReadLimits) unreserve(cl *clientUse, n int64) { l.give(cl, n, 0) }

// putGets returns k GET slots.
func (l *ReadLimits) putGets(k int) { l.give(nil, 0, k) }

func (l *ReadLimits) give(cl *clientUse, n int64, gets int) {
	if n == 0 && gets == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= n
	l.gets -= gets
	if cl != nil {
		cl.used -= n
		if cl.used < 0 {
			panic("chunkio: a client released more than it was charged")
		}
		l.dropIdleLocked(cl)
	}
	if l.used < 0 || l.gets < 0 {
		panic("chunkio: read limits released more than taken")
	}
	l.signalLocked()
}

// admitDecoder admits one stream decoder (a giant frame's or an unframed
// stream's), dropping parked decoders to make room (only the client's own
// when its own share is what is used up), else waiting at most MemoryWait
// (ErrBusy). The caller holds nothing of the limits' while it waits. A
// client holds at most its share of the decoders. endDecoder
// ends the admission, with the client record returned.
func (l *ReadLimits) admitDecoder(ctx context.Context) (*clientUse, error) {
	id := clientOf(ctx)
	dl := deadline{wait: l.wait}
	defer dl.stop()
	for {
		l.mu.Lock()
		ch := l.freed
		cl := l.clientLocked(id)
		own := cl != nil && cl.decoders >= l.clientDecs
		if l.decoders < l.maxDecoders && !own {
			l.decoders++
			if cl != nil {
				cl.decoders++
			}
			l.mu.Unlock()
			return cl, nil
		}
		l.dropIdleLocked(cl)
		l.mu.Unlock()
		if own {
			// Its own share is used: only its own parked decoders free
			// one it may take (another client's would free nothing for it).
			if l.reclaimOwnDecoder(cl) {
				continue
			}
		} else if l.reclaim(false) {
			continue
		}
		if err := dl.await(ctx, ch); err == errWaitExpired {
			return nil, fmt.Errorf("waited %v for one of %d stream decoders (at most %d per client): %w", l.wait, l.maxDecoders, l.clientDecs, ErrBusy)
		} else if err != nil {
			return nil, err
		}
	}
}

func (l *ReadLimits) endDecoder(cl *clientUse) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.decoders--
	if cl != nil {
		cl.decoders--
		l.dropIdleLocked(cl)
	}
	if l.decoders < 0 {
		panic("chunkio: stream decoder ended twice")
	}
	l.signalLocked()
}

// bufSize is what a buffer of n bytes costs (its pooled capacity).
func bufSize(n int64) int64 {
	if n < poolStep {
		return n
	}
	return (n + poolStep - 1) / poolStep * poolStep
}

// alloc returns a buffer of n bytes with one reference, charged to the
// budget and ctx's client (see take for mode).
func (l *ReadLimits) alloc(ctx context.Context, n int64, mode allocMode) (*Buf, error) {
	cl, err := l.reserve(ctx, bufSize(n), mode)
	if err != nil {
		return nil, err
	}
	return l.bufReserved(cl, n), nil
}

// bufReserved returns a buffer of n bytes whose bufSize(n) bytes the caller
// already reserved for client cl; its last Release returns them.
func (l *ReadLimits) bufReserved(cl *clientUse, n int64) *Buf {
	return l.bufs.getBuf(n, l, cl)
}

// ClientShare is the memory one client may hold, and how many stream
// decoders.
func (l *ReadLimits) ClientShare() (bytes int64, decoders int) { return l.clientMem, l.clientDecs }

// MemoryInUse is the bytes currently charged to the read memory budget,
// and the most ever charged at once.
func (l *ReadLimits) MemoryInUse() (used, peak int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used, l.peak
}

// MemoryBudget is the hard memory budget of all reads.
func (l *ReadLimits) MemoryBudget() int64 { return l.memory }

// streamStarted and streamEnded count the streams sharing the budget.
func (l *ReadLimits) streamStarted() { l.streams.Add(1) }
func (l *ReadLimits) streamEnded()   { l.streams.Add(-1) }

// deadline is one wait on the limits: MemoryWait from the first time the
// waiter finds them full, however often it is woken and finds them full
// again. The zero timer starts at the first await.
type deadline struct {
	wait  time.Duration
	timer *time.Timer
}

// errWaitExpired is await's answer when the deadline passed.
var errWaitExpired = errors.New("chunkio: read limits wait expired")

// await waits for ch (the limits' "something was freed" signal), ctx or
// the deadline: nil when woken, ctx's error, or errWaitExpired.
func (d *deadline) await(ctx context.Context, ch <-chan struct{}) error {
	if d.timer == nil {
		d.timer = time.NewTimer(d.wait)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.timer.C:
		return errWaitExpired
	}
}

func (d *deadline) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}
