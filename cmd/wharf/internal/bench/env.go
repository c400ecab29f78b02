// Package bench is wharf's reproducible benchmark harness and load test,
// behind "wharf bench" and "wharf bench --soak". It needs no cloud account
// and no S3 server: the backing store is a local directory
// (backend.FileStore) behind faults.Faulty, which adds S3-like first-byte
// latency (and an optional per-stream bandwidth cap), counts every request
// and byte exactly and, for the soak, injects store faults and silent bit
// flips. wharf itself runs in-process as the real s3api handler on a
// loopback listener, and the clients are aws-sdk-go-v2 (and its transfer
// manager for the parallel ranged download).
//
// Every figure in the report is a count or a ratio measured in the same run:
// wharf against per-object reads of the same tree from the same store, or
// wharf against a raw in-process zstd decode of the same frames. Nothing here
// asserts a wall-clock bound; the report states each target and whether this
// run met it.
package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// env is one backing store plus one in-process wharf endpoint.
type env struct {
	dir     string
	store   *backend.FileStore
	faulty  *faults.Faulty // latency + counting, in front of store
	reg     *prometheus.Registry
	bmet    *backend.Metrics
	avmet   *chunkio.Metrics
	catalog *catalog.Dynamic // serves "wharf"; swapped between measurements (a cold cache per run)
	srv     *http.Server
	url     string
	client  *s3.Client
	httpc   *http.Client
	cur     *archiveview.Archive

	// The per-object baseline: plain objects of the same store served
	// over HTTP (plain.go), through the S3 model (faulty) or with no
	// latency at all (nolat: the floor of this machine's client and
	// loopback).
	nolat       *faults.Faulty
	plain       *plainServer
	plainSrv    *http.Server
	plainClient *s3.Client
	readOpts    []chunkio.CacheOption
	archOpts    archiveview.Options // Config.Archive

	// model is how wharf reaches the S3 model (Config.Model). With
	// ModelHTTP, backing is a backend.S3Store (the AWS SDK, the tuned HTTP
	// client serve builds) talking to s3model, a plainServer of its own
	// fixed on faulty over loopback: the served path of production, and
	// faulty still counts every request and byte. With ModelInProcess,
	// backing is faulty itself.
	model      string
	backing    backend.Store
	s3model    *plainServer
	s3modelSrv *http.Server
	s3modelURL string
	// clock, when set, times wharf's backend reads (serveArchive puts it
	// between the archive and backing).
	clock *fetchClock
}

// The S3 models Config.Model names.
const (
	// ModelHTTP: wharf reads through backend.S3Store over HTTP from the
	// S3 model on loopback (the default).
	ModelHTTP = "http"
	// ModelInProcess: wharf reads the S3 model's store in-process, with
	// no SDK and no HTTP between them.
	ModelInProcess = "inprocess"
)

const benchBucket = "bench"

// getsOf is the backend GETs f has counted, whole and ranged.
func getsOf(f *faults.Faulty) int64 { return f.Requests("get") + f.Requests("range") }

