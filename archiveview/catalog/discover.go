package catalog

// Discovery: finding the finished uploads under a CargoShip prefix, naming
// them as S3 buckets, and picking the newest one for a "@latest" alias.
//
// This is the only code in wharf that lists the backing store. It runs when
// the server starts, on SIGHUP and on the optional rescan interval, never on
// the read path.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// Names of the non-manifest objects discovery recognises and skips.
const (
	manifestNamePartialGzip  = "manifest.partial.json.gz"
	manifestNamePartialPlain = "manifest.partial.json"
	writerStatusName         = "status.json"
)

// Upload is one finished upload found by Discover: a folder
// {root}/uploads/{id}/ (or {root}/writers/{writer}/uploads/{id}/) holding
// manifest.json.gz or manifest.json.
type Upload struct {
	Bucket       string    // the store bucket
	Root         string    // the discovery prefix, "/" trimmed ("" = whole bucket)
	Writer       string    // fleet writer id; "" for {root}/uploads/
	UploadID     string    // the folder name after "uploads/"
	ManifestKey  string    // object key of the manifest
	ETag         string    // the manifest object's ETag, as listed
	Size         int64     // the manifest object's size, as listed
	LastModified time.Time // the manifest object's LastModified, as listed

	// Name is the bucket name the upload is served as; set by NameUploads.
	Name string

	// Dataset marks a published dataset found by Discover (a CURRENT
	// pointer): ManifestKey is then the pointer's key, UploadID the
	// dataset's last path segment (its bucket name before NameUploads)
	// and DatasetPrefix its key prefix.
	Dataset       bool
	DatasetPrefix string
}

// URL is the upload's manifest as s3://BUCKET/KEY.
func (u Upload) URL() string { return "s3://" + u.Bucket + "/" + u.ManifestKey }

// Skipped is an object discovery saw and deliberately does not serve, with
// the reason (logged, and shown on the admin page).
type Skipped struct {
	Bucket, Key, Reason string
}

// Collision reports that several uploads (or an upload and a configured
// bucket) mapped to the same bucket name, and what each was renamed to.
type Collision struct {
	Name    string   // the contested bucket name
	Winner  string   // manifest URL or configured name that kept it; "" when none did
	Renamed []string // "s3://bucket/key -> new-name" for each renamed upload
}

// Discovery is the result of listing one root.
type Discovery struct {
	Uploads  []Upload // in key order
	Datasets []Upload // published datasets (Dataset set), in key order
	Skipped  []Skipped
}

