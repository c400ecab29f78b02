package index

import (
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// Extent is one contiguous piece of a virtual file inside one chunk.
type Extent struct {
	Chunk   int32  // index into the archive's chunks
	FileOff int64  // where this piece starts in the virtual file
	Off     int64  // data offset in the chunk's tar stream (object offset for direct); -1 = unknown
	Length  int64  // bytes
	TarName string // expected tar entry name (path or path.partN); "" for direct objects
	Sum     [32]byte
	HasSum  bool // sha256 of exactly this piece (split parts only)
}

// Tree is everything that describes an archive's content, as the resolver,
// the index loader or the version history built it.
type Tree struct {
	Upload     string // the newest upload id
	Version    string // the newest manifest's version
	CreatedAt  time.Time
	RegionName string   // the manifest's region
	Chain      []string // upload ids, newest first
	Chunks     []chunkio.Chunk
	Idx        Index
	Shapes     []string
	Warnings   []string
}

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
	ver int32 // 0: idx is in the archive's tree; L > 0: an older version, in chain link L's history index (archiveview's versions.go)
}

// Ordinal is f's position in its index (File.idx).
func Ordinal(f File) int32 { return f.idx }

// Link is f's version reference: 0 for a file of the archive's tree, L > 0
// for an older version kept in chain link L's history index.
func Link(f File) int32 { return f.ver }

// WithOrdinal returns f with position i in its index.
func WithOrdinal(f File, i int32) File {
	f.idx = i
	return f
}

// WithLink returns f marked as an older version of chain link l.
func WithLink(f File, l int32) File {
	f.ver = l
	return f
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
	// MaxNameBytes > 0 also ends the page (truncated) before an entry once
	// the names returned total at least MaxNameBytes, so a page of long
	// keys stays bounded in bytes as S3 allows (a page may hold fewer than
	// max-keys entries). At least one entry is always returned.
	MaxNameBytes int
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
