package s3api_test

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"
)

// benchKeys is the archive size for BenchmarkS3API: WHARF_BENCH_KEYS or
// 1,000,000.
func benchKeys(b *testing.B) int {
	if s := os.Getenv("WHARF_BENCH_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2000 {
			b.Fatalf("WHARF_BENCH_KEYS=%q: want an integer >= 2000", s)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkS3API measures, on one archive of N keys written by cargopack
// (1,000,000 by default; WHARF_BENCH_KEYS overrides), the latency of
// ListObjectsV2 pages (first page, a middle page by continuation token, a
// prefix probe with max-keys=1 — checklist 13) and warm HeadObject and
// 4 KiB GetObject throughput, all through a real HTTP server.
//
//	go test ./s3api -run '^$' -bench BenchmarkS3API -benchtime 2s
func BenchmarkS3API(b *testing.B) {
	n := benchKeys(b)
	files := make(map[string][]byte, n+16)
	small := []byte("x")
	for i := 0; i < n; i++ {
		files[fmt.Sprintf("d%03d/s%02d/f%07d", i%1000, (i/1000)%100, i)] = small
	}
	hot := randBytes(9, 4096)
	for i := 0; i < 16; i++ {
		files[fmt.Sprintf("hot/f%02d", i)] = hot
	}
	start := time.Now()
	a, _ := openArchive(b, files, fixtureOpts{frameSize: 4 << 20})
	b.Logf("packed and opened %d keys in %v", len(files), time.Since(start).Round(time.Millisecond))
	files = nil
	f := newFixtureFromArchive(b, a, fixtureOpts{anonymous: true})
	client := f.srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64

	get := func(b *testing.B, path string, hdr http.Header) []byte {
		req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode/100 != 2 {
			b.Fatalf("GET %s: %d %v %.300s", path, resp.StatusCode, err, body)
		}
		return body
	}
	// A token pointing into the middle of the key space.
	mid := fmt.Sprintf("d%03d/s%02d/f%07d", 500, 0, 500)
	var page struct{ NextContinuationToken string }
	if err := xml.Unmarshal(get(b, "/bkt?list-type=2&max-keys=1&start-after="+url.QueryEscape(mid), nil), &page); err != nil || page.NextContinuationToken == "" {
		b.Fatalf("no middle token: %v", err)
	}

	for _, bc := range []struct {
		name string
		path string
	}{
		{"ListV2-first-page-1000", "/bkt?list-type=2"},
		{"ListV2-middle-page-1000-by-token", "/bkt?list-type=2&continuation-token=" + url.QueryEscape(page.NextContinuationToken)},
		{"ListV2-prefix-probe-max-keys-1", "/bkt?list-type=2&max-keys=1&delimiter=%2F&prefix=" + url.QueryEscape("d777/s42/")},
		{"ListV2-delimiter-top-level-1000", "/bkt?list-type=2&delimiter=%2F"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				get(b, bc.path, nil)
			}
		})
	}
	for _, bc := range []struct {
		name   string
		method string
	}{{"HeadObject-parallel", "HEAD"}, {"GetObject-4KiB-parallel", "GET"}} {
		b.Run(bc.name, func(b *testing.B) {
			get(b, "/bkt/hot/f00", nil) // warm the frame cache
			if bc.method == "GET" {
				b.SetBytes(4096)
			}
			b.ResetTimer()
			t0 := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					req, _ := http.NewRequest(bc.method, fmt.Sprintf("%s/bkt/hot/f%02d", f.srv.URL, i%16), nil)
					i++
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					nb, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || (bc.method == "GET" && nb != 4096) {
						b.Errorf("status %d, %d bytes", resp.StatusCode, nb)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "req/s")
		})
	}
}
