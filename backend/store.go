// Package backend is where wharf's real bytes live: the chunk objects,
// direct-upload objects and manifests of CargoShip archives.
//
// A Store is deliberately small. wharf is read-only, so it needs a ranged
// read, a whole-object read, a stat and (never on the read path: for
// discovery, the storage classes of an upload's chunks and a dataset's
// version history) a listing. Implementations:
//
//   - FileStore: a local directory laid out as DIR/<bucket>/<key> (file://DIR).
//   - S3Store: aws-sdk-go-v2 against AWS S3 or any S3-compatible server (s3://).
//   - Instrument: a wrapper that feeds the wharf_backend_* Prometheus series.
//
// Objects may be archived (S3 Glacier classes): ObjectInfo reports the
// storage class and restore state, a read refused because the object is
// archived fails with ErrArchived (an *ArchivedError naming the class), and
// Restorer, a separate small interface, starts restores (archive.go).
//
// The only writes through this package are the shared index cache's (its
// objects and its start-up probe): Putter (PutIfAbsent, put.go) and
// MatchPutter (PutIfMatch, putmatch.go), conditional PUTs that FileStore
// and S3Store implement beside Store. Archive objects are never written
// here ("wharf pack" writes them with package cargopack).
//
// OpenStore picks FileStore or S3Store from a --store URL, and
// ParseObjectURL splits a manifest URL into bucket and key. The
// fault-injecting wrappers used by tests and "wharf bench" live in
// backend/faults, outside the serving path.
//
// Every method takes a context.Context; cancelling it aborts the backend
// request. Errors are *Error values that name the bucket and key and wrap
// one of the sentinel errors below, so callers branch with errors.Is and
// ask IsRetryable whether trying again could help.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Sentinel errors wrapped by *Error.
var (
	// ErrNotFound: the bucket or key does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrNoSuchBucket is wrapped beside ErrNotFound when what is missing
	// is the bucket itself (S3's NoSuchBucket, FileStore's missing bucket
	// directory), so a caller tells the two apart without reading text.
	// It adds nothing to the error's text.
	ErrNoSuchBucket = errors.New("no such bucket")
	// ErrAccessDenied: the store refused the credentials.
	ErrAccessDenied = errors.New("access denied")
	// ErrBadResponse: the store answered in a way that cannot be used, for
	// example a 200 or a wrong Content-Range for a ranged request, or a body
	// shorter or longer than promised. Never silently used.
	ErrBadResponse = errors.New("bad response from store")
	// ErrChanged: the object's ETag differs from the one expected (If-Match failed).
	ErrChanged = errors.New("object changed")
	// ErrInvalidRange: the requested range lies outside the object.
	ErrInvalidRange = errors.New("range outside object")
	// ErrUnavailable: a transient failure (5xx, SlowDown, timeout, reset).
	ErrUnavailable = errors.New("store unavailable")
	// ErrNotImplemented: the store does not implement the operation (S3's
	// 501 NotImplemented or 405 MethodNotAllowed, e.g. SeaweedFS's answer
	// to RestoreObject, or a wrapper over a store without the capability).
	// Trying again cannot help.
	ErrNotImplemented = errors.New("the store does not implement this operation")
	// ErrRefused: the store refused the request with an error code wharf
	// does not know (e.g. versitygw's 404 XAdminUserNotFound for an unknown
	// access key); the detail names the server's code, message and status.
	// It is never taken for "not found" from the status alone.
	ErrRefused = errors.New("the store refused the request")
	// ErrClockSkew is wrapped beside ErrAccessDenied when the store refused
	// a request because its signing time was too far from the store's
	// clock (S3's 403 RequestTimeTooSkewed, after the SDK's own clock-skew
	// correction): this server's clock or the store's is wrong, and every
	// request fails alike until one is fixed, so it is not retryable. It
	// adds nothing to the error's text (the text names the cause).
	ErrClockSkew = errors.New("request time too skewed")
)

