package backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TestFileStoreErrorText: a store error names the object once and says
// what happened in the filesystem's words, never the path again; the
// filesystem's error stays reachable.
func TestFileStoreErrorText(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "b", "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "b", "file"), []byte("x"), 0o644)
	os.Symlink(filepath.Join(dir, "outside"), filepath.Join(dir, "b", "esc"))
	os.WriteFile(filepath.Join(dir, "outside"), []byte("o"), 0o644)
	s := NewFileStore(dir)
	for _, c := range []struct {
		bucket, key string
		text        string
		kind        error
		detail      string
	}{
		{"b", "missing", "store get s3://b/missing: object not found", ErrNotFound, ""},
		{"b", "file/under", "store get s3://b/file/under: object not found: not a directory", ErrNotFound, "not a directory"},
		{"b", "d", "store get s3://b/d: object not found: not a regular file", ErrNotFound, "not a regular file"},
		{"nob", "k", "store get s3://nob/k: object not found: no bucket directory " + dir + "/nob", ErrNotFound, "no bucket directory " + dir + "/nob"},
		{"b", "esc", "store get s3://b/esc: access denied: path escapes from parent", ErrAccessDenied, "path escapes from parent"},
	} {
		_, _, err := s.Get(context.Background(), c.bucket, c.key)
		if err == nil || err.Error() != c.text {
			t.Errorf("%s/%s: %v, want %s", c.bucket, c.key, err, c.text)
			continue
		}
		// Only the missing bucket is ErrNoSuchBucket (issue 21: told
		// apart by the error, not by its text).
		if errors.Is(err, ErrNoSuchBucket) != (c.bucket == "nob") {
			t.Errorf("%s/%s: %v is ErrNoSuchBucket: %v", c.bucket, c.key, err, errors.Is(err, ErrNoSuchBucket))
		}
		f, ok := Describe(fmt.Errorf("wrapped: %w", err))
		if !ok || f.Kind != c.kind || f.Detail != c.detail || f.Bucket != c.bucket || f.Key != c.key || f.Op != "get" {
			t.Errorf("%s/%s: Describe = %+v", c.bucket, c.key, f)
		}
		if !errors.Is(err, c.kind) {
			t.Errorf("%s/%s: sentinel lost", c.bucket, c.key)
		}
	}
	_, _, err := s.Get(context.Background(), "b", "missing")
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the filesystem's error is not reachable: %#v", err)
	}
	if _, ok := Describe(errors.New("plain")); ok {
		t.Error("Describe found a store error in a plain error")
	}
	f, _ := Describe(&Error{Op: "range", Bucket: "b", Key: "k", Err: fmt.Errorf("%w (injected)", ErrUnavailable)})
	if f.Kind != ErrUnavailable || f.Detail != "(injected)" {
		t.Errorf("fault-style error: %+v", f)
	}
}

