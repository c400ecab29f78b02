package peer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef-test")

// testArchive packs files (frames of 16 KiB) into a directory and returns
// the directory, the manifest key and the files.
func testArchive(t testing.TB, n int) (string, string, map[string][]byte) {
	return testArchiveWith(t, n, 20<<10, cargopack.Options{FrameSize: 16 << 10})
}

// testArchiveWith packs n files of about size bytes with the packer's
// options o (bucket, prefix, upload id and dates are set here).
func testArchiveWith(t testing.TB, n, size int, o cargopack.Options) (string, string, map[string][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string][]byte{}
	for i := range n {
		b := make([]byte, size+rng.IntN(size))
		for j := range b {
			b[j] = byte(rng.IntN(16)) // compressible, not trivially
		}
		files[fmt.Sprintf("d/f%03d.bin", i)] = b
	}
	dir := t.TempDir()
	mtime := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	o.Bucket, o.Prefix, o.UploadID, o.Created, o.Hostname = "arch", "team", "20250102-00000001", mtime, "test"
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, mtime), o)
	if err != nil {
		t.Fatal(err)
	}
	return dir, res.ManifestKey, files
}

// replica is one member of a test fleet.
type replica struct {
	url   string
	group *Group
	cache *chunkio.FrameCache
	arch  *archiveview.Archive
	reg   *prometheus.Registry
	srv   *http.Server
	ln    net.Listener
}

// fleetOpts shape a test fleet.
type fleetOpts struct {
	noPeers bool
	// wrap wraps replica i's peer handler (a lying proxy, a hang).
	wrap func(i int, h http.Handler) http.Handler
	cfg  func(i int, c *Config)
	// extra are member URLs that are no replica here (a down peer).
	extra []string
	// peers wraps replica i's Group as its cache's Peers (a recorder).
	peers func(i int, g *Group) chunkio.Peers
	// archive are the archives' options (Cache is set here; Readahead
	// -1 unless set).
	archive archiveview.Options
	// cache are the frame caches' extra options; cacheBytes their budget
	// (0: 64 MiB).
	cache      []chunkio.CacheOption
	cacheBytes int64
	// listener wraps replica i's peer listener (small socket buffers).
	listener func(i int, ln net.Listener) net.Listener
}

// newFleet starts n replicas over one counting store, each with its own
// frame cache, archive and peer listener on 127.0.0.1.
func newFleet(t testing.TB, n int, store backend.Store, manifestKey string, o fleetOpts) []*replica {
	t.Helper()
	rs := make([]*replica, n)
	var urls []string
	for i := range rs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = &replica{ln: ln, url: "http://" + ln.Addr().String(), reg: prometheus.NewRegistry()}
		if o.listener != nil {
			rs[i].ln = o.listener(i, ln)
		}
		urls = append(urls, rs[i].url)
	}
	urls = append(urls, o.extra...)
	for i, r := range rs {
		var opts []chunkio.CacheOption
		if !o.noPeers {
			cfg := Config{Self: r.url, Peers: urls, Secret: testSecret, Registerer: r.reg}
			if o.cfg != nil {
				o.cfg(i, &cfg)
			}
			g, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			r.group = g
			var p chunkio.Peers = g
			if o.peers != nil {
				p = o.peers(i, g)
			}
			opts = append(opts, chunkio.WithPeers(p))
		}
		budget := o.cacheBytes
		if budget == 0 {
			budget = 64 << 20
		}
		r.cache = chunkio.NewFrameCache(budget, append(opts, o.cache...)...)
		ao := o.archive
		ao.Name, ao.Cache = fmt.Sprintf("r%d", i), r.cache
		if ao.Readahead == 0 {
			ao.Readahead = -1
		}
		a, err := archiveview.Open(context.Background(), store, "arch", manifestKey, ao)
		if err != nil {
			t.Fatal(err)
		}
		r.arch = a
		var h http.Handler = http.NotFoundHandler()
		if r.group != nil {
			h = r.group.Handler(r.cache)
		}
		if o.wrap != nil {
			h = o.wrap(i, h)
		}
		r.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go r.srv.Serve(r.ln)
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.srv.Close()
			r.arch.Close()
			if r.group != nil {
				r.group.Close()
			}
		}
	})
	return rs
}

