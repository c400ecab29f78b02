package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3Config configures an S3Store. The zero value talks to AWS with the
// standard credential chain (AWS_* environment, shared config profiles,
// SSO, IMDS) and the defaults documented on each field.
type S3Config struct {
	// Endpoint overrides the service endpoint, e.g. "http://127.0.0.1:9000"
	// for MinIO or a test server. "" = the SDK's resolution (AWS, or
	// AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3 when set).
	Endpoint string
	// Region; "" = from the environment/profile, else "us-east-1".
	Region string
	// PathStyle addresses buckets as /BUCKET/KEY instead of BUCKET.host.
	// Most non-AWS servers need it.
	PathStyle bool
	// MaxRetries is how many times the SDK retries a request that failed
	// with a retryable error (5xx, SlowDown, throttling, timeout, connection
	// error) before giving up. 0 = default (4, so 5 attempts); < 0 = none.
	MaxRetries int
	// MaxBackoff caps the delay between retries. 0 = 5s. The delay before
	// retry i is uniform in [0, min(MaxBackoff, 100ms·2^(i-1))] ("full
	// jitter"), so a burst of failures spreads out instead of synchronising.
	MaxBackoff time.Duration
	// MaxResumes is how many times one body read may resume after a
	// mid-body failure (reset, timeout, early end) by issuing a new ranged
	// GET for the remainder with If-Match on the ETag seen first.
	// 0 = default (2); < 0 = none.
	MaxResumes int

	// Static credentials; when AccessKeyID is set they replace the default
	// credential chain.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// Profile selects a shared-config profile ("" = AWS_PROFILE or default).
	Profile string
	// Anonymous sends unsigned requests (public buckets).
	Anonymous bool

	// MaxConnsPerHost limits connections per host, 0 = unlimited. Idle
	// connections kept per host are max(256, MaxConnsPerHost).
	MaxConnsPerHost int
	// DialTimeout, TLSHandshakeTimeout and ResponseHeaderTimeout bound the
	// phases of a request before its body; 0 = 10s, 10s, 30s. There is no
	// overall request timeout because bodies stream for as long as the
	// reader consumes them; cancel the context to abort one.
	DialTimeout           time.Duration
	TLSHandshakeTimeout   time.Duration
	ResponseHeaderTimeout time.Duration
	// ReadIdleTimeout fails a connection read that waits longer than this
	// for data (a stalled body), 0 = 60s. The time a consumer spends between
	// reads does not count.
	ReadIdleTimeout time.Duration

	// HTTPClient replaces the tuned client built from the fields above.
	HTTPClient *http.Client
}

const (
	defaultMaxRetries   = 4
	defaultMaxBackoff   = 5 * time.Second
	defaultBaseBackoff  = 100 * time.Millisecond
	defaultMaxResumes   = 2
	minIdleConnsPerHost = 256
)

// S3Store is a Store over AWS S3 or any S3-compatible server, using
// aws-sdk-go-v2. It is safe for concurrent use.
//
// Every ranged read is checked: the response must be a 206 whose
// Content-Range is exactly the requested range (a 200 that ignored Range,
// or any other range, is ErrBadResponse and its body is never used), and
// the body must have exactly the promised length. If-Match is sent and also
// checked against the response's ETag, so a server that ignores If-Match
// still cannot hand back a different version.
type S3Store struct {
	client       *s3.Client
	maxResumes   int
	listPageSize int32 // 0 = the server's default (1000); tests use small pages
}

