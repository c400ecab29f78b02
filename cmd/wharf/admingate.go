package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The admin listener has no authentication, and each of its endpoints but
// /healthz and /readyz builds a whole page per request and holds it (and
// a connection) until the client has taken it, at most --send-timeout
// per 256 KiB. Each group of them has a few turns (adminGate); a request
// beyond them is refused at once, never queued.
const (
	// maxAdminProfiles: /debug/pprof/ requests at once. Each holds memory
	// (a goroutine dump buffers up to 64 MiB, a heap profile its records)
	// or a connection for up to maxProfile.
	maxAdminProfiles = 2
	// maxAdminScrapes: /metrics requests at once, each every series
	// gathered and encoded. Above the one or two Prometheus replicas that
	// scrape a replica; a scrape refused is retried at the next interval.
	maxAdminScrapes = 4
	// maxAdminPages: /-/archives and /-/peers requests at once, each the
	// catalog's (every bucket, up to 1000 skipped objects) or the ring's
	// whole page.
	maxAdminPages = 2
	// minStopTheWorldGap: one full goroutine dump (goroutine?debug=2,
	// which stops the world while every stack is written) or forced
	// collection (heap?gc=1) starts per gap, whatever the turns.
	minStopTheWorldGap = time.Second
)

// adminGate is a group of admin endpoints sharing a few turns.
type adminGate struct {
	what  string // "profiles", for the refusal
	turns chan struct{}
}

func newAdminGate(what string, n int) *adminGate {
	return &adminGate{what: what, turns: make(chan struct{}, n)}
}

// serve serves h while the request holds one of g's turns; with none free
// it is refused at once (503, Retry-After).
func (g *adminGate) serve(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case g.turns <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "5")
			http.Error(w, fmt.Sprintf("%d %s are being served already; try again shortly", cap(g.turns), g.what), http.StatusServiceUnavailable)
			return
		}
		defer func() { <-g.turns }()
		h(w, r)
	}
}

// adminSpacing lets one stop-the-world profile start per gap.
type adminSpacing struct {
	gap  time.Duration
	mu   sync.Mutex
	next time.Time // when the next one may start
}

// serve serves h; a stop-the-world request (stopsTheWorld) less than gap
// after the last one started is refused at once (503, Retry-After).
func (s *adminSpacing) serve(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if stopsTheWorld(r) {
			now := time.Now()
			s.mu.Lock()
			wait := s.next.Sub(now)
			if wait <= 0 {
				s.next = now.Add(s.gap)
			}
			s.mu.Unlock()
			if wait > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
				http.Error(w, fmt.Sprintf("a goroutine dump (debug=2) or a forced collection (gc=) starts at most once per %v; try again in %v", s.gap, wait.Round(time.Millisecond)), http.StatusServiceUnavailable)
				return
			}
		}
		h(w, r)
	}
}

// stopsTheWorld reports whether r asks net/http/pprof for a full
// goroutine dump (goroutine, debug >= 2) or a forced collection before a
// heap profile (heap or allocs, gc > 0), as pprof reads those values.
func stopsTheWorld(r *http.Request) bool {
	name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
	switch name {
	case "goroutine":
		debug, _ := strconv.Atoi(r.FormValue("debug"))
		return debug >= 2
	case "heap", "allocs":
		gc, _ := strconv.Atoi(r.FormValue("gc"))
		return gc > 0
	}
	return false
}
