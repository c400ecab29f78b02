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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/chunkio/peer"
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
	Listen      string
	AdminListen string
	StoreURL    string
	S3          backend.S3Config
	Archives    []serveArchive
	Discover    []string      // s3://BUCKET/PREFIX discovery roots
	Aliases     []serveAlias  // NAME=s3://BUCKET/PREFIX@latest
	Rescan      time.Duration // 0 = rescan only on SIGHUP
	RetireGrace time.Duration // wait before closing a replaced archive
	// Opening archives (catalog.Config): how many at once, whether start
	// waits for all of them, how long a request waits for one (0 = the
	// defaults).
	OpenConcurrency int
	WaitOpen        bool
	OpenWait        time.Duration
	Anonymous       bool
	AccessKey       string
	SecretKey       string
	Keys            []auth.Key // from the config file
	KeysFile        string
	CacheBytes      int64
	Read            readOptions // read planner and memory budget
	IndexCacheDir   string      // a local --index-cache (indexcache.go)
	IndexCacheURL   string      // an s3://BUCKET/PREFIX --index-cache

	// The shared index cache's secret file, or the opt-in to trusting
	// whoever can write its prefix (indexcache.go).
	IndexCacheSecretFile   string
	IndexCacheTrustWriters bool

	// MemoryTarget (--memory-target) divides the budgets and sets the Go
	// soft memory limit; memorySet says which budgets were given
	// explicitly and keep their value (memtarget.go). 0 = off.
	MemoryTarget int64
	memorySet    memoryExplicit

	VirtualHostBase string
	Region          string
	LogFormat       string // json | console
	LogOut          io.Writer
	// Ready, if set, is called with the bound addresses once listening.
	Ready func(addr, adminAddr string)
	// ShutdownTimeout bounds the wait for in-flight responses. 0 = 30s.
	ShutdownTimeout time.Duration
	// ShutdownDelay keeps serving this long after SIGTERM/SIGINT with
	// /readyz at 503 and keep-alives off, so a load balancer sees the
	// replica leave before its listener closes (Kubernetes: instead of a
	// preStop sleep). 0 = close at once; at most maxShutdownDelay.
	ShutdownDelay time.Duration
	// MaxInflightPerKey admits at most this many concurrent S3 requests per
	// access key (anonymous clients: per IP address); more are answered
	// 503 SlowDown. 0 = unlimited.
	MaxInflightPerKey int
	// Listener limits (newHTTPServer); 0 = the default.
	ReadHeaderTimeout time.Duration // request line and headers; default 10s
	ReadTimeout       time.Duration // the whole request, headers and any body; default 1m
	IdleTimeout       time.Duration // an idle keep-alive connection; default 2m
	MaxHeaderBytes    int           // request line plus headers; default 64 KiB
	// SendTimeout aborts a response that makes no progress this long
	// (s3api.Config.SendTimeout; the admin listener's responses too,
	// s3api.WithProgressDeadline); default 60s, like nginx's send_timeout.
	SendTimeout time.Duration

	// TLS and CORS (frontdoor.go).
	frontDoorConfig

	// Peers: replicas sharing verified frames (peers.go).
	peerConfig

	// Open deadline and index memory of discovered uploads (openlimits.go).
	openLimits

	// AllowRestore serves RestoreObject (POST ?restore) for keys whose
	// grant allows it; off by default (restores cost money).
	AllowRestore bool
	// RestoreStatusTTL is how long an archived object's restore state is
	// trusted before a HEAD asks again; 0 = one minute.
	RestoreStatusTTL time.Duration
	// MaxRestoreBytesPerKey bounds the stored bytes one access key may ask
	// to restore per hour (s3api.Config.MaxRestoreBytesPerKey); 0 = none.
	MaxRestoreBytesPerKey int64

	// Console serves the read-only web console at /-/console/ on the S3
	// listener (package s3api/console).
	Console bool

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
// Every outside text a package logs should be backend.PrintableText (the
// one rule: cut and escaped); the logger is the backstop for one that is
// not. JSON lines carry no unprintable rune (printableJSON), and the
// console format, which quotes string fields but writes a message, a
// list or an object as is, escapes them.
func newServeLogger(format string, out io.Writer) (zerolog.Logger, error) {
	if out == nil {
		out = os.Stderr
	}
	switch format {
	case "", "json":
		return zerolog.New(printableJSON{out}).With().Timestamp().Logger(), nil
	case "console":
		cw := zerolog.ConsoleWriter{Out: out, TimeFormat: time.RFC3339, FormatMessage: func(i any) string {
			if i == nil {
				return ""
			}
			return backend.PrintableText(fmt.Sprint(i), 0)
		}, FormatFieldValue: func(i any) string {
			// A string field comes quoted when it needs it (every
			// unprintable rune escaped); a list or an object comes as
			// json.Marshal writes it, C1 controls and bidi overrides as is.
			b, _ := escapeUnprintable(fmt.Appendf(nil, "%s", i))
			return string(b)
		}}
		return zerolog.New(cw).With().Timestamp().Logger(), nil
	}
	return zerolog.Logger{}, fmt.Errorf("--log-format %q: want json or console", format)
}

