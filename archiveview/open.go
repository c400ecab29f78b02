package archiveview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// ErrBrokenChain is wrapped by errors about the previous_manifest_id chain:
// a missing ancestor, a cycle, a chain deeper than the limit. A broken chain
// is never served as a partial tree.
var ErrBrokenChain = errors.New("broken manifest chain")

// Open loads the manifest at bucket/manifestKey from store (gzip sniffed),
// validates it, follows the previous_manifest_id chain, resolves the tree and
// builds the index. It reads the manifests only (one GET each, newest first)
// and never lists the bucket, unless opts.StorageClasses asks it to learn
// the objects' storage classes (one listing of each upload prefix;
// RefreshStorageClasses). Every error is an *OpenError naming the archive
// (opts.Name, else the upload id) and the manifest. With opts.IndexCache
// set, Open
// first tries the persistent index recorded for the manifest (persist.go):
// HEAD requests only, no manifest GET, when every manifest it was built
// from is unchanged.
func Open(ctx context.Context, store backend.Store, bucket, manifestKey string, opts Options) (*Archive, error) {
	var (
		a     *Archive
		err   error
		ahead chan chunkio.Listing
	)
	if opts.StorageClasses {
		// The manifest's own upload prefix holds its chunks (and, for a
		// chain, the newest ones): list it while the manifests are read,
		// so the storage classes cost no extra round trip.
		// A failed open stops it (cancel) rather than wait for it.
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ahead = make(chan chunkio.Listing, 1)
		go func() { ahead <- chunkio.ListAhead(lctx, store, bucket, chunkio.UploadPrefixOf(manifestKey)) }()
	}
	if opts.IndexCache != nil {
		a, err = openIndexCached(ctx, store, bucket, manifestKey, opts) // persist.go
	} else {
		a, err = openManifests(ctx, store, bucket, manifestKey, opts)
	}
	if !opts.StorageClasses || err != nil {
		return a, err
	}
	listed := <-ahead
	if err := a.refreshStorageClasses(ctx, listed); err != nil {
		if ctx.Err() != nil {
			a.Close()
			return nil, err
		}
		// Not fatal: objects the listing did not cover are HEADed when needed.
		a.log.Warn().Err(err).Str("archive", a.name).Msg("storage classes: listing failed; using HEAD requests")
	}
	return a, nil
}

// openManifests is Open without a persistent index.
func openManifests(ctx context.Context, store backend.Store, bucket, manifestKey string, opts Options) (*Archive, error) {
	t, name, err := resolveManifests(ctx, store, bucket, manifestKey, opts)
	if err != nil {
		return nil, err
	}
	opts.Name = name
	return opened(newArchive(t, store, bucket, manifestKey, opts, nil, nil, nil)), nil
}

// resolveManifests reads the manifest at bucket/manifestKey and its chain
// from read and resolves the tree; name is the archive's display name
// (opts.Name, else the newest upload id). Errors are *OpenError.
func resolveManifests(ctx context.Context, read backend.Store, bucket, manifestKey string, opts Options) (t index.Tree, name string, err error) {
	name = opts.Name
	fail := func(err error) error {
		n := name
		if n == "" {
			if _, id, ok := manifest.UploadDir(manifestKey); ok {
				n = id
			}
		}
		return &OpenError{Archive: n, Manifest: objectURL(bucket, manifestKey), Err: err}
	}
	fs := newFileStore()
	top, err := fetchManifest(ctx, read, bucket, manifestKey, opts.Limits, fs)
	if err != nil {
		return index.Tree{}, "", fail(err)
	}
	if name == "" {
		name = top.uploadID
	}
	chain, err := loadChain(ctx, read, bucket, top, opts.Limits, fs)
	if err != nil {
		return index.Tree{}, "", fail(err)
	}

	r := newResolver(bucket, manifestKey, chain, fs, opts)
	for _, l := range chain {
		for _, w := range l.m.Warnings {
			r.warnf("manifest %s: %s", l.key, w)
		}
		if !l.verify {
			r.warnf("manifest %s: checksum_algorithm %q is not sha256: its checksums are not verified", l.key, l.m.ChecksumAlgorithm)
		}
	}
	idx, chunks, err := r.build()
	if err != nil {
		return index.Tree{}, "", fail(err)
	}
	shapes := make([]string, 0, len(r.shapes))
	for s := range r.shapes {
		shapes = append(shapes, s)
	}
	slices.Sort(shapes)

	ids := make([]string, len(chain))
	for i, l := range chain {
		ids[i] = l.uploadID
	}
	return index.Tree{
		Upload:     top.uploadID,
		Version:    top.m.Version,
		CreatedAt:  top.m.CreatedAt,
		RegionName: top.m.Region,
		Chain:      ids,
		Chunks:     chunks,
		Idx:        idx,
		Shapes:     shapes,
		Warnings:   r.warnings,
	}, name, nil
}

// printableLog is s, a log message that names keys (a store listing's or
// an uploader's bytes), with every unprintable rune escaped ("\n",
// "\x1b", "\u202e", an invalid byte as "\xff"): zerolog's console format
// writes a message as is, so a key holding a newline forged log lines and
// one holding an escape sequence acted on the operator's terminal. Fields
// need none of this (both formats quote them). backend.PrintableText is
// the one rule.
func printableLog(s string) string { return backend.PrintableText(s, 0) }

