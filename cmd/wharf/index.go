package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/cmd/wharf/internal/progress"
)

const indexUsage = `usage:
  wharf index build [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style] [--quiet] MANIFEST_URL -o FILE|s3://BUCKET/PREFIX [--index-cache-secret-file FILE | --index-cache-trust-writers]
  wharf index show FILE

build reads the manifest chain once and writes the archive's resolved
index (persistent index format, see archiveview/persist.go) to FILE,
atomically (an existing FILE is replaced only when it is an index file,
damaged or not, or empty: anything else is refused), or publishes it in the shared index cache s3://BUCKET/PREFIX
(the value replicas give to --index-cache), where a replica then finds it
and never reads the manifest: MACed with the replicas' secret
(--index-cache-secret-file; --index-cache-trust-writers to publish without
one). What is already there is checked first, and build says
"published", "already there, valid" or "damaged, replaced". It shows the manifest bytes read on stderr
(the total grows as the chain's older manifests are found). show loads and
validates FILE and prints its summary.`

// runIndex builds or shows a persistent index file.
func runIndex(ctx context.Context, args []string) error {
	return indexCmd(ctx, args, os.Stdout)
}

func indexCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageErr(fmt.Errorf("missing index command (build or show)\n%s", indexUsage))
	}
	switch args[0] {
	case "build":
		return indexBuild(ctx, args[1:], out)
	case "show":
		return indexShow(ctx, args[1:], out)
	case "-h", "--help", "help":
		fmt.Fprintln(out, indexUsage)
		return nil
	}
	return usageErr(fmt.Errorf("unknown index command %q\n%s", args[0], indexUsage))
}

func indexBuild(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("index build", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	pf := addProgressFlags(fs)
	output := fs.String("o", "", "index file to write, or s3://BUCKET/PREFIX: the shared index cache (required)")
	var secretFile string
	var trustWriters bool
	addIndexCacheTrustFlags(fs, &secretFile, &trustWriters)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf index build [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style --s3-access-key AK --s3-secret-key SK] [--quiet] [--progress-interval 5s] MANIFEST_URL -o FILE|s3://BUCKET/PREFIX")
		fs.PrintDefaults()
	}
	manifestURL, err := manifestArg(fs, args)
	if err != nil {
		return err
	}
	if *output == "" {
		fs.Usage()
		return usageErr(errors.New("-o FILE is required"))
	}
	if err := pf.check(); err != nil {
		return usageErr(err)
	}
	s3URL, err := indexCacheKind(*output) // not s3://: a file to write
	if err != nil {
		return usageErr(fmt.Errorf("-o: %w", err))
	}
	if !s3URL {
		// Refused before the build, which may read many manifests.
		if err := checkIndexOutput(*output); err != nil {
			return usageErr(err)
		}
	}
	store, bucket, key, err := sf.openManifest(ctx, manifestURL)
	if err != nil {
		return err
	}
	var cache archiveview.IndexCache
	if s3URL {
		secret, err := indexCacheTrust(*output, false, secretFile, trustWriters)
		if err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		if err := probeIndexCache(ctx, *output, store); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		c, cleanup, err := openIndexCache(*output, store, secret)
		if err != nil {
			return err
		}
		defer cleanup()
		cache = c
	} else if _, err := indexCacheTrust("", true, secretFile, trustWriters); err != nil {
		return fmt.Errorf("-o %s: %w", *output, err)
	}
	rep := pf.start("index build", "manifests")
	a, err := archiveview.BuildIndex(ctx, &countingStore{Store: store, rep: rep}, bucket, key, archiveview.Options{})
	snap := rep.Done(err)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted after reading %d manifest(s), %s; no index written", snap.Items, formatBytes(snap.Bytes))
		}
		return err
	}
	defer a.Close()
	if cache != nil {
		published, err := a.PublishIndex(ctx, cache)
		if err != nil {
			return fmt.Errorf("publish index in %s: %w", *output, err)
		}
		printInfo(printableWriter{out}, a.Info())
		fmt.Fprintf(out, "index:              %s: %s\n", *output, published)
		return nil
	}
	if err := a.WriteIndexFile(*output); err != nil {
		return fmt.Errorf("write index %s: %w", *output, err)
	}
	printInfo(printableWriter{out}, a.Info())
	if fi, err := os.Stat(*output); err == nil {
		fmt.Fprintf(out, "index:              %s (%d bytes)\n", *output, fi.Size())
	}
	return nil
}

// indexFileMagic is how every persistent index file begins (the format's
// magic, archiveview/internal/index/format.go; TestIndexBuildOutputNotClobbered
// builds one and sees it replaced).
const indexFileMagic = "WHARFIDX"

// checkIndexOutput refuses an index build -o that names what must not be
// replaced by an index: "-" (a file of that name, not stdout), a URL with
// a slash missing (s3:/bkt/idx), a directory or other non-regular file,
// or a non-empty file that is not an index (a typo naming data, or the
// archive's own manifest in a file store). An index file, damaged or not,
// and an empty file are replaced.
func checkIndexOutput(name string) error {
	if name == "-" {
		return errors.New("-o -: index build writes a file, not stdout; name the index file")
	}
	if looksLikeURL(name) {
		return fmt.Errorf("-o %q: a URL with a slash missing? want the index FILE or s3://BUCKET/PREFIX", name)
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil // none there (or the write will say why not)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("-o %s: not a regular file (a directory?): want the index file to write", name)
	}
	if fi.Size() == 0 {
		return nil
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("-o %s: %w", name, err)
	}
	defer f.Close()
	head := make([]byte, len(indexFileMagic))
	if _, err := io.ReadFull(f, head); err != nil || string(head) != indexFileMagic {
		return fmt.Errorf("-o %s: exists and is not a wharf index file; refusing to replace it (remove it, or name another file)", name)
	}
	return nil
}

func indexShow(ctx context.Context, args []string, out io.Writer) error {
	if len(args) != 1 {
		return usageErr(fmt.Errorf("want exactly one FILE\n%s", indexUsage))
	}
	// No store: show reads nothing but the file (mapped, not loaded).
	a, err := archiveview.OpenIndexFile(ctx, nil, args[0], archiveview.Options{})
	if err != nil {
		return err
	}
	defer a.Close()
	printInfo(printableWriter{out}, a.Info())
	return nil
}

// countingStore reports whole-object reads (the manifests BuildIndex
// reads) to a Reporter: each Get adds the object's size to the total and
// one item when it is read to the end, and its bytes as they are read.
type countingStore struct {
	backend.Store
	rep   *progress.Reporter
	total atomic.Int64
	items atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	rc, info, err := s.Store.Get(ctx, bucket, key)
	if err != nil {
		return rc, info, err
	}
	s.rep.SetTotal(s.total.Add(info.Size), s.items.Add(1))
	return &countingReader{r: rc, add: s.rep.Add, done: s.rep.ItemDone}, info, nil
}

// countingReader passes the bytes read to add, and calls done once at EOF.
type countingReader struct {
	r    io.ReadCloser
	add  func(int64)
	done func()
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.add(int64(n))
	if err == io.EOF && c.done != nil {
		c.done()
		c.done = nil
	}
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }
