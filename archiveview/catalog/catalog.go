package catalog

import (
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview"
)

// Static is a fixed bucket-name → archive map.
type Static struct {
	byName map[string]*archiveview.Archive
	names  []string
}

// NewStatic serves each archive of m under its map key. The map is
// copied; later changes to m have no effect.
func NewStatic(m map[string]*archiveview.Archive) *Static {
	c := &Static{byName: make(map[string]*archiveview.Archive, len(m))}
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

// Bucket returns the archive served as bucket name (s3api.Catalog).
func (c *Static) Bucket(name string) (*archiveview.Archive, bool) {
	a, ok := c.byName[name]
	return a, ok
}

// Buckets returns every served archive (s3api.Catalog). The bucket name of each entry is the map key
// it was registered under; see BucketNames for the pairing.
func (c *Static) Buckets() []*archiveview.Archive {
	out := make([]*archiveview.Archive, 0, len(c.names))
	for _, n := range c.names {
		out = append(out, c.byName[n])
	}
	return out
}

// BucketNames returns the served bucket names in byte order.
func (c *Static) BucketNames() []string {
	return append([]string(nil), c.names...)
}

// Dynamic is a Catalog whose bucket → archive map can be replaced
// while serving (discovery rescans, "@latest" aliases). The map is held as
// an immutable Static snapshot behind an atomic pointer: a request
// does one atomic load and a map lookup, never a lock, and every request
// sees either the old mapping or the new one, whole. The same archive may be
// served under several names (an alias and its upload's own bucket).
type Dynamic struct {
	cur atomic.Pointer[Static]
}

// NewDynamic starts serving m (copied).
func NewDynamic(m map[string]*archiveview.Archive) *Dynamic {
	c := &Dynamic{}
	c.cur.Store(NewStatic(m))
	return c
}

// Swap replaces the mapping with m (copied) and returns the previous one.
// Requests that already looked up an archive keep using it; closing
// archives that are no longer served is the caller's job, once those
// requests are done (Archive.Close only stops background work, so a late
// close is safe for reads still streaming).
func (c *Dynamic) Swap(m map[string]*archiveview.Archive) map[string]*archiveview.Archive {
	old := c.cur.Swap(NewStatic(m))
	return old.Map()
}

// Map returns a copy of the current mapping.
func (c *Dynamic) Map() map[string]*archiveview.Archive { return c.cur.Load().Map() }

// Map returns a copy of the mapping.
func (c *Static) Map() map[string]*archiveview.Archive {
	out := make(map[string]*archiveview.Archive, len(c.byName))
	for n, a := range c.byName {
		out[n] = a
	}
	return out
}

// Bucket returns the archive served as bucket name (s3api.Catalog).
func (c *Dynamic) Bucket(name string) (*archiveview.Archive, bool) {
	return c.cur.Load().Bucket(name)
}

// Buckets returns every served archive in bucket-name order (s3api.Catalog).
func (c *Dynamic) Buckets() []*archiveview.Archive { return c.cur.Load().Buckets() }

// BucketNames returns the served bucket names in byte order. ListBuckets
// uses it, so an archive served under an alias is listed under each name.
func (c *Dynamic) BucketNames() []string { return c.cur.Load().BucketNames() }

// Collector exports per-bucket gauges for the archives a catalog
// serves at scrape time (so buckets that disappear on a rescan stop being
// exported): wharf_archive_files, wharf_archive_chunks, wharf_archive_frames
// and wharf_archive_index_bytes, labelled by bucket and upload_id. Index
// bytes is the size of the archive's tree in the persistent index format
// (Archive.WriteIndex), a close proxy for the memory it holds; it is computed
// once per archive and remembered.
type Collector struct {
	cat interface {
		BucketNames() []string
		Bucket(string) (*archiveview.Archive, bool)
	}
	files, chunks, frames, index *prometheus.Desc

	mu        sync.Mutex
	indexSize map[*archiveview.Archive]int64
}

// NewCollector returns a collector over c; register it on the
// server's Registerer.
func NewCollector(c interface {
	BucketNames() []string
	Bucket(string) (*archiveview.Archive, bool)
}) *Collector {
	labels := []string{"bucket", "upload_id"}
	return &Collector{
		cat:       c,
		files:     prometheus.NewDesc("wharf_archive_files", "Virtual files of the archive served as the bucket.", labels, nil),
		chunks:    prometheus.NewDesc("wharf_archive_chunks", "Backing objects (chunks and direct objects) of the archive.", labels, nil),
		frames:    prometheus.NewDesc("wharf_archive_frames", "Zstd frames in the archive's frame tables.", labels, nil),
		index:     prometheus.NewDesc("wharf_archive_index_bytes", "Size of the archive's index (persistent format), a proxy for its memory.", labels, nil),
		indexSize: map[*archiveview.Archive]int64{},
	}
}

// Describe implements prometheus.Collector.
func (cc *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.files
	ch <- cc.chunks
	ch <- cc.frames
	ch <- cc.index
}

// Collect implements prometheus.Collector.
func (cc *Collector) Collect(ch chan<- prometheus.Metric) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	live := map[*archiveview.Archive]bool{}
	for _, name := range cc.cat.BucketNames() {
		a, ok := cc.cat.Bucket(name)
		if !ok {
			continue
		}
		live[a] = true
		info := a.Info()
		ch <- prometheus.MustNewConstMetric(cc.files, prometheus.GaugeValue, float64(info.Files), name, info.UploadID)
		ch <- prometheus.MustNewConstMetric(cc.chunks, prometheus.GaugeValue, float64(info.Chunks), name, info.UploadID)
		ch <- prometheus.MustNewConstMetric(cc.frames, prometheus.GaugeValue, float64(info.Frames), name, info.UploadID)
		n, ok := cc.indexSize[a]
		if !ok {
			cw := &countWriter{}
			if err := a.WriteIndex(cw); err != nil {
				n = -1
			} else {
				n = cw.n
			}
			cc.indexSize[a] = n
		}
		if n >= 0 {
			ch <- prometheus.MustNewConstMetric(cc.index, prometheus.GaugeValue, float64(n), name, info.UploadID)
		}
	}
	for a := range cc.indexSize {
		if !live[a] {
			delete(cc.indexSize, a)
		}
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*countWriter)(nil)
