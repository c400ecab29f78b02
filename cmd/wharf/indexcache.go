package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// The --index-cache value (YAML index_cache_dir) is either a local
// directory, which must exist, or an s3://BUCKET/PREFIX URL in the backing
// store's account: the index shared by a fleet of replicas. Any other URL is
// an error naming it; so is a path that is not an existing directory (wharf
// used to create it, which turned a mistyped "s3:/idx" into a local folder
// "s3:").
//
// A shared (s3://) index cache is written by every replica, and whoever
// else can write its prefix. Its objects are authenticated with a secret
// every replica holds (--index-cache-secret-file, YAML
// index_cache_secret_file): an object without a valid MAC over its bytes
// and its name is never used, and is replaced. Without a secret, an s3://
// cache refuses to start unless --index-cache-trust-writers (YAML
// index_cache_trust_writers) says the operator trusts whoever can write the
// prefix as much as whoever can write the archives. A local directory needs
// neither: writing it already needs local access to the server.

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
// silently become a new cache), and that a shared one is authenticated
// (a valid secret file) or explicitly trusts its writers.
func (cfg *serveConfig) validateIndexCache() error {
	if _, err := indexCacheTrust(cfg.IndexCacheURL, cfg.IndexCacheDir != "", cfg.IndexCacheSecretFile, cfg.IndexCacheTrustWriters); err != nil {
		return err
	}
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
//
// The shared cache's refusals and publications are counted in reg
// (wharf_index_cache_objects_total{event}) and its trust mode is logged.
func (cfg *serveConfig) openIndexCache(ctx context.Context, store backend.Store, reg prometheus.Registerer, log zerolog.Logger) (c archiveview.IndexCache, cleanup func(), err error) {
	switch {
	case cfg.IndexCacheDir != "":
		if err := cfg.validateIndexCache(); err != nil {
			return nil, nil, err
		}
		return archiveview.DirIndexCache{Dir: cfg.IndexCacheDir}, func() {}, nil
	case cfg.IndexCacheURL != "":
		secret, err := indexCacheTrust(cfg.IndexCacheURL, false, cfg.IndexCacheSecretFile, cfg.IndexCacheTrustWriters)
		if err != nil {
			return nil, nil, err
		}
		if err := probeIndexCache(ctx, cfg.IndexCacheURL, store); err != nil {
			return nil, nil, err
		}
		c, cleanup, err := openIndexCache(cfg.IndexCacheURL, store, secret)
		if err != nil {
			return nil, nil, err
		}
		events := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wharf_index_cache_objects_total",
			Help: "Shared index cache objects by event: refused (no valid MAC, or too large), published, damaged, replaced, already there, valid, damaged, replaced by another writer first."},
			[]string{"event"})
		if err := reg.Register(events); err != nil {
			cleanup()
			return nil, nil, err
		}
		// Every event exists at zero from the start (an alert on the
		// rate of "refused" needs the series before the first one).
		for _, e := range []string{"refused", archiveview.Published.String(), archiveview.Replaced.String(),
			archiveview.AlreadyValid.String(), archiveview.Raced.String()} {
			events.WithLabelValues(e)
		}
		sc := c.(archiveview.StoreIndexCache)
		sc.Observe = func(event string) { events.WithLabelValues(event).Inc() }
		if secret != nil {
			log.Info().Str("index_cache", cfg.IndexCacheURL).Str("key_id", secret.KeyID()).Msg("shared index cache: objects authenticated with the secret")
		} else {
			log.Warn().Str("index_cache", cfg.IndexCacheURL).Msg("shared index cache without a secret (--index-cache-trust-writers): whoever can write the prefix chooses what this replica serves")
		}
		return sc, cleanup, nil
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
		rc.Close()
		return probeConditionalPut(ctx, v, store, bucket, prefix+indexProbeKey)
	}
	switch {
	case errors.Is(err, backend.ErrNoSuchBucket):
		return fmt.Errorf("--index-cache %s: bucket %q does not exist", v, bucket)
	case errors.Is(err, backend.ErrNotFound):
		return probeConditionalPut(ctx, v, store, bucket, prefix+indexProbeKey)
	case errors.Is(err, backend.ErrAccessDenied):
		return fmt.Errorf("--index-cache %s: access denied (the prefix needs s3:GetObject, s3:PutObject and s3:ListBucket): %w", v, err)
	}
	return fmt.Errorf("--index-cache %s: %w", v, err)
}

// openIndexCache opens the shared index cache at s3://BUCKET/PREFIX v of
// store (also wharf index build -o), authenticated with secret (nil: the
// operator trusts the prefix's writers).
func openIndexCache(v string, store backend.Store, secret *archiveview.IndexSecret) (c archiveview.IndexCache, cleanup func(), err error) {
	bucket, prefix, ok, err := archiveview.ParseIndexCacheURL(v)
	if err != nil || !ok {
		return nil, nil, fmt.Errorf("--index-cache %q: want s3://BUCKET/PREFIX", v)
	}
	if _, ok := backend.AsPutter(store); !ok {
		return nil, nil, fmt.Errorf("--index-cache %s: the store cannot write", v)
	}
	if _, ok := backend.AsMatchPutter(store); !ok {
		return nil, nil, fmt.Errorf("--index-cache %s: the store cannot replace objects conditionally (If-Match), so a damaged index could never be repaired", v)
	}
	spool, err := os.MkdirTemp("", "wharf-index-")
	if err != nil {
		return nil, nil, fmt.Errorf("--index-cache %s: spool directory: %w", v, err)
	}
	return archiveview.StoreIndexCache{Store: store, Bucket: bucket, Prefix: prefix, Spool: spool, Secret: secret},
		func() { os.RemoveAll(spool) }, nil
}

