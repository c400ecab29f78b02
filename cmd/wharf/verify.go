package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// runVerify checks a whole archive: every frame (sha256 and decoded
// length), every unframed chunk's whole-object sha256, and every file read
// whole through the normal read path. Each problem is printed naming its
// key and chunk; any problem makes the command fail (exit status 1).
// Progress (bytes of chunks and files checked, rate, ETA) goes to stderr;
// an interrupted run (Ctrl-C, SIGTERM) says what was checked and what was
// not, and fails.
func runVerify(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	pf := addProgressFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf verify [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style --s3-access-key AK --s3-secret-key SK] [--quiet] [--progress-interval 5s] MANIFEST_URL|s3://BUCKET/DATASET@current|@<version_id>")
		fmt.Fprintln(fs.Output(), "--quiet prints only problems and the summary line, with no progress")
		fs.PrintDefaults()
	}
	manifestURL, err := manifestArg(fs, args)
	if err != nil {
		return err
	}
	if err := pf.check(); err != nil {
		return usageErr(err)
	}
	t, err := sf.openTarget(ctx, manifestURL)
	if err != nil {
		return err
	}
	return verifyTarget(ctx, os.Stdout, t, pf)
}

// verifyArchive opens and verifies one archive, printing problems and a
// summary to w and progress through pf (nil: quiet, no progress). It fails
// if the archive cannot be opened, any problem was found, or ctx ended
// first.
func verifyArchive(ctx context.Context, w io.Writer, store backend.Store, bucket, key string, pf *progressFlags) error {
	return verifyTarget(ctx, w, target{store: store, bucket: bucket, key: key}, pf)
}

// verifyTarget is verifyArchive of a resolved MANIFEST_URL (a dataset
// version's shared chunks allowed).
func verifyTarget(ctx context.Context, w io.Writer, t target, pf *progressFlags) error {
	start := time.Now()
	bucket, key := t.bucket, t.key
	a, err := t.open(ctx, archiveview.Options{Readahead: -1})
	if err != nil {
		return err
	}
	defer a.Close()
	in := a.Info()
	if pf == nil {
		pf = &progressFlags{quiet: true}
	}
	if !pf.quiet {
		fmt.Fprintf(w, "verifying %s/%s: %d files, %d chunks, %d frames\n", bucket, key, in.Files, in.Chunks, in.Frames)
	}
	rep := pf.start("verify", "")
	total, err := a.VerifyBytes()
	if err != nil {
		rep.Done(err)
		return err
	}
	rep.SetTotal(total, -1)
	st, err := a.VerifyWith(ctx, archiveview.VerifyOptions{Progress: rep.Add, Report: func(p archiveview.VerifyProblem) {
		var line string
		switch {
		case p.Key != "" && p.Chunk != "":
			line = fmt.Sprintf("PROBLEM key %s (chunk %s): %s", p.Key, p.Chunk, p.Detail)
		case p.Key != "":
			line = fmt.Sprintf("PROBLEM key %s: %s", p.Key, p.Detail)
		default:
			line = fmt.Sprintf("PROBLEM chunk %s: %s", p.Chunk, p.Detail)
		}
		fmt.Fprintln(w, printable(line))
	}})
	snap := rep.Done(err)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(w, "interrupted after %s: checked %d chunks (%d frames) and %d of %d files, %s of %s; not checked: %d files; %d problem(s) so far\n",
			time.Since(start).Round(time.Millisecond), st.Chunks, st.Frames, st.Files, in.Files,
			formatBytes(snap.Bytes), formatBytes(total), int64(in.Files)-st.Files, st.Problems)
		return fmt.Errorf("interrupted: %d of %d files not checked", int64(in.Files)-st.Files, in.Files)
	}
	fmt.Fprintf(w, "checked %d chunks, %d frames, %d files (%d bytes) in %s: %d problem(s)\n",
		st.Chunks, st.Frames, st.Files, st.Bytes, time.Since(start).Round(time.Millisecond), st.Problems)
	if err != nil {
		return err
	}
	if st.Problems > 0 {
		return errors.New("verification failed: " + plural(st.Problems, "problem"))
	}
	return nil
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
