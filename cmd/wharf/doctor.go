package main

// wharf doctor: checks a deployment before it serves. It takes the flags
// and config file of "wharf serve" and runs, in order, one check per line:
//
//	config        the flags and config file are valid (serve --check-config)
//	keys          the access keys (keys file, flags, environment) load
//	tls           each certificate (--tls-cert, --admin-tls-cert) loads with
//	              its key, is valid now and until when
//	store         the --store opens
//	credentials   each manifest's bucket can be listed with the store's
//	              credentials (the server's own code when refused)
//	manifest      each --archive opens (manifest read, index built)
//	range+if-match  a ranged GET of each manifest answers with an ETag and a
//	              stale If-Match is refused (ETag pinning)
//	restore       the store implements RestoreObject (a restore of a key
//	              that does not exist); a failure (not implemented, or the
//	              probe itself failing) only with --allow-restore
//	index-cache   a local --index-cache directory is writable; an s3://
//	              cache's store can write, its bucket can be listed, and it
//	              enforces conditional PUTs (If-None-Match: * and If-Match:
//	              the probe wharf serve runs at start, probeIndexCache)
//
// Each line reads "ok|FAIL|skip  NAME  DETAIL"; the exit status is non-zero
// when any check failed.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/backend"
)

// doctorTimeout bounds each check that talks to the store.
const doctorTimeout = 30 * time.Second

// checkResult is one line of the doctor's report.
type checkResult struct {
	Name   string
	Status string // "ok", "FAIL" or "skip"
	Detail string
}

func (r checkResult) String() string {
	return fmt.Sprintf("%-4s  %-15s %s", r.Status, r.Name, r.Detail)
}

func okCheck(name, format string, a ...any) checkResult {
	return checkResult{Name: name, Status: "ok", Detail: fmt.Sprintf(format, a...)}
}

func failCheck(name string, err error) checkResult {
	return checkResult{Name: name, Status: "FAIL", Detail: err.Error()}
}

func skipCheck(name, why string) checkResult {
	return checkResult{Name: name, Status: "skip", Detail: why}
}

func runDoctor(ctx context.Context, args []string) error {
	cfg, _, err := parseServeArgs(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	return doctor(ctx, &cfg, os.Stdout, time.Now())
}

// doctor runs every check of cfg, prints one line each to out, and fails
// when any failed.
func doctor(ctx context.Context, cfg *serveConfig, out io.Writer, now time.Time) error {
	var results []checkResult
	add := func(rs ...checkResult) {
		for _, r := range rs {
			fmt.Fprintln(out, r)
			results = append(results, r)
		}
	}
	if _, err := cfg.checkConfig(); err != nil {
		add(failCheck("config", err))
	} else {
		add(okCheck("config", "flags and config file valid (as serve --check-config)"))
	}
	add(checkKeys(cfg))
	add(checkTLS(cfg, now)...)
	store, err := backend.OpenStore(ctx, cfg.StoreURL, cfg.S3)
	if err != nil {
		add(failCheck("store", err))
	} else {
		add(okCheck("store", "%s", cfg.StoreURL))
		add(checkCredentials(ctx, store, cfg)...)
		add(checkManifests(ctx, store, cfg)...)
		add(checkRestore(ctx, store, cfg)...)
		add(checkIndexCache(ctx, store, cfg))
	}
	failed := 0
	for _, r := range results {
		if r.Status == "FAIL" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(results))
	}
	fmt.Fprintf(out, "wharf doctor: %d checks, none failed\n", len(results))
	return nil
}

func checkKeys(cfg *serveConfig) checkResult {
	keys, err := cfg.resolveKeys()
	if err != nil {
		return failCheck("keys", err)
	}
	switch {
	case len(keys) == 0 && !cfg.Anonymous:
		return failCheck("keys", errors.New("no access keys and not --anonymous: nobody could read"))
	case cfg.KeysFile != "":
		return okCheck("keys", "%d keys (keys file %s), anonymous %v", len(keys), cfg.KeysFile, cfg.Anonymous)
	}
	return okCheck("keys", "%d keys, anonymous %v", len(keys), cfg.Anonymous)
}

