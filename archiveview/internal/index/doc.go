// Package index is the room of an archive's index: the resolved tree as
// columns (Index, a struct of arrays sorted by key in byte order), its
// queries (Stat, List, DeleteMarker, a file's extents), and the
// persistent index file: the format (format.go; its meta fields
// metafields.go, its trailer treehash.go), the encoder (Write), the
// decoder (Decode, Map: it returns a Tree, never an archive; the tree's
// invariants check.go), the mmap lifetime of a file served in place
// (mapping.go), the provenance that says whether a file is still fresh
// (provenance.go), and the MAC trailer that authenticates a file shared
// through an S3 index cache (mac.go).
//
// The package knows chunks (chunkio) and the manifest's key rules
// (manifest), not stores of archives: archiveview builds an Archive from
// the Tree this package decodes, in one place (newArchive).
//
// A file is never trusted. Decode checks, before anything is used: the
// length, magic and version, then the tree hash over the whole file, then
// the header's counts, padding and reserved bytes, then every count of the
// meta section against the bytes left, then the tree: every invariant the
// resolver guarantees, and every rule the manifest path applies to keys
// (manifest.CheckObjectKey and manifest.Confined on every chunk and direct
// key, manifest.CheckVirtualKey on every file and tombstone key). A loaded
// index can describe only what a manifest could. Any violation is an error
// wrapping ErrBadIndex that names the file and what is wrong.
//
// A file mapped in place that is truncated under the server (written in
// place by something else) does not kill the process: readers of the
// mapping turn the fault into an error wrapping ErrFileChanged (mapping.go).
//
// # Format versions
//
// Every value written to disk is marked "append only" at its definition
// (the flag* bits, the col* bits, the sec* order, chunkio.Kind,
// chunkio.UnitKind): reordering or reusing one changes the meaning of
// files already written. A change of layout or meaning takes a new
// version number, a row here, and a new golden file in testdata (the
// golden file of each version a wharf reads stays pinned and is tested
// byte for byte).
//
//	version  read   layout
//	1        no     WHARFIDX v1 (commit 4993ecb): read whole into memory
//	2        no     read whole into memory (superseded by version 3)
//	3        yes    columns at 64-byte aligned offsets fixed by the
//	                header's counts, used in place (mapped); meta section;
//	                sha256 tree hash trailer (commit ae9dedd);
//	                testdata/golden.widx pins it
//
// Versions 1 and 2 are refused with ErrBadIndex (Open then rebuilds the
// index from the manifests).
package index