// NewS3Store builds an S3Store. It loads the AWS configuration (which may
// read files and environment) but makes no request.
func NewS3Store(ctx context.Context, cfg S3Config) (*S3Store, error) {
	if err := CheckEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	if err := CheckRegion(cfg.Region); err != nil {
		return nil, err
	}
	var httpClient config.HTTPClient = newHTTPClient(cfg)
	if cfg.HTTPClient != nil {
		httpClient = cfg.HTTPClient
	}
	maxAttempts := 1 + defaultMaxRetries
	switch {
	case cfg.MaxRetries < 0:
		maxAttempts = 1
	case cfg.MaxRetries > 0:
		maxAttempts = 1 + cfg.MaxRetries
	}
	maxBackoff := cfg.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = defaultMaxBackoff
	}
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				o.MaxBackoff = maxBackoff
				o.Backoff = fullJitter{base: min(defaultBaseBackoff, maxBackoff), max: maxBackoff}
				// No client-wide retry token bucket: the attempts per
				// request are already bounded, and a bucket drained by one
				// burst of SlowDowns would fail unrelated reads at once.
				o.RateLimiter = ratelimit.None
				// An Expedited restore refused for want of capacity meets
				// the same exhausted capacity at once: not retried.
				o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
					var ae smithy.APIError
					if errors.As(err, &ae) && ae.ErrorCode() == codeExpeditedUnavailable {
						return aws.FalseTernary
					}
					return aws.UnknownTernary
				})}, o.Retryables...)
			})
		}),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(cfg.Profile))
	}
	switch {
	case cfg.Anonymous:
		opts = append(opts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	case cfg.AccessKeyID != "":
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("backend: loading AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Ranged GETs of objects uploaded with full-object checksums cannot
		// be validated, and some non-AWS servers reject the newer checksum
		// headers: only checksum when an operation requires it.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Deserialize.Add(errorBodyLimit(), middleware.After)
		})
	})
	maxResumes := defaultMaxResumes
	switch {
	case cfg.MaxResumes < 0:
		maxResumes = 0
	case cfg.MaxResumes > 0:
		maxResumes = cfg.MaxResumes
	}
	return &S3Store{client: client, maxResumes: maxResumes}, nil
}

// CheckEndpoint checks an S3Config.Endpoint: "" or an absolute http:// or
// https:// URL with a host and no query, fragment or user info. A bare
// "host:port" or a path is an error naming the value (the SDK would
// otherwise take "localhost:9000" as a URL of scheme "localhost" and fail
// only at the first request).
func CheckEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("backend: S3 endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("backend: S3 endpoint %q: want an http:// or https:// URL such as http://127.0.0.1:9000", endpoint)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("backend: S3 endpoint %q: no host", endpoint)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("backend: S3 endpoint %q: want scheme, host and optional port and path only (no user info, query or fragment)", endpoint)
	}
	return nil
}

// CheckRegion checks an S3Config.Region: "" or a name such as us-east-1;
// a URL or path given as the region (the endpoint in the wrong option) is
// an error naming the value.
func CheckRegion(region string) error {
	if strings.Contains(region, "://") || strings.ContainsAny(region, "/ \t\r\n") {
		return fmt.Errorf("backend: S3 region %q: want a region name such as us-east-1, not a URL or path", region)
	}
	return nil
}

// newHTTPClient builds the HTTP client wharf uses for S3: many parallel
// keep-alive HTTP/1.1 connections (S3 throughput scales with connections,
// not with streams on one connection), bounded connection-setup phases, a
// per-read idle timeout so a stalled body fails (and is resumed) instead of
// hanging, and no transparent gzip (a ranged body must be the stored
// bytes). It is an SDK BuildableClient so that the SDK can still apply
// AWS_CA_BUNDLE and similar settings to it.
func newHTTPClient(cfg S3Config) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = orDefault(cfg.DialTimeout, 10*time.Second)
			d.KeepAlive = 30 * time.Second
		}).
		WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns = 0 // no global cap; the per-host cap applies
			tr.MaxIdleConnsPerHost = max(minIdleConnsPerHost, cfg.MaxConnsPerHost)
			tr.MaxConnsPerHost = cfg.MaxConnsPerHost
			tr.IdleConnTimeout = 90 * time.Second
			tr.TLSHandshakeTimeout = orDefault(cfg.TLSHandshakeTimeout, 10*time.Second)
			tr.ResponseHeaderTimeout = orDefault(cfg.ResponseHeaderTimeout, 30*time.Second)
			tr.ExpectContinueTimeout = time.Second
			tr.DisableCompression = true
			tr.ForceAttemptHTTP2 = false
			tr.ReadBufferSize = 64 << 10
			tr.WriteBufferSize = 16 << 10
		}).
		WithReadTimeout(orDefault(cfg.ReadIdleTimeout, 60*time.Second))
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// fullJitter is the retry backoff: uniform in [0, min(max, base·2^(attempt-1))].
type fullJitter struct{ base, max time.Duration }

