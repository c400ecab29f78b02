package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// writeScaleManifest writes a manifest of n files packed 1,000 per plain
// .tar chunk (the chunk objects are not written: listing and the index never
// touch them) and returns its key and one key per n/10 files for deep-page
// probes.
func writeScaleManifest(root string, n int) (key string, keys []string, err error) {
	const perChunk = 1000
	const slot = 1536 // 512-byte header + 1,000 bytes of data + padding
	key = "scale/uploads/scale-1m/manifest.json.gz"
	p := filepath.Join(root, benchBucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", nil, err
	}
	f, err := os.Create(p)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	w := bufio.NewWriterSize(zw, 1<<20)
	mt := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	chunks := (n + perChunk - 1) / perChunk
	fmt.Fprintf(w, `{"version":"2.1","upload_id":"scale-1m","created_at":%q,"completed_at":%q,"source_path":"/data","hostname":"bench","bucket":%q,"prefix":"scale","region":"us-east-1","total_files":%d,"total_bytes":%d,"total_chunks":%d,"shard_count":1,"compression_type":"zstd","compression_level":3,"compression_ratio":1,"files":[`,
		mt, mt, benchBucket, n, int64(n)*1000, chunks)
	probeStep := max(1, n/10)
	for i := 0; i < n; i++ {
		rel := scaleKey(i)
		if i%probeStep == 0 {
			keys = append(keys, rel)
		}
		if i > 0 {
			w.WriteByte(',')
		}
		path, _ := json.Marshal("/data/" + rel)
		fmt.Fprintf(w, `{"path":%s,"size":1000,"mod_time":%q,"chunk_id":%d,"shard_id":0,"s3_key":"uploads/scale-1m/shard-0/chunk-%d.tar","archive_offset":%d,"checksum":"%064x"}`,
			path, mt, i/perChunk, i/perChunk, 512+(i%perChunk)*slot, i)
	}
	w.WriteString(`],"chunks":[`)
	for c := 0; c < chunks; c++ {
		if c > 0 {
			w.WriteByte(',')
		}
		files := min(perChunk, n-c*perChunk)
		fmt.Fprintf(w, `{"id":%d,"shard_id":0,"s3_key":"uploads/scale-1m/shard-0/chunk-%d.tar","file_count":%d,"file_paths":[],"uncompressed_size":%d,"compressed_size":%d,"created_at":%q,"uploaded_at":%q,"checksum":"%064x"}`,
			c, c, files, files*1000, files*slot+1024, mt, mt, c)
	}
	w.WriteString(`],"shards":[]}`)
	if err := w.Flush(); err != nil {
		return "", nil, err
	}
	if err := zw.Close(); err != nil {
		return "", nil, err
	}
	return key, keys, f.Close()
}

// scaleKey spreads n keys over days and hosts like a large log archive.
func scaleKey(i int) string {
	return fmt.Sprintf("logs/2026-06-%02d/host-%03d/events-%07d.json", 1+i%28, (i/28)%100, i)
}

