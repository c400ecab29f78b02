package backend_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// fakeS3 is a real gofakes3 server (in-memory backend) on loopback, behind
// faults.FaultyHTTP, with an S3Store pointed at it.
type fakeS3 struct {
	mem   *s3mem.Backend
	fh    *faults.FaultyHandler
	srv   *httptest.Server
	store *backend.S3Store
}

func newFakeS3(t *testing.T, mod func(*backend.S3Config)) *fakeS3 {
	t.Helper()
	mem := s3mem.New()
	faker := gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog()))
	fh := faults.FaultyHTTP(faker.Server(), nil)
	srv := httptest.NewServer(fh)
	t.Cleanup(srv.Close)
	cfg := backend.S3Config{
		Endpoint:        srv.URL,
		Region:          "us-east-1",
		PathStyle:       true,
		AccessKeyID:     "AKIDTEST",
		SecretAccessKey: "secret",
		MaxBackoff:      5 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	// Keep the environment (profiles, AWS_* endpoints) out of the tests.
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeS3{mem: mem, fh: fh, srv: srv, store: store}
}

func (f *fakeS3) put(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	if ok, _ := f.mem.BucketExists(bucket); !ok {
		if err := f.mem.CreateBucket(bucket); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.mem.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

// TestGofakes3RangeProtocol pins what the gofakes3 server under these tests
// really answers for ranges (s3-compat-notes §4), so the S3Store tests below
// rest on known ground: 206 with an exact Content-Range for an in-bounds
// range, 206 clamped for a range past the end, 416 for a start past the end,
// and If-Match ignored.
func TestGofakes3RangeProtocol(t *testing.T) {
	f := newFakeS3(t, nil)
	data := backend.RandBytes(1, 1000)
	f.put(t, "b", "obj", data)
	tests := []struct {
		rng, ifMatch string
		status       int
		contentRange string
		body         []byte
	}{
		{"bytes=10-19", "", 206, "bytes 10-19/1000", data[10:20]},
		{"bytes=990-1099", "", 206, "bytes 990-999/1000", data[990:]},
		{"bytes=1000-1001", "", 416, "", nil},
		{"", "", 200, "", data},
		{"bytes=0-9", `"not-the-etag"`, 206, "bytes 0-9/1000", data[:10]},
	}
	for _, tc := range tests {
		t.Run(tc.rng+tc.ifMatch, func(t *testing.T) {
			req, _ := http.NewRequest("GET", f.srv.URL+"/b/obj", nil)
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			if tc.ifMatch != "" {
				req.Header.Set("If-Match", tc.ifMatch)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("Content-Range"); got != tc.contentRange {
				t.Fatalf("Content-Range %q, want %q", got, tc.contentRange)
			}
			if tc.body != nil && !bytes.Equal(body, tc.body) {
				t.Fatalf("body differs from source")
			}
		})
	}
}

func TestS3ReadRangeExact(t *testing.T) {
	f := newFakeS3(t, nil)
	const size = 300 << 10
	data := backend.RandBytes(2, size)
	f.put(t, "bkt", "dir/chunk.tar.zst", data)
	st, err := f.store.Stat(context.Background(), "bkt", "dir/chunk.tar.zst")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.ETag == "" || strings.Contains(st.ETag, `"`) {
		t.Fatalf("stat = %+v", st)
	}
	tests := []struct{ off, n int64 }{
		{0, 1}, {0, size}, {size - 1, 1}, {12345, 1}, {1 << 10, 64 << 10},
		{100 << 10, 200<<10 - 7}, {size - 4096, 4096},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d+%d", tc.off, tc.n), func(t *testing.T) {
			got, info, err := backend.ReadAllRange(f.store, "bkt", "dir/chunk.tar.zst", tc.off, tc.n, "")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[tc.off:tc.off+tc.n]) {
				t.Fatalf("bytes differ from source (got %d bytes)", len(got))
			}
			if info.Size != size || info.ETag != st.ETag || info.Key != "dir/chunk.tar.zst" {
				t.Fatalf("info = %+v, stat = %+v", info, st)
			}
		})
	}
}