// openArchive opens the test archive over cache (no readahead: each read
// fetches only its frames).
func openArchive(t testing.TB, store backend.Store, key string, cache *chunkio.FrameCache) *archiveview.Archive {
	t.Helper()
	a, err := archiveview.Open(context.Background(), store, "arch", key, archiveview.Options{Cache: cache, Readahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// readAll reads key through r and fails the test unless the bytes are want.
func (r *replica) readAll(t testing.TB, key string, want []byte) {
	t.Helper()
	f, ok := r.arch.Stat(key)
	if !ok {
		t.Fatalf("%s: Stat(%q): not found", r.url, key)
	}
	rc, err := r.arch.Open(context.Background(), f, 0, f.Size)
	if err != nil {
		t.Fatalf("%s: open %s: %v", r.url, key, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("%s: read %s: %v", r.url, key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %s: %d bytes differ from the %d written", r.url, key, len(got), len(want))
	}
}

// compressedTotal is the archive's chunk bytes (what one fetch of every
// frame costs).
func compressedTotal(t testing.TB, dir string, store backend.Store, key string) int64 {
	t.Helper()
	a, err := archiveview.Open(context.Background(), store, "arch", key, archiveview.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	return a.Info().CompressedBytes
}

// TestFleetFetchesEachFrameOnce: three replicas each read every file (in
// their own random order); with peers the backend serves about one copy of
// every frame, without peers one per replica. Every byte is compared.
func TestFleetFetchesEachFrameOnce(t *testing.T) {
	dir, key, files := testArchive(t, 40)
	var keys []string
	for k := range files {
		keys = append(keys, k)
	}
	for _, tc := range []struct {
		name     string
		noPeers  bool
		min, max float64 // backend bytes / compressed bytes
	}{
		{"peers", false, 0.95, 1.10},
		{"no peers", true, 2.9, 3.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			total := compressedTotal(t, dir, backend.NewFileStore(dir), key)
			rs := newFleet(t, 3, store, key, fleetOpts{noPeers: tc.noPeers})
			base := store.BytesReturned()
			for i, r := range rs {
				order := append([]string(nil), keys...)
				rand.New(rand.NewPCG(uint64(i), 9)).Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
				for _, k := range order {
					r.readAll(t, k, files[k])
				}
			}
			ratio := float64(store.BytesReturned()-base) / float64(total)
			t.Logf("%s: backend bytes %.3fx the compressed frames", tc.name, ratio)
			if ratio < tc.min || ratio > tc.max {
				t.Errorf("backend bytes %.3fx the compressed frames, want %.2f to %.2f", ratio, tc.min, tc.max)
			}
			if !tc.noPeers {
				var hits float64
				for _, r := range rs {
					hits += testutil.ToFloat64(r.group.m.hits)
					if f := testutil.ToFloat64(r.group.m.fallbacks.WithLabelValues(reasonError)); f != 0 {
						t.Errorf("%s: %v fallbacks for errors", r.url, f)
					}
				}
				if hits == 0 {
					t.Error("no frame came from a peer")
				}
			}
		})
	}
}

// TestFleetSequentialWithReadahead: large files read whole with readahead
// on (prefetch asks owners too, speculatively): every byte exact, the
// fleet's backend bytes near one copy, and, once the archives are closed,
// every byte charged to each replica's read memory is a frame its caches
// hold (nothing leaked, nothing pinned).
func TestFleetSequentialWithReadahead(t *testing.T) {
	dir, key, files := testArchiveWith(t, 8, 300<<10, cargopack.Options{FrameSize: 16 << 10})
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	total := compressedTotal(t, dir, backend.NewFileStore(dir), key)
	rs := newFleet(t, 3, store, key, fleetOpts{archive: archiveview.Options{Readahead: 8}})
	base := store.BytesReturned()
	for i, r := range rs {
		for k := range 8 {
			name := fmt.Sprintf("d/f%03d.bin", (k+3*i)%8)
			r.readAll(t, name, files[name])
		}
	}
	ratio := float64(store.BytesReturned()-base) / float64(total)
	t.Logf("backend bytes %.3fx the compressed frames", ratio)
	if ratio > 1.25 {
		t.Errorf("backend bytes %.3fx the compressed frames, want at most 1.25", ratio)
	}
	for _, r := range rs {
		r.arch.Close() // waits for its prefetch
		used, peak := r.cache.MemoryInUse()
		held := r.cache.Bytes() + r.cache.PeerBytes()
		if _, pinned := r.cache.Pinned(); used != held || pinned != 0 || peak > r.cache.MemoryBudget() {
			t.Errorf("%s: %d bytes charged, %d held in the caches, %d pinned; peak %d of %d", r.url, used, held, pinned, peak, r.cache.MemoryBudget())
		}
	}
}

// TestUnsharedShapes: extents no frame checksum covers (plain tar, an
// unframed zstd chunk, direct objects, giant frames) are never asked of a
// peer nor served to one; they read exactly, from the backend.
func TestUnsharedShapes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        cargopack.Options
		maxFrame int64
	}{
		{"plain tar", cargopack.Options{FrameSize: 16 << 10, PlainTar: func(string) bool { return true }}, 0},
		{"unframed zstd", cargopack.Options{}, 0},
		{"direct objects", cargopack.Options{Direct: true}, 0},
		{"giant frames", cargopack.Options{FrameSize: 256 << 10, NoSubFrames: true}, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, key, files := testArchiveWith(t, 6, 100<<10, tc.o)
			store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			rs := newFleet(t, 2, store, key, fleetOpts{archive: archiveview.Options{MaxFrameBytes: tc.maxFrame}})
			for _, r := range rs {
				for k, b := range files {
					r.readAll(t, k, b)
				}
			}
			for _, r := range rs {
				if h, s := testutil.ToFloat64(r.group.m.hits), testutil.ToFloat64(r.group.m.served.WithLabelValues("200")); h != 0 || s != 0 || r.cache.PeerBytes() != 0 {
					t.Errorf("%s: %v peer hits, %v frames served, %d bytes kept for peers; want none", r.url, h, s, r.cache.PeerBytes())
				}
			}
		})
	}
}

// TestReplicaKilledDuringLoad: one replica of three stops (its listener
// and connections closed) while the other two read concurrently: no read
// of theirs fails or returns a wrong byte, and afterwards the frames it
// owned go to another owner (or this replica) instead of waiting for it.
func TestReplicaKilledDuringLoad(t *testing.T) {
	dir, key, files := testArchive(t, 60)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	// Small caches: frames keep being fetched, before and after the kill.
	rs := newFleet(t, 3, store, key, fleetOpts{cacheBytes: 256 << 10, cfg: func(_ int, c *Config) { c.FirstByte = 300 * time.Millisecond }})
	var keys []string
	for k := range files {
		keys = append(keys, k)
	}
	done := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := range 4 {
		r := rs[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-done:
					return
				default:
				}
				k := keys[rng.IntN(len(keys))]
				f, _ := r.arch.Stat(k)
				rc, err := r.arch.Open(context.Background(), f, 0, f.Size)
				if err == nil {
					var got []byte
					got, err = io.ReadAll(rc)
					rc.Close()
					if err == nil && !bytes.Equal(got, files[k]) {
						err = fmt.Errorf("%s: wrong bytes", k)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", r.url, err)
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	rs[2].srv.Close() // the replica dies: listener and connections gone
	time.Sleep(400 * time.Millisecond)
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var failed, hits float64
	for _, r := range rs[:2] {
		failed += testutil.ToFloat64(r.group.m.fallbacks.WithLabelValues(reasonConnect)) + testutil.ToFloat64(r.group.m.fallbacks.WithLabelValues(reasonTimeout))
		hits += testutil.ToFloat64(r.group.m.hits)
	}
	t.Logf("%v peer hits, %v fallbacks for the dead replica", hits, failed)
	if failed == 0 || hits == 0 {
		t.Errorf("%v peer hits and %v fallbacks: the kill was not exercised", hits, failed)
	}
	// The dead replica's frames now have another owner.
	var moved, owned int
	for i := range 200 {
		id := chunkio.FrameID{Bucket: "arch", Key: "k", Off: int64(i) << 14, Size: 1 << 14}
		r := rs[0].group.ring.Load()
		if r.urls[r.owner(hash64(id.OwnerKey()), nil)] != rs[2].url {
			continue
		}
		owned++
		if o, _ := rs[0].group.Owner(id); o != rs[2].url {
			moved++
		}
	}
	if owned == 0 || moved != owned {
		t.Errorf("%d of the %d frames the dead replica owned have another owner", moved, owned)
	}
}

// TestFleetModelledS3: the shape at small scale. Four replicas
// behind a random balancer over a modelled S3 (20 ms to first byte,
// 100 MB/s per connection), 8 clients reading 800 random small files of 600.
// With peers the fleet's backend bytes stay near one copy of the touched
// frames (at most 1.10x) where without they approach one per replica, and
// reads are at most 1.5x as slow (median and p90; the latencies of a pair
// of runs that miss are measured once more, the bytes every time).
func TestFleetModelledS3(t *testing.T) {
	dir, key, files := testArchiveWith(t, 600, 8<<10, cargopack.Options{FrameSize: 64 << 10})
	var keys []string
	for k := range files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	type result struct {
		ratio       float64
		median, p90 time.Duration
	}
	run := func(noPeers bool) result {
		store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: 20 * time.Millisecond, Bandwidth: 100 << 20})
		rs := newFleet(t, 4, store, key, fleetOpts{noPeers: noPeers})
		base := store.BytesReturned() // the manifests the replicas opened
		var mu sync.Mutex
		var lat []time.Duration
		touched := map[string]bool{}
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), 42))
				for range 100 {
					k := keys[rng.IntN(len(keys))]
					r := rs[rng.IntN(len(rs))]
					start := time.Now()
					r.readAll(t, k, files[k])
					d := time.Since(start)
					mu.Lock()
					lat = append(lat, d)
					touched[k] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// The touched frames: what one replica alone fetches for the
		// same files, read once each.
		one := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
		solo := newFleet(t, 1, one, key, fleetOpts{noPeers: true})
		soloBase := one.BytesReturned()
		for k := range touched {
			solo[0].readAll(t, k, files[k])
		}
		slices.Sort(lat)
		return result{float64(store.BytesReturned()-base) / float64(one.BytesReturned()-soloBase), lat[len(lat)/2], lat[len(lat)*9/10]}
	}
	// The latency comparison is of wall times on a shared 2-core machine:
	// a pair of runs whose latencies miss the bound is run once more (the
	// byte counts of every pair are checked), and only two misses fail.
	slow := func(with, without result) bool {
		return with.median > without.median*3/2+2*time.Millisecond || with.p90 > without.p90*3/2
	}
	var with, without result
	for attempt := 1; ; attempt++ {
		with, without = run(false), run(true)
		t.Logf("attempt %d: backend bytes per touched frame: %.2fx with peers, %.2fx without; median read %v with, %v without; p90 %v with, %v without",
			attempt, with.ratio, without.ratio, with.median, without.median, with.p90, without.p90)
		if with.ratio > 1.10 || without.ratio < 2 || !slow(with, without) || attempt == 2 {
			break
		}
	}
	// The issue asks for 1.25x end to end; one flight per frame across
	// the fleet gives 1.00x here, and 1.10x would mean frames fetched
	// twice again (the owner's read racing a peer's ask gave 1.07-1.11x).
	if with.ratio > 1.10 {
		t.Errorf("with peers the fleet fetched %.2fx the touched frames, want at most 1.10x", with.ratio)
	}
	if without.ratio < 2 {
		t.Errorf("without peers the fleet fetched only %.2fx the touched frames: the test does not show what peers save", without.ratio)
	}
	// Half the reads are cache hits of microseconds either way, where a
	// busy machine's scheduling decides: the median gets 2 ms of slack;
	// the p90 (reads that fetch) must be within 1.5x as it is.
	if slow(with, without) {
		t.Errorf("reads with peers: median %v, p90 %v; without: %v, %v; want at most 1.5x", with.median, with.p90, without.median, without.p90)
	}
}
