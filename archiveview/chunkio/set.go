package chunkio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// Read-path defaults.
const (
	DefaultMaxFrameBytes    = 64 << 20
	DefaultReadahead        = 8
	DefaultSmallVerifyBytes = 8 << 20
	DefaultCacheBudget      = 128 << 20
	maxRunBytes             = 64 << 20 // compressed bytes per coalesced GET
	maxRunGap               = 1 << 20  // skippable gap bridged inside one GET
	maxParked               = 8        // parked stream decoders per Set
	maxPrefetches           = 2        // background prefetch runs per Set
	segmentBytes            = 256 << 10
	// DefaultForgetCorrupt is how long a chunk's remembered data failure
	// refuses its reads without a request (Options.ForgetCorruptAfter).
	DefaultForgetCorrupt = 5 * time.Minute
)

// Options configure a Set. Zero fields take the defaults.
type Options struct {
	// Name is the archive's display name, used in logs.
	Name string
	// Cache is the shared decoded-frame cache; nil gives a private one of
	// DefaultCacheBudget bytes.
	Cache *FrameCache
	// Metrics receives the wharf_frames_* and checksum series; nil disables.
	Metrics *Metrics
	Logger  zerolog.Logger
	// MaxFrameBytes: frames whose uncompressed or compressed size exceeds
	// this are streamed (decoded on the fly, verified at the frame's end)
	// instead of cached. 0 = DefaultMaxFrameBytes.
	MaxFrameBytes int64
	// Readahead is at most how many frames past a read are kept
	// prefetched (refilled in one coalesced GET when half of it is used),
	// once the reads proved to be a stream; the window grows with the
	// evidence (readahead.go). 0 = DefaultReadahead; negative disables.
	Readahead int
	// SmallVerifyBytes: a partial read of an extent that has a sha256 but no
	// frame checksum (plain tar, direct, stream zstd, giant frame) and is at
	// most this long fetches and verifies the whole extent first, so flipped
	// bytes are never served. 0 = DefaultSmallVerifyBytes; negative disables.
	SmallVerifyBytes int64
	// TrustUnframed serves ranged reads of extents no frame checksum
	// covers (plain tar members, direct objects, unframed zstd, giant
	// frames) without reading them whole first (verified.go): the operator
	// accepts S3's own integrity for these shapes. Off by default.
	TrustUnframed bool
	// Classes is the storage class and restore state of the objects
	// (classes.go), shared by the Sets of one archive; nil gives the Set
	// its own, empty one (nothing known: objects are read as STANDARD until
	// the store refuses one as archived).
	Classes *Classes
	// TarMembers, when set, says which members a tar walk of chunk ci
	// remembers: it is called once per walk and returns the test of a
	// member's name (true: an extent of the archive may ask for it; a
	// false positive only keeps a name). What a walk keeps is then bounded
	// by the manifest, not by the members a hostile chunk holds. nil keeps
	// every regular member's name (bounded by maxWalkEntries only).
	TarMembers func(ci int32) (func(name string) bool, error)
	// ForgetCorruptAfter bounds how long a data failure of a chunk (a
	// span or object that failed its sha256 twice, a tar walk or header
	// check that failed on the data, a zstd stream past its bound) is
	// remembered: within it, reads that need the failed check are refused
	// without a request; after it the check runs again on the next read
	// (the operator may have replaced the object). 0 =
	// DefaultForgetCorrupt.
	ForgetCorruptAfter time.Duration
	// Now is the clock of ForgetCorruptAfter; nil is time.Now.
	Now func() time.Time
}

// MaxFrame is the giant-frame threshold these options give: frames whose
// decoded or compressed size exceeds it are streamed, not cached.
func (o Options) MaxFrame() int64 {
	if o.MaxFrameBytes <= 0 {
		return DefaultMaxFrameBytes
	}
	return o.MaxFrameBytes
}

// Giant reports whether frame f is streamed rather than fetched whole and
// cached under these options: its decoded or its compressed size exceeds
// MaxFrame. Both count, so a manifest claiming a huge compressed span for a
// small frame never makes the reader allocate that span (a cached frame's
// compressed bytes are read into one buffer before they are verified).
func (o Options) Giant(f Frame) bool {
	m := o.MaxFrame()
	return f.USize > m || f.CSize > m
}

// Set is the chunk table of one archive (shared by the shadow archives of
// its older versions) with everything the read path keeps about it: the
// per-chunk state (pinned ETag, tar walk, header checks, sequential
// detection), parked stream decoders and the lifetime of background
// prefetch. It is safe for concurrent use. Chunks never change after
// NewSet.
type Set struct {
	name    string
	store   backend.Store
	bucket  string
	chunks  []Chunk
	states  []atomic.Pointer[chunkState]
	cache   *FrameCache
	lim     *ReadLimits // the cache's: memory, GET slots, stream decoders
	classes *Classes
	storeID string
	metrics *Metrics
	log     zerolog.Logger
	opts    Options

	maxFrame  int64
	readahead int
	smallVer  int64

	ctx    context.Context // ends at Close: stops prefetch
	cancel context.CancelFunc

	prefetchSem chan struct{}
	prefetchWG  sync.WaitGroup

	mu     sync.Mutex
	closed bool

	decoded atomic.Int64 // bytes produced by stream decoders (tests: O(size))
	sumHeld atomic.Int64 // block sums charged to the cache (blocksums.go)

	forgetAfter time.Duration    // Options.ForgetCorruptAfter, defaulted
	now         func() time.Time // Options.Now, defaulted

	keyIdxOnce sync.Once // chunkByKey (peers.go)
	keyIdx     map[string]int32
}