// maxLoggedUploadID bounds an upload id in a log line (as
// catalog's label of it).
const maxLoggedUploadID = 128

// opened logs an archive resolved from its manifests and returns it.
func opened(a *Archive) *Archive {
	// The upload id is the manifest's (any length, any printable or
	// unprintable rune): cut as its metric label is, and escaped.
	a.log.Info().Str("archive", a.name).Str("manifest", a.manifestKey).Str("upload_id", backend.PrintableText(a.tree.Upload, maxLoggedUploadID)).
		Int("chain", len(a.tree.Chain)).Int("files", a.tree.Idx.N()).Int("chunks", len(a.tree.Chunks)).Int("frames", a.tree.Idx.Frames).
		Strs("shapes", a.tree.Shapes).Int("warnings", len(a.tree.Warnings)).Msg("archive opened")
	for _, w := range a.tree.Warnings {
		a.log.Warn().Str("archive", a.name).Msg(printableLog(w))
	}
	return a
}

// fetchManifest GETs one manifest and streams its entries into fs (the
// chain's next link).
func fetchManifest(ctx context.Context, store backend.Store, bucket, key string, lim manifest.Limits, fs *fileStore) (chainLink, error) {
	rc, _, err := store.Get(ctx, bucket, key)
	if err != nil {
		return chainLink{}, err // the store's error names the object
	}
	defer rc.Close()
	l := chainLink{key: key}
	sink := newLinkSink(fs, &l)
	sink.maxFiles = lim.WithDefaults().MaxFiles
	m, err := manifest.Stream(rc, key, lim, manifest.StreamFuncs{Head: sink.head, Files: sink.file, Deleted: sink.deleted, Path: sink.path})
	if err != nil {
		return chainLink{}, err
	}
	if err := sink.finish(m); err != nil {
		return chainLink{}, err
	}
	l.uploadID, l.m = m.UploadID, m
	if l.uploadID == "" {
		if _, id, ok := manifest.UploadDir(key); ok {
			l.uploadID = id
		}
	}
	alg := strings.ToLower(m.ChecksumAlgorithm)
	l.verify = alg == "" || alg == "sha256"
	return l, nil
}

