package s3api

import (
	"context"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
)

// Catalog says which archives are served under which bucket names. It is
// consulted on every request, so an implementation may swap archives (aliases,
// rescans) while serving, and may list a bucket whose archive is still being
// opened. Implementations must be safe for concurrent use. Package
// archiveview/catalog provides them (a static map, and the dynamic catalog of
// discovery, aliases and rescans).
type Catalog interface {
	// Bucket returns the archive served as bucket name. ok is false when
	// no such bucket is served. A bucket whose archive is still opening may
	// make the call wait (bounded by the implementation and by ctx); err is
	// then one wrapping archiveview.ErrOpening if it is still not open
	// (503 SlowDown with Retry-After), or the open's own error if the
	// archive could not be opened (500, or 503 SlowDown when it has a
	// Transient method that says so; the error is logged, and only its
	// PublicMessage, when it has one, reaches the client).
	Bucket(ctx context.Context, name string) (a *archiveview.Archive, ok bool, err error)
	// EachBucket calls fn for every served bucket, in byte order of name,
	// those still opening included (ListBuckets).
	EachBucket(fn func(name string, created time.Time))
}