// ParseDiscoverURL splits "s3://BUCKET/PREFIX" (PREFIX may be empty) into
// bucket and prefix, the prefix with "/" trimmed at both ends.
func ParseDiscoverURL(u string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(u, "s3://")
	if !ok {
		return "", "", fmt.Errorf("discovery root %q: want s3://BUCKET/PREFIX", u)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if bucket == "" || strings.ContainsAny(bucket, " \t\r\n\\") {
		return "", "", fmt.Errorf("discovery root %q: invalid bucket %q", u, bucket)
	}
	return bucket, strings.Trim(prefix, "/"), nil
}

// Discover lists bucket under prefix and classifies every manifest-like
// object:
//
//   - {prefix}/uploads/{id}/manifest.json.gz or manifest.json, and the same
//     under {prefix}/writers/{writer}/uploads/{id}/ (fleet writers), is a
//     finished upload. When a folder holds both names the .gz one is used
//     and the other is skipped.
//   - manifest.partial.json[.gz] (a resume checkpoint), manifest.encrypted.*
//     (KMS-encrypted, unreadable), status.json (a fleet writer's heartbeat)
//     and manifest names anywhere else under the prefix are skipped with a
//     reason.
//   - {prefix}/CURRENT and {prefix}/{name}/CURRENT are the pointers of
//     published datasets (cargoship publish): each is one Datasets entry,
//     named after the dataset's last path segment ({name}, or the
//     prefix's last segment, or the bucket for a dataset at its root).
//     The manifests of a dataset's versions ({dataset}/v/*/uploads/) are
//     served through the dataset, so they are neither uploads nor skipped.
//   - Everything else (chunk and direct objects) is ignored silently.
//
// Keys are taken literally as CargoShip writes them: an empty prefix lists
// the whole bucket, and the "//uploads/" a trailing-slash prefix produces is
// accepted. A listed key that does not lie under the prefix (a store's
// bug) is skipped with a reason. The listing is the only store request
// Discover makes; a listing error is returned naming the bucket and
// prefix.
func Discover(ctx context.Context, store backend.Store, bucket, prefix string) (Discovery, error) {
	return discover(ctx, store, bucket, prefix, 0)
}

// discover is Discover whose listing fails (wrapping
// backend.ErrUnavailable) when idle (if > 0) passes with no object listed:
// a scan's bound on a store that stops answering, since a listing may
// rightly take long but never long without progress.
func discover(ctx context.Context, store backend.Store, bucket, prefix string, idle time.Duration) (Discovery, error) {
	prefix = strings.Trim(prefix, "/")
	listPrefix := ""
	if prefix != "" {
		listPrefix = prefix + "/"
	}
	var d Discovery
	byFolder := map[string]int{} // folder → index in d.Uploads
	err := listProgress(ctx, store, bucket, listPrefix, idle, func(oi backend.ObjectInfo) error {
		skip := func(reason string) {
			d.Skipped = append(d.Skipped, Skipped{Bucket: bucket, Key: oi.Key, Reason: reason})
		}
		if !strings.HasPrefix(oi.Key, listPrefix) {
			// The store's answer, not to be trusted: classified as if
			// under the root it would serve a key outside it.
			skip(fmt.Sprintf("listed for s3://%s/%s but not under the prefix listed", bucket, listPrefix))
			return nil
		}
		rel := strings.TrimLeft(oi.Key[len(listPrefix):], "/")
		base := rel[strings.LastIndexByte(rel, '/')+1:]
		if base == dataset.PointerName && strings.Count(rel, "/") <= 1 {
			dsPrefix := strings.TrimSuffix(strings.TrimSuffix(oi.Key, dataset.PointerName), "/")
			name := dsPrefix[strings.LastIndexByte(dsPrefix, '/')+1:]
			if name == "" {
				name = bucket
			}
			d.Datasets = append(d.Datasets, Upload{Bucket: bucket, Root: prefix, UploadID: name, ManifestKey: oi.Key,
				ETag: oi.ETag, Size: oi.Size, LastModified: oi.LastModified, Dataset: true, DatasetPrefix: dsPrefix})
			return nil
		}
		switch base {
		case manifest.ManifestNameGzip, manifest.ManifestNamePlain:
		case manifestNamePartialGzip, manifestNamePartialPlain:
			skip("resume checkpoint (" + base + "): the upload is not finished")
			return nil
		case manifest.ManifestNameEncryptedGzip, manifest.ManifestNameEncryptedPlain:
			skip("KMS-encrypted manifest: wharf cannot read encrypted manifests")
			return nil
		case writerStatusName:
			skip("writer heartbeat (status.json), not an upload")
			return nil
		default:
			return nil
		}
		writer, id, ok := splitUploadPath(rel)
		if !ok {
			where := "s3://" + bucket + "/" + prefix
			skip(fmt.Sprintf("manifest not directly under %s/uploads/<id>/ or %s/writers/<writer>/uploads/<id>/ (discover its own prefix to serve it)",
				where, where))
			return nil
		}
		u := Upload{Bucket: bucket, Root: prefix, Writer: writer, UploadID: id, ManifestKey: oi.Key,
			ETag: oi.ETag, Size: oi.Size, LastModified: oi.LastModified}
		folder := oi.Key[:len(oi.Key)-len(base)]
		if i, dup := byFolder[folder]; dup {
			prev := d.Uploads[i]
			if base == manifest.ManifestNameGzip {
				d.Uploads[i] = u
				prev, u = u, prev
			}
			d.Skipped = append(d.Skipped, Skipped{Bucket: bucket, Key: u.ManifestKey,
				Reason: "shadowed by " + prev.ManifestKey + " in the same upload folder"})
			return nil
		}
		byFolder[folder] = len(d.Uploads)
		d.Uploads = append(d.Uploads, u)
		return nil
	})
	if err != nil {
		return Discovery{}, fmt.Errorf("discover s3://%s/%s: %w", bucket, prefix, err)
	}
	if len(d.Datasets) > 0 {
		// A dataset's versions are served through it: not skipped.
		kept := d.Skipped[:0]
		for _, sk := range d.Skipped {
			inDataset := false
			for _, ds := range d.Datasets {
				if strings.HasPrefix(sk.Key, dataset.Root(ds.DatasetPrefix)+"v/") {
					inDataset = true
					break
				}
			}
			if !inDataset {
				kept = append(kept, sk)
			}
		}
		d.Skipped = kept
	}
	return d, nil
}

// splitUploadPath matches a manifest key rel (relative to the discovery
// root) of the upload layout, "uploads/{id}/manifest.json[.gz]", directly
// under the root or under one fleet writer's folder
// "writers/{writer}/". The layout itself is manifest.UploadDir's, the one
// parser of it; discovery adds only "directly under the root" (rel has
// its leading "/" trimmed: UploadDir's "/uploads/..." form is not one).
func splitUploadPath(rel string) (writer, id string, ok bool) {
	dir, id, ok := manifest.UploadDir(rel)
	switch {
	case !ok || strings.HasPrefix(rel, "/"):
	case dir == "":
		return "", id, true
	case strings.HasPrefix(dir, "writers/"):
		if w := dir[len("writers/"):]; w != "" && !strings.Contains(w, "/") {
			return w, id, true
		}
	}
	return "", "", false
}

// BucketName maps an upload id to a valid S3 bucket name by this rule:
//
//  1. lowercase ASCII letters;
//  2. every byte outside [a-z0-9.-] becomes "-";
//  3. runs of "." become one ".";
//  4. leading and trailing "-" and "." are removed;
//  5. a name that looks like an IPv4 address gets the prefix "u-";
//  6. a name longer than 63 is cut to 54 (trailing "-"/"." trimmed again)
//     and gets "-" + 8 hex digits of sha256(id);
//  7. a name shorter than 3 gets "-" + 8 hex digits of sha256(id) appended
//     (just the 8 digits when it is empty).
//
// A valid name maps to itself. The result always satisfies S3's rules:
// 3–63 bytes of [a-z0-9.-], starting and ending with a letter or digit, no
// "..", not an IP address.
func BucketName(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case c == '.':
			if strings.HasSuffix(b.String(), ".") {
				continue
			}
		default:
			c = '-'
		}
		b.WriteByte(c)
	}
	name := strings.Trim(b.String(), "-.")
	if ip := net.ParseIP(name); ip != nil && ip.To4() != nil {
		name = "u-" + name
	}
	if len(name) > 63 {
		name = strings.TrimRight(name[:54], "-.") + "-" + shortHash(id)
	}
	if len(name) < 3 {
		if name == "" {
			name = shortHash(id)
		} else {
			name += "-" + shortHash(id)
		}
	}
	return name
}

