// Package s3api is wharf's own read-only S3 HTTP layer on plain net/http.
//
// The shape follows versitygw: a router (router.go) that names the operation,
// a fixed chain of middleware concerns applied in order in ServeHTTP —
// request ids first (so every response, even a failure, carries
// x-amz-request-id and x-amz-id-2), then access log + metrics, addressing
// (path-style, virtual-host only under a configured base domain) with the
// query parsed once (auth.ParseQuery) and the operation named, the CORS
// response headers (cors.go), write rejection and the CORS preflight
// (OPTIONS, unauthenticated), authentication (auth.Verifier, over the parsed query), per-bucket
// authorization, the expected bucket owner check and the per-key
// concurrency limit (limits.go) —
// and one file per operation family: bucket.go (ListBuckets, HeadBucket,
// bucket sub-resources, the CORS preflight), list.go (ListObjects v1/v2),
// versions.go (ListObjectVersions: each upload of a chain is an object
// version, VersionId = upload id; for a dataset bucket each published
// version, VersionId = its version_id), listxml.go (the one writer of those
// listings), object.go (HeadObject/GetObject, with ?versionId),
// attributes.go (GetObjectAttributes), restore.go (RestoreObject and the
// storage class and restore state of archived files). Errors come from one table
// (errors.go). Header parsers are small pure functions (range.go,
// conditional.go, token.go).
//
// With Config.Console, a request for the bucket "-" (/-/console/) leaves the
// chain after addressing for package console, which has its own login; every
// other response then carries Content-Security-Policy: sandbox.
//
// Archives come from a Catalog, resolved on every request. Bodies stream from
// archiveview with a pooled buffer; an error after the headers went out
// aborts the connection so a client never sees a clean short or wrong body.
package s3api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api/internal/tokenbucket"
)

// Authenticator authenticates a request. *auth.Verifier implements it.
type Authenticator interface {
	// AuthenticateQuery authenticates r, whose query the router has parsed
	// once with auth.ParseQuery into q; the handlers serve from the same q.
	AuthenticateQuery(r *http.Request, q auth.Query) (auth.Identity, error)
	// AllowsAnonymous reports whether unsigned requests are served, which
	// makes every bucket public (GetBucketPolicyStatus).
	AllowsAnonymous() bool
}

