package chunkio

// Verification of the shapes frame checksums do not cover: members of
// plain .tar chunks, direct-upload objects, unframed .tar.zst chunks and
// giant frames. A read of any part of such an extent is served only from
// an object whose bytes were checked whole against a sha256 first:
//
//   - a unit is the span one sha256 covers: the whole object (an unframed
//     chunk's or a plain tar's chunk checksum), a giant frame's compressed
//     span (its frame checksum), or the extent itself (the file's or split
//     part's checksum: its bytes as served, decoded for zstd kinds);
//     compressed spans are preferred, since hashing them needs no decoding;
//   - the first read that needs a unit checks it, streaming the unit through
//     the planner's parallel parts and keeping only, for a unit of object
//     bytes, a keyed tag of each of its blocks (blocksums.go: later ranged
//     reads of it are checked block by block against them); concurrent
//     readers share that one check (Memo), a failure of the data is
//     remembered (for a bounded time: forget.go) and a backend failure is
//     retried by the next read;
//   - a checked unit is remembered with the object's ETag seen by the
//     check. The chunk's ETag is pinned from its first response on, so every
//     later GET of the object carries If-Match with it: a replaced object
//     fails (backend.ErrChanged), it is never read as the checked one. The
//     persistent index records checked units, so a restart keeps them
//     (VerifiedUnits, MarkVerified). A store that reports no ETag for the
//     object leaves nothing to pin: such reads are refused
//     (backend.ErrBadResponse), not served from an object that may have
//     been replaced since its check.
//
// A read that the caller checks whole itself (Extent.Checked: the whole
// file against its sha256, a whole split part against its sum) needs no
// unit: it is verified as it streams, and fails before its last byte.
// Options.TrustUnframed skips units altogether (an operator who accepts
// S3's own integrity for these shapes).

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/wharf-s3/wharf/backend"
)

// UnitKind says what a verified unit's sha256 covers.
// Written to disk in the index file: append only (never reorder or reuse).
type UnitKind uint8

const (
	UnitObject UnitKind = 1 + iota // the whole object's stored bytes
	UnitSpan                       // object bytes [Off, Off+N): a giant frame's compressed span
	UnitExtent                     // tar-stream bytes [Off, Off+N) (object bytes for plain kinds)
)

// Unit is one checked span of a chunk object.
type Unit struct {
	Kind   UnitKind
	Off, N int64
	Sum    [32]byte
}

// VerifiedUnit is a unit checked against the object with ETag, as the
// persistent index stores it.
type VerifiedUnit struct {
	Chunk int32
	Unit
	ETag string
}

// unitState is a chunk's checked units and the checks in progress.
type unitState struct {
	mu     sync.Mutex
	done   map[Unit]bool
	checks map[Unit]*Memo[*blockSums]
	sums   sumsIndex // of done units whose bytes are object bytes (blocksums.go)
	// mismatched: units whose check mismatched once and whose second
	// read failed for another reason (checkUnitTwice)
	mismatched map[Unit]bool
}

// units returns the units whose checks make extent e (data at base)
// verified, or nil when no checksum covers it (ok false). The extent's own
// sum is the fallback of every kind; a chunk sum (or, for framed chunks,
// the frames' sums) is preferred where hashing it needs no decoding.
func (s *Set) units(ci int32, base int64, e Extent) (units []Unit, ok bool) {
	c := &s.chunks[ci]
	switch c.Kind {
	case Direct, PlainTar:
		if !e.HasSum && c.HasSum {
			return []Unit{{Kind: UnitObject, Sum: c.Sum}}, true
		}
	case StreamZstd:
		if c.HasSum {
			return []Unit{{Kind: UnitObject, Sum: c.Sum}}, true
		}
	case FramedZstd:
		if len(c.Frames) == 0 {
			if c.HasSum {
				return []Unit{{Kind: UnitObject, Sum: c.Sum}}, true
			}
			break
		}
		lo, hi, err := CoverFrames(c.Frames, base, max(base+e.Length, base+1))
		if err != nil {
			break
		}
		spansOK := true
		for i := lo; i <= hi; i++ {
			f := c.Frames[i]
			switch {
			case f.HasSum && !s.giant(f):
				// checked before use by the read path itself
			case f.HasSum:
				units = append(units, Unit{Kind: UnitSpan, Off: f.COff, N: f.CSize, Sum: f.Sum})
			default:
				spansOK = false
			}
		}
		if spansOK {
			return units, true
		}
	}
	if e.HasSum {
		return []Unit{{Kind: UnitExtent, Off: base, N: e.Length, Sum: e.Sum}}, true
	}
	return nil, false
}

