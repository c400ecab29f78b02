package catalog

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// writeWideUpload writes lake/base/uploads/ID/manifest.json.gz: a valid
// version 2.1 manifest of n one-byte files, 1,000 per plain .tar chunk
// (the chunks themselves are not written: opening reads only the
// manifest). It returns the manifest's stored size.
func writeWideUpload(t *testing.T, dir, id string, n int) int64 {
	t.Helper()
	p := filepath.Join(dir, "lake", "base", "uploads", id, "manifest.json.gz")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	w := bufio.NewWriterSize(zw, 1<<20)
	const per, slot = 1000, 1024 // a 512-byte tar header, one byte padded to 512
	chunks := (n + per - 1) / per
	when := "2026-03-01T00:00:00Z"
	fmt.Fprintf(w, `{"version":"2.1","upload_id":%q,"created_at":%q,"completed_at":%q,"source_path":"/src","hostname":"h","bucket":"lake","prefix":"base","region":"us-east-1","total_files":%d,"total_bytes":%d,"total_chunks":%d,"shard_count":1,"compression_type":"none","files":[`,
		id, when, when, n, n, chunks)
	for i := range n {
		if i > 0 {
			w.WriteByte(',')
		}
		c := i / per
		fmt.Fprintf(w, `{"path":"/src/d%03d/f%07d.txt","size":1,"mod_time":%q,"chunk_id":%d,"shard_id":0,"s3_key":"uploads/%s/shard-0/chunk-%d.tar","archive_offset":%d}`,
			i%1000, i, when, c, id, c, 512+(i%per)*slot)
	}
	w.WriteString(`],"chunks":[`)
	for c := range chunks {
		if c > 0 {
			w.WriteByte(',')
		}
		k := min(per, n-c*per)
		fmt.Fprintf(w, `{"id":%d,"shard_id":0,"s3_key":"uploads/%s/shard-0/chunk-%d.tar","file_count":%d,"file_paths":[],"uncompressed_size":%d,"compressed_size":%d,"created_at":%q,"uploaded_at":%q}`,
			c, id, c, k, k, k*slot+1024, when, when)
	}
	w.WriteString(`],"shards":[]}`)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// liveHeap is the live heap after two collections.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestManagerIndexBudget: two discovered uploads of 500,000 one-byte files
// each. With room for both (256 MiB) both open, the budget accounts each
// archive's real index bytes, and the live heap grows by no more than the
// budget. With room for one (80 MiB) one opens and the other waits for
// index memory, then fails with ErrIndexMemory at its deadline, and the
// heap grows by less than the budget (on the old code, with no budget,
// both opened: about 86 MiB). With --max-files-per-upload 100,000 the
// upload is refused, naming the flag. Closing returns the memory.
func TestManagerIndexBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("writes two 500,000-file manifests")
	}
	const n = 500_000
	dir := t.TempDir()
	var wg sync.WaitGroup
	sizes := make([]int64, 2)
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); sizes[i] = writeWideUpload(t, dir, fmt.Sprintf("wide%d", i), n) }()
	}
	wg.Wait()
	t.Logf("manifests: %d and %d bytes stored", sizes[0], sizes[1])
	ctx := context.Background()

	open := func(t *testing.T, budget int64, maxFiles int, timeout time.Duration) (*Manager, map[string]error, int64) {
		t.Helper()
		before := liveHeap()
		cm := NewManager(Config{Store: backend.NewFileStore(dir), Discover: []string{"s3://lake/base"},
			IndexMemory: budget, MaxFilesPerUpload: maxFiles, OpenTimeout: timeout, Logger: zerolog.Nop()})
		if err := cm.Scan(ctx, true); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "ready", cm.Ready)
		errs := map[string]error{}
		for _, name := range []string{"wide0", "wide1"} {
			_, _, err := cm.Catalog().Bucket(ctx, name)
			errs[name] = err
		}
		grew := liveHeap() - before
		used, peak, limit := cm.IndexMemory()
		t.Logf("budget %d: index memory in use %d, peak %d; live heap grew by %d (%.1f MiB)", limit, used, peak, grew, float64(grew)/(1<<20))
		if used > limit || peak > limit {
			t.Errorf("index memory in use %d, peak %d: beyond the budget %d", used, peak, limit)
		}
		return cm, errs, grew
	}

	t.Run("room for both", func(t *testing.T) {
		cm, errs, grew := open(t, 256<<20, 0, time.Minute)
		var sum int64
		for name, err := range errs {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			a, _, _ := cm.Catalog().Bucket(ctx, name)
			if info := a.Info(); info.Files != n {
				t.Fatalf("%s: %d files", name, info.Files)
			} else {
				sum += info.IndexBytes
			}
		}
		if used, _, _ := cm.IndexMemory(); used != sum {
			t.Errorf("index memory in use %d, want the archives' index bytes %d", used, sum)
		}
		if limit := int64(2 * n * IndexBytesPerFile); grew > limit {
			t.Errorf("the live heap grew by %d for two uploads, beyond the documented %d (%d bytes per file)", grew, limit, IndexBytesPerFile)
		}
		cm.CloseAll()
		if used, _, _ := cm.IndexMemory(); used != 0 {
			t.Errorf("%d bytes of index memory still charged after CloseAll", used)
		}
	})

	t.Run("room for one", func(t *testing.T) {
		const budget = 80 << 20
		cm, errs, grew := open(t, budget, 0, slowdown*5*time.Second) // room for the first open on a loaded machine; the second waits it out
		defer cm.CloseAll()
		var opened, refused int
		for name, err := range errs {
			switch {
			case err == nil:
				opened++
			case errors.Is(err, ErrIndexMemory):
				refused++
				if !strings.Contains(err.Error(), "s3://lake/base/uploads/"+name+"/manifest.json.gz") || !strings.Contains(err.Error(), "--index-memory") {
					t.Errorf("the refusal does not name the manifest and the flag: %v", err)
				}
			default:
				t.Errorf("%s: %v", name, err)
			}
		}
		if opened != 1 || refused != 1 {
			t.Fatalf("%d opened, %d refused for lack of index memory; want 1 and 1: %v", opened, refused, errs)
		}
		if grew > budget {
			t.Errorf("the live heap grew by %d, beyond the %d budget", grew, budget)
		}
	})

	t.Run("max files per upload", func(t *testing.T) {
		cm, errs, _ := open(t, 0, 100_000, time.Minute)
		defer cm.CloseAll()
		for name, err := range errs {
			if !errors.Is(err, manifest.ErrTooLarge) || !strings.Contains(err.Error(), "--max-files-per-upload 100000") {
				t.Errorf("%s: %v, want a refusal naming --max-files-per-upload", name, err)
			}
		}
		if used, _, _ := cm.IndexMemory(); used != 0 {
			t.Errorf("refused opens left %d bytes charged", used)
		}
	})
}

