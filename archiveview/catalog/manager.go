package catalog

// The manager: which archives are served under which bucket names, kept
// current. It opens the configured archives once (in parallel, before
// serving), lists the discovery roots and re-resolves the aliases at every
// scan (at start, on a rescan trigger, on the rescan interval), and swaps
// the Dynamic catalog in one step. Listing the store happens only here (and
// in Discover, which Scan calls) and, when Options.StorageClasses is set,
// once per upload prefix at every open and rescan (the archives' storage
// classes), never on the read path.
//
// Opening is parallel and, at start, in the background:
//
//   - Every archive is opened by a job holding one of OpenConcurrency slots.
//     A scan's background opens wait in one queue run by at most
//     OpenConcurrency goroutines (enqueue), never a goroutine per upload.
//   - The initial Scan lists the roots, publishes every discovered bucket
//     and alias as a pending entry and returns: the server listens at once.
//     ListBuckets shows every bucket; a request for one still opening waits
//     up to OpenWait, then gets 503 SlowDown. An archive that fails to open
//     stays listed and answers its open error (naming its manifest). Ready
//     turns true once every job of the initial scan has ended. With
//     WaitOpen, the initial Scan returns only then (and an alias that
//     cannot be resolved is fatal), as before.
//   - Every open has a deadline (OpenTimeout, from the moment it holds its
//     slot): a manifest that downloads slowly or never fails its own
//     upload with an error wrapping ErrOpenTimeout, and nothing else.
//   - A discovered or aliased upload's open first reserves its index
//     memory from IndexMemory (budget.go), waiting at most OpenTimeout
//     while the budget is used, and lists at most MaxFilesPerUpload files
//     per manifest. It takes its slot and its memory together, holding
//     neither while it waits for the other (an open queued for a slot
//     holds no memory); its open deadline starts once it holds both.
//   - A rescan reuses every entry whose manifest is listed with the same
//     key and ETag (open or still opening, or failed to parse: no manifest
//     is read again; any other failure is retried), opens only what is
//     new, and swaps the catalog once the opens it started have ended
//     (each within OpenTimeout), so a client never sees a rescanned
//     bucket pending that was open before. It never waits for an open it
//     did not start: an entry still opening from an earlier scan (the
//     initial one included) is served as it is, pending, and becomes open
//     in place. An alias that cannot be resolved keeps its previous target.
//   - Entries no longer served are retired: their open is cancelled, and
//     after RetireGrace (requests already reading finish) their archive is
//     closed unless another served entry holds it.
//
// One open (its slot, memory and deadline) is open.go, the queue of
// background opens openqueue.go, retiring retire.go, a scan's log
// scanlog.go, the /-/archives document page.go.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// DefaultOpenTimeout is Config.OpenTimeout's default: how long one open
// (the manifests' GETs and the index build, or the index cache's HEADs)
// may take once it holds its slot.
const DefaultOpenTimeout = time.Minute

// ErrOpenTimeout is wrapped by the error of an open that did not end
// within Config.OpenTimeout.
var ErrOpenTimeout = errors.New("archive open timed out")

// ErrIndexMemory is wrapped by the error of an open that could not get its
// index memory (Config.IndexMemory) within Config.OpenTimeout.
var ErrIndexMemory = errors.New("index memory budget exhausted")

// Source is one configured archive: bucket Name serves the manifest at
// ManifestURL (s3://BUCKET/KEY).
type Source struct {
	Name, ManifestURL string
}

// Alias is one "@latest" alias: bucket Name serves the newest finished
// upload under Target (s3://BUCKET/PREFIX@latest); or one published
// dataset: s3://BUCKET/DATASET@current follows the dataset's CURRENT
// pointer, s3://BUCKET/DATASET@<version_id> serves that version for good
// (datasets.go).
type Alias struct {
	Name, Target string
}

// Root returns the alias's discovery root, or an error naming the alias
// when Target is not s3://BUCKET/PREFIX@latest.
func (a Alias) Root() (bucket, prefix string, err error) {
	if d, ok, err := a.Dataset(); ok || err != nil {
		return d.Bucket, d.Prefix, err // a published dataset (datasets.go)
	}
	u, ok := strings.CutSuffix(a.Target, "@latest")
	if !ok {
		return "", "", fmt.Errorf("--alias %s=%s: the target must end in @latest (s3://BUCKET/PREFIX@latest), @current or @<version_id> (a published dataset: s3://BUCKET/DATASET@current)", a.Name, a.Target)
	}
	b, p, err := ParseDiscoverURL(u)
	if err != nil {
		return "", "", fmt.Errorf("--alias %s=%s: %w", a.Name, a.Target, err)
	}
	return b, p, nil
}

