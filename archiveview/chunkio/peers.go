package chunkio

// peers.go: the hook through which replicas share verified compressed
// frames (package chunkio/peer speaks the protocol; chunkio never sees
// HTTP). Two sides:
//
//   - Asker. A frame miss of a frame that has a sha256 (and is not giant)
//     asks Peers.Owner who owns it. When another replica does, the frame's
//     compressed bytes are asked of it (Peers.Fetch) into a buffer charged
//     to the read memory budget, hashed and compared with the frame's
//     sha256 exactly as S3's bytes are, then decoded into this cache. Bytes
//     that fail are reported (Peers.Rejected) and never used; any failure
//     of the peer (an error, a deadline, bad bytes) costs one fetch from
//     the backend instead, never a failed read.
//
//   - Owner. FrameCache.PeerFrame answers a peer: the verified compressed
//     bytes of a frame of a chunk of an archive a Set of this cache has
//     open (never any other object), from a small cache of compressed
//     frames (WithPeerCache), else fetched once from the backend (one
//     flight per frame) and checked against the sha256 before they are
//     handed out. Frames this replica owns and fetched for its own reads
//     are kept there too, so the others find them.
//
// Frames without a frame checksum (plain tar, direct objects, unframed
// zstd) and giant frames are never shared: their bytes can be checked only
// by reading their whole unit, which a peer could not hand over in pieces
// that the asker can check before use.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/wharf-s3/wharf/backend"
)

// FrameID names one compressed frame across replicas: the object (bucket,
// key), the ETag the asker has pinned for it ("" when it has none yet),
// the frame's compressed span and the sha256 its bytes must have. Owners
// are chosen from (Bucket, Key, Off, Size) alone (OwnerKey), which every
// replica knows from the manifest before any response; the ETag and the
// sum are what the owner's bytes must match.
type FrameID struct {
	Bucket, Key string
	ETag        string
	Off, Size   int64
	Sum         [32]byte
}

// OwnerKey is the bytes ownership is hashed from: bucket, key, offset and
// size, unambiguously separated.
func (id FrameID) OwnerKey() []byte {
	b := make([]byte, 0, len(id.Bucket)+len(id.Key)+48)
	b = fmt.Appendf(b, "%d:%s%d:%s%d:%d", len(id.Bucket), id.Bucket, len(id.Key), id.Key, id.Off, id.Size)
	return b
}

// String names the frame in logs and errors.
func (id FrameID) String() string {
	return fmt.Sprintf("s3://%s/%s bytes %d-%d (sha256 %s)", id.Bucket, id.Key, id.Off, id.Off+id.Size, hex.EncodeToString(id.Sum[:8]))
}

// Peers is what a FrameCache asks about frames other replicas own
// (WithPeers). Implementations must be safe for concurrent use; package
// chunkio/peer provides one.
type Peers interface {
	// Owner names the replica that owns frame id and reports whether it
	// is another one (remote). A frame this replica owns, or any frame
	// while no other replica is reachable, is not remote.
	Owner(id FrameID) (owner string, remote bool)
	// Fetch reads the compressed bytes of frame id from owner into dst
	// (len(dst) == id.Size), within its own deadlines and never past
	// ctx. A nil error means dst is full; the bytes are still unchecked
	// (chunkio checks them).
	Fetch(ctx context.Context, owner string, id FrameID, dst []byte) error
	// Rejected is told that the bytes owner answered for id failed the
	// frame's sha256 (err says how): they were not used.
	Rejected(owner string, id FrameID, err error)
}

// PeersAccepted is what a Peers may also implement to be told that the
// bytes owner answered for id passed the frame's sha256 and were used.
type PeersAccepted interface {
	Accepted(owner string, id FrameID)
}

// WithPeers makes frame misses of frames with a sha256 ask their owner
// among the replicas first (peers.go), and lets PeerFrame answer the
// other replicas.
func WithPeers(p Peers) CacheOption { return func(c *cacheConfig) { c.peers = p } }

