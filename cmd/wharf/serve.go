package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
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

// serveConfig is everything "wharf serve" needs; runServe fills it from flags
// and other commands (demo) may fill it directly and call serve.
type serveConfig struct {
	Listen          string
	AdminListen     string
	StoreURL        string
	S3              backend.S3Config
	Archives        []serveArchive
	Anonymous       bool
	AccessKey       string
	SecretKey       string
	CacheBytes      int64
	VirtualHostBase string
	Region          string
	LogFormat       string // json | console
	LogOut          io.Writer
	// Ready, if set, is called with the bound addresses once listening.
	Ready func(addr, adminAddr string)
	// ShutdownTimeout bounds the wait for in-flight responses. 0 = 30s.
	ShutdownTimeout time.Duration
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
	n, err := parseServeBytes(v)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseServeBytes(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || (mult > 1 && n > (1<<62)/mult) {
		return 0, fmt.Errorf("invalid size %q (want e.g. 536870912, 512MiB, 2GiB)", v)
	}
	return n * mult, nil
}

func runServe(ctx context.Context, args []string) error {
	cfg := serveConfig{LogOut: os.Stderr}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:9000", "S3 listen address HOST:PORT (port 0 picks a free one)")
	fs.StringVar(&cfg.AdminListen, "admin-listen", "", "admin listen address for /healthz, /readyz, /metrics, /debug/pprof/ (empty = off)")
	fs.StringVar(&cfg.StoreURL, "store", "", "where the archives live: file:///DIR or s3://")
	var archives archiveFlags
	fs.Var(&archives, "archive", "NAME=MANIFEST_URL: serve the archive whose manifest is MANIFEST_URL (s3://BUCKET/KEY) as bucket NAME; repeatable")
	fs.BoolVar(&cfg.Anonymous, "anonymous", false, "allow unsigned requests (read-only, every bucket)")
	fs.StringVar(&cfg.AccessKey, "access-key", "", "access key clients sign with (default: env WHARF_ACCESS_KEY)")
	fs.StringVar(&cfg.SecretKey, "secret-key", "", "secret key clients sign with (default: env WHARF_SECRET_KEY)")
	fs.StringVar(&cfg.S3.Endpoint, "s3-endpoint", "", "backend S3 endpoint URL (empty = AWS)")
	fs.StringVar(&cfg.S3.Region, "s3-region", "", "backend S3 region (empty = from environment, else us-east-1)")
	fs.BoolVar(&cfg.S3.PathStyle, "s3-path-style", false, "use path-style addressing for the backend S3")
	cache := byteSize(512 << 20)
	fs.Var(&cache, "cache-bytes", "decoded frame cache budget (e.g. 512MiB)")
	fs.StringVar(&cfg.VirtualHostBase, "virtual-host-base", "", "serve virtual-hosted requests for Host BUCKET.DOMAIN (empty = path-style only)")
	fs.StringVar(&cfg.Region, "region", "us-east-1", "region reported to clients (GetBucketLocation, HeadBucket)")
	fs.StringVar(&cfg.LogFormat, "log-format", "json", "log format: json or console")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// Keys from the environment are read after parsing so that -h never
	// prints a secret as a flag default.
	if cfg.AccessKey == "" {
		cfg.AccessKey = os.Getenv("WHARF_ACCESS_KEY")
	}
	if cfg.SecretKey == "" {
		cfg.SecretKey = os.Getenv("WHARF_SECRET_KEY")
	}
	cfg.Archives = archives
	cfg.CacheBytes = int64(cache)
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

// validate checks cfg before anything is opened.
func (cfg *serveConfig) validate() error {
	if cfg.StoreURL == "" {
		return errors.New("--store is required (file:///DIR or s3://)")
	}
	if len(cfg.Archives) == 0 {
		return errors.New("at least one --archive NAME=MANIFEST_URL is required")
	}
	seen := map[string]bool{}
	for _, a := range cfg.Archives {
		if a.Name == "" || strings.ContainsAny(a.Name, "/ \t\r\n") {
			return fmt.Errorf("--archive %s=%s: invalid bucket name %q", a.Name, a.ManifestURL, a.Name)
		}
		if seen[a.Name] {
			return fmt.Errorf("--archive %s=%s: bucket name %q used twice", a.Name, a.ManifestURL, a.Name)
		}
		seen[a.Name] = true
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return errors.New("--access-key and --secret-key (or WHARF_ACCESS_KEY/WHARF_SECRET_KEY) must be given together")
	}
	if cfg.AccessKey == "" && !cfg.Anonymous && !isLoopbackListen(cfg.Listen) {
		return fmt.Errorf("refusing to listen on non-loopback %s with neither --access-key/--secret-key nor --anonymous", cfg.Listen)
	}
	if cfg.CacheBytes <= 0 {
		return errors.New("--cache-bytes must be positive")
	}
	return nil
}

// serve opens every archive, then serves S3 (and the admin endpoints) until
// ctx is cancelled, then shuts down gracefully.
func serve(ctx context.Context, cfg serveConfig) error {
	log, err := newServeLogger(cfg.LogFormat, cfg.LogOut)
	if err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	store, err := backend.OpenStore(ctx, cfg.StoreURL, cfg.S3)
	if err != nil {
		return err
	}
	store = backend.Instrument(store, backend.NewMetrics(reg))
	frameCache := archiveview.NewFrameCache(cfg.CacheBytes)
	avMetrics := archiveview.NewMetrics(reg)

	served := make(map[string]*archiveview.Archive, len(cfg.Archives))
	for _, sa := range cfg.Archives {
		bucket, key, err := backend.ParseObjectURL(sa.ManifestURL)
		if err != nil {
			return fmt.Errorf("archive %s: manifest %s: %w", sa.Name, sa.ManifestURL, err)
		}
		a, err := archiveview.Open(ctx, store, bucket, key, archiveview.Options{
			Name:    sa.Name,
			Cache:   frameCache,
			Metrics: avMetrics,
			Logger:  log,
		})
		if err != nil {
			return fmt.Errorf("archive %s: manifest %s: %w", sa.Name, sa.ManifestURL, err)
		}
		info := a.Info()
		log.Info().Str("archive", sa.Name).Str("manifest", sa.ManifestURL).
			Str("upload_id", info.UploadID).Str("version", info.Version).
			Strs("chain", info.Chain).
			Int("files", info.Files).Int("chunks", info.Chunks).Int("frames", info.Frames).
			Int64("compressed_bytes", info.CompressedBytes).Int64("uncompressed_bytes", info.UncompressedBytes).
			Strs("shapes", info.Shapes).Strs("warnings", info.Warnings).
			Msg("serving archive")
		served[sa.Name] = a
	}

	var keys []auth.Key
	if cfg.AccessKey != "" {
		keys = append(keys, auth.Key{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey})
	}
	verifier, err := auth.New(auth.Config{Keys: keys, Anonymous: cfg.Anonymous})
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}

	handler := s3api.New(s3api.Config{
		Catalog:         s3api.NewStaticCatalog(served),
		Verifier:        verifier,
		Logger:          log,
		Registerer:      reg,
		Region:          cfg.Region,
		VirtualHostBase: cfg.VirtualHostBase,
	})

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := newHTTPServer(handler)
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
		asrv := newHTTPServer(adminMux(reg, &ready))
		servers = append(servers, asrv)
		go func() { errc <- serveOn(asrv, aln) }()
		log.Info().Str("addr", adminAddr).Msg("admin endpoints (/healthz /readyz /metrics /debug/pprof/) on " + adminAddr)
	}
	addr := ln.Addr().String()
	go func() { errc <- serveOn(srv, ln) }()
	ready.Store(true)
	log.Info().Str("addr", addr).Int("archives", len(served)).
		Bool("anonymous", cfg.Anonymous).Bool("keys", cfg.AccessKey != "").
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
	log.Info().Msg("stopped")
	return serveErr
}

func serveOn(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHTTPServer sets the timeouts every listener needs. There is no write
// timeout: object bodies stream for as long as the client reads them.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// adminMux serves /healthz, /readyz, /metrics and /debug/pprof/.
func adminMux(reg *prometheus.Registry, ready *atomic.Bool) http.Handler {
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
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
