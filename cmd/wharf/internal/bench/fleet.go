package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/chunkio/peer"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// The fleet workload (issue 23): Replicas wharf replicas in this process,
// each with its own frame cache, its own backend client (with the HTTP
// model, a backend.S3Store of its own: its own connections) and its own
// loopback listener, over the one S3 model, read by Clients concurrent
// clients that send each request to a replica chosen at random (a load
// balancer without affinity). The archive is Files log-like files of
// 16–64 KiB in 4 MiB frames; the reads are Reads random files. Every byte
// is checked against the source. Two fleets with cold caches, each over
// an S3 model of its own (same store, same costs, counted apart), read at
// the same time, every read sent to one fleet then the other: one without
// peers (each replica fetches what its own clients read) and one as peers
// (serve's --peers wiring: a peer.Group per replica asked by its frame
// cache, its handler on a peer listener of its own, authenticated with a
// shared secret). Both see the same reads at the same moments of the
// machine's load, so their latencies compare. The report gives, per
// variant, the backend GETs and bytes against the frames the reads
// touched (each frame counted once for the fleet: the ideal is 1x), the
// peer traffic, fallbacks and verify failures, and the request latency
// p50/p99; and issue 23's targets (as peers at most 1.25x the touched
// frames, and a median latency at most 1.5x that without peers).

// FleetConfig sets the fleet workload (Config.Fleet).
type FleetConfig struct {
	Replicas int // replicas of the fleet; 0 skips the workload
	Reads    int // random whole-file reads through the balancer
	Files    int // files of the fleet archive
	Clients  int // concurrent clients
}

// DefaultFleetConfig is the fleet: four replicas, 1,200 random
// reads of small files, 8 clients.
func DefaultFleetConfig() FleetConfig {
	return FleetConfig{Replicas: 4, Reads: 1200, Files: 1500, Clients: 8}
}

// The fleet archive's shape.
const (
	fleetFrame   = 4 << 20
	fleetMinFile = 16 << 10
	fleetMaxFile = 64 << 10
)

func (c FleetConfig) validate() error {
	if c.Replicas == 0 {
		return nil
	}
	switch {
	case c.Replicas < 1 || c.Replicas > 64:
		return fmt.Errorf("bench: fleet of %d replicas: want 0 (skip) or 1 to 64", c.Replicas)
	case c.Reads < 1 || c.Files < 1 || c.Clients < 1:
		return fmt.Errorf("bench: fleet: %d reads of %d files by %d clients: want at least one of each", c.Reads, c.Files, c.Clients)
	}
	return nil
}

// fleetFrameRef is one frame of the fleet archive.
type fleetFrameRef struct {
	chunk string // the chunk's s3_key
	index int
}

// fleetFrames maps every file of m (by virtual key) to the frames its
// read needs (its 512-byte tar header, checked before the data, and its
// data) and gives each frame's compressed size.
func fleetFrames(m *manifest.Manifest) (map[string][]fleetFrameRef, map[fleetFrameRef]int64, error) {
	chunks := map[string]*manifest.ChunkEntry{}
	size := map[fleetFrameRef]int64{}
	for i := range m.Chunks {
		c := &m.Chunks[i]
		chunks[c.S3Key] = c
		for fi, fr := range c.Frames {
			size[fleetFrameRef{c.S3Key, fi}] = fr.CompressedSize
		}
	}
	files := map[string][]fleetFrameRef{}
	for _, f := range m.Files {
		key, err := manifest.RelativeKey(m.SourcePath, f.Path)
		if err != nil {
			return nil, nil, err
		}
		c := chunks[f.S3Key]
		if c == nil || len(c.Frames) == 0 || f.ArchiveOffset == nil {
			return nil, nil, fmt.Errorf("bench: fleet: %s is not in a framed chunk with a known archive offset", key)
		}
		u0, u1 := *f.ArchiveOffset-512, *f.ArchiveOffset+f.Size
		for fi, fr := range c.Frames {
			if fr.UncompressedOffset < u1 && fr.UncompressedOffset+fr.UncompressedSize > u0 {
				files[key] = append(files[key], fleetFrameRef{c.S3Key, fi})
			}
		}
	}
	return files, size, nil
}

