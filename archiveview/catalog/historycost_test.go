//go:build histcost

package catalog

// The cost of a dataset history: 100 published versions of a
// 100,000-file dataset in a FileStore, versions sharing one set of chunks
// and differing by a few files each. Run with
//
//	go test ./archiveview/catalog/ -tags histcost -run TestHistoryCost -v -timeout 30m
//
// (WHARF_HIST_VERSIONS and WHARF_HIST_FILES change the shape;
// WHARF_HIST_LATENCY=50ms delays every store request by that much, as a
// first-byte latency; WHARF_HIST_AHEAD=1 builds one version at a time
// (the build before opens ahead; default historyOpenAhead);
// WHARF_HIST_INDEX_CACHE=1 opens every version through a DirIndexCache
// and builds the history a second time in a new manager, from the cache;
// WHARF_HIST_PROFILE=DIR writes a CPU and an allocation profile of each
// build there: cpu-first.pprof, allocs-first.pprof, and -cached for the
// build from the cache; WHARF_HIST_DUMP=FILE writes every key version of
// the history, one a line, to compare two builds' results.)

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// byteStore counts the body bytes GETs return, and delays every request
// by latency (a first-byte latency, as S3's).
type byteStore struct {
	*countStore
	bytes   atomic.Int64
	latency time.Duration
}

