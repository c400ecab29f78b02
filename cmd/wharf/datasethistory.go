package main

// A published dataset's version history for the CLI (ls --versions,
// inspect): the same walk as wharf serve's (catalog.BuildHistory), the
// older versions opened one at a time through the store flags.

import (
	"context"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
)

// historyCurrent is the history's newest version: the one the target
// names.
func (t target) historyCurrent(a *archiveview.Archive) (catalog.HistoryVersion, string) {
	p := t.dataset.Pointer
	return catalog.HistoryVersion{ID: p.VersionID, ManifestKey: t.key, Created: a.Created()}, p.PreviousVersionID
}

// history builds the version history of the dataset version t names, a
// its open archive, with at most limit versions.
func (t target) history(ctx context.Context, a *archiveview.Archive, limit int) (*catalog.DatasetHistory, error) {
	cur, prev := t.historyCurrent(a)
	return catalog.BuildHistory(ctx, catalog.HistoryParams{
		Store: t.store, Ref: t.dataset.Ref, Current: cur, Archive: a, Previous: prev, Limit: limit,
		Open: func(ctx context.Context, v catalog.HistoryVersion) (*archiveview.Archive, error) {
			return archiveview.Open(ctx, t.store, t.bucket, v.ManifestKey, t.options(archiveview.Options{}))
		},
		Close: func(old *archiveview.Archive, _ bool) { _ = old.Close() },
	})
}