// fleetReplica is one in-process wharf of the fleet.
type fleetReplica struct {
	arch    *archiveview.Archive
	srv     *http.Server
	client  *s3.Client
	reg     *prometheus.Registry
	group   *peer.Group  // nil without peers
	peerSrv *http.Server // its peer listener's server
}

func (r *fleetReplica) close() {
	r.srv.Close()
	if r.peerSrv != nil {
		r.peerSrv.Close()
	}
	if r.group != nil {
		r.group.Close()
	}
	if r.arch != nil {
		r.arch.Close()
	}
}

// fleetSecret is the in-process fleet's shared peer secret (the bench's
// replicas talk over loopback only).
const fleetSecret = "wharf bench fleet: a peer secret of at least 32 bytes"

// peerListeners opens n loopback peer listeners (every URL must be known
// before any replica's Group is made).
func peerListeners(n int) ([]net.Listener, []string, error) {
	var lns []net.Listener
	var urls []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, nil, err
		}
		lns = append(lns, ln)
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return lns, urls, nil
}

// fleetModel is one fleet's S3 model: its own faults.Faulty over the
// env's store (S3's latency and bandwidth, exact counts of this fleet's
// requests and bytes) and, with the HTTP model, its own plainServer on a
// loopback listener, so that two fleets reading at once are counted
// apart.
type fleetModel struct {
	faulty *faults.Faulty
	srv    *http.Server // nil in-process
	url    string
}

func (e *env) newFleetModel(cfg Config) (*fleetModel, error) {
	m := &fleetModel{faulty: faults.NewFaulty(e.store, faults.FaultConfig{Latency: cfg.Latency, Bandwidth: cfg.Bandwidth})}
	if e.s3model == nil {
		return m, nil
	}
	ps := &plainServer{meta: e.store}
	ps.use(m.faulty)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m.srv = &http.Server{Handler: e.labelled("s3model", ps), ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	m.url = "http://" + ln.Addr().String()
	return m, nil
}

func (m *fleetModel) close() {
	if m.srv != nil {
		m.srv.Close()
	}
}

// store is how one replica reaches m: a backend.S3Store of its own with
// the HTTP model (as a separate wharf process has), the counting store
// itself in-process.
func (m *fleetModel) store(ctx context.Context) (backend.Store, error) {
	if m.srv == nil {
		return m.faulty, nil
	}
	s, err := backend.NewS3Store(ctx, backend.S3Config{Endpoint: m.url, Region: "us-east-1", PathStyle: true, Anonymous: true})
	if err != nil {
		return nil, fmt.Errorf("bench: fleet: S3 store for the HTTP S3 model: %w", err)
	}
	return s, nil
}

// startFleetReplica opens manifestKey as bucket "fleet" with a cold cache
// of its own and serves it on a loopback listener. With peerLn, the
// replica is the member self of the fleet peers (serve's wiring: a
// peer.Group asked by the frame cache, its handler on peerLn).
func (e *env) startFleetReplica(ctx context.Context, cfg Config, model *fleetModel, manifestKey string, hc *http.Client, peerLn net.Listener, self string, peers []string) (*fleetReplica, error) {
	store, err := model.store(ctx)
	if err != nil {
		return nil, err
	}
	r := &fleetReplica{reg: prometheus.NewRegistry()}
	reg := r.reg
	cacheOpts := e.readOpts
	if peerLn != nil {
		g, err := peer.New(peer.Config{Self: self, Peers: peers, Secret: []byte(fleetSecret), Registerer: reg, Logger: zerolog.Nop()})
		if err != nil {
			return nil, fmt.Errorf("bench: fleet: peers: %w", err)
		}
		r.group = g
		cacheOpts = append(slices.Clone(cacheOpts), chunkio.WithPeers(g), chunkio.WithPeerCache(0))
	}
	opts := e.archOpts
	opts.Name = "fleet"
	opts.Cache = chunkio.NewFrameCache(cfg.CacheBytes, cacheOpts...)
	opts.Metrics = chunkio.NewMetrics(reg)
	if r.group != nil {
		r.peerSrv = &http.Server{Handler: e.labelled("wharf", r.group.Handler(opts.Cache)), ReadHeaderTimeout: 5 * time.Second}
		go r.peerSrv.Serve(peerLn)
	}
	a, err := archiveview.Open(ctx, backend.Instrument(store, backend.NewMetrics(reg)), benchBucket, manifestKey, opts)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("bench: fleet: open %s: %w", manifestKey, err)
	}
	cat := catalog.NewDynamic(nil)
	cat.Swap(map[string]*archiveview.Archive{"fleet": a})
	verifier, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		a.Close()
		return nil, err
	}
	h := s3api.New(s3api.Config{Catalog: cat, Verifier: verifier, Logger: zerolog.Nop(), Registerer: reg})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		return nil, err
	}
	r.arch, r.srv = a, &http.Server{Handler: e.labelled("wharf", h), ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	r.client = newClient("http://"+ln.Addr().String(), hc)
	return r, nil
}