// DefaultOpenConcurrency is Config.OpenConcurrency's default: archives
// opened at once. Opening is dominated by first-byte latency (a manifest GET,
// or HEADs with the persistent index), so many run side by side.
const DefaultOpenConcurrency = 32

// Config is what a Manager serves.
type Config struct {
	Store    backend.Store
	Options  archiveview.Options // for every archive opened; Name is set per bucket
	Archives []Source            // opened at start, before serving; a failure is fatal
	Discover []string            // s3://BUCKET/PREFIX discovery roots
	Aliases  []Alias
	// OpenConcurrency bounds the archives opened at once (0 =
	// DefaultOpenConcurrency).
	OpenConcurrency int
	// WaitOpen makes the initial Scan return only once every archive has
	// opened (or failed), and an alias unresolved at start fatal.
	WaitOpen bool
	// OpenWait bounds a request's wait for a bucket still opening (0 =
	// DefaultOpenWait); then 503 SlowDown.
	OpenWait time.Duration
	// RetireGrace is how long an archive a scan replaced keeps running
	// (requests already reading it finish) before it is closed.
	RetireGrace time.Duration
	Logger      zerolog.Logger
	// OpenTimeout bounds one open once it holds its slot, and an open's
	// wait for index memory (0 = DefaultOpenTimeout).
	OpenTimeout time.Duration
	// IndexMemory is the index memory discovered and aliased uploads may
	// hold together, open or opening (0 = DefaultIndexMemory).
	IndexMemory int64
	// MaxFilesPerUpload caps the files one manifest of a discovered or
	// aliased upload may list, and its whole chain together (0 =
	// DefaultMaxFilesPerUpload; never more than Options.Limits allows).
	MaxFilesPerUpload int
	// DatasetHistory is the number of published versions a dataset
	// bucket's version history holds at most (0 = DefaultDatasetHistory;
	// history.go).
	DatasetHistory int

	// historyAhead overrides historyOpenAhead (tests and the cost
	// measurement: 1 builds a history one version at a time).
	historyAhead int
	// historyBytes overrides DatasetHistory.Bytes as a built history's
	// charge (tests).
	historyBytes func(*DatasetHistory) int64
}

// Manager owns the served archives: the configured ones (opened once at
// start), the discovered ones and the aliases (re-resolved by Scan), the
// Dynamic catalog requests read, and the closing of archives a scan
// replaced. Its methods are safe for concurrent use.
type Manager struct {
	cfg     Config
	store   backend.Store
	opts    archiveview.Options
	log     zerolog.Logger
	catalog *Dynamic

	static        map[string]*Entry // --archive: never replaced
	staticSources map[string]string

	slots chan struct{} // OpenConcurrency open slots
	index *indexBudget  // index memory of discovered uploads
	// histIndex is the share of index that older dataset versions opened
	// for a history may hold (historyIndexShare); they are charged to both.
	histIndex *indexBudget
	// charged is the index memory each open discovered archive holds,
	// returned when it is closed.
	chargeMu sync.Mutex
	charged  map[*archiveview.Archive]indexCharge
	base     context.Context    // every background open runs under it
	stop     context.CancelFunc // cancels them (CloseAll)
	jobs     sync.WaitGroup     // background opens and alias resolutions
	opens    openQueue          // background opens (enqueue), on at most OpenConcurrency goroutines

	mu      sync.Mutex        // one scan at a time; guards open and initial
	open    map[string]*Entry // upload entries by bucket\x00key\x00etag, open or opening: reused by the next scan
	initial *scanOp           // the initial scan, until its background work is settled
	ready   atomic.Bool       // every open of the initial scan has ended
	held    atomic.Pointer[map[*archiveview.Archive]bool]
	report  atomic.Pointer[scanReport]
	retired sync.WaitGroup
	done    chan struct{} // closed at shutdown: retire now
	closed  sync.Once

	dsMu     sync.Mutex                      // guards datasets (read by Page and the collector)
	datasets map[string]*datasetState        // dataset buckets by name (datasets.go)
	dsNames  atomic.Pointer[map[string]bool] // the names of datasets, for requests (no lock)
	hists    sync.Map                        // histKey → *historyState: the histories made, for requests (no lock)
	builds   chan struct{}                   // historyBuildsMax history build turns (historymgr.go)
	// skippedSeen: what the last settled scan skipped (logged then, not
	// again); under mu.
	skippedSeen map[Skipped]bool
	// failedSeen: the open error of each bucket that failed at the last
	// settled scan (logged then, not again while it is the same); under mu.
	failedSeen map[string]string
}