// heapObjects is the bytes of heap objects (live, plus dead ones not yet
// swept: callers run runtime.GC first when they want live bytes only).
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// liveHeap is the bytes of live heap objects. Two collections: buffers an
// earlier step put back in a sync.Pool survive one (the pool's victim
// generation) and would otherwise count as live here and vanish later.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func listingAtScale(ctx context.Context, cfg Config, e *env, rep *Report) error {
	n := cfg.ListKeys
	cfg.logf("writing a %d-file manifest", n)
	key, probes, err := writeScaleManifest(e.dir, n)
	if err != nil {
		return err
	}
	wl := fmt.Sprintf("5. Listing at scale (%d keys)", n)
	base := liveHeap()
	stopPeak := samplePeak(5*time.Millisecond, func() int64 { return int64(heapObjects()) })
	t0 := time.Now()
	a, err := archiveview.Open(ctx, e.store, benchBucket, key, archiveview.Options{Name: "wharf", Cache: chunkio.NewFrameCache(64 << 20)})
	build := time.Since(t0)
	peak := stopPeak()
	if err != nil {
		return fmt.Errorf("open 1M manifest: %w", err)
	}
	retained := int64(liveHeap()) - int64(base)
	runtime.KeepAlive(a)
	peakMB := float64(peak-int64(base)) / 1e6
	rep.add(Row{Workload: wl, System: "index", Variant: "build (manifest parse + resolve + sort)", Metric: "time", Value: build.Seconds(), Unit: "s"})
	rep.add(Row{Workload: wl, System: "index", Variant: "build (manifest parse + resolve + sort)", Metric: "retained heap", Value: float64(retained) / 1e6, Unit: "MB"})
	rep.add(Row{Workload: wl, System: "index", Variant: "build (manifest parse + resolve + sort)", Metric: "peak heap during build (5 ms samples)", Value: peakMB, Unit: "MB"})
	rep.add(Row{Workload: wl, System: "index", Variant: "build (manifest parse + resolve + sort)", Metric: "retained bytes per file", Value: float64(retained) / float64(n)})
	rep.target(fmt.Sprintf("%d-key index build time", n), fmt.Sprintf("%.2f s", build.Seconds()), "< 5 s", build < 5*time.Second)
	rep.target(fmt.Sprintf("%d-key index retained heap", n), fmt.Sprintf("%.0f MB", float64(retained)/1e6), "< 300 MB", retained < 300e6)
	cfg.logf("1M index: build %.2f s, retained %.0f MB, peak %.0f MB", build.Seconds(), float64(retained)/1e6, peakMB)

	// The persistent index: the same tree written and loaded back (a restart
	// with --index-cache), timed against the manifest build above.
	var ibuf bytes.Buffer
	if err := a.WriteIndex(&ibuf); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	var loadErr error
	load := median(3, func() {
		b, err := archiveview.OpenIndex(ctx, e.store, bytes.NewReader(ibuf.Bytes()), archiveview.Options{Name: "wharf"})
		if err != nil {
			loadErr = err
			return
		}
		b.Close()
	})
	if loadErr != nil {
		return fmt.Errorf("load index: %w", loadErr)
	}
	rep.add(Row{Workload: wl, System: "index", Variant: "persistent index load (restart with --index-cache)", Metric: "time", Value: load.Seconds(), Unit: "s"})
	rep.add(Row{Workload: wl, System: "index", Variant: "persistent index load (restart with --index-cache)", Metric: "index file", Value: float64(ibuf.Len()) / 1e6, Unit: "MB"})
	rep.target(fmt.Sprintf("%d-file persistent index load", n), fmt.Sprintf("%.2f s", load.Seconds()), "< 1 s", load < time.Second)
	cfg.logf("persistent index: %.1f MB, loads in %.2f s", float64(ibuf.Len())/1e6, load.Seconds())
	ibuf = bytes.Buffer{}

	e.swap(a)

	mid := probes[len(probes)/2]
	// In-process index cost.
	idx := []struct {
		name string
		p    archiveview.ListParams
	}{
		{"first page (1000)", archiveview.ListParams{MaxKeys: 1000}},
		{"deep page (1000, after a key at 50%)", archiveview.ListParams{MaxKeys: 1000, After: mid}},
		{"prefix probe (max-keys=1)", archiveview.ListParams{Prefix: probePrefix, MaxKeys: 1}},
		{"delimiter page (1000, '/')", archiveview.ListParams{Prefix: "logs/", Delimiter: "/", MaxKeys: 1000}},
	}
	for _, q := range idx {
		d := median(51, func() { a.List(q.p) })
		rep.add(Row{Workload: wl, System: "index", Variant: q.name, Metric: "median latency", Value: float64(d.Microseconds()) / 1000, Unit: "ms"})
	}
	// Over HTTP (raw client: the server's work plus loopback, no XML parsing).
	token, err := continuationToken(ctx, e, mid)
	if err != nil {
		return err
	}
	for _, q := range listQueries(token) {
		var herr error
		d := median(21, func() {
			if err := rawGet(ctx, e, "/wharf?"+q.query); err != nil {
				herr = err
			}
		})
		if herr != nil {
			return herr
		}
		ms := float64(d.Microseconds()) / 1000
		rep.add(Row{Workload: wl, System: "wharf", Variant: "ListObjectsV2 over HTTP: " + q.name, Metric: "median latency", Value: ms, Unit: "ms"})
		rep.target(fmt.Sprintf("%d keys: ListObjectsV2 ", n)+q.name, fmt.Sprintf("%.2f ms", ms), "< 5 ms", ms < 5)
		cfg.logf("1M listing over HTTP, %s: %.2f ms", q.name, ms)
	}
	return nil
}

// probePrefix is a prefix of the scale manifests (scaleKey) that holds a
// few keys in the middle of the listing.
const probePrefix = "logs/2026-06-15/host-037/"

// listQuery is one ListObjectsV2 request timed over HTTP at scale.
type listQuery struct{ name, query string }

// listQueries are the ListObjectsV2 requests timed at scale: the first
// page, the page that token continues, and a probe of probePrefix.
func listQueries(token string) []listQuery {
	return []listQuery{
		{"first page (1000)", "list-type=2&max-keys=1000"},
		{"middle page by continuation-token (1000)", "list-type=2&max-keys=1000&continuation-token=" + url.QueryEscape(token)},
		{"prefix probe (max-keys=1)", "list-type=2&max-keys=1&prefix=" + url.QueryEscape(probePrefix)},
	}
}

func median(n int, fn func()) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		t0 := time.Now()
		fn()
		ds[i] = time.Since(t0)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[n/2]
}

func rawGet(ctx context.Context, e *env, pathQuery string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+pathQuery, nil)
	if err != nil {
		return err
	}
	resp, err := e.httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", pathQuery, resp.StatusCode)
	}
	return nil
}

// continuationToken returns the NextContinuationToken of the page that
// starts after key.
func continuationToken(ctx context.Context, e *env, after string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/wharf?list-type=2&max-keys=1&start-after="+url.QueryEscape(after), nil)
	if err != nil {
		return "", err
	}
	resp, err := e.httpc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Next string `xml:"NextContinuationToken"`
	}
	if err := xml.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	if out.Next == "" {
		return "", fmt.Errorf("no continuation token after %s (status %s)", after, strconv.Itoa(resp.StatusCode))
	}
	return out.Next, nil
}
