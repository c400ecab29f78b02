package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend/faults"
)

// The fleet tests (issue 23): several `wharf serve` replicas (the real
// binary, as subprocesses) behind a random balancer, over one S3 model with
// S3's costs, read by a random small-file workload. They measure what a
// fleet costs the backend (bytes fetched ÷ bytes of the frames the reads
// touched) and the clients (median latency), and check every byte.
//
// They are not parallel: they run before the suite's parallel tests are
// released, alone on the machine, so that the latencies they compare are
// not the other tests' load.

// The S3 model's costs: 20 ms to the first byte of every request and
// 100 MB/s per connection (faults.FaultyHTTP in front of the suite's S3).
const (
	fleetLatency   = 20 * time.Millisecond
	fleetBandwidth = 100e6
)

// fleetArchive is the archive every fleet test reads: small files of
// incompressible bytes in 4 MiB frames.
type fleetArchive struct {
	bucket      string // served bucket name
	manifestURL string
	keys        []string          // virtual keys, in a fixed order
	data        map[string][]byte // key → bytes
	// frames: the compressed frames each key's read needs (its tar header
	// and its data), and each frame's compressed size.
	frames    map[string][]frameID
	frameSize map[frameID]int64
	frameOff  map[frameID]int64 // compressed offset in its chunk
	objectKey map[string]string // chunk s3_key → its object key
	chunkKeys map[string]bool   // /BUCKET/KEY of every chunk object
	totalComp int64             // compressed bytes of all frames
}

type frameID struct {
	chunk string
	index int
}

var (
	fleetOnce sync.Once
	fleetArch *fleetArchive
	fleetErr  error
)

// fleetFiles and the sizes: 1,500 files of 16–64 KiB, about 60 MiB in
// about 15 frames of 4 MiB, in chunks of 16 MiB.
const (
	fleetFiles     = 1500
	fleetMinSize   = 16 << 10
	fleetMaxSize   = 64 << 10
	fleetFrameSize = 4 << 20
)

// getFleetArchive packs the fleet archive into the suite's S3 once.
func getFleetArchive(t *testing.T) *fleetArchive {
	t.Helper()
	fleetOnce.Do(func() { fleetArch, fleetErr = packFleetArchive() })
	if fleetErr != nil {
		t.Fatal(fleetErr)
	}
	return fleetArch
}

func packFleetArchive() (*fleetArchive, error) {
	rng := rand.New(rand.NewPCG(23, 4))
	a := &fleetArchive{bucket: "fleet", data: map[string][]byte{}, frames: map[string][]frameID{},
		frameSize: map[frameID]int64{}, frameOff: map[frameID]int64{}, objectKey: map[string]string{}, chunkKeys: map[string]bool{}}
	for i := 0; i < fleetFiles; i++ {
		key := fmt.Sprintf("d%02d/f%04d.bin", i/100, i)
		b := make([]byte, fleetMinSize+rng.IntN(fleetMaxSize-fleetMinSize+1))
		for j := 0; j+8 <= len(b); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				b[j+k] = byte(v >> (8 * k))
			}
		}
		a.keys = append(a.keys, key)
		a.data[key] = b
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cargopack.Write(ctx, cargopack.S3Sink(suite.s3client), cargopack.FromMap(a.data, treeMTime), cargopack.Options{
		Bucket: srcBucket, Prefix: "fleet", UploadID: "up-fleet", SourcePath: "/srv/fleet",
		FrameSize: fleetFrameSize, ChunkSize: 16 << 20, ContentHash: true,
	})
	if err != nil {
		return nil, fmt.Errorf("packing the fleet archive: %w", err)
	}
	a.manifestURL = "s3://" + srcBucket + "/" + res.ManifestKey
	m := res.Manifest
	chunks := map[string]*manifest.ChunkEntry{}
	for i := range m.Chunks {
		c := &m.Chunks[i]
		chunks[c.S3Key] = c
		a.objectKey[c.S3Key] = manifest.ResolveObjectKey(srcBucket, m.Prefix, c.S3Key)
		a.chunkKeys["/"+srcBucket+"/"+a.objectKey[c.S3Key]] = true
		for fi, fr := range c.Frames {
			a.frameSize[frameID{c.S3Key, fi}] = fr.CompressedSize
			a.frameOff[frameID{c.S3Key, fi}] = fr.CompressedOffset
			a.totalComp += fr.CompressedSize
		}
	}
	for _, f := range m.Files {
		key, err := manifest.RelativeKey(m.SourcePath, f.Path)
		if err != nil {
			return nil, err
		}
		c := chunks[f.S3Key]
		if c == nil || len(c.Frames) == 0 || f.ArchiveOffset == nil {
			return nil, fmt.Errorf("fleet archive: %s is not in a framed chunk with an archive offset", key)
		}
		// The read needs the file's bytes and its 512-byte tar header
		// (checked before the data is served).
		u0, u1 := *f.ArchiveOffset-512, *f.ArchiveOffset+f.Size
		for fi, fr := range c.Frames {
			if fr.UncompressedOffset < u1 && fr.UncompressedOffset+fr.UncompressedSize > u0 {
				a.frames[key] = append(a.frames[key], frameID{c.S3Key, fi})
			}
		}
	}
	if len(a.frames) != fleetFiles {
		return nil, fmt.Errorf("fleet archive: %d files in the manifest, want %d", len(a.frames), fleetFiles)
	}
	return a, nil
}