func (j fullJitter) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	ceil := j.max
	if attempt < 32 {
		if d := j.base << max(attempt-1, 0); d > 0 && d < ceil {
			ceil = d
		}
	}
	if ceil <= 0 {
		return 0, nil
	}
	return rand.N(ceil + 1), nil
}

// Client returns the underlying SDK client (for tools such as "wharf pack").
func (s *S3Store) Client() *s3.Client { return s.client }

// ReadRange implements Store.
func (s *S3Store) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, ObjectInfo, error) {
	if off < 0 || length <= 0 || length > math.MaxInt64-off {
		return nil, ObjectInfo{}, &Error{Op: "range", Bucket: bucket, Key: key,
			Err: fmt.Errorf("%w: offset %d length %d", ErrInvalidRange, off, length)}
	}
	body, info, err := s.rangeGet(ctx, "range", bucket, key, off, length, trimETag(ifMatch))
	if err != nil {
		return nil, info, err
	}
	return &resumingReader{s: s, ctx: ctx, op: "range", bucket: bucket, key: key,
		base: off, want: length, etag: info.ETag, cur: body, resumes: s.maxResumes}, info, nil
}

// rangeGet issues one ranged GET and checks the response before handing
// back its body (wrapped to yield exactly length bytes).
func (s *S3Store) rangeGet(ctx context.Context, op, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, ObjectInfo, error) {
	fail := func(err error) (io.ReadCloser, ObjectInfo, error) {
		return nil, ObjectInfo{}, &Error{Op: op, Bucket: bucket, Key: key, Err: err}
	}
	in := &s3.GetObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1)),
	}
	if ifMatch != "" {
		in.IfMatch = aws.String(quoteETag(ifMatch))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return fail(classifyS3Err(err))
	}
	info := ObjectInfo{Key: key, ETag: trimETag(aws.ToString(out.ETag)), LastModified: aws.ToTime(out.LastModified)}
	reject := func(err error) (io.ReadCloser, ObjectInfo, error) {
		out.Body.Close()
		return nil, info, &Error{Op: op, Bucket: bucket, Key: key, Err: err}
	}
	if status := rawStatus(out.ResultMetadata); status != http.StatusPartialContent {
		return reject(fmt.Errorf("%w: status %d for Range bytes=%d-%d (Content-Range %q): the store ignored the range",
			ErrBadResponse, status, off, off+length-1, aws.ToString(out.ContentRange)))
	}
	start, end, total, ok := parseContentRange(aws.ToString(out.ContentRange))
	if !ok {
		return reject(fmt.Errorf("%w: unusable Content-Range %q for bytes=%d-%d",
			ErrBadResponse, aws.ToString(out.ContentRange), off, off+length-1))
	}
	info.Size = total
	if start == off && end < off+length-1 && end == total-1 {
		// The store clamped the range to the object's end.
		return reject(fmt.Errorf("%w: bytes %d-%d of a %d-byte object", ErrInvalidRange, off, off+length-1, total))
	}
	if start != off || end != off+length-1 {
		return reject(fmt.Errorf("%w: Content-Range %q does not match requested bytes=%d-%d",
			ErrBadResponse, aws.ToString(out.ContentRange), off, off+length-1))
	}
	if out.ContentLength != nil && *out.ContentLength != length {
		return reject(fmt.Errorf("%w: Content-Length %d for a %d-byte range",
			ErrBadResponse, *out.ContentLength, length))
	}
	if ifMatch != "" && info.ETag != ifMatch {
		return reject(fmt.Errorf("%w: etag %q, expected %q", ErrChanged, info.ETag, ifMatch))
	}
	return newExactReader(out.Body, op, bucket, key, length, classifyS3Err), info, nil
}

