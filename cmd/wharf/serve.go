package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
)

// serveArchive is one --archive NAME=MANIFEST_URL.
type serveArchive struct {
	Name, ManifestURL string
}

// serveConfig is everything "wharf serve" needs; runServe fills it from the
// config file and flags (config.go) and other commands (demo) may fill it
// directly and call serve.
type serveConfig struct {
	Listen          string
	AdminListen     string
	StoreURL        string
	S3              backend.S3Config
	Archives        []serveArchive
	Discover        []string      // s3://BUCKET/PREFIX discovery roots
	Aliases         []serveAlias  // NAME=s3://BUCKET/PREFIX@latest
	Rescan          time.Duration // 0 = rescan only on SIGHUP
	RetireGrace     time.Duration // wait before closing a replaced archive
	Anonymous       bool
	AccessKey       string
	SecretKey       string
	Keys            []auth.Key // from the config file
	KeysFile        string
	CacheBytes      int64
	IndexCacheDir   string
	VirtualHostBase string
	Region          string
	LogFormat       string // json | console
	LogOut          io.Writer
	// Ready, if set, is called with the bound addresses once listening.
	Ready func(addr, adminAddr string)
	// ShutdownTimeout bounds the wait for in-flight responses. 0 = 30s.
	ShutdownTimeout time.Duration
	// MaxInflightPerKey admits at most this many concurrent S3 requests per
	// access key (anonymous clients: per IP address); more are answered
	// 503 SlowDown. 0 = unlimited.
	MaxInflightPerKey int
	// Listener limits (newHTTPServer); 0 = the default.
	ReadHeaderTimeout time.Duration // request line and headers; default 10s
	ReadTimeout       time.Duration // the whole request, headers and any body; default 1m
	IdleTimeout       time.Duration // an idle keep-alive connection; default 2m
	MaxHeaderBytes    int           // request line plus headers; default 64 KiB

	// Test hooks: wrapStore wraps the opened store (faults.NewFaulty);
	// rescanNow triggers a rescan like SIGHUP; scanned is called after
	// every rescan with its error.
	wrapStore func(backend.Store) backend.Store
	rescanNow <-chan struct{}
	scanned   func(error)
}

// archiveFlags collects repeated --archive values.
type archiveFlags []serveArchive

func (a *archiveFlags) String() string {
	parts := make([]string, len(*a))
	for i, x := range *a {
		parts[i] = x.Name + "=" + x.ManifestURL
	}
	return strings.Join(parts, ",")
}

func (a *archiveFlags) Set(v string) error {
	name, u, ok := strings.Cut(v, "=")
	if !ok || name == "" || u == "" {
		return fmt.Errorf("want NAME=MANIFEST_URL, got %q", v)
	}
	*a = append(*a, serveArchive{Name: name, ManifestURL: u})
	return nil
}

// byteSize is a flag taking 536870912, 512MiB, 2GiB, 64KB...
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func runServe(ctx context.Context, args []string) error {
	cfg, check, err := parseServeArgs(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if check {
		keys, err := cfg.checkConfig()
		if err != nil {
			return fmt.Errorf("config invalid: %w", err)
		}
		fmt.Fprint(os.Stdout, cfg.checkSummary(keys))
		return nil
	}
	return serve(ctx, cfg)
}

// newServeLogger builds the zerolog logger for format (json or console).
func newServeLogger(format string, out io.Writer) (zerolog.Logger, error) {
	if out == nil {
		out = os.Stderr
	}
	switch format {
	case "", "json":
		return zerolog.New(out).With().Timestamp().Logger(), nil
	case "console":
		return zerolog.New(zerolog.ConsoleWriter{Out: out, TimeFormat: time.RFC3339}).With().Timestamp().Logger(), nil
	}
	return zerolog.Logger{}, fmt.Errorf("--log-format %q: want json or console", format)
}

// isLoopbackListen reports whether addr binds only loopback interfaces.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// splitHostPort checks a listen address, naming it in the error.
func splitHostPort(addr string) (string, string, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("listen address %q: %w", addr, err)
	}
	return h, p, nil
}

