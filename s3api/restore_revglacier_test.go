package s3api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// restoreFailStore is the Glacier model whose RestoreObject of one key
// fails (fail returns the error to answer, nil to pass the call on).
type restoreFailStore struct {
	*faults.GlacierStore
	mu    sync.Mutex
	fail  func(key string) error
	calls []string
}

func (s *restoreFailStore) Restore(ctx context.Context, bucket, key string, req backend.RestoreRequest) (backend.RestoreResult, error) {
	s.mu.Lock()
	s.calls = append(s.calls, key)
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		if err := fail(key); err != nil {
			return 0, err
		}
	}
	return s.GlacierStore.Restore(ctx, bucket, key, req)
}

func (s *restoreFailStore) restoreCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// splitArchivedFixture serves a chunked upload whose file big.bin is split
// over several chunks, every chunk GLACIER, through a restoreFailStore.
type splitArchivedFixture struct {
	store  *restoreFailStore
	g      *faults.Glacier
	chunks []string // the chunk keys holding big.bin, in file order
	reg    *prometheus.Registry
	logs   *syncWriter
	url    string
}

func newSplitArchivedFixture(t *testing.T) *splitArchivedFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string][]byte{"big.bin": randBytes(31, 100<<10), "small.txt": []byte("small\n")}
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 8 << 10, ChunkSize: 64 << 10, SplitSize: 40 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	var parts []int
	for i, e := range res.Manifest.Files {
		if strings.HasSuffix(e.Path, "big.bin") {
			parts = append(parts, i)
		}
	}
	sort.Slice(parts, func(i, j int) bool {
		return res.Manifest.Files[parts[i]].PartIndex < res.Manifest.Files[parts[j]].PartIndex
	})
	for _, i := range parts {
		k := "p/" + res.Manifest.Files[i].S3Key
		if len(chunks) == 0 || chunks[len(chunks)-1] != k {
			chunks = append(chunks, k)
		}
	}
	if len(chunks) < 2 {
		t.Fatalf("test setup: big.bin lies in %q; want two chunks or more", chunks)
	}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
	for _, k := range chunks {
		g.SetClass("src", k, backend.ClassGlacier, "")
	}
	store := &restoreFailStore{GlacierStore: g.Store(backend.NewFileStore(dir))}
	a, err := archiveview.Open(ctx, store, "src", res.ManifestKey,
		archiveview.Options{Name: testBucket, StorageClasses: true, RestoreTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}})
	if err != nil {
		t.Fatal(err)
	}
	f := &splitArchivedFixture{store: store, g: g, chunks: chunks, reg: prometheus.NewRegistry(), logs: &syncWriter{w: &bytes.Buffer{}}}
	srv := httptest.NewServer(s3api.New(s3api.Config{
		Catalog:      catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}),
		Verifier:     v,
		Logger:       zerolog.New(f.logs),
		Registerer:   f.reg,
		AllowRestore: true,
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// noRetryClient is an SDK client that sends each request once.
func noRetryClient(t *testing.T, url string) *s3.Client {
	c := newSDKClient(t, url, testAK, testSK)
	return s3.New(c.Options(), func(o *s3.Options) { o.RetryMaxAttempts = 1 })
}

// TestRestorePartialFailureLogged: a restore of a file over several
// archived chunks whose RestoreObject fails for a later chunk has started
// (and is billed for) the earlier ones: those are logged with the key
// that asked and counted in wharf_restores_total, and the client gets the
// store's failure (503 SlowDown). On the code before, the failure skipped
// the log line and the metrics: restores that cost money were invisible.
func TestRestorePartialFailureLogged(t *testing.T) {
	f := newSplitArchivedFixture(t)
	last := f.chunks[len(f.chunks)-1]
	f.store.fail = func(key string) error {
		if key == last {
			return &backend.Error{Op: "restore", Bucket: "src", Key: key, Err: backend.ErrUnavailable}
		}
		return nil
	}
	c := noRetryClient(t, f.url)
	status, err := restoreStatus(t, c, "big.bin", 2, types.TierBulk)
	if status != 503 || apiCode(err) != "SlowDown" {
		t.Fatalf("restore with a failing chunk: %d %v; want 503 SlowDown", status, err)
	}
	started := f.g.Started()
	if len(started) != len(f.chunks)-1 {
		t.Fatalf("test setup: started %v; want every chunk but the last", started)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"message":"restore"`) {
		t.Fatalf("restores started (%v) but no restore log line:\n%s", started, logs)
	}
	for _, k := range f.chunks[:len(f.chunks)-1] {
		if !strings.Contains(logs, `"key":"`+k+`"`) || !strings.Contains(logs, `"sent":true,"result":"started"`) {
			t.Fatalf("restore log does not name started chunk %s:\n%s", k, logs)
		}
	}
	if !strings.Contains(logs, `"access_key":"`+testAK+`"`) || !strings.Contains(logs, `"key":"`+last+`"`) {
		t.Fatalf("restore log does not name the key or the failed chunk %s:\n%s", last, logs)
	}
	if v := counterValue(t, f.reg, "wharf_restores_total", "Bulk"); v != float64(len(f.chunks)-1) {
		t.Fatalf("wharf_restores_total{tier=Bulk} = %v, want %d", v, len(f.chunks)-1)
	}

	// The client's retry sends only the chunk that failed.
	f.store.mu.Lock()
	f.store.fail = nil
	f.store.mu.Unlock()
	before := len(f.store.restoreCalls())
	if status, err := restoreStatus(t, c, "big.bin", 2, types.TierBulk); status != 202 {
		t.Fatalf("retry: %d %v", status, err)
	}
	if calls := f.store.restoreCalls()[before:]; len(calls) != 1 || calls[0] != last {
		t.Fatalf("retry sent %q; want only %s", calls, last)
	}
	if v := counterValue(t, f.reg, "wharf_restores_total", "Bulk"); v != float64(len(f.chunks)) {
		t.Fatalf("wharf_restores_total{tier=Bulk} = %v after the retry, want %d", v, len(f.chunks))
	}
}

// manyChunkArchivedServer serves a chunked upload whose big.bin lies in
// many GLACIER chunks (a part per chunk) and returns the server's URL,
// its log, the Glacier model and the number of chunks.
func manyChunkArchivedServer(t *testing.T) (url string, logs *syncWriter, g *faults.Glacier, chunks int) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string][]byte{"big.bin": randBytes(41, 96<<10), "small.txt": []byte("small\n")}
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 2 << 10, ChunkSize: 2 << 10, SplitSize: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	g = faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
	seen := map[string]bool{}
	for _, e := range res.Manifest.Files {
		if strings.HasSuffix(e.Path, "big.bin") && !seen[e.S3Key] {
			seen[e.S3Key] = true
			g.SetClass("src", "p/"+e.S3Key, backend.ClassGlacier, "")
		}
	}
	if len(seen) < 32 {
		t.Fatalf("test setup: big.bin lies in %d chunks, want 32 or more", len(seen))
	}
	a, err := archiveview.Open(ctx, g.Store(backend.NewFileStore(dir)), "src", res.ManifestKey,
		archiveview.Options{Name: testBucket, StorageClasses: true, RestoreTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}})
	if err != nil {
		t.Fatal(err)
	}
	logs = &syncWriter{w: &bytes.Buffer{}}
	srv := httptest.NewServer(s3api.New(s3api.Config{
		Catalog:      catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}),
		Verifier:     v,
		Logger:       zerolog.New(logs),
		Registerer:   prometheus.NewRegistry(),
		AllowRestore: true,
	}))
	t.Cleanup(srv.Close)
	return srv.URL, logs, g, len(seen)
}

// restoreLogLines returns the "restore" log lines in logs.
func restoreLogLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"message":"restore"`) {
			out = append(out, l)
		}
	}
	return out
}

