package chunkio

import (
	"context"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/klauspost/compress/zstd"
)

// FrameCache is the byte-bounded cache of decoded frames (and of small
// verified extents of unframed objects) shared by every archive of a server.
//
// It is an LRU that evicts by bytes, not entries (and keeps at most one
// entry per cacheEntryMin bytes of its budget). Each key has at most one
// fetch in flight (a per-key singleflight): a demand read that needs a frame
// some other read or a prefetch is already fetching waits for that fetch
// instead of issuing its own GET. A frame larger than the whole budget is
// handed to the readers waiting for it but not kept.
//
// Buffers are reference counted and recycled through size-class pools: the
// cache holds one reference, every reader holding a slice of the buffer holds
// another, and the buffer returns to its pool only when the last is released.
//
// Cached frames count against the process's one memory budget together
// with everything in flight: the ReadLimits (limits.go) the cache makes
// and evicts for. The cache also keeps the pooled zstd decoders, the decode
// semaphore that bounds parallel frame decoding to GOMAXPROCS, and the
// parked stream decoders (evicted when memory is needed).
type FrameCache struct {
	budget int64

	mu      sync.Mutex
	lru     *simplelru.LRU[cacheKey, *Buf]
	own     *ownIndex // the LRU's entries by client (evictOwn)
	bytes   int64
	flights map[cacheKey]*flight

	sumBytes atomic.Int64 // block sums its Sets keep (blocksums.go)

	lim *ReadLimits

	decs      chan *zstd.Decoder
	decodeSem chan struct{}
	sdecs     streamDecoders // progressive.go

	// stepHook, if set (tests only), is called after each published step
	// of a progressive decode with the bytes decoded so far.
	stepHook func(decoded int64)

	parkMu sync.Mutex
	parked []*zstream // every Set's parked decoders, oldest first
	// promises are decoders reads in progress will park (parked.go).
	promises []*promise

	idMu   sync.Mutex
	stores map[any]string // store instance -> its id in cache keys
	nextID uint64

	// Peers (peers.go): nil without WithPeers.
	peers Peers
	comp  *compFrames // compressed frames kept for the other replicas
	// peerGets bounds the backend GETs fetching frames for other
	// replicas (PeerFrame) to half the GET slots, so the peers' asks
	// never hold every slot this replica's own reads need.
	peerGets chan struct{}
	// peerBytes is the memory the fetches for other replicas hold while
	// they wait for the backend: at most half the read memory, so that
	// however slowly the backend answers them this replica's own reads
	// find the other half.
	peerBytes atomic.Int64
	reg       peerReg // open Sets, for PeerFrame
}

// NewFrameCache returns a cache holding at most budget bytes of decoded
// frames. budget <= 0 keeps nothing (every frame is fetched, used and
// dropped). The options set the memory budget of all reads and the
// planner's limits; zero or negative values take the defaults.
func NewFrameCache(budget int64, opts ...CacheOption) *FrameCache {
	if budget < 0 {
		budget = 0
	}
	cfg := cacheConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.memory <= 0 {
		cfg.memory = budget + defaultMemoryExtra
	}
	if cfg.partSize <= 0 {
		cfg.partSize = DefaultPartSize
	}
	if cfg.streamParts <= 0 {
		cfg.streamParts = DefaultStreamParts
	}
	if cfg.maxParts <= 0 {
		cfg.maxParts = DefaultMaxParts
	}
	if cfg.memoryWait <= 0 {
		cfg.memoryWait = DefaultMemoryWait
	}
	budget = min(budget, cfg.memory)
	var comp *compFrames
	if cfg.peers != nil {
		n := cfg.peerCache
		if n <= 0 {
			n = budget / 8
		}
		n = min(n, budget/2)
		comp = newCompFrames(n)
		budget -= n
	}
	c := &FrameCache{
		budget:    budget,
		peers:     cfg.peers,
		comp:      comp,
		flights:   make(map[cacheKey]*flight),
		lim:       newReadLimits(cfg),
		decs:      make(chan *zstd.Decoder, 2*runtime.GOMAXPROCS(0)+2),
		decodeSem: make(chan struct{}, runtime.GOMAXPROCS(0)),
	}
	if comp != nil {
		c.peerGets = make(chan struct{}, max(1, c.lim.maxGets/2))
	}
	c.lim.reclaim = func(frames bool) bool {
		if frames {
			return c.evictForMemory()
		}
		return c.dropParked()
	}
	c.own = newOwnIndex()
	c.lim.reclaimOwn = c.evictOwn
	c.lim.reclaimGets = c.dropParkedFetching
	c.lim.reclaimOwnDecoder = c.dropParkedOwn
	l, err := simplelru.NewLRU[cacheKey, *Buf](int(max(1, min(budget/cacheEntryMin, math.MaxInt32))), c.onEvict)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	c.lru = l
	return c
}

