package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// runInspect opens one archive (manifest chain, resolution, index; no chunk
// bytes are read) and prints its summary.
func runInspect(ctx context.Context, args []string) error {
	return inspect(ctx, args, os.Stdout)
}

func inspect(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	storeURL := fs.String("store", "s3://", "backing store: file://DIR or s3://")
	endpoint := fs.String("s3-endpoint", "", "S3 endpoint URL (non-AWS servers)")
	region := fs.String("s3-region", "", "S3 region")
	pathStyle := fs.Bool("s3-path-style", false, "path-style S3 addressing")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf inspect [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style] MANIFEST_URL")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want exactly one MANIFEST_URL, got %d arguments", fs.NArg())
	}
	bucket, key, err := backend.ParseObjectURL(fs.Arg(0))
	if err != nil {
		return err
	}
	store, err := backend.OpenStore(ctx, *storeURL, backend.S3Config{Endpoint: *endpoint, Region: *region, PathStyle: *pathStyle})
	if err != nil {
		return err
	}
	a, err := archiveview.Open(ctx, store, bucket, key, archiveview.Options{})
	if err != nil {
		return err
	}
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
	fmt.Fprintf(w, "warnings:           %d\n", len(in.Warnings))
	for _, s := range in.Warnings {
		fmt.Fprintf(w, "  - %s\n", s)
	}
}
