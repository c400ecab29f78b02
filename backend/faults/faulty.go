// Package faults is a test layer for wharf's storage: it puts a modelled
// network and chosen failures between wharf and its bytes. It is used by
// tests and by "wharf bench" (S3-like latency and bandwidth, and the soak's
// injected faults); the serving path never builds one.
//
// The wrappers, all safe for concurrent use:
//
//   - Faulty wraps a backend.Store. It adds first-byte latency to every
//     request and caps each body stream at a bandwidth (a model of S3's
//     per-connection throughput), optionally also all streams together. It
//     counts requests by operation and body bytes handed to readers exactly,
//     keeps a log of every request, and applies the Fault a hook chooses:
//     an error before any body, a body truncated or reset after N bytes,
//     flipped bytes (silent corruption) or a ranged read answered with the
//     whole object; or (NoETags) it acts as a store that reports no ETag
//     and ignores If-Match. Errors are *backend.Error values wrapping the
//     backend sentinels, exactly as a real store reports them.
//   - Glacier (glacier.go) models S3's archive storage classes and
//     restores: a class per object, reads refused (InvalidObjectState)
//     until a restore finished after a configurable delay, x-amz-restore on
//     HEAD, classes and RestoreStatus in listings, RestoreObject's status
//     codes and a log of restores. Glacier.Store puts it in front of a
//     backend.Store, Glacier.HTTP in front of an S3 server's handler.
//   - FaultyHTTP wraps an S3 server's http.Handler (gofakes3 in tests) and
//     applies the HTTPFault a hook chooses to real protocol traffic: S3
//     error documents, connection resets and truncation mid-body, stalls,
//     ignored or shifted ranges, over-long bodies and paced bodies (a
//     per-connection bandwidth), so that S3Store's
//     retries, resumes and checks are tested against the wire.
//
// A hook sees each request (with a sequence number) and returns the fault
// for it; the zero Fault or HTTPFault passes the request through unchanged.
package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// Request is one store request as Faulty sees it and logs it.
type Request struct {
	Op     string // "range", "get", "stat", "list" or "restore"
	Bucket string
	Key    string // the key, or the prefix for "list"
	Off    int64  // "range": first byte; otherwise 0
	Len    int64  // "range": length; otherwise 0
	N      int    // sequence number: 0 for the first request since NewFaulty or Reset
}

// FaultKind selects what a Fault does to one request.
type FaultKind int

const (
	// NoFault passes the request through (Fault.Delay still applies).
	NoFault FaultKind = iota
	// FaultError fails the request before any body with Fault.Err
	// (nil = backend.ErrUnavailable, as for a 503 SlowDown).
	FaultError
	// FaultTruncate ends the body after Fault.After bytes: the reader then
	// returns an error wrapping backend.ErrBadResponse, as a store reader
	// does for a short body.
	FaultTruncate
	// FaultReset fails the body after Fault.After bytes with an error
	// wrapping backend.ErrUnavailable, as for a connection reset mid-body.
	FaultReset
	// FaultFlip XORs 0xFF into the bytes at the object offsets in
	// Fault.FlipAt that the body covers. Nothing reports it: this is the
	// silent corruption that checksums above the store must catch.
	FaultFlip
	// FaultIgnoreRange acts as a store that answered a ranged read with the
	// whole object from byte 0. A real store must never pass that on, so
	// ReadRange fails with backend.ErrBadResponse exactly as
	// backend.S3Store does. Only "range" requests are affected.
	FaultIgnoreRange
	// FaultStall delivers Fault.After body bytes, then nothing more: the
	// next Read blocks until the request's context ends (a connection that
	// stopped sending without closing). It then returns the context's error.
	FaultStall
)

// Fault is what the hook decides for one request.
type Fault struct {
	Kind   FaultKind
	Err    error   // FaultError: the error to wrap (nil = backend.ErrUnavailable)
	After  int64   // FaultTruncate, FaultReset, FaultStall: body bytes delivered first
	FlipAt []int64 // FaultFlip: object offsets to corrupt
	// Delay is added to FaultConfig.Latency before the response (a latency
	// spike), for any Kind.
	Delay time.Duration
	// Bandwidth, when > 0, caps this request's body stream at this many
	// bytes per second instead of FaultConfig.Bandwidth (one slow
	// download among fast ones), for any Kind.
	Bandwidth int64
}

