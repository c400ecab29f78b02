package archiveview

import (
	"github.com/wharf-s3/wharf/archiveview/internal/index"

	"context"
	"fmt"
	"io"
	"runtime"
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

// VerifyOptions configure VerifyWith.
type VerifyOptions struct {
	// Report receives each problem; nil only counts them.
	Report func(VerifyProblem)
	// Progress, when not nil, is called on the verifying goroutine with
	// each increment of work done, in bytes: a chunk's stored size (per
	// manifest) once the chunk is checked, then file bytes as they are
	// read (a file that fails counts its unread rest when it fails). When
	// the verification runs to the end, the increments add up to
	// VerifyBytes.
	Progress func(bytes int64)
}

// VerifyBytes is the work of a whole verification in bytes: the chunks'
// stored sizes plus the files' sizes (the sum of VerifyOptions.Progress).
func (a *Archive) VerifyBytes() int64 {
	var n int64
	defer runtime.KeepAlive(a) // the size column may be a view of a mapped file
	for i := range a.tree.Chunks {
		n += a.tree.Chunks[i].Size
	}
	for _, s := range a.tree.Idx.Size { // every file VerifyWith lists
		n += s
	}
	return n
}

// Verify is VerifyWith with only a problem report.
func (a *Archive) Verify(ctx context.Context, report func(VerifyProblem)) (VerifyStats, error) {
	return a.VerifyWith(ctx, VerifyOptions{Report: report})
}

// VerifyWith checks the whole archive: every frame of every framed chunk
// (sha256 of the compressed bytes and decoded length, streamed, not
// cached), the whole-object sha256 of every unframed chunk that has one
// (and that unframed zstd decodes), and every file by reading it whole
// through the normal read path (frame, header, part and file sha256
// checks). Each problem is passed to o.Report and the work done to
// o.Progress; VerifyWith goes on after problems and returns an error only
// if ctx ends.
func (a *Archive) VerifyWith(ctx context.Context, o VerifyOptions) (VerifyStats, error) {
	var st VerifyStats
	problem := func(key, chunk, detail string) {
		st.Problems++
		if o.Report != nil {
			o.Report(VerifyProblem{Key: key, Chunk: chunk, Detail: detail})
		}
	}
	progress := o.Progress
	if progress == nil {
		progress = func(int64) {}
	}
	for i := range a.tree.Chunks {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		key := a.tree.Chunks[i].Key
		checked, frames := a.set.VerifyChunk(ctx, int32(i), func(detail string) { problem("", key, detail) })
		if checked {
			st.Chunks++
		}
		st.Frames += frames
		if ctx.Err() == nil {
			progress(a.tree.Chunks[i].Size)
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
			n, err := readWhole(ctx, a, f, progressWriter(progress))
			st.Files++
			st.Bytes += n
			if err != nil {
				if ctx.Err() != nil {
					return st, ctx.Err()
				}
				if n < f.Size {
					progress(f.Size - n)
				}
				chunk := ""
				if exts := a.fileExtents(index.Ordinal(f)); len(exts) > 0 {
					chunk = a.tree.Chunks[exts[0].Chunk].Key
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

// progressWriter discards bytes, counting them.
type progressWriter func(int64)

func (p progressWriter) Write(b []byte) (int, error) {
	p(int64(len(b)))
	return len(b), nil
}

func readWhole(ctx context.Context, a *Archive, f File, w io.Writer) (int64, error) {
	r, err := a.Open(ctx, f, 0, f.Size)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.Copy(w, r)
	if err == nil && n != f.Size {
		err = fmt.Errorf("read %d of %d bytes: %w", n, f.Size, ErrCorrupt)
	}
	return n, err
}
