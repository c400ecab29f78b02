package chunkio

import "github.com/prometheus/client_golang/prometheus"

// Metrics holds the read core's Prometheus series. Every series exists (at
// zero) from the moment NewMetrics returns, so a dashboard can tell "nothing
// happened" from "not wired". A nil *Metrics is valid and records nothing.
type Metrics struct {
	framesFetched    prometheus.Counter
	framesDecoded    prometheus.Counter
	cacheHits        prometheus.Counter
	checksumFailures prometheus.Counter
	prefetchWaste    prometheus.Counter
}

// NewMetrics registers wharf_frames_fetched_total, wharf_frames_decoded_total,
// wharf_frame_cache_hits_total, wharf_checksum_failures_total and
// wharf_prefetch_wasted_bytes_total on reg. A
// nil reg creates unregistered counters (useful in tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		framesFetched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_frames_fetched_total",
			Help: "Compressed zstd frames fetched from the backend.",
		}),
		framesDecoded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_frames_decoded_total",
			Help: "Zstd frames verified and decoded.",
		}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_frame_cache_hits_total",
			Help: "Frame (or small extent) reads served from the decoded-frame cache, or by joining another read's fetch of the same frame (no fetch of their own).",
		}),
		checksumFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_checksum_failures_total",
			Help: "Frame, chunk, part or file sha256 mismatches (nothing wrong is served).",
		}),
		prefetchWaste: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_prefetch_wasted_bytes_total",
			Help: "Compressed bytes of frames the readahead fetched that left the frame cache without being read.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.framesFetched, m.framesDecoded, m.cacheHits, m.checksumFailures, m.prefetchWaste)
	}
	return m
}

func (m *Metrics) frameFetched() {
	if m != nil {
		m.framesFetched.Inc()
	}
}

func (m *Metrics) frameDecoded() {
	if m != nil {
		m.framesDecoded.Inc()
	}
}

func (m *Metrics) cacheHit() {
	if m != nil {
		m.cacheHits.Inc()
	}
}

func (m *Metrics) prefetchWasted(n int64) {
	if m != nil {
		m.prefetchWaste.Add(float64(n))
	}
}

func (m *Metrics) checksumFailure() {
	if m != nil {
		m.checksumFailures.Inc()
	}
}

// ChecksumFailure counts one sha256 mismatch found above the chunk layer
// (a whole file or split part read through a Set).
func (m *Metrics) ChecksumFailure() { m.checksumFailure() }
