package s3api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/console"
)

// TestConsoleFilePageHeadsPerClient: the console's file page refreshes
// the file's restore states with backend HEADs (at most 32 a page), and
// these come out of the visitor's allowance (s3api.FreshHeads), the one
// its S3 HEADs, GETs and listings share (a visitor is the client its S3
// requests are). On the code before, the page took its 32 outside the
// allowance: a visitor reloading the page of a file over 48 archived
// chunks made 32 backend HEADs per view, without bound, where the same
// client's S3 HEADs were held to the allowance.
func TestConsoleFilePageHeadsPerClient(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string][]byte{"big.bin": randBytes(45, 96<<10)}
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 2 << 10, ChunkSize: 2 << 10, SplitSize: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
	for _, e := range res.Manifest.Files {
		g.SetClass("src", "p/"+e.S3Key, backend.ClassGlacier, "")
	}
	store := &statCountStore{GlacierStore: g.Store(backend.NewFileStore(dir))}
	a, err := archiveview.Open(ctx, store, "src", res.ManifestKey,
		archiveview.Options{Name: testBucket, StorageClasses: true, RestoreTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a})
	logs := &syncWriter{w: &bytes.Buffer{}}
	h := s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.New(logs), Registerer: prometheus.NewRegistry(),
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: zerolog.New(logs)})
		}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	page := srv.URL + "/-/console/f/" + testBucket + "?" + url.Values{"key": {"big.bin"}}.Encode()
	const views = 20
	before := store.stats.Load()
	for range views {
		resp, err := http.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "GLACIER") {
			t.Fatalf("file page: %d, want 200 naming GLACIER:\n%.500s", resp.StatusCode, body)
		}
	}
	total := store.stats.Load() - before
	if total < archiveview.MaxFreshHeads {
		t.Fatalf("test setup: %d views made %d backend HEADs, want at least %d (stale archived chunks)", views, total, archiveview.MaxFreshHeads)
	}
	// A few more than the burst: the allowance refills while the test runs.
	if limit := int64(s3api.StatusHeadsBurst + 8); total > limit {
		t.Errorf("%d views of a file page made %d backend HEADs; want at most %d (the visitor's allowance)", views, total, limit)
	}
}
