package main

// The "wharf serve" configuration: one flag set, and a YAML file (--config)
// that can hold every option the flags hold. The file is read first; flags
// given on the command line then override it (a repeatable flag such as
// --archive replaces the file's list instead of adding to it). The option
// reference is docs/operations.md.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
)

// maxConfigFile bounds how much of a config file is read.
const maxConfigFile = 1 << 20

// Bounds of the opening options: more opens at once than this only queue
// in the store's connection pool; a longer request wait outlasts every
// client's timeout.
const (
	maxOpenConcurrency = 1024
	maxOpenWait        = 5 * time.Minute
)

// serveAlias is one --alias NAME=s3://BUCKET/PREFIX@latest: bucket NAME
// serves the newest finished upload under PREFIX.
type serveAlias struct {
	Name   string `yaml:"name"`
	Target string `yaml:"target"`
}

// aliasRoot splits the alias target into bucket and prefix.
func (a serveAlias) root() (bucket, prefix string, err error) {
	return catalog.Alias(a).Root()
}

// fileConfig is the YAML layout of --config. Field names are the flag
// names with "_" for "-".
type fileConfig struct {
	Listen      string `yaml:"listen"`
	AdminListen string `yaml:"admin_listen"`
	Store       string `yaml:"store"`
	S3          struct {
		Endpoint  string `yaml:"endpoint"`
		Region    string `yaml:"region"`
		PathStyle bool   `yaml:"path_style"`
	} `yaml:"s3"`
	Archives []struct {
		Name     string `yaml:"name"`
		Manifest string `yaml:"manifest"`
	} `yaml:"archives"`
	Discover        []string      `yaml:"discover"`
	Aliases         []serveAlias  `yaml:"aliases"`
	Rescan          time.Duration `yaml:"rescan"`
	RetireGrace     time.Duration `yaml:"retire_grace"`
	OpenConcurrency int           `yaml:"open_concurrency"`
	WaitOpen        bool          `yaml:"wait_open"`
	OpenWait        time.Duration `yaml:"open_wait"`
	Anonymous       bool          `yaml:"anonymous"`
	Keys            []auth.Key    `yaml:"keys"`
	KeysFile        string        `yaml:"keys_file"`
	CacheBytes      yamlBytes     `yaml:"cache_bytes"`
	IndexCacheDir   string        `yaml:"index_cache_dir"`
	VirtualHostBase string        `yaml:"virtual_host_base"`
	Region          string        `yaml:"region"`
	LogFormat       string        `yaml:"log_format"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	ShutdownDelay   time.Duration `yaml:"shutdown_delay"`
	// Request limits.
	MaxInflightPerKey int           `yaml:"max_inflight_per_key"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	MaxHeaderBytes    yamlBytes     `yaml:"max_header_bytes"`
	SendTimeout       time.Duration `yaml:"send_timeout"`
	// Read planner (readopts.go).
	ReadMemory       yamlBytes `yaml:"read_memory"`
	PartSize         yamlBytes `yaml:"part_size"`
	StreamParts      int       `yaml:"stream_parts"`
	MaxParts         int       `yaml:"max_parts"`
	MaxFrameBytes    yamlBytes `yaml:"max_frame_bytes"`
	TrustUnframed    bool      `yaml:"trust_unframed"`
	AllowKeyPrefixes []string  `yaml:"allow_key_prefixes"`
	// ClientMemoryShare: the per-client share of the read memory (readopts.go).
	ClientMemoryShare float64 `yaml:"client_memory_share"`
	// TLS and CORS (frontdoor.go).
	frontDoorConfig `yaml:",inline"`
	// Opening limits (openlimits.go).
	openLimits `yaml:",inline"`
	// Archived uploads.
	AllowRestore     bool          `yaml:"allow_restore"`
	RestoreStatusTTL time.Duration `yaml:"restore_status_ttl"`
	// MaxRestoreBytesPerKey: --max-restore-bytes-per-key.
	MaxRestoreBytesPerKey yamlBytes `yaml:"max_restore_bytes_per_key"`
	// The web console (cmd/wharf/console.go).
	Console bool `yaml:"console"`

	// Shared index cache authentication (indexcache.go).
	IndexCacheSecretFile   string `yaml:"index_cache_secret_file"`
	IndexCacheTrustWriters bool   `yaml:"index_cache_trust_writers"`

	// The container's memory limit, divided into the budgets (memtarget.go).
	MemoryTarget yamlMemoryTarget `yaml:"memory_target"`

	// Peers (peers.go).
	peerConfig `yaml:",inline"`
}

