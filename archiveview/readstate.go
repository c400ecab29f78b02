package archiveview

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/wharf-s3/wharf/backend"
)

// Read-path defaults.
const (
	defaultMaxFrameBytes    = 64 << 20
	defaultReadahead        = 8
	defaultSmallVerifyBytes = 8 << 20
	defaultCacheBudget      = 128 << 20
	maxRunBytes             = 64 << 20 // compressed bytes per coalesced GET
	maxRunGap               = 1 << 20  // skippable gap bridged inside one GET
	maxParked               = 8        // parked stream decoders per archive
	maxPrefetches           = 2        // background prefetch runs per archive
	segmentBytes            = 256 << 10
)

// archiveReadState is the read path's archive-wide state, built on first use.
type archiveReadState struct {
	ctx    context.Context // ends at Close: stops prefetch
	cancel context.CancelFunc

	cache     *FrameCache
	storeID   string
	maxFrame  int64
	readahead int
	smallVer  int64

	prefetchSem chan struct{}
	prefetchWG  sync.WaitGroup

	mu     sync.Mutex
	parked []*zstream // oldest first
	closed bool

	decoded atomic.Int64 // bytes produced by stream decoders (tests: O(size))
}

// rdState returns the archive's read state, building it on first use.
func (a *Archive) rdState() *archiveReadState {
	a.rdOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		rd := &archiveReadState{
			ctx:         ctx,
			cancel:      cancel,
			cache:       a.cache,
			readahead:   a.opts.Readahead,
			smallVer:    a.opts.SmallVerifyBytes,
			prefetchSem: make(chan struct{}, maxPrefetches),
		}
		if rd.cache == nil {
			rd.cache = NewFrameCache(defaultCacheBudget)
		}
		rd.storeID = rd.cache.storeID(a.store)
		rd.maxFrame = effectiveMaxFrame(a.opts)
		switch {
		case rd.readahead == 0:
			rd.readahead = defaultReadahead
		case rd.readahead < 0:
			rd.readahead = 0
		}
		switch {
		case rd.smallVer == 0:
			rd.smallVer = defaultSmallVerifyBytes
		case rd.smallVer < 0:
			rd.smallVer = 0
		}
		a.rd = rd
	})
	return a.rd
}

// Close stops the archive's background work: in-flight prefetches are
// cancelled (and waited for) and parked decoders are released. Reads that
// are already open keep working; later reads work without prefetch. Close
// is idempotent and safe for concurrent use.
func (a *Archive) Close() error {
	a.closeVersions()
	rd := a.rdState()
	rd.cancel()
	rd.mu.Lock()
	rd.closed = true
	parked := rd.parked
	rd.parked = nil
	rd.mu.Unlock()
	for _, z := range parked {
		z.discard(rd.cache, true)
	}
	rd.prefetchWG.Wait()
	return nil
}

// chunkReadState is the read path's per-chunk state.
type chunkReadState struct {
	mu   sync.Mutex
	etag string // first ETag seen; later responses must match
	size int64  // object size as the store reported it (0 = not seen yet)

	hdrOK sync.Map // hdrKey -> struct{}: ustar header checked for that member

	walkMu sync.Mutex
	walk   *tarWalk // shared tar walk (nil until someone starts one)

	// streamErr is the data failure (checksum mismatch, decode past the
	// chunk's bound) found by a decode of the whole unframed object; later
	// whole-object decodes return it at once instead of decoding again
	// (guarded by mu). The object cannot change under it: its first ETag
	// is pinned.
	streamErr error

	noSumNoted   atomic.Bool  // a frame without checksum was logged
	lastFrame    atomic.Int64 // last frame index served (sequential detection)
	prefetchedTo atomic.Int64 // highest frame index handed to prefetch
}

// hdrKey is one accepted header check: the header in front of data offset
// off names member name of length bytes. A check is reused only for the
// same expectation; another member claiming the same offset is checked
// (and refused) on its own.
type hdrKey struct {
	off    int64
	name   string
	length int64
}

func (a *Archive) chunkState(ci int32) *chunkReadState {
	c := &a.chunks[ci]
	c.rsOnce.Do(func() {
		rs := &chunkReadState{}
		rs.lastFrame.Store(-2)
		rs.prefetchedTo.Store(-1)
		c.rs = rs
	})
	return c.rs
}

// ifMatch returns the ETag later range reads must match ("" before the
// first response).
func (rs *chunkReadState) ifMatch() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.etag
}

// observe records the ETag and size of a response and fails if the object
// was replaced since the first response.
func (rs *chunkReadState) observe(info backend.ObjectInfo) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if info.ETag != "" {
		if rs.etag == "" {
			rs.etag = info.ETag
		} else if rs.etag != info.ETag {
			return fmt.Errorf("object replaced: ETag %q, first seen %q: %w", info.ETag, rs.etag, backend.ErrChanged)
		}
	}
	if info.Size > 0 {
		rs.size = info.Size
	}
	return nil
}

// streamFailure returns the remembered whole-object data failure, if any.
func (rs *chunkReadState) streamFailure() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.streamErr
}

// failStream remembers a whole-object data failure (the first one wins).
func (rs *chunkReadState) failStream(err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.streamErr == nil {
		rs.streamErr = err
	}
}

func (rs *chunkReadState) objectSize() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.size
}

// park keeps a healthy stream decoder for a later read that continues where
// it stopped. The oldest parked decoder is dropped past maxParked.
func (rd *archiveReadState) park(z *zstream) {
	z.src.suspend()
	rd.mu.Lock()
	if rd.closed {
		rd.mu.Unlock()
		z.discard(rd.cache, true)
		return
	}
	rd.parked = append(rd.parked, z)
	var drop *zstream
	if len(rd.parked) > maxParked {
		drop = rd.parked[0]
		rd.parked = append(rd.parked[:0], rd.parked[1:]...)
	}
	rd.mu.Unlock()
	if drop != nil {
		drop.discard(rd.cache, true)
	}
}

// unpark takes the parked decoder of stream (ci, frame) positioned furthest
// but not past pos, or nil.
func (rd *archiveReadState) unpark(ci int32, frame int, pos int64) *zstream {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	best := -1
	for i, z := range rd.parked {
		if z.ci == ci && z.frame == frame && z.pos <= pos && (best < 0 || z.pos > rd.parked[best].pos) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	z := rd.parked[best]
	rd.parked = append(rd.parked[:best], rd.parked[best+1:]...)
	return z
}
