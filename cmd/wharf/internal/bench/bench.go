package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// Config sets what Run measures. DefaultConfig gives the settings.
type Config struct {
	Latency     time.Duration         // per backend request, before the first byte
	Bandwidth   int64                 // per backend stream, bytes/s; 0 = unlimited
	Concurrency []int                 // client concurrencies for the walk
	Files       int                   // files in the walk tree (0 skips workloads 1, 2 and 6)
	MaxFileSize int                   // each walk file is 0..MaxFileSize bytes
	FrameSizes  []int64               // frame sizes the walk archive is written with
	LargeSize   int64                 // bytes of the large-file workloads (0 skips them)
	ListKeys    int                   // keys of the listing-at-scale workload (0 skips it)
	RandomReads int                   // files of the cold random-read workload
	WarmFor     time.Duration         // duration of each warm-cache measurement
	CacheBytes  int64                 // decoded-frame cache budget
	ReadOptions []chunkio.CacheOption // read planner and memory budget (serve's flags)
	ReadMemory  int64                 // the memory budget those options give (for the RSS target)
	// Archive holds serve's per-archive read options (--max-frame-bytes,
	// --trust-unframed, --allow-key-prefix) for the archives the
	// workloads serve; Name, Cache, Metrics and Readahead are set per
	// workload.
	Archive   archiveview.Options
	ColdFiles int // files of the cold 16 MiB-frame workload (0 skips it)
	// ShapeSize is the file of the analytic request-shapes workload
	// (shapes.go; 0 skips it), packed in ShapeFrame-byte frames.
	ShapeSize  int64
	ShapeFrame int64
	// Models are the ways wharf reaches the S3 model, each run in full and
	// reported side by side: ModelHTTP (backend.S3Store over loopback HTTP,
	// the served path) and ModelInProcess (the store called in-process).
	// Empty = ModelHTTP alone.
	Models []string
	Model  string // the one being run (set by Run per model)
	// Fleet is the fleet workload (fleet.go); Fleet.Replicas 0 skips it.
	Fleet   FleetConfig
	Seed    uint64
	TempDir string // "" = os.TempDir()
	Command string // the command line, for the header
	// Progress, when set, receives one line per step.
	Progress io.Writer
}

// DefaultConfig is the configuration "wharf bench" runs without flags.
func DefaultConfig() Config {
	return Config{
		Latency:     20 * time.Millisecond,
		Bandwidth:   100e6,
		ColdFiles:   48,
		ShapeSize:   64 << 20,
		ShapeFrame:  4 << 20,
		Concurrency: []int{1, 8, 32},
		Files:       2000,
		MaxFileSize: 64 << 10,
		FrameSizes:  []int64{4 << 20, 16 << 20},
		LargeSize:   512 << 20,
		ListKeys:    1_000_000,
		RandomReads: 200,
		WarmFor:     2 * time.Second,
		CacheBytes:  512 << 20,
		Models:      []string{ModelHTTP},
		Fleet:       DefaultFleetConfig(),
		Seed:        1,
	}
}

func (c Config) logf(format string, args ...any) { progressf(c.Progress, "bench: ", format, args...) }

// progressf writes one progress line, prefix first, to w (nil: nowhere).
func progressf(w io.Writer, prefix, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, prefix+format+"\n", args...)
	}
}

// minLargeSize is the smallest LargeSize the large-file workloads can
// run: the first-read workload reads two 1 MiB ranges from the middle of a
// file of half of it.
const minLargeSize = 8 << 20

// validate refuses, before any work, a configuration a workload would
// fail on late, panic on, or measure nothing with.
func (c Config) validate() error {
	switch {
	case c.Latency < 0 || c.Bandwidth < 0 || c.Files < 0 || c.ColdFiles < 0 || c.ListKeys < 0 || c.LargeSize < 0:
		return errors.New("bench: sizes, counts and durations must not be negative")
	case c.CacheBytes <= 0:
		return fmt.Errorf("bench: frame cache budget %d: want a positive size", c.CacheBytes)
	case c.ShapeSize != 0 && (c.ShapeSize < minShapeSize || c.ShapeFrame < 64<<10 || c.ShapeFrame > c.ShapeSize):
		return fmt.Errorf("bench: analytic shapes: file %d bytes in %d-byte frames: want 0 (skip) or a file of at least %d MiB and frames of 64 KiB up to the file's size", c.ShapeSize, c.ShapeFrame, minShapeSize>>20)
	case c.LargeSize > 0 && c.LargeSize < minLargeSize:
		return fmt.Errorf("bench: --large-size %d: want 0 (skip the large-file workloads) or at least %d MiB", c.LargeSize, minLargeSize>>20)
	}
	seen := map[string]bool{}
	for _, m := range c.Models {
		if m != ModelHTTP && m != ModelInProcess {
			return fmt.Errorf("bench: S3 model %q: want %q or %q", m, ModelHTTP, ModelInProcess)
		}
		if seen[m] {
			return fmt.Errorf("bench: S3 model %q named twice", m)
		}
		seen[m] = true
	}
	if err := c.Fleet.validate(); err != nil {
		return err
	}
	if c.Files == 0 {
		return nil
	}
	if len(c.FrameSizes) == 0 || len(c.Concurrency) == 0 {
		return errors.New("bench: the tree walk needs at least one frame size and one client concurrency")
	}
	for _, fs := range c.FrameSizes {
		if fs <= 0 {
			return fmt.Errorf("bench: walk frame size %d: want a positive size", fs)
		}
	}
	for _, n := range c.Concurrency {
		if n < 1 {
			return fmt.Errorf("bench: walk concurrency %d: want at least 1", n)
		}
	}
	if c.RandomReads < 1 {
		return fmt.Errorf("bench: the cold random-read workload needs at least one file")
	}
	if c.WarmFor <= 0 {
		return fmt.Errorf("bench: warm-cache measurement time %v: want a positive duration", c.WarmFor)
	}
	return nil
}