// Verifiable reports whether some checksum covers extent e's bytes when
// they are read in full (a frame's, the chunk's or the extent's own); an
// extent none covers is served unverified (inspect and /-/archives list
// such files). base < 0 (offset unknown until a tar walk) counts as
// covered when every frame of the chunk has a checksum.
func (s *Set) Verifiable(e Extent) bool {
	c := &s.chunks[e.Chunk]
	if e.HasSum || c.HasSum {
		return true
	}
	if c.Kind != FramedZstd || len(c.Frames) == 0 {
		return false
	}
	fr := c.Frames
	if e.Off >= 512 {
		if lo, hi, err := CoverFrames(fr, e.Off, max(e.Off+e.Length, e.Off+1)); err == nil {
			fr = fr[lo : hi+1]
		}
	}
	for _, f := range fr {
		if !f.HasSum {
			return false
		}
	}
	return true
}

// ensureUnits checks each unit of chunk ci not yet checked (once: concurrent
// readers share the check).
func ensureUnits(ctx context.Context, s *Set, ci int32, units []Unit) error {
	rs := s.state(ci)
	err := ensureUnitsIn(ctx, s, ci, rs, units)
	if errors.Is(err, backend.ErrChanged) && s.state(ci) != rs {
		// The object was replaced since a data failure of it was
		// remembered, and the chunk's state was started afresh
		// (repinChanged): check the new object. A state that kept its
		// pin would only send the same failing If-Match GET again.
		err = ensureUnitsIn(ctx, s, ci, s.state(ci), units)
	}
	return err
}

func ensureUnitsIn(ctx context.Context, s *Set, ci int32, rs *chunkState, units []Unit) error {
	if rs.unpinned.Load() {
		return errUnpinned(s, ci)
	}
	for _, u := range units {
		rs.units.mu.Lock()
		if rs.units.done[u] {
			rs.units.mu.Unlock()
			continue
		}
		if rs.units.checks == nil {
			rs.units.checks = map[Unit]*Memo[*blockSums]{}
		}
		m := rs.units.checks[u]
		if m == nil {
			m = &Memo[*blockSums]{}
			rs.units.checks[u] = m
		}
		rs.units.mu.Unlock()
		sums, err := m.Do(ctx, func(ctx context.Context) (*blockSums, error) {
			return checkUnitTwice(ctx, s, ci, rs, u)
		}, s.keepFailure(rs))
		if err != nil {
			return err
		}
		if rs.ifMatch() == "" {
			// The store gave the check no ETag: nothing can tie a later
			// GET to the bytes just checked (no If-Match, no response to
			// compare), so a replaced object would be served as the
			// checked one. Refused, and remembered (the object is not
			// read whole again for every read).
			rs.unpinned.Store(true)
			return errUnpinned(s, ci)
		}
		rs.units.mu.Lock()
		if rs.units.done == nil {
			rs.units.done = map[Unit]bool{}
		}
		if sums != nil && !rs.units.done[u] {
			// (Once: the readers sharing the check all get these sums.)
			rs.units.sums.add(sums)
		}
		rs.units.done[u] = true
		delete(rs.units.checks, u)
		rs.units.mu.Unlock()
		if s.states[ci].Load() != rs {
			// The state was started afresh while this check ran (the
			// object was replaced, repinChanged): the check may have
			// read the old object, so it vouches for nothing now.
			return fmt.Errorf("checking %s of s3://%s/%s: the object was replaced during the check: %w", u.what(), s.bucket, s.chunks[ci].Key, backend.ErrChanged)
		}
	}
	return nil
}

// errUnpinned is the error of a read that needs a checked unit of chunk
// ci when the store reports no ETag for the object.
func errUnpinned(s *Set, ci int32) error {
	return fmt.Errorf("the store reported no ETag for s3://%s/%s, so a read of part of it cannot be pinned to the bytes checked whole (use a store that sends ETags, or --trust-unframed): %w",
		s.bucket, s.chunks[ci].Key, backend.ErrBadResponse)
}