// TestRestoreLogBounded: a restore's log line lists every chunk it sent a
// RestoreObject for (each is billed), but a repeated restore of a file
// whose chunks are all restoring already (409, nothing sent) lists only a
// few of them and counts the rest, so that a key with restore rights
// asking again and again for a file over thousands of chunks does not
// write a line of thousands of objects per request. On the code before,
// every answer, 409 included, logged every chunk of the file.
func TestRestoreLogBounded(t *testing.T) {
	url, logs, g, chunks := manyChunkArchivedServer(t)
	c := noRetryClient(t, url)
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("first restore: %d %v", status, err)
	}
	if n := len(g.Started()); n != chunks {
		t.Fatalf("%d restores started for %d chunks", n, chunks)
	}
	first := restoreLogLines(logs.String())
	if len(first) != 1 || strings.Count(first[0], `"sent":true`) != chunks {
		t.Fatalf("first restore's log: %d lines; want one listing the %d chunks sent:\n%s", len(first), chunks, first)
	}
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 409 || apiCode(err) != "RestoreAlreadyInProgress" {
		t.Fatalf("second restore: %d %v", status, err)
	}
	lines := restoreLogLines(logs.String())
	if len(lines) != 2 {
		t.Fatalf("%d restore log lines after two restores", len(lines))
	}
	second := lines[1]
	if n := strings.Count(second, `"key":"p/`); n > 16 {
		t.Fatalf("the repeated restore (nothing sent) logged %d objects (%d bytes); want at most 16 and a count", n, len(second))
	}
	if !strings.Contains(second, fmt.Sprintf(`"objects_unlisted":%d`, chunks-16)) || !strings.Contains(second, `"result":"in-progress"`) {
		t.Fatalf("the repeated restore's log does not count the objects it leaves out:\n%s", second)
	}
}

// TestRestoreExpeditedUnavailable: a store out of Expedited capacity
// (S3's 503 GlacierExpeditedRetrievalNotAvailable) is answered with that
// code, which tells a client to use another tier, not with SlowDown (which
// tells it to retry the same Expedited restore), as on the code before.
func TestRestoreExpeditedUnavailable(t *testing.T) {
	f := newSplitArchivedFixture(t)
	f.store.fail = func(key string) error {
		return &backend.Error{Op: "restore", Bucket: "src", Key: key,
			Err: fmt.Errorf("%w: %w", backend.ErrUnavailable, backend.ErrExpeditedUnavailable)}
	}
	c := noRetryClient(t, f.url)
	status, err := restoreStatus(t, c, "big.bin", 1, types.TierExpedited)
	if status != 503 || apiCode(err) != "GlacierExpeditedRetrievalNotAvailable" {
		t.Fatalf("Expedited restore without capacity: %d %v; want 503 GlacierExpeditedRetrievalNotAvailable", status, err)
	}
}
