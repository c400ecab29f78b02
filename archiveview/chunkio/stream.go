package chunkio

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
)

// partReader reads object bytes [start, end) of chunk ci in order, keeping
// a window of parts (plan.go) in flight ahead of its position: the
// sequential reads of the read path that have no frame table to follow
// (plain tar members, direct objects, giant frames and unframed zstd
// decoded as streams, whole-object verification). The first part is a
// demand read; the rest are speculative, so a reader that stalls holds at
// most its window and its fair share of the memory budget.
//
// When asked (h != nil) it hashes every byte it delivers and compares the
// sum with want when the last byte has been delivered; a mismatch fails the
// read that delivered that byte. suspend drops the parts in flight (no
// connection, no buffer is held) and the next read resumes where it
// stopped, under the context then in r.ctx. pause keeps them (a parked
// decoder whose read ended where its client asked: the client's next
// sequential range continues from the parts already fetched; see park).
//
// A detached reader's parts live past the request that launched them
// (context.WithoutCancel of r.ctx: its values, not its end); they stop
// when the reader is suspended. Waits always follow r.ctx.
type partReader struct {
	set        *Set
	ci         int32
	ctx        context.Context
	start, end int64
	pos        int64   // next byte to deliver
	queue      []*part // launched parts, in order; queue[0] holds pos
	planned    int64   // end of the last launched part
	held       int64   // bytes the queued parts hold
	win        window
	slots      chan struct{} // GETs in flight for this reader (StreamParts)
	counted    bool          // counted as a stream of the budget
	detached   bool          // parts outlive r.ctx (stream decoders, which park)
	firstExtra int64         // bytes the next demand part takes with its own (a stream decoder's)
	extraTaken bool          // firstExtra was taken: the caller owns those bytes
	extraCl    *clientUse    // the client they are charged to

	h        hash.Hash
	want     [32]byte
	what     string
	whole    bool // the whole unframed object: a mismatch is remembered
	verified bool
	failed   error

	// blocks, when set, are the sums of a checked unit holding [start,
	// end): parts are planned from the block holding start to the one
	// holding end-1 (planEnd), and no byte of a block is handed out
	// before the block matched its sum (blocksums.go); refetched says the
	// block at refetchLo mismatched and is being read once more (each
	// block gets one re-read: a second mismatch of it fails the read).
	blocks    *blockSums
	planEnd   int64
	refetched bool
	refetchLo int64
}

func (s *Set) newPartReader(ctx context.Context, ci int32, start, end int64) *partReader {
	r := &partReader{set: s, ci: ci, ctx: ctx, start: start, end: end, pos: start, planned: start, planEnd: end,
		win: newWindow(s.lim.streamParts), slots: make(chan struct{}, s.lim.streamParts)}
	if b := s.sumsFor(ci, start, end); b != nil {
		r.blocks = b
		r.planned = r.planFrom(start)
		_, r.planEnd = b.bounds(end - 1)
	}
	return r
}

// checkedAs reports whether every byte the reader hands out is checked
// against the tags of a unit whose check matched sum: its own sha256 of
// the bytes would then vouch for nothing more (a stream decoder's
// whole-stream sum is then not taken).
func (r *partReader) checkedAs(sum [32]byte) bool {
	b := r.blocks
	return b != nil && b.unitSum == sum && b.off <= r.start && r.end <= b.end && b.complete()
}

// planFrom is where parts that must deliver byte at start from are
// planned from: the start of its block when the reader checks blocks.
func (r *partReader) planFrom(at int64) int64 {
	if r.blocks == nil {
		return at
	}
	lo, _ := r.blocks.bounds(at)
	return lo
}