// FaultConfig configures a Faulty wrapper.
type FaultConfig struct {
	// Latency is added to every request before its response (time to first
	// byte).
	Latency time.Duration
	// Bandwidth caps each body stream at this many bytes per second,
	// modelling S3's per-connection throughput. 0 = unlimited.
	Bandwidth int64
	// TotalBandwidth caps all body streams together (a NIC). 0 = unlimited.
	TotalBandwidth int64
	// Hook decides the fault for each request; nil = no faults. It may be
	// called from several goroutines at once.
	Hook func(Request) Fault
	// NoETags acts as a store that reports no ETag (an S3-compatible
	// server that sends no ETag header) and so cannot honour If-Match:
	// every ObjectInfo it returns has ETag "", and ReadRange ignores
	// ifMatch.
	NoETags bool
}

// Faulty wraps a backend.Store for tests and "wharf bench": it counts
// requests and body bytes exactly, logs every request, adds latency and
// bandwidth limits, and injects the faults a hook chooses. It is safe for
// concurrent use.
//
// Counters: every call is one request (also those failed by a fault), by
// Op; BytesReturned counts body bytes actually handed to readers (after
// truncation, so a truncated body counts what was delivered). Like a real
// store's body, one whose request's context ended fails its next Read
// with the context's error and hands out (and counts) nothing more.
type Faulty struct {
	inner backend.Store
	cfg   FaultConfig
	total *limiter

	mu    sync.Mutex
	hook  func(Request) Fault
	n     int
	byOp  map[string]int64
	bytes int64
	log   []Request
}

// NewFaulty wraps inner.
func NewFaulty(inner backend.Store, cfg FaultConfig) *Faulty {
	f := &Faulty{inner: inner, cfg: cfg, hook: cfg.Hook, byOp: map[string]int64{}}
	if cfg.TotalBandwidth > 0 {
		f.total = &limiter{rate: cfg.TotalBandwidth}
	}
	return f
}

// SetHook replaces the fault hook (nil = no faults) for later requests.
func (f *Faulty) SetHook(hook func(Request) Fault) {
	f.mu.Lock()
	f.hook = hook
	f.mu.Unlock()
}

// Requests returns the number of requests with the given Op ("range",
// "get", "stat", "list"), or of all requests when op is "".
func (f *Faulty) Requests(op string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if op == "" {
		return int64(f.n)
	}
	return f.byOp[op]
}

// BytesReturned is the number of body bytes handed to readers.
func (f *Faulty) BytesReturned() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes
}

// Log returns a copy of the requests so far, in the order they were made.
func (f *Faulty) Log() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// Reset zeroes the counters, the log and the sequence number.
func (f *Faulty) Reset() {
	f.mu.Lock()
	f.n = 0
	f.byOp = map[string]int64{}
	f.bytes = 0
	f.log = nil
	f.mu.Unlock()
}

// begin records a request, asks the hook and waits out the latency.
func (f *Faulty) begin(ctx context.Context, req Request) (Fault, error) {
	f.mu.Lock()
	req.N = f.n
	f.n++
	f.byOp[req.Op]++
	f.log = append(f.log, req)
	hook := f.hook
	f.mu.Unlock()
	var fault Fault
	if hook != nil {
		fault = hook(req)
	}
	if err := sleepCtx(ctx, f.cfg.Latency+fault.Delay); err != nil {
		return fault, &backend.Error{Op: req.Op, Bucket: req.Bucket, Key: req.Key, Err: err}
	}
	if fault.Kind == FaultError {
		err := fault.Err
		if err == nil {
			err = backend.ErrUnavailable
		}
		var be *backend.Error
		if errors.As(err, &be) {
			return fault, err
		}
		return fault, &backend.Error{Op: req.Op, Bucket: req.Bucket, Key: req.Key, Err: fmt.Errorf("%w (injected)", err)}
	}
	return fault, nil
}

// addBytesLive counts n body bytes handed to a reader whose request's
// context is ctx, unless ctx has ended (then it counts nothing and returns
// false). The check and the count are one step under f.mu: whoever reads
// BytesReturned after a request's context was cancelled sees every byte
// that request will ever be counted for.
func (f *Faulty) addBytesLive(ctx context.Context, n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	f.bytes += int64(n)
	return true
}