func (s *byteStore) wait(ctx context.Context) error {
	if s.latency <= 0 {
		return nil
	}
	select {
	case <-time.After(s.latency):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *byteStore) Stat(ctx context.Context, b, k string) (backend.ObjectInfo, error) {
	if err := s.wait(ctx); err != nil {
		return backend.ObjectInfo{}, err
	}
	return s.countStore.Stat(ctx, b, k)
}

func (s *byteStore) List(ctx context.Context, b, p string, fn func(backend.ObjectInfo) error) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.countStore.List(ctx, b, p, fn)
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (s *byteStore) Get(ctx context.Context, b, k string) (io.ReadCloser, backend.ObjectInfo, error) {
	if err := s.wait(ctx); err != nil {
		return nil, backend.ObjectInfo{}, err
	}
	rc, oi, err := s.countStore.Get(ctx, b, k)
	if err == nil {
		rc = countingBody{rc, &s.bytes}
	}
	return rc, oi, err
}

func (s *byteStore) ReadRange(ctx context.Context, b, k string, off, n int64, m string) (io.ReadCloser, backend.ObjectInfo, error) {
	if err := s.wait(ctx); err != nil {
		return nil, backend.ObjectInfo{}, err
	}
	rc, oi, err := s.countStore.ReadRange(ctx, b, k, off, n, m)
	if err == nil {
		rc = countingBody{rc, &s.bytes}
	}
	return rc, oi, err
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// profile starts a CPU profile of phase when WHARF_HIST_PROFILE names a
// directory; the function returned stops it and writes the allocation
// profile.
func profile(t *testing.T, phase string) func() {
	dir := os.Getenv("WHARF_HIST_PROFILE")
	if dir == "" {
		return func() {}
	}
	cf, err := os.Create(filepath.Join(dir, "cpu-"+phase+".pprof"))
	if err != nil {
		t.Fatal(err)
	}
	runtime.MemProfileRate = 64 << 10
	if err := pprof.StartCPUProfile(cf); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		cf.Close()
		af, err := os.Create(filepath.Join(dir, "allocs-"+phase+".pprof"))
		if err != nil {
			t.Fatal(err)
		}
		defer af.Close()
		if err := pprof.Lookup("allocs").WriteTo(af, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHistoryCost(t *testing.T) {
	nv, nf := envInt("WHARF_HIST_VERSIONS", 100), envInt("WHARF_HIST_FILES", 100000)
	dir := t.TempDir()
	ctx := context.Background()
	id := func(i int) string { return fmt.Sprintf("20260101T%06dZ-%06d", i, i) }
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	t0 := time.Now()
	files := make(map[string][]byte, nf)
	for i := 0; i < nf; i++ {
		files[fmt.Sprintf("f/%06d", i)] = []byte(fmt.Sprintf("file %d\n", i))
	}
	root := "ocean/v/" + id(1)
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, base),
		cargopack.Options{Bucket: dsBucket, Prefix: root, UploadID: "u001", Created: base, FrameSize: 1 << 20, KeyStyle: cargopack.PrefixIncluded})
	if err != nil {
		t.Fatal(err)
	}
	files = nil
	mans := []string{res.ManifestKey}
	put := func(key string, data []byte) {
		p := filepath.Join(dir, dsBucket, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	direct := func(key string, data []byte) manifest.FileEntry {
		put(key, data)
		sum := sha256.Sum256(data)
		return manifest.FileEntry{Path: res.Manifest.SourcePath + "/" + key[len(root)+1:], Size: int64(len(data)), ModTime: base, S3Key: key, Checksum: hex.EncodeToString(sum[:])}
	}
	// Version i (2..nv): version 1's files but f/<i> (deleted), plus
	// hot/changing (new bytes every version) and hot/added-<j> for j <= i.
	var manBytes int64
	for i := 2; i <= nv; i++ {
		m := *res.Manifest
		m.UploadID, m.CreatedAt, m.CompletedAt = fmt.Sprintf("u%03d", i), base.Add(time.Duration(i)*time.Hour), base.Add(time.Duration(i)*time.Hour)
		m.Files = make([]manifest.FileEntry, 0, len(res.Manifest.Files)+i+1)
		gone := map[string]bool{}
		for j := 2; j <= i; j++ {
			gone[fmt.Sprintf("f/%06d", j)] = true
		}
		for _, f := range res.Manifest.Files {
			if !gone[f.Path[len(res.Manifest.SourcePath)+1:]] {
				m.Files = append(m.Files, f)
			}
		}
		m.Files = append(m.Files, direct(fmt.Sprintf("%s/hot/changing-%03d", root, i), []byte(fmt.Sprintf("changing, version %d\n", i))))
		m.Files[len(m.Files)-1].Path = res.Manifest.SourcePath + "/hot/changing"
		for j := 2; j <= i; j++ {
			m.Files = append(m.Files, direct(fmt.Sprintf("%s/hot/added-%03d", root, j), []byte(fmt.Sprintf("added in %d\n", j))))
		}
		m.TotalFiles = int64(len(m.Files))
		js, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
		zw.Write(js)
		zw.Close()
		key := fmt.Sprintf("ocean/v/%s/uploads/u%03d/manifest.json.gz", id(i), i)
		put(key, gz.Bytes())
		manBytes += int64(gz.Len())
		mans = append(mans, key)
	}
	res = nil // only the store holds the versions now
	writeObject(t, dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, id(nv), mans[nv-1], id(nv-1), nf))
	t.Logf("built %d versions of %d files in %v (manifests %.1f MB gzip in all)", nv, nf, time.Since(t0).Round(time.Millisecond), float64(manBytes)/1e6)

	store := &byteStore{countStore: newCountStore(backend.NewFileStore(dir))}
	if v := os.Getenv("WHARF_HIST_LATENCY"); v != "" {
		if store.latency, err = time.ParseDuration(v); err != nil {
			t.Fatalf("WHARF_HIST_LATENCY: %v", err)
		}
	}
	ahead := envInt("WHARF_HIST_AHEAD", historyOpenAhead)
	t.Logf("store latency %v, versions opened %d at a time", store.latency, ahead)
	var opts archiveview.Options
	if os.Getenv("WHARF_HIST_INDEX_CACHE") == "1" {
		opts.IndexCache = archiveview.DirIndexCache{Dir: t.TempDir()}
	}
	newManager := func() *Manager {
		return NewManager(Config{Store: store, Options: opts, Aliases: []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}}, WaitOpen: true,
			RetireGrace: time.Hour, OpenWait: 30 * time.Minute, OpenTimeout: 10 * time.Minute, historyAhead: ahead})
	}
	cm := newManager()
	defer cm.CloseAll()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")

	// Heap: after a GC before the build, the peak sampled during it, and
	// what stays (the history held) after a GC.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	before, bytes0 := store.counts(), store.bytes.Load()
	stopProf := profile(t, "first")
	t0 = time.Now()
	h, _, err := cm.History(ctx, "ocean", a, true)
	took := time.Since(t0)
	stopProf()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	after := store.counts()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	dh := h.(*DatasetHistory)
	_, idxPeak, _ := cm.IndexMemory()
	t.Logf("history build: %d versions, %d keys, %d key versions, ended %q", len(dh.versions), len(dh.keys), len(dh.vers), dh.ended)
	t.Logf("history build: %v; requests: list %d, get %d, stat %d, range %d; bytes read %.1f MB",
		took.Round(time.Millisecond), after["list"]-before["list"], after["get"]-before["get"], after["stat"]-before["stat"],
		after["range"]-before["range"], float64(store.bytes.Load()-bytes0)/1e6)
	t.Logf("heap: in use before %.1f MB (the served version's index included), peak during the build %.1f MB, retained with the history %.1f MB; index budget peak %.1f MB; the history's own estimate (Bytes) %.1f MB",
		float64(heap0)/1e6, float64(peak.Load())/1e6, (float64(ms.HeapInuse)-float64(heap0))/1e6, float64(idxPeak)/1e6, float64(dh.Bytes())/1e6)

	if opts.IndexCache != nil {
		// Again in a new manager (a restart, or another replica sharing
		// the cache): every version from its index file.
		cm2 := newManager()
		defer cm2.CloseAll()
		if err := cm2.Scan(ctx, true); err != nil {
			t.Fatal(err)
		}
		a2 := bucketArchive(t, cm2, "ocean")
		before, bytes0 := store.counts(), store.bytes.Load()
		stopProf := profile(t, "cached")
		t0 := time.Now()
		if _, _, err := cm2.History(ctx, "ocean", a2, true); err != nil {
			t.Fatal(err)
		}
		stopProf()
		after := store.counts()
		t.Logf("history build from the index cache: %v; requests: list %d, get %d, stat %d; bytes read %.1f MB",
			time.Since(t0).Round(time.Millisecond), after["list"]-before["list"], after["get"]-before["get"], after["stat"]-before["stat"],
			float64(store.bytes.Load()-bytes0)/1e6)
	}

	// Correctness at this size: hot/changing has a version per published
	// version, f/000002 a delete marker over version 1's, f/099999 one.
	for _, c := range []struct {
		key  string
		want int
	}{{"hot/changing", nv - 1}, {"f/000002", 2}, {fmt.Sprintf("f/%06d", nf-1), 1}, {"hot/added-002", 1}} {
		r, err := h.ListVersions(archiveview.VersionListParams{Prefix: c.key, MaxKeys: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range r.Entries {
			if e.Version.Key == c.key {
				n++
			}
		}
		if n != c.want {
			t.Errorf("%s: %d versions, want %d", c.key, n, c.want)
		}
	}

	// A full ListObjectVersions walk, 1000 a page.
	t0 = time.Now()
	p := archiveview.VersionListParams{MaxKeys: 1000}
	entries, pages := 0, 0
	for {
		r, err := h.ListVersions(p)
		if err != nil {
			t.Fatal(err)
		}
		entries += len(r.Entries)
		pages++
		if !r.Truncated {
			break
		}
		p.KeyMarker, p.VersionIDMarker = r.NextKeyMarker, r.NextVersionIDMarker
	}
	t.Logf("a full listing of the versions: %d entries in %d pages, %v", entries, pages, time.Since(t0).Round(time.Millisecond))
	if path := os.Getenv("WHARF_HIST_DUMP"); path != "" {
		var out bytes.Buffer
		fmt.Fprintf(&out, "versions %v\nended %s\n", dh.Versions(), dh.Ended())
		p := archiveview.VersionListParams{MaxKeys: 1000}
		for {
			r, err := h.ListVersions(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range r.Entries {
				v := e.Version
				fmt.Fprintf(&out, "%s %s latest=%v del=%v size=%d etag=%s sha=%s mod=%s ctype=%s class=%s\n", v.Key, v.VersionID, v.IsLatest, v.DeleteMarker,
					v.Size, v.ETag, v.SHA256, v.ModTime.UTC().Format(time.RFC3339Nano), v.ContentType, v.Class)
			}
			if !r.Truncated {
				break
			}
			p.KeyMarker, p.VersionIDMarker = r.NextKeyMarker, r.NextVersionIDMarker
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A versionId= read of an old version: it opens that version again.
	before = store.counts()
	t0 = time.Now()
	v, ok, err := h.Lookup(ctx, "f/000050", id(max(2, nv-10)))
	if err != nil || !ok {
		t.Fatalf("lookup: %v %v", ok, err)
	}
	t.Logf("versionId= lookup of an unchanged key as of an old version: %v, requests %v", time.Since(t0).Round(time.Millisecond), diffCounts(before, store.counts()))
	if v.Archive == nil {
		// f/000050 never changed: its bytes are the served version's.
		t.Logf("(served from the current version's archive)")
	}
	before = store.counts()
	t0 = time.Now()
	v, ok, err = h.Lookup(ctx, "hot/changing", id(max(2, nv-10)))
	if err != nil || !ok || v.Archive == nil {
		t.Fatalf("lookup: %v %v", ok, err)
	}
	t.Logf("versionId= lookup of hot/changing as of version %d (opening that version): %v, requests %v", max(2, nv-10), time.Since(t0).Round(time.Millisecond), diffCounts(before, store.counts()))
}

func diffCounts(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
