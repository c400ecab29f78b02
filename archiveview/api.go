// Package archiveview is wharf's read core. It turns one CargoShip upload
// (a manifest plus chunk objects in a backend.Store) into a read-only tree of
// virtual files: keys, sizes, times, ETags, and verified bytes for any range.
//
// The flow is: load and validate the manifest (package manifest), resolve the
// tree (source-relative keys, split parts, duplicates, incremental chains with
// tombstones; resolve.go), build a sorted index (index.go; seek by prefix or
// marker, synthesized directories), and serve byte ranges by mapping them to
// chunk extents (read.go), whose bytes come verified from the chunk layer
// (package chunkio). One read path serves every caller: GET and HEAD, Verify,
// the version history and the bench.
//
// Rooms of the read core, each a package:
//
//	archiveview            Archive: Open (one constructor), resolve, index,
//	                       List, versions, read, Verify, the persistent index
//	archiveview/manifest   the manifest schema, decoding, limits, and the one
//	                       frame-table rule (CheckFrames)
//	archiveview/chunkio    chunks, frames, fetching, the frame cache, tar walks
//	archiveview/catalog    bucket names <-> archives: discovery, aliases, rescans
//	archiveview/cargopack  the CargoShip writer (wharf pack, the demo, tests)
package archiveview

import (
	"time"
)

// File is one virtual object of an archive, as listings, HEAD and GET show it.
// It is a small value; idx ties it back to the archive's index.
type File struct {
	Key         string    // virtual key, relative to the upload's source_path
	Size        int64     // bytes
	ModTime     time.Time // from the manifest's mod_time
	ETag        string    // unquoted; the MD5 (content_hash) when known, else a sha256-derived tag
	SHA256      string    // lowercase hex of the whole file, "" when the manifest has none
	ContentType string    // manifest magika_mime when present, else ""
	// VersionID is the S3 version id of this file: the upload id of the
	// manifest that wrote it (for a single upload, its upload id).
	VersionID string

	idx int32
	ver int32 // 0: idx is in the archive's tree; L > 0: an older version, in chain link L's history index (versions.go)
}

// ListParams selects one page of a listing.
type ListParams struct {
	Prefix    string // only keys starting with Prefix
	Delimiter string // "" = no roll-up; any string otherwise
	// After is exclusive: entries (keys or rolled-up common prefixes) that
	// sort <= After are skipped. A common prefix equal to After skips every
	// key under it. This serves marker, start-after and continuation tokens.
	After   string
	MaxKeys int // entries to return at most (keys + common prefixes); 0 = none
}

// ListEntry is a key or a common prefix, in one byte-ordered sequence.
type ListEntry struct {
	Prefix string // non-empty for a common prefix (then File is zero)
	File   File
}

// Name returns the entry's key or common prefix.
func (e ListEntry) Name() string {
	if e.Prefix != "" {
		return e.Prefix
	}
	return e.File.Key
}

// ListResult is one page. When Truncated, NextAfter is the Name of the last
// entry returned; passing it as After continues the listing.
type ListResult struct {
	Entries   []ListEntry
	Truncated bool
	NextAfter string
}
