package catalog

// The manager: which archives are served under which bucket names, kept
// current. It opens the configured archives once, lists the discovery roots
// and re-resolves the aliases at every scan (at start, on a rescan trigger,
// on the rescan interval), swaps the Dynamic catalog in one step, and closes
// archives a scan replaced after a grace period. Listing the store happens
// only here (and in Discover, which Scan calls) and, when
// Options.StorageClasses is set, once per upload prefix at every open and
// rescan (the archives' storage classes), never on the read path.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// Source is one configured archive: bucket Name serves the manifest at
// ManifestURL (s3://BUCKET/KEY).
type Source struct {
	Name, ManifestURL string
}

// Alias is one "@latest" alias: bucket Name serves the newest finished
// upload under Target (s3://BUCKET/PREFIX@latest).
type Alias struct {
	Name, Target string
}

// Root returns the alias's discovery root, or an error naming the alias
// when Target is not s3://BUCKET/PREFIX@latest.
func (a Alias) Root() (bucket, prefix string, err error) {
	u, ok := strings.CutSuffix(a.Target, "@latest")
	if !ok {
		return "", "", fmt.Errorf("--alias %s=%s: the target must end in @latest (s3://BUCKET/PREFIX@latest)", a.Name, a.Target)
	}
	b, p, err := ParseDiscoverURL(u)
	if err != nil {
		return "", "", fmt.Errorf("--alias %s=%s: %w", a.Name, a.Target, err)
	}
	return b, p, nil
}

// Config is what a Manager serves.
type Config struct {
	Store    backend.Store
	Options  archiveview.Options // for every archive opened; Name is set per bucket
	Archives []Source            // opened once at start; a failure is fatal
	Discover []string            // s3://BUCKET/PREFIX discovery roots
	Aliases  []Alias
	// RetireGrace is how long an archive a scan replaced keeps running
	// (requests already reading it finish) before it is closed.
	RetireGrace time.Duration
	Logger      zerolog.Logger
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

	static        map[string]*archiveview.Archive // --archive: never replaced
	staticSources map[string]string

	mu      sync.Mutex                      // one scan at a time; guards open
	open    map[string]*archiveview.Archive // discovery/alias archives by bucket\x00key\x00etag
	report  atomic.Pointer[scanReport]
	retired sync.WaitGroup
	done    chan struct{} // closed at shutdown: retire now
	closed  sync.Once
}

// scanReport is what the last scan found, for /-/archives.
type scanReport struct {
	Time       time.Time         `json:"scanned_at"`
	Error      string            `json:"scan_error,omitempty"`
	Sources    map[string]string `json:"-"`
	Skipped    []Skipped         `json:"skipped"`
	Collisions []Collision       `json:"collisions"`
}

// NewManager returns a manager serving nothing yet: call OpenStatic, then
// Scan.
func NewManager(cfg Config) *Manager {
	cm := &Manager{
		cfg: cfg, store: cfg.Store, opts: cfg.Options, log: cfg.Logger,
		catalog:       NewDynamic(nil),
		static:        map[string]*archiveview.Archive{},
		staticSources: map[string]string{},
		open:          map[string]*archiveview.Archive{},
		done:          make(chan struct{}),
	}
	cm.report.Store(&scanReport{Sources: map[string]string{}})
	return cm
}

// Catalog is the catalog requests read (s3api.Catalog).
func (cm *Manager) Catalog() *Dynamic { return cm.catalog }

// logArchive writes the per-archive start line.
func (cm *Manager) logArchive(name, source string, a *archiveview.Archive) {
	info := a.Info()
	cm.log.Info().Str("archive", name).Str("source", source).
		Str("upload_id", info.UploadID).Str("version", info.Version).
		Strs("chain", info.Chain).
		Int("files", info.Files).Int("chunks", info.Chunks).Int("frames", info.Frames).
		Int64("compressed_bytes", info.CompressedBytes).Int64("uncompressed_bytes", info.UncompressedBytes).
		Strs("shapes", info.Shapes).Strs("warnings", info.Warnings).
		Msg("serving archive")
}

// OpenStatic opens every configured archive. Any failure is fatal: a configured
// archive that cannot be served is a configuration error.
func (cm *Manager) OpenStatic(ctx context.Context) error {
	for _, sa := range cm.cfg.Archives {
		bucket, key, err := backend.ParseObjectURL(sa.ManifestURL)
		if err != nil {
			return fmt.Errorf("archive %s: manifest %s: %w", sa.Name, sa.ManifestURL, err)
		}
		o := cm.opts
		o.Name = sa.Name
		a, err := archiveview.Open(ctx, cm.store, bucket, key, o)
		if err != nil {
			return fmt.Errorf("archive %s: manifest %s: %w", sa.Name, sa.ManifestURL, err)
		}
		cm.static[sa.Name] = a
		cm.staticSources[sa.Name] = "archive " + sa.ManifestURL
		cm.logArchive(sa.Name, "archive "+sa.ManifestURL, a)
	}
	cm.catalog.Swap(cm.static)
	return nil
}