// fill makes sure the part holding pos is launched (a demand read) and
// tops the window up with speculative parts.
func (r *partReader) fill() error {
	if !r.counted {
		r.counted = true
		r.set.lim.streamStarted()
	}
	for len(r.queue) < r.win.n && r.planned < r.planEnd {
		mode, extra := speculative, int64(0)
		if len(r.queue) == 0 {
			mode, extra = demand, r.firstExtra
		} else if len(r.slots) == cap(r.slots) {
			// Every GET slot of the stream is held by its parts ahead: a
			// speculative part does not wait for one (the reader may have
			// bytes to read meanwhile). Only this reader takes slots, so
			// one free now is free at launch.
			return nil
		}
		plan := nextRange(r.planned, r.planEnd, r.set.lim.partSize)
		var life context.Context
		if r.detached {
			life = context.WithoutCancel(r.ctx)
		}
		p, err := r.set.launch(r.ctx, life, r.ci, plan, waysFor(r.set.lim.streamParts, r.win.n), extra, r.held, mode, r.slots)
		if err != nil {
			return err
		}
		if p == nil {
			return nil // no room to read ahead now
		}
		if extra > 0 {
			r.firstExtra, r.extraTaken, r.extraCl = 0, true, p.cl
		}
		r.queue = append(r.queue, p)
		r.planned = plan.end
		r.held += bufSize(plan.size())
	}
	return nil
}

// head waits for the bytes at pos and returns the part holding them and
// how many bytes from pos are available.
func (r *partReader) head() (*part, int64, error) {
	if err := r.fill(); err != nil {
		return nil, 0, err
	}
	p := r.queue[0]
	need := r.pos - p.off + 1
	var blo, bhi int64
	if r.blocks != nil {
		blo, bhi = r.blocks.bounds(r.pos)
		if blo < p.off || bhi > p.end {
			return nil, 0, fmt.Errorf("object bytes %d-%d: block %d-%d not within one part: %w", p.off, p.end, blo, bhi, ErrCorrupt)
		}
		need = bhi - p.off // the whole block, checked before any of it is used
	}
	if p.ready() < need {
		r.win.starved() // the reader waits for data: more parts in flight would help
		if err := r.fill(); err != nil {
			return nil, 0, err
		}
	}
	avail, err := p.wait(r.ctx, need)
	if err != nil {
		return nil, 0, err
	}
	if r.blocks != nil {
		if p.checked <= r.pos {
			if !r.blocks.matches(blo, p.buf.b[blo-p.off:bhi-p.off]) {
				return r.blockMismatch(blo, bhi)
			}
			p.checked = bhi
		}
		avail = p.checked - p.off
	}
	// A part may run past end, to the end of end's block.
	return p, min(p.off+avail, r.end) - r.pos, nil
}

// blockMismatch handles a block whose bytes do not match the sum its
// unit's check took: read once more (a body damaged in transit), and a
// second mismatch of the same block fails the read. Each block of a long
// read gets its own re-read (at most twice the block's bytes fetched), as
// each frame does.
func (r *partReader) blockMismatch(lo, hi int64) (*part, int64, error) {
	r.set.metrics.checksumFailure()
	c := &r.set.chunks[r.ci]
	if r.refetched && r.refetchLo == lo {
		return nil, 0, fmt.Errorf("s3://%s/%s object bytes %d-%d: sha256 mismatch with the check of the span they belong to, read twice: %w", r.set.bucket, c.Key, lo, hi, ErrChecksum)
	}
	r.refetched, r.refetchLo = true, lo
	r.set.log.Warn().Str("archive", r.set.name).Str("chunk", c.Key).Int64("from", lo).Int64("to", hi).
		Msg("object bytes do not match the sum their span's check took: reading them again")
	r.suspend()
	return r.head()
}

// advance records that n bytes at pos were delivered (hashing them) and
// retires the head part when it is used up.
func (r *partReader) advance(p *part, n int64) {
	if r.h != nil {
		r.h.Write(p.buf.b[r.pos-p.off : r.pos-p.off+n])
	}
	r.pos += n
	if r.pos == p.end {
		r.queue = r.queue[1:]
		r.held -= bufSize(p.end - p.off)
		p.close()
	}
}

