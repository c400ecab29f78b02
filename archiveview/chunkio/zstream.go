package chunkio

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Stream decoders' memory (charged to the budget while a stream lives).
const (
	defaultDecoderWindow = 8 << 20   // when the frame header cannot be read
	decoderOverhead      = 256 << 10 // block buffers beyond the window
	zstdHeaderMax        = 18        // magic, descriptor, window, dictionary id, content size
)

// zstream is a positioned stream decoder over a giant frame (frame >= 0) or
// a whole unframed zstd chunk (frame == -1).
//
// Its input is a partReader (parts in flight ahead of the decoder, hashed as
// the decoder consumes them). The decoder's window is charged to the memory
// budget for the stream's life (from the frame header's window size, taken
// together with the first part and the segment), and the stream holds one
// of the ReadLimits' decoder admissions; a parked stream keeps both, and
// parked streams are the first thing evicted when memory runs short or a
// new stream needs an admission.
type zstream struct {
	set   *Set
	ci    int32
	frame int
	dec   *zstd.Decoder
	src   *partReader
	pos   int64      // uncompressed bytes produced
	ulen  int64      // expected uncompressed length; -1 = unknown
	limit int64      // whole object: decoding past this many bytes fails; 0 = none
	mem   int64      // bytes reserved for the decoder
	seg   *Buf       // the segment reads decode into (zSource), charged with the decoder
	cl    *clientUse // the client mem is charged to
	adm   *clientUse // the client the decoder admission is counted for
}

// overLimit fails a whole-object decode that ran past the chunk's bound.
func (z *zstream) overLimit() error {
	if z.limit > 0 && z.pos > z.limit {
		err := fmt.Errorf("zstd stream decodes past %d bytes, more than its manifest entries can need: %w", z.limit, ErrCorrupt)
		z.set.state(z.ci).failStream(z.set.now(), err) // the object itself is at fault: remembered
		return err
	}
	return nil
}

func (s *Set) newZstream(ctx context.Context, ci int32, frame int) (*zstream, error) {
	c := &s.chunks[ci]
	z := &zstream{set: s, ci: ci, frame: frame, ulen: -1}
	var src *partReader
	if frame >= 0 {
		f := c.Frames[frame]
		src = s.newPartReader(ctx, ci, f.COff, f.COff+f.CSize)
		z.ulen = f.USize
		src.what = fmt.Sprintf("frame %d (object bytes %d-%d)", frame, f.COff, f.COff+f.CSize)
		if f.HasSum && !src.checkedAs(f.Sum) {
			src.h, src.want = sha256.New(), f.Sum
		}
	} else {
		if err := s.state(ci).streamFailure(); err != nil {
			return nil, err // this object failed its check before: not decoded again
		}
		size, err := s.objectSize(ctx, ci)
		if err != nil {
			return nil, err
		}
		src = s.newPartReader(ctx, ci, 0, size)
		src.what = "whole object"
		src.whole = true
		z.limit = c.MaxTar
		if c.HasSum && !src.checkedAs(c.Sum) {
			src.h, src.want = sha256.New(), c.Sum
		}
	}
	src.detached = true
	z.src = src
	// Admitted first, holding nothing; then the first part, the decoder's
	// window and the segment are taken at once (limits.go).
	l := s.lim
	adm, err := l.admitDecoder(ctx)
	if err != nil {
		return nil, err
	}
	z.adm = adm
	rs := s.state(ci)
	win := int64(defaultDecoderWindow)
	if w, ok := rs.windows.Load(frame); ok {
		win = w.(int64)
	}
	if z.ulen >= 0 {
		win = min(win, z.ulen)
	}
	seg := bufSize(segmentBytes)
	maxWin := int64(maxDecoderWindow) // the largest window a frame of the stream may declare: the one charged
	for {
		z.mem = decoderCost(win)
		if src.end <= src.start {
			cl, err := l.reserve(ctx, z.mem+seg, demand)
			if err != nil {
				l.endDecoder(adm)
				return nil, err
			}
			z.cl = cl
			break
		}
		src.firstExtra, src.extraTaken = z.mem+seg, false
		p, avail, err := src.head()
		if hdr := min(int64(zstdHeaderMax), src.end-src.pos); err == nil && avail < hdr {
			var got int64 // the whole frame header, so its window is read (not guessed)
			got, err = p.wait(src.ctx, min(src.pos-p.off+hdr, p.end-p.off))
			avail = p.off + got - src.pos
		}
		if err != nil {
			if src.extraTaken {
				l.unreserve(src.extraCl, z.mem+seg)
			}
			src.suspend()
			l.endDecoder(adm)
			return nil, err
		}
		z.cl = src.extraCl
		// The window the frame header declares (the default when it
		// cannot be read), learned for the next decoder of this stream.
		w, ok := zstdWindow(p.buf.b[src.pos-p.off : src.pos-p.off+min(avail, zstdHeaderMax)])
		if !ok {
			w = defaultDecoderWindow
		}
		// A later frame of the stream (a second frame in a giant frame's
		// span, any frame after the first of an unframed chunk, the first
		// real frame after a leading skippable one) declaring a larger
		// window than the one charged is refused: the decoder would
		// allocate it uncharged.
		maxWin = max(min(w, maxDecoderWindow), 1<<10)
		if z.ulen >= 0 {
			w = min(w, z.ulen)
		}
		rs.windows.Store(frame, w)
		if need := decoderCost(w) + seg; need > l.memory {
			// No wait can ever free this much: a clear refusal, not
			// ErrBusy's "retry soon".
			src.suspend()
			l.unreserve(z.cl, z.mem+seg)
			l.endDecoder(adm)
			return nil, fmt.Errorf("zstd frame declares a %d-byte window: its decoder needs %d bytes, more than the whole read memory budget (%d): %w", w, need, l.memory, ErrCorrupt)
		}
		if decoderCost(w) <= z.mem {
			break
		}
		more := decoderCost(w) - z.mem
		if cl, err := l.reserve(ctx, more, speculative); err == nil {
			if cl == z.cl {
				z.mem += more
				break
			}
			l.unreserve(cl, more) // (cannot happen: z.cl holds bytes, so its record lives)
		}
		// A larger window than guessed and no memory free for it now: give
		// everything back and take the whole at once (waiting, if need be,
		// holding nothing).
		src.suspend()
		l.unreserve(z.cl, z.mem+seg)
		win = w
	}
	z.seg = l.bufReserved(z.cl, segmentBytes)
	dec, err := s.cache.decoder(src, maxWin)
	if err != nil {
		src.suspend()
		z.seg.Release()
		l.unreserve(z.cl, z.mem)
		l.endDecoder(adm)
		return nil, err
	}
	z.dec = dec
	return z, nil
}

