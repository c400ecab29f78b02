package console_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/console"
)

// TestConsoleCountsInflightPerKey: a console visitor's requests take the
// same --max-inflight-per-key slots as its S3 requests (the client
// s3api.ClientKey names), so one client cannot escape the limit by
// asking through the console: with the limit 2 and two console downloads
// stalled, its next console page (with Retry-After) and its next
// GetObject are 503, and once they end the client is served again. Before,
// console requests took no slot at all.
func TestConsoleCountsInflightPerKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	big := bytes.Repeat([]byte("wharf console "), 5<<20) // 70 MiB, far past the socket buffers
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"big.bin": big, "small.txt": []byte("hi\n")}, mtime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	// Two buckets, each on its own frame cache: the two stalled downloads
	// must not wait for each other's share of one cache's read limits.
	open := func(name string) *archiveview.Archive {
		a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "src", res.ManifestKey,
			archiveview.Options{Name: name, Cache: chunkio.NewFrameCache(16 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	v, _ := auth.New(auth.Config{Anonymous: true})
	cat := catalog.NewStatic(map[string]*archiveview.Archive{"b": open("b"), "c": open("c")})
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.Nop(), MaxInflightPerKey: 2, SendTimeout: 2 * time.Second,
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: zerolog.Nop()})
		}}))
	defer srv.Close()

	stalled := &http.Client{Transport: &http.Transport{ReadBufferSize: 4 << 10}}
	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	for _, bucket := range []string{"b", "c"} {
		resp, err := stalled.Get(srv.URL + "/-/console/dl/" + bucket + "?key=big.bin")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			t.Fatalf("stalled download from %s: %d", bucket, resp.StatusCode)
		}
		held = append(held, resp) // body never read
	}
	status := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for _, p := range []string{"/-/console/", "/-/console/f/b?key=small.txt", "/b/small.txt"} {
		// (s3api's own SlowDown for the limit carries no Retry-After.)
		if code, ra := status(p); code != http.StatusServiceUnavailable || ra == "" && strings.HasPrefix(p, "/-/") {
			t.Errorf("GET %s with 2 of 2 slots held by console downloads: %d (Retry-After %q), want 503 (console: with Retry-After)", p, code, ra)
		}
	}
	for _, r := range held {
		r.Body.Close()
	}
	held = nil
	stalled.CloseIdleConnections()
	// The slots come back when the aborted downloads' handlers return.
	for _, p := range []string{"/-/console/", "/b/small.txt"} {
		ok := false
		for i := 0; i < 100 && !ok; i++ {
			code, _ := status(p)
			ok = code == 200
			if !ok {
				waitABit()
			}
		}
		if !ok {
			t.Errorf("GET %s after the downloads ended: still refused", p)
		}
	}
}

func waitABit() { <-time.After(20 * time.Millisecond) }