// scanReport is what the last scan found, for /-/archives.
type scanReport struct {
	Time       time.Time         `json:"scanned_at"`
	Error      string            `json:"scan_error,omitempty"`
	Sources    map[string]string `json:"-"`
	Skipped    []Skipped         `json:"skipped"`
	Collisions []Collision       `json:"collisions"`
}

// clone returns a copy of r that shares nothing r's scan may still write.
// A report is never changed once published (cm.report): Page reads it
// without a lock.
func (r *scanReport) clone() *scanReport {
	c := *r
	c.Sources = maps.Clone(r.Sources)
	c.Skipped = slices.Clone(r.Skipped)
	c.Collisions = slices.Clone(r.Collisions)
	return &c
}

// NewManager returns a manager serving nothing yet: call OpenStatic, then
// Scan.
func NewManager(cfg Config) *Manager {
	if cfg.OpenConcurrency <= 0 {
		cfg.OpenConcurrency = DefaultOpenConcurrency
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = DefaultOpenTimeout
	}
	if cfg.IndexMemory <= 0 {
		cfg.IndexMemory = DefaultIndexMemory
	}
	if cfg.MaxFilesPerUpload <= 0 {
		cfg.MaxFilesPerUpload = DefaultMaxFilesPerUpload
	}
	if cfg.DatasetHistory <= 0 {
		cfg.DatasetHistory = DefaultDatasetHistory
	}
	if lim := cfg.Options.Limits.WithDefaults().MaxFiles; cfg.MaxFilesPerUpload > lim {
		cfg.MaxFilesPerUpload = lim
	}
	cm := &Manager{
		cfg: cfg, store: cfg.Store, opts: cfg.Options, log: cfg.Logger,
		catalog:       NewDynamic(nil),
		static:        map[string]*Entry{},
		staticSources: map[string]string{},
		slots:         make(chan struct{}, cfg.OpenConcurrency),
		index:         newIndexBudget(cfg.IndexMemory, "index memory (--index-memory)"),
		histIndex:     newIndexBudget(max(cfg.IndexMemory/historyIndexShare, 1), fmt.Sprintf("the index memory older dataset versions may hold (1/%d of --index-memory)", historyIndexShare)),
		charged:       map[*archiveview.Archive]indexCharge{},
		open:          map[string]*Entry{},
		done:          make(chan struct{}),
		datasets:      map[string]*datasetState{},
		builds:        make(chan struct{}, historyBuildsMax),
		opens:         openQueue{max: cfg.OpenConcurrency},
	}
	if cfg.OpenWait > 0 {
		cm.catalog.OpenWait = cfg.OpenWait
	}
	cm.base, cm.stop = context.WithCancel(context.Background())
	cm.report.Store(&scanReport{Sources: map[string]string{}})
	cm.held.Store(&map[*archiveview.Archive]bool{})
	cm.dsNames.Store(&map[string]bool{})
	return cm
}

// Catalog is the catalog requests read (s3api.Catalog).
func (cm *Manager) Catalog() *Dynamic { return cm.catalog }

// Ready reports whether every archive of the initial scan has been opened
// (or has failed to open: that one answers its error, and /-/archives
// shows it). It stays true after.
func (cm *Manager) Ready() bool { return cm.ready.Load() }

// Opening returns how many served buckets are still opening and how many
// are served.
func (cm *Manager) Opening() (pending, total int) {
	for _, e := range cm.catalog.Entries() {
		total++
		if _, _, done := e.State(); !done {
			pending++
		}
	}
	return pending, total
}

// Bounds of the per-archive line's uploader text: an upload id (the
// manifest's, any length; cut like its metric label, maxLabelBytes), the
// chain's ids (up to MaxChainDepth of them: the first maxLoggedChain,
// with chain_length beside them when cut) and each warning.
const (
	maxLoggedChain   = 16
	maxLoggedWarning = 1024
)