// ValidBucketName reports whether name satisfies the rule BucketName
// produces (S3's bucket naming rules for new buckets, minus the reserved
// prefixes and suffixes).
func ValidBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	if strings.Trim(name, "-.") != name {
		return false
	}
	ip := net.ParseIP(name)
	return ip == nil
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// NameUploads sets Name on every upload: BucketName of its upload id, unless
// that collides. reserved reports names already taken (configured archives
// and aliases); they always keep their name. Among uploads mapping to the
// same free name, the first in the given order whose upload id is already
// that exact name keeps it; every other gets "-" + 8 hex digits of
// sha256("BUCKET/MANIFEST_KEY") (the base cut to fit 63 bytes), which is
// stable across rescans. Each contested name is reported once. An upload
// whose suffixed name still collides is dropped and reported with an
// empty new name.
func NameUploads(uploads []Upload, reserved func(string) bool) ([]Upload, []Collision) {
	out := slices.Clone(uploads)
	groups := map[string][]int{}
	var order []string
	for i := range out {
		n := BucketName(out[i].UploadID)
		if _, ok := groups[n]; !ok {
			order = append(order, n)
		}
		groups[n] = append(groups[n], i)
	}
	taken := map[string]bool{}
	for _, n := range order {
		if !reserved(n) && len(groups[n]) == 1 {
			taken[n] = true
		}
	}
	var cols []Collision
	drop := map[int]bool{}
	for _, n := range order {
		idx := groups[n]
		if !reserved(n) && len(idx) == 1 {
			out[idx[0]].Name = n
			continue
		}
		c := Collision{Name: n}
		if reserved(n) {
			c.Winner = n + " (configured)"
		} else {
			for _, i := range idx {
				if out[i].UploadID == n {
					c.Winner = out[i].URL()
					out[i].Name = n
					taken[n] = true
					break
				}
			}
		}
		for _, i := range idx {
			if out[i].Name == n {
				continue
			}
			base := n
			h := shortHash(out[i].Bucket + "/" + out[i].ManifestKey)
			if len(base)+9 > 63 {
				base = strings.TrimRight(base[:54], "-.")
			}
			alt := base + "-" + h
			if taken[alt] || reserved(alt) || groups[alt] != nil {
				drop[i] = true
				c.Renamed = append(c.Renamed, out[i].URL()+" -> (not served: "+alt+" is taken too)")
				continue
			}
			taken[alt] = true
			out[i].Name = alt
			c.Renamed = append(c.Renamed, out[i].URL()+" -> "+alt)
		}
		cols = append(cols, c)
	}
	if len(drop) > 0 {
		kept := out[:0]
		for i, u := range out {
			if !drop[i] {
				kept = append(kept, u)
			}
		}
		out = kept
	}
	return out, cols
}

