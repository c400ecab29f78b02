package chunkio

// Block sums: what keeps a later ranged read of a span checked whole once
// verified too. The check of a unit whose bytes are object bytes (a whole
// plain or unframed object, a giant frame's compressed span, a plain
// member's extent) also takes a tag of each sumBlockBytes block of it (on
// the absolute grid of object offsets, cut at the unit's ends). A later
// partReader of object bytes inside that unit fetches whole blocks (its
// range widened to the blocks around it, its parts still on the part
// grid, which the block grid divides) and hands out no byte of a block
// before the block's tag matched: a body damaged in transit is read once
// more, as a frame is, and a second mismatch fails the read (the HTTP
// layer aborts the response), so it is never served.
//
// The tags are our own memory of bytes the manifest's sha256 vouched for,
// so they need not be a public hash, only one the store cannot forge: a
// GMAC (AES-GCM sealing no plaintext, the block as its additional data)
// under a random AES-256 key of that set of sums alone, which never leaves
// the process (nor do the tags), with the block's object offset as the
// nonce (unique within the set: its blocks are disjoint), 16-byte tags.
// With AES and carry-less multiplication in hardware it hashes several
// times faster than sha256 (SECURITY.md, "Block sums are a MAC").
//
// The tags are 16 bytes per block (64 KiB per GiB checked) and 1 KiB per
// set (its GCM instance: blockSumsOverhead), charged to a
// bound of the cache (a thirty-second of its budget, shared by its Sets,
// given back when a Set closes); a check that finds the bound full keeps
// none, and that unit's later reads are as before (the ETag pin only).
// Units restored from the persistent index (MarkVerified) have no sums
// either, until a restart, until their chunk is checked again.

import (
	"cmp"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
)

// sumBlockBytes is the block the sums cover (when the part size is a
// multiple of it; else the part size).
const sumBlockBytes = 256 << 10

// blockTagBytes is the size of one block's tag.
const blockTagBytes = 16

// blockSumsOverhead is what a set of tags holds besides its tags, charged
// with them: its own AES-256-GCM instance (key schedules and GHASH table)
// and fields, about 890 bytes measured (TestBlockSumsChargeCoversTheirMemory),
// which for the one-block set of a small member is 55 times its tag.
const blockSumsOverhead = 1 << 10

// blockSums is the tag of each block of object bytes [off, end).
type blockSums struct {
	off, end int64
	bs       int64
	unitSum  [32]byte    // the sha256 of the unit they were taken with (which it matched)
	mac      cipher.AEAD // under this set's own key (Seal is safe for concurrent use)
	sums     [][blockTagBytes]byte
}

// newBlockSums returns an empty set of tags of object bytes [off, end)
// under a fresh random key, or an error when the process cannot make one
// (a FIPS 140-only build refuses GCM with our nonces).
func newBlockSums(off, end, bs int64) (*blockSums, error) {
	var key [32]byte
	rand.Read(key[:]) // never fails (crypto/rand crashes the program instead)
	blk, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	mac, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	return &blockSums{off: off, end: end, bs: bs, mac: mac, sums: make([][blockTagBytes]byte, 0, blockCount(off, end, bs))}, nil
}

// tag is the tag of data, the block at object byte lo.
func (b *blockSums) tag(lo int64, data []byte) [blockTagBytes]byte {
	var nonce [12]byte
	binary.BigEndian.PutUint64(nonce[4:], uint64(lo))
	var t [blockTagBytes]byte
	b.mac.Seal(t[:0], nonce[:], nil, data)
	return t
}

// matches reports whether data, the block at object byte lo, is the one
// the check tagged.
func (b *blockSums) matches(lo int64, data []byte) bool {
	t := b.tag(lo, data)
	return subtle.ConstantTimeCompare(t[:], b.sums[b.index(lo)][:]) == 1
}

// complete reports whether every block of [off, end) has its tag.
func (b *blockSums) complete() bool { return int64(len(b.sums)) == blockCount(b.off, b.end, b.bs) }

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

