package archiveview

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sort"
)

// VerifyProblem is one mismatch found by Verify. Chunk is the object key
// concerned ("" when the problem is not tied to one).
type VerifyProblem struct{ Key, Chunk, Detail string }

// VerifyStats counts what Verify checked.
type VerifyStats struct {
	Chunks   int64 // chunk objects checked (frames or whole-object sum)
	Frames   int64 // frames fetched, hashed and decoded
	Files    int64 // files read whole through the normal read path
	Bytes    int64 // file bytes read
	Problems int64 // problems reported
}

// Verify checks the whole archive: every frame of every framed chunk
// (sha256 of the compressed bytes and decoded length, streamed, not
// cached), the whole-object sha256 of every unframed chunk that has one
// (and that unframed zstd decodes), and every file by reading it whole
// through the normal read path (frame, header, part and file sha256
// checks). Each problem is passed to report (if not nil); Verify goes on
// after problems and returns an error only if ctx ends.
func (a *Archive) Verify(ctx context.Context, report func(VerifyProblem)) (VerifyStats, error) {
	var st VerifyStats
	problem := func(key, chunk, detail string) {
		st.Problems++
		if report != nil {
			report(VerifyProblem{Key: key, Chunk: chunk, Detail: detail})
		}
	}
	for i := range a.chunks {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		ci := int32(i)
		c := &a.chunks[ci]
		switch {
		case c.kind == kindFramedZstd && len(c.frames) > 0:
			st.Chunks++
			a.verifyFrames(ctx, ci, &st, func(detail string) { problem("", c.key, detail) })
		case c.kind == kindStreamZstd || c.kind == kindFramedZstd:
			st.Chunks++
			if err := a.verifyStream(ctx, ci); err != nil {
				problem("", c.key, err.Error())
			}
		case c.hasSum:
			st.Chunks++
			if err := a.verifyObject(ctx, ci); err != nil {
				problem("", c.key, err.Error())
			}
		}
	}
	p := ListParams{MaxKeys: 1000}
	for {
		page := a.List(p)
		for _, le := range page.Entries {
			if le.Prefix != "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return st, err
			}
			f := le.File
			n, err := a.readWhole(ctx, f)
			st.Files++
			st.Bytes += n
			if err != nil {
				if isContextErr(err) && ctx.Err() != nil {
					return st, ctx.Err()
				}
				chunk := ""
				if exts := a.fileExtents(f.idx); len(exts) > 0 {
					chunk = a.chunks[exts[0].chunk].key
				}
				problem(f.Key, chunk, err.Error())
			}
		}
		if !page.Truncated {
			break
		}
		p.After = page.NextAfter
	}
	return st, nil
}

func (a *Archive) readWhole(ctx context.Context, f File) (int64, error) {
	r, err := a.Open(ctx, f, 0, f.Size)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.Copy(io.Discard, r)
	if err == nil && n != f.Size {
		err = fmt.Errorf("read %d of %d bytes: %w", n, f.Size, ErrCorrupt)
	}
	return n, err
}