// WithPeerCache sets how many bytes of compressed frames an owner keeps
// for the other replicas (PeerFrame). They are carved out of the cache
// budget (NewFrameCache's budget is the decoded frames plus these) and
// charged to the read memory like every buffer. Default (with WithPeers):
// an eighth of the cache budget. Ignored without WithPeers.
func WithPeerCache(n int64) CacheOption { return func(c *cacheConfig) { c.peerCache = n } }

// ErrNotShared: PeerFrame was asked for a frame that no archive open here
// has (or one that is never shared: no sha256, giant). The peer answers
// 404 and the asker reads the backend.
var ErrNotShared = errors.New("no open archive here has this frame")

// compFrames is an owner's cache of verified compressed frames, by bytes,
// one flight per frame.
type compFrames struct {
	budget  int64
	mu      sync.Mutex
	lru     *simplelru.LRU[cacheKey, *Buf]
	bytes   int64
	flights map[cacheKey]*flight
	own     *ownIndex // the entries by client (evictOwn)
}

func newCompFrames(budget int64) *compFrames {
	cf := &compFrames{budget: budget, flights: make(map[cacheKey]*flight), own: newOwnIndex()}
	// One entry per cacheEntryMin bytes of budget at most, as the decoded
	// frames: a manifest of tiny frames cannot fill it with bookkeeping.
	l, err := simplelru.NewLRU[cacheKey, *Buf](int(max(1, min(budget/cacheEntryMin, math.MaxInt32))), func(k cacheKey, b *Buf) {
		cf.own.remove(k)
		cf.bytes -= int64(cap(b.b))
		b.Release()
	})
	if err != nil {
		panic(err) // only for a non-positive size
	}
	cf.lru = l
	return cf
}

// removeOldest drops the oldest compressed frame; false when empty.
func (cf *compFrames) removeOldest() bool {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	_, _, ok := cf.lru.RemoveOldest()
	return ok
}

// evictOwn drops the oldest compressed frame charged to client cl that
// nobody else holds; false when there is none. The frames an owner fetched
// for a peer stay charged to that peer's client share while kept, so a
// peer short of its share gives its own up, as a client does its decoded
// frames (else it would be refused for as long as they stay cached).
func (cf *compFrames) evictOwn(cl *clientUse) bool {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	k, ok := cf.own.oldestFree(cl)
	if ok {
		cf.lru.Remove(k)
	}
	return ok
}

// add keeps buf (taking a reference of its own) unless k is held or buf is
// larger than the budget.
func (cf *compFrames) addLocked(k cacheKey, buf *Buf) {
	size := int64(cap(buf.b))
	if size > cf.budget || cf.lru.Contains(k) {
		return
	}
	buf.retain()
	cf.lru.Add(k, buf)
	cf.own.add(k, buf)
	cf.bytes += size
	for cf.bytes > cf.budget {
		if _, _, ok := cf.lru.RemoveOldest(); !ok {
			break
		}
	}
}

// await returns k's compressed bytes with a reference for the caller:
// held, or from the fill in progress (waited for). With neither, or when
// that fill fails, it is errOwnCopyGone; it never starts a fill.
func (cf *compFrames) await(ctx context.Context, c *FrameCache, k cacheKey) (*Buf, error) {
	cf.mu.Lock()
	if b, ok := cf.lru.Get(k); ok {
		cf.own.touch(k)
		b.retain()
		cf.mu.Unlock()
		return b, nil
	}
	fl, busy := cf.flights[k]
	if busy {
		fl.waiters++
	}
	cf.mu.Unlock()
	if !busy {
		return nil, errOwnCopyGone
	}
	b, err := c.waitFlight(ctx, fl)
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: %w", errOwnCopyGone, err)
	}
	return b, err
}

// has reports whether k is held or being filled.
func (cf *compFrames) has(k cacheKey) bool {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	_, busy := cf.flights[k]
	return busy || cf.lru.Contains(k)
}