// TestS3ErrorText: the S3 SDK's errors become a sentinel and a few words.
func TestS3ErrorText(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	respErr := func(status int, err error) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}
	}
	for _, c := range []struct {
		name string
		err  error
		text string
		kind error
	}{
		{"no such key", respErr(404, &smithy.GenericAPIError{Code: "NoSuchKey", Message: "The specified key does not exist."}), "object not found", ErrNotFound},
		{"no such bucket", respErr(404, &smithy.GenericAPIError{Code: "NoSuchBucket", Message: "The specified bucket does not exist"}), "object not found: no such bucket", ErrNotFound},
		{"plain access denied", respErr(403, &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}), "access denied", ErrAccessDenied},
		{"signature", respErr(403, &smithy.GenericAPIError{Code: "SignatureDoesNotMatch", Message: "The request signature we calculated does not match."}),
			"access denied: SignatureDoesNotMatch: The request signature we calculated does not match.", ErrAccessDenied},
		{"bare 503", respErr(503, errors.New("http 503")), "store unavailable: HTTP status 503", ErrUnavailable},
		{"bare 400", respErr(400, errors.New("http 400")), "bad response from store: HTTP status 400", ErrBadResponse},
		{"unknown code 404 (versitygw's unknown access key)", respErr(404, &smithy.GenericAPIError{Code: "XAdminUserNotFound", Message: "The specified user does not exist"}),
			"the store refused the request: XAdminUserNotFound: The specified user does not exist (HTTP 404)", ErrRefused},
		{"unknown code 400", respErr(400, &smithy.GenericAPIError{Code: "XAmzContentSHA256Mismatch"}), "the store refused the request: XAmzContentSHA256Mismatch (HTTP 400)", ErrRefused},
		{"unknown code 503", respErr(503, &smithy.GenericAPIError{Code: "XBusy", Message: "busy"}), "store unavailable: XBusy: busy (HTTP 503)", ErrUnavailable},
		{"HEAD 404 (no body)", respErr(404, &smithy.GenericAPIError{Code: "NotFound", Message: "Not Found"}), "object not found", ErrNotFound},
		{"HEAD 403 (no body)", respErr(403, &smithy.GenericAPIError{Code: "Forbidden", Message: "Forbidden"}), "access denied", ErrAccessDenied},
		{"HEAD 405 (no body)", respErr(405, &smithy.GenericAPIError{Code: "MethodNotAllowed", Message: "Method Not Allowed"}),
			"the store does not implement this operation: MethodNotAllowed: Method Not Allowed", ErrNotImplemented},
		{"501 NotImplemented", respErr(501, &smithy.GenericAPIError{Code: "NotImplemented", Message: "A header you provided implies functionality that is not implemented"}),
			"the store does not implement this operation: NotImplemented: A header you provided implies functionality that is not implemented", ErrNotImplemented},
		{"invalid access key", respErr(403, &smithy.GenericAPIError{Code: "InvalidAccessKeyId", Message: "The AWS Access Key Id you provided does not exist in our records."}),
			"access denied: InvalidAccessKeyId: The AWS Access Key Id you provided does not exist in our records.", ErrAccessDenied},
		{"412 PreconditionFailed", respErr(412, &smithy.GenericAPIError{Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold"}),
			"object changed: PreconditionFailed: At least one of the pre-conditions you specified did not hold", ErrChanged},
		{"no code, 404", respErr(404, &smithy.GenericAPIError{Code: "UnknownError"}), "object not found: HTTP status 404", ErrNotFound},
		{"no code, 501", respErr(501, errors.New("http 501")), "the store does not implement this operation: HTTP status 501", ErrNotImplemented},
		{"no code, 405", respErr(405, errors.New("http 405")), "the store does not implement this operation: HTTP status 405", ErrNotImplemented},
		{"no code, 429", respErr(429, errors.New("http 429")), "store unavailable: HTTP status 429", ErrUnavailable},
		{"SlowDown given up", &retry.MaxAttemptsError{Attempt: 3, Err: respErr(503, &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."})},
			"store unavailable: gave up after 3 attempts: SlowDown: Please reduce your request rate.", ErrUnavailable},
		{"connection refused (status 0)", respErr(0, refused), "store unavailable: dial tcp: connection refused", ErrUnavailable},
		{"retries exhausted", &retry.MaxAttemptsError{Attempt: 5, Err: respErr(0, refused)}, "store unavailable: gave up after 5 attempts: dial tcp: connection refused", ErrUnavailable},
	} {
		got := classifyS3Err(c.err)
		if errors.Is(got, ErrNoSuchBucket) != (c.name == "no such bucket") {
			t.Errorf("%s: %v is ErrNoSuchBucket: %v", c.name, got, errors.Is(got, ErrNoSuchBucket))
		}
		if got.Error() != c.text || !errors.Is(got, c.kind) || !errors.Is(got, c.err) {
			t.Errorf("%s: %q (is %v: %v), want %q", c.name, got, c.kind, errors.Is(got, c.kind), c.text)
		}
	}
	// RestoreObject's own meanings come first; the rest is the common table.
	for _, c := range []struct {
		name string
		err  error
		kind error
	}{
		{"restore of a STANDARD object", respErr(403, &smithy.GenericAPIError{Code: "InvalidObjectState"}), ErrNotArchived},
		{"restore with bad days", respErr(400, &smithy.GenericAPIError{Code: "InvalidArgument"}), ErrInvalidRestore},
		{"SeaweedFS: restore 405", respErr(405, &smithy.GenericAPIError{Code: "MethodNotAllowed"}), ErrNotImplemented},
		{"restore 501", respErr(501, &smithy.GenericAPIError{Code: "NotImplemented"}), ErrNotImplemented},
		{"restore 404 unknown code", respErr(404, &smithy.GenericAPIError{Code: "XAdminUserNotFound"}), ErrRefused},
	} {
		got := classifyS3ErrIn(c.err, s3RestoreCodes)
		if !errors.Is(got, c.kind) || IsRetryable(got) {
			t.Errorf("restore %s: %v, want %v (not retryable)", c.name, got, c.kind)
		}
	}
	// A store's restore refusal carries S3's code and message as the
	// reason a client is shown (s3api answers it), structured.
	var ire *InvalidRestoreError
	got := classifyS3ErrIn(respErr(400, &smithy.GenericAPIError{Code: "InvalidArgument", Message: "Days must be positive"}), s3RestoreCodes)
	if !errors.As(got, &ire) || ire.Reason != "InvalidArgument: Days must be positive" || !errors.Is(got, ErrInvalidRestore) {
		t.Errorf("restore InvalidArgument: %v, reason %+v", got, ire)
	}
	// A GET's InvalidObjectState is an archived object, not ErrNotArchived.
	if got := classifyS3Err(respErr(403, &smithy.GenericAPIError{Code: "InvalidObjectState"})); !errors.Is(got, ErrArchived) {
		t.Errorf("GET InvalidObjectState: %v, want ErrArchived", got)
	}
	if err := classifyS3Err(context.Canceled); err != context.Canceled {
		t.Errorf("context error rewrapped: %v", err)
	}
}
