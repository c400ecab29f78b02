package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// gateStore holds every manifest GET until the gate opens (or the request's
// context ends), counting GETs per key and the most in flight at once.
type gateStore struct {
	backend.Store
	gate chan struct{}

	mu       sync.Mutex
	inflight int
	most     int
	gets     map[string]int
}

func newGateStore(s backend.Store) *gateStore {
	return &gateStore{Store: s, gate: make(chan struct{}), gets: map[string]int{}}
}

func (g *gateStore) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	if strings.Contains(key, "/manifest.") {
		g.mu.Lock()
		g.gets[key]++
		g.inflight++
		g.most = max(g.most, g.inflight)
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.inflight--
			g.mu.Unlock()
		}()
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, backend.ObjectInfo{}, ctx.Err()
		}
	}
	return g.Store.Get(ctx, bucket, key)
}

func (g *gateStore) state() (inflight, most int, gets map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := make(map[string]int, len(g.gets))
	for k, v := range g.gets {
		c[k] = v
	}
	return g.inflight, g.most, c
}

// packLake writes n uploads u00.. under lake/base in dir, and a broken
// upload whose manifest is not a manifest.
func packLake(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		packUpload(t, dir, fmt.Sprintf("u%02d", i), time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC))
	}
	bad := filepath.Join(dir, "lake", "base", "uploads", "broken", "manifest.json.gz")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("this is not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func packUpload(t *testing.T, dir, id string, created time.Time) {
	t.Helper()
	files := map[string][]byte{"id.txt": []byte(id + "\n")}
	if _, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, created),
		cargopack.Options{Bucket: "lake", Prefix: "base", UploadID: id, Created: created, FrameSize: 4 << 10}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(slowdown * 20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestManagerParallelOpen: the initial scan lists every bucket at once and
// returns while the archives open in the background, never more than
// OpenConcurrency at a time; a request for a bucket still opening waits,
// then gets ErrOpening, and one that waits while it opens gets the
// archive; a broken upload is isolated (its bucket answers its error,
// naming the manifest, and the others open); Ready turns true when every
// open has ended; a rescan re-reads no manifest it has, and opens only a
// new upload.
func TestManagerParallelOpen(t *testing.T) {
	dir := t.TempDir()
	const n, bound = 24, 4
	packLake(t, dir, n)
	gs := newGateStore(backend.NewFileStore(dir))
	cm := NewManager(Config{Store: gs, Discover: []string{"s3://lake/base"}, OpenConcurrency: bound,
		OpenWait: 300 * time.Millisecond, Logger: zerolog.Nop(), Options: archiveview.Options{}})
	defer cm.CloseAll()
	ctx := context.Background()

	scanned := make(chan error, 1)
	go func() { scanned <- cm.Scan(ctx, true) }()
	select {
	case err := <-scanned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the initial scan waited for the opens")
	}
	var names []string
	cm.Catalog().EachBucket(func(name string, _ time.Time) { names = append(names, name) })
	if len(names) != n+1 || names[0] != "broken" || names[1] != "u00" {
		t.Fatalf("buckets listed while opening: %v", names)
	}
	if cm.Ready() {
		t.Fatal("ready while every open is held")
	}
	waitFor(t, "the bound to fill", func() bool { in, _, _ := gs.state(); return in == bound })

	start := time.Now()
	a, ok, err := cm.Catalog().Bucket(ctx, "u00")
	if !ok || a != nil || !errors.Is(err, archiveview.ErrOpening) {
		t.Fatalf("bucket still opening: %v %v %v", a, ok, err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("answered ErrOpening after %s, want the 300ms wait", waited)
	}
	if !strings.Contains(err.Error(), "s3://lake/base/uploads/u00/manifest.json.gz") {
		t.Errorf("ErrOpening does not name the manifest: %v", err)
	}
	if _, ok, _ := cm.Catalog().Bucket(ctx, "nope"); ok {
		t.Error("an unknown bucket is served")
	}
	waiter := make(chan error, 1)
	go func() {
		a, ok, err := cm.Catalog().Bucket(ctx, "u01")
		if err == nil && (!ok || a == nil || a.Info().UploadID != "u01") {
			err = fmt.Errorf("got %v %v", a, ok)
		}
		waiter <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if p, total := cm.Opening(); p != n+1 || total != n+1 {
		t.Errorf("Opening() = %d of %d, want all %d", p, total, n+1)
	}
	close(gs.gate)
	if err := <-waiter; err != nil {
		t.Errorf("a request waiting while its bucket opened: %v", err)
	}
	waitFor(t, "ready", cm.Ready)
	_, most, gets := gs.state()
	if most != bound {
		t.Errorf("at most %d manifest GETs in flight, want the bound %d", most, bound)
	}
	if len(gets) != n+1 {
		t.Errorf("%d manifests read, want %d", len(gets), n+1)
	}
	for i := range n {
		name := fmt.Sprintf("u%02d", i)
		a, ok, err := cm.Catalog().Bucket(ctx, name)
		if err != nil || !ok || a.Info().UploadID != name {
			t.Fatalf("%s after ready: %v %v", name, ok, err)
		}
	}
	_, ok, err = cm.Catalog().Bucket(ctx, "broken")
	if !ok || err == nil || errors.Is(err, archiveview.ErrOpening) || !strings.Contains(err.Error(), "s3://lake/base/uploads/broken/manifest.json.gz") {
		t.Errorf("broken upload: served %v, %v", ok, err)
	}
	page := cm.Page()
	states := map[string]int{}
	for _, b := range page.Buckets {
		states[b.State]++
		if b.Bucket == "broken" && (b.State != "failed" || !strings.Contains(b.Error, "manifest")) {
			t.Errorf("/-/archives broken entry: %+v", b)
		}
	}
	if states["open"] != n || states["failed"] != 1 {
		t.Errorf("/-/archives states %v", states)
	}

	// A rescan reuses every open archive, and the broken one's failure
	// (its manifest failed to parse and is listed unchanged): no manifest
	// GET. A new upload is the only new open.
	before := map[string]*archiveview.Archive{}
	for k, v := range cm.Catalog().Map() {
		before[k] = v
	}
	packUpload(t, dir, "u99", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	_, _, gets2 := gs.state()
	for k, v := range gets2 {
		want := gets[k]
		if strings.Contains(k, "/u99/") {
			want++
		}
		if v != want {
			t.Errorf("rescan: %s read %d times, want %d", k, v, want)
		}
	}
	after := cm.Catalog().Map()
	for k, a := range before {
		if after[k] != a {
			t.Errorf("rescan replaced the unchanged %s", k)
		}
	}
	if a := after["u99"]; a == nil || a.Info().UploadID != "u99" {
		t.Errorf("the new upload is not served after the rescan: %v", a)
	}
}

// TestManagerAliasSharesOpens: an alias over a discovered root resolves to
// the same archive as the upload's own bucket, opened once, while wharf is
// already serving; WaitOpen makes the initial scan return only when all
// is open.
func TestManagerAliasSharesOpens(t *testing.T) {
	dir := t.TempDir()
	for i, id := range []string{"a1", "a2", "a3"} {
		packUpload(t, dir, id, time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC))
	}
	for _, wait := range []bool{false, true} {
		gs := newGateStore(backend.NewFileStore(dir))
		close(gs.gate)
		cm := NewManager(Config{Store: gs, Discover: []string{"s3://lake/base"}, Aliases: []Alias{{Name: "latest", Target: "s3://lake/base@latest"}},
			WaitOpen: wait, Logger: zerolog.Nop()})
		if err := cm.Scan(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		if wait && !cm.Ready() {
			t.Error("WaitOpen: the initial scan returned before every open ended")
		}
		a, ok, err := cm.Catalog().Bucket(context.Background(), "latest")
		if err != nil || !ok {
			t.Fatalf("latest: %v %v", ok, err)
		}
		own, _, _ := cm.Catalog().Bucket(context.Background(), BucketName("a3"))
		if a != own || a.Info().UploadID != "a3" {
			t.Errorf("wait %v: the alias serves %s, not the newest upload's own archive", wait, a.Info().UploadID)
		}
		waitFor(t, "ready", cm.Ready)
		for k, v := range func() map[string]int { _, _, g := gs.state(); return g }() {
			if v != 1 {
				t.Errorf("wait %v: %s read %d times", wait, k, v)
			}
		}
		if src := cm.Page(); !strings.Contains(fmt.Sprint(src.Buckets), "alias s3://lake/base@latest -> s3://lake/base/uploads/a3/manifest.json.gz") {
			t.Errorf("wait %v: alias source not reported: %+v", wait, src.Buckets)
		}
		for name, want := range map[string]Kind{"latest": KindAlias, BucketName("a1"): KindDiscovered, "nosuch": ""} {
			if k, ok := cm.Kind(name); k != want || ok != (want != "") {
				t.Errorf("Kind(%s) = %q %v, want %q", name, k, ok, want)
			}
		}
		cm.CloseAll()
	}
}

// TestManagerCloseWhileOpening: shutting down while archives are still
// opening cancels the opens and returns.
func TestManagerCloseWhileOpening(t *testing.T) {
	dir := t.TempDir()
	packLake(t, dir, 6)
	gs := newGateStore(backend.NewFileStore(dir)) // never opened
	cm := NewManager(Config{Store: gs, Discover: []string{"s3://lake/base"}, OpenConcurrency: 2, Logger: zerolog.Nop()})
	if err := cm.Scan(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "opens in flight", func() bool { in, _, _ := gs.state(); return in == 2 })
	done := make(chan struct{})
	go func() { cm.CloseAll(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("CloseAll hangs on opens in flight")
	}
	if cm.Ready() {
		t.Error("ready after a shutdown that cancelled the opens")
	}
}

// TestManagerRefreshesStorageClasses: with Options.StorageClasses, opening
// an archive lists its upload prefix once, every rescan lists it again (so
// a class changed behind wharf's back is seen), and nothing is listed on
// the read path.
func TestManagerRefreshesStorageClasses(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a.txt": []byte("hello archive"), "b.txt": []byte("more bytes here")}
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "lake", Prefix: "p", UploadID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	g := faults.NewGlacier(faults.GlacierConfig{})
	faulty := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	cm := NewManager(Config{
		Store:    g.Store(faulty),
		Options:  archiveview.Options{StorageClasses: true},
		Archives: []Source{{Name: "arch", ManifestURL: "s3://lake/" + res.ManifestKey}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := cm.OpenStatic(ctx); err != nil {
		t.Fatal(err)
	}
	defer cm.CloseAll()
	if n := faulty.Requests("list"); n != 1 {
		t.Fatalf("%d listings at open, want 1 (one upload prefix)", n)
	}
	if k, ok := cm.Kind("arch"); k != KindArchive || !ok {
		t.Errorf("Kind(arch) = %q %v, want %q", k, ok, KindArchive)
	}
	a, _, _ := cm.Catalog().Bucket(ctx, "arch")
	f, _ := a.Stat("a.txt")
	if c := a.StorageClass(f); c != backend.ClassStandard {
		t.Fatalf("class before: %s", c)
	}
	rc, err := a.Open(ctx, f, 0, f.Size)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if n := faulty.Requests("list"); n != 1 {
		t.Fatalf("the read path listed (%d listings)", n)
	}

	g.SetPrefixClass("lake", "p/uploads/u1/", backend.ClassGlacier, "")
	trigger := make(chan string)
	scanned := make(chan error, 1)
	go cm.RescanLoop(ctx, 0, trigger, func(err error) { scanned <- err })
	trigger <- "test"
	if err := <-scanned; err != nil {
		t.Fatal(err)
	}
	// The refresh ran before the scan's callback.
	if c := a.StorageClass(f); c != backend.ClassGlacier {
		t.Fatalf("class after the rescan: %s", c)
	}
	if n := faulty.Requests("list"); n != 2 {
		t.Fatalf("%d listings after one rescan, want 2", n)
	}
}

// TestManagerSlowManifest: one manifest that downloads at 16 bytes per
// second (its whole body would take about a minute) neither holds the
// others nor readiness nor a rescan. The other buckets open at once; a
// request for the slow one gets ErrOpening (503 SlowDown) while it opens;
// a rescan started meanwhile returns at once, serves a new upload, and
// keeps the slow open running (its manifest is not read again); Ready
// turns true when the open times out (OpenTimeout), and the slow bucket
// then answers an error wrapping ErrOpenTimeout (500 InternalError). On
// the old code the rescan and readiness waited for the slow download.
func TestManagerSlowManifest(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		packUpload(t, dir, fmt.Sprintf("u%02d", i), time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC))
	}
	const slowKey = "base/uploads/u00/manifest.json.gz"
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if r.Op == "get" && r.Key == slowKey {
			return faults.Fault{Bandwidth: 16}
		}
		return faults.Fault{}
	}})
	gets := func(key string) int {
		n := 0
		for _, r := range store.Log() {
			if r.Op == "get" && r.Key == key {
				n++
			}
		}
		return n
	}
	const openTimeout = 2 * time.Second
	cm := NewManager(Config{Store: store, Discover: []string{"s3://lake/base"}, OpenTimeout: openTimeout,
		OpenWait: 50 * time.Millisecond, Logger: zerolog.Nop()})
	defer cm.CloseAll()
	ctx := context.Background()
	start := time.Now()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 5; i++ {
		name := fmt.Sprintf("u%02d", i)
		waitFor(t, name+" open", func() bool { a, _, _ := cm.Catalog().Bucket(ctx, name); return a != nil })
	}
	if took := time.Since(start); took > openTimeout/2 {
		t.Errorf("the other buckets opened after %s: they waited for the slow manifest", took)
	}
	if _, _, err := cm.Catalog().Bucket(ctx, "u00"); !errors.Is(err, archiveview.ErrOpening) {
		t.Fatalf("the slow bucket while opening: %v, want ErrOpening (503)", err)
	}
	if cm.Ready() {
		t.Fatal("ready while the slow open runs")
	}

	packUpload(t, dir, "u99", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	rescanned := time.Now()
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(rescanned); took > openTimeout/2 {
		t.Errorf("the rescan took %s: it waited for the slow open", took)
	}
	if a, _, err := cm.Catalog().Bucket(ctx, "u99"); err != nil || a == nil || a.Info().UploadID != "u99" {
		t.Errorf("the new upload after the rescan: %v %v", a, err)
	}
	if _, _, err := cm.Catalog().Bucket(ctx, "u00"); !errors.Is(err, archiveview.ErrOpening) {
		t.Errorf("the slow bucket after the rescan: %v, want still opening", err)
	}

	readyBy := time.Now().Add(openTimeout + 3*time.Second)
	for !cm.Ready() {
		if time.Now().After(readyBy) {
			t.Fatalf("not ready %s after start: the slow open has no deadline", time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, ok, err := cm.Catalog().Bucket(ctx, "u00")
	if !ok || !errors.Is(err, ErrOpenTimeout) || errors.Is(err, archiveview.ErrOpening) {
		t.Fatalf("the slow bucket after its deadline: %v %v, want ErrOpenTimeout", ok, err)
	}
	if !strings.Contains(err.Error(), "s3://lake/"+slowKey) {
		t.Errorf("the timeout does not name the manifest: %v", err)
	}
	if n := gets(slowKey); n != 1 {
		t.Errorf("the slow manifest was read %d times before its deadline, want 1 (the rescan reuses the open)", n)
	}
	for _, b := range cm.Page().Buckets {
		if want := map[bool]string{true: "failed", false: "open"}[b.Bucket == "u00"]; b.State != want {
			t.Errorf("/-/archives: %s is %s, want %s", b.Bucket, b.State, want)
		}
	}
}
