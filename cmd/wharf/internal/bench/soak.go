package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// SoakConfig sets the load test. DefaultSoakConfig gives the run:
// 64 clients for 10 minutes with faults injected.
type SoakConfig struct {
	Clients int
	// Stalled and Greedy of the Clients misbehave: a stalled client keeps
	// StalledConns connections open, each asking for a large range and
	// reading nothing (a paused download); a greedy one keeps GreedyRanges
	// large ranged reads in flight at once. The others are the normal
	// clients, and every one of them must be served.
	Stalled, Greedy            int
	StalledConns, GreedyRanges int
	// SendTimeout is the server's response progress deadline
	// (s3api.Config.SendTimeout, serve's --send-timeout).
	SendTimeout time.Duration
	Duration    time.Duration
	MaxRequests int64   // stop after this many requests (0 = no cap)
	FaultRate   float64 // probability that a backend request is faulted
	CacheBytes  int64
	// ReadOptions are serve's read planner and memory budget flags.
	ReadOptions []chunkio.CacheOption
	Seed        uint64
	TempDir     string // where the backing directory is made; "" = os.TempDir()
	Command     string
	Progress    io.Writer
}

// errSoakInternal is the soak's injected non-retryable store failure, which
// wharf answers with 500 InternalError.
var errSoakInternal = errors.New("injected internal store error")

// DefaultSoakConfig is what "wharf bench --soak" runs. The cache is
// smaller than the archives' data (about 40 MB decoded), so frames are
// evicted and fetched again under load and the store's faults keep
// reaching the read path.
func DefaultSoakConfig() SoakConfig {
	return SoakConfig{Clients: 64, Stalled: 6, Greedy: 4, StalledConns: 4, GreedyRanges: 16, SendTimeout: 5 * time.Second,
		Duration: 10 * time.Minute, MaxRequests: 5_000_000, FaultRate: 0.05, CacheBytes: 16 << 20, Seed: 1}
}

// SoakReport is what Soak measured.
type SoakReport struct {
	Header           []string
	Requests         int64
	Bytes            int64
	Errors           map[string]int64 // by kind
	WrongBytes       int64            // responses that completed cleanly with bytes differing from the source: must be 0
	P50, P99         time.Duration
	PeakRSS, BaseRSS int64 // bytes: VmRSS sampled every 10 ms during the load (peak), VmRSS before it
	// ReadMemory is the read memory budget (cache + parts in flight +
	// decoders); MemoryPeak the most of it ever charged at once.
	ReadMemory, MemoryPeak int64
	GoroutinesBefore       int
	GoroutinesAfter        int
	FDsBefore              int
	FDsAfter               int
	BackendRequests        int64
	BackendFaults          int64
	ChecksumFailures       int64 // frames or files whose checksum caught injected corruption
	CacheBudget            int64
	Archives, Objects      int
	// The misbehaving clients: stalled connections opened, how many of
	// them the server had cut off (send timeout) when the client looked,
	// send timeout + 3s later, and how many it had kept (their 206 came
	// whole once read); and the greedy clients' requests and failures
	// (their clean bodies are compared like all).
	StalledConns, StalledCut, StalledKept int64
	GreedyRequests                        int64
	GreedyErrors                          map[string]int64
	// NormalClients is how many clients behaved; NormalLeastServed the
	// fewest successful requests any one of them had (0 = one was never
	// served).
	NormalClients     int
	NormalLeastServed int64
}

// soakArchive is one packed archive with its source files.
type soakArchive struct {
	bucket string
	src    map[string][]byte
	keys   []string
}