// printableJSON writes JSON (zerolog's lines, the admin pages'
// documents) with every unprintable rune past ASCII (a C1 control such
// as U+009B, a terminal's CSI; a line separator; a bidi override) as a
// JSON \u escape: zerolog escapes the ASCII controls only (encoding/json
// also U+2028/9), so such a rune in a logged key reached whoever read the
// log in a terminal. Outside ASCII, both write bytes only inside strings
// (invalid UTF-8 as \ufffd), so the document decodes to the same values.
// A write without such a rune (nearly every one) is passed on as it is,
// with no copy.
type printableJSON struct{ out io.Writer }

func (w printableJSON) Write(p []byte) (int, error) {
	b, escaped := escapeUnprintable(p)
	if !escaped {
		return w.out.Write(p)
	}
	if _, err := w.out.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escapeUnprintable is JSON text p with every unprintable rune past ASCII
// as a JSON \u escape, and whether there was one (else p itself, not
// copied): printableJSON's rule, and the console format's for a field
// that is a list or an object (zerolog writes it as json.Marshal does).
func escapeUnprintable(p []byte) ([]byte, bool) {
	i := 0
	for i < len(p) {
		if p[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(p[i:])
		if !unicode.IsPrint(r) {
			break
		}
		i += n
	}
	if i == len(p) {
		return p, false
	}
	b := make([]byte, 0, len(p)+32)
	b = append(b, p[:i]...)
	for _, r := range string(p[i:]) { // an invalid byte is U+FFFD, printable
		switch {
		case r < utf8.RuneSelf || unicode.IsPrint(r):
			b = utf8.AppendRune(b, r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			b = fmt.Appendf(b, "\\u%04x\\u%04x", r1, r2)
		default:
			b = fmt.Appendf(b, "\\u%04x", r)
		}
	}
	return b, true
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

// checkVirtualHostBase checks --virtual-host-base: "" or a DNS domain
// such as s3.example.com, compared with the request's Host without its
// port. A URL, a port, a path or an empty label would never match any
// Host, so virtual-hosted requests would silently fall to path-style.
func checkVirtualHostBase(base string) error {
	if base == "" {
		return nil
	}
	if strings.Contains(base, "://") || strings.ContainsAny(base, "/:@?# \t\r\n") {
		return fmt.Errorf("--virtual-host-base %q: want a domain such as s3.example.com (no scheme, port or path)", base)
	}
	for _, label := range strings.Split(base, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("--virtual-host-base %q: want a domain such as s3.example.com (an empty or over-long label)", base)
		}
	}
	return nil
}

// checkReportedRegion checks --region, the region clients are told
// (x-amz-bucket-region, GetBucketLocation): "" (us-east-1) or a region
// name of 1 to 64 letters, digits, '-', '_' and '.'; a URL (the endpoint
// in the wrong flag), a path or whitespace would be sent as it is.
func checkReportedRegion(r string) error {
	ok := len(r) <= 64
	for i := 0; ok && i < len(r); i++ {
		c := r[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
	}
	if !ok {
		return fmt.Errorf("--region %q: want a region name such as eu-central-1 (letters, digits, '-', '_', '.'; at most 64), the region reported to clients", r)
	}
	return nil
}

// validate checks cfg before anything is opened. keys are the resolved
// access keys (resolveKeys).
func (cfg *serveConfig) validate(keys []auth.Key) error {
	if cfg.StoreURL == "" {
		return errors.New("--store is required (file:///DIR or s3://)")
	}
	if _, err := backend.CheckStoreURL(cfg.StoreURL); err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	if err := backend.CheckEndpoint(cfg.S3.Endpoint); err != nil {
		return fmt.Errorf("--s3-endpoint: %w", err)
	}
	if err := backend.CheckRegion(cfg.S3.Region); err != nil {
		return fmt.Errorf("--s3-region: %w", err)
	}
	if err := checkVirtualHostBase(cfg.VirtualHostBase); err != nil {
		return err
	}
	if err := checkReportedRegion(cfg.Region); err != nil {
		return err
	}
	if len(cfg.Archives)+len(cfg.Discover)+len(cfg.Aliases) == 0 {
		return errors.New("at least one --archive NAME=MANIFEST_URL, --discover s3://BUCKET/PREFIX or --alias NAME=s3://BUCKET/PREFIX@latest (or NAME=s3://BUCKET/DATASET@current) is required")
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
		if _, _, err := catalog.ParseDiscoverURL(d); err != nil {
			return fmt.Errorf("--discover: %w", err)
		}
	}
	if cfg.Listen == "" {
		// net.Listen would take "" as every interface, on a random port.
		return errors.New("--listen is empty: want HOST:PORT, such as 127.0.0.1:9000 (or :9000 for every interface)")
	}
	if len(keys) == 0 && !cfg.Anonymous && !isLoopbackListen(cfg.Listen) {
		return fmt.Errorf("refusing to listen on non-loopback %s with neither keys (--access-key/--secret-key, --keys-file, WHARF_ACCESS_KEY) nor --anonymous", cfg.Listen)
	}
	if cfg.CacheBytes <= 0 {
		return errors.New("--cache-bytes must be positive")
	}
	if err := cfg.Read.validate(cfg.CacheBytes); err != nil {
		return err
	}
	if cfg.OpenConcurrency < 0 || cfg.OpenConcurrency > maxOpenConcurrency {
		return fmt.Errorf("--open-concurrency %d: want 1 to %d (0 = the default, %d)", cfg.OpenConcurrency, maxOpenConcurrency, catalog.DefaultOpenConcurrency)
	}
	if err := cfg.openLimits.validate(); err != nil {
		return err
	}
	if cfg.OpenWait < 0 || cfg.OpenWait > maxOpenWait {
		return fmt.Errorf("--open-wait %s: want 1ms to %s (a request for a bucket still opening waits this long, then gets 503 SlowDown; 0 = the default, %s)", cfg.OpenWait, maxOpenWait, catalog.DefaultOpenWait)
	}
	if cfg.Rescan < 0 || cfg.RetireGrace < 0 || cfg.ShutdownTimeout < 0 {
		return errors.New("--rescan, --retire-grace and --shutdown-timeout must not be negative")
	}
	if cfg.ShutdownDelay < 0 || cfg.ShutdownDelay > maxShutdownDelay {
		return fmt.Errorf("--shutdown-delay %v: want 0 (off) to %v", cfg.ShutdownDelay, maxShutdownDelay)
	}
	if cfg.Rescan != 0 && cfg.Rescan < minRescan {
		return fmt.Errorf("--rescan %s: want 0 (only at start and on SIGHUP) or at least %s (every rescan lists every discovery root)", cfg.Rescan, minRescan)
	}
	if cfg.ReadHeaderTimeout < 0 || cfg.ReadTimeout < 0 || cfg.IdleTimeout < 0 {
		return errors.New("--read-header-timeout, --read-timeout and --idle-timeout must not be negative")
	}
	for _, lt := range []struct {
		name string
		d    time.Duration
	}{{"--read-header-timeout", cfg.ReadHeaderTimeout}, {"--read-timeout", cfg.ReadTimeout}, {"--idle-timeout", cfg.IdleTimeout}} {
		if lt.d != 0 && (lt.d < minConnTimeout || lt.d > maxConnTimeout) {
			return fmt.Errorf("%s %s: want %s to %s (0 = the default)", lt.name, lt.d, minConnTimeout, maxConnTimeout)
		}
	}
	if cfg.MaxInflightPerKey < 0 {
		return errors.New("--max-inflight-per-key must not be negative (0 = unlimited)")
	}
	if cfg.MaxInflightPerKey > maxInflightPerKey {
		return fmt.Errorf("--max-inflight-per-key %d: want 0 (unlimited) or 1 to %d (it is also the HTTP/2 streams advertised per connection)", cfg.MaxInflightPerKey, maxInflightPerKey)
	}
	if cfg.SendTimeout != 0 && (cfg.SendTimeout < minConnTimeout || cfg.SendTimeout > maxConnTimeout) {
		return fmt.Errorf("--send-timeout %s: want %s to %s (0 = the default, %s)", cfg.SendTimeout, minConnTimeout, maxConnTimeout, defaultSendTimeout)
	}
	if cfg.MaxHeaderBytes < 0 {
		return errors.New("--max-header-bytes must not be negative")
	}
	if err := cfg.validateIndexCache(); err != nil {
		return err
	}
	if cfg.RestoreStatusTTL < 0 || cfg.RestoreStatusTTL > maxRestoreStatusTTL {
		return fmt.Errorf("--restore-status-ttl %s: want 0 (the default, one minute) to %s", cfg.RestoreStatusTTL, maxRestoreStatusTTL)
	}
	if b := cfg.MaxRestoreBytesPerKey; b != 0 {
		switch {
		case !cfg.AllowRestore:
			return fmt.Errorf("--max-restore-bytes-per-key %d: has no effect without --allow-restore", b)
		case b < minRestoreBudget || b > maxRestoreBudget:
			return fmt.Errorf("--max-restore-bytes-per-key %d: want 0 (no limit) or 1MiB to 1PiB per hour", b)
		}
	}
	if cfg.AllowRestore {
		if strings.HasPrefix(cfg.StoreURL, "file://") {
			return errors.New("--allow-restore: a file:// store has no storage classes, so there is nothing to restore")
		}
		if len(keys) == 0 {
			return errors.New("--allow-restore: anonymous callers never restore; configure access keys (--keys-file, --access-key) for the callers that may")
		}
	}
	if cfg.Console && len(keys) == 0 && !cfg.Anonymous {
		return errors.New("--console: with neither access keys nor --anonymous nobody could see anything in the console")
	}
	if err := cfg.peerConfig.validate(cfg.Listen, cfg.AdminListen, cfg.CacheBytes); err != nil {
		return err
	}
	return cfg.frontDoorConfig.validate(cfg.AdminListen, time.Now())
}

// The bounds of --max-restore-bytes-per-key (per hour): below 1 MiB a
// single chunk would exceed it; 1 PiB is no limit in practice.
const (
	minRestoreBudget = 1 << 20
	maxRestoreBudget = 1 << 50
)

// maxRestoreStatusTTL bounds --restore-status-ttl: an archived object's
// restore state older than this is stale for any purpose.
const maxRestoreStatusTTL = 24 * time.Hour

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
	plan, planned, err := cfg.applyMemoryTarget()
	if err != nil {
		return err
	}
	if err := cfg.validate(keys); err != nil {
		return err
	}
	defer setGoMemoryLimit(plan, planned, log)()
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
	front, err := newFrontDoor(&cfg.frontDoorConfig, cfg.AdminListen != "", log, reg)
	if err != nil {
		return err
	}
	cors, err := cfg.corsPolicy()
	if err != nil {
		return err
	}

	store, err := backend.OpenStore(ctx, cfg.StoreURL, cfg.S3)
	if err != nil {
		return err
	}
	if cfg.wrapStore != nil {
		store = cfg.wrapStore(store)
	}
	bm := backend.NewMetrics(reg)
	// A clock is wrong: every store request fails alike until it is fixed.
	// Logged by name at once, then every 10 minutes while it lasts (the
	// requests' own lines are warnings), and counted.
	bm.LogClockSkew(func(err error, refused int64) {
		log.Error().Err(err).Int64("refused", refused).
			Msg("the store refuses wharf's requests for clock skew: this server's clock or the store's is wrong; fix it (NTP)")
	})
	store = backend.Instrument(store, bm)
	// Storage classes are tracked where objects can be archived: stores
	// that restore (S3). A file store has none, so nothing is listed.
	_, restorer := backend.AsRestorer(store)
	if cfg.AllowRestore && !restorer {
		return fmt.Errorf("--allow-restore: the store %s cannot restore objects", cfg.StoreURL)
	}
	if cfg.AllowRestore {
		logRestoreProbes(ctx, log, store, &cfg) // doctor.go
	}
	peers, err := cfg.newPeerGroup(cfg.Read.MaxFrameBytes, reg, log) // nil without --peers
	if err != nil {
		return err
	}
	cache := chunkio.NewFrameCache(cfg.CacheBytes, append(cfg.Read.cacheOptions(), cfg.peerConfig.cacheOptions(peers)...)...)
	indexCache, dropIndexSpool, err := cfg.openIndexCache(ctx, store, reg, log)
	if err != nil {
		return err
	}
	defer dropIndexSpool()
	cm := catalog.NewManager(catalog.Config{
		Store: store,
		Options: archiveview.Options{
			Cache:            cache,
			TrustUnframed:    cfg.Read.TrustUnframed,
			MaxFrameBytes:    cfg.Read.MaxFrameBytes,
			AllowKeyPrefixes: cfg.Read.AllowKeyPrefixes,
			StorageClasses:   restorer,
			RestoreTTL:       cfg.RestoreStatusTTL,
			Metrics:          chunkio.NewMetrics(reg),
			Logger:           log,
			IndexCache:       indexCache,
		},
		Archives:        cfg.catalogSources(),
		Discover:        cfg.Discover,
		Aliases:         cfg.catalogAliases(),
		RetireGrace:     cfg.RetireGrace,
		OpenConcurrency: cfg.OpenConcurrency,
		WaitOpen:        cfg.WaitOpen,
		OpenWait:        cfg.OpenWait, // 0 = the default
		Logger:          log,

		OpenTimeout:       cfg.OpenTimeout, // openlimits.go; 0 = the defaults
		IndexMemory:       int64(cfg.IndexMemory),
		MaxFilesPerUpload: cfg.MaxFilesPerUpload,
		DatasetHistory:    cfg.DatasetHistory,
	})
	defer func() {
		if retErr != nil {
			cm.CloseAll()
		}
	}()
	if err := cm.OpenStatic(ctx); err != nil {
		return err
	}
	if err := cm.Scan(ctx, true); err != nil {
		return err
	}
	reg.MustRegister(catalog.NewCollector(cm.Catalog()))
	reg.MustRegister(cm.DatasetCollector()) // wharf_dataset_version_info, wharf_dataset_pointer_errors_total

	verifier, err := auth.New(auth.Config{Keys: keys, Anonymous: cfg.Anonymous, VirtualHostBase: cfg.VirtualHostBase})
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}

	handler := s3api.New(s3api.Config{
		Catalog:               cm.Catalog(),
		Verifier:              verifier,
		Logger:                log,
		Registerer:            reg,
		Region:                cfg.Region,
		VirtualHostBase:       cfg.VirtualHostBase,
		MaxInflightPerKey:     cfg.MaxInflightPerKey,
		CORS:                  cors,
		AllowRestore:          cfg.AllowRestore,
		MaxRestoreBytesPerKey: cfg.MaxRestoreBytesPerKey,
		Console:               consoleHandler(&cfg, cm, verifier, len(keys) > 0, log),
		SendTimeout:           cfg.sendTimeout(),
		FollowsUpdates:        cm.FollowsUpdates,
		History:               cm.History, // published datasets' version histories
		VersionIDForm:         cm.VersionIDForm,
	})

	peerSide, err := cfg.startPeerSide(peers, cache, front, reg, log) // nil without --peers
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		if peerSide != nil {
			peerSide.ln.Close()
		}
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := newHTTPServer(handler, &cfg)
	front.configure(srv, front.s3, log)
	servers := []*http.Server{srv}
	errc := make(chan error, 3)
	if peerSide != nil {
		defer peers.Close()
	}
	var ready atomic.Bool

	adminAddr := ""
	if cfg.AdminListen != "" {
		aln, err := net.Listen("tcp", cfg.AdminListen)
		if err != nil {
			ln.Close()
			if peerSide != nil {
				peerSide.ln.Close()
			}
			return fmt.Errorf("admin listen %s: %w", cfg.AdminListen, err)
		}
		adminAddr = aln.Addr().String()
		admin := adminMux(reg, &ready, cm, peers)
		if cfg.AdminTokenFile != "" {
			tok, err := newAdminToken(cfg.AdminTokenFile, log, reg)
			if err != nil {
				ln.Close()
				aln.Close()
				if peerSide != nil {
					peerSide.ln.Close()
				}
				return err
			}
			admin = tok.guard(admin)
		} else if !isLoopbackListen(cfg.AdminListen) {
			log.Warn().Str("addr", cfg.AdminListen).Msg("the admin endpoints (metrics, /-/archives, /debug/pprof/) are open to whoever reaches this address: give --admin-token-file, or bind --admin-listen to loopback")
		}
		asrv := newHTTPServer(s3api.WithProgressDeadline(admin, cfg.sendTimeout()), &cfg)
		front.configure(asrv, front.admin, log)
		servers = append(servers, asrv)
		go func() { errc <- serveOn(asrv, aln) }()
		adminURL := adminAddr
		if front.admin != nil {
			adminURL = "https://" + adminAddr
		}
		log.Info().Str("addr", adminAddr).Bool("tls", front.admin != nil).Bool("token", cfg.AdminTokenFile != "").Msg("admin endpoints (/healthz /readyz /metrics /-/archives /-/peers /debug/pprof/) on " + adminURL)
	}

	// Rescans: SIGHUP, the --rescan interval, and the test trigger. The
	// signal is caught even with nothing to rescan, so SIGHUP never kills
	// the server.
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	trigger := make(chan string)
	go func() { // SIGHUP and the test hook, as rescan reasons
		for {
			why := ""
			select {
			case <-loopCtx.Done():
				return
			case <-hup:
				why = "SIGHUP"
			case <-cfg.rescanNow:
				why = "trigger"
			}
			select {
			case trigger <- why:
			case <-loopCtx.Done():
				return
			}
		}
	}()
	go func() {
		defer close(loopDone)
		cm.RescanLoop(loopCtx, cfg.Rescan, trigger, cfg.scanned)
	}()
	if peerSide != nil {
		peerSide.run(loopCtx, errc)
		log.Info().Str("addr", peerSide.ln.Addr().String()).Str("advertise", peers.Self()).Strs("members", peers.Members()).
			Bool("tls", peerSide.cert != nil).Msg("peer listener: replicas share verified frames")
	}
	tlsDone := make(chan struct{})
	go func() { // certificate reloads: SIGHUP and the poll (tls.go)
		defer close(tlsDone)
		front.run(loopCtx)
	}()

	addr := ln.Addr().String()
	go func() { errc <- serveOn(srv, ln) }()
	ready.Store(true)
	listenURL := addr
	if front.s3 != nil {
		listenURL = "https://" + addr
	}
	log.Info().Str("addr", addr).Int("buckets", len(cm.Catalog().BucketNames())).
		Bool("anonymous", cfg.Anonymous).Int("keys", len(keys)).Bool("tls", front.s3 != nil).Bool("allow_restore", cfg.AllowRestore).
		Strs("cors_allow_origins", cfg.CORSAllowOrigins).
		Msg("listening on " + listenURL)
	if cfg.Ready != nil {
		cfg.Ready(addr, adminAddr)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	ready.Store(false)
	if cfg.ShutdownDelay > 0 && serveErr == nil {
		// Keep answering while load balancers notice /readyz; closing
		// keep-alive connections after their response sends clients to
		// the other replicas.
		for _, s := range servers {
			s.SetKeepAlivesEnabled(false)
		}
		log.Info().Dur("delay", cfg.ShutdownDelay).Msg("shutting down: /readyz answers 503; still serving for --shutdown-delay")
		select {
		case <-time.After(cfg.ShutdownDelay):
		case serveErr = <-errc:
		}
	}
	stopLoop()
	<-loopDone
	<-tlsDone
	timeout := cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	log.Info().Dur("timeout", timeout).Msg("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if peerSide != nil {
		peerSide.shutdown(log)
	}
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("shutdown incomplete; closing remaining connections")
			s.Close()
		}
	}
	cm.CloseAll()
	log.Info().Msg("stopped")
	return serveErr
}

// serveOn serves srv on ln: TLS when front.configure gave srv a TLS
// config (the certificate comes from its GetCertificate), else plain HTTP.
func serveOn(srv *http.Server, ln net.Listener) error {
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
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
	defaultSendTimeout       = time.Minute
	// The range of --send-timeout and the listener's timeouts: a shorter
	// one cuts off every client; a longer one holds a slow or idle
	// connection for no purpose.
	minConnTimeout = 100 * time.Millisecond
	maxConnTimeout = time.Hour
	// minRescan: a shorter --rescan would list the discovery roots
	// back to back.
	minRescan = time.Second
	// maxProfile bounds the seconds= of /debug/pprof/profile, /trace and
	// the delta profiles (heap?seconds=...): each holds the runtime's one
	// profiler (or tracer) or a connection for that long, whatever the
	// client does.
	maxProfile = 10 * time.Minute
	// maxInflightPerKey bounds --max-inflight-per-key, which is also
	// HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS, a 32-bit value: past it the
	// setting wrapped (2^32+1 advertised one stream). More requests of one
	// key at once than this is no limit.
	maxInflightPerKey = 1 << 16
	// maxShutdownDelay bounds --shutdown-delay: load balancers' health
	// checks notice a replica leaving within seconds; longer only delays
	// a rollout.
	maxShutdownDelay = 10 * time.Minute
)

// sendTimeout is the response progress deadline (0 = the default).
func (cfg *serveConfig) sendTimeout() time.Duration {
	if cfg.SendTimeout > 0 {
		return cfg.SendTimeout
	}
	return defaultSendTimeout
}

// newHTTPServer sets the limits every listener needs against slow or
// oversized requests: ReadHeaderTimeout cuts off a client dribbling its
// headers (slow-loris), ReadTimeout bounds the whole request including a body
// wharf refuses but net/http drains for keep-alive, IdleTimeout closes idle
// keep-alive connections, and MaxHeaderBytes answers a larger request line
// plus headers with 431. ReadTimeout does not limit a response: the request
// context is not cancelled by it. There is no overall write timeout: object
// bodies stream for as long as the client keeps reading them; a response
// the client stops taking is cut off by the S3 handler's progress deadline
// (--send-timeout, s3api.Config.SendTimeout), moved on by every write.
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
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: or(cfg.ReadHeaderTimeout, defaultReadHeaderTimeout),
		ReadTimeout:       or(cfg.ReadTimeout, defaultReadTimeout),
		IdleTimeout:       or(cfg.IdleTimeout, defaultIdleTimeout),
		MaxHeaderBytes:    maxHdr,
	}
	// HTTP/2 advertises no more concurrent streams per connection than one
	// client may have requests in flight: a browser's burst on one
	// connection (a Zarr viewer's 128 chunk requests) is then queued by
	// the browser, as it queues past 6 connections on HTTP/1.1, instead
	// of being answered 503 SlowDown, which browsers do not retry.
	//
	// An unfinished HTTP/2 header block (HEADERS without END_HEADERS, then
	// silence or a trickle of CONTINUATION frames) is not a stream yet,
	// so neither ReadHeaderTimeout nor the idle timeout of streams applies
	// and only IdleTimeout would end it. The HTTP/2 health check does: a
	// connection that delivers no complete frame for half the header
	// timeout is sent a PING, and closed when no PING ACK comes within the
	// other half. A client inside a header block cannot answer (any frame
	// but CONTINUATION there is a protocol error, and net/http delivers no
	// frame until the block ends), so the block is bounded by
	// ReadHeaderTimeout; a healthy idle client answers the PING and stays
	// until IdleTimeout.
	half := or(cfg.ReadHeaderTimeout, defaultReadHeaderTimeout) / 2
	srv.HTTP2 = &http.HTTP2Config{SendPingTimeout: half, PingTimeout: half}
	if cfg.MaxInflightPerKey > 0 {
		srv.HTTP2.MaxConcurrentStreams = cfg.MaxInflightPerKey
	}
	return srv
}

