package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
	"github.com/wharf-s3/wharf/backend"
)

// ParseDatasetURL reports whether u names a published dataset version,
// s3://BUCKET/DATASET@current or s3://BUCKET/DATASET@<version_id> (an
// "@" suffix with no "/" after it, other than "@latest"), and which. An
// "@" suffix that is neither "current" nor a valid version id is an error.
func ParseDatasetURL(u string) (ref DatasetRef, ok bool, err error) {
	i := strings.LastIndexByte(u, '@')
	if i < 0 || strings.Contains(u[i+1:], "/") {
		return DatasetRef{}, false, nil
	}
	suffix := u[i+1:]
	if suffix == "latest" {
		return DatasetRef{}, false, nil
	}
	b, p, err := ParseDiscoverURL(u[:i])
	if err != nil {
		return DatasetRef{}, true, err
	}
	ref = DatasetRef{Bucket: b, Prefix: p}
	if suffix != "current" {
		if err := dataset.ValidVersionID(suffix); err != nil {
			return DatasetRef{}, true, fmt.Errorf("version id %q: %w (want @current or @<version_id>)", suffix, err)
		}
		ref.Version = suffix
	}
	return ref, true, nil
}

// ResolvedVersion is the dataset version a name resolves to, once.
type ResolvedVersion struct {
	Ref DatasetRef
	// Pointer is the CURRENT read for a followed name; for a pinned
	// version only VersionID and ManifestKey are set (no pointer is read).
	Pointer     dataset.Pointer
	ManifestKey string
	Size        int64
	Created     time.Time
}

// AllowKeyPrefix is the dataset's versions folder (DATASET/v/), the
// prefix to add to Options.AllowKeyPrefixes: a version may name chunks under an older
// version's folder, and nothing outside DATASET/v/.
func (r ResolvedVersion) AllowKeyPrefix() string { return r.Ref.VersionsRoot() }

// ResolveDataset finds the version ref names, as a dataset bucket does at
// start: for @current one bounded read of CURRENT (refused as at start,
// the error naming the pointer's key) and a HEAD of the manifest it names
// (a dangling pointer is refused; nothing is listed to guess); for a
// pinned version the listing of that version's folder only (a version
// that does not exist is an error naming it and the dataset).
func ResolveDataset(ctx context.Context, store backend.Store, ref DatasetRef) (ResolvedVersion, error) {
	if ref.Version != "" {
		u, err := findPinned(ctx, store, ref)
		if err != nil {
			return ResolvedVersion{}, err
		}
		return ResolvedVersion{Ref: ref, Pointer: dataset.Pointer{VersionID: ref.Version, ManifestKey: u.ManifestKey},
			ManifestKey: u.ManifestKey, Size: u.Size, Created: u.LastModified}, nil
	}
	r, err := dataset.ReadPointer(ctx, store, ref.Bucket, ref.Prefix, "")
	if err != nil {
		return ResolvedVersion{}, err
	}
	info, err := store.Stat(ctx, ref.Bucket, r.Pointer.ManifestKey)
	if err != nil {
		return ResolvedVersion{}, fmt.Errorf("dataset pointer %s: version %s: manifest_key %s: %w", ref.PointerURL(), r.Pointer.VersionID, r.Pointer.ManifestKey, err)
	}
	return ResolvedVersion{Ref: ref, Pointer: r.Pointer, ManifestKey: r.Pointer.ManifestKey, Size: info.Size, Created: info.LastModified}, nil
}

// findPinned finds a pinned version's manifest by listing that version's
// folder (DATASET/v/<id>/uploads/) only. A version is one upload; should
// it hold more, the newest manifest.
func findPinned(ctx context.Context, store backend.Store, ref DatasetRef) (Upload, error) {
	folder := strings.TrimSuffix(dataset.VersionPrefix(ref.Prefix, ref.Version), "/")
	d, err := Discover(ctx, store, ref.Bucket, folder)
	if err != nil {
		return Upload{}, fmt.Errorf("dataset %s: version %s: %w", ref.URL(), ref.Version, err)
	}
	if len(d.Uploads) == 0 {
		return Upload{}, fmt.Errorf("dataset %s: version %s does not exist (no finished upload under s3://%s/%suploads/)",
			ref.URL(), ref.Version, ref.Bucket, dataset.VersionPrefix(ref.Prefix, ref.Version))
	}
	return slices.MaxFunc(d.Uploads, func(a, b Upload) int {
		if c := a.LastModified.Compare(b.LastModified); c != 0 {
			return c
		}
		return strings.Compare(a.ManifestKey, b.ManifestKey)
	}), nil
}