// Soak runs the load test. The backing store is a local directory
// (backend.FileStore) behind faults.Faulty, which injects store faults into
// a FaultRate share of the backend reads (errors that map to 503 SlowDown
// and 500 InternalError, resets and truncation mid-body, ranged reads
// answered with the whole object, 50 ms latency spikes) and silent bit
// flips below wharf's checksums into FaultRate/4 of the ranged reads.
// wharf's real archiveview and s3api handler serve several archives of
// different shapes on loopback, and Clients aws-sdk-go-v2 clients make
// random ranged and full reads and listings. Every byte is compared with the
// source: a response may fail, but one that completes must be exact.
//
// S3Store's own retries and resumes under HTTP faults are not part of the
// soak; backend's tests drive them against a real S3 protocol server.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakReport, error) {
	if cfg.Stalled < 0 || cfg.Greedy < 0 || cfg.Stalled+cfg.Greedy >= cfg.Clients || cfg.StalledConns < 0 || cfg.GreedyRanges < 0 || cfg.SendTimeout < 0 {
		return nil, fmt.Errorf("bench --soak: %d stalled and %d greedy of %d clients (%d connections, %d ranges each), send timeout %v: want at least one normal client and nothing negative",
			cfg.Stalled, cfg.Greedy, cfg.Clients, cfg.StalledConns, cfg.GreedyRanges, cfg.SendTimeout)
	}
	if cfg.Clients < 1 || cfg.Duration <= 0 || cfg.CacheBytes <= 0 || cfg.MaxRequests < 0 || !(cfg.FaultRate >= 0 && cfg.FaultRate <= 1) {
		return nil, fmt.Errorf("bench --soak: %d clients for %v, cache %d bytes, cap %d requests, fault rate %v: want at least one client, a positive duration and cache, a cap not negative and a fault rate from 0 to 1",
			cfg.Clients, cfg.Duration, cfg.CacheBytes, cfg.MaxRequests, cfg.FaultRate)
	}
	logf := func(format string, args ...any) { progressf(cfg.Progress, "soak: ", format, args...) }
	rep := &SoakReport{Errors: map[string]int64{}, GreedyErrors: map[string]int64{}, CacheBudget: cfg.CacheBytes}
	runtime.GC()
	rep.GoroutinesBefore = runtime.NumGoroutine()
	rep.FDsBefore = countFDs()

	dir, err := os.MkdirTemp(cfg.TempDir, "wharf-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	// Archives of several shapes, written to the backing directory.
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	shapes := []struct {
		name string
		opt  cargopack.Options
		src  func() map[string][]byte
	}{
		{"framed", cargopack.Options{FrameSize: 256 << 10, ChunkSize: 4 << 20, ContentHash: true}, func() map[string][]byte { return makeTree(600, 32<<10, cfg.Seed+1).data }},
		{"plain", cargopack.Options{ChunkSize: 4 << 20}, func() map[string][]byte { return randomFiles(200, 48<<10, ".png", cfg.Seed+2) }},
		{"large", cargopack.Options{FrameSize: 1 << 20, SplitSize: 6 << 20, ChunkSize: 8 << 20}, func() map[string][]byte {
			m := makeTree(50, 16<<10, cfg.Seed+3).data
			m["big/service.log"] = newLogGen(cfg.Seed+4).fill(nil, 20<<20)
			return m
		}},
		{"stream", cargopack.Options{FrameSize: 0, ChunkSize: 2 << 20}, func() map[string][]byte { return makeTree(150, 24<<10, cfg.Seed+5).data }},
		{"direct", cargopack.Options{Direct: true}, func() map[string][]byte { return makeTree(100, 16<<10, cfg.Seed+6).data }},
	}
	var archives []*soakArchive
	manifests := map[string]string{}
	for _, sh := range shapes {
		src := sh.src()
		opt := sh.opt
		opt.Bucket, opt.Prefix, opt.UploadID, opt.Created = "backing", "soak", "soak-"+sh.name, mtime
		res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(src, mtime), opt)
		if err != nil {
			return nil, fmt.Errorf("soak: pack %s: %w", sh.name, err)
		}
		a := &soakArchive{bucket: sh.name, src: src}
		for k := range src {
			a.keys = append(a.keys, k)
		}
		sort.Strings(a.keys)
		archives = append(archives, a)
		manifests[sh.name] = res.ManifestKey
		rep.Objects += len(src)
	}
	rep.Archives = len(archives)

	// wharf: FileStore → faults → archiveview → s3api. One hook decides
	// every backend read: a store fault with probability FaultRate, else
	// (ranged reads only) a silent flip with probability FaultRate/4.
	var faulting atomic.Bool
	var backendFaults atomic.Int64
	hookRNG := rand.New(rand.NewPCG(cfg.Seed, 11))
	var hookMu sync.Mutex
	flaky := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if !faulting.Load() || (r.Op != "range" && r.Op != "get") {
			return faults.Fault{}
		}
		hookMu.Lock()
		defer hookMu.Unlock()
		p, k := hookRNG.Float64(), hookRNG.IntN(6)
		after := int64(hookRNG.IntN(64 << 10))
		if p >= cfg.FaultRate {
			if r.Op == "range" && r.Len > 0 && hookRNG.Float64() < cfg.FaultRate/4 {
				backendFaults.Add(1)
				return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{r.Off + hookRNG.Int64N(r.Len)}}
			}
			return faults.Fault{}
		}
		backendFaults.Add(1)
		switch k {
		case 0:
			return faults.Fault{Kind: faults.FaultError} // unavailable: 503 SlowDown
		case 1:
			return faults.Fault{Kind: faults.FaultError, Err: errSoakInternal} // 500 InternalError
		case 2:
			return faults.Fault{Kind: faults.FaultReset, After: after}
		case 3:
			return faults.Fault{Kind: faults.FaultTruncate, After: after}
		case 4:
			if r.Op == "range" {
				return faults.Fault{Kind: faults.FaultIgnoreRange}
			}
			return faults.Fault{Delay: 50 * time.Millisecond}
		default:
			return faults.Fault{Delay: 50 * time.Millisecond}
		}
	}})
	reg := prometheus.NewRegistry()
	avm := chunkio.NewMetrics(reg)
	cache := chunkio.NewFrameCache(cfg.CacheBytes, cfg.ReadOptions...)
	served := map[string]*archiveview.Archive{}
	for name, key := range manifests {
		a, err := archiveview.Open(ctx, flaky, "backing", key, archiveview.Options{Name: name, Cache: cache, Metrics: avm})
		if err != nil {
			for _, o := range served {
				o.Close()
			}
			return nil, fmt.Errorf("soak: open %s: %w", name, err)
		}
		served[name] = a
	}
	verifier, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		return nil, err
	}
	h := s3api.New(s3api.Config{Catalog: catalog.NewStatic(served), Verifier: verifier, Logger: zerolog.Nop(), SendTimeout: cfg.SendTimeout})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	wsrv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	go wsrv.Serve(ln)
	ctr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	// newClient makes no retries: every failure is seen and classified.
	client := newClient("http://"+ln.Addr().String(), &http.Client{Transport: ctr})

	rep.BaseRSS = procStatus("VmRSS")
	stopRSS := sampleRSS()
	logf("%d archives, %d objects; %d clients for %v (cap %d requests), fault rate %.3f, cache %d MiB",
		len(archives), rep.Objects, cfg.Clients, cfg.Duration, cfg.MaxRequests, cfg.FaultRate, cfg.CacheBytes>>20)
	faulting.Store(true)
	flaky.Reset()
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	var reqs, served64, wrong atomic.Int64
	var errMu sync.Mutex
	normal := cfg.Clients - cfg.Stalled - cfg.Greedy
	rep.NormalClients = normal
	lat := make([][]time.Duration, normal)
	ok := make([]int64, normal)
	var wg sync.WaitGroup
	// The misbehaving clients (soakStalled, soakGreedy) read the largest
	// file of the "large" archive.
	var large *soakArchive
	for _, a := range archives {
		if a.bucket == "large" {
			large = a
		}
	}
	var bad sync.WaitGroup // the misbehaving clients: until the normal ones are done
	var stalledMu sync.Mutex
	for range cfg.Stalled {
		for range cfg.StalledConns {
			bad.Go(func() {
				n, cut, kept := soakStalled(runCtx, ln.Addr().String(), large, "big/service.log", cfg.SendTimeout+3*time.Second)
				stalledMu.Lock()
				rep.StalledConns += n
				rep.StalledCut += cut
				rep.StalledKept += kept
				stalledMu.Unlock()
			})
		}
	}
	for g := range cfg.Greedy {
		for r := range cfg.GreedyRanges {
			bad.Go(func() {
				rng := rand.New(rand.NewPCG(cfg.Seed+uint64(1000+g*cfg.GreedyRanges+r), 19))
				buf := make([]byte, 64<<10)
				src := large.src["big/service.log"]
				for runCtx.Err() == nil {
					lo := rng.IntN(len(src) - 1)
					hi := min(len(src), lo+4<<20+rng.IntN(4<<20))
					out, err := client.GetObject(runCtx, &s3.GetObjectInput{Bucket: aws.String(large.bucket), Key: aws.String("big/service.log"),
						Range: aws.String("bytes=" + strconv.Itoa(lo) + "-" + strconv.Itoa(hi-1))})
					kind := ""
					if err != nil {
						kind = errKind(err)
					} else {
						n, same, err := compareStream(out.Body, src[lo:hi], buf)
						out.Body.Close()
						served64.Add(n)
						switch {
						case err != nil:
							kind = "aborted body"
						case !same || n != int64(hi-lo):
							wrong.Add(1)
						}
					}
					errMu.Lock()
					rep.GreedyRequests++
					if kind != "" && runCtx.Err() == nil {
						rep.GreedyErrors[kind]++
					}
					errMu.Unlock()
				}
			})
		}
	}
	for c := 0; c < normal; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed+uint64(c), 17))
			buf := make([]byte, 64<<10) // this client's, for every body it compares
			for runCtx.Err() == nil {
				if cfg.MaxRequests > 0 && reqs.Add(1) > cfg.MaxRequests {
					return
				} else if cfg.MaxRequests == 0 {
					reqs.Add(1)
				}
				a := archives[rng.IntN(len(archives))]
				t0 := time.Now()
				n, kind, bad := soakOne(runCtx, client, a, rng, buf)
				lat[c] = append(lat[c], time.Since(t0))
				if kind == "" && !bad {
					ok[c]++
				}
				served64.Add(n)
				if bad {
					wrong.Add(1)
				}
				if kind != "" && runCtx.Err() == nil {
					errMu.Lock()
					rep.Errors[kind]++
					errMu.Unlock()
				}
			}
		}(c)
	}
	tick := time.NewTicker(30 * time.Second)
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
				logf("%d requests, %.0f MB served, %d wrong, RSS %d MB", reqs.Load(), float64(served64.Load())/1e6, wrong.Load(), procStatus("VmRSS")>>20)
			}
		}
	}()
	wg.Wait()
	cancel()
	bad.Wait()
	tick.Stop()
	faulting.Store(false)

	rep.NormalLeastServed = -1
	for _, n := range ok {
		if rep.NormalLeastServed < 0 || n < rep.NormalLeastServed {
			rep.NormalLeastServed = n
		}
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		rep.P50 = all[len(all)/2]
		rep.P99 = all[len(all)*99/100]
	}
	rep.Requests = int64(len(all))
	rep.Bytes = served64.Load()
	rep.WrongBytes = wrong.Load()
	rep.PeakRSS = stopRSS()
	_, rep.MemoryPeak = cache.MemoryInUse()
	rep.ReadMemory = cache.MemoryBudget()
	rep.BackendRequests = flaky.Requests("")
	rep.BackendFaults = backendFaults.Load()
	rep.ChecksumFailures = int64(counterValue(reg, "wharf_checksum_failures_total"))

	// Tear down and check that goroutines and descriptors return to baseline.
	wsrv.Close()
	ctr.CloseIdleConnections()
	for _, a := range served {
		a.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		rep.GoroutinesAfter = runtime.NumGoroutine()
		rep.FDsAfter = countFDs()
		if (rep.GoroutinesAfter <= rep.GoroutinesBefore+2 && rep.FDsAfter <= rep.FDsBefore+2) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep.Header = []string{
		"command: `" + cfg.Command + "`",
		fmt.Sprintf("date: %s", time.Now().UTC().Format(time.RFC3339)),
		fmt.Sprintf("machine: %s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		fmt.Sprintf("%d archives (framed, plain tar, split + sub-frames, unframed stream, direct), %d objects", rep.Archives, rep.Objects),
		"backing store: local directory behind faults.Faulty (store faults, not HTTP: S3Store's retries are not exercised here)",
		fmt.Sprintf("of them %d stalled (%d connections each asking for up to 12 MiB and reading nothing) and %d greedy (%d concurrent 4-8 MiB ranges each); send timeout %v",
			cfg.Stalled, cfg.StalledConns, cfg.Greedy, cfg.GreedyRanges, cfg.SendTimeout),
		fmt.Sprintf("%d clients, %v, fault rate %.3f per backend read (unavailable, internal error, reset and truncation mid-body, ignored range, 50 ms spikes) plus silent bit flips in %.4f of the range reads", cfg.Clients, cfg.Duration, cfg.FaultRate, cfg.FaultRate*(1-cfg.FaultRate)/4),
	}
	return rep, nil
}

// soakOne makes one random request against archive a and checks it (reading
// the body through buf). It returns the body bytes received, an error kind
// ("" = success) and whether a response completed cleanly with wrong bytes.
func soakOne(ctx context.Context, c *s3.Client, a *soakArchive, rng *rand.Rand, buf []byte) (int64, string, bool) {
	switch p := rng.IntN(10); {
	case p < 2: // listing
		prefix := ""
		if rng.IntN(2) == 0 {
			k := a.keys[rng.IntN(len(a.keys))]
			if i := strings.IndexByte(k, '/'); i > 0 {
				prefix = k[:i+1]
			}
		}
		in := &s3.ListObjectsV2Input{Bucket: aws.String(a.bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(int32(1 + rng.IntN(300)))}
		if rng.IntN(2) == 0 {
			in.Delimiter = aws.String("/")
		}
		out, err := c.ListObjectsV2(ctx, in)
		if err != nil {
			return 0, errKind(err), false
		}
		for _, o := range out.Contents {
			src, ok := a.src[aws.ToString(o.Key)]
			if !ok || int64(len(src)) != aws.ToInt64(o.Size) || !strings.HasPrefix(aws.ToString(o.Key), prefix) {
				return 0, "", true
			}
		}
		return 0, "", false
	default: // ranged or full read
		key := a.keys[rng.IntN(len(a.keys))]
		src := a.src[key]
		in := &s3.GetObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key)}
		lo, hi := 0, len(src)
		if p < 7 && len(src) > 1 {
			lo = rng.IntN(len(src))
			hi = lo + 1 + rng.IntN(min(len(src)-lo, 4<<20))
			in.Range = aws.String("bytes=" + strconv.Itoa(lo) + "-" + strconv.Itoa(hi-1))
		}
		out, err := c.GetObject(ctx, in)
		if err != nil {
			return 0, errKind(err), false
		}
		n, same, err := compareStream(out.Body, src[lo:hi], buf)
		out.Body.Close()
		if err != nil {
			return n, "aborted body", !same
		}
		return n, "", !same || n != int64(hi-lo)
	}
}

