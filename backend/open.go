package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// OpenStore opens the store a --store URL names:
//
//   - "file:///abs/dir" or "file://rel/dir" (relative to the working
//     directory): a FileStore over that directory. The directory must exist.
//   - "s3://" or "s3://anything": an S3Store configured by s3cfg. The host
//     part is ignored (buckets come from manifest URLs); use s3cfg.Endpoint
//     for a non-AWS server.
func OpenStore(ctx context.Context, storeURL string, s3cfg S3Config) (Store, error) {
	dir, err := CheckStoreURL(storeURL)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		return NewFileStore(dir), nil
	}
	s, err := NewS3Store(ctx, s3cfg)
	if err != nil {
		return nil, fmt.Errorf("backend: store URL %q: %w", storeURL, err)
	}
	return s, nil
}

// CheckStoreURL checks a --store URL without opening the store, as
// OpenStore does: a file:// URL must name an existing directory (returned
// as an absolute path), an s3:// URL returns "". Any other value (a bare
// path, http://...) is an error naming the URL, so that a configuration
// check refuses what serving would.
func CheckStoreURL(storeURL string) (dir string, err error) {
	switch {
	case strings.HasPrefix(storeURL, "file://"):
		d := strings.TrimPrefix(storeURL, "file://")
		if d == "" {
			return "", fmt.Errorf("backend: store URL %q: no directory", storeURL)
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", fmt.Errorf("backend: store URL %q: %w", storeURL, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return "", fmt.Errorf("backend: store URL %q: %w", storeURL, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("backend: store URL %q: %s is not a directory", storeURL, abs)
		}
		return abs, nil
	case strings.HasPrefix(storeURL, "s3://"):
		return "", nil
	default:
		return "", fmt.Errorf("backend: store URL %q: want file://DIR or s3://", storeURL)
	}
}

// ParseObjectURL splits a manifest URL into bucket and key. Accepted forms:
//
//   - "s3://BUCKET/KEY"
//   - "BUCKET/KEY" (no scheme): the same object, since the store is chosen
//     separately by --store.
//
// Everything after the first "/" following the bucket is the key, taken
// literally as S3 keys are: no percent-decoding, no cleaning of "//", "."
// or "..", and "?" or "#" are key characters (aws s3 and s5cmd treat s3://
// URLs the same way). The bucket must be non-empty with no whitespace,
// control characters or "/"; the key must be non-empty valid UTF-8 of at
// most 1024 bytes without NUL. Other schemes (http://, file://...) are
// rejected. Errors name the URL.
func ParseObjectURL(u string) (bucket, key string, err error) {
	rest := u
	if i := strings.Index(u, "://"); i >= 0 {
		if u[:i] != "s3" {
			return "", "", fmt.Errorf("backend: object URL %q: scheme %q not supported, want s3://BUCKET/KEY or BUCKET/KEY", u, u[:i])
		}
		rest = u[i+3:]
	}
	bucket, key, found := strings.Cut(rest, "/")
	if !found || key == "" {
		return "", "", fmt.Errorf("backend: object URL %q: want s3://BUCKET/KEY (no key)", u)
	}
	if bucket == "" || len(bucket) > 255 || bucket == "." || bucket == ".." {
		return "", "", fmt.Errorf("backend: object URL %q: invalid bucket %q", u, bucket)
	}
	for _, r := range bucket {
		if r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) || r == '\\' {
			return "", "", fmt.Errorf("backend: object URL %q: invalid bucket %q", u, bucket)
		}
	}
	if len(key) > 1024 || !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
		return "", "", fmt.Errorf("backend: object URL %q: invalid key %q", u, key)
	}
	return bucket, key, nil
}
