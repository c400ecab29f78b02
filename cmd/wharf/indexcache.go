package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/wharf-s3/wharf/archiveview/catalog"
)

// The --index-cache value (YAML index_cache_dir) is either a local
// directory, which must exist, or an s3://BUCKET/PREFIX URL (the shared
// index of a fleet of replicas). Any other URL is an error naming it; so is
// a path that is not an existing directory (wharf used to create it, which
// turned a mistyped "s3:/idx" into a local folder "s3:").

// errIndexCacheS3 is serve's answer to an s3:// index cache until the
// shared index is wired (the value is validated and kept in IndexCacheURL).
var errIndexCacheS3 = errors.New("s3:// index cache not implemented in this build")

// setIndexCache routes an --index-cache value to IndexCacheDir or
// IndexCacheURL; "" turns the cache off. Only the form is checked here;
// validateIndexCache checks that the directory exists.
func (cfg *serveConfig) setIndexCache(v string) error {
	cfg.IndexCacheDir, cfg.IndexCacheURL = "", ""
	switch {
	case v == "":
	case strings.HasPrefix(v, "s3://"):
		if _, _, err := catalog.ParseDiscoverURL(v); err != nil {
			return fmt.Errorf("--index-cache %q: want s3://BUCKET/PREFIX", v)
		}
		cfg.IndexCacheURL = v
	case strings.Contains(v, "://"):
		return fmt.Errorf("--index-cache %q: neither a local directory nor an s3://BUCKET/PREFIX URL", v)
	default:
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

// validateIndexCache checks that a local index cache is an existing
// directory.
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
