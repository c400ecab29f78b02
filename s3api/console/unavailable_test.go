package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// TestFilePageStoreUnavailable: when the store is unavailable (a 503
// SlowDown, a reset) for the storage-class HEAD a file page needs, the
// page is 503 with Retry-After, "try again", as S3 answers the same
// failure, not a 500 that says the server failed.
func TestFilePageStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	res := pack(t, dir, map[string][]byte{"f.bin": []byte("bytes\n")}, cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", Direct: true})
	g := faults.NewGlacier(faults.GlacierConfig{})
	g.SetClass("src", "p/uploads/u1/files/f.bin", backend.ClassGlacier, "")
	var down atomic.Bool
	st := faults.NewFaulty(g.Store(backend.NewFileStore(dir)), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if down.Load() && r.Op == "stat" {
			return faults.Fault{Kind: faults.FaultError}
		}
		return faults.Fault{}
	}})
	a, err := archiveview.Open(ctx, st, "src", res.ManifestKey, archiveview.Options{Name: "b", StorageClasses: true, RestoreTTL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	time.Sleep(10 * time.Millisecond) // the cached restore state is stale: the page asks again
	down.Store(true)
	v, _ := auth.New(auth.Config{Anonymous: true})
	cat := catalog.NewStatic(map[string]*archiveview.Archive{"b": a})
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.Nop(),
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: zerolog.Nop()})
		}}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/-/console/f/b?key=f.bin")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if st.Requests("stat") == 0 {
		t.Fatal("the file page asked the store nothing: the test does not exercise the failure")
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "try again") {
		t.Errorf("file page with the store unavailable: %d (Retry-After %q):\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}
