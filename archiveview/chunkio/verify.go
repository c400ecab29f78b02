package chunkio

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sort"
)

// VerifyChunk checks chunk ci whole, reading it once and keeping nothing:
// every frame of a framed chunk (sha256 of the compressed bytes and the
// decoded length, in object order, one GET per coalesced run), the
// whole-object sha256 of an unframed chunk that has one (and that an
// unframed zstd chunk decodes). Each problem found is passed to problem;
// checked is false for a chunk with nothing to check (a plain object
// without a sha256), and frames counts the frames fetched.
func (s *Set) VerifyChunk(ctx context.Context, ci int32, problem func(detail string)) (checked bool, frames int64) {
	c := &s.chunks[ci]
	switch {
	case c.Kind == FramedZstd && len(c.Frames) > 0:
		return true, s.verifyFrames(ctx, ci, problem)
	case c.Kind == StreamZstd || c.Kind == FramedZstd:
		if err := s.verifyStream(ctx, ci); err != nil {
			problem(err.Error())
		}
		return true, 0
	case c.HasSum:
		if err := s.verifyObject(ctx, ci); err != nil {
			problem(err.Error())
		}
		return true, 0
	}
	return false, 0
}

// verifyFrames streams chunk ci once (frames in object order, one GET per
// maxRunBytes run), checking each frame's sha256 and decoded length without
// keeping its bytes.
func (s *Set) verifyFrames(ctx context.Context, ci int32, problem func(string)) (frames int64) {
	c := &s.chunks[ci]
	order := make([]int, 0, len(c.Frames))
	for i, f := range c.Frames {
		if err := framePlausible(i, f); err != nil {
			frames++
			problem(err.Error())
			continue
		}
		order = append(order, i)
	}
	sort.Slice(order, func(x, y int) bool { return c.Frames[order[x]].COff < c.Frames[order[y]].COff })
	for at := 0; at < len(order); {
		// one run: frames at..end-1 in object order
		end, runBytes := at+1, c.Frames[order[at]].CSize
		for end < len(order) {
			p, n := c.Frames[order[end-1]], c.Frames[order[end]]
			gap := n.COff - (p.COff + p.CSize)
			if gap < 0 || gap > maxRunGap || runBytes+gap+n.CSize > maxRunBytes {
				break
			}
			runBytes += gap + n.CSize
			end++
		}
		first, last := c.Frames[order[at]], c.Frames[order[end-1]]
		start, stop := first.COff, last.COff+last.CSize
		body, err := s.rangeGet(ctx, ci, start, stop-start)
		if err != nil {
			problem(fmt.Sprintf("frames at object bytes %d-%d: %v", start, stop, err))
			at = end
			continue
		}
		pos := start
		for _, i := range order[at:end] {
			f := c.Frames[i]
			if gap := f.COff - pos; gap > 0 {
				if _, err := io.CopyN(io.Discard, body, gap); err != nil {
					problem(fmt.Sprintf("frame %d: %v", i, shortBody(err)))
					break
				}
			}
			pos = f.COff + f.CSize
			frames++
			s.metrics.frameFetched()
			if err := s.verifyFrameStream(io.LimitReader(body, f.CSize), i, f); err != nil {
				problem(err.Error())
				if errors.Is(err, errBody) {
					break
				}
			}
		}
		body.Close()
		at = end
	}
	return frames
}

var errBody = errors.New("body")

// verifyFrameStream decodes one frame from r (exactly its compressed
// bytes), hashing the compressed bytes as they pass.
func (s *Set) verifyFrameStream(r io.Reader, i int, f Frame) error {
	h := sha256.New()
	cr := &countReader{r: io.TeeReader(r, h)}
	dec, err := s.cache.decoder(cr)
	if err != nil {
		return err
	}
	n, derr := io.Copy(io.Discard, dec)
	// Drain what the decoder did not consume so the hash covers the frame.
	rest, rerr := io.Copy(io.Discard, cr)
	if derr != nil {
		dec.Close()
	} else {
		s.cache.putDecoder(dec)
	}
	if rerr != nil {
		return fmt.Errorf("frame %d: reading: %v: %w", i, rerr, errBody)
	}
	if cr.n != f.CSize {
		return fmt.Errorf("frame %d: body ended after %d of %d bytes: %w", i, cr.n, f.CSize, errBody)
	}
	var got [32]byte
	h.Sum(got[:0])
	if f.HasSum && got != f.Sum {
		s.metrics.checksumFailure()
		return fmt.Errorf("frame %d (object bytes %d-%d): sha256 mismatch: %w", i, f.COff, f.COff+f.CSize, ErrChecksum)
	}
	if derr != nil {
		return fmt.Errorf("frame %d: zstd: %v: %w", i, derr, ErrCorrupt)
	}
	s.metrics.frameDecoded()
	if n != f.USize {
		return fmt.Errorf("frame %d decodes to %d bytes, manifest says %d: %w", i, n, f.USize, ErrCorrupt)
	}
	if rest > 0 {
		return fmt.Errorf("frame %d: %d bytes after the zstd frame: %w", i, rest, ErrCorrupt)
	}
	return nil
}

// verifyStream decodes an unframed zstd chunk to its end, checking the
// whole-object sha256 when the manifest has one.
func (s *Set) verifyStream(ctx context.Context, ci int32) error {
	z, err := s.newZstream(ctx, ci, -1)
	if err != nil {
		return err
	}
	healthy := false
	defer func() { z.discard(s.cache, healthy) }()
	if _, err := io.Copy(io.Discard, &zReader{z: z, set: s}); err != nil {
		return err
	}
	if !z.src.verified {
		if err := z.src.finish(); err != nil {
			return err
		}
	}
	healthy = true
	return nil
}

// verifyObject hashes a whole plain object against the chunk's sha256.
func (s *Set) verifyObject(ctx context.Context, ci int32) error {
	c := &s.chunks[ci]
	size, err := s.objectSize(ctx, ci)
	if err != nil {
		return err
	}
	if size == 0 {
		if sha256.Sum256(nil) != c.Sum {
			s.metrics.checksumFailure()
			return fmt.Errorf("whole object sha256 mismatch: %w", ErrChecksum)
		}
		return nil
	}
	body, err := s.rangeGet(ctx, ci, 0, size)
	if err != nil {
		return err
	}
	defer body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, body); err != nil {
		return err
	}
	var got [32]byte
	h.Sum(got[:0])
	if got != c.Sum {
		s.metrics.checksumFailure()
		return fmt.Errorf("whole object sha256 mismatch: %w", ErrChecksum)
	}
	return nil
}
