package cargopack

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Sink receives the objects of an upload. Put must consume exactly size
// bytes from r and store them as bucket/key; a Put that fails must not leave
// a partial object under key.
type Sink interface {
	Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error
}

// DirSink stores objects as files DIR/<bucket>/<key>, the layout
// backend.FileStore (file://DIR) reads. Keys with "." or ".." segments are
// refused. Each object is written to a temporary file and renamed into
// place, so a failed Put leaves nothing under key.
func DirSink(dir string) Sink { return dirSink{dir: dir} }

type dirSink struct{ dir string }

func (d dirSink) Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cargopack: put %s/%s: %w", bucket, key, err)
	}
	if bucket == "" || strings.ContainsAny(bucket, `/\`) || bucket == "." || bucket == ".." {
		return fmt.Errorf("cargopack: put %s/%s: invalid bucket name", bucket, key)
	}
	for _, seg := range strings.Split(strings.TrimPrefix(key, "/"), "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("cargopack: put %s/%s: key has a %q segment", bucket, key, seg)
		}
	}
	if key == "" || strings.HasSuffix(key, "/") {
		return fmt.Errorf("cargopack: put %s/%s: empty object name", bucket, key)
	}
	dst := filepath.Join(d.dir, bucket, filepath.FromSlash(path.Clean("/"+key)))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("cargopack: put %s/%s: %w", bucket, key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".cargopack-put-*")
	if err != nil {
		return fmt.Errorf("cargopack: put %s/%s: %w", bucket, key, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, &ctxReader{ctx: ctx, r: r})
	if err != nil {
		return fmt.Errorf("cargopack: put %s/%s: %w", bucket, key, err)
	}
	if n != size {
		return fmt.Errorf("cargopack: put %s/%s: got %d bytes, want %d", bucket, key, n, size)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("cargopack: put %s/%s: %w", bucket, key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cargopack: put %s/%s: %w", bucket, key, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("cargopack: put %s/%s: %w", bucket, key, err)
	}
	ok = true
	return nil
}

// ctxReader stops a copy when its context is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// S3Sink stores objects with aws-sdk-go-v2 PutObject. The body is sent with
// a known Content-Length; a reader that cannot seek is first spooled to a
// temporary file (never to memory) so the SDK can sign and retry it.
// Manifest objects ending in ".json.gz" are stored with
// Content-Encoding: gzip, as CargoShip's UploadToS3 does.
func S3Sink(client *s3.Client) Sink { return s3Sink{c: client} }

type s3Sink struct{ c *s3.Client }

func (s s3Sink) Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error {
	body, ok := r.(io.ReadSeeker)
	if !ok {
		tmp, err := os.CreateTemp("", "cargopack-s3put-*")
		if err != nil {
			return fmt.Errorf("cargopack: put s3://%s/%s: %w", bucket, key, err)
		}
		defer func() {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}()
		n, err := io.Copy(tmp, &ctxReader{ctx: ctx, r: r})
		if err != nil {
			return fmt.Errorf("cargopack: put s3://%s/%s: spool: %w", bucket, key, err)
		}
		if n != size {
			return fmt.Errorf("cargopack: put s3://%s/%s: got %d bytes, want %d", bucket, key, n, size)
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("cargopack: put s3://%s/%s: %w", bucket, key, err)
		}
		body = tmp
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          body,
		ContentLength: aws.Int64(size),
	}
	if strings.HasSuffix(key, "manifest.json.gz") {
		in.ContentEncoding = aws.String("gzip")
		in.ContentType = aws.String("application/json")
	} else if strings.HasSuffix(key, "manifest.json") {
		in.ContentType = aws.String("application/json")
	}
	if _, err := s.c.PutObject(ctx, in); err != nil {
		return fmt.Errorf("cargopack: put s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}
