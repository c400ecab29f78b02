// Package archiveview is wharf's read core. It turns one CargoShip upload
// (a manifest plus chunk objects in a backend.Store) into a read-only tree of
// virtual files: keys, sizes, times, ETags, and verified bytes for any range.
//
// The flow is: load and validate the manifest (package manifest), resolve the
// tree (source-relative keys, split parts, duplicates, incremental chains with
// tombstones; resolve.go), build a sorted index (internal/index; seek by prefix or
// marker, synthesized directories), and serve byte ranges by mapping them to
// chunk extents (read.go), whose bytes come verified from the chunk layer
// (package chunkio). One read path serves every caller: GET and HEAD, Verify,
// the version history and the bench.
//
// Rooms of the read core, each a package:
//
//	archiveview            Archive: Open, resolve, newArchive (the one
//	                       constructor), versions, read, Verify, storage
//	                       classes, the persistent index's cache flow
//	archiveview/internal/index
//	                       the tree as columns, Stat/List queries, the index
//	                       file (format, encode, decode, mmap, provenance)
//	archiveview/manifest   the manifest schema, decoding, limits, the one
//	                       frame-table rule (CheckFrames) and the one
//	                       confinement rule (KeyRoot, Confined)
//	archiveview/chunkio    chunks, frames, fetching, the frame cache, tar walks
//	archiveview/catalog    bucket names <-> archives: discovery, aliases, rescans
//	archiveview/cargopack  the CargoShip writer (wharf pack, the demo, tests)
package archiveview

import (
	"github.com/wharf-s3/wharf/archiveview/internal/index"
)

// File is one virtual object of an archive, as listings, HEAD and GET
// show it (index.File: the index builds it).
type File = index.File

// ListParams selects one page of a listing.
type ListParams = index.ListParams

// ListEntry is a key or a common prefix, in one byte-ordered sequence.
type ListEntry = index.ListEntry

// ListResult is one page (index.ListResult).
type ListResult = index.ListResult