// compareStream reads r to its end in pieces of buf (so 64 clients do not
// hold whole bodies, nor make a buffer per request, and the process RSS
// reflects wharf, not the clients) and reports how many bytes came, whether
// every one of them matched want, and the read error. Bytes past len(want)
// count as a mismatch.
func compareStream(r io.Reader, want, buf []byte) (int64, bool, error) {
	var n int64
	same := true
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if n+int64(k) > int64(len(want)) || !bytes.Equal(buf[:k], want[n:n+int64(k)]) {
				same = false
			}
			n += int64(k)
		}
		if err == io.EOF {
			return n, same, nil
		}
		if err != nil {
			return n, same, err
		}
	}
}

func errKind(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return "S3 " + ae.ErrorCode()
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	return "transport: " + lastWords(err.Error(), 6)
}

// lastWords keeps the last n words of s (an error's most specific part).
func lastWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[len(f)-n:]
	}
	return strings.Join(f, " ")
}

// randomFiles returns n incompressible files (already-compressed content).
func randomFiles(n, maxSize int, ext string, seed uint64) map[string][]byte {
	rng := rand.New(rand.NewPCG(seed, 5))
	m := make(map[string][]byte, n)
	for i := 0; i < n; i++ {
		b := make([]byte, rng.IntN(maxSize+1))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		m[fmt.Sprintf("img/%03d/photo-%05d%s", i%17, i, ext)] = b
	}
	return m
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(field string) int64 {
	return statusField("/proc/self/status", field)
}

// statusField reads a "kB" field of a /proc/PID/status file, in bytes (-1
// when the file or the field is missing).
func statusField(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return parseStatusField(b, field)
}

// parseStatusField finds "field:  N kB" in a /proc/PID/status text and
// returns N KiB in bytes (-1 when the field is missing).
func parseStatusField(b []byte, field string) int64 {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l[len(field)+1:])
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return -1
}

