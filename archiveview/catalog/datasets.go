package catalog

// Published datasets (cargoship publish): a bucket that serves the version
// a dataset's CURRENT pointer names and follows it, or one pinned version.
//
// A followed dataset's pointer is re-read at every scan with a conditional
// GET on its ETag (an unchanged pointer costs one 304). A pointer naming a
// new version has its manifest checked (one HEAD: a dangling pointer is
// refused, the bucket is never listed to guess) and the version opened in
// the background; the bucket swaps to it when it has opened, with the
// rest of the scan. Requests in flight keep the archive they looked up
// (versions are immutable) and the old version is retired after the
// retire grace. A pointer naming the version already served is a no-op.
// At start a bad pointer or an unopenable version of an --alias is a
// start-up error naming the pointer's key and the reason; at a later scan
// the bucket keeps its last good version, the error is logged naming the
// pointer and counted (wharf_dataset_pointer_errors_total{bucket}).
//
// Every version is opened with the dataset's versions folder DATASET/v/
// as an allowed key prefix (Options.AllowKeyPrefixes, the mechanism of
// --allow-key-prefix): a version's manifest may name chunks that live
// under an older version's folder, and nothing outside DATASET/v/.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
)

// DatasetRef names a published dataset and the version a bucket serves.
type DatasetRef struct {
	Bucket  string
	Prefix  string // the dataset's key prefix, "/" trimmed ("" = the bucket root)
	Version string // a pinned version id; "" = follow CURRENT
}

// URL is s3://BUCKET/DATASET.
func (r DatasetRef) URL() string { return strings.TrimSuffix("s3://"+r.Bucket+"/"+r.Prefix, "/") }

// PointerURL is the pointer object's s3://BUCKET/DATASET/CURRENT.
func (r DatasetRef) PointerURL() string {
	return "s3://" + r.Bucket + "/" + dataset.PointerKey(r.Prefix)
}

// VersionsRoot is the key prefix every object of every version lies under
// (DATASET/v/), the prefix its versions are allowed to name.
func (r DatasetRef) VersionsRoot() string { return dataset.Root(r.Prefix) + "v/" }

// Dataset reports whether the alias names a published dataset
// (s3://BUCKET/DATASET@current or @<version_id>) and which; ok is false
// for an "@latest" alias or a target with no "@" suffix.
func (a Alias) Dataset() (ref DatasetRef, ok bool, err error) {
	ref, ok, err = ParseDatasetURL(a.Target)
	if err != nil {
		return DatasetRef{}, true, fmt.Errorf("--alias %s=%s: %w", a.Name, a.Target, err)
	}
	return ref, ok, nil
}

// datasetBucket is one dataset bucket a scan serves.
type datasetBucket struct {
	name   string
	ref    DatasetRef
	source string // "alias TARGET" or "discover s3://BUCKET/PREFIX"
	alias  bool   // configured: a failure at start is fatal
}

// datasetState is what the manager knows of one dataset bucket across
// scans. Guarded by Manager.dsMu.
type datasetState struct {
	ref      DatasetRef
	source   string
	etag     string          // the adopted pointer's ETag
	ptr      dataset.Pointer // the adopted pointer (for a pinned version: VersionID only)
	manifest string          // the served version's manifest URL
	entry    *Entry          // the version served, open
	pending  *Entry          // a version opening, adopted once it has opened
	pendPtr  dataset.Pointer
	pendETag string
	pendMan  string
	readAt   time.Time // last pointer read (conditional or not)
	lastErr  string
	errAt    time.Time     // when lastErr happened
	errs     int           // pointer errors since start
	hist     *historyState // the served version's history (historymgr.go), once asked for
}