// yamlBytes is a size in YAML: an integer or a string such as "512MiB".
type yamlBytes int64

func (b *yamlBytes) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a size such as 536870912 or 512MiB", n.Line)
	}
	v, err := parseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = yamlBytes(v)
	return nil
}

// defaultServeConfig is serveConfig with every default applied.
func defaultServeConfig() serveConfig {
	return serveConfig{
		Listen:          "127.0.0.1:9000",
		CacheBytes:      512 << 20,
		Region:          "us-east-1",
		LogFormat:       "json",
		RetireGrace:     time.Minute,
		OpenConcurrency: catalog.DefaultOpenConcurrency,
		OpenWait:        catalog.DefaultOpenWait,
		ShutdownTimeout: 30 * time.Second,
		LogOut:          os.Stderr,

		MaxInflightPerKey: 64,
		ReadHeaderTimeout: defaultReadHeaderTimeout,
		ReadTimeout:       defaultReadTimeout,
		IdleTimeout:       defaultIdleTimeout,
		MaxHeaderBytes:    defaultMaxHeaderBytes,
		SendTimeout:       defaultSendTimeout,

		frontDoorConfig: defaultFrontDoor(),
		openLimits:      defaultOpenLimits(),
	}
}

// loadConfigFile reads path into cfg: options present in the file replace
// cfg's values, absent ones keep them. Unknown options are errors (a
// misspelt option must not silently keep a default).
func loadConfigFile(path string, cfg *serveConfig) error {
	data, _, err := readLocalFile("config", path, maxConfigFile)
	if err != nil {
		return err
	}
	if err := applyConfigYAML(data, cfg); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// applyConfigYAML decodes a config document onto cfg.
func applyConfigYAML(data []byte, cfg *serveConfig) error {
	fc := fileConfig{
		Listen: cfg.Listen, AdminListen: cfg.AdminListen, Store: cfg.StoreURL,
		Discover: cfg.Discover, Aliases: cfg.Aliases, Rescan: cfg.Rescan, RetireGrace: cfg.RetireGrace,
		OpenConcurrency: cfg.OpenConcurrency, WaitOpen: cfg.WaitOpen, OpenWait: cfg.OpenWait,
		Anonymous: cfg.Anonymous, Keys: cfg.Keys, KeysFile: cfg.KeysFile, CacheBytes: yamlBytes(cfg.CacheBytes),
		IndexCacheDir: cfg.indexCache(), VirtualHostBase: cfg.VirtualHostBase, Region: cfg.Region,
		LogFormat: cfg.LogFormat, ShutdownTimeout: cfg.ShutdownTimeout, ShutdownDelay: cfg.ShutdownDelay,
		MaxInflightPerKey: cfg.MaxInflightPerKey, ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout: cfg.ReadTimeout, IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: yamlBytes(cfg.MaxHeaderBytes),
		SendTimeout: cfg.SendTimeout,
		ReadMemory:  yamlBytes(cfg.Read.ReadMemory), PartSize: yamlBytes(cfg.Read.PartSize),
		StreamParts: cfg.Read.StreamParts, MaxParts: cfg.Read.MaxParts,
		TrustUnframed: cfg.Read.TrustUnframed, AllowKeyPrefixes: cfg.Read.AllowKeyPrefixes,
		MaxFrameBytes:   yamlBytes(cfg.Read.MaxFrameBytes),
		frontDoorConfig: cfg.frontDoorConfig,
		openLimits:      cfg.openLimits,
		AllowRestore:    cfg.AllowRestore, RestoreStatusTTL: cfg.RestoreStatusTTL,
		MaxRestoreBytesPerKey: yamlBytes(cfg.MaxRestoreBytesPerKey),
		Console:               cfg.Console,
		ClientMemoryShare:     cfg.Read.ClientMemoryShare,
	}
	fc.S3.Endpoint, fc.S3.Region, fc.S3.PathStyle = cfg.S3.Endpoint, cfg.S3.Region, cfg.S3.PathStyle
	fc.IndexCacheSecretFile, fc.IndexCacheTrustWriters = cfg.IndexCacheSecretFile, cfg.IndexCacheTrustWriters
	fc.MemoryTarget = yamlMemoryTarget(cfg.MemoryTarget)
	fc.peerConfig = cfg.peerConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	// A second document ("---") would be silently ignored: its options
	// would keep their defaults. An empty one (a trailing "---") is fine.
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if strings.Contains(err.Error(), "line ") {
				return err
			}
			// The parser's words name no place ("did not find expected
			// <document start>"): the text after the first document's
			// last line is what it could not read.
			return fmt.Errorf("line %d: text after the YAML document is not YAML: %w", lastYAMLLine(data), err)
		}
		if len(extra.Content) == 1 && extra.Content[0].Tag == "!!null" {
			continue
		}
		return fmt.Errorf("line %d: more than one YAML document (---); put every option in one", extra.Line)
	}
	cfg.Listen, cfg.AdminListen, cfg.StoreURL = fc.Listen, fc.AdminListen, fc.Store
	cfg.S3.Endpoint, cfg.S3.Region, cfg.S3.PathStyle = fc.S3.Endpoint, fc.S3.Region, fc.S3.PathStyle
	if fc.Archives != nil {
		cfg.Archives = nil
		for i, a := range fc.Archives {
			if a.Name == "" || a.Manifest == "" {
				return fmt.Errorf("archives[%d]: want both name and manifest", i)
			}
			cfg.Archives = append(cfg.Archives, serveArchive{Name: a.Name, ManifestURL: a.Manifest})
		}
	}
	cfg.Discover, cfg.Aliases, cfg.Rescan, cfg.RetireGrace = fc.Discover, fc.Aliases, fc.Rescan, fc.RetireGrace
	cfg.OpenConcurrency, cfg.WaitOpen, cfg.OpenWait = fc.OpenConcurrency, fc.WaitOpen, fc.OpenWait
	cfg.Anonymous, cfg.Keys, cfg.KeysFile = fc.Anonymous, fc.Keys, fc.KeysFile
	cfg.CacheBytes, cfg.VirtualHostBase = int64(fc.CacheBytes), fc.VirtualHostBase
	if err := cfg.setIndexCache(fc.IndexCacheDir); err != nil {
		return fmt.Errorf("index_cache_dir: %w", err)
	}
	cfg.IndexCacheSecretFile, cfg.IndexCacheTrustWriters = fc.IndexCacheSecretFile, fc.IndexCacheTrustWriters
	cfg.frontDoorConfig = fc.frontDoorConfig
	cfg.openLimits = fc.openLimits
	cfg.Region, cfg.LogFormat, cfg.ShutdownTimeout, cfg.ShutdownDelay = fc.Region, fc.LogFormat, fc.ShutdownTimeout, fc.ShutdownDelay
	cfg.MaxInflightPerKey = fc.MaxInflightPerKey
	cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.IdleTimeout = fc.ReadHeaderTimeout, fc.ReadTimeout, fc.IdleTimeout
	cfg.SendTimeout = fc.SendTimeout
	if fc.MaxHeaderBytes > 1<<30 {
		return fmt.Errorf("max_header_bytes %d: larger than 1GiB", fc.MaxHeaderBytes)
	}
	cfg.MaxHeaderBytes = int(fc.MaxHeaderBytes)
	cfg.Read = readOptions{ReadMemory: int64(fc.ReadMemory), PartSize: int64(fc.PartSize), StreamParts: fc.StreamParts, MaxParts: fc.MaxParts,
		TrustUnframed: fc.TrustUnframed, AllowKeyPrefixes: fc.AllowKeyPrefixes, MaxFrameBytes: int64(fc.MaxFrameBytes)}
	cfg.Read.ClientMemoryShare = fc.ClientMemoryShare
	cfg.AllowRestore, cfg.RestoreStatusTTL = fc.AllowRestore, fc.RestoreStatusTTL
	cfg.MaxRestoreBytesPerKey = int64(fc.MaxRestoreBytesPerKey)
	cfg.Console = fc.Console
	cfg.MemoryTarget = int64(fc.MemoryTarget)
	cfg.peerConfig = fc.peerConfig
	cfg.memorySet.markYAML(data)
	return nil
}

