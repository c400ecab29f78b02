package main

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// sampleTree is the small tree the demo packs and serves (cmd/wharf/sample).
//
//go:embed all:sample
var sampleTree embed.FS

// maxDemoFrameSize bounds demo --frame-size: the whole sample tree fits
// in one frame far below it.
const maxDemoFrameSize = 64 << 20

// runDemo packs the embedded sample tree into a CargoShip archive in a
// temporary file:// store and serves it anonymously as bucket "sample".
// The serving is `wharf serve` itself (runServe with the equivalent flags),
// so the demo runs exactly the production wiring.
func runDemo(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("demo", flag.ContinueOnError)
	listen := fl.String("listen", "127.0.0.1:9000", "`HOST:PORT` to serve the sample bucket on")
	frameSize := fl.Int64("frame-size", 16<<10, "zstd frame size in `BYTES` for the packed sample")
	withTLS := fl.Bool("tls", false, "serve HTTPS (HTTP/2 and HTTP/1.1) with a certificate from a private CA made for this run; the CA file to trust is printed")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "usage: wharf demo [--listen HOST:PORT] [--tls]\n\n"+
			"Packs the built-in sample tree into a temporary CargoShip archive and\n"+
			"serves it anonymously as the S3 bucket \"sample\" until interrupted.\n"+
			"With --tls it also makes a private CA and a server certificate for\n"+
			"localhost, 127.0.0.1 and ::1 (and the --listen host) and serves HTTPS.\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return usageErr(err)
	}
	if fl.NArg() > 0 {
		return usageErr(fmt.Errorf("unexpected argument %q", fl.Arg(0)))
	}
	if *frameSize < 0 || *frameSize > maxDemoFrameSize {
		return usageErr(fmt.Errorf("--frame-size %d: want 0 (unframed) to %d", *frameSize, int64(maxDemoFrameSize)))
	}
	if _, _, err := splitHostPort(*listen); err != nil {
		return usageErr(fmt.Errorf("--listen: %w", err))
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
	serveArgs := []string{
		"--listen", *listen,
		"--store", "file://" + dir,
		"--anonymous",
		"--archive", "sample=" + manifestURL,
	}

	scheme, tlsNote := "http", ""
	var caFile string
	if *withTLS {
		var certFile, keyFile string
		if caFile, certFile, keyFile, err = demoTLS(dir, *listen); err != nil {
			return err
		}
		serveArgs = append(serveArgs, "--tls-cert", certFile, "--tls-key", keyFile)
		scheme = "https"
		tlsNote = fmt.Sprintf("wharf demo: TLS certificate %s from a private CA made for this run; trust %s (boto3: verify=%q)\n", certFile, caFile, caFile)
	}
	cfg, _, err := parseServeArgs(serveArgs)
	if err != nil {
		return err
	}
	// The commands name the address serve bound (the port --listen's 0
	// picked, too), printed once it listens.
	cfg.Ready = func(addr, _ string) {
		ep := scheme + "://" + addr
		aws := "aws --endpoint-url " + ep + " --no-sign-request"
		curl := "curl -s"
		rclone := ""
		if caFile != "" {
			aws = "aws --endpoint-url " + ep + " --ca-bundle " + caFile + " --no-sign-request"
			curl = "curl -s --http2 --cacert " + caFile
			rclone = " --ca-cert " + caFile
		}
		fmt.Fprintf(os.Stderr, `wharf demo: packed %d sample files into %d objects (%d zstd frames, %d bytes) under %s
%swharf demo: serving them anonymously as bucket "sample" on %s (Ctrl-C to stop). Try:

  %s s3 ls s3://sample/
  %s s3 ls --recursive s3://sample/
  %s s3 cp s3://sample/README.md -
  %s s3 sync s3://sample/ ./sample-copy/
  %s %s/sample/README.md
  %s -r 0-99 %s/sample/data/vessels.csv
  rclone lsf -R%s ":s3,provider=Other,endpoint='%s':sample"

`, len(files), len(res.ObjectKeys), res.Frames, res.CompressedBytes, dir, tlsNote, ep, aws, aws, aws, aws, curl, ep, curl, ep, rclone, ep)
	}
	return serve(ctx, cfg)
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

// demoTLS writes the demo's private CA and server certificate (valid 30
// days, for localhost, 127.0.0.1, ::1 and the --listen host) into
// dir/tls, which the demo removes on exit.
func demoTLS(dir, listen string) (caFile, certFile, keyFile string, err error) {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" && !slices.Contains(hosts, h) {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		} else if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, name)
		}
	}
	tdir := filepath.Join(dir, "tls")
	if err := os.Mkdir(tdir, 0o700); err != nil {
		return "", "", "", fmt.Errorf("demo TLS: %w", err)
	}
	caFile, certFile, keyFile, err = writeDevTLS(tdir, hosts, 30*24*time.Hour)
	if err != nil {
		return "", "", "", fmt.Errorf("demo TLS: %w", err)
	}
	return caFile, certFile, keyFile, nil
}
