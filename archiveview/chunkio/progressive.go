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
// the number of bytes decoded after each step. The decoder is capped at
// the window class it was charged for (class), and at out's length: a
// frame that decodes to more (a bomb) or to fewer bytes, or whose window
// is larger than class, is an error wrapping ErrCorrupt. Bytes passed to
// publish are never written again. The decode runs to the end of the
// frame whoever is waiting (the frame is cached whole).
func (c *FrameCache) decodeSteps(comp []byte, out *Buf, class int64, publish func(n int64)) error {
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
		publish(at)
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