// NewSet returns the read state for chunks of bucket in store. The chunk
// slice is kept (not copied) and must not be modified afterwards.
func NewSet(store backend.Store, bucket string, chunks []Chunk, o Options) *Set {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Set{
		name:        o.Name,
		store:       store,
		bucket:      bucket,
		chunks:      chunks,
		states:      make([]atomic.Pointer[chunkState], len(chunks)),
		cache:       o.Cache,
		metrics:     o.Metrics,
		log:         o.Logger,
		opts:        o,
		ctx:         ctx,
		cancel:      cancel,
		maxFrame:    o.MaxFrame(),
		readahead:   o.Readahead,
		smallVer:    o.SmallVerifyBytes,
		prefetchSem: make(chan struct{}, maxPrefetches),
	}
	if s.cache == nil {
		s.cache = NewFrameCache(DefaultCacheBudget)
	}
	s.lim = s.cache.lim
	s.forgetAfter, s.now = o.ForgetCorruptAfter, o.Now
	if s.forgetAfter <= 0 {
		s.forgetAfter = DefaultForgetCorrupt
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.classes = o.Classes
	if s.classes == nil {
		s.classes = NewClasses(store, bucket, ClassOptions{Logger: o.Logger, Name: o.Name})
	}
	s.storeID = s.cache.storeID(store)
	if s.cache.peers != nil {
		s.cache.reg.add(s) // PeerFrame serves its frames until Close
	}
	switch {
	case s.readahead == 0:
		s.readahead = DefaultReadahead
	case s.readahead < 0:
		s.readahead = 0
	}
	switch {
	case s.smallVer == 0:
		s.smallVer = DefaultSmallVerifyBytes
	case s.smallVer < 0:
		s.smallVer = 0
	}
	return s
}

// Classes is the storage class and restore state of the Set's objects.
func (s *Set) Classes() *Classes { return s.classes }

// CheckReadable returns nil when chunk ci can be read now, and an error
// wrapping backend.ErrArchived when it is archived without a finished
// restore (Classes.CheckReadable). Every range GET of a chunk is checked
// this way first, so a read of archived bytes fails before any fetch.
func (s *Set) CheckReadable(ctx context.Context, ci int32) error {
	return s.classes.CheckReadable(ctx, s.chunks[ci].Key)
}

// Cache is the decoded-frame cache the Set reads through.
func (s *Set) Cache() *FrameCache { return s.cache }

// Metrics is the Set's metrics (nil records nothing).
func (s *Set) Metrics() *Metrics { return s.metrics }

// Options returns the options the Set was made with.
func (s *Set) Options() Options { return s.opts }

// StreamDecoded is the number of bytes stream decoders have produced (for
// tests asserting O(size) decode work).
func (s *Set) StreamDecoded() int64 { return s.decoded.Load() }

// Close stops the Set's background work: in-flight prefetches are
// cancelled (and waited for) and parked decoders are released. Reads that
// are already open keep working; later reads work without prefetch. Close
// is idempotent and safe for concurrent use.
func (s *Set) Close() {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	sums := s.sumHeld.Swap(0) // under s.mu, as newBlockHasher and dropSums charge it
	s.mu.Unlock()
	s.cache.dropParkedOf(s)
	s.cache.giveSums(sums)
	if s.cache.peers != nil {
		s.cache.reg.remove(s)
	}
	s.prefetchWG.Wait()
}

// giant reports whether frame f is streamed (Options.Giant).
func (s *Set) giant(f Frame) bool {
	return f.USize > s.maxFrame || f.CSize > s.maxFrame
}

// chunkState is the read path's per-chunk state.
type chunkState struct {
	mu   sync.Mutex
	etag string // first ETag seen; later responses must match
	size int64  // object size as the store reported it (0 = not seen yet)

	hdrOK     sync.Map // hdrKey -> struct{}: ustar header checked for that member
	hdrChecks sync.Map // hdrKey -> *Memo[struct{}]: the one check of that header (checkHeaderOnce)

	units unitState // units checked whole (verified.go)
	// unpinned: a unit check of the object got no ETag from the store,
	// so no read may rely on a check of it (verified.go).
	unpinned atomic.Bool

	walk Memo[map[string]walkEntry] // the shared tar walk

	windows sync.Map // stream (frame index, -1: whole object) -> decoder window its header declares

	// streamErr is the data failure (checksum mismatch, decode past the
	// chunk's bound) found by a decode of the whole unframed object; later
	// whole-object decodes return it at once instead of decoding again
	// (guarded by mu). The object cannot change under it: its first ETag
	// is pinned.
	streamErr error
	// wholeMismatch: a whole-object decode failed its sha256 once; a
	// second failure is remembered in streamErr (stream.go).
	wholeMismatch atomic.Bool

	// failedAt is when a data failure of the chunk was first remembered
	// (unix nanoseconds; 0: none since the last forget); corrupt says
	// one ever was in this state (forget.go).
	failedAt atomic.Int64
	corrupt  atomic.Bool
	// replacedAt: when the state was started afresh for an object that
	// replaced the one the archive was opened over (repinChanged; unix
	// nanoseconds, 0: the first state). The ETag the open's listing
	// reported is not this object's, so pinListed leaves the pin to the
	// first response; and such a state is not started afresh again
	// within ForgetCorruptAfter (forget.go).
	replacedAt int64

	noSumNoted   atomic.Bool    // a frame without checksum was logged
	evidence     streamEvidence // whether the chunk's reads are a stream (readahead.go)
	prefetchedTo atomic.Int64   // highest frame index handed to prefetch
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

// state returns chunk ci's read state, building it on first use (most
// chunks of a large archive are never read, so none is built up front).
func (s *Set) state(ci int32) *chunkState {
	p := &s.states[ci]
	if rs := p.Load(); rs != nil {
		s.forgetExpired(rs)
		return rs
	}
	rs := newChunkState()
	if p.CompareAndSwap(nil, rs) {
		return rs
	}
	return p.Load()
}

func newChunkState() *chunkState {
	rs := &chunkState{}
	rs.prefetchedTo.Store(-1)
	return rs
}

// ifMatch returns the ETag later range reads must match ("" before the
// first response).
func (rs *chunkState) ifMatch() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.etag
}

// observe records the ETag and size of a response and fails if the object
// was replaced since the first response.
func (rs *chunkState) observe(info backend.ObjectInfo) error {
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
func (rs *chunkState) streamFailure() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.streamErr
}

// failStream remembers a whole-object data failure (the first one wins).
func (rs *chunkState) failStream(now time.Time, err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.streamErr == nil {
		rs.streamErr = err
	}
	rs.markFailed(now)
}

func (rs *chunkState) objectSize() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.size
}