// ReadRange implements backend.Store.
func (f *Faulty) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	fault, err := f.begin(ctx, Request{Op: "range", Bucket: bucket, Key: key, Off: off, Len: length})
	if err != nil {
		return nil, backend.ObjectInfo{}, err
	}
	if fault.Kind == FaultIgnoreRange {
		return nil, backend.ObjectInfo{}, &backend.Error{Op: "range", Bucket: bucket, Key: key,
			Err: fmt.Errorf("%w: status 200 for Range bytes=%d-%d: the store ignored the range (injected)",
				backend.ErrBadResponse, off, off+length-1)}
	}
	if f.cfg.NoETags {
		ifMatch = ""
	}
	rc, info, err := f.inner.ReadRange(ctx, bucket, key, off, length, ifMatch)
	info = f.etag(info)
	if err != nil {
		return nil, info, err
	}
	return f.wrap(ctx, rc, fault, "range", bucket, key, off, length), info, nil
}

// Get implements backend.Store.
func (f *Faulty) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	fault, err := f.begin(ctx, Request{Op: "get", Bucket: bucket, Key: key})
	if err != nil {
		return nil, backend.ObjectInfo{}, err
	}
	rc, info, err := f.inner.Get(ctx, bucket, key)
	info = f.etag(info)
	if err != nil {
		return nil, info, err
	}
	return f.wrap(ctx, rc, fault, "get", bucket, key, 0, info.Size), info, nil
}

// Stat implements backend.Store.
func (f *Faulty) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	if _, err := f.begin(ctx, Request{Op: "stat", Bucket: bucket, Key: key}); err != nil {
		return backend.ObjectInfo{}, err
	}
	info, err := f.inner.Stat(ctx, bucket, key)
	return f.etag(info), err
}

// etag drops info's ETag when the store models one without ETags.
func (f *Faulty) etag(info backend.ObjectInfo) backend.ObjectInfo {
	if f.cfg.NoETags {
		info.ETag = ""
	}
	return info
}

// List implements backend.Store. One List call is one request, whatever
// the number of pages the inner store fetches.
func (f *Faulty) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	if _, err := f.begin(ctx, Request{Op: "list", Bucket: bucket, Key: prefix}); err != nil {
		return err
	}
	if f.cfg.NoETags {
		return f.inner.List(ctx, bucket, prefix, func(o backend.ObjectInfo) error { return fn(f.etag(o)) })
	}
	return f.inner.List(ctx, bucket, prefix, fn)
}

func (f *Faulty) wrap(ctx context.Context, rc io.ReadCloser, fault Fault, op, bucket, key string, base, want int64) io.ReadCloser {
	return &faultyReader{f: f, ctx: ctx, inner: rc, fault: fault, op: op, bucket: bucket, key: key,
		base: base, want: want, start: time.Now()}
}

// faultyReader applies a body fault, counts bytes and limits bandwidth.
type faultyReader struct {
	f      *Faulty
	ctx    context.Context
	inner  io.ReadCloser
	fault  Fault
	op     string
	bucket string
	key    string
	base   int64 // object offset of the first body byte
	want   int64 // body length promised
	pos    int64 // body bytes delivered
	start  time.Time
}

func (r *faultyReader) Read(p []byte) (int, error) {
	// A cut at or beyond the body's end changes nothing.
	cut := (r.fault.Kind == FaultTruncate || r.fault.Kind == FaultReset) && r.fault.After < r.want
	if cut && r.pos >= r.fault.After {
		if r.fault.Kind == FaultTruncate {
			return 0, &backend.Error{Op: r.op, Bucket: r.bucket, Key: r.key,
				Err: fmt.Errorf("%w: body ended after %d of %d bytes (injected truncation)", backend.ErrBadResponse, r.pos, r.want)}
		}
		return 0, &backend.Error{Op: r.op, Bucket: r.bucket, Key: r.key,
			Err: fmt.Errorf("%w: connection reset after %d of %d bytes (injected)", backend.ErrUnavailable, r.pos, r.want)}
	}
	stall := r.fault.Kind == FaultStall
	if stall && r.pos >= r.fault.After {
		<-r.ctx.Done()
		return 0, &backend.Error{Op: r.op, Bucket: r.bucket, Key: r.key, Err: r.ctx.Err()}
	}
	if (cut || stall) && int64(len(p)) > r.fault.After-r.pos {
		p = p[:r.fault.After-r.pos]
	}
	n, err := r.inner.Read(p)
	// A real store's body (net/http) fails once its request's context
	// ended: no byte is handed out (or counted) after it.
	if n > 0 && !r.f.addBytesLive(r.ctx, n) {
		return 0, &backend.Error{Op: r.op, Bucket: r.bucket, Key: r.key, Err: r.ctx.Err()}
	}
	if n > 0 {
		if r.fault.Kind == FaultFlip {
			lo, hi := r.base+r.pos, r.base+r.pos+int64(n)
			for _, at := range r.fault.FlipAt {
				if at >= lo && at < hi {
					p[at-lo] ^= 0xFF
				}
			}
		}
		r.pos += int64(n)
		if werr := r.throttle(n); werr != nil && err == nil {
			err = &backend.Error{Op: r.op, Bucket: r.bucket, Key: r.key, Err: werr}
		}
	}
	return n, err
}