// loadChain follows previous_manifest_id from top, newest first. Ancestors
// are looked up in the same bucket under the same prefix as the manifest
// that names them (ManifestKeyCandidates of UploadDir of its key, else of
// its prefix field). A cycle, a missing ancestor or more ancestors than
// lim.MaxChainDepth is an error naming both manifests.
func loadChain(ctx context.Context, store backend.Store, bucket string, top chainLink, lim manifest.Limits, fs *fileStore) ([]chainLink, error) {
	maxDepth := lim.WithDefaults().MaxChainDepth
	chain := []chainLink{top}
	seen := map[string]string{top.uploadID: top.key}
	for {
		cur := chain[len(chain)-1]
		prev := cur.m.PreviousManifestID
		if prev == "" {
			return chain, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The error around these (OpenError) names the top manifest; an
		// older one is named here.
		names := "its previous_manifest_id"
		if len(chain) > 1 {
			names = "previous_manifest_id of manifest " + cur.key
		}
		if err := manifest.CheckUploadID(prev); err != nil {
			return nil, fmt.Errorf("%w: %s %q: %w", ErrBrokenChain, names, prev, err)
		}
		if k, ok := seen[prev]; ok {
			return nil, fmt.Errorf("%w: %s %q is manifest %s again (cycle)", ErrBrokenChain, names, prev, k)
		}
		if len(chain) > maxDepth {
			return nil, fmt.Errorf("%w: %s %q is beyond the chain depth limit of %d", ErrBrokenChain, names, prev, maxDepth)
		}
		prefix := cur.m.Prefix
		if dir, _, ok := manifest.UploadDir(cur.key); ok {
			prefix = dir
		}
		cands := manifest.ManifestKeyCandidates(prefix, prev)
		var (
			got   chainLink
			found bool
		)
		for _, k := range cands {
			l, err := fetchManifest(ctx, store, bucket, k, lim, fs)
			if errors.Is(err, backend.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%w: upload %q (%s): %w", ErrBrokenChain, prev, names, err)
			}
			got, found = l, true
			break
		}
		if !found {
			return nil, &chainNotFound{msg: fmt.Sprintf("%s: upload %q (%s) not found: tried %s (check that the older upload was not deleted)",
				ErrBrokenChain, prev, names, strings.Join(cands, ", "))}
		}
		if got.m.UploadID != "" && got.m.UploadID != prev {
			return nil, fmt.Errorf("%w: manifest %s of upload %q (%s) says upload_id %q",
				ErrBrokenChain, got.key, prev, names, got.m.UploadID)
		}
		got.uploadID = prev
		seen[prev] = got.key
		chain = append(chain, got)
	}
}

// Name is the display name (the served bucket name).
func (a *Archive) Name() string { return a.name }

// UploadID is the newest upload id of the chain.
func (a *Archive) UploadID() string { return a.tree.Upload }

// Created is the newest manifest's created_at (ListBuckets CreationDate).
func (a *Archive) Created() time.Time { return a.tree.CreatedAt }

// Region is the manifest's region ("" if absent).
func (a *Archive) Region() string { return a.tree.RegionName }

// chainNotFound is a missing ancestor: its text says "broken manifest
// chain ... not found" once, and it unwraps to both ErrBrokenChain and
// backend.ErrNotFound.
type chainNotFound struct{ msg string }

func (e *chainNotFound) Error() string   { return e.msg }
func (e *chainNotFound) Unwrap() []error { return []error{ErrBrokenChain, backend.ErrNotFound} }

// objectURL names a store object as users write it: s3://BUCKET/KEY (also
// for a file:// store, whose objects are DIR/BUCKET/KEY).
func objectURL(bucket, key string) string { return "s3://" + bucket + "/" + key }

// OpenError is the error of Open. It reads once per fact: which archive,
// which manifest, what happened, and (when wharf can tell) what to check:
//
//	archive "bad": manifest s3://perf/nope/manifest.json.gz not found (check the URL and that the upload finished)
//
// Err is the whole cause chain: errors.Is and errors.As reach every
// sentinel under it (backend.ErrNotFound and the other store sentinels,
// the manifest package's, ErrBrokenChain, ErrInvalidTree) and the store's
// own error types.
type OpenError struct {
	Archive  string // display name; "" when neither given nor known from the key
	Manifest string // s3://BUCKET/KEY of the manifest Open was given
	Err      error
}

func (e *OpenError) Unwrap() error { return e.Err }

func (e *OpenError) Error() string {
	var b strings.Builder
	if e.Archive != "" {
		fmt.Fprintf(&b, "archive %q: ", e.Archive)
	}
	b.WriteString("manifest ")
	b.WriteString(e.Manifest)
	var me *manifest.Error
	sf, isStore := backend.Describe(e.Err)
	switch {
	case isStore && objectURL(sf.Bucket, sf.Key) == e.Manifest:
		b.WriteString(storeFailure(sf.Kind, sf.Detail, "check the URL and that the upload finished"))
	case errors.As(e.Err, &me) && me.Kind != nil && objectURL(urlBucket(e.Manifest), me.Key) == e.Manifest:
		b.WriteString(manifestFailure(me))
	default:
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// urlBucket is the bucket of an s3://BUCKET/KEY URL.
func urlBucket(url string) string {
	bucket, _, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/")
	return bucket
}

// storeFailures is the one table of what a store failure means for an
// object the archive needs (the caller names the object first) and what
// to check. A missing object's check depends on the object (the caller's).
var storeFailures = []struct {
	kind        error
	what, check string
}{
	{backend.ErrNotFound, " not found", ""},
	{backend.ErrAccessDenied, ": access denied", "check the store credentials and the bucket policy, or a file store's permissions"},
	{backend.ErrUnavailable, ": store unavailable", "check the S3 endpoint and the network, then try again"},
	{backend.ErrBadResponse, ": unusable answer from the store", "check that the S3 endpoint is an S3 server"},
	{backend.ErrChanged, ": changed while being read", "the upload was rewritten; open the archive again"},
	{backend.ErrInvalidRange, ": shorter than the manifest says", "the object was truncated or replaced"},
}

// storeFailure renders what happened to an object: " not found: DETAIL
// (CHECK)" and the like; notFound is what to check when it is missing.
func storeFailure(kind error, detail, notFound string) string {
	what, check := "", ""
	for _, f := range storeFailures {
		if f.kind == kind {
			what, check = f.what, f.check
			break
		}
	}
	if kind == backend.ErrNotFound {
		check = notFound
	}
	var b strings.Builder
	if what == "" {
		what = ":" // a context error or another kind: the detail says it
	}
	b.WriteString(what)
	if detail != "" {
		if what != ":" {
			b.WriteString(":")
		}
		b.WriteString(" ")
		b.WriteString(detail)
	}
	if check != "" {
		b.WriteString(" (" + check + ")")
	}
	return b.String()
}

// manifestFailure renders a manifest that was read but cannot be used.
func manifestFailure(me *manifest.Error) string {
	var what, check string
	switch {
	case errors.Is(me, manifest.ErrInvalid):
		what, check = " is not a valid manifest: ", "check that the URL names the manifest of a finished CargoShip upload"
	case errors.Is(me, manifest.ErrTooLarge):
		what = " exceeds a manifest limit: "
	case errors.Is(me, manifest.ErrEncrypted):
		what = " cannot be read: "
	case errors.Is(me, manifest.ErrVersion):
		what = " has an unsupported version: "
	}
	s := what + me.Msg
	if me.Cause != nil {
		s += ": " + me.Cause.Error()
	}
	if check != "" {
		s += " (" + check + ")"
	}
	return s
}

// ErrOpening is wrapped by the error a catalog returns for a bucket whose
// archive is still being opened after the caller waited as long as it may
// (s3api answers 503 SlowDown with Retry-After).
var ErrOpening = errors.New("archive still opening")
