package s3api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
)

// fairServer serves two archives on one FrameCache through a real wharf
// HTTP server over a FileStore: bucket "giant" holds big.bin as one
// giant zstd frame, bucket "other" a small framed file.
func fairServer(t *testing.T, cache *chunkio.FrameCache, big, small []byte) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	open := func(name string, files map[string][]byte, opt cargopack.Options, o archiveview.Options) *archiveview.Archive {
		dir := t.TempDir()
		opt.Bucket, opt.Prefix, opt.UploadID, opt.Created = "src", "p", "u1", testMTime
		opt.PlainTar = func(string) bool { return false } // zstd even for random bytes
		res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime), opt)
		if err != nil {
			t.Fatal(err)
		}
		o.Name, o.Cache, o.Readahead = name, cache, -1
		a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "src", res.ManifestKey, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	giant := open("giant", map[string][]byte{"big.bin": big},
		cargopack.Options{FrameSize: 32 << 20, NoSubFrames: true}, archiveview.Options{MaxFrameBytes: 1 << 20})
	other := open("other", map[string][]byte{"small.bin": small}, cargopack.Options{FrameSize: 256 << 10}, archiveview.Options{})
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3api.New(s3api.Config{
		Catalog:    catalog.NewStatic(map[string]*archiveview.Archive{"giant": giant, "other": other}),
		Verifier:   v,
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFairRangedReadersHTTP: 64 concurrent ranged GETs of one giant frame
// through a wharf server each get their exact bytes (206) or 503 SlowDown
// with Retry-After, never a hang, and a GET of another bucket is answered
// within a second while they run. With memory to spare (4 GiB, wait 10 s)
// every reader is served; with a small budget and a short wait (40 MiB,
// 300 ms) some are refused, which shows the 503 mapping, and a reader
// whose first part went out but whose next part found no memory within the
// wait is aborted mid-body (the status was sent: a broken body, only right
// bytes before the break); the other bucket's GET, from the same client
// and so within the same client share, may then be refused too, but
// within the second. On the old code
// the first case hung (GET slots taken one at a time, held while waiting
// for the rest, no deadline) and the second answered 503 without
// Retry-After.
func TestFairRangedReadersHTTP(t *testing.T) {
	big := randBytes(11, 16<<20)
	small := randBytes(12, 1<<20)
	for _, tc := range []struct {
		name      string
		memory    int64
		wait      time.Duration
		want503   bool
		minServed int // readers served whole
	}{
		{"plenty", 4 << 30, 10 * time.Second, false, 64},
		{"scarce", 40 << 20, 300 * time.Millisecond, true, 0}, // how many of the 64 fit in 300 ms depends on the machine (0-25 seen); this case shows the 503 mapping and that none hangs
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := chunkio.NewFrameCache(16<<20, chunkio.WithMemory(tc.memory), chunkio.WithMemoryWait(tc.wait))
			srv := fairServer(t, cache, big, small)
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 200}}
			get := func(path string, off, n int64) (int, http.Header, []byte, error) {
				req, err := http.NewRequest("GET", srv.URL+path, nil)
				if err != nil {
					return 0, nil, nil, err
				}
				if n > 0 {
					req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
				}
				resp, err := client.Do(req)
				if err != nil {
					return 0, nil, nil, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return resp.StatusCode, resp.Header, b, err
			}
			const readers, span = 64, 1 << 20
			var mu sync.Mutex
			served, refused, aborted := 0, 0, 0
			var wg sync.WaitGroup
			for i := range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					off := int64(i) * (int64(len(big)) - span) / readers
					code, h, b, err := get("/giant/big.bin", off, span)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case tc.want503 && code == http.StatusPartialContent && errors.Is(err, io.ErrUnexpectedEOF) &&
						len(b) < span && bytes.Equal(b, big[off:off+int64(len(b))]):
						aborted++
					case err != nil:
						t.Errorf("reader %d: %d, %d bytes: %v", i, code, len(b), err)
					case code == http.StatusPartialContent && bytes.Equal(b, big[off:off+span]):
						served++
					case code == http.StatusServiceUnavailable && strings.Contains(string(b), "<Code>SlowDown</Code>"):
						refused++
						if h.Get("Retry-After") == "" {
							t.Errorf("reader %d: 503 SlowDown without Retry-After", i)
						}
					default:
						t.Errorf("reader %d: %d, %d bytes: %.200s", i, code, len(b), b)
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			time.Sleep(200 * time.Millisecond)
			start := time.Now()
			otherDone := make(chan error, 1)
			go func() {
				code, _, b, err := get("/other/small.bin", 0, 0)
				if tc.want503 && err == nil && code == http.StatusServiceUnavailable && strings.Contains(string(b), "<Code>SlowDown</Code>") {
					t.Logf("the other bucket's GET refused 503 SlowDown (same client, scarce memory)")
				} else if err == nil && (code != http.StatusOK || !bytes.Equal(b, small)) {
					err = fmt.Errorf("status %d, %d bytes", code, len(b))
				}
				otherDone <- err
			}()
			select {
			case err := <-otherDone:
				if err != nil {
					t.Errorf("the other bucket's GET: %v", err)
				}
				t.Logf("the other bucket's GET answered in %v", time.Since(start).Round(time.Millisecond))
			case <-time.After(time.Second):
				t.Errorf("the other bucket's GET waited more than a second")
			}
			select {
			case <-done:
			case <-time.After(45 * time.Second):
				t.Fatalf("ranged GETs still unanswered after 45 s")
			}
			t.Logf("%d readers: %d served exact, %d refused 503 SlowDown, %d aborted mid-body after right bytes", readers, served, refused, aborted)
			if served < tc.minServed {
				t.Errorf("%d served, want at least %d", served, tc.minServed)
			}
			if tc.want503 && refused == 0 {
				t.Errorf("no reader refused at %d bytes of memory: the 503 mapping is not exercised", tc.memory)
			}
		})
	}
}