// Config configures the S3 handler.
type Config struct {
	// Catalog maps bucket names to archives. Required.
	Catalog Catalog
	// Verifier authenticates every request before any handler runs. A nil
	// Verifier denies every request (403 AccessDenied): there is no implicit
	// anonymous mode.
	Verifier Authenticator
	// Logger receives one access line per request (Info) and handler errors.
	Logger zerolog.Logger
	// Registerer receives wharf_requests_total, wharf_request_duration_seconds
	// and wharf_served_bytes_total. nil = metrics are not registered anywhere.
	Registerer prometheus.Registerer
	// Region is reported by GetBucketLocation and HeadBucket. "" = us-east-1.
	Region string
	// VirtualHostBase enables virtual-hosted addressing for Host values
	// "<bucket>.<VirtualHostBase>" (optionally with a port). "" = path-style only.
	VirtualHostBase string
	// OwnerID and OwnerName are shown as the Owner of buckets and objects.
	// "" = "wharf".
	OwnerID, OwnerName string
	// BufferSize is the copy buffer size for object bodies. 0 = 64 KiB.
	BufferSize int
	// MaxInflightPerKey admits at most this many concurrent requests per
	// access key (anonymous callers: per client IP); more get 503 SlowDown
	// at once. 0 = unlimited. See limits.go.
	MaxInflightPerKey int
	// CORS is the buckets' CORS configuration (cors.go): it answers
	// preflights (OPTIONS) and adds Access-Control-* headers to the
	// responses of allowed origins. nil = no bucket has a CORS
	// configuration: every preflight is refused as S3 refuses it and no
	// response carries CORS headers.
	CORS CORSPolicy
	// AllowRestore serves RestoreObject (POST /bucket/key?restore) for
	// keys whose grant allows it (auth.Identity.CanRestore): restores of
	// archived objects cost money, so it is off by default and every such
	// POST is then refused (403 AccessDenied) like a write.
	AllowRestore bool
	// MaxRestoreBytesPerKey bounds the stored bytes of archived objects
	// one access key may ask to restore per hour (restorebudget.go); a
	// restore over it is 503 SlowDown with Retry-After, before anything
	// is sent. 0 = no limit.
	MaxRestoreBytesPerKey int64
	// Console, when set, builds the handler of /-/console/ (package
	// s3api/console) from this S3 handler; its requests are logged and
	// counted as op "Console". With it, every S3 response carries
	// Content-Security-Policy: sandbox (objects share the console's
	// origin and must not run script there).
	Console func(api http.Handler) http.Handler
	// SendTimeout aborts a response that makes no progress for this long:
	// the deadline is set when the status line goes out and moved on by
	// every write the client takes (http.ResponseController's
	// SetWriteDeadline: the connection's write deadline on HTTP/1.1, the
	// stream's on HTTP/2, where an expired stream is reset with
	// RST_STREAM while the connection and its other streams go on). A
	// reader that stops reading, or an HTTP/2 stream whose flow-control
	// window stays closed, then fails its write, and the handler returns
	// and releases the buffers and frames it held. 0 = no deadline.
	SendTimeout time.Duration
	// FollowsUpdates reports whether a bucket's content can change under
	// the same key (an @latest alias, a dataset bucket following CURRENT):
	// its responses are sent with Cache-Control: no-cache (revalidate with
	// the ETag on every use). Every other bucket serves a fixed archive or
	// a pinned version, and a GET or HEAD naming a ?versionId a fixed
	// version: Cache-Control: max-age=31536000, immutable (object.go). nil:
	// every bucket is fixed.
	FollowsUpdates func(bucket string) bool
	// History, when set, gives some buckets a version history of their own
	// (published datasets: catalog's Manager.History): dataset is true for
	// such a bucket, whose versions are then the history's and not its
	// archive's chain. With build the call may build the history (bounded
	// by ctx; an error wrapping backend.ErrUnavailable is a 503); without
	// it the call never does I/O and h is nil until the history is built.
	// nil: every bucket's history is its archive's chain.
	History HistoryFunc
	// VersionIDForm, when set, checks the form of a version id asked of
	// bucket (?versionId= on GET and HEAD) before its history is looked
	// up or built (catalog's Manager.VersionIDForm): an error (wrapping
	// archiveview.ErrBadVersionID) is 400 InvalidArgument "Invalid version
	// id specified", as AWS answers an id of the wrong form, and builds
	// nothing. nil: every id is looked up.
	VersionIDForm func(bucket, id string) error
}

// HistoryFunc gives a bucket a version history of its own (Config.History).
type HistoryFunc func(ctx context.Context, bucket string, a *archiveview.Archive, build bool) (h archiveview.History, dataset bool, err error)

// server is the S3 handler that New returns.
type server struct {
	cfg     Config
	metrics *metrics
	limit   *keyLimiter
	// restoreBudget is Config.MaxRestoreBytesPerKey (restorebudget.go).
	restoreBudget *restoreBudget
	// statusHeads is each client's allowance of backend HEADs refreshing
	// restore states (restoreheads.go).
	statusHeads *tokenbucket.Buckets
	bufs        sync.Pool
	now         func() time.Time
	// The bucket and object Owner, built once: as a struct for the
	// encoding/xml responses and as text for the hand-written listings.
	owner    *owner
	ownerXML string
	console  http.Handler
}

// New returns the S3 http.Handler for cfg. It panics if cfg.Catalog is nil or
// the metrics cannot be registered (a programming error: a Registerer used
// twice).
func New(cfg Config) http.Handler {
	if cfg.Catalog == nil {
		panic("s3api: Config.Catalog is nil")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.OwnerID == "" {
		cfg.OwnerID = "wharf"
	}
	if cfg.OwnerName == "" {
		cfg.OwnerName = "wharf"
	}
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = 64 << 10
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		panic("s3api: " + err.Error())
	}
	lim, err := newKeyLimiter(cfg.MaxInflightPerKey, cfg.Registerer)
	if err != nil {
		panic("s3api: register metrics: " + err.Error())
	}
	rb, err := newRestoreBudget(cfg.MaxRestoreBytesPerKey, cfg.Registerer)
	if err != nil {
		panic("s3api: register metrics: " + err.Error())
	}
	s := &server{cfg: cfg, metrics: m, limit: lim, restoreBudget: rb, statusHeads: newStatusHeads(), now: time.Now,
		owner:    &owner{ID: cfg.OwnerID, DisplayName: cfg.OwnerName},
		ownerXML: ownerElement(cfg.OwnerID, cfg.OwnerName)}
	if cfg.Console != nil {
		s.console = cfg.Console(s)
	}
	size := cfg.BufferSize
	s.bufs.New = func() any {
		b := make([]byte, size)
		return &b
	}
	return s
}