// decoderCost is what a stream decoder of a window of win bytes holds.
// Measured (TestBudgetStalledGiantReaders): about twice its window (the
// history and the frame buffer it decodes into), plus its block buffers.
func decoderCost(win int64) int64 {
	return 2*min(win, maxDecoderWindow) + decoderOverhead
}

// read decodes into p, mapping decoder failures to their cause.
func (z *zstream) read(p []byte) (int, error) {
	n, err := io.ReadFull(z.dec, p)
	z.pos += int64(n)
	if lerr := z.overLimit(); lerr != nil {
		return n, lerr
	}
	if err == nil {
		return n, nil
	}
	if z.src.failed != nil {
		return n, z.src.failed
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, fmt.Errorf("zstd stream ends at uncompressed byte %d, before %d: %w", z.pos, z.pos+int64(len(p)-n), ErrCorrupt)
	}
	return n, fmt.Errorf("zstd at uncompressed byte %d: %v: %w", z.pos, err, ErrCorrupt)
}

// atEnd confirms that the stream ends exactly here and that its checksum
// (if any) matched.
func (z *zstream) atEnd() error {
	var one [1]byte
	k, err := z.dec.Read(one[:])
	for k == 0 && err == nil {
		k, err = z.dec.Read(one[:])
	}
	if z.src.failed != nil {
		return z.src.failed
	}
	if k > 0 {
		return fmt.Errorf("zstd stream continues past its declared %d bytes: %w", z.pos, ErrCorrupt)
	}
	if err != io.EOF {
		return fmt.Errorf("zstd at end (%d bytes): %v: %w", z.pos, err, ErrCorrupt)
	}
	if !z.src.verified {
		if z.src.pos < z.src.end {
			return fmt.Errorf("zstd stream ended after %d of %d compressed bytes: %w", z.src.pos-z.src.start, z.src.end-z.src.start, ErrCorrupt)
		}
		if err := z.src.finish(); err != nil {
			return err
		}
	}
	return nil
}

// discard releases the stream; healthy decoders return to the pool.
func (z *zstream) discard(c *FrameCache, healthy bool) {
	z.src.suspend()
	if z.dec == nil {
		return
	}
	z.dec.Close() // stream decoders are not pooled: their history is the frame's window
	z.dec = nil
	l := z.set.lim
	l.unreserve(z.cl, z.mem)
	z.mem = 0
	z.seg.Release()
	z.seg = nil
	l.endDecoder(z.adm)
}

// zSource streams uncompressed bytes [u0,u1) of a zstream, continuing a
// parked decoder when one stopped at or before u0 (so sequential ranged
// reads cost O(size) decode work in total), and parking its decoder at u1.
// For a giant frame the segment holding the frame's last byte is released
// only after the frame's sha256 and decoded length were confirmed.
type zSource struct {
	set    *Set
	ctx    context.Context
	ci     int32
	frame  int
	u0, u1 int64
	z      *zstream
	mine   *promise // this read will park its decoder at u1 (parked.go)
}