// cacheEntryMin bounds the entries the cache keeps to one per
// cacheEntryMin bytes of its budget: an entry's bookkeeping (its key, LRU
// node and map slot, a few hundred bytes) is not charged to the budget,
// which counts only its buffer, so millions of tiny frames (a hostile
// manifest's) cannot fill the cache with uncharged bookkeeping.
const cacheEntryMin = 512

// storeID returns the id that names store s in this cache's keys: the same
// id for every archive on the same Store instance (so they share frames),
// another for every other instance. The cache keeps a reference to each
// store it has named, so an id is never reused for a new store that happens
// to get the address of a collected one. A store value that cannot be a map
// key (not comparable) gets a fresh id each time: it shares nothing.
func (c *FrameCache) storeID(s any) string {
	c.idMu.Lock()
	defer c.idMu.Unlock()
	comparable := s != nil && reflect.ValueOf(s).Comparable()
	if comparable {
		if id, ok := c.stores[s]; ok {
			return id
		}
	}
	c.nextID++
	id := fmt.Sprintf("%T#%d", s, c.nextID)
	if comparable {
		if c.stores == nil {
			c.stores = make(map[any]string)
		}
		c.stores[s] = id
	}
	return id
}

// Limits is the memory budget and backend limits the cache's reads share.
func (c *FrameCache) Limits() *ReadLimits { return c.lim }

// MemoryInUse is Limits().MemoryInUse.
func (c *FrameCache) MemoryInUse() (used, peak int64) { return c.lim.MemoryInUse() }

// MemoryBudget is Limits().MemoryBudget.
func (c *FrameCache) MemoryBudget() int64 { return c.lim.MemoryBudget() }

// evictForMemory drops the oldest cached frame, else the oldest parked
// decoder; it reports whether it dropped anything. (A dropped frame that a
// reader still holds is freed when the reader releases it.)
func (c *FrameCache) evictForMemory() bool {
	c.mu.Lock()
	_, _, ok := c.lru.RemoveOldest()
	c.mu.Unlock()
	if ok || (c.comp != nil && c.comp.removeOldest()) {
		return true
	}
	return c.dropParked()
}

// evictOwn drops the oldest cached frame charged to client cl that no
// reader holds, else the oldest compressed frame kept for peers charged to
// cl (an owner's fetch for the peer cl), else the oldest parked stream
// decoder holding memory charged to cl (its window, or parts it kept
// ahead); it reports whether it dropped one.
func (c *FrameCache) evictOwn(cl *clientUse) bool {
	if cl == nil {
		return false
	}
	if c.evictOwnFrame(cl) || (c.comp != nil && c.comp.evictOwn(cl)) {
		return true
	}
	return c.dropParkedFirst(func(z *zstream) bool { return z.chargedTo(cl) })
}

func (c *FrameCache) evictOwnFrame(cl *clientUse) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.own.oldestFree(cl)
	if ok {
		c.lru.Remove(k)
	}
	return ok
}

// Budget is the cache's byte budget of decoded frames (with WithPeers,
// NewFrameCache's budget less the compressed frames kept for peers).
func (c *FrameCache) Budget() int64 { return c.budget }