// checkTLS loads each configured certificate with its key and checks that
// its leaf is valid at now.
func checkTLS(cfg *serveConfig, now time.Time) []checkResult {
	pairs := [][3]string{{"tls", cfg.TLSCert, cfg.TLSKey}, {"admin-tls", cfg.AdminTLSCert, cfg.AdminTLSKey}}
	var out []checkResult
	for _, p := range pairs {
		name, certFile, keyFile := p[0], p[1], p[2]
		if certFile == "" && keyFile == "" {
			if name == "tls" {
				out = append(out, skipCheck(name, "no --tls-cert: plain HTTP"))
			}
			continue
		}
		out = append(out, checkCertificate(name, certFile, keyFile, now))
	}
	return out
}

func checkCertificate(name, certFile, keyFile string, now time.Time) checkResult {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return failCheck(name, fmt.Errorf("%s with %s: %w", certFile, keyFile, err))
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return failCheck(name, fmt.Errorf("%s: %w", certFile, err))
	}
	switch {
	case now.Before(leaf.NotBefore):
		return failCheck(name, fmt.Errorf("%s (%s) is not valid before %s", certFile, leaf.Subject, leaf.NotBefore.UTC().Format(time.RFC3339)))
	case !now.Before(leaf.NotAfter):
		return failCheck(name, fmt.Errorf("%s (%s) expired %s", certFile, leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339)))
	}
	days := int(leaf.NotAfter.Sub(now).Hours() / 24)
	return okCheck(name, "%s (%s) valid until %s (%d days)", certFile, leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339), days)
}

