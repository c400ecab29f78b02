package catalog

// The versions a dataset history walks: one listing of DATASET/v/ (every
// version folder, each one's manifest, the storage classes of its objects)
// and the chain from the served version's previous_version_id through the
// listed older versions (history.go).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
	"github.com/wharf-s3/wharf/backend"
)

// HistoryChain returns the published versions a history of current
// (previous: its pointer's previous_version_id) walks, newest first with
// current first, and why it ends there, from one listing of DATASET/v/
// and no open (wharf inspect). BuildHistory may end sooner, at a version
// that does not open.
func HistoryChain(ctx context.Context, store backend.Store, ref DatasetRef, current HistoryVersion, previous string, limit int) ([]HistoryVersion, string, error) {
	if limit <= 0 {
		limit = DefaultDatasetHistory
	}
	out := []HistoryVersion{current}
	if ended := historyOfOne(previous, limit); ended != "" {
		return out, ended, nil
	}
	l, err := listVersions(ctx, store, ref)
	if err != nil {
		return nil, "", err
	}
	chain, ended := chainFrom(current.ID, previous, l, limit)
	return append(out, chain...), ended, nil
}

// historyOfOne says why the history of a version whose pointer's
// previous_version_id is previous ends at that version, limit versions at
// most: it has no previous version, or the limit is 1; "" when the history
// may go on (its older versions are listed).
func historyOfOne(previous string, limit int) string {
	switch {
	case previous == "":
		return "the version served has no previous version"
	case limit == 1:
		return "the history limit (1 version)"
	}
	return ""
}

// versionListing is what one listing of DATASET/v/ found.
type versionListing struct {
	ids       []string                  // every version folder, ascending
	manifests map[string]HistoryVersion // the folders holding a finished upload's manifest
	// classes are the storage classes of the objects listed in a class
	// other than STANDARD (at most historyClassesMax: the rest count as
	// STANDARD), for the older versions' files (opened without listing).
	classes map[string]objClass
}

// objClass is a listed object's storage class and archive tier.
type objClass struct{ class, tier string }

// historyClassesMax bounds the objects in a class other than STANDARD
// that a history's listing records (versionListing.classes).
const historyClassesMax = 1 << 16

// classOf is the storage class of f, a file of an older version a: the
// coldest of its objects' classes as the listing of DATASET/v/ reported
// them. An object the listing did not record (outside DATASET/v/, an
// allowed prefix; or past historyClassesMax) counts as STANDARD, as does
// every object when a's objects cannot be told.
func (l versionListing) classOf(a *archiveview.Archive, f archiveview.File) string {
	if len(l.classes) == 0 {
		return backend.ClassStandard
	}
	keys, err := a.ObjectKeys(f)
	if err != nil {
		return backend.ClassStandard
	}
	class, tier := backend.ClassStandard, ""
	for _, k := range keys {
		if oc, ok := l.classes[k]; ok && backend.Coldness(oc.class, oc.tier) > backend.Coldness(class, tier) {
			class, tier = oc.class, oc.tier
		}
	}
	return class
}

// listVersions lists DATASET/v/ once: every version folder, and in each
// the manifest of its upload (manifest.json.gz before manifest.json; of
// several uploads the newest).
func listVersions(ctx context.Context, store backend.Store, ref DatasetRef) (versionListing, error) {
	root := ref.VersionsRoot()
	l := versionListing{manifests: map[string]HistoryVersion{}}
	seen := map[string]bool{}
	best := map[string]backend.ObjectInfo{}
	err := store.List(ctx, ref.Bucket, root, func(oi backend.ObjectInfo) error {
		rest, under := strings.CutPrefix(oi.Key, root)
		if !under {
			return nil // a store's listing that strays outside the prefix: no version of it
		}
		if c := cmp.Or(oi.StorageClass, backend.ClassStandard); c != backend.ClassStandard && len(l.classes) < historyClassesMax {
			if l.classes == nil {
				l.classes = map[string]objClass{}
			}
			l.classes[oi.Key] = objClass{c, oi.AccessTier}
		}
		id, man, ok := parseVersionKey(rest)
		if !ok {
			return nil
		}
		if !seen[id] {
			seen[id] = true
			l.ids = append(l.ids, id)
		}
		if !man {
			return nil
		}
		if b, had := best[id]; !had || betterManifest(oi, b) {
			best[id] = oi
		}
		return nil
	})
	if err != nil {
		return versionListing{}, fmt.Errorf("dataset %s: listing s3://%s/%s: %w", ref.URL(), ref.Bucket, root, err)
	}
	slices.Sort(l.ids)
	for id, oi := range best {
		l.manifests[id] = HistoryVersion{ID: id, ManifestKey: oi.Key, ManifestSz: oi.Size}
	}
	return l, nil
}

// betterManifest: of two manifests of one version, the newer upload, and
// in one folder .gz before plain.
func betterManifest(a, b backend.ObjectInfo) bool {
	fa, fb := a.Key[:strings.LastIndexByte(a.Key, '/')], b.Key[:strings.LastIndexByte(b.Key, '/')]
	if fa == fb {
		return strings.HasSuffix(a.Key, ".gz")
	}
	if c := a.LastModified.Compare(b.LastModified); c != 0 {
		return c > 0
	}
	return a.Key > b.Key
}

// parseVersionKey splits a key relative to DATASET/v/: the version folder
// (a valid version id) and whether the key is an upload's finished manifest
// (<id>/uploads/<upload>/manifest.json[.gz]). ok is false for a key not in
// a valid version folder.
func parseVersionKey(rel string) (id string, manifest, ok bool) {
	id, rest, found := strings.Cut(rel, "/")
	if !found || dataset.ValidVersionID(id) != nil {
		return "", false, false
	}
	up, ok := strings.CutPrefix(rest, "uploads/")
	if !ok {
		return id, false, true
	}
	upload, name, found := strings.Cut(up, "/")
	if !found || upload == "" || upload == "." || upload == ".." {
		return id, false, true
	}
	return id, name == "manifest.json.gz" || name == "manifest.json", true
}

// prunedEnd is why a history ends at version id, whose manifest is gone.
func prunedEnd(id string) string { return fmt.Sprintf("version %s: its manifest is gone (pruned)", id) }

// chainFrom is the history's older versions: previous first, then the
// listed versions older than the last link and not yet in the history,
// newest first; it stops at limit versions in all (the served one
// counted), at a version with no manifest (pruned), at a repeated id (a
// pointer naming itself) or when no older version is listed.
func chainFrom(current, previous string, l versionListing, limit int) (chain []HistoryVersion, ended string) {
	in := map[string]bool{current: true}
	next := previous
	for {
		if len(chain)+1 >= limit {
			return chain, fmt.Sprintf("the history limit (%d versions)", limit)
		}
		if in[next] {
			return chain, fmt.Sprintf("version %s is already in the history (a cycle)", next)
		}
		v, ok := l.manifests[next]
		if !ok {
			return chain, prunedEnd(next)
		}
		chain = append(chain, v)
		in[next] = true
		// The greatest listed id below next that is not in the history.
		i := sort.SearchStrings(l.ids, next)
		next = ""
		for i--; i >= 0; i-- {
			if !in[l.ids[i]] {
				next = l.ids[i]
				break
			}
		}
		if next == "" {
			return chain, fmt.Sprintf("version %s is the oldest listed", chain[len(chain)-1].ID)
		}
	}
}
