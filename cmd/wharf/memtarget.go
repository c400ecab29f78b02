package main

// --memory-target: one figure, the container's memory limit, from which
// wharf sets the Go runtime's soft memory limit and divides its budgets
// (the frame cache, the reads in flight, the index memory). The division
// is a table in docs/operations.md ("One memory target"); budgets given
// explicitly (a flag or a YAML key) keep their value and the derived ones
// share what is left. A target that cannot hold the explicit budgets plus
// the headroom, or leaves a derived budget below its floor, is an error at
// start naming the smallest target that would do.

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/wharf-s3/wharf/archiveview/catalog"
)

// The division of a memory target T (percentages of T, floors in bytes).
const (
	outsideGoPct    = 10       // what the Go limit does not count: binary, thread stacks, page cache charged to the cgroup
	runtimePct      = 20       // inside the Go limit, outside every budget: garbage between collections, goroutine stacks, HTTP/TLS buffers, metrics
	minRuntime      = 64 << 20 // runtime headroom floor
	inFlightPct     = 15       // read memory beyond the cache: parts in flight, frames ahead of readers, decoder windows
	indexPct        = 15       // index memory of discovered and aliased uploads
	minTargetCache  = 16 << 20 // a derived frame cache smaller than this is refused
	minMemoryTarget = 128 << 20
	maxMemoryTarget = 1 << 50
)

// memoryExplicit records which budgets were given explicitly, as a flag or
// a config key: those win over the division.
type memoryExplicit struct {
	cache, read, index, maxFiles bool
}

// mark sets the budget named by a flag (or its YAML key's flag name).
func (m *memoryExplicit) mark(name string) {
	switch name {
	case "cache-bytes":
		m.cache = true
	case "read-memory":
		m.read = true
	case "index-memory":
		m.index = true
	case "max-files-per-upload":
		m.maxFiles = true
	}
}

// memoryPlan is a target's division.
type memoryPlan struct {
	Target    int64 // --memory-target
	GoLimit   int64 // the soft limit given to debug.SetMemoryLimit
	Runtime   int64 // inside GoLimit, outside every budget
	Cache     int64 // --cache-bytes
	Read      int64 // --read-memory (cache + reads in flight)
	Index     int64 // --index-memory
	MaxFiles  int   // --max-files-per-upload: derived (0 = kept), or the explicit one in divideMemory's cur
	Explicit  memoryExplicit
	Available int64 // what the budgets may use together: Read + Index at most

	// PeerCache is the part of Cache that holds compressed frames this
	// replica owns for its peers (--peer-cache-bytes, default an eighth);
	// 0 without --peers. Peer fetches in flight come out of Read - Cache
	// like every read's buffers.
	PeerCache int64
}

// parseMemoryTarget reads a --memory-target value: 0 (off) or a positive
// size (bytes,
// or with a KiB/MiB/GiB/TiB, Ki/Mi/Gi/Ti or KB/MB/GB/TB suffix, as the
// Kubernetes downward API and its quantities write it). A value that is
// something else (a percentage, a fraction, a duration) is refused naming
// what was meant.
func parseMemoryTarget(v string) (int64, error) {
	s := strings.TrimSpace(v)
	switch {
	case s == "":
		return 0, fmt.Errorf("--memory-target %q: want the container's memory limit, a size such as 3GiB or 3221225472", v)
	case strings.HasSuffix(s, "%"):
		return 0, fmt.Errorf("--memory-target %q: want the container's memory limit as a size (such as 3GiB), not a share", v)
	case strings.HasPrefix(s, "-"):
		return 0, fmt.Errorf("--memory-target %q: want a positive size", v)
	case strings.ContainsAny(s, ".,"):
		return 0, fmt.Errorf("--memory-target %q: want a whole number with an optional suffix (write 1536MiB, not 1.5GiB)", v)
	case strings.ContainsAny(s, "eE") && !strings.ContainsAny(s, "kKmMgGtT"):
		return 0, fmt.Errorf("--memory-target %q: want a whole number of bytes or a size such as 3GiB, not an exponent", v)
	}
	n, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("--memory-target %q: %w", v, err)
	}
	if n == 0 {
		return 0, nil // off: a flag can turn off the config file's target
	}
	if err := checkMemoryTarget(n); err != nil {
		if strings.Trim(s, "0123456789") == "" && n < minMemoryTarget {
			err = fmt.Errorf("%w (a bare number is bytes: write %sMiB, not %s)", err, s, s)
		}
		return 0, fmt.Errorf("--memory-target %q: %w", v, err)
	}
	return n, nil
}

// checkMemoryTarget bounds a target already read as a size.
func checkMemoryTarget(n int64) error {
	switch {
	case n <= 0:
		return fmt.Errorf("want a positive size, got %d", n)
	case n < minMemoryTarget:
		return fmt.Errorf("%d bytes is smaller than any working wharf (at least %s)", n, fmtMiB(minMemoryTarget))
	case n > maxMemoryTarget:
		return fmt.Errorf("%d bytes: larger than 1PiB", n)
	}
	return nil
}