// logArchive writes the per-archive line. Its uploader text is
// backend.PrintableText, the one rule for outside text in a log (cut,
// unprintable runes escaped).
func (cm *Manager) logArchive(name, source string, a *archiveview.Archive) {
	info := a.Info()
	ev := cm.log.Info().Str("archive", name).Str("source", source).
		Str("upload_id", backend.PrintableText(info.UploadID, maxLabelBytes)).Str("version", backend.PrintableText(info.Version, maxLabelBytes)).
		Strs("chain", printableTexts(info.Chain, maxLoggedChain, maxLabelBytes))
	if len(info.Chain) > maxLoggedChain {
		ev = ev.Int("chain_length", len(info.Chain))
	}
	ev.Int("files", info.Files).Int("chunks", info.Chunks).Int("frames", info.Frames).
		Int64("compressed_bytes", info.CompressedBytes).Int64("uncompressed_bytes", info.UncompressedBytes).
		Strs("shapes", info.Shapes).Strs("warnings", printableTexts(info.Warnings, len(info.Warnings), maxLoggedWarning)).
		Msg("serving archive")
}

// printableTexts is the first n of ss, each backend.PrintableText cut to
// max bytes.
func printableTexts(ss []string, n, max int) []string {
	out := make([]string, 0, min(n, len(ss)))
	for _, s := range ss[:min(n, len(ss))] {
		out = append(out, backend.PrintableText(s, max))
	}
	return out
}

// startOpen returns a pending entry for the manifest bucket/key (listed
// bytes long) and opens it in the background within the index budget.
func (cm *Manager) startOpen(name, bucket, key string, listed int64, created time.Time) *Entry {
	e := pendingEntry(name, "s3://"+bucket+"/"+key, created)
	ctx, cancel := context.WithCancel(cm.base)
	e.cancel = cancel
	cm.enqueue(func() {
		a, err := cm.openUpload(ctx, name, bucket, key, listed, openExtra{})
		e.finish(a, err)
	})
	return e
}

// OpenStatic opens every configured archive, OpenConcurrency at a time,
// and serves them. Any failure is fatal: a configured archive that cannot
// be served is a configuration error.
func (cm *Manager) OpenStatic(ctx context.Context) error {
	if len(cm.cfg.Archives) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		a   *archiveview.Archive
		err error
	}
	results := make([]result, len(cm.cfg.Archives))
	var wg sync.WaitGroup
	for i, sa := range cm.cfg.Archives {
		bucket, key, err := backend.ParseObjectURL(sa.ManifestURL)
		if err != nil {
			results[i].err = fmt.Errorf("archive %q: %w", sa.Name, err) // the parse error names the URL
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := cm.openArchive(ctx, sa.Name, bucket, key, 0, openExtra{})
			results[i] = result{a, err} // an *archiveview.OpenError names the archive and the manifest
			if err != nil {
				cancel() // the start fails anyway: stop the others
			}
		}()
	}
	wg.Wait()
	var errs, cancelled []error
	for _, r := range results {
		switch {
		case r.err == nil:
		case errors.Is(r.err, context.Canceled):
			cancelled = append(cancelled, r.err) // stopped because another failed
		default:
			errs = append(errs, r.err)
		}
	}
	if len(errs) == 0 {
		errs = cancelled
	}
	if len(errs) > 0 {
		for _, r := range results {
			if r.a != nil {
				_ = r.a.Close()
			}
		}
		return errors.Join(errs...)
	}
	entries := map[string]*Entry{}
	for i, sa := range cm.cfg.Archives {
		e := readyEntry(sa.Name, results[i].a)
		cm.static[sa.Name] = e
		entries[sa.Name] = e
		cm.staticSources[sa.Name] = "archive " + sa.ManifestURL
		cm.logArchive(sa.Name, "archive "+sa.ManifestURL, results[i].a)
	}
	cm.catalog.swapEntries(entries)
	cm.setHeld(entries, nil)
	return nil
}

// scanOp is one scan's work: the upload entries it serves or tried (alias
// candidates), reused from the previous scan or opened anew.
type scanOp struct {
	cm      *Manager
	start   time.Time
	initial bool
	prev    map[string]*Entry // the previous scan's open entries by upload key
	before  map[string]*Entry // the catalog before this scan
	entries map[string]*Entry // what this scan serves, by bucket name
	rep     *scanReport
	cols    []Collision

	mu         sync.Mutex
	byKey      map[string]*Entry // upload entries by upload key
	reused     int
	reusedSet  map[*Entry]bool         // entries taken from prev: never waited for
	aliases    map[string]aliasOutcome // by alias name
	settled    bool
	superseded bool // the initial scan, replaced by a rescan before its opens ended
}

// aliasOutcome is how one alias was resolved.
type aliasOutcome struct {
	source string // "alias TARGET -> URL", or the previous source when kept
	err    error  // unresolved (with no previous target to keep)
}

