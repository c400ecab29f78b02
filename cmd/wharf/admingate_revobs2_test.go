package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stallWriter is a client that never reads its response: the handler's
// first Write blocks until release closes. entered is closed at that
// first Write (the handler holds its page there).
type stallWriter struct {
	header  http.Header
	code    int
	once    sync.Once
	entered chan struct{}
	release <-chan struct{}
}

func (w *stallWriter) Header() http.Header { return w.header }
func (w *stallWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *stallWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.code != http.StatusOK {
		return len(p), nil // a refusal is not held
	}
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return len(p), nil
}

// TestAdminPagesBounded: /metrics (every series, gathered and encoded per
// request) and /-/archives, /-/peers (the catalog's or ring's whole page)
// were served to any number of clients at once, each stalled reader
// holding its page until the send timeout. Now each group has a few turns
// (the pprof rule); a request beyond them is 503 with Retry-After at
// once, and the stalled ones hold no more than the turns.
func TestAdminPagesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wharf_test_series", Help: "test"}, []string{"n"})
	reg.MustRegister(g)
	for i := range 1000 {
		g.WithLabelValues(strings.Repeat("x", i%50) + string(rune('a'+i%26)) + time.Duration(i).String()).Set(float64(i))
	}
	var ready atomic.Bool
	ready.Store(true)
	for _, tc := range []struct {
		path string
		max  int
	}{
		{"/metrics", maxAdminScrapes},
		{"/-/peers", maxAdminPages},
	} {
		t.Run(tc.path, func(t *testing.T) {
			mux := adminMux(reg, &ready, nil, nil)
			const n = 8
			release := make(chan struct{})
			var done sync.WaitGroup
			writers := make([]*stallWriter, n)
			returned := make([]chan struct{}, n)
			for i := range n {
				writers[i] = &stallWriter{header: http.Header{}, entered: make(chan struct{}), release: release}
				returned[i] = make(chan struct{})
				done.Add(1)
				go func() {
					defer done.Done()
					defer close(returned[i])
					mux.ServeHTTP(writers[i], httptest.NewRequest(http.MethodGet, tc.path, nil))
				}()
			}
			// Each request either holds a page (blocked in Write) or has
			// been answered; wait for all to be one or the other.
			held, refused := 0, 0
			deadline := time.After(10 * time.Second)
			for i := range n {
				select {
				case <-writers[i].entered:
					held++
				case <-returned[i]:
					if writers[i].code == http.StatusServiceUnavailable && writers[i].header.Get("Retry-After") != "" {
						refused++
					} else {
						t.Errorf("request %d: answered %d (Retry-After %q) without stalling", i, writers[i].code, writers[i].header.Get("Retry-After"))
					}
				case <-deadline:
					t.Fatalf("request %d neither held a page nor was answered in 10 s", i)
				}
			}
			close(release)
			done.Wait()
			if held != tc.max || refused != n-tc.max {
				t.Errorf("%d stalled readers of %s: %d hold a page, %d refused; want %d held, %d refused 503",
					n, tc.path, held, refused, tc.max, n-tc.max)
			}
			// The turns are given back.
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("%s after the stalled readers left: %d, want 200", tc.path, rec.Code)
			}
		})
	}
}

// TestAdminStopTheWorldSpaced: a full goroutine dump (goroutine?debug=2)
// and a forced collection (heap?gc=1) stop or load the whole process;
// back to back they were served without limit. One is now served per
// minStopTheWorldGap; another within it is 503 with Retry-After, while a
// plain heap profile is still served.
func TestAdminStopTheWorldSpaced(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	for _, tc := range []struct{ first, second string }{
		{"/debug/pprof/heap?gc=1", "/debug/pprof/heap?gc=1"},
		{"/debug/pprof/goroutine?debug=2", "/debug/pprof/goroutine?debug=2"},
		{"/debug/pprof/heap?gc=1", "/debug/pprof/goroutine?debug=2"},
	} {
		t.Run(tc.first+" "+tc.second, func(t *testing.T) {
			mux := adminMux(prometheus.NewRegistry(), &ready, nil, nil)
			get := func(path string) *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				return rec
			}
			if rec := get(tc.first); rec.Code != http.StatusOK {
				t.Fatalf("%s: %d, want 200", tc.first, rec.Code)
			}
			if rec := get(tc.second); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
				t.Errorf("%s just after %s: %d (Retry-After %q), want 503 with Retry-After", tc.second, tc.first, rec.Code, rec.Header().Get("Retry-After"))
			}
			if rec := get("/debug/pprof/heap"); rec.Code != http.StatusOK {
				t.Errorf("a plain heap profile meanwhile: %d, want 200", rec.Code)
			}
		})
	}
}
