package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// Putter is implemented by stores that can write an object once. wharf
// writes nothing on the read path; the only writer is the shared index
// cache (archiveview.StoreIndexCache), where replicas race to publish the
// same index and the first one wins.
//
// PutIfAbsent writes size bytes of body as bucket/key only if no object has
// that key, atomically: a reader sees the whole object or none. It reports
// whether it wrote the object; false with a nil error means another writer
// was first (S3: If-None-Match "*" answered 412 or 409).
type Putter interface {
	PutIfAbsent(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) (bool, error)
}

// PutIfAbsent implements Putter with a conditional PutObject.
func (s *S3Store) PutIfAbsent(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) (bool, error) {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: body,
		ContentLength: aws.Int64(size), IfNoneMatch: aws.String("*"),
	})
	if err == nil {
		return true, nil
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "PreconditionFailed", "ConditionalRequestConflict":
			return false, nil
		}
	}
	return false, &Error{Op: "put", Bucket: bucket, Key: key, Err: classifyS3Err(err)}
}

// PutIfAbsent implements Putter for a local directory: the bytes go to a
// temporary file beside the target, which is then hard-linked to the key
// (a link never replaces an existing file) and removed.
func (s *FileStore) PutIfAbsent(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) (bool, error) {
	fail := func(err error) (bool, error) { return false, &Error{Op: "put", Bucket: bucket, Key: key, Err: err} }
	root, err := s.putRoot(bucket, key)
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	if dir := path.Dir(key); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fail(classifyFSErr(err))
		}
	}
	tmp := tempName(key)
	if err := writeTemp(ctx, root, tmp, body, size); err != nil {
		return fail(err)
	}
	defer root.Remove(tmp) // after the link (or a failed rename)
	if err := root.Link(tmp, key); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return fail(classifyFSErr(err))
	}
	return true, nil
}

// putRoot checks key and opens bucket's directory for a conditional
// write (the caller closes it): the common prologue of FileStore's
// PutIfAbsent and PutIfMatch.
func (s *FileStore) putRoot(bucket, key string) (*os.Root, error) {
	if err := validFileKey(key); err != nil {
		return nil, err
	}
	return s.openBucket(bucket)
}

// tempName is the temporary file a conditional write fills beside key: a
// dot name in key's directory, unique per call.
func tempName(key string) string {
	return path.Join(path.Dir(key), "."+path.Base(key)+".tmp-"+strconv.FormatInt(time.Now().UnixNano(), 36))
}

// writeTemp writes exactly size bytes of body to the new file tmp in root
// and syncs it: the common first half of FileStore's PutIfAbsent (then a
// link) and PutIfMatch (then a rename). On error tmp is removed (when
// writeTemp created it); on success the caller removes it.
func writeTemp(ctx context.Context, root *os.Root, tmp string, body io.Reader, size int64) error {
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return classifyFSErr(err)
	}
	n, err := io.Copy(f, io.LimitReader(body, size+1))
	if err == nil && n != size {
		err = fmt.Errorf("body of %d bytes, %d promised", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// PutIfAbsent passes a write through when the store can write; over one
// that cannot, it fails with ErrNotImplemented (and CanPut is false).
func (i *instrumented) PutIfAbsent(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) (bool, error) {
	return PutThrough(ctx, i.inner, bucket, key, body, size)
}

// CanPut reports whether the wrapped store can write (AsPutter).
func (i *instrumented) CanPut() bool {
	_, ok := AsPutter(i.inner)
	return ok
}