func uploadKey(u Upload) string { return u.Bucket + "\x00" + u.ManifestKey + "\x00" + u.ETag }

// entry returns the entry of upload u: this scan's, the previous scan's
// when it is open or still opening, or failed of a kept kind (its
// manifest's own bytes, keptFailure: the listing shows the same key and
// ETag, so reading it again would fail the same way; any other failure is
// retried), or a new one opening in the background.
func (op *scanOp) entry(u Upload, name string) *Entry {
	k := uploadKey(u)
	op.mu.Lock()
	defer op.mu.Unlock()
	if e := op.byKey[k]; e != nil {
		return e
	}
	if e := op.prev[k]; e != nil && (!e.failed() || keptFailure(e.err)) {
		op.byKey[k] = e
		op.reused++
		op.reusedSet[e] = true
		return e
	}
	e := op.cm.startOpen(name, u.Bucket, u.ManifestKey, u.Size, u.LastModified)
	op.byKey[k] = e
	return e
}

// resolveAlias returns a pending entry for alias al over the uploads listed
// under its root, resolved in the background: the newest finished upload
// that opens (Latest), its candidates' entries shared with discovery. When
// nothing can be resolved and keep holds an open archive, the alias keeps
// it (a rescan); otherwise the entry fails with an error naming the alias.
func (op *scanOp) resolveAlias(al Alias, uploads []Upload, keep *Entry, keepSource string) *Entry {
	cm := op.cm
	created := op.start
	for _, u := range uploads {
		if u.LastModified.After(created) || created.Equal(op.start) {
			created = u.LastModified
		}
	}
	e := pendingEntry(al.Name, al.Target, created)
	ctx, cancel := context.WithCancel(cm.base)
	e.cancel = cancel
	cm.jobs.Add(1)
	go func() {
		defer cm.jobs.Done()
		a, u, skipped, err := Latest(ctx, uploads, 0, func(ctx context.Context, u Upload) (*archiveview.Archive, error) {
			return op.entry(u, al.Name).wait(ctx, 0)
		})
		out := aliasOutcome{}
		if err != nil {
			err = fmt.Errorf("alias %s=%s: %w", al.Name, al.Target, err)
			if ka, _, _ := keep.stateOrNil(); ka != nil && ctx.Err() == nil {
				cm.log.Error().Err(err).Str("alias", al.Name).Msg("alias unresolved; keeping its previous target")
				a, err, out.source = ka, nil, keepSource
			} else {
				out.err = err
			}
		} else {
			out.source = "alias " + al.Target + " -> " + u.URL()
		}
		op.mu.Lock()
		op.rep.Skipped = append(op.rep.Skipped, skipped...)
		op.aliases[al.Name] = out
		op.mu.Unlock()
		e.finish(a, err)
	}()
	return e
}

// stateOrNil is State on a possibly nil entry.
func (e *Entry) stateOrNil() (*archiveview.Archive, error, bool) {
	if e == nil {
		return nil, nil, false
	}
	return e.State()
}