// Run measures every workload and returns the report. It refuses a
// configuration it cannot run before doing any work.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rep := &Report{}
	rep.Header = header(cfg)
	models := cfg.Models
	if len(models) == 0 {
		models = []string{ModelHTTP}
	}
	start := time.Now()
	for i, m := range models {
		rep.model, rep.primary = "", i == 0
		if len(models) > 1 {
			rep.model = m
		}
		cfg.Model = m
		cfg.logf("S3 model: %s", modelLine(m))
		if err := runModel(ctx, cfg, rep); err != nil {
			return rep, err
		}
	}
	rep.Header = append(rep.Header, fmt.Sprintf("total bench time: %.1f s", time.Since(start).Seconds()))
	return rep, nil
}

// modelLines describes each of models (empty: the default).
func modelLines(models []string) []string {
	if len(models) == 0 {
		models = []string{ModelHTTP}
	}
	var out []string
	for _, m := range models {
		out = append(out, modelLine(m))
	}
	return out
}

// modelLine describes how wharf reaches the S3 model m.
func modelLine(m string) string {
	if m == ModelInProcess {
		return "inprocess: wharf calls the S3 model's store (faults.Faulty over a local directory) in-process: no SDK, no HTTP"
	}
	return "http: wharf reads through backend.S3Store (aws-sdk-go-v2, serve's HTTP client) from the S3 model served on loopback HTTP"
}

// runModel runs every configured workload once, with wharf reaching the
// S3 model as cfg.Model says, adding its rows to rep.
func runModel(ctx context.Context, cfg Config, rep *Report) error {
	e, err := newEnv(cfg)
	if err != nil {
		return err
	}
	defer e.close()
	if cfg.Files > 0 {
		if err := walkAndRandom(ctx, cfg, e, rep); err != nil {
			return err
		}
	}
	if cfg.ColdFiles > 0 {
		if err := coldFrames(ctx, cfg, e, rep); err != nil {
			return err
		}
	}
	if cfg.ShapeSize > 0 {
		if err := analyticShapesWorkload(ctx, cfg, e, rep); err != nil {
			return err
		}
	}
	if cfg.LargeSize > 0 {
		if err := firstRead(ctx, cfg, e, rep); err != nil {
			return err
		}
		if err := largeFile(ctx, cfg, e, rep); err != nil {
			return err
		}
		if err := cpuPerGB(ctx, cfg, e, rep); err != nil {
			return err
		}
	}
	if cfg.ListKeys > 0 {
		if err := listingAtScale(ctx, cfg, e, rep); err != nil {
			return err
		}
	}
	if cfg.Fleet.Replicas > 0 {
		if err := fleetWorkload(ctx, cfg, e, rep); err != nil {
			return err
		}
	}
	return nil
}