// fleetModel is the S3 model of a fleet: the suite's S3 behind
// faults.FaultyHTTP (first-byte latency, per-connection bandwidth), with
// the GETs and body bytes of the fleet archive's chunk objects counted,
// in all and per replica (each replica has a front of its own).
type fleetModel struct {
	t         *testing.T
	chunkKeys map[string]bool
	gets      atomic.Int64
	bytes     atomic.Int64

	mu     sync.Mutex
	fronts map[int]string        // replica → its front's URL
	by     map[int]*atomic.Int64 // replica → chunk bytes it fetched
	log    []fleetGet
}

// fleetGet is one chunk GET the model answered.
type fleetGet struct {
	replica int
	path    string
	rng     string
}

func newFleetModel(t *testing.T, a *fleetArchive) *fleetModel {
	return &fleetModel{t: t, chunkKeys: a.chunkKeys, fronts: map[int]string{}, by: map[int]*atomic.Int64{}}
}

// front is the URL replica i reaches the model at.
func (m *fleetModel) front(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u, ok := m.fronts[i]; ok {
		return u
	}
	mine := new(atomic.Int64)
	m.by[i] = mine
	count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && m.chunkKeys[r.URL.Path] {
			m.gets.Add(1)
			m.mu.Lock()
			m.log = append(m.log, fleetGet{i, r.URL.Path, r.Header.Get("Range")})
			m.mu.Unlock()
			w = &countingWriter{ResponseWriter: w, n: &m.bytes, mine: mine}
		}
		suite.backend.ServeHTTP(w, r)
	})
	fh := faults.FaultyHTTP(count, func(faults.HTTPRequest) faults.HTTPFault {
		return faults.HTTPFault{Delay: fleetLatency, Bandwidth: fleetBandwidth}
	})
	srv := httptest.NewServer(fh)
	m.t.Cleanup(srv.Close)
	m.fronts[i] = srv.URL
	return srv.URL
}

// reset zeroes the counts and the log (after the replicas started).
func (m *fleetModel) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets.Store(0)
	m.bytes.Store(0)
	for _, n := range m.by {
		n.Store(0)
	}
	m.log = nil
}

// perReplica is the chunk bytes each replica fetched, in MB, for logs.
func (m *fleetModel) perReplica(n int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for i := range n {
		var v int64
		if c := m.by[i]; c != nil {
			v = c.Load()
		}
		parts = append(parts, fmt.Sprintf("%.1f", float64(v)/1e6))
	}
	return strings.Join(parts, "/")
}

// countingWriter counts the body bytes written through it into n and
// mine.
type countingWriter struct {
	http.ResponseWriter
	n, mine *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	k, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(k))
	c.mine.Add(int64(k))
	return k, err
}