// wait waits until every entry the scan started (served or tried) has
// ended; entries it reused from an earlier scan are not waited for (every
// entry of the initial scan is its own). Each open ends within the open
// timeout, so the wait is bounded.
func (op *scanOp) wait(ctx context.Context) error {
	for {
		op.mu.Lock()
		var pending *Entry
		for _, m := range []map[string]*Entry{op.entries, op.byKey} {
			for _, e := range m {
				if _, _, done := e.State(); !done && !op.reusedSet[e] {
					pending = e
					break
				}
			}
			if pending != nil {
				break
			}
		}
		op.mu.Unlock()
		if pending == nil {
			return nil
		}
		if _, err := pending.wait(ctx, 0); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Scan lists every discovery root, names the uploads, re-resolves every
// alias, opens what is new (reusing archives whose manifest is listed with
// the same key and ETag) OpenConcurrency at a time, and swaps the catalog.
//
// The initial scan (initial) publishes every bucket as soon as the roots
// are listed, pending while its archive opens, and returns; Ready turns
// true when every open has ended. With Config.WaitOpen it returns only
// then, and an alias that cannot be resolved is an error. A listing
// failure at start is returned.
//
// A rescan never waits for opens it did not start: it reuses the entries
// of the scan before (the initial scan's too, while they are still
// opening), and swaps the catalog once the opens it started have ended
// (each within the open timeout). A listing failure keeps the previous
// catalog, and an alias that cannot be resolved keeps its previous
// target.
func (cm *Manager) Scan(ctx context.Context, initial bool) error {
	if len(cm.cfg.Discover)+len(cm.cfg.Aliases) == 0 {
		if initial {
			cm.ready.Store(true)
		}
		return nil
	}
	cm.mu.Lock()
	defer cm.mu.Unlock()
	prev := cm.open
	if op := cm.initial; op != nil {
		// The initial scan's opens may still run: reuse its entries as they
		// are (open or opening) and settle in its place. Its own settling
		// then only marks the server ready.
		prev = maps.Clone(cm.open)
		op.mu.Lock()
		for k, e := range op.byKey {
			prev[k] = e
		}
		op.superseded = true
		op.mu.Unlock()
		cm.initial = nil
	}
	start := time.Now()
	rep := &scanReport{Time: start, Sources: map[string]string{}}
	fail := func(err error) error {
		prev := cm.report.Load()
		r := *prev
		r.Time, r.Error = start, err.Error()
		cm.report.Store(&r)
		return err
	}

	listings := map[string]Discovery{}
	list := func(bucket, prefix string) (Discovery, error) {
		k := bucket + "\x00" + prefix
		if d, ok := listings[k]; ok {
			return d, nil
		}
		// No listing holds the scan (and the start, or every later
		// rescan) past --open-timeout without listing an object.
		d, err := discover(ctx, cm.store, bucket, prefix, cm.cfg.OpenTimeout)
		if err != nil {
			return d, err
		}
		listings[k] = d
		rep.Skipped = append(rep.Skipped, d.Skipped...)
		return d, nil
	}
	var uploads, found []Upload
	for _, root := range cm.cfg.Discover {
		b, p, err := ParseDiscoverURL(root)
		if err != nil {
			return fail(err)
		}
		d, err := list(b, p)
		if err != nil {
			return fail(err)
		}
		uploads = append(uploads, d.Uploads...)
		found = append(found, d.Datasets...)
	}
	aliasUploads := make([][]Upload, len(cm.cfg.Aliases))
	var dsBuckets []datasetBucket
	for i, al := range cm.cfg.Aliases {
		ref, isDataset, err := al.Dataset()
		if err != nil {
			return fail(err)
		}
		if isDataset {
			dsBuckets = append(dsBuckets, datasetBucket{name: al.Name, ref: ref, source: "alias " + al.Target, alias: true})
			continue
		}
		b, p, err := al.Root()
		if err != nil {
			return fail(err)
		}
		d, err := list(b, p)
		if err != nil {
			return fail(fmt.Errorf("alias %s: %w", al.Name, err))
		}
		aliasUploads[i] = d.Uploads
	}
	reserved := map[string]bool{}
	for n := range cm.static {
		reserved[n] = true
	}
	for _, al := range cm.cfg.Aliases {
		reserved[al.Name] = true
	}
	named, cols := NameUploads(append(uploads, found...), func(n string) bool { return reserved[n] })
	rep.Collisions = cols
	named = slices.DeleteFunc(named, func(u Upload) bool {
		if u.Dataset { // a discovered dataset: a bucket following its CURRENT
			dsBuckets = append(dsBuckets, datasetBucket{name: u.Name, ref: DatasetRef{Bucket: u.Bucket, Prefix: u.DatasetPrefix},
				source: "discover s3://" + u.Bucket + "/" + u.Root + " (dataset s3://" + u.Bucket + "/" + u.DatasetPrefix + ")"})
		}
		return u.Dataset
	})
	plans := cm.planDatasets(ctx, dsBuckets)
	if initial {
		if err := datasetErrors(plans); err != nil {
			return fail(err) // a bad pointer or a missing pinned version at start
		}
	}

	// Nothing below can fail before the opens: every bucket gets an entry.
	op := &scanOp{cm: cm, start: start, initial: initial, prev: prev, before: cm.catalog.Entries(),
		entries: map[string]*Entry{}, rep: rep, cols: cols,
		byKey: map[string]*Entry{}, reusedSet: map[*Entry]bool{}, aliases: map[string]aliasOutcome{}}
	for n, e := range cm.static {
		op.entries[n] = e
		rep.Sources[n] = cm.staticSources[n]
	}
	cm.applyDatasets(op, plans)
	for _, u := range named {
		op.entries[u.Name] = op.entry(u, u.Name)
		rep.Sources[u.Name] = "discover s3://" + u.Bucket + "/" + u.Root + " (" + u.URL() + ")"
	}
	prevSources := cm.report.Load().Sources
	for i, al := range cm.cfg.Aliases {
		if _, isDataset, _ := al.Dataset(); isDataset {
			continue // applyDatasets gave it its entry
		}
		var keep *Entry
		if !initial {
			keep = op.before[al.Name]
		}
		op.entries[al.Name] = op.resolveAlias(al, aliasUploads[i], keep, prevSources[al.Name])
		rep.Sources[al.Name] = "alias " + al.Target + " (resolving)"
	}

	if initial && !cm.cfg.WaitOpen {
		// Serve every bucket now; settle when the opens have ended. The
		// report served meanwhile is a copy: the opens still write op's
		// (the aliases' sources and skips, the datasets' versions), and
		// settle publishes that one once they have ended.
		cm.catalog.swapEntries(op.entries)
		op.mu.Lock() // the alias resolutions have started: they append skips under it
		cm.report.Store(rep.clone())
		op.mu.Unlock()
		cm.initial = op
		cm.log.Info().Int("roots", len(cm.cfg.Discover)).Int("aliases", len(cm.cfg.Aliases)).
			Int("buckets", len(op.entries)).Dur("took", time.Since(start)).
			Msg("discovery listed; opening archives in the background")
		go func() {
			if op.wait(cm.base) != nil {
				return // shutting down
			}
			cm.mu.Lock()
			defer cm.mu.Unlock()
			cm.adoptDatasets(op, false)
			op.mu.Lock()
			superseded := op.superseded
			op.mu.Unlock()
			if superseded {
				// A rescan took over its entries and settled them.
				cm.log.Info().Dur("took", time.Since(op.start)).Msg("every open of the start has ended")
				cm.ready.Store(true)
				return
			}
			cm.settle(op)
		}()
		return nil
	}
	if err := op.wait(ctx); err != nil {
		cm.abandon(op)
		return fail(err)
	}
	dsErrs := cm.adoptDatasets(op, !initial)
	if initial {
		errs := dsErrs
		for _, al := range cm.cfg.Aliases {
			if o := op.aliases[al.Name]; o.err != nil {
				errs = append(errs, o.err)
			}
		}
		if len(errs) > 0 {
			cm.abandon(op)
			return fail(errors.Join(errs...))
		}
	}
	cm.catalog.swapEntries(op.entries)
	cm.settle(op)
	return nil
}

// abandon retires every entry op started (the upload entries it opened
// and its aliases): the scan failed and the previous catalog stays.
func (cm *Manager) abandon(op *scanOp) {
	op.mu.Lock()
	op.settled = true
	var retire []*Entry
	for k, e := range op.byKey {
		if op.prev[k] != e {
			retire = append(retire, e)
		}
	}
	for _, al := range cm.cfg.Aliases {
		if e := op.entries[al.Name]; e != nil {
			retire = append(retire, e)
		}
	}
	op.mu.Unlock()
	cm.retire(retire...)
	cm.abandonDatasets(op)
}

// settle ends scan op once its opens have ended (op's catalog is
// served): it records what op found, keeps the open upload entries for the
// next scan, logs, and retires what is no longer served. Called with cm.mu
// held; a second call is a no-op.
func (cm *Manager) settle(op *scanOp) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.settled {
		return
	}
	op.settled = true
	if cm.initial == op {
		cm.initial = nil
	}
	rep := op.rep
	for _, al := range cm.cfg.Aliases {
		o := op.aliases[al.Name]
		if o.err != nil {
			cm.log.Error().Err(o.err).Str("alias", al.Name).Msg("alias unresolved; it answers that error")
			rep.Sources[al.Name] = "alias " + al.Target + " (unresolved)"
		} else if o.source != "" {
			rep.Sources[al.Name] = o.source
		}
	}

	// Keep the upload entries that hold an archive a bucket serves, and
	// those a bucket serves still opening (reused from an earlier scan:
	// the next scan reuses them too, so a slow open is never restarted).
	served := map[*archiveview.Archive]bool{}
	servedEntry := map[*Entry]bool{}
	for _, e := range op.entries {
		servedEntry[e] = true
		if a, _, _ := e.State(); a != nil {
			served[a] = true
		}
	}
	open := map[string]*Entry{}
	var failed, kept int
	for k, e := range op.byKey {
		a, err, done := e.State()
		if err != nil {
			failed++
		}
		switch {
		case a != nil && served[a] || !done && servedEntry[e]:
			open[k] = e
		case err != nil && keptFailure(err) && kept < maxKeptFailures:
			// Not read again while listed unchanged (entry).
			open[k] = e
			kept++
		}
	}
	cm.open = open
	cm.setHeld(op.entries, open)
	cm.report.Store(rep)

	// Retire every entry no longer served or kept.
	live := map[*Entry]bool{}
	for _, e := range op.entries {
		live[e] = true
	}
	for _, e := range open {
		live[e] = true
	}
	var retire []*Entry
	for _, m := range []map[string]*Entry{op.before, op.prev, op.byKey} {
		for _, e := range m {
			if !live[e] {
				live[e] = true // once
				retire = append(retire, e)
			}
		}
	}

	// What is new, each line once (scanlog.go); the summary below counts
	// every failure.
	cm.logEntries(op)
	for n := range op.before {
		if op.entries[n] == nil {
			cm.log.Info().Str("archive", n).Msg("no longer serving archive")
		}
	}
	cm.logSkipped(rep)
	for _, c := range op.cols {
		cm.log.Warn().Str("name", c.Name).Str("kept_by", c.Winner).Strs("renamed", c.Renamed).Msg("bucket name collision")
	}
	cm.log.Info().Int("roots", len(cm.cfg.Discover)).Int("aliases", len(cm.cfg.Aliases)).
		Int("buckets", len(op.entries)).Int("failed", failed).Int("skipped", len(rep.Skipped)).Int("collisions", len(op.cols)).
		Int("retired", len(retire)).Int("reused", op.reused).
		Dur("took", time.Since(op.start)).Msg("discovery scan")
	cm.retire(retire...)
	if op.initial {
		cm.ready.Store(true)
	}
}

// RescanLoop rescans every interval (0 = never) and whenever trigger
// delivers a reason (SIGHUP, a test), until ctx ends. After each scan the
// archives still served re-list their storage classes
// (Options.StorageClasses). scanned, when not nil, is called after every
// rescan (and that refresh) with the scan's error.
func (cm *Manager) RescanLoop(ctx context.Context, interval time.Duration, trigger <-chan string, scanned func(error)) {
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		why := ""
		select {
		case <-ctx.Done():
			return
		case <-tick:
			why = "interval"
		case why = <-trigger:
		}
		if len(cm.cfg.Discover)+len(cm.cfg.Aliases) == 0 {
			cm.log.Info().Str("why", why).Msg("rescan: nothing to rescan (no --discover or --alias)")
		} else {
			cm.log.Info().Str("why", why).Msg("rescan")
		}
		before := cm.catalog.Map()
		err := cm.Scan(ctx, false)
		if err != nil {
			cm.log.Error().Err(err).Msg("rescan failed; still serving the previous catalog")
		}
		cm.refreshStorageClasses(ctx, before)
		if scanned != nil {
			scanned(err)
		}
	}
}