// checkUnitTwice is checkUnit, read once more after a sha256 mismatch
// (as refetchFrame does for a frame): corruption in transit passes,
// corruption at rest fails twice, and only that is remembered (by the
// unit's Memo, and for a whole object by failStream). A mismatch whose
// second read failed for another reason (a 503, a reset, the request's
// end) is kept in rs, so the unit's next mismatch is the second one: a
// store that fails every re-read cannot have a corrupt span read whole
// again by every read.
func checkUnitTwice(ctx context.Context, s *Set, ci int32, rs *chunkState, u Unit) (*blockSums, error) {
	sums, err := checkUnit(ctx, s, ci, u)
	if !errors.Is(err, ErrChecksum) {
		return sums, err
	}
	if rs.units.mismatchedBefore(u) {
		return nil, s.failedTwice(rs, u, fmt.Errorf("read twice (the read before this one mismatched too): %w", err))
	}
	s.log.Warn().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).Str("unit", u.what()).Err(err).
		Msg("checksum mismatch of a span read whole: reading it again")
	sums, err = checkUnit(ctx, s, ci, u)
	switch {
	case errors.Is(err, ErrChecksum):
		err = s.failedTwice(rs, u, fmt.Errorf("read twice: %w", err))
	case err != nil:
		rs.units.markMismatched(u)
	}
	return sums, err
}

// failedTwice remembers a whole object's second mismatch (failStream;
// the unit's Memo keeps any unit's) and returns err.
func (s *Set) failedTwice(rs *chunkState, u Unit, err error) error {
	if u.Kind == UnitObject {
		rs.failStream(s.now(), err)
	}
	return err
}

// mismatchedBefore reports whether u's last check mismatched once and
// could not read it again.
func (us *unitState) mismatchedBefore(u Unit) bool {
	us.mu.Lock()
	defer us.mu.Unlock()
	return us.mismatched[u]
}

// markMismatched records that u's check mismatched once and could not
// read it again (bounded as the manifest's units are).
func (us *unitState) markMismatched(u Unit) {
	us.mu.Lock()
	defer us.mu.Unlock()
	if us.mismatched == nil {
		us.mismatched = map[Unit]bool{}
	}
	us.mismatched[u] = true
}

// checkUnit reads unit u of chunk ci whole, hashing it, through the
// planner's parts (compressed units are not decoded). For a unit of
// object bytes it returns the sums of its blocks too (nil when the
// cache's bound for them is full), which later reads of it are checked
// against (blocksums.go).
func checkUnit(ctx context.Context, s *Set, ci int32, u Unit) (*blockSums, error) {
	var r io.Reader
	var pr *partReader // the reader of object bytes, when the unit's are
	var size int64
	switch u.Kind {
	case UnitObject:
		var err error
		if size, err = s.objectSize(ctx, ci); err != nil {
			return nil, err
		}
		pr = s.newPartReader(ctx, ci, 0, size)
		defer pr.suspend()
		r = pr
	case UnitSpan:
		pr = s.newPartReader(ctx, ci, u.Off, u.Off+u.N)
		defer pr.suspend()
		r = pr
	default:
		src, err := s.Range(ctx, ci, u.Off, u.Off+u.N)
		if err != nil {
			return nil, err
		}
		if rs, ok := src.(*rangeSource); ok {
			pr = rs.r
		}
		sr := &segReader{src: src}
		defer sr.Close()
		r = sr
	}
	h := sha256.New()
	var bh *blockHasher
	off, end, objectBytes := s.unitObjectBytes(ci, u, size)
	if objectBytes && pr != nil {
		bh = s.newBlockHasher(off, end)
	}
	// The sums' charge is given back unless they are returned whole.
	kept := false
	defer func() {
		if !kept {
			s.dropSums(bh)
		}
	}()
	buf, err := s.unitBuffer(pr, bh)
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", u.what(), err)
	}
	if buf != nil {
		defer buf.Release()
	}
	n, err := hashUnit(r, h, bh, off, end, buf)
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", u.what(), err)
	}
	if u.Kind != UnitObject && n != u.N {
		return nil, fmt.Errorf("checking %s: %d bytes: %w", u.what(), n, ErrCorrupt)
	}
	var got [32]byte
	h.Sum(got[:0])
	if got != u.Sum {
		s.metrics.checksumFailure()
		return nil, fmt.Errorf("%s (read whole before serving any of it): sha256 mismatch: %w", u.what(), ErrChecksum)
	}
	s.log.Debug().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).Str("unit", u.what()).Int64("bytes", n).
		Msg("verified whole before its first ranged read")
	if bh == nil || bh.at != end {
		return nil, nil
	}
	kept = true
	bh.b.unitSum = u.Sum
	return bh.b, nil
}