// memoryTargetFlag is --memory-target.
type memoryTargetFlag struct{ n *int64 }

func (f memoryTargetFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return ""
	}
	return fmt.Sprint(*f.n)
}

func (f memoryTargetFlag) Set(v string) error {
	n, err := parseMemoryTarget(v)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

// yamlMemoryTarget is memory_target in the config file, read and checked
// like the flag.
type yamlMemoryTarget int64

func (t *yamlMemoryTarget) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: memory_target: want a size such as 3GiB", n.Line)
	}
	v, err := parseMemoryTarget(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*t = yamlMemoryTarget(v)
	return nil
}

// markYAML marks the budgets a config document sets.
func (m *memoryExplicit) markYAML(data []byte) {
	var keys map[string]yaml.Node
	if yaml.Unmarshal(data, &keys) != nil {
		return // the strict decode reports it
	}
	for k := range keys {
		m.mark(strings.ReplaceAll(k, "_", "-"))
	}
}

// fmtMiB prints bytes as MiB (rounded up, so a minimum is never shown
// below itself).
func fmtMiB(n int64) string {
	return fmt.Sprintf("%dMiB", (n+(1<<20)-1)>>20)
}

// divideMemory divides target among the budgets. cur holds the current
// (explicit where ex says so) values; the derived ones are replaced. It is
// pure: the caller applies the plan.
func divideMemory(target int64, ex memoryExplicit, cur memoryPlan) (memoryPlan, error) {
	p, err := divideOnce(target, ex, cur)
	if err == nil {
		return p, nil
	}
	// Name the smallest target that would do, to the MiB.
	lo, hi := target, int64(maxMemoryTarget)
	if _, e := divideOnce(hi, ex, cur); e != nil {
		return memoryPlan{}, err
	}
	for hi-lo > 1<<20 {
		mid := lo + (hi-lo)/2
		if _, e := divideOnce(mid, ex, cur); e == nil {
			hi = mid
		} else {
			lo = mid
		}
	}
	return memoryPlan{}, fmt.Errorf("%w; the smallest target that holds them is about %s", err, fmtMiB(hi))
}

func divideOnce(target int64, ex memoryExplicit, cur memoryPlan) (memoryPlan, error) {
	if err := checkMemoryTarget(target); err != nil {
		return memoryPlan{}, fmt.Errorf("--memory-target: %w", err)
	}
	pct := func(n int64) int64 { return target / 100 * n }
	p := memoryPlan{Target: target, Explicit: ex}
	p.GoLimit = target - pct(outsideGoPct)
	p.Runtime = max(pct(runtimePct), minRuntime)
	p.Available = p.GoLimit - p.Runtime
	inFlight := max(pct(inFlightPct), minMemoryExtra)

	// What the explicit budgets take (the cache is inside the read memory).
	var explicit []string
	var taken int64
	if ex.read {
		taken += cur.Read
		explicit = append(explicit, fmt.Sprintf("--read-memory %s", fmtMiB(cur.Read)))
	} else if ex.cache {
		taken += cur.Cache + minMemoryExtra
		explicit = append(explicit, fmt.Sprintf("--cache-bytes %s (+ 64MiB in flight)", fmtMiB(cur.Cache)))
	}
	if ex.index {
		taken += cur.Index
		explicit = append(explicit, fmt.Sprintf("--index-memory %s", fmtMiB(cur.Index)))
	}
	if taken > p.Available {
		return memoryPlan{}, fmt.Errorf("--memory-target %s is smaller than the explicit budgets need: %s add up to %s, but the target leaves %s for budgets (%d%% outside the Go limit, %s of runtime headroom)",
			fmtMiB(target), strings.Join(explicit, " + "), fmtMiB(taken), fmtMiB(p.Available), outsideGoPct, fmtMiB(p.Runtime))
	}

	if ex.index {
		p.Index = cur.Index
	} else {
		p.Index = min(max(pct(indexPct), minIndexMemory), maxIndexMemory)
		if ex.maxFiles {
			// An explicit file cap needs its index memory.
			p.Index = max(p.Index, int64(cur.MaxFiles)*catalog.IndexBytesPerFile)
		}
	}
	if ex.read {
		p.Read = cur.Read
	} else {
		p.Read = p.Available - p.Index
	}
	switch {
	case ex.cache:
		p.Cache = cur.Cache
	case ex.read:
		// The explicit read memory keeps a quarter (at least 64MiB) for
		// reads in flight, like the division's 15:40.
		p.Cache = p.Read - max(p.Read/4, minMemoryExtra)
		if p.Cache < minTargetCache {
			return memoryPlan{}, fmt.Errorf("--read-memory %s with --memory-target leaves a frame cache of %s (at least %s): raise --read-memory or give --cache-bytes",
				fmtMiB(p.Read), fmtMiB(max(p.Cache, 0)), fmtMiB(minTargetCache))
		}
	default:
		p.Cache = p.Read - inFlight
	}
	switch {
	case ex.cache && !ex.read && p.Read < p.Cache+minMemoryExtra:
		return memoryPlan{}, fmt.Errorf("--memory-target %s is smaller than the explicit budgets need: --cache-bytes %s + 64MiB in flight + index memory %s exceed the %s it leaves for budgets",
			fmtMiB(target), fmtMiB(p.Cache), fmtMiB(p.Index), fmtMiB(p.Available))
	case p.Read < p.Cache+minMemoryExtra:
		return memoryPlan{}, fmt.Errorf("--memory-target %s: the read memory %s cannot hold the frame cache %s and 64MiB of reads in flight",
			fmtMiB(target), fmtMiB(p.Read), fmtMiB(p.Cache))
	case !ex.cache && p.Cache < minTargetCache:
		return memoryPlan{}, fmt.Errorf("--memory-target %s is too small: it leaves a frame cache of %s (at least %s)", fmtMiB(target), fmtMiB(max(p.Cache, 0)), fmtMiB(minTargetCache))
	case p.Read+p.Index > p.Available:
		return memoryPlan{}, fmt.Errorf("--memory-target %s is too small: read memory %s + index memory %s exceed the %s it leaves for budgets", fmtMiB(target), fmtMiB(p.Read), fmtMiB(p.Index), fmtMiB(p.Available))
	}
	if !ex.index && !ex.maxFiles {
		// One upload may use all the derived index memory, no more than
		// the default allows.
		p.MaxFiles = int(min(p.Index/catalog.IndexBytesPerFile, int64(catalog.DefaultMaxFilesPerUpload)))
		if p.MaxFiles < minFilesPerLoad {
			return memoryPlan{}, fmt.Errorf("--memory-target %s is too small: index memory %s holds fewer than %d files per upload", fmtMiB(target), fmtMiB(p.Index), minFilesPerLoad)
		}
	}
	return p, nil
}