// rangeGet issues one range read of chunk ci, pinned to the ETag of the
// chunk's first response.
func (s *Set) rangeGet(ctx context.Context, ci int32, off, length int64) (io.ReadCloser, error) {
	c := &s.chunks[ci]
	if err := s.classes.CheckReadable(ctx, c.Key); err != nil {
		return nil, err
	}
	rs := s.state(ci)
	s.pinListed(ci, rs)
	b, info, err := s.store.ReadRange(ctx, s.bucket, c.Key, off, length, rs.ifMatch())
	if errors.Is(err, backend.ErrChanged) {
		s.repinChanged(ci, rs)
	}
	if err != nil {
		var ae *backend.ArchivedError
		if errors.As(err, &ae) {
			s.classes.Refused(c.Key, ae) // the next read fails without a request
		}
		return nil, err
	}
	if err := rs.observe(info); err != nil {
		b.Close()
		s.repinChanged(ci, rs)
		return nil, err
	}
	if c.Kind == Direct && info.Size > 0 && info.Size != c.Size {
		// A direct object is the file (or split part) itself: one of
		// another size is something else (e.g. a chunk object whose
		// chunks[] entry was renamed away), never a prefix to serve.
		b.Close()
		return nil, fmt.Errorf("direct object is %d bytes, manifest says %d: %w", info.Size, c.Size, ErrCorrupt)
	}
	return b, nil
}

// pinListed pins a direct object that no response has pinned yet to the
// ETag the storage-class listing (or a HEAD) reported at open, so that its
// first GET carries If-Match: a direct object is served as it streams and
// checked whole only at its end, and a replaced one must be refused before
// the first byte is sent, not cut near the end of the response. Chunks are
// left to their first response: a framed chunk's bytes are checked frame
// by frame before they are served. A state started afresh for a replaced
// object (repinChanged) is not pinned to the listing's ETag, which is the
// old object's.
func (s *Set) pinListed(ci int32, rs *chunkState) {
	if s.chunks[ci].Kind != Direct || rs.replacedAt != 0 || rs.ifMatch() != "" {
		return
	}
	etag := s.classes.listedETag(s.chunks[ci].Key)
	if etag == "" {
		return
	}
	rs.mu.Lock()
	if rs.etag == "" {
		rs.etag = etag
	}
	rs.mu.Unlock()
}

// objectSize returns chunk ci's real object size (Stat once if unknown).
func (s *Set) objectSize(ctx context.Context, ci int32) (int64, error) {
	rs := s.state(ci)
	if sz := rs.objectSize(); sz > 0 {
		return sz, nil
	}
	s.pinListed(ci, rs)
	info, err := s.store.Stat(ctx, s.bucket, s.chunks[ci].Key)
	if err != nil {
		return 0, err
	}
	s.classes.Observe(info)
	if err := rs.observe(info); err != nil {
		s.repinChanged(ci, rs)
		return 0, err
	}
	return info.Size, nil
}
