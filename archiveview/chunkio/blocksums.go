package chunkio

// Block sums: what keeps a later ranged read of a span checked whole once
// verified too. The check of a unit whose bytes are object bytes (a whole
// plain or unframed object, a giant frame's compressed span, a plain
// member's extent) also takes the sha256 of each sumBlockBytes block of
// it (on the absolute grid of object offsets, cut at the unit's ends).
// A later partReader of object bytes inside that unit fetches whole
// blocks (its range widened to the blocks around it, its parts still on
// the part grid, which the block grid divides) and hands out no byte of a
// block before the block's sum matched: a body damaged in transit is read
// once more, as a frame is, and a second mismatch fails the read (the
// HTTP layer aborts the response), so it is never served.
//
// The sums are 32 bytes per block (128 KiB per GiB checked), charged to
// a bound of the cache (a thirty-second of its budget, shared by its
// Sets, given back when a Set closes); a check that finds the bound full
// keeps none, and that unit's later reads are as before (the ETag pin
// only). Units restored from the persistent index (MarkVerified) have no
// sums either, until a restart, until their chunk is checked again.

import (
	"crypto/sha256"
	"fmt"
	"hash"
)

// sumBlockBytes is the block the sums cover (when the part size is a
// multiple of it; else the part size).
const sumBlockBytes = 256 << 10

// blockSums is the sha256 of each block of object bytes [off, end).
type blockSums struct {
	off, end int64
	bs       int64
	sums     [][32]byte
}

// bounds is the block holding object byte at.
func (b *blockSums) bounds(at int64) (lo, hi int64) {
	return max(b.off, at/b.bs*b.bs), min(b.end, (at/b.bs+1)*b.bs)
}

func (b *blockSums) index(at int64) int { return int(at/b.bs - b.off/b.bs) }

func blockCount(off, end, bs int64) int64 {
	if end <= off {
		return 0
	}
	return (end-1)/bs - off/bs + 1
}

// blockHasher takes the sums of the bytes written to it, which are object
// bytes [b.off, b.end) in order.
type blockHasher struct {
	b  *blockSums
	at int64
	h  hash.Hash
}

func (w *blockHasher) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		_, hi := w.b.bounds(w.at)
		k := int(min(int64(len(p)), hi-w.at))
		if k <= 0 {
			return 0, fmt.Errorf("block sums: byte %d past the unit's end %d", w.at, w.b.end)
		}
		w.h.Write(p[:k])
		w.at += int64(k)
		p = p[k:]
		if w.at == hi {
			var s [32]byte
			w.h.Sum(s[:0])
			w.b.sums = append(w.b.sums, s)
			w.h.Reset()
		}
	}
	return n, nil
}

// sumBlock is the block size of the Set's sums.
func (s *Set) sumBlock() int64 {
	if ps := s.lim.partSize; ps%sumBlockBytes != 0 {
		return ps
	}
	return sumBlockBytes
}

// newBlockHasher returns a hasher of the sums of object bytes [off, end)
// of chunk ci, charged to the cache's bound, or nil when it is full or
// the Set is closed (its open reads still work, but Close gave back what
// it held: a charge taken now would never be given back).
func (s *Set) newBlockHasher(off, end int64) *blockHasher {
	bs := s.sumBlock()
	n := blockCount(off, end, bs) * 32
	if n == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.cache.takeSums(n) {
		return nil
	}
	s.sumHeld.Add(n)
	return &blockHasher{b: &blockSums{off: off, end: end, bs: bs, sums: make([][32]byte, 0, n/32)}, at: off, h: sha256.New()}
}

// dropSums gives back the charge of sums that are not kept (unless the
// Set closed since they were charged: Close gave back all it held).
func (s *Set) dropSums(bh *blockHasher) {
	if bh == nil {
		return
	}
	n := int64(cap(bh.b.sums)) * 32
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.sumHeld.Add(-n)
	s.cache.giveSums(n)
}

// unitObjectBytes is the object bytes unit u of chunk ci covers, when its
// bytes are object bytes (not decoded ones); size is the object's.
func (s *Set) unitObjectBytes(ci int32, u Unit, size int64) (off, end int64, ok bool) {
	switch u.Kind {
	case UnitObject:
		return 0, size, true
	case UnitSpan:
		return u.Off, u.Off + u.N, true
	case UnitExtent:
		if k := s.chunks[ci].Kind; k == Direct || k == PlainTar {
			return u.Off, u.Off + u.N, true
		}
	}
	return 0, 0, false
}

// sumsFor returns the sums of a checked unit of chunk ci covering object
// bytes [start, end), if any are kept.
func (s *Set) sumsFor(ci int32, start, end int64) *blockSums {
	rs := s.states[ci].Load()
	if rs == nil || end <= start {
		return nil
	}
	rs.units.mu.Lock()
	defer rs.units.mu.Unlock()
	for _, b := range rs.units.sums {
		if b.off <= start && end <= b.end && int64(len(b.sums)) == blockCount(b.off, b.end, b.bs) {
			return b
		}
	}
	return nil
}

// takeSums charges n bytes of block sums to the cache's bound.
func (c *FrameCache) takeSums(n int64) bool {
	limit := max(c.budget/32, 64<<10)
	for {
		used := c.sumBytes.Load()
		if used+n > limit {
			return false
		}
		if c.sumBytes.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (c *FrameCache) giveSums(n int64) { c.sumBytes.Add(-n) }
