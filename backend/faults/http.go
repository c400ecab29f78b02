package faults

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HTTPRequest is one request as FaultyHTTP sees it. Bucket and Key assume
// path-style addressing (/BUCKET/KEY).
type HTTPRequest struct {
	Method  string
	Bucket  string
	Key     string
	Range   string // the Range header as sent, "" when none
	IfMatch string // the If-Match header as sent, "" when none
	Query   string // the raw query
	N       int    // sequence number: 0 for the first request since creation or Reset
}

// HTTPAction selects what FaultyHTTP does to one request.
type HTTPAction int

const (
	// HTTPPass hands the request to the wrapped server (after Delay).
	HTTPPass HTTPAction = iota
	// HTTPError answers Status (default 503) with an S3 error document
	// whose Code defaults from the status: 500 InternalError, 503 SlowDown,
	// 403 AccessDenied, 404 NoSuchKey, 412 PreconditionFailed,
	// 416 InvalidRange. HEAD answers carry no body, as in S3.
	HTTPError
	// HTTPReset sends the wrapped server's headers and the first After body
	// bytes, then resets the TCP connection (RST). After < 0 resets before
	// any response.
	HTTPReset
	// HTTPTruncate sends the headers (with the full Content-Length) and
	// the first After body bytes, then closes the connection normally.
	HTTPTruncate
	// HTTPIgnoreRange removes the Range header before the wrapped server
	// sees it, so a ranged GET is answered 200 with the whole object.
	HTTPIgnoreRange
	// HTTPShiftRange moves the requested range After bytes further into
	// the object, so the answer is a 206 whose Content-Range (and bytes)
	// are not the ones asked for.
	HTTPShiftRange
	// HTTPExtraBytes drops Content-Length (the response becomes chunked)
	// and appends After extra bytes to the body.
	HTTPExtraBytes
	// HTTPStall sends the headers and the first After body bytes, then
	// stops sending for Stall (a stalled connection) before going on.
	HTTPStall
)

// HTTPFault is what the hook decides for one request.
type HTTPFault struct {
	Action HTTPAction
	Status int           // HTTPError
	Code   string        // HTTPError
	After  int64         // HTTPReset, HTTPTruncate, HTTPShiftRange, HTTPExtraBytes, HTTPStall
	Stall  time.Duration // HTTPStall
	// Delay holds the request this long before acting (a latency spike or,
	// beyond the client's response-header timeout, a timeout).
	Delay time.Duration
	// Bandwidth, when > 0, paces the response body at this many bytes per
	// second (S3's per-connection throughput, as Faulty's Bandwidth models
	// it for a Store), for any Action that sends a body.
	Bandwidth int64
}

// FaultyHandler is the http.Handler FaultyHTTP returns. It also logs the
// requests it saw. It is safe for concurrent use.
type FaultyHandler struct {
	next http.Handler

	mu   sync.Mutex
	hook func(HTTPRequest) HTTPFault
	n    int
	log  []HTTPRequest
}

// FaultyHTTP wraps an S3 server (gofakes3, or any other) so that tests can
// put real protocol faults between it and an S3 client: error statuses with
// S3 error XML, connection resets and truncation mid-body, responses that
// ignore or move the Range, over-long bodies and delays. hook (nil = no
// faults) decides per request; it may be called from several goroutines at
// once.
func FaultyHTTP(next http.Handler, hook func(HTTPRequest) HTTPFault) *FaultyHandler {
	return &FaultyHandler{next: next, hook: hook}
}

// SetHook replaces the hook for later requests.
func (h *FaultyHandler) SetHook(hook func(HTTPRequest) HTTPFault) {
	h.mu.Lock()
	h.hook = hook
	h.mu.Unlock()
}

// Log returns a copy of the requests seen so far.
func (h *FaultyHandler) Log() []HTTPRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

