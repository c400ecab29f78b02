package faults

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// faultyFixture is a Faulty over a real FileStore holding bkt/obj.
func faultyFixture(t *testing.T, cfg FaultConfig) (*Faulty, []byte) {
	t.Helper()
	dir := t.TempDir()
	data := randBytes(20, 100000)
	if err := os.MkdirAll(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bkt", "obj"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"l1", "l2"} {
		if err := os.WriteFile(filepath.Join(dir, "bkt", k), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return NewFaulty(backend.NewFileStore(dir), cfg), data
}

func TestFaultyCounters(t *testing.T) {
	f, data := faultyFixture(t, FaultConfig{})
	ctx := context.Background()
	var wantBytes int64
	for _, r := range []struct{ off, n int64 }{{0, 10}, {500, 4000}, {99999, 1}} {
		got, _, err := readAllRange(f, "bkt", "obj", r.off, r.n, "")
		if err != nil || !bytes.Equal(got, data[r.off:r.off+r.n]) {
			t.Fatalf("range %v: %v", r, err)
		}
		wantBytes += r.n
	}
	rc, _, err := f.Get(ctx, "bkt", "obj")
	if err != nil {
		t.Fatal(err)
	}
	// Read only half: bytes count what was handed over.
	if _, err := io.ReadFull(rc, make([]byte, 50000)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	wantBytes += 50000
	if _, err := f.Stat(ctx, "bkt", "obj"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(ctx, "bkt", "missing"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatal(err)
	}
	var listed []string
	if err := f.List(ctx, "bkt", "l", func(oi backend.ObjectInfo) error { listed = append(listed, oi.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAllRange(f, "bkt", "missing", 0, 1, ""); !errors.Is(err, backend.ErrNotFound) {
		t.Fatal(err)
	}

	for op, want := range map[string]int64{"range": 4, "get": 1, "stat": 2, "list": 1, "": 8} {
		if got := f.Requests(op); got != want {
			t.Errorf("Requests(%q) = %d, want %d", op, got, want)
		}
	}
	if got := f.BytesReturned(); got != wantBytes {
		t.Errorf("BytesReturned = %d, want %d", got, wantBytes)
	}
	wantLog := []Request{
		{Op: "range", Bucket: "bkt", Key: "obj", Off: 0, Len: 10, N: 0},
		{Op: "range", Bucket: "bkt", Key: "obj", Off: 500, Len: 4000, N: 1},
		{Op: "range", Bucket: "bkt", Key: "obj", Off: 99999, Len: 1, N: 2},
		{Op: "get", Bucket: "bkt", Key: "obj", N: 3},
		{Op: "stat", Bucket: "bkt", Key: "obj", N: 4},
		{Op: "stat", Bucket: "bkt", Key: "missing", N: 5},
		{Op: "list", Bucket: "bkt", Key: "l", N: 6},
		{Op: "range", Bucket: "bkt", Key: "missing", Off: 0, Len: 1, N: 7},
	}
	if got := f.Log(); !slices.Equal(got, wantLog) {
		t.Errorf("log\n%+v\nwant\n%+v", got, wantLog)
	}
	if !slices.Equal(listed, []string{"l1", "l2"}) {
		t.Errorf("listed %v", listed)
	}
	f.Reset()
	if f.Requests("") != 0 || f.Requests("range") != 0 || f.BytesReturned() != 0 || len(f.Log()) != 0 {
		t.Fatal("Reset left counts behind")
	}
	if _, err := f.Stat(ctx, "bkt", "obj"); err != nil {
		t.Fatal(err)
	}
	if log := f.Log(); len(log) != 1 || log[0].N != 0 {
		t.Fatalf("after Reset: %+v", log)
	}
}

func TestFaultyFaults(t *testing.T) {
	const off, n = 1000, 20000
	tests := []struct {
		name       string
		fault      Fault
		want       error // nil: no error
		failAtOpen bool
		delivered  int64 // bytes handed over
		flips      []int64
		minTime    time.Duration
	}{
		{name: "none", fault: Fault{}, delivered: n},
		{name: "error default", fault: Fault{Kind: FaultError}, want: backend.ErrUnavailable, failAtOpen: true},
		{name: "error not found", fault: Fault{Kind: FaultError, Err: backend.ErrNotFound}, want: backend.ErrNotFound, failAtOpen: true},
		{name: "error access denied", fault: Fault{Kind: FaultError, Err: backend.ErrAccessDenied}, want: backend.ErrAccessDenied, failAtOpen: true},
		{name: "truncate", fault: Fault{Kind: FaultTruncate, After: 7000}, want: backend.ErrBadResponse, delivered: 7000},
		{name: "truncate at 0", fault: Fault{Kind: FaultTruncate, After: 0}, want: backend.ErrBadResponse, delivered: 0},
		{name: "reset", fault: Fault{Kind: FaultReset, After: 12345}, want: backend.ErrUnavailable, delivered: 12345},
		{name: "truncate past end", fault: Fault{Kind: FaultTruncate, After: n}, delivered: n},
		{name: "flip", fault: Fault{Kind: FaultFlip, FlipAt: []int64{0, off, off + 1, off + n - 1, off + n}}, delivered: n,
			flips: []int64{off, off + 1, off + n - 1}},
		{name: "ignore range", fault: Fault{Kind: FaultIgnoreRange}, want: backend.ErrBadResponse, failAtOpen: true},
		{name: "latency spike", fault: Fault{Delay: 150 * time.Millisecond}, delivered: n, minTime: 150 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seen []Request
			f, data := faultyFixture(t, FaultConfig{Hook: func(r Request) Fault {
				seen = append(seen, r)
				return tc.fault
			}})
			start := time.Now()
			rc, _, err := f.ReadRange(context.Background(), "bkt", "obj", off, n, "")
			if tc.failAtOpen {
				wantErr(t, err, tc.want, "bkt", "obj")
				if backend.IsRetryable(err) != errors.Is(tc.want, backend.ErrUnavailable) {
					t.Fatalf("backend.IsRetryable(%v) = %v", err, backend.IsRetryable(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			wantErr(t, err, tc.want, "bkt", "obj")
			if time.Since(start) < tc.minTime {
				t.Fatalf("took %v, want at least %v", time.Since(start), tc.minTime)
			}
			if int64(len(got)) != tc.delivered || f.BytesReturned() != tc.delivered {
				t.Fatalf("%d bytes read, %d counted, want %d", len(got), f.BytesReturned(), tc.delivered)
			}
			want := slices.Clone(data[off : off+tc.delivered])
			for _, at := range tc.flips {
				want[at-off] ^= 0xFF
			}
			if !bytes.Equal(got, want) {
				t.Fatal("bytes differ from the source (with the expected flips)")
			}
			if len(seen) != 1 || seen[0] != (Request{Op: "range", Bucket: "bkt", Key: "obj", Off: off, Len: n}) {
				t.Fatalf("hook saw %+v", seen)
			}
		})
	}
}

func TestFaultyLatencyAndBandwidth(t *testing.T) {
	f, data := faultyFixture(t, FaultConfig{Latency: 50 * time.Millisecond, Bandwidth: 400 << 10})
	start := time.Now()
	got, _, err := readAllRange(f, "bkt", "obj", 0, 40960, "")
	if err != nil || !bytes.Equal(got, data[:40960]) {
		t.Fatal(err)
	}
	// 50ms latency + 40 KiB at 400 KiB/s = 150ms.
	if el := time.Since(start); el < 140*time.Millisecond || el > 3*time.Second {
		t.Fatalf("took %v, want about 150ms", el)
	}

	f, data = faultyFixture(t, FaultConfig{TotalBandwidth: 400 << 10})
	start = time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Go(func() {
			off := int64(i) * 20480
			got, _, err := readAllRange(f, "bkt", "obj", off, 20480, "")
			if err == nil && !bytes.Equal(got, data[off:off+20480]) {
				err = errors.New("bytes differ")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// 2 × 20 KiB shared at 400 KiB/s = 100ms.
	if el := time.Since(start); el < 90*time.Millisecond || el > 3*time.Second {
		t.Fatalf("took %v, want about 100ms", el)
	}
}

func TestFaultyConcurrent(t *testing.T) {
	f, data := faultyFixture(t, FaultConfig{Hook: func(r Request) Fault {
		if r.N%5 == 0 {
			return Fault{Kind: FaultError}
		}
		return Fault{}
	}})
	const workers, each = 8, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	var okBytes int64
	var failed int
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				off := int64(w*1000 + i)
				got, _, err := readAllRange(f, "bkt", "obj", off, 100, "")
				mu.Lock()
				switch {
				case err == nil && bytes.Equal(got, data[off:off+100]):
					okBytes += 100
				case errors.Is(err, backend.ErrUnavailable):
					failed++
				default:
					t.Errorf("read %d: %v", off, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got := f.Requests("range"); got != workers*each {
		t.Fatalf("Requests = %d, want %d", got, workers*each)
	}
	if failed != workers*each/5 {
		t.Fatalf("%d failed, want %d", failed, workers*each/5)
	}
	if f.BytesReturned() != okBytes {
		t.Fatalf("BytesReturned = %d, want %d", f.BytesReturned(), okBytes)
	}
	ns := make([]int, 0, workers*each)
	for _, r := range f.Log() {
		ns = append(ns, r.N)
	}
	slices.Sort(ns)
	for i, n := range ns {
		if n != i {
			t.Fatalf("sequence numbers not 0..%d: %v", len(ns)-1, ns)
		}
	}
}

func TestFaultyContextCancel(t *testing.T) {
	f, _ := faultyFixture(t, FaultConfig{Latency: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := f.ReadRange(ctx, "bkt", "obj", 0, 1, "")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

// cancellingStore is a FileStore whose bodies cancel their request (cancel)
// from inside a Read once armed: the client leaves while that Read is in
// the store.
type cancellingStore struct {
	backend.Store
	armed  *atomic.Bool
	cancel context.CancelFunc
}

func (s cancellingStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	rc, info, err := s.Store.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err != nil {
		return nil, info, err
	}
	return cancellingBody{rc, s}, info, nil
}

type cancellingBody struct {
	io.ReadCloser
	s cancellingStore
}

func (b cancellingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.s.armed.Load() {
		b.s.cancel()
	}
	return n, err
}

// TestFaultyReadAfterCancel: a Read during which the body's request
// context ends (the client left while it was in the store), and every Read
// after, fails with the context's error, hands out no byte and counts
// none, as a real store's body does. On the code before, that Read
// returned its bytes and BytesReturned grew after the request had ended:
// s3api's Test36DisconnectCancelsBackendReads, under -race, saw 256 KiB
// "still flowing after the handler ended" in 4 of 10 runs.
func TestFaultyReadAfterCancel(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(20, 100000)
	if err := os.MkdirAll(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bkt", "obj"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var armed atomic.Bool
	f := NewFaulty(cancellingStore{backend.NewFileStore(dir), &armed, cancel}, FaultConfig{})
	rc, _, err := f.ReadRange(ctx, "bkt", "obj", 0, 20000, "")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(rc, buf); err != nil || !bytes.Equal(buf, data[:1000]) {
		t.Fatalf("first read: %v", err)
	}
	armed.Store(true)
	for i := range 2 { // the Read that saw the cancel, then one after it
		if n, err := rc.Read(buf); n != 0 || !errors.Is(err, context.Canceled) {
			t.Fatalf("read %d from the cancel: %d bytes, %v; want 0 and context.Canceled", i, n, err)
		}
	}
	if got := f.BytesReturned(); got != 1000 {
		t.Fatalf("BytesReturned %d, want the 1000 read before the cancel", got)
	}
}

// TestFaultyStall: a stalled body delivers its first After bytes, then
// blocks until the request's context ends and fails with its error.
func TestFaultyStall(t *testing.T) {
	f, data := faultyFixture(t, FaultConfig{Hook: func(Request) Fault { return Fault{Kind: FaultStall, After: 3000} }})
	// start before the deadline is set: the deadline is 200 ms after it.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rc, _, err := f.ReadRange(ctx, "bkt", "obj", 100, 20000, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("err %v after %v, want the context's deadline after 200 ms", err, time.Since(start))
	}
	if !bytes.Equal(got, data[100:3100]) {
		t.Fatalf("%d bytes delivered, want the first 3000", len(got))
	}
}

func TestFaultyStatListGetFaults(t *testing.T) {
	f, data := faultyFixture(t, FaultConfig{})
	ctx := context.Background()
	f.SetHook(func(r Request) Fault {
		if r.Op == "stat" || r.Op == "list" {
			return Fault{Kind: FaultError, Err: backend.ErrAccessDenied}
		}
		return Fault{Kind: FaultFlip, FlipAt: []int64{5}}
	})
	_, err := f.Stat(ctx, "bkt", "obj")
	wantErr(t, err, backend.ErrAccessDenied, "bkt", "obj")
	err = f.List(ctx, "bkt", "l", func(backend.ObjectInfo) error { return nil })
	wantErr(t, err, backend.ErrAccessDenied, "bkt", "l")
	rc, _, err := f.Get(ctx, "bkt", "obj")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	want := slices.Clone(data)
	want[5] ^= 0xFF
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get with a flip: %v", err)
	}
	f.SetHook(nil)
	if _, err := f.Stat(ctx, "bkt", "obj"); err != nil {
		t.Fatal(err)
	}
	if f.Requests("stat") != 2 || f.Requests("list") != 1 || f.Requests("get") != 1 {
		t.Fatalf("counts %d %d %d", f.Requests("stat"), f.Requests("list"), f.Requests("get"))
	}
}

// NoETags: no ObjectInfo carries an ETag, and If-Match is ignored (a
// wrong one still reads), as from a store that sends no ETag header.
func TestFaultyNoETags(t *testing.T) {
	f, data := faultyFixture(t, FaultConfig{NoETags: true})
	ctx := context.Background()
	got, info, err := readAllRange(f, "bkt", "obj", 10, 100, "not-the-etag")
	if err != nil || info.ETag != "" || !bytes.Equal(got, data[10:110]) {
		t.Fatalf("range with a wrong If-Match: %d bytes, etag %q, %v", len(got), info.ETag, err)
	}
	rc, info, err := f.Get(ctx, "bkt", "obj")
	if err != nil || info.ETag != "" {
		t.Fatalf("get: etag %q, %v", info.ETag, err)
	}
	rc.Close()
	if info, err := f.Stat(ctx, "bkt", "obj"); err != nil || info.ETag != "" {
		t.Fatalf("stat: etag %q, %v", info.ETag, err)
	}
	n := 0
	if err := f.List(ctx, "bkt", "", func(o backend.ObjectInfo) error {
		n++
		if o.ETag != "" {
			t.Errorf("list: %s has etag %q", o.Key, o.ETag)
		}
		return nil
	}); err != nil || n == 0 {
		t.Fatalf("list: %d objects, %v", n, err)
	}
}
