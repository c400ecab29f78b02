package backend_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// gather returns every sample of reg as "name{labels}" → value.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_COUNTER {
			t.Fatalf("%s is a %v, want a counter", mf.GetName(), mf.GetType())
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			out[name] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestMetricsZeroAtStart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	backend.NewMetrics(reg)
	want := map[string]float64{
		"wharf_backend_bytes_total":                  0,
		"wharf_backend_clock_skew_errors_total":      0,
		`wharf_backend_requests_total{op="get"}`:     0,
		`wharf_backend_requests_total{op="head"}`:    0,
		`wharf_backend_requests_total{op="list"}`:    0,
		`wharf_backend_requests_total{op="restore"}`: 0,
	}
	if got := gather(t, reg); !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
}

func TestMetricsCounts(t *testing.T) {
	dir := t.TempDir()
	data := backend.RandBytes(20, 100000)
	if err := os.MkdirAll(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bkt", "obj"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The counting test store wraps a real FileStore: its exact counters are
	// what the metrics must agree with.
	f := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	reg := prometheus.NewPedanticRegistry()
	m := backend.NewMetrics(reg)
	s := backend.Instrument(f, m)
	ctx := context.Background()

	// A known sequence: 3 ranged reads (one failing), 1 whole Get read
	// half-way, 2 Stats (one failing), 1 List.
	if got, _, err := backend.ReadAllRange(s, "bkt", "obj", 10, 1000, ""); err != nil || len(got) != 1000 {
		t.Fatal(err)
	}
	if got, _, err := backend.ReadAllRange(s, "bkt", "obj", 0, int64(len(data)), ""); err != nil || len(got) != len(data) {
		t.Fatal(err)
	}
	if _, _, err := backend.ReadAllRange(s, "bkt", "nope", 0, 1, ""); !errors.Is(err, backend.ErrNotFound) {
		t.Fatal(err)
	}
	rc, _, err := s.Get(ctx, "bkt", "obj")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 777)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if _, err := s.Stat(ctx, "bkt", "obj"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "bkt", "nope"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatal(err)
	}
	if err := s.List(ctx, "bkt", "", func(backend.ObjectInfo) error { return nil }); err != nil {
		t.Fatal(err)
	}

	wantBytes := float64(1000 + len(data) + 777)
	want := map[string]float64{
		"wharf_backend_bytes_total":                  wantBytes,
		"wharf_backend_clock_skew_errors_total":      0,
		`wharf_backend_requests_total{op="get"}`:     4,
		`wharf_backend_requests_total{op="head"}`:    2,
		`wharf_backend_requests_total{op="list"}`:    1,
		`wharf_backend_requests_total{op="restore"}`: 0,
	}
	if got := gather(t, reg); !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	// The metrics agree with the wrapped store's own exact counters.
	if f.BytesReturned() != int64(wantBytes) || f.Requests("range")+f.Requests("get") != 4 {
		t.Errorf("Faulty saw %d bytes, %d gets", f.BytesReturned(), f.Requests("range")+f.Requests("get"))
	}
}