// ErrNoUpload is Latest's error when no candidate opens (or there is none).
var ErrNoUpload = errors.New("no finished upload found")

// DefaultLatestSkew is the clock-skew allowance Latest uses when given 0.
const DefaultLatestSkew = 5 * time.Minute

// Latest picks, among uploads, the one with the newest manifest created_at,
// opening only the newest candidates. A manifest is written after its upload
// started, so created_at <= LastModified (allowing skew for clocks): the
// candidates are opened newest-LastModified first, and the search stops at
// the first candidate whose LastModified is older than the best created_at
// found minus skew. Usually that is one Open.
//
// open opens (or returns an already open) archive for an upload; archives
// it returns that are not chosen remain the caller's. A candidate that fails
// to open (encrypted by content, corrupt, broken chain, missing objects) is
// skipped with the error as the reason. Ties on created_at go to the later
// LastModified, then the larger manifest key. It is an error when no
// candidate opens.
func Latest(ctx context.Context, uploads []Upload, skew time.Duration,
	open func(context.Context, Upload) (*archiveview.Archive, error)) (*archiveview.Archive, Upload, []Skipped, error) {
	if skew <= 0 {
		skew = DefaultLatestSkew
	}
	cands := slices.Clone(uploads)
	slices.SortFunc(cands, func(a, b Upload) int {
		if c := b.LastModified.Compare(a.LastModified); c != 0 {
			return c
		}
		return strings.Compare(b.ManifestKey, a.ManifestKey)
	})
	var (
		best    *archiveview.Archive
		bestU   Upload
		skipped []Skipped
	)
	for _, c := range cands {
		if best != nil && c.LastModified.Before(best.Created().Add(-skew)) {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, Upload{}, skipped, err
		}
		a, err := open(ctx, c)
		if err != nil {
			if ctx.Err() != nil {
				return nil, Upload{}, skipped, ctx.Err()
			}
			skipped = append(skipped, Skipped{Bucket: c.Bucket, Key: c.ManifestKey, Reason: err.Error()})
			continue
		}
		if best == nil || a.Created().After(best.Created()) {
			best, bestU = a, c
		}
	}
	if best == nil {
		if len(cands) == 0 {
			return nil, Upload{}, skipped, ErrNoUpload
		}
		return nil, Upload{}, skipped, fmt.Errorf("%w: none of %d finished uploads could be opened", ErrNoUpload, len(cands))
	}
	return best, bestU, skipped, nil
}

// listProgress is store.List that ends, with an error wrapping
// backend.ErrUnavailable, once idle (if > 0) passes with no object listed
// (from the start, or from the last object).
func listProgress(ctx context.Context, store backend.Store, bucket, prefix string, idle time.Duration, fn func(backend.ObjectInfo) error) error {
	if idle <= 0 {
		return store.List(ctx, bucket, prefix, fn)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stalled := fmt.Errorf("no object listed for %s (--open-timeout): %w", idle, backend.ErrUnavailable)
	t := time.AfterFunc(idle, func() { cancel(stalled) })
	defer t.Stop()
	err := store.List(lctx, bucket, prefix, func(oi backend.ObjectInfo) error {
		t.Reset(idle)
		return fn(oi)
	})
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(lctx), stalled) {
		return fmt.Errorf("%w (%w)", stalled, err)
	}
	return err
}
