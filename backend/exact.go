package backend

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// exactReader enforces the Store contract on a body: it yields exactly want
// bytes and then io.EOF. A body that ends early yields an error wrapping
// ErrBadResponse; a body that has more bytes than promised yields an error
// wrapping ErrBadResponse instead of the final io.EOF (the surplus is never
// passed on). Read errors from the body are returned as *Error values
// classified by classify.
type exactReader struct {
	body     io.ReadCloser
	op       string
	bucket   string
	key      string
	want     int64 // bytes promised
	got      int64 // bytes passed on so far
	classify func(error) error
	err      error // sticky terminal error (including io.EOF)
}

func newExactReader(body io.ReadCloser, op, bucket, key string, want int64, classify func(error) error) *exactReader {
	return &exactReader{body: body, op: op, bucket: bucket, key: key, want: want, classify: classify}
}

func (r *exactReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.got == r.want {
		r.err = r.checkEnd()
		return 0, r.err
	}
	if rem := r.want - r.got; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := r.body.Read(p)
	r.got += int64(n)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF):
		if r.got < r.want {
			r.err = r.short(nil)
			return n, r.err
		}
		// Exactly complete and the body says so: done.
		r.err = io.EOF
		return n, nil
	default:
		r.err = r.fail(err)
		return n, r.err
	}
}

// checkEnd is called once want bytes have been passed on: it probes the body
// for a surplus byte.
func (r *exactReader) checkEnd() error {
	var one [1]byte
	// A few tries: a reader may return (0, nil) now and then.
	for range 64 {
		n, err := r.body.Read(one[:])
		if n > 0 {
			return &Error{Op: r.op, Bucket: r.bucket, Key: r.key,
				Err: fmt.Errorf("%w: body longer than the %d bytes promised", ErrBadResponse, r.want)}
		}
		if err != nil {
			// io.EOF is the expected end. Any other error after a
			// complete body does not make the bytes we passed on wrong.
			return io.EOF
		}
	}
	return io.EOF
}

func (r *exactReader) short(cause error) error {
	detail := fmt.Errorf("%w: body ended after %d of %d bytes", ErrBadResponse, r.got, r.want)
	if cause != nil {
		detail = fmt.Errorf("%w: body ended after %d of %d bytes: %w", ErrBadResponse, r.got, r.want, cause)
	}
	return &Error{Op: r.op, Bucket: r.bucket, Key: r.key, Err: detail}
}

func (r *exactReader) fail(err error) error {
	var be *Error
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return r.short(err)
	}
	return &Error{Op: r.op, Bucket: r.bucket, Key: r.key,
		Err: fmt.Errorf("%w (after %d of %d bytes)", r.classify(err), r.got, r.want)}
}

func (r *exactReader) Close() error { return r.body.Close() }

// trimETag removes surrounding quotes (and a weak-validator prefix) from an
// ETag so that tags compare quote-insensitively.
func trimETag(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "W/")
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	return s
}