// Get implements Store.
func (s *S3Store) Get(ctx context.Context, bucket, key string) (io.ReadCloser, ObjectInfo, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, ObjectInfo{}, &Error{Op: "get", Bucket: bucket, Key: key, Err: classifyS3Err(err)}
	}
	info := ObjectInfo{Key: key, ETag: trimETag(aws.ToString(out.ETag)), LastModified: aws.ToTime(out.LastModified)}
	reject := func(err error) (io.ReadCloser, ObjectInfo, error) {
		out.Body.Close()
		return nil, info, &Error{Op: "get", Bucket: bucket, Key: key, Err: err}
	}
	if status := rawStatus(out.ResultMetadata); status != http.StatusOK {
		return reject(fmt.Errorf("%w: status %d for a whole-object GET", ErrBadResponse, status))
	}
	if out.ContentLength == nil || *out.ContentLength < 0 {
		return reject(fmt.Errorf("%w: no Content-Length for a whole-object GET", ErrBadResponse))
	}
	info.Size = *out.ContentLength
	body := newExactReader(out.Body, "get", bucket, key, info.Size, classifyS3Err)
	return &resumingReader{s: s, ctx: ctx, op: "get", bucket: bucket, key: key,
		base: 0, want: info.Size, etag: info.ETag, cur: body, resumes: s.maxResumes}, info, nil
}

// Stat implements Store.
func (s *S3Store) Stat(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	in := &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	out, err := s.client.HeadObject(ctx, in)
	if _, skewed := forbiddenSkew(err); skewed && !answeredByCache(err) {
		// A HEAD refused for a skewed clock: the SDK, which retries a
		// GET's RequestTimeTooSkewed with its clock corrected from the
		// response's Date, cannot tell a HEAD's (no body, no code), but it
		// has corrected its clock (it trusts a Date without Age). Once
		// more.
		out, err = s.client.HeadObject(ctx, in)
	}
	if err != nil {
		return ObjectInfo{}, &Error{Op: "stat", Bucket: bucket, Key: key, Err: classifyS3Err(err)}
	}
	if out.ContentLength == nil || *out.ContentLength < 0 {
		return ObjectInfo{}, &Error{Op: "stat", Bucket: bucket, Key: key,
			Err: fmt.Errorf("%w: no Content-Length in HEAD response", ErrBadResponse)}
	}
	info := ObjectInfo{Key: key, Size: *out.ContentLength, ETag: trimETag(aws.ToString(out.ETag)),
		LastModified: aws.ToTime(out.LastModified), StorageClass: string(out.StorageClass),
		AccessTier: string(out.ArchiveStatus), RestoreKnown: true}
	if info.StorageClass == "" {
		info.StorageClass = ClassStandard // S3 sends x-amz-storage-class for every other class
	}
	if info.Restore, err = ParseRestoreHeader(aws.ToString(out.Restore)); err != nil {
		return ObjectInfo{}, &Error{Op: "stat", Bucket: bucket, Key: key, Err: err}
	}
	return info, nil
}

// List implements Store with ListObjectsV2 pagination (1000 keys a page).
// Each object's StorageClass comes from the listing ("" = STANDARD), and
// its restore state too: the listing asks for the optional RestoreStatus
// attribute (x-amz-optional-object-attributes), which S3 gives for objects
// that have a restore (RestoreKnown); a server that ignores the header
// gives none, so RestoreKnown stays false and callers ask with Stat.
func (s *S3Store) List(ctx context.Context, bucket, prefix string, fn func(ObjectInfo) error) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket),
		OptionalObjectAttributes: []types.OptionalObjectAttributes{types.OptionalObjectAttributesRestoreStatus}}
	if s.listPageSize > 0 {
		in.MaxKeys = aws.Int32(s.listPageSize)
	}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	p := s3.NewListObjectsV2Paginator(s.client, in)
	var prevToken, prevFirst string
	for pageNo := 0; p.HasMorePages(); pageNo++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			return &Error{Op: "list", Bucket: bucket, Key: prefix, Err: classifyS3Err(err)}
		}
		// A server that ignores continuation-token answers the same page
		// again and again: with the same next token, or with the same
		// first key. Either would loop forever.
		token, first := aws.ToString(page.NextContinuationToken), ""
		if len(page.Contents) > 0 {
			first = aws.ToString(page.Contents[0].Key)
		}
		if pageNo > 0 && (token != "" && token == prevToken || first != "" && first == prevFirst) {
			return &Error{Op: "list", Bucket: bucket, Key: prefix, Err: fmt.Errorf(
				"%w: page %d repeats the previous page (next continuation token %q, first key %q): the store ignores continuation-token",
				ErrBadResponse, pageNo+1, token, first)}
		}
		prevToken, prevFirst = token, first
		for _, o := range page.Contents {
			info := ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size),
				ETag: trimETag(aws.ToString(o.ETag)), LastModified: aws.ToTime(o.LastModified),
				StorageClass: string(o.StorageClass)}
			if info.StorageClass == "" {
				info.StorageClass = ClassStandard
			}
			if rs := o.RestoreStatus; rs != nil {
				info.RestoreKnown = true
				info.Restore = RestoreStatus{Requested: true, Ongoing: aws.ToBool(rs.IsRestoreInProgress)}
				if rs.RestoreExpiryDate != nil {
					info.Restore.Expiry = rs.RestoreExpiryDate.UTC()
				}
			}
			if err := fn(info); err != nil {
				return err
			}
		}
	}
	return nil
}