func TestS3GetStatList(t *testing.T) {
	f := newFakeS3(t, nil)
	backend.SetListPageSize(f.store, 7)
	want := map[string][]byte{}
	var keys []string
	for i := range 30 {
		k := fmt.Sprintf("p/%02d", i)
		want[k] = backend.RandBytes(uint64(100+i), 100+i)
		f.put(t, "bkt", k, want[k])
		keys = append(keys, k)
	}
	f.put(t, "bkt", "q/other", []byte("x"))
	f.put(t, "bkt", "empty", nil)
	ctx := context.Background()

	for _, k := range []string{"p/00", "p/29", "empty"} {
		rc, info, err := f.store.Get(ctx, "bkt", k)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[k]) || info.Size != int64(len(want[k])) {
			t.Fatalf("Get %s: %d bytes, info %+v", k, len(got), info)
		}
	}

	var listed []string
	err := f.store.List(ctx, "bkt", "p/", func(oi backend.ObjectInfo) error {
		listed = append(listed, oi.Key)
		if oi.Size != int64(len(want[oi.Key])) || oi.ETag == "" {
			return fmt.Errorf("bad info %+v", oi)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(listed, ",") != strings.Join(keys, ",") {
		t.Fatalf("listed %v, want %v", listed, keys)
	}
	var lists int
	for _, r := range f.fh.Log() {
		if strings.Contains(r.Query, "list-type=2") {
			lists++
		}
	}
	if lists != 5 { // 30 keys in pages of 7
		t.Fatalf("%d ListObjectsV2 pages, want 5", lists)
	}
	stop := errors.New("stop")
	n := 0
	if err := f.store.List(ctx, "bkt", "", func(backend.ObjectInfo) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("List did not stop on fn's error: %v after %d", err, n)
	}
	backend.WantErr(t, f.store.List(ctx, "nobucket", "", func(backend.ObjectInfo) error { return nil }), backend.ErrNotFound, "nobucket", "")
}

func TestS3Errors(t *testing.T) {
	f := newFakeS3(t, nil)
	data := backend.RandBytes(3, 5000)
	f.put(t, "bkt", "k", data)
	ctx := context.Background()
	etag := func() string {
		st, err := f.store.Stat(ctx, "bkt", "k")
		if err != nil {
			t.Fatal(err)
		}
		return st.ETag
	}()
	tests := []struct {
		name        string
		bucket, key string
		off, n      int64
		ifMatch     string
		want        error
	}{
		{"ok", "bkt", "k", 0, 10, "", nil},
		{"if-match ok", "bkt", "k", 0, 10, etag, nil},
		{"if-match quoted", "bkt", "k", 0, 10, `"` + etag + `"`, nil},
		{"if-match wrong", "bkt", "k", 0, 10, "0123456789abcdef", backend.ErrChanged},
		{"missing key", "bkt", "nokey", 0, 10, "", backend.ErrNotFound},
		{"missing bucket", "nobkt", "k", 0, 10, "", backend.ErrNotFound},
		{"start past end", "bkt", "k", 5000, 1, "", backend.ErrInvalidRange},
		{"end past end", "bkt", "k", 4990, 11, "", backend.ErrInvalidRange},
		{"zero length", "bkt", "k", 0, 0, "", backend.ErrInvalidRange},
		{"negative offset", "bkt", "k", -1, 5, "", backend.ErrInvalidRange},
		{"overflowing length", "bkt", "k", 10, math.MaxInt64, "", backend.ErrInvalidRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := backend.ReadAllRange(f.store, tc.bucket, tc.key, tc.off, tc.n, tc.ifMatch)
			backend.WantErr(t, err, tc.want, tc.bucket, tc.key)
			if tc.want == nil && !bytes.Equal(got, data[tc.off:tc.off+tc.n]) {
				t.Fatal("bytes differ from source")
			}
		})
	}
	_, err := f.store.Stat(ctx, "bkt", "nokey")
	backend.WantErr(t, err, backend.ErrNotFound, "bkt", "nokey")
	_, _, err = f.store.Get(ctx, "bkt", "nokey")
	backend.WantErr(t, err, backend.ErrNotFound, "bkt", "nokey")
}

// TestS3HTTPFaults exercises S3Store's retries, resumes and checks against
// real protocol faults injected between it and gofakes3.
func TestS3HTTPFaults(t *testing.T) {
	const size = 256 << 10
	const off, n = 1000, 200 << 10
	data := backend.RandBytes(4, size)
	src := data[off : off+n]

	// first returns hook that applies fault to the first k requests.
	first := func(k int, fault faults.HTTPFault) func(faults.HTTPRequest) faults.HTTPFault {
		return func(r faults.HTTPRequest) faults.HTTPFault {
			if r.N < k {
				return fault
			}
			return faults.HTTPFault{}
		}
	}
	always := func(fault faults.HTTPFault) func(faults.HTTPRequest) faults.HTTPFault {
		return func(faults.HTTPRequest) faults.HTTPFault { return fault }
	}
	tests := []struct {
		name     string
		hook     func(faults.HTTPRequest) faults.HTTPFault
		want     error // nil: exact bytes
		requests int   // HTTP requests seen
		// failAtOpen: the error comes from ReadRange, not from reading.
		failAtOpen bool
	}{
		{"503 SlowDown twice", first(2, faults.HTTPFault{Action: faults.HTTPError, Status: 503}), nil, 3, false},
		{"500 InternalError once", first(1, faults.HTTPFault{Action: faults.HTTPError, Status: 500}), nil, 2, false},
		{"reset before response once", first(1, faults.HTTPFault{Action: faults.HTTPReset, After: -1}), nil, 2, false},
		{"reset mid-body once", first(1, faults.HTTPFault{Action: faults.HTTPReset, After: 70000}), nil, 2, false},
		{"reset mid-body twice", first(2, faults.HTTPFault{Action: faults.HTTPReset, After: 30000}), nil, 3, false},
		{"reset at first body byte once", first(1, faults.HTTPFault{Action: faults.HTTPReset, After: 0}), nil, 2, false},
		{"truncated once", first(1, faults.HTTPFault{Action: faults.HTTPTruncate, After: 100000}), nil, 2, false},
		{"slow headers once", first(1, faults.HTTPFault{Delay: 2500 * time.Millisecond}), nil, 2, false},
		{"stalled body once", first(1, faults.HTTPFault{Action: faults.HTTPStall, After: 50000, Stall: 5 * time.Second}), nil, 2, false},
		{"503 always", always(faults.HTTPFault{Action: faults.HTTPError, Status: 503}), backend.ErrUnavailable, 3, true},
		{"reset always", always(faults.HTTPFault{Action: faults.HTTPReset, After: 1000}), backend.ErrUnavailable, 3, false},
		{"truncated always", always(faults.HTTPFault{Action: faults.HTTPTruncate, After: 1000}), backend.ErrBadResponse, 3, false},
		{"200 ignoring range", always(faults.HTTPFault{Action: faults.HTTPIgnoreRange}), backend.ErrBadResponse, 1, true},
		{"206 for another range", always(faults.HTTPFault{Action: faults.HTTPShiftRange, After: 1}), backend.ErrBadResponse, 1, true},
		{"body longer than promised", always(faults.HTTPFault{Action: faults.HTTPExtraBytes, After: 5}), backend.ErrBadResponse, 1, false},
		{"403", always(faults.HTTPFault{Action: faults.HTTPError, Status: 403}), backend.ErrAccessDenied, 1, true},
		{"404", always(faults.HTTPFault{Action: faults.HTTPError, Status: 404}), backend.ErrNotFound, 1, true},
		{"412", always(faults.HTTPFault{Action: faults.HTTPError, Status: 412}), backend.ErrChanged, 1, true},
		{"416", always(faults.HTTPFault{Action: faults.HTTPError, Status: 416}), backend.ErrInvalidRange, 1, true},
	}
	f := newFakeS3(t, func(c *backend.S3Config) {
		c.MaxRetries = 2
		c.MaxResumes = 2
		c.ResponseHeaderTimeout = time.Second
		c.ReadIdleTimeout = time.Second
	})
	f.put(t, "bkt", "chunk", data)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.fh.Reset()
			f.fh.SetHook(tc.hook)
			defer f.fh.SetHook(nil)
			rc, _, err := f.store.ReadRange(context.Background(), "bkt", "chunk", off, n, "")
			if tc.failAtOpen {
				backend.WantErr(t, err, tc.want, "bkt", "chunk")
			} else {
				if err != nil {
					t.Fatalf("ReadRange: %v", err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				backend.WantErr(t, err, tc.want, "bkt", "chunk")
				if tc.want == nil && !bytes.Equal(got, src) {
					t.Fatalf("bytes differ from source (%d bytes)", len(got))
				}
				if tc.want != nil && (len(got) > n || !bytes.Equal(got, src[:len(got)])) {
					t.Fatalf("wrong bytes passed on before the error (%d bytes)", len(got))
				}
			}
			log := f.fh.Log()
			if len(log) != tc.requests {
				t.Fatalf("%d requests, want %d: %+v", len(log), tc.requests, log)
			}
		})
	}
}