// validBucketFlagName is the check for configured bucket names (--archive,
// --alias): non-empty, no "/" or whitespace.
func validBucketFlagName(n string) bool {
	return n != "" && !strings.ContainsAny(n, "/ \t\r\n")
}

// validate checks cfg before anything is opened. keys are the resolved
// access keys (resolveKeys).
func (cfg *serveConfig) validate(keys []auth.Key) error {
	if cfg.StoreURL == "" {
		return errors.New("--store is required (file:///DIR or s3://)")
	}
	if len(cfg.Archives)+len(cfg.Discover)+len(cfg.Aliases) == 0 {
		return errors.New("at least one --archive NAME=MANIFEST_URL, --discover s3://BUCKET/PREFIX or --alias NAME=s3://BUCKET/PREFIX@latest is required")
	}
	seen := map[string]bool{}
	for _, a := range cfg.Archives {
		if !validBucketFlagName(a.Name) {
			return fmt.Errorf("--archive %s=%s: invalid bucket name %q", a.Name, a.ManifestURL, a.Name)
		}
		if seen[a.Name] {
			return fmt.Errorf("--archive %s=%s: bucket name %q used twice", a.Name, a.ManifestURL, a.Name)
		}
		seen[a.Name] = true
	}
	for _, al := range cfg.Aliases {
		if !validBucketFlagName(al.Name) {
			return fmt.Errorf("--alias %s=%s: invalid bucket name %q", al.Name, al.Target, al.Name)
		}
		if seen[al.Name] {
			return fmt.Errorf("--alias %s=%s: bucket name %q used twice", al.Name, al.Target, al.Name)
		}
		seen[al.Name] = true
		if _, _, err := al.root(); err != nil {
			return err
		}
	}
	for _, d := range cfg.Discover {
		if _, _, err := archiveview.ParseDiscoverURL(d); err != nil {
			return fmt.Errorf("--discover: %w", err)
		}
	}
	if len(keys) == 0 && !cfg.Anonymous && !isLoopbackListen(cfg.Listen) {
		return fmt.Errorf("refusing to listen on non-loopback %s with neither keys (--access-key/--secret-key, --keys-file, WHARF_ACCESS_KEY) nor --anonymous", cfg.Listen)
	}
	if cfg.CacheBytes <= 0 {
		return errors.New("--cache-bytes must be positive")
	}
	if cfg.Rescan < 0 || cfg.RetireGrace < 0 || cfg.ShutdownTimeout < 0 {
		return errors.New("--rescan, --retire-grace and --shutdown-timeout must not be negative")
	}
	if cfg.ReadHeaderTimeout < 0 || cfg.ReadTimeout < 0 || cfg.IdleTimeout < 0 {
		return errors.New("--read-header-timeout, --read-timeout and --idle-timeout must not be negative")
	}
	if cfg.MaxInflightPerKey < 0 {
		return errors.New("--max-inflight-per-key must not be negative (0 = unlimited)")
	}
	if cfg.MaxHeaderBytes < 0 {
		return errors.New("--max-header-bytes must not be negative")
	}
	return nil
}