// manifestBuckets are the distinct buckets of the configured manifests and
// discovery roots, sorted.
func manifestBuckets(cfg *serveConfig) []string {
	seen := map[string]bool{}
	for _, a := range cfg.Archives {
		if b, _, err := backend.ParseObjectURL(a.ManifestURL); err == nil {
			seen[b] = true
		}
	}
	for _, d := range append(append([]string(nil), cfg.Discover...), aliasTargets(cfg)...) {
		if b, _, err := catalog.ParseDiscoverURL(strings.TrimSuffix(d, "@latest")); err == nil {
			seen[b] = true
		}
	}
	out := make([]string, 0, len(seen))
	for b := range seen {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

func aliasTargets(cfg *serveConfig) []string {
	var out []string
	for _, a := range cfg.Aliases {
		out = append(out, a.Target)
	}
	return out
}

func checkCredentials(ctx context.Context, store backend.Store, cfg *serveConfig) []checkResult {
	var out []checkResult
	for _, b := range manifestBuckets(cfg) {
		c, cancel := context.WithTimeout(ctx, doctorTimeout)
		err := backend.ProbeRead(c, store, b)
		cancel()
		if err != nil {
			out = append(out, failCheck("credentials", fmt.Errorf("bucket %s: %w", b, err)))
			continue
		}
		out = append(out, okCheck("credentials", "bucket %s can be listed", b))
	}
	return out
}

func checkManifests(ctx context.Context, store backend.Store, cfg *serveConfig) []checkResult {
	var out []checkResult
	for _, a := range cfg.Archives {
		bucket, key, err := backend.ParseObjectURL(a.ManifestURL)
		if err != nil {
			out = append(out, failCheck("manifest", fmt.Errorf("archive %s: %w", a.Name, err)))
			continue
		}
		c, cancel := context.WithTimeout(ctx, doctorTimeout)
		arch, err := archiveview.Open(c, store, bucket, key, archiveview.Options{Name: a.Name})
		if err != nil {
			cancel()
			out = append(out, failCheck("manifest", fmt.Errorf("archive %s: %w", a.Name, err)))
			continue
		}
		files := arch.Files()
		arch.Close()
		out = append(out, okCheck("manifest", "archive %s (%s): %d files", a.Name, a.ManifestURL, files))
		err = backend.ProbeRangeIfMatch(c, store, bucket, key)
		cancel()
		if err != nil {
			out = append(out, failCheck("range+if-match", fmt.Errorf("archive %s: %w", a.Name, err)))
		} else {
			out = append(out, okCheck("range+if-match", "archive %s: ranged GET with an ETag, stale If-Match refused", a.Name))
		}
	}
	return out
}

func checkRestore(ctx context.Context, store backend.Store, cfg *serveConfig) []checkResult {
	if _, ok := backend.AsRestorer(store); !ok {
		if cfg.AllowRestore {
			return []checkResult{failCheck("restore", fmt.Errorf("--allow-restore: the store %s cannot restore objects", cfg.StoreURL))}
		}
		return []checkResult{skipCheck("restore", "the store has no storage classes")}
	}
	var out []checkResult
	for _, b := range manifestBuckets(cfg) {
		c, cancel := context.WithTimeout(ctx, doctorTimeout)
		err := backend.ProbeRestore(c, store, b)
		cancel()
		switch {
		case err == nil:
			out = append(out, okCheck("restore", "bucket %s: the store implements RestoreObject", b))
		case errors.Is(err, backend.ErrNotImplemented) && !cfg.AllowRestore:
			out = append(out, skipCheck("restore", fmt.Sprintf("bucket %s: the store does not implement RestoreObject (not needed without --allow-restore): %v", b, err)))
		case !cfg.AllowRestore:
			out = append(out, skipCheck("restore", fmt.Sprintf("bucket %s: could not probe RestoreObject (not needed without --allow-restore): %v", b, err)))
		default:
			out = append(out, failCheck("restore", fmt.Errorf("bucket %s: %w", b, err)))
		}
	}
	return out
}

func checkIndexCache(ctx context.Context, store backend.Store, cfg *serveConfig) checkResult {
	switch {
	case cfg.IndexCacheDir != "":
		f, err := os.CreateTemp(cfg.IndexCacheDir, ".wharf-doctor-*")
		if err != nil {
			return failCheck("index-cache", fmt.Errorf("directory %s is not writable: %w", cfg.IndexCacheDir, err))
		}
		name := f.Name()
		f.Close()
		if err := os.Remove(name); err != nil {
			return failCheck("index-cache", fmt.Errorf("directory %s: %w", cfg.IndexCacheDir, err))
		}
		return okCheck("index-cache", "directory %s is writable", filepath.Clean(cfg.IndexCacheDir))
	case cfg.IndexCacheURL != "":
		bucket, _, ok, err := archiveview.ParseIndexCacheURL(cfg.IndexCacheURL)
		if err != nil || !ok {
			return failCheck("index-cache", fmt.Errorf("--index-cache %q: want s3://BUCKET/PREFIX", cfg.IndexCacheURL))
		}
		if _, ok := backend.AsPutter(store); !ok {
			return failCheck("index-cache", fmt.Errorf("--index-cache %s: the store cannot write", cfg.IndexCacheURL))
		}
		c, cancel := context.WithTimeout(ctx, doctorTimeout)
		defer cancel()
		if err := backend.ProbeRead(c, store, bucket); err != nil {
			return failCheck("index-cache", fmt.Errorf("--index-cache %s: %w", cfg.IndexCacheURL, err))
		}
		// The probe wharf serve runs at start (indexcache.go): If-None-Match: *
		// and If-Match must both be enforced, or replicas overwrite one
		// another's index objects.
		if err := probeIndexCache(c, cfg.IndexCacheURL, store); err != nil {
			return failCheck("index-cache", err)
		}
		return okCheck("index-cache", "%s: writable, the bucket can be listed, conditional PUTs enforced", cfg.IndexCacheURL)
	}
	return skipCheck("index-cache", "no --index-cache")
}

// logRestoreProbes says at start, for --allow-restore, whether the store
// implements RestoreObject in each manifest bucket: a store that does not
// (SeaweedFS answers 405) makes every restore through wharf answer 501
// NotImplemented, which the log says once here.
func logRestoreProbes(ctx context.Context, log zerolog.Logger, store backend.Store, cfg *serveConfig) {
	for _, b := range manifestBuckets(cfg) {
		c, cancel := context.WithTimeout(ctx, doctorTimeout)
		err := backend.ProbeRestore(c, store, b)
		cancel()
		switch {
		case err == nil:
			log.Info().Str("bucket", b).Msg("--allow-restore: the store implements RestoreObject")
		case errors.Is(err, backend.ErrNotImplemented):
			log.Warn().Str("bucket", b).Err(err).Msg("--allow-restore: the store does not implement RestoreObject; restores through wharf answer 501 NotImplemented")
		default:
			log.Warn().Str("bucket", b).Err(err).Msg("--allow-restore: could not probe RestoreObject")
		}
	}
}
