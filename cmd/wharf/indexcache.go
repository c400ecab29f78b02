package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// indexCacheKind checks the form of an --index-cache value without
// touching anything (--check-config): a local path or s3://BUCKET/PREFIX
// (in the backing store's account). A URL of another scheme is an error
// naming the value, never taken as a directory name.
func indexCacheKind(v string) (s3URL bool, err error) {
	if v == "" {
		return false, nil
	}
	if _, _, ok, err := archiveview.ParseIndexCacheURL(v); ok || err != nil {
		return ok, err
	}
	if strings.Contains(v, "://") {
		return false, fmt.Errorf("--index-cache %q: want an existing local directory or s3://BUCKET/PREFIX", v)
	}
	return false, nil
}

// checkIndexDir checks at start that a local --index-cache is an existing
// directory (wharf does not create it: a mistyped path must not silently
// become a new cache).
func checkIndexDir(v string) error {
	fi, err := os.Stat(v)
	if err != nil {
		return fmt.Errorf("--index-cache %q: want an existing local directory or s3://BUCKET/PREFIX: %w", v, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--index-cache %q: not a directory", v)
	}
	return nil
}

// openIndexCache turns --index-cache into the cache archives are opened
// with: a local directory, or a prefix of the backing store shared by every
// replica (read with the same client and credentials as the archives, and
// spooled to a private temporary directory, removed by cleanup).
func openIndexCache(v string, store backend.Store) (c archiveview.IndexCache, cleanup func(), err error) {
	s3URL, err := indexCacheKind(v)
	if err != nil || v == "" {
		return nil, func() {}, err
	}
	if !s3URL {
		if err := checkIndexDir(v); err != nil {
			return nil, nil, err
		}
		return archiveview.DirIndexCache{Dir: v}, func() {}, nil
	}
	if _, ok := store.(backend.Putter); !ok {
		return nil, nil, fmt.Errorf("--index-cache %s: the store cannot write", v)
	}
	bucket, prefix, _, _ := archiveview.ParseIndexCacheURL(v)
	spool, err := os.MkdirTemp("", "wharf-index-")
	if err != nil {
		return nil, nil, fmt.Errorf("--index-cache %s: spool directory: %w", v, err)
	}
	return archiveview.StoreIndexCache{Store: store, Bucket: bucket, Prefix: prefix, Spool: spool},
		func() { os.RemoveAll(spool) }, nil
}
