package archiveview

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// memFiles is the size of the CI memory tests' archive: big enough for
// the build's phases to matter (over bigBuild), small enough for seconds.
const memFiles = 200_000

// memManifest writes a writer-shaped manifest of n files (1000 per plain
// tar chunk; the chunks are not written: building and listing never read
// them) with keys spread over days and hosts, in no sorted order.
func memManifest(t testing.TB, n int) (dir, key string) {
	t.Helper()
	dir = t.TempDir()
	key = "mem/uploads/20260601-mem/manifest.json.gz"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	w := bufio.NewWriterSize(zw, 1<<20)
	mt := "2026-06-01T12:00:00Z"
	chunks := (n + 999) / 1000
	fmt.Fprintf(w, `{"version":"2.1","upload_id":"20260601-mem","created_at":%q,"source_path":"/data","prefix":"mem","total_files":%d,"total_chunks":%d,"compression_type":"zstd","files":[`, mt, n, chunks)
	for i := 0; i < n; i++ {
		if i > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, `{"path":"/data/logs/2026-06-%02d/host-%03d/events-%07d.json","size":1000,"mod_time":%q,"chunk_id":%d,"s3_key":"uploads/20260601-mem/chunk-%d.tar","archive_offset":%d,"checksum":"%064x"}`,
			1+i%28, (i/28)%100, i, mt, i/1000, i/1000, 512+(i%1000)*1536, i)
	}
	w.WriteString(`],"chunks":[`)
	for c := 0; c < chunks; c++ {
		if c > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, `{"id":%d,"s3_key":"uploads/20260601-mem/chunk-%d.tar","file_count":1000,"file_paths":[],"uncompressed_size":%d,"compressed_size":%d,"checksum":"%064x"}`,
			c, c, 1000*1536+1024, 1000*1536+1024, c)
	}
	w.WriteString(`]}`)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, key
}

// memHeap is the bytes of heap objects (live, and dead ones not yet
// swept): what the build holds at an instant, its garbage included.
func memHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// memProc reads a kB field of /proc/self/status, in bytes (-1 elsewhere).
func memProc(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(v)
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n << 10
		}
	}
	return -1
}

// TestBuildMemory: building a 200,000-file index from its manifest peaks
// at no more than twice the retained index (heap objects sampled every
// millisecond, garbage included, against the live heap the archive holds
// after a collection). The pre-streaming build peaked at 6-7x.
func TestBuildMemory(t *testing.T) {
	dir, key := memManifest(t, memFiles)
	store := backend.NewFileStore(dir)
	runtime.GC()
	debug.FreeOSMemory()
	base := memHeap()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if h := memHeap(); h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	}()
	a, err := Open(context.Background(), store, "bkt", key, Options{})
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if h := memHeap(); h > peak.Load() {
		peak.Store(h)
	}
	runtime.GC()
	retained := memHeap() - base
	p := peak.Load() - base
	t.Logf("%d files: peak heap %.1f MB, retained %.1f MB (%.2fx)", a.Files(), float64(p)/1e6, float64(retained)/1e6, float64(p)/float64(retained))
	if a.Files() != memFiles {
		t.Fatalf("%d files", a.Files())
	}
	if retained < 20<<20 {
		t.Fatalf("retained %d bytes: the measurement is off (the index alone is ~23 MB)", retained)
	}
	if p > 2*retained {
		t.Errorf("build peaked at %.1f MB, more than twice the %.1f MB retained", float64(p)/1e6, float64(retained)/1e6)
	}
	runtime.KeepAlive(a)
}

// TestServeFromIndexMemory: an archive served from its index file in
// place costs almost no heap or anonymous memory, after loading and after
// listing every key: the columns are the file's pages (page cache), not
// copies.
func TestServeFromIndexMemory(t *testing.T) {
	dir, key := memManifest(t, memFiles)
	store := backend.NewFileStore(dir)
	a, err := Open(context.Background(), store, "bkt", key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mem.widx")
	if err := a.WriteIndexFile(path); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	a.Close()
	a = nil
	debug.FreeOSMemory()
	heap0, anon0 := memHeap(), memProc("RssAnon")

	m, err := OpenIndexFile(context.Background(), store, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	debug.FreeOSMemory()
	heap1, anon1 := memHeap(), memProc("RssAnon")
	after, keys := "", 0
	for {
		r := m.List(ListParams{MaxKeys: 1000, After: after})
		keys += len(r.Entries)
		if !r.Truncated {
			break
		}
		after = r.NextAfter
	}
	if keys != memFiles {
		t.Fatalf("listed %d keys", keys)
	}
	debug.FreeOSMemory()
	heap2, anon2 := memHeap(), memProc("RssAnon")
	t.Logf("index file %.1f MB; heap +%.2f MB after load, +%.2f MB after listing every key; RssAnon +%.1f MB, +%.1f MB",
		float64(fi.Size())/1e6, float64(int64(heap1)-int64(heap0))/1e6, float64(int64(heap2)-int64(heap0))/1e6,
		float64(anon1-anon0)/1e6, float64(anon2-anon0)/1e6)
	// The 23 MB of columns must not be in the heap: a loaded copy would
	// add them whole.
	limit := fi.Size() / 8
	if d := int64(heap1) - int64(heap0); d > limit {
		t.Errorf("loading added %d bytes of heap (index file %d bytes)", d, fi.Size())
	}
	if d := int64(heap2) - int64(heap0); d > limit {
		t.Errorf("loading and listing added %d bytes of heap", d)
	}
	if anon0 >= 0 && anon2-anon0 > fi.Size()/2 {
		t.Errorf("RssAnon grew by %d bytes serving a %d-byte index file in place", anon2-anon0, fi.Size())
	}
	runtime.KeepAlive(m)
}