// request is the per-request state shared by middleware and handlers.
type request struct {
	id, hostID string
	op         string
	method     string
	bucket     string
	key        string
	hasKey     bool // a non-empty key was addressed
	// query is the request's query, parsed once by the router with
	// auth.ParseQuery (every pair, in order, as signed); every middleware
	// and handler reads it from here. queryErr is the parse failure, which
	// is answered where authentication would have failed on it (step 5).
	query    auth.Query
	queryErr error
	identity auth.Identity
	start    time.Time
	w        *responseWriter
	r        *http.Request
	cause    error // logged with the access line
	// abort is the cause (abortRead, abortClient) of a response aborted
	// with http.ErrAbortHandler; "" = the client's side (or a panic).
	abort string
	// client is limitKey's client of the request, once authenticated.
	client string
}

// ServeHTTP implements http.Handler.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// 1. Request ids, before anything can fail.
	req := &request{id: newRequestID(), start: s.now(), r: r, method: r.Method}
	req.hostID = hostIDFor(req.id)
	h := w.Header()
	h.Set("X-Amz-Request-Id", req.id)
	h.Set("X-Amz-Id-2", req.hostID)
	h.Set("Server", "wharf")
	rw := &responseWriter{ProgressWriter: ProgressWriter{ResponseWriter: w, Timeout: s.cfg.SendTimeout}}
	req.w = rw

	// 2. Access log and metrics, also on an aborted body.
	defer func() {
		rec := recover()
		if rec != nil && rec != http.ErrAbortHandler {
			// A bug, not a client problem: log it with the stack, answer 500
			// if nothing was sent yet, else break the connection.
			s.cfg.Logger.Error().Str("request_id", req.id).Interface("panic", rec).
				Bytes("stack", debug.Stack()).Msg("handler panic")
			req.cause = fmt.Errorf("panic: %v", rec)
			if !rw.wroteHeader {
				s.writeError(req, &apiError{Code: errInternalError, Bucket: req.bucket, Key: req.key})
				rec = nil
			} else {
				rec = http.ErrAbortHandler
				req.abort = abortPanic
			}
		}
		s.finish(req, rec != nil)
		if rec != nil {
			panic(rec)
		}
	}()

	// 3. Addressing and operation name.
	req.bucket, req.key = s.address(r)
	req.hasKey = req.key != ""
	req.query, req.queryErr = auth.ParseQuery(r.URL.RawQuery)
	req.op = operationName(r.Method, req.bucket, req.hasKey, req.query)
	if req.bucket == "-" && s.console != nil { // no S3 bucket is named "-"
		req.op = opConsole
		s.console.ServeHTTP(rw, r)
		return
	}
	if s.console != nil {
		// The console shares this origin: an archive's HTML or SVG opened
		// as an object (anonymously, by a share link) must not run in it,
		// where it could read the console's pages with the visitor's
		// cookie. A sandboxed document has an opaque origin and no script;
		// the header does nothing to a fetch, an <img> or an SDK.
		h.Set("Content-Security-Policy", "sandbox")
	}

	// CORS headers for an allowed origin, on every answer from here on,
	// errors included, so a page can read why a request failed (cors.go).
	if r.Method != http.MethodOptions {
		s.corsActual(req)
	}

	// A body is never read; its connection is not reused (limits.go).
	if carriesBody(r) {
		h.Set("Connection", "close")
	}

	// 4. Writes are refused before the body is read (so Expect: 100-continue
	// never makes the client send it), except RestoreObject (POST ?restore
	// on a key) when restores are allowed: it goes on to authentication
	// like a read, and its handler reads the body (restore.go); OPTIONS is
	// a CORS preflight, which browsers send unsigned; other methods are
	// not allowed.
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if req.op != opRestoreObject || !s.cfg.AllowRestore {
			s.writeError(req, &apiError{Code: errAccessDenied, Bucket: req.bucket, Key: req.key})
			return
		}
	case http.MethodPut, http.MethodDelete:
		s.writeError(req, &apiError{Code: errAccessDenied, Bucket: req.bucket, Key: req.key})
		return
	case http.MethodOptions:
		s.preflight(req)
		return
	default:
		rw.Header().Set("Allow", "GET, HEAD")
		s.writeError(req, &apiError{Code: errMethodNotAllowed, Bucket: req.bucket, Key: req.key})
		return
	}

	// 5. Authentication, then authorization on every bucket call.
	if s.cfg.Verifier == nil {
		s.writeError(req, &apiError{Code: errAccessDenied, Bucket: req.bucket, Key: req.key})
		return
	}
	if req.queryErr != nil {
		s.writeError(req, authError(req.queryErr, req))
		return
	}
	id, err := s.cfg.Verifier.AuthenticateQuery(r, req.query)
	if err != nil {
		s.writeError(req, authError(err, req))
		return
	}
	req.identity = id
	if req.bucket != "" && !id.CanRead(req.bucket) {
		s.writeError(req, &apiError{Code: errAccessDenied, Bucket: req.bucket, Key: req.key})
		return
	}
	// A caller that names the bucket owner it expects is refused when
	// wharf's owner (Config.OwnerID, shown in listings and ACLs) differs.
	if req.bucket != "" && ownerMismatch(r.Header, req.query, s.cfg.OwnerID) {
		s.writeError(req, &apiError{Code: errAccessDenied, Bucket: req.bucket, Key: req.key})
		return
	}

	// 6. Per-key concurrency limit (limits.go): over it, 503 SlowDown at
	// once; the slot is held until the body has been streamed.
	client := limitKey(id, r)
	req.client = client
	release, ok := s.limit.acquire(client)
	if !ok {
		s.writeError(req, &apiError{Code: errSlowDown, Bucket: req.bucket, Key: req.key,
			Cause: fmt.Errorf("over --max-inflight-per-key: %d requests of this client in flight: %w", s.limit.max, errClientThrottled)})
		return
	}
	defer release()
	req.r = req.r.WithContext(chunkio.WithClient(req.r.Context(), client)) // read memory charged to this client's share

	// 7. Dispatch.
	s.route(req)
}