func (c *countingWriter) Flush() {
	if fl, ok := c.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// replicaArgs is `wharf serve` for anonymous replica i over model,
// serving the fleet archive, plus extra.
func replicaArgs(model *fleetModel, a *fleetArchive, i int, extra ...string) []string {
	return append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--store", "s3://",
		"--s3-endpoint", model.front(i), "--s3-path-style", "--s3-region", "us-east-1", "--anonymous",
		"--archive", a.bucket + "=" + a.manifestURL}, extra...)
}

// startReplicas starts n replicas at once; args(i) gives replica i's
// command line. They are stopped when the test ends. The listings they
// make while starting are booked as one start-up (startWharf's booking
// is for one server at a time).
func startReplicas(t *testing.T, n int, args func(i int) []string) []*wharfServer {
	t.Helper()
	rs := make([]*wharfServer, n)
	errs := make([]error, n)
	suite.backend.startup(func() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs[i], errs[i] = startWharfProc(suite.bin, fmt.Sprintf("replica-%d", i), args(i), suite.serverEnv(), http.DefaultClient)
			}()
		}
		wg.Wait()
	})
	for i := range n {
		if rs[i] != nil {
			s := rs[i]
			t.Cleanup(func() { s.Stop() })
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return rs
}

// balancer is a reverse proxy that sends each request to a replica chosen
// at random among the live ones (a load balancer without affinity).
type balancer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	live    []int // indexes into proxies of the replicas in rotation
	proxies []*httputil.ReverseProxy
	served  []atomic.Int64 // requests sent to each replica
	rng     *rand.Rand     // under mu
}

// servedBy is the response header naming the replica the balancer chose.
const servedBy = "X-Fleet-Replica"

func newBalancer(t *testing.T, rs []*wharfServer) *balancer {
	b := &balancer{served: make([]atomic.Int64, len(rs)), rng: rand.New(rand.NewPCG(23, 23))}
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	for i, r := range rs {
		u, err := url.Parse(r.url)
		if err != nil {
			t.Fatal(err)
		}
		b.live = append(b.live, i)
		b.proxies = append(b.proxies, &httputil.ReverseProxy{
			Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
			Transport: tr,
			ModifyResponse: func(resp *http.Response) error {
				resp.Header.Set(servedBy, strconv.Itoa(i))
				return nil
			},
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				w.Header().Set(servedBy, strconv.Itoa(i))
				http.Error(w, "balancer: replica "+strconv.Itoa(i)+": "+err.Error(), http.StatusBadGateway)
			},
		})
	}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		if len(b.live) == 0 {
			b.mu.Unlock()
			http.Error(w, "balancer: no replica", http.StatusServiceUnavailable)
			return
		}
		i := b.live[b.rng.IntN(len(b.live))]
		b.mu.Unlock()
		b.served[i].Add(1)
		b.proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// remove takes replica i out of rotation (a failed health check).
func (b *balancer) remove(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live = slices.DeleteFunc(b.live, func(x int) bool { return x == i })
}

// loadResult is what one run of the workload measured.
type loadResult struct {
	reads     int
	latencies []time.Duration // sorted
	touched   map[frameID]bool
	// perReplica[i]: the frames the reads served by replica i touched.
	perReplica []map[frameID]bool
	failures   []string // wrong bytes or failed requests, one line each
	// byReplica[i] counts the failed requests replica i answered.
	failedBy []int
}

func (l *loadResult) median() time.Duration {
	if len(l.latencies) == 0 {
		return 0
	}
	return l.latencies[len(l.latencies)/2]
}

func (l *loadResult) p99() time.Duration {
	if len(l.latencies) == 0 {
		return 0
	}
	return l.latencies[len(l.latencies)*99/100]
}

// bytesOf is the compressed bytes of frames.
func (a *fleetArchive) bytesOf(frames map[frameID]bool) int64 {
	var n int64
	for f := range frames {
		n += a.frameSize[f]
	}
	return n
}

// randomKeys is n keys drawn at random (seeded) from from.
func randomKeys(from []string, n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 7))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = from[rng.IntN(len(from))]
	}
	return keys
}

