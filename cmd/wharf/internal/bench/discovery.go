package bench

// Discovery at scale (issue 16): how soon wharf answers after a start over
// thousands of uploads, and how soon every archive is open. The real
// catalog.Manager and s3api handler serve the uploads over HTTP; the store
// is a local directory behind faults.Faulty with the run's first-byte
// latency, and listings pay that latency once per page of 1,000 keys, as
// S3's ListObjectsV2 does.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// DiscoveryConfig sets the discovery workload.
type DiscoveryConfig struct {
	Uploads         int           // uploads under the discovery root
	Latency         time.Duration // per backend request (and per listing page)
	OpenConcurrency int           // catalog.Config.OpenConcurrency (0 = its default)
	TempDir         string
	Progress        io.Writer
}

// listPageKeys is S3's ListObjectsV2 page size.
const listPageKeys = 1000

// pagedList charges a listing the latency of every page after the first
// (faults.Faulty charges the first).
type pagedList struct {
	backend.Store
	latency time.Duration
}

func (p pagedList) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	n := 0
	return p.Store.List(ctx, bucket, prefix, func(oi backend.ObjectInfo) error {
		n++
		if n > listPageKeys && n%listPageKeys == 1 {
			select {
			case <-time.After(p.latency):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return fn(oi)
	})
}

// DiscoveryResult is what one start measured.
type DiscoveryResult struct {
	ListBuckets  time.Duration // start until the first ListBuckets answer (every bucket listed)
	FirstGet     time.Duration // start until a GET of the first bucket's file is answered
	LastGet      time.Duration // start until a GET of the last bucket's file is answered
	AllOpen      time.Duration // start until every archive is open (/readyz)
	Buckets      int
	ManifestGETs int64
	Heads        int64
	Lists        int64
}

// Discovery packs cfg.Uploads uploads, then starts wharf over them twice
// (cold, then with a persistent index cache filled by the first start) and
// reports each start.
func Discovery(ctx context.Context, cfg DiscoveryConfig, rep *Report) error {
	if cfg.Uploads < 1 || cfg.Latency < 0 || cfg.OpenConcurrency < 0 {
		return fmt.Errorf("bench --discovery: %d uploads at %v per request, open concurrency %d: want at least one upload, a latency and a concurrency not negative",
			cfg.Uploads, cfg.Latency, cfg.OpenConcurrency)
	}
	logf := func(format string, args ...any) { progressf(cfg.Progress, "bench: ", format, args...) }
	dir, err := os.MkdirTemp(cfg.TempDir, "wharf-bench-discovery-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf("discovery: packing %d uploads", cfg.Uploads)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range cfg.Uploads {
		id := fmt.Sprintf("20260101-%08x", i)
		files := map[string][]byte{"run/summary.txt": fmt.Appendf(nil, "upload %d\n", i)}
		if _, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, base),
			cargopack.Options{Bucket: "lab", Prefix: "nightly", UploadID: id, Created: base.Add(time.Duration(i) * time.Minute), FrameSize: 4 << 10}); err != nil {
			return err
		}
	}
	cacheDir := filepath.Join(dir, "index-cache")
	if err := os.Mkdir(cacheDir, 0o700); err != nil {
		return err
	}
	variant := fmt.Sprintf("%d uploads, %s per request", cfg.Uploads, cfg.Latency)
	for _, start := range []string{"cold", "index cache"} {
		logf("discovery: start (%s)", start)
		res, err := discoveryStart(ctx, dir, cacheDir, cfg)
		if err != nil {
			return fmt.Errorf("discovery (%s): %w", start, err)
		}
		for _, m := range []struct {
			metric string
			d      time.Duration
		}{{"first ListBuckets answered", res.ListBuckets}, {"first bucket's GET answered", res.FirstGet},
			{"last bucket's GET answered", res.LastGet}, {"every archive open", res.AllOpen}} {
			rep.add(Row{Workload: "7 discovery at start", System: "wharf " + start, Variant: variant, Metric: m.metric, Value: m.d.Seconds(), Unit: "s"})
		}
		rep.add(Row{Workload: "7 discovery at start", System: "wharf " + start, Variant: variant, Metric: "manifest GETs", Value: float64(res.ManifestGETs), Unit: "requests"})
		rep.add(Row{Workload: "7 discovery at start", System: "wharf " + start, Variant: variant, Metric: "HEADs", Value: float64(res.Heads), Unit: "requests"})
		rep.add(Row{Workload: "7 discovery at start", System: "wharf " + start, Variant: variant, Metric: "listing calls", Value: float64(res.Lists), Unit: "requests"})
		if res.Buckets != cfg.Uploads {
			return fmt.Errorf("discovery (%s): %d buckets listed, want %d", start, res.Buckets, cfg.Uploads)
		}
		if start == "cold" {
			rep.target(fmt.Sprintf("discovery of %d uploads at %s: first request answered", cfg.Uploads, cfg.Latency),
				fmt.Sprintf("%.2f s", res.ListBuckets.Seconds()), "< 2 s", res.ListBuckets < 2*time.Second)
			rep.target(fmt.Sprintf("discovery of %d uploads at %s: every archive open", cfg.Uploads, cfg.Latency),
				fmt.Sprintf("%.2f s", res.AllOpen.Seconds()), "< 10 s", res.AllOpen < 10*time.Second)
		} else if res.ManifestGETs != 0 {
			return fmt.Errorf("discovery from the index cache read %d manifests, want none", res.ManifestGETs)
		}
	}
	return nil
}

