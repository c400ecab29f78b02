package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/backend"
)

// storeFlags are the backing-store flags shared by inspect, verify, index
// build, ls and get: where the manifest and chunks live and how to reach S3.
type storeFlags struct {
	url, endpoint, region, accessKey, secretKey *string
	pathStyle                                   *bool
}

func addStoreFlags(fs *flag.FlagSet) *storeFlags {
	return &storeFlags{
		url:       fs.String("store", "s3://", "backing store: file://DIR or s3://"),
		endpoint:  fs.String("s3-endpoint", "", "S3 endpoint URL (non-AWS servers)"),
		region:    fs.String("s3-region", "", "S3 region"),
		pathStyle: fs.Bool("s3-path-style", false, "path-style S3 addressing"),
		accessKey: fs.String("s3-access-key", "", "S3 access key id (default: the AWS credential chain)"),
		secretKey: fs.String("s3-secret-key", "", "S3 secret access key"),
	}
}

// target is what a MANIFEST_URL names: an archive's manifest, or a
// published dataset's version (s3://BUCKET/DATASET@current or
// @<version_id>), resolved once.
type target struct {
	store       backend.Store
	bucket, key string
	allow       []string                 // key prefixes the archive may also name (a dataset's DATASET/v/)
	dataset     *catalog.ResolvedVersion // set for a dataset name
}

// options returns opts with the target's allowed key prefixes added.
func (t target) options(opts archiveview.Options) archiveview.Options {
	opts.AllowKeyPrefixes = append(append([]string(nil), opts.AllowKeyPrefixes...), t.allow...)
	return opts
}

// openTarget opens the store and resolves manifestURL: an object URL is
// split into bucket and key; a dataset name has its CURRENT read (bounded
// and validated as wharf serve does at start) or its pinned version
// found, and the version's manifest is the key.
func (s *storeFlags) openTarget(ctx context.Context, manifestURL string) (target, error) {
	if (*s.accessKey == "") != (*s.secretKey == "") {
		// One alone would sign with an empty secret, or be ignored.
		return target{}, usageErr(errors.New("--s3-access-key and --s3-secret-key must be given together"))
	}
	if strings.HasPrefix(manifestURL, "/") || strings.HasPrefix(manifestURL, "./") || strings.HasPrefix(manifestURL, "../") {
		return target{}, usageErr(fmt.Errorf("MANIFEST_URL %s: a local path; give the manifest's s3://BUCKET/KEY (a file store's objects are under --store file://DIR)", manifestURL))
	}
	ref, isDataset, err := catalog.ParseDatasetURL(manifestURL)
	if err != nil {
		return target{}, usageErr(fmt.Errorf("%s: %w", manifestURL, err))
	}
	var t target
	if !isDataset {
		t.bucket, t.key, err = backend.ParseObjectURL(manifestURL)
		if err != nil {
			return target{}, usageErr(err)
		}
	}
	cfg := backend.S3Config{Endpoint: *s.endpoint, Region: *s.region, PathStyle: *s.pathStyle}
	if *s.accessKey != "" {
		cfg.AccessKeyID, cfg.SecretAccessKey = *s.accessKey, *s.secretKey
	}
	t.store, err = backend.OpenStore(ctx, *s.url, cfg)
	if err != nil {
		return target{}, err
	}
	if isDataset {
		rv, err := catalog.ResolveDataset(ctx, t.store, ref)
		if err != nil {
			return target{}, err
		}
		t.bucket, t.key, t.allow, t.dataset = ref.Bucket, rv.ManifestKey, []string{rv.AllowKeyPrefix()}, &rv
	}
	return t, nil
}

// openManifest opens the store and splits manifestURL into bucket and
// key. It takes object URLs only (index build): a dataset name is refused.
func (s *storeFlags) openManifest(ctx context.Context, manifestURL string) (store backend.Store, bucket, key string, err error) {
	if _, isDataset, _ := catalog.ParseDatasetURL(manifestURL); isDataset {
		return nil, "", "", fmt.Errorf("%s: a dataset name is not taken here; give the version's manifest URL (s3://BUCKET/DATASET/v/<version_id>/uploads/<upload>/manifest.json.gz)", manifestURL)
	}
	t, err := s.openTarget(ctx, manifestURL)
	if err != nil {
		return nil, "", "", err
	}
	return t.store, t.bucket, t.key, nil
}

// openArchive opens the archive at manifestURL (or the dataset version it
// names) through the store flags, the same read core wharf serve uses
// (archiveview.Open; opts.Cache, when nil, is a private frame cache of
// the default budget).
func (s *storeFlags) openArchive(ctx context.Context, manifestURL string, opts archiveview.Options) (*archiveview.Archive, error) {
	t, err := s.openTarget(ctx, manifestURL)
	if err != nil {
		return nil, err
	}
	return t.open(ctx, opts)
}

// open opens the target's archive and, for a dataset version, checks the
// pointer's file_count and total_bytes against it (the manifest decides;
// a disagreement is logged as a warning on stderr).
func (t target) open(ctx context.Context, opts archiveview.Options) (*archiveview.Archive, error) {
	a, err := archiveview.Open(ctx, t.store, t.bucket, t.key, t.options(opts))
	if err != nil {
		if t.dataset != nil {
			return nil, fmt.Errorf("dataset %s version %s: %w", t.dataset.Ref.URL(), t.dataset.Pointer.VersionID, err)
		}
		return nil, err
	}
	if w := t.countWarnings(a.Info()); len(w) > 0 {
		log := zerolog.New(os.Stderr).With().Timestamp().Logger()
		for _, m := range w {
			log.Warn().Str("pointer", t.dataset.Ref.PointerURL()).Str("version_id", t.dataset.Pointer.VersionID).Msg(m)
		}
	}
	return a, nil
}

// countWarnings returns the disagreements of a followed pointer's
// file_count and total_bytes with the opened version (none for an object
// URL or a pinned version, whose pointer is not read).
func (t target) countWarnings(in archiveview.Info) []string {
	if t.dataset == nil || t.dataset.Ref.Version != "" {
		return nil
	}
	p := t.dataset.Pointer
	var w []string
	if p.FileCount != int64(in.Files) {
		w = append(w, fmt.Sprintf("dataset pointer %s: file_count %d disagrees with the manifest's %d files; the manifest decides", t.dataset.Ref.PointerURL(), p.FileCount, in.Files))
	}
	if p.TotalBytes != in.UncompressedBytes {
		w = append(w, fmt.Sprintf("dataset pointer %s: total_bytes %d disagrees with the manifest's %d bytes; the manifest decides", t.dataset.Ref.PointerURL(), p.TotalBytes, in.UncompressedBytes))
	}
	return w
}