// blockHasher takes the tags of the blocks given to it, which are object
// bytes [b.off, b.end) in order, each whole.
type blockHasher struct {
	b  *blockSums
	at int64
}

// block tags the next block, data (its whole bytes).
func (w *blockHasher) block(data []byte) error {
	lo, hi := w.b.bounds(w.at)
	if w.at != lo || int64(len(data)) != hi-lo {
		return fmt.Errorf("block sums: %d bytes at %d, not the block %d-%d of the unit %d-%d", len(data), w.at, lo, hi, w.b.off, w.b.end)
	}
	w.b.sums = append(w.b.sums, w.b.tag(lo, data))
	w.at = hi
	return nil
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
	k := blockCount(off, end, bs)
	if k == 0 {
		return nil
	}
	n := sumsCharge(k)
	b, err := newBlockSums(off, end, bs)
	if err != nil {
		s.log.Warn().Str("archive", s.name).Err(err).Msg("block sums not kept: no MAC")
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.cache.takeSums(n) {
		return nil
	}
	s.sumHeld.Add(n)
	return &blockHasher{b: b, at: off}
}

// sumsCharge is what a set of k blocks' tags is charged.
func sumsCharge(k int64) int64 { return k*blockTagBytes + blockSumsOverhead }

// dropSums gives back the charge of sums that are not kept (unless the
// Set closed since they were charged: Close gave back all it held).
func (s *Set) dropSums(bh *blockHasher) {
	if bh == nil {
		return
	}
	n := sumsCharge(int64(cap(bh.b.sums)))
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
	return rs.units.sums.find(start, end)
}

// sumsIndex is a chunk's kept sums by object offset: a ranged read finds
// the ones holding it in O(log n + sqrt n) of the chunk's checked units (a
// plain tar may have many checked members), not by scanning all of them,
// and keeping one costs O(sqrt n) amortized in any order the units are
// checked (a client decides it): sets are added to a short tail, merged
// into the sorted list when the tail outgrows four times the list's
// square root.
type sumsIndex struct {
	list   []*blockSums // by off
	maxEnd []int64      // maxEnd[i]: the largest end of list[:i+1]
	tail   []*blockSums // added since the last merge, in any order
}

// add keeps b (whole: every block tagged).
func (x *sumsIndex) add(b *blockSums) {
	x.tail = append(x.tail, b)
	if k := len(x.tail); k > 64 && k*k > 16*len(x.list) {
		x.merge()
	}
}

// merge sorts the tail into the list (in place, from the back) and
// rebuilds the largest ends from the first it moved: O(n).
func (x *sumsIndex) merge() {
	slices.SortFunc(x.tail, func(a, b *blockSums) int { return cmp.Compare(a.off, b.off) })
	i, j := len(x.list)-1, len(x.tail)-1
	x.list = append(x.list, x.tail...)
	x.maxEnd = append(x.maxEnd, make([]int64, len(x.tail))...)
	k := len(x.list) - 1
	for ; j >= 0; k-- {
		if i >= 0 && x.list[i].off > x.tail[j].off {
			x.list[k] = x.list[i]
			i--
		} else {
			x.list[k] = x.tail[j]
			j--
		}
	}
	for k = max(k, 0); k < len(x.list); k++ {
		x.maxEnd[k] = x.list[k].end
		if k > 0 {
			x.maxEnd[k] = max(x.list[k].end, x.maxEnd[k-1])
		}
	}
	clear(x.tail)
	x.tail = x.tail[:0]
}

// find returns kept sums covering [start, end), or nil. The candidates
// in the list are the sums starting at or before start, walked down from
// the last while some of them still reach end (for disjoint units, one
// step); then the tail's, each.
func (x *sumsIndex) find(start, end int64) *blockSums {
	i := sort.Search(len(x.list), func(i int) bool { return x.list[i].off > start }) - 1
	for ; i >= 0 && x.maxEnd[i] >= end; i-- {
		if b := x.list[i]; end <= b.end && b.complete() {
			return b
		}
	}
	for _, b := range x.tail {
		if b.off <= start && end <= b.end && b.complete() {
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