// addIndexCacheTrustFlags defines --index-cache-secret-file and
// --index-cache-trust-writers (wharf serve and wharf index build).
func addIndexCacheTrustFlags(fs *flag.FlagSet, secretFile *string, trustWriters *bool) {
	fs.StringVar(secretFile, "index-cache-secret-file", *secretFile, "`FILE` holding the secret (at least 32 bytes, not readable by other users) that authenticates the objects of an s3:// --index-cache; every replica holds the same one")
	fs.BoolVar(trustWriters, "index-cache-trust-writers", *trustWriters, "use an s3:// --index-cache without a secret: whoever can write its prefix then chooses what every replica serves (see SECURITY.md)")
}

// indexCacheTrust checks the authentication options of an index cache
// (url: an s3:// --index-cache or ""; dir: a local one is set) and returns
// the secret a shared cache uses (nil when it trusts its writers).
func indexCacheTrust(url string, dir bool, secretFile string, trustWriters bool) (*archiveview.IndexSecret, error) {
	switch {
	case url == "" && (secretFile != "" || trustWriters):
		what := "--index-cache-secret-file"
		if secretFile == "" {
			what = "--index-cache-trust-writers"
		}
		if dir {
			return nil, fmt.Errorf("%s: applies to an s3:// --index-cache only (a local index directory carries no MAC: writing it already needs local access)", what)
		}
		return nil, fmt.Errorf("%s: given without an s3:// --index-cache", what)
	case url == "":
		return nil, nil
	case secretFile != "" && trustWriters:
		return nil, fmt.Errorf("--index-cache %s: both --index-cache-secret-file and --index-cache-trust-writers; choose one", url)
	case trustWriters:
		return nil, nil
	case secretFile == "":
		return nil, fmt.Errorf("--index-cache %s: a shared index cache needs --index-cache-secret-file FILE (a secret every replica holds, so that whoever can write the prefix cannot choose what replicas serve; docs/operations.md), or --index-cache-trust-writers to trust whoever can write it", url)
	}
	return loadIndexSecret(secretFile)
}

// loadIndexSecret reads the shared index cache's secret: the file's bytes
// without trailing whitespace (a newline left by an editor or echo), at
// least archiveview.MinIndexSecretBytes of them. The file must be a
// regular file that other users cannot read (on Unix: no permission bits
// for "other"; group-readable is allowed, as for a secret mounted for a
// service group).
func loadIndexSecret(path string) (*archiveview.IndexSecret, error) {
	data, err := readSecretFile("--index-cache-secret-file", path, archiveview.MinIndexSecretBytes)
	if err != nil {
		return nil, err
	}
	return archiveview.NewIndexSecret(data)
}

// probeConditionalPut checks at start that the store enforces conditional
// writes at key (the probe object under the prefix): an If-None-Match: *
// PUT of an existing object must be refused, and so must an If-Match PUT
// naming an ETag the object does not have. A store that ignores either
// would let replicas overwrite one another's index objects (and a valid
// one with a damaged one): it must not be used as a shared index cache.
func probeConditionalPut(ctx context.Context, v string, store backend.Store, bucket, key string) error {
	p, ok := backend.AsPutter(store)
	if !ok {
		return fmt.Errorf("--index-cache %s: the store cannot write", v)
	}
	body := []byte("wharf index cache probe: conditional PUTs must be enforced\n")
	put := func() (bool, error) {
		return p.PutIfAbsent(ctx, bucket, key, bytes.NewReader(body), int64(len(body)))
	}
	if _, err := put(); err != nil { // creates the probe object, or finds it
		return fmt.Errorf("--index-cache %s: write probe %s: %w", v, key, err)
	}
	wrote, err := put()
	if err != nil {
		return fmt.Errorf("--index-cache %s: write probe %s: %w", v, key, err)
	}
	if wrote {
		return fmt.Errorf("--index-cache %s: the store does not enforce conditional PUTs (a PUT with If-None-Match: * overwrote the existing object %s): replicas would overwrite one another's index objects, so it cannot be a shared index cache", v, key)
	}
	mp, ok := backend.AsMatchPutter(store)
	if !ok {
		return fmt.Errorf("--index-cache %s: the store cannot replace objects conditionally (If-Match)", v)
	}
	wrote, err = mp.PutIfMatch(ctx, bucket, key, "00000000000000000000000000000000-probe", bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return fmt.Errorf("--index-cache %s: write probe %s: %w", v, key, err)
	}
	if wrote {
		return fmt.Errorf("--index-cache %s: the store does not enforce conditional PUTs (a PUT with If-Match on an ETag %s does not have overwrote it), so it cannot be a shared index cache", v, key)
	}
	return nil
}