// TestOpenUploadRetriesPastTheEstimate: a manifest that lists more files
// than its stored size suggests (here: listed as 1 byte, 40,000 files)
// fails its first try on the estimated file cap and opens on the second,
// with the whole per-upload reservation; the budget then holds its real
// index bytes.
func TestOpenUploadRetriesPastTheEstimate(t *testing.T) {
	dir := t.TempDir()
	writeWideUpload(t, dir, "dense", 40_000)
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	cm := NewManager(Config{Store: store, IndexMemory: 64 << 20, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	a, err := cm.openUpload(context.Background(), "dense", "lake", "base/uploads/dense/manifest.json.gz", 1, openExtra{})
	if err != nil {
		t.Fatal(err)
	}
	if n := store.Requests("get"); n != 2 {
		t.Errorf("%d manifest GETs, want 2 (the estimate, then the whole reservation)", n)
	}
	if used, _, _ := cm.IndexMemory(); a.Info().Files != 40_000 || used != a.Info().IndexBytes {
		t.Errorf("%d files, %d bytes charged for %d index bytes", a.Info().Files, used, a.Info().IndexBytes)
	}
	cm.closeArchive(a)
	if used, _, _ := cm.IndexMemory(); used != 0 {
		t.Errorf("%d bytes still charged after close", used)
	}
}

// TestManagerChainFilesCapped: --max-files-per-upload (and the first
// reservation's file cap) bounds the files of an upload's whole chain,
// not only of its own manifest, so an uploader's chain of small
// incremental manifests cannot build a tree many times what its open
// reserved: the upload whose chain lists more is refused naming the flag,
// and one within it opens. The old code opened the chain of 15 files at a
// cap of 8.
func TestManagerChainFilesCapped(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"chain1", "chain2", "chain3"}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range ids {
		files := map[string][]byte{}
		for j := range 5 {
			files[fmt.Sprintf("%s/f%d.txt", id, j)] = []byte(id)
		}
		opt := cargopack.Options{Bucket: "lake", Prefix: "base", UploadID: id, Created: created.Add(time.Duration(i) * time.Hour), FrameSize: 4 << 10}
		if i > 0 {
			opt.PreviousManifestID, opt.SyncType = ids[i-1], "incremental"
		}
		if _, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, created), opt); err != nil {
			t.Fatal(err)
		}
	}
	cm := NewManager(Config{Store: backend.NewFileStore(dir), Discover: []string{"s3://lake/base"}, WaitOpen: true,
		MaxFilesPerUpload: 8, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	var names []string
	cm.Catalog().EachBucket(func(name string, _ time.Time) { names = append(names, name) })
	if a, ok, err := cm.Catalog().Bucket(ctx, "chain1"); err != nil || !ok || a.Info().Files != 5 {
		t.Fatalf("chain1 (5 files): %v, %v (buckets %v)", ok, err, names)
	}
	for _, name := range []string{"chain2", "chain3"} {
		a, _, err := cm.Catalog().Bucket(ctx, name)
		if err == nil {
			t.Fatalf("%s: a chain of %d files opened at --max-files-per-upload 8", name, a.Info().Files)
		}
		if !errors.Is(err, manifest.ErrTooLarge) || !strings.Contains(err.Error(), "--max-files-per-upload") {
			t.Fatalf("%s: %v, want ErrTooLarge naming --max-files-per-upload", name, err)
		}
	}
}
