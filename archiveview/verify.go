package archiveview

import (
	"context"
	"fmt"
	"io"
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
		key := a.chunks[i].Key
		checked, frames := a.set.VerifyChunk(ctx, int32(i), func(detail string) { problem("", key, detail) })
		if checked {
			st.Chunks++
		}
		st.Frames += frames
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
				if ctx.Err() != nil {
					return st, ctx.Err()
				}
				chunk := ""
				if exts := a.fileExtents(f.idx); len(exts) > 0 {
					chunk = a.chunks[exts[0].chunk].Key
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