// Bytes is the number of bytes currently held.
func (c *FrameCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Pinned reports how many entries the cache holds and how many of them
// are also referenced by a reader (or a leaked reference): with no read in
// progress, pinned must be 0.
func (c *FrameCache) Pinned() (entries, pinned int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.lru.Values() {
		if b.refs.Load() != 1 {
			pinned++
		}
	}
	return c.lru.Len(), pinned
}

// Len is the number of cached entries.
func (c *FrameCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// cacheKey names one decoded frame (kind keyFrame, n = compressed offset,
// m = compressed size, u = uncompressed size) or one verified extent of an
// unframed object (kind keyExtent, n = offset, m = length) of one object of
// one store (store: FrameCache.storeID).
//
// A key says what the entry's bytes were checked against, not only where
// they came from: a frame is keyed by its compressed span, decoded size and
// sha256 (never by its index, which a hostile manifest over the same object
// can reorder), so two archives share an entry only when they describe the
// same bytes identically; an extent is keyed by its tar member name and expected
// sha256 too, so a manifest that points another member (or another
// archive's member) at the same bytes never gets an entry that was
// verified for someone else's expectations.
type cacheKey struct {
	store  string
	bucket string
	object string
	kind   uint8
	n, m   int64
	u      int64
	name   string   // keyExtent: the tar member name the header was checked for
	sum    [32]byte // the sha256 the bytes were verified against
	hasSum bool
}

const (
	keyFrame uint8 = iota
	keyExtent
)

// Buf is a reference-counted, pooled buffer of verified bytes (a decoded
// frame, a verified extent, a stream segment). Every holder owns one
// reference: retain adds one, Release drops one, and the buffer returns to
// its pool when the last is dropped. Bytes are valid only while the caller
// holds a reference.
type Buf struct {
	b    []byte
	refs atomic.Int32
	lim  *ReadLimits // the budget it is charged to
	cl   *clientUse  // the client it is charged to (nil: none)

	// prefetchedBy is set (before the buffer is published) on a frame a
	// readahead fetched: the metrics its waste is counted in, and
	// prefetchBytes the compressed bytes it cost. read is set by the first
	// read that serves it; a prefetched frame evicted unread counts in
	// wharf_prefetch_wasted_bytes_total.
	prefetchedBy  *Metrics
	prefetchBytes int64
	read          atomic.Bool
}

// Bytes returns the buffer's bytes (valid while a reference is held).
func (fb *Buf) Bytes() []byte { return fb.b }

// retain adds a reference.
func (fb *Buf) retain() { fb.refs.Add(1) }

// Release drops a reference; the last one returns the buffer to its pool.
// Releasing more often than retained panics.
func (fb *Buf) Release() {
	switch n := fb.refs.Add(-1); {
	case n == 0:
		l := fb.lim
		size := bufSize(int64(len(fb.b)))
		l.bufs.put(fb.b)
		fb.b = nil
		l.unreserve(fb.cl, size)
	case n < 0:
		panic("chunkio: Buf released too often")
	}
}

// flight is one in-progress fill of a cache key.
//
// A frame whose sha256 passed is decoded into its buffer in steps
// (progressive.go), and the decoded prefix is published on its flight
// (publish): a waiter that needs only bytes before the published end
// takes a reference to the buffer then (waitPrefix) and gives up its
// claim on the completion. Those bytes are final: the decoder never
// writes them again, and they are a prefix of the decode of compressed
// bytes that passed their checksum. If the decode fails later (a frame
// that decodes to more or fewer bytes than the manifest says, a zstd
// error past the prefix), the flight fails, the frame is not cached,
// and every reader still waiting gets the error; a reader that already
// took its bytes keeps them and is not told: they are what the verified
// compressed bytes decode to, whatever follows them.
type flight struct {
	done      chan struct{}
	waiters   int32 // readers that will take a reference when done (under FrameCache.mu)
	buf       *Buf
	err       error
	completed bool // complete ran (under FrameCache.mu)

	pmu   sync.Mutex
	pbuf  *Buf          // the verified frame being decoded into (nil: nothing published)
	pend  int64         // bytes of pbuf decoded so far
	moved chan struct{} // closed and replaced when pend grows
}

// publish records that the first n bytes of buf, the buffer the flight's
// frame is being decoded into, are decoded (and will not change). The
// caller holds a reference to buf until it calls unpublish or complete.
func (fl *flight) publish(buf *Buf, n int64) {
	fl.pmu.Lock()
	fl.pbuf, fl.pend = buf, n
	if fl.moved != nil {
		close(fl.moved)
		fl.moved = nil
	}
	fl.pmu.Unlock()
}

// unpublish withdraws the published buffer (before the filler drops its
// reference to it): waiters that have not taken it wait for the flight's
// completion.
func (fl *flight) unpublish() {
	fl.pmu.Lock()
	fl.pbuf, fl.pend = nil, 0
	if fl.moved != nil {
		close(fl.moved)
		fl.moved = nil
	}
	fl.pmu.Unlock()
}

// progress returns the published buffer, its decoded length and a channel
// closed when either changes.
func (fl *flight) progress() (*Buf, int64, <-chan struct{}) {
	fl.pmu.Lock()
	defer fl.pmu.Unlock()
	if fl.moved == nil {
		fl.moved = make(chan struct{})
	}
	return fl.pbuf, fl.pend, fl.moved
}

// lookup returns a cached buffer with a reference held for the caller, or
// the flight filling key. If the caller must fill the key itself, mine is
// true and fl is a new flight the caller must complete. If wait is true the
// caller is registered as a waiter on fl (mine or not) and must call
// waitFlight or abandonFlight exactly once.
func (c *FrameCache) lookup(k cacheKey, wait bool) (buf *Buf, fl *flight, mine bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.hitLocked(k); b != nil {
		return b, nil, false
	}
	if f, ok := c.flights[k]; ok {
		if wait {
			f.waiters++
		}
		return nil, f, false
	}
	f := &flight{done: make(chan struct{})}
	if wait {
		f.waiters = 1
	}
	c.flights[k] = f
	return nil, f, true
}

// cachedRef returns k's cached buffer with a reference held for the
// caller, or nil when k is not cached; it never starts or joins a flight.
// A hit is one as lookup's: the entry becomes the newest in the LRU and
// in its client's own order (evictOwn).
func (c *FrameCache) cachedRef(k cacheKey) *Buf {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hitLocked(k)
}

// hitLocked is a cache hit of k (c.mu held): the entry becomes the
// newest in the LRU and in its client's own order, and a reference is
// held for the caller; nil when k is not cached.
func (c *FrameCache) hitLocked(k cacheKey) *Buf {
	b, ok := c.lru.Get(k)
	if !ok {
		return nil
	}
	c.own.touch(k)
	b.retain()
	return b
}

// contains reports whether k is cached or being filled (a peek for prefetch).
func (c *FrameCache) contains(k cacheKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(k) {
		return true
	}
	_, ok := c.flights[k]
	return ok
}

// complete ends fl. On success buf (which carries one reference owned by the
// filler, who must still release it) is given one reference per waiter and,
// if it fits the budget, one for the cache.
func (c *FrameCache) complete(k cacheKey, fl *flight, buf *Buf, err error) {
	c.mu.Lock()
	if c.flights[k] == fl {
		delete(c.flights, k)
	}
	fl.completed = true
	fl.unpublish()
	if err == nil {
		buf.refs.Add(fl.waiters)
		if size := int64(cap(buf.b)); size <= c.budget {
			if c.lru.Contains(k) {
				c.lru.Remove(k)
			}
			buf.retain()
			c.lru.Add(k, buf)
			c.own.add(k, buf)
			c.bytes += size
			for c.bytes > c.budget {
				if _, _, ok := c.lru.RemoveOldest(); !ok {
					break
				}
			}
		}
		fl.buf = buf
	} else {
		fl.err = err
	}
	c.mu.Unlock()
	close(fl.done)
}

func (c *FrameCache) onEvict(k cacheKey, b *Buf) {
	c.own.remove(k)
	c.bytes -= int64(cap(b.b))
	if b.prefetchedBy != nil && !b.read.Load() {
		b.prefetchedBy.prefetchWasted(b.prefetchBytes)
	}
	b.Release()
}

// waitFlight waits for fl. On success the returned buffer carries the
// caller's reference. If ctx ends first, the reference is released when the
// flight completes.
func (c *FrameCache) waitFlight(ctx context.Context, fl *flight) (*Buf, error) {
	select {
	case <-fl.done:
		return fl.buf, fl.err
	case <-ctx.Done():
		c.abandonFlight(fl)
		return nil, ctx.Err()
	}
}

// waitPrefix waits for the first n bytes of fl's buffer: until they are
// published (the decode has passed them; see flight) or fl completes. It
// returns the buffer with the caller's reference, and the caller's claim
// on fl is settled either way (as waitFlight's: if ctx ends first, it is
// abandoned). Only the first n bytes of the buffer may be read before the
// flight completed.
func (c *FrameCache) waitPrefix(ctx context.Context, fl *flight, n int64) (*Buf, error) {
	for {
		pb, pend, moved := fl.progress()
		if pb != nil && pend >= n {
			if b := c.takePrefix(fl, n); b != nil {
				return b, nil
			}
		}
		select {
		case <-fl.done:
			return fl.buf, fl.err
		case <-moved:
		case <-ctx.Done():
			c.abandonFlight(fl)
			return nil, ctx.Err()
		}
	}
}

// takePrefix takes a reference to fl's published buffer if at least n
// bytes of it are decoded and fl has not completed, in exchange for the
// caller's claim on fl's completion; else it returns nil (the claim
// stands).
func (c *FrameCache) takePrefix(fl *flight, n int64) *Buf {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fl.completed {
		return nil
	}
	fl.pmu.Lock()
	defer fl.pmu.Unlock()
	if fl.pbuf == nil || fl.pend < n {
		return nil
	}
	fl.waiters--
	fl.pbuf.retain() // the filler still holds its reference: it unpublishes before dropping it
	return fl.pbuf
}

// abandonFlight gives up a waiter's claim on fl without blocking.
func (c *FrameCache) abandonFlight(fl *flight) {
	select {
	case <-fl.done:
		if fl.buf != nil {
			fl.buf.Release()
		}
	default:
		go func() {
			<-fl.done
			if fl.buf != nil {
				fl.buf.Release()
			}
		}()
	}
}

// get returns k's buffer, filling it with fill if nobody else is. The
// returned buffer carries the caller's reference. A fill that failed only
// because its own context ended is retried by waiters whose context is
// alive (after three such fills, a waiter fills on its own).
func (c *FrameCache) get(ctx context.Context, k cacheKey, m *Metrics, fill func(ctx context.Context) (*Buf, error)) (*Buf, error) {
	for attempt := 0; ; attempt++ {
		buf, fl, mine := c.lookup(k, true)
		if buf != nil {
			m.cacheHit()
			return buf, nil
		}
		if mine {
			b, err := fill(ctx)
			c.complete(k, fl, b, err)
			if b != nil {
				b.Release()
			}
		}
		b, err := c.waitFlight(ctx, fl)
		if err != nil && isContextErr(err) && ctx.Err() == nil {
			if attempt < 3 {
				continue // the filler's context ended, not ours: try again
			}
			// Every fill it joined ended with its filler's context (a
			// client opening and cancelling reads of this key): filled
			// here, shared with nobody, so other clients' cancellations
			// never fail this read.
			return fill(ctx)
		}
		if err == nil && !mine {
			m.cacheHit() // joined another read's fetch: no fetch of its own
		}
		return b, err
	}
}

// bufPool recycles large buffers by size class (64 KiB steps).
type bufPool struct {
	mu    sync.Mutex
	pools map[int]*sync.Pool
}

const poolStep = 64 << 10

func (p *bufPool) class(n int) *sync.Pool {
	cl := (n + poolStep - 1) / poolStep
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pools == nil {
		p.pools = make(map[int]*sync.Pool)
	}
	sp := p.pools[cl]
	if sp == nil {
		sp = &sync.Pool{}
		p.pools[cl] = sp
	}
	return sp
}

// getBuf returns a buffer of length n with one reference, charged to l's
// budget and client cl (the caller reserved bufSize(n)).
func (p *bufPool) getBuf(n int64, l *ReadLimits, cl *clientUse) *Buf {
	fb := &Buf{lim: l, cl: cl}
	fb.refs.Store(1)
	if n < poolStep {
		fb.b = make([]byte, n)
		return fb
	}
	if v := p.class(int(n)).Get(); v != nil {
		b := *(v.(*[]byte))
		fb.b = b[:n]
		return fb
	}
	class := (int(n) + poolStep - 1) / poolStep
	fb.b = make([]byte, n, class*poolStep)
	return fb
}

func (p *bufPool) put(b []byte) {
	if cap(b) < poolStep || cap(b)%poolStep != 0 {
		return
	}
	b = b[:cap(b)]
	p.class(cap(b)).Put(&b)
}

// maxDecoderWindow bounds the zstd window a stream decoder accepts.
const maxDecoderWindow = 256 << 20

// decoder returns a new single-threaded stream decoder reading r, for a
// stream (a giant frame, an unframed chunk): its history grows to the
// frame's window, so it is never pooled (discard closes it, and its window
// is charged to the budget while it lives). Single-threaded decoders read
// their input only inside Read calls, which is what lets a parked decoder
// change contexts between requests. Every frame of the stream declaring
// a window larger than maxWin (at most maxDecoderWindow) fails the decode.
func (c *FrameCache) decoder(r io.Reader, maxWin int64) (*zstd.Decoder, error) {
	d, err := zstd.NewReader(r,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(maxDecoderWindow),
		zstd.WithDecoderMaxWindow(uint64(min(maxWin, maxDecoderWindow))))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return d, nil
}

// frameDecoder returns a pooled decoder for DecodeAll: it decodes a whole
// frame straight into the caller's buffer (the buffer is its history), so
// it keeps no window of its own between uses.
func (c *FrameCache) frameDecoder() (*zstd.Decoder, error) {
	select {
	case d := <-c.decs:
		return d, nil
	default:
	}
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(maxDecoderWindow),
		zstd.WithDecoderMaxWindow(maxDecoderWindow),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return d, nil
}

// putFrameDecoder returns d to the pool (or closes it when the pool is full).
func (c *FrameCache) putFrameDecoder(d *zstd.Decoder) {
	select {
	case c.decs <- d:
	default:
		d.Close()
	}
}

// decodeFrame decodes one complete zstd frame held in comp into a pooled
// buffer of exactly usize bytes; any other decoded length is an error.
func (c *FrameCache) decodeFrame(comp []byte, usize int64) (*Buf, error) {
	out, err := c.lim.alloc(context.Background(), usize, demand)
	if err != nil {
		return nil, err
	}
	if err := c.decodeInto(comp, out); err != nil {
		out.Release()
		return nil, err
	}
	return out, nil
}

// decodeInto decodes the one complete zstd frame held in comp into out,
// which must come out exactly len(out) bytes long. The frame decodes in one
// call straight into out (out is the decoder's history: no window of the
// decoder's own), and the decoder is capped at out's capacity, so a frame
// that decodes to more (a bomb) is refused without allocating for it.
func (c *FrameCache) decodeInto(comp []byte, out *Buf) error {
	usize := int64(len(out.b))
	d, err := c.frameDecoder()
	if err != nil {
		return err
	}
	got, err := d.DecodeAll(comp, out.b[:0])
	c.putFrameDecoder(d)
	switch {
	case err != nil:
		return fmt.Errorf("zstd (frame of %d bytes): %v: %w", usize, err, ErrCorrupt)
	case int64(len(got)) != usize || (usize > 0 && &got[0] != &out.b[0]):
		return fmt.Errorf("frame decodes to %d bytes, manifest says %d: %w", len(got), usize, ErrCorrupt)
	}
	return nil
}
