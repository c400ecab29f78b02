package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/cmd/wharf/internal/bench"
)

// runBench is "wharf bench": flags and wiring for package cmd/wharf/internal/bench.
func runBench(ctx context.Context, args []string) error {
	def := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	latency := fs.Duration("latency", def.Latency, "first-byte latency added to every backend request")
	bandwidth := byteSize(def.Bandwidth)
	fs.Var(&bandwidth, "bandwidth", "per-connection backend bandwidth in bytes/s, like one S3 connection (default 100MB); 0 = unlimited")
	coldFiles := fs.Int("cold-files", def.ColdFiles, "1 MiB files of the cold 16 MiB-frame workload (0 skips it)")
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
	quick := fs.Bool("quick", false, "small sizes for a smoke run (200 files, 32 MiB large file, 20,000 keys, 16 cold files)")
	soak := fs.Bool("soak", false, "run the load test instead: random reads and listings across several archives with faults injected")
	soakFor := fs.Duration("soak-duration", bench.DefaultSoakConfig().Duration, "with --soak: how long the load runs")
	soakClients := fs.Int("soak-clients", bench.DefaultSoakConfig().Clients, "with --soak: concurrent clients")
	discovery := fs.Int("discovery", 0, "run the discovery-at-start workload instead: N uploads under one root, at --latency per request (issue 16: 2000 at 50ms)")
	openConc := fs.Int("open-concurrency", 0, "with --discovery: archives opened at once (0 = serve's default)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
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
	if *discovery < 0 || *openConc < 0 {
		return errors.New("bench: --discovery and --open-concurrency must not be negative")
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
	if *soak {
		sc := bench.DefaultSoakConfig()
		sc.Duration, sc.Clients = *soakFor, *soakClients
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
	if *latency < 0 || bandwidth < 0 || *files < 0 || large < 0 || *listKeys < 0 || *coldFiles < 0 || cache <= 0 {
		return errors.New("bench: sizes, counts and durations must not be negative, and --cache-bytes must be positive")
	}
	if err := ro.validate(cfg.CacheBytes); err != nil {
		return err
	}
	cfg.ReadOptions = []chunkio.CacheOption{chunkio.WithMemory(ro.ReadMemory), chunkio.WithPartSize(ro.PartSize),
		chunkio.WithStreamParts(ro.StreamParts), chunkio.WithMaxParts(ro.MaxParts)}
	cfg.ReadMemory = chunkio.NewFrameCache(cfg.CacheBytes, cfg.ReadOptions...).MemoryBudget()
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