// adminMux serves /healthz, /readyz, /metrics, /-/archives, /-/peers
// (peers nil: {"enabled": false}) and /debug/pprof/.
func adminMux(reg *prometheus.Registry, ready *atomic.Bool, cm *catalog.Manager, peers *peer.Group) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if !cm.Ready() {
			pending, total := cm.Opening()
			http.Error(w, fmt.Sprintf("not ready: %d of %d archives still opening", pending, total), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	// Every endpoint that builds a page per request has a few turns per
	// group (adminGate); /healthz and /readyz are cheap and never refused.
	scrapes := newAdminGate("metrics scrapes", maxAdminScrapes)
	pages := newAdminGate("admin pages", maxAdminPages)
	profiles := newAdminGate("profiles", maxAdminProfiles) // shared by every /debug/pprof/ endpoint but cmdline
	stw := &adminSpacing{gap: minStopTheWorldGap}
	mux.HandleFunc("/metrics", scrapes.serve(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}).ServeHTTP))
	// The admin pages carry outside text (upload ids, keys, a store's
	// errors): written as the JSON log is (printableJSON), for whoever
	// reads them with curl in a terminal.
	mux.HandleFunc("/-/archives", pages.serve(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(printableJSON{w})
		enc.SetIndent("", "  ")
		_ = enc.Encode(cm.Page())
	}))
	mux.HandleFunc("/-/peers", pages.serve(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(printableJSON{w})
		enc.SetIndent("", "  ")
		if peers == nil {
			_ = enc.Encode(map[string]bool{"enabled": false})
			return
		}
		_ = enc.Encode(peers.Page())
	}))
	mux.HandleFunc("/debug/pprof/", profiles.serve(stw.serve(boundedProfile(pprof.Index)))) // heap?seconds= and the other delta profiles wait too
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, strings.Join(redactArgs(os.Args), "\x00"))
	})
	mux.HandleFunc("/debug/pprof/profile", profiles.serve(boundedProfile(pprof.Profile)))
	mux.HandleFunc("/debug/pprof/symbol", profiles.serve(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", profiles.serve(boundedProfile(pprof.Trace)))
	return mux
}

// redactArgs is args (a command line) with the value of every secret flag
// replaced: /debug/pprof/cmdline is served without authentication, and
// --secret-key's value signs as its key. A secret flag is one whose name
// holds "secret" and does not end in "-file" (a file's path is no
// secret); both forms (--name VALUE, --name=VALUE) are redacted, up to a
// "--" that ends the flags.
func redactArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.Contains(name, "secret") || strings.HasSuffix(name, "-file") {
			continue
		}
		if hasValue {
			out[i] = a[:strings.IndexByte(a, '=')+1] + "REDACTED"
		} else if i+1 < len(out) {
			out[i+1] = "REDACTED"
			i++
		}
	}
	return out
}

// boundedProfile refuses (400) a profile or trace whose seconds= is longer
// than maxProfile, before h starts it; anything else goes to h, which
// answers a malformed value itself.
func boundedProfile(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("seconds"); v != "" {
			if sec, err := strconv.ParseFloat(v, 64); err == nil && sec > maxProfile.Seconds() {
				http.Error(w, fmt.Sprintf("seconds=%s: at most %d (a profile or trace holds the runtime's profiler for that long)", v, int(maxProfile.Seconds())), http.StatusBadRequest)
				return
			}
		}
		h(w, r)
	}
}

// catalogSources are the configured archives, for the catalog manager.
func (cfg *serveConfig) catalogSources() []catalog.Source {
	out := make([]catalog.Source, len(cfg.Archives))
	for i, a := range cfg.Archives {
		out[i] = catalog.Source{Name: a.Name, ManifestURL: a.ManifestURL}
	}
	return out
}

// catalogAliases are the configured aliases, for the catalog manager.
func (cfg *serveConfig) catalogAliases() []catalog.Alias {
	out := make([]catalog.Alias, len(cfg.Aliases))
	for i, a := range cfg.Aliases {
		out[i] = catalog.Alias(a)
	}
	return out
}