// TestS3ResumeRequests checks what a resume sends: the remaining range,
// with If-Match on the ETag of the first response.
func TestS3ResumeRequests(t *testing.T) {
	f := newFakeS3(t, nil)
	data := backend.RandBytes(5, 100000)
	f.put(t, "bkt", "k", data)
	f.fh.SetHook(func(r faults.HTTPRequest) faults.HTTPFault {
		if r.N == 0 {
			return faults.HTTPFault{Action: faults.HTTPReset, After: 40000}
		}
		return faults.HTTPFault{}
	})
	got, info, err := backend.ReadAllRange(f.store, "bkt", "k", 100, 90000, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data[100:90100]) {
		t.Fatal("bytes differ from source")
	}
	log := f.fh.Log()
	if len(log) != 2 {
		t.Fatalf("%d requests: %+v", len(log), log)
	}
	if log[0].Range != "bytes=100-90099" || log[0].IfMatch != "" {
		t.Fatalf("first request %+v", log[0])
	}
	// The reset lands after 40000 body bytes were sent; the client may have
	// consumed fewer when it noticed, so the resume starts at or before
	// byte 40100, and always runs to the same end.
	var a, b int64
	if _, err := fmt.Sscanf(log[1].Range, "bytes=%d-%d", &a, &b); err != nil || a < 100 || a > 40100 || b != 90099 {
		t.Fatalf("resume request Range %q", log[1].Range)
	}
	if log[1].IfMatch != `"`+info.ETag+`"` {
		t.Fatalf("resume If-Match %q, want %q", log[1].IfMatch, info.ETag)
	}

	// Whole-object Get resumes too.
	f.fh.Reset()
	rc, _, err := f.store.Get(context.Background(), "bkt", "k")
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get after reset: %d bytes, %v", len(got), err)
	}
	if len(f.fh.Log()) != 2 {
		t.Fatalf("Get: %d requests", len(f.fh.Log()))
	}
}