// Restore implements Restorer with RestoreObject: 202 is RestoreStarted,
// 200 RestoreAlreadyRestored, 409 RestoreAlreadyInProgress
// RestoreInProgress; 403 InvalidObjectState or ObjectAlreadyInActiveTierError
// (the object needs no restore) is ErrNotArchived, and a 400 (S3 refused
// the request's Days or tier) ErrInvalidRestore. The request is checked
// for a valid tier and Days range before it is sent (CheckRestore's class-
// independent rules); tier "" is sent as Standard.
func (s *S3Store) Restore(ctx context.Context, bucket, key string, req RestoreRequest) (RestoreResult, error) {
	fail := func(err error) (RestoreResult, error) {
		return 0, &Error{Op: "restore", Bucket: bucket, Key: key, Err: err}
	}
	if err := CheckRestore("", "", req); err != nil {
		return fail(err)
	}
	tier := req.Tier
	if tier == "" {
		tier = RetrievalStandard
	}
	rr := &types.RestoreRequest{GlacierJobParameters: &types.GlacierJobParameters{Tier: types.Tier(tier)}}
	if req.Days > 0 {
		rr.Days = aws.Int32(int32(req.Days))
	}
	out, err := s.client.RestoreObject(ctx, &s3.RestoreObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), RestoreRequest: rr})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "RestoreAlreadyInProgress" {
			return RestoreInProgress, nil
		}
		return fail(classifyS3ErrIn(err, s3RestoreCodes))
	}
	switch status := rawStatus(out.ResultMetadata); status {
	case http.StatusAccepted:
		return RestoreStarted, nil
	case http.StatusOK:
		return RestoreAlreadyRestored, nil
	default:
		return fail(fmt.Errorf("%w: status %d for RestoreObject", ErrBadResponse, status))
	}
}

// resumingReader yields the want bytes of bucket/key starting at base. When
// the current body fails mid-way with a transient error (connection reset,
// timeout, early end), it issues a new ranged GET for the remainder with
// If-Match on the ETag seen first, up to resumes times, so a flaky store
// still yields exact bytes of one object version.
type resumingReader struct {
	s       *S3Store
	ctx     context.Context
	op      string
	bucket  string
	key     string
	base    int64
	want    int64
	got     int64
	etag    string
	cur     io.ReadCloser
	resumes int
	err     error
}

func (r *resumingReader) Read(p []byte) (int, error) {
	for {
		if r.err != nil {
			return 0, r.err
		}
		n, err := r.cur.Read(p)
		r.got += int64(n)
		if err == nil || err == io.EOF {
			if err == io.EOF {
				r.err = io.EOF
			}
			return n, err
		}
		if n > 0 {
			// Hand over what arrived; the error comes back on the next
			// call (exactReader errors are sticky).
			return n, nil
		}
		if !r.resumable(err) {
			r.err = err
			return 0, err
		}
		r.resumes--
		r.cur.Close()
		body, _, rerr := r.s.rangeGet(r.ctx, r.op, r.bucket, r.key, r.base+r.got, r.want-r.got, r.etag)
		if rerr != nil {
			r.err = &Error{Op: r.op, Bucket: r.bucket, Key: r.key,
				Err: fmt.Errorf("resuming at byte %d after %v: %w", r.base+r.got, err, errors.Unwrap(rerr))}
			r.cur = io.NopCloser(strings.NewReader(""))
			return 0, r.err
		}
		r.cur = body
	}
}

// resumable: a transient mid-body failure, with resumes left and the
// caller still waiting.
func (r *resumingReader) resumable(err error) bool {
	if r.resumes <= 0 || r.got >= r.want || r.ctx.Err() != nil || r.etag == "" {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// Before want bytes, ErrBadResponse from exactReader means the body
	// ended early: a dropped connection, as far as the client can tell.
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBadResponse)
}

