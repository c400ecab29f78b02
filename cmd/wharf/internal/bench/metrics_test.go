package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// metricValue returns the value of the series name{labels} in g, and whether
// it exists.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// TestMetricsMatchCountingBackend walks an archive through the real s3api
// handler and checks every issue-5 metric against what the counting backend
// wrapper (faults.Faulty) and the source tree say happened, for both S3
// models: through backend.S3Store over HTTP, every request the store
// counted is one the HTTP S3 model answered, so the bench's counts are
// exact on the real path too.
func TestMetricsMatchCountingBackend(t *testing.T) {
	for _, m := range []string{ModelHTTP, ModelInProcess} {
		t.Run(m, func(t *testing.T) { testMetricsMatchCountingBackend(t, m) })
	}
}

func testMetricsMatchCountingBackend(t *testing.T, model string) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Latency = 0
	cfg.TempDir = t.TempDir()
	cfg.Model = model
	e, err := newEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()

	// Every series exists from the start, at zero.
	for _, s := range []struct {
		name   string
		labels map[string]string
	}{
		{"wharf_backend_requests_total", map[string]string{"op": "get"}},
		{"wharf_backend_requests_total", map[string]string{"op": "head"}},
		{"wharf_backend_requests_total", map[string]string{"op": "list"}},
		{"wharf_backend_bytes_total", nil},
		{"wharf_frames_fetched_total", nil},
		{"wharf_frames_decoded_total", nil},
		{"wharf_frame_cache_hits_total", nil},
		{"wharf_checksum_failures_total", nil},
		{"wharf_served_bytes_total", nil},
		{"wharf_requests_total", map[string]string{"op": "GetObject", "code": "200"}},
		{"wharf_request_duration_seconds", map[string]string{"op": "GetObject"}},
	} {
		v, ok := metricValue(t, e.reg, s.name, s.labels)
		if !ok || v != 0 {
			t.Errorf("%s%v before any request: present=%v value=%v, want present at 0", s.name, s.labels, ok, v)
		}
	}

	tr := makeTree(300, 48<<10, 5)
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), tr.files(mtime), cargopack.Options{
		Bucket: benchBucket, Prefix: "m", UploadID: "metrics", FrameSize: 1 << 20, ChunkSize: 4 << 20, Created: mtime,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames < 4 {
		t.Fatalf("want a multi-frame archive, got %d frames", res.Frames)
	}
	if _, err := e.serveArchive(ctx, res.ManifestKey, 256<<20, 0); err != nil {
		t.Fatal(err)
	}
	if err := wharfWalk(ctx, e, tr, 8); err != nil {
		t.Fatal(err)
	}

	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		// Instrument wraps the Faulty store, so both see the same calls: the
		// manifest GET plus the range GETs, all labelled op="get".
		{"wharf_backend_requests_total", map[string]string{"op": "get"}, float64(e.faulty.Requests("get") + e.faulty.Requests("range"))},
		{"wharf_backend_requests_total", map[string]string{"op": "head"}, float64(e.faulty.Requests("stat"))},
		{"wharf_backend_requests_total", map[string]string{"op": "list"}, float64(e.faulty.Requests("list"))},
		{"wharf_backend_bytes_total", nil, float64(e.faulty.BytesReturned())},
		// A walk fetches and decodes every frame exactly once.
		{"wharf_frames_fetched_total", nil, float64(res.Frames)},
		{"wharf_frames_decoded_total", nil, float64(res.Frames)},
		{"wharf_checksum_failures_total", nil, 0},
		{"wharf_served_bytes_total", nil, float64(tr.bytes)},
		{"wharf_requests_total", map[string]string{"op": "GetObject", "code": "200"}, float64(len(tr.rels))},
		{"wharf_request_duration_seconds", map[string]string{"op": "GetObject"}, float64(len(tr.rels))},
	}
	// The handler records a request's metrics after its body is written, so
	// the client can finish before the last series are updated: wait (briefly)
	// for them to settle, then compare exactly.
	deadline := time.Now().Add(5 * time.Second)
	for _, w := range want {
		for {
			got, ok := metricValue(t, e.reg, w.name, w.labels)
			if ok && got == w.value {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s%v = %v (present=%v), want %v", w.name, w.labels, got, ok, w.value)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n := e.faulty.Requests("get") + e.faulty.Requests("range"); n > int64(res.Frames)+1 {
		t.Errorf("walk made %d backend GETs for %d frames + 1 manifest", n, res.Frames)
	}
	switch _, viaSDK := e.backing.(*backend.S3Store); {
	case model == ModelHTTP && (!viaSDK || e.s3model == nil):
		t.Fatalf("http model: wharf's backend is %T, want *backend.S3Store in front of the HTTP S3 model", e.backing)
	case model == ModelHTTP:
		if got, want := e.s3model.served.Load(), e.faulty.Requests(""); got != want || got == 0 {
			t.Errorf("http model: the S3 model answered %d HTTP requests, the store behind it counted %d", got, want)
		}
	case e.backing != backend.Store(e.faulty) || e.s3model != nil:
		t.Fatalf("inprocess model: wharf's backend is %T, want the Faulty store itself", e.backing)
	}
	hits, _ := metricValue(t, e.reg, "wharf_frame_cache_hits_total", nil)
	if hits < float64(len(tr.rels)-res.Frames) {
		t.Errorf("wharf_frame_cache_hits_total = %v, want at least files - frames = %d", hits, len(tr.rels)-res.Frames)
	}
	t.Logf("walk: %d files, %d frames, %d backend requests, %s", len(tr.rels), res.Frames, e.faulty.Requests(""), fmt.Sprintf("%.0f cache hits", hits))
}