// get returns k's compressed bytes with a reference for the caller, and
// whether they were held already (no fill of this caller's), filling them
// with fill when nobody else is. A fill that failed only because its own
// context ended is retried by waiters whose context is alive (after three
// such fills, a waiter fills on its own).
func (cf *compFrames) get(ctx context.Context, c *FrameCache, k cacheKey, fill func(context.Context) (*Buf, error)) (*Buf, bool, error) {
	for attempt := 0; ; attempt++ {
		cf.mu.Lock()
		if b, ok := cf.lru.Get(k); ok {
			cf.own.touch(k)
			b.retain()
			cf.mu.Unlock()
			return b, true, nil
		}
		fl, busy := cf.flights[k]
		mine := !busy
		if mine {
			fl = &flight{done: make(chan struct{})}
			cf.flights[k] = fl
		}
		fl.waiters++
		cf.mu.Unlock()
		if mine {
			b, err := fill(ctx)
			cf.mu.Lock()
			delete(cf.flights, k)
			if err == nil {
				b.refs.Add(fl.waiters)
				cf.addLocked(k, b)
				fl.buf = b
			} else {
				fl.err = err
			}
			cf.mu.Unlock()
			close(fl.done)
			if b != nil {
				b.Release()
			}
		}
		b, err := c.waitFlight(ctx, fl)
		if err != nil && isContextErr(err) && ctx.Err() == nil {
			if attempt < 3 {
				continue // the filler's context ended, not ours
			}
			// Every fill it joined ended with its asker's context (askers
			// that left, or someone opening and dropping asks): filled
			// here, shared with nobody, so the others' leaving never fails
			// this one.
			b, err := fill(ctx)
			return b, false, err
		}
		return b, !mine, err
	}
}

// PeerBytes is the bytes of compressed frames held for other replicas
// (WithPeerCache's budget bounds it; 0 without WithPeers).
func (c *FrameCache) PeerBytes() int64 {
	if c.comp == nil {
		return 0
	}
	c.comp.mu.Lock()
	defer c.comp.mu.Unlock()
	return c.comp.bytes
}

// peerReg is the cache's registry of open Sets by bucket, for PeerFrame.
type peerReg struct {
	mu   sync.Mutex
	sets map[string]map[*Set]struct{}
}

func (r *peerReg) add(s *Set) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sets == nil {
		r.sets = make(map[string]map[*Set]struct{})
	}
	m := r.sets[s.bucket]
	if m == nil {
		m = make(map[*Set]struct{})
		r.sets[s.bucket] = m
	}
	m[s] = struct{}{}
}

func (r *peerReg) remove(s *Set) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.sets[s.bucket]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(r.sets, s.bucket)
		}
	}
}

// find returns an open Set, chunk and frame matching id exactly (span and
// sum; a shared, non-giant frame of a framed chunk).
func (r *peerReg) find(id FrameID) (*Set, int32, int, bool) {
	r.mu.Lock()
	sets := make([]*Set, 0, len(r.sets[id.Bucket]))
	for s := range r.sets[id.Bucket] {
		sets = append(sets, s)
	}
	r.mu.Unlock()
	for _, s := range sets {
		ci, ok := s.chunkByKey(id.Key)
		if !ok || s.chunks[ci].Kind != FramedZstd {
			continue
		}
		fr := s.chunks[ci].Frames
		match := func(i int) bool {
			f := fr[i]
			return f.COff == id.Off && f.CSize == id.Size && f.HasSum && f.Sum == id.Sum && !s.giant(f)
		}
		// Frame tables are in object order (a binary search finds the
		// frame); one that is not is searched through.
		if i := sort.Search(len(fr), func(i int) bool { return fr[i].COff >= id.Off }); i < len(fr) && match(i) {
			return s, ci, i, true
		}
		if !sort.SliceIsSorted(fr, func(a, b int) bool { return fr[a].COff < fr[b].COff }) {
			for i := range fr {
				if match(i) {
					return s, ci, i, true
				}
			}
		}
	}
	return nil, 0, 0, false
}