// TestS3ResumeAfterChange: the object is replaced between the first response
// and the resume. gofakes3 ignores If-Match, so this also shows the client-
// side ETag check: the read fails with backend.ErrChanged, never mixing versions.
func TestS3ResumeAfterChange(t *testing.T) {
	f := newFakeS3(t, nil)
	data := backend.RandBytes(6, 100000)
	f.put(t, "bkt", "k", data)
	var replaced atomic.Bool
	f.fh.SetHook(func(r faults.HTTPRequest) faults.HTTPFault {
		if r.N == 0 {
			return faults.HTTPFault{Action: faults.HTTPReset, After: 40000}
		}
		if replaced.CompareAndSwap(false, true) {
			f.put(t, "bkt", "k", backend.RandBytes(7, 100000))
		}
		return faults.HTTPFault{}
	})
	got, _, err := backend.ReadAllRange(f.store, "bkt", "k", 0, 100000, "")
	backend.WantErr(t, err, backend.ErrChanged, "bkt", "k")
	if !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("bytes passed on before the error are not the first version's")
	}
}

func TestS3ContextCancel(t *testing.T) {
	f := newFakeS3(t, nil)
	f.put(t, "bkt", "k", backend.RandBytes(8, 1000))
	f.fh.SetHook(func(faults.HTTPRequest) faults.HTTPFault { return faults.HTTPFault{Delay: 5 * time.Second} })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := f.store.ReadRange(ctx, "bkt", "k", 0, 10, "")
	if !errors.Is(err, context.DeadlineExceeded) || backend.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("cancel took %v", time.Since(start))
	}
}

