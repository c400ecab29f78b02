package archiveview

// The Archive's queries of its index (package internal/index holds the
// columns and answers them).

import (
	"fmt"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
)

// Stat looks a key up in O(log n).
func (a *Archive) Stat(key string) (File, bool) { return a.tree.Idx.Stat(key) }

// DeleteMarker reports whether key's latest version is a delete marker (a
// later upload of the chain deleted it) and returns that version's id. It
// needs no version history: the tree records which upload deleted which
// key.
func (a *Archive) DeleteMarker(key string) (versionID string, ok bool) {
	return a.tree.Idx.DeleteMarker(key)
}

// Files is the number of virtual files.
func (a *Archive) Files() int { return a.tree.Idx.N() }

// List returns one page of the archive's keys and, with a Delimiter, common
// prefixes, merged in byte order, in O(log n + page):
//
//   - it seeks with a binary search to the first key > After and >= Prefix;
//   - with a Delimiter, a key that holds the Delimiter after Prefix rolls up
//     to its common prefix (Prefix + text up to and including the first
//     Delimiter); the prefix is emitted once and every key under it is
//     skipped with one more binary search, never scanned;
//   - entries <= After are skipped, so a common prefix equal to After skips
//     all its keys (continuation after a rolled-up prefix);
//   - MaxKeys counts keys and prefixes; MaxKeys <= 0 gives an empty, not
//     truncated page; Truncated is set only when another entry exists, and
//     NextAfter is then the Name of the last entry returned.
//
// For an index served from its file mapped in place, a file truncated
// under the server fails the request with a panic whose value wraps
// index.ErrFileChanged (net/http fails that request alone), not the
// process with SIGBUS; Stat and DeleteMarker alike.
func (a *Archive) List(p ListParams) ListResult { return a.tree.Idx.List(p) }

// fileExtents returns the pieces of file idx in file order (a fresh
// slice). A fault reading a mapped index panics with an error wrapping
// index.ErrFileChanged (Index.Must); readExtents returns it instead.
func (a *Archive) fileExtents(idx int32) []extent {
	var exts []extent
	a.tree.Idx.Must(func() {
		exts = a.tree.Idx.Extents(int(idx))
		if a.tree.Idx.Flags[idx]&index.FlagMulti == 0 && a.tree.Chunks[exts[0].Chunk].Kind == chunkio.Direct {
			exts[0].TarName = "" // a direct object has no tar entry
		}
	})
	return exts
}

// readExtents is fileExtents for the read path: a fault reading a mapped
// index (a file truncated under the server) is an error naming the
// archive, the key and the file.
func readExtents(a *Archive, f File) (exts []extent, err error) {
	if err := a.tree.Idx.Guard(func() { exts = a.fileExtents(index.Ordinal(f)) }); err != nil {
		return nil, fmt.Errorf("archive %s: key %s: %w", a.name, f.Key, err)
	}
	return exts, nil
}
