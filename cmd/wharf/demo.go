package main

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// sampleTree is the small tree the demo packs and serves (cmd/wharf/sample).
//
//go:embed all:sample
var sampleTree embed.FS

// runDemo packs the embedded sample tree into a CargoShip archive in a
// temporary file:// store and serves it anonymously as bucket "sample".
// The serving is `wharf serve` itself (runServe with the equivalent flags),
// so the demo runs exactly the production wiring.
func runDemo(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("demo", flag.ContinueOnError)
	listen := fl.String("listen", "127.0.0.1:9000", "`HOST:PORT` to serve the sample bucket on")
	frameSize := fl.Int64("frame-size", 16<<10, "zstd frame size in `BYTES` for the packed sample")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "usage: wharf demo [--listen HOST:PORT]\n\n"+
			"Packs the built-in sample tree into a temporary CargoShip archive and\n"+
			"serves it anonymously as the S3 bucket \"sample\" until interrupted.\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fl.Arg(0))
	}

	dir, err := os.MkdirTemp("", "wharf-demo-")
	if err != nil {
		return fmt.Errorf("creating the demo store: %w", err)
	}
	defer os.RemoveAll(dir)

	files, err := sampleFiles(time.Now().UTC().Truncate(time.Second))
	if err != nil {
		return err
	}
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), files, cargopack.Options{
		Bucket:      "demo-store",
		Prefix:      "cargo",
		UploadID:    "sample",
		SourcePath:  "/sample",
		FrameSize:   *frameSize,
		ContentHash: true,
	})
	if err != nil {
		return fmt.Errorf("packing the sample tree: %w", err)
	}
	manifestURL := "s3://demo-store/" + res.ManifestKey

	ep := "http://" + *listen
	aws := "aws --endpoint-url " + ep + " --no-sign-request"
	fmt.Fprintf(os.Stderr, `wharf demo: packed %d sample files into %d objects (%d zstd frames, %d bytes) under %s
wharf demo: serving them anonymously as bucket "sample" on %s (Ctrl-C to stop). Try:

  %s s3 ls s3://sample/
  %s s3 ls --recursive s3://sample/
  %s s3 cp s3://sample/README.md -
  %s s3 sync s3://sample/ ./sample-copy/
  curl -s %s/sample/README.md
  curl -s -r 0-99 %s/sample/data/vessels.csv
  rclone lsf -R ":s3,provider=Other,endpoint='%s':sample"

`, len(files), len(res.ObjectKeys), res.Frames, res.CompressedBytes, dir, ep, aws, aws, aws, aws, ep, ep, ep)

	return runServe(ctx, []string{
		"--listen", *listen,
		"--store", "file://" + dir,
		"--anonymous",
		"--archive", "sample=" + manifestURL,
	})
}

// sampleFiles lists the embedded sample tree as cargopack files, in lexical
// walk order, all with modification time mtime.
func sampleFiles(mtime time.Time) ([]cargopack.File, error) {
	var files []cargopack.File
	err := fs.WalkDir(sampleTree, "sample", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		name := p
		files = append(files, cargopack.File{
			Rel:     path.Clean(p[len("sample/"):]),
			Size:    info.Size(),
			ModTime: mtime,
			Mode:    0o644,
			Open:    func() (io.ReadCloser, error) { return sampleTree.Open(name) },
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded sample tree: %w", err)
	}
	return files, nil
}
