package main

import (
	"context"
	"flag"

	"github.com/wharf-s3/wharf/archiveview"
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

// openManifest opens the store and splits manifestURL into bucket and key.
func (s *storeFlags) openManifest(ctx context.Context, manifestURL string) (store backend.Store, bucket, key string, err error) {
	bucket, key, err = backend.ParseObjectURL(manifestURL)
	if err != nil {
		return nil, "", "", err
	}
	cfg := backend.S3Config{Endpoint: *s.endpoint, Region: *s.region, PathStyle: *s.pathStyle}
	if *s.accessKey != "" {
		cfg.AccessKeyID, cfg.SecretAccessKey = *s.accessKey, *s.secretKey
	}
	store, err = backend.OpenStore(ctx, *s.url, cfg)
	if err != nil {
		return nil, "", "", err
	}
	return store, bucket, key, nil
}

// openArchive opens the archive at manifestURL through the store flags,
// the same read core wharf serve uses (archiveview.Open; opts.Cache, when
// nil, is a private frame cache of the default budget).
func (s *storeFlags) openArchive(ctx context.Context, manifestURL string, opts archiveview.Options) (*archiveview.Archive, error) {
	store, bucket, key, err := s.openManifest(ctx, manifestURL)
	if err != nil {
		return nil, err
	}
	return archiveview.Open(ctx, store, bucket, key, opts)
}