func header(cfg Config) []string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.IndexByte(l, ':'); i >= 0 {
					cpu = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	bw := "unlimited"
	if cfg.Bandwidth > 0 {
		bw = fmt.Sprintf("%d MB/s per stream", cfg.Bandwidth/1e6)
	}
	return []string{
		"command: `" + cfg.Command + "`",
		fmt.Sprintf("date: %s", time.Now().UTC().Format(time.RFC3339)),
		fmt.Sprintf("machine: %s/%s, %d CPUs (%s), %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpu, runtime.Version()),
		fmt.Sprintf("S3 model: local directory behind faults.Faulty, %v first-byte latency per request, bandwidth %s; plain objects (the baselines) read by the SDK over loopback HTTP from it", cfg.Latency, bw),
		"wharf: in-process s3api handler on a loopback listener, anonymous; clients: aws-sdk-go-v2",
		"wharf's backend: " + strings.Join(modelLines(cfg.Models), "; and "),
		fmt.Sprintf("frame cache budget: %d MiB", cfg.CacheBytes>>20),
		checkLine(cfg.Archive),
	}
}

// checkLine says how the served archives check ranged reads of the shapes
// whose checksums cover more than the range.
func checkLine(o archiveview.Options) string {
	mf := "64 MiB (default)"
	if o.MaxFrameBytes > 0 {
		mf = fmt.Sprintf("%d MiB", o.MaxFrameBytes>>20)
	}
	if o.TrustUnframed {
		return "ranged reads of giant frames (over " + mf + "), plain tar, direct objects and unframed zstd: trusted (--trust-unframed), not checked whole first"
	}
	return "ranged reads of giant frames (over " + mf + "), plain tar, direct objects and unframed zstd: each checked whole on its first ranged read (the default)"
}

// ---------------------------------------------------------------------------
// Workloads 1, 2 and 6: tree walk, cold random reads, warm cache.

func walkAndRandom(ctx context.Context, cfg Config, e *env, rep *Report) error {
	cfg.logf("generating %d-file tree", cfg.Files)
	tr := makeTree(cfg.Files, cfg.MaxFileSize, cfg.Seed)
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	if err := tr.writePerObject(e.dir, benchBucket, "perobject"); err != nil {
		return err
	}
	type packed struct {
		frame int64
		res   *cargopack.Result
	}
	var archives []packed
	for i, fs := range cfg.FrameSizes {
		res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), tr.files(mtime), cargopack.Options{
			Bucket: benchBucket, Prefix: "walk", UploadID: fmt.Sprintf("walk-%d", i),
			FrameSize: fs, ChunkSize: 64 << 20, ShardCount: 4, ContentHash: true, Created: mtime,
		})
		if err != nil {
			return fmt.Errorf("pack walk tree: %w", err)
		}
		archives = append(archives, packed{fs, res})
		cfg.logf("packed walk archive: frames %d MiB, %d chunks, %d frames, %.1f MB compressed",
			fs>>20, len(res.Manifest.Chunks), res.Frames, float64(res.CompressedBytes)/1e6)
	}
	wl := "1. Tree walk (ListObjectsV2 + GET every object)"
	rep.add(Row{Workload: wl, System: "source", Variant: fmt.Sprintf("%d files", cfg.Files), Metric: "raw bytes", Value: float64(tr.bytes) / 1e6, Unit: "MB"})
	perObject := map[int]float64{}
	floor := map[int]float64{}
	for _, c := range cfg.Concurrency {
		for _, sys := range []struct {
			name  string
			store *faults.Faulty
			out   map[int]float64
		}{{"per-object", e.faulty, perObject}, {"zero-latency floor", e.nolat, floor}} {
			e.plain.use(sys.store)
			sys.store.Reset()
			secs, err := perObjectWalk(ctx, e, tr, c)
			if err != nil {
				return err
			}
			gets := getsOf(sys.store)
			sys.out[c] = secs
			variant := "plain objects"
			if sys.store == e.nolat {
				variant = "plain objects, no latency, no bandwidth limit"
			}
			rep.add(Row{Workload: wl, System: sys.name, Variant: variant, Concurrency: c, Metric: "wall", Value: secs, Unit: "s"})
			rep.add(Row{Workload: wl, System: sys.name, Variant: variant, Concurrency: c, Metric: "backend GETs", Value: float64(gets)})
			rep.add(Row{Workload: wl, System: sys.name, Variant: variant, Concurrency: c, Metric: "backend MB", Value: float64(sys.store.BytesReturned()) / 1e6})
			if sys.store == e.faulty {
				rep.walk(WalkPoint{System: "per-object", Concurrency: c, Seconds: secs, GETs: gets})
			}
			cfg.logf("%s walk, %d clients: %.2f s, %d GETs", sys.name, c, secs, gets)
		}
	}
	e.plain.use(e.faulty)
	for ai, ar := range archives {
		variant := fmt.Sprintf("frames %d MiB", ar.frame>>20)
		plain := 0
		for _, ch := range ar.res.Manifest.Chunks {
			if len(ch.Frames) == 0 {
				plain++
			}
		}
		for _, c := range cfg.Concurrency {
			e.faulty.Reset()
			if _, err := e.serveArchive(ctx, ar.res.ManifestKey, cfg.CacheBytes, 0); err != nil {
				return err
			}
			manifestGETs := getsOf(e.faulty)
			t0 := time.Now()
			if err := wharfWalk(ctx, e, tr, c); err != nil {
				return fmt.Errorf("wharf walk (%s, %d clients): %w", variant, c, err)
			}
			secs := time.Since(t0).Seconds()
			gets := getsOf(e.faulty)
			bytesRatio := float64(e.faulty.BytesReturned()) / float64(ar.res.CompressedBytes)
			speedup := perObject[c] / secs
			rep.add(Row{Workload: wl, System: "wharf", Variant: variant, Concurrency: c, Metric: "wall", Value: secs, Unit: "s"})
			rep.add(Row{Workload: wl, System: "wharf", Variant: variant, Concurrency: c, Metric: "backend GETs", Value: float64(gets)})
			rep.add(Row{Workload: wl, System: "wharf", Variant: variant, Concurrency: c, Metric: "backend MB", Value: float64(e.faulty.BytesReturned()) / 1e6})
			rep.add(Row{Workload: wl, System: "wharf", Variant: variant, Concurrency: c, Metric: "frames + plain objects + manifest", Value: float64(ar.res.Frames + plain + 1)})
			rep.add(Row{Workload: wl, System: "wharf", Variant: variant, Concurrency: c, Metric: "backend bytes / compressed", Value: bytesRatio})
			rep.add(Row{Workload: wl, System: "wharf", Variant: variant, Concurrency: c, Metric: "speedup vs per-object", Value: speedup, Unit: "x"})
			if ai == 0 {
				rep.walk(WalkPoint{System: "wharf", Concurrency: c, Seconds: secs, GETs: gets})
			}
			cfg.logf("wharf walk %s, %d clients: %.2f s, %d GETs (%d manifest), bytes ratio %.3f, %.1fx per-object",
				variant, c, secs, gets, manifestGETs, bytesRatio, speedup)
			if c == 8 && ai == 0 {
				rep.target(fmt.Sprintf("tree walk at 8 clients vs per-object at %v (%s)", cfg.Latency, variant), fmt.Sprintf("%.1fx faster", speedup), ">= 10x faster (issue 24)", speedup >= 10)
				f := secs / floor[c]
				rep.add(Row{Workload: wl, System: "wharf", Variant: variant, Concurrency: c, Metric: "time / zero-latency floor", Value: f, Unit: "x"})
				rep.target("tree walk at 8 clients vs the zero-latency floor ("+variant+")", fmt.Sprintf("%.2fx", f), "<= 2x", f <= 2)
			}
			bound := int64(ar.res.Frames + plain + 1)
			rep.target(fmt.Sprintf("walk GETs, %s, %d clients", variant, c), fmt.Sprintf("%d", gets), fmt.Sprintf("<= %d (frames + plain + manifest)", bound), gets <= bound)
			rep.target(fmt.Sprintf("walk bytes / compressed, %s, %d clients", variant, c), fmt.Sprintf("%.3f", bytesRatio), "<= 1.05", bytesRatio <= 1.05)
		}
	}

	// Workload 2: cold random single-file reads, one fresh cache per file.
	ar := archives[0]
	m := ar.res.Manifest
	rng := rand.New(rand.NewPCG(cfg.Seed, 99))
	wl2 := "2. Cold random single-file reads"
	var totGets, totBytes, totCover int64
	worstGets := int64(0)
	over := 0
	n := min(cfg.RandomReads, len(tr.rels)) // >= 1: Config.validate
	for i := 0; i < n; i++ {
		rel := tr.rels[rng.IntN(len(tr.rels))]
		cover, err := coveringBytes(m, rel, int64(len(tr.data[rel])))
		if err != nil {
			return err
		}
		if _, err := e.serveArchive(ctx, ar.res.ManifestKey, cfg.CacheBytes, -1); err != nil {
			return err
		}
		e.faulty.Reset()
		if err := getAndCheck(ctx, e, rel, tr.data[rel]); err != nil {
			return err
		}
		gets := getsOf(e.faulty)
		b := e.faulty.BytesReturned()
		totGets += gets
		totBytes += b
		totCover += cover
		worstGets = max(worstGets, gets)
		if b > cover || gets > 1 {
			over++
		}
	}
	rep.add(Row{Workload: wl2, System: "wharf", Variant: fmt.Sprintf("frames %d MiB", ar.frame>>20), Concurrency: 1, Metric: "files", Value: float64(n)})
	rep.add(Row{Workload: wl2, System: "wharf", Variant: fmt.Sprintf("frames %d MiB", ar.frame>>20), Concurrency: 1, Metric: "GETs per file", Value: float64(totGets) / float64(n)})
	rep.add(Row{Workload: wl2, System: "wharf", Variant: fmt.Sprintf("frames %d MiB", ar.frame>>20), Concurrency: 1, Metric: "worst GETs for one file", Value: float64(worstGets)})
	rep.add(Row{Workload: wl2, System: "wharf", Variant: fmt.Sprintf("frames %d MiB", ar.frame>>20), Concurrency: 1, Metric: "backend KB per file", Value: float64(totBytes) / float64(n) / 1e3})
	rep.add(Row{Workload: wl2, System: "wharf", Variant: fmt.Sprintf("frames %d MiB", ar.frame>>20), Concurrency: 1, Metric: "covering frames KB per file", Value: float64(totCover) / float64(n) / 1e3})
	rep.target("cold random read: GETs per file", fmt.Sprintf("%.2f avg, %d worst", float64(totGets)/float64(n), worstGets), "1", worstGets <= 1)
	rep.target("cold random read: bytes never above covering frames", fmt.Sprintf("%d of %d files above", over, n), "0", over == 0)
	cfg.logf("cold random reads: %.2f GETs/file, %.0f KB/file vs %.0f KB covering", float64(totGets)/float64(n), float64(totBytes)/float64(n)/1e3, float64(totCover)/float64(n)/1e3)

	// Workload 6: warm cache request rates (the whole archive cached by a walk).
	if _, err := e.serveArchive(ctx, ar.res.ManifestKey, cfg.CacheBytes, 0); err != nil {
		return err
	}
	if err := wharfWalk(ctx, e, tr, 8); err != nil {
		return err
	}
	wl6 := "6. Warm cache request rate (32 clients, loopback)"
	for _, op := range []string{"HeadObject", "GetObject 4 KiB"} {
		rps, err := warmRate(ctx, e, tr, op, 32, cfg.WarmFor)
		if err != nil {
			return err
		}
		rep.add(Row{Workload: wl6, System: "wharf", Variant: op, Concurrency: 32, Metric: "requests/s", Value: rps})
		cfg.logf("warm %s: %.0f req/s", op, rps)
	}
	return nil
}

