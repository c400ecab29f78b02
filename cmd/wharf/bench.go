package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/cmd/wharf/internal/bench"
)

// runBench is "wharf bench": flags and wiring for package cmd/wharf/internal/bench.
func runBench(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "--scale-child" {
		// The build child of --scale (a process of its own, so that its
		// memory figures are the build's alone); not for direct use.
		return bench.ScaleChild(ctx, args[1:])
	}
	def := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	latency := fs.Duration("latency", def.Latency, "first-byte latency added to every backend request")
	bandwidth := byteSize(def.Bandwidth)
	fs.Var(&bandwidth, "bandwidth", "per-connection backend bandwidth in bytes/s, like one S3 connection (default 100MB); 0 = unlimited")
	model := fs.String("model", bench.ModelHTTP, "how wharf reaches the S3 model: http (backend.S3Store, the AWS SDK over loopback HTTP: the served path), inprocess (the store called in-process), or both comma-separated (each run in full, reported side by side)")
	coldFiles := fs.Int("cold-files", def.ColdFiles, "1 MiB files of the cold 16 MiB-frame workload (0 skips it)")
	shapeSize := byteSize(def.ShapeSize)
	fs.Var(&shapeSize, "shapes-size", "file of the analytic request-shapes workload: DuckDB Parquet open, zarr-python 3 at 16 and 64, pyarrow coalescing, 256 small concurrent reads, COG windows, HDF5 hyperslabs (0 skips it)")
	shapeFrame := byteSize(def.ShapeFrame)
	fs.Var(&shapeFrame, "shapes-frame", "frame size the request-shapes file is packed with")
	var ro readOptions
	ro.addReadFlags(fs)
	files := fs.Int("files", def.Files, "files in the tree-walk tree (0 skips the walk, random-read and warm workloads)")
	large := byteSize(def.LargeSize)
	fs.Var(&large, "large-size", "size of the large-file workloads (0 skips them)")
	listKeys := fs.Int("list-keys", def.ListKeys, "keys of the listing-at-scale workload (0 skips it)")
	cache := byteSize(def.CacheBytes)
	fs.Var(&cache, "cache-bytes", "decoded-frame cache budget")
	conc := fs.String("concurrency", "1,8,32", "client concurrencies for the tree walk")
	out := fs.String("out", "bench-results", "directory for report.md, report.csv and walk.svg")
	quick := fs.Bool("quick", false, "small sizes for a smoke run (200 files, 32 MiB large file, 20,000 keys, 16 cold files, a fleet of 400 files read 300 times)")
	soak := fs.Bool("soak", false, "run the load test instead: random reads and listings across several archives with faults injected")
	soakFor := fs.Duration("soak-duration", bench.DefaultSoakConfig().Duration, "with --soak: how long the load runs")
	soakClients := fs.Int("soak-clients", bench.DefaultSoakConfig().Clients, "with --soak: concurrent clients")
	soakStalled := fs.Int("soak-stalled", bench.DefaultSoakConfig().Stalled, "with --soak: of the clients, how many open large responses and never read them")
	soakGreedy := fs.Int("soak-greedy", bench.DefaultSoakConfig().Greedy, "with --soak: of the clients, how many keep many large ranged reads in flight at once")
	discovery := fs.Int("discovery", 0, "run the discovery-at-start workload instead: N uploads under one root, at --latency per request (issue 16: 2000 at 50ms)")
	openConc := fs.Int("open-concurrency", 0, "with --discovery: archives opened at once (0 = serve's default)")
	scale := fs.Bool("scale", false, "run the scale workload instead: archives of millions of files built, restarted from the index and listed, each in wharf processes of their own (not part of the default run)")
	scaleDef := bench.DefaultScaleConfig()
	scaleKeys := fs.String("scale-keys", joinInts(scaleDef.Keys), "with --scale: archive sizes in files, comma-separated")
	scalePages := fs.Int("scale-pages", scaleDef.Pages, "with --scale: listing pages of the partial walk")
	scaleRepeat := fs.Int("scale-repeat", scaleDef.Repeat, "with --scale: build runs per size (the median is reported)")
	scaleUploads := fs.Int("scale-uploads", 2000, "with --scale: also time discovery of this many uploads at 50ms per request (0 skips it)")
	fleetReplicas := fs.Int("fleet-replicas", def.Fleet.Replicas, "replicas of the fleet workload, in-process over the one S3 model behind a random balancer, with and without peers (0 skips it)")
	fleetReads := fs.Int("fleet-reads", def.Fleet.Reads, "random small-file reads of the fleet workload")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	var memTarget int64
	fs.Var(memoryTargetFlag{&memTarget}, "memory-target", "with --soak: as serve's --memory-target, the process's memory limit: sets the Go soft memory limit and divides --cache-bytes and --read-memory from it (explicit ones win)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *discovery < 0 || *openConc < 0 || *scaleUploads < 0 {
		return errors.New("bench: --discovery, --scale-uploads and --open-concurrency must not be negative")
	}
	if *discovery > 0 {
		rep := &bench.Report{Header: []string{"command: wharf bench " + strings.Join(args, " "),
			fmt.Sprintf("machine: %s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}}
		if err := bench.Discovery(ctx, bench.DiscoveryConfig{Uploads: *discovery, Latency: *latency, OpenConcurrency: *openConc,
			Progress: os.Stderr}, rep); err != nil {
			return err
		}
		rep.WriteMarkdown(os.Stdout)
		return nil
	}
	if *scale {
		sc := scaleDef
		sc.Pages, sc.Repeat = *scalePages, *scaleRepeat
		sc.Keys = nil
		for _, v := range strings.Split(*scaleKeys, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(strings.ReplaceAll(v, "_", "")))
			if err != nil {
				return fmt.Errorf("--scale-keys: bad value %q", v)
			}
			sc.Keys = append(sc.Keys, n)
		}
		sc.Command = "wharf bench " + strings.Join(args, " ")
		sc.Progress = os.Stderr
		rep, err := bench.Scale(ctx, sc)
		if err == nil && *scaleUploads > 0 {
			if rep == nil {
				rep = &bench.Report{}
			}
			err = bench.Discovery(ctx, bench.DiscoveryConfig{Uploads: *scaleUploads, Latency: 50 * time.Millisecond,
				OpenConcurrency: *openConc, Progress: os.Stderr}, rep)
		}
		if rep != nil {
			if werr := writeReport(*out, rep); werr != nil && err == nil {
				err = werr
			}
			rep.WriteMarkdown(os.Stdout)
		}
		return err
	}
	if *soak {
		sc := bench.DefaultSoakConfig()
		sc.Duration, sc.Clients, sc.Stalled, sc.Greedy = *soakFor, *soakClients, *soakStalled, *soakGreedy
		var given memoryExplicit
		fs.Visit(func(f *flag.Flag) {
			given.mark(f.Name)
			if f.Name == "cache-bytes" {
				sc.CacheBytes = int64(cache)
			}
		})
		if *soakFor <= 0 || *soakClients < 1 || sc.CacheBytes <= 0 {
			return errors.New("bench --soak: --soak-duration and --cache-bytes must be positive, --soak-clients at least 1")
		}
		if memTarget > 0 {
			given.read = given.read && ro.ReadMemory != 0
			p, err := divideMemory(memTarget, given, memoryPlan{Cache: sc.CacheBytes, Read: ro.ReadMemory})
			if err != nil {
				return err
			}
			sc.CacheBytes, ro.ReadMemory = p.Cache, p.Read
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(p.GoLimit))
			fmt.Fprintf(os.Stderr, "memory target %d: Go soft limit %d, cache %d, read memory %d (GOMEMLIMIT in the environment %q is replaced)\n",
				p.Target, p.GoLimit, p.Cache, p.Read, os.Getenv("GOMEMLIMIT"))
		}
		if err := ro.validate(sc.CacheBytes); err != nil {
			return err
		}
		sc.ReadOptions = ro.cacheOptions()
		sc.Command = "wharf bench " + strings.Join(args, " ")
		sc.Progress = os.Stderr
		rep, err := bench.Soak(ctx, sc)
		if err != nil {
			return err
		}
		rep.WriteMarkdown(os.Stdout)
		if rep.WrongBytes != 0 {
			return fmt.Errorf("soak: %d responses carried wrong bytes", rep.WrongBytes)
		}
		return nil
	}
	cfg := def
	cfg.Latency = *latency
	cfg.Bandwidth = int64(bandwidth)
	cfg.Files = *files
	cfg.LargeSize = int64(large)
	cfg.ListKeys = *listKeys
	cfg.CacheBytes = int64(cache)
	cfg.ColdFiles = *coldFiles
	cfg.ShapeSize, cfg.ShapeFrame = int64(shapeSize), int64(shapeFrame)
	cfg.Fleet.Replicas, cfg.Fleet.Reads = *fleetReplicas, *fleetReads
	cfg.Models = nil
	for _, m := range strings.Split(*model, ",") {
		cfg.Models = append(cfg.Models, strings.TrimSpace(m))
	}
	if *latency < 0 || bandwidth < 0 || *files < 0 || large < 0 || *listKeys < 0 || *coldFiles < 0 || cache <= 0 {
		return errors.New("bench: sizes, counts and durations must not be negative, and --cache-bytes must be positive")
	}
	if err := ro.validate(cfg.CacheBytes); err != nil {
		return err
	}
	cfg.ReadOptions = ro.cacheOptions()
	cfg.ReadMemory = chunkio.NewFrameCache(cfg.CacheBytes, cfg.ReadOptions...).MemoryBudget()
	cfg.Archive = archiveview.Options{MaxFrameBytes: ro.MaxFrameBytes, TrustUnframed: ro.TrustUnframed,
		AllowKeyPrefixes: ro.AllowKeyPrefixes}
	cfg.Concurrency = nil
	for _, c := range strings.Split(*conc, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(c), "%d", &n); err != nil || n < 1 {
			return fmt.Errorf("--concurrency: bad value %q", c)
		}
		cfg.Concurrency = append(cfg.Concurrency, n)
	}
	if *quick {
		cfg.Files, cfg.LargeSize, cfg.ListKeys, cfg.RandomReads, cfg.WarmFor = 200, 32<<20, 20_000, 50, 500*time.Millisecond
		cfg.ColdFiles = min(cfg.ColdFiles, 16)
		cfg.ShapeSize = min(cfg.ShapeSize, 16<<20)
		cfg.ShapeFrame = min(cfg.ShapeFrame, cfg.ShapeSize)
		cfg.Fleet.Reads, cfg.Fleet.Files = min(cfg.Fleet.Reads, 300), min(cfg.Fleet.Files, 400)
	}
	cfg.Command = "wharf bench " + strings.Join(args, " ")
	cfg.Progress = os.Stderr

	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	write := func(name string, fn func(f *os.File) error) error {
		f, err := os.Create(filepath.Join(*out, name))
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := write("report.md", func(f *os.File) error { rep.WriteMarkdown(f); return nil }); err != nil {
		return err
	}
	if err := write("report.csv", func(f *os.File) error { return rep.WriteCSV(f) }); err != nil {
		return err
	}
	if err := write("walk.svg", func(f *os.File) error { rep.WriteSVG(f); return nil }); err != nil {
		return err
	}
	rep.WriteMarkdown(os.Stdout)
	fmt.Fprintf(os.Stderr, "bench: wrote %s/report.md, report.csv, walk.svg\n", *out)
	return nil
}

// writeReport writes report.md and report.csv of rep into dir.
func writeReport(dir string, rep *bench.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, fn := range map[string]func(f *os.File) error{
		"report.md":  func(f *os.File) error { rep.WriteMarkdown(f); return nil },
		"report.csv": func(f *os.File) error { return rep.WriteCSV(f) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