func (r *resumingReader) Close() error { return r.cur.Close() }

// rawStatus is the HTTP status of the response behind an SDK output.
func rawStatus(md middleware.Metadata) int {
	if resp, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && resp != nil {
		return resp.StatusCode
	}
	return 0
}

// parseContentRange parses "bytes START-END/TOTAL" strictly.
func parseContentRange(s string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	var ok1, ok2, ok3 bool
	start, ok1 = parseDigits(a)
	end, ok2 = parseDigits(b)
	total, ok3 = parseDigits(tot)
	if !ok1 || !ok2 || !ok3 || end < start || total <= end {
		return 0, 0, 0, false
	}
	return start, end, total, true
}

// parseDigits parses a non-empty decimal number of ASCII digits only (no
// sign, no spaces) that fits in an int64.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

func quoteETag(etag string) string { return `"` + etag + `"` }

// s3Code is what one S3 error code means to wharf: the sentinel it maps
// to, and whether the sentinel says it all when the server's message is
// empty or S3's default (quiet) or, for NoSuchBucket, the few words that
// replace it.
type s3Code struct {
	kind    error
	also    error  // a second sentinel (ErrNoSuchBucket), or nil
	quiet   string // the message S3 sends by default ("*" = any message)
	instead string // the text used when the message is quiet
	hint    string // appended to the text, whatever the message
}

// s3Codes is the one table of S3 error codes wharf tells apart, by the code
// the server sent (smithy's APIError.ErrorCode), never by the error's text.
// For a HEAD, which has no body, the SDK names the code after the status
// ("NotFound", "Forbidden", "PreconditionFailed", "MethodNotAllowed").
//
// A code not in the table is never taken for "not found" from its status
// alone: a 404 XAdminUserNotFound (versitygw's answer to an unknown access
// key) is ErrRefused and its text names the server's code and message. Only
// a 5xx, 429 or 408 with an unknown code is ErrUnavailable (retryable).
var s3Codes = map[string]s3Code{
	"NoSuchKey":    {kind: ErrNotFound, quiet: "*"},
	"NotFound":     {kind: ErrNotFound, quiet: "*"},
	"NoSuchBucket": {kind: ErrNotFound, also: ErrNoSuchBucket, quiet: "*", instead: "no such bucket"},

	"AccessDenied":          {kind: ErrAccessDenied, quiet: "Access Denied"},
	"Forbidden":             {kind: ErrAccessDenied, quiet: "Forbidden"},
	"InvalidAccessKeyId":    {kind: ErrAccessDenied},
	"SignatureDoesNotMatch": {kind: ErrAccessDenied},
	"AllAccessDisabled":     {kind: ErrAccessDenied},
	"ExpiredToken":          {kind: ErrAccessDenied},
	"InvalidToken":          {kind: ErrAccessDenied},
	"AccountProblem":        {kind: ErrAccessDenied},

	"PreconditionFailed": {kind: ErrChanged},
	"InvalidRange":       {kind: ErrInvalidRange},

	"MethodNotAllowed": {kind: ErrNotImplemented},
	"NotImplemented":   {kind: ErrNotImplemented},

	"SlowDown":            {kind: ErrUnavailable},
	"Throttling":          {kind: ErrUnavailable},
	"ThrottlingException": {kind: ErrUnavailable},
	"RequestTimeout":      {kind: ErrUnavailable},
	"InternalError":       {kind: ErrUnavailable},
	"ServiceUnavailable":  {kind: ErrUnavailable},

	// The signing time is too far from the store's clock, after the SDK
	// corrected what the response's Date header showed: a clock is wrong
	// (a permanent misconfiguration until fixed), so never retryable.
	"RequestTimeTooSkewed": {kind: ErrAccessDenied, also: ErrClockSkew, instead: "RequestTimeTooSkewed",
		hint: "this server's clock and the store's differ by more than the store allows (15 minutes on AWS): check both clocks (NTP)"},
}

// maxSignedSkew is how far S3 lets a request's signing time be from its
// own clock before it refuses it (RequestTimeTooSkewed).
const maxSignedSkew = 15 * time.Minute