// chunkByKey finds the chunk whose object is key (a map built on first use).
func (s *Set) chunkByKey(key string) (int32, bool) {
	s.keyIdxOnce.Do(func() {
		s.keyIdx = make(map[string]int32, len(s.chunks))
		for i := range s.chunks {
			s.keyIdx[s.chunks[i].Key] = int32(i)
		}
	})
	ci, ok := s.keyIdx[key]
	return ci, ok
}

// PeerFrame returns the verified compressed bytes of frame id for another
// replica, with a reference the caller releases, and whether they were
// held already (false: fetched from the backend for this call or a
// concurrent one). Only frames of chunks of archives a Set of this cache
// has open are served, and only shared ones (a sha256, not giant); any
// other is ErrNotShared. An id whose ETag differs from the one this
// replica pinned for the object fails with backend.ErrChanged. The bytes
// are fetched at most once at a time per frame, charged to the read
// memory budget (ctx's client, WithClient) with a take that never waits
// (no room: an error wrapping backend.ErrUnavailable) and one backend GET
// out of at most half the GET slots (none free: the same error), and
// checked against the sha256 before they are returned; a mismatch is
// fetched once more, then fails with ErrChecksum. Without WithPeers every
// call is ErrNotShared.
func (c *FrameCache) PeerFrame(ctx context.Context, id FrameID) (*Buf, bool, error) {
	if c.peers == nil {
		return nil, false, ErrNotShared
	}
	s, ci, i, ok := c.reg.find(id)
	if !ok {
		return nil, false, fmt.Errorf("%s: %w", id, ErrNotShared)
	}
	if pinned := s.state(ci).ifMatch(); id.ETag != "" && pinned != "" && pinned != id.ETag {
		return nil, false, fmt.Errorf("%s: asked for ETag %q, pinned here %q: %w", id, id.ETag, pinned, backend.ErrChanged)
	}
	if err := s.CheckReadable(ctx, ci); err != nil {
		return nil, false, err
	}
	k := s.frameKey(ci, i)
	if _, remote := c.peers.Owner(id); !remote && !c.comp.has(k) {
		// One fetch per frame across our own reads and the peers' asks.
		// A read of ours fetching the frame keeps a copy for the peers
		// (keepOwned) before it completes its flight: wait for it. With
		// none, hold the frame's flight while we fetch the compressed
		// bytes, so that a read of ours arriving meanwhile waits for us and
		// then decodes our copy (errGaveUp sends it round again) instead
		// of fetching the frame a second time.
		buf, fl, mine := c.lookup(k, true)
		switch {
		case buf != nil:
			buf.Release()
		case mine:
			defer c.complete(k, fl, nil, errGaveUp)
		default:
			if b, err := c.waitFlight(ctx, fl); err == nil {
				b.Release()
			}
		}
	}
	return c.comp.get(ctx, c, k, func(ctx context.Context) (*Buf, error) {
		b, err := fetchCompressed(ctx, s, ci, i)
		if errors.Is(err, ErrChecksum) {
			b, err = fetchCompressed(ctx, s, ci, i)
		}
		return b, err
	})
}

// errPeerNoRoom: an owner had no memory or GET slot free for a peer's
// frame (answered 503: the asker reads the backend itself).
var errPeerNoRoom = fmt.Errorf("no memory or backend GET free for a peer's frame: %w", backend.ErrUnavailable)

