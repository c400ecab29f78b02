package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// runPack packs a directory into a CargoShip-format archive (chunks plus
// manifest) with package cargopack and prints the manifest's s3:// URL.
func runPack(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pack", flag.ContinueOnError)
	storeURL := fs.String("store", "", "where to write: file://DIR or s3://")
	bucket := fs.String("bucket", "", "bucket to write the archive to")
	prefix := fs.String("prefix", "", "key prefix (the archive goes under PREFIX/uploads/ID/)")
	uploadID := fs.String("upload-id", "", "upload id (default YYYYMMDD-<8 hex>)")
	frameSize := fs.String("frame-size", "4MiB", "zstd frame size (0 = one zstd stream per chunk)")
	chunkSize := fs.String("chunk-size", "64MiB", "target uncompressed bytes per chunk")
	shards := fs.Int("shards", 4, "number of shards")
	version := fs.String("version", "2.1", "manifest version: 2.1, 2.0 or 1.0")
	direct := fs.Bool("direct", false, "direct-upload shape: one raw object per file, no chunks")
	splitSize := fs.String("split-size", "0", "split files larger than this into parts (0 = never)")
	dedup := fs.Bool("dedup", false, "store identical files once (later copies become duplicates)")
	endpoint := fs.String("s3-endpoint", "", "S3 endpoint URL (non-AWS servers)")
	region := fs.String("s3-region", "", "S3 region")
	pathStyle := fs.Bool("s3-path-style", false, "path-style S3 addressing")
	pf := addProgressFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf pack DIR --store URL --bucket B [--prefix P] [--upload-id ID] [--frame-size 4MiB] [--chunk-size 64MiB] [--shards N] [--version 2.1] [--direct] [--split-size N] [--dedup] [--s3-endpoint URL --s3-region R --s3-path-style] [--quiet] [--progress-interval 5s]")
		fmt.Fprintln(fs.Output(), "sizes take KiB, MiB, GiB or TiB suffixes")
		fs.PrintDefaults()
	}
	dirs, err := parseInterspersed(fs, args)
	if err != nil {
		return usageErr(err)
	}
	if len(dirs) != 1 {
		fs.Usage()
		return usageErr(fmt.Errorf("want exactly one DIR, got %d", len(dirs)))
	}
	if *storeURL == "" || *bucket == "" {
		fs.Usage()
		return usageErr(errors.New("--store and --bucket are required"))
	}
	opt := cargopack.Options{
		Bucket: *bucket, Prefix: *prefix, UploadID: *uploadID,
		Version: *version, Direct: *direct, Dedup: *dedup, ShardCount: *shards,
	}
	if *shards < 1 {
		return usageErr(fmt.Errorf("--shards %d: want >= 1", *shards))
	}
	for _, s := range []struct {
		name, val string
		dst       *int64
	}{{"frame-size", *frameSize, &opt.FrameSize}, {"chunk-size", *chunkSize, &opt.ChunkSize}, {"split-size", *splitSize, &opt.SplitSize}} {
		n, err := parseSize(s.val)
		if err != nil {
			return usageErr(fmt.Errorf("--%s: %w", s.name, err))
		}
		*s.dst = n
	}
	if opt.ChunkSize == 0 {
		return usageErr(errors.New("--chunk-size must be > 0"))
	}
	if err := pf.check(); err != nil {
		return usageErr(err)
	}
	// CargoShip records the walked root as given; packing an absolute path
	// gives the usual absolute file paths.
	src, err := filepath.Abs(dirs[0])
	if err != nil {
		return fmt.Errorf("pack %s: %w", dirs[0], err)
	}
	if fi, err := os.Stat(src); err != nil {
		return fmt.Errorf("pack: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("pack: %s is not a directory", src)
	}
	opt.SourcePath = filepath.ToSlash(src)
	files, err := cargopack.FromDir(src)
	if err != nil {
		return err
	}

	var sink cargopack.Sink
	switch {
	case strings.HasPrefix(*storeURL, "file://"):
		dir := strings.TrimPrefix(*storeURL, "file://")
		if dir == "" {
			return fmt.Errorf("store URL %q: no directory", *storeURL)
		}
		sink = cargopack.DirSink(dir)
	case strings.HasPrefix(*storeURL, "s3://"):
		// The backend's S3 client: the same credential chain, retries and
		// transport as wharf serve, then PutObject through cargopack.S3Sink.
		st, err := backend.NewS3Store(ctx, backend.S3Config{Endpoint: *endpoint, Region: *region, PathStyle: *pathStyle})
		if err != nil {
			return fmt.Errorf("s3 store: %w", err)
		}
		client := st.Client()
		opt.Region = client.Options().Region
		sink = cargopack.S3Sink(client)
	default:
		return fmt.Errorf("store URL %q: want file://DIR or s3://", *storeURL)
	}

	var total int64
	for _, f := range files {
		total += f.Size
	}
	rep := pf.start("pack", "")
	rep.SetTotal(total, -1)
	opt.Progress = rep.Add
	res, err := cargopack.Write(ctx, sink, files, opt)
	snap := rep.Done(err)
	if err != nil {
		if ctx.Err() != nil {
			// The manifest is written last: without it the objects already
			// stored are not an archive, and a new pack starts over.
			return fmt.Errorf("interrupted after packing %s of %s (%d files): no manifest was written, so no archive was published; the chunk objects already stored in bucket %s stay until removed",
				formatBytes(snap.Bytes), formatBytes(total), len(files), *bucket)
		}
		return err
	}
	fmt.Fprintf(os.Stderr, "packed %d files into %d objects (%d bytes, %d frames)\n",
		len(files), len(res.ObjectKeys), res.CompressedBytes, res.Frames)
	fmt.Printf("s3://%s/%s\n", *bucket, res.ManifestKey)
	return nil
}

// manifestArg parses args (flags may follow the argument) for a command
// that takes exactly one MANIFEST_URL, printing the usage when it does not
// get one.
func manifestArg(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", usageErr(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return "", usageErr(fmt.Errorf("want exactly one MANIFEST_URL, got %d arguments", len(pos)))
	}
	return pos[0], nil
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("wharf pack DIR --store ..."), returning the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil // "--" ends the flags
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
