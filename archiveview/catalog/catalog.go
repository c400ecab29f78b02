package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// Entry is one archive a catalog serves, under one or more bucket names:
// the archive once it is open, or why it could not be opened. An entry is
// created pending (its archive is being opened in the background, and its
// buckets are listed at once) or ready.
type Entry struct {
	Name     string    // the archive's display name (Options.Name)
	Manifest string    // s3://BUCKET/KEY of its manifest ("" for an alias still resolving)
	Created  time.Time // while pending, ListBuckets' CreationDate (the manifest's LastModified); then the archive's

	done   chan struct{} // closed when arc or err is set
	arc    *archiveview.Archive
	err    error
	cancel context.CancelFunc // stops the open when nobody needs it any more (nil for ready entries)
}

// readyEntry returns an entry for an open archive.
func readyEntry(name string, a *archiveview.Archive) *Entry {
	e := &Entry{Name: name, Created: a.Created(), done: make(chan struct{}), arc: a}
	close(e.done)
	return e
}

// pendingEntry returns an entry whose archive is being opened; finish
// ends it.
func pendingEntry(name, manifestURL string, created time.Time) *Entry {
	return &Entry{Name: name, Manifest: manifestURL, Created: created, done: make(chan struct{})}
}

// finish records the outcome of the open (exactly once).
func (e *Entry) finish(a *archiveview.Archive, err error) {
	e.arc, e.err = a, err
	close(e.done)
}

// State returns the entry's archive (nil while pending or failed), its
// open error, and whether the open has ended.
func (e *Entry) State() (a *archiveview.Archive, err error, done bool) {
	select {
	case <-e.done:
		return e.arc, e.err, true
	default:
		return nil, nil, false
	}
}

// failed reports whether the entry's open ended in an error.
func (e *Entry) failed() bool {
	_, err, done := e.State()
	return done && err != nil
}

// wait waits for the entry's open while ctx lives, and at most d when d > 0
// (then an error wrapping archiveview.ErrOpening).
func (e *Entry) wait(ctx context.Context, d time.Duration) (*archiveview.Archive, error) {
	select {
	case <-e.done:
		return e.arc, e.err
	default:
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-e.done:
		return e.arc, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timeout:
		return nil, fmt.Errorf("archive %s (manifest %s): %w", e.Name, e.Manifest, archiveview.ErrOpening)
	}
}

// snapshot is an immutable bucket-name → entry map.
type snapshot struct {
	byName map[string]*Entry
	names  []string
}

