package backend

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the wharf_backend_* series:
//
//	wharf_backend_requests_total{op="get"|"head"|"list"|"restore"}
//	wharf_backend_bytes_total
//	wharf_backend_clock_skew_errors_total
//
// A ranged read or whole-object read counts as op="get", a Stat as
// op="head", one List call as op="list" (whatever the number of pages
// behind it) and a Restore (RestoreObject) as op="restore". Every request counts, failed ones too. bytes_total counts body
// bytes read from the store through the returned readers;
// clock_skew_errors_total the requests refused with ErrClockSkew (a clock
// is wrong: see LogClockSkew). Every label value
// exists at zero from registration, so a series stuck at 0 means "none",
// never "not wired".
type Metrics struct {
	requests *prometheus.CounterVec
	bytes    prometheus.Counter
	get      prometheus.Counter
	head     prometheus.Counter
	list     prometheus.Counter
	restore  prometheus.Counter
	skew     prometheus.Counter

	skewMu     sync.Mutex
	skewLog    func(err error, refused int64)
	skewTold   time.Time // when skewLog was last called
	skewUntold int64     // refusals since then
}

// clockSkewLogEvery is how often at most LogClockSkew's function is
// called while the refusals go on.
const clockSkewLogEvery = 10 * time.Minute

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
		skew: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_backend_clock_skew_errors_total",
			Help: "Requests the backing store refused because their signing time was too far from its clock (RequestTimeTooSkewed): this server's clock or the store's is wrong.",
		}),
	}
	m.get = m.requests.WithLabelValues("get")
	m.head = m.requests.WithLabelValues("head")
	m.list = m.requests.WithLabelValues("list")
	m.restore = m.requests.WithLabelValues("restore")
	reg.MustRegister(m.requests, m.bytes, m.skew)
	return m
}

// LogClockSkew sets the function told of requests the store refused for
// clock skew (ErrClockSkew): at once for the first, then at most once every
// 10 minutes while they go on, with the number refused since it was last
// told (the one just seen included). The cause is then logged by name
// without a line per request. fn must not block; set it before use.
func (m *Metrics) LogClockSkew(fn func(err error, refused int64)) {
	m.skewMu.Lock()
	defer m.skewMu.Unlock()
	m.skewLog = fn
}

// ClockSkewCounter is wharf_backend_clock_skew_errors_total (for tests).
func (m *Metrics) ClockSkewCounter() prometheus.Counter { return m.skew }

// failed counts err if it is a clock-skew refusal, and tells the
// LogClockSkew function when it is due.
func (m *Metrics) failed(err error) {
	if err == nil || !errors.Is(err, ErrClockSkew) {
		return
	}
	m.skew.Inc()
	m.skewMu.Lock()
	m.skewUntold++
	now := time.Now()
	fn, n := m.skewLog, m.skewUntold
	due := fn != nil && (m.skewTold.IsZero() || now.Sub(m.skewTold) >= clockSkewLogEvery)
	if due {
		m.skewTold, m.skewUntold = now, 0
	}
	m.skewMu.Unlock()
	if due {
		fn(err, n)
	}
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
	res, err := i.r.Restore(ctx, bucket, key, req)
	i.m.failed(err)
	return res, err
}

type instrumented struct {
	inner Store
	m     *Metrics
}

func (i *instrumented) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, ObjectInfo, error) {
	i.m.get.Inc()
	rc, info, err := i.inner.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err != nil {
		i.m.failed(err)
		return nil, info, err
	}
	return &countingReader{ReadCloser: rc, c: i.m.bytes}, info, nil
}

func (i *instrumented) Get(ctx context.Context, bucket, key string) (io.ReadCloser, ObjectInfo, error) {
	i.m.get.Inc()
	rc, info, err := i.inner.Get(ctx, bucket, key)
	if err != nil {
		i.m.failed(err)
		return nil, info, err
	}
	return &countingReader{ReadCloser: rc, c: i.m.bytes}, info, nil
}

func (i *instrumented) Stat(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	i.m.head.Inc()
	info, err := i.inner.Stat(ctx, bucket, key)
	i.m.failed(err)
	return info, err
}

func (i *instrumented) List(ctx context.Context, bucket, prefix string, fn func(ObjectInfo) error) error {
	i.m.list.Inc()
	err := i.inner.List(ctx, bucket, prefix, fn)
	i.m.failed(err)
	return err
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