// ObjectInfo describes one stored object.
//
// StorageClass, AccessTier and Restore say whether the object can be read
// (archive.go). A store without storage classes (FileStore) leaves them
// empty, which means STANDARD. A Stat of an S3 object always reports the
// restore state (RestoreKnown); a listing reports it only for objects that
// have a restore, so there RestoreKnown is false for the others.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string // without quotes
	LastModified time.Time

	StorageClass string        // S3's class name; "" = STANDARD (or no classes)
	AccessTier   string        // Intelligent-Tiering archive tier (x-amz-archive-status), else ""
	Restore      RestoreStatus // the restore state, when RestoreKnown
	RestoreKnown bool          // the store reported the restore state
}

// Store is a read-only view of an object store.
//
// ReadRange returns a stream of exactly length bytes of bucket/key starting
// at off. The returned reader yields an error wrapping ErrBadResponse (never
// io.EOF) if the body ends early, and never yields more than length bytes.
// length must be > 0. The returned ObjectInfo carries the object's ETag and
// total size as the store reported them with this response. If ifMatch is
// non-empty the read fails with ErrChanged when the object's ETag differs.
//
// Get returns the whole object. Stat returns its metadata without the body.
// List calls fn for every object whose key starts with prefix, in key
// order; it is used for discovery only.
type Store interface {
	ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, ObjectInfo, error)
	Get(ctx context.Context, bucket, key string) (io.ReadCloser, ObjectInfo, error)
	Stat(ctx context.Context, bucket, key string) (ObjectInfo, error)
	List(ctx context.Context, bucket, prefix string, fn func(ObjectInfo) error) error
}

// Error is the error type every Store returns.
type Error struct {
	Op     string // "get", "range", "stat", "list", "restore"
	Bucket string
	Key    string
	Err    error // wraps one of the sentinel errors, possibly with detail
}

// Error reads "store OP s3://BUCKET/KEY: WHAT[: DETAIL]": the object once
// (the causes in Err never repeat its name), then what happened.
func (e *Error) Error() string {
	return fmt.Sprintf("store %s s3://%s/%s: %v", e.Op, e.Bucket, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// sentinels, in the order Describe tries them.
var sentinels = []error{ErrNotFound, ErrAccessDenied, ErrChanged, ErrInvalidRange, ErrUnavailable, ErrNotImplemented, ErrRefused, ErrBadResponse}

// Failure is a store failure told without naming the object twice:
// Bucket and Key name it, Kind is the sentinel the error wraps (nil for a
// context error or an error of another kind), and Detail is the store's
// own words after the sentinel ("" when the sentinel says it all).
type Failure struct {
	Op, Bucket, Key string
	Kind            error
	Detail          string
}

// Describe finds the *Error in err's chain and returns it as a Failure,
// for callers that name the object themselves and want to say each fact
// once; ok is false when err holds no *Error.
func Describe(err error) (f Failure, ok bool) {
	var e *Error
	if !errors.As(err, &e) {
		return Failure{}, false
	}
	f = Failure{Op: e.Op, Bucket: e.Bucket, Key: e.Key, Detail: e.Err.Error()}
	for _, s := range sentinels {
		if errors.Is(e.Err, s) {
			f.Kind = s
			if rest, ok := strings.CutPrefix(f.Detail, s.Error()); ok {
				f.Detail = strings.TrimSpace(strings.TrimPrefix(rest, ": "))
			}
			break
		}
	}
	return f, true
}

// causeError is a sentinel with the store's cause: it reads "sentinel" or
// "sentinel: text", where text is the cause in a few words without the
// object's name (the Error around it names the object), and unwraps to
// both the sentinel and the full cause (errors.As reaches the SDK's and
// the filesystem's error types).
type causeError struct {
	kind  error
	also  error // a second sentinel the error is (ErrNoSuchBucket), not in the text; may be nil
	text  string
	cause error
}

func (e *causeError) Error() string {
	if e.text == "" {
		return e.kind.Error()
	}
	return e.kind.Error() + ": " + e.text
}

func (e *causeError) Unwrap() []error {
	if e.also != nil {
		return []error{e.kind, e.also, e.cause}
	}
	return []error{e.kind, e.cause}
}

// IsRetryable reports whether trying the same request again could succeed.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrUnavailable)
}