// serve opens every archive (configured, discovered, aliased), then serves
// S3 (and the admin endpoints) until ctx is cancelled, then shuts down
// gracefully: in-flight responses finish, then every archive is closed.
func serve(ctx context.Context, cfg serveConfig) (retErr error) {
	log, err := newServeLogger(cfg.LogFormat, cfg.LogOut)
	if err != nil {
		return err
	}
	keys, err := cfg.resolveKeys()
	if err != nil {
		return err
	}
	if err := cfg.validate(keys); err != nil {
		return err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	// SIGHUP is caught from here on, before the (possibly long) first scan,
	// so that it never kills the server; one arriving during start-up
	// triggers a rescan once serving.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	store, err := backend.OpenStore(ctx, cfg.StoreURL, cfg.S3)
	if err != nil {
		return err
	}
	if cfg.wrapStore != nil {
		store = cfg.wrapStore(store)
	}
	store = backend.Instrument(store, backend.NewMetrics(reg))
	if cfg.IndexCacheDir != "" {
		if err := os.MkdirAll(cfg.IndexCacheDir, 0o700); err != nil {
			return fmt.Errorf("--index-cache: %w", err)
		}
	}
	cm := newCatalogManager(&cfg, store, archiveview.Options{
		Cache:         archiveview.NewFrameCache(cfg.CacheBytes),
		Metrics:       archiveview.NewMetrics(reg),
		Logger:        log,
		IndexCacheDir: cfg.IndexCacheDir,
	}, log)
	defer func() {
		if retErr != nil {
			cm.closeAll()
		}
	}()
	if err := cm.openStatic(ctx); err != nil {
		return err
	}
	if err := cm.scan(ctx, true); err != nil {
		return err
	}
	reg.MustRegister(s3api.NewCatalogCollector(cm.catalog))

	verifier, err := auth.New(auth.Config{Keys: keys, Anonymous: cfg.Anonymous, VirtualHostBase: cfg.VirtualHostBase})
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}

	handler := s3api.New(s3api.Config{
		Catalog:           cm.catalog,
		Verifier:          verifier,
		Logger:            log,
		Registerer:        reg,
		Region:            cfg.Region,
		VirtualHostBase:   cfg.VirtualHostBase,
		MaxInflightPerKey: cfg.MaxInflightPerKey,
	})

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := newHTTPServer(handler, &cfg)
	servers := []*http.Server{srv}
	errc := make(chan error, 2)
	var ready atomic.Bool

	adminAddr := ""
	if cfg.AdminListen != "" {
		aln, err := net.Listen("tcp", cfg.AdminListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("admin listen %s: %w", cfg.AdminListen, err)
		}
		adminAddr = aln.Addr().String()
		asrv := newHTTPServer(adminMux(reg, &ready, cm), &cfg)
		servers = append(servers, asrv)
		go func() { errc <- serveOn(asrv, aln) }()
		log.Info().Str("addr", adminAddr).Msg("admin endpoints (/healthz /readyz /metrics /-/archives /debug/pprof/) on " + adminAddr)
	}

	// Rescans: SIGHUP, the --rescan interval, and the test trigger. The
	// signal is caught even with nothing to rescan, so SIGHUP never kills
	// the server.
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		cm.rescanLoop(loopCtx, hup, cfg.Rescan, cfg.rescanNow)
	}()

	addr := ln.Addr().String()
	go func() { errc <- serveOn(srv, ln) }()
	ready.Store(true)
	log.Info().Str("addr", addr).Int("buckets", len(cm.catalog.BucketNames())).
		Bool("anonymous", cfg.Anonymous).Int("keys", len(keys)).
		Msg("listening on " + addr)
	if cfg.Ready != nil {
		cfg.Ready(addr, adminAddr)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	ready.Store(false)
	stopLoop()
	<-loopDone
	timeout := cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	log.Info().Dur("timeout", timeout).Msg("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("shutdown incomplete; closing remaining connections")
			s.Close()
		}
	}
	cm.closeAll()
	log.Info().Msg("stopped")
	return serveErr
}