// datasetEntry is bucket name's dataset part of the /-/archives page (nil
// for a bucket that is not a dataset's).
func (cm *Manager) datasetEntry(name string) *DatasetEntry {
	cm.dsMu.Lock()
	defer cm.dsMu.Unlock()
	st := cm.datasets[name]
	if st == nil {
		return nil
	}
	de := &DatasetEntry{Dataset: st.ref.URL(), Pointer: st.ref.PointerURL(), Follows: st.ref.Version == "",
		PointerError: st.lastErr, PointerErrors: st.errs}
	if st.entry != nil {
		de.VersionID, de.Manifest = st.ptr.VersionID, st.manifest
	}
	if st.pending != nil {
		de.Opening = st.pendPtr.VersionID
	}
	if !st.readAt.IsZero() {
		t := st.readAt.UTC()
		de.PointerReadAt = &t
	}
	if st.lastErr != "" && !st.errAt.IsZero() {
		t := st.errAt.UTC()
		de.PointerErrorAt = &t
	}
	if st.hist != nil {
		de.History = st.hist.entry()
	}
	return de
}

// datasetMetrics exports wharf_dataset_version_info and
// wharf_dataset_pointer_errors_total from the manager's dataset states.
type datasetMetrics struct {
	cm          *Manager
	info, errsD *prometheus.Desc
}

// DatasetCollector returns the collector of the dataset series: the gauge
// wharf_dataset_version_info{bucket,version_id} (1 for the version each
// dataset bucket serves) and the counter
// wharf_dataset_pointer_errors_total{bucket} (pointer reads refused or
// failed, and versions that did not open). Register it once.
func (cm *Manager) DatasetCollector() prometheus.Collector {
	return &datasetMetrics{cm: cm,
		info:  prometheus.NewDesc("wharf_dataset_version_info", "The published version a dataset bucket serves (value 1).", []string{"bucket", "version_id"}, nil),
		errsD: prometheus.NewDesc("wharf_dataset_pointer_errors_total", "Dataset pointer (CURRENT) reads refused or failed, and pointed versions that did not open; the bucket kept its last good version.", []string{"bucket"}, nil),
	}
}

func (m *datasetMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.info; ch <- m.errsD }

func (m *datasetMetrics) Collect(ch chan<- prometheus.Metric) {
	m.cm.dsMu.Lock()
	defer m.cm.dsMu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(m.cm.datasets)) {
		st := m.cm.datasets[name]
		if st.entry != nil && st.ptr.VersionID != "" {
			ch <- prometheus.MustNewConstMetric(m.info, prometheus.GaugeValue, 1, name, st.ptr.VersionID)
		}
		ch <- prometheus.MustNewConstMetric(m.errsD, prometheus.CounterValue, float64(st.errs), name)
	}
}

// DatasetVersion returns the version id bucket name serves and whether it
// is a dataset bucket.
func (cm *Manager) DatasetVersion(name string) (version string, ok bool) {
	cm.dsMu.Lock()
	defer cm.dsMu.Unlock()
	st := cm.datasets[name]
	if st == nil {
		return "", false
	}
	if st.entry == nil {
		return "", true
	}
	return st.ptr.VersionID, true
}

// datasetPlan is what phase one of a scan found for one dataset bucket.
type datasetPlan struct {
	b        datasetBucket
	err      error           // the pointer or version could not be used
	keep     bool            // serve what is served (unchanged, or the same version)
	read     dataset.Read    // a new pointer (followed)
	key      string          // the manifest key to open
	size     int64           // its size
	created  time.Time       // its LastModified
	pinned   dataset.Pointer // for a pinned version
	manifest string
}

// planDatasets reads each followed dataset's pointer (conditionally) and
// finds each pinned version's manifest: the store requests of a dataset
// scan, made before anything is opened, at most OpenConcurrency datasets
// at a time (the datasets under a root are as many as an uploader
// publishes: one request each at once would take the store connections
// the clients' reads need). No state changes.
func (cm *Manager) planDatasets(ctx context.Context, buckets []datasetBucket) []datasetPlan {
	plans := make([]datasetPlan, len(buckets))
	turns := make(chan struct{}, cm.cfg.OpenConcurrency)
	var wg sync.WaitGroup
	for i, b := range buckets {
		turns <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-turns; wg.Done() }()
			plans[i] = cm.planDataset(ctx, b)
		}()
	}
	wg.Wait()
	return plans
}