// fetchCompressed fetches frame i of chunk ci's compressed bytes from the
// backend and checks them against the frame's sha256. The take is
// speculative: serving a peer never waits for, nor takes, memory this
// replica's own readers are waiting for (cached frames may be evicted);
// it is one GET, and the peers' fetches hold at most half the GET slots
// (peerGets) and half the memory (peerBytes) while they wait for the
// backend, so this replica's own reads always find the other half.
// Without room it fails with errPeerNoRoom at once.
func fetchCompressed(ctx context.Context, s *Set, ci int32, i int) (*Buf, error) {
	f := s.chunks[ci].Frames[i]
	select {
	case s.cache.peerGets <- struct{}{}:
		defer func() { <-s.cache.peerGets }()
	default:
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, f.COff, f.COff+f.CSize, errPeerNoRoom)
	}
	need := bufSize(f.CSize)
	if s.cache.peerBytes.Add(need) > s.lim.memory/2 {
		s.cache.peerBytes.Add(-need)
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, f.COff, f.COff+f.CSize, errPeerNoRoom)
	}
	defer s.cache.peerBytes.Add(-need)
	plan := partPlan{off: f.COff, end: f.COff + f.CSize, lo: i, hi: i}
	p, err := s.launch(ctx, nil, ci, plan, 1, 0, 0, speculative, nil)
	if err == nil && p == nil {
		err = errPeerNoRoom
	}
	if err != nil {
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, f.COff, f.COff+f.CSize, err)
	}
	defer p.close()
	if _, err := p.wait(ctx, plan.size()); err != nil {
		return nil, fmt.Errorf("frame %d: %w", i, err)
	}
	s.metrics.frameFetched()
	if sha256.Sum256(p.buf.b) != f.Sum {
		s.metrics.checksumFailure()
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): sha256 mismatch: %w", i, f.COff, f.COff+f.CSize, ErrChecksum)
	}
	p.buf.retain() // p.close drops the part's own reference
	return p.buf, nil
}

// frameID is frame i of chunk ci as the peers name it.
func (s *Set) frameID(ci int32, i int) FrameID {
	f := &s.chunks[ci].Frames[i]
	return FrameID{Bucket: s.bucket, Key: s.chunks[ci].Key, ETag: s.state(ci).ifMatch(), Off: f.COff, Size: f.CSize, Sum: f.Sum}
}

// shared reports whether frame i of chunk ci is shared with peers at all.
func (s *Set) shared(ci int32, i int) bool {
	if s.cache.peers == nil {
		return false
	}
	f := s.chunks[ci].Frames[i]
	return f.HasSum && !s.giant(f)
}

// peerOwner says where a miss of frame i of chunk ci is filled from
// besides the backend: the remote owner's URL, or "" for the compressed
// copy this replica holds of a frame it owns (ok false: neither; the
// backend as ever).
func (s *Set) peerOwner(ci int32, i int) (owner string, ok bool) {
	if !s.shared(ci, i) {
		return "", false
	}
	owner, remote := s.cache.peers.Owner(s.frameID(ci, i))
	if remote {
		return owner, true
	}
	return "", s.cache.comp.has(s.frameKey(ci, i))
}

// peerCost is what asking a peer for frame f takes of the budget: its
// compressed bytes and its decoded frame.
func peerCost(f Frame) int64 { return bufSize(f.CSize) + bufSize(f.USize) }

// errOwnCopyGone: the compressed copy this replica kept of a frame it
// owns was evicted before a miss could use it (the backend is read).
var errOwnCopyGone = errors.New("own compressed copy of the frame evicted")

// errPeerBytes: a peer's bytes failed the frame's sha256.
var errPeerBytes = errors.New("peer answered bytes that fail the frame's sha256")