// Read implements io.Reader (bytes are copied out of the parts).
func (r *partReader) Read(b []byte) (int, error) {
	if r.failed != nil {
		return 0, r.failed
	}
	if r.pos >= r.end {
		return 0, io.EOF
	}
	p, avail, err := r.head()
	if err != nil {
		r.failed = err
		return 0, err
	}
	n := int64(copy(b, p.buf.b[r.pos-p.off:r.pos-p.off+min(avail, int64(len(b)))]))
	r.advance(p, n)
	if r.pos == r.end {
		if err := r.finish(); err != nil {
			return int(n), err
		}
	}
	return int(n), nil
}

// next returns the next available bytes as a slice of a part's buffer
// (with a reference for the caller), at most max bytes.
func (r *partReader) next(limit int64) ([]byte, *Buf, error) {
	if r.failed != nil {
		return nil, nil, r.failed
	}
	if r.pos >= r.end {
		return nil, nil, io.EOF
	}
	p, avail, err := r.head()
	if err != nil {
		r.failed = err
		return nil, nil, err
	}
	n := min(avail, limit)
	seg := p.buf.b[r.pos-p.off : r.pos-p.off+n]
	buf := p.buf
	buf.retain()
	r.advance(p, n)
	return seg, buf, nil
}

// finish checks the sum once every byte was delivered.
func (r *partReader) finish() error {
	r.suspend()
	if r.h != nil && !r.verified {
		var got [32]byte
		r.h.Sum(got[:0])
		if got != r.want {
			r.set.metrics.checksumFailure()
			err := fmt.Errorf("%s: sha256 mismatch: %w", r.what, ErrChecksum)
			if rs := r.set.state(r.ci); r.whole && rs.wholeMismatch.Swap(true) {
				// A second whole-object mismatch: corruption at rest,
				// remembered. The first may have been a body corrupted
				// in transit; the next decode reads the object again.
				rs.failStream(r.set.now(), err)
			}
			r.failed = err
			return err
		}
	}
	r.verified = true
	return nil
}

// suspend drops the parts in flight; the next read relaunches from pos.
func (r *partReader) suspend() {
	for _, p := range r.queue {
		p.close()
	}
	r.queue = nil
	r.planned = r.planFrom(r.pos)
	r.held = 0
	r.win = newWindow(r.win.max)
	r.pause()
}

// pause stops counting the reader as a stream of the budget and keeps its
// parts (those in flight finish; a detached reader's parts do not stop
// with the request). Their memory stays charged until the reader is
// suspended: a paused reader's decoder is parked, and parked decoders are
// evicted when memory is short (evictForMemory).
func (r *partReader) pause() {
	if r.counted {
		r.counted = false
		r.set.lim.streamEnded()
	}
}

// rangeSource streams object bytes [pos,end) of a plain tar or direct
// object as slices of its parts (no copy).
type rangeSource struct {
	r *partReader
}

func (rs *rangeSource) Next() ([]byte, *Buf, error) { return rs.r.next(segmentBytes) }

func (rs *rangeSource) Close() { rs.r.suspend() }

// Seek moves the position to object byte off (whence io.SeekStart or
// io.SeekCurrent; within [start, end]). Parts wholly before the new
// position are dropped, and a position past the parts in flight starts
// the reading there afresh. A hashed reader cannot seek.
func (r *partReader) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekCurrent {
		off += r.pos
	} else if whence != io.SeekStart {
		return r.pos, fmt.Errorf("partReader: whence %d", whence)
	}
	if r.h != nil {
		return r.pos, errors.New("partReader: seek on a hashed reader")
	}
	if off < r.start || off > r.end {
		return r.pos, fmt.Errorf("partReader: seek to %d outside [%d,%d]", off, r.start, r.end)
	}
	if off < r.pos || off >= r.planned {
		r.suspend()
		r.pos, r.planned = off, r.planFrom(off)
		return off, nil
	}
	for len(r.queue) > 0 && r.queue[0].end <= off {
		p := r.queue[0]
		r.queue = r.queue[1:]
		r.held -= bufSize(p.end - p.off)
		p.close()
	}
	r.pos = off
	return off, nil
}