// forbiddenSkew reports, for err a 403 response, how far the store's clock
// (the response's Date, plus its Age for an answer from a cache) was from
// the request's signing time (its X-Amz-Date), when that is more than S3
// allows: the store's RequestTimeTooSkewed when the answer is a HEAD's,
// whose 403 has no body to name the code (the SDK calls it "Forbidden").
func forbiddenSkew(err error) (time.Duration, bool) {
	var re *smithyhttp.ResponseError
	if err == nil || !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil ||
		re.HTTPStatusCode() != http.StatusForbidden || re.Response.Request == nil {
		return 0, false
	}
	served, err1 := http.ParseTime(re.Response.Header.Get("Date"))
	signed, err2 := time.Parse("20060102T150405Z", re.Response.Request.Header.Get("X-Amz-Date"))
	if err1 != nil || err2 != nil {
		return 0, false
	}
	if a := re.Response.Header.Get("Age"); a != "" {
		// From a cache (a CDN, a caching proxy): Date is when the origin
		// made the answer, Age how long it was kept since (RFC 9111), so
		// a 403 kept an hour has a Date an hour old from a right clock.
		age, err := strconv.ParseUint(a, 10, 31)
		if err != nil {
			return 0, false // an age we cannot read: no clock to judge by
		}
		served = served.Add(time.Duration(age) * time.Second)
	}
	d := served.Sub(signed)
	if d <= maxSignedSkew && d >= -maxSignedSkew {
		return 0, false
	}
	return d, true
}

// answeredByCache reports whether err's response carries an Age header:
// the SDK then does not correct its clock from its Date (a cache's), so a
// request signed again would carry the same skew.
func answeredByCache(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.Response != nil && re.Response.Response != nil && re.Response.Header.Get("Age") != ""
}

// s3RestoreCodes are the codes whose meaning differs for RestoreObject; the
// rest are read in s3Codes. RestoreAlreadyInProgress is no error (S3Store.
// Restore answers RestoreInProgress before asking this table).
var s3RestoreCodes = map[string]s3Code{
	"InvalidObjectState":             {kind: ErrNotArchived},
	"ObjectAlreadyInActiveTierError": {kind: ErrNotArchived},
	"InvalidArgument":                {kind: ErrInvalidRestore},
	"MalformedXML":                   {kind: ErrInvalidRestore},
	"InvalidRequest":                 {kind: ErrInvalidRestore},
	codeExpeditedUnavailable:         {kind: ErrUnavailable, also: ErrExpeditedUnavailable},
}

// codeExpeditedUnavailable is S3's 503 for an Expedited restore when its
// capacity is exhausted.
const codeExpeditedUnavailable = "GlacierExpeditedRetrievalNotAvailable"

// noCode is what the SDK names an error response it could not read a
// code from (an empty or non-XML body on a GET).
const noCode = "UnknownError"

// classifyS3Err maps an SDK or transport error to a sentinel, keeping the
// cause in the chain; see classifyS3ErrIn.
func classifyS3Err(err error) error { return classifyS3ErrIn(err, nil) }