func newSnapshot(entries map[string]*Entry) *snapshot {
	s := &snapshot{byName: make(map[string]*Entry, len(entries))}
	for name, e := range entries {
		if e == nil {
			continue
		}
		s.byName[name] = e
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	return s
}

func readySnapshot(m map[string]*archiveview.Archive) *snapshot {
	entries := make(map[string]*Entry, len(m))
	for name, a := range m {
		if a != nil {
			entries[name] = readyEntry(name, a)
		}
	}
	return newSnapshot(entries)
}

func (s *snapshot) bucket(ctx context.Context, name string, wait time.Duration) (*archiveview.Archive, bool, error) {
	e, ok := s.byName[name]
	if !ok {
		return nil, false, nil
	}
	if wait <= 0 {
		wait = time.Nanosecond // never unbounded on the request path
	}
	a, err := e.wait(ctx, wait)
	if err != nil && !errors.Is(err, archiveview.ErrOpening) && ctx.Err() == nil {
		err = &OpenFailure{Bucket: name, Err: err} // its PublicMessage is what a client may see
	}
	return a, true, err
}

func (s *snapshot) each(fn func(name string, created time.Time)) {
	for _, n := range s.names {
		e := s.byName[n]
		if a, _, _ := e.State(); a != nil {
			fn(n, a.Created())
		} else {
			fn(n, e.Created)
		}
	}
}

// ready returns the open archives by bucket name.
func (s *snapshot) ready() map[string]*archiveview.Archive {
	out := make(map[string]*archiveview.Archive, len(s.byName))
	for n, e := range s.byName {
		if a, _, done := e.State(); done && a != nil {
			out[n] = a
		}
	}
	return out
}

// Static is a fixed bucket-name → archive map (s3api.Catalog).
type Static struct{ s *snapshot }

// NewStatic serves each archive of m under its map key. The map is
// copied; later changes to m have no effect.
func NewStatic(m map[string]*archiveview.Archive) *Static { return &Static{readySnapshot(m)} }

// Bucket returns the archive served as bucket name (s3api.Catalog).
func (c *Static) Bucket(ctx context.Context, name string) (*archiveview.Archive, bool, error) {
	return c.s.bucket(ctx, name, 0)
}

// EachBucket calls fn for every bucket in byte order (s3api.Catalog).
func (c *Static) EachBucket(fn func(name string, created time.Time)) { c.s.each(fn) }

// BucketNames returns the served bucket names in byte order.
func (c *Static) BucketNames() []string { return slices.Clone(c.s.names) }

// Dynamic is a Catalog whose bucket → entry map can be replaced while
// serving (discovery rescans, "@latest" aliases) and whose entries may be
// still opening. The map is an immutable snapshot behind an atomic
// pointer: a request does one atomic load and a map lookup, never a lock,
// and sees either the old mapping or the new one, whole. A request for a
// bucket whose archive is still opening waits for it up to OpenWait, then
// gets an error wrapping archiveview.ErrOpening (503 SlowDown). The same
// archive may be served under several names (an alias and its upload's
// own bucket).
type Dynamic struct {
	cur atomic.Pointer[snapshot]
	// OpenWait bounds a request's wait for a bucket still opening.
	OpenWait time.Duration
}

// DefaultOpenWait is Dynamic.OpenWait's default.
const DefaultOpenWait = 10 * time.Second

// NewDynamic starts serving m (copied).
func NewDynamic(m map[string]*archiveview.Archive) *Dynamic {
	c := &Dynamic{OpenWait: DefaultOpenWait}
	c.cur.Store(readySnapshot(m))
	return c
}

// Swap replaces the mapping with m (copied, every archive open) and returns
// the archives that were served before. Requests that already looked up
// an archive keep using it; closing archives that are no longer served is
// the caller's job, once those requests are done (Archive.Close only stops
// background work, so a late close is safe for reads still streaming).
func (c *Dynamic) Swap(m map[string]*archiveview.Archive) map[string]*archiveview.Archive {
	return c.cur.Swap(readySnapshot(m)).ready()
}

// swapEntries replaces the mapping with entries.
func (c *Dynamic) swapEntries(entries map[string]*Entry) {
	c.cur.Store(newSnapshot(entries))
}

// Map returns the open archives by bucket name.
func (c *Dynamic) Map() map[string]*archiveview.Archive { return c.cur.Load().ready() }

// Entries returns the current entries by bucket name.
func (c *Dynamic) Entries() map[string]*Entry { return maps.Clone(c.cur.Load().byName) }

// Bucket returns the archive served as bucket name, waiting for one still
// opening (s3api.Catalog).
func (c *Dynamic) Bucket(ctx context.Context, name string) (*archiveview.Archive, bool, error) {
	return c.cur.Load().bucket(ctx, name, c.OpenWait)
}

// EachBucket calls fn for every bucket in byte order, those still opening
// included (s3api.Catalog).
func (c *Dynamic) EachBucket(fn func(name string, created time.Time)) { c.cur.Load().each(fn) }

// BucketNames returns the served bucket names in byte order.
func (c *Dynamic) BucketNames() []string { return slices.Clone(c.cur.Load().names) }

// Collector exports per-bucket gauges for the archives a catalog
// serves at scrape time (so buckets that disappear on a rescan stop being
// exported): wharf_archive_files, wharf_archive_chunks, wharf_archive_frames
// and wharf_archive_index_bytes, labelled by bucket and upload_id. Index
// bytes is the size of the archive's index in the persistent format
// (Info.IndexBytes, computed from its counts): the heap it holds, or the
// file it is served from in place.
type Collector struct {
	cat interface {
		Map() map[string]*archiveview.Archive
	}
	files, chunks, frames, index *prometheus.Desc
}

// NewCollector returns a collector over c; register it on the
// server's Registerer.
func NewCollector(c interface {
	Map() map[string]*archiveview.Archive
}) *Collector {
	labels := []string{"bucket", "upload_id"}
	return &Collector{
		cat:    c,
		files:  prometheus.NewDesc("wharf_archive_files", "Virtual files of the archive served as the bucket.", labels, nil),
		chunks: prometheus.NewDesc("wharf_archive_chunks", "Backing objects (chunks and direct objects) of the archive.", labels, nil),
		frames: prometheus.NewDesc("wharf_archive_frames", "Zstd frames in the archive's frame tables.", labels, nil),
		index:  prometheus.NewDesc("wharf_archive_index_bytes", "Size of the archive's index (persistent format): its heap, or the file it is served from in place.", labels, nil),
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
	served := cc.cat.Map() // open archives only: one still opening has no figures yet
	for _, name := range slices.Sorted(maps.Keys(served)) {
		info := served[name].Info()
		id := labelValue(info.UploadID)
		ch <- prometheus.MustNewConstMetric(cc.files, prometheus.GaugeValue, float64(info.Files), name, id)
		ch <- prometheus.MustNewConstMetric(cc.chunks, prometheus.GaugeValue, float64(info.Chunks), name, id)
		ch <- prometheus.MustNewConstMetric(cc.frames, prometheus.GaugeValue, float64(info.Frames), name, id)
		ch <- prometheus.MustNewConstMetric(cc.index, prometheus.GaugeValue, float64(info.IndexBytes), name, id)
	}
}

// maxLabelBytes bounds a label value taken from a manifest or a key.
const maxLabelBytes = 128

// labelValue makes s, an uploader's value (an upload id: the manifest's,
// or its folder's name, which on a file store is any bytes), usable as a
// label: invalid UTF-8 is escaped (a label value that is not UTF-8 fails
// the whole scrape: MustNewConstMetric panics, the registry answers
// /metrics with an error), and it is cut to maxLabelBytes, ending in
// "...", at a character boundary (every scrape carries it once per
// series).
//
// Its unprintable runes are escaped first (backend.PrintableText, the one
// rule for outside text: an invalid byte as "\xff"): the text exposition
// escapes only backslash, quote and newline, so an id's ESC sequences, CR,
// C1 controls and bidi overrides reached whoever read /metrics in a
// terminal. The cut here keeps the bound at 128 bytes.
func labelValue(s string) string {
	s = backend.PrintableText(s, 0)
	if len(s) <= maxLabelBytes {
		return s
	}
	cut := maxLabelBytes - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
