package backend

import (
	"context"
	"io"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the wharf_backend_* series:
//
//	wharf_backend_requests_total{op="get"|"head"|"list"|"restore"}
//	wharf_backend_bytes_total
//
// A ranged read or whole-object read counts as op="get", a Stat as
// op="head", one List call as op="list" (whatever the number of pages
// behind it) and a Restore (RestoreObject) as op="restore". Every request counts, failed ones too. bytes_total counts body
// bytes read from the store through the returned readers. Every label value
// exists at zero from registration, so a series stuck at 0 means "none",
// never "not wired".
type Metrics struct {
	requests *prometheus.CounterVec
	bytes    prometheus.Counter
	get      prometheus.Counter
	head     prometheus.Counter
	list     prometheus.Counter
	restore  prometheus.Counter
}

// NewMetrics creates the series and registers them on reg. It panics if
// they are already registered on reg, like prometheus.MustRegister.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wharf_backend_requests_total",
			Help: "Requests made to the backing store, by operation (get = ranged or whole-object GET, head = stat, list = listing, restore = RestoreObject).",
		}, []string{"op"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_backend_bytes_total",
			Help: "Body bytes read from the backing store.",
		}),
	}
	m.get = m.requests.WithLabelValues("get")
	m.head = m.requests.WithLabelValues("head")
	m.list = m.requests.WithLabelValues("list")
	m.restore = m.requests.WithLabelValues("restore")
	reg.MustRegister(m.requests, m.bytes)
	return m
}

// Instrument wraps s so that every call feeds m. The wrapper is a
// Restorer exactly when s is one.
func Instrument(s Store, m *Metrics) Store {
	i := &instrumented{inner: s, m: m}
	if r, ok := AsRestorer(s); ok {
		return &instrumentedRestorer{instrumented: i, r: r}
	}
	return i
}

// instrumentedRestorer is instrumented over a Store that restores.
type instrumentedRestorer struct {
	*instrumented
	r Restorer
}

func (i *instrumentedRestorer) Restore(ctx context.Context, bucket, key string, req RestoreRequest) (RestoreResult, error) {
	i.m.restore.Inc()
	return i.r.Restore(ctx, bucket, key, req)
}

type instrumented struct {
	inner Store
	m     *Metrics
}

func (i *instrumented) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, ObjectInfo, error) {
	i.m.get.Inc()
	rc, info, err := i.inner.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err != nil {
		return nil, info, err
	}
	return &countingReader{ReadCloser: rc, c: i.m.bytes}, info, nil
}

func (i *instrumented) Get(ctx context.Context, bucket, key string) (io.ReadCloser, ObjectInfo, error) {
	i.m.get.Inc()
	rc, info, err := i.inner.Get(ctx, bucket, key)
	if err != nil {
		return nil, info, err
	}
	return &countingReader{ReadCloser: rc, c: i.m.bytes}, info, nil
}

func (i *instrumented) Stat(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	i.m.head.Inc()
	return i.inner.Stat(ctx, bucket, key)
}

func (i *instrumented) List(ctx context.Context, bucket, prefix string, fn func(ObjectInfo) error) error {
	i.m.list.Inc()
	return i.inner.List(ctx, bucket, prefix, fn)
}

// countingReader adds every byte read to a counter.
type countingReader struct {
	io.ReadCloser
	c prometheus.Counter
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.c.Add(float64(n))
	}
	return n, err
}
