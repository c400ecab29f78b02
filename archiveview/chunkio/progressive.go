package chunkio

// progressive.go: a verified frame is decoded into its cache buffer in
// steps, and each step is published on the frame's flight, so a reader
// waiting for the frame gets its range as soon as the decode has passed
// it rather than when the whole frame is decoded (framecache.go:
// waitPrefix). Only frames whose sha256 was checked before the decode
// started are published this way: every published byte is a prefix of
// the decode of bytes that passed their checksum. A frame without a
// checksum is decoded whole (decodeInto) and served only then, after its
// length check.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

const (
	// progressiveMin: frames that decode to fewer bytes are decoded in
	// one call (decodeInto); their whole decode takes well under a
	// millisecond.
	progressiveMin = 1 << 20
	// progressStep is how many decoded bytes a step publishes.
	progressStep = 256 << 10
	// ringClassStep rounds the window a progressive decoder is made for,
	// so pooled decoders of one class hold rings of at most that class.
	ringClassStep = 1 << 20
	// maxBlock is the largest zstd block (RFC 8878 3.1.1.2.4).
	maxBlock = 128 << 10
)

// errStopped: a decode started before its frame's sha256 was known was
// stopped because the sha256 did not match (earlyDecode).
var errStopped = errors.New("decode stopped: the frame failed its sha256")

// streamDecoders pools the stream decoders progressive decodes use, one
// sync.Pool per window class: a stream decoder keeps its history ring
// (its window plus two blocks) between uses, and one from a class's pool
// never holds a ring larger than that class. Idle pooled decoders are not
// charged to the budget (like idle pooled buffers: garbage the runtime
// may collect); a decoder in use is (progressiveCost).
type streamDecoders struct {
	mu    sync.Mutex
	pools map[int64]*sync.Pool
}

func (p *streamDecoders) pool(class int64) *sync.Pool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pools == nil {
		p.pools = make(map[int64]*sync.Pool)
	}
	sp := p.pools[class]
	if sp == nil {
		sp = &sync.Pool{}
		p.pools[class] = sp
	}
	return sp
}

// progressiveClass reports whether the frame comp (decoding to usize
// bytes) is decoded in steps and the window class its decoder needs: a
// frame of at least progressiveMin bytes whose header declares a window
// no larger than the frame (a larger one would cost more memory than the
// frame itself: such a frame is decoded whole, into its buffer alone).
func progressiveClass(comp []byte, usize int64) (int64, bool) {
	if usize < progressiveMin {
		return 0, false
	}
	w, ok := zstdWindow(comp[:min(len(comp), zstdHeaderMax)])
	if !ok || w <= 0 || w > usize {
		return 0, false
	}
	return (w + ringClassStep - 1) / ringClassStep * ringClassStep, true
}

// progressiveCost is the memory a progressive decoder of window class
// class holds while it decodes: its history ring (the window plus two
// blocks and their copy overrun, as klauspost/compress's stream decoder
// sizes it) and its block buffers.
func progressiveCost(class int64) int64 {
	return class + 2*(min(class, maxBlock)+64) + decoderOverhead
}

// decodeSteps decodes the one zstd frame held in comp into out (exactly
// len(out.b) bytes), progressStep bytes at a time, calling publish with
// the number of bytes decoded after each step; a publish that returns
// false stops the decode (errStopped). The decoder is capped at
// the window class it was charged for (class), and at out's length: a
// frame that decodes to more (a bomb) or to fewer bytes, or whose window
// is larger than class, is an error wrapping ErrCorrupt. Bytes passed to
// publish are never written again. The decode runs to the end of the
// frame whoever is waiting (the frame is cached whole).
func (c *FrameCache) decodeSteps(comp []byte, out *Buf, class int64, publish func(n int64) bool) error {
	usize := int64(len(out.b))
	sp := c.sdecs.pool(class)
	var d *zstd.Decoder
	if v := sp.Get(); v != nil {
		d = v.(*zstd.Decoder)
	} else {
		var err error
		if d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeBuffersBelow(0)); err != nil {
			return fmt.Errorf("zstd decoder: %w", err)
		}
	}
	defer func() {
		_ = d.Reset(nil) // drops its reference to comp
		sp.Put(d)
	}()
	if err := d.ResetWithOptions(bytes.NewReader(comp),
		zstd.WithDecoderMaxMemory(uint64(usize)), zstd.WithDecoderMaxWindow(uint64(class))); err != nil {
		return fmt.Errorf("zstd decoder: %w", err)
	}
	for at := int64(0); at < usize; {
		end := min(at+progressStep, usize)
		n, err := io.ReadFull(d, out.b[at:end])
		at += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("frame decodes to %d bytes, manifest says %d: %w", at, usize, ErrCorrupt)
			}
			return fmt.Errorf("zstd (frame of %d bytes): %v: %w", usize, err, ErrCorrupt)
		}
		// The last step is not published: a reader that needs the
		// frame's end waits for the frame's verdict (its exact length
		// and zstd checksum, checked below and at the last block).
		if at < usize && !publish(at) {
			return errStopped
		}
		if c.stepHook != nil {
			c.stepHook(at)
		}
	}
	// The frame must end exactly here.
	var probe [1]byte
	switch n, err := d.Read(probe[:]); {
	case n > 0:
		return fmt.Errorf("frame decodes to more than the %d bytes the manifest says: %w", usize, ErrCorrupt)
	case err != io.EOF:
		return fmt.Errorf("zstd (frame of %d bytes): %v: %w", usize, err, ErrCorrupt)
	}
	return nil
}

