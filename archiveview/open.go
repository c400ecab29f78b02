package archiveview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
// and never lists the bucket. Every error names the archive (opts.Name, else
// the upload id) and the manifest key. With opts.IndexCache set, Open
// first tries the persistent index recorded for the manifest (persist.go):
// HEAD requests only, no manifest GET, when every manifest it was built
// from is unchanged.
func Open(ctx context.Context, store backend.Store, bucket, manifestKey string, opts Options) (*Archive, error) {
	if opts.IndexCache != nil {
		return openIndexCached(ctx, store, bucket, manifestKey, opts) // persist.go
	}
	name := opts.Name
	fail := func(err error) error {
		n := name
		if n == "" {
			if _, id, ok := manifest.UploadDir(manifestKey); ok {
				n = id
			}
		}
		return fmt.Errorf("archive %q (manifest %s/%s): %w", n, bucket, manifestKey, err)
	}
	fs := newFileStore()
	top, err := fetchManifest(ctx, store, bucket, manifestKey, opts.Limits, fs)
	if err != nil {
		return nil, fail(err)
	}
	if name == "" {
		name = top.uploadID
	}
	chain, err := loadChain(ctx, store, bucket, top, opts.Limits, fs)
	if err != nil {
		return nil, fail(err)
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
		return nil, fail(err)
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
	opts.Name = name
	a := newArchive(tree{
		uploadID: top.uploadID,
		version:  top.m.Version,
		created:  top.m.CreatedAt,
		region:   top.m.Region,
		chain:    ids,
		chunks:   chunks,
		idx:      idx,
		shapes:   shapes,
		warnings: r.warnings,
	}, store, bucket, manifestKey, opts, nil)
	a.log.Info().Str("archive", name).Str("manifest", manifestKey).Str("upload_id", a.uploadID).
		Int("chain", len(ids)).Int("files", idx.n()).Int("chunks", len(chunks)).Int("frames", idx.frames).
		Strs("shapes", shapes).Int("warnings", len(r.warnings)).Msg("archive opened")
	for _, w := range r.warnings {
		a.log.Warn().Str("archive", name).Msg(w)
	}
	return a, nil
}

// fetchManifest GETs one manifest and streams its entries into fs (the
// chain's next link).
func fetchManifest(ctx context.Context, store backend.Store, bucket, key string, lim manifest.Limits, fs *fileStore) (chainLink, error) {
	rc, _, err := store.Get(ctx, bucket, key)
	if err != nil {
		return chainLink{}, fmt.Errorf("get manifest %s: %w", key, err)
	}
	defer rc.Close()
	l := chainLink{key: key}
	sink := newLinkSink(fs, &l)
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
		if err := manifest.CheckUploadID(prev); err != nil {
			return nil, fmt.Errorf("%w: manifest %s names previous_manifest_id %q: %w", ErrBrokenChain, cur.key, prev, err)
		}
		if k, ok := seen[prev]; ok {
			return nil, fmt.Errorf("%w: manifest %s names previous_manifest_id %q, which is manifest %s again (cycle)",
				ErrBrokenChain, cur.key, prev, k)
		}
		if len(chain) > maxDepth {
			return nil, fmt.Errorf("%w: manifest %s names previous_manifest_id %q beyond the chain depth limit of %d",
				ErrBrokenChain, cur.key, prev, maxDepth)
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
				return nil, fmt.Errorf("%w: ancestor %q of manifest %s: %w", ErrBrokenChain, prev, cur.key, err)
			}
			got, found = l, true
			break
		}
		if !found {
			return nil, fmt.Errorf("%w: ancestor %q of manifest %s not found (tried %s): %w",
				ErrBrokenChain, prev, cur.key, strings.Join(cands, ", "), backend.ErrNotFound)
		}
		if got.m.UploadID != "" && got.m.UploadID != prev {
			return nil, fmt.Errorf("%w: manifest %s (ancestor %q of manifest %s) says upload_id %q",
				ErrBrokenChain, got.key, prev, cur.key, got.m.UploadID)
		}
		got.uploadID = prev
		seen[prev] = got.key
		chain = append(chain, got)
	}
}

// Name is the display name (the served bucket name).
func (a *Archive) Name() string { return a.name }

// UploadID is the newest upload id of the chain.
func (a *Archive) UploadID() string { return a.uploadID }

// Created is the newest manifest's created_at (ListBuckets CreationDate).
func (a *Archive) Created() time.Time { return a.created }

// Region is the manifest's region ("" if absent).
func (a *Archive) Region() string { return a.region }
