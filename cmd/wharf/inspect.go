package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wharf-s3/wharf/archiveview"
)

// runInspect opens one archive (manifest chain, resolution, index; no chunk
// bytes are read) and prints its summary.
func runInspect(ctx context.Context, args []string) error {
	return inspect(ctx, args, os.Stdout)
}

func inspect(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf inspect [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style --s3-access-key AK --s3-secret-key SK] MANIFEST_URL")
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
	a, err := archiveview.Open(ctx, store, bucket, key, archiveview.Options{})
	if err != nil {
		return err
	}
	defer a.Close()
	printInfo(out, a.Info())
	return nil
}

func printInfo(w io.Writer, in archiveview.Info) {
	fmt.Fprintf(w, "id:                 %s\n", in.UploadID)
	fmt.Fprintf(w, "version:            %s\n", in.Version)
	fmt.Fprintf(w, "manifest:           %s\n", in.ManifestKey)
	fmt.Fprintf(w, "chain:              %s\n", strings.Join(in.Chain, " <- "))
	fmt.Fprintf(w, "files:              %d\n", in.Files)
	fmt.Fprintf(w, "chunks:             %d\n", in.Chunks)
	fmt.Fprintf(w, "frames:             %d\n", in.Frames)
	fmt.Fprintf(w, "compressed bytes:   %d\n", in.CompressedBytes)
	fmt.Fprintf(w, "uncompressed bytes: %d\n", in.UncompressedBytes)
	fmt.Fprintf(w, "shapes:             %s\n", strings.Join(in.Shapes, ", "))
	fmt.Fprintf(w, "unverifiable files: %d", in.Unverifiable)
	if in.Unverifiable > 0 {
		fmt.Fprintf(w, " (no checksum covers them; served as stored), e.g. %s", strings.Join(in.UnverifiableSample, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "warnings:           %d\n", len(in.Warnings))
	for _, s := range in.Warnings {
		fmt.Fprintf(w, "  - %s\n", s)
	}
}