// fleetRun is what one variant of the fleet measured.
type fleetRun struct {
	variant   string
	reads     int
	gets      int64 // backend GETs of the read path (after the opens)
	bytes     int64 // backend body bytes of the read path
	touched   int   // distinct frames the reads needed
	touchedB  int64 // their compressed bytes
	latencies []time.Duration
	// With peers: frames received from owners, compressed bytes moved
	// between replicas, fallbacks to the backend and verify failures.
	peerHits, peerBytes, fallbacks, verifyFailures float64
}

func (f *fleetRun) bytesPerTouched() float64 { return float64(f.bytes) / float64(f.touchedB) }
func (f *fleetRun) getsPerTouched() float64  { return float64(f.gets) / float64(f.touched) }

// quantile is the q-quantile of the sorted latencies (the upper of two
// middles for the median).
func (f *fleetRun) quantile(q float64) time.Duration {
	if len(f.latencies) == 0 {
		return 0
	}
	return f.latencies[min(int(q*float64(len(f.latencies))), len(f.latencies)-1)]
}

// fleetWorkload packs the fleet archive and runs the two fleets.
func fleetWorkload(ctx context.Context, cfg Config, e *env, rep *Report) error {
	fc := cfg.Fleet
	cfg.logf("fleet: packing %d files in %d MiB frames", fc.Files, fleetFrame>>20)
	rng := rand.New(rand.NewPCG(cfg.Seed, 23))
	data := make(map[string][]byte, fc.Files)
	keys := make([]string, 0, fc.Files)
	for i := 0; i < fc.Files; i++ {
		key := fmt.Sprintf("fleet/%02d/part-%05d.log", i/100, i)
		n := fleetMinFile + rng.IntN(fleetMaxFile-fleetMinFile+1)
		data[key] = newLogGen(cfg.Seed+uint64(i)).fill(make([]byte, 0, n), n)
		keys = append(keys, key)
	}
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), cargopack.FromMap(data, mtime), cargopack.Options{
		Bucket: benchBucket, Prefix: "fleet", UploadID: "fleet-1", SourcePath: "/srv/fleet",
		FrameSize: fleetFrame, ChunkSize: 16 << 20, ContentHash: true, Created: mtime,
	})
	if err != nil {
		return fmt.Errorf("bench: fleet: pack: %w", err)
	}
	frames, sizes, err := fleetFrames(res.Manifest)
	if err != nil {
		return err
	}
	picks := make([]string, fc.Reads)
	for i := range picks {
		picks[i] = keys[rng.IntN(len(keys))]
	}
	touched := map[fleetFrameRef]bool{}
	for _, k := range picks {
		for _, f := range frames[k] {
			touched[f] = true
		}
	}
	var fleets []*fleet
	defer func() {
		for _, f := range fleets {
			f.close()
		}
	}()
	for _, peers := range []bool{false, true} {
		f, err := e.startFleet(ctx, cfg, peers, res.ManifestKey)
		if err != nil {
			return err
		}
		fleets = append(fleets, f)
	}
	lat, err := loadFleets(ctx, cfg, fleets, picks, data)
	if err != nil {
		return err
	}
	var runs []*fleetRun
	for i, f := range fleets {
		run := f.measured(lat[i], touched, sizes)
		cfg.logf("fleet %s: %d replicas, %d reads: %d GETs, %.1f MB = %.2fx the %d touched frames; %.1f MB between peers; p50 %v, p99 %v",
			run.variant, fc.Replicas, run.reads, run.gets, float64(run.bytes)/1e6, run.bytesPerTouched(), run.touched, run.peerBytes/1e6,
			run.quantile(0.5).Round(10*time.Microsecond), run.quantile(0.99).Round(10*time.Microsecond))
		runs = append(runs, run)
	}
	if runs[0].touchedB == 0 {
		return errors.New("bench: fleet: the reads touched no frame")
	}
	reportFleet(cfg, rep, runs)
	return nil
}