// refreshStorageClasses re-lists the storage classes and restore states of
// every archive still served that was served before the scan (archives the
// scan opened listed theirs at open), when Options.StorageClasses is set.
// A failure is logged: the archive keeps what it knew and HEADs objects
// when needed.
func (cm *Manager) refreshStorageClasses(ctx context.Context, before map[string]*archiveview.Archive) {
	if !cm.opts.StorageClasses {
		return
	}
	was := map[*archiveview.Archive]bool{}
	for _, a := range before {
		was[a] = true
	}
	done := map[*archiveview.Archive]bool{}
	n := 0
	for _, a := range cm.catalog.Map() {
		if !was[a] || done[a] || ctx.Err() != nil {
			continue
		}
		done[a] = true
		n++
		if err := a.RefreshStorageClasses(ctx); err != nil {
			cm.log.Warn().Err(err).Str("archive", a.Name()).Msg("rescan: storage classes not refreshed")
		}
	}
	cm.log.Info().Int("archives", n).Msg("rescan: storage classes refreshed")
}

// CloseAll stops every open still running and closes every archive (at
// shutdown, after in-flight requests).
func (cm *Manager) CloseAll() {
	cm.closed.Do(func() {
		cm.stop()
		close(cm.done)
		cm.retireHistories()
		cm.jobs.Wait()
		cm.retired.Wait()
		cm.mu.Lock()
		defer cm.mu.Unlock()
		for a := range archivesOf(cm.catalog.Entries(), cm.static, cm.open) {
			cm.closeArchive(a)
		}
	})
}

// maxKeptFailures bounds the failed opens a scan keeps for the next (a
// manifest that failed to parse, not read again while unchanged); past it
// the others are read again, as before.
const maxKeptFailures = 10000