// verifyFrames streams chunk ci once (frames in object order, one GET per
// maxRunBytes run), checking each frame's sha256 and decoded length without
// keeping its bytes.
func (a *Archive) verifyFrames(ctx context.Context, ci int32, st *VerifyStats, problem func(string)) {
	c := &a.chunks[ci]
	order := make([]int, 0, len(c.frames))
	for i, f := range c.frames {
		if err := framePlausible(i, f); err != nil {
			st.Frames++
			problem(err.Error())
			continue
		}
		order = append(order, i)
	}
	sort.Slice(order, func(x, y int) bool { return c.frames[order[x]].cOff < c.frames[order[y]].cOff })
	for at := 0; at < len(order); {
		// one run: frames at..end-1 in object order
		end, runBytes := at+1, c.frames[order[at]].cSize
		for end < len(order) {
			p, n := c.frames[order[end-1]], c.frames[order[end]]
			gap := n.cOff - (p.cOff + p.cSize)
			if gap < 0 || gap > maxRunGap || runBytes+gap+n.cSize > maxRunBytes {
				break
			}
			runBytes += gap + n.cSize
			end++
		}
		first, last := c.frames[order[at]], c.frames[order[end-1]]
		start, stop := first.cOff, last.cOff+last.cSize
		body, err := a.rangeGet(ctx, ci, start, stop-start)
		if err != nil {
			problem(fmt.Sprintf("frames at object bytes %d-%d: %v", start, stop, err))
			at = end
			continue
		}
		pos := start
		for _, i := range order[at:end] {
			f := c.frames[i]
			if gap := f.cOff - pos; gap > 0 {
				if _, err := io.CopyN(io.Discard, body, gap); err != nil {
					problem(fmt.Sprintf("frame %d: %v", i, shortBody(err)))
					break
				}
			}
			pos = f.cOff + f.cSize
			st.Frames++
			a.metrics.frameFetched()
			if err := a.verifyFrameStream(io.LimitReader(body, f.cSize), i, f); err != nil {
				problem(err.Error())
				if errors.Is(err, errBody) {
					break
				}
			}
		}
		body.Close()
		at = end
	}
}

var errBody = errors.New("body")

// verifyFrameStream decodes one frame from r (exactly its compressed
// bytes), hashing the compressed bytes as they pass.
func (a *Archive) verifyFrameStream(r io.Reader, i int, f frame) error {
	rd := a.rdState()
	h := sha256.New()
	cr := &countReader{r: io.TeeReader(r, h)}
	dec, err := rd.cache.decoder(cr)
	if err != nil {
		return err
	}
	n, derr := io.Copy(io.Discard, dec)
	// Drain what the decoder did not consume so the hash covers the frame.
	rest, rerr := io.Copy(io.Discard, cr)
	if derr != nil {
		dec.Close()
	} else {
		rd.cache.putDecoder(dec)
	}
	if rerr != nil {
		return fmt.Errorf("frame %d: reading: %v: %w", i, rerr, errBody)
	}
	if cr.n != f.cSize {
		return fmt.Errorf("frame %d: body ended after %d of %d bytes: %w", i, cr.n, f.cSize, errBody)
	}
	var got [32]byte
	h.Sum(got[:0])
	if f.hasSum && got != f.sum {
		a.metrics.checksumFailure()
		return fmt.Errorf("frame %d (object bytes %d-%d): sha256 mismatch: %w", i, f.cOff, f.cOff+f.cSize, ErrChecksum)
	}
	if derr != nil {
		return fmt.Errorf("frame %d: zstd: %v: %w", i, derr, ErrCorrupt)
	}
	a.metrics.frameDecoded()
	if n != f.uSize {
		return fmt.Errorf("frame %d decodes to %d bytes, manifest says %d: %w", i, n, f.uSize, ErrCorrupt)
	}
	if rest > 0 {
		return fmt.Errorf("frame %d: %d bytes after the zstd frame: %w", i, rest, ErrCorrupt)
	}
	return nil
}

// verifyStream decodes an unframed zstd chunk to its end, checking the
// whole-object sha256 when the manifest has one.
func (a *Archive) verifyStream(ctx context.Context, ci int32) error {
	z, err := a.newZstream(ctx, ci, -1)
	if err != nil {
		return err
	}
	healthy := false
	defer func() { z.discard(a.rdState().cache, healthy) }()
	if _, err := io.Copy(io.Discard, &zReader{z: z, rd: a.rdState()}); err != nil {
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
func (a *Archive) verifyObject(ctx context.Context, ci int32) error {
	c := &a.chunks[ci]
	size, err := a.objectSize(ctx, ci)
	if err != nil {
		return err
	}
	if size == 0 {
		if sha256.Sum256(nil) != c.sum {
			a.metrics.checksumFailure()
			return fmt.Errorf("whole object sha256 mismatch: %w", ErrChecksum)
		}
		return nil
	}
	body, err := a.rangeGet(ctx, ci, 0, size)
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
	if got != c.sum {
		a.metrics.checksumFailure()
		return fmt.Errorf("whole object sha256 mismatch: %w", ErrChecksum)
	}
	return nil
}