// listFlag is a repeatable flag whose first use on the command line
// replaces the list the config file gave; later uses append.
type listFlag[T any] struct {
	list  *[]T
	parse func(string) (T, error)
	show  func(T) string
	set   bool
}

func (l *listFlag[T]) String() string {
	if l == nil || l.list == nil {
		return ""
	}
	parts := make([]string, len(*l.list))
	for i, x := range *l.list {
		parts[i] = l.show(x)
	}
	return strings.Join(parts, ",")
}

func (l *listFlag[T]) Set(v string) error {
	x, err := l.parse(v)
	if err != nil {
		return err
	}
	if !l.set {
		*l.list, l.set = nil, true
	}
	*l.list = append(*l.list, x)
	return nil
}

// serveFlags defines every "wharf serve" flag on cfg, with cfg's current
// values as defaults (so a config file loaded into cfg first is what the
// flags override). configPath and check receive --config and
// --check-config.
func serveFlags(cfg *serveConfig, configPath *string, check *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(configPath, "config", *configPath, "YAML config `FILE` holding any of these options (flags given override it)")
	fs.BoolVar(check, "check-config", false, "validate the configuration (flags and --config), print a summary and exit")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "S3 listen address HOST:PORT (port 0 picks a free one)")
	fs.StringVar(&cfg.AdminListen, "admin-listen", cfg.AdminListen, "admin listen address for /healthz, /readyz, /metrics, /-/archives, /debug/pprof/ (empty = off)")
	fs.StringVar(&cfg.StoreURL, "store", cfg.StoreURL, "where the archives live: file:///DIR or s3://")
	fs.Var(&listFlag[serveArchive]{list: &cfg.Archives, parse: func(v string) (serveArchive, error) {
		var a archiveFlags
		err := a.Set(v)
		if err != nil {
			return serveArchive{}, err
		}
		return a[0], nil
	}, show: func(a serveArchive) string { return a.Name + "=" + a.ManifestURL }},
		"archive", "NAME=MANIFEST_URL: serve the archive whose manifest is MANIFEST_URL (s3://BUCKET/KEY) as bucket NAME; repeatable")
	fs.Var(&listFlag[string]{list: &cfg.Discover, parse: func(v string) (string, error) {
		_, _, err := catalog.ParseDiscoverURL(v)
		return v, err
	}, show: func(s string) string { return s }},
		"discover", "s3://BUCKET/PREFIX: serve every finished upload under PREFIX/uploads/ (and PREFIX/writers/*/uploads/) as a bucket named after its upload id; repeatable")
	fs.Var(&listFlag[serveAlias]{list: &cfg.Aliases, parse: func(v string) (serveAlias, error) {
		name, target, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return serveAlias{}, fmt.Errorf("want NAME=s3://BUCKET/PREFIX@latest or NAME=s3://BUCKET/DATASET@current, got %q", v)
		}
		a := serveAlias{Name: name, Target: target}
		_, _, err := a.root()
		return a, err
	}, show: func(a serveAlias) string { return a.Name + "=" + a.Target }},
		"alias", "NAME=s3://BUCKET/PREFIX@latest: bucket NAME serves the newest finished upload under PREFIX, re-resolved at every rescan; NAME=s3://BUCKET/DATASET@current: a published dataset, following its CURRENT pointer at every rescan; NAME=s3://BUCKET/DATASET@<version_id>: that published version for good; repeatable")
	durationVar(fs, &cfg.Rescan, "rescan", cfg.Rescan, "re-list discovery roots and re-resolve aliases this often (0 = only at start and on SIGHUP)")
	durationVar(fs, &cfg.RetireGrace, "retire-grace", cfg.RetireGrace, "after a rescan replaces an archive, wait this long before closing the old one")
	fs.IntVar(&cfg.OpenConcurrency, "open-concurrency", cfg.OpenConcurrency, "archives opened at once (manifest GETs, or HEADs with --index-cache)")
	fs.BoolVar(&cfg.WaitOpen, "wait-open", cfg.WaitOpen, "listen only once every discovered and aliased archive is open (an unresolvable alias is then fatal); default: listen at once, buckets still opening answer after --open-wait")
	durationVar(fs, &cfg.OpenWait, "open-wait", cfg.OpenWait, "a request for a bucket whose archive is still opening waits this long, then gets 503 SlowDown with Retry-After")
	fs.BoolVar(&cfg.Anonymous, "anonymous", cfg.Anonymous, "allow unsigned requests (read-only, every bucket)")
	fs.StringVar(&cfg.AccessKey, "access-key", "", "access key clients sign with (also env WHARF_ACCESS_KEY)")
	fs.StringVar(&cfg.SecretKey, "secret-key", "", "secret key clients sign with (also env WHARF_SECRET_KEY)")
	fs.StringVar(&cfg.KeysFile, "keys-file", cfg.KeysFile, "YAML `FILE` of access keys with optional per-bucket grants (keys: [{access_key, secret_key, buckets, restore}])")
	fs.StringVar(&cfg.S3.Endpoint, "s3-endpoint", cfg.S3.Endpoint, "backend S3 endpoint URL (empty = AWS)")
	fs.StringVar(&cfg.S3.Region, "s3-region", cfg.S3.Region, "backend S3 region (empty = from environment, else us-east-1)")
	fs.BoolVar(&cfg.S3.PathStyle, "s3-path-style", cfg.S3.PathStyle, "use path-style addressing for the backend S3")
	fs.Var((*byteSize)(&cfg.CacheBytes), "cache-bytes", "decoded frame cache budget (e.g. 512MiB)")
	fs.Var(indexCacheFlag{cfg}, "index-cache", "existing `DIR` for persistent archive indexes (empty = off); restarts then load indexes with HEADs only")
	addIndexCacheTrustFlags(fs, &cfg.IndexCacheSecretFile, &cfg.IndexCacheTrustWriters)
	fs.StringVar(&cfg.VirtualHostBase, "virtual-host-base", cfg.VirtualHostBase, "serve virtual-hosted requests for Host BUCKET.DOMAIN (empty = path-style only)")
	fs.StringVar(&cfg.Region, "region", cfg.Region, "region reported to clients (GetBucketLocation, HeadBucket)")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "log format: json or console")
	durationVar(fs, &cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "on SIGTERM/SIGINT, wait this long for in-flight responses")
	durationVar(fs, &cfg.ShutdownDelay, "shutdown-delay", cfg.ShutdownDelay, "on SIGTERM/SIGINT, keep serving this long with /readyz at 503 before closing the listeners (0 = off, at most 10m)")
	fs.IntVar(&cfg.MaxInflightPerKey, "max-inflight-per-key", cfg.MaxInflightPerKey, "at most this many concurrent S3 requests per access key (anonymous clients: per IP address); more get 503 SlowDown (0 = unlimited)")
	durationVar(fs, &cfg.ReadHeaderTimeout, "read-header-timeout", cfg.ReadHeaderTimeout, "cut off a client that has not sent its request headers within this time (slow-loris)")
	durationVar(fs, &cfg.ReadTimeout, "read-timeout", cfg.ReadTimeout, "cut off a client that has not sent its whole request within this time (never limits a response)")
	durationVar(fs, &cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "close a keep-alive connection idle this long")
	durationVar(fs, &cfg.SendTimeout, "send-timeout", cfg.SendTimeout, "abort a response the client has taken no bytes of for this long (a reader that stopped reading, an HTTP/2 stream whose window stays closed) and free what it holds; like nginx's send_timeout (100ms to 1h)")
	fs.Var(maxHeaderFlag{&cfg.MaxHeaderBytes}, "max-header-bytes", "largest request line plus headers (e.g. 64KiB); larger is answered 431")
	cfg.Read.addReadFlags(fs)
	frontDoorFlags(fs, &cfg.frontDoorConfig)
	openLimitFlags(fs, &cfg.openLimits)
	fs.BoolVar(&cfg.AllowRestore, "allow-restore", cfg.AllowRestore, "serve RestoreObject (POST /BUCKET/KEY?restore): restore the archived chunks holding a file's bytes, for keys whose grant allows it (keys file: restore: true|false|[buckets]); restores cost money, so this is off by default")
	fs.Var((*byteSize)(&cfg.MaxRestoreBytesPerKey), "max-restore-bytes-per-key", "with --allow-restore: the stored bytes of archived chunks one access key may ask to restore per hour (e.g. 500GiB; each chunk counts at least 128KiB); beyond it RestoreObject is 503 SlowDown with Retry-After, before anything is sent; 0 = no limit")
	durationVar(fs, &cfg.RestoreStatusTTL, "restore-status-ttl", cfg.RestoreStatusTTL, "trust an archived chunk's restore state this long before asking S3 again with a HEAD (0 = 1m; at most 24h)")
	fs.BoolVar(&cfg.Console, "console", cfg.Console, "serve a read-only web console at /-/console/ on the S3 listener (browse, preview, download; login with an access key unless --anonymous)")
	fs.Var(memoryTargetFlag{&cfg.MemoryTarget}, "memory-target", "the container's memory limit (e.g. 3GiB, or its bytes from the Kubernetes downward API): sets the Go soft memory limit and divides --cache-bytes, --read-memory and --index-memory from it, leaving headroom for the runtime; budgets given explicitly win (docs/operations.md, \"One memory target\")")
	peerFlags(fs, &cfg.peerConfig)
	return fs
}