// runLoad sends a GET of each of keys through the balancer, conc at a
// time, checks every body against the source and times each. during,
// when set, is called once half of the reads were sent (the first half's
// last ones still in flight); the second half waits until it returns.
func runLoad(t *testing.T, b *balancer, a *fleetArchive, replicas int, keys []string, conc int, during func()) *loadResult {
	t.Helper()
	return runLoads(t, []*balancer{b}, a, replicas, keys, conc, during)[0]
}

// runLoads is runLoad over several fleets at once, paired: each read is
// sent to every balancer in turn (the first one rotating with the read's
// index), so the fleets see the same reads at the same moments of the
// machine's load, and the latencies they are compared by are measured
// under the same conditions.
func runLoads(t *testing.T, bals []*balancer, a *fleetArchive, replicas int, keys []string, conc int, during func()) []*loadResult {
	t.Helper()
	reads := len(keys)
	var results []*loadResult
	for range bals {
		res := &loadResult{reads: reads, touched: map[frameID]bool{}, failedBy: make([]int, replicas)}
		for range replicas {
			res.perReplica = append(res.perReplica, map[frameID]bool{})
		}
		results = append(results, res)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, DisableCompression: true}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	var (
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
		half = make(chan struct{})
	)
	var halfOnce sync.Once
	resume := make(chan struct{})
	if during == nil {
		close(resume)
	}
	get := func(b *balancer, res *loadResult, key string) {
		t0 := time.Now()
		resp, err := client.Get(b.srv.URL + "/" + a.bucket + "/" + key)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		took := time.Since(t0)
		mu.Lock()
		defer mu.Unlock()
		res.latencies = append(res.latencies, took)
		replica := -1
		if resp != nil {
			replica, _ = strconv.Atoi(resp.Header.Get(servedBy))
		}
		switch {
		case err != nil:
			res.failures = append(res.failures, fmt.Sprintf("GET %s (replica %d): %v", key, replica, err))
		case resp.StatusCode != http.StatusOK:
			res.failures = append(res.failures, fmt.Sprintf("GET %s (replica %d): %d %s", key, replica, resp.StatusCode, strings.TrimSpace(string(body[:min(len(body), 200)]))))
		case string(body) != string(a.data[key]):
			res.failures = append(res.failures, fmt.Sprintf("GET %s (replica %d): %d bytes differ from the source's %d", key, replica, len(body), len(a.data[key])))
		default:
			for _, f := range a.frames[key] {
				res.touched[f] = true
				res.perReplica[replica][f] = true
			}
			replica = -2 // not a failure
		}
		if replica >= 0 {
			res.failedBy[replica]++
		}
	}
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= reads {
					return
				}
				if i >= reads/2 {
					halfOnce.Do(func() { close(half) })
					<-resume
				}
				for j := range bals {
					k := (i + j) % len(bals)
					get(bals[k], results[k], keys[i])
				}
			}
		}()
	}
	if during != nil {
		select {
		case <-half:
			during()
		case <-time.After(2 * time.Minute):
			t.Error("the load did not reach half of its reads in 2 minutes")
		}
		close(resume)
	}
	wg.Wait()
	for _, res := range results {
		slices.Sort(res.latencies)
	}
	return results
}

// scrape returns replica s's /metrics text.
func scrape(t *testing.T, s *wharfServer) string {
	t.Helper()
	resp, err := http.Get(s.adminURL + "/metrics")
	if err != nil {
		t.Fatalf("%s: /metrics: %v", s.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: /metrics: %d, %v", s.name, resp.StatusCode, err)
	}
	return string(b)
}

// metricSum adds up every sample of metric name (all label sets) in a
// Prometheus text exposition; ok is false when there is none.
func metricSum(text, name string) (sum float64, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{") {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil {
			continue
		}
		sum += v
		ok = true
	}
	return sum, ok
}

// fleetRun is one fleet measured: replicas started, the load run, the
// backend's counts.
type fleetRun struct {
	name     string
	replicas []*wharfServer
	bal      *balancer
	model    *fleetModel
	load     *loadResult
}

// ratio is the backend's chunk bytes ÷ the bytes of the frames touched.
func (r *fleetRun) ratio(a *fleetArchive) float64 {
	return float64(r.model.bytes.Load()) / float64(a.bytesOf(r.load.touched))
}