// Scan lists every discovery root, names the uploads, re-resolves every
// alias, opens what is new (reusing archives whose manifest is listed with
// the same key and ETag), swaps the catalog in one step and retires the
// archives no longer served. At start (initial) any failure is returned;
// later a listing failure keeps the previous catalog and an alias that
// cannot be resolved keeps its previous target.
func (cm *Manager) Scan(ctx context.Context, initial bool) error {
	if len(cm.cfg.Discover)+len(cm.cfg.Aliases) == 0 {
		return nil
	}
	cm.mu.Lock()
	defer cm.mu.Unlock()
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
		d, err := Discover(ctx, cm.store, bucket, prefix)
		if err != nil {
			return d, err
		}
		listings[k] = d
		rep.Skipped = append(rep.Skipped, d.Skipped...)
		return d, nil
	}
	var uploads []Upload
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
	}
	reserved := map[string]bool{}
	for n := range cm.static {
		reserved[n] = true
	}
	for _, al := range cm.cfg.Aliases {
		reserved[al.Name] = true
	}
	named, cols := NameUploads(uploads, func(n string) bool { return reserved[n] })
	rep.Collisions = cols

	fresh := map[string]*archiveview.Archive{}
	reused := 0
	// A scan that fails from here on keeps the previous catalog, so the
	// archives it opened itself (not reused from cm.open) are closed.
	abandon := func(err error) error {
		for k, a := range fresh {
			if cm.open[k] != a {
				a.Close()
			}
		}
		return fail(err)
	}
	get := func(ctx context.Context, u Upload, name string) (*archiveview.Archive, error) {
		k := u.Bucket + "\x00" + u.ManifestKey + "\x00" + u.ETag
		if a := fresh[k]; a != nil {
			return a, nil
		}
		if a := cm.open[k]; a != nil {
			fresh[k] = a
			reused++
			return a, nil
		}
		o := cm.opts
		o.Name = name
		a, err := archiveview.Open(ctx, cm.store, u.Bucket, u.ManifestKey, o)
		if err != nil {
			return nil, err
		}
		fresh[k] = a
		return a, nil
	}
	next := make(map[string]*archiveview.Archive, len(cm.static)+len(named)+len(cm.cfg.Aliases))
	for n, a := range cm.static {
		next[n] = a
		rep.Sources[n] = cm.staticSources[n]
	}
	for _, u := range named {
		a, err := get(ctx, u, u.Name)
		if err != nil {
			if ctx.Err() != nil {
				return abandon(ctx.Err())
			}
			rep.Skipped = append(rep.Skipped, Skipped{Bucket: u.Bucket, Key: u.ManifestKey, Reason: err.Error()})
			continue
		}
		next[u.Name] = a
		rep.Sources[u.Name] = "discover s3://" + u.Bucket + "/" + u.Root + " (" + u.URL() + ")"
	}
	prev := cm.catalog.Map()
	for _, al := range cm.cfg.Aliases {
		b, p, err := al.Root()
		if err != nil {
			return abandon(err)
		}
		d, err := list(b, p)
		if err != nil {
			return abandon(fmt.Errorf("alias %s: %w", al.Name, err))
		}
		a, u, skipped, err := Latest(ctx, d.Uploads, 0, func(ctx context.Context, u Upload) (*archiveview.Archive, error) {
			return get(ctx, u, al.Name)
		})
		rep.Skipped = append(rep.Skipped, skipped...)
		if err != nil {
			err = fmt.Errorf("alias %s=%s: %w", al.Name, al.Target, err)
			if initial || prev[al.Name] == nil {
				if initial {
					return abandon(err)
				}
				cm.log.Error().Err(err).Str("alias", al.Name).Msg("alias unresolved; not served")
				continue
			}
			cm.log.Error().Err(err).Str("alias", al.Name).Msg("alias unresolved; keeping its previous target")
			next[al.Name] = prev[al.Name]
			rep.Sources[al.Name] = cm.report.Load().Sources[al.Name]
			continue
		}
		next[al.Name] = a
		rep.Sources[al.Name] = "alias " + al.Target + " -> " + u.URL()
	}

	// Swap, then retire what is no longer served.
	served := map[*archiveview.Archive]bool{}
	for _, a := range next {
		served[a] = true
	}
	old := cm.catalog.Swap(next)
	var retire []*archiveview.Archive
	seen := map[*archiveview.Archive]bool{}
	// Archives opened by this scan but not served (an alias candidate that
	// lost) are retired too.
	for _, m := range []map[string]*archiveview.Archive{old, cm.open, fresh} {
		for _, a := range m {
			if !served[a] && !seen[a] {
				seen[a] = true
				retire = append(retire, a)
			}
		}
	}
	for k, a := range fresh {
		if !served[a] {
			delete(fresh, k)
		}
	}
	cm.open = fresh
	cm.report.Store(rep)

	for n, a := range next {
		if prev[n] != a {
			cm.logArchive(n, rep.Sources[n], a)
		}
	}
	for n := range prev {
		if next[n] == nil {
			cm.log.Info().Str("archive", n).Msg("no longer serving archive")
		}
	}
	for _, s := range rep.Skipped {
		cm.log.Warn().Str("bucket", s.Bucket).Str("key", s.Key).Str("reason", s.Reason).Msg("discovery skipped")
	}
	for _, c := range cols {
		cm.log.Warn().Str("name", c.Name).Str("kept_by", c.Winner).Strs("renamed", c.Renamed).Msg("bucket name collision")
	}
	cm.log.Info().Int("roots", len(cm.cfg.Discover)).Int("aliases", len(cm.cfg.Aliases)).
		Int("buckets", len(next)).Int("skipped", len(rep.Skipped)).Int("collisions", len(cols)).
		Int("retired", len(retire)).Int("reused", reused).
		Dur("took", time.Since(start)).Msg("discovery scan")
	for _, a := range retire {
		cm.retire(a)
	}
	return nil
}