// maxHeaderFlag is --max-header-bytes: a size such as 65536 or 64KiB.
type maxHeaderFlag struct{ n *int }

func (f maxHeaderFlag) String() string {
	if f.n == nil {
		return ""
	}
	return fmt.Sprint(*f.n)
}

func (f maxHeaderFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	if n > 1<<30 {
		return fmt.Errorf("%s: larger than 1GiB", v)
	}
	*f.n = int(n)
	return nil
}

// parseServeArgs builds the configuration from the config file (if
// --config is given) and then the flags. check reports --check-config.
func parseServeArgs(args []string) (cfg serveConfig, check bool, err error) {
	// Pass 1 only finds --config; errors are reported by pass 2.
	var path string
	scratch := defaultServeConfig()
	pre := serveFlags(&scratch, &path, &check)
	pre.SetOutput(io.Discard)
	_ = pre.Parse(args)

	cfg = defaultServeConfig()
	if path != "" {
		if err := loadConfigFile(path, &cfg); err != nil {
			return cfg, false, err
		}
	}
	fs := serveFlags(&cfg, &path, &check)
	if err := fs.Parse(args); err != nil {
		return cfg, false, err
	}
	if fs.NArg() > 0 {
		return cfg, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { cfg.memorySet.mark(f.Name) })
	return cfg, check, nil
}