func (r *fleetRun) summary(a *fleetArchive) string {
	return fmt.Sprintf("%s: %d replicas, %d reads: backend %d GETs, %.1f MB (%s by replica) = %.2fx the %d frames touched (%.1f MB); latency p50 %v, p99 %v",
		r.name, len(r.replicas), r.load.reads, r.model.gets.Load(), float64(r.model.bytes.Load())/1e6, r.model.perReplica(len(r.replicas)), r.ratio(a),
		len(r.load.touched), float64(a.bytesOf(r.load.touched))/1e6,
		r.load.median().Round(10*time.Microsecond), r.load.p99().Round(10*time.Microsecond))
}

// The workload: the 1,200 random reads, 8 clients at a time.
const (
	fleetReads = 1200
	fleetConc  = 8
	fleetSize  = 4
)

// runFleet starts n replicas over a fresh S3 model (cold caches), puts
// them behind a random balancer and runs the workload.
func runFleet(t *testing.T, name string, a *fleetArchive, n int, args func(i int, model *fleetModel) []string, during func(*fleetRun)) *fleetRun {
	return runFleetKeys(t, name, a, n, randomKeys(a.keys, fleetReads, 1), args, during)
}

// runFleetKeys is runFleet reading keys.
func runFleetKeys(t *testing.T, name string, a *fleetArchive, n int, keys []string, args func(i int, model *fleetModel) []string, during func(*fleetRun)) *fleetRun {
	t.Helper()
	r := startFleet(t, name, a, n, args)
	r.run(t, a, keys, during)
	return r
}

// startFleet starts n replicas over a fresh S3 model (cold caches) and
// puts them behind a random balancer.
func startFleet(t *testing.T, name string, a *fleetArchive, n int, args func(i int, model *fleetModel) []string) *fleetRun {
	t.Helper()
	r := &fleetRun{name: name, model: newFleetModel(t, a)}
	r.replicas = startReplicas(t, n, func(i int) []string { return args(i, r.model) })
	r.bal = newBalancer(t, r.replicas)
	// Start-up reads (manifests, listings) are no part of the measure.
	r.model.reset()
	return r
}

// run reads keys through the fleet's balancer (runLoad) and logs the
// summary.
func (r *fleetRun) run(t *testing.T, a *fleetArchive, keys []string, during func(*fleetRun)) {
	t.Helper()
	var hook func()
	if during != nil {
		hook = func() { during(r) }
	}
	r.load = runLoad(t, r.bal, a, len(r.replicas), keys, fleetConc, hook)
	t.Log(r.summary(a))
}

// checkOneCopyPerReplica checks a fleet without peers: each replica's own
// frame cache, and nothing else, keeps it from fetching more, so the
// backend bytes are at least the frames each replica's reads touched,
// summed over the replicas, and not more than 5% above that (the harness
// counts what it says), and about one copy per replica of the frames the
// fleet touched (the workload spreads over the replicas).
func checkOneCopyPerReplica(t *testing.T, a *fleetArchive, r *fleetRun) {
	t.Helper()
	if len(r.load.failures) > 0 {
		t.Fatalf("%s: %d of %d reads failed or were wrong; first: %s", r.name, len(r.load.failures), r.load.reads, r.load.failures[0])
	}
	var own int64
	for i, f := range r.load.perReplica {
		own += a.bytesOf(f)
		if r.bal.served[i].Load() == 0 {
			t.Errorf("the balancer sent replica %d no request", i)
		}
	}
	got := r.model.bytes.Load()
	if got < own || float64(got) > 1.05*float64(own) {
		t.Errorf("%s: backend chunk bytes %d, want within [1, 1.05] x %d (the frames each replica's reads touched, summed)", r.name, got, own)
	}
	if ratio := r.ratio(a); ratio < 0.875*float64(len(r.replicas)) {
		t.Errorf("%s: the fleet fetched %.2fx the frames touched, want about %d (one copy per replica): the workload does not spread over the replicas", r.name, ratio, len(r.replicas))
	}
}