// classifyS3ErrIn is the one mapping of S3 and transport errors to the
// sentinels (as minio's toAPIErrorCode is the one mapping the other way),
// with the codes of extra (an operation's own meanings) tried before
// s3Codes:
//
//  1. a context error is returned as is; a 403 without a code of its own
//     (a HEAD's) whose Date is more than 15 minutes from the request's
//     signing time is RequestTimeTooSkewed (forbiddenSkew);
//  2. an InvalidObjectState on a read is an *ArchivedError;
//  3. an S3 error code in extra or s3Codes is its sentinel;
//  4. an error response without a code (UnknownError) is judged by its
//     status (404 not found, 403/401 denied, 412 changed, 416 range,
//     405/501 not implemented, 5xx/429/408 unavailable, else bad response);
//  5. any other code is ErrRefused, or ErrUnavailable for 5xx/429/408;
//  6. a transport failure (no response, reset, refused, timeout, retries
//     given up) is ErrUnavailable, anything else ErrBadResponse.
//
// The text after the sentinel names the server's code and message (see
// s3Code.quiet), the network error, or the HTTP status, and the attempts
// when the SDK gave up retrying.
func classifyS3ErrIn(err error, extra map[string]s3Code) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	status := 0
	var re *smithyhttp.ResponseError
	// A transport failure also comes as a ResponseError, with status 0.
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	hasCode := errors.As(err, &ae) && ae.ErrorCode() != "" && ae.ErrorCode() != noCode
	if d, ok := forbiddenSkew(err); ok && (!hasCode || ae.ErrorCode() == "Forbidden") {
		// A HEAD's RequestTimeTooSkewed: told by the clocks, not a code.
		rule := s3Codes["RequestTimeTooSkewed"]
		text := fmt.Sprintf("RequestTimeTooSkewed: a 403 without a code, the store's Date %s from the request's signing time (%s)", d, rule.hint)
		return &causeError{kind: rule.kind, also: rule.also, text: withAttempts(err, text), cause: err}
	}
	if hasCode {
		code, msg := ae.ErrorCode(), ae.ErrorMessage()
		if code == "InvalidObjectState" && extra == nil {
			// A GET of an archived object: never a generic failure.
			ae := &ArchivedError{}
			var ios *types.InvalidObjectState
			if errors.As(err, &ios) {
				ae.StorageClass, ae.AccessTier = string(ios.StorageClass), string(ios.AccessTier)
			}
			return fmt.Errorf("%w (%w)", ae, err)
		}
		rule, known := extra[code]
		if !known {
			rule, known = s3Codes[code]
		}
		if !known {
			rule.kind = ErrRefused
			if transientStatus(status) {
				rule.kind = ErrUnavailable
			}
		}
		// The server's own words, bounded and escaped: every log line and
		// page that shows this error would carry them.
		text := PrintableText(code, maxServerCode)
		if msg != "" {
			text += ": " + PrintableText(msg, maxServerMessage)
		}
		switch {
		case known && (rule.quiet == "*" || msg == "" || msg == rule.quiet):
			text = rule.instead
		case !known && status > 0:
			text = fmt.Sprintf("%s (HTTP %d)", text, status)
		}
		if rule.hint != "" {
			text += " (" + rule.hint + ")"
		}
		if rule.kind == ErrInvalidRestore {
			// The reason is the client's to read (s3api answers it).
			return &causeError{kind: &InvalidRestoreError{Reason: withAttempts(err, text)}, cause: err}
		}
		return &causeError{kind: rule.kind, also: rule.also, text: withAttempts(err, text), cause: err}
	}
	if status > 0 {
		return &causeError{kind: statusKind(status), text: withAttempts(err, fmt.Sprintf("HTTP status %d", status)), cause: err}
	}
	text := err.Error()
	var ne *net.OpError
	if errors.As(err, &ne) {
		text = ne.Error()
	}
	text = PrintableText(text, maxServerMessage) // may quote a response body
	var qe ratelimit.QuotaExceededError
	var se *smithyhttp.RequestSendError
	var nerr net.Error
	var me *retry.MaxAttemptsError
	switch {
	case errors.As(err, &qe), errors.As(err, &se), errors.As(err, &nerr), errors.As(err, &me),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &causeError{kind: ErrUnavailable, text: withAttempts(err, text), cause: err}
	}
	return &causeError{kind: ErrBadResponse, text: withAttempts(err, text), cause: err}
}

// statusKind judges an error response that carries no S3 code by its
// status alone.
func statusKind(status int) error {
	switch {
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		return ErrAccessDenied
	case status == http.StatusPreconditionFailed:
		return ErrChanged
	case status == http.StatusRequestedRangeNotSatisfiable:
		return ErrInvalidRange
	case status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		return ErrNotImplemented
	case transientStatus(status):
		return ErrUnavailable
	}
	return ErrBadResponse
}

// transientStatus: a status after which the same request may succeed.
func transientStatus(status int) bool {
	return status >= 500 && status != http.StatusNotImplemented ||
		status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

// withAttempts prefixes text with the attempts made when the SDK gave up
// retrying.
func withAttempts(err error, text string) string {
	var me *retry.MaxAttemptsError
	if !errors.As(err, &me) {
		return text
	}
	if text == "" {
		return fmt.Sprintf("gave up after %d attempts", me.Attempt)
	}
	return fmt.Sprintf("gave up after %d attempts: %s", me.Attempt, text)
}