// resolveKeys gathers every access key: the config file's keys, --keys-file,
// --access-key/--secret-key, and WHARF_ACCESS_KEY/WHARF_SECRET_KEY when no
// key pair was given as flags. The environment is read here, after flag
// parsing, so -h never prints a secret as a default.
func (cfg *serveConfig) resolveKeys() ([]auth.Key, error) {
	keys := append([]auth.Key(nil), cfg.Keys...)
	if cfg.KeysFile != "" {
		k, err := auth.LoadKeysFile(cfg.KeysFile)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k...)
	}
	switch {
	case cfg.AccessKey != "" || cfg.SecretKey != "":
		if cfg.AccessKey == "" || cfg.SecretKey == "" {
			return nil, errors.New("--access-key and --secret-key (or WHARF_ACCESS_KEY/WHARF_SECRET_KEY) must be given together")
		}
		keys = append(keys, auth.Key{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey})
	default:
		k, err := auth.KeysFromEnv()
		if err != nil {
			return nil, fmt.Errorf("%w (or --access-key and --secret-key must be given together)", err)
		}
		keys = append(keys, k...)
	}
	if _, err := auth.New(auth.Config{Keys: keys}); err != nil {
		return nil, err
	}
	return keys, nil
}

// checkSummary is what --check-config prints for a valid configuration.
func (cfg *serveConfig) checkSummary(keys []auth.Key) string {
	adminTLS, _ := cfg.adminTLS()
	return fmt.Sprintf("config ok: store %s, %d archives, %d discovery roots, %d aliases, %d keys, anonymous %v, cache %d bytes, listen %s, admin %q, tls %v, admin tls %v, cors origins %d, peers %d\n",
		cfg.StoreURL, len(cfg.Archives), len(cfg.Discover), len(cfg.Aliases), len(keys), cfg.Anonymous, cfg.CacheBytes, cfg.Listen, cfg.AdminListen,
		cfg.tlsEnabled(), adminTLS && cfg.AdminListen != "", len(cfg.CORSAllowOrigins), len(cfg.peerList()))
}

