package s3api

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the s3api series, registered on the injected Registerer.
type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	servedBytes  prometheus.Counter
	restores     *prometheus.CounterVec
	restoreBytes *prometheus.CounterVec
	aborted      *prometheus.CounterVec
}

// Causes of an aborted response (wharf_aborted_responses_total).
const (
	abortRead   = "read"   // the read failed after the headers went out
	abortClient = "client" // the client left, or stopped taking bytes
	abortPanic  = "panic"  // a handler bug after the headers went out
)

var abortCauses = []string{abortRead, abortClient, abortPanic}

// statusCodes pre-initialized per op so dashboards see zeros from the start.
var statusCodes = []int{200, 202, 206, 304, 400, 403, 404, 405, 409, 412, 416, 500, 501, 503}

// restoreTiers are the tier label values of the restore series.
var restoreTiers = []string{"Standard", "Bulk", "Expedited"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wharf_requests_total",
			Help: "S3 requests served, by operation and HTTP status code.",
		}, []string{"op", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wharf_request_duration_seconds",
			Help:    "Time to serve an S3 request, headers and body, by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"op"}),
		servedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_served_bytes_total",
			Help: "Object body bytes sent to S3 clients.",
		}),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wharf_restores_total",
			Help: "Backend objects whose restore (RestoreObject) wharf started for clients, by retrieval tier.",
		}, []string{"tier"}),
		restoreBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wharf_restore_bytes_total",
			Help: "Stored bytes of the backend objects whose restore wharf started for clients, by retrieval tier (what retrieval is billed on).",
		}, []string{"tier"}),
		aborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wharf_aborted_responses_total",
			Help: "Responses cut off after their headers were sent (connection closed on HTTP/1.1, RST_STREAM on HTTP/2), by operation and cause: read (the archive read failed mid-body: a backend error, a checksum mismatch), client (the client left or stopped reading), panic. wharf_requests_total counts them under the status their headers carried.",
		}, []string{"op", "cause"}),
	}
	for _, t := range restoreTiers {
		m.restores.WithLabelValues(t)
		m.restoreBytes.WithLabelValues(t)
	}
	for _, op := range allOps {
		m.duration.WithLabelValues(op)
		for _, c := range abortCauses {
			m.aborted.WithLabelValues(op, c)
		}
		for _, c := range statusCodes {
			m.requests.WithLabelValues(op, strconv.Itoa(c))
		}
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.servedBytes, m.restores, m.restoreBytes, m.aborted} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) observe(op string, status int, d time.Duration, bytes int64, get bool) {
	m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(op).Observe(d.Seconds())
	if get && op == opGetObject && (status == 200 || status == 206) && bytes > 0 {
		m.servedBytes.Add(float64(bytes))
	}
}

// restored counts n backend restores started at tier, of bytes stored bytes.
func (m *metrics) restored(tier string, n, bytes int64) {
	m.restores.WithLabelValues(tier).Add(float64(n))
	m.restoreBytes.WithLabelValues(tier).Add(float64(bytes))
}
