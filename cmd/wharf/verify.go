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
func runVerify(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	quiet := fs.Bool("q", false, "print only problems and the summary line")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf verify [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style --s3-access-key AK --s3-secret-key SK] MANIFEST_URL")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want exactly one MANIFEST_URL, got %d arguments", fs.NArg())
	}
	store, bucket, key, err := sf.openManifest(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	return verifyArchive(ctx, os.Stdout, store, bucket, key, *quiet)
}

// verifyArchive opens and verifies one archive, printing problems and a
// summary to w. It fails if the archive cannot be opened or any problem
// was found.
func verifyArchive(ctx context.Context, w io.Writer, store backend.Store, bucket, key string, quiet bool) error {
	start := time.Now()
	a, err := archiveview.Open(ctx, store, bucket, key, archiveview.Options{Readahead: -1})
	if err != nil {
		return err
	}
	defer a.Close()
	if !quiet {
		in := a.Info()
		fmt.Fprintf(w, "verifying %s/%s: %d files, %d chunks, %d frames\n", bucket, key, in.Files, in.Chunks, in.Frames)
	}
	st, err := a.Verify(ctx, func(p archiveview.VerifyProblem) {
		switch {
		case p.Key != "" && p.Chunk != "":
			fmt.Fprintf(w, "PROBLEM key %s (chunk %s): %s\n", p.Key, p.Chunk, p.Detail)
		case p.Key != "":
			fmt.Fprintf(w, "PROBLEM key %s: %s\n", p.Key, p.Detail)
		default:
			fmt.Fprintf(w, "PROBLEM chunk %s: %s\n", p.Chunk, p.Detail)
		}
	})
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