// coveringBytes is the compressed size of the frames (or plain range) that
// hold rel's bytes in manifest m.
func coveringBytes(m *manifest.Manifest, rel string, size int64) (int64, error) {
	for _, f := range m.Files {
		if !strings.HasSuffix(f.Path, "/"+rel) {
			continue
		}
		for _, c := range m.Chunks {
			if c.S3Key != f.S3Key {
				continue
			}
			if len(c.Frames) == 0 || f.ArchiveOffset == nil {
				return size, nil
			}
			u0 := *f.ArchiveOffset
			u1 := u0 + size
			var n int64
			for _, fr := range c.Frames {
				if fr.UncompressedOffset < u1 && fr.UncompressedOffset+fr.UncompressedSize > u0 || (size == 0 && fr.UncompressedOffset <= u0 && u0 < fr.UncompressedOffset+fr.UncompressedSize) {
					n += fr.CompressedSize
				}
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("bench: %s not in manifest", rel)
}

// perObjectWalk lists the plain objects (in-process: the baseline's
// listing is not what is measured) and GETs each through the plain-object
// endpoint with conc SDK clients, comparing every body with the source.
func perObjectWalk(ctx context.Context, e *env, tr *tree, conc int) (float64, error) {
	t0 := time.Now()
	var keys []string
	err := e.store.List(ctx, benchBucket, "perobject/", func(oi backend.ObjectInfo) error {
		keys = append(keys, oi.Key)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(keys) != len(tr.rels) {
		return 0, fmt.Errorf("per-object listing: %d keys, want %d", len(keys), len(tr.rels))
	}
	err = parallel(ctx, len(keys), conc, func(i int) error {
		return getAndCheckFrom(ctx, e.plainClient, benchBucket, keys[i], tr.data[strings.TrimPrefix(keys[i], "perobject/")])
	})
	return time.Since(t0).Seconds(), err
}

// wharfWalk lists the bucket through wharf with ListObjectsV2 pagination and
// GETs every object with conc clients, comparing each body with the source.
func wharfWalk(ctx context.Context, e *env, tr *tree, conc int) error {
	var keys []string
	p := s3.NewListObjectsV2Paginator(e.client, &s3.ListObjectsV2Input{Bucket: aws.String("wharf")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if len(keys) != len(tr.rels) {
		return fmt.Errorf("listing returned %d keys, want %d", len(keys), len(tr.rels))
	}
	return parallel(ctx, len(keys), conc, func(i int) error {
		return getAndCheck(ctx, e, keys[i], tr.data[keys[i]])
	})
}

func getAndCheck(ctx context.Context, e *env, key string, want []byte) error {
	return getAndCheckFrom(ctx, e.client, "wharf", key, want)
}

func getAndCheckFrom(ctx context.Context, c *s3.Client, bucket, key string, want []byte) error {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if !bytes.Equal(b, want) {
		return fmt.Errorf("get %s: served bytes differ from the source (%d vs %d bytes)", key, len(b), len(want))
	}
	return nil
}

func warmRate(ctx context.Context, e *env, tr *tree, op string, conc int, d time.Duration) (float64, error) {
	var nonEmpty []string
	for _, r := range tr.rels {
		if len(tr.data[r]) >= 4096 {
			nonEmpty = append(nonEmpty, r)
		}
	}
	if len(nonEmpty) == 0 {
		return 0, errors.New("warm: no file of 4 KiB or more")
	}
	var count atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	errc := make(chan error, conc)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for time.Now().Before(deadline) {
				key := nonEmpty[rng.IntN(len(nonEmpty))]
				if op == "HeadObject" {
					if _, err := e.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("wharf"), Key: aws.String(key)}); err != nil {
						errc <- err
						return
					}
				} else {
					out, err := e.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("wharf"), Key: aws.String(key), Range: aws.String("bytes=0-4095")})
					if err != nil {
						errc <- err
						return
					}
					b, err := io.ReadAll(out.Body)
					out.Body.Close()
					if err != nil || !bytes.Equal(b, tr.data[key][:4096]) {
						errc <- fmt.Errorf("warm get %s: wrong bytes (%v)", key, err)
						return
					}
				}
				count.Add(1)
			}
		}(w)
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(count.Load()) / d.Seconds(), nil
}

// parallel runs fn(0..n-1) on conc workers and returns the first error.
func parallel(ctx context.Context, n, conc int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// ---------------------------------------------------------------------------
// Workloads 3 and 4: a large file, sub-framed and as one frame, against the
// same file stored as one plain object.

// largeFile measures, per content (mixed text and binary at zstd ~0.6, and
// log-like text), one GET of the file through wharf, the SDK downloader
// through wharf, and the SDK downloader reading the raw file stored as one
// plain object (the per-object baseline), all in this run; then the same
// log file as one giant frame.
func largeFile(ctx context.Context, cfg Config, e *env, rep *Report) error {
	size := cfg.LargeSize
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for ci, ct := range contents {
		seed := cfg.Seed + 1000 + uint64(ci)
		rawKey := fmt.Sprintf("raw/large-%d.bin", ci)
		want, err := writeRaw(e, rawKey, ct.open(seed, size))
		if err != nil {
			return err
		}
		cfg.logf("packing %d MiB file (%s), 4 MiB sub-frames", size>>20, ct.name)
		res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), []cargopack.File{{
			Rel: "large/data.bin", Size: size, ModTime: mtime, Mode: 0o644,
			Open: func() (io.ReadCloser, error) { return ct.open(seed, size), nil },
		}}, cargopack.Options{
			Bucket: benchBucket, Prefix: "large", UploadID: fmt.Sprintf("large-%d", ci),
			FrameSize: 4 << 20, ChunkSize: size + (1 << 20), ShardCount: 1,
		})
		if err != nil {
			return fmt.Errorf("pack large file: %w", err)
		}
		wl := fmt.Sprintf("3%c. Large file (%d MiB, %s, 4 MiB sub-frames)", 'a'+ci, size>>20, ct.name)
		ratio := float64(res.CompressedBytes) / float64(size)
		rep.add(Row{Workload: wl, System: "source", Variant: "zstd level 3", Metric: "compressed / raw", Value: ratio})
		limit, err := decodeLimit(e, res)
		if err != nil {
			return err
		}
		rep.add(Row{Workload: wl, System: "zstd decode", Variant: "in-process, 1 goroutine", Concurrency: 1, Metric: "throughput", Value: limit, Unit: "MB/s"})

		type run struct {
			name, system string
			conc         int
			do           func() (uint32, error)
			wharf        bool
		}
		runs := []run{
			{"one GET", "wharf", 1, func() (uint32, error) { return getCRC(ctx, e.client, "wharf", "large/data.bin") }, true},
			{sdkDownloader, "wharf", sdkConcurrency, func() (uint32, error) {
				return downloadCRC(ctx, e, e.client, "wharf", "large/data.bin", size)
			}, true},
			{sdkDownloader, "per-object", sdkConcurrency, func() (uint32, error) {
				return downloadCRC(ctx, e, e.plainClient, benchBucket, rawKey, size)
			}, false},
		}
		// Each run three times, interleaved, so that a passing load on
		// the machine does not favour one side; the median counts.
		const rounds = 3
		all := map[string][]float64{}
		peak, idle := map[string]int64{}, map[string]int64{}
		var gets, mb = map[string]int64{}, map[string]float64{}
		conns := map[string]int64{} // wharf's new connections to the HTTP S3 model, last round
		for round := 0; round < rounds; round++ {
			for _, r := range runs {
				if r.wharf {
					if _, err := e.serveArchive(ctx, res.ManifestKey, cfg.CacheBytes, 0); err != nil {
						return err
					}
				}
				e.plain.use(e.faulty)
				e.faulty.Reset()
				conns0, _ := e.backendConns()
				// What earlier steps freed is not counted here: two
				// collections empty the buffer pools (sync.Pool keeps a
				// victim generation through one), then the heap is
				// returned to the OS.
				runtime.GC()
				debug.FreeOSMemory()
				before := procStatus("VmRSS")
				stop := sampleRSS()
				t0 := time.Now()
				got, err := r.do()
				d := time.Since(t0).Seconds()
				rss := stop()
				if err != nil {
					return err
				}
				if got != want {
					return fmt.Errorf("large file (%s, %s %s): bytes differ from the source", ct.name, r.system, r.name)
				}
				k := r.system + "/" + r.name
				all[k] = append(all[k], d)
				if rss-before > peak[k]-idle[k] {
					peak[k], idle[k] = rss, before
				}
				gets[k] = getsOf(e.faulty)
				mb[k] = float64(e.faulty.BytesReturned()) / 1e6
				if c, ok := e.backendConns(); ok && r.wharf {
					conns[k] = c - conns0
				}
			}
		}
		secs := map[string]float64{}
		for _, r := range runs {
			k := r.system + "/" + r.name
			d := medianOf(all[k])
			secs[k] = d
			v := r.name
			rep.add(Row{Workload: wl, System: r.system, Variant: v, Concurrency: r.conc, Metric: "wall (median of 3)", Value: d, Unit: "s"})
			rep.add(Row{Workload: wl, System: r.system, Variant: v, Concurrency: r.conc, Metric: "throughput", Value: float64(size) / 1e6 / d, Unit: "MB/s"})
			rep.add(Row{Workload: wl, System: r.system, Variant: v, Concurrency: r.conc, Metric: "backend GETs", Value: float64(gets[k])})
			rep.add(Row{Workload: wl, System: r.system, Variant: v, Concurrency: r.conc, Metric: "backend MB", Value: mb[k]})
			if c, ok := conns[k]; ok {
				rep.add(Row{Workload: wl, System: r.system, Variant: v, Concurrency: r.conc, Metric: "backend connections opened (last round)", Value: float64(c)})
			}
			rep.add(Row{Workload: wl, System: r.system, Variant: v, Concurrency: r.conc, Metric: "peak RSS", Value: float64(peak[k]) / (1 << 20), Unit: "MiB"})
			rep.add(Row{Workload: wl, System: r.system, Variant: v, Concurrency: r.conc, Metric: "RSS before the run", Value: float64(idle[k]) / (1 << 20), Unit: "MiB"})
			cfg.logf("%s: %s %s: %.2f s median of %v (%.0f MB/s), %d backend GETs, peak RSS %d MiB", ct.name, r.system, r.name, d, fmtSecs(all[k]),
				float64(size)/1e6/d, gets[k], peak[k]>>20)
			if r.wharf {
				// The bench process also holds the clients, the S3 model
				// and the report, which a wharf server does not: the
				// target is what the run added to the idle process (its
				// RSS after a collection, just before the run).
				bound, grew := cfg.ReadMemory+100<<20, peak[k]-idle[k]
				rep.target(fmt.Sprintf("RSS added by the large-file %s through wharf (%s)", r.name, ct.name),
					fmt.Sprintf("%d MiB (peak %d MiB, %d MiB before)", grew>>20, peak[k]>>20, idle[k]>>20),
					fmt.Sprintf("<= read memory %d MiB + 100 MiB", cfg.ReadMemory>>20), grew <= bound)
			}
		}
		base := secs["per-object/"+sdkDownloader]
		for _, name := range []string{"one GET", sdkDownloader} {
			r := secs["wharf/"+name] / base
			rep.add(Row{Workload: wl, System: "wharf", Variant: name, Metric: "time / per-object SDK downloader", Value: r, Unit: "x"})
			if ci == 0 {
				rep.target(fmt.Sprintf("large file, %s through wharf / SDK downloader of the plain object (%s)", name, ct.name),
					fmt.Sprintf("%.2fx", r), "<= 0.5x", r <= 0.5)
			}
		}
		os.RemoveAll(filepath.Join(e.dir, benchBucket, "large"))
		os.Remove(filepath.Join(e.dir, benchBucket, filepath.FromSlash(rawKey)))
	}
	return giantFrame(ctx, cfg, e, rep)
}

// giantFrame is workload 4: the log file as one zstd frame, streamed:
// one GET, and a sequential ranged download whose decode work must stay
// O(size).
func giantFrame(ctx context.Context, cfg Config, e *env, rep *Report) error {
	size := cfg.LargeSize
	seed := cfg.Seed + 1001
	sum := crc32.New(castagnoli)
	if _, err := io.Copy(sum, newGenReader(seed, size)); err != nil {
		return err
	}
	want := sum.Sum32()
	res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), []cargopack.File{{
		Rel: "large/data.bin", Size: size, ModTime: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), Mode: 0o644,
		Open: func() (io.ReadCloser, error) { return newGenReader(seed, size), nil },
	}}, cargopack.Options{
		Bucket: benchBucket, Prefix: "large", UploadID: "large-giant",
		FrameSize: 4 << 20, NoSubFrames: true, ChunkSize: size + (1 << 20), ShardCount: 1,
	})
	if err != nil {
		return fmt.Errorf("pack giant frame: %w", err)
	}
	wl := "4. Giant frame (the log file as one zstd frame)"
	limit, err := decodeLimit(e, res)
	if err != nil {
		return err
	}
	rep.add(Row{Workload: wl, System: "zstd decode", Variant: "in-process, 1 goroutine", Concurrency: 1, Metric: "throughput", Value: limit, Unit: "MB/s"})
	if _, err := e.serveArchive(ctx, res.ManifestKey, cfg.CacheBytes, 0); err != nil {
		return err
	}
	e.faulty.Reset()
	t0 := time.Now()
	got, err := getCRC(ctx, e.client, "wharf", "large/data.bin")
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	if got != want {
		return errors.New("giant frame: served bytes differ from the source")
	}
	rep.add(Row{Workload: wl, System: "wharf", Variant: "one GET", Concurrency: 1, Metric: "throughput", Value: float64(size) / 1e6 / secs, Unit: "MB/s"})
	rep.add(Row{Workload: wl, System: "wharf", Variant: "one GET", Concurrency: 1, Metric: "of decode limit", Value: 100 * float64(size) / 1e6 / secs / limit, Unit: "%"})
	rep.add(Row{Workload: wl, System: "wharf", Variant: "one GET", Concurrency: 1, Metric: "backend GETs", Value: float64(getsOf(e.faulty))})
	cfg.logf("giant frame one GET: %.0f MB/s (decode limit %.0f MB/s)", float64(size)/1e6/secs, limit)
	// A sequential ranged download (concurrency 1): each backend byte of
	// the giant frame is decoded once; a reader that restarted the frame
	// per range would fetch (and decode) about size/part/2 times the frame.
	if _, err := e.serveArchive(ctx, res.ManifestKey, cfg.CacheBytes, 0); err != nil {
		return err
	}
	e.faulty.Reset()
	t0 = time.Now()
	got, err = downloadCRCConc(ctx, e, e.client, "wharf", "large/data.bin", size, 1)
	if err != nil {
		return err
	}
	secs = time.Since(t0).Seconds()
	if got != want {
		return errors.New("giant frame ranged download: served bytes differ from the source")
	}
	ratio := float64(e.faulty.BytesReturned()) / float64(res.CompressedBytes)
	v := "SDK downloader, 8 MiB ranges, 1 at a time"
	rep.add(Row{Workload: wl, System: "wharf", Variant: v, Concurrency: 1, Metric: "throughput", Value: float64(size) / 1e6 / secs, Unit: "MB/s"})
	rep.add(Row{Workload: wl, System: "wharf", Variant: v, Concurrency: 1, Metric: "backend bytes / compressed", Value: ratio})
	// Each compressed byte is fetched once by the decode that serves the
	// ranges (parked decoders keep their place and the parts they fetched
	// ahead); by default the first ranged read also checks the frame
	// whole (one more pass), unless --trust-unframed.
	goal, what := 2.05, "O(size): <= 2.05 (the first-read check of the whole frame, then one decode pass)"
	if cfg.Archive.TrustUnframed || size <= (chunkio.Options{MaxFrameBytes: cfg.Archive.MaxFrameBytes}).MaxFrame() {
		goal, what = 1.05, "O(size): <= 1.05 (one pass)"
	}
	rep.target("giant frame, sequential ranged download: backend bytes / compressed", fmt.Sprintf("%.2f", ratio), what, ratio <= goal)
	os.RemoveAll(filepath.Join(e.dir, benchBucket, "large"))
	return nil
}