// Reset clears the log and the sequence number.
func (h *FaultyHandler) Reset() {
	h.mu.Lock()
	h.n = 0
	h.log = nil
	h.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (h *FaultyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	req := HTTPRequest{Method: r.Method, Bucket: bucket, Key: key, Range: r.Header.Get("Range"), IfMatch: r.Header.Get("If-Match"), Query: r.URL.RawQuery}
	h.mu.Lock()
	req.N = h.n
	h.n++
	h.log = append(h.log, req)
	hook := h.hook
	h.mu.Unlock()
	var f HTTPFault
	if hook != nil {
		f = hook(req)
	}
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if f.Bandwidth > 0 {
		w = &paceWriter{ResponseWriter: w, rate: f.Bandwidth, start: time.Now(), done: r.Context().Done()}
	}
	switch f.Action {
	case HTTPError:
		writeS3Error(w, r, f.Status, f.Code, req.N)
	case HTTPReset, HTTPTruncate:
		if f.After < 0 {
			hijackClose(w, f.Action == HTTPReset)
			return
		}
		cw := &cutWriter{ResponseWriter: w, limit: f.After, reset: f.Action == HTTPReset}
		h.next.ServeHTTP(cw, r)
		if !cw.cut {
			// The body was shorter than After: cut at its end anyway, so
			// the fault is never silently skipped.
			cw.cutNow()
		}
	case HTTPStall:
		h.next.ServeHTTP(&stallWriter{ResponseWriter: w, limit: f.After, stall: f.Stall, done: r.Context().Done()}, r)
	case HTTPIgnoreRange:
		r.Header.Del("Range")
		h.next.ServeHTTP(w, r)
	case HTTPShiftRange:
		if a, b, ok := parseSimpleRange(r.Header.Get("Range")); ok {
			r.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", a+f.After, b+f.After))
		}
		h.next.ServeHTTP(w, r)
	case HTTPExtraBytes:
		ew := &extraWriter{ResponseWriter: w}
		h.next.ServeHTTP(ew, r)
		if ew.status < 300 && r.Method != http.MethodHead {
			ew.Write(make([]byte, f.After))
		}
	default:
		h.next.ServeHTTP(w, r)
	}
}

// parseSimpleRange parses "bytes=A-B".
func parseSimpleRange(s string) (a, b int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes=")
	if !found {
		return 0, 0, false
	}
	x, y, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	a, err1 := strconv.ParseInt(x, 10, 64)
	b, err2 := strconv.ParseInt(y, 10, 64)
	return a, b, err1 == nil && err2 == nil
}

func writeS3Error(w http.ResponseWriter, r *http.Request, status int, code string, n int) {
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	if code == "" {
		switch status {
		case http.StatusServiceUnavailable:
			code = "SlowDown"
		case http.StatusForbidden:
			code = "AccessDenied"
		case http.StatusNotFound:
			code = "NoSuchKey"
		case http.StatusPreconditionFailed:
			code = "PreconditionFailed"
		case http.StatusRequestedRangeNotSatisfiable:
			code = "InvalidRange"
		default:
			code = "InternalError"
		}
	}
	writeErrorDoc(w, r, status, "fault-"+strconv.Itoa(n), code, "injected fault", "", "")
}

// writeErrorDoc writes an S3 error document (headers only for a HEAD),
// with the InvalidObjectState fields StorageClass and AccessTier when
// given.
func writeErrorDoc(w http.ResponseWriter, r *http.Request, status int, reqID, code, msg, class, tier string) {
	w.Header().Set("x-amz-request-id", reqID)
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	body, _ := xml.Marshal(struct {
		XMLName      xml.Name `xml:"Error"`
		Code         string
		Message      string
		StorageClass string `xml:",omitempty"`
		AccessTier   string `xml:",omitempty"`
		Resource     string
		RequestID    string `xml:"RequestId"`
	}{Code: code, Message: msg, StorageClass: class, AccessTier: tier, Resource: r.URL.Path, RequestID: reqID})
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}

// errCut is what the wrapped handler's writes get after a cut.
var errCut = errors.New("faulty: connection cut (injected)")

// cutWriter passes the first limit body bytes, then flushes them and
// closes the connection under the handler.
type cutWriter struct {
	http.ResponseWriter
	limit   int64
	written int64
	reset   bool
	cut     bool
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.cut {
		return 0, errCut
	}
	if room := c.limit - c.written; int64(len(p)) >= room {
		n, _ := c.ResponseWriter.Write(p[:room])
		c.written += int64(n)
		if int64(len(p)) > room || c.limit == c.written {
			c.cutNow()
			return n, errCut
		}
		return n, nil
	}
	n, err := c.ResponseWriter.Write(p)
	c.written += int64(n)
	return n, err
}

func (c *cutWriter) cutNow() {
	if c.cut {
		return
	}
	c.cut = true
	if fl, ok := c.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	hijackClose(c.ResponseWriter, c.reset)
}

// hijackClose takes the connection from net/http and closes it, with an RST
// when reset is set (SO_LINGER 0), else with a normal FIN.
func hijackClose(w http.ResponseWriter, reset bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faults.FaultyHTTP: the server's ResponseWriter cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		tc.SetLinger(0)
	}
	conn.Close()
}