// retire closes a after the retire grace (or at shutdown, whichever is
// first). Requests that looked the archive up before the swap keep reading
// it: Close only stops prefetch and releases parked decoders, and reads
// still open afterwards complete (without readahead).
func (cm *Manager) retire(a *archiveview.Archive) {
	cm.retired.Add(1)
	go func() {
		defer cm.retired.Done()
		t := time.NewTimer(cm.cfg.RetireGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-cm.done:
		}
		_ = a.Close()
		cm.log.Debug().Str("archive", a.Name()).Msg("retired archive closed")
	}()
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

// CloseAll closes every archive (at shutdown, after in-flight requests).
func (cm *Manager) CloseAll() {
	cm.closed.Do(func() {
		close(cm.done)
		cm.retired.Wait()
		cm.mu.Lock()
		defer cm.mu.Unlock()
		seen := map[*archiveview.Archive]bool{}
		for _, m := range []map[string]*archiveview.Archive{cm.catalog.Map(), cm.static, cm.open} {
			for _, a := range m {
				if !seen[a] {
					seen[a] = true
					_ = a.Close()
				}
			}
		}
	})
}

// Page is the /-/archives document.
type Page struct {
	Buckets    []BucketEntry `json:"buckets"`
	ScannedAt  *time.Time    `json:"scanned_at,omitempty"`
	ScanError  string        `json:"scan_error,omitempty"`
	Skipped    []Skipped     `json:"skipped"`
	Collisions []Collision   `json:"collisions"`
}

// BucketEntry is one served bucket on the /-/archives page.
type BucketEntry struct {
	Bucket            string   `json:"bucket"`
	Source            string   `json:"source"`
	Archive           string   `json:"archive"`
	UploadID          string   `json:"upload_id"`
	Version           string   `json:"version"`
	ManifestKey       string   `json:"manifest_key"`
	Chain             []string `json:"chain"`
	Files             int      `json:"files"`
	Chunks            int      `json:"chunks"`
	Frames            int      `json:"frames"`
	CompressedBytes   int64    `json:"compressed_bytes"`
	UncompressedBytes int64    `json:"uncompressed_bytes"`
	Shapes            []string `json:"shapes"`
	Warnings          []string `json:"warnings"`
	// Unverifiable counts files no checksum covers (served as stored).
	Unverifiable       int      `json:"unverifiable_files"`
	UnverifiableSample []string `json:"unverifiable_sample,omitempty"`
}

// Page builds the /-/archives document from the current catalog and the
// last scan.
func (cm *Manager) Page() Page {
	rep := cm.report.Load()
	p := Page{Skipped: rep.Skipped, Collisions: rep.Collisions, ScanError: rep.Error}
	if !rep.Time.IsZero() {
		t := rep.Time.UTC()
		p.ScannedAt = &t
	}
	if p.Skipped == nil {
		p.Skipped = []Skipped{}
	}
	if p.Collisions == nil {
		p.Collisions = []Collision{}
	}
	for _, name := range cm.catalog.BucketNames() {
		a, ok := cm.catalog.Bucket(name)
		if !ok {
			continue
		}
		info := a.Info()
		src := rep.Sources[name]
		if src == "" {
			src = cm.staticSources[name]
		}
		p.Buckets = append(p.Buckets, BucketEntry{
			Bucket: name, Source: src, Archive: info.Name, UploadID: info.UploadID, Version: info.Version,
			ManifestKey: info.ManifestKey, Chain: info.Chain, Files: info.Files, Chunks: info.Chunks, Frames: info.Frames,
			CompressedBytes: info.CompressedBytes, UncompressedBytes: info.UncompressedBytes,
			Shapes: info.Shapes, Warnings: info.Warnings,
			Unverifiable: info.Unverifiable, UnverifiableSample: info.UnverifiableSample,
		})
	}
	if p.Buckets == nil {
		p.Buckets = []BucketEntry{}
	}
	return p
}
