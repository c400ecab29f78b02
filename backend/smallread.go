package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrTooBig: a small-object read (ReadSmall) found an object larger than
// its cap. The read transferred at most the cap.
var ErrTooBig = errors.New("object larger than allowed")

// SmallReader is the optional capability behind ReadSmall: read a small
// object whole with one bounded, conditional request.
//
// ReadSmall asks for bytes 0..limit-1 of bucket/key in one ranged GET
// (Range: bytes=0-(limit-1)), with If-None-Match: ifNoneMatch when that is
// not empty. It returns:
//   - notModified true and no data when the object's ETag equals
//     ifNoneMatch (a 304: no body transferred);
//   - the whole object (at most limit bytes) and its ObjectInfo (ETag, Size)
//     otherwise;
//   - an error wrapping ErrTooBig, after transferring at most limit bytes,
//     when the object is larger than limit.
//
// An empty object is returned as empty data. limit must be > 0.
type SmallReader interface {
	ReadSmall(ctx context.Context, bucket, key string, limit int64, ifNoneMatch string) (data []byte, info ObjectInfo, notModified bool, err error)
}

// ReadSmall reads bucket/key as SmallReader.ReadSmall does, with s's own
// implementation when it has one (S3Store, FileStore, Instrument's
// wrapper); otherwise with a Stat (the ETag comparison) and, when the
// object changed and is at most limit bytes, a ranged read of exactly its
// size bound to that ETag: two requests instead of one, the same bounds.
func ReadSmall(ctx context.Context, s Store, bucket, key string, limit int64, ifNoneMatch string) ([]byte, ObjectInfo, bool, error) {
	if limit <= 0 {
		return nil, ObjectInfo{}, false, &Error{Op: "get", Bucket: bucket, Key: key,
			Err: fmt.Errorf("%w: small read limit %d", ErrInvalidRange, limit)}
	}
	if sr, ok := s.(SmallReader); ok {
		return sr.ReadSmall(ctx, bucket, key, limit, ifNoneMatch)
	}
	return readSmallStat(ctx, s, bucket, key, limit, ifNoneMatch)
}

// readSmallStat is ReadSmall for a store without SmallReader: a Stat, then
// a ranged read of exactly the object's size bound to its ETag.
func readSmallStat(ctx context.Context, s Store, bucket, key string, limit int64, ifNoneMatch string) ([]byte, ObjectInfo, bool, error) {
	info, err := s.Stat(ctx, bucket, key)
	if err != nil {
		return nil, info, false, err
	}
	if ifNoneMatch != "" && trimETag(ifNoneMatch) == info.ETag {
		return nil, info, true, nil
	}
	if info.Size > limit {
		return nil, info, false, tooBig(bucket, key, info.Size, limit)
	}
	if info.Size == 0 {
		return []byte{}, info, false, nil
	}
	rc, got, err := s.ReadRange(ctx, bucket, key, 0, info.Size, info.ETag)
	if err != nil {
		return nil, got, false, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, got, false, err
	}
	got.Size = info.Size
	return data, got, false, nil
}

func tooBig(bucket, key string, size, limit int64) error {
	return &Error{Op: "get", Bucket: bucket, Key: key,
		Err: fmt.Errorf("%w: %d bytes, at most %d allowed", ErrTooBig, size, limit)}
}

