package chunkio

// The one memory budget. Every buffer of the read path (compressed parts in
// flight, decoded frames in the cache or ahead of a reader, verified
// extents, stream segments) and every stream decoder's window is charged to
// one process-wide byte budget, the FrameCache's memory. Charging happens
// before the bytes are allocated and is returned when the last reference
// is dropped, so the bytes in use never exceed the budget:
//
//   - a demand allocation (what a reader needs now: the first part of a
//     read, its stream segment) evicts cached frames oldest first and
//     parked decoders, then waits for memory to be freed, at most
//     MemoryWait; after that the read fails with ErrBusy (503 SlowDown);
//   - a speculative allocation (readahead, the later parts of a window)
//     evicts cached frames but never waits, and never takes a stream past
//     its fair share (the budget divided by the streams reading), so a
//     stalled or abandoned reader cannot pin more than its share.
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

// ErrBusy: the read memory budget stayed exhausted for MemoryWait (every
// byte held by other readers). It wraps backend.ErrUnavailable, so the
// client is told to retry (503 SlowDown).
var ErrBusy = fmt.Errorf("read memory budget exhausted: %w", backend.ErrUnavailable)

// errNoMemory: a speculative allocation found no free memory (never
// returned to callers: they do without the readahead).
var errNoMemory = errors.New("no memory for a speculative read")

// DefaultMemoryWait bounds a demand allocation's wait for memory.
const DefaultMemoryWait = 30 * time.Second

// defaultMemoryExtra is what the memory budget adds to the cache budget by
// default: room for the parts and frames in flight beyond what is cached.
const defaultMemoryExtra = 128 << 20

// CacheOption configures a FrameCache (NewFrameCache).
type CacheOption func(*cacheConfig)

type cacheConfig struct {
	memory      int64
	partSize    int64
	streamParts int
	maxParts    int
	memoryWait  time.Duration
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

// WithMemoryWait bounds how long a read waits for memory before failing
// with ErrBusy. Default 30 s.
func WithMemoryWait(d time.Duration) CacheOption { return func(c *cacheConfig) { c.memoryWait = d } }

// memory is the FrameCache's budget accounting.
type memory struct {
	limit int64
	used  atomic.Int64
	wait  time.Duration

	mu    sync.Mutex
	freed chan struct{} // closed (and replaced) whenever memory is returned

	streams atomic.Int64 // streams reading (fair share)
	peak    atomic.Int64
}

func newMemory(limit int64, wait time.Duration) *memory {
	return &memory{limit: limit, wait: wait, freed: make(chan struct{})}
}

// tryCharge takes n bytes if they fit.
func (m *memory) tryCharge(n int64) bool {
	for {
		cur := m.used.Load()
		if cur+n > m.limit {
			return false
		}
		if m.used.CompareAndSwap(cur, cur+n) {
			for {
				p := m.peak.Load()
				if cur+n <= p || m.peak.CompareAndSwap(p, cur+n) {
					return true
				}
			}
		}
	}
}

// release returns n bytes and wakes the waiters.
func (m *memory) release(n int64) {
	if n == 0 {
		return
	}
	if m.used.Add(-n) < 0 {
		panic("chunkio: memory budget released more than charged")
	}
	m.mu.Lock()
	close(m.freed)
	m.freed = make(chan struct{})
	m.mu.Unlock()
}

func (m *memory) freedChan() chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.freed
}

// share is a stream's fair share of the budget.
func (m *memory) share() int64 {
	return m.limit / max(1, m.streams.Load())
}

// allocMode says whether an allocation may wait for memory.
type allocMode uint8

const (
	demand      allocMode = iota // wait (up to MemoryWait) after evicting
	speculative                  // evict, never wait
)

// reserve charges n bytes to the budget, evicting cached frames and
// parked decoders as needed; a demand reservation then waits for memory
// to be freed. The caller returns the bytes with unreserve (or hands them
// to buffers made with bufReserved, which return them when released).
func (c *FrameCache) reserve(ctx context.Context, n int64, mode allocMode) error {
	m := c.mem
	if n > m.limit {
		return fmt.Errorf("%d bytes asked of a read memory budget of %d: %w", n, m.limit, ErrBusy)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if m.tryCharge(n) {
			return nil
		}
		if c.evictForMemory() {
			continue
		}
		if mode == speculative {
			return errNoMemory
		}
		ch := m.freedChan()
		if m.tryCharge(n) {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(m.wait)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("waited %v for %d bytes (%d of %d in use): %w", m.wait, n, m.used.Load(), m.limit, ErrBusy)
		}
	}
}

// unreserve returns n reserved bytes.
func (c *FrameCache) unreserve(n int64) { c.mem.release(n) }

// evictForMemory drops the oldest cached frame, else the oldest parked
// decoder; it reports whether it dropped anything. (A dropped frame that a
// reader still holds is freed when the reader releases it.)
func (c *FrameCache) evictForMemory() bool {
	c.mu.Lock()
	_, _, ok := c.lru.RemoveOldest()
	c.mu.Unlock()
	if ok {
		return true
	}
	return c.dropParked()
}

// bufSize is what a buffer of n bytes costs (its pooled capacity).
func bufSize(n int64) int64 {
	if n < poolStep {
		return n
	}
	return (n + poolStep - 1) / poolStep * poolStep
}

// alloc returns a buffer of n bytes with one reference, charged to the
// budget (see reserve for mode).
func (c *FrameCache) alloc(ctx context.Context, n int64, mode allocMode) (*Buf, error) {
	if err := c.reserve(ctx, bufSize(n), mode); err != nil {
		return nil, err
	}
	return c.bufReserved(n), nil
}

// bufReserved returns a buffer of n bytes whose bufSize(n) bytes the caller
// already reserved; its last Release returns them.
func (c *FrameCache) bufReserved(n int64) *Buf {
	return c.bufs.getBuf(n, c)
}

// MemoryInUse is the bytes currently charged to the read memory budget,
// and the most ever charged at once.
func (c *FrameCache) MemoryInUse() (used, peak int64) {
	return c.mem.used.Load(), c.mem.peak.Load()
}

// MemoryBudget is the hard memory budget of all reads.
func (c *FrameCache) MemoryBudget() int64 { return c.mem.limit }

// streamStarted and streamEnded count the streams sharing the budget.
func (c *FrameCache) streamStarted() { c.mem.streams.Add(1) }
func (c *FrameCache) streamEnded()   { c.mem.streams.Add(-1) }