// extraWriter removes Content-Length and forces a chunked response.
type extraWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (e *extraWriter) WriteHeader(status int) {
	if e.wroteHeader {
		return
	}
	e.wroteHeader = true
	e.status = status
	e.Header().Del("Content-Length")
	e.ResponseWriter.WriteHeader(status)
	if fl, ok := e.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (e *extraWriter) Write(p []byte) (int, error) {
	if !e.wroteHeader {
		e.WriteHeader(http.StatusOK)
	}
	return e.ResponseWriter.Write(p)
}

// stallWriter passes the first limit body bytes, flushes them, and then
// holds the rest back for stall (or until the client goes away).
type stallWriter struct {
	http.ResponseWriter
	limit, written int64
	stall          time.Duration
	stalled        bool
	done           <-chan struct{}
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if s.stalled {
		return s.ResponseWriter.Write(p)
	}
	room := s.limit - s.written
	if int64(len(p)) < room {
		n, err := s.ResponseWriter.Write(p)
		s.written += int64(n)
		return n, err
	}
	n, err := s.ResponseWriter.Write(p[:room])
	s.written += int64(n)
	if err != nil {
		return n, err
	}
	if fl, ok := s.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	s.stalled = true
	t := time.NewTimer(s.stall)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.done:
		return n, errCut
	}
	m, err := s.ResponseWriter.Write(p[room:])
	return n + m, err
}

// paceWriter holds a response body to rate bytes per second from start:
// it writes in slices of paceSlice bytes, flushes each and sleeps until
// the bytes sent so far are due. It passes Flush and Hijack through, so
// the other actions work over it.
type paceWriter struct {
	http.ResponseWriter
	rate  int64
	start time.Time
	sent  int64
	done  <-chan struct{}
}

// paceSlice is the pacing step: small against a 1 MiB range at 100 MB/s
// (about 0.3 ms each), large against the syscall cost.
const paceSlice = 32 << 10

func (p *paceWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), paceSlice)
		m, err := p.ResponseWriter.Write(b[:k])
		n += m
		p.sent += int64(m)
		if err != nil {
			return n, err
		}
		b = b[k:]
		if fl, ok := p.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		due := p.start.Add(time.Duration(float64(p.sent) / float64(p.rate) * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-p.done:
				t.Stop()
				return n, errCut
			}
		}
	}
	return n, nil
}

func (p *paceWriter) Flush() {
	if fl, ok := p.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (p *paceWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := p.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("faults.FaultyHTTP: the server's ResponseWriter cannot be hijacked")
	}
	return hj.Hijack()
}