// earlyDecode is the decode of one frame with a sha256, started as soon
// as all its compressed bytes have arrived, while the part's worker is
// still hashing them (sha256 is sequential: the bytes of the sub-ranges
// after the first arrive together and are hashed after the transfer,
// about 5 ms for a 16 MiB frame on this class of machine). Nothing it
// decodes is published before the sha256 matched (verify): the decode
// runs into the frame's own buffer, which no reader can see until then.
// A mismatch stops it (abort) and the buffer is dropped unseen. The
// decoder works on the bytes as they arrived, before they are known to
// be right: it is the same decoder that decodes giant frames and
// unframed chunks as they stream in, capped at the frame's decoded size
// and at a window charged to the budget.
type earlyDecode struct {
	fl   *flight
	out  *Buf
	done chan struct{}

	// Set by the decode goroutine before done is closed.
	ran bool  // the decode ran (else the caller decodes the frame itself)
	err error // the decode's error, if it ran

	mu       sync.Mutex
	verified bool
	aborted  bool
	decoded  int64
}

// startEarlyDecode starts the early decode of frame k (object bytes
// comp, the part's slice) of part p into out once all its bytes have
// arrived, if the frame is decoded in steps (progressiveClass) and the
// decoder's window can be charged without waiting; it returns nil when
// the frame is not one to decode early.
func startEarlyDecode(ctx context.Context, s *Set, p *part, k int, out *Buf, fl *flight) *earlyDecode {
	f := s.chunks[p.ci].Frames[k]
	if !f.HasSum || fl == nil || f.USize < progressiveMin {
		return nil
	}
	ed := &earlyDecode{fl: fl, out: out, done: make(chan struct{})}
	go ed.run(ctx, s, p, f)
	return ed
}

func (ed *earlyDecode) run(ctx context.Context, s *Set, p *part, f Frame) {
	defer close(ed.done)
	if _, err := p.wait(ctx, f.COff+f.CSize-p.off); err != nil {
		return // the worker's hash sees the failure
	}
	comp := p.buf.b[f.COff-p.off : f.COff+f.CSize-p.off]
	class, ok := progressiveClass(comp, f.USize)
	if !ok || ed.stopped() {
		return
	}
	cost := progressiveCost(class)
	cl, err := s.lim.reserve(ctx, cost, speculative)
	if err != nil {
		return
	}
	defer s.lim.unreserve(cl, cost)
	if err := decodeSlot(ctx, s); err != nil {
		return
	}
	defer func() { <-s.cache.decodeSem }()
	ed.ran = true
	ed.err = s.cache.decodeSteps(comp, ed.out, class, ed.step)
}

func (ed *earlyDecode) stopped() bool {
	ed.mu.Lock()
	defer ed.mu.Unlock()
	return ed.aborted
}

// step records a decode step and publishes it if the frame is verified.
func (ed *earlyDecode) step(n int64) bool {
	ed.mu.Lock()
	defer ed.mu.Unlock()
	if ed.aborted {
		return false
	}
	ed.decoded = n
	if ed.verified {
		ed.fl.publish(ed.out, n)
	}
	return true
}

// verify marks the frame's sha256 as matched: what is decoded so far is
// published, and every later step as it is done.
func (ed *earlyDecode) verify() {
	ed.mu.Lock()
	defer ed.mu.Unlock()
	ed.verified = true
	if ed.decoded > 0 {
		ed.fl.publish(ed.out, ed.decoded)
	}
}

// abort stops the decode at its next step; nothing was published.
func (ed *earlyDecode) abort() {
	ed.mu.Lock()
	ed.aborted = true
	ed.mu.Unlock()
}

// finish settles the early decode of frame i (compressed bytes comp,
// whose sha256 the worker computed: sum) once the hash is done: a
// mismatch stops the decode and drops out unseen (the error wraps
// ErrChecksum); a match publishes the decode's progress and waits for
// its end. If the decode did not run (no memory for its window, not a
// frame decoded in steps), the frame is checked and decoded here
// (checkFrameFlight). It returns out, decoded and length-checked, or
// the error (out released).
func (ed *earlyDecode) finish(ctx context.Context, s *Set, ci int32, i int, comp []byte, sum [32]byte) (*Buf, error) {
	fr := &s.chunks[ci].Frames[i]
	if sum != fr.Sum {
		ed.abort()
		<-ed.done
		ed.out.Release()
		return nil, sumMismatch(s, i, fr)
	}
	ed.verify()
	<-ed.done
	if !ed.ran {
		if err := decodeSlot(ctx, s); err != nil {
			ed.out.Release()
			return nil, fmt.Errorf("frame %d: %w", i, err)
		}
		defer func() { <-s.cache.decodeSem }()
		return checkFrameFlight(ctx, s, ci, i, comp, &sum, ed.out, ed.fl)
	}
	if ed.err != nil {
		ed.fl.unpublish() // before out's reference is dropped
		ed.out.Release()
		return nil, fmt.Errorf("frame %d (object bytes %d-%d): %w", i, fr.COff, fr.COff+fr.CSize, ed.err)
	}
	s.metrics.frameDecoded()
	return ed.out, nil
}