// medianOf is the median of v (the upper one of an even count); v is not
// changed.
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// fmtSecs formats run times for the log.
func fmtSecs(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, "/")
}

// writeRaw stores r as the plain object key and returns its crc32c.
func writeRaw(e *env, key string, r io.ReadCloser) (uint32, error) {
	defer r.Close()
	p := filepath.Join(e.dir, benchBucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(io.MultiWriter(f, h), r); err != nil {
		f.Close()
		return 0, err
	}
	return h.Sum32(), f.Close()
}

// decodeLimit decodes every frame of res's chunks in-process on one
// goroutine and returns MB/s of decoded output.
func decodeLimit(e *env, res *cargopack.Result) (float64, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<40))
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	var out []byte
	var total int64
	var elapsed time.Duration
	for _, c := range res.Manifest.Chunks {
		obj, err := os.ReadFile(e.objectPath(res.Manifest, c))
		if err != nil {
			return 0, err
		}
		for _, f := range c.Frames {
			comp := obj[f.CompressedOffset : f.CompressedOffset+f.CompressedSize]
			if int64(cap(out)) < f.UncompressedSize {
				out = make([]byte, 0, f.UncompressedSize)
			}
			t0 := time.Now()
			o, err := dec.DecodeAll(comp, out[:0])
			elapsed += time.Since(t0)
			if err != nil {
				return 0, err
			}
			total += int64(len(o))
		}
	}
	return float64(total) / 1e6 / elapsed.Seconds(), nil
}

