package backend

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// MatchPutter is implemented by stores that can replace an object only if
// it is still the one the caller looked at. The only user is the shared
// index cache (archiveview.StoreIndexCache), which replaces a damaged or
// unauthenticated index object without overwriting a good one another
// replica wrote in the meantime.
//
// PutIfMatch writes size bytes of body as bucket/key only if an object of
// that key exists and its ETag is etag (quoted or not), atomically: a
// reader sees the old object or the whole new one. It reports whether it
// wrote; false with a nil error means the object changed or vanished since
// its ETag was read (S3: If-Match answered 412, 409 or 404).
//
// S3Store sends If-Match on the PutObject (the store must enforce it:
// cmd/wharf probes this at start). FileStore, a local directory with no
// compare-and-swap, checks the ETag and then renames: a second writer in
// the instant between the two can be overwritten; it serves tests and a
// single host.
type MatchPutter interface {
	PutIfMatch(ctx context.Context, bucket, key, etag string, body io.ReadSeeker, size int64) (bool, error)
}

// PutIfMatch implements MatchPutter with a conditional PutObject.
func (s *S3Store) PutIfMatch(ctx context.Context, bucket, key, etag string, body io.ReadSeeker, size int64) (bool, error) {
	if trimETag(etag) == "" {
		return false, &Error{Op: "put", Bucket: bucket, Key: key, Err: errors.New("PutIfMatch without an ETag")}
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: body,
		ContentLength: aws.Int64(size), IfMatch: aws.String(quoteETag(trimETag(etag))),
	})
	if err == nil {
		return true, nil
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "NotFound":
			return false, nil
		}
	}
	return false, &Error{Op: "put", Bucket: bucket, Key: key, Err: classifyS3Err(err)}
}

// PutIfMatch implements MatchPutter for a local directory: the bytes go to
// a temporary file beside the target, which replaces the target by rename
// if the target's ETag (FileStore's mtime and size) is still etag.
func (s *FileStore) PutIfMatch(ctx context.Context, bucket, key, etag string, body io.ReadSeeker, size int64) (bool, error) {
	fail := func(err error) (bool, error) { return false, &Error{Op: "put", Bucket: bucket, Key: key, Err: err} }
	root, err := s.putRoot(bucket, key)
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	if _, err := root.Stat(key); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	tmp := tempName(key)
	if err := writeTemp(ctx, root, tmp, body, size); err != nil {
		return fail(err)
	}
	defer root.Remove(tmp) // after the link (or a failed rename)
	fi, err := root.Stat(key)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return fail(classifyFSErr(err))
	}
	if !fi.Mode().IsRegular() || fileETag(fi) != trimETag(etag) {
		return false, nil
	}
	if err := root.Rename(tmp, key); err != nil {
		return fail(classifyFSErr(err))
	}
	return true, nil
}

// PutIfMatch passes a conditional replacement through when the store can
// make one; over one that cannot, it fails with ErrNotImplemented (and
// CanPutIfMatch is false).
func (i *instrumented) PutIfMatch(ctx context.Context, bucket, key, etag string, body io.ReadSeeker, size int64) (bool, error) {
	return PutIfMatchThrough(ctx, i.inner, bucket, key, etag, body, size)
}

// CanPutIfMatch reports whether the wrapped store can replace objects
// conditionally (AsMatchPutter).
func (i *instrumented) CanPutIfMatch() bool {
	_, ok := AsMatchPutter(i.inner)
	return ok
}