// ReadSmall implements SmallReader with one GET: Range bytes=0-(limit-1)
// and If-None-Match. A store that ignores the range (200) is read no
// further than limit bytes and refused when it announces more.
func (s *S3Store) ReadSmall(ctx context.Context, bucket, key string, limit int64, ifNoneMatch string) ([]byte, ObjectInfo, bool, error) {
	fail := func(info ObjectInfo, err error) ([]byte, ObjectInfo, bool, error) {
		return nil, info, false, &Error{Op: "get", Bucket: bucket, Key: key, Err: err}
	}
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Range: aws.String(fmt.Sprintf("bytes=0-%d", limit-1))}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(quoteETag(trimETag(ifNoneMatch)))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotModified {
			return nil, ObjectInfo{Key: key, ETag: trimETag(ifNoneMatch)}, true, nil
		}
		if errors.Is(classifyS3Err(err), ErrInvalidRange) {
			// Range 0-N of an empty object is unsatisfiable: the object is
			// empty (a Stat confirms it, with its ETag).
			info, serr := s.Stat(ctx, bucket, key)
			if serr == nil && info.Size == 0 {
				return []byte{}, info, false, nil
			}
		}
		return fail(ObjectInfo{}, classifyS3Err(err))
	}
	defer out.Body.Close()
	info := ObjectInfo{Key: key, ETag: trimETag(aws.ToString(out.ETag)), LastModified: aws.ToTime(out.LastModified)}
	switch status := rawStatus(out.ResultMetadata); status {
	case http.StatusPartialContent:
		start, end, total, ok := parseContentRange(aws.ToString(out.ContentRange))
		if !ok || start != 0 || end >= limit || end != min(total, limit)-1 {
			return fail(info, fmt.Errorf("%w: Content-Range %q for bytes=0-%d", ErrBadResponse, aws.ToString(out.ContentRange), limit-1))
		}
		info.Size = total
	case http.StatusOK:
		if out.ContentLength == nil || *out.ContentLength < 0 {
			return fail(info, fmt.Errorf("%w: no Content-Length for a ranged GET answered whole", ErrBadResponse))
		}
		info.Size = *out.ContentLength
	default:
		return fail(info, fmt.Errorf("%w: status %d for a ranged GET", ErrBadResponse, status))
	}
	if info.Size > limit {
		return nil, info, false, tooBig(bucket, key, info.Size, limit)
	}
	data, err := readAtMost(out.Body, info.Size)
	if err != nil {
		return fail(info, err)
	}
	return data, info, false, nil
}

// readAtMost reads exactly n bytes of r (n is at most the caller's limit)
// and refuses a body that is shorter or longer.
func readAtMost(r io.Reader, n int64) ([]byte, error) {
	var buf bytes.Buffer
	got, err := io.Copy(&buf, io.LimitReader(r, n+1))
	if err != nil {
		return nil, classifyS3Err(err)
	}
	if got != n {
		return nil, fmt.Errorf("%w: body of %d bytes, %d announced", ErrBadResponse, got, n)
	}
	return buf.Bytes(), nil
}

// ReadSmall implements SmallReader: a stat, then the file when it changed
// and is at most limit bytes.
func (s *FileStore) ReadSmall(ctx context.Context, bucket, key string, limit int64, ifNoneMatch string) ([]byte, ObjectInfo, bool, error) {
	f, fi, err := s.open(ctx, "get", bucket, key)
	if err != nil {
		return nil, ObjectInfo{}, false, err
	}
	defer f.Close()
	info := fileInfo(key, fi)
	if ifNoneMatch != "" && trimETag(ifNoneMatch) == info.ETag {
		return nil, info, true, nil
	}
	if info.Size > limit {
		return nil, info, false, tooBig(bucket, key, info.Size, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, info, false, &Error{Op: "get", Bucket: bucket, Key: key, Err: classifyFSErr(err)}
	}
	if int64(len(data)) != info.Size {
		return nil, info, false, &Error{Op: "get", Bucket: bucket, Key: key,
			Err: fmt.Errorf("%w: read %d bytes of a %d-byte file", ErrBadResponse, len(data), info.Size)}
	}
	return data, info, false, nil
}

// ReadSmall implements SmallReader over the wrapped store, counted as one
// GET (the fallback's Stat and ranged read count as they go).
func (i *instrumented) ReadSmall(ctx context.Context, bucket, key string, limit int64, ifNoneMatch string) ([]byte, ObjectInfo, bool, error) {
	if _, ok := i.inner.(SmallReader); !ok || limit <= 0 {
		if limit <= 0 {
			return ReadSmall(ctx, i.inner, bucket, key, limit, ifNoneMatch) // the error
		}
		return readSmallStat(ctx, i, bucket, key, limit, ifNoneMatch) // counted as a HEAD and a GET
	}
	i.m.get.Inc()
	data, info, nm, err := ReadSmall(ctx, i.inner, bucket, key, limit, ifNoneMatch)
	i.m.bytes.Add(float64(len(data)))
	return data, info, nm, err
}
