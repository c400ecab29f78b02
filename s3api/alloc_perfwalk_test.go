package s3api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// discardWriter is a ResponseWriter that keeps the header and drops the
// body, so that an allocation count is the handler's own.
type discardWriter struct {
	h      http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(code int)        { d.status = code }

// TestSmallObjectAllocs bounds the allocations of a warm anonymous HEAD
// and GET of a small file (the tree walk's request), counted with the
// request's own construction: every response header set under a
// non-canonical name (x-amz-request-id, x-amz-storage-class, ...) costs an
// allocation to canonicalise, on every request.
func TestSmallObjectAllocs(t *testing.T) {
	files := map[string][]byte{}
	for i := 0; i < 8; i++ {
		files[fmt.Sprintf("d/f%d", i)] = randBytes(int64(i), 32<<10)
	}
	f := newFixture(t, files, fixtureOpts{anonymous: true, frameSize: 4 << 20})
	h := f.srv.Config.Handler
	for _, tc := range []struct {
		method string
		max    float64 // the old code: HEAD 60, GET 89 (go1.26)
		// maxRace is the bound under the race detector, whose build
		// allocates more for the same code: the old code (f56d53e^) made
		// HEAD 62, GET 91 there, this code 58 and 74.
		maxRace float64
	}{{http.MethodHead, 56, 60}, {http.MethodGet, 85, 87}} {
		t.Run(tc.method, func(t *testing.T) {
			serve := func() {
				w := &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, httptest.NewRequest(tc.method, "/bkt/d/f3", nil))
				if w.status != http.StatusOK {
					t.Fatalf("%s: status %d", tc.method, w.status)
				}
				if got := w.h.Get("X-Amz-Request-Id"); len(got) != 16 {
					t.Fatalf("%s: request id %q", tc.method, got)
				}
			}
			serve() // the frame cached
			limit := tc.max
			if raceBuild {
				limit = tc.maxRace
			}
			if n := testing.AllocsPerRun(50, serve); n > limit {
				t.Errorf("%s of a warm 32 KiB file: %.0f allocations, want at most %.0f (race build: %v)", tc.method, n, limit, raceBuild)
			}
		})
	}
}
