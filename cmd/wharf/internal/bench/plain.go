package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wharf-s3/wharf/backend"
)

// plainServer answers GET and HEAD of plain objects (path-style
// /BUCKET/KEY, with Range) straight from a store: the per-object baseline,
// "the file stored as its own S3 object", read by the same SDK clients as
// wharf. It models only what those reads need from S3 (sizes, ETags,
// Content-Range, 206, 404, 416); the store behind it (swappable) adds S3's
// first-byte latency and per-connection bandwidth.
//
// It is also the S3 model wharf itself reads through backend.S3Store in
// the bench's default model (env.go), so it honours If-Match as S3 does.
//
// One request costs one round trip, as on S3: a GET takes the object's
// size and ETag from meta (the same objects with no latency) and pays the
// latency once, on its body; a HEAD, or a GET with no body, pays it on
// the store's Stat.
type plainServer struct {
	meta   backend.Store
	store  atomic.Pointer[backend.Store]
	served atomic.Int64 // HTTP requests answered
	conns  atomic.Int64 // connections accepted (connState)

	mu   sync.Mutex
	idle map[net.Conn]bool // connections idle between requests (connState)
}

// connState counts the connections clients open to p and tracks the idle
// ones (http.Server.ConnState): how well a client reuses its connections.
func (p *plainServer) connState(c net.Conn, s http.ConnState) {
	if s == http.StateNew {
		p.conns.Add(1)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == http.StateIdle {
		if p.idle == nil {
			p.idle = map[net.Conn]bool{}
		}
		p.idle[c] = true
	} else {
		delete(p.idle, c)
	}
}

// closeIdle closes every connection idle between requests (those of a
// client being dropped), as a server's idle timeout would.
func (p *plainServer) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.idle {
		c.Close()
		delete(p.idle, c)
	}
}

func (p *plainServer) use(s backend.Store) { p.store.Store(&s) }

func (p *plainServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.served.Add(1)
	ctx := r.Context()
	store := *p.store.Load()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "read-only", http.StatusMethodNotAllowed)
		return
	}
	stat := p.meta
	if r.Method == http.MethodHead {
		stat = store
	}
	info, err := stat.Stat(ctx, bucket, key)
	if err != nil {
		plainError(w, err)
		return
	}
	h := w.Header()
	if im := r.Header.Get("If-Match"); im != "" && im != "*" && strings.Trim(im, `"`) != info.ETag {
		// wharf's S3Store reads every range of an object under If-Match
		// on the ETag it saw first, as S3 answers it.
		h.Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusPreconditionFailed)
		fmt.Fprint(w, "<Error><Code>PreconditionFailed</Code></Error>")
		return
	}
	h.Set("ETag", `"`+info.ETag+`"`)
	h.Set("Last-Modified", info.LastModified.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	off, n, partial, ok := plainRange(r.Header.Get("Range"), info.Size)
	if !ok {
		h.Set("Content-Range", "bytes */"+strconv.FormatInt(info.Size, 10))
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	status := http.StatusOK
	if partial {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, info.Size))
		status = http.StatusPartialContent
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	if n == 0 {
		if _, err := store.Stat(ctx, bucket, key); err != nil { // the request's one round trip
			plainError(w, err)
			return
		}
		w.WriteHeader(status)
		return
	}
	body, _, err := store.ReadRange(ctx, bucket, key, off, n, info.ETag)
	if err != nil {
		plainError(w, err)
		return
	}
	defer body.Close()
	w.WriteHeader(status)
	// io.Copy, not a buffer of our own: the ResponseWriter is an
	// io.ReaderFrom, which would never use it.
	if _, err := io.Copy(w, body); err != nil && !errors.Is(err, context.Canceled) {
		panic(http.ErrAbortHandler) // a short body must not look complete
	}
}

// plainRange parses "bytes=a-b", "bytes=a-" and "bytes=-n" (one range).
func plainRange(v string, size int64) (off, n int64, partial, ok bool) {
	if v == "" {
		return 0, size, false, true
	}
	spec, found := strings.CutPrefix(v, "bytes=")
	a, b, dash := strings.Cut(spec, "-")
	if !found || !dash || strings.Contains(spec, ",") {
		return 0, size, false, true // not a range we model: the whole object
	}
	if a == "" {
		k, err := strconv.ParseInt(b, 10, 64)
		if err != nil || k <= 0 {
			return 0, 0, false, false
		}
		k = min(k, size)
		return size - k, k, true, true
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first >= size {
		return 0, 0, false, false
	}
	last := size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
			return 0, 0, false, false
		}
		last = min(last, size-1)
	}
	return first, last - first + 1, true, true
}

func plainError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "InternalError"
	switch {
	case errors.Is(err, backend.ErrNotFound):
		status, code = http.StatusNotFound, "NoSuchKey"
	case backend.IsRetryable(err):
		status, code = http.StatusServiceUnavailable, "SlowDown"
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<Error><Code>%s</Code></Error>", code)
}