func serveOn(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Listener defaults (serveConfig's zero values).
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = time.Minute
	defaultIdleTimeout       = 2 * time.Minute
	defaultMaxHeaderBytes    = 64 << 10
)

// newHTTPServer sets the limits every listener needs against slow or
// oversized requests: ReadHeaderTimeout cuts off a client dribbling its
// headers (slow-loris), ReadTimeout bounds the whole request including a body
// wharf refuses but net/http drains for keep-alive, IdleTimeout closes idle
// keep-alive connections, and MaxHeaderBytes answers a larger request line
// plus headers with 431. ReadTimeout does not limit a response: the request
// context is not cancelled by it. There is no write timeout: object bodies
// stream for as long as the client reads them (the per-key concurrency limit
// bounds how many a client can hold open).
func newHTTPServer(h http.Handler, cfg *serveConfig) *http.Server {
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	maxHdr := cfg.MaxHeaderBytes
	if maxHdr <= 0 {
		maxHdr = defaultMaxHeaderBytes
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: or(cfg.ReadHeaderTimeout, defaultReadHeaderTimeout),
		ReadTimeout:       or(cfg.ReadTimeout, defaultReadTimeout),
		IdleTimeout:       or(cfg.IdleTimeout, defaultIdleTimeout),
		MaxHeaderBytes:    maxHdr,
	}
}

// adminMux serves /healthz, /readyz, /metrics, /-/archives and
// /debug/pprof/.
func adminMux(reg *prometheus.Registry, ready *atomic.Bool, cm *catalogManager) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/-/archives", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(cm.page())
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// catalogManager owns the served archives: the configured ones (opened once
// at start), the discovered ones and the aliases (re-resolved by scan), the
// DynamicCatalog requests read, and the closing of archives a scan
// replaced. Listing the store happens only in scan.
type catalogManager struct {
	cfg     *serveConfig
	store   backend.Store
	opts    archiveview.Options
	log     zerolog.Logger
	catalog *s3api.DynamicCatalog

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
	Time       time.Time               `json:"scanned_at"`
	Error      string                  `json:"scan_error,omitempty"`
	Sources    map[string]string       `json:"-"`
	Skipped    []archiveview.Skipped   `json:"skipped"`
	Collisions []archiveview.Collision `json:"collisions"`
}

func newCatalogManager(cfg *serveConfig, store backend.Store, opts archiveview.Options, log zerolog.Logger) *catalogManager {
	cm := &catalogManager{
		cfg: cfg, store: store, opts: opts, log: log,
		catalog:       s3api.NewDynamicCatalog(nil),
		static:        map[string]*archiveview.Archive{},
		staticSources: map[string]string{},
		open:          map[string]*archiveview.Archive{},
		done:          make(chan struct{}),
	}
	cm.report.Store(&scanReport{Sources: map[string]string{}})
	return cm
}

// logArchive writes the per-archive start line.
func (cm *catalogManager) logArchive(name, source string, a *archiveview.Archive) {
	info := a.Info()
	cm.log.Info().Str("archive", name).Str("source", source).
		Str("upload_id", info.UploadID).Str("version", info.Version).
		Strs("chain", info.Chain).
		Int("files", info.Files).Int("chunks", info.Chunks).Int("frames", info.Frames).
		Int64("compressed_bytes", info.CompressedBytes).Int64("uncompressed_bytes", info.UncompressedBytes).
		Strs("shapes", info.Shapes).Strs("warnings", info.Warnings).
		Msg("serving archive")
}

// openStatic opens every --archive. Any failure is fatal: a configured
// archive that cannot be served is a configuration error.
func (cm *catalogManager) openStatic(ctx context.Context) error {
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

// scan lists every discovery root, names the uploads, re-resolves every
// alias, opens what is new (reusing archives whose manifest is listed with
// the same key and ETag), swaps the catalog in one step and retires the
// archives no longer served. At start (initial) any failure is returned;
// later a listing failure keeps the previous catalog and an alias that
// cannot be resolved keeps its previous target.
func (cm *catalogManager) scan(ctx context.Context, initial bool) error {
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

	listings := map[string]archiveview.Discovery{}
	list := func(bucket, prefix string) (archiveview.Discovery, error) {
		k := bucket + "\x00" + prefix
		if d, ok := listings[k]; ok {
			return d, nil
		}
		d, err := archiveview.Discover(ctx, cm.store, bucket, prefix)
		if err != nil {
			return d, err
		}
		listings[k] = d
		rep.Skipped = append(rep.Skipped, d.Skipped...)
		return d, nil
	}
	var uploads []archiveview.Upload
	for _, root := range cm.cfg.Discover {
		b, p, err := archiveview.ParseDiscoverURL(root)
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
	named, cols := archiveview.NameUploads(uploads, func(n string) bool { return reserved[n] })
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
	get := func(ctx context.Context, u archiveview.Upload, name string) (*archiveview.Archive, error) {
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
			rep.Skipped = append(rep.Skipped, archiveview.Skipped{Bucket: u.Bucket, Key: u.ManifestKey, Reason: err.Error()})
			continue
		}
		next[u.Name] = a
		rep.Sources[u.Name] = "discover s3://" + u.Bucket + "/" + u.Root + " (" + u.URL() + ")"
	}
	prev := cm.catalog.Map()
	for _, al := range cm.cfg.Aliases {
		b, p, err := al.root()
		if err != nil {
			return abandon(err)
		}
		d, err := list(b, p)
		if err != nil {
			return abandon(fmt.Errorf("alias %s: %w", al.Name, err))
		}
		a, u, skipped, err := archiveview.Latest(ctx, d.Uploads, 0, func(ctx context.Context, u archiveview.Upload) (*archiveview.Archive, error) {
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
func (cm *catalogManager) retire(a *archiveview.Archive) {
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

// rescanLoop rescans on SIGHUP, every interval (0 = never) and on trigger,
// until ctx ends.
func (cm *catalogManager) rescanLoop(ctx context.Context, hup <-chan os.Signal, interval time.Duration, trigger <-chan struct{}) {
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
		case <-hup:
			why = "SIGHUP"
		case <-tick:
			why = "interval"
		case <-trigger:
			why = "trigger"
		}
		if len(cm.cfg.Discover)+len(cm.cfg.Aliases) == 0 {
			cm.log.Info().Str("why", why).Msg("rescan: nothing to rescan (no --discover or --alias)")
		} else {
			cm.log.Info().Str("why", why).Msg("rescan")
		}
		err := cm.scan(ctx, false)
		if err != nil {
			cm.log.Error().Err(err).Msg("rescan failed; still serving the previous catalog")
		}
		if cm.cfg.scanned != nil {
			cm.cfg.scanned(err)
		}
	}
}

// closeAll closes every archive (at shutdown, after in-flight requests).
func (cm *catalogManager) closeAll() {
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

// archivesPage is the /-/archives document.
type archivesPage struct {
	Buckets    []bucketEntry           `json:"buckets"`
	ScannedAt  *time.Time              `json:"scanned_at,omitempty"`
	ScanError  string                  `json:"scan_error,omitempty"`
	Skipped    []archiveview.Skipped   `json:"skipped"`
	Collisions []archiveview.Collision `json:"collisions"`
}

type bucketEntry struct {
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
}

// page builds the /-/archives document from the current catalog and the
// last scan.
func (cm *catalogManager) page() archivesPage {
	rep := cm.report.Load()
	p := archivesPage{Skipped: rep.Skipped, Collisions: rep.Collisions, ScanError: rep.Error}
	if !rep.Time.IsZero() {
		t := rep.Time.UTC()
		p.ScannedAt = &t
	}
	if p.Skipped == nil {
		p.Skipped = []archiveview.Skipped{}
	}
	if p.Collisions == nil {
		p.Collisions = []archiveview.Collision{}
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
		p.Buckets = append(p.Buckets, bucketEntry{
			Bucket: name, Source: src, Archive: info.Name, UploadID: info.UploadID, Version: info.Version,
			ManifestKey: info.ManifestKey, Chain: info.Chain, Files: info.Files, Chunks: info.Chunks, Frames: info.Frames,
			CompressedBytes: info.CompressedBytes, UncompressedBytes: info.UncompressedBytes,
			Shapes: info.Shapes, Warnings: info.Warnings,
		})
	}
	if p.Buckets == nil {
		p.Buckets = []bucketEntry{}
	}
	return p
}