func newEnv(cfg Config) (*env, error) {
	dir, err := os.MkdirTemp(cfg.TempDir, "wharf-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, store: backend.NewFileStore(dir), reg: prometheus.NewRegistry(), model: cfg.Model}
	if e.model == "" {
		e.model = ModelHTTP
	}
	e.faulty = faults.NewFaulty(e.store, faults.FaultConfig{Latency: cfg.Latency, Bandwidth: cfg.Bandwidth})
	e.nolat = faults.NewFaulty(e.store, faults.FaultConfig{})
	e.readOpts = cfg.ReadOptions
	e.archOpts = cfg.Archive
	e.bmet = backend.NewMetrics(e.reg)
	e.avmet = chunkio.NewMetrics(e.reg)
	e.catalog = catalog.NewDynamic(nil)
	verifier, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		return nil, err
	}
	h := s3api.New(s3api.Config{
		Catalog:    e.catalog,
		Verifier:   verifier,
		Logger:     zerolog.Nop(),
		Registerer: e.reg,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.srv = &http.Server{Handler: e.labelled("wharf", h), ReadHeaderTimeout: 10 * time.Second}
	go e.srv.Serve(ln)
	e.url = "http://" + ln.Addr().String()
	tr := &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	e.httpc = &http.Client{Transport: tr}
	e.client = newClient(e.url, e.httpc)
	e.plain = &plainServer{meta: e.store}
	e.plain.use(e.faulty)
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.plainSrv = &http.Server{Handler: e.labelled("s3model", e.plain), ReadHeaderTimeout: 10 * time.Second}
	go e.plainSrv.Serve(pln)
	e.plainClient = newClient("http://"+pln.Addr().String(), &http.Client{Transport: tr.Clone()})
	switch cfg.Model {
	case ModelInProcess:
		e.backing = e.faulty
	case ModelHTTP, "":
		// The same S3 model as the plain objects' (same server code, same
		// store, same counters) on a listener of its own, so that the
		// baselines' store swaps never touch wharf's backend.
		e.s3model = &plainServer{meta: e.store}
		e.s3model.use(e.faulty)
		mln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		e.s3modelSrv = &http.Server{Handler: e.labelled("s3model", e.s3model), ReadHeaderTimeout: 10 * time.Second,
			ConnState: e.s3model.connState}
		go e.s3modelSrv.Serve(mln)
		e.s3modelURL = "http://" + mln.Addr().String()
		if _, err := e.renewBacking(context.Background()); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("bench: S3 model %q: want %q or %q", cfg.Model, ModelHTTP, ModelInProcess)
	}
	return e, nil
}

// renewBacking gives wharf, with the HTTP model, a new backend.S3Store as
// serve builds it (a new SDK client, HTTP transport and no connections),
// as in a freshly started wharf; the old store's idle connections are
// closed at the S3 model. It reports false, and does nothing, with the
// in-process model.
func (e *env) renewBacking(ctx context.Context) (bool, error) {
	if e.s3model == nil {
		return false, nil
	}
	e.s3model.closeIdle()
	s3s, err := backend.NewS3Store(ctx, backend.S3Config{Endpoint: e.s3modelURL, Region: "us-east-1", PathStyle: true, Anonymous: true})
	if err != nil {
		return false, fmt.Errorf("bench: S3 store for the HTTP S3 model: %w", err)
	}
	e.backing = s3s
	return true, nil
}

// backendConns is how many connections wharf has opened to the HTTP S3
// model so far, and false with the in-process model.
func (e *env) backendConns() (int64, bool) {
	if e.s3model == nil {
		return 0, false
	}
	return e.s3model.conns.Load(), true
}

// labelled runs h under the pprof labels side=side and model=e.model, so
// that a CPU profile of the bench ("wharf bench --cpuprofile") separates
// wharf's work from the clients' and the S3 model's, per model:
// `go tool pprof -tagfocus side=wharf -tagfocus model=http`. The goroutines
// a request starts (wharf's fetches, and the SDK's connection reads and
// writes dialled for them) inherit the labels.
func (e *env) labelled(side string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), pprof.Labels("side", side, "model", e.model), func(context.Context) { h.ServeHTTP(w, r) })
	})
}

// newClient is an anonymous path-style SDK client of url.
func newClient(url string, hc *http.Client) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint:               aws.String(url),
		Region:                     "us-east-1",
		UsePathStyle:               true,
		Credentials:                aws.AnonymousCredentials{},
		HTTPClient:                 hc,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           1,
	})
}

// serveArchive opens manifestKey with a fresh frame cache (a cold start) and
// makes it the served bucket "wharf". The manifest GET is counted like any
// other backend request; callers reset the counters after it when they want
// the read path alone.
func (e *env) serveArchive(ctx context.Context, manifestKey string, cacheBytes int64, readahead int) (*archiveview.Archive, error) {
	opts := e.archOpts
	opts.Name = "wharf"
	opts.Cache = chunkio.NewFrameCache(cacheBytes, e.readOpts...)
	opts.Metrics = e.avmet
	opts.Readahead = readahead
	var a *archiveview.Archive
	var err error
	// Under wharf's label too: the connections this open dials stay
	// wharf's for their lifetime.
	pprof.Do(ctx, pprof.Labels("side", "wharf", "model", e.model), func(ctx context.Context) {
		store := e.backing
		if e.clock != nil {
			e.clock.Store = e.backing
			store = e.clock
		}
		a, err = archiveview.Open(ctx, backend.Instrument(store, e.bmet), benchBucket, manifestKey, opts)
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", manifestKey, err)
	}
	e.swap(a)
	return a, nil
}

// swap makes a the served bucket "wharf" and closes the archive it replaces.
func (e *env) swap(a *archiveview.Archive) {
	old := e.cur
	e.cur = a
	e.catalog.Swap(map[string]*archiveview.Archive{"wharf": a})
	if old != nil {
		old.Close()
	}
}

func (e *env) close() {
	if e.cur != nil {
		e.cur.Close()
	}
	e.srv.Close()
	e.plainSrv.Close()
	if e.s3modelSrv != nil {
		e.s3modelSrv.Close()
	}
	os.RemoveAll(e.dir)
}

// objectPath is the S3 model's file of chunk c of manifest m.
func (e *env) objectPath(m *manifest.Manifest, c manifest.ChunkEntry) string {
	return filepath.Join(e.dir, benchBucket, filepath.FromSlash(manifest.ResolveObjectKey(benchBucket, m.Prefix, c.S3Key)))
}
