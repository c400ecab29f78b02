package chunkio

import (
	"context"
	"crypto/sha256"
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
		return true, verifyFrames(ctx, s, ci, problem)
	case c.Kind == StreamZstd || c.Kind == FramedZstd:
		if err := verifyStream(ctx, s, ci); err != nil {
			problem(err.Error())
		}
		return true, 0
	case c.HasSum:
		if err := verifyObject(ctx, s, ci); err != nil {
			problem(err.Error())
		}
		return true, 0
	}
	return false, 0
}

// verifyFrames reads chunk ci once, in object order, as the planner cuts
// it (adjacent frames merged up to the part size, up to StreamParts parts
// in flight), checking each frame's sha256 and decoded length without
// keeping its bytes. Problems are reported in object order.
func verifyFrames(ctx context.Context, s *Set, ci int32, problem func(string)) (frames int64) {
	c := &s.chunks[ci]
	fr := c.Frames
	order := make([]int, 0, len(fr))
	for i, f := range fr {
		if err := framePlausible(i, f); err != nil {
			frames++
			problem(err.Error())
			continue
		}
		order = append(order, i)
	}
	sort.Slice(order, func(x, y int) bool { return fr[order[x]].COff < fr[order[y]].COff })
	type job struct {
		msgs chan []string
	}
	var queue []job
	slots := make(chan struct{}, s.lim.streamParts)
	report := func(j job) {
		for _, m := range <-j.msgs {
			problem(m)
		}
	}
	for at := 0; at < len(order) || len(queue) > 0; {
		for at < len(order) && len(queue) < s.lim.streamParts {
			plan := nextFramePart(len(order), func(k int) Frame { return fr[order[k]] }, at, s.lim.partSize, nil)
			end := plan.hi + 1
			mode := speculative
			if len(queue) == 0 {
				mode = demand
			}
			// The frames' decoded buffers are taken with the part (as a
			// read's are): a part's worker never waits for memory the
			// other parts hold while it holds its own and a decode slot.
			var decoded int64
			for _, i := range order[at:end] {
				decoded += bufSize(fr[i].USize)
			}
			p, err := s.launch(ctx, nil, ci, plan, waysFor(s.lim.streamParts, len(queue)+1), decoded, 0, mode, slots)
			if p == nil && err == nil {
				break // no room to read ahead: finish what is in flight first
			}
			j := job{msgs: make(chan []string, 1)}
			idx := order[at:end]
			frames += int64(len(idx))
			if err != nil {
				j.msgs <- []string{fmt.Sprintf("frames at object bytes %d-%d: %v", plan.off, plan.end, err)}
			} else {
				go func() { j.msgs <- verifyPart(ctx, s, p, idx, decoded) }()
			}
			queue = append(queue, j)
			at = end
		}
		if len(queue) > 0 {
			report(queue[0])
			queue = queue[1:]
		}
	}
	return frames
}

// verifyPart checks frames idx (in object order) of part p and closes it,
// decoding each into a buffer from reserved (their decoded sizes, taken
// with the part; what is not used is returned).
func verifyPart(ctx context.Context, s *Set, p *part, idx []int, reserved int64) []string {
	defer p.close()
	defer func() { s.lim.unreserve(p.cl, reserved) }()
	var msgs []string
	fr := s.chunks[p.ci].Frames
	for _, i := range idx {
		f := fr[i]
		h := sha256.New()
		if err := p.hashThrough(ctx, f.COff, f.COff+f.CSize, h); err != nil {
			return append(msgs, fmt.Sprintf("frame %d: %v", i, err))
		}
		s.metrics.frameFetched()
		var got [32]byte
		h.Sum(got[:0])
		if f.HasSum && got != f.Sum {
			s.metrics.checksumFailure()
			msgs = append(msgs, fmt.Sprintf("frame %d (object bytes %d-%d): sha256 mismatch: %v", i, f.COff, f.COff+f.CSize, ErrChecksum))
			continue
		}
		if err := decodeSlot(ctx, s); err != nil {
			return append(msgs, fmt.Sprintf("frame %d: %v", i, err))
		}
		reserved -= bufSize(f.USize)
		err := decodeDiscard(s, p.buf.b[f.COff-p.off:f.COff+f.CSize-p.off], i, f, s.lim.bufReserved(p.cl, f.USize))
		<-s.cache.decodeSem
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	return msgs
}

// decodeDiscard decodes one frame's compressed bytes into out (a buffer of
// the frame's decoded size, charged to the budget as a read's is) and drops
// it; the decoded length must match the manifest.
func decodeDiscard(s *Set, comp []byte, i int, f Frame, out *Buf) error {
	defer out.Release()
	if err := s.cache.decodeInto(comp, out); err != nil {
		return fmt.Errorf("frame %d (object bytes %d-%d): %w", i, f.COff, f.COff+f.CSize, err)
	}
	s.metrics.frameDecoded()
	return nil
}

// verifyStream decodes an unframed zstd chunk to its end, checking the
// whole-object sha256 when the manifest has one.
func verifyStream(ctx context.Context, s *Set, ci int32) error {
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
func verifyObject(ctx context.Context, s *Set, ci int32) error {
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
	r := s.newPartReader(ctx, ci, 0, size)
	defer r.suspend()
	r.h, r.want, r.what = sha256.New(), c.Sum, "whole object"
	_, err = io.Copy(io.Discard, r)
	return err
}