func (cm *Manager) planDataset(ctx context.Context, b datasetBucket) datasetPlan {
	p := datasetPlan{b: b}
	// The pointer read, the manifest HEAD and a pinned version's listing
	// end within the open timeout: a stalled store cannot hold a scan.
	ctx, cancel := context.WithTimeout(ctx, cm.cfg.OpenTimeout)
	defer cancel()
	cm.dsMu.Lock()
	st := cm.datasets[b.name]
	var etag, served, pending, servedKey string
	if st != nil && st.ref == b.ref {
		if st.entry != nil {
			etag, served, servedKey = st.etag, st.ptr.VersionID, st.ptr.ManifestKey
		}
		if st.pending != nil {
			pending = st.pendPtr.VersionID
		}
	}
	cm.dsMu.Unlock()
	ref := b.ref
	if ref.Version != "" {
		if pending != "" {
			p.keep = true // a pinned version, resolved once
			return p
		}
		if served != "" {
			// Resolved once; each scan HEADs its manifest so that a prune
			// of the pinned version is noticed (logged, counted, on
			// /-/archives) before its objects fail to read.
			if _, err := cm.store.Stat(ctx, ref.Bucket, servedKey); err != nil {
				p.err = fmt.Errorf("dataset %s: pinned version %s: manifest s3://%s/%s: %w (pruned?)", ref.URL(), ref.Version, ref.Bucket, servedKey, err)
				return p
			}
			p.keep = true
			return p
		}
		u, err := findPinned(ctx, cm.store, ref)
		if err != nil {
			p.err = err
			return p
		}
		p.key, p.size, p.created, p.manifest = u.ManifestKey, u.Size, u.LastModified, u.URL()
		p.pinned = dataset.Pointer{VersionID: ref.Version, ManifestKey: u.ManifestKey}
		return p
	}
	r, err := dataset.ReadPointer(ctx, cm.store, ref.Bucket, ref.Prefix, etag)
	if err != nil {
		p.err = err // names the pointer's key
		return p
	}
	if r.NotModified || r.Pointer.VersionID == served && served != "" {
		p.keep, p.read = true, r
		return p
	}
	p.read = r
	if r.Pointer.VersionID == pending {
		return p // opening already (from the start)
	}
	info, err := cm.store.Stat(ctx, ref.Bucket, r.Pointer.ManifestKey)
	if err != nil {
		p.err = fmt.Errorf("dataset pointer %s: version %s: manifest_key %s: %w", ref.PointerURL(), r.Pointer.VersionID, r.Pointer.ManifestKey, err)
		return p
	}
	p.key, p.size, p.created = r.Pointer.ManifestKey, info.Size, info.LastModified
	p.manifest = "s3://" + ref.Bucket + "/" + r.Pointer.ManifestKey
	return p
}

// startDatasetOpen opens a version's manifest in the background within
// the index budget, with the dataset's versions folder allowed.
func (cm *Manager) startDatasetOpen(name string, ref DatasetRef, key string, size int64, created time.Time) *Entry {
	e := pendingEntry(name, "s3://"+ref.Bucket+"/"+key, created)
	ctx, cancel := context.WithCancel(cm.base)
	e.cancel = cancel
	cm.enqueue(func() {
		a, err := cm.openUpload(ctx, name, ref.Bucket, key, size, openExtra{allow: []string{ref.VersionsRoot()}})
		if err != nil {
			err = fmt.Errorf("dataset %s version at s3://%s/%s: %w", ref.URL(), ref.Bucket, key, err)
		}
		e.finish(a, err)
	})
	return e
}

// failedEntry is an entry that answers err.
func failedEntry(name, url string, err error) *Entry {
	e := pendingEntry(name, url, time.Now())
	e.finish(nil, err)
	return e
}

