package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// The --index-cache value (YAML index_cache_dir) is either a local
// directory, which must exist, or an s3://BUCKET/PREFIX URL in the backing
// store's account: the index shared by a fleet of replicas. Any other URL is
// an error naming it; so is a path that is not an existing directory (wharf
// used to create it, which turned a mistyped "s3:/idx" into a local folder
// "s3:").

// indexCacheKind checks the form of an --index-cache value without
// touching anything (--check-config): a local path or s3://BUCKET/PREFIX.
// A URL of another scheme is an error naming the value, never taken as a
// directory name.
func indexCacheKind(v string) (s3URL bool, err error) {
	if v == "" {
		return false, nil
	}
	_, _, ok, err := archiveview.ParseIndexCacheURL(v)
	if err != nil {
		return ok, fmt.Errorf("--index-cache: %w", err)
	}
	if ok {
		return true, nil
	}
	if strings.Contains(v, "://") {
		return false, fmt.Errorf("--index-cache %q: neither a local directory nor an s3://BUCKET/PREFIX URL", v)
	}
	return false, nil
}

// setIndexCache routes an --index-cache value to IndexCacheDir or
// IndexCacheURL; "" turns the cache off. Only the form is checked here;
// validateIndexCache checks that the directory exists.
func (cfg *serveConfig) setIndexCache(v string) error {
	cfg.IndexCacheDir, cfg.IndexCacheURL = "", ""
	s3URL, err := indexCacheKind(v)
	if err != nil {
		return err
	}
	if s3URL {
		cfg.IndexCacheURL = v
	} else {
		cfg.IndexCacheDir = v
	}
	return nil
}

// indexCache is the --index-cache value as given.
func (cfg *serveConfig) indexCache() string {
	if cfg.IndexCacheURL != "" {
		return cfg.IndexCacheURL
	}
	return cfg.IndexCacheDir
}

// validateIndexCache checks at start that a local index cache is an
// existing directory (wharf does not create it: a mistyped path must not
// silently become a new cache).
func (cfg *serveConfig) validateIndexCache() error {
	if cfg.IndexCacheDir == "" {
		return nil
	}
	st, err := os.Stat(cfg.IndexCacheDir)
	if err != nil {
		return fmt.Errorf("--index-cache %q: neither an existing local directory nor an s3://BUCKET/PREFIX URL: %w", cfg.IndexCacheDir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("--index-cache %q: not a directory", cfg.IndexCacheDir)
	}
	return nil
}

// indexCacheFlag is --index-cache.
type indexCacheFlag struct{ cfg *serveConfig }

func (f indexCacheFlag) String() string {
	if f.cfg == nil {
		return ""
	}
	return f.cfg.indexCache()
}

func (f indexCacheFlag) Set(v string) error { return f.cfg.setIndexCache(v) }

// openIndexCache turns the validated --index-cache into the cache archives
// are opened with: a local directory, or a prefix of the backing store
// shared by every replica (read with the same client and credentials as the
// archives, and spooled to a private temporary directory, removed by
// cleanup).
func (cfg *serveConfig) openIndexCache(ctx context.Context, store backend.Store) (c archiveview.IndexCache, cleanup func(), err error) {
	switch {
	case cfg.IndexCacheDir != "":
		if err := cfg.validateIndexCache(); err != nil {
			return nil, nil, err
		}
		return archiveview.DirIndexCache{Dir: cfg.IndexCacheDir}, func() {}, nil
	case cfg.IndexCacheURL != "":
		if err := probeIndexCache(ctx, cfg.IndexCacheURL, store); err != nil {
			return nil, nil, err
		}
		return openIndexCache(cfg.IndexCacheURL, store)
	}
	return nil, func() {}, nil
}

// indexProbeKey is the object probeIndexCache asks for under the prefix
// (it need not exist).
const indexProbeKey = ".wharf-index-probe"

// probeIndexCache checks at start that an s3:// index cache can be used: a
// GET of a key under the prefix must answer "no such key" (or the object).
// A missing bucket, a refusal (the prefix needs s3:GetObject, s3:PutObject
// and s3:ListBucket, without which S3 answers 403 for a missing index) or
// an unreachable store is a startup error naming the value, not a silent
// fallback to reading every manifest.
func probeIndexCache(ctx context.Context, v string, store backend.Store) error {
	bucket, prefix, _, err := archiveview.ParseIndexCacheURL(v)
	if err != nil {
		return err
	}
	rc, _, err := store.Get(ctx, bucket, prefix+indexProbeKey)
	if err == nil {
		return rc.Close()
	}
	f, _ := backend.Describe(err)
	switch {
	case errors.Is(err, backend.ErrNotFound) && (strings.Contains(f.Detail, "no such bucket") || strings.Contains(f.Detail, "no bucket directory")):
		return fmt.Errorf("--index-cache %s: bucket %q does not exist", v, bucket)
	case errors.Is(err, backend.ErrNotFound):
		return nil
	case errors.Is(err, backend.ErrAccessDenied):
		return fmt.Errorf("--index-cache %s: access denied (the prefix needs s3:GetObject, s3:PutObject and s3:ListBucket): %w", v, err)
	}
	return fmt.Errorf("--index-cache %s: %w", v, err)
}

// openIndexCache opens the shared index cache at s3://BUCKET/PREFIX v of
// store (also wharf index build -o).
func openIndexCache(v string, store backend.Store) (c archiveview.IndexCache, cleanup func(), err error) {
	bucket, prefix, ok, err := archiveview.ParseIndexCacheURL(v)
	if err != nil || !ok {
		return nil, nil, fmt.Errorf("--index-cache %q: want s3://BUCKET/PREFIX", v)
	}
	if _, ok := store.(backend.Putter); !ok {
		return nil, nil, fmt.Errorf("--index-cache %s: the store cannot write", v)
	}
	spool, err := os.MkdirTemp("", "wharf-index-")
	if err != nil {
		return nil, nil, fmt.Errorf("--index-cache %s: spool directory: %w", v, err)
	}
	return archiveview.StoreIndexCache{Store: store, Bucket: bucket, Prefix: prefix, Spool: spool},
		func() { os.RemoveAll(spool) }, nil
}