func (zs *zSource) Next() ([]byte, *Buf, error) {
	s := zs.set
	if zs.z == nil {
		if zs.u0 >= zs.u1 {
			return nil, nil, io.EOF
		}
		if zs.frame < 0 || zs.u1 < s.chunks[zs.ci].Frames[zs.frame].USize {
			zs.mine = s.cache.promise(s, zs.ci, zs.frame, zs.u1) // a read that ends at u1 parks there
		}
		z, err := s.cache.sharedStream(zs.ctx, s, zs.ci, zs.frame, zs.u0, zs.mine)
		if err != nil {
			zs.keep()
			return nil, nil, err
		}
		if z == nil {
			if z, err = zs.set.newZstream(zs.ctx, zs.ci, zs.frame); err != nil {
				zs.keep()
				return nil, nil, err
			}
		}
		z.src.ctx = zs.ctx
		zs.z = z
		for z.pos < zs.u0 {
			n, err := z.read(z.seg.b[:min(int64(len(z.seg.b)), zs.u0-z.pos)])
			s.decoded.Add(int64(n))
			if err != nil {
				zs.fail()
				return nil, nil, err
			}
		}
	}
	z := zs.z
	if z.pos >= zs.u1 {
		return nil, nil, io.EOF
	}
	n, err := z.read(z.seg.b[:min(int64(len(z.seg.b)), zs.u1-z.pos)])
	s.decoded.Add(int64(n))
	if err == nil && z.ulen >= 0 && z.pos == z.ulen {
		err = z.atEnd()
	}
	if err != nil {
		zs.fail()
		return nil, nil, err
	}
	return z.seg.b[:n], nil, nil
}

func (zs *zSource) fail() {
	if zs.z != nil {
		zs.z.discard(zs.set.cache, false)
		zs.z = nil
	}
	zs.keep()
}

// keep fulfils the read's promise (after its decoder was parked or
// dropped): whoever waits on it looks again.
func (zs *zSource) keep() {
	zs.set.cache.keep(zs.mine)
	zs.mine = nil
}

func (zs *zSource) Close() {
	s := zs.set
	if z := zs.z; z != nil {
		zs.z = nil
		if z.ulen < 0 || z.pos < z.ulen {
			// A read that got all it asked for keeps its parts ahead:
			// the client's next sequential range continues from them.
			// One abandoned midway drops them.
			s.cache.park(s, z, z.pos == zs.u1)
		} else {
			z.discard(s.cache, true)
		}
	}
	zs.keep()
}

// zstdHeader parses a zstd frame header (RFC 8878 3.1.1.1): the window
// size it declares (the Window_Descriptor of a multi-segment frame, the
// content size of a single-segment one) and its content size, if declared.
// ok is false when hdr does not start a valid frame header or is shorter
// than the whole header.
func zstdHeader(hdr []byte) (window, content int64, hasContent, ok bool) {
	if len(hdr) < 5 || hdr[0] != 0x28 || hdr[1] != 0xB5 || hdr[2] != 0x2F || hdr[3] != 0xFD {
		return 0, 0, false, false
	}
	fhd := hdr[4]
	if fhd&0x08 != 0 {
		return 0, 0, false, false // reserved bit: not a valid frame
	}
	single := fhd&0x20 != 0
	flag := fhd >> 6
	at := 5
	if !single {
		wd := hdr[at:]
		if len(wd) == 0 {
			return 0, 0, false, false
		}
		log := 10 + int64(wd[0]>>3)
		base := int64(1) << log
		window = base + base/8*int64(wd[0]&7)
		at++
	}
	at += [4]int{0, 1, 2, 4}[fhd&3] // dictionary id
	size := [4]int{0, 2, 4, 8}[flag]
	if flag == 0 && single {
		size = 1
	}
	if len(hdr) < at+size {
		return 0, 0, false, false
	}
	if size > 0 {
		var v uint64
		for i := size - 1; i >= 0; i-- {
			v = v<<8 | uint64(hdr[at+i])
		}
		if size == 2 {
			v += 256
		}
		if v > 1<<62 {
			return 0, 0, false, false
		}
		content, hasContent = int64(v), true
	}
	if single {
		window = content
	}
	return window, content, hasContent, true
}

// zstdContentSize returns the content size a zstd frame header declares,
// if it declares one.
func zstdContentSize(hdr []byte) (int64, bool) {
	_, c, has, ok := zstdHeader(hdr)
	return c, ok && has
}

// zstdWindow returns the window size a zstd frame header declares.
func zstdWindow(hdr []byte) (int64, bool) {
	w, _, _, ok := zstdHeader(hdr)
	return w, ok
}