// applyDatasets records phase one's outcome and gives each dataset bucket
// its entry in op: the version served (unchanged), a version opening, or
// on an error the last good version (else an entry answering the error).
// Called with cm.mu held.
func (cm *Manager) applyDatasets(op *scanOp, plans []datasetPlan) {
	cm.dsMu.Lock()
	defer cm.dsMu.Unlock()
	live := map[string]bool{}
	// Buckets serving the same version (an alias and the discovered
	// dataset) share one open: by manifest URL, the versions served or
	// opening.
	shared := map[string]*Entry{}
	for _, st := range cm.datasets {
		if st.entry != nil {
			shared[st.manifest] = st.entry
		}
		if st.pending != nil {
			shared[st.pendMan] = st.pending
		}
	}
	// The entries this call starts opening: the scan waits for those only
	// (an entry opening since an earlier scan, the start's included, is
	// served as it is and never waited for).
	started := map[*Entry]bool{}
	for _, p := range plans {
		b := p.b
		live[b.name] = true
		st := cm.datasets[b.name]
		if st == nil || st.ref != b.ref {
			if st != nil {
				cm.dropHistory(b.name, st)
			}
			st = &datasetState{ref: b.ref}
			cm.datasets[b.name] = st
		}
		st.source = b.source
		if b.ref.Version == "" {
			st.readAt = op.start
		}
		src := b.source
		var e *Entry
		switch {
		case p.err != nil:
			st.errs++
			st.lastErr, st.errAt = p.err.Error(), op.start
			cm.log.Error().Err(p.err).Str("bucket", b.name).Str("pointer", b.ref.PointerURL()).
				Msg("dataset pointer not used; the bucket keeps its last good version")
			e = st.entry
			if e == nil {
				e = st.pending
			}
			if e == nil {
				e = failedEntry(b.name, b.ref.URL(), p.err)
			}
		case p.keep:
			if p.read.ETag != "" && st.entry != nil {
				st.etag = p.read.ETag
			}
			e = st.entry
			if e == nil {
				e = st.pending
			}
		case p.key == "": // the version opening already (superseded start)
			e = st.pending
			st.pendETag = p.read.ETag
		default:
			if st.pending != nil && !cm.datasetHolds(st.pending, st) {
				cm.retire(st.pending) // a version no longer pointed at
			}
			e = shared[p.manifest]
			if e == nil || e.failed() {
				e = cm.startDatasetOpen(b.name, b.ref, p.key, p.size, p.created)
				shared[p.manifest] = e
				started[e] = true
			}
			st.pending, st.pendMan = e, p.manifest
			st.pendPtr, st.pendETag = p.read.Pointer, p.read.ETag
			if b.ref.Version != "" {
				st.pendPtr = p.pinned
			}
		}
		if st.entry != nil && e == st.entry {
			src += " -> version " + st.ptr.VersionID + " (" + st.manifest + ")"
		} else if e == st.pending && e != nil {
			src += " -> version " + st.pendPtr.VersionID + " (opening " + st.pendMan + ")"
		}
		if e != nil && !started[e] {
			op.mu.Lock()
			op.reusedSet[e] = true
			op.mu.Unlock()
		}
		op.entries[b.name] = e
		op.rep.Sources[b.name] = src
	}
	for n, st := range cm.datasets {
		if !live[n] {
			if st.pending != nil && !cm.datasetHolds(st.pending, st) {
				cm.retire(st.pending)
			}
			cm.dropHistory(n, st)
			delete(cm.datasets, n)
		}
	}
	names := make(map[string]bool, len(cm.datasets))
	for n := range cm.datasets {
		names[n] = true
	}
	cm.dsNames.Store(&names)
}

// datasetHolds reports whether a dataset bucket other than except serves
// or opens e (buckets of the same version share one entry). Called with
// cm.dsMu held.
func (cm *Manager) datasetHolds(e *Entry, except *datasetState) bool {
	for _, st := range cm.datasets {
		if st != except && (st.entry == e || st.pending == e) {
			return true
		}
	}
	return false
}