// TestS3OtherOpsUnderFaults: Stat, Get and List go through the same retry
// policy and error mapping as ranged reads.
func TestS3OtherOpsUnderFaults(t *testing.T) {
	f := newFakeS3(t, func(c *backend.S3Config) { c.MaxRetries = 2 })
	data := backend.RandBytes(9, 3000)
	f.put(t, "bkt", "k", data)
	ctx := context.Background()
	ops := map[string]func() error{
		"stat": func() error { _, err := f.store.Stat(ctx, "bkt", "k"); return err },
		"get": func() error {
			rc, _, err := f.store.Get(ctx, "bkt", "k")
			if err != nil {
				return err
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err == nil && !bytes.Equal(got, data) {
				return errors.New("bytes differ from source")
			}
			return err
		},
		"list": func() error {
			n := 0
			err := f.store.List(ctx, "bkt", "", func(backend.ObjectInfo) error { n++; return nil })
			if err == nil && n != 1 {
				return fmt.Errorf("listed %d objects", n)
			}
			return err
		},
	}
	tests := []struct {
		name     string
		fault    faults.HTTPFault
		times    int // first requests faulted
		want     error
		requests int
	}{
		{"503 once", faults.HTTPFault{Action: faults.HTTPError, Status: 503}, 1, nil, 2},
		{"500 always", faults.HTTPFault{Action: faults.HTTPError, Status: 500}, 99, backend.ErrUnavailable, 3},
		{"403", faults.HTTPFault{Action: faults.HTTPError, Status: 403}, 99, backend.ErrAccessDenied, 1},
		{"404", faults.HTTPFault{Action: faults.HTTPError, Status: 404}, 99, backend.ErrNotFound, 1},
		{"reset before response once", faults.HTTPFault{Action: faults.HTTPReset, After: -1}, 1, nil, 2},
	}
	for op, call := range ops {
		for _, tc := range tests {
			t.Run(op+"/"+tc.name, func(t *testing.T) {
				f.fh.Reset()
				f.fh.SetHook(func(r faults.HTTPRequest) faults.HTTPFault {
					if r.N < tc.times {
						return tc.fault
					}
					return faults.HTTPFault{}
				})
				defer f.fh.SetHook(nil)
				key := "k"
				if op == "list" {
					key = ""
				}
				backend.WantErr(t, call(), tc.want, "bkt", key)
				if n := len(f.fh.Log()); n != tc.requests {
					t.Fatalf("%d requests, want %d", n, tc.requests)
				}
			})
		}
	}
}

// TestS3ConcurrentFlaky: many parallel ranged reads while the server resets,
// truncates or throttles the first request of each read. Every read must
// still return exactly the source bytes.
func TestS3ConcurrentFlaky(t *testing.T) {
	f := newFakeS3(t, func(c *backend.S3Config) { c.MaxRetries = 3; c.MaxResumes = 2 })
	data := backend.RandBytes(30, 1<<20)
	f.put(t, "bkt", "chunk", data)
	var mu sync.Mutex
	seen := map[string]bool{}
	f.fh.SetHook(func(r faults.HTTPRequest) faults.HTTPFault {
		// Resumes and retries keep the range's end: fault only the first
		// request that asks for a given end.
		_, end, _ := strings.Cut(r.Range, "-")
		mu.Lock()
		first := !seen[end]
		seen[end] = true
		mu.Unlock()
		if !first {
			return faults.HTTPFault{}
		}
		var a int64
		fmt.Sscanf(end, "%d", &a)
		switch a % 4 {
		case 0:
			return faults.HTTPFault{Action: faults.HTTPReset, After: 10000}
		case 1:
			return faults.HTTPFault{Action: faults.HTTPTruncate, After: 20000}
		case 2:
			return faults.HTTPFault{Action: faults.HTTPError, Status: 503}
		default:
			return faults.HTTPFault{}
		}
	})
	const workers, each = 8, 12
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				off := int64(w*each+i) * 7919
				n := int64(30000 + (w*each+i)*1001)
				got, _, err := backend.ReadAllRange(f.store, "bkt", "chunk", off, n, "")
				if err == nil && !bytes.Equal(got, data[off:off+n]) {
					err = fmt.Errorf("read %d+%d: bytes differ from source", off, n)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Each faulted read costs exactly one extra request.
	faulted := 0
	for k := range workers * each {
		end := int64(k)*7919 + int64(30000+k*1001) - 1
		if end%4 != 3 {
			faulted++
		}
	}
	if got, want := len(f.fh.Log()), workers*each+faulted; got != want {
		t.Fatalf("%d requests, want %d", got, want)
	}
}

// TestOpenStoreS3: an s3:// store URL opens an S3Store that reads from the
// configured endpoint (here anonymously, as against a public bucket).
func TestOpenStoreS3(t *testing.T) {
	f := newFakeS3(t, nil)
	data := backend.RandBytes(31, 5000)
	f.put(t, "bkt", "m/manifest.json", data)
	st, err := backend.OpenStore(context.Background(), "s3://", backend.S3Config{Endpoint: f.srv.URL, Region: "us-east-1", PathStyle: true, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	bucket, key, err := backend.ParseObjectURL("s3://bkt/m/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := backend.ReadAllRange(st, bucket, key, 100, 4900, "")
	if err != nil || !bytes.Equal(got, data[100:]) {
		t.Fatalf("read: %v", err)
	}
	if h := f.fh.Log()[0]; h.Bucket != "bkt" || h.Key != "m/manifest.json" {
		t.Fatalf("request went to %s/%s", h.Bucket, h.Key)
	}
}

// TestS3ErrorCodesOverTheWire: errors are judged by the S3 code the server
// sends, not by the status alone. A 404 with an unknown code (versitygw's
// XAdminUserNotFound for an unknown access key) is ErrRefused and names
// the code, a 405 or 501 is ErrNotImplemented, and neither is retried.
func TestS3ErrorCodesOverTheWire(t *testing.T) {
	f := newFakeS3(t, func(c *backend.S3Config) { c.MaxRetries = 2 })
	f.put(t, "bkt", "k", []byte("hello"))
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		status   int
		code     string
		want     error
		text     string // in the error's text
		requests int
	}{
		{"unknown key (versitygw)", 404, "XAdminUserNotFound", backend.ErrRefused, "XAdminUserNotFound: injected fault (HTTP 404)", 1},
		{"NoSuchKey", 404, "NoSuchKey", backend.ErrNotFound, "object not found", 1},
		{"NoSuchBucket", 404, "NoSuchBucket", backend.ErrNotFound, "no such bucket", 1},
		{"InvalidAccessKeyId", 403, "InvalidAccessKeyId", backend.ErrAccessDenied, "InvalidAccessKeyId", 1},
		{"MethodNotAllowed", 405, "MethodNotAllowed", backend.ErrNotImplemented, "MethodNotAllowed", 1},
		{"NotImplemented", 501, "NotImplemented", backend.ErrNotImplemented, "NotImplemented", 1},
		{"unknown 5xx code", 503, "XBusy", backend.ErrUnavailable, "XBusy", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.fh.Reset()
			f.fh.SetHook(func(faults.HTTPRequest) faults.HTTPFault {
				return faults.HTTPFault{Action: faults.HTTPError, Status: tc.status, Code: tc.code}
			})
			defer f.fh.SetHook(nil)
			_, _, err := f.store.Get(ctx, "bkt", "k")
			backend.WantErr(t, err, tc.want, "bkt", "k")
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not say %q", err, tc.text)
			}
			if tc.want != backend.ErrNotFound && errors.Is(err, backend.ErrNotFound) {
				t.Errorf("%d %s taken for not found: %v", tc.status, tc.code, err)
			}
			if n := len(f.fh.Log()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// TestS3RestoreNotImplemented: a store answering RestoreObject with 405
// (SeaweedFS) or 501 fails with ErrNotImplemented, sent once (no retries).
func TestS3RestoreNotImplemented(t *testing.T) {
	f := newFakeS3(t, nil)
	f.put(t, "bkt", "k", []byte("hello"))
	for _, status := range []int{405, 501} {
		f.fh.Reset()
		f.fh.SetHook(func(r faults.HTTPRequest) faults.HTTPFault {
			if r.Method == http.MethodPost {
				return faults.HTTPFault{Action: faults.HTTPError, Status: status, Code: map[int]string{405: "MethodNotAllowed", 501: "NotImplemented"}[status]}
			}
			return faults.HTTPFault{}
		})
		_, err := f.store.Restore(context.Background(), "bkt", "k", backend.RestoreRequest{Days: 1})
		backend.WantErr(t, err, backend.ErrNotImplemented, "bkt", "k")
		if backend.IsRetryable(err) || len(f.fh.Log()) != 1 {
			t.Errorf("%d: retryable %v, %d requests: %v", status, backend.IsRetryable(err), len(f.fh.Log()), err)
		}
	}
	f.fh.SetHook(nil)
}
