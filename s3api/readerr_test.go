package s3api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// TestReadErrorCode: the read path's sentinels (wrapped as the read path
// wraps them) are 500 InternalError; only a retryable backend failure is
// 503 SlowDown.
func TestReadErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   errorCode
		status int
	}{
		{archiveview.ErrChecksum, errInternalError, 500},
		{archiveview.ErrCorrupt, errInternalError, 500},
		{archiveview.ErrWrongMember, errInternalError, 500},
		{archiveview.ErrNotInChunk, errInternalError, 500},
		{archiveview.ErrBadRange, errInternalError, 500},
		{archiveview.ErrBrokenChain, errInternalError, 500},
		{archiveview.ErrInvalidTree, errInternalError, 500},
		{backend.ErrNotFound, errInternalError, 500}, // a missing chunk is the server's fault
		{backend.ErrChanged, errObjectChanged, 409},
		{backend.ErrNotImplemented, errNotImplemented, 501},
		{backend.ErrUnavailable, errSlowDown, 503},
		{fmt.Errorf("wrapped twice: %w", fmt.Errorf("x: %w", backend.ErrUnavailable)), errSlowDown, 503},
		{context.DeadlineExceeded, errInternalError, 500},
		{errors.New("anything else"), errInternalError, 500},
	} {
		err := fmt.Errorf("archive bkt: key k: chunk c: %w", tc.err)
		code := readErrorCode(err)
		e := &apiError{Code: code}
		if code != tc.code || e.status() != tc.status {
			t.Errorf("%v: %s %d, want %s %d", tc.err, code, e.status(), tc.code, tc.status)
		}
	}
	if errorTable[errNoSuchVersion].status != http.StatusNotFound || errorTable[errMethodNotAllowed].status != http.StatusMethodNotAllowed {
		t.Error("NoSuchVersion must be 404, MethodNotAllowed 405")
	}
}
