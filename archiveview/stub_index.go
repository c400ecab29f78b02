package archiveview

// PLACEHOLDER owned by the resolver/index half: replace this file with
// index.go, open.go, resolve.go, list.go implementing the methods below.

import (
	"context"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

type index struct{}

// Open loads the manifest at bucket/manifestKey from store (gzip sniffed),
// validates it, follows the previous_manifest_id chain, resolves the tree and
// builds the index. Every error names the manifest key.
func Open(ctx context.Context, store backend.Store, bucket, manifestKey string, opts Options) (*Archive, error) {
	panic("archiveview.Open: not implemented yet")
}

// Name is the display name (the served bucket name).
func (a *Archive) Name() string { return a.name }

// UploadID is the newest upload id of the chain.
func (a *Archive) UploadID() string { return a.uploadID }

// Created is the newest manifest's created_at (ListBuckets CreationDate).
func (a *Archive) Created() time.Time { return a.created }

// Region is the manifest's region ("" if absent).
func (a *Archive) Region() string { return a.region }

// Stat looks a key up in O(log n).
func (a *Archive) Stat(key string) (File, bool) { panic("not implemented yet") }

// List returns one page in O(log n + page).
func (a *Archive) List(p ListParams) ListResult { panic("not implemented yet") }

// Info summarizes the archive.
func (a *Archive) Info() Info { panic("not implemented yet") }

// fileExtents returns the pieces of file idx in file order.
func (a *Archive) fileExtents(idx int32) []extent { panic("not implemented yet") }