// applyMemoryTarget divides cfg.MemoryTarget into cfg's budgets (explicit
// ones kept) and returns the plan; without a target it does nothing.
func (cfg *serveConfig) applyMemoryTarget() (memoryPlan, bool, error) {
	if cfg.MemoryTarget == 0 {
		return memoryPlan{}, false, nil
	}
	cur := memoryPlan{Cache: cfg.CacheBytes, Read: cfg.Read.ReadMemory, Index: int64(cfg.IndexMemory), MaxFiles: cfg.MaxFilesPerUpload}
	ex := cfg.memorySet
	if ex.read && cur.Read == 0 {
		ex.read = false // 0 asks for the default, which the target now sets
	}
	if ex.index && cur.Index == 0 {
		ex.index = false
	}
	p, err := divideMemory(cfg.MemoryTarget, ex, cur)
	if err != nil {
		return memoryPlan{}, false, err
	}
	cfg.CacheBytes, cfg.Read.ReadMemory, cfg.IndexMemory = p.Cache, p.Read, yamlBytes(p.Index)
	if p.MaxFiles != 0 {
		cfg.MaxFilesPerUpload = p.MaxFiles
	}
	if cfg.peerConfig.enabled() {
		p.PeerCache = int64(cfg.PeerCacheBytes)
		if p.PeerCache == 0 {
			p.PeerCache = p.Cache / 8 // chunkio.WithPeerCache's default
		}
	}
	return p, true, nil
}

// setGoMemoryLimit gives the plan's limit to the runtime and logs the
// division, and which of --memory-target and GOMEMLIMIT wins and why. It
// returns the function that restores the previous limit (serve runs in
// tests, many times in one process).
func setGoMemoryLimit(p memoryPlan, planned bool, log zerolog.Logger) (restore func()) {
	env, envSet := os.LookupEnv("GOMEMLIMIT")
	if !planned {
		if envSet {
			log.Info().Str("GOMEMLIMIT", env).Int64("go_memory_limit", debug.SetMemoryLimit(-1)).
				Msg("memory: GOMEMLIMIT from the environment is the Go soft memory limit; the budgets come from their own flags (--memory-target would divide them from the container's limit)")
		}
		return func() {}
	}
	prev := debug.SetMemoryLimit(p.GoLimit)
	ev := log.Info().Int64("memory_target", p.Target).Int64("go_memory_limit", p.GoLimit).
		Int64("runtime_headroom", p.Runtime).Int64("cache_bytes", p.Cache).Int64("read_memory", p.Read).
		Int64("index_memory", p.Index).Bool("cache_explicit", p.Explicit.cache).Bool("read_explicit", p.Explicit.read).
		Bool("index_explicit", p.Explicit.index)
	if p.MaxFiles != 0 {
		ev = ev.Int("max_files_per_upload", p.MaxFiles)
	}
	if p.PeerCache != 0 {
		ev = ev.Int64("peer_cache_bytes", p.PeerCache)
	}
	ev.Msg("memory: budgets divided from --memory-target")
	if envSet {
		log.Warn().Str("GOMEMLIMIT", env).Int64("go_memory_limit", p.GoLimit).
			Msg("memory: --memory-target wins over GOMEMLIMIT: wharf sets the Go soft limit from the target the budgets were divided from, so the two agree; drop GOMEMLIMIT from the environment")
	}
	return func() { debug.SetMemoryLimit(prev) }
}
