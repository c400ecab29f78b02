package s3api

import "github.com/wharf-s3/wharf/archiveview"

// Catalog says which archives are served under which bucket names. It is
// consulted on every request, so an implementation may swap archives (aliases,
// rescans) while serving. Implementations must be safe for concurrent use.
// Package archiveview/catalog provides the implementations (a static map,
// and the dynamic catalog of discovery, aliases and rescans).
type Catalog interface {
	// Bucket returns the archive served as bucket name.
	Bucket(name string) (*archiveview.Archive, bool)
	// Buckets returns every served archive, each reporting its bucket name
	// through Name(). Order does not matter; ListBuckets sorts by name.
	Buckets() []*archiveview.Archive
}