// The fleet's two variants.
const (
	fleetNoPeers = "no peers"
	fleetPeers   = "peers"
)

// fleet is one fleet of replicas with cold caches over its own S3 model.
type fleet struct {
	variant  string
	model    *fleetModel
	replicas []*fleetReplica
	hc       *http.Client
}

func (f *fleet) close() {
	for _, r := range f.replicas {
		r.close()
	}
	f.hc.CloseIdleConnections()
	f.model.close()
}

// startFleet starts cfg.Fleet.Replicas replicas (as peers or not) over a
// fleet model of their own, and zeroes its counts after the opens.
func (e *env) startFleet(ctx context.Context, cfg Config, peers bool, manifestKey string) (*fleet, error) {
	fc := cfg.Fleet
	model, err := e.newFleetModel(cfg)
	if err != nil {
		return nil, err
	}
	f := &fleet{variant: fleetNoPeers, model: model,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second, DisableCompression: true}}}
	var (
		lns  []net.Listener
		urls []string
	)
	if peers {
		f.variant = fleetPeers
		if lns, urls, err = peerListeners(fc.Replicas); err != nil {
			f.close()
			return nil, err
		}
	}
	for i := range fc.Replicas {
		var ln net.Listener
		var self string
		if peers {
			ln, self = lns[i], urls[i]
		}
		r, err := e.startFleetReplica(ctx, cfg, model, manifestKey, f.hc, ln, self, urls)
		if err != nil {
			for _, l := range lns[i:] {
				l.Close()
			}
			f.close()
			return nil, err
		}
		f.replicas = append(f.replicas, r)
	}
	model.faulty.Reset() // the opens are no part of the read path
	return f, nil
}