// hashUnit reads r to its end into h and, when bh is set, tags each block
// of object bytes [off, end) (r's bytes from off on) whole, reading them a
// block at a time into one buffer (the bytes are read once): into when
// set (unitBuffer), else a segment's. It returns how many bytes r had.
func hashUnit(r io.Reader, h hash.Hash, bh *blockHasher, off, end int64, into *Buf) (int64, error) {
	var buf []byte
	if into != nil {
		buf = into.b
	} else {
		buf = make([]byte, segmentBytes)
	}
	step := int64(len(buf))
	var n int64
	for {
		want := step
		if bh != nil && off+n < end {
			lo, hi := bh.b.bounds(off + n)
			want = hi - lo
		}
		k, err := io.ReadFull(r, buf[:want])
		h.Write(buf[:k])
		if bh != nil && off+n < end && int64(k) == want {
			if berr := bh.block(buf[:k]); berr != nil {
				return n, berr
			}
		}
		n += int64(k)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return n, nil
		case err != nil:
			return n, err
		}
	}
}

// unitBuffer is the buffer a check tagging blocks larger than a segment
// reads them into (a part size that is no multiple of sumBlockBytes makes
// the block the part: up to 256 MiB), or nil for a segment's (hashUnit's
// own). It comes out of the read memory, taken with the check's first
// part as a stream decoder's memory is (pr.firstExtra: no wait for it
// while the part is held, nor the other way round).
func (s *Set) unitBuffer(pr *partReader, bh *blockHasher) (*Buf, error) {
	if bh == nil || bh.b.bs <= segmentBytes {
		return nil, nil
	}
	n := bh.b.bs
	pr.firstExtra, pr.extraTaken = bufSize(n), false
	_, _, err := pr.head()
	pr.firstExtra = 0
	if !pr.extraTaken {
		if err == nil {
			err = fmt.Errorf("the first part of object bytes %d-%d took no memory for the block buffer", pr.start, pr.end)
		}
		return nil, err
	}
	b := s.lim.bufReserved(pr.extraCl, n)
	if err != nil {
		b.Release()
		return nil, err
	}
	return b, nil
}

func (u Unit) what() string {
	switch u.Kind {
	case UnitObject:
		return "whole object"
	case UnitSpan:
		return fmt.Sprintf("frame at object bytes %d-%d", u.Off, u.Off+u.N)
	}
	return fmt.Sprintf("extent at %d (%d bytes)", u.Off, u.N)
}

// VerifiedUnits returns every unit checked so far, with the ETag each
// chunk is pinned to (what the persistent index stores).
func (s *Set) VerifiedUnits() []VerifiedUnit {
	var out []VerifiedUnit
	for i := range s.states {
		rs := s.states[i].Load()
		if rs == nil {
			continue
		}
		etag := rs.ifMatch()
		if etag == "" {
			continue
		}
		rs.units.mu.Lock()
		for u := range rs.units.done {
			out = append(out, VerifiedUnit{Chunk: int32(i), Unit: u, ETag: etag})
		}
		rs.units.mu.Unlock()
	}
	return out
}

// MarkVerified restores units checked in an earlier run (the persistent
// index): each chunk is pinned to the ETag the check saw, so its first
// GET already carries If-Match and a replaced object is refused. Units
// of a chunk whose pin disagrees (another ETag seen since) are ignored.
func (s *Set) MarkVerified(units []VerifiedUnit) {
	for _, v := range units {
		if v.Chunk < 0 || int(v.Chunk) >= len(s.chunks) || v.ETag == "" {
			continue
		}
		rs := s.state(v.Chunk)
		rs.mu.Lock()
		if rs.etag == "" {
			rs.etag = v.ETag
		}
		same := rs.etag == v.ETag
		rs.mu.Unlock()
		if !same {
			continue
		}
		rs.units.mu.Lock()
		if rs.units.done == nil {
			rs.units.done = map[Unit]bool{}
		}
		rs.units.done[v.Unit] = true
		rs.units.mu.Unlock()
	}
}
