package s3api

import (
	"sort"

	"github.com/wharf-s3/wharf/archiveview"
)

// Catalog says which archives are served under which bucket names. It is
// consulted on every request, so an implementation may swap archives (aliases,
// rescans) while serving. Implementations must be safe for concurrent use.
type Catalog interface {
	// Bucket returns the archive served as bucket name.
	Bucket(name string) (*archiveview.Archive, bool)
	// Buckets returns every served archive, each reporting its bucket name
	// through Name(). Order does not matter; ListBuckets sorts by name.
	Buckets() []*archiveview.Archive
}

// StaticCatalog is a fixed bucket-name → archive map.
type StaticCatalog struct {
	byName map[string]*archiveview.Archive
	names  []string
}

// NewStaticCatalog serves each archive of m under its map key. The map is
// copied; later changes to m have no effect.
func NewStaticCatalog(m map[string]*archiveview.Archive) *StaticCatalog {
	c := &StaticCatalog{byName: make(map[string]*archiveview.Archive, len(m))}
	for name, a := range m {
		if a == nil {
			continue
		}
		c.byName[name] = a
		c.names = append(c.names, name)
	}
	sort.Strings(c.names)
	return c
}

// Bucket implements Catalog.
func (c *StaticCatalog) Bucket(name string) (*archiveview.Archive, bool) {
	a, ok := c.byName[name]
	return a, ok
}

// Buckets implements Catalog. The bucket name of each entry is the map key
// it was registered under; see BucketNames for the pairing.
func (c *StaticCatalog) Buckets() []*archiveview.Archive {
	out := make([]*archiveview.Archive, 0, len(c.names))
	for _, n := range c.names {
		out = append(out, c.byName[n])
	}
	return out
}

// BucketNames returns the served bucket names in byte order.
func (c *StaticCatalog) BucketNames() []string {
	return append([]string(nil), c.names...)
}
