package backend_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/backend"
)

// byteCounter counts the requests and response body bytes of a handler.
type byteCounter struct {
	h              http.Handler
	reqs, bodyByte atomic.Int64
	status         atomic.Int64
}

type countingWriter struct {
	http.ResponseWriter
	c *byteCounter
}

func (w countingWriter) Write(p []byte) (int, error) {
	w.c.bodyByte.Add(int64(len(p)))
	return w.ResponseWriter.Write(p)
}

func (w countingWriter) WriteHeader(code int) {
	w.c.status.Store(int64(code))
	w.ResponseWriter.WriteHeader(code)
}

func (c *byteCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.reqs.Add(1)
	c.h.ServeHTTP(countingWriter{w, c}, r)
}

func TestS3ReadSmall(t *testing.T) {
	mem := s3mem.New()
	cnt := &byteCounter{h: gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()}
	srv := httptest.NewServer(cnt)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1",
		PathStyle: true, AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	put := func(key string, data []byte) {
		if _, err := mem.PutObject("b", key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	small := []byte(`{"schema":"x"}`)
	put("small", small)
	data, info, nm, err := store.ReadSmall(ctx, "b", "small", 64<<10, "")
	if err != nil || nm || !bytes.Equal(data, small) || info.Size != int64(len(small)) || info.ETag == "" {
		t.Fatalf("small: %q %+v %v %v", data, info, nm, err)
	}
	before := cnt.reqs.Load()
	data, _, nm, err = store.ReadSmall(ctx, "b", "small", 64<<10, info.ETag)
	if err != nil || !nm || data != nil {
		t.Fatalf("unchanged: %q %v %v", data, nm, err)
	}
	if n := cnt.reqs.Load() - before; n != 1 || cnt.status.Load() != http.StatusNotModified {
		t.Fatalf("unchanged read cost %d requests, last status %d; want one 304", n, cnt.status.Load())
	}
	// Exactly the limit: accepted.
	exact := bytes.Repeat([]byte("a"), 64<<10)
	put("exact", exact)
	if data, _, _, err = store.ReadSmall(ctx, "b", "exact", 64<<10, ""); err != nil || !bytes.Equal(data, exact) {
		t.Fatalf("exact: %d bytes, %v", len(data), err)
	}
	// 1 MiB: refused by its size, at most 64 KiB transferred.
	put("big", bytes.Repeat([]byte("a"), 1<<20))
	bodyBefore := cnt.bodyByte.Load()
	_, info, _, err = store.ReadSmall(ctx, "b", "big", 64<<10, "")
	if !errors.Is(err, backend.ErrTooBig) || info.Size != 1<<20 {
		t.Fatalf("big: %+v %v", info, err)
	}
	if n := cnt.bodyByte.Load() - bodyBefore; n > 64<<10 {
		t.Fatalf("big: %d body bytes sent, want at most 65536", n)
	}
	// Empty object.
	put("empty", nil)
	data, _, _, err = store.ReadSmall(ctx, "b", "empty", 64<<10, "")
	if err != nil || len(data) != 0 {
		t.Fatalf("empty: %q %v", data, err)
	}
	// Missing.
	if _, _, _, err = store.ReadSmall(ctx, "b", "missing", 64<<10, ""); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// plainStore hides FileStore's own ReadSmall (ReadSmall falls back to a
// Stat and a ranged read) and counts the requests.
type plainStore struct {
	backend.Store
	stats, ranges int
}

func (p *plainStore) Stat(ctx context.Context, b, k string) (backend.ObjectInfo, error) {
	p.stats++
	return p.Store.Stat(ctx, b, k)
}

func (p *plainStore) ReadRange(ctx context.Context, b, k string, off, n int64, m string) (io.ReadCloser, backend.ObjectInfo, error) {
	p.ranges++
	return p.Store.ReadRange(ctx, b, k, off, n, m)
}

func TestReadSmallFallback(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(k string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "b", k), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("k", []byte("hello"))
	write("big", bytes.Repeat([]byte("a"), 100))
	write("empty", nil)
	ps := &plainStore{Store: backend.NewFileStore(dir)}
	ctx := context.Background()
	data, info, nm, err := backend.ReadSmall(ctx, ps, "b", "k", 64, "")
	if err != nil || nm || string(data) != "hello" || ps.stats != 1 || ps.ranges != 1 {
		t.Fatalf("changed: %q %v %v, %d stats %d ranges", data, nm, err, ps.stats, ps.ranges)
	}
	_, _, nm, err = backend.ReadSmall(ctx, ps, "b", "k", 64, info.ETag)
	if err != nil || !nm || ps.stats != 2 || ps.ranges != 1 {
		t.Fatalf("unchanged: %v %v, %d stats %d ranges", nm, err, ps.stats, ps.ranges)
	}
	if _, _, _, err = backend.ReadSmall(ctx, ps, "b", "big", 64, ""); !errors.Is(err, backend.ErrTooBig) || ps.ranges != 1 {
		t.Fatalf("big: %v, %d ranges", err, ps.ranges)
	}
	if data, _, _, err = backend.ReadSmall(ctx, ps, "b", "empty", 64, ""); err != nil || len(data) != 0 {
		t.Fatalf("empty: %q %v", data, err)
	}
	// The FileStore's own implementation agrees.
	fs := backend.NewFileStore(dir)
	if data, _, _, err = backend.ReadSmall(ctx, fs, "b", "k", 64, ""); err != nil || string(data) != "hello" {
		t.Fatalf("file store: %q %v", data, err)
	}
	if _, _, nm, _ = backend.ReadSmall(ctx, fs, "b", "k", 64, info.ETag); !nm {
		t.Fatal("file store: unchanged not reported")
	}
	if _, _, _, err = backend.ReadSmall(ctx, fs, "b", "big", 64, ""); !errors.Is(err, backend.ErrTooBig) {
		t.Fatalf("file store big: %v", err)
	}
	// Instrument over a store without ReadSmall: the fallback, counted,
	// never a loop back into the wrapper.
	m := backend.NewMetrics(prometheus.NewRegistry())
	inst := backend.Instrument(&plainStore{Store: backend.NewFileStore(dir)}, m)
	if data, _, _, err = backend.ReadSmall(ctx, inst, "b", "k", 64, ""); err != nil || string(data) != "hello" {
		t.Fatalf("instrumented fallback: %q %v", data, err)
	}
	if _, _, nm, err = backend.ReadSmall(ctx, inst, "b", "k", 64, info.ETag); err != nil || !nm {
		t.Fatalf("instrumented fallback unchanged: %v %v", nm, err)
	}
	inst = backend.Instrument(backend.NewFileStore(dir), m)
	if data, _, _, err = backend.ReadSmall(ctx, inst, "b", "k", 64, ""); err != nil || string(data) != "hello" {
		t.Fatalf("instrumented: %q %v", data, err)
	}
}