// WriteMarkdown prints the soak report.
func (r *SoakReport) WriteMarkdown(w io.Writer) {
	fmt.Fprintln(w, "# wharf bench --soak")
	fmt.Fprintln(w)
	for _, h := range r.Header {
		fmt.Fprintf(w, "- %s\n", h)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| figure | value |")
	fmt.Fprintln(w, "|---|---|")
	fmt.Fprintf(w, "| requests | %d |\n", r.Requests)
	fmt.Fprintf(w, "| body bytes received and checked | %.1f MB |\n", float64(r.Bytes)/1e6)
	fmt.Fprintf(w, "| **wrong bytes (responses that ended cleanly with bytes differing from the source)** | **%d** |\n", r.WrongBytes)
	fmt.Fprintf(w, "| backend requests / faults injected | %d / %d |\n", r.BackendRequests, r.BackendFaults)
	fmt.Fprintf(w, "| checksum failures caught (wharf_checksum_failures_total) | %d |\n", r.ChecksumFailures)
	fmt.Fprintf(w, "| latency p50 / p99 | %v / %v |\n", r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond))
	fmt.Fprintf(w, "| RSS before load / peak during it (whole process incl. the clients and the sources they compare against) | %d MiB / %d MiB |\n", r.BaseRSS>>20, r.PeakRSS>>20)
	growth, bound := r.PeakRSS-r.BaseRSS, r.ReadMemory+100<<20
	met := "yes"
	if growth > bound {
		met = "**NO**"
	}
	fmt.Fprintf(w, "| RSS growth under load, against the read memory budget + 100 MiB | %d MiB of %d MiB: %s |\n", growth>>20, bound>>20, met)
	fmt.Fprintf(w, "| frame cache budget / read memory budget / most of it in use at once | %d MiB / %d MiB / %d MiB |\n", r.CacheBudget>>20, r.ReadMemory>>20, r.MemoryPeak>>20)
	fmt.Fprintf(w, "| stalled connections opened / cut off by the send timeout / not cut | %d / %d / %d |\n", r.StalledConns, r.StalledCut, r.StalledKept)
	fmt.Fprintf(w, "| greedy requests / failed | %d / %d |\n", r.GreedyRequests, sumCounts(r.GreedyErrors))
	fmt.Fprintf(w, "| normal clients / fewest requests served to one of them | %d / %d |\n", r.NormalClients, r.NormalLeastServed)
	fmt.Fprintf(w, "| goroutines before / after | %d / %d |\n", r.GoroutinesBefore, r.GoroutinesAfter)
	fmt.Fprintf(w, "| file descriptors before / after | %d / %d |\n", r.FDsBefore, r.FDsAfter)
	var kinds []string
	for k := range r.Errors {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| error kind seen by clients | count |")
	fmt.Fprintln(w, "|---|---|")
	for _, k := range kinds {
		fmt.Fprintf(w, "| %s | %d |\n", k, r.Errors[k])
	}
}

func sumCounts(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// soakStalled is one stalled connection after another until ctx ends:
// each asks for up to 12 MiB of key (with a 16 KiB receive buffer, so the
// kernel takes little) and reads nothing for hold (more than the send
// timeout). Then it reads what there is: a 206 that ends short, cleanly,
// was cut off by the server (the send timeout: the kernel still delivers
// what the server had written before it gave up); a 206 that ends whole
// was not cut (kept).
func soakStalled(ctx context.Context, addr string, a *soakArchive, key string, hold time.Duration) (opened, cut, kept int64) {
	size := min(len(a.src[key]), 12<<20)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		})
	}}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return opened, cut, kept
		}
		opened++
		_, err = fmt.Fprintf(c, "GET /%s/%s HTTP/1.1\r\nHost: %s\r\nRange: bytes=0-%d\r\nConnection: close\r\n\r\n", a.bucket, key, addr, size-1)
		if err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(hold):
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
				br := bufio.NewReader(c)
				line, _ := br.ReadString('\n')
				n, err := io.Copy(io.Discard, br)
				if strings.HasPrefix(line, "HTTP/1.1 206") && err == nil {
					// n counts the rest of the headers too: whole means at
					// least size bytes came.
					if n < int64(size) {
						cut++
					} else {
						kept++
					}
				}
			}
		}
		c.Close()
	}
	return opened, cut, kept
}

// counterValue sums the counter series name in g (0 when absent).
func counterValue(g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}