// adoptDatasets adopts every pending version that has opened and, when
// keepGood, puts back in op the last good version of a bucket whose new
// version failed to open (that failure is logged and counted). It returns
// the failures of configured aliases that have no good version (a
// start-up error with WaitOpen). Called with cm.mu held, after op's opens
// have ended.
func (cm *Manager) adoptDatasets(op *scanOp, keepGood bool) []error {
	cm.dsMu.Lock()
	defer cm.dsMu.Unlock()
	var errs []error
	for name, st := range cm.datasets {
		e := st.pending
		if e == nil {
			continue
		}
		a, err, done := e.State()
		if !done {
			continue
		}
		st.pending = nil
		if err != nil {
			st.errs++
			st.lastErr, st.errAt = err.Error(), time.Now()
			if st.entry != nil && keepGood {
				cm.log.Error().Err(err).Str("bucket", name).Str("pointer", st.ref.PointerURL()).
					Str("version_id", st.pendPtr.VersionID).Msg("dataset version did not open; the bucket keeps its last good version")
				op.mu.Lock()
				if op.entries[name] == e {
					op.entries[name] = st.entry
					op.rep.Sources[name] = st.source + " -> version " + st.ptr.VersionID + " (" + st.manifest + ")"
				}
				op.mu.Unlock()
			} else if st.entry == nil && strings.HasPrefix(st.source, "alias ") {
				errs = append(errs, err)
			}
			continue
		}
		was := st.ptr.VersionID
		cm.dropHistory(name, st) // the history of the version no longer served
		st.entry, st.ptr, st.etag, st.manifest = e, st.pendPtr, st.pendETag, st.pendMan
		st.lastErr = ""
		op.rep.Sources[name] = st.source + " -> version " + st.ptr.VersionID + " (" + st.manifest + ")"
		info := a.Info()
		ev := cm.log.Info().Str("bucket", name).Str("dataset", st.ref.URL()).Str("version_id", st.ptr.VersionID).Str("manifest", st.manifest)
		if was != "" {
			ev = ev.Str("previous_version_id", was)
		}
		ev.Msg("dataset serving version")
		if st.ref.Version == "" {
			if int64(info.Files) != st.ptr.FileCount || info.UncompressedBytes != st.ptr.TotalBytes {
				cm.log.Warn().Str("bucket", name).Str("pointer", st.ref.PointerURL()).
					Int64("pointer_file_count", st.ptr.FileCount).Int("manifest_files", info.Files).
					Int64("pointer_total_bytes", st.ptr.TotalBytes).Int64("manifest_bytes", info.UncompressedBytes).
					Msg("dataset pointer's counts disagree with the manifest; the manifest decides")
			}
		}
	}
	return errs
}

// abandonDatasets retires the versions op started that are still
// opening (a scan that was given up): the next scan reads the pointers
// again. A version opening since an earlier scan is left to open (the
// catalog kept serves it).
func (cm *Manager) abandonDatasets(op *scanOp) {
	cm.dsMu.Lock()
	defer cm.dsMu.Unlock()
	op.mu.Lock()
	defer op.mu.Unlock()
	for _, st := range cm.datasets {
		if st.pending != nil && !op.reusedSet[st.pending] {
			if _, _, done := st.pending.State(); !done {
				cm.retire(st.pending)
				st.pending = nil
			}
		}
	}
}

// datasetErrors joins the errors of plans that configured aliases cannot
// start with.
func datasetErrors(plans []datasetPlan) error {
	var errs []error
	for _, p := range plans {
		if p.err != nil && p.b.alias {
			errs = append(errs, fmt.Errorf("--alias %s: %w", p.b.name, p.err))
		}
	}
	return errors.Join(errs...)
}

// FollowsUpdates reports whether bucket name's objects can change under
// the same key while wharf runs: an @latest alias (it moves to a newer
// upload at a rescan) or a dataset bucket following CURRENT (configured or
// discovered). A fixed archive, a discovered upload and a pinned dataset
// version never change. s3api's Cache-Control is chosen by it.
func (cm *Manager) FollowsUpdates(name string) bool {
	cm.dsMu.Lock()
	st := cm.datasets[name]
	cm.dsMu.Unlock()
	if st != nil {
		return st.ref.Version == ""
	}
	for _, al := range cm.cfg.Aliases {
		if al.Name == name {
			return true // not a dataset's: an @latest alias
		}
	}
	return false
}