func getCRC(ctx context.Context, c *s3.Client, bucket, key string) (uint32, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", key, err)
	}
	defer out.Body.Close()
	h := crc32.New(castagnoli)
	if _, err := io.CopyBuffer(h, out.Body, make([]byte, 1<<20)); err != nil {
		return 0, fmt.Errorf("get %s: %w", key, err)
	}
	return h.Sum32(), nil
}

// The SDK downloader as clients use it: the transfer manager's parallel
// ranged GETs with its defaults (8 MiB parts, 5 in flight).
const (
	sdkDownloader  = "SDK downloader (8 MiB ranges, 5 in flight)"
	sdkConcurrency = 5
)

// downloadCRC downloads bucket/key with the SDK downloader's defaults
// into a file (as `aws s3 cp` would; the client holds no copy in memory)
// and returns the crc32c of the result, read after the timed download.
func downloadCRC(ctx context.Context, e *env, c *s3.Client, bucket, key string, size int64) (uint32, error) {
	return downloadCRCConc(ctx, e, c, bucket, key, size, sdkConcurrency)
}

func downloadCRCConc(ctx context.Context, e *env, c *s3.Client, bucket, key string, size int64, conc int) (uint32, error) {
	tm := transfermanager.New(c, func(o *transfermanager.Options) {
		o.GetObjectType = tmtypes.GetObjectRanges
		o.PartSizeBytes = 8 << 20
		o.Concurrency = conc
		// No response checksum mode: plain ranged GETs, as the old
		// downloader sent.
		o.DisableChecksumValidation = true
	})
	f, err := os.CreateTemp(e.dir, "download-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	out, err := tm.DownloadObject(ctx, &transfermanager.DownloadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), WriterAt: f})
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", key, err)
	}
	if n := aws.ToInt64(out.ContentLength); n != size {
		return 0, fmt.Errorf("download %s: %d bytes, want %d", key, n, size)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != size {
		return 0, fmt.Errorf("download %s: file of %v bytes, want %d (%v)", key, fi.Size(), size, err)
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// sampleRSS samples the process's resident set every 10 ms until the
// returned function is called, which returns the peak.
func sampleRSS() func() int64 {
	return samplePeak(10*time.Millisecond, func() int64 { return procStatus("VmRSS") })
}

// samplePeak samples read (at once, then every period) on a goroutine of
// its own until the returned function is called, which stops it and
// returns the largest value read.
func samplePeak(period time.Duration, read func() int64) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}
