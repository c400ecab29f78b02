package archiveview

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

const (
	benchFiles         = 1_000_000
	benchFilesPerChunk = 1000
	benchFramesPerChnk = 16
	benchManifestKey   = "bench/uploads/20260101-bench/manifest.json.gz"
)

// benchKey is file i's virtual key (about 40 bytes): 1000 top directories,
// 10 subdirectories each, 100 files each.
func benchKey(i int) string {
	return fmt.Sprintf("set-%03d/part-%02d/sample-%07d.json", i/1000, i/100%10, i)
}

// benchManifest writes a writer-shaped 1M-file manifest (framed chunks,
// absolute paths, distinct checksums, archive offsets) as gzip JSON into a
// FileStore directory and returns the directory.
func benchManifest(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 123456789, time.FixedZone("", -7*3600))
	m := &manifest.Manifest{
		Version: "2.1", UploadID: "20260101-bench", CreatedAt: t0, CompletedAt: t0,
		SourcePath: "/data/project", Prefix: "bench", Bucket: "bkt", Region: "us-east-1",
		CompressionType: "zstd", ChecksumAlgorithm: "sha256", FormatFeatures: []string{"frames"},
		TotalFiles: benchFiles, TotalChunks: benchFiles / benchFilesPerChunk, ShardCount: 4,
	}
	m.Files = make([]manifest.FileEntry, 0, benchFiles)
	for c := 0; c < benchFiles/benchFilesPerChunk; c++ {
		skey := fmt.Sprintf("uploads/%s/shard-%d/chunk-%d.tar.zst", m.UploadID, c%4, c/4)
		off := int64(512)
		for j := 0; j < benchFilesPerChunk; j++ {
			i := c*benchFilesPerChunk + j
			size := int64(1000 + i%5000)
			ao := off
			sum := sha256.Sum256([]byte(benchKey(i)))
			m.Files = append(m.Files, manifest.FileEntry{
				Path: "/data/project/" + benchKey(i), Size: size, ModTime: t0, ChunkID: c / 4, ShardID: c % 4,
				S3Key: skey, ArchiveOffset: &ao, Checksum: hex.EncodeToString(sum[:]),
			})
			off += (size+511)/512*512 + 512
		}
		total := off - 512 + 1024
		ce := manifest.ChunkEntry{ID: c / 4, ShardID: c % 4, S3Key: skey, FileCount: benchFilesPerChunk, CreatedAt: t0, UploadedAt: t0}
		step := total / benchFramesPerChnk
		var u, cOff int64
		for k := 0; k < benchFramesPerChnk; k++ {
			us := step
			if k == benchFramesPerChnk-1 {
				us = total - u
			}
			sum := sha256.Sum256([]byte(fmt.Sprintf("%s#%d", skey, k)))
			ce.Frames = append(ce.Frames, manifest.FrameEntry{CompressedOffset: cOff, CompressedSize: us / 3,
				UncompressedOffset: u, UncompressedSize: us, Checksum: hex.EncodeToString(sum[:])})
			u += us
			cOff += us / 3
		}
		ce.CompressedSize = cOff
		m.Chunks = append(m.Chunks, ce)
	}
	p := filepath.Join(dir, "bkt", filepath.FromSlash(benchManifestKey))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	enc := json.NewEncoder(zw)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// cpuTime is the process's user+system CPU time so far (a figure that
// stays meaningful on a shared machine, unlike wall time).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapAfterGC returns HeapAlloc after two full collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkOpen1M opens a 1,000,000-file, 1000-chunk, 16000-frame archive
// (one manifest GET from a FileStore, decode, validate, resolve, index).
// Reported: ns/op (Open+build), retained-MB and retained-B/file (HeapAlloc
// after GC with the Archive alive, minus the baseline) and peak-MB (highest
// HeapAlloc sampled every 5 ms during Open, minus the baseline) and
// cpu-s/op (process CPU during Open, GC included).
func BenchmarkOpen1M(b *testing.B) {
	dir := benchManifest(b)
	store := backend.NewFileStore(dir)
	ctx := context.Background()
	var a *Archive
	var peak atomic.Uint64
	for b.Loop() {
		a = nil
		base := heapAfterGC()
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > base && ms.HeapAlloc-base > peak.Load() {
					peak.Store(ms.HeapAlloc - base)
				}
			}
		}()
		var err error
		cpu0 := cpuTime()
		a, err = Open(ctx, store, "bkt", benchManifestKey, Options{})
		cpu := cpuTime() - cpu0
		close(stop)
		<-done
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		retained := heapAfterGC() - base
		b.ReportMetric(float64(retained)/(1<<20), "retained-MB")
		b.ReportMetric(float64(retained)/benchFiles, "retained-B/file")
		b.ReportMetric(cpu.Seconds(), "cpu-s/op")
		b.StartTimer()
	}
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-MB")
	if a.Files() != benchFiles || a.Info().Frames != benchFiles/benchFilesPerChunk*benchFramesPerChnk {
		b.Fatalf("files %d frames %d", a.Files(), a.Info().Frames)
	}
	runtime.KeepAlive(a)
}

// BenchmarkList1M measures listings over the 1M-file index: the first page
// at the root with "/" (1000 common prefixes), a deep page (After far into
// the key space, no delimiter, 1000 keys), a delimited page inside one
// directory, and a Prefix probe with MaxKeys=1 (the HEAD-fallback shape).
func BenchmarkList1M(b *testing.B) {
	dir := benchManifest(b)
	a, err := Open(context.Background(), backend.NewFileStore(dir), "bkt", benchManifestKey, Options{})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		p    ListParams
		want int
	}{
		{"first-page-delim", ListParams{Delimiter: "/", MaxKeys: 1000}, 1000},
		{"first-page", ListParams{MaxKeys: 1000}, 1000},
		{"deep-page", ListParams{After: benchKey(876543), MaxKeys: 1000}, 1000},
		{"dir-page-delim", ListParams{Prefix: "set-777/", Delimiter: "/", MaxKeys: 1000}, 10},
		{"prefix-probe", ListParams{Prefix: benchKey(654321) + "/", Delimiter: "/", MaxKeys: 1}, 0},
		{"key-probe", ListParams{Prefix: "set-654/part-03/", Delimiter: "/", MaxKeys: 1}, 1},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := a.List(c.p)
				if len(r.Entries) != c.want {
					b.Fatalf("%d entries, want %d", len(r.Entries), c.want)
				}
			}
		})
	}
	b.Run("stat", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := a.Stat(benchKey(i % benchFiles)); !ok {
				b.Fatal("missing")
			}
			i += 7919
		}
	})
}
