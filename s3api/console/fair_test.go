package console_test

import (
	"context"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
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

// TestConsoleReadsChargedToVisitor: a console visitor's downloads are
// charged to the visitor's share of the read limits (chunkio.WithClient,
// the client s3api.ClientKey names, as for its S3 requests), so one
// visitor who opens downloads and never reads them holds at most its
// share of the stream decoders; another client still reads. Before, the
// console's reads carried no client: the stalled visitor took every
// decoder and the other client's GET waited out the memory wait (503).
func TestConsoleReadsChargedToVisitor(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	big := make([]byte, 48<<20)
	rand.New(rand.NewSource(3)).Read(big)
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"big.bin": big}, mtime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 64 << 20, NoSubFrames: true,
			PlainTar: func(string) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	// 200 MiB of read memory: 4 stream decoders, one per client (share 0.25).
	cache := chunkio.NewFrameCache(16<<20, chunkio.WithMemory(200<<20), chunkio.WithMemoryWait(700*time.Millisecond))
	a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "src", res.ManifestKey,
		archiveview.Options{Name: "giant", Cache: cache, Readahead: -1, MaxFrameBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, decs := cache.Limits().ClientShare(); decs != 1 {
		t.Fatalf("client share of %d decoders, the test wants 1", decs)
	}
	v, _ := auth.New(auth.Config{Anonymous: true})
	cat := catalog.NewStatic(map[string]*archiveview.Archive{"giant": a})
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.Nop(),
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: zerolog.Nop()})
		}}))
	defer srv.Close()

	// The stalled visitor, from 127.0.0.1: four downloads, bodies never read.
	stalled := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 10, ReadBufferSize: 4 << 10,
		DialContext: (&net.Dialer{}).DialContext}}
	var mu sync.Mutex
	var held []*http.Response
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := stalled.Get(srv.URL + "/-/console/dl/giant?key=big.bin")
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, resp)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	mu.Lock()
	n200 := 0
	for _, r := range held {
		if r.StatusCode == 200 {
			n200++
		}
	}
	mu.Unlock()
	t.Logf("stalled visitor: %d of 4 downloads started", n200)

	// Another client, from 127.0.0.2, reads the file through S3.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	resp, err := other.Get(srv.URL + "/giant/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil || len(got) != len(big) {
		t.Fatalf("the other client's GET, while one console visitor stalls %d downloads: %d, %d bytes, %v (%.200s)",
			n200, resp.StatusCode, len(got), err, got)
	}
	if n200 > 1 {
		t.Errorf("the stalled visitor holds %d streaming downloads: more than its share of 1 decoder", n200)
	}
	// The visitor's downloads past its share waited for it and were told
	// to retry (503 with Retry-After), as S3 answers a busy read, not that
	// the server failed.
	for _, r := range held {
		if r.StatusCode != 200 && (r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "") {
			t.Errorf("a download past the visitor's share: %d (Retry-After %q), want 503 with Retry-After", r.StatusCode, r.Header.Get("Retry-After"))
		}
	}
}