// checkConfig validates cfg without opening the store or listening:
// addresses, URLs, names, keys (including --keys-file) and formats.
func (cfg *serveConfig) checkConfig() ([]auth.Key, error) {
	if _, err := newServeLogger(cfg.LogFormat, io.Discard); err != nil {
		return nil, err
	}
	keys, err := cfg.resolveKeys()
	if err != nil {
		return nil, err
	}
	if _, _, err := cfg.applyMemoryTarget(); err != nil {
		return nil, err
	}
	if err := cfg.validate(keys); err != nil {
		return nil, err
	}
	for _, a := range cfg.Archives {
		if _, _, err := backend.ParseObjectURL(a.ManifestURL); err != nil {
			return nil, fmt.Errorf("archive %s: %w", a.Name, err)
		}
	}
	for _, l := range []struct{ flag, addr string }{{"--listen", cfg.Listen}, {"--admin-listen", cfg.AdminListen}} {
		if l.addr == "" {
			continue
		}
		_, port, err := splitHostPort(l.addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.flag, err)
		}
		// A number 0 to 65535 or a service name, as the listener takes.
		if _, err := net.LookupPort("tcp", port); err != nil {
			return nil, fmt.Errorf("%s %q: port %q: want 0 to 65535", l.flag, l.addr, port)
		}
	}
	if cfg.AdminListen != "" && sameListen(cfg.Listen, cfg.AdminListen) {
		return nil, fmt.Errorf("--admin-listen %s: the same address as --listen %s; the admin endpoints need a listener of their own", cfg.AdminListen, cfg.Listen)
	}
	return keys, nil
}

// lastYAMLLine is the last line of data's first YAML document (1 when it
// cannot be parsed): where the text after it begins at the earliest.
func lastYAMLLine(data []byte) int {
	var doc yaml.Node
	if yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc) != nil {
		return 1
	}
	line := 1
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		line = max(line, n.Line)
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return line
}
