package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Probes of what a store implements, for the start-up log and `wharf
// doctor` (docs/operations.md, "S3 servers behind wharf"). Each sends one
// request that changes nothing and reports what the store's answer says.
// The conditional-PUT probe of a shared index cache is the index cache's
// own (archiveview).

// ProbeKey is the key prefix probes name; no object is ever written there.
const ProbeKey = ".wharf-probe/"

// ProbeRestore asks whether s implements RestoreObject, by restoring an
// object that does not exist in bucket: NoSuchKey (or any answer that
// judges the object: not archived, a bad request) means the operation
// exists; ErrNotImplemented (S3's 405 MethodNotAllowed or 501
// NotImplemented, or a store without the Restorer capability) means it
// does not. Other errors (the store unreachable, access denied) are
// returned as they are: they answer nothing about restores.
func ProbeRestore(ctx context.Context, s Store, bucket string) error {
	r, ok := AsRestorer(s)
	if !ok {
		return &Error{Op: "restore", Bucket: bucket, Key: ProbeKey, Err: fmt.Errorf("%w: the store has no restores", ErrNotImplemented)}
	}
	key := ProbeKey + "restore-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err := r.Restore(ctx, bucket, key, RestoreRequest{Days: 1})
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrNotArchived), errors.Is(err, ErrInvalidRestore):
		return nil
	}
	return err
}

// ProbeRead checks that bucket can be read with the store's credentials:
// a listing of one page under a prefix that holds nothing (so it costs
// one request). It returns the store's error, which names the server's
// code when the credentials are refused (ErrAccessDenied, ErrRefused).
func ProbeRead(ctx context.Context, s Store, bucket string) error {
	stop := errors.New("stop")
	err := s.List(ctx, bucket, ProbeKey, func(ObjectInfo) error { return stop })
	if errors.Is(err, stop) {
		return nil
	}
	return err
}

// ProbeRangeIfMatch checks what wharf's ETag pinning relies on, on one
// existing object of at least 2 bytes: a ranged GET answers exactly the
// range, and a GET with another ETag in If-Match is refused (412, or the
// ETag check of the store's own reader). It reads 2 bytes.
func ProbeRangeIfMatch(ctx context.Context, s Store, bucket, key string) error {
	rc, info, err := s.ReadRange(ctx, bucket, key, 0, 1, "")
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil {
		return err
	}
	if info.ETag == "" {
		return &Error{Op: "range", Bucket: bucket, Key: key, Err: fmt.Errorf("%w: no ETag in a ranged GET's answer (ETag pinning needs one)", ErrBadResponse)}
	}
	stale := "00000000000000000000000000000000"
	if info.ETag == stale {
		stale = "11111111111111111111111111111111"
	}
	rc, _, err = s.ReadRange(ctx, bucket, key, 0, 1, stale)
	if err == nil {
		rc.Close()
		return &Error{Op: "range", Bucket: bucket, Key: key, Err: fmt.Errorf("%w: a ranged GET with a stale If-Match was served", ErrBadResponse)}
	}
	if errors.Is(err, ErrChanged) {
		return nil
	}
	return err
}