// loadFleets sends every read of picks to each fleet in turn (the first
// one rotating with the read's index), each to a replica chosen at
// random, cfg.Fleet.Clients reads at a time, checking every body: the
// fleets see the same reads at the same moments of the machine's load,
// so their latencies compare under the same conditions. It returns each
// fleet's latencies, sorted.
func loadFleets(ctx context.Context, cfg Config, fleets []*fleet, picks []string, data map[string][]byte) ([][]time.Duration, error) {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
	)
	lat := make([][]time.Duration, len(fleets))
	for i := range lat {
		lat[i] = make([]time.Duration, len(picks))
	}
	for w := range cfg.Fleet.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
			for {
				i := int(next.Add(1)) - 1
				if i >= len(picks) || ctx.Err() != nil {
					return
				}
				for j := range fleets {
					k := (i + j) % len(fleets)
					f := fleets[k]
					r := f.replicas[rng.IntN(len(f.replicas))]
					t0 := time.Now()
					err := getAndCheckFrom(ctx, r.client, "fleet", picks[i], data[picks[i]])
					lat[k][i] = time.Since(t0)
					if err != nil {
						mu.Lock()
						if first == nil {
							first = fmt.Errorf("bench: fleet (%s): %w", f.variant, err)
						}
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range lat {
		slices.Sort(lat[i])
	}
	return lat, nil
}

// measured is what f's backend and peers counted for reads whose
// latencies are lat and which touched the frames touched.
func (f *fleet) measured(lat []time.Duration, touched map[fleetFrameRef]bool, sizes map[fleetFrameRef]int64) *fleetRun {
	run := &fleetRun{variant: f.variant, reads: len(lat), latencies: lat, touched: len(touched),
		gets: getsOf(f.model.faulty), bytes: f.model.faulty.BytesReturned()}
	for fr := range touched {
		run.touchedB += sizes[fr]
	}
	for _, r := range f.replicas {
		run.peerHits += gatherSum(r.reg, "wharf_peer_hits_total")
		run.peerBytes += gatherSum(r.reg, "wharf_peer_bytes_in_total")
		run.fallbacks += gatherSum(r.reg, "wharf_peer_fallbacks_total")
		run.verifyFailures += gatherSum(r.reg, "wharf_peer_verify_failures_total")
	}
	return run
}

// gatherSum is the sum of every sample of the counter or gauge name in
// reg (0 when there is none).
func gatherSum(reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// fleetWorkloadName is the fleet's table in the report.
const fleetWorkloadName = "8. Fleet: random small-file reads behind a random balancer (4 MiB frames)"

// reportFleet adds one line per variant: backend GETs and bytes against
// the touched frames, peer traffic and the latencies; and, with both
// variants, issue 23's targets.
func reportFleet(cfg Config, rep *Report, runs []*fleetRun) {
	sys := fmt.Sprintf("wharf x %d replicas", cfg.Fleet.Replicas)
	var none, with *fleetRun
	for _, r := range runs {
		switch r.variant {
		case fleetNoPeers:
			none = r
		case fleetPeers:
			with = r
		}
		add := func(metric string, v float64, unit string) {
			rep.add(Row{Workload: fleetWorkloadName, System: sys, Variant: r.variant, Concurrency: cfg.Fleet.Clients, Metric: metric, Value: v, Unit: unit})
		}
		add("reads", float64(r.reads), "")
		add("touched frames", float64(r.touched), "")
		add("touched frames MB", float64(r.touchedB)/1e6, "")
		add("backend GETs", float64(r.gets), "")
		add("backend MB", float64(r.bytes)/1e6, "")
		add("GETs / touched frame", r.getsPerTouched(), "")
		add("backend bytes / touched frames", r.bytesPerTouched(), "x")
		add("peer MB", r.peerBytes/1e6, "")
		add("peer hits", r.peerHits, "")
		add("fallbacks to backend", r.fallbacks, "")
		add("verify failures", r.verifyFailures, "")
		add("request p50", float64(r.quantile(0.5).Microseconds())/1e3, "ms")
		add("request p99", float64(r.quantile(0.99).Microseconds())/1e3, "ms")
	}
	if none == nil || with == nil {
		return
	}
	n := cfg.Fleet.Replicas
	rep.target(fmt.Sprintf("fleet of %d as peers: backend bytes / touched frames", n), fmt.Sprintf("%.2fx (%.2fx without peers)", with.bytesPerTouched(), none.bytesPerTouched()),
		"<= 1.25x", with.bytesPerTouched() <= 1.25)
	p50, base := with.quantile(0.5), none.quantile(0.5)
	rep.target(fmt.Sprintf("fleet of %d as peers: median latency vs without peers", n), fmt.Sprintf("%.2fx (%v vs %v)", float64(p50)/float64(base),
		p50.Round(10*time.Microsecond), base.Round(10*time.Microsecond)), "<= 1.5x", float64(p50) <= 1.5*float64(base))
	rep.target(fmt.Sprintf("fleet of %d as peers: verify failures among honest peers", n), fmt.Sprintf("%.0f", with.verifyFailures), "0", with.verifyFailures == 0)
}