// fromPeer asks owner for frame i of chunk ci, checks the bytes against
// the frame's sha256 and decodes them. The caller reserved peerCost(f)
// for cl; whatever happens, fromPeer gives all of it back or hands it to
// the returned buffer. A nil buffer with an error that is not ctx's means
// "fetch from the backend instead" (the peer failed, or lied).
func fromPeer(ctx context.Context, s *Set, ci int32, i int, owner string, cl *clientUse) (*Buf, error) {
	f := s.chunks[ci].Frames[i]
	id := s.frameID(ci, i)
	var comp *Buf
	if owner == "" {
		// Our own copy, kept for the others (checked when kept), or the
		// fetch of it a peer's ask has in flight: waiting for that costs no
		// budget (its take never waits), and a second fetch would.
		s.lim.unreserve(cl, bufSize(f.CSize))
		c, err := s.cache.comp.await(ctx, s.cache, s.frameKey(ci, i))
		if err != nil {
			s.lim.unreserve(cl, bufSize(f.USize))
			return nil, err
		}
		comp = c
		defer comp.Release()
		if err := decodeSlot(ctx, s); err != nil {
			s.lim.unreserve(cl, bufSize(f.USize))
			return nil, err
		}
		defer func() { <-s.cache.decodeSem }()
		return checkFrame(s, ci, i, comp.b, &f.Sum, s.lim.bufReserved(cl, f.USize))
	}
	comp = s.lim.bufReserved(cl, f.CSize)
	defer comp.Release()
	if err := s.cache.peers.Fetch(ctx, owner, id, comp.b); err != nil {
		s.lim.unreserve(cl, bufSize(f.USize))
		return nil, err
	}
	sum := sha256.Sum256(comp.b)
	if sum != f.Sum {
		s.lim.unreserve(cl, bufSize(f.USize))
		err := fmt.Errorf("%s from %s: %w", id, owner, errPeerBytes)
		s.cache.peers.Rejected(owner, id, err)
		s.log.Warn().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).Int("frame", i).Str("peer", owner).
			Msg("peer answered a frame that fails its sha256: not used, fetched from the backend instead")
		return nil, err
	}
	if a, ok := s.cache.peers.(PeersAccepted); ok {
		a.Accepted(owner, id)
	}
	if err := decodeSlot(ctx, s); err != nil {
		s.lim.unreserve(cl, bufSize(f.USize))
		return nil, err
	}
	defer func() { <-s.cache.decodeSem }()
	return checkFrame(s, ci, i, comp.b, &sum, s.lim.bufReserved(cl, f.USize))
}

// peerOrBackend fills frame i of chunk ci from its remote owner (or our
// own compressed copy, owner ""), the caller having reserved peerCost for
// cl, and falls back to the backend (after giving the reservation back)
// when the peer fails. A frame whose sha256 matched but which does not
// decode is a failure of the data: the backend's bytes would be the same,
// so it is returned as it is. A prefetch (mode speculative) does not fall
// back: it ends in errGaveUp, so a reader that joined its flight fetches
// the frame itself, with a take that may wait, as the prefetch's may not.
func peerOrBackend(ctx context.Context, s *Set, ci int32, i int, owner string, cl *clientUse, mode allocMode) (*Buf, error) {
	buf, err := fromPeer(ctx, s, ci, i, owner, cl)
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrCorrupt) {
		return buf, err
	}
	if mode == speculative {
		return nil, errGaveUp
	}
	buf, err = fetchFrame(ctx, s, ci, i)
	if errors.Is(err, ErrChecksum) {
		buf, err = refetchFrame(ctx, s, ci, i, err)
	}
	return buf, err
}

// keepOwned keeps a copy of the verified compressed bytes comp of frame i
// of chunk ci in the owner's cache of compressed frames when this replica
// owns the frame, so that other replicas asking for it cost no second
// backend fetch. The copy is speculative: no memory, no copy.
func keepOwned(s *Set, ci int32, i int, comp []byte) {
	if !s.shared(ci, i) {
		return
	}
	if _, remote := s.cache.peers.Owner(s.frameID(ci, i)); remote {
		return
	}
	k := s.frameKey(ci, i)
	if s.cache.comp.has(k) {
		return
	}
	b, err := s.lim.alloc(context.Background(), int64(len(comp)), speculative)
	if err != nil {
		return
	}
	copy(b.b, comp)
	cf := s.cache.comp
	cf.mu.Lock()
	cf.addLocked(k, b)
	cf.mu.Unlock()
	b.Release()
}