// discoveryStart starts a manager and an S3 endpoint over dir and times
// the first answers.
func discoveryStart(ctx context.Context, dir, cacheDir string, cfg DiscoveryConfig) (DiscoveryResult, error) {
	var res DiscoveryResult
	faulty := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: cfg.Latency})
	store := pagedList{Store: faulty, latency: cfg.Latency}
	cm := catalog.NewManager(catalog.Config{
		Store: store, Discover: []string{"s3://lab/nightly"}, OpenConcurrency: cfg.OpenConcurrency,
		OpenWait: 5 * time.Minute, Logger: zerolog.Nop(),
		// As serve runs over S3: every open lists its upload prefix once for
		// the storage classes.
		Options: archiveview.Options{IndexCache: archiveview.DirIndexCache{Dir: cacheDir}, StorageClasses: true},
	})
	defer cm.CloseAll()
	verifier, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		return res, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: s3api.New(s3api.Config{Catalog: cm.Catalog(), Verifier: verifier, Logger: zerolog.Nop()}),
		ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()
	get := func(path string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("GET %s: %s %s", path, resp.Status, b)
		}
		return string(b), err
	}

	start := time.Now()
	if err := cm.Scan(ctx, true); err != nil {
		return res, err
	}
	list, err := get("/")
	if err != nil {
		return res, err
	}
	res.ListBuckets = time.Since(start)
	res.Buckets = strings.Count(list, "<Bucket>")
	names := cm.Catalog().BucketNames()
	if len(names) == 0 {
		return res, fmt.Errorf("no bucket served")
	}
	if _, err := get("/" + names[0] + "/run/summary.txt"); err != nil {
		return res, err
	}
	res.FirstGet = time.Since(start)
	if _, err := get("/" + names[len(names)-1] + "/run/summary.txt"); err != nil {
		return res, err
	}
	res.LastGet = time.Since(start)
	for !cm.Ready() {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	res.AllOpen = time.Since(start)
	for _, e := range cm.Catalog().Entries() {
		if _, err, _ := e.State(); err != nil {
			return res, err
		}
	}
	res.ManifestGETs = faulty.Requests("get")
	res.Heads = faulty.Requests("stat")
	res.Lists = faulty.Requests("list")
	return res, nil
}