// throttle sleeps so that the stream stays under Bandwidth and all streams
// under TotalBandwidth.
func (r *faultyReader) throttle(n int) error {
	var wait time.Duration
	bw := r.f.cfg.Bandwidth
	if r.fault.Bandwidth > 0 {
		bw = r.fault.Bandwidth
	}
	if bw > 0 {
		due := r.start.Add(time.Duration(float64(r.pos) / float64(bw) * float64(time.Second)))
		wait = time.Until(due)
	}
	if r.f.total != nil {
		wait = max(wait, r.f.total.reserve(int64(n)))
	}
	return sleepCtx(r.ctx, wait)
}

func (r *faultyReader) Close() error { return r.inner.Close() }

// limiter is a shared bandwidth budget: each reservation is scheduled after
// the previous ones at rate bytes per second.
type limiter struct {
	rate int64
	mu   sync.Mutex
	next time.Time
}

// reserve books n bytes and returns how long the caller must wait.
func (l *limiter) reserve(n int64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	l.next = l.next.Add(time.Duration(float64(n) / float64(l.rate) * float64(time.Second)))
	return l.next.Sub(now)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PutIfAbsent passes a write through (not counted, no faults) when the
// inner store can write: the shared index cache in tests. Over a store
// that cannot, it fails with backend.ErrNotImplemented and CanPut is
// false, so backend.AsPutter says the wrapper cannot write either.
func (f *Faulty) PutIfAbsent(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) (bool, error) {
	return backend.PutThrough(ctx, f.inner, bucket, key, body, size)
}

// PutIfMatch passes a conditional replacement through (not counted, no
// faults) when the inner store can make one; over one that cannot, it
// fails with backend.ErrNotImplemented and CanPutIfMatch is false.
func (f *Faulty) PutIfMatch(ctx context.Context, bucket, key, etag string, body io.ReadSeeker, size int64) (bool, error) {
	return backend.PutIfMatchThrough(ctx, f.inner, bucket, key, etag, body, size)
}

// CanPutIfMatch reports whether the inner store can replace objects
// conditionally (backend.AsMatchPutter).
func (f *Faulty) CanPutIfMatch() bool {
	_, ok := backend.AsMatchPutter(f.inner)
	return ok
}

// CanPut reports whether the inner store can write (backend.AsPutter).
func (f *Faulty) CanPut() bool {
	_, ok := backend.AsPutter(f.inner)
	return ok
}

// Restore passes a restore through when the inner store restores (a
// Glacier model, an S3Store): one request of Op "restore", counted, logged
// and open to the hook's FaultError and Delay. Over a store that does not
// restore it fails with backend.ErrNotImplemented and CanRestore is false,
// so backend.AsRestorer says the wrapper does not restore either.
func (f *Faulty) Restore(ctx context.Context, bucket, key string, req backend.RestoreRequest) (backend.RestoreResult, error) {
	r, ok := backend.AsRestorer(f.inner)
	if !ok {
		return 0, &backend.Error{Op: "restore", Bucket: bucket, Key: key, Err: fmt.Errorf("%w: the store cannot restore objects", backend.ErrNotImplemented)}
	}
	if _, err := f.begin(ctx, Request{Op: "restore", Bucket: bucket, Key: key}); err != nil {
		return 0, err
	}
	return r.Restore(ctx, bucket, key, req)
}

// CanRestore reports whether the inner store restores (backend.AsRestorer).
func (f *Faulty) CanRestore() bool {
	_, ok := backend.AsRestorer(f.inner)
	return ok
}