// ownerMismatch reports whether the request names an expected bucket owner
// (x-amz-expected-bucket-owner) other than owner, in its headers or in its
// query, where SDK presigners move it (aws-sdk-go-v2 hoists it, lower-cased,
// into the presigned URL); a repeated value never matches.
func ownerMismatch(h http.Header, q auth.Query, owner string) bool {
	named := amzValues(h, q, "x-amz-expected-bucket-owner")
	return len(named) > 0 && (len(named) > 1 || named[0] != owner)
}

// authError maps an authentication failure to an S3 error.
func authError(err error, req *request) *apiError {
	var ae *auth.Error
	if errors.As(err, &ae) {
		status := ae.Status
		if status == 0 {
			status = http.StatusForbidden
		}
		return &apiError{Code: errorCode(ae.Code), Message: ae.Message, Status: status,
			Bucket: req.bucket, Key: req.key, Cause: err}
	}
	return &apiError{Code: errAccessDenied, Bucket: req.bucket, Key: req.key, Cause: err}
}

// newRequestID returns 16 upper-case hex characters, like AWS's.
func newRequestID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; keep a usable id.
		return "0000000000000000"
	}
	const hexUpper = "0123456789ABCDEF"
	var out [16]byte // on the stack: the string is the one allocation
	for i, c := range b {
		out[2*i] = hexUpper[c>>4]
		out[2*i+1] = hexUpper[c&15]
	}
	return string(out[:])
}

// hostIDFor derives an x-amz-id-2 value for a request id.
func hostIDFor(id string) string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return id
	}
	var out [2 * len(b)]byte // on the stack, as in newRequestID
	hex.Encode(out[:], b[:])
	return string(out[:])
}

// responseWriter records the status and body bytes for the access log;
// its ProgressWriter holds the response's progress deadline
// (Config.SendTimeout, progress.go).
type responseWriter struct {
	ProgressWriter
	status      int
	bytes       int64
	wroteHeader bool
	writeFailed bool // a body write failed: the client's side
	// cause and abort, set by a handler outside this package (the
	// console) through NoteFailure, for the access line.
	cause error
	abort string
}

// NoteFailure puts err on the access line of the request that w answers,
// for a handler behind Config.Console (which has its own pages but no
// access line): the line is the only one for it, as for the S3 handlers.
// With readFailed, the line is a warning (wharf's side) even when the
// page answered 200 (a preview that could not be read), and a body
// aborted after the headers went out counts as a failed read
// (abort_cause "read"), not the client's leaving, unless a write to the
// client had failed (readAborted: the one rule, the S3 handlers'). A
// second failure of the same request is joined to the first. Outside a
// request of this package's server it does nothing.
func NoteFailure(w http.ResponseWriter, err error, readFailed bool) {
	for {
		switch x := w.(type) {
		case *responseWriter:
			if x.cause != nil {
				err = fmt.Errorf("%w; %w", x.cause, err)
			}
			x.cause = err
			if readFailed {
				x.abort = x.readAborted(abortRead)
			}
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// readAborted is the abort cause of a body cut off by a failed copy:
// the client's side (abortClient) if a write to it had failed (it left,
// or stopped taking bytes), else cause (the read failed: abortRead).
func (w *responseWriter) readAborted(cause string) string {
	if w.writeFailed {
		return abortClient
	}
	return cause
}

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	w.status = code
	w.ProgressWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	fresh := !w.wroteHeader
	if fresh {
		w.WriteHeader(http.StatusOK) // sets the deadline
	}
	n, err := w.ProgressWriter.write(p, !fresh)
	w.bytes += int64(n)
	w.writeFailed = w.writeFailed || err != nil
	return n, err
}

// finish writes the access line and records metrics.
func (s *server) finish(req *request, aborted bool) {
	d := s.now().Sub(req.start)
	if req.cause == nil {
		req.cause = req.w.cause
	}
	if req.abort == "" {
		req.abort = req.w.abort
	}
	status := req.w.status
	if !req.w.wroteHeader {
		status = http.StatusOK
	}
	s.metrics.observe(req.op, status, d, req.w.bytes, req.method == http.MethodGet)
	// A warning is wharf's side: a 5xx, a failed read (a body cut off by
	// one, or one behind a console page) or a panic. What a client alone
	// causes (a 503 for its own rate, whose cause wraps
	// errClientThrottled; a download it left) is info, so one client
	// cannot flood the warnings.
	ev := s.cfg.Logger.Info()
	if (aborted && req.abort != "" && req.abort != abortClient) || req.abort == abortRead || (status >= 500 && !errors.Is(req.cause, errClientThrottled)) {
		ev = s.cfg.Logger.Warn()
	}
	ev = ev.Str("request_id", req.id).
		Str("op", req.op).
		Str("method", backend.PrintableText(req.method, MaxLoggedField)).
		Str("bucket", backend.PrintableText(req.bucket, MaxLoggedField)).
		Str("key", backend.PrintableText(req.key, MaxLoggedKey))
	if len(req.key) > MaxLoggedKey {
		ev = ev.Int("key_bytes", len(req.key))
	}
	ev = ev.Int("status", status).
		Int64("bytes", req.w.bytes).
		Dur("duration", d).
		Str("remote", req.r.RemoteAddr)
	if rg := req.r.Header.Values("Range"); len(rg) > 0 {
		ev = ev.Str("range", backend.PrintableText(strings.Join(rg, ", "), MaxLoggedField))
	}
	if req.identity.AccessKey != "" {
		ev = ev.Str("access_key", req.identity.AccessKey)
	}
	if aborted {
		cause := req.abort
		if cause == "" {
			cause = abortClient
		}
		s.metrics.aborted.WithLabelValues(req.op, cause).Inc()
		ev = ev.Bool("aborted", true).Str("abort_cause", cause)
	}
	if req.cause != nil {
		ev = ev.Str("error", backend.PrintableText(req.cause.Error(), MaxLoggedError))
	}
	ev.Msg("request")
}

// Bounds of the access line's fields that carry a client's bytes (a
// request line and headers may be 64 KiB, --max-header-bytes): the key is
// cut past S3's own limit of 1024 bytes (every real key is logged whole;
// key_bytes has the length of a longer one), the method, bucket and
// Range headers past MaxLoggedField, the error (which names the archive
// and key) past MaxLoggedError. Every such field is
// backend.PrintableText, the one rule for outside text in a log: cut to
// its bound and with every unprintable rune escaped. Both log formats
// escape ASCII controls in a field, but the JSON format (the default)
// writes every other rune as is: a C1 control (U+009B is a terminal's
// CSI) or a bidi override (U+202E) in a key reached whoever reads the
// log in a terminal or a browser, and a JSON reader (jq -r) got a key's
// ESC and CR back as they were.
// The console (package s3api/console) logs with the same bounds.
const (
	MaxLoggedKey   = 1024
	MaxLoggedField = 256
	MaxLoggedError = 4096
)
